//! Decisions on deferred calls, as a client sends them to a task that waits for approval:
//! a data part `{"decision": "approve"}` or `{"decision": "reject", "reason": "…"}`, for
//! one call (`"callId"`) or, without one, for every call that waits; or a text part that is
//! only `approve` / `yes` or `reject` / `no`.

use super::decision_of;
use a2a::{A2AError, PartContent};
use agentloop::run::Decision;

/// The decisions a message carries on the calls in `waiting` (refused when it carries
/// none, or names a call that does not wait).
pub fn parse_decisions(
    message: &a2a::Message,
    waiting: &[String],
) -> Result<Vec<(String, Decision)>, A2AError> {
    let mut decisions: Vec<(String, Decision)> = Vec::new();
    let mut all: Option<Decision> = None;
    for part in &message.parts {
        match &part.content {
            PartContent::Data(value) => {
                let Some(decision) = decision_of(value) else { continue };
                match value.get("callId").and_then(|v| v.as_str()) {
                    Some(call_id) if waiting.iter().any(|w| w == call_id) => {
                        decisions.push((call_id.to_owned(), decision));
                    }
                    Some(call_id) => {
                        return Err(A2AError::invalid_params(format!(
                            "call '{call_id}' does not wait for a decision"
                        )));
                    }
                    None => all = Some(decision),
                }
            }
            PartContent::Text(text) => {
                let word = text.trim().trim_end_matches(['.', '!']).to_ascii_lowercase();
                match word.as_str() {
                    "approve" | "approved" | "yes" | "y" | "ok" => all = Some(Decision::Approve),
                    "reject" | "rejected" | "no" | "n" | "deny" => {
                        all = Some(Decision::Reject { reason: "rejected by the client".into() });
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if let Some(decision) = all {
        for call_id in waiting {
            if !decisions.iter().any(|(id, _)| id == call_id) {
                decisions.push((call_id.clone(), decision.clone()));
            }
        }
    }
    if decisions.is_empty() {
        return Err(A2AError::invalid_params(
            "the task waits for approval: send a data part {\"decision\": \"approve\"} or \
             {\"decision\": \"reject\", \"reason\": \"…\"}",
        ));
    }
    Ok(decisions)
}
