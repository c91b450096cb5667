//! The circuit breaker and stall detection: the same tool failing the same way again and
//! again ends the run; the same call repeated with identical arguments is flagged.

use crate::message::ToolCall;
use crate::terms::BreakerConfig;
use crate::tool::parse_arguments;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The breaker's memory (part of the run's state, rebuilt by the fold).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BreakerState {
    /// Per tool: the last error text and how many times in a row it happened.
    failures: BTreeMap<String, (String, u32)>,
    /// The last call (tool, canonical arguments) and how many times in a row it was made.
    last_call: Option<(String, String, u32)>,
}

/// What the breaker saw in one tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to report.
    Fine,
    /// The same call was made `count` times in a row.
    Stalled {
        /// How many times.
        count: u32,
    },
    /// The tool failed the same way `count` times in a row.
    Open {
        /// The error text.
        error: String,
        /// How many times.
        count: u32,
    },
}

impl BreakerState {
    /// How many times in a row a call with this key would have been made, counting it.
    pub fn repeats(&self, tool: &str, key: &str) -> u32 {
        match &self.last_call {
            Some((last_tool, last_key, count)) if last_tool == tool && last_key == key => count + 1,
            _ => 1,
        }
    }

    /// Would this call (counted) be a stall?
    pub fn would_stall(&self, config: &BreakerConfig, tool: &str, key: &str) -> Verdict {
        let count = self.repeats(tool, key);
        if config.max_repeated_calls > 0 && count >= config.max_repeated_calls {
            Verdict::Stalled { count }
        } else {
            Verdict::Fine
        }
    }

    /// Records a call that starts (in start order); `key` is [`call_key`] of it.
    pub fn on_call(&mut self, config: &BreakerConfig, tool: &str, key: String) -> Verdict {
        let verdict = self.would_stall(config, tool, &key);
        let count = self.repeats(tool, &key);
        match &mut self.last_call {
            // The same tool again: keep its name.
            Some((last_tool, last_key, last_count)) if last_tool == tool => {
                *last_key = key;
                *last_count = count;
            }
            last => *last = Some((tool.to_owned(), key, count)),
        }
        verdict
    }

    /// Records a result of `tool`; `error` is its error text, if it failed.
    pub fn on_result(
        &mut self,
        config: &BreakerConfig,
        tool: &str,
        error: Option<&str>,
    ) -> Verdict {
        let Some(error) = error else {
            self.failures.remove(tool);
            return Verdict::Fine;
        };
        let entry = self.failures.entry(tool.to_owned()).or_insert_with(|| (String::new(), 0));
        if entry.0 == error {
            entry.1 += 1;
        } else {
            *entry = (error.to_owned(), 1);
        }
        if config.max_same_failures > 0 && entry.1 >= config.max_same_failures {
            Verdict::Open { error: error.to_owned(), count: entry.1 }
        } else {
            Verdict::Fine
        }
    }
}

/// The key calls are compared by: the arguments the model sent, as canonical JSON (so key
/// order and spacing do not matter), or the raw text when it is not JSON.
pub fn call_key(call: &ToolCall) -> String {
    match parse_arguments(&call.arguments) {
        Ok(value) => crate::canonical::to_string_with_capacity(&value, call.arguments.len()),
        Err(_) => call.arguments.clone(),
    }
}

#[cfg(test)]
mod tests;
