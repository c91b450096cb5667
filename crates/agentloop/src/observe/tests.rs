#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::provider::scripted::{ScriptedModel, ScriptedTurn};
use crate::provider::ModelRequest;
use crate::tool::{ToolContext, ToolError, ToolOutput};
use crate::Agent;
use futures::StreamExt;
use std::sync::Mutex;

/// What the recorder saw of a run: its id, whether it resumed, its trace parent, its provider
/// and its model.
type SeenRun = (String, bool, Option<String>, String, String);

/// Records what it sees; gives out a traceparent per call.
#[derive(Default)]
struct Recorder {
    runs: Mutex<Vec<SeenRun>>,
    events: Arc<Mutex<Vec<String>>>,
    ends: Arc<Mutex<Vec<bool>>>,
}

struct RecordRun {
    events: Arc<Mutex<Vec<String>>>,
    ends: Arc<Mutex<Vec<bool>>>,
}

impl Observer for Recorder {
    fn observe(&self, run: &ObservedRun<'_>) -> Option<Arc<dyn RunObserver>> {
        self.runs.lock().unwrap().push((
            run.run_id.to_owned(),
            run.resumed,
            run.config.trace_parent.clone(),
            run.provider.to_owned(),
            run.model.to_owned(),
        ));
        Some(Arc::new(RecordRun { events: self.events.clone(), ends: self.ends.clone() }))
    }
}

impl RunObserver for RecordRun {
    fn on_event(&self, event: &Event) {
        self.events.lock().unwrap().push(event.kind().to_owned());
    }
    fn on_end(&self, finished: bool) {
        self.ends.lock().unwrap().push(finished);
    }
    fn trace_parent(&self, call_id: Option<&str>) -> Option<String> {
        Some(format!("tp:{}", call_id.unwrap_or("model")))
    }
}

/// Records the trace context the model and the tool get.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Option<String>>>>);

struct Probe(Seen);

#[async_trait::async_trait]
impl crate::tool::DynTool for Probe {
    fn spec(&self) -> crate::tool::ToolSpec {
        crate::tool::ToolSpec {
            name: "probe".into(),
            description: "records its context".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn call_json(
        &self,
        _args: serde_json::Value,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.0 .0.lock().unwrap().push(ctx.trace_parent.clone());
        Ok(ToolOutput::Value(serde_json::json!("ok")))
    }
}

#[tokio::test]
async fn the_observer_sees_every_event_and_gives_the_trace_context() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("probe", serde_json::json!({})),
        ScriptedTurn::text("done"),
    ]));
    let recorder = Arc::new(Recorder::default());
    let seen = Seen::default();
    let agent = Agent::builder(model.clone())
        .name("obs")
        .dyn_tool(Arc::new(Probe(seen.clone())))
        .observer(recorder.clone())
        .build()
        .unwrap();
    let options = crate::RunOptions::default().trace_parent("00-parent");
    let streamed: Vec<String> =
        agent.run_stream_with("hi", options).map(|e| e.kind().to_owned()).collect().await;
    assert_eq!(*recorder.events.lock().unwrap(), streamed);
    assert_eq!(*recorder.ends.lock().unwrap(), vec![true]);
    let runs = recorder.runs.lock().unwrap();
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].1);
    assert_eq!(runs[0].2.as_deref(), Some("00-parent"));
    assert_eq!(runs[0].3, "scripted");
    let seen = seen.0.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].as_deref().is_some_and(|tp| tp.starts_with("tp:") && tp != "tp:model"));
    let requests: Vec<ModelRequest> = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.trace_parent.as_deref() == Some("tp:model")));
}

#[tokio::test]
async fn a_dropped_stream_ends_unfinished() {
    let recorder = Arc::new(Recorder::default());
    let agent = Agent::builder(ScriptedModel::new([ScriptedTurn::text("a")]))
        .observer(recorder.clone())
        .build()
        .unwrap();
    let mut events = agent.run_stream("hi");
    let _ = events.next().await;
    drop(events);
    assert_eq!(*recorder.ends.lock().unwrap(), vec![false]);
}
