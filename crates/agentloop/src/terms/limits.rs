//! One budget for a run. Limits are checked before each model call and before each tool
//! call; a breach never throws: the run winds down with one tool-less model call that writes a
//! final answer, and the outcome names the limit.

use crate::message::Usage;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Limits on a run. `None` means unlimited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Limits {
    /// Model calls in the loop (the wind-down call is not counted). Default 20.
    pub max_iterations: u32,
    /// Tool calls in the whole run.
    pub max_tool_calls: Option<u32>,
    /// Tool calls per tool name.
    pub max_tool_calls_per_tool: BTreeMap<String, u32>,
    /// Input tokens, summed over the run's model calls (as reported by the provider).
    pub max_input_tokens: Option<u64>,
    /// Output tokens, summed likewise.
    pub max_output_tokens: Option<u64>,
    /// Input plus output tokens.
    pub max_total_tokens: Option<u64>,
    /// Cost in USD, from the run's [`Price`].
    pub max_cost_usd: Option<f64>,
    /// Wall-clock time of the whole run, in milliseconds.
    pub max_duration_ms: Option<u64>,
    /// Failed model calls in a row (after the provider's retries) before the run gives up.
    /// Default 3.
    pub max_consecutive_model_errors: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_iterations: 20,
            max_tool_calls: None,
            max_tool_calls_per_tool: BTreeMap::new(),
            max_input_tokens: None,
            max_output_tokens: None,
            max_total_tokens: None,
            max_cost_usd: None,
            max_duration_ms: None,
            max_consecutive_model_errors: 3,
        }
    }
}

/// Which limit ended a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitKind {
    /// `max_iterations`.
    Iterations,
    /// `max_tool_calls`.
    ToolCalls,
    /// `max_tool_calls_per_tool` for this tool.
    ToolCallsOf {
        /// The tool.
        tool: String,
    },
    /// `max_input_tokens`.
    InputTokens,
    /// `max_output_tokens`.
    OutputTokens,
    /// `max_total_tokens`.
    TotalTokens,
    /// `max_cost_usd`.
    Cost,
    /// `max_duration_ms`.
    Duration,
    /// `max_consecutive_model_errors`.
    ConsecutiveModelErrors,
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Iterations => f.write_str("iteration limit"),
            Self::ToolCalls => f.write_str("tool-call limit"),
            Self::ToolCallsOf { tool } => write!(f, "call limit of tool '{tool}'"),
            Self::InputTokens => f.write_str("input-token limit"),
            Self::OutputTokens => f.write_str("output-token limit"),
            Self::TotalTokens => f.write_str("token limit"),
            Self::Cost => f.write_str("cost limit"),
            Self::Duration => f.write_str("time limit"),
            Self::ConsecutiveModelErrors => f.write_str("model error limit"),
        }
    }
}

/// USD per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Price {
    /// Uncached input tokens.
    pub input_per_mtok: f64,
    /// Output tokens (reasoning included).
    pub output_per_mtok: f64,
    /// Input tokens read from the provider's cache (default: the input price).
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
    /// Input tokens written to the provider's cache (`Usage::cache_write_input`; default: the
    /// input price). Left out of the configuration's JSON when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

impl Price {
    /// A price from input and output USD per million tokens.
    pub fn per_million(input: f64, output: f64) -> Self {
        Self {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
        }
    }

    /// With a separate price for cached input tokens.
    pub fn with_cached_input(mut self, per_mtok: f64) -> Self {
        self.cached_input_per_mtok = Some(per_mtok);
        self
    }

    /// With a separate price for input tokens written to the cache (Anthropic: 1.25 × the
    /// input price for the 5-minute cache).
    pub fn with_cache_write(mut self, per_mtok: f64) -> Self {
        self.cache_write_per_mtok = Some(per_mtok);
        self
    }

    /// The cost of this usage in USD: cache reads and cache writes at their own prices, the
    /// rest of the input at the input price, and the output.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_input.min(usage.input);
        let written = usage.cache_write_input.min(usage.input - cached);
        let uncached = usage.input - cached - written;
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        let write_price = self.cache_write_per_mtok.unwrap_or(self.input_per_mtok);
        (uncached as f64 * self.input_per_mtok
            + cached as f64 * cached_price
            + written as f64 * write_price
            + usage.output as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// Prices by model name. The runtime has no built-in prices (they change); fill it from your
/// provider's price list, or from config.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PriceTable(pub BTreeMap<String, Price>);

impl PriceTable {
    /// Adds or replaces a model's price.
    pub fn with(mut self, model: impl Into<String>, price: Price) -> Self {
        self.0.insert(model.into(), price);
        self
    }

    /// The price of a model: an exact name, else the longest table entry that prefixes it
    /// (so `gpt-4o` prices `gpt-4o-2024-08-06`).
    pub fn get(&self, model: &str) -> Option<Price> {
        if let Some(price) = self.0.get(model) {
            return Some(*price);
        }
        self.0
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| *price)
    }
}

/// What the budget has used so far.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Spent {
    /// Tool calls started (or refused by a limit).
    pub tool_calls: u32,
    /// Tool calls by tool name.
    pub tool_calls_by_name: BTreeMap<String, u32>,
    /// Tokens.
    pub usage: Usage,
    /// USD.
    pub cost_usd: f64,
    /// Failed model calls in a row.
    pub consecutive_model_errors: u32,
}

impl Limits {
    /// The limit that forbids another model call (iteration `next`, 1-based), if any.
    pub fn before_model_call(
        &self,
        next: u32,
        spent: &Spent,
        elapsed_ms: u64,
    ) -> Option<LimitKind> {
        if next > self.max_iterations {
            return Some(LimitKind::Iterations);
        }
        self.spent_limit(spent, elapsed_ms)
    }

    /// The limit that forbids calling `tool` now, if any.
    pub fn before_tool_call(
        &self,
        tool: &str,
        spent: &Spent,
        elapsed_ms: u64,
    ) -> Option<LimitKind> {
        if self.max_tool_calls.is_some_and(|max| spent.tool_calls >= max) {
            return Some(LimitKind::ToolCalls);
        }
        if let Some(max) = self.max_tool_calls_per_tool.get(tool) {
            if spent.tool_calls_by_name.get(tool).copied().unwrap_or(0) >= *max {
                return Some(LimitKind::ToolCallsOf { tool: tool.to_owned() });
            }
        }
        self.spent_limit(spent, elapsed_ms)
    }

    fn spent_limit(&self, spent: &Spent, elapsed_ms: u64) -> Option<LimitKind> {
        let usage = &spent.usage;
        if self.max_input_tokens.is_some_and(|max| usage.input >= max) {
            Some(LimitKind::InputTokens)
        } else if self.max_output_tokens.is_some_and(|max| usage.output >= max) {
            Some(LimitKind::OutputTokens)
        } else if self.max_total_tokens.is_some_and(|max| usage.total() >= max) {
            Some(LimitKind::TotalTokens)
        } else if self.max_cost_usd.is_some_and(|max| spent.cost_usd >= max) {
            Some(LimitKind::Cost)
        } else if self.max_duration_ms.is_some_and(|max| elapsed_ms >= max) {
            Some(LimitKind::Duration)
        } else {
            None
        }
    }
}
