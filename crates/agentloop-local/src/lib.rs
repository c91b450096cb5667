//! An in-process local model for agentloop: loads a GGUF file, runs it on the CPU and serves
//! it through the [`agentloop::provider::Provider`] seam, so an agent runs with no API key and
//! no network. The core crate does not depend on this one.
//!
//! ```no_run
//! use agentloop_local::LocalModel;
//!
//! let model = LocalModel::builder("SmolLM2-135M-Instruct.Q4_1.gguf")
//!     .temperature(0.2)
//!     .max_tokens(256)
//!     .build()?;
//! # Ok::<(), agentloop_local::LocalError>(())
//! ```
//!
//! - [`tokenizer`]: the byte-level BPE tokenizer from the GGUF metadata,
//! - [`template`]: the model's own chat template (Jinja, rendered with MiniJinja),
//! - [`engine`]: loading (candle's quantized llama) and generation (sampling, stop tokens,
//!   cancellation),
//! - [`LocalModel`]: the provider; tools through the Hermes prompt format, calls forced into
//!   shape by a bounded grammar when the request requires one,
//! - [`recipe`]: the default agent around a small model (instructions with worked examples,
//!   the per-step tool choice), used by the CLI,
//! - [`eval`]: the evaluation set that measures that agent.

mod constrain;
pub mod engine;
mod error;
pub mod eval;
pub mod fetch;
mod gguf;
mod prefix;
mod provider;
pub mod recipe;
pub mod template;
pub mod tokenizer;

pub use engine::{Dequantize, Finish, GenerationStats, SamplingParams};
pub use error::LocalError;
pub use provider::{Examples, LocalModel, LocalModelBuilder};

/// The model file tests use: `AGENTLOOP_LOCAL_MODEL`, else the cached SmolLM2, if it exists.
#[cfg(test)]
pub(crate) fn test_model_path() -> Option<std::path::PathBuf> {
    let path =
        std::env::var_os("AGENTLOOP_LOCAL_MODEL").map(std::path::PathBuf::from).or_else(|| {
            std::env::var_os("HOME").map(|home| {
                std::path::PathBuf::from(home)
                    .join(".cache/agentloop/models/SmolLM2-135M-Instruct.Q4_1.gguf")
            })
        })?;
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: no model file at {} (set AGENTLOOP_LOCAL_MODEL)", path.display());
        None
    }
}
