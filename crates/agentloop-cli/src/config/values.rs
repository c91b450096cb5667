//! The values of a parsed configuration checked, each error naming the file and the line of
//! the bad value (`agentloop.toml:7: [agent] temperature: …`).

use super::{validate_url, Config};
use anyhow::bail;
use std::path::Path;

/// The presets `[provider] preset` names (OpenAI-compatible servers).
pub const PRESETS: &[&str] = &[
    "ollama",
    "vllm",
    "llama-cpp",
    "llama.cpp",
    "lm-studio",
    "litellm",
    "openrouter",
    "groq",
    "together",
    "deepseek",
    "mistral",
    "azure",
];

/// The line of `key` in `[table]` of `text` (1-based): the key's own line when found, else the
/// table's header, else 1.
pub fn key_line(text: &str, table: &str, key: &str) -> usize {
    let header = format!("[{table}]");
    let mut in_table = false;
    let mut header_line = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.starts_with('[') {
            in_table = line.split('#').next().is_some_and(|h| h.trim_end() == header);
            if in_table && header_line.is_none() {
                header_line = Some(n + 1);
            }
            continue;
        }
        if in_table {
            let name = line.split('=').next().unwrap_or_default().trim().trim_matches('"');
            if line.contains('=') && name == key {
                return n + 1;
            }
        }
    }
    header_line.unwrap_or(1)
}

/// Checks every value a section cannot take, with its place.
pub fn check(config: &Config, text: &str, path: &Path) -> anyhow::Result<()> {
    let at = |table: &str, key: &str| format!("{}:{}", path.display(), key_line(text, table, key));
    let agent = &config.agent;
    if let Some(t) = agent.temperature {
        if !t.is_finite() || !(0.0..=2.0).contains(&t) {
            bail!("{}: [agent] temperature: {t} (expected 0 to 2)", at("agent", "temperature"));
        }
    }
    if agent.max_tokens == Some(0) {
        bail!("{}: [agent] max_tokens: must be at least 1", at("agent", "max_tokens"));
    }
    if agent.tool_concurrency == Some(0) {
        bail!("{}: [agent] tool_concurrency: must be at least 1", at("agent", "tool_concurrency"));
    }
    if config.store.prefix.as_deref().is_some_and(|p| p.trim().is_empty()) {
        bail!("{}: [store] prefix: empty (leave it out for \"agentloop:\")", at("store", "prefix"));
    }
    let limits = &config.limits;
    for (key, value) in [
        ("max_iterations", limits.max_iterations.map(u64::from)),
        ("max_total_tokens", limits.max_total_tokens),
        ("max_duration_secs", limits.max_duration_secs),
        ("wind_down_timeout_secs", limits.wind_down_timeout_secs),
        ("retry_deadline_secs", limits.retry_deadline_secs),
    ] {
        if value == Some(0) {
            bail!("{}: [limits] {key}: must be at least 1", at("limits", key));
        }
    }
    for (key, value, zero_ok) in [
        ("max_cost_usd", limits.max_cost_usd, false),
        ("input_price_per_mtok", limits.input_price_per_mtok, true),
        ("output_price_per_mtok", limits.output_price_per_mtok, true),
    ] {
        if let Some(v) = value {
            let fine = v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0));
            if !fine {
                let expected = if zero_ok { "0 or more" } else { "more than 0" };
                bail!("{}: [limits] {key}: {v} (expected {expected})", at("limits", key));
            }
        }
    }
    let provider = &config.provider;
    if let Some(url) = &provider.base_url {
        validate_url(url).map_err(|problem| {
            anyhow::anyhow!("{}: [provider] base_url: {problem}", at("provider", "base_url"))
        })?;
    }
    if let Some(preset) = &provider.preset {
        if !PRESETS.contains(&preset.as_str()) {
            bail!(
                "{}: [provider] preset: unknown preset '{preset}' (expected {})",
                at("provider", "preset"),
                PRESETS.join(", ")
            );
        }
    }
    if let Some(p) = provider.top_p {
        if !p.is_finite() || p <= 0.0 || p > 1.0 {
            bail!(
                "{}: [provider] top_p: {p} (expected more than 0, at most 1)",
                at("provider", "top_p")
            );
        }
    }
    let as_u64 = |value: Option<usize>| value.map(|v| v as u64);
    for (key, value) in [
        ("context_size", as_u64(provider.context_size)),
        ("idle_timeout_secs", provider.idle_timeout_secs),
        ("max_line_bytes", as_u64(provider.max_line_bytes)),
        ("max_event_bytes", as_u64(provider.max_event_bytes)),
        ("max_response_bytes", as_u64(provider.max_response_bytes)),
        ("max_stream_secs", provider.max_stream_secs),
    ] {
        if value == Some(0) {
            bail!("{}: [provider] {key}: must be at least 1", at("provider", key));
        }
    }
    let tools = &config.tools;
    if tools.timeout_secs == Some(0) {
        bail!("{}: [tools] timeout_secs: must be at least 1", at("tools", "timeout_secs"));
    }
    if let Some(dir) = &tools.workspace {
        if !dir.is_dir() {
            bail!(
                "{}: [tools] workspace: '{}' is not a directory",
                at("tools", "workspace"),
                dir.display()
            );
        }
    }
    let enabled = |name: &str| tools.enabled.iter().flatten().any(|tool| tool == name);
    if enabled("http_get") && tools.http_allowed_hosts.is_empty() {
        bail!(
            "{}: [tools] http_get needs http_allowed_hosts = [\"host\", …] (it fetches from no \
             other host)",
            at("tools", "enabled")
        );
    }
    Ok(())
}
