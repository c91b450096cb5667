//! Decisions on deferred calls, as a client sends them to a task that waits for approval:
//! a data part `{"decision": "approve"}` or `{"decision": "reject", "reason": "…"}`, for
//! one call (`"callId"`) or, without one, for every call that waits; or a text part that is
//! only `approve` / `yes` or `reject` / `no`. And the continuation of a stored run that no
//! process executes (a fork, a run a request was recorded for outside A2A).

use super::{decision_of, internal, queue_full, Host};
use a2a::{A2AError, PartContent};
use agentloop::run::Decision;
use agentloop::store::StoreError;
use agentloop::worker::WorkerError;
use agentloop::ResumeError;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long [`Host::resume_here`] waits for an executor that just stopped to let go of the
/// run's lease.
const LEASE_WAIT: Duration = Duration::from_secs(3);

impl Host {
    /// Resumes a stored run in this process and drives it in a task of its own (its pending
    /// requests — a decision, an answer, a cancel — applied), once the executor that just
    /// stopped let go of its lease (waiting up to 3 s).
    pub(crate) async fn resume_here(self: &Arc<Self>, run_id: &str) -> Result<(), ResumeError> {
        let deadline = tokio::time::Instant::now() + LEASE_WAIT;
        loop {
            match self.served.agent.resume(run_id).await {
                Ok(events) => {
                    drop(self.drive(run_id.to_owned(), events, 0, CancellationToken::new()));
                    return Ok(());
                }
                Err(ResumeError::Store(StoreError::LeaseHeld { .. }))
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Has a stored run of this agent that no process executes continued (a fork): by a
    /// worker when the host queues its tasks, else here.
    pub async fn continue_stored(self: &Arc<Self>, run_id: &str) -> Result<(), A2AError> {
        match &self.queue {
            Some(queue) => match queue.continue_run(self.service.store().as_ref(), run_id).await {
                Ok(_) => Ok(()),
                Err(full @ WorkerError::QueueFull { .. }) => Err(queue_full(&full)),
                Err(error) => Err(internal(error)),
            },
            None => self.resume_here(run_id).await.map_err(|error| match error {
                ResumeError::Run(error) => A2AError::invalid_params(error.to_string()),
                other => internal(other),
            }),
        }
    }

    /// Has a run continued after a request for it (a decision, an answer) was recorded
    /// through this host's run service: a queued host's service queued it already; else it
    /// is resumed here.
    pub async fn continue_recorded(self: &Arc<Self>, run_id: &str) -> Result<(), A2AError> {
        if self.queue.is_some() {
            return Ok(());
        }
        self.continue_stored(run_id).await
    }

    /// The A2A context of a session of this agent (`a2a/{name}/{context}`), `None` for a
    /// session outside its namespace (a CLI chat, another agent).
    pub fn context_of<'a>(&self, session: &'a str) -> Option<&'a str> {
        session.strip_prefix(self.namespace().as_str())
    }
}

/// The longest name a decision is recorded with.
const MAX_BY_CHARS: usize = 100;

/// A decider's name as a client gave it, made fit for the journal: control characters
/// dropped, trimmed, at most 100 characters (empty: none given).
pub fn decider_name(given: &str) -> String {
    let name: String = given.chars().filter(|c| !c.is_control()).collect();
    name.trim().chars().take(MAX_BY_CHARS).collect()
}

/// Who made the decisions a message carries, as the journal records them: the `by` of its
/// first data part that has one ([`decider_name`]), else `a2a` (the channel).
pub fn decided_by(message: &a2a::Message) -> String {
    let given = message.parts.iter().find_map(|part| match &part.content {
        PartContent::Data(value) => value.get("by").and_then(|by| by.as_str()),
        _ => None,
    });
    match decider_name(given.unwrap_or_default()) {
        name if name.is_empty() => "a2a".to_owned(),
        name => name,
    }
}

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
