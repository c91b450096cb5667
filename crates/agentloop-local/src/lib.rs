//! An in-process local model for agentloop: loads a GGUF file, runs it on the CPU and serves
//! it through the [`agentloop::provider::Provider`] seam, so an agent runs with no API key and
//! no network. The core crate does not depend on this one.

pub mod fetch;
