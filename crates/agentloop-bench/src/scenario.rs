//! The scripted conversation every driver goes through, encoded in the model name so that
//! the server needs no state: `bench-k{K}-p{P}-l{L}`.

use std::fmt;
use std::time::Duration;

/// What the mock model does: answer with up to `parallel` calls of `add {"a":1,"b":2}` per
/// turn until the conversation holds `tool_results` tool results, then a final text; each
/// response is delayed by `latency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Script {
    /// K: the tool results the conversation must hold before the final answer.
    pub tool_results: u32,
    /// P: tool calls per model turn (the last turn may have fewer, to reach K exactly).
    pub parallel: u32,
    /// L: how long the server waits before each response.
    pub latency: Duration,
}

/// A model name that is not a [`Script`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model {0:?} is not a bench script (expected bench-k<K>-p<P>-l<ms>, P >= 1)")]
pub struct ScriptError(pub String);

/// The answer of the final turn.
pub const FINAL_ANSWER: &str = "3";

impl Script {
    /// A script with K tool results, P calls per turn and `latency_ms` per response.
    pub fn new(tool_results: u32, parallel: u32, latency_ms: u64) -> Self {
        Self { tool_results, parallel, latency: Duration::from_millis(latency_ms) }
    }

    /// Reads a model name `bench-k10-p1-l50`.
    pub fn parse(model: &str) -> Result<Self, ScriptError> {
        let error = || ScriptError(model.to_owned());
        let rest = model.strip_prefix("bench-").ok_or_else(error)?;
        let mut parts = rest.split('-');
        let mut field = |prefix: char| -> Result<u64, ScriptError> {
            parts
                .next()
                .and_then(|p| p.strip_prefix(prefix))
                .and_then(|n| n.parse().ok())
                .ok_or_else(error)
        };
        let k = field('k')?;
        let p = field('p')?;
        let l = field('l')?;
        if parts.next().is_some() || p == 0 {
            return Err(error());
        }
        let k = u32::try_from(k).map_err(|_| error())?;
        let p = u32::try_from(p).map_err(|_| error())?;
        Ok(Self::new(k, p, l))
    }

    /// The model name that encodes this script.
    pub fn model_name(&self) -> String {
        self.to_string()
    }

    /// Tool calls the next turn makes when the conversation holds `results` tool results
    /// (0: the final answer).
    pub fn calls_after(&self, results: u32) -> u32 {
        self.tool_results.saturating_sub(results).min(self.parallel)
    }

    /// Model round trips (HTTP requests) of one run: the tool turns and the final one.
    pub fn requests_per_run(&self) -> u64 {
        u64::from(self.tool_results.div_ceil(self.parallel)) + 1
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bench-k{}-p{}-l{}", self.tool_results, self.parallel, self.latency.as_millis())
    }
}

#[cfg(test)]
mod tests;
