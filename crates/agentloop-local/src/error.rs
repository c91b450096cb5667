//! [`LocalError`]: what can go wrong loading or running a local model.

use agentloop::provider::ProviderError;
use std::path::PathBuf;

/// An error from the local model: loading the file, reading its metadata, rendering the
/// prompt, tokenizing, or running the network.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The model file could not be opened or read.
    #[error("cannot read the model file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a GGUF file this crate can read.
    #[error("{path} is not a readable GGUF file: {message}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What the reader said.
        message: String,
    },
    /// The model's architecture is not one this crate runs.
    #[error("unsupported model architecture {0:?} (supported: \"llama\")")]
    UnsupportedArchitecture(String),
    /// The model's tokenizer is not one this crate implements.
    #[error("unsupported tokenizer: {0}")]
    UnsupportedTokenizer(String),
    /// A metadata key is missing or has the wrong type.
    #[error("GGUF metadata {key}: {message}")]
    Metadata {
        /// The key.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// The chat template does not compile or failed to render.
    #[error("chat template: {0}")]
    Template(String),
    /// The request cannot be put to this model (e.g. it holds images).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// Tokenizing or detokenizing failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The prompt does not fit the context window.
    #[error("the prompt has {prompt} tokens, the context holds {context} (with room for at least one generated token)")]
    ContextLength {
        /// Prompt tokens.
        prompt: usize,
        /// Context size.
        context: usize,
    },
    /// The network failed to run.
    #[error("model: {0}")]
    Model(String),
    /// The tool-call grammar could not be built or followed.
    #[error("constrained decoding: {0}")]
    Grammar(String),
    /// A builder setting is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The generation thread could not be started.
    #[error("cannot start the generation thread: {0}")]
    Thread(String),
}

impl LocalError {
    pub(crate) fn model(error: impl std::fmt::Display) -> Self {
        Self::Model(error.to_string())
    }
}

impl From<LocalError> for ProviderError {
    fn from(error: LocalError) -> Self {
        match error {
            LocalError::ContextLength { .. } => {
                ProviderError::ContextLengthExceeded { message: error.to_string() }
            }
            LocalError::InvalidRequest(_) | LocalError::Template(_) | LocalError::Tokenizer(_) => {
                ProviderError::InvalidRequest { message: error.to_string() }
            }
            other => ProviderError::Other { message: other.to_string() },
        }
    }
}
