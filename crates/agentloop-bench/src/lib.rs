//! The overhead benchmark of agentloop (issue 5): how much an agent loop through agentloop
//! costs on top of the raw HTTP round trips to a model, measured against a floor that does the
//! same HTTP calls and JSON handling with no framework.
//!
//! - [`mock`]: `mockllm`, a fast OpenAI-compatible chat-completions server scripted by the
//!   model name ([`Script`]).
//! - [`floor`]: the raw reqwest loop.
//! - [`via_agentloop`]: the same task through [`agentloop::Agent`].
//! - [`measure`]: CPU time and peak memory of the current process.
//! - [`report`]: what a driver run prints, and the markdown table of the runner.
//! - [`otel`]: the cost of OpenTelemetry per loop round, on and off (issue 20).
//!
//! The binaries `mockllm`, `bench-driver` and `bench-overhead` (the runner) put them together;
//! `bench-otel` runs [`otel`]. See `docs/PERFORMANCE.md`. Every binary runs on mimalloc (the
//! default feature `mimalloc`, as the CLI), or on glibc's allocator without it.

pub mod driver;
pub mod floor;
pub mod measure;
pub mod mock;
pub mod otel;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod timed_store;

/// The allocator of every benchmark binary (they all link this library): mimalloc, as the
/// CLI's, with the default feature `mimalloc`; glibc's without it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Deletes every run in `store` (a benchmark's runs, under its own key prefix).
pub async fn delete_all_runs(
    store: &dyn agentloop::store::RunStore,
) -> Result<(), agentloop::store::StoreError> {
    use agentloop::store::RunFilter;
    loop {
        let runs = store.list_runs(&RunFilter::all().limit(1_000)).await?;
        if runs.is_empty() {
            return Ok(());
        }
        for run in runs {
            store.delete_run(&run.run_id).await?;
        }
    }
}
pub mod via_agentloop;

pub use scenario::{Script, ScriptError};
