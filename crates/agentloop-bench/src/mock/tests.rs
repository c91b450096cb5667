#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use agentloop::message::{FinishReason, Part};
use agentloop::provider::openai::{Dialect, OpenAiChat};
use agentloop::provider::sse::chunk_stream;
use agentloop::provider::wire::WireFormat;
use agentloop::provider::{ResponseAssembler, StreamChunk};
use futures::StreamExt;
use std::time::Duration;

const USAGE: Usage = Usage { prompt: 100, completion: 50 };

fn format() -> OpenAiChat {
    OpenAiChat::new("bench-k2-p2-l0", Dialect::openai())
}

#[test]
fn json_bodies_decode_as_chat_completions() {
    let response =
        format().decode_response(json_body(7, "bench-k2-p2-l0", 2, USAGE).as_bytes()).unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].id, "call_7_1");
    assert_eq!(calls[1].name, "add");
    assert_eq!(calls[1].arguments, r#"{"a":1,"b":2}"#);
    assert_eq!(response.usage.input, 100);
    assert_eq!(response.usage.output, 50);

    let text =
        format().decode_response(json_body(8, "bench-k2-p2-l0", 0, USAGE).as_bytes()).unwrap();
    assert_eq!(text.finish_reason, FinishReason::Stop);
    assert_eq!(text.message.content, vec![Part::Text { text: FINAL_ANSWER.into() }]);
}

async fn decode_sse(body: String) -> Vec<StreamChunk> {
    let bytes = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(body))]);
    let stream = chunk_stream(bytes, Duration::from_secs(1), format().stream_decoder(), |e| {
        agentloop::provider::ProviderError::Network { message: e.to_string() }
    });
    stream.map(|c| c.unwrap()).collect().await
}

#[tokio::test]
async fn sse_bodies_decode_to_the_same_turns() {
    let chunks = decode_sse(sse_body(7, "bench-k2-p2-l0", 2, USAGE)).await;
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk).unwrap();
    }
    let streamed = assembler.finish();
    let whole =
        format().decode_response(json_body(7, "bench-k2-p2-l0", 2, USAGE).as_bytes()).unwrap();
    assert_eq!(streamed, whole);

    assert_eq!(streamed.id.as_deref(), Some("chatcmpl-7"));
    assert_eq!(streamed.model.as_deref(), Some("bench-k2-p2-l0"));

    let chunks = decode_sse(sse_body(8, "bench-k2-p2-l0", 0, USAGE)).await;
    let info = StreamChunk::ResponseInfo {
        id: Some("chatcmpl-8".into()),
        model: Some("bench-k2-p2-l0".into()),
    };
    assert_eq!(chunks[..2], [info, StreamChunk::TextDelta { text: FINAL_ANSWER.into() }]);
    assert_eq!(chunks.last(), Some(&StreamChunk::Finish { reason: FinishReason::Stop }));
}

#[test]
fn requests_are_read_for_the_script_and_the_tool_results() {
    let body = br#"{"model":"bench-k3-p1-l0","stream":true,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","tool_call_id":"c","content":"3"}]}"#;
    let (turns, stream, results, len) = read_request(body).unwrap();
    assert_eq!(turns, Turns::Script(Script::new(3, 1, 0)));
    assert!(stream);
    assert_eq!(results, 1);
    assert_eq!(len, body.len() as u64);
    assert!(read_request(b"{").unwrap_err().contains("invalid chat request"));
    assert!(read_request(br#"{"model":"gpt","messages":[]}"#).is_err());
}

#[tokio::test]
async fn the_recorded_turns_are_a_streamed_call_then_a_streamed_answer() {
    let body =
        br#"{"model":"bench-recorded","stream":true,"messages":[{"role":"user","content":"go"}]}"#;
    let (turns, stream, results, _) = read_request(body).unwrap();
    assert_eq!((turns, stream, results), (Turns::Recorded, true, 0));

    let mut call = ResponseAssembler::default();
    let chunks = decode_sse(recorded_turn(0).to_owned()).await;
    // A token a chunk, as llama.cpp streams: 22 events, the arguments in 18 pieces.
    assert!(chunks.len() > 18, "{} chunks", chunks.len());
    for chunk in chunks {
        call.push(chunk).unwrap();
    }
    let call = call.finish();
    assert_eq!(call.finish_reason, FinishReason::ToolCalls);
    let calls: Vec<_> = call.message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "calculator");
    let arguments: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert_eq!(arguments, serde_json::json!({"operation": "multiply", "a": 17, "b": 23}));

    let mut answer = ResponseAssembler::default();
    for chunk in decode_sse(recorded_turn(1).to_owned()).await {
        answer.push(chunk).unwrap();
    }
    let answer = answer.finish();
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    // What the 135M model answered (17 × 23 is 391): the bench replays it, right or not.
    assert_eq!(
        answer.message.content,
        vec![Part::Text { text: "17 multiplied by 23 is 341.".into() }]
    );
}
