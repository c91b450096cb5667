//! The sliding window: which messages of the history are sent. Pure functions over the
//! history, shared by streaming and non-streaming runs. The full history stays in the
//! journal; the window only shapes the request.
//!
//! Tool-boundary safety: a window never starts with a tool result whose call was cut, and
//! never cuts between a call and its result.

use crate::message::{Message, Role};

/// Limits of the window. `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowPolicy {
    /// Messages sent (pinned and synthetic ones included).
    pub max_messages: Option<usize>,
    /// Tokens sent.
    pub max_tokens: Option<usize>,
}

/// The chosen window: pinned messages before `start`, then every message from `start` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowPlan {
    /// Pinned indices before `start`, in order (system messages, the turn's first user
    /// message).
    pub pinned: Vec<usize>,
    /// Where the contiguous tail begins.
    pub start: usize,
    /// Estimated tokens of the window (extra messages included).
    pub tokens: usize,
}

impl WindowPlan {
    /// How many history messages the window leaves out.
    pub fn dropped(&self) -> usize {
        self.start - self.pinned.len()
    }
}

/// The messages that must be sent do not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the messages that must be sent need {needed} tokens, but only {budget} fit in the context window")]
pub struct WindowError {
    /// Tokens of the required messages.
    pub needed: usize,
    /// The budget.
    pub budget: usize,
}

/// Whether a window starting at `start` keeps tools balanced: every tool result answers a call
/// inside the window, and every call is answered inside it, except the calls of the last
/// message (still pending).
pub fn is_tool_boundary_safe(messages: &[Message], start: usize) -> bool {
    let Some(window) = messages.get(start..) else { return true };
    // Few calls are open at a time: a vector beats a hash set and allocates only for calls.
    let mut open: Vec<&str> = Vec::new();
    let last = window.len().saturating_sub(1);
    for (i, message) in window.iter().enumerate() {
        for result in message.tool_results_iter() {
            match open.iter().position(|id| *id == result.call_id) {
                Some(index) => {
                    open.swap_remove(index);
                }
                None => return false,
            }
        }
        if i != last && !open.is_empty() {
            // A call of an earlier message is still unanswered when the next message begins.
            return false;
        }
        open.extend(message.tool_calls().map(|c| c.id.as_str()));
    }
    true
}

/// [`is_tool_boundary_safe`] for a fixed `start` over a history that only grows: each call
/// scans only the messages appended since the previous one, so asking again every iteration
/// costs O(new messages), not O(history).
#[derive(Debug, Clone, Default)]
pub struct BoundaryScan {
    start: usize,
    /// Window messages (from `start`) scanned so far.
    scanned: usize,
    /// Calls not answered yet, after the last scanned message.
    open: Vec<String>,
    /// After the last scanned message's results, a call of an earlier message was still
    /// open: unsafe as soon as another message follows.
    open_before_last: bool,
    /// An earlier message already made the window unbalanced (final: the history only grows).
    failed: bool,
}

impl BoundaryScan {
    /// A scan for windows starting at `start`.
    pub fn new(start: usize) -> Self {
        Self { start, ..Self::default() }
    }

    /// Where the scanned windows start.
    pub fn start(&self) -> usize {
        self.start
    }

    /// `is_tool_boundary_safe(messages, self.start())`, where `messages` extends the history
    /// of the previous call (a shorter one starts the scan over).
    pub fn is_safe(&mut self, messages: &[Message]) -> bool {
        let Some(window) = messages.get(self.start..) else { return true };
        if window.len() < self.scanned {
            *self = Self::new(self.start);
        }
        for message in &window[self.scanned..] {
            if self.failed {
                break;
            }
            if self.open_before_last {
                // The previous message had an unanswered earlier call and is not the last.
                self.failed = true;
                break;
            }
            for result in message.tool_results_iter() {
                match self.open.iter().position(|id| *id == result.call_id) {
                    Some(index) => {
                        self.open.swap_remove(index);
                    }
                    None => {
                        self.failed = true;
                        break;
                    }
                }
            }
            self.open_before_last = !self.open.is_empty();
            self.open.extend(message.tool_calls().map(|c| c.id.clone()));
            self.scanned += 1;
        }
        if self.failed {
            // Nothing more to learn: stay failed.
            self.scanned = window.len();
        }
        !self.failed
    }
}

/// The nearest index at or after `target` where a window can start safely (`messages.len()`
/// when there is none).
pub fn find_safe_tool_boundary(messages: &[Message], target: usize) -> usize {
    let mut start = target.min(messages.len());
    loop {
        // Fast path: a tool message can never start a window.
        while messages
            .get(start)
            .is_some_and(|m| m.role == Role::Tool || m.tool_results_iter().next().is_some())
        {
            start += 1;
        }
        if start >= messages.len() || is_tool_boundary_safe(messages, start) {
            return start;
        }
        start += 1;
    }
}

/// Where the current interaction begins: the last message, or the assistant message whose
/// calls the trailing tool message answers. It is always sent.
pub fn current_interaction(messages: &[Message], floor: usize) -> usize {
    let mut start = messages.len().saturating_sub(1);
    while start > floor && messages.get(start).is_some_and(|m| m.role == Role::Tool) {
        start -= 1;
    }
    start.max(floor)
}

/// Chooses the window: the pinned messages, `extra` synthetic messages of `extra_tokens`
/// (a compaction summary), and the longest tail of `messages[floor..]` that fits the policy and
/// starts at a safe boundary. `counts[i]` is the token count of `messages[i]`.
pub fn plan_window(
    messages: &[Message],
    counts: &[usize],
    pinned: &[usize],
    floor: usize,
    extra: (usize, usize),
    policy: WindowPolicy,
) -> Result<WindowPlan, WindowError> {
    let (extra_messages, extra_tokens) = extra;
    let count = |i: usize| counts.get(i).copied().unwrap_or(0);
    let required = current_interaction(messages, floor);
    let pinned_tokens: usize = pinned.iter().filter(|&&i| i < required).map(|&i| count(i)).sum();
    let required_tokens: usize = (required..messages.len()).map(count).sum();
    let mut tokens = pinned_tokens + extra_tokens + required_tokens;
    if let Some(budget) = policy.max_tokens {
        if tokens > budget {
            return Err(WindowError { needed: tokens, budget });
        }
    }
    let pinned_before = |start: usize| pinned.iter().filter(|&&i| i < start).count();
    let mut start = required;
    while start > floor {
        let candidate = start - 1;
        let is_pinned = pinned.contains(&candidate);
        let added = if is_pinned { 0 } else { count(candidate) };
        let messages_sent =
            pinned_before(candidate) + extra_messages + (messages.len() - candidate);
        if policy.max_messages.is_some_and(|max| messages_sent > max)
            || policy.max_tokens.is_some_and(|max| tokens + added > max)
        {
            break;
        }
        tokens += added;
        start = candidate;
    }
    // Move forward to a safe start; tokens only shrink.
    let safe = find_safe_tool_boundary(messages, start).min(required);
    for i in start..safe {
        if !pinned.contains(&i) {
            tokens -= count(i);
        }
    }
    let start = safe;
    Ok(WindowPlan {
        pinned: pinned.iter().copied().filter(|&i| i < start).collect(),
        start,
        tokens,
    })
}
