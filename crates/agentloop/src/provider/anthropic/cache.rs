//! Cache breakpoints (`cache_control: {"type": "ephemeral"}`) on an encoded Messages request,
//! as a [`CachePolicy`] places them. The API caches the prefix up to each marked block in its
//! order (tools, then `system`, then `messages`), at most four marks per request; a thinking
//! block cannot carry one (the mark goes to the block before it in the same message).

use crate::provider::cache::{distinct_points, Breakpoints, CachePoint, CachePolicy};
use crate::provider::ProviderError;
use serde_json::{json, Map, Value};

/// Where one mark goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Tools,
    System,
    /// The API message's index and the block's.
    Block(usize, usize),
}

/// Marks `body` (an encoded request; `ends` is where each of the request's messages ended in
/// it) as `policy` says. A policy asking for more than [`MAX_BREAKPOINTS`](crate::provider::cache::MAX_BREAKPOINTS) points fails,
/// whatever the conversation, so that it fails on the first call.
pub(super) fn mark(
    policy: &CachePolicy,
    ends: &[Option<(usize, usize)>],
    body: &mut Map<String, Value>,
) -> Result<(), ProviderError> {
    let marks = match &policy.breakpoints {
        Breakpoints::Off => return Ok(()),
        Breakpoints::Auto => auto(body),
        Breakpoints::Explicit(points) => {
            let asked = distinct_points(points, "Anthropic")?;
            asked.iter().filter_map(|point| explicit(*point, ends, body)).collect()
        }
    };
    let mut placed: Vec<Mark> = Vec::new();
    for mark in marks.into_iter().filter_map(|mark| cacheable(mark, body)) {
        if !placed.contains(&mark) {
            placed.push(mark);
        }
    }
    for mark in placed {
        apply(mark, body);
    }
    Ok(())
}

/// The automatic marks: the static prefix (the system prompt, or the tools without one), the
/// end of the user turn before the last one (what the previous call wrote, read now), and the
/// end of the last user turn (written now, read by the next call). Assistant turns are never
/// marked: a paused turn (`pause_turn`) or a prefill goes back exactly as it came.
fn auto(body: &Map<String, Value>) -> Vec<Mark> {
    let mut marks = Vec::new();
    if body.contains_key("system") {
        marks.push(Mark::System);
    } else if body.get("tools").and_then(Value::as_array).is_some_and(|t| !t.is_empty()) {
        marks.push(Mark::Tools);
    }
    let turns = messages(body);
    let mut users = turns.iter().enumerate().rev().filter(|(_, turn)| turn["role"] == "user");
    let last = users.next().map(|(at, _)| at);
    let previous = users.next().map(|(at, _)| at);
    for turn in [previous, last].into_iter().flatten() {
        marks.extend(last_block(turns, turn));
    }
    marks
}

fn explicit(
    point: CachePoint,
    ends: &[Option<(usize, usize)>],
    body: &Map<String, Value>,
) -> Option<Mark> {
    match point {
        CachePoint::Tools => body.contains_key("tools").then_some(Mark::Tools),
        CachePoint::Instructions => body.contains_key("system").then_some(Mark::System),
        CachePoint::Message(index) => {
            let (turn, block) = (*ends.get(index)?)?;
            Some(Mark::Block(turn, block))
        }
        CachePoint::LastMessage => {
            let turns = messages(body);
            last_block(turns, turns.len().checked_sub(1)?)
        }
    }
}

fn messages(body: &Map<String, Value>) -> &[Value] {
    body.get("messages").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn content(body: &Map<String, Value>, turn: usize) -> &[Value] {
    messages(body).get(turn).and_then(|t| t["content"].as_array()).map_or(&[], Vec::as_slice)
}

fn last_block(turns: &[Value], turn: usize) -> Option<Mark> {
    let blocks = turns.get(turn)?["content"].as_array()?;
    Some(Mark::Block(turn, blocks.len().checked_sub(1)?))
}

/// The mark moved off thinking blocks (which cannot carry one) to the block before them in
/// the same message; `None` when there is none.
fn cacheable(mark: Mark, body: &Map<String, Value>) -> Option<Mark> {
    let Mark::Block(turn, block) = mark else { return Some(mark) };
    let blocks = content(body, turn);
    let at = blocks
        .get(..=block)?
        .iter()
        .rposition(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))?;
    Some(Mark::Block(turn, at))
}

fn apply(mark: Mark, body: &mut Map<String, Value>) {
    let control = || json!({"type": "ephemeral"});
    let target = match mark {
        Mark::Tools => {
            body.get_mut("tools").and_then(Value::as_array_mut).and_then(|tools| tools.last_mut())
        }
        Mark::System => {
            if let Some(Value::String(text)) = body.get("system") {
                let block = json!([{"type": "text", "text": text, "cache_control": control()}]);
                body.insert("system".into(), block);
            }
            return;
        }
        Mark::Block(turn, block) => body
            .get_mut("messages")
            .and_then(Value::as_array_mut)
            .and_then(|turns| turns.get_mut(turn))
            .and_then(|turn| turn.get_mut("content"))
            .and_then(Value::as_array_mut)
            .and_then(|blocks| blocks.get_mut(block)),
    };
    if let Some(Value::Object(target)) = target {
        target.insert("cache_control".into(), control());
    }
}

#[cfg(test)]
mod tests;
