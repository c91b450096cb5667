#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{FinishReason, Reasoning, Usage};
use crate::provider::anthropic::testutil::{
    arb_json, assemble, decode_chunks, decode_sse, feed, fixture, sse_events,
};
use crate::provider::StreamChunk;
use crate::tool::ToolSpec;
use proptest::prelude::*;
use std::sync::Arc;

mod schema_tests;

fn format() -> Gemini {
    Gemini::new("gemini-2.5-flash")
}

fn fx(name: &str) -> String {
    fixture("gemini", name)
}

fn decode(name: &str) -> ModelResponse {
    decode_sse(format().stream_decoder(), &fx(name)).unwrap()
}

/// The body as sent (canonical JSON), parsed.
fn body(request: &ModelRequest) -> Value {
    serde_json::from_slice(&format().encode_json(request, false).unwrap().body).unwrap()
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest { messages: Arc::new(messages), ..ModelRequest::default() }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather of a city.".into(),
        parameters: json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "location": {"type": "string"},
                "unit": {"type": ["string", "null"], "enum": ["celsius", "fahrenheit", null]}
            },
            "required": ["location"],
            "additionalProperties": false
        }),
    }
}

fn call(id: &str, name: &str, arguments: &str) -> Part {
    Part::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() })
}

fn signed(text: &str, signature: &str) -> Part {
    Part::Reasoning(Reasoning {
        text: text.into(),
        opaque: Some(json!({"thoughtSignature": signature})),
    })
}

// ---------------------------------------------------------------- encoding

#[test]
fn the_format_speaks_generate_content() {
    let format = Gemini::new("models/gemini-2.5-pro");
    assert_eq!(format.model(), "gemini-2.5-pro");
    assert_eq!(format.name(), "gemini");
    assert_eq!(format.auth(), AuthStyle::Header("x-goog-api-key"));
    let wire = format.encode(&request(vec![Message::user("hi")]), true).unwrap();
    assert_eq!(wire.path, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse");
    assert!(wire.headers.is_empty());
    let wire = format.encode(&request(vec![Message::user("hi")]), false).unwrap();
    assert_eq!(wire.path, "/v1beta/models/gemini-2.5-pro:generateContent");
    assert_eq!(wire.body, json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}));
}

#[test]
fn every_part_kind_is_encoded() {
    let history = vec![
        Message::system("Answer in French."),
        Message::user("What's the weather in Paris? Look at these."),
        Message {
            role: Role::User,
            content: vec![
                Part::Image {
                    source: MediaSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgo=".into(),
                    },
                },
                Part::Image {
                    source: MediaSource::Url {
                        url: "https://example.com/sky.JPG?size=large".into(),
                    },
                },
                Part::Image {
                    source: MediaSource::Url { url: "https://example.com/render".into() },
                },
                Part::File {
                    source: MediaSource::Url { url: "https://example.com/forecast.pdf".into() },
                    filename: Some("forecast.pdf".into()),
                },
                Part::text(""),
            ],
        },
        Message::developer("Prefer metric units."),
        Message {
            role: Role::Assistant,
            content: vec![
                signed("I should look up the weather.", "c2lnLXRob3VnaHQ="),
                Part::Reasoning(Reasoning { text: "unsigned thought".into(), opaque: None }),
                Part::Reasoning(Reasoning {
                    text: "anthropic thinking".into(),
                    opaque: Some(json!({"type": "thinking", "signature": "x"})),
                }),
                Part::text("Checking."),
                signed("", "c2lnLWNhbGw="),
                call("gemini_resp1_0", "get_weather", r#"{"location":"Paris","unit":"celsius"}"#),
                call("fc-issued-7", "get_time", ""),
                call("gemini_resp1_2", "get_weather", "not json"),
                signed("", "c2lnLWVuZA=="),
            ],
        },
        Message::tool_results([
            ToolResult::ok("gemini_resp1_0", "18°C, sunny"),
            ToolResult::ok("fc-issued-7", json!({"time": "14:05"})),
            ToolResult::error("gemini_resp1_2", "the arguments are not valid JSON"),
        ]),
        Message::user("And tomorrow?"),
    ];
    let request = ModelRequest {
        instructions: Some("You are a weather bot.".into()),
        messages: Arc::new(history),
        tools: Arc::new(vec![weather_tool()]),
        tool_choice: ToolChoice::Auto,
        temperature: Some(0.7),
        max_tokens: Some(1024),
        ..ModelRequest::default()
    };
    insta::assert_json_snapshot!("encode_every_part_kind", body(&request));
}

#[test]
fn tool_choice_maps_to_function_calling_config() {
    let cases = [
        (ToolChoice::Auto, json!({"mode": "AUTO"})),
        (ToolChoice::None, json!({"mode": "NONE"})),
        (ToolChoice::Required, json!({"mode": "ANY"})),
        (
            ToolChoice::Named("get_weather".into()),
            json!({"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
        ),
    ];
    for (choice, expected) in cases {
        let mut request = request(vec![Message::user("hi")]);
        request.tools = Arc::new(vec![weather_tool()]);
        request.tool_choice = choice;
        assert_eq!(body(&request)["toolConfig"]["functionCallingConfig"], expected);
    }
    let mut request = request(vec![Message::user("hi")]);
    request.tool_choice = ToolChoice::Required;
    assert!(body(&request).get("toolConfig").is_none());
}

#[test]
fn a_tool_without_parameters_has_no_parameters() {
    let mut request = request(vec![Message::user("hi")]);
    request.tools = Arc::new(vec![ToolSpec {
        name: "now".into(),
        description: "The time.".into(),
        parameters: json!({"type": "object", "properties": {}}),
    }]);
    assert_eq!(
        body(&request)["tools"],
        json!([{"functionDeclarations": [{"name": "now", "description": "The time."}]}])
    );
}

#[test]
fn generation_and_thinking_config() {
    let format = format().with_thoughts(true).with_thinking_budget(512);
    let mut request = request(vec![Message::user("hi")]);
    request.temperature = Some(0.2);
    let body = format.encode(&request, false).unwrap().body;
    assert_eq!(
        body["generationConfig"],
        json!({"temperature": 0.2, "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 512}})
    );
}

#[test]
fn a_result_without_its_call_is_an_invalid_request() {
    let request =
        request(vec![Message::user("hi"), Message::tool_results([ToolResult::ok("nope", "x")])]);
    let error = format().encode(&request, false).unwrap_err();
    assert!(
        matches!(&error, ProviderError::InvalidRequest { message } if message.contains("nope")),
        "{error:?}"
    );
}

#[test]
fn the_tool_result_round_trip_encodes_the_next_request() {
    let response = decode("tool_call_stream.sse");
    let call_id = response.message.tool_calls().next().unwrap().id.clone();
    let mut request = request(vec![
        Message::user("What's the weather in Paris?"),
        response.message,
        Message::tool_results([ToolResult::ok(
            call_id,
            json!({"temperature": 18, "sky": "sunny"}),
        )]),
    ]);
    request.instructions = Some("Use the tools.".into());
    request.tools = Arc::new(vec![weather_tool()]);
    insta::assert_json_snapshot!("tool_result_round_trip", body(&request));
}

#[test]
fn thought_signatures_go_back_on_their_parts_byte_for_byte() {
    let response = decode("thinking_stream.sse");
    let call_id = response.message.tool_calls().next().unwrap().id.clone();
    let request = request(vec![
        Message::user("What is 27 * 453?"),
        response.message,
        Message::tool_results([ToolResult::ok(call_id, "12231")]),
    ]);
    let body = body(&request);
    let model = &body["contents"][1];
    assert_eq!(model["role"], json!("model"));
    assert_eq!(
        model["parts"],
        json!([
            {"text": "Checking with the calculator.", "thoughtSignature": "EqoBCqcBAdHtim9+sig/one=="},
            {"functionCall": {"name": "calculator", "args": {"a": 27, "b": 453, "operation": "multiply"}},
             "thoughtSignature": "EqoBCqcBAdHtim9+sig/two=="},
        ])
    );
    insta::assert_json_snapshot!("thinking_round_trip", body);
}

// ---------------------------------------------------------------- streaming

#[test]
fn streaming_text() {
    let response = decode("text_stream.sse");
    assert_eq!(
        response.message.content,
        vec![Part::text("The quick brown fox jumps over the lazy dög 🦊.")]
    );
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Usage { input: 8, output: 12, cached_input: 4, reasoning: 0, cache_write_input: 0 }
    );
}

#[test]
fn one_tool_call_arrives_whole() {
    let chunks = decode_chunks(format().stream_decoder(), &fx("tool_call_stream.sse")).unwrap();
    let id = "gemini_GFyKaOHqEauPz7IPxfDc4Qs_0".to_owned();
    assert_eq!(
        chunks,
        vec![
            StreamChunk::ResponseInfo {
                id: Some("GFyKaOHqEauPz7IPxfDc4Qs".into()),
                model: Some("gemini-2.5-flash".into()),
            },
            StreamChunk::ReasoningEnd {
                opaque: Some(
                    json!({"thoughtSignature": "CiwBVKhc7ohiDX0Ypn1+3mG3fzU8ZXMn8AHsJ0aWQ9DKb+Ekg=="})
                ),
            },
            StreamChunk::ToolCallStart { id: id.clone(), name: "get_weather".into() },
            StreamChunk::ToolCallDelta {
                id: id.clone(),
                delta: r#"{"location":"Paris","unit":"celsius"}"#.into()
            },
            StreamChunk::ToolCallEnd { id },
            StreamChunk::Usage {
                usage: Usage {
                    input: 72,
                    output: 70,
                    cached_input: 0,
                    reasoning: 52,
                    cache_write_input: 0
                }
            },
            StreamChunk::Finish { reason: FinishReason::ToolCalls },
        ]
    );
}

#[test]
fn parallel_tool_calls_get_stable_unique_ids() {
    let response = decode("parallel_tools_stream.sse");
    assert_eq!(
        response.message.content,
        vec![
            Part::text("Let me check both."),
            signed("", "Q2lnbmF0dXJlLTE="),
            call("gemini_Zx3UaLi9Bv-xkdUP7ZmO8Ac_0", "get_weather", r#"{"location":"Paris"}"#),
            call("gemini_Zx3UaLi9Bv-xkdUP7ZmO8Ac_1", "get_time", r#"{"timezone":"Europe/Paris"}"#),
            call("gemini_Zx3UaLi9Bv-xkdUP7ZmO8Ac_2", "list_alarms", "{}"),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage, Usage { input: 110, output: 36, ..Usage::default() });
}

#[test]
fn without_a_response_id_ids_are_still_unique() {
    let data = r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a"}},{"functionCall":{"name":"a"}}]},"finishReason":"STOP"}]}"#;
    let sse = format!("data: {data}\n\n");
    let first = decode_sse(format().stream_decoder(), &sse).unwrap();
    let second = decode_sse(format().stream_decoder(), &sse).unwrap();
    let ids: Vec<String> = first
        .message
        .tool_calls()
        .chain(second.message.tool_calls())
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(ids.len(), 4);
    for (i, id) in ids.iter().enumerate() {
        assert!(id.starts_with(SYNTHETIC_ID_PREFIX), "{id}");
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{id}");
        assert!(!ids[..i].contains(id), "{id} repeats");
    }
}

#[test]
fn thoughts_stream_as_reasoning_and_keep_their_signatures() {
    let response = decode("thinking_stream.sse");
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning {
                text: "**Working out the product**\n\nI need 27 times 453. That is 12231; I should confirm with the tool.".into(),
                opaque: None,
            }),
            signed("", "EqoBCqcBAdHtim9+sig/one=="),
            Part::text("Checking with the calculator."),
            signed("", "EqoBCqcBAdHtim9+sig/two=="),
            call("gemini_p0Z1aKq7ELuvkdUPzbu7gQM_0", "calculator", r#"{"a":27,"b":453,"operation":"multiply"}"#),
        ]
    );
    assert_eq!(
        response.usage,
        Usage { input: 21, output: 185, cached_input: 0, reasoning: 160, cache_write_input: 0 }
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[test]
fn a_signed_thought_keeps_its_text_and_signature() {
    let sse = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hm\",\"thought\":true,\"thoughtSignature\":\"s1\"}]}}]}\n\n\
               data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ok\"}]},\"finishReason\":\"STOP\"}]}\n\n";
    let response = decode_sse(format().stream_decoder(), sse).unwrap();
    assert_eq!(response.message.content, vec![signed("hm", "s1"), Part::text("ok")]);
    let body = body(&request(vec![Message::user("q"), response.message]));
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "hm", "thought": true, "thoughtSignature": "s1"}, {"text": "ok"}])
    );
}

#[test]
fn a_blocked_prompt_is_a_content_filter() {
    let response = decode("blocked_prompt.sse");
    assert!(response.message.content.is_empty());
    assert_eq!(response.finish_reason, FinishReason::ContentFilter);
    assert_eq!(response.usage, Usage { input: 9, ..Usage::default() });
}

#[test]
fn every_finish_reason_maps() {
    let cases = [
        ("STOP", FinishReason::Stop),
        ("MAX_TOKENS", FinishReason::Length),
        ("SAFETY", FinishReason::ContentFilter),
        ("RECITATION", FinishReason::ContentFilter),
        ("BLOCKLIST", FinishReason::ContentFilter),
        ("PROHIBITED_CONTENT", FinishReason::ContentFilter),
        ("SPII", FinishReason::ContentFilter),
        ("IMAGE_SAFETY", FinishReason::ContentFilter),
        ("MALFORMED_FUNCTION_CALL", FinishReason::Error),
        ("LANGUAGE", FinishReason::Other("LANGUAGE".into())),
        ("OTHER", FinishReason::Other("OTHER".into())),
        ("FINISH_REASON_UNSPECIFIED", FinishReason::Other("FINISH_REASON_UNSPECIFIED".into())),
    ];
    for (reason, expected) in cases {
        let data = json!({"candidates": [{"content": {"parts": [{"text": "x"}], "role": "model"}, "finishReason": reason, "index": 0}]});
        let response = decode_sse(format().stream_decoder(), &format!("data: {data}\n\n")).unwrap();
        assert_eq!(response.finish_reason, expected, "stream: {reason}");
        let response = format().decode_response(data.to_string().as_bytes()).unwrap();
        assert_eq!(response.finish_reason, expected, "response: {reason}");
    }
}

#[test]
fn a_truncated_stream_fails_in_finish() {
    let error = decode_chunks(format().stream_decoder(), &fx("truncated_stream.sse")).unwrap_err();
    assert!(
        matches!(&error, ProviderError::Network { message } if message.contains("finishReason")),
        "{error:?}"
    );
}

#[test]
fn an_error_chunk_fails_the_stream_after_what_came_before() {
    let mut decoder = format().stream_decoder();
    let mut out = Vec::new();
    let mut error = None;
    for (event, data) in sse_events(&fx("error_stream.sse")) {
        if let Err(e) = decoder.decode(&event, &data, &mut out) {
            error = Some(e);
            break;
        }
    }
    assert_eq!(
        error,
        Some(ProviderError::Overloaded {
            message: "The model is overloaded. Please try again later.".into()
        })
    );
    assert_eq!(assemble(out).unwrap().message.text(), "Once upon");
}

#[test]
fn malformed_chunks_are_protocol_errors_with_an_excerpt() {
    let cases = [
        "{not json",
        "{\"candidates\": 3}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"args\":{}}}]}}]}",
        "{\"usageMetadata\":{\"promptTokenCount\":-1}}",
        "[]",
    ];
    for data in cases {
        let mut out = Vec::new();
        match format().stream_decoder().decode("", data, &mut out).unwrap_err() {
            ProviderError::Protocol { excerpt, .. } => assert_eq!(excerpt, data),
            other => panic!("{data}: {other:?}"),
        }
    }
}

#[test]
fn whole_responses_decode() {
    let response = format().decode_response(fx("response_text.json").as_bytes()).unwrap();
    assert_eq!(response.message.content, vec![Part::text("Hello! How can I help you today?")]);
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.usage, Usage { input: 2, output: 9, ..Usage::default() });

    let response = format().decode_response(fx("response_function_call.json").as_bytes()).unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning { text: "**Planning the lookup**".into(), opaque: None }),
            signed("", "CrsBAdHtim+whole/sig=="),
            call("gemini_wHoLeReSpOnSe-1_x_0", "get_weather", r#"{"location":"Tokyo"}"#),
            // An id Gemini issued is kept (and sent back).
            call("fc-issued-by-gemini-7", "get_time", "{}"),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 1210, output: 120, cached_input: 1024, reasoning: 80, cache_write_input: 0 }
    );

    let error = format().decode_response(b"{\"candidates\": [").unwrap_err();
    assert!(matches!(error, ProviderError::Protocol { .. }), "{error:?}");
    let error = format().decode_response(fx("error_unavailable.json").as_bytes()).unwrap_err();
    assert!(matches!(error, ProviderError::Overloaded { .. }), "{error:?}");
}

// ---------------------------------------------------------------- errors

#[test]
fn every_error_body_class() {
    let generic = ProviderError::InvalidRequest { message: "HTTP 400".into() };
    let cases: Vec<(&str, u16, ProviderError, ProviderError)> = vec![
        ("error_context.json", 400, generic.clone(), ProviderError::ContextLengthExceeded { message: "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).".into() }),
        ("error_invalid_argument.json", 400, generic.clone(), ProviderError::InvalidRequest { message: "* GenerateContentRequest.contents: contents is not specified\n".into() }),
        ("error_not_found.json", 404, generic.clone(), ProviderError::InvalidRequest { message: "models/gemini-nope is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.".into() }),
        ("error_api_key.json", 400, generic.clone(), ProviderError::Auth { status: 400, message: "API key not valid. Please pass a valid API key.".into() }),
        ("error_unauthenticated.json", 401, generic.clone(), ProviderError::Auth { status: 401, message: "Request had invalid authentication credentials.".into() }),
        ("error_permission.json", 403, generic.clone(), ProviderError::Auth { status: 403, message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.".into() }),
        // No Retry-After header: the body's RetryInfo gives the delay…
        (
            "error_rate_limited.json",
            429,
            ProviderError::RateLimited { message: "HTTP 429".into(), retry_after_ms: None },
            ProviderError::RateLimited { message: "You exceeded your current quota, please check your plan and billing details.".into(), retry_after_ms: Some(39_000) },
        ),
        // …a header wins over it.
        (
            "error_rate_limited.json",
            429,
            ProviderError::RateLimited { message: "HTTP 429".into(), retry_after_ms: Some(5_000) },
            ProviderError::RateLimited { message: "You exceeded your current quota, please check your plan and billing details.".into(), retry_after_ms: Some(5_000) },
        ),
        ("error_unavailable.json", 503, generic.clone(), ProviderError::Overloaded { message: "The model is overloaded. Please try again later.".into() }),
        ("error_array.json", 503, generic.clone(), ProviderError::Overloaded { message: "The service is currently unavailable.".into() }),
        ("error_internal.json", 500, generic.clone(), ProviderError::Server { status: 500, message: "An internal error has occurred. Please retry or report in the troubleshooting guide.".into() }),
        ("error_deadline.json", 504, generic.clone(), ProviderError::Timeout { message: "Deadline expired before operation could complete.".into() }),
    ];
    for (file, status, generic, expected) in cases {
        assert_eq!(format().classify_error(status, &fx(file), generic), expected, "{file}");
    }
}

#[test]
fn bodies_that_say_nothing_keep_the_generic_class() {
    let generic = ProviderError::Server { status: 502, message: "HTTP 502".into() };
    assert_eq!(format().classify_error(502, "<html>Bad gateway</html>", generic.clone()), generic);
    assert_eq!(format().classify_error(502, "[]", generic.clone()), generic);
    let body = r#"{"error":{"code":502,"message":"upstream hiccup","status":"SOMETHING_NEW"}}"#;
    assert_eq!(
        format().classify_error(502, body, generic),
        ProviderError::Server { status: 502, message: "upstream hiccup".into() }
    );
}

// ---------------------------------------------------------------- robustness

fn fixture_events() -> Vec<String> {
    let names = [
        "text_stream.sse",
        "tool_call_stream.sse",
        "parallel_tools_stream.sse",
        "thinking_stream.sse",
    ];
    names.iter().flat_map(|name| sse_events(&fx(name))).map(|(_, data)| data).collect()
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(event in ".{0,16}", bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let data = String::from_utf8_lossy(&bytes);
        feed(format().stream_decoder().as_mut(), &event, &data);
        let _ = format().decode_response(&bytes);
        let _ = format().classify_error(400, &data, ProviderError::InvalidRequest { message: String::new() });
    }

    #[test]
    fn random_json_never_panics(values in proptest::collection::vec(arb_json(), 1..8)) {
        let mut decoder = format().stream_decoder();
        for value in &values {
            feed(decoder.as_mut(), "", &value.to_string());
            let wrapped = json!({"candidates": [{"content": {"parts": [value]}, "finishReason": value}], "usageMetadata": value, "error": value});
            feed(decoder.as_mut(), "", &wrapped.to_string());
            let _ = format().decode_response(value.to_string().as_bytes());
            let _ = format().classify_error(500, &json!({"error": value}).to_string(), ProviderError::Other { message: String::new() });
            let _ = to_gemini_schema(value);
        }
    }

    #[test]
    fn cut_and_shuffled_fixture_events_never_panic(
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), any::<proptest::sample::Index>()), 1..40)
    ) {
        let events = fixture_events();
        let mut decoder = format().stream_decoder();
        let mut out = Vec::new();
        for (event, cut) in picks {
            let data = &events[event.index(events.len())];
            let mut end = cut.index(data.len() + 1);
            while !data.is_char_boundary(end) {
                end -= 1;
            }
            let _ = decoder.decode("", &data[..end], &mut out);
        }
        let _ = decoder.finish(&mut out);
        let mut assembler = crate::provider::ResponseAssembler::default();
        for chunk in out {
            let _ = assembler.push(chunk);
        }
    }

    #[test]
    fn random_histories_encode_without_panics(
        messages in proptest::collection::vec((0..5u8, proptest::collection::vec(arb_part(), 0..6)), 0..8)
    ) {
        let roles = [Role::System, Role::Developer, Role::User, Role::Assistant, Role::Tool];
        let messages: Vec<Message> = messages
            .into_iter()
            .map(|(role, content)| Message { role: roles[usize::from(role)], content })
            .collect();
        let request = request(messages);
        let _ = format().encode(&request, true);
        let _ = crate::provider::Anthropic::messages("m").encode(&request, true);
    }
}

/// Parts of every kind, with call ids from a small set so that results meet their calls.
fn arb_part() -> impl Strategy<Value = Part> {
    let id = proptest::sample::select(vec!["a", "b", "gemini_x_0", ""]).prop_map(str::to_owned);
    prop_oneof![
        ".{0,8}".prop_map(Part::text),
        (".{0,8}", ".{0,8}").prop_map(|(media_type, data)| Part::Image {
            source: MediaSource::Base64 { media_type, data }
        }),
        ".{0,12}".prop_map(|url| Part::File { source: MediaSource::Url { url }, filename: None }),
        (id.clone(), ".{0,6}", ".{0,12}")
            .prop_map(|(id, name, arguments)| Part::ToolCall(ToolCall { id, name, arguments })),
        (id, arb_json(), any::<bool>()).prop_map(|(call_id, content, is_error)| {
            Part::ToolResult(ToolResult { call_id, content: content.into(), is_error })
        }),
        (".{0,8}", proptest::option::of(arb_json()))
            .prop_map(|(text, opaque)| Part::Reasoning(Reasoning { text, opaque })),
    ]
}

#[test]
fn the_response_id_and_model_version_reach_the_response() {
    // Every chunk repeats them: reported once, as sent (the synthetic call ids use the id
    // cleaned up; the response keeps it as Gemini wrote it).
    let chunks = decode_chunks(format().stream_decoder(), &fx("text_stream.sse")).unwrap();
    let infos: Vec<_> =
        chunks.iter().filter(|c| matches!(c, StreamChunk::ResponseInfo { .. })).collect();
    let info = StreamChunk::ResponseInfo {
        id: Some("mEnxaJ2lLYqz1MkPqLLZqQU".into()),
        model: Some("gemini-2.5-flash".into()),
    };
    assert_eq!(infos, [&info]);
    let streamed = assemble(chunks).unwrap();
    assert_eq!(streamed.id.as_deref(), Some("mEnxaJ2lLYqz1MkPqLLZqQU"));
    assert_eq!(streamed.model.as_deref(), Some("gemini-2.5-flash"));

    let whole = format().decode_response(fx("response_text.json").as_bytes()).unwrap();
    assert_eq!(whole.id.as_deref(), Some("aBcDeFgHiJkLmNoPqRsTuV"));
    assert_eq!(whole.model.as_deref(), Some("gemini-2.5-flash"));

    // Neither sent: nothing reported.
    let bare =
        r#"{"candidates": [{"content": {"parts": [{"text": "Hi"}]}, "finishReason": "STOP"}]}"#;
    let whole = format().decode_response(bare.as_bytes()).unwrap();
    assert_eq!((whole.id, whole.model), (None, None));
}

#[test]
fn code_execution_parts_are_kept_whole_and_sent_back_in_the_model_turn() {
    let sse = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[\
               {\"text\":\"Let me compute.\"},\
               {\"executableCode\":{\"language\":\"PYTHON\",\"code\":\"print(2**10)\"}},\
               {\"codeExecutionResult\":{\"outcome\":\"OUTCOME_OK\",\"output\":\"1024\\n\"}},\
               {\"text\":\"It is 1024.\"}]},\"index\":0,\"finishReason\":\"STOP\"}]}\n\n";
    let response = decode_sse(format().stream_decoder(), sse).unwrap();
    let code = json!({"executableCode": {"language": "PYTHON", "code": "print(2**10)"}});
    let result = json!({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1024\n"}});
    assert_eq!(
        response.message.content,
        vec![
            Part::text("Let me compute."),
            Part::Opaque(crate::message::Opaque::new("gemini", "executableCode", code.clone())),
            Part::Opaque(crate::message::Opaque::new(
                "gemini",
                "codeExecutionResult",
                result.clone()
            )),
            Part::text("It is 1024."),
        ]
    );
    let sent = body(&request(vec![Message::user("2^10?"), response.message, Message::user("ok")]));
    let parts = sent["contents"][1]["parts"].as_array().unwrap().clone();
    assert_eq!(sent["contents"][1]["role"], "model");
    assert_eq!(
        parts,
        vec![json!({"text": "Let me compute."}), code, result, json!({"text": "It is 1024."})]
    );
}

#[test]
fn grounding_sources_become_citations_after_the_text_streamed_and_whole_alike() {
    // Grounding metadata as Google documents it (the shape of vercel/ai's schema test): a
    // span of the text rests on the first source; the second is named by no span.
    let text = "Chicago weather changes rapidly, so layers let you adjust easily.";
    let grounding = json!({
        "webSearchQueries": ["What's the weather in Chicago this weekend?"],
        "groundingChunks": [
            {"web": {"uri": "https://example.com/weather", "title": "Chicago Weather Forecast"}},
            {"web": {"uri": "https://example.com/layers"}}
        ],
        "groundingSupports": [{
            "segment": {"endIndex": 65, "text": text},
            "groundingChunkIndices": [0],
            "confidenceScores": [0.99]
        }]
    });
    let last = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": " Done."}]},
        "finishReason": "STOP", "groundingMetadata": grounding}]});
    let first = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}]});
    let sse = format!("data: {first}\n\ndata: {last}\n\n");
    let streamed = decode_sse(format().stream_decoder(), &sse).unwrap();
    let whole_body = json!({"candidates": [{"content": {"role": "model",
        "parts": [{"text": text}, {"text": " Done."}]},
        "finishReason": "STOP", "groundingMetadata": grounding}]});
    let whole = format().decode_response(whole_body.to_string().as_bytes()).unwrap();
    assert_eq!(streamed.message, whole.message);
    let citations: Vec<&crate::message::Citation> = whole
        .message
        .content
        .iter()
        .filter_map(|part| match part {
            Part::Citation(citation) => Some(citation),
            _ => None,
        })
        .collect();
    assert_eq!(citations.len(), 2);
    assert!(matches!(whole.message.content[0], Part::Text { .. }), "the text comes first");
    assert_eq!(citations[0].url.as_deref(), Some("https://example.com/weather"));
    assert_eq!(citations[0].title.as_deref(), Some("Chicago Weather Forecast"));
    assert_eq!(citations[0].cited_text.as_deref(), Some(text));
    assert_eq!((citations[0].start, citations[0].end), (Some(0), Some(65)));
    assert_eq!(citations[0].provider, "gemini");
    assert_eq!(citations[1].url.as_deref(), Some("https://example.com/layers"));
    assert_eq!((citations[1].title.as_deref(), citations[1].start), (None, None));
    // Gemini takes no citations in a request: they stay out of the next one.
    let sent = body(&request(vec![Message::user("q"), whole.message, Message::user("more")]));
    assert!(!sent.to_string().contains("example.com"), "{sent}");
}

#[test]
fn streamed_usage_is_the_last_chunks_not_the_largest_seen() {
    // Each chunk's `usageMetadata` is the response's so far, and the prompt count can go down
    // (Gemini counts it again as it goes): the last one before the end is the usage.
    let chunks = [
        r#"{"candidates":[{"content":{"parts":[{"text":"Once"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":130,"candidatesTokenCount":1,"totalTokenCount":131}}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":" upon"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":118,"candidatesTokenCount":2,"totalTokenCount":120}}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":" a time."}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":112,"candidatesTokenCount":5,"cachedContentTokenCount":64,"totalTokenCount":117}}"#,
    ];
    let mut decoder = format().stream_decoder();
    let mut out = Vec::new();
    for data in chunks {
        decoder.decode("", data, &mut out).unwrap();
    }
    decoder.finish(&mut out).unwrap();
    let usages = out.iter().filter(|c| matches!(c, StreamChunk::Usage { .. })).count();
    assert_eq!(usages, 1, "reported once, with the end: {out:?}");
    let response = assemble(out).unwrap();
    assert_eq!(response.message.text(), "Once upon a time.");
    assert_eq!(
        response.usage,
        Usage { input: 112, output: 5, cached_input: 64, reasoning: 0, cache_write_input: 0 }
    );
}
