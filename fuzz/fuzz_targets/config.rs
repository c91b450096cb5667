//! `agentloop.toml` as the CLI reads it (the CLI's own `config` module, compiled in here):
//! never a panic; a bad file is an error that names the file and a line.
#![no_main]
#![allow(dead_code, unused_imports, missing_docs)]

#[path = "../../crates/agentloop-cli/src/config.rs"]
mod config;
#[path = "../../crates/agentloop-cli/src/telemetry.rs"]
mod telemetry;

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(error) = config::Config::parse(text, Path::new("agentloop.toml")) {
        let message = format!("{error:#}");
        assert!(message.starts_with("agentloop.toml"), "an error without its file: {message}");
    }
});
