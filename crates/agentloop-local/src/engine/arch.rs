//! The architectures the engine runs ([`Architecture`]) and their networks ([`Weights`]), on
//! candle's quantized implementations: `quantized_llama` (SmolLM2, Llama, Qwen2-style llama
//! GGUFs) and `quantized_gemma3` (Gemma 3).
//!
//! **The KV cache.** A request runs on a clone of the loaded weights (the tensors are shared,
//! the cache is not). The loaded original is never run, so a clone starts with an empty cache.
//! Llama also clears it explicitly ([`Weights::reset`]); candle's Gemma 3 has no
//! `clear_kv_cache`, and relies on that invariant (and on the fact that its forward pass at
//! position 0 replaces every layer's cache).
//!
//! **Gemma 3 in candle 0.11.1** has two limits the engine works around:
//! - the attention mask of a multi-token input at a position > 0 is built with mismatched
//!   types (`f32` zeros before a `u32` mask) and fails, so the prompt is evaluated in one
//!   pass from position 0 and later multi-token inputs (text a grammar forces) are fed one
//!   token at a time;
//! - the sliding window (512 tokens on five layers in six) is applied only within a
//!   multi-token input; a single generated token attends to the whole cache on every layer.
//!
//! Both make a long context costly or inexact, hence [`GEMMA3_MAX_CONTEXT`].

use crate::LocalError;
use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_gemma3, quantized_llama};
use std::io::{Read, Seek};

/// The context cap for Gemma 3 (the file says 32768). The prompt is one forward pass whose
/// attention scores take 4 heads × n² × 4 bytes, several copies alive at once: 256 MiB at
/// 4096 tokens, 1 GiB at 8192; and beyond the 512-token sliding window the generated tokens
/// are computed without it (see the module docs). 4096 is also the llama path's cap, and room
/// for an agent's tool schemas, a few turns and their tool results.
pub const GEMMA3_MAX_CONTEXT: usize = 4096;

/// Prompt tokens per forward pass for llama (bounds the attention matrix of a long prompt
/// and lets a cancelled request stop between chunks).
const LLAMA_PROMPT_CHUNK: usize = 256;

/// Gemma 3's chat template, for files that carry none (the Q4_K_M file the fetcher knows
/// has no `tokenizer.chat_template`).
const GEMMA3_TEMPLATE: &str = include_str!("gemma3_template.jinja");

/// A model architecture (`general.architecture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// `llama`: candle's `quantized_llama`.
    Llama,
    /// `gemma3`: candle's `quantized_gemma3`.
    Gemma3,
}

impl Architecture {
    /// The architecture called `name` in a GGUF file.
    pub fn from_gguf_name(name: &str) -> Result<Self, LocalError> {
        match name {
            "llama" => Ok(Self::Llama),
            "gemma3" => Ok(Self::Gemma3),
            other => Err(LocalError::UnsupportedArchitecture(other.to_owned())),
        }
    }

    /// The prefix of its metadata keys (`llama.context_length`).
    pub fn key_prefix(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Gemma3 => "gemma3",
        }
    }

    /// The longest context the engine runs it with.
    pub fn max_context(self) -> usize {
        match self {
            Self::Llama => quantized_llama::MAX_SEQ_LEN,
            Self::Gemma3 => GEMMA3_MAX_CONTEXT,
        }
    }

    /// Prompt tokens per forward pass.
    pub(crate) fn prompt_chunk(self) -> usize {
        match self {
            Self::Llama => LLAMA_PROMPT_CHUNK,
            // One pass: candle's Gemma 3 cannot take a second multi-token chunk.
            Self::Gemma3 => usize::MAX,
        }
    }

    /// The chat template used when the file has none.
    pub(crate) fn default_chat_template(self) -> Option<&'static str> {
        match self {
            Self::Llama => None,
            Self::Gemma3 => Some(GEMMA3_TEMPLATE),
        }
    }
}

/// A loaded network.
#[derive(Debug, Clone)]
pub(crate) enum Weights {
    /// A llama-family network.
    Llama(quantized_llama::ModelWeights),
    /// A Gemma 3 network.
    Gemma3(quantized_gemma3::ModelWeights),
}

impl Weights {
    /// Loads the network of `architecture` from a GGUF file's content.
    pub(crate) fn load<R: Read + Seek>(
        architecture: Architecture,
        content: gguf_file::Content,
        reader: &mut R,
    ) -> candle_core::Result<Self> {
        Ok(match architecture {
            Architecture::Llama => Self::Llama(quantized_llama::ModelWeights::from_gguf(
                content,
                reader,
                &Device::Cpu,
            )?),
            Architecture::Gemma3 => Self::Gemma3(quantized_gemma3::ModelWeights::from_gguf(
                content,
                reader,
                &Device::Cpu,
            )?),
        })
    }

    /// The architecture.
    pub(crate) fn architecture(&self) -> Architecture {
        match self {
            Self::Llama(_) => Architecture::Llama,
            Self::Gemma3(_) => Architecture::Gemma3,
        }
    }

    /// Readies a clone for a new generation: an empty KV cache. Llama clears it; a Gemma 3
    /// clone of the never-run original has an empty one already (see the module docs).
    pub(crate) fn reset(&mut self) {
        match self {
            Self::Llama(weights) => weights.clear_kv_cache(),
            Self::Gemma3(_) => {}
        }
    }

    /// Runs `tokens` at `position` and returns the logits after the last one (`[1, vocab]`).
    pub(crate) fn forward(
        &mut self,
        tokens: &[u32],
        position: usize,
    ) -> Result<Tensor, LocalError> {
        let run = |tokens: &[u32]| {
            Tensor::new(tokens, &Device::Cpu)
                .and_then(|t| t.unsqueeze(0))
                .map_err(LocalError::model)
        };
        match self {
            Self::Llama(weights) => {
                weights.forward(&run(tokens)?, position).map_err(LocalError::model)
            }
            Self::Gemma3(weights) if position == 0 || tokens.len() == 1 => {
                weights.forward(&run(tokens)?, position).map_err(LocalError::model)
            }
            Self::Gemma3(weights) => {
                // One token at a time (see the module docs).
                let mut logits = None;
                for (offset, &token) in tokens.iter().enumerate() {
                    logits = Some(
                        weights
                            .forward(&run(&[token])?, position + offset)
                            .map_err(LocalError::model)?,
                    );
                }
                logits.ok_or_else(|| LocalError::Model("no tokens to run".into()))
            }
        }
    }
}
