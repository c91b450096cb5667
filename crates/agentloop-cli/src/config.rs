//! `agentloop.toml`: found in the project directory or `~/.config/agentloop/config.toml`,
//! overridden by the environment and by flags. Errors name the file, the line and what was
//! expected.

use anyhow::{bail, Context};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The agent.
    pub agent: AgentSection,
    /// The model provider.
    pub provider: ProviderSection,
    /// The budget.
    pub limits: LimitsSection,
    /// Built-in tools.
    pub tools: ToolsSection,
    /// Where runs are kept.
    pub store: StoreSection,
    /// MCP tool servers (`[[mcp]]` tables).
    pub mcp: Vec<agentloop::tool::mcp::McpServerConfig>,
    /// Providers asked in turn when the `[provider]` fails (`[[fallback]]` tables).
    pub fallback: Vec<toml::Spanned<FallbackSection>>,
    /// Remote A2A agents offered as tools (`[[a2a]]` tables).
    pub a2a: Vec<toml::Spanned<RemoteAgentSection>>,
    /// The agents `agentloop serve` serves (`[[serve]]` tables; none: the `[agent]`).
    pub serve: Vec<toml::Spanned<ServeAgentSection>>,
    /// OpenTelemetry export (`[telemetry]`).
    pub telemetry: TelemetrySection,
    /// Where the file came from (not in the file).
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// The process's telemetry, once started (not in the file).
    #[serde(skip)]
    pub otel: crate::telemetry::Otel,
}

/// `[agent]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSection {
    /// The agent's name.
    pub name: Option<String>,
    /// The system prompt.
    pub instructions: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Output tokens per model call.
    pub max_tokens: Option<u32>,
    /// Tool calls of one turn that may run at once.
    pub tool_concurrency: Option<usize>,
    /// When the model must call a tool: `auto`, `required`, or `required-first` (required on
    /// the first call after the user spoke, auto once a tool has answered).
    pub tool_choice: Option<ToolChoiceSetting>,
    /// Prompt-cache breakpoints (Anthropic): `auto` (the provider's default) or `off`.
    pub cache: Option<CacheSetting>,
    /// A prompt-cache routing key (OpenAI's `prompt_cache_key`).
    pub cache_key: Option<String>,
}

/// `[agent] cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheSetting {
    /// Breakpoints where the provider puts them.
    Auto,
    /// No breakpoints.
    Off,
}

/// One `[[fallback]]` table: a provider asked when the ones before it fail (rate limited
/// after retries, overloaded, server errors, timeouts, unreachable, prompt too long).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackSection {
    /// The family.
    pub kind: ProviderKind,
    /// The model id.
    pub model: Option<String>,
    /// The server's base URL.
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// A preset for OpenAI-compatible servers (as `[provider] preset`).
    pub preset: Option<String>,
    /// The script of the `scripted` provider (a JSON file).
    pub script: Option<PathBuf>,
    /// USD per million input tokens of this provider's model (default: `[limits]`'s).
    pub input_price_per_mtok: Option<f64>,
    /// USD per million output tokens of this provider's model.
    pub output_price_per_mtok: Option<f64>,
    /// USD per million input tokens read from its cache.
    pub cached_input_price_per_mtok: Option<f64>,
    /// USD per million input tokens written to its cache.
    pub cache_write_price_per_mtok: Option<f64>,
    /// The line of the table in the file (not in the file).
    #[serde(skip)]
    pub line: usize,
}

impl FallbackSection {
    /// The provider settings of this member.
    pub fn provider(&self) -> ProviderSection {
        ProviderSection {
            kind: Some(self.kind),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            preset: self.preset.clone(),
            script: self.script.clone(),
            ..ProviderSection::default()
        }
    }
}

/// `[agent] tool_choice` / `--tool-choice`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ToolChoiceSetting {
    /// The model decides.
    Auto,
    /// Every call must call a tool.
    Required,
    /// The first call after the user spoke must call a tool; the model decides after that.
    RequiredFirst,
}

/// Which provider family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions.
    Openai,
    /// OpenAI Responses.
    Responses,
    /// An OpenAI-compatible server (`base_url` or `preset`).
    OpenaiCompatible,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini.
    Gemini,
    /// Amazon Bedrock's Converse API (`model`: a model id or inference profile; region and
    /// credentials from the standard AWS variables and files, or an API key in
    /// `AWS_BEARER_TOKEN_BEDROCK`).
    Bedrock,
    /// A scripted model playing a JSON file of turns (demos and tests).
    Scripted,
    /// A GGUF model run in this process (`model`: a known name such as `smollm2-135m`, or a
    /// path to a `.gguf` file).
    Local,
}

impl std::str::FromStr for ProviderKind {
    type Err = anyhow::Error;
    fn from_str(text: &str) -> anyhow::Result<Self> {
        toml::Value::String(text.to_owned())
            .try_into::<ProviderKind>()
            .map_err(|_| anyhow::anyhow!("unknown provider '{text}' (expected openai, responses, openai-compatible, anthropic, gemini, bedrock, local or scripted)"))
    }
}

/// `[provider]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSection {
    /// The family.
    pub kind: Option<ProviderKind>,
    /// The model id.
    pub model: Option<String>,
    /// The server's base URL (OpenAI-compatible servers, proxies).
    pub base_url: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// A preset for OpenAI-compatible servers: ollama, vllm, llama-cpp, lm-studio, litellm,
    /// openrouter, groq, together, deepseek, mistral, azure (its `base_url` is the resource's
    /// endpoint).
    pub preset: Option<String>,
    /// The script of the `scripted` provider (a JSON file).
    pub script: Option<PathBuf>,
    /// `local`: a Jinja chat template file used instead of the model's own.
    pub chat_template: Option<PathBuf>,
    /// `local`: the sampling seed.
    pub seed: Option<u64>,
    /// `local`: nucleus sampling threshold (1 samples from all tokens).
    pub top_p: Option<f64>,
    /// `local`: the context window in tokens.
    pub context_size: Option<usize>,
    /// HTTP providers: seconds a stream may go without a complete event (default 300).
    pub idle_timeout_secs: Option<u64>,
    /// HTTP providers: the longest line of a stream, in bytes (default 32 MiB).
    pub max_line_bytes: Option<usize>,
    /// HTTP providers: the largest event of a stream, in bytes (default 32 MiB).
    pub max_event_bytes: Option<usize>,
    /// HTTP providers: the largest response, in bytes (default 256 MiB).
    pub max_response_bytes: Option<usize>,
    /// HTTP providers: seconds one stream may go on in all (default 1800).
    pub max_stream_secs: Option<u64>,
}

impl ProviderSection {
    /// `config` with this section's stream settings (each one unset keeps its default).
    pub fn stream_settings(
        &self,
        config: agentloop::provider::HttpConfig,
    ) -> agentloop::provider::HttpConfig {
        let mut limits = agentloop::provider::sse::StreamLimits::default();
        if let Some(bytes) = self.max_line_bytes {
            limits.max_line_bytes = bytes;
        }
        if let Some(bytes) = self.max_event_bytes {
            limits.max_event_bytes = bytes;
        }
        if let Some(bytes) = self.max_response_bytes {
            limits.max_response_bytes = bytes;
        }
        if let Some(secs) = self.max_stream_secs {
            limits.max_duration = std::time::Duration::from_secs(secs);
        }
        let config = config.stream_limits(limits);
        match self.idle_timeout_secs {
            Some(secs) => config.stream_idle_timeout(std::time::Duration::from_secs(secs)),
            None => config,
        }
    }
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// Model calls in the loop.
    pub max_iterations: Option<u32>,
    /// Tool calls in the run.
    pub max_tool_calls: Option<u32>,
    /// Input plus output tokens.
    pub max_total_tokens: Option<u64>,
    /// USD (needs prices).
    pub max_cost_usd: Option<f64>,
    /// Wall-clock seconds: a deadline that stops the model call or the tools in flight.
    pub max_duration_secs: Option<u64>,
    /// Seconds the wind-down call (the answer after a limit) may take (default 30).
    pub wind_down_timeout_secs: Option<u64>,
    /// USD per million input tokens.
    pub input_price_per_mtok: Option<f64>,
    /// USD per million output tokens.
    pub output_price_per_mtok: Option<f64>,
    /// USD per million input tokens read from the provider's cache (default: the input price).
    pub cached_input_price_per_mtok: Option<f64>,
    /// USD per million input tokens written to the provider's cache (default: the input price).
    pub cache_write_price_per_mtok: Option<f64>,
    /// Retries of one failed model call (default 4).
    pub model_retries: Option<u32>,
    /// No retry of a model call starts later than this many seconds after its first attempt
    /// (default 60).
    pub retry_deadline_secs: Option<u64>,
}

/// `[tools]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsSection {
    /// Built-in tools to offer: calculator, read_file, list_dir, write_file, http_get, shell.
    pub enabled: Option<Vec<String>>,
    /// The directory file tools and `shell` work in (default: the current directory).
    pub workspace: Option<PathBuf>,
    /// Hosts `http_get` may fetch.
    pub http_allowed_hosts: Vec<String>,
    /// Default tool timeout in seconds.
    pub timeout_secs: Option<u64>,
    /// Tools that ask before each call (`shell` always does).
    pub require_approval: Vec<String>,
}

/// `[telemetry]`: OpenTelemetry traces and metrics over OTLP. The standard `OTEL_*`
/// variables override it; without the table, telemetry is on when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySection {
    /// On or off (default: on when an endpoint is set here or in the environment).
    pub enabled: Option<bool>,
    /// The collector's base URL (`http://localhost:4318` for HTTP).
    pub endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`.
    pub protocol: Option<String>,
    /// The service name (default `agentloop`).
    pub service_name: Option<String>,
    /// The fraction of new traces recorded (0..1; a caller's decision is followed).
    pub sample_ratio: Option<f64>,
    /// Record prompts, completions, tool arguments and results (default false).
    pub capture_content: Option<bool>,
    /// The most bytes of content per attribute (default 16384).
    pub content_max_bytes: Option<usize>,
    /// Headers sent to the collector (e.g. an API key).
    pub headers: std::collections::BTreeMap<String, String>,
}

impl TelemetrySection {
    /// Why the table's values are wrong, if they are.
    fn validate(&self) -> Result<(), String> {
        if let Some(protocol) = &self.protocol {
            if !matches!(protocol.as_str(), "http/protobuf" | "http" | "grpc") {
                return Err(format!(
                    "protocol {protocol:?} is not supported (use \"http/protobuf\" or \"grpc\")"
                ));
            }
        }
        if let Some(ratio) = self.sample_ratio {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(format!("sample_ratio {ratio} is not in 0..1"));
            }
        }
        if self.content_max_bytes == Some(0) {
            return Err("content_max_bytes must be at least 1".into());
        }
        if let Some(endpoint) = &self.endpoint {
            validate_url(endpoint).map_err(|problem| format!("endpoint: {problem}"))?;
        }
        Ok(())
    }
}

/// The prefix of the Redis keys when `[store] prefix` sets none.
pub const DEFAULT_REDIS_PREFIX: &str = "agentloop:";

/// `[store]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// `sqlite` (default), `redis` or `memory`.
    pub kind: Option<String>,
    /// The SQLite file.
    pub path: Option<PathBuf>,
    /// The Redis URL.
    pub url: Option<String>,
    /// The prefix of every Redis key: the Redis store's and the worker queue's (default
    /// `agentloop:`).
    pub prefix: Option<String>,
    /// When the journal is committed: `sync` (default), `checkpoint` or `off`.
    pub durability: Option<agentloop::store::Durability>,
    /// Tool outputs of at least this many bytes are journaled by reference, as artifacts
    /// (default 32768; 0: every output in the journal).
    pub large_output_bytes: Option<usize>,
    /// How long a run's lease lasts unless renewed (default 10): how long the runs of a
    /// process that died wait before another (a worker, a server) takes them over. At least 1.
    pub lease_ttl_secs: Option<u64>,
}

impl StoreSection {
    /// The prefix of the Redis keys (the store's, the queue's, the push configs'):
    /// [`prefix`](Self::prefix), else `agentloop:`.
    pub fn redis_prefix(&self) -> String {
        self.prefix.clone().unwrap_or_else(|| DEFAULT_REDIS_PREFIX.to_owned())
    }

    /// [`large_output_bytes`](Self::large_output_bytes) as the stores take it.
    pub fn large_output_limit(&self) -> Option<usize> {
        match self.large_output_bytes {
            Some(0) => None,
            Some(bytes) => Some(bytes),
            None => Some(agentloop::store::DEFAULT_LARGE_OUTPUT_BYTES),
        }
    }
}

/// `[[a2a]]`: a remote A2A agent offered as a tool.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteAgentSection {
    /// The agent's base URL (or its card's URL).
    pub url: toml::Spanned<String>,
    /// The tool's name (default: from the agent card's name).
    pub name: Option<String>,
    /// The description the model sees (default: from the card).
    pub description: Option<String>,
    /// A bearer token (prefer `token_env`: a file is easily shared).
    pub token: Option<String>,
    /// The environment variable holding the bearer token.
    pub token_env: Option<String>,
    /// Seconds a call may take (default: the tools' timeout).
    pub timeout_secs: Option<u64>,
    /// The line of the table in the file (not in the file).
    #[serde(skip)]
    pub line: usize,
}

impl std::fmt::Debug for RemoteAgentSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAgentSection")
            .field("url", self.url.get_ref())
            .field("name", &self.name)
            .field("token", &self.token.as_ref().map(|_| "(redacted)"))
            .field("token_env", &self.token_env)
            .field("timeout_secs", &self.timeout_secs)
            .field("line", &self.line)
            .finish_non_exhaustive()
    }
}

/// `[[serve]]`: one agent `agentloop serve` serves, at `/{name}` with its own card. It is
/// the `[agent]` of the file (same provider, limits, tools and store) with these changes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeAgentSection {
    /// Its name: its path and its card's name (a-z, 0-9, `-`, `_`; at most 64).
    pub name: String,
    /// The card's description.
    pub description: Option<String>,
    /// Its system prompt (default: `[agent] instructions`).
    pub instructions: Option<String>,
    /// Its built-in tools (default: `[tools] enabled`).
    pub tools: Option<Vec<String>>,
    /// Its iteration limit (default: `[limits] max_iterations`).
    pub max_iterations: Option<u32>,
    /// The line of the table in the file (not in the file).
    #[serde(skip)]
    pub line: usize,
}

/// The built-in tools.
pub const BUILTIN_TOOLS: &[&str] =
    &["calculator", "read_file", "list_dir", "write_file", "http_get", "shell"];

impl Config {
    /// Parses a file's text; errors name the file, the line and what was expected.
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<Self> {
        let mut config: Config = toml::from_str(text).map_err(|error| {
            let location = error
                .span()
                .map(|span| {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!(":{line}")
                })
                .unwrap_or_default();
            anyhow::anyhow!("{}{location}: {}", path.display(), error.message())
        })?;
        let line_at = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
        for remote in &mut config.a2a {
            let line = line_at(remote.span().start);
            remote.get_mut().line = line;
        }
        for served in &mut config.serve {
            let line = line_at(served.span().start);
            served.get_mut().line = line;
        }
        for member in &mut config.fallback {
            let line = line_at(member.span().start);
            member.get_mut().line = line;
        }
        config.source = Some(path.to_owned());
        config.validate()?;
        values::check(&config, text, path)?;
        let telemetry_line = text
            .lines()
            .position(|line| line.trim_start().starts_with("[telemetry]"))
            .map_or(1, |n| n + 1);
        config.telemetry.validate().map_err(|problem| {
            anyhow::anyhow!("{}:{telemetry_line}: [telemetry] {problem}", path.display())
        })?;
        for remote in &config.a2a {
            let url = &remote.get_ref().url;
            let line = line_at(url.span().start);
            validate_url(url.get_ref()).map_err(|problem| {
                anyhow::anyhow!("{}:{line}: [[a2a]] url: {problem}", path.display())
            })?;
        }
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        let where_ =
            self.source.as_ref().map_or_else(String::new, |p| format!("{}: ", p.display()));
        for tool in self.tools.enabled.iter().flatten() {
            if !BUILTIN_TOOLS.contains(&tool.as_str()) {
                bail!(
                    "{where_}[tools] enabled: unknown tool '{tool}' (expected one of {})",
                    BUILTIN_TOOLS.join(", ")
                );
            }
        }
        if let Some(kind) = &self.store.kind {
            if !["sqlite", "redis", "memory"].contains(&kind.as_str()) {
                bail!("{where_}[store] kind: '{kind}' (expected sqlite, redis or memory)");
            }
        }
        if self.store.lease_ttl_secs == Some(0) {
            bail!("{where_}[store] lease_ttl_secs: must be at least 1");
        }
        for remote in &self.a2a {
            let remote = remote.get_ref();
            let at = self
                .source
                .as_ref()
                .map_or_else(String::new, |p| format!("{}:{}: ", p.display(), remote.line));
            if remote.token.is_some() && remote.token_env.is_some() {
                bail!("{at}[[a2a]]: set token or token_env, not both");
            }
            if remote.token_env.as_deref().is_some_and(|name| name.trim().is_empty()) {
                bail!("{at}[[a2a]] token_env: the variable's name is empty");
            }
            if remote.name.as_deref().is_some_and(|name| name.trim().is_empty()) {
                bail!("{at}[[a2a]] name: empty (leave it out to use the agent card's name)");
            }
            if remote.timeout_secs == Some(0) {
                bail!("{at}[[a2a]] timeout_secs: must be at least 1");
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for served in &self.serve {
            let served = served.get_ref();
            let at = self
                .source
                .as_ref()
                .map_or_else(String::new, |p| format!("{}:{}: ", p.display(), served.line));
            let name = served.name.as_str();
            let segment = (1..=64).contains(&name.len())
                && name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !segment {
                bail!(
                    "{at}[[serve]] name: '{name}' must be 1-64 characters of a-z, 0-9, '-' and '_'"
                );
            }
            if names.contains(&name) {
                bail!("{at}[[serve]] name: '{name}' is already served");
            }
            names.push(name);
            for tool in served.tools.iter().flatten() {
                if !BUILTIN_TOOLS.contains(&tool.as_str()) {
                    bail!(
                        "{at}[[serve]] tools: unknown tool '{tool}' (expected one of {})",
                        BUILTIN_TOOLS.join(", ")
                    );
                }
            }
            if served.max_iterations == Some(0) {
                bail!("{at}[[serve]] max_iterations: must be at least 1");
            }
        }
        if self.provider.kind == Some(ProviderKind::Scripted) && self.provider.script.is_none() {
            bail!("{where_}[provider] kind = \"scripted\" needs script = \"<file.json>\"");
        }
        Ok(())
    }

    /// Loads `explicit`, else `./agentloop.toml`, else `~/.config/agentloop/config.toml`, else
    /// the defaults.
    pub fn load(explicit: Option<&Path>) -> anyhow::Result<Self> {
        let candidates: Vec<PathBuf> = match explicit {
            Some(path) => vec![path.to_owned()],
            None => {
                let mut paths = vec![PathBuf::from("agentloop.toml")];
                let base = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).or_else(|| {
                    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config"))
                });
                if let Some(base) = base {
                    paths.push(base.join("agentloop").join("config.toml"));
                }
                paths
            }
        };
        for path in candidates {
            match std::fs::read_to_string(&path) {
                Ok(text) => return Self::parse(&text, &path),
                Err(error)
                    if error.kind() == std::io::ErrorKind::NotFound && explicit.is_none() =>
                {
                    continue
                }
                Err(error) => {
                    return Err(error).with_context(|| format!("reading {}", path.display()))
                }
            }
        }
        Ok(Self::default())
    }
}

/// Why `url` is not an agent's URL (http or https, with a host).
fn validate_url(url: &str) -> Result<(), String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("'{url}' is not a URL"))?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("'{url}': only http and https are supported"));
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("'{url}' has no host"));
    }
    Ok(())
}

// Submodules by path: this file is also compiled into the `config` fuzz target (fuzz/).
#[path = "config/values.rs"]
mod values;
pub use values::PRESETS;

#[cfg(test)]
#[path = "config/tests.rs"]
mod tests;
