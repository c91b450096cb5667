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
"#,
    )
    .unwrap();
    assert_eq!(config.agent.name.as_deref(), Some("helper"));
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
}
