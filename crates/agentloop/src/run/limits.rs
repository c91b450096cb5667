//! The run's limits. A breached limit never throws: the run winds down with one tool-less
//! model call that writes a final answer, and the outcome names the limit.

use serde::{Deserialize, Serialize};

/// Limits on a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Model calls in the loop (the wind-down call is not counted). Default 20.
    pub max_iterations: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_iterations: 20 }
    }
}

/// Which limit ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitKind {
    /// `max_iterations`.
    Iterations,
}

impl Limits {
    /// The limit that forbids starting iteration `next` (1-based), if any.
    pub fn before_iteration(&self, next: u32) -> Option<LimitKind> {
        (next > self.max_iterations).then_some(LimitKind::Iterations)
    }
}
