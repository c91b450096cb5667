//! Compaction: an LLM summarises the history before a tool-boundary-safe cut point; the model's
//! view then shows the summary instead. The originals stay in the journal.

use crate::message::Message;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default instructions of the summarisation call.
pub const DEFAULT_COMPACTION_PROMPT: &str = "Summarise the conversation above for yourself, so \
that you can continue the task without it. Keep: the user's goal and constraints, decisions \
made, facts and results found (with exact values, names, paths and identifiers), what has been \
done, what failed and why, and what remains to do. Leave out pleasantries and repetition. \
Write plain text.";

/// Compaction settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct CompactionConfig {
    /// Whether the run compacts (it needs a known context window for the threshold).
    pub enabled: bool,
    /// Compact at the start of an iteration when the estimated input passes this share of
    /// the window. Default 0.8.
    pub threshold: f32,
    /// Compactions per run. Default 2.
    pub max_attempts: u32,
    /// Messages at the end kept verbatim. Default 6.
    pub keep_recent_messages: usize,
    /// The summarisation request.
    pub prompt: String,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 0.8,
            max_attempts: 2,
            keep_recent_messages: 6,
            prompt: DEFAULT_COMPACTION_PROMPT.to_owned(),
        }
    }
}

/// Why a compaction happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompactionReason {
    /// The estimated input passed the threshold.
    Threshold,
    /// A model turn finished with `length`.
    Length,
    /// The provider said the context was too long.
    ContextLengthExceeded,
}

/// A compaction in force: `history[..cut]` is replaced by `summary` in the model's view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    /// Where the kept history begins.
    pub cut: usize,
    /// The summary of everything before.
    pub summary: String,
}

/// The message that stands for the summarised history.
pub fn summary_message(summary: &str) -> Message {
    Message::user(format!(
        "[Summary of the earlier conversation, written to save context]\n{summary}"
    ))
}
