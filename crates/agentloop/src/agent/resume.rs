//! Resuming runs from the store: the lease, the journal, and the run's identity (who ran it:
//! see [`RunIdentity`]) — a run is continued only by an agent of the same identity, unless
//! the caller says otherwise ([`ResumeOptions::allow_identity_change`]).

use super::Agent;
use crate::control::{Control, RunHandle};
use crate::driver::EventStream;
use crate::error::ResumeError;
use crate::event::Event;
use crate::message::Message;
use crate::run::{Decision, Run, RunConfig, RunError, RunIdentity};
use crate::store::lease::new_owner_id;
use crate::store::{Lease, RemoteControl, RunStore};
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How to resume a run ([`Agent::resume_with`]).
#[derive(Debug, Clone, Default)]
pub struct ResumeOptions {
    /// Continue the run even when this agent's identity (model, tool protocol, per-step tool
    /// choice, configuration) differs from the one the run was started with.
    pub allow_identity_change: bool,
    /// Cancels the resumed run when cancelled.
    pub cancel: Option<CancellationToken>,
    /// A call the journal shows in flight (started, no result: its executor stopped during
    /// it) runs again only if its tool is declared safe to retry
    /// ([`Tool::safe_to_retry`](crate::tool::Tool::safe_to_retry)); any other is held for an
    /// operator (`attention_needed`) and the run suspends with the stop reason
    /// `needs_attention`. Workers resume runs they take over this way. Off: every call in
    /// flight runs again, with the same idempotency key.
    pub hold_unsafe_in_flight: bool,
}

impl Agent {
    /// Resumes a run from the agent's store (after a crash, a restart, in another process):
    /// takes the run's lease, loads its journal, folds it ([`Run::from_journal`]) and
    /// continues it, journaled. What was requested of the run from outside while it waited
    /// is applied first: the decisions on its deferred calls and the answer to its question
    /// ([`RunService::decide`](crate::service::RunService::decide),
    /// [`RunService::send_input`](crate::service::RunService::send_input)). A tool whose
    /// result is journaled never runs again; a tool that started without a journaled result
    /// runs again with the same idempotency key
    /// (`run_id:call_id`); a model call without a journaled response is made again. A run that
    /// is over, or suspended for approval, yields its terminal event again (it is not
    /// journaled twice). Refused while another executor holds the run's lease, and when this
    /// agent's identity differs from the run's ([`ResumeError::IdentityChanged`]; see
    /// [`resume_with`](Self::resume_with)).
    pub async fn resume(&self, run_id: &str) -> Result<EventStream, ResumeError> {
        Ok(self.resume_with(run_id, ResumeOptions::default()).await?.1)
    }

    /// [`resume`](Self::resume), with a handle.
    pub async fn resume_with_handle(
        &self,
        run_id: &str,
        cancel: Option<CancellationToken>,
    ) -> Result<(RunHandle, EventStream), ResumeError> {
        self.resume_with(run_id, ResumeOptions { cancel, ..ResumeOptions::default() }).await
    }

    /// [`resume`](Self::resume) with options, and a handle.
    pub async fn resume_with(
        &self,
        run_id: &str,
        options: ResumeOptions,
    ) -> Result<(RunHandle, EventStream), ResumeError> {
        let (mut run, next_seq, last, lease) =
            self.load_run(run_id, !options.allow_identity_change).await?;
        let held = if options.hold_unsafe_in_flight { self.hold_unsafe(&mut run) } else { false };
        match self.take_requested(&mut run, next_seq).await.map(|applied| applied || held) {
            Ok(true) => Ok(self.drive_existing(run, options.cancel, Some(lease), Some(next_seq))),
            Ok(false) => Ok(self.continue_loaded(run, next_seq, last, lease, options.cancel).await),
            Err(error) => {
                let _ = store_release(self.store.as_deref(), &lease).await;
                Err(error)
            }
        }
    }

    /// Answers the question a run of the agent's store stopped to ask (an ask-user tool: it
    /// finished with [`StopReason::AwaitingInput`](crate::StopReason)) and continues it:
    /// `message` joins the history as the user's and the same run goes on, journaled, with
    /// the budgets it has left. Takes the run's lease, as [`resume`](Self::resume) does.
    pub async fn answer(&self, run_id: &str, message: Message) -> Result<EventStream, ResumeError> {
        let (mut run, next_seq, _, lease) = self.load_run(run_id, true).await?;
        if let Err(error) = run.provide_input(message) {
            let _ = store_release(self.store.as_deref(), &lease).await;
            return Err(error.into());
        }
        Ok(self.drive_existing(run, None, Some(lease), Some(next_seq)).1)
    }

    /// Holds for an operator each call of a loaded run that is in flight and whose tool is
    /// not safe to retry ([`ResumeOptions::hold_unsafe_in_flight`]); whether any was.
    fn hold_unsafe(&self, run: &mut Run) -> bool {
        let mut held = false;
        for call in run.running_calls() {
            if self.driver.tools.safe_to_retry(&call.name) {
                continue;
            }
            let reason = format!(
                "the run's executor stopped while '{}' ran, and the tool is not declared safe \
                 to retry: it may have had its effect; retry the call, supply its result or \
                 fail it",
                call.name
            );
            held |= run.hold_for_attention(&call.id, reason).is_ok();
        }
        held
    }

    /// Applies what was requested of a loaded run from outside while it waited (see
    /// [`apply_requested`]); whether anything applied.
    async fn take_requested(&self, run: &mut Run, next_seq: u64) -> Result<bool, ResumeError> {
        let Some(store) = &self.store else { return Ok(false) };
        let requested = store.remote_control(run.run_id()).await?;
        Ok(apply_requested(run, &requested, next_seq.saturating_sub(1))?)
    }

    /// Continues a run suspended for approvals, loaded from the agent's store, with the human
    /// decisions (see [`resume_with_decisions`](Self::resume_with_decisions)).
    pub async fn decide(
        &self,
        run_id: &str,
        decisions: impl IntoIterator<Item = (String, Decision)>,
    ) -> Result<EventStream, ResumeError> {
        self.decide_by(run_id, decisions, None).await
    }

    /// [`decide`](Self::decide), journaling who made the decisions (`by`, as the caller
    /// names them: [`Event::ApprovalDecided`]'s `by`).
    pub async fn decide_by(
        &self,
        run_id: &str,
        decisions: impl IntoIterator<Item = (String, Decision)>,
        by: Option<String>,
    ) -> Result<EventStream, ResumeError> {
        let (mut run, next_seq, _, lease) = self.load_run(run_id, true).await?;
        for (call_id, decision) in decisions {
            if let Err(error) = run.decide_by(&call_id, decision, by.clone()) {
                let _ = store_release(self.store.as_deref(), &lease).await;
                return Err(error.into());
            }
        }
        Ok(self.drive_existing(run, None, Some(lease), Some(next_seq)).1)
    }

    /// Takes the run's lease (refused while another executor holds it: see
    /// [`crate::store::lease`]), then loads and folds its journal, and (`check_identity`)
    /// compares the run's identity with this agent's: the run, the journal's length, its last
    /// event and the lease. On an error the lease is given back.
    pub(crate) async fn load_run(
        &self,
        run_id: &str,
        check_identity: bool,
    ) -> Result<(Run, u64, Option<Event>, Lease), ResumeError> {
        let store = self.store.as_ref().ok_or(ResumeError::NoStore)?;
        let lease = store.claim(run_id, &new_owner_id(), self.lease_ttl).await?;
        let loaded = self.fold_stored(run_id).await.and_then(|loaded| {
            if check_identity {
                self.check_identity(run_id, loaded.0.config())?;
            }
            Ok(loaded)
        });
        match loaded {
            Ok((run, next_seq, last)) => Ok((run, next_seq, last, lease)),
            Err(error) => {
                let _ = store.release(&lease).await;
                Err(error)
            }
        }
    }

    /// Loads and folds a run's journal (without its lease: to read it): the run, the
    /// journal's length and its last event.
    pub(crate) async fn fold_stored(
        &self,
        run_id: &str,
    ) -> Result<(Run, u64, Option<Event>), ResumeError> {
        let store = self.store.as_ref().ok_or(ResumeError::NoStore)?;
        let mut entries = store.load(run_id).await?;
        if entries.is_empty() {
            return Err(ResumeError::NotFound(run_id.to_owned()));
        }
        let run = Run::from_journal(entries.iter().map(|e| &*e.event))?;
        let next_seq = entries.len() as u64;
        Ok((run, next_seq, entries.pop().map(|e| e.event.into_event())))
    }

    /// Continues a loaded run, holding its lease; one that is over or suspended yields its
    /// terminal event (and the lease is given back).
    pub(crate) async fn continue_loaded(
        &self,
        run: Run,
        next_seq: u64,
        last: Option<Event>,
        lease: Lease,
        cancel: Option<CancellationToken>,
    ) -> (RunHandle, EventStream) {
        match last {
            Some(last) if (run.is_finished() || run.is_suspended()) && last.outcome().is_some() => {
                let _ = store_release(self.store.as_deref(), &lease).await;
                let control = Control::new(cancel.unwrap_or_default());
                let handle = RunHandle { run_id: run.run_id().to_owned(), control };
                (handle, Box::pin(futures::stream::iter([last])))
            }
            _ => self.drive_existing(run, cancel, Some(lease), Some(next_seq)),
        }
    }

    /// The configuration a new run of this agent journals (started by `parent_run_id`, if
    /// any), its identity included.
    pub(crate) fn run_config(&self, parent_run_id: Option<String>) -> RunConfig {
        let mut config = (*self.config).clone();
        config.tools = self.driver.tools.specs();
        config.parent_run_id = parent_run_id;
        config.identity = None;
        if let Some(spec) = config.output.take() {
            config.output = Some(self.resolve_output(spec, &config.tools));
        }
        let config_hash = config_hash(&config);
        config.identity = Some(RunIdentity { config_hash, ..self.identity.clone() });
        config
    }

    /// Refuses a run started with another identity (a run journaled before identities were
    /// recorded has none, and is not checked).
    fn check_identity(&self, run_id: &str, journaled: &RunConfig) -> Result<(), ResumeError> {
        let Some(then) = &journaled.identity else { return Ok(()) };
        let mut current = self.run_config(journaled.parent_run_id.clone());
        // Per-run settings are not the agent's: the session a run belongs to, its parent.
        current.context_id.clone_from(&journaled.context_id);
        current.identity = None;
        let now = RunIdentity { config_hash: config_hash(&current), ..self.identity.clone() };
        let mut differences = Vec::new();
        let mut differ = |what: &str, then: &dyn std::fmt::Debug, now: &dyn std::fmt::Debug| {
            differences.push(format!("{what}: {then:?} then, {now:?} now"));
        };
        if !then.provider.is_empty() && then.provider != now.provider {
            differ("provider", &then.provider, &now.provider);
        }
        if then.model != now.model {
            differ("model", &then.model, &now.model);
        }
        if then.tool_protocol != now.tool_protocol {
            differ("tool protocol", &then.tool_protocol, &now.tool_protocol);
        }
        if then.step_tool_choice != now.step_tool_choice {
            differ("per-step tool choice", &then.step_tool_choice, &now.step_tool_choice);
        }
        if then.config_hash != now.config_hash {
            let mut then_config = journaled.clone();
            then_config.identity = None;
            // Not in the hash: the trace a run hangs under is the caller's, per run.
            then_config.trace_parent = None;
            let fields = changed_fields(&then_config, &current);
            differences.push(format!("configuration: {} changed", fields.join(", ")));
        }
        if differences.is_empty() {
            return Ok(());
        }
        Err(ResumeError::IdentityChanged { run_id: run_id.to_owned(), differences })
    }
}

/// A hash of a configuration: SHA-256 of its canonical JSON, the first 16 bytes in hex.
fn config_hash(config: &RunConfig) -> String {
    use sha2::Digest;
    let json = serde_json::to_value(config).map(|v| crate::canonical::to_string(&v));
    let digest = sha2::Sha256::digest(json.unwrap_or_default().as_bytes());
    digest.iter().take(16).map(|byte| format!("{byte:02x}")).collect()
}

/// The top-level fields of two configurations that differ.
fn changed_fields(then: &RunConfig, now: &RunConfig) -> Vec<String> {
    let (Ok(Value::Object(then)), Ok(Value::Object(now))) =
        (serde_json::to_value(then), serde_json::to_value(now))
    else {
        return vec!["(unreadable)".into()];
    };
    let mut keys: Vec<&String> = then.keys().chain(now.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|k| then.get(*k) != now.get(*k)).cloned().collect()
}

/// Gives a lease back (when the agent has a store).
pub(super) async fn store_release(
    store: Option<&dyn RunStore>,
    lease: &Lease,
) -> Result<(), crate::store::StoreError> {
    match store {
        Some(store) => store.release(lease).await,
        None => Ok(()),
    }
}

/// What was requested of a run from outside while it waited, applied to it: the decisions
/// on its deferred calls ([`RunService::decide`](crate::service::RunService::decide)) and
/// the answer to its question
/// ([`RunService::send_input`](crate::service::RunService::send_input), when the journal's
/// last entry is still the one that asked, at `last_seq`) — or, before both, a
/// cancellation ([`RunService::cancel`](crate::service::RunService::cancel)): a waiting run
/// has no executor to read it, so the run that resumes it ends it. Whether anything applied.
fn apply_requested(
    run: &mut Run,
    requested: &RemoteControl,
    last_seq: u64,
) -> Result<bool, RunError> {
    let mut applied = false;
    let waiting: Vec<String> = run.awaiting_approval().iter().map(|call| call.id.clone()).collect();
    // A cancellation wins over decisions and answers: the waiting run ends cancelled.
    if let Some(reason) = &requested.cancel {
        if !waiting.is_empty() || run.awaiting_input().is_some() {
            run.cancel(reason.clone());
            return Ok(true);
        }
    }
    for call_id in waiting {
        if let Some(decision) = requested.decisions.get(&call_id) {
            run.decide_by(&call_id, decision.clone(), requested.decided_by.get(&call_id).cloned())?;
            applied = true;
        }
    }
    if let Some(answer) = &requested.input {
        if answer.for_seq == last_seq && run.awaiting_input().is_some() {
            run.provide_input(Message::user(answer.text.clone()))?;
            applied = true;
        }
    }
    Ok(applied)
}

impl Agent {
    /// The observer of a stretch of the run `run_id` (`resumed`: continued from its journal).
    pub(crate) fn run_observer(
        &self,
        run_id: &str,
        config: &RunConfig,
        resumed: bool,
    ) -> Option<Arc<dyn crate::observe::RunObserver>> {
        let observer = self.observer.as_ref()?;
        let provider = &self.driver.provider;
        observer.observe(&crate::observe::ObservedRun {
            run_id,
            config,
            resumed,
            provider: provider.family(),
            model: provider.name(),
        })
    }
}
