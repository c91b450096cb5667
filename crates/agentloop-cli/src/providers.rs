//! Which model to talk to: `--provider`/`--model` flags, else the config file, else the
//! environment (`AGENTLOOP_BASE_URL`, `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`,
//! `GEMINI_API_KEY`), else the embedded local model (fetched into the model cache the first
//! time).

use crate::config::{FallbackSection, ProviderKind, ProviderSection};
use agentloop::provider::openai::{Compat, OpenAi};
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::provider::{Anthropic, Fallback, Gemini, HttpConfig, Provider, ProviderError};
use agentloop::run::Price;
use anyhow::{bail, Context};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Default models when only a key is given.
const OPENAI_MODEL: &str = "gpt-4o-mini";
const ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
const GEMINI_MODEL: &str = "gemini-2.5-flash";

/// The provider settings after flags, file and environment are merged.
pub fn merge(flags: &ProviderSection, file: &ProviderSection) -> anyhow::Result<ProviderSection> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let mut merged = ProviderSection {
        kind: flags.kind.or(file.kind),
        model: flags
            .model
            .clone()
            .or_else(|| file.model.clone())
            .or_else(|| env("AGENTLOOP_MODEL")),
        base_url: flags.base_url.clone().or_else(|| file.base_url.clone()),
        api_key_env: flags.api_key_env.clone().or_else(|| file.api_key_env.clone()),
        preset: flags.preset.clone().or_else(|| file.preset.clone()),
        script: flags.script.clone().or_else(|| file.script.clone()),
        chat_template: file.chat_template.clone(),
        seed: file.seed,
        top_p: file.top_p,
        context_size: file.context_size,
        idle_timeout_secs: file.idle_timeout_secs,
        max_line_bytes: file.max_line_bytes,
        max_event_bytes: file.max_event_bytes,
        max_response_bytes: file.max_response_bytes,
        max_stream_secs: file.max_stream_secs,
    };
    if merged.kind.is_none() {
        merged.kind = if merged.base_url.is_some() || merged.preset.is_some() {
            Some(ProviderKind::OpenaiCompatible)
        } else if let Some(url) = env("AGENTLOOP_BASE_URL") {
            merged.base_url = Some(url);
            Some(ProviderKind::OpenaiCompatible)
        } else if env("OPENAI_API_KEY").is_some() {
            Some(ProviderKind::Openai)
        } else if env("ANTHROPIC_API_KEY").is_some() {
            Some(ProviderKind::Anthropic)
        } else if env("GEMINI_API_KEY").is_some() {
            Some(ProviderKind::Gemini)
        } else {
            None
        };
    }
    if merged.kind == Some(ProviderKind::OpenaiCompatible) && merged.base_url.is_none() {
        merged.base_url = env("AGENTLOOP_BASE_URL");
    }
    Ok(merged)
}

/// Builds the provider. With none configured, the embedded local model, told the file tools'
/// `workspace` (a forced call of one names a path that exists there).
pub fn build(
    section: &ProviderSection,
    workspace: &std::path::Path,
) -> anyhow::Result<Arc<dyn Provider>> {
    let Some(kind) = section.kind else {
        eprintln!(
            "note: no model provider is configured (--provider, [provider] in agentloop.toml, \
             OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY or AGENTLOOP_BASE_URL): using \
             the embedded local model"
        );
        return local(section, workspace);
    };
    let model = |default: &str| section.model.clone().unwrap_or_else(|| default.to_owned());
    let keyed = |config: HttpConfig| {
        let config = section.stream_settings(config);
        match &section.api_key_env {
            Some(name) => config.api_key_env(name.clone()),
            None => config,
        }
    };
    Ok(match kind {
        ProviderKind::Openai => {
            let compat = Compat::openai();
            let config = keyed(compat.config(model(OPENAI_MODEL)));
            Arc::new(OpenAi::chat_with(config, compat.dialect)?)
        }
        ProviderKind::Responses => {
            let compat = Compat::openai();
            let config = keyed(compat.config(model(OPENAI_MODEL)));
            Arc::new(OpenAi::responses_with(config, compat.dialect)?)
        }
        ProviderKind::OpenaiCompatible => {
            let mut compat = match section.preset.as_deref() {
                Some(preset) => preset_named(preset, section)?,
                None => Compat::custom(section.base_url.clone().unwrap_or_default()),
            };
            if let (Some(url), false) =
                (&section.base_url, section.preset.as_deref() == Some("azure"))
            {
                compat = compat.base_url(url.clone());
            }
            if let Some(name) = &section.api_key_env {
                compat = compat.api_key_env(name.clone());
            }
            let config = section.stream_settings(compat.config(model("default")));
            Arc::new(OpenAi::chat_with(config, compat.dialect)?)
        }
        ProviderKind::Anthropic => {
            let model = model(ANTHROPIC_MODEL);
            let config = keyed(Anthropic::config(model.clone()));
            let config = match &section.base_url {
                Some(url) => config.base_url(url.clone()),
                None => config,
            };
            Arc::new(Anthropic::with_config(config, Anthropic::messages(model))?)
        }
        ProviderKind::Gemini => {
            let model = model(GEMINI_MODEL);
            let config = keyed(Gemini::config(model.clone()));
            Arc::new(Gemini::with_config(config, Gemini::new(model))?)
        }
        ProviderKind::Bedrock => {
            let Some(model) = &section.model else {
                bail!(
                    "the bedrock provider needs --model (a model id or inference profile, e.g. \
                     us.anthropic.claude-sonnet-4-5-20250929-v1:0)"
                )
            };
            use agentloop::provider::bedrock::{Bedrock, API_KEY_ENV};
            // Region, credentials and endpoint from the standard AWS settings; a `base_url` (a
            // proxy, a VPC endpoint) replaces the endpoint, signed the same way.
            let standard = Bedrock::provider(model.clone())?;
            let url = section.base_url.clone().unwrap_or_else(|| standard.base_url().to_owned());
            let key = section.api_key_env.clone().unwrap_or_else(|| API_KEY_ENV.to_owned());
            let config =
                section.stream_settings(HttpConfig::new(url, model.clone()).api_key_env(key));
            Arc::new(Bedrock::with_config(config, standard.format().clone())?)
        }
        ProviderKind::Scripted => {
            let Some(path) = &section.script else {
                bail!("the scripted provider needs --script <file.json>")
            };
            Arc::new(scripted(path)?)
        }
        ProviderKind::Local => return local(section, workspace),
    })
}

/// The members' own prices, by label (`family:name`).
pub type MemberPrices = Vec<(String, Price)>;

/// `primary` followed by the `[[fallback]]` members of the file at `source`, as one fallback
/// chain (`primary` alone when there are none), and the members' own prices by label.
pub fn with_fallbacks(
    primary: Arc<dyn Provider>,
    fallbacks: &[toml::Spanned<FallbackSection>],
    source: &str,
    workspace: &Path,
) -> anyhow::Result<(Arc<dyn Provider>, MemberPrices)> {
    if fallbacks.is_empty() {
        return Ok((primary, Vec::new()));
    }
    let mut members = vec![Fallback::member(primary)];
    let mut prices = Vec::new();
    for member in fallbacks.iter().map(toml::Spanned::get_ref) {
        let at = |e: anyhow::Error| anyhow::anyhow!("{source}:{}: [[fallback]] {e:#}", member.line);
        let provider = build(&member.provider(), workspace).map_err(at)?;
        let member_ = Fallback::member(provider);
        let price = price(
            member.input_price_per_mtok,
            member.output_price_per_mtok,
            member.cached_input_price_per_mtok,
            member.cache_write_price_per_mtok,
        );
        if let Some(price) = price {
            prices.push((member_.label().to_owned(), price));
        }
        members.push(member_);
    }
    let chain = Fallback::new(members).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    Ok((Arc::new(chain), prices))
}

/// A price from its four settings (`None` without an input and an output price).
pub fn price(
    input: Option<f64>,
    output: Option<f64>,
    cached_input: Option<f64>,
    cache_write: Option<f64>,
) -> Option<Price> {
    let mut price = Price::per_million(input?, output?);
    if let Some(read) = cached_input {
        price = price.with_cached_input(read);
    }
    if let Some(write) = cache_write {
        price = price.with_cache_write(write);
    }
    Some(price)
}

/// The local model: `model` is a known name (fetched into the cache if it is not there yet)
/// or the path of a GGUF file.
#[cfg(feature = "local")]
fn local(
    section: &ProviderSection,
    workspace: &std::path::Path,
) -> anyhow::Result<Arc<dyn Provider>> {
    use agentloop_local::fetch;
    let spec = section.model.clone().unwrap_or_else(|| fetch::SMOLLM2_135M.name.to_owned());
    let path = match fetch::known_model(&spec) {
        Some(known) => {
            let path = fetch::cached_path(known, None)?;
            let present = std::fs::metadata(&path).is_ok_and(|meta| meta.len() == known.size);
            if !present {
                eprintln!(
                    "fetching the local model {} ({:.0} MB, once, into {})…",
                    known.name,
                    known.download_size() as f64 / 1e6,
                    path.parent().unwrap_or(&path).display()
                );
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current()
                        .block_on(crate::model::fetch_known(known, false))
                })?;
            }
            path
        }
        None => {
            let path = std::path::PathBuf::from(&spec);
            if !path.is_file() {
                bail!(
                    "local model '{spec}' is neither a known model ({}) nor a GGUF file",
                    fetch::KNOWN_MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
                );
            }
            path
        }
    };
    // The default agent's worked examples (agentloop_local::recipe), as conversation turns.
    let mut builder = agentloop_local::recipe::model(&path).workspace(workspace);
    if let Some(file) = &section.chat_template {
        let template = std::fs::read_to_string(file)
            .with_context(|| format!("reading the chat template {}", file.display()))?;
        builder = builder.chat_template(template);
    }
    if let Some(seed) = section.seed {
        builder = builder.seed(seed);
    }
    if section.top_p.is_some() {
        builder = builder.top_p(section.top_p);
    }
    if let Some(tokens) = section.context_size {
        builder = builder.context_size(tokens);
    }
    let model = tokio::task::block_in_place(|| builder.build())
        .with_context(|| format!("loading the local model {}", path.display()))?;
    Ok(Arc::new(model))
}

#[cfg(not(feature = "local"))]
fn local(
    _section: &ProviderSection,
    _workspace: &std::path::Path,
) -> anyhow::Result<Arc<dyn Provider>> {
    bail!(
        "no model provider is configured, and this build has no embedded local model (feature \
         `local`): pass --provider and --model, add [provider] to agentloop.toml, or set \
         OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY or AGENTLOOP_BASE_URL"
    )
}

/// The endpoint of an Azure OpenAI resource (`https://NAME.openai.azure.com`): `base_url`,
/// else `AZURE_OPENAI_ENDPOINT`.
fn azure_endpoint(section: &ProviderSection) -> anyhow::Result<String> {
    match &section.base_url {
        Some(url) => Ok(url.clone()),
        None => std::env::var("AZURE_OPENAI_ENDPOINT").ok().filter(|e| !e.trim().is_empty()).ok_or_else(|| {
            anyhow::anyhow!(
                "preset 'azure' needs the resource's endpoint: base_url = \"https://NAME.openai.azure.com\" \
                 in [provider], or AZURE_OPENAI_ENDPOINT"
            )
        }),
    }
}

/// The preset `name`; `section` gives Azure its endpoint.
fn preset_named(name: &str, section: &ProviderSection) -> anyhow::Result<Compat> {
    Ok(match name {
        // Azure's `base_url` is the resource's endpoint, as Azure's tools have it.
        "azure" => Compat::azure(&azure_endpoint(section)?),
        "ollama" => Compat::ollama(),
        "vllm" => Compat::vllm(),
        "llama-cpp" | "llama.cpp" => Compat::llama_cpp(),
        "lm-studio" => Compat::lm_studio(),
        "litellm" => Compat::litellm(),
        "openrouter" => Compat::openrouter(),
        "groq" => Compat::groq(),
        "together" => Compat::together(),
        "deepseek" => Compat::deepseek(),
        "mistral" => Compat::mistral(),
        other => bail!("unknown preset '{other}' (expected {})", crate::config::PRESETS.join(", ")),
    })
}

/// One turn of a script file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnSpec {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallSpec>,
    #[serde(default)]
    finish: Option<String>,
    #[serde(default)]
    chunk_delay_ms: Option<u64>,
    #[serde(default)]
    error: Option<ProviderError>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallSpec {
    name: String,
    #[serde(default)]
    arguments: Value,
}

/// A script file as an object: its turns and whether they follow the conversation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptSpec {
    turns: Vec<TurnSpec>,
    /// Each request gets the turn at the number of assistant turns since its last user
    /// message (`ScriptedModel::following_history`): a run gets the same turns in any process.
    #[serde(default)]
    follow_history: bool,
}

/// A scripted model from a JSON file: `[{"text": …, "tool_calls": [{"name", "arguments"}],
/// "reasoning", "finish", "chunk_delay_ms", "error"}, …]`, or that array as `turns` of an
/// object with `"follow_history": true`.
pub fn scripted(path: &Path) -> anyhow::Result<ScriptedModel> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the script {}", path.display()))?;
    let located = |e: serde_json::Error| anyhow::anyhow!("{}:{}: {e}", path.display(), e.line());
    let (turns, follow_history) = if text.trim_start().starts_with('[') {
        (serde_json::from_str::<Vec<TurnSpec>>(&text).map_err(located)?, false)
    } else {
        let script: ScriptSpec = serde_json::from_str(&text).map_err(located)?;
        (script.turns, script.follow_history)
    };
    let turns = turns.into_iter().map(|spec| {
        if let Some(error) = spec.error {
            return ScriptedTurn::error(error);
        }
        let mut turn = ScriptedTurn::default();
        if let Some(text) = spec.text {
            turn = turn.with_text(text);
        }
        if let Some(reasoning) = spec.reasoning {
            turn = turn.with_reasoning(reasoning);
        }
        for call in spec.tool_calls {
            let arguments =
                if call.arguments.is_null() { serde_json::json!({}) } else { call.arguments };
            turn = turn.with_tool_call(call.name, arguments);
        }
        if let Some(finish) = spec.finish {
            turn = turn.with_finish(finish.into());
        }
        if let Some(ms) = spec.chunk_delay_ms {
            turn = turn.with_chunk_delay(std::time::Duration::from_millis(ms));
        }
        turn
    });
    let model = ScriptedModel::new(turns.collect::<Vec<_>>());
    Ok(if follow_history { model.following_history() } else { model })
}

#[cfg(test)]
mod tests;
