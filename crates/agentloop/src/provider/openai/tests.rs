#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{ToolResult, ToolResultContent};
use crate::provider::{ResponseAssembler, StreamChunk};
use crate::tool::ToolSpec;
use std::sync::Arc;

fn add_tool() -> ToolSpec {
    ToolSpec {
        name: "add".into(),
        description: "Adds two integers.".into(),
        parameters: json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
    }
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        instructions: Some("Be brief.".into()),
        messages: Arc::new(messages),
        tools: Arc::new(vec![add_tool()]),
        ..ModelRequest::default()
    }
}

fn openai() -> OpenAiChat {
    OpenAiChat::new("gpt-test", Dialect::openai())
}

fn decode_all(events: &[&str]) -> Result<Vec<StreamChunk>, ProviderError> {
    let mut decoder = openai().stream_decoder();
    let mut out = Vec::new();
    for data in events {
        decoder.decode("", data, &mut out)?;
    }
    decoder.finish(&mut out)?;
    Ok(out)
}

fn assemble(chunks: Vec<StreamChunk>) -> ModelResponse {
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk).unwrap();
    }
    assembler.finish()
}

#[test]
fn a_round_trip_history_encodes_in_the_native_shape() {
    let history = vec![
        Message::user("What is 1 + 2 and 3 + 4?"),
        Message {
            role: Role::Assistant,
            content: vec![
                Part::Reasoning(Reasoning { text: "two sums".into(), opaque: None }),
                Part::ToolCall(ToolCall {
                    id: "call_a".into(),
                    name: "add".into(),
                    arguments: r#"{"a":1,"b":2}"#.into(),
                }),
                Part::ToolCall(ToolCall {
                    id: "call_b".into(),
                    name: "add".into(),
                    arguments: String::new(),
                }),
            ],
        },
        Message::tool_results([
            ToolResult::ok("call_a", json!(3)),
            ToolResult::error("call_b", "Error: bad"),
        ]),
    ];
    let wire = openai().encode(&request(history), true).unwrap();
    assert_eq!(wire.path, "/chat/completions");
    assert_eq!(
        wire.body,
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": "What is 1 + 2 and 3 + 4?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1,\"b\":2}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "add", "arguments": "{}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_a", "content": "3"},
                {"role": "tool", "tool_call_id": "call_b", "content": "Error: bad"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "add",
                "description": "Adds two integers.",
                "parameters": add_tool().parameters,
            }}],
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
}

#[test]
fn dialects_change_the_instructions_role_limits_and_stream_options() {
    let mut req =
        request(vec![Message::developer("dev"), Message::system("sys"), Message::user("hi")]);
    req.max_tokens = Some(64);
    req.temperature = Some(0.7);
    req.tool_choice = ToolChoice::Required;
    let open = openai().encode(&req, true).unwrap().body;
    assert_eq!(open["messages"][0]["role"], "developer");
    assert_eq!(open["messages"][1]["role"], "developer");
    assert_eq!(open["messages"][2]["role"], "system");
    assert_eq!(open["max_completion_tokens"], 64);
    assert_eq!(open["temperature"].to_string(), "0.7");
    assert_eq!(open["tool_choice"], "required");

    let compat = OpenAiChat::new("m", Compat::llama_cpp().dialect).encode(&req, true).unwrap().body;
    assert_eq!(compat["messages"][0]["role"], "system");
    assert_eq!(compat["messages"][1]["role"], "system");
    assert_eq!(compat["max_tokens"], 64);
    assert!(compat.get("max_completion_tokens").is_none());
    assert_eq!(compat["stream_options"], json!({"include_usage": true}));

    let mistral = OpenAiChat::new("m", Compat::mistral().dialect).encode(&req, true).unwrap().body;
    assert_eq!(mistral["tool_choice"], "any");
    assert!(mistral.get("stream_options").is_none());
    // Not streamed: no stream options.
    let whole = openai().encode(&req, false).unwrap().body;
    assert_eq!(whole["stream"], false);
    assert!(whole.get("stream_options").is_none());
}

#[test]
fn tool_choice_encodings() {
    let mut req = request(vec![Message::user("hi")]);
    assert!(openai().encode(&req, false).unwrap().body.get("tool_choice").is_none());
    req.tool_choice = ToolChoice::None;
    assert_eq!(openai().encode(&req, false).unwrap().body["tool_choice"], "none");
    req.tool_choice = ToolChoice::Named("add".into());
    assert_eq!(
        openai().encode(&req, false).unwrap().body["tool_choice"],
        json!({"type": "function", "function": {"name": "add"}})
    );
    // No tools: neither tools nor tool_choice.
    req.tools = Arc::new(vec![]);
    let body = openai().encode(&req, false).unwrap().body;
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

#[test]
fn images_and_files_become_content_parts() {
    let message = Message {
        role: Role::User,
        content: vec![
            Part::text("Describe these."),
            Part::Image { source: MediaSource::Url { url: "https://example.com/cat.png".into() } },
            Part::Image {
                source: MediaSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
            },
            Part::File {
                source: MediaSource::Base64 {
                    media_type: "application/pdf".into(),
                    data: "JVBERi0=".into(),
                },
                filename: Some("a.pdf".into()),
            },
        ],
    };
    let body = openai().encode(&request(vec![message]), false).unwrap().body;
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "text", "text": "Describe these."},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
        ])
    );
    let url_file = Message {
        role: Role::User,
        content: vec![Part::File {
            source: MediaSource::Url { url: "https://x/a.pdf".into() },
            filename: None,
        }],
    };
    assert!(matches!(
        openai().encode(&request(vec![url_file]), false),
        Err(ProviderError::InvalidRequest { .. })
    ));
}

#[test]
fn a_whole_response_decodes_text_reasoning_calls_and_usage() {
    let body = br#"{"id":"x","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","reasoning_content":"Let me add.","tool_calls":[{"type":"function","function":{"name":"add","arguments":"{\"a\": 1, \"b\": 2}"},"id":"aop7Km7L4DzFzdOjjjbcbeitk9xsabfQ"}]}}],"usage":{"completion_tokens":43,"prompt_tokens":315,"total_tokens":358,"prompt_tokens_details":{"cached_tokens":314},"completion_tokens_details":{"reasoning_tokens":7}}}"#;
    let response = openai().decode_response(body).unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning { text: "Let me add.".into(), opaque: None }),
            Part::ToolCall(ToolCall {
                id: "aop7Km7L4DzFzdOjjjbcbeitk9xsabfQ".into(),
                name: "add".into(),
                arguments: r#"{"a": 1, "b": 2}"#.into()
            }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 315, output: 43, cached_input: 314, reasoning: 7, cache_write_input: 0 }
    );

    let text = openai()
        .decode_response(br#"{"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"Hel"}}]}"#)
        .unwrap();
    assert_eq!(text.message.text(), "Hel");
    assert_eq!(text.finish_reason, FinishReason::Length);
    assert_eq!(text.usage, Usage::default());

    assert!(matches!(
        openai().decode_response(b"{\"choices\":[]}"),
        Err(ProviderError::Protocol { .. })
    ));
    assert!(matches!(openai().decode_response(b"<html>"), Err(ProviderError::Protocol { .. })));
    assert!(matches!(
        openai().decode_response(br#"{"error":{"message":"boom","type":"server_error"}}"#),
        Err(ProviderError::Server { status: 500, .. })
    ));
}

#[test]
fn reasoning_left_out_of_completion_tokens_is_counted_as_output() {
    // xAI's chat API (usage as in vercel/ai's recorded `xai-text.chunks.txt`): total =
    // prompt + completion + reasoning, so completion_tokens leaves the reasoning out.
    let xai = br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Grok"}}],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":354,"prompt_tokens_details":{"cached_tokens":11},"completion_tokens_details":{"reasoning_tokens":340}}}"#;
    let usage = openai().decode_response(xai).unwrap().usage;
    assert_eq!(
        usage,
        Usage { input: 12, output: 342, cached_input: 11, reasoning: 340, cache_write_input: 0 }
    );
    // OpenAI's: completion_tokens holds the reasoning (total = prompt + completion).
    let openai_style = br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":12,"completion_tokens":342,"total_tokens":354,"completion_tokens_details":{"reasoning_tokens":340}}}"#;
    assert_eq!(openai().decode_response(openai_style).unwrap().usage.output, 342);
}

#[test]
fn finish_reasons_map_and_stop_with_calls_is_tool_calls() {
    assert_eq!(finish_reason(Some("stop"), false), FinishReason::Stop);
    assert_eq!(finish_reason(Some("stop"), true), FinishReason::ToolCalls);
    assert_eq!(finish_reason(None, false), FinishReason::Stop);
    assert_eq!(finish_reason(Some("tool_calls"), true), FinishReason::ToolCalls);
    assert_eq!(finish_reason(Some("function_call"), true), FinishReason::ToolCalls);
    assert_eq!(finish_reason(Some("length"), false), FinishReason::Length);
    assert_eq!(finish_reason(Some("content_filter"), false), FinishReason::ContentFilter);
    assert_eq!(finish_reason(Some("eos"), false), FinishReason::Stop);
    assert_eq!(finish_reason(Some("eos"), true), FinishReason::ToolCalls);
    assert_eq!(finish_reason(Some("end_turn"), false), FinishReason::Other("end_turn".into()));
}

#[test]
fn a_together_stream_that_ends_with_eos_is_a_normal_stop() {
    // The shape Together documents for its OpenAI-compatible stream: the last chunk's
    // `finish_reason` is `eos`, with the usage beside it.
    let events = [
        r#"{"id":"8a1d4a3b2c","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.3-70B-Instruct-Turbo","choices":[{"index":0,"text":"Hello","logprobs":null,"finish_reason":null,"seed":null,"delta":{"token_id":9906,"role":"assistant","content":"Hello","tool_calls":null}}],"usage":null}"#,
        r#"{"id":"8a1d4a3b2c","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.3-70B-Instruct-Turbo","choices":[{"index":0,"text":"!","logprobs":null,"finish_reason":"eos","seed":7436293740512,"delta":{"token_id":128009,"role":"assistant","content":"!","tool_calls":null}}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
        "[DONE]",
    ];
    let response = assemble(decode_all(&events).unwrap());
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!(response.message.text(), "Hello!");
    assert_eq!((response.usage.input, response.usage.output), (12, 3));
}

#[test]
fn parallel_tool_calls_stream_in_pieces_keyed_by_index() {
    let events = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"add","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"add","arguments":"{\"a\":3,"}}]}}]}"#,
        // Some servers repeat the id and name in every piece: the call does not start again.
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"add","arguments":"1,\"b\":2}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"b\":4}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":0}}}"#,
        "[DONE]",
    ];
    let chunks = decode_all(&events).unwrap();
    let delta = |id: &str, d: &str| StreamChunk::ToolCallDelta { id: id.into(), delta: d.into() };
    assert_eq!(
        chunks,
        vec![
            StreamChunk::ToolCallStart { id: "call_a".into(), name: "add".into() },
            delta("call_a", "{\"a\":"),
            StreamChunk::ToolCallStart { id: "call_b".into(), name: "add".into() },
            delta("call_b", "{\"a\":3,"),
            delta("call_a", "1,\"b\":2}"),
            delta("call_b", "\"b\":4}"),
            StreamChunk::ToolCallEnd { id: "call_a".into() },
            StreamChunk::ToolCallEnd { id: "call_b".into() },
            StreamChunk::Usage {
                usage: Usage {
                    input: 10,
                    output: 20,
                    cached_input: 4,
                    reasoning: 0,
                    cache_write_input: 0
                }
            },
            StreamChunk::Finish { reason: FinishReason::ToolCalls },
        ]
    );
    let response = assemble(chunks);
    let calls: Vec<_> =
        response.message.tool_calls().map(|c| (c.id.as_str(), c.arguments.as_str())).collect();
    assert_eq!(calls, [("call_a", r#"{"a":1,"b":2}"#), ("call_b", r#"{"a":3,"b":4}"#)]);
}

#[test]
fn reasoning_then_text_and_calls_without_ids_or_names_up_front() {
    let events = [
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"Think"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"ing."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Sure."}}]}"#,
        // No id at all, and the name only in the second piece.
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"add","arguments":"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ];
    let chunks = decode_all(&events).unwrap();
    assert_eq!(
        chunks,
        vec![
            StreamChunk::ReasoningDelta { text: "Think".into() },
            StreamChunk::ReasoningDelta { text: "ing.".into() },
            StreamChunk::ReasoningEnd { opaque: None },
            StreamChunk::TextDelta { text: "Sure.".into() },
            StreamChunk::ToolCallStart { id: "call_0".into(), name: "add".into() },
            StreamChunk::ToolCallDelta { id: "call_0".into(), delta: "{}".into() },
            StreamChunk::ToolCallEnd { id: "call_0".into() },
            StreamChunk::Finish { reason: FinishReason::ToolCalls },
        ]
    );
}

#[test]
fn the_llama_cpp_tool_call_stream_decodes() {
    // From a real llama-server transcript: no `call_` prefix, `content: null` first.
    let events = [
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"id":"RFxG5h1gSvYOxxE1ik2pVikIinn1ZPZ4","type":"function","function":{"name":"calculator","arguments":"{"}}]}}]}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a\": 17}"}}]}}]}"#,
        r#"{"choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}],"timings":{"cache_n":314}}"#,
        "[DONE]",
    ];
    let response = assemble(decode_all(&events).unwrap());
    let call = response.message.tool_calls().next().unwrap().clone();
    assert_eq!(call.id, "RFxG5h1gSvYOxxE1ik2pVikIinn1ZPZ4");
    assert_eq!(call.name, "calculator");
    assert_eq!(call.arguments, r#"{"a": 17}"#);
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
}

#[test]
fn cut_short_and_malformed_streams_fail() {
    let cut = decode_all(&[r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#]);
    assert!(matches!(cut, Err(ProviderError::Network { .. })), "{cut:?}");
    // A finish reason without [DONE] is a complete answer.
    let no_done = decode_all(&[
        r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}"#,
    ])
    .unwrap();
    assert_eq!(no_done.last(), Some(&StreamChunk::Finish { reason: FinishReason::Stop }));
    let bad = decode_all(&[r#"{"choices":[{"index":0,"delta":{"content":"Hi"}"#]);
    let Err(ProviderError::Protocol { excerpt, .. }) = bad else { panic!("{bad:?}") };
    assert!(excerpt.starts_with(r#"{"choices""#));
    let error =
        decode_all(&[r#"{"error":{"message":"The server had an error","type":"server_error"}}"#]);
    assert!(matches!(error, Err(ProviderError::Server { status: 500, .. })), "{error:?}");
    let nameless = decode_all(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert!(matches!(nameless, Err(ProviderError::Protocol { .. })), "{nameless:?}");
}

#[test]
fn context_overflow_and_quota_errors_are_recognised() {
    let generic = |message: &str| ProviderError::InvalidRequest { message: message.into() };
    let format = openai();
    let llama = r#"{"error":{"code":400,"message":"request (3032 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3032,"n_ctx":2048}}"#;
    assert_eq!(
        format.classify_error(400, llama, generic("request (3032 tokens) exceeds the available context size (2048 tokens), try increasing it")),
        ProviderError::ContextLengthExceeded {
            message: "request (3032 tokens) exceeds the available context size (2048 tokens), try increasing it".into()
        }
    );
    let openai_body = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    assert!(matches!(
        format.classify_error(400, openai_body, generic("x")),
        ProviderError::ContextLengthExceeded { .. }
    ));
    let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}"#;
    assert!(matches!(
        format.classify_error(400, vllm, generic("x")),
        ProviderError::ContextLengthExceeded { .. }
    ));
    let other = r#"{"error":{"message":"Expected 'messages' to be an array","type":"invalid_request_error"}}"#;
    assert_eq!(format.classify_error(400, other, generic("x")), generic("x"));
    let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
    let limited = ProviderError::RateLimited {
        message: "You exceeded your current quota".into(),
        retry_after_ms: None,
    };
    let refined = format.classify_error(429, quota, limited);
    assert!(
        matches!(refined, ProviderError::Other { .. }) && !refined.is_retryable(),
        "{refined:?}"
    );
}

#[test]
fn stream_errors_map_by_code() {
    assert!(matches!(
        stream_error(&json!({"code": "rate_limit_exceeded", "message": "m"})),
        ProviderError::RateLimited { .. }
    ));
    assert!(matches!(
        stream_error(&json!({"type": "overloaded_error", "message": "m"})),
        ProviderError::Overloaded { .. }
    ));
    assert!(matches!(
        stream_error(&json!({"code": 503, "message": "m"})),
        ProviderError::Server { status: 503, .. }
    ));
    assert!(matches!(
        stream_error(&json!({"code": "context_length_exceeded", "message": "m"})),
        ProviderError::ContextLengthExceeded { .. }
    ));
    assert!(matches!(
        stream_error(&json!({"code": "weird", "message": "m"})),
        ProviderError::Other { .. }
    ));
}

#[test]
fn presets_are_configuration() {
    let presets = [
        Compat::openai(),
        Compat::ollama(),
        Compat::vllm(),
        Compat::llama_cpp(),
        Compat::lm_studio(),
        Compat::litellm(),
        Compat::openrouter(),
        Compat::groq(),
        Compat::together(),
        Compat::deepseek(),
        Compat::mistral(),
    ];
    let names: Vec<&str> = presets.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "openai",
            "ollama",
            "vllm",
            "llama.cpp",
            "lm-studio",
            "litellm",
            "openrouter",
            "groq",
            "together",
            "deepseek",
            "mistral"
        ]
    );
    for preset in presets {
        let config = preset.clone().require_api_key(false).config("m");
        assert_eq!(config.model(), "m");
        let provider = OpenAi::chat_with(config, preset.dialect.clone()).unwrap();
        assert!(provider.base_url().starts_with("http"), "{}", preset.name);
        assert_eq!(provider.format().dialect(), &preset.dialect);
    }
    let custom =
        Compat::custom("http://10.1.2.3:9000/v1").header("x-team", "a").api_key_env("MY_KEY");
    let provider = OpenAi::compatible(custom, "m").unwrap();
    assert_eq!(provider.base_url(), "http://10.1.2.3:9000/v1");
    assert!(!Compat::llama_cpp().dialect.developer_role);
    assert!(Compat::openai().dialect.developer_role);
}

#[test]
fn a_tool_result_with_json_content_is_sent_as_compact_json() {
    let history = vec![
        Message::user("hi"),
        Message {
            role: Role::Assistant,
            content: vec![
                Part::text("Let me."),
                Part::ToolCall(ToolCall {
                    id: "c".into(),
                    name: "add".into(),
                    arguments: "{}".into(),
                }),
            ],
        },
        Message::tool_results([ToolResult {
            call_id: "c".into(),
            content: ToolResultContent::Json(json!({"sum": 3})),
            is_error: false,
        }]),
    ];
    let body = openai().encode(&request(history), false).unwrap().body;
    assert_eq!(body["messages"][2]["content"], "Let me.");
    assert_eq!(body["messages"][3]["content"], r#"{"sum":3}"#);
}

/// The `ResponseInfo` chunks of a stream.
fn infos(chunks: &[StreamChunk]) -> Vec<&StreamChunk> {
    chunks.iter().filter(|c| matches!(c, StreamChunk::ResponseInfo { .. })).collect()
}

#[test]
fn the_completion_id_and_model_reach_the_response() {
    use crate::provider::anthropic::testutil::{decode_chunks, fixture};
    // Every chunk repeats them: they are reported once, before the content.
    let chunks =
        decode_chunks(openai().stream_decoder(), &fixture("openai", "text_stream.sse")).unwrap();
    let info = StreamChunk::ResponseInfo {
        id: Some("chatcmpl-AbC123".into()),
        model: Some("gpt-4.1-2025-04-14".into()),
    };
    assert_eq!(infos(&chunks), [&info]);
    assert_eq!(chunks.first(), Some(&info));
    let streamed = assemble(chunks);
    assert_eq!(streamed.id.as_deref(), Some("chatcmpl-AbC123"));
    assert_eq!(streamed.model.as_deref(), Some("gpt-4.1-2025-04-14"));

    let whole = openai().decode_response(fixture("openai", "text.json").as_bytes()).unwrap();
    assert_eq!(whole.id.as_deref(), Some("chatcmpl-AbC124"));
    assert_eq!(whole.model.as_deref(), Some("gpt-4.1-2025-04-14"));

    // llama.cpp, streamed and whole.
    let llama = "llama_cpp_tool_call_stream.sse";
    let streamed =
        assemble(decode_chunks(openai().stream_decoder(), &fixture("openai", llama)).unwrap());
    assert_eq!(streamed.id.as_deref(), Some("chatcmpl-GSU4Lb4Hyp3FQPKrS3O7CPtGaX0bFNF1"));
    assert_eq!(streamed.model.as_deref(), Some("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    let body = fixture("openai", "llama_cpp_tool_call.json");
    let whole = openai().decode_response(body.as_bytes()).unwrap();
    assert_eq!(whole.id.as_deref(), Some("chatcmpl-6JTGwLdbwmXcTMfWIczBMpJqwnUth3oe"));
    assert_eq!(whole.model.as_deref(), Some("models/SmolLM2-135M-Instruct.Q4_1.gguf"));

    // Servers that send neither (or empty strings): nothing reported.
    let chunks = decode_all(&[
        r#"{"id":"","model":"","choices":[{"index":0,"delta":{"content":"Hi"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ])
    .unwrap();
    assert!(infos(&chunks).is_empty());
    let response = assemble(chunks);
    assert_eq!((response.id, response.model), (None, None));
    let whole = openai()
        .decode_response(br#"{"choices":[{"index":0,"message":{"content":"Hi"}}]}"#)
        .unwrap();
    assert_eq!((whole.id, whole.model), (None, None));
}

#[test]
fn url_citations_come_after_the_text_streamed_and_whole_alike() {
    // OpenAI's chat annotations (the shape of vercel/ai's chat test of them).
    let annotation = r#"{"type":"url_citation","url_citation":{"start_index":24,"end_index":29,"url":"https://example.com/doc1.pdf","title":"Document 1"}}"#;
    let streamed = assemble(
        decode_all(&[
            r#"{"id":"c","choices":[{"index":0,"delta":{"content":"Based on the search results [doc1], I found it."}}]}"#,
            &format!(r#"{{"id":"c","choices":[{{"index":0,"delta":{{"annotations":[{annotation}]}}}}]}}"#),
            r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        .unwrap(),
    );
    let body = format!(
        r#"{{"id":"c","choices":[{{"index":0,"finish_reason":"stop","message":{{"role":"assistant","content":"Based on the search results [doc1], I found it.","annotations":[{annotation}]}}}}]}}"#
    );
    let whole = openai().decode_response(body.as_bytes()).unwrap();
    assert_eq!(streamed.message, whole.message);
    let Some(Part::Citation(citation)) = whole.message.content.get(1) else {
        panic!("no citation after the text: {:?}", whole.message.content);
    };
    assert_eq!(citation.url.as_deref(), Some("https://example.com/doc1.pdf"));
    assert_eq!(citation.title.as_deref(), Some("Document 1"));
    assert_eq!((citation.start, citation.end), (Some(24), Some(29)));
    assert_eq!(citation.provider, FAMILY);
    // Citations are the server's, not sent back on the chat wire.
    let request = request(vec![Message::user("q"), whole.message, Message::user("more")]);
    let encoded = openai().encode(&request, false).unwrap().body.to_string();
    assert!(!encoded.contains("doc1.pdf"), "{encoded}");
}

#[test]
fn signed_reasoning_details_stream_in_fragments_and_go_back_with_the_turn() {
    // OpenRouter's documented stream for an Anthropic model with reasoning: `reasoning` text
    // beside `reasoning_details` fragments of one `reasoning.text` item (index 0), whose last
    // fragment brings the signature; then a tool call.
    let events = [
        r#"{"id":"gen-1","model":"anthropic/claude-sonnet-4.5","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"The user wants","reasoning_details":[{"type":"reasoning.text","text":"The user wants","format":"anthropic-claude-v1","index":0}]}}]}"#,
        r#"{"id":"gen-1","model":"anthropic/claude-sonnet-4.5","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":" a sum.","reasoning_details":[{"type":"reasoning.text","text":" a sum.","format":"anthropic-claude-v1","index":0}]}}]}"#,
        r#"{"id":"gen-1","model":"anthropic/claude-sonnet-4.5","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_details":[{"type":"reasoning.text","signature":"EqoBCkgIARABGAIiQL2s","format":"anthropic-claude-v1","index":0}]}}]}"#,
        r#"{"id":"gen-1","model":"anthropic/claude-sonnet-4.5","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"toolu_01","type":"function","function":{"name":"add","arguments":"{\"a\":1,\"b\":2}"}}]}}]}"#,
        r#"{"id":"gen-1","model":"anthropic/claude-sonnet-4.5","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":60,"completion_tokens":40,"total_tokens":100}}"#,
        "[DONE]",
    ];
    let response = assemble(decode_all(&events).unwrap());
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.message.reasoning_text(), "The user wants a sum.");
    let item = json!({"type": "reasoning.text", "text": "The user wants a sum.",
                      "format": "anthropic-claude-v1", "index": 0,
                      "signature": "EqoBCkgIARABGAIiQL2s"});

    // The next request carries the item back with the assistant turn, whole.
    let history = vec![
        Message::user("1 + 2?"),
        response.message.clone(),
        Message::tool_results([ToolResult::ok("toolu_01", "3")]),
    ];
    let encoded = openai().encode(&request(history), true).unwrap().body;
    let assistant = &encoded["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["reasoning_details"], json!([item]));

    // Whole (not streamed), the items are taken as they are; with no `reasoning` string, their
    // text is the reasoning.
    let whole = format!(
        r#"{{"choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":null,"reasoning_details":[{item}],"tool_calls":[{{"id":"toolu_01","type":"function","function":{{"name":"add","arguments":"{{}}"}}}}]}}}}]}}"#
    );
    let response = openai().decode_response(whole.as_bytes()).unwrap();
    assert_eq!(response.message.reasoning_text(), "The user wants a sum.");
    let history = vec![Message::user("1 + 2?"), response.message];
    let encoded = openai().encode(&request(history), true).unwrap().body;
    assert_eq!(encoded["messages"][2]["reasoning_details"], json!([item]));
}
