//! Forks: a new run whose journal is another run's up to a point, with an edit, to try again
//! from there ([`RunService::fork`]).

use super::{RunService, ServiceError};
use crate::event::{Event, ForkEdit, JournalEvent};
use crate::run::Run;
use crate::store::{JournalEntry, StoreError};

fn invalid(error: crate::event::StreamOnly) -> StoreError {
    StoreError::Invalid(error.to_string())
}

impl RunService {
    /// Forks run `run_id` at its journal entry `at_seq` into a new run, and returns the new
    /// run's id. The fork's journal is the origin's entries `0..=at_seq` — its `run_started`
    /// under the new id — then `run_forked`, which names the origin and the fork point and
    /// holds `edit`: a call's result replaced before the model sees it, a user message the
    /// run goes on with (after a model call, or after the run's end), or the model's answer
    /// of a finished run replaced (the fork then ends with it: a `run_finished` follows).
    /// The origin is not changed. The fork is a stored run that no process executes yet: any process with the
    /// agent continues it ([`Agent::resume`](crate::Agent::resume), a worker), after the
    /// usual identity check of the agent against its journaled configuration.
    ///
    /// Refused ([`ServiceError::ForkPoint`]) when `at_seq` is past the journal's end or the
    /// edit does not apply there (a result for a call the model has already seen, a message
    /// while tools run, an answer before the run's end).
    pub async fn fork(
        &self,
        run_id: &str,
        at_seq: u64,
        edit: Option<ForkEdit>,
    ) -> Result<String, ServiceError> {
        let entries = self.store.load(run_id).await?;
        let Some(last) = entries.last().map(|entry| entry.seq) else {
            return Err(ServiceError::NotFound(run_id.to_owned()));
        };
        let refused =
            |reason: String| ServiceError::ForkPoint { run_id: run_id.to_owned(), at_seq, reason };
        if at_seq > last {
            return Err(refused(format!("its journal ends at entry {last}")));
        }
        let fork_id = crate::terms::new_run_id();
        // The prefix as it was journaled (its times kept), under the fork's id.
        let mut new: Vec<JournalEntry> = Vec::with_capacity(entries.len() + 1);
        for entry in entries.into_iter().take_while(|entry| entry.seq <= at_seq) {
            let entry = match &*entry.event {
                Event::RunStarted { config, input, .. } => {
                    let event = Event::RunStarted {
                        run_id: fork_id.clone(),
                        config: config.clone(),
                        input: input.clone(),
                    };
                    JournalEntry { event: JournalEvent::new(event).map_err(invalid)?, ..entry }
                }
                _ => entry,
            };
            new.push(entry);
        }
        let answered = matches!(edit, Some(ForkEdit::ModelAnswer { .. }));
        let forked = Event::RunForked { origin_run_id: run_id.to_owned(), at_seq, edit };
        new.push(JournalEntry::of(at_seq + 1, forked)?);
        // The fork must fold: the prefix did, so only the edit can fail.
        let run = Run::from_journal(new.iter().map(|entry| &*entry.event))
            .map_err(|error| refused(error.to_string()))?;
        // An edited answer ends the fork with it (a finished run, as the origin was).
        if let (true, Some(outcome)) = (answered, run.outcome()) {
            let mut outcome = outcome.clone();
            outcome.run_id.clone_from(&fork_id);
            let finished = Event::RunFinished { outcome: Box::new(outcome) };
            new.push(JournalEntry::of(at_seq + 2, finished)?);
        }
        self.store.append_entries(&fork_id, 0, &new).await?;
        Ok(fork_id)
    }
}
