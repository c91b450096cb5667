//! `bench-driver`: one driver process of the benchmark (see `agentloop_bench::driver`);
//! prints its report as one JSON line.

use std::process::ExitCode;

fn main() -> ExitCode {
    let plan = match agentloop_bench::driver::parse_args(std::env::args().skip(1)) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("bench-driver: {e}");
            return ExitCode::FAILURE;
        }
    };
    agentloop_bench::measure::raise_open_files_limit();
    let mut builder = tokio::runtime::Builder::new_current_thread();
    if let Some(n) = plan.global_queue_interval {
        builder.global_queue_interval(n);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bench-driver: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(agentloop_bench::driver::drive(&plan)) {
        Ok(report) => match serde_json::to_string(&report) {
            Ok(line) => {
                println!("{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench-driver: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("bench-driver: {e}");
            ExitCode::FAILURE
        }
    }
}
