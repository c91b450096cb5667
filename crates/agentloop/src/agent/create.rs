//! A new run's configuration, and [`Agent::create_run`]: a run's start journaled for another
//! process to execute (a worker pool's submission).

use super::{new_run_id, Agent, RunInput, RunOptions};
use crate::error::ResumeError;
use crate::event::Event;
use crate::run::{OutputSpec, Run, RunConfig};

impl Agent {
    /// Journals the start of a run in the agent's store without executing it — `run_started`
    /// with the run's configuration (after the `before_run` hooks) and input — and returns
    /// its id. Any process with this agent continues it ([`resume`](Self::resume)); a worker
    /// pool does (`agentloop::worker`). Fails with [`StoreError::Conflict`] (through
    /// [`ResumeError::Store`]) when the store already has a run of that id.
    ///
    /// [`StoreError::Conflict`]: crate::store::StoreError::Conflict
    pub async fn create_run(
        &self,
        input: impl Into<RunInput>,
        options: RunOptions,
    ) -> Result<String, ResumeError> {
        let store = self.store.as_ref().ok_or(ResumeError::NoStore)?;
        let run_id = options.run_id.unwrap_or_else(new_run_id);
        self.refresh_tools();
        let config =
            self.new_run_config(options.parent_run_id, options.trace_parent, options.output);
        let mut notices = Vec::new();
        let mut run = match self.driver.hooks.before_run(config.clone(), &mut notices).await {
            Ok(config) => Run::new(run_id.clone(), config, input.into().0),
            Err(failure) => {
                let mut run = Run::new(run_id.clone(), config, input.into().0);
                run.fail_hook(failure.hook, failure.error);
                run
            }
        };
        let events: Vec<Event> = run.drain_events().filter(Event::is_durable).collect();
        store.append(&run_id, 0, &events).await?;
        Ok(run_id)
    }

    /// The configuration a new run journals: [`run_config`](Self::run_config) with the
    /// run's trace parent and typed output.
    pub(super) fn new_run_config(
        &self,
        parent_run_id: Option<String>,
        trace_parent: Option<String>,
        output: Option<OutputSpec>,
    ) -> RunConfig {
        let mut config = self.run_config(parent_run_id);
        config.trace_parent = trace_parent;
        if let Some(spec) = output {
            config.output = Some(self.resolve_output(spec, &config.tools));
        }
        config
    }
}
