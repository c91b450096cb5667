#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::testutil::{arb_json, assemble, decode_chunks, decode_sse, feed, fixture, sse_events};
use super::*;
use crate::message::{FinishReason, Usage};
use crate::provider::StreamChunk;
use crate::tool::ToolSpec;
use proptest::prelude::*;
use std::sync::Arc;

/// The format without cache marks: these tests are about everything else (the marks:
/// `cache/tests.rs`).
fn format() -> Anthropic {
    Anthropic::messages("claude-sonnet-4-5").with_cache(CachePolicy::off())
}

fn fx(name: &str) -> String {
    fixture("anthropic", name)
}

fn decode(name: &str) -> ModelResponse {
    decode_sse(format().stream_decoder(), &fx(name)).unwrap()
}

fn decode_err(sse: &str) -> ProviderError {
    decode_chunks(format().stream_decoder(), sse).unwrap_err()
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
            "type": "object",
            "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["location"]
        }),
    }
}

fn call(id: &str, name: &str, arguments: &str) -> Part {
    Part::ToolCall(ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() })
}

// ---------------------------------------------------------------- encoding

#[test]
fn the_format_speaks_the_messages_api() {
    let wire = format().encode(&request(vec![Message::user("hi")]), true).unwrap();
    assert_eq!(format().name(), "anthropic");
    assert_eq!(format().auth(), AuthStyle::Header("x-api-key"));
    assert_eq!(wire.path, "/v1/messages");
    assert_eq!(wire.headers, vec![("anthropic-version".to_owned(), "2023-06-01".to_owned())]);
    assert_eq!(wire.body["stream"], json!(true));
    assert_eq!(wire.body["model"], json!("claude-sonnet-4-5"));
    assert_eq!(wire.body["max_tokens"], json!(DEFAULT_MAX_TOKENS));
    let wire = format().encode(&request(vec![Message::user("hi")]), false).unwrap();
    assert!(wire.body.get("stream").is_none());
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
                    source: MediaSource::Url { url: "https://example.com/sky.jpg".into() },
                },
                Part::File {
                    source: MediaSource::Base64 {
                        media_type: "application/pdf".into(),
                        data: "JVBERi0x".into(),
                    },
                    filename: Some("forecast.pdf".into()),
                },
                Part::text(""),
            ],
        },
        Message::developer("Prefer metric units."),
        Message {
            role: Role::Assistant,
            content: vec![
                Part::Reasoning(Reasoning {
                    text: "The user wants weather.".into(),
                    opaque: Some(json!({"type": "thinking", "signature": "c2lnLTE="})),
                }),
                Part::Reasoning(Reasoning {
                    text: String::new(),
                    opaque: Some(json!({"type": "redacted_thinking", "data": "cmVkYWN0ZWQ="})),
                }),
                // Reasoning from another provider: not sent.
                Part::Reasoning(Reasoning {
                    text: "foreign".into(),
                    opaque: Some(json!({"thoughtSignature": "x"})),
                }),
                Part::Reasoning(Reasoning { text: "unsigned".into(), opaque: None }),
                Part::text("Checking."),
                call("toolu_1", "get_weather", r#"{"location":"Paris","unit":"celsius"}"#),
                call("toolu_2", "get_weather", "not json"),
                call("toolu_3", "list_alarms", ""),
            ],
        },
        Message::tool_results([
            ToolResult::ok("toolu_1", "18°C, sunny"),
            ToolResult::error("toolu_2", "the arguments are not valid JSON"),
        ]),
        Message::tool_results([ToolResult::ok("toolu_3", json!({"alarms": []}))]),
        Message::user("And tomorrow?"),
    ];
    let request = ModelRequest {
        instructions: Some("You are a weather bot.".into()),
        messages: Arc::new(history),
        tools: Arc::new(vec![weather_tool()]),
        tool_choice: ToolChoice::Auto,
        temperature: Some(0.7),
        max_tokens: None,
        ..ModelRequest::default()
    };
    insta::assert_json_snapshot!("encode_every_part_kind", body(&request));
}

#[test]
fn results_come_first_in_a_merged_user_message() {
    let request = request(vec![
        Message::user("go"),
        Message { role: Role::Assistant, content: vec![call("t1", "a", "{}")] },
        Message::user("also this"),
        Message::tool_results([ToolResult::ok("t1", "done")]),
    ]);
    let messages = body(&request)["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 3);
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "done"},
            {"type": "text", "text": "also this"},
        ]})
    );
}

#[test]
fn empty_messages_do_not_break_role_alternation() {
    let request = request(vec![
        Message::user("a"),
        Message { role: Role::Assistant, content: vec![Part::text("")] },
        Message::user("b"),
    ]);
    assert_eq!(
        body(&request)["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    );
}

#[test]
fn tool_choice_maps_to_the_api_shapes() {
    let cases = [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::None, json!({"type": "none"})),
        (ToolChoice::Required, json!({"type": "any"})),
        (ToolChoice::Named("get_weather".into()), json!({"type": "tool", "name": "get_weather"})),
    ];
    for (choice, expected) in cases {
        let mut request = request(vec![Message::user("hi")]);
        request.tools = Arc::new(vec![weather_tool()]);
        request.tool_choice = choice;
        let body = body(&request);
        assert_eq!(body["tool_choice"], expected);
        assert_eq!(body["tools"][0]["input_schema"], weather_tool().parameters);
    }
    // Without tools there is nothing to choose.
    let mut request = request(vec![Message::user("hi")]);
    request.tool_choice = ToolChoice::Required;
    let body = body(&request);
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

#[test]
fn max_tokens_temperature_and_thinking() {
    let mut req = request(vec![Message::user("hi")]);
    req.max_tokens = Some(100);
    req.temperature = Some(0.3);
    let body = body(&req);
    assert_eq!(body["max_tokens"], json!(100));
    assert_eq!(body["temperature"], json!(0.3));
    assert!(body.get("system").is_none());

    let thinking = Anthropic::messages("m").with_thinking(2048).with_default_max_tokens(1000);
    let body = thinking.encode(&request(vec![Message::user("hi")]), false).unwrap().body;
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert_eq!(body["max_tokens"], json!(3048));
    assert_eq!(thinking.model(), "m");
}

#[test]
fn the_tool_result_round_trip_encodes_the_next_request() {
    let response = decode("tool_use_stream.sse");
    let call_id = response.message.tool_calls().next().unwrap().id.clone();
    let mut request = request(vec![
        Message::user("What's the weather in San Francisco?"),
        response.message,
        Message::tool_results([ToolResult::ok(call_id, "15°C, foggy")]),
    ]);
    request.instructions = Some("Use the tools.".into());
    request.tools = Arc::new(vec![weather_tool()]);
    insta::assert_json_snapshot!("tool_result_round_trip", body(&request));
}

#[test]
fn the_llama_cpp_tool_loop_round_trip() {
    // The history of the real llama.cpp agent loop, rebuilt from our own decoding of its stream.
    let response = decode("llama_tool_use_stream.sse");
    let call_id = response.message.tool_calls().next().unwrap().id.clone();
    let mut request = request(vec![
        Message::user("Reply with exactly this text and nothing else:\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"operation\": \"multiply\", \"a\": 17, \"b\": 23}}\n</tool_call>"),
        response.message,
        Message::tool_results([ToolResult::ok(call_id, "391")]),
    ]);
    request.max_tokens = Some(48);
    request.temperature = Some(0.0);
    request.instructions =
        Some("You are a helpful assistant. Always use the calculator tool for arithmetic.".into());
    insta::assert_json_snapshot!("llama_tool_loop_round_trip", body(&request));
}

#[test]
fn thinking_goes_back_byte_for_byte() {
    let response = decode("thinking_stream.sse");
    let call_id = response.message.tool_calls().next().unwrap().id.clone();
    let request = request(vec![
        Message::user("What is 27 * 453?"),
        response.message,
        Message::tool_results([ToolResult::ok(call_id, "12231")]),
    ]);
    let body = body(&request);
    let assistant = &body["messages"][1]["content"];
    assert_eq!(assistant[0]["type"], json!("thinking"));
    assert_eq!(
        assistant[0]["signature"],
        json!("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/aZ0==")
    );
    assert_eq!(
        assistant[0]["thinking"],
        json!("Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3")
    );
    assert_eq!(
        assistant[1],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP+/Redacted=="})
    );
    insta::assert_json_snapshot!("thinking_round_trip", body);
}

// ---------------------------------------------------------------- streaming

#[test]
fn streaming_text_with_cache_usage() {
    let response = decode("text_stream.sse");
    assert_eq!(response.message.content, vec![Part::text("Hello, wörld! 👋")]);
    assert_eq!(response.finish_reason, FinishReason::Stop);
    // input = 12 uncached + 100 written to the cache + 2048 read from it.
    assert_eq!(
        response.usage,
        Usage { input: 2160, output: 15, cached_input: 2048, reasoning: 0, cache_write_input: 100 }
    );
}

#[test]
fn one_tool_call_streamed_in_pieces() {
    let chunks = decode_chunks(format().stream_decoder(), &fx("tool_use_stream.sse")).unwrap();
    let id = "toolu_01T1x1fJ34qAmk2tNTrN7Up6";
    let pieces: Vec<&str> = chunks
        .iter()
        .filter_map(|c| match c {
            StreamChunk::ToolCallDelta { id: i, delta } if i == id => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        pieces,
        ["{\"location\":", " \"San Fra", "ncisco, CA\", \"unit\": \"fah", "renheit\"}"]
    );
    assert!(chunks.contains(&StreamChunk::ToolCallEnd { id: id.into() }));
    let response = assemble(chunks).unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Part::text("Okay, let me check the weather."),
            call(id, "get_weather", r#"{"location": "San Francisco, CA", "unit": "fahrenheit"}"#),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage, Usage { input: 472, output: 89, ..Usage::default() });
}

#[test]
fn parallel_tool_calls_streamed_in_pieces() {
    let response = decode("parallel_tools_stream.sse");
    assert_eq!(
        response.message.content,
        vec![
            call("toolu_01A09q90qw90lq917835lq9", "get_weather", r#"{"location": "Paris"}"#),
            call("toolu_01B19r91rx91mr928946mr0", "get_time", r#"{"timezone": "Europe/Paris"}"#),
            // No argument text at all: `{}`, as a whole response would say.
            call("toolu_01C29s92sy92ns939057ns1", "list_alarms", "{}"),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage, Usage { input: 610, output: 121, ..Usage::default() });
}

#[test]
fn thinking_and_redacted_thinking_keep_their_opaque_data() {
    let response = decode("thinking_stream.sse");
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning {
                text: "Let me solve this step by step:\n\n1. First break down 27 * 453\n2. 453 = 400 + 50 + 3".into(),
                opaque: Some(json!({"type": "thinking", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/aZ0=="})),
            }),
            Part::Reasoning(Reasoning {
                text: String::new(),
                opaque: Some(json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP+/Redacted=="})),
            }),
            Part::text("27 * 453 = 12,231. Let me verify with the calculator."),
            call("toolu_01CBhTMrxkgFD6y4Cz5ySzUN", "calculator", r#"{"operation": "multiply", "a": 27, "b": 453}"#),
        ]
    );
    assert_eq!(response.usage, Usage { input: 96, output: 287, ..Usage::default() });
}

#[test]
fn llama_cpp_streams_decode() {
    let response = decode("llama_text_stream.sse");
    assert_eq!(
        response.message.text(),
        "Hello, I'm here to help with any creative writing project."
    );
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(
        response.usage,
        Usage { input: 37, output: 14, cached_input: 36, reasoning: 0, cache_write_input: 0 }
    );

    // Its tool_use start block has no `input`, its ids no `toolu_` prefix.
    let response = decode("llama_tool_use_stream.sse");
    assert_eq!(
        response.message.content,
        vec![call(
            "UX8QBKfcwCpb00WOwEQ8WKyWD2fTgGw6",
            "calculator",
            r#"{"operation": "multiply", "a": 17, "b": 23}"#
        )]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 315, output: 43, cached_input: 314, reasoning: 0, cache_write_input: 0 }
    );
}

fn stop_stream(stop_reason: &str) -> String {
    format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":3,\"output_tokens\":1}}}}}}\n\n\
         event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop_reason}\"}},\"usage\":{{\"output_tokens\":5}}}}\n\n\
         event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
    )
}

#[test]
fn every_stop_reason_maps() {
    let cases = [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("tool_use", FinishReason::ToolCalls),
        ("max_tokens", FinishReason::Length),
        ("model_context_window_exceeded", FinishReason::Length),
        ("refusal", FinishReason::ContentFilter),
        ("pause_turn", FinishReason::Other("pause_turn".into())),
        ("something_new", FinishReason::Other("something_new".into())),
    ];
    for (stop_reason, expected) in cases {
        let response = decode_sse(format().stream_decoder(), &stop_stream(stop_reason)).unwrap();
        assert_eq!(response.finish_reason, expected, "stream: {stop_reason}");
        let body = json!({"type": "message", "content": [], "stop_reason": stop_reason, "usage": {"input_tokens": 1, "output_tokens": 2}});
        let response = format().decode_response(body.to_string().as_bytes()).unwrap();
        assert_eq!(response.finish_reason, expected, "response: {stop_reason}");
    }
}

#[test]
fn later_usage_supersedes_earlier() {
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n\
               event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":7,\"cache_read_input_tokens\":5,\"output_tokens\":30}}\n\n\
               event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    let chunks = decode_chunks(format().stream_decoder(), sse).unwrap();
    assert_eq!(
        chunks,
        vec![
            StreamChunk::Usage {
                usage: Usage {
                    input: 15,
                    output: 1,
                    cached_input: 5,
                    reasoning: 0,
                    cache_write_input: 0
                }
            },
            StreamChunk::Usage {
                usage: Usage {
                    input: 24,
                    output: 30,
                    cached_input: 5,
                    reasoning: 0,
                    cache_write_input: 7
                }
            },
            StreamChunk::Finish { reason: FinishReason::Stop },
        ]
    );
}

#[test]
fn an_error_event_fails_the_stream_after_what_came_before() {
    let mut decoder = format().stream_decoder();
    let mut out = Vec::new();
    let mut error = None;
    for (event, data) in sse_events(&fx("error_stream.sse")) {
        if let Err(e) = decoder.decode(&event, &data, &mut out) {
            error = Some(e);
            break;
        }
    }
    assert_eq!(error, Some(ProviderError::Overloaded { message: "Overloaded".into() }));
    assert_eq!(assemble(out).unwrap().message.text(), "Once upon");
}

#[test]
fn a_truncated_stream_fails_in_finish() {
    let error = decode_err(&fx("truncated_stream.sse"));
    assert!(
        matches!(&error, ProviderError::Network { message } if message.contains("before message_stop")),
        "{error:?}"
    );
    assert!(error.is_retryable());
}

#[test]
fn malformed_events_are_protocol_errors_with_an_excerpt() {
    let cases = [
        "{not json",
        "{\"type\":\"content_block_delta\",\"index\":0}",
        "{\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}",
        "{\"type\":\"content_block_stop\",\"index\":3}",
        "{\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":-4}}}",
        "[1,2,3]",
    ];
    for data in cases {
        let mut decoder = format().stream_decoder();
        let mut out = Vec::new();
        let error = decoder.decode("x", data, &mut out).unwrap_err();
        match error {
            ProviderError::Protocol { excerpt, .. } => assert_eq!(excerpt, data),
            other => panic!("{data}: {other:?}"),
        }
    }
    // A delta that does not fit its block, and a block started twice.
    let start = "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}";
    let mut decoder = format().stream_decoder();
    let mut out = Vec::new();
    decoder.decode("content_block_start", start, &mut out).unwrap();
    let bad = "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}";
    assert!(matches!(decoder.decode("", bad, &mut out), Err(ProviderError::Protocol { .. })));
    assert!(matches!(decoder.decode("", start, &mut out), Err(ProviderError::Protocol { .. })));
    // A long line is cut to a 200-byte excerpt.
    let long = format!("{{\"type\": \"{}", "é".repeat(300));
    match format().stream_decoder().decode("", &long, &mut out).unwrap_err() {
        ProviderError::Protocol { excerpt, .. } => {
            assert!(excerpt.len() <= 200 && long.starts_with(&excerpt))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_events_are_skipped_and_unknown_blocks_and_citations_kept() {
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n\
               event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"web_search\",\"input\":{}}}\n\n\
               event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n\
               event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
               event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"Hi\"}}\n\n\
               event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n\
               event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n\
               event: some_future_event\ndata: {\"type\":\"some_future_event\",\"x\":1}\n\n\
               event: ping\ndata: \n\n\
               event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n\
               event: content_block_start\ndata: {\"type\":\"after the end\"\n\n";
    let response = decode_sse(format().stream_decoder(), sse).unwrap();
    // The server tool's call is kept, its streamed input in place, the text's citation after
    // it; nothing after the end.
    let block =
        json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}});
    assert_eq!(
        response.message.content,
        vec![
            Part::Opaque(crate::message::Opaque::new("anthropic", "server_tool_use", block)),
            Part::text("Hi"),
            Part::Citation(crate::message::Citation::from_value("anthropic", json!({}))),
        ]
    );
}

#[test]
fn a_tool_use_start_with_the_whole_input_and_no_deltas() {
    let sse = "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{\"a\":1}}}\n\n\
               data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
               data: {\"type\":\"message_stop\"}\n\n";
    let response = decode_sse(format().stream_decoder(), sse).unwrap();
    assert_eq!(response.message.content, vec![call("t", "n", r#"{"a":1}"#)]);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

// ---------------------------------------------------------------- whole responses

#[test]
fn whole_responses_decode() {
    let decode = |name: &str| format().decode_response(fx(name).as_bytes()).unwrap();

    let response = decode("response_text.json");
    assert_eq!(response.message.content, vec![Part::text("Hi! My name is Claude.")]);
    assert_eq!(
        response.usage,
        Usage { input: 3895, output: 503, cached_input: 1800, reasoning: 0, cache_write_input: 0 }
    );
    assert_eq!(response.finish_reason, FinishReason::Stop);

    let response = decode("response_tool_use.json");
    assert_eq!(
        response.message.content,
        vec![
            Part::text("I'll check both."),
            call(
                "toolu_01A09q90qw90lq917835lq9",
                "get_weather",
                r#"{"location":"San Francisco, CA","unit":"celsius"}"#
            ),
            call(
                "toolu_01B19r91rx91mr928946mr0",
                "get_time",
                r#"{"timezone":"America/Los_Angeles"}"#
            ),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);

    let response = decode("response_thinking.json");
    assert_eq!(
        response.message.content[..2],
        [
            Part::Reasoning(Reasoning {
                text: "To approach this, let's think about what we know about prime numbers..."
                    .into(),
                opaque: Some(
                    json!({"type": "thinking", "signature": "zbbJhbGciOiJFU8zI1NiIsImtakcjsu38219c0+/Sig=="})
                ),
            }),
            Part::Reasoning(Reasoning {
                text: String::new(),
                opaque: Some(
                    json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP+/Redacted=="})
                ),
            }),
        ]
    );

    let response = decode("llama_response_tool_use.json");
    assert_eq!(
        response.message.content,
        // A whole response carries `input` as an object: the argument text is its compact form.
        vec![call(
            "jvLDgtVajOisVoEc3NvTdbcT3PLvn8Oy",
            "calculator",
            r#"{"a":17,"b":23,"operation":"multiply"}"#
        )]
    );
    assert_eq!(
        response.usage,
        Usage { input: 315, output: 43, cached_input: 314, reasoning: 0, cache_write_input: 0 }
    );
    let response = decode("llama_response_text.json");
    assert_eq!(response.message.text(), "<tool_response>\n391\n</tool_response>");
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

#[test]
fn bad_whole_responses_are_errors() {
    let error = format().decode_response(b"{\"type\":\"message\",\"content\":").unwrap_err();
    assert!(matches!(error, ProviderError::Protocol { .. }), "{error:?}");
    let error = format().decode_response(fx("error_overloaded.json").as_bytes()).unwrap_err();
    assert_eq!(error, ProviderError::Overloaded { message: "Overloaded".into() });
    let body = json!({"type": "message", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}], "usage": {}});
    let response = format().decode_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

// ---------------------------------------------------------------- errors

#[test]
fn every_error_body_class() {
    let generic = ProviderError::InvalidRequest { message: "HTTP 400".into() };
    let cases: Vec<(&str, u16, ProviderError, ProviderError)> = vec![
        ("error_context.json", 400, generic.clone(), ProviderError::ContextLengthExceeded { message: "prompt is too long: 208310 tokens > 200000 maximum".into() }),
        ("error_invalid_request.json", 400, generic.clone(), ProviderError::InvalidRequest { message: "max_tokens: Field required".into() }),
        ("error_not_found.json", 404, generic.clone(), ProviderError::InvalidRequest { message: "model: claude-nonexistent".into() }),
        ("error_request_too_large.json", 413, generic.clone(), ProviderError::InvalidRequest { message: "Request exceeds the maximum allowed number of bytes.".into() }),
        ("error_authentication.json", 401, generic.clone(), ProviderError::Auth { status: 401, message: "invalid x-api-key".into() }),
        ("error_permission.json", 403, generic.clone(), ProviderError::Auth { status: 403, message: "Your API key does not have permission to use the specified resource.".into() }),
        (
            "error_rate_limit.json",
            429,
            ProviderError::RateLimited { message: "HTTP 429".into(), retry_after_ms: Some(20_000) },
            ProviderError::RateLimited { message: "Number of request tokens has exceeded your per-minute rate limit".into(), retry_after_ms: Some(20_000) },
        ),
        ("error_api.json", 500, generic.clone(), ProviderError::Server { status: 500, message: "Internal server error".into() }),
        ("error_overloaded.json", 529, generic.clone(), ProviderError::Overloaded { message: "Overloaded".into() }),
        // llama.cpp answers /v1/messages in OpenAI's error shape.
        ("llama_error_context.json", 400, generic.clone(), ProviderError::ContextLengthExceeded { message: "request (3032 tokens) exceeds the available context size (2048 tokens), try increasing it".into() }),
        ("llama_error_auth.json", 401, generic.clone(), ProviderError::Auth { status: 401, message: "Invalid API Key".into() }),
        ("llama_error_bad_request.json", 400, generic.clone(), ProviderError::InvalidRequest { message: "Expected 'messages' to be an array".into() }),
    ];
    for (file, status, generic, expected) in cases {
        assert_eq!(format().classify_error(status, &fx(file), generic), expected, "{file}");
    }
}

#[test]
fn bodies_that_say_nothing_keep_the_generic_class() {
    let generic = ProviderError::Server { status: 502, message: "HTTP 502".into() };
    assert_eq!(format().classify_error(502, "<html>Bad gateway</html>", generic.clone()), generic);
    // 529 is an overload whatever the error type says.
    let body = r#"{"type":"error","error":{"type":"api_error","message":"busy"}}"#;
    assert_eq!(
        format().classify_error(529, body, generic.clone()),
        ProviderError::Overloaded { message: "busy".into() }
    );
    // An unknown type keeps the transport's class with the provider's message.
    let body =
        r#"{"type":"error","error":{"type":"billing_error","message":"credit balance too low"}}"#;
    assert_eq!(
        format().classify_error(
            402,
            body,
            ProviderError::InvalidRequest { message: "HTTP 402".into() }
        ),
        ProviderError::InvalidRequest { message: "credit balance too low".into() }
    );
}

#[test]
fn every_stream_error_type_classifies() {
    let cases = [
        ("overloaded_error", ProviderError::Overloaded { message: "m".into() }),
        (
            "rate_limit_error",
            ProviderError::RateLimited { message: "m".into(), retry_after_ms: None },
        ),
        ("api_error", ProviderError::Server { status: 500, message: "m".into() }),
        ("authentication_error", ProviderError::Auth { status: 401, message: "m".into() }),
        ("permission_error", ProviderError::Auth { status: 403, message: "m".into() }),
        ("invalid_request_error", ProviderError::InvalidRequest { message: "m".into() }),
        ("timeout_error", ProviderError::Timeout { message: "m".into() }),
        (
            "mystery_error",
            ProviderError::Other { message: "anthropic error mystery_error: m".into() },
        ),
    ];
    for (kind, expected) in cases {
        let data = json!({"type": "error", "error": {"type": kind, "message": "m"}}).to_string();
        let mut out = Vec::new();
        assert_eq!(
            format().stream_decoder().decode("error", &data, &mut out),
            Err(expected),
            "{kind}"
        );
    }
}

// ---------------------------------------------------------------- robustness

/// Every data line of every stream fixture.
fn fixture_events() -> Vec<String> {
    let names = [
        "text_stream.sse",
        "tool_use_stream.sse",
        "parallel_tools_stream.sse",
        "thinking_stream.sse",
        "llama_tool_use_stream.sse",
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
            let _ = format().decode_response(value.to_string().as_bytes());
            let _ = format().classify_error(500, &value.to_string(), ProviderError::Other { message: String::new() });
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
}

#[test]
fn the_message_id_and_model_reach_the_response() {
    let chunks = decode_chunks(format().stream_decoder(), &fx("text_stream.sse")).unwrap();
    let info = StreamChunk::ResponseInfo {
        id: Some("msg_01XFDUDYJgAACzvnptvVoYEL".into()),
        model: Some("claude-sonnet-4-5".into()),
    };
    assert_eq!(chunks.first(), Some(&info));
    assert_eq!(chunks.iter().filter(|c| matches!(c, StreamChunk::ResponseInfo { .. })).count(), 1);
    let streamed = assemble(chunks).unwrap();
    assert_eq!(streamed.id.as_deref(), Some("msg_01XFDUDYJgAACzvnptvVoYEL"));
    assert_eq!(streamed.model.as_deref(), Some("claude-sonnet-4-5"));
    let whole = format().decode_response(fx("response_text.json").as_bytes()).unwrap();
    assert_eq!(whole.id.as_deref(), Some("msg_013Zva2CMHLNnXjNJJKqJ2EF"));
    assert_eq!(whole.model.as_deref(), Some("claude-sonnet-4-5"));

    // llama.cpp: its own ids (`chatcmpl-…`) and the model file.
    let llama = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    let streamed = decode("llama_text_stream.sse");
    assert_eq!(streamed.id.as_deref(), Some("chatcmpl-AJScKF1eK88HpBJQtPj7EdyXYyjKQp5X"));
    assert_eq!(streamed.model.as_deref(), Some(llama));
    let whole = format().decode_response(fx("llama_response_text.json").as_bytes()).unwrap();
    assert_eq!(whole.id.as_deref(), Some("chatcmpl-9ujttrIL8G9xJ5ZeZb6trcEiS2ouLsOs"));
    assert_eq!(whole.model.as_deref(), Some(llama));
}
