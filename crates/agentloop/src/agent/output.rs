//! Structured output on the agent: its default [`OutputSpec`] ([`AgentBuilder::output`]),
//! the mode decided when a run starts, and [`Agent::run_as`], which returns the typed
//! answer.

use super::{Agent, AgentBuilder, RunInput, RunOptions};
use crate::error::AgentError;
use crate::run::{Outcome, OutputMode, OutputSpec};
use crate::tool::ToolSpec;
use serde::de::DeserializeOwned;

/// Why [`Agent::run_as`] has no typed answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunAsError {
    /// The run failed, was cancelled or stopped to wait — including an answer that never
    /// matched the schema (its outcome's stop reason is `output_invalid`, with the errors).
    #[error(transparent)]
    Run(#[from] AgentError),
    /// The run ended without a valid typed answer (a limit's wind-down answer that is not
    /// one, a filtered or cut-off answer, …).
    #[error("the run ended without a typed answer ({:?})", outcome.stop_reason)]
    NoOutput {
        /// The outcome.
        outcome: Box<Outcome>,
    },
    /// The answer matched the schema but not the type (a schema that says less than the
    /// type, e.g. a custom `Deserialize`).
    #[error("the answer does not deserialize into the requested type: {error}")]
    Deserialize {
        /// The serde error.
        error: String,
        /// The outcome (its `output` holds the value).
        outcome: Box<Outcome>,
    },
}

impl RunAsError {
    /// The run's outcome, when it has one.
    pub fn outcome(&self) -> Option<&Outcome> {
        match self {
            Self::Run(error) => error.outcome(),
            Self::NoOutput { outcome } | Self::Deserialize { outcome, .. } => Some(outcome),
        }
    }
}

impl Agent {
    /// Runs to the end and returns the typed answer: the run is asked for a `T` (its JSON
    /// Schema derived by schemars, its doc comment the description), the answer is validated
    /// against the schema — a wrong one goes back to the model with its errors, up to the
    /// retries of the agent's [`OutputSpec`] (default
    /// [`DEFAULT_OUTPUT_RETRIES`](crate::run::DEFAULT_OUTPUT_RETRIES)) — and deserialized.
    /// Tools run first as usual; the typed answer comes last. The mode (native or the
    /// final-answer tool) is the agent's ([`AgentBuilder::output`]), else decided by the
    /// provider ([`OutputMode::Auto`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use agentloop::prelude::*;
    /// use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
    ///
    /// /// A city and its country.
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Place {
    ///     city: String,
    ///     country: String,
    /// }
    ///
    /// let model = ScriptedModel::new([ScriptedTurn::text(r#"{"city": "Lyon", "country": "France"}"#)]);
    /// let agent = Agent::builder(model).build()?;
    /// let place: Place = agent.run_as("Where is the Fête des Lumières?").await?;
    /// assert_eq!(place.city, "Lyon");
    /// # Ok(()) }
    /// ```
    pub async fn run_as<T: DeserializeOwned + schemars::JsonSchema>(
        &self,
        input: impl Into<RunInput>,
    ) -> Result<T, RunAsError> {
        self.run_as_with(input, RunOptions::default()).await
    }

    /// [`run_as`](Self::run_as) with per-run options (their `output` is replaced by `T`'s).
    pub async fn run_as_with<T: DeserializeOwned + schemars::JsonSchema>(
        &self,
        input: impl Into<RunInput>,
        options: RunOptions,
    ) -> Result<T, RunAsError> {
        let mut spec = OutputSpec::of::<T>();
        if let Some(default) = &self.config.output {
            spec = spec.with_mode(default.mode).with_max_retries(default.max_retries);
        }
        let mut outcome = self.run_with(input, options.output(spec)).await?;
        let Some(value) = outcome.output.take() else {
            return Err(RunAsError::NoOutput { outcome: Box::new(outcome) });
        };
        match T::deserialize(&value) {
            Ok(answer) => Ok(answer),
            Err(error) => {
                outcome.output = Some(value);
                Err(RunAsError::Deserialize {
                    error: error.to_string(),
                    outcome: Box::new(outcome),
                })
            }
        }
    }

    /// The spec with its mode decided: `auto` becomes native where the provider constrains
    /// answers itself (with these tools), the final-answer tool elsewhere.
    pub(super) fn resolve_output(&self, mut spec: OutputSpec, tools: &[ToolSpec]) -> OutputSpec {
        if spec.mode == OutputMode::Auto {
            let native = self.driver.provider.native_output(!tools.is_empty());
            spec.mode = if native { OutputMode::Native } else { OutputMode::Tool };
        }
        spec
    }
}

impl AgentBuilder {
    /// Every run of the agent ends with a typed answer matching `spec` (see
    /// [`OutputSpec`]; a run's [`RunOptions::output`] and [`Agent::run_as`] take its mode and
    /// retries, with their own schema).
    pub fn output(mut self, spec: OutputSpec) -> Self {
        self.config.output = Some(spec);
        self
    }
}
