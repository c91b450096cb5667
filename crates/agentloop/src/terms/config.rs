//! [`RunConfig`]: everything a run needs besides its input, journaled in `run_started` so a
//! run can be rebuilt from its journal alone.

use super::breaker::BreakerConfig;
use super::limits::{Limits, Price};
use crate::provider::ToolChoice;
use crate::tool::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Default text of the user message added when `require_done_tool` is set and the model
/// answered without calling a tool.
pub const DEFAULT_DONE_TOOL_NUDGE: &str = "You have not called the task_complete tool. \
Continue working on the task; when it is complete, call task_complete with your final answer.";

/// Default summary request of the wind-down call.
pub const DEFAULT_WIND_DOWN_PROMPT: &str = "You have reached a limit of this task (steps, tool \
calls, tokens, cost or time) and cannot call any more tools. Write your final answer now from what you have found so far: what \
you did, what you found, and what is left undone.";

/// Default answer when the wind-down call fails.
pub const DEFAULT_WIND_DOWN_FALLBACK: &str = "The run stopped at one of its limits before it \
could write a final answer.";

/// Default time the wind-down call may take.
pub const DEFAULT_WIND_DOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How a run behaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
#[non_exhaustive]
pub struct RunConfig {
    /// The agent's name, for listing runs (stores, telemetry).
    pub agent: Option<String>,
    /// The conversation (session) this run belongs to, for multi-turn agents and listing.
    pub context_id: Option<String>,
    /// The run that started this one (a sub-agent's run names its caller's), for listing a
    /// run's children (`RunFilter::parent_run_id`). Set per run
    /// (`RunOptions::parent_run_id`); left out of the journal when `None`, so the
    /// configuration (and its hash) of a run without a parent is unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// The W3C `traceparent` of the span the run's trace hangs under (an incoming A2A
    /// request's, a calling tool's). Set per run (`RunOptions::trace_parent`) and journaled,
    /// so a run resumed in another process stays in the same trace; left out when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
    /// System / developer instructions, injected at call time (never stored in the history).
    pub instructions: Option<String>,
    /// The tools offered to the model.
    pub tools: Arc<Vec<ToolSpec>>,
    /// Whether the model must call tools.
    pub tool_choice: ToolChoice,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Output token limit per call.
    pub max_tokens: Option<u32>,
    /// What model calls ask of the provider's prompt cache (`None`: the provider's own
    /// policy). Left out of the journal when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::provider::CachePolicy>,
    /// Metadata passed to providers and tools.
    #[serde(serialize_with = "crate::canonical::serialize_map")]
    pub metadata: Map<String, Value>,
    /// Limits (the budget).
    pub limits: Limits,
    /// The model's price, for cost accounting and the cost limit.
    pub price: Option<Price>,
    /// Prices by the member of a fallback chain (`family:name`): a call that member answered
    /// is priced at its price, the others at `price`. Left out of the journal when empty.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub provider_prices: std::collections::BTreeMap<String, Price>,
    /// Circuit breaker, stall detection and tool failure mode.
    pub breaker: BreakerConfig,
    /// Context management: window, trimming, compaction.
    pub context: crate::context::ContextConfig,
    /// How many times hooks may ask the model to continue instead of ending (see
    /// `Hooks::on_incomplete_work`). Default 3.
    pub max_continuations: u32,
    /// A turn without tool calls is not the end: only a done tool ends the run.
    pub require_done_tool: bool,
    /// The user message added after a tool-less turn when `require_done_tool` is set
    /// (`None`: add nothing).
    pub done_tool_nudge: Option<String>,
    /// The summary request of the wind-down call.
    pub wind_down_prompt: String,
    /// The answer when the wind-down call fails.
    pub wind_down_fallback: String,
    /// How long the wind-down call may take, in milliseconds (`None`:
    /// [`DEFAULT_WIND_DOWN_TIMEOUT`], 30 s); past it the call is dropped and the run ends with
    /// the fallback answer. Left out of the journal when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wind_down_timeout_ms: Option<u64>,
    /// The typed final answer the run must end with (`None`: free text). Its mode is
    /// resolved (never `auto`) when the run starts. Left out of the journal when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<super::OutputSpec>,
    /// Who runs it (set by the agent when it starts a run; journaled with it): a resume by an
    /// agent of another identity is refused (`ResumeError::IdentityChanged`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<RunIdentity>,
}

impl RunConfig {
    /// The price of a call `provider` answered (a fallback chain's member, journaled on
    /// `model_responded`): its own price when it has one, else the run's.
    pub fn price_of(&self, provider: Option<&str>) -> Option<&Price> {
        let member = provider.and_then(|p| self.provider_prices.get(p));
        member.or(self.price.as_ref())
    }

    /// How long the wind-down call may take.
    pub fn wind_down_timeout(&self) -> std::time::Duration {
        self.wind_down_timeout_ms
            .map_or(DEFAULT_WIND_DOWN_TIMEOUT, std::time::Duration::from_millis)
    }

    /// When the run's time limit (`limits.max_duration_ms`) passes, for a run that has been
    /// going for `elapsed`, as seen from `now` (`None`: no time limit).
    pub fn deadline(
        &self,
        now: std::time::Instant,
        elapsed: std::time::Duration,
    ) -> Option<std::time::Instant> {
        let max = std::time::Duration::from_millis(self.limits.max_duration_ms?);
        Some(now + max.saturating_sub(elapsed))
    }
}

/// Who runs a run: the model, how tools are called, the per-step tool-choice policy, and a
/// hash of the run's configuration. Journaled in the run's configuration when the run
/// starts; resuming the run with an agent of another identity is refused with the
/// differences named, unless the caller allows it (`ResumeOptions::allow_identity_change`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunIdentity {
    /// The provider family ([`Provider::family`](crate::provider::Provider::family):
    /// `openai`, `anthropic`, `gemini`, `local`, …; empty in journals written before it was
    /// recorded, and then not compared).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// The provider's name: the model id for the HTTP providers and the local model,
    /// `scripted` for the scripted one.
    pub model: String,
    /// How tools are called: `native`, or `prompted:<format>`.
    pub tool_protocol: String,
    /// The per-step tool-choice policy, if any (its debug form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_tool_choice: Option<String>,
    /// SHA-256 of the run's configuration (without its identity) as canonical JSON: the
    /// first 16 bytes, in hex.
    pub config_hash: String,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            agent: None,
            context_id: None,
            parent_run_id: None,
            trace_parent: None,
            instructions: None,
            tools: Arc::default(),
            tool_choice: ToolChoice::Auto,
            temperature: None,
            max_tokens: None,
            cache: None,
            metadata: Map::new(),
            limits: Limits::default(),
            price: None,
            provider_prices: std::collections::BTreeMap::new(),
            breaker: BreakerConfig::default(),
            context: crate::context::ContextConfig::default(),
            max_continuations: 3,
            require_done_tool: false,
            done_tool_nudge: Some(DEFAULT_DONE_TOOL_NUDGE.to_owned()),
            wind_down_prompt: DEFAULT_WIND_DOWN_PROMPT.to_owned(),
            wind_down_fallback: DEFAULT_WIND_DOWN_FALLBACK.to_owned(),
            wind_down_timeout_ms: None,
            output: None,
            identity: None,
        }
    }
}
