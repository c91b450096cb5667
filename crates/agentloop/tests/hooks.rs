//! Every hook point and action, driven end to end on the scripted model: events, the history
//! sent, and the outcome.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop::hooks::AfterRun;
use agentloop::hooks::AfterTool;
use agentloop::hooks::BeforeModel;
use agentloop::hooks::BeforeRun;
use agentloop::hooks::BeforeTool;
use agentloop::hooks::PauseCheck;
use agentloop::message::FinishReason;
use agentloop::message::ToolCall;
use agentloop::message::ToolResult;
use agentloop::message::Usage;
use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::ModelRequest;
use agentloop::provider::ModelResponse;
use agentloop::run::Run;
use agentloop::run::RunConfig;
use agentloop::tool::{ToolError, ToolOutput};
use async_trait::async_trait;
use common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn model(turns: impl IntoIterator<Item = ScriptedTurn>) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(turns))
}

fn add_then_answer() -> Arc<ScriptedModel> {
    model([
        ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2})),
        ScriptedTurn::text("The sum is 3."),
    ])
}

fn tool_result_sent(model: &ScriptedModel) -> ToolResult {
    model.requests()[1].messages[2].tool_results_iter().next().cloned().unwrap()
}

/// Records every hook call it sees.
#[derive(Default, Clone)]
struct Recorder {
    seen: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Hooks for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    async fn before_run(&self, _config: &RunConfig) -> HookResult<BeforeRun> {
        self.seen.lock().unwrap().push("before_run".into());
        Ok(BeforeRun::Continue)
    }
    async fn before_model(
        &self,
        ctx: &HookContext,
        request: &ModelRequest,
    ) -> HookResult<BeforeModel> {
        self.seen.lock().unwrap().push(format!(
            "before_model {} {}",
            ctx.iteration,
            request.messages.len()
        ));
        Ok(BeforeModel::Continue)
    }
    async fn after_model(&self, _ctx: &HookContext, response: &ModelResponse) -> HookResult<()> {
        self.seen.lock().unwrap().push(format!("after_model {:?}", response.finish_reason));
        Ok(())
    }
    async fn before_tool(
        &self,
        _ctx: &HookContext,
        call: &ToolCall,
        arguments: &Value,
    ) -> HookResult<BeforeTool> {
        self.seen.lock().unwrap().push(format!("before_tool {} {arguments}", call.name));
        Ok(BeforeTool::Continue)
    }
    async fn approve_tool(
        &self,
        _ctx: &HookContext,
        call: &ToolCall,
        _arguments: &Value,
    ) -> HookResult<Approval> {
        self.seen.lock().unwrap().push(format!("approve_tool {}", call.name));
        Ok(Approval::Approve)
    }
    async fn after_tool(
        &self,
        _ctx: &HookContext,
        call: &ToolCall,
        result: &Result<ToolOutput, ToolError>,
    ) -> HookResult<AfterTool> {
        self.seen.lock().unwrap().push(format!("after_tool {} {:?}", call.name, result));
        Ok(AfterTool::Continue)
    }
    async fn pause_check(&self, ctx: &HookContext) -> HookResult<PauseCheck> {
        self.seen.lock().unwrap().push(format!("pause_check {}", ctx.iteration));
        Ok(PauseCheck::Continue)
    }
    async fn on_incomplete_work(
        &self,
        _ctx: &HookContext,
        _outcome: &Outcome,
    ) -> HookResult<Option<String>> {
        self.seen.lock().unwrap().push("on_incomplete_work".into());
        Ok(None)
    }
    async fn after_run(&self, _ctx: &HookContext, outcome: &Outcome) -> HookResult<AfterRun> {
        self.seen.lock().unwrap().push(format!("after_run {}", outcome.answer));
        Ok(AfterRun::Continue)
    }
}

#[tokio::test]
async fn every_hook_point_is_called_in_order() {
    let recorder = Recorder::default();
    let agent = Agent::builder(add_then_answer()).tool(Add).hook(recorder.clone()).build().unwrap();
    let outcome = agent.run("1 + 2?").await.unwrap();
    assert_eq!(outcome.answer, "The sum is 3.");
    assert_eq!(
        *recorder.seen.lock().unwrap(),
        [
            "before_run",
            "pause_check 0",
            "before_model 1 1",
            "after_model ToolCalls",
            "before_tool add {\"a\":1,\"b\":2}",
            "approve_tool add",
            "after_tool add Ok(Value(Number(3)))",
            "pause_check 1",
            "before_model 2 3",
            "after_model Stop",
            "on_incomplete_work",
            "after_run The sum is 3.",
        ]
    );
}

struct Rewriter;

#[async_trait]
impl Hooks for Rewriter {
    async fn before_run(&self, config: &RunConfig) -> HookResult<BeforeRun> {
        let mut config = config.clone();
        config.instructions = Some("Rewritten instructions.".into());
        Ok(BeforeRun::Rewrite(Box::new(config)))
    }
    async fn before_model(
        &self,
        _ctx: &HookContext,
        request: &ModelRequest,
    ) -> HookResult<BeforeModel> {
        let mut request = request.clone();
        request.temperature = Some(0.0);
        Ok(BeforeModel::Rewrite(Box::new(request)))
    }
    async fn before_tool(
        &self,
        _ctx: &HookContext,
        _call: &ToolCall,
        arguments: &Value,
    ) -> HookResult<BeforeTool> {
        let mut arguments = arguments.clone();
        arguments["b"] = json!(40);
        Ok(BeforeTool::Rewrite(arguments))
    }
    async fn after_tool(
        &self,
        _ctx: &HookContext,
        _call: &ToolCall,
        result: &Result<ToolOutput, ToolError>,
    ) -> HookResult<AfterTool> {
        let Ok(ToolOutput::Value(value)) = result else { return Ok(AfterTool::Continue) };
        Ok(AfterTool::Rewrite(Ok(ToolOutput::Value(json!({"sum": value, "checked": true})))))
    }
    async fn after_run(&self, _ctx: &HookContext, outcome: &Outcome) -> HookResult<AfterRun> {
        let mut outcome = outcome.clone();
        outcome.answer = format!("{} (verified)", outcome.answer);
        Ok(AfterRun::Rewrite(Box::new(outcome)))
    }
}

#[tokio::test]
async fn rewrite_actions_change_config_request_arguments_result_and_outcome() {
    let model = add_then_answer();
    let agent = Agent::builder(model.clone())
        .tool(Add)
        .instructions("Original.")
        .hook(Rewriter)
        .build()
        .unwrap();
    let events = collect(agent.run_stream("1 + 2?")).await;
    let requests = model.requests();
    assert_eq!(requests[0].instructions.as_deref(), Some("Rewritten instructions."));
    assert_eq!(requests[0].temperature, Some(0.0));
    let started = events.iter().find_map(|e| match e {
        Event::ToolStarted { arguments, .. } => Some(serde_json::Value::clone(arguments)),
        _ => None,
    });
    assert_eq!(
        started,
        Some(json!({"a": 1, "b": 40})),
        "the tool ran with the rewritten arguments"
    );
    assert_eq!(tool_result_sent(&model).content.to_text(), r#"{"checked":true,"sum":41}"#);
    let outcome = outcome(&events);
    assert_eq!(outcome.answer, "The sum is 3. (verified)");
    assert!(
        matches!(events.last(), Some(Event::RunFinished { outcome }) if outcome.answer.ends_with("(verified)"))
    );
}

/// Answers every model call itself.
struct Canned;

#[async_trait]
impl Hooks for Canned {
    async fn before_model(
        &self,
        _ctx: &HookContext,
        _request: &ModelRequest,
    ) -> HookResult<BeforeModel> {
        Ok(BeforeModel::Skip(Box::new(ModelResponse {
            message: Message::assistant("From the cache."),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            id: None,
            model: None,
            provider: None,
        })))
    }
}

#[tokio::test]
async fn before_model_can_skip_the_call_with_a_response() {
    let model = model([ScriptedTurn::text("from the model")]);
    let agent = Agent::builder(model.clone()).hook(Canned).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert_eq!(outcome(&events).answer, "From the cache.");
    assert_eq!(model.request_count(), 0, "the model was not called");
    assert!(
        events.iter().any(|e| matches!(e, Event::ModelResponded { .. })),
        "the response is journaled"
    );
}

struct SkipOrMock;

#[async_trait]
impl Hooks for SkipOrMock {
    async fn before_tool(
        &self,
        _ctx: &HookContext,
        _call: &ToolCall,
        arguments: &Value,
    ) -> HookResult<BeforeTool> {
        Ok(match arguments["a"].as_i64() {
            Some(1) => BeforeTool::Skip("dry run".into()),
            _ => BeforeTool::Mock(ToolOutput::Value(json!(1000))),
        })
    }
}

#[tokio::test]
async fn before_tool_can_skip_or_mock_a_call() {
    let model = model([
        ScriptedTurn::tool_call("probe", json!({"a": 1})).with_tool_call("probe", json!({"a": 2})),
        ScriptedTurn::text("ok"),
    ]);
    let probe = Probe::default();
    let agent = Agent::builder(model.clone()).tool(probe.clone()).hook(SkipOrMock).build().unwrap();
    let events = collect(agent.run_stream("go")).await;
    assert_eq!(probe.calls(), 0, "neither call ran");
    let results: Vec<ToolResult> =
        model.requests()[1].messages[2].tool_results_iter().cloned().collect();
    assert_eq!(results[0], ToolResult::error("call_0_0", "Error: the call was skipped: dry run"));
    assert_eq!(results[1], ToolResult::ok("call_0_1", json!(1000)));
    assert!(!events.iter().any(|e| matches!(e, Event::ToolStarted { .. })));
    assert_eq!(outcome(&events).answer, "ok");
}

#[tokio::test]
async fn can_execute_tool_rejects_with_a_reason_the_model_sees() {
    let model = model([
        ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2}))
            .with_tool_call("probe", json!({"ms": 0, "tag": "x"})),
        ScriptedTurn::text("ok"),
    ]);
    let probe = Probe::default();
    let agent = Agent::builder(model.clone())
        .tool(Add)
        .tool(probe.clone())
        .can_execute_tool(|call, _| {
            if call.name == "probe" {
                Err("probing is not allowed".into())
            } else {
                Ok(())
            }
        })
        .build()
        .unwrap();
    let outcome = agent.run("go").await.unwrap();
    let results: Vec<ToolResult> =
        model.requests()[1].messages[2].tool_results_iter().cloned().collect();
    assert_eq!(results[0], ToolResult::ok("call_0_0", json!(3)));
    assert_eq!(
        results[1],
        ToolResult::error("call_0_1", "Error: the call was rejected: probing is not allowed")
    );
    assert_eq!(probe.calls(), 0);
    assert_eq!(
        outcome.metrics.audit[1].approval,
        agentloop::run::ApprovalRecord::Rejected { reason: "probing is not allowed".into() }
    );
}

/// Asks the model to continue once, naming the missing work.
struct Todo;

#[async_trait]
impl Hooks for Todo {
    async fn on_incomplete_work(
        &self,
        _ctx: &HookContext,
        outcome: &Outcome,
    ) -> HookResult<Option<String>> {
        Ok((!outcome.answer.contains("tests"))
            .then(|| "You have not written the tests yet.".to_string()))
    }
}

#[tokio::test]
async fn on_incomplete_work_continues_the_run_a_bounded_number_of_times() {
    let coder =
        model([ScriptedTurn::text("Code written."), ScriptedTurn::text("Code and tests written.")]);
    let agent = Agent::builder(coder.clone()).hook(Todo).build().unwrap();
    let events = collect(agent.run_stream("build it")).await;
    assert_eq!(outcome(&events).answer, "Code and tests written.");
    assert!(events.contains(&Event::ContinuationRequested {
        prompt: "You have not written the tests yet.".into()
    }));
    assert_eq!(
        coder.requests()[1].messages.last(),
        Some(&Message::user("You have not written the tests yet."))
    );

    let stubborn =
        model([ScriptedTurn::text("a"), ScriptedTurn::text("b"), ScriptedTurn::text("c")]);
    let agent = Agent::builder(stubborn.clone()).hook(Todo).max_continuations(2).build().unwrap();
    let outcome = agent.run("build it").await.unwrap();
    assert_eq!(outcome.answer, "c");
    assert_eq!(stubborn.request_count(), 3, "two continuations, then it ends");
}

/// Two hooks: the second sees the first one's rewrite.
struct AddInstruction(&'static str);

#[async_trait]
impl Hooks for AddInstruction {
    async fn before_model(
        &self,
        _ctx: &HookContext,
        request: &ModelRequest,
    ) -> HookResult<BeforeModel> {
        let mut request = request.clone();
        let current = request.instructions.unwrap_or_default();
        request.instructions = Some(format!("{current}[{}]", self.0));
        Ok(BeforeModel::Rewrite(Box::new(request)))
    }
}

#[tokio::test]
async fn hooks_run_in_registration_order_and_see_each_others_changes() {
    let model = model([ScriptedTurn::text("ok")]);
    let agent = Agent::builder(model.clone())
        .instructions("base")
        .hook(AddInstruction("first"))
        .hook(AddInstruction("second"))
        .build()
        .unwrap();
    agent.run("hi").await.unwrap();
    assert_eq!(model.requests()[0].instructions.as_deref(), Some("base[first][second]"));
}

struct Slow;

#[async_trait]
impl Hooks for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    async fn before_model(
        &self,
        _ctx: &HookContext,
        _request: &ModelRequest,
    ) -> HookResult<BeforeModel> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(BeforeModel::Continue)
    }
}

struct Broken;

#[async_trait]
impl Hooks for Broken {
    fn name(&self) -> &str {
        "broken"
    }
    async fn before_tool(
        &self,
        _ctx: &HookContext,
        _call: &ToolCall,
        _arguments: &Value,
    ) -> HookResult<BeforeTool> {
        Err("database unreachable".into())
    }
}

#[tokio::test]
async fn a_hook_that_times_out_is_reported_and_the_run_goes_on() {
    let model = model([ScriptedTurn::text("fine")]);
    let agent =
        Agent::builder(model).hook(Slow).hook_timeout(Duration::from_millis(40)).build().unwrap();
    let started = std::time::Instant::now();
    let events = collect(agent.run_stream("hi")).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(events.contains(&Event::HookFailed {
        hook: "slow".into(),
        point: "before_model".into(),
        error: "the hook timed out after 40 ms".into(),
        critical: false,
    }));
    assert_eq!(outcome(&events).answer, "fine");
}

#[tokio::test]
async fn a_failing_hook_is_reported_and_the_run_goes_on() {
    let model =
        model([ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2})), ScriptedTurn::text("3")]);
    let agent = Agent::builder(model).tool(Add).hook(Broken).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    assert!(events.iter().any(|e| matches!(e, Event::HookFailed { hook, error, critical: false, .. } if hook == "broken" && error == "database unreachable")));
    assert_eq!(outcome(&events).answer, "3");
}

#[tokio::test]
async fn a_critical_hook_that_fails_fails_the_run() {
    let model =
        model([ScriptedTurn::tool_call("add", json!({"a": 1, "b": 2})), ScriptedTurn::text("3")]);
    let agent = Agent::builder(model.clone()).tool(Add).critical_hook(Broken).build().unwrap();
    let events = collect(agent.run_stream("hi")).await;
    let Some(Event::RunFailed { error, outcome }) = events.last() else {
        panic!("{:?}", kinds(&events))
    };
    assert_eq!(error, "hook 'broken' failed: database unreachable");
    assert_eq!(
        outcome.stop_reason,
        StopReason::HookFailed { hook: "broken".into(), error: "database unreachable".into() }
    );
    assert_eq!(model.request_count(), 1, "nothing runs after the failure");
    // The history stays valid: the open call is answered.
    let run =
        Run::from_journal(&events.iter().filter(|e| e.is_durable()).cloned().collect::<Vec<_>>())
            .unwrap();
    assert_valid_history(run.history());
}

#[tokio::test]
async fn a_critical_hook_that_times_out_fails_the_run() {
    let model = model([ScriptedTurn::text("never")]);
    let agent = Agent::builder(model.clone())
        .critical_hook(Slow)
        .hook_timeout(Duration::from_millis(30))
        .build()
        .unwrap();
    let error = agent.run("hi").await.unwrap_err();
    assert!(error.to_string().contains("timed out after 30 ms"), "{error}");
    assert_eq!(model.request_count(), 0);
}
