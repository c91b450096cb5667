//! [`ToolExecutor`]: one call, checked and contained. It finds the tool across all tool sets,
//! validates the arguments against the schema, runs the tool under its timeout and turns a
//! panic into an error. Concurrency across calls is the driver's business.
//!
//! A set whose tools change at run time (an MCP server) bumps its [`ToolSet::revision`];
//! [`ToolExecutor::refresh`] then indexes the sets again (the agent does it before each run).

use super::{ToolContext, ToolError, ToolOutput, ToolSet, ToolSpec};
use futures::FutureExt;
use serde_json::Value;
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Setting up the tool index failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolSetupError {
    /// Two tools (possibly from different sets) share a name.
    #[error("two tools are named '{0}'")]
    Duplicate(String),
    /// A tool's parameter schema is not a valid JSON Schema.
    #[error("the parameter schema of tool '{name}' is invalid: {message}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// What is wrong.
        message: String,
    },
}

struct Entry {
    set: usize,
    validator: jsonschema::Validator,
    timeout: Option<Duration>,
    safe_to_retry: bool,
}

/// The outcome of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExecution {
    /// What the tool returned, or why it did not.
    pub result: Result<ToolOutput, ToolError>,
    /// How long it took (validation included).
    pub duration: Duration,
}

/// The tools of every set at one revision of each.
struct Index {
    entries: HashMap<String, Entry>,
    specs: Arc<Vec<ToolSpec>>,
    revisions: Vec<u64>,
}

impl Index {
    fn build(sets: &[Arc<dyn ToolSet>]) -> Result<Self, ToolSetupError> {
        let mut entries = HashMap::new();
        let mut specs = Vec::new();
        // Read before the specs: a change in between is seen again at the next refresh.
        let revisions = sets.iter().map(|set| set.revision()).collect();
        for (set_index, set) in sets.iter().enumerate() {
            for spec in set.specs() {
                if entries.contains_key(&spec.name) {
                    return Err(ToolSetupError::Duplicate(spec.name));
                }
                let validator = jsonschema::validator_for(&spec.parameters).map_err(|e| {
                    ToolSetupError::InvalidSchema {
                        name: spec.name.clone(),
                        message: e.to_string(),
                    }
                })?;
                let timeout = set.timeout(&spec.name);
                let safe_to_retry = set.safe_to_retry(&spec.name);
                let entry = Entry { set: set_index, validator, timeout, safe_to_retry };
                entries.insert(spec.name.clone(), entry);
                specs.push(spec);
            }
        }
        Ok(Self { entries, specs: Arc::new(specs), revisions })
    }
}

/// Runs tool calls across a list of [`ToolSet`]s.
pub struct ToolExecutor {
    sets: Vec<Arc<dyn ToolSet>>,
    index: RwLock<Arc<Index>>,
    default_timeout: Duration,
}

impl std::fmt::Debug for ToolExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolExecutor")
            .field("tools", &self.current().specs.iter().map(|s| &s.name).collect::<Vec<_>>())
            .field("default_timeout", &self.default_timeout)
            .finish()
    }
}

/// At most this many schema violations are listed in an error result.
const MAX_REPORTED_VIOLATIONS: usize = 5;

impl ToolExecutor {
    /// Indexes the tools of every set; names must be unique and schemas valid.
    pub fn new(
        sets: Vec<Arc<dyn ToolSet>>,
        default_timeout: Duration,
    ) -> Result<Self, ToolSetupError> {
        let index = Index::build(&sets)?;
        Ok(Self { sets, index: RwLock::new(Arc::new(index)), default_timeout })
    }

    fn current(&self) -> Arc<Index> {
        Arc::clone(&self.index.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Every tool's spec, in set order then registration order (as of the last
    /// [`refresh`](Self::refresh)).
    pub fn specs(&self) -> Arc<Vec<ToolSpec>> {
        Arc::clone(&self.current().specs)
    }

    /// Indexes the sets again if one of them changed its tools (its
    /// [`revision`](ToolSet::revision) moved). Returns whether the index changed. On an error
    /// (two tools now share a name, a new schema is invalid) the previous index stays.
    pub fn refresh(&self) -> Result<bool, ToolSetupError> {
        let current = self.current();
        if self.sets.iter().map(|set| set.revision()).eq(current.revisions.iter().copied()) {
            return Ok(false);
        }
        let index = Index::build(&self.sets)?;
        *self.index.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(index);
        Ok(true)
    }

    /// The timeout that applies to a tool.
    pub fn timeout_for(&self, name: &str) -> Duration {
        self.current().entries.get(name).and_then(|e| e.timeout).unwrap_or(self.default_timeout)
    }

    /// Whether a call of this tool left in flight by a crash may run again
    /// ([`Tool::safe_to_retry`](super::Tool::safe_to_retry)); `false` for an unknown tool.
    pub fn safe_to_retry(&self, name: &str) -> bool {
        self.current().entries.get(name).is_some_and(|e| e.safe_to_retry)
    }

    /// Runs one call. `arguments` is the parsed argument text (or the parse error). Never
    /// panics and never hangs longer than the tool's timeout.
    pub async fn execute(
        &self,
        name: &str,
        arguments: Result<Value, String>,
        ctx: ToolContext,
    ) -> ToolExecution {
        self.execute_shared(name, arguments.map(Arc::new), ctx).await
    }

    /// [`execute`](Self::execute) with arguments the caller keeps a share of (the run
    /// journals them): a tool set that can read them in place
    /// ([`ToolSet::call_shared`]) does not copy them.
    pub async fn execute_shared(
        &self,
        name: &str,
        arguments: Result<Arc<Value>, String>,
        ctx: ToolContext,
    ) -> ToolExecution {
        let started = Instant::now();
        let result = self.execute_inner(name, arguments, ctx).await;
        ToolExecution { result, duration: started.elapsed() }
    }

    async fn execute_inner(
        &self,
        name: &str,
        arguments: Result<Arc<Value>, String>,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let index = self.current();
        let entry =
            index.entries.get(name).ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?;
        let args = arguments.map_err(ToolError::BadJson)?;
        // `is_valid` stops at the first failure and builds no error: the common case pays
        // only for the check.
        if !entry.validator.is_valid(&args) {
            let violations = violations(&entry.validator, &args, MAX_REPORTED_VIOLATIONS);
            return Err(ToolError::InvalidArguments(violations));
        }
        let set =
            self.sets.get(entry.set).ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?;
        let timeout = entry.timeout.unwrap_or(self.default_timeout);
        let cancel = ctx.cancel.clone();
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let call = AssertUnwindSafe(set.call_shared(name, args, ctx)).catch_unwind();
        // The call first: a tool that finishes on its first poll never registers a
        // cancellation waiter or arms its timer.
        let outcome = tokio::select! {
            biased;
            outcome = tokio::time::timeout(timeout, call) => outcome,
            () = cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        match outcome {
            Ok(Ok(result)) => result,
            Ok(Err(panic)) => Err(ToolError::Panicked(panic_message(panic.as_ref()))),
            Err(_elapsed) => {
                // Tell a tool that kept working elsewhere (a spawned task) to stop.
                cancel.cancel();
                Err(ToolError::Timeout(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)))
            }
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}

/// What is wrong with `value` under `validator`: at most `max` violations, each with where it
/// is (`at /path: …`), joined with `; ` (empty when `value` is valid).
pub(crate) fn violations(validator: &jsonschema::Validator, value: &Value, max: usize) -> String {
    let violations: Vec<String> = validator
        .iter_errors(value)
        .take(max)
        .map(|error| {
            let path = error.instance_path().to_string();
            if path.is_empty() {
                error.to_string()
            } else {
                format!("at {path}: {error}")
            }
        })
        .collect();
    violations.join("; ")
}
