//! The circuit breaker's settings: how many same failures in a row end the run, what a
//! repeated call does, and whether a tool error ends the run. (The breaker itself is the
//! run's: `run/breaker.rs`.)

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to do when the model repeats the same call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StallAction {
    /// Emit a `stall_detected` event and go on.
    #[default]
    Warn,
    /// Also add a note to the model's next request asking it to change course.
    Note,
    /// End the run.
    Stop,
}

/// Circuit-breaker settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct BreakerConfig {
    /// The same tool failing with the same error this many times in a row ends the run
    /// (0: never). Default 3.
    pub max_same_failures: u32,
    /// The same tool called with identical arguments this many times in a row triggers
    /// `stall_action` (0: never). Default 3.
    pub max_repeated_calls: u32,
    /// What a stall does.
    pub stall_action: StallAction,
    /// The note added to the next request when `stall_action` is `note`.
    pub stall_note: String,
    /// Whether a tool error ends the run.
    pub tool_failure_mode: ToolFailureMode,
}

/// Default stall note.
pub const DEFAULT_STALL_NOTE: &str = "You have called the same tool with the same arguments \
several times in a row and got the same kind of result. Do not repeat that call: try a \
different approach, or answer with what you have.";

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            max_same_failures: 3,
            max_repeated_calls: 3,
            stall_action: StallAction::Warn,
            stall_note: DEFAULT_STALL_NOTE.to_owned(),
            tool_failure_mode: ToolFailureMode::Continue,
        }
    }
}

/// Whether a tool error ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolFailureMode {
    /// Errors become error results the model sees; the loop goes on.
    #[default]
    Continue,
    /// The first tool error ends the run.
    Fail,
}
