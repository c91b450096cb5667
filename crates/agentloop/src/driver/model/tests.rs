#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{FinishReason, Reasoning, ToolCall, ToolResult, Usage};
use crate::provider::sse::response_chunks;
use crate::provider::ResponseAssembler;
use serde_json::json;

fn call(id: &str, arguments: &str) -> Part {
    Part::ToolCall(ToolCall { id: id.into(), name: "add".into(), arguments: arguments.into() })
}

fn text(text: &str) -> Part {
    Part::Text { text: text.into() }
}

/// What the chunk path makes of a response: its delta events and the reassembled response.
fn through_chunks(response: ModelResponse) -> (Vec<Event>, ModelResponse) {
    let mut assembler = ResponseAssembler::default();
    let mut events = Vec::new();
    for chunk in response_chunks(response) {
        events.extend(delta_event(&chunk));
        assembler.push(chunk).unwrap();
    }
    (events, assembler.finish())
}

#[test]
fn a_whole_response_gives_what_its_chunks_would() {
    let reasoning = |text: &str, opaque: Option<serde_json::Value>| {
        Part::Reasoning(Reasoning { text: text.into(), opaque })
    };
    let contents = vec![
        vec![text("3")],
        vec![call("c1", r#"{"a":1,"b":2}"#)],
        vec![text("let me add"), call("c1", "{}"), call("c2", "")],
        vec![text("a"), text("b"), call("c", "{}"), text("c"), text("")],
        vec![reasoning("think", Some(json!("sig"))), reasoning("", Some(json!(1))), text("x")],
        vec![reasoning("", None), text(""), call("d", "{}"), call("d", "{\"x\":1}")],
        vec![
            text("a"),
            Part::ToolResult(ToolResult::ok("z", "r")),
            text("b"),
            reasoning("r", None),
            reasoning("s", None),
        ],
        vec![],
    ];
    for content in contents {
        for (role, finish_reason, id, model) in [
            (Role::Assistant, FinishReason::Stop, None, None),
            (Role::User, FinishReason::ToolCalls, Some("resp_1"), Some("gpt-test-2025")),
            (Role::Assistant, FinishReason::Other("x".into()), Some("msg_1"), None),
            (Role::Assistant, FinishReason::Stop, None, Some("gemini-test")),
        ] {
            let response = ModelResponse {
                message: Message { role, content: content.clone() },
                finish_reason,
                usage: Usage {
                    input: 3,
                    output: 2,
                    cached_input: 1,
                    reasoning: 0,
                    cache_write_input: 0,
                },
                id: id.map(str::to_owned),
                model: model.map(str::to_owned),
                provider: None,
            };
            let (expected_events, expected) = through_chunks(response.clone());
            let mut events = Vec::new();
            let got = as_streamed(response.clone(), Some(&mut events));
            assert_eq!(got, expected);
            assert_eq!(events, expected_events);
            // Quiet: the same response, no events built.
            assert_eq!(as_streamed(response, None), expected);
        }
    }
}

/// Answers "done" with a response id and model, streamed (chunks) or whole.
struct Identified {
    whole: bool,
}

fn identified_response() -> ModelResponse {
    ModelResponse {
        message: Message::assistant("done"),
        finish_reason: FinishReason::Stop,
        usage: Usage { input: 3, output: 1, ..Usage::default() },
        id: Some("resp_42".into()),
        model: Some("test-model-2025".into()),
        provider: None,
    }
}

impl crate::provider::Provider for Identified {
    fn stream(&self, _request: crate::provider::ModelRequest) -> crate::provider::ChunkStream {
        Box::pin(futures::stream::iter(response_chunks(identified_response()).into_iter().map(Ok)))
    }
    fn complete(
        &self,
        _request: crate::provider::ModelRequest,
    ) -> futures::future::BoxFuture<'static, Result<ModelResponse, crate::provider::ProviderError>>
    {
        Box::pin(futures::future::ready(Ok(identified_response())))
    }
    fn streams(&self) -> bool {
        !self.whole
    }
}

/// The `model_responded` event's response id and model.
fn responded(events: &[Event]) -> Vec<(Option<String>, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ModelResponded { response_id, response_model, .. } => {
                Some((response_id.clone(), response_model.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_response_id_and_model_reach_model_responded() {
    use futures::StreamExt;
    let want = vec![(Some("resp_42".to_owned()), Some("test-model-2025".to_owned()))];
    for whole in [false, true] {
        let agent = crate::Agent::builder(Identified { whole }).build().unwrap();
        let events: Vec<Event> = agent.run_stream("hi").collect().await;
        assert_eq!(responded(&events), want, "whole: {whole}");

        // A run replayed from its journal journals them again.
        let journal: Vec<Event> = events.into_iter().filter(Event::is_durable).collect();
        let replay = crate::agent::JournalReplay::from_journal(&journal).unwrap();
        let replayed: Vec<Event> = replay.run().unwrap().collect().await;
        assert_eq!(responded(&replayed), want, "replayed, whole: {whole}");
    }
}

/// A provider whose one answer is a typed answer's text, streamed or whole.
struct Typed {
    whole: bool,
}

fn typed_response() -> ModelResponse {
    ModelResponse {
        message: Message {
            role: crate::message::Role::Assistant,
            content: vec![text(r#"{"city": "Paris"}"#)],
        },
        finish_reason: FinishReason::Stop,
        usage: Usage::default(),
        id: None,
        model: None,
        provider: None,
    }
}

impl crate::provider::Provider for Typed {
    fn stream(&self, _request: crate::provider::ModelRequest) -> crate::provider::ChunkStream {
        Box::pin(futures::stream::iter(response_chunks(typed_response()).into_iter().map(Ok)))
    }
    fn complete(
        &self,
        _request: crate::provider::ModelRequest,
    ) -> futures::future::BoxFuture<'static, Result<ModelResponse, crate::provider::ProviderError>>
    {
        Box::pin(futures::future::ready(Ok(typed_response())))
    }
    fn streams(&self) -> bool {
        !self.whole
    }
    fn native_output(&self, _with_tools: bool) -> bool {
        true
    }
}

#[tokio::test]
async fn a_typed_answer_shows_as_output_deltas_streamed_or_whole() {
    use futures::StreamExt;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
    for whole in [false, true] {
        let spec = crate::terms::OutputSpec::new("place", schema.clone());
        let agent = crate::Agent::builder(Typed { whole }).output(spec).build().unwrap();
        let events: Vec<Event> = agent.run_stream("Capital of France?").collect().await;
        let partials: Vec<&serde_json::Value> = events
            .iter()
            .filter_map(|e| match e {
                Event::OutputDelta { partial } => Some(partial),
                _ => None,
            })
            .collect();
        assert_eq!(partials.last(), Some(&&json!({"city": "Paris"})), "whole: {whole}");
        let outcome = events.last().and_then(Event::outcome).unwrap();
        assert_eq!(outcome.output, Some(json!({"city": "Paris"})), "whole: {whole}");
    }
}
