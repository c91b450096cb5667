//! Resuming runs from the store: the lease, the journal, and the run's identity (who ran it:
//! see [`RunIdentity`]) — a run is continued only by an agent of the same identity, unless
//! the caller says otherwise ([`ResumeOptions::allow_identity_change`]).

use super::Agent;
use crate::control::{Control, RunHandle};
use crate::driver::EventStream;
use crate::error::ResumeError;
use crate::event::Event;
use crate::run::{Decision, Run, RunConfig, RunIdentity};
use crate::store::lease::new_owner_id;
use crate::store::{Lease, RunStore};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// How to resume a run ([`Agent::resume_with`]).
#[derive(Debug, Clone, Default)]
pub struct ResumeOptions {
    /// Continue the run even when this agent's identity (model, tool protocol, per-step tool
    /// choice, configuration) differs from the one the run was started with.
    pub allow_identity_change: bool,
    /// Cancels the resumed run when cancelled.
    pub cancel: Option<CancellationToken>,
}

impl Agent {
    /// Resumes a run from the agent's store (after a crash, a restart, in another process):
    /// takes the run's lease, loads its journal, folds it ([`Run::from_journal`]) and
    /// continues it, journaled. A tool whose result is journaled never runs again; a tool that
    /// started without a journaled result runs again with the same idempotency key
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
        let (run, next_seq, last, lease) =
            self.load_run(run_id, !options.allow_identity_change).await?;
        Ok(self.continue_loaded(run, next_seq, last, lease, options.cancel).await)
    }

    /// Continues a run suspended for approvals, loaded from the agent's store, with the human
    /// decisions (see [`resume_with_decisions`](Self::resume_with_decisions)).
    pub async fn decide(
        &self,
        run_id: &str,
        decisions: impl IntoIterator<Item = (String, Decision)>,
    ) -> Result<EventStream, ResumeError> {
        let (mut run, next_seq, _, lease) = self.load_run(run_id, true).await?;
        for (call_id, decision) in decisions {
            if let Err(error) = run.decide(&call_id, decision) {
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
        let run = Run::from_journal(entries.iter().map(|e| &e.event))?;
        let next_seq = entries.len() as u64;
        Ok((run, next_seq, entries.pop().map(|e| e.event)))
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

    /// The configuration a new run of this agent journals, its identity included.
    pub(crate) fn run_config(&self) -> RunConfig {
        let mut config = (*self.config).clone();
        config.tools = self.driver.tools.specs();
        config.identity = None;
        let config_hash = config_hash(&config);
        config.identity = Some(RunIdentity { config_hash, ..self.identity.clone() });
        config
    }

    /// Refuses a run started with another identity (a run journaled before identities were
    /// recorded has none, and is not checked).
    fn check_identity(&self, run_id: &str, journaled: &RunConfig) -> Result<(), ResumeError> {
        let Some(then) = &journaled.identity else { return Ok(()) };
        let mut current = self.run_config();
        // Per-run settings are not the agent's: the session a run belongs to.
        current.context_id.clone_from(&journaled.context_id);
        current.identity = None;
        let now = RunIdentity { config_hash: config_hash(&current), ..self.identity.clone() };
        let mut differences = Vec::new();
        let mut differ = |what: &str, then: &dyn std::fmt::Debug, now: &dyn std::fmt::Debug| {
            differences.push(format!("{what}: {then:?} then, {now:?} now"));
        };
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
