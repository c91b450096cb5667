//! Tool-output trimming: an output over its limit is kept whole in the run (its journal and
//! artifact space) and replaced in the model's view by a head and tail excerpt with a
//! reference; the built-in `read_tool_output` tool pages through the whole output.

use crate::tool::ToolSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;

/// The name of the built-in paging tool (offered once an output was trimmed).
pub const READ_TOOL_OUTPUT: &str = "read_tool_output";

/// Trimming settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TrimConfig {
    /// Outputs longer than this many bytes are trimmed (`None`: never). Default 16 KiB.
    pub max_bytes: Option<usize>,
    /// Or longer than this many tokens (estimated at 4 bytes per token, so the decision does
    /// not depend on the tokenizer and replays the same).
    pub max_tokens: Option<usize>,
    /// Per-tool byte limits, overriding `max_bytes`.
    pub per_tool: BTreeMap<String, usize>,
    /// Bytes of the excerpt kept from the start (and as many from the end). Default 2 KiB.
    pub excerpt_bytes: usize,
    /// Bytes `read_tool_output` returns when asked for no length. Default 8 KiB.
    pub page_bytes: usize,
    /// Tool outputs of iterations older than the last K are collapsed to one line in the
    /// model's view (`None`: never, the default).
    pub collapse_after_turns: Option<u32>,
}

impl Default for TrimConfig {
    fn default() -> Self {
        Self {
            max_bytes: Some(16 * 1024),
            max_tokens: None,
            per_tool: BTreeMap::new(),
            excerpt_bytes: 2 * 1024,
            page_bytes: 8 * 1024,
            collapse_after_turns: None,
        }
    }
}

impl TrimConfig {
    /// The byte limit for a tool's output, if any.
    pub fn limit_for(&self, tool: &str) -> Option<usize> {
        if let Some(limit) = self.per_tool.get(tool) {
            return Some(*limit);
        }
        let from_tokens = self.max_tokens.map(|t| t.saturating_mul(4));
        match (self.max_bytes, from_tokens) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The largest char boundary at or below `index`.
fn floor_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The head and tail excerpt that replaces a trimmed output.
pub fn excerpt(full: &str, reference: &str, excerpt_bytes: usize) -> String {
    let head_end = floor_boundary(full, excerpt_bytes);
    let tail_start = floor_boundary(full, full.len().saturating_sub(excerpt_bytes)).max(head_end);
    format!(
        "[This output was trimmed: {total} bytes in all. Shown: bytes 0-{head_end} and \
         {tail_start}-{total}. Call {READ_TOOL_OUTPUT} with ref \"{reference}\", an offset and a \
         length to read the rest.]\n{head}\n[… {omitted} bytes omitted …]\n{tail}",
        total = full.len(),
        head = &full[..head_end],
        omitted = tail_start - head_end,
        tail = &full[tail_start..],
    )
}

/// A page of a trimmed output, with a header saying where it is.
pub fn page(full: &str, offset: usize, length: usize) -> String {
    let start = floor_boundary(full, offset);
    let end = floor_boundary(full, offset.saturating_add(length)).max(start);
    let more = if end < full.len() {
        format!(" {} bytes follow.", full.len() - end)
    } else {
        " This is the end.".into()
    };
    format!("[bytes {start}-{end} of {}.{more}]\n{}", full.len(), &full[start..end])
}

/// The one line an old output collapses to.
pub fn collapsed(tool: &str, bytes: usize, reference: &str) -> String {
    format!("[Output of {tool} ({bytes} bytes) collapsed to save context; call {READ_TOOL_OUTPUT} with ref \"{reference}\" to read it.]")
}

/// The spec of the paging tool.
pub fn read_tool_output_spec() -> ToolSpec {
    ToolSpec {
        name: READ_TOOL_OUTPUT.into(),
        description:
            "Read part of a tool output that was trimmed or collapsed in the conversation. \
                      Use the ref given in the trimmed output."
                .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The ref of the output."},
                "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start at (default 0)."},
                "length": {"type": "integer", "minimum": 1, "description": "How many bytes to read (default 8192)."}
            },
            "required": ["ref"]
        }),
    }
}
