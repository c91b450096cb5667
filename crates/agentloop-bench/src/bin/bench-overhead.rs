//! `bench-overhead`: runs the overhead benchmark and prints the markdown table (see
//! `agentloop_bench::runner` and `docs/PERFORMANCE.md`).
//!
//! `cargo run --release -p agentloop-bench --bin bench-overhead` (full run, a few minutes);
//! `--smoke` runs tiny parameters and only checks that every driver does its work.

use std::process::ExitCode;

fn main() -> ExitCode {
    let options = match agentloop_bench::runner::parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("bench-overhead: {e}");
            return ExitCode::FAILURE;
        }
    };
    if options.pin && std::process::Command::new("taskset").arg("-V").output().is_err() {
        eprintln!("bench-overhead: taskset not found; use --no-pin to run unpinned");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bench-overhead: {e}");
            return ExitCode::FAILURE;
        }
    };
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    match runtime.block_on(agentloop_bench::runner::run(&options)) {
        Ok(results) => {
            let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
            println!("{}", agentloop_bench::report::machine_line());
            println!("load average before: {}, after: {}", load_before.trim(), load_after.trim());
            println!();
            for line in &results.capacity {
                println!("- {line}");
            }
            println!();
            println!("{}", results.table);
            println!("<details><summary>driver processes</summary>\n");
            println!("```");
            for line in &results.log {
                println!("{line}");
            }
            println!("```\n</details>");
            if options.smoke || results.all_met {
                ExitCode::SUCCESS
            } else {
                eprintln!("bench-overhead: some targets are not met (see the table)");
                ExitCode::from(2)
            }
        }
        Err(e) => {
            eprintln!("bench-overhead: {e}");
            ExitCode::FAILURE
        }
    }
}
