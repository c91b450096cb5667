#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{Part, Reasoning, ToolCall};
use serde_json::json;

fn assemble(chunks: Vec<StreamChunk>) -> Result<ModelResponse, ProviderError> {
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk)?;
    }
    Ok(assembler.finish())
}

fn text(text: &str) -> StreamChunk {
    StreamChunk::TextDelta { text: text.into() }
}

#[test]
fn deltas_join_into_parts() {
    let response = assemble(vec![
        StreamChunk::ReasoningDelta { text: "thi".into() },
        StreamChunk::ReasoningDelta { text: "nk".into() },
        StreamChunk::ReasoningEnd { opaque: Some(json!("sig")) },
        text("Hel"),
        text("lo"),
        StreamChunk::ToolCallStart { id: "1".into(), name: "add".into() },
        StreamChunk::ToolCallStart { id: "2".into(), name: "mul".into() },
        StreamChunk::ToolCallDelta { id: "1".into(), delta: "{\"a\":".into() },
        StreamChunk::ToolCallDelta { id: "2".into(), delta: "{}".into() },
        StreamChunk::ToolCallDelta { id: "1".into(), delta: "1}".into() },
        StreamChunk::ToolCallEnd { id: "1".into() },
        StreamChunk::Usage { usage: Usage { input: 5, ..Usage::default() } },
        StreamChunk::Usage { usage: Usage { output: 9, ..Usage::default() } },
    ])
    .unwrap();
    assert_eq!(
        response.message.content,
        vec![
            Part::Reasoning(Reasoning { text: "think".into(), opaque: Some(json!("sig")) }),
            Part::text("Hello"),
            Part::ToolCall(ToolCall {
                id: "1".into(),
                name: "add".into(),
                arguments: "{\"a\":1}".into()
            }),
            Part::ToolCall(ToolCall { id: "2".into(), name: "mul".into(), arguments: "{}".into() }),
        ]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(response.usage, Usage { input: 5, output: 9, ..Usage::default() });
}

#[test]
fn deltas_and_ends_of_calls_that_never_started_are_refused() {
    let start = || StreamChunk::ToolCallStart { id: "1".into(), name: "add".into() };
    let delta = StreamChunk::ToolCallDelta { id: "2".into(), delta: "{}".into() };
    let error = assemble(vec![text("a"), start(), delta]).unwrap_err();
    assert!(error.to_string().contains("argument delta for unknown tool call"), "{error}");
    let end = StreamChunk::ToolCallEnd { id: "2".into() };
    let error = assemble(vec![start(), end]).unwrap_err();
    assert!(error.to_string().contains("end of unknown tool call"), "{error}");
}

#[test]
fn a_finish_chunk_wins_and_text_after_a_call_is_a_new_part() {
    let response = assemble(vec![
        text("a"),
        StreamChunk::ToolCallStart { id: "1".into(), name: "t".into() },
        text("b"),
        StreamChunk::Finish { reason: FinishReason::Length },
    ])
    .unwrap();
    assert_eq!(response.message.content.len(), 3);
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(assemble(vec![text("x")]).unwrap().finish_reason, FinishReason::Stop);
}

#[test]
fn redacted_reasoning_without_text_keeps_its_data() {
    let response =
        assemble(vec![StreamChunk::ReasoningEnd { opaque: Some(json!({"data": "x"})) }]).unwrap();
    assert_eq!(
        response.message.content,
        vec![Part::Reasoning(Reasoning {
            text: String::new(),
            opaque: Some(json!({"data": "x"}))
        })]
    );
}

#[test]
fn deltas_for_unknown_calls_are_protocol_errors() {
    let error = assemble(vec![StreamChunk::ToolCallDelta { id: "9".into(), delta: "{}".into() }])
        .unwrap_err();
    assert!(matches!(error, ProviderError::Protocol { .. }));
    let error = assemble(vec![StreamChunk::ToolCallEnd { id: "9".into() }]).unwrap_err();
    assert!(matches!(error, ProviderError::Protocol { .. }));
}

#[test]
fn errors_classify_themselves() {
    assert!(ProviderError::RateLimited { message: String::new(), retry_after_ms: Some(1500) }
        .is_retryable());
    assert_eq!(
        ProviderError::RateLimited { message: String::new(), retry_after_ms: Some(1500) }
            .retry_after(),
        Some(std::time::Duration::from_millis(1500))
    );
    assert!(ProviderError::Server { status: 503, message: String::new() }.is_retryable());
    assert!(!ProviderError::Server { status: 501, message: String::new() }.is_retryable());
    assert!(!ProviderError::Auth { status: 401, message: String::new() }.is_retryable());
    assert!(!ProviderError::ContextLengthExceeded { message: String::new() }.is_retryable());
    let long = "é".repeat(300);
    let ProviderError::Protocol { excerpt, .. } = ProviderError::protocol("bad", &long) else {
        unreachable!()
    };
    assert!(excerpt.len() <= 200);
}

#[tokio::test]
async fn complete_collects_the_stream() {
    use scripted::{ScriptedModel, ScriptedTurn};
    let model =
        ScriptedModel::new([ScriptedTurn::text("hello world, this is long").with_reasoning("r")]);
    let response = model.complete(ModelRequest::default()).await.unwrap();
    assert_eq!(response.message.text(), "hello world, this is long");
    assert_eq!(response.message.reasoning_text(), "r");
    assert_eq!(model.request_count(), 1);
    let exhausted = model.complete(ModelRequest::default()).await.unwrap_err();
    assert!(exhausted.to_string().contains("script exhausted"));
}

mod cache;

mod wrappers;

mod output;
