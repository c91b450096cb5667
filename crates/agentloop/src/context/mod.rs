//! Context management: token counting, the tool-boundary-safe sliding window, tool-output
//! trimming and compaction. The decisions (what to send, when to trim, when to compact) are
//! made in the sans-IO [`Run`](crate::run::Run); this module holds the pure parts.

pub mod compact;
pub mod tokens;
pub mod trim;
pub mod window;

pub use compact::{Compaction, CompactionConfig, CompactionReason};
pub use tokens::{
    context_window_for, counter_for_model, EstimateCounter, TiktokenCounter, TokenCounter,
};
pub use trim::TrimConfig;
pub use window::{find_safe_tool_boundary, is_tool_boundary_safe, WindowPolicy};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a run manages its context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ContextConfig {
    /// The model's context window in tokens (`None`: unknown; then only the message-count
    /// window applies, and no threshold compaction).
    pub context_window: Option<u32>,
    /// Tokens kept free for the answer (the request's `max_tokens` when it sets one).
    /// Default 4096.
    pub reserved_output: u32,
    /// A safety margin for estimate errors. Default 512.
    pub margin: u32,
    /// Messages sent at most (`None`: no limit). Default 50.
    pub max_input_messages: Option<usize>,
    /// Tool-output trimming.
    pub trim: TrimConfig,
    /// Compaction.
    pub compaction: CompactionConfig,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            context_window: None,
            reserved_output: 4096,
            margin: 512,
            max_input_messages: Some(50),
            trim: TrimConfig::default(),
            compaction: CompactionConfig::default(),
        }
    }
}

impl ContextConfig {
    /// Input tokens that fit: the window minus the output reserve and the margin.
    pub fn input_budget(&self, max_tokens: Option<u32>) -> Option<usize> {
        let window = self.context_window?;
        let reserve = max_tokens.unwrap_or(self.reserved_output);
        Some(window.saturating_sub(reserve).saturating_sub(self.margin) as usize)
    }
}

#[cfg(test)]
mod tests;
