#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn parse(text: &str) -> anyhow::Result<Config> {
    Config::parse(text, Path::new("agentloop.toml"))
}

#[test]
fn a_full_file_parses() {
    let config = parse(
        r#"
[agent]
name = "helper"
instructions = "Be brief."

[provider]
kind = "openai-compatible"
preset = "ollama"
model = "llama3.1"

[limits]
max_iterations = 8
max_cost_usd = 0.5
input_price_per_mtok = 1.0
output_price_per_mtok = 2.0

[tools]
enabled = ["calculator", "read_file"]
workspace = "."
require_approval = ["read_file"]

[store]
kind = "sqlite"
path = ".agentloop/runs.db"
durability = "checkpoint"
large_output_bytes = 0
prefix = "team-a:"
"#,
    )
    .unwrap();
    assert_eq!(config.agent.name.as_deref(), Some("helper"));
    assert_eq!(config.store.durability, Some(agentloop::store::Durability::Checkpoint));
    assert_eq!(config.store.large_output_limit(), None, "0: every output in the journal");
    assert_eq!(config.store.redis_prefix(), "team-a:");
    assert_eq!(crate::config::StoreSection::default().redis_prefix(), "agentloop:");
    assert_eq!(
        crate::config::StoreSection::default().large_output_limit(),
        Some(agentloop::store::DEFAULT_LARGE_OUTPUT_BYTES)
    );
    assert_eq!(config.provider.kind, Some(ProviderKind::OpenaiCompatible));
    assert_eq!(config.limits.max_iterations, Some(8));
    assert_eq!(
        config.tools.enabled.as_deref(),
        Some(&["calculator".to_string(), "read_file".to_string()][..])
    );
}

#[test]
fn errors_name_the_file_the_line_and_what_is_expected() {
    let error = parse("[agent]\nname = \"x\"\nnmae = \"typo\"\n").unwrap_err().to_string();
    assert!(
        error.starts_with("agentloop.toml:3: unknown field `nmae`, expected one of"),
        "{error}"
    );
    let error = parse("[limits]\nmax_iterations = \"many\"\n").unwrap_err().to_string();
    assert!(
        error.starts_with("agentloop.toml:2: invalid type: string \"many\", expected u32"),
        "{error}"
    );
    let error = parse("[provider]\nkind = \"openia\"\n").unwrap_err().to_string();
    assert!(error.contains("agentloop.toml:2: unknown variant `openia`"), "{error}");
    let error = parse("[tools]\nenabled = [\"rm_rf\"]\n").unwrap_err().to_string();
    assert!(error.contains("unknown tool 'rm_rf'"), "{error}");
    let error = parse("[provider]\nkind = \"scripted\"\n").unwrap_err().to_string();
    assert!(error.contains("needs script"), "{error}");
    let error = parse("[agent\n").unwrap_err().to_string();
    assert!(error.starts_with("agentloop.toml:1:"), "{error}");
    let error = parse("[store]\nlease_ttl_secs = 0\n").unwrap_err().to_string();
    assert!(error.contains("[store] lease_ttl_secs: must be at least 1"), "{error}");
    assert_eq!(parse("[store]\nlease_ttl_secs = 3\n").unwrap().store.lease_ttl_secs, Some(3));
}

#[test]
fn remote_agents_parse_with_their_lines() {
    let config = parse(
        r#"
[[a2a]]
url = "http://127.0.0.1:8080/echo"

[[a2a]]
url = "https://agents.example/research"
name = "research"
description = "Finds things."
token_env = "RESEARCH_TOKEN"
timeout_secs = 600
"#,
    )
    .unwrap();
    let remotes: Vec<&RemoteAgentSection> = config.a2a.iter().map(|r| r.get_ref()).collect();
    assert_eq!(remotes.len(), 2);
    assert_eq!(
        (remotes[0].url.get_ref().as_str(), remotes[0].line),
        ("http://127.0.0.1:8080/echo", 2)
    );
    assert_eq!(remotes[1].name.as_deref(), Some("research"));
    assert_eq!(remotes[1].token_env.as_deref(), Some("RESEARCH_TOKEN"));
    assert_eq!((remotes[1].timeout_secs, remotes[1].line), (Some(600), 5));
}

#[test]
fn bad_remote_agents_are_refused_with_file_and_line() {
    let error = |text: &str| parse(text).unwrap_err().to_string();
    assert_eq!(
        error("[agent]\nname = \"a\"\n\n[[a2a]]\nurl = \"ftp://host/x\"\n"),
        "agentloop.toml:5: [[a2a]] url: 'ftp://host/x': only http and https are supported"
    );
    assert_eq!(
        error("[[a2a]]\nurl = \"http://h\"\ntoken = \"abc123\"\ntoken_env = \"T\"\n"),
        "agentloop.toml:1: [[a2a]]: set token or token_env, not both"
    );
    assert_eq!(
        error("\n[[a2a]]\nurl = \"http://h\"\ntimeout_secs = 0\n"),
        "agentloop.toml:2: [[a2a]] timeout_secs: must be at least 1"
    );
    let missing = error("[[a2a]]\nname = \"x\"\n");
    assert!(missing.starts_with("agentloop.toml:1: ") && missing.contains("url"), "{missing}");
    let unknown = error("[[a2a]]\nurl = \"http://h\"\nurls = 1\n");
    assert!(unknown.starts_with("agentloop.toml:3: ") && unknown.contains("urls"), "{unknown}");
    // The token is never part of an error or of the debug output.
    let config = parse("[[a2a]]\nurl = \"http://h\"\ntoken = \"abc123\"\n").unwrap();
    assert!(!format!("{config:?}").contains("abc123"));
}

#[test]
fn served_agents_are_read_with_their_lines_and_bad_ones_refused() {
    let text = "[agent]\nname = \"base\"\n\n[[serve]]\nname = \"alpha\"\ndescription = \"First\"\n\n[[serve]]\nname = \"beta\"\ntools = [\"calculator\"]\nmax_iterations = 3\n";
    let config = parse(text).unwrap();
    let served: Vec<_> = config.serve.iter().map(|s| s.get_ref()).collect();
    assert_eq!((served[0].name.as_str(), served[0].line), ("alpha", 4));
    assert_eq!(served[0].description.as_deref(), Some("First"));
    assert_eq!(
        (served[1].name.as_str(), served[1].line, served[1].max_iterations),
        ("beta", 8, Some(3))
    );
    let error = |text: &str| parse(text).unwrap_err().to_string();
    assert_eq!(
        error("[[serve]]\nname = \"Bad Name\"\n"),
        "agentloop.toml:1: [[serve]] name: 'Bad Name' must be 1-64 characters of a-z, 0-9, '-' and '_'"
    );
    assert_eq!(
        error("[[serve]]\nname = \"a\"\n[[serve]]\nname = \"a\"\n"),
        "agentloop.toml:3: [[serve]] name: 'a' is already served"
    );
    assert!(error("\n[[serve]]\nname = \"a\"\ntools = [\"rm\"]\n")
        .starts_with("agentloop.toml:2: [[serve]] tools: unknown tool 'rm'"));
    assert_eq!(
        error("[[serve]]\nname = \"a\"\nmax_iterations = 0\n"),
        "agentloop.toml:1: [[serve]] max_iterations: must be at least 1"
    );
    let missing = error("[[serve]]\ndescription = \"x\"\n");
    assert!(missing.starts_with("agentloop.toml:1: ") && missing.contains("name"), "{missing}");
}

#[test]
fn the_telemetry_table_is_read_and_bad_values_name_the_line() {
    let text = "[agent]\nname = \"a\"\n\n[telemetry]\nendpoint = \"http://localhost:4318\"\nprotocol = \"grpc\"\nsample_ratio = 0.5\nheaders = { \"x-key\" = \"v\" }\n";
    let config = parse(text).unwrap();
    assert_eq!(config.telemetry.endpoint.as_deref(), Some("http://localhost:4318"));
    assert_eq!(config.telemetry.protocol.as_deref(), Some("grpc"));
    assert_eq!(config.telemetry.sample_ratio, Some(0.5));
    assert_eq!(config.telemetry.headers.get("x-key").map(String::as_str), Some("v"));
    let error = |text: &str| parse(text).unwrap_err().to_string();
    assert_eq!(
        error("\n[telemetry]\nprotocol = \"http/json\"\n"),
        "agentloop.toml:2: [telemetry] protocol \"http/json\" is not supported (use \"http/protobuf\" or \"grpc\")"
    );
    assert_eq!(
        error("[telemetry]\nsample_ratio = 2.0\n"),
        "agentloop.toml:1: [telemetry] sample_ratio 2 is not in 0..1"
    );
    assert!(error("[telemetry]\nendpoint = \"localhost\"\n")
        .starts_with("agentloop.toml:1: [telemetry] endpoint: "));
    assert!(error("[telemetry]\ncapture = true\n")
        .starts_with("agentloop.toml:2: unknown field `capture`"));
}

#[test]
fn every_bad_value_is_refused_with_its_file_and_line() {
    // (file text, the error it must give: "agentloop.toml:<line>: …").
    let cases: &[(&str, &str)] = &[
        (
            "[agent]\nname = \"a\"\ntemperature = nan\n",
            "agentloop.toml:3: [agent] temperature: NaN",
        ),
        ("[agent]\ntemperature = 2.5\n", "agentloop.toml:2: [agent] temperature: 2.5"),
        ("[agent]\ntool_concurrency = 0\n", "agentloop.toml:2: [agent] tool_concurrency: must be"),
        ("[agent]\nmax_tokens = 0\n", "agentloop.toml:2: [agent] max_tokens: must be"),
        ("\n[limits]\n\nmax_iterations = 0\n", "agentloop.toml:4: [limits] max_iterations"),
        ("[limits]\nmax_duration_secs = 0\n", "agentloop.toml:2: [limits] max_duration_secs"),
        ("[limits]\nwind_down_timeout_secs = 0\n", "agentloop.toml:2: [limits] wind_down_timeout"),
        (
            "[provider]\nmodel = \"m\"\nidle_timeout_secs = 0\n",
            "agentloop.toml:3: [provider] idle_timeout_secs: must be",
        ),
        (
            "[provider]\nmax_line_bytes = 0\n",
            "agentloop.toml:2: [provider] max_line_bytes: must be",
        ),
        (
            "[provider]\nmax_event_bytes = 0\n",
            "agentloop.toml:2: [provider] max_event_bytes: must be",
        ),
        ("[provider]\nmax_response_bytes = 0\n", "agentloop.toml:2: [provider] max_response_bytes"),
        (
            "[provider]\nmax_stream_secs = 0\n",
            "agentloop.toml:2: [provider] max_stream_secs: must be",
        ),
        ("[limits]\nmax_cost_usd = -1.0\n", "agentloop.toml:2: [limits] max_cost_usd: -1"),
        ("[limits]\ninput_price_per_mtok = inf\n", "agentloop.toml:2: [limits] input_price"),
        ("[tools]\ntimeout_secs = 0\n", "agentloop.toml:2: [tools] timeout_secs: must be"),
        (
            "[tools]\nenabled = [\"http_get\"]\n",
            "agentloop.toml:2: [tools] http_get needs http_allowed_hosts",
        ),
        (
            "[tools]\nworkspace = \"/no/such/dir/here\"\n",
            "agentloop.toml:2: [tools] workspace: '/no/such/dir/here' is not a directory",
        ),
        (
            "[provider]\nkind = \"openai-compatible\"\npreset = \"olama\"\n",
            "agentloop.toml:3: [provider] preset: unknown preset 'olama'",
        ),
        (
            "[provider]\nbase_url = \"localhost:8080/v1\"\n",
            "agentloop.toml:2: [provider] base_url: 'localhost:8080/v1' is not a URL",
        ),
        ("[provider]\nbase_url = \"ftp://h/v1\"\n", "agentloop.toml:2: [provider] base_url"),
        ("[provider]\ntop_p = 0.0\n", "agentloop.toml:2: [provider] top_p: 0"),
        ("[provider]\ncontext_size = 0\n", "agentloop.toml:2: [provider] context_size"),
        ("[agent]\ntool_concurrency = -1\n", "agentloop.toml:2"),
        ("[agent]\nunknown_key = 1\n", "agentloop.toml:2"),
        ("[store]\ndurability = \"fast\"\n", "agentloop.toml:2: unknown variant `fast`"),
        ("[store]\nkind = \"redis\"\nprefix = \"\"\n", "agentloop.toml:3: [store] prefix: empty"),
    ];
    for (text, want) in cases {
        let error = format!("{:#}", parse(text).err().unwrap_or_else(|| panic!("{text:?} parsed")));
        assert!(error.starts_with(want), "{text:?}: {error}");
    }
    // The values they stand in for are taken.
    parse("[agent]\ntemperature = 0.0\ntool_concurrency = 1\n[limits]\ninput_price_per_mtok = 0.0\n[provider]\nbase_url = \"http://127.0.0.1:8080/v1\"\npreset = \"llama.cpp\"\ntop_p = 1.0\n").unwrap();
}
