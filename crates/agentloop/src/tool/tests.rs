#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use serde_json::json;
use std::time::Duration;

#[derive(serde::Deserialize, JsonSchema)]
struct AddArgs {
    /// First addend.
    a: i64,
    b: i64,
}

struct Add;
impl Tool for Add {
    const NAME: &'static str = "add";
    type Args = AddArgs;
    type Output = i64;
    type Error = String;
    fn description(&self) -> String {
        "Adds.".into()
    }
    async fn call(&self, args: AddArgs, _ctx: ToolContext) -> Result<i64, String> {
        args.a.checked_add(args.b).ok_or_else(|| "overflow".to_string())
    }
}

struct Slow;
impl Tool for Slow {
    const NAME: &'static str = "slow";
    type Args = serde_json::Map<String, Value>;
    type Output = String;
    type Error = String;
    fn description(&self) -> String {
        "Sleeps.".into()
    }
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(20))
    }
    async fn call(&self, _args: Self::Args, _ctx: ToolContext) -> Result<String, String> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok("late".into())
    }
}

struct Crash;
impl Tool for Crash {
    const NAME: &'static str = "crash";
    type Args = serde_json::Map<String, Value>;
    type Output = String;
    type Error = String;
    fn description(&self) -> String {
        "Panics.".into()
    }
    #[allow(clippy::panic)]
    async fn call(&self, _args: Self::Args, _ctx: ToolContext) -> Result<String, String> {
        panic!("kaboom")
    }
}

fn executor() -> ToolExecutor {
    let mut registry = ToolRegistry::new();
    registry.register(Add).unwrap().register(Slow).unwrap().register(Crash).unwrap();
    ToolExecutor::new(vec![Arc::new(registry)], Duration::from_secs(5)).unwrap()
}

#[test]
fn schemas_are_self_contained_objects() {
    let schema = schema_for::<AddArgs>();
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["a"]["description"], "First addend.");
    assert_eq!(schema["required"], json!(["a", "b"]));
    assert!(schema.get("$schema").is_none());
    assert!(schema.get("title").is_none());
    assert_eq!(schema_for::<serde_json::Map<String, Value>>()["type"], "object");
}

#[test]
fn arguments_parse_and_empty_means_none() {
    assert_eq!(parse_arguments(" "), Ok(json!({})));
    assert_eq!(parse_arguments("{\"a\":1}"), Ok(json!({"a": 1})));
    assert!(parse_arguments("{\"a\":").is_err());
}

#[test]
fn duplicate_names_are_refused() {
    let mut registry = ToolRegistry::new();
    registry.register(Add).unwrap();
    assert_eq!(registry.register(Add).unwrap_err(), registry::DuplicateTool("add".into()));
    let a: Arc<dyn ToolSet> = Arc::new(registry.clone());
    let error = ToolExecutor::new(vec![a.clone(), a], Duration::from_secs(1)).unwrap_err();
    assert_eq!(error, ToolSetupError::Duplicate("add".into()));
}

#[tokio::test]
async fn runs_valid_calls() {
    let result =
        executor().execute("add", Ok(json!({"a": 2, "b": 3})), ToolContext::detached("c")).await;
    assert_eq!(result.result, Ok(ToolOutput::Value(json!(5))));
    let result = executor()
        .execute("add", Ok(json!({"a": i64::MAX, "b": 1})), ToolContext::detached("c"))
        .await;
    assert_eq!(result.result, Err(ToolError::Failed("overflow".into())));
}

/// A set that only implements `call`: it gets shared arguments through the default
/// `call_shared`, and records what it was given.
struct Echo(std::sync::Mutex<Vec<Value>>);

#[async_trait::async_trait]
impl ToolSet for Echo {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "echo".into(),
            description: "Echoes.".into(),
            parameters: json!({"type": "object"}),
        }]
    }

    async fn call(
        &self,
        _name: &str,
        args: Value,
        _ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.0.lock().unwrap().push(args.clone());
        Ok(ToolOutput::Value(args))
    }
}

#[tokio::test]
async fn shared_arguments_are_read_in_place_or_copied_by_the_default() {
    // The registry's typed tool reads the journaled arguments without taking them.
    let arguments = Arc::new(json!({"a": 2, "b": 3}));
    let result =
        executor().execute_shared("add", Ok(arguments.clone()), ToolContext::detached("c")).await;
    assert_eq!(result.result, Ok(ToolOutput::Value(json!(5))));
    assert_eq!(*arguments, json!({"a": 2, "b": 3}));
    let invalid = executor()
        .execute_shared("add", Ok(Arc::new(json!({"a": 1}))), ToolContext::detached("c"))
        .await;
    assert!(matches!(invalid.result, Err(ToolError::InvalidArguments(_))), "{invalid:?}");

    // A set without `call_shared` gets its own copy while the caller keeps its share.
    let echo = Arc::new(Echo(std::sync::Mutex::new(Vec::new())));
    let tools = ToolExecutor::new(vec![echo.clone()], Duration::from_secs(1)).unwrap();
    let arguments = Arc::new(json!({"x": [1, 2]}));
    let result =
        tools.execute_shared("echo", Ok(arguments.clone()), ToolContext::detached("c")).await;
    assert_eq!(result.result, Ok(ToolOutput::Value(json!({"x": [1, 2]}))));
    assert_eq!(*echo.0.lock().unwrap(), [json!({"x": [1, 2]})]);
    assert_eq!(Arc::strong_count(&arguments), 1);
}

#[tokio::test]
async fn refuses_unknown_tools_bad_json_and_invalid_arguments() {
    let tools = executor();
    let unknown = tools.execute("nope", Ok(json!({})), ToolContext::detached("c")).await.result;
    assert_eq!(unknown.unwrap_err().to_model_text(), "Error: Unknown tool 'nope'");
    let bad = tools
        .execute("add", Err("EOF while parsing".into()), ToolContext::detached("c"))
        .await
        .result;
    assert!(matches!(bad, Err(ToolError::BadJson(_))));
    let invalid =
        tools.execute("add", Ok(json!({"a": "two"})), ToolContext::detached("c")).await.result;
    let Err(ToolError::InvalidArguments(message)) = invalid else {
        panic!("expected invalid arguments")
    };
    assert!(message.contains("/a"), "{message}");
    assert!(message.contains("\"b\" is a required property"), "{message}");
}

#[tokio::test]
async fn times_out_with_the_tools_own_timeout() {
    let tools = executor();
    assert_eq!(tools.timeout_for("slow"), Duration::from_millis(20));
    assert_eq!(tools.timeout_for("add"), Duration::from_secs(5));
    let ctx = ToolContext::detached("c");
    let cancel = ctx.cancel.clone();
    let result = tools.execute("slow", Ok(json!({})), ctx).await;
    assert_eq!(result.result, Err(ToolError::Timeout(20)));
    assert!(cancel.is_cancelled(), "the call's token is cancelled on timeout");
}

#[tokio::test]
async fn contains_panics() {
    let result = executor().execute("crash", Ok(json!({})), ToolContext::detached("c")).await;
    assert_eq!(result.result, Err(ToolError::Panicked("kaboom".into())));
}

#[tokio::test]
async fn stops_on_cancel() {
    let ctx = ToolContext::detached("c");
    ctx.cancel.cancel();
    let result = executor().execute("slow", Ok(json!({})), ctx).await;
    assert_eq!(result.result, Err(ToolError::Cancelled));
    // A call whose token is already cancelled does not start, even one that would finish
    // at once.
    let echo = Arc::new(Echo(std::sync::Mutex::new(Vec::new())));
    let tools = ToolExecutor::new(vec![echo.clone()], Duration::from_secs(5)).unwrap();
    let ctx = ToolContext::detached("c");
    ctx.cancel.cancel();
    let result = tools.execute("echo", Ok(json!({"x": 1})), ctx).await;
    assert_eq!(result.result, Err(ToolError::Cancelled));
    assert!(echo.0.lock().unwrap().is_empty(), "the tool did not run");
    // Cancelled while running: the call stops before its timeout.
    let ctx = ToolContext::detached("c");
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(2)).await;
        cancel.cancel();
    });
    let result = executor().execute("slow", Ok(json!({})), ctx).await;
    assert_eq!(result.result, Err(ToolError::Cancelled));
}

#[tokio::test]
async fn builtin_control_tools() {
    let done = TaskComplete.call_json(json!({"answer": "42"}), ToolContext::detached("c")).await;
    assert_eq!(done, Ok(ToolOutput::Done("42".into())));
    let ask = AskUser.call_json(json!({"question": "why?"}), ToolContext::detached("c")).await;
    assert_eq!(ask, Ok(ToolOutput::AskUser("why?".into())));
}

#[test]
fn a_tool_output_stays_itself_and_other_values_are_serialized() {
    // A `ToolOutput` is `Serialize` (it is journaled): the conversion must not turn it into
    // `{"kind": "done", …}`.
    assert_eq!(
        ToolOutput::Done("42".into()).into_tool_output().unwrap(),
        ToolOutput::Done("42".into())
    );
    assert_eq!(
        ToolOutput::AskUser("why?".into()).into_tool_output().unwrap(),
        ToolOutput::AskUser("why?".into())
    );
    assert_eq!(
        ToolOutput::Value(json!({"kind": "done"})).into_tool_output().unwrap(),
        ToolOutput::Value(json!({"kind": "done"}))
    );
    assert_eq!(
        Control(ToolOutput::Done("x".into())).into_tool_output().unwrap(),
        ToolOutput::Done("x".into())
    );
    // Other values, even ones that look like a serialized `ToolOutput`, are values.
    assert_eq!(
        json!({"kind": "done", "value": "x"}).into_tool_output().unwrap(),
        ToolOutput::Value(json!({"kind": "done", "value": "x"}))
    );
    assert_eq!(7_i64.into_tool_output().unwrap(), ToolOutput::Value(json!(7)));
    assert_eq!("text".into_tool_output().unwrap(), ToolOutput::Value(json!("text")));
}

/// A typed tool whose output type is `ToolOutput` itself.
struct Decide;
impl Tool for Decide {
    const NAME: &'static str = "decide";
    type Args = serde_json::Map<String, Value>;
    type Output = ToolOutput;
    type Error = String;
    fn description(&self) -> String {
        "Ends the task, asks the user or answers, by its `do` argument.".into()
    }
    async fn call(&self, args: Self::Args, _ctx: ToolContext) -> Result<ToolOutput, String> {
        match args.get("do").and_then(Value::as_str) {
            Some("done") => Ok(ToolOutput::Done("finished".into())),
            Some("ask") => Ok(ToolOutput::AskUser("which one?".into())),
            _ => Ok(ToolOutput::Value(json!({"kind": "value"}))),
        }
    }
}

#[tokio::test]
async fn a_typed_tool_returning_a_tool_output_gives_the_control_signal() {
    let ctx = || ToolContext::detached("c");
    assert_eq!(
        Decide.call_json(json!({"do": "done"}), ctx()).await,
        Ok(ToolOutput::Done("finished".into()))
    );
    assert_eq!(
        Decide.call_json_ref(&json!({"do": "ask"}), ctx()).await,
        Ok(ToolOutput::AskUser("which one?".into()))
    );
    assert_eq!(
        Decide.call_json(json!({}), ctx()).await,
        Ok(ToolOutput::Value(json!({"kind": "value"})))
    );
}

/// A set whose tools change at run time, like an MCP server's.
#[derive(Default)]
struct Changing {
    tools: std::sync::Mutex<Vec<ToolSpec>>,
    revision: std::sync::atomic::AtomicU64,
}

impl Changing {
    fn set(&self, names: &[&str]) {
        *self.tools.lock().unwrap() = names
            .iter()
            .map(|name| ToolSpec {
                name: (*name).to_owned(),
                description: format!("The {name} tool."),
                parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
            })
            .collect();
        self.revision.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait]
impl ToolSet for Changing {
    fn specs(&self) -> Vec<ToolSpec> {
        self.tools.lock().unwrap().clone()
    }
    fn revision(&self) -> u64 {
        self.revision.load(std::sync::atomic::Ordering::SeqCst)
    }
    async fn call(
        &self,
        name: &str,
        args: Value,
        _ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::Value(json!({"tool": name, "args": args})))
    }
}

#[tokio::test]
async fn refresh_reindexes_a_set_whose_revision_moved() {
    let changing = Arc::new(Changing::default());
    changing.set(&["one"]);
    let tools = ToolExecutor::new(vec![changing.clone()], Duration::from_secs(5)).unwrap();
    assert_eq!(tools.refresh(), Ok(false), "nothing changed");
    let before = tools.specs();

    changing.set(&["one", "two"]);
    let stale = tools.execute("two", Ok(json!({"x": 1})), ToolContext::detached("c")).await;
    assert_eq!(
        stale.result,
        Err(ToolError::UnknownTool("two".into())),
        "not seen before a refresh"
    );
    assert_eq!(tools.refresh(), Ok(true));
    assert_eq!(tools.refresh(), Ok(false), "once");
    assert_eq!(tools.specs().iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["one", "two"]);
    assert_eq!(before.len(), 1, "a snapshot taken before stays as it was");
    let called = tools.execute("two", Ok(json!({"x": 1})), ToolContext::detached("c")).await;
    assert_eq!(called.result, Ok(ToolOutput::Value(json!({"tool": "two", "args": {"x": 1}}))));
    let invalid = tools.execute("two", Ok(json!({"x": "y"})), ToolContext::detached("c")).await;
    assert!(matches!(invalid.result, Err(ToolError::InvalidArguments(_))), "validated too");

    changing.set(&["two"]);
    assert_eq!(tools.refresh(), Ok(true));
    let gone = tools.execute("one", Ok(json!({})), ToolContext::detached("c")).await;
    assert_eq!(gone.result, Err(ToolError::UnknownTool("one".into())));
}

#[test]
fn a_refresh_that_cannot_be_indexed_keeps_the_previous_tools() {
    let mut registry = ToolRegistry::new();
    registry.register(Add).unwrap();
    let changing = Arc::new(Changing::default());
    changing.set(&["one"]);
    let tools =
        ToolExecutor::new(vec![Arc::new(registry), changing.clone()], Duration::from_secs(5))
            .unwrap();
    changing.set(&["one", "add"]);
    assert_eq!(tools.refresh(), Err(ToolSetupError::Duplicate("add".into())));
    assert_eq!(tools.specs().iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["add", "one"]);
}

#[tokio::test]
async fn an_agent_offers_a_sets_new_tools_from_its_next_run_on() {
    use crate::provider::scripted::{ScriptedModel, ScriptedTurn};
    let changing = Arc::new(Changing::default());
    changing.set(&["one"]);
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("first"),
        ScriptedTurn::tool_call("two", json!({"x": 2})),
        ScriptedTurn::text("second"),
    ]));
    let agent = crate::Agent::builder(model.clone()).tool_set(changing.clone()).build().unwrap();
    assert_eq!(agent.run("a").await.unwrap().answer, "first");
    changing.set(&["one", "two"]);
    assert_eq!(agent.tools().len(), 2);
    assert_eq!(agent.run("b").await.unwrap().answer, "second");
    let requests = model.requests();
    let offered = |i: usize| requests[i].tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(offered(0), ["one"]);
    assert_eq!(offered(1), ["one", "two"]);
    let result = requests[2].messages.last().unwrap().tool_results_iter().next().cloned().unwrap();
    assert!(!result.is_error, "{result:?}");
}
