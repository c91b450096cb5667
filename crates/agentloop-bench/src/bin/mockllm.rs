//! `mockllm`: the benchmark's mock OpenAI-compatible server (see `agentloop_bench::mock`).
//!
//! `mockllm [--listen 127.0.0.1:0] [--max-seconds 3600]` prints `listening http://ADDR/v1`
//! once it accepts connections, serves on one thread, and exits after `--max-seconds`.

use agentloop_bench::mock;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn main() -> ExitCode {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut max_seconds = 3600u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--listen", Some(value)) => listen = value,
            ("--max-seconds", Some(value)) => match value.parse() {
                Ok(n) => max_seconds = n,
                Err(e) => return fail(&format!("--max-seconds {value}: {e}")),
            },
            _ => {
                return fail(&format!(
                    "usage: mockllm [--listen ADDR] [--max-seconds N] (got {arg})"
                ))
            }
        }
    }
    let Ok(addr) = listen.parse::<std::net::SocketAddr>() else {
        return fail(&format!("invalid address {listen}"));
    };
    agentloop_bench::measure::raise_open_files_limit();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&e.to_string()),
    };
    runtime.block_on(async move {
        let listener = match mock::bind(addr) {
            Ok(listener) => listener,
            Err(e) => return fail(&format!("bind {addr}: {e}")),
        };
        match listener.local_addr() {
            Ok(local) => {
                println!("listening http://{local}/v1");
                let _ = std::io::stdout().flush();
            }
            Err(e) => return fail(&e.to_string()),
        }
        let stats = Arc::new(mock::Stats::default());
        tokio::select! {
            result = mock::serve(listener, stats) => match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e.to_string()),
            },
            () = tokio::time::sleep(Duration::from_secs(max_seconds)) => ExitCode::SUCCESS,
        }
    })
}

fn fail(message: &str) -> ExitCode {
    eprintln!("mockllm: {message}");
    ExitCode::FAILURE
}
