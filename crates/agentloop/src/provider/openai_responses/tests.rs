#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::ToolResult;
use crate::provider::openai::Compat;
use crate::provider::{ResponseAssembler, StreamChunk};
use crate::tool::ToolSpec;
use std::sync::Arc;

fn add_tool() -> ToolSpec {
    ToolSpec {
        name: "add".into(),
        description: "Adds two integers.".into(),
        parameters: json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
    }
}

fn format() -> OpenAiResponses {
    OpenAiResponses::new("gpt-test", Dialect::openai())
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        instructions: Some("Be brief.".into()),
        messages: Arc::new(messages),
        tools: Arc::new(vec![add_tool()]),
        ..ModelRequest::default()
    }
}

/// Decodes `(event name, data)` pairs; the name is also in `type`, as servers send it.
fn decode_all(events: &[Value]) -> Result<Vec<StreamChunk>, ProviderError> {
    let mut decoder = format().stream_decoder();
    let mut out = Vec::new();
    for event in events {
        let name = event["type"].as_str().unwrap_or_default().to_owned();
        decoder.decode(&name, &event.to_string(), &mut out)?;
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

fn reasoning_item() -> Value {
    json!({
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Adding."}],
        "encrypted_content": "gAAAAB...",
        "status": "completed",
    })
}

#[test]
fn a_round_trip_history_encodes_as_items_with_reasoning_sent_back() {
    let history = vec![
        Message::user("What is 1 + 2?"),
        Message {
            role: Role::Assistant,
            content: vec![
                Part::Reasoning(Reasoning {
                    text: "Adding.".into(),
                    opaque: Some(reasoning_item()),
                }),
                Part::Reasoning(Reasoning { text: "from another provider".into(), opaque: None }),
                Part::text("Let me add."),
                Part::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "add".into(),
                    arguments: r#"{"a":1}"#.into(),
                }),
            ],
        },
        Message::tool_results([ToolResult::ok("call_1", json!(3))]),
    ];
    let wire = format().encode(&request(history), true).unwrap();
    assert_eq!(wire.path, "/responses");
    assert_eq!(
        wire.body,
        json!({
            "model": "gpt-test",
            "instructions": "Be brief.",
            "input": [
                {"type": "message", "role": "user", "content": "What is 1 + 2?"},
                {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Adding."}], "encrypted_content": "gAAAAB..."},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me add."}]},
                {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":1}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "3"},
            ],
            "tools": [{"type": "function", "name": "add", "description": "Adds two integers.", "parameters": add_tool().parameters, "strict": false}],
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "stream": true,
        })
    );
}

#[test]
fn the_compatible_dialect_sends_no_store_nor_include_and_never_a_previous_response_id() {
    let mut req = request(vec![Message::developer("dev"), Message::user("hi")]);
    req.max_tokens = Some(32);
    req.tool_choice = ToolChoice::Named("add".into());
    let body =
        OpenAiResponses::new("m", Compat::llama_cpp().dialect).encode(&req, false).unwrap().body;
    assert!(body.get("store").is_none() && body.get("include").is_none());
    assert!(body.get("previous_response_id").is_none());
    assert_eq!(body["input"][0]["role"], "system");
    assert_eq!(body["max_output_tokens"], 32);
    assert_eq!(body["tool_choice"], json!({"type": "function", "name": "add"}));
    assert_eq!(body["stream"], false);
    req.tool_choice = ToolChoice::Required;
    assert_eq!(format().encode(&req, false).unwrap().body["tool_choice"], "required");
    req.tool_choice = ToolChoice::None;
    assert_eq!(format().encode(&req, false).unwrap().body["tool_choice"], "none");
    assert_eq!(format().encode(&req, false).unwrap().body["input"][0]["role"], "developer");
}

#[test]
fn images_and_files_become_input_parts() {
    let message = Message {
        role: Role::User,
        content: vec![
            Part::text("Look."),
            Part::Image {
                source: MediaSource::Base64 { media_type: "image/png".into(), data: "iVBO".into() },
            },
            Part::File {
                source: MediaSource::Url { url: "https://x/a.pdf".into() },
                filename: Some("a.pdf".into()),
            },
        ],
    };
    let body = format().encode(&request(vec![message]), false).unwrap().body;
    assert_eq!(
        body["input"][0]["content"],
        json!([
            {"type": "input_text", "text": "Look."},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBO", "detail": "auto"},
            {"type": "input_file", "file_url": "https://x/a.pdf", "filename": "a.pdf"},
        ])
    );
}

#[test]
fn a_whole_response_decodes_reasoning_text_calls_and_usage() {
    let body = json!({
        "id": "resp_1", "object": "response", "status": "completed",
        "output": [
            reasoning_item(),
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "annotations": [], "text": "Adding."}]},
            {"id": "fc_1", "type": "function_call", "status": "completed", "arguments": "{\"a\": 1}",
             "call_id": "call_1", "name": "add"},
        ],
        "usage": {"input_tokens": 315, "output_tokens": 43, "total_tokens": 358,
                  "input_tokens_details": {"cached_tokens": 314}, "output_tokens_details": {"reasoning_tokens": 12}},
    });
    let response = format().decode_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning { text: "Adding.".into(), opaque: Some(reasoning_item()) }),
            Part::text("Adding."),
            Part::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "add".into(),
                arguments: "{\"a\": 1}".into()
            }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage { input: 315, output: 43, cached_input: 314, reasoning: 12, cache_write_input: 0 }
    );

    let incomplete = json!({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []});
    assert_eq!(
        format().decode_response(incomplete.to_string().as_bytes()).unwrap().finish_reason,
        FinishReason::Length
    );
    let filtered = json!({"status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []});
    assert_eq!(
        format().decode_response(filtered.to_string().as_bytes()).unwrap().finish_reason,
        FinishReason::ContentFilter
    );
    let failed = json!({"status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []});
    assert!(matches!(
        format().decode_response(failed.to_string().as_bytes()),
        Err(ProviderError::Server { .. })
    ));
    assert!(matches!(format().decode_response(b"[1,2"), Err(ProviderError::Protocol { .. })));
}

fn added_call(index: u64, item_id: &str, call_id: &str) -> Value {
    json!({"type": "response.output_item.added", "output_index": index,
           "item": {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id, "name": "add"}})
}

fn args_delta(index: u64, item_id: &str, delta: &str) -> Value {
    json!({"type": "response.function_call_arguments.delta", "output_index": index, "item_id": item_id, "delta": delta})
}

fn item_done(index: u64, item_id: &str, call_id: &str, arguments: &str) -> Value {
    json!({"type": "response.output_item.done", "output_index": index,
           "item": {"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments, "call_id": call_id, "name": "add"}})
}

fn completed(usage: Value) -> Value {
    json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "usage": usage}})
}

#[test]
fn parallel_calls_stream_in_pieces_with_or_without_arguments_done() {
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}),
        added_call(0, "fc_a", "call_a"),
        args_delta(0, "fc_a", "{\"a\":"),
        args_delta(0, "fc_a", "1}"),
        json!({"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_a", "arguments": "{\"a\":1}"}),
        item_done(0, "fc_a", "call_a", "{\"a\":1}"),
        added_call(1, "fc_b", "call_b"),
        // llama.cpp: deltas carry only `item_id`, and no `arguments.done` follows.
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_b", "delta": "{\"a\":"}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc_b", "delta": "2}"}),
        item_done(1, "fc_b", "call_b", "{\"a\":2}"),
        completed(json!({"input_tokens": 5, "output_tokens": 6})),
    ];
    let chunks = decode_all(&events).unwrap();
    let delta = |id: &str, d: &str| StreamChunk::ToolCallDelta { id: id.into(), delta: d.into() };
    assert_eq!(
        chunks,
        vec![
            StreamChunk::ResponseInfo { id: Some("resp_1".into()), model: None },
            StreamChunk::ToolCallStart { id: "call_a".into(), name: "add".into() },
            delta("call_a", "{\"a\":"),
            delta("call_a", "1}"),
            StreamChunk::ToolCallEnd { id: "call_a".into() },
            StreamChunk::ToolCallStart { id: "call_b".into(), name: "add".into() },
            delta("call_b", "{\"a\":"),
            delta("call_b", "2}"),
            StreamChunk::ToolCallEnd { id: "call_b".into() },
            StreamChunk::Usage {
                usage: Usage {
                    input: 5,
                    output: 6,
                    cached_input: 0,
                    reasoning: 0,
                    cache_write_input: 0
                }
            },
            StreamChunk::Finish { reason: FinishReason::ToolCalls },
        ]
    );
}

#[test]
fn arguments_missing_from_the_deltas_come_from_the_done_events() {
    let events = [
        added_call(0, "fc_a", "call_a"),
        args_delta(0, "fc_a", "{\"a\""),
        json!({"type": "response.function_call_arguments.done", "output_index": 0, "item_id": "fc_a", "arguments": "{\"a\":1}"}),
        // An item that was never announced.
        item_done(1, "fc_b", "call_b", "{}"),
        completed(json!(null)),
    ];
    let response = assemble(decode_all(&events).unwrap());
    let calls: Vec<_> =
        response.message.tool_calls().map(|c| (c.id.clone(), c.arguments.clone())).collect();
    assert_eq!(
        calls,
        [("call_a".to_owned(), "{\"a\":1}".to_owned()), ("call_b".to_owned(), "{}".to_owned())]
    );
}

#[test]
fn reasoning_summaries_and_text_stream_and_the_reasoning_item_is_kept() {
    let events = [
        json!({"type": "response.output_item.added", "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 0, "delta": "Add"}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 0, "delta": "ing."}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "summary_index": 1, "delta": "Done."}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning_item()}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": "msg_1", "type": "message", "content": []}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "Hel"}),
        json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "content_index": 0, "delta": "lo"}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": "msg_1", "type": "message", "content": [{"type": "output_text", "text": "Hello"}]}}),
        completed(
            json!({"input_tokens": 1, "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 9}}),
        ),
    ];
    let response = assemble(decode_all(&events).unwrap());
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning {
                text: "Adding.\n\nDone.".into(),
                opaque: Some(reasoning_item())
            }),
            Part::text("Hello"),
        ]
    );
    assert_eq!(response.usage.reasoning, 9);
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

#[test]
fn unstreamed_items_still_deliver_their_content() {
    let events = [
        json!({"type": "response.output_item.done", "item": reasoning_item()}),
        json!({"type": "response.output_item.done", "item": {"id": "msg_1", "type": "message", "content": [{"type": "output_text", "text": "Whole"}]}}),
        completed(json!(null)),
    ];
    let response = assemble(decode_all(&events).unwrap());
    assert_eq!(response.message.reasoning_text(), "Adding.");
    assert_eq!(response.message.text(), "Whole");
}

#[test]
fn incomplete_failed_error_and_cut_short_streams() {
    let incomplete = decode_all(&[
        json!({"type": "response.output_text.delta", "item_id": "m", "delta": "Hel"}),
        json!({"type": "response.incomplete", "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}),
    ])
    .unwrap();
    assert_eq!(incomplete.last(), Some(&StreamChunk::Finish { reason: FinishReason::Length }));
    let failed = decode_all(&[
        json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow"}}}),
    ]);
    assert!(matches!(failed, Err(ProviderError::RateLimited { .. })), "{failed:?}");
    let error = decode_all(&[
        json!({"type": "error", "code": "context_length_exceeded", "message": "too long", "param": null}),
    ]);
    assert_eq!(error, Err(ProviderError::ContextLengthExceeded { message: "too long".into() }));
    let cut = decode_all(&[
        json!({"type": "response.output_text.delta", "item_id": "m", "delta": "Hel"}),
    ]);
    assert!(matches!(cut, Err(ProviderError::Network { .. })), "{cut:?}");
    let orphan = decode_all(&[args_delta(0, "fc_x", "{")]);
    assert!(matches!(orphan, Err(ProviderError::Protocol { .. })), "{orphan:?}");
    let mut decoder = format().stream_decoder();
    let bad = decoder.decode(
        "response.output_text.delta",
        "{\"type\": \"response.output",
        &mut Vec::new(),
    );
    assert!(matches!(bad, Err(ProviderError::Protocol { .. })));
}

#[test]
fn the_response_id_and_model_reach_the_response() {
    use crate::provider::anthropic::testutil::{decode_chunks, fixture};
    let fx = |name: &str| fixture("openai_responses", name);
    let infos = |chunks: &[StreamChunk]| -> Vec<StreamChunk> {
        chunks.iter().filter(|c| matches!(c, StreamChunk::ResponseInfo { .. })).cloned().collect()
    };
    // OpenAI: both in `response.created`, reported once.
    let chunks = decode_chunks(format().stream_decoder(), &fx("text_stream.sse")).unwrap();
    let info = StreamChunk::ResponseInfo {
        id: Some("resp_68a1".into()),
        model: Some("gpt-5-2025-08-07".into()),
    };
    assert_eq!(chunks.first(), Some(&info));
    assert_eq!(infos(&chunks), [info]);
    let streamed = assemble(chunks);
    assert_eq!(streamed.id.as_deref(), Some("resp_68a1"));
    assert_eq!(streamed.model.as_deref(), Some("gpt-5-2025-08-07"));

    // llama.cpp: the id up front, the model only in `response.completed`.
    let chunks =
        decode_chunks(format().stream_decoder(), &fx("llama_cpp_text_stream.sse")).unwrap();
    let id = "resp_YmiF0h9D8KBIyYxOvzXvdpHhjvnvd7IH";
    let model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    assert_eq!(
        infos(&chunks),
        [
            StreamChunk::ResponseInfo { id: Some(id.into()), model: None },
            StreamChunk::ResponseInfo { id: None, model: Some(model.into()) },
        ]
    );
    let streamed = assemble(chunks);
    assert_eq!((streamed.id.as_deref(), streamed.model.as_deref()), (Some(id), Some(model)));

    // Whole responses.
    let whole = format().decode_response(fx("tool_call.json").as_bytes()).unwrap();
    assert_eq!(whole.id.as_deref(), Some("resp_68a1"));
    assert_eq!(whole.model.as_deref(), Some("gpt-5-2025-08-07"));
    let whole = format().decode_response(fx("llama_cpp_tool_call.json").as_bytes()).unwrap();
    assert_eq!(whole.id.as_deref(), Some("resp_VZe7ExEWCD8lmdoNUpii3XG0CH2tifl5"));
    assert_eq!(whole.model.as_deref(), Some(model));

    // Only in `response.completed` (no `response.created`): taken from there.
    let chunks = decode_all(&[
        json!({"type": "response.output_text.delta", "item_id": "m", "delta": "Hi"}),
        json!({"type": "response.completed", "response": {"id": "resp_2", "model": "m-1", "status": "completed"}}),
    ])
    .unwrap();
    let response = assemble(chunks);
    assert_eq!((response.id.as_deref(), response.model.as_deref()), (Some("resp_2"), Some("m-1")));
}

/// A response of `items`, streamed (each item added, a text delta for each part of a
/// message, each item done) and whole.
fn streamed_and_whole(items: &[Value]) -> (ModelResponse, ModelResponse) {
    let mut events = vec![json!({"type": "response.created", "response": {"id": "r"}})];
    for (index, item) in items.iter().enumerate() {
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        if item["type"] == "message" {
            for (part, text) in item["content"].as_array().unwrap().iter().enumerate() {
                events.push(json!({"type": "response.output_text.delta", "item_id": item["id"], "output_index": index, "content_index": part, "delta": text["text"]}));
            }
        }
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    events.push(json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": items}}));
    let streamed = assemble(decode_all(&events).unwrap());
    let body = json!({"id": "r", "status": "completed", "output": items}).to_string();
    (streamed, format().decode_response(body.as_bytes()).unwrap())
}

#[test]
fn texts_of_several_messages_are_apart_the_same_way_streamed_and_whole() {
    let message = |id: &str, texts: &[&str]| {
        let content: Vec<Value> =
            texts.iter().map(|t| json!({"type": "output_text", "text": t})).collect();
        json!({"type": "message", "id": id, "role": "assistant", "content": content})
    };
    let call = json!({"type": "function_call", "id": "fc", "call_id": "c", "name": "add", "arguments": "{}"});
    let items = [
        message("m1", &["Looking it up.", "One moment."]),
        message("m2", &["Found it."]),
        call.clone(),
        message("m3", &["Done."]),
    ];
    let (streamed, whole) = streamed_and_whole(&items);
    assert_eq!(streamed.message.content, whole.message.content);
    let texts: Vec<&str> = whole
        .message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Looking it up.\n\nOne moment.\n\nFound it.", "Done."]);
}

#[test]
fn messages_with_a_phase_keep_it_streamed_and_whole_and_go_back_as_they_came() {
    let message = |id: &str, phase: &str, text: &str| {
        json!({"type": "message", "id": id, "role": "assistant", "phase": phase, "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    let call = json!({"type": "function_call", "id": "fc", "call_id": "c", "name": "add", "arguments": "{}"});
    let items = [
        message("m1", "commentary", "Looking it up."),
        message("m2", "commentary", "Still looking."),
        call.clone(),
        message("m3", "final_answer", "Done."),
    ];
    let (streamed, whole) = streamed_and_whole(&items);
    assert_eq!(streamed.message.content, whole.message.content);
    // Paragraphs apart as without a phase; each message's marker after its text.
    assert_eq!(whole.message.text(), "Looking it up.\n\nStill looking.\nDone.");
    let markers: Vec<&Value> = whole
        .message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Opaque(o) if o.kind == "message" => Some(&o.value),
            _ => None,
        })
        .collect();
    assert_eq!(
        markers,
        [
            &json!({"type": "message", "id": "m1", "role": "assistant", "phase": "commentary"}),
            &json!({"type": "message", "id": "m2", "role": "assistant", "phase": "commentary"}),
            &json!({"type": "message", "id": "m3", "role": "assistant", "phase": "final_answer"}),
        ]
    );
    // The next request: the same items (less their status and empty annotations), in order.
    let history = vec![Message::user("Go."), whole.message, Message::user("And?")];
    let body = format().encode(&request(history), false).unwrap().body;
    let sent: Vec<Value> = body["input"].as_array().unwrap()[1..5].to_vec();
    let expected: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut item = item.clone();
            item.as_object_mut().unwrap().remove("status");
            if item["type"] == "function_call" {
                // A call goes back by its call id.
                item.as_object_mut().unwrap().remove("id");
            }
            if item["type"] == "message" {
                item["content"][0].as_object_mut().unwrap().remove("annotations");
            }
            item
        })
        .collect();
    assert_eq!(sent, expected);
}
