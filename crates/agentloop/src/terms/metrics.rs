//! What a run did, in numbers: model and tool latencies, tokens, cost, and an audit trail of
//! every tool call. Folded from the journal like everything else.

use crate::message::{ToolResultContent, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One iteration's timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IterationMetrics {
    /// 1-based iteration number.
    pub iteration: u32,
    /// Wall time of the whole iteration (model call and tools).
    pub duration_ms: u64,
}

/// How a tool call was approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApprovalRecord {
    /// No approval was asked (or every hook approved at once).
    Automatic,
    /// Deferred to a human, who approved.
    Approved,
    /// Rejected, with the reason.
    Rejected {
        /// Why.
        reason: String,
    },
    /// Deferred to a human; no decision yet.
    Pending,
}

/// One tool call, as the audit trail records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuditEntry {
    /// The iteration it belongs to.
    pub iteration: u32,
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments it ran with (after hooks), or `{"_raw": …}` (shared with the
    /// `tool_started` / `approval_requested` event; serialized as the value itself).
    #[serde(serialize_with = "crate::canonical::serialize")]
    pub arguments: Arc<Value>,
    /// Its result or error text (once finished).
    pub result: Option<ToolResultContent>,
    /// Whether the result is an error.
    pub is_error: bool,
    /// How long it ran.
    pub duration_ms: u64,
    /// How it was approved.
    pub approval: ApprovalRecord,
}

/// A run's metrics.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct Metrics {
    /// Model calls made (the wind-down call included).
    pub model_calls: u32,
    /// Their summed latency.
    pub model_time_ms: u64,
    /// Failed model calls.
    pub model_errors: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tool calls by tool name.
    pub tool_calls_by_name: BTreeMap<String, u32>,
    /// Tool calls that ended in an error result.
    pub tool_errors: u32,
    /// Summed tool latency.
    pub tool_time_ms: u64,
    /// Per-iteration timing.
    pub iterations: Vec<IterationMetrics>,
    /// Tokens.
    pub usage: Usage,
    /// USD, when the run has a price.
    pub cost_usd: f64,
    /// Every tool call. Shared: an outcome's metrics and the run's own refer to the same
    /// trail, so finishing a run does not copy it (serialized as the list itself).
    pub audit: Arc<Vec<AuditEntry>>,
}
