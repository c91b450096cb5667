//! The prefix cache: KV caches of prompt prefixes, so that a request whose prompt starts with
//! an earlier one's does not evaluate that part again. An agent's second model call of a turn
//! repeats the whole first prompt (instructions, tools, worked examples, the question) and
//! adds the call and its result; a chat's next turn repeats the conversation.
//!
//! Prefixes end right after a control token (`<|im_start|>`, `<start_of_turn>`, …): the text
//! before such a token tokenizes the same whatever follows it, so the next prompt's tokens
//! match. Entries are kept least-recently-used first out, [`CAPACITY`] at most. A clone of the
//! weights shares their tensors; only the KV cache is its own.

use crate::engine::{self, Weights};
use crate::tokenizer::Tokenizer;
use crate::LocalError;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Prefixes kept.
pub(crate) const CAPACITY: usize = 8;

/// Cached prefixes: their tokens and the weights with those tokens in their KV cache.
#[derive(Default)]
pub(crate) struct PrefixCache {
    entries: Mutex<VecDeque<(Vec<u32>, Weights)>>,
}

impl PrefixCache {
    /// The weights for `prompt` with the longest cached prefix already fed (a strict prefix:
    /// at least one token is left to run), and how many tokens that is; else `fresh` and 0.
    pub(crate) fn start(&self, prompt: &[u32], fresh: &Weights) -> (Weights, usize) {
        let Ok(mut entries) = self.entries.lock() else {
            return (fresh.clone(), 0);
        };
        let best = entries
            .iter()
            .enumerate()
            .filter(|(_, (tokens, _))| tokens.len() < prompt.len() && prompt.starts_with(tokens))
            .max_by_key(|(_, (tokens, _))| tokens.len())
            .map(|(index, _)| index);
        match best.and_then(|index| entries.remove(index)) {
            Some((tokens, weights)) => {
                let length = tokens.len();
                let copy = weights.clone();
                entries.push_back((tokens, weights));
                (copy, length)
            }
            None => (fresh.clone(), 0),
        }
    }

    /// Keeps `weights` (holding `tokens`) for later prompts.
    pub(crate) fn keep(&self, tokens: Vec<u32>, weights: Weights) {
        let Ok(mut entries) = self.entries.lock() else { return };
        entries.retain(|(kept, _)| kept != &tokens);
        entries.push_back((tokens, weights));
        while entries.len() > CAPACITY {
            entries.pop_front();
        }
    }
}

/// Where prefixes of `prompt` may end: right after each control token, before the last token.
/// `all`: every such point (for an architecture that runs a prompt in batches from any
/// position); otherwise only the last.
pub(crate) fn boundaries(prompt: &[u32], tokenizer: &Tokenizer, all: bool) -> Vec<usize> {
    let mut points: Vec<usize> = prompt
        .iter()
        .enumerate()
        .filter(|&(index, &token)| index + 1 < prompt.len() && tokenizer.is_control(token))
        .map(|(index, _)| index + 1)
        .collect();
    if !all {
        points = points.pop().into_iter().collect();
    }
    points
}

/// Feeds `prompt` from the cache's best prefix up to each boundary past it, keeping each
/// prefix; the weights and how many prompt tokens they hold.
pub(crate) fn warm(
    cache: &PrefixCache,
    fresh: &Weights,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    all: bool,
) -> Result<(Weights, usize), LocalError> {
    let (mut weights, mut cached) = cache.start(prompt, fresh);
    let start = cached;
    for point in boundaries(prompt, tokenizer, all).into_iter().filter(|&p| p > start) {
        engine::prefill(&mut weights, &prompt[cached..point], cached)?;
        cache.keep(prompt[..point].to_vec(), weights.clone());
        cached = point;
    }
    Ok((weights, cached))
}
