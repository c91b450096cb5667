//! Token counting: exact for OpenAI model families (tiktoken's o200k / cl100k encodings, which
//! ship with the crate), a calibrated estimate for the rest. The run caches a count per message
//! and corrects its estimates with the input tokens the provider reports.

use crate::message::{Message, Part, ToolResultContent};
use std::sync::Arc;

/// Counts tokens.
pub trait TokenCounter: Send + Sync {
    /// A short name (`o200k_base`, `estimate`, …).
    fn name(&self) -> &str;

    /// Tokens of a text.
    fn count_text(&self, text: &str) -> usize;

    /// Tokens of a message, with a small per-message and per-part overhead for the roles and
    /// separators that chat formats add.
    fn count_message(&self, message: &Message) -> usize {
        const PER_MESSAGE: usize = 4;
        const PER_PART: usize = 3;
        message
            .content
            .iter()
            .map(|part| {
                PER_PART
                    + match part {
                        Part::Text { text } => self.count_text(text),
                        Part::ToolCall(call) => {
                            self.count_text(&call.name) + self.count_text(&call.arguments)
                        }
                        Part::ToolResult(result) => match &result.content {
                            ToolResultContent::Text(text) => self.count_text(text),
                            ToolResultContent::Json(value) => {
                                self.count_text(&crate::canonical::to_string(value))
                            }
                            stored @ ToolResultContent::Stored(_) => {
                                self.count_text(&stored.to_text())
                            }
                        },
                        Part::Reasoning(reasoning) => self.count_text(&reasoning.text),
                        Part::Opaque(opaque) => {
                            self.count_text(&crate::canonical::to_string(&opaque.value))
                        }
                        Part::Citation(citation) => {
                            self.count_text(&crate::canonical::to_string(&citation.value))
                        }
                        // Providers bill images by size; a typical tile budget.
                        Part::Image { .. } | Part::File { .. } => 765,
                    }
            })
            .sum::<usize>()
            + PER_MESSAGE
    }
}

/// An estimate from the text length: `bytes / bytes_per_token`. 4 bytes per token is right
/// within ~20 % for English prose and code on the common tokenizers; the run corrects it with
/// the provider's reported usage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EstimateCounter {
    /// Bytes per token.
    pub bytes_per_token: f64,
}

impl Default for EstimateCounter {
    fn default() -> Self {
        Self { bytes_per_token: 4.0 }
    }
}

impl TokenCounter for EstimateCounter {
    fn name(&self) -> &str {
        "estimate"
    }

    fn count_text(&self, text: &str) -> usize {
        (text.len() as f64 / self.bytes_per_token).ceil() as usize
    }
}

/// Exact counts with a tiktoken encoding. The encoding is tiktoken-rs's own, shared by the
/// whole process and loaded on the first count — not when an agent is built: loading o200k
/// takes about a second in a debug build, and every agent for an OpenAI model has a counter.
#[derive(Clone)]
pub struct TiktokenCounter {
    name: &'static str,
    bpe: fn() -> &'static tiktoken_rs::CoreBPE,
}

impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenCounter").field("encoding", &self.name).finish()
    }
}

/// A tokenizer could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not load the {encoding} tokenizer: {message}")]
pub struct TokenizerError {
    /// The encoding.
    pub encoding: &'static str,
    /// Why.
    pub message: String,
}

impl TiktokenCounter {
    /// The o200k_base encoding (GPT-4o, GPT-4.1, o-series, GPT-5). The encoding is built into
    /// tiktoken-rs and loaded on the first count; this does not fail today (the `Result` is
    /// kept for encodings that may have to be found).
    pub fn o200k() -> Result<Self, TokenizerError> {
        Ok(Self { name: "o200k_base", bpe: tiktoken_rs::o200k_base_singleton })
    }

    /// The cl100k_base encoding (GPT-4, GPT-3.5), loaded as [`o200k`](Self::o200k) is.
    pub fn cl100k() -> Result<Self, TokenizerError> {
        Ok(Self { name: "cl100k_base", bpe: tiktoken_rs::cl100k_base_singleton })
    }
}

impl TokenCounter for TiktokenCounter {
    fn name(&self) -> &str {
        self.name
    }

    fn count_text(&self, text: &str) -> usize {
        (self.bpe)().encode_ordinary(text).len()
    }
}

/// Which encoding a model name uses, if it is an OpenAI family.
pub fn openai_encoding(model: &str) -> Option<&'static str> {
    let model = model.rsplit('/').next().unwrap_or(model);
    if ["gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss"]
        .iter()
        .any(|prefix| model.starts_with(prefix))
    {
        Some("o200k_base")
    } else if ["gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada"]
        .iter()
        .any(|p| model.starts_with(p))
    {
        Some("cl100k_base")
    } else {
        None
    }
}

/// The best counter for a model: exact for OpenAI families, the estimate otherwise.
pub fn counter_for_model(model: &str) -> Arc<dyn TokenCounter> {
    let exact = match openai_encoding(model) {
        Some("o200k_base") => TiktokenCounter::o200k().ok(),
        Some("cl100k_base") => TiktokenCounter::cl100k().ok(),
        _ => None,
    };
    match exact {
        Some(counter) => Arc::new(counter),
        None => Arc::new(EstimateCounter::default()),
    }
}

/// Context windows (input + output tokens) of well-known models, by name prefix (the longest
/// matching prefix wins). Override with `ContextConfig::context_window`.
pub const KNOWN_CONTEXT_WINDOWS: &[(&str, u32)] = &[
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-1.5-flash", 1_048_576),
    ("gemini-2", 1_048_576),
    ("llama3.1", 131_072),
    ("llama-3.1", 131_072),
    ("qwen2.5", 32_768),
    ("mistral-large", 131_072),
    ("deepseek-chat", 65_536),
    ("smollm2", 8_192),
    ("SmolLM2", 8_192),
];

/// The context window of a model, when it is in [`KNOWN_CONTEXT_WINDOWS`].
pub fn context_window_for(model: &str) -> Option<u32> {
    let model = model.rsplit('/').next().unwrap_or(model);
    KNOWN_CONTEXT_WINDOWS
        .iter()
        .filter(|(prefix, _)| model.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}
