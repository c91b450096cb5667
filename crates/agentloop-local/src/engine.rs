//! The engine: loads a GGUF file (weights, tokenizer, chat template) and runs generation — the
//! prompt in chunks, then one token at a time, sampled with temperature / top-p from a seed,
//! optionally masked by a [`Constraint`], until a stop token, the token limit, the end of the
//! constraint, or the caller stops listening.
//!
//! The KV cache is not kept between requests: each generation starts from a fresh cache on a
//! cheap clone of the weights (the tensors are shared), so concurrent requests do not interfere.
//! The architectures and their networks are in [`Architecture`] / `arch`.

use crate::gguf::Metadata;
use crate::tokenizer::{Tokenizer, Utf8Stream};
use crate::LocalError;
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use std::path::Path;
use std::time::{Duration, Instant};

mod arch;
pub(crate) use arch::Weights;
pub use arch::{Architecture, GEMMA3_MAX_CONTEXT};

/// A loaded GGUF model.
pub(crate) struct Loaded {
    pub(crate) weights: Weights,
    pub(crate) tokenizer: Tokenizer,
    pub(crate) chat_template: Option<String>,
    pub(crate) context_length: usize,
    pub(crate) bos_text: String,
    pub(crate) eos_text: String,
    /// Rows of the output layer (the logits per step).
    pub(crate) vocab_size: usize,
    /// Whether prompts start with the BOS token (`tokenizer.ggml.add_bos_token`).
    pub(crate) add_bos: bool,
}

/// Whether the weights are expanded to `f32` at load time.
///
/// candle's CPU kernels for some quantized formats (Q4_1, Q5_0, Q5_1) are scalar, while its
/// `f32` matrix products use the CPU's vector units: expanding a small model's weights costs
/// memory (4 bytes a parameter) and buys several times the speed (SmolLM2-135M Q4_1 on two
/// cores: prompt 13 → ~250 tokens/s, generation 3 → ~15 tokens/s). The formats that have
/// vector kernels (Q4_0, Q8_0, the K-quants) gain less, and the larger matrices cost memory
/// bandwidth at every token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dequantize {
    /// Per architecture, what measured fastest: llama expands everything, Gemma 3 expands
    /// the scalar-kernel formats ([`Dequantize::ScalarFormats`]); either only when the
    /// expanded tensors take at most [`Dequantize::AUTO_LIMIT`] bytes.
    #[default]
    Auto,
    /// Always expand every tensor.
    Always,
    /// Expand only the tensors in formats candle has no vector kernel for (Q4_1, Q5_0, Q5_1).
    ScalarFormats,
    /// Keep the file's formats.
    Never,
}

impl Dequantize {
    /// The largest `f32` weight size [`Dequantize::Auto`] expands to: 2 GiB.
    pub const AUTO_LIMIT: u64 = 2 << 30;

    /// What [`Dequantize::Auto`] means for `architecture`.
    fn auto_for(architecture: Architecture) -> Self {
        match architecture {
            Architecture::Llama => Self::Always,
            Architecture::Gemma3 => Self::ScalarFormats,
        }
    }
}

/// Whether candle's CPU matrix product for `dtype` is scalar code.
fn has_scalar_kernel(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 | GgmlDType::Q8_1)
}

/// Reads a GGUF file: checks the architecture, builds the tokenizer, loads the weights.
pub(crate) fn load(path: &Path, dequantize: Dequantize) -> Result<Loaded, LocalError> {
    let io = |source| LocalError::Io { path: path.to_owned(), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let content = gguf_file::Content::read(&mut file)
        .map_err(|e| LocalError::Gguf { path: path.to_owned(), message: e.to_string() })?;
    let metadata = Metadata(&content.metadata);
    let architecture = Architecture::from_gguf_name(metadata.str("general.architecture")?)?;
    let prefix = architecture.key_prefix();
    let tokenizer = Tokenizer::from_metadata(&metadata)?;
    let chat_template = match metadata.opt_str("tokenizer.chat_template")? {
        Some(template) => Some(template.to_owned()),
        None => architecture.default_chat_template().map(str::to_owned),
    };
    let max_context = architecture.max_context();
    let trained =
        metadata.opt_u32(&format!("{prefix}.context_length"))?.map_or(max_context, |n| n as usize);
    let context_length = trained.min(max_context);
    let text = |id: Option<u32>| id.map(|id| tokenizer.decode(&[id])).unwrap_or_default();
    let bos_text = text(tokenizer.bos());
    let add_bos = metadata.opt_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(false);
    let eos_text = text(tokenizer.eos());
    let vocab_size = match metadata.opt_u32(&format!("{prefix}.vocab_size"))? {
        Some(n) => n as usize,
        None => content
            .tensor_infos
            .get("output.weight")
            .or_else(|| content.tensor_infos.get("token_embd.weight"))
            .and_then(|info| info.shape.dims().first().copied())
            .unwrap_or_else(|| tokenizer.vocab_size()),
    };
    let policy = match dequantize {
        Dequantize::Auto => Dequantize::auto_for(architecture),
        other => other,
    };
    let expand = |dtype: GgmlDType| match policy {
        Dequantize::Always | Dequantize::Auto => dtype != GgmlDType::F32,
        Dequantize::ScalarFormats => has_scalar_kernel(dtype),
        Dequantize::Never => false,
    };
    let expanded_bytes: u64 = content
        .tensor_infos
        .values()
        .filter(|info| expand(info.ggml_dtype))
        .map(|info| info.shape.elem_count() as u64 * 4)
        .sum();
    let any = expanded_bytes > 0
        && (dequantize != Dequantize::Auto || expanded_bytes <= Dequantize::AUTO_LIMIT);
    let weights_error = |e: candle_core::Error| LocalError::Gguf {
        path: path.to_owned(),
        message: format!("cannot load the weights: {e}"),
    };
    let weights = if any {
        let (content, mut expanded) =
            expand_to_f32(content, &mut file, expand).map_err(weights_error)?;
        Weights::load(architecture, content, &mut expanded)
    } else {
        Weights::load(architecture, content, &mut file)
    }
    .map_err(weights_error)?;
    Ok(Loaded {
        weights,
        tokenizer,
        chat_template,
        context_length,
        bos_text,
        eos_text,
        add_bos,
        vocab_size,
    })
}

/// The same GGUF in memory with the tensors `expand` picks (by format) expanded to `f32`
/// (candle's loader keeps `f32` tensors as plain matrices).
fn expand_to_f32(
    content: gguf_file::Content,
    file: &mut std::fs::File,
    expand: impl Fn(GgmlDType) -> bool,
) -> candle_core::Result<(gguf_file::Content, std::io::Cursor<Vec<u8>>)> {
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(file, name, &Device::Cpu)?;
        let tensor = if expand(tensor.dtype()) {
            QTensor::quantize(&tensor.dequantize(&Device::Cpu)?, GgmlDType::F32)?
        } else {
            tensor
        };
        tensors.push((name.as_str(), tensor));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> =
        content.metadata.iter().map(|(key, value)| (key.as_str(), value)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(name, t)| (*name, t)).collect();
    let mut buffer = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut buffer, &metadata, &tensors)?;
    buffer.set_position(0);
    let expanded = gguf_file::Content::read(&mut buffer)?;
    Ok((expanded, buffer))
}

/// How tokens are picked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; 0 picks the most likely token (greedy).
    pub temperature: f64,
    /// Nucleus sampling: keep the smallest set of tokens whose probability reaches this.
    pub top_p: Option<f64>,
    /// The random seed: the same seed, prompt and settings give the same tokens.
    pub seed: u64,
}

/// Picks tokens from logits, seeded.
pub(crate) struct Sampler {
    processor: LogitsProcessor,
}

impl Sampler {
    pub(crate) fn new(params: SamplingParams) -> Self {
        let sampling = if params.temperature <= 1e-7 {
            Sampling::ArgMax
        } else {
            match params.top_p {
                Some(p) if p > 0.0 && p < 1.0 => {
                    Sampling::TopP { p, temperature: params.temperature }
                }
                _ => Sampling::All { temperature: params.temperature },
            }
        };
        Self { processor: LogitsProcessor::from_sampling(params.seed, sampling) }
    }

    /// Picks a token; tokens whose `allowed` entry is false are never picked.
    pub(crate) fn sample(
        &mut self,
        mut logits: Vec<f32>,
        allowed: Option<&dyn Fn(u32) -> bool>,
    ) -> Result<u32, LocalError> {
        if let Some(allowed) = allowed {
            let mut any = false;
            for (id, logit) in (0u32..).zip(logits.iter_mut()) {
                if allowed(id) {
                    any = true;
                } else {
                    *logit = f32::NEG_INFINITY;
                }
            }
            if !any {
                return Err(LocalError::Grammar("no token is allowed".into()));
            }
        }
        let len = logits.len();
        let tensor = Tensor::from_vec(logits, len, &Device::Cpu).map_err(LocalError::model)?;
        self.processor.sample(&tensor).map_err(LocalError::model)
    }
}

/// Restricts which tokens may come next (constrained decoding).
pub(crate) trait Constraint: Send {
    /// Whether each token may come next (`None`: any token).
    fn mask(&mut self) -> Result<Option<Vec<bool>>, LocalError>;
    /// Tokens the constraint forces next (already recorded), or none.
    fn forced(&mut self) -> Result<Vec<u32>, LocalError>;
    /// Records the token that was picked.
    fn commit(&mut self, token: u32) -> Result<(), LocalError>;
    /// Whether the constrained output is complete (generation ends).
    fn is_finished(&self) -> bool;
}

/// `step` of `constraint`, if there is one. A constraint that fails (a grammar past
/// llguidance's lexer bounds: "too many expressions constructed") is dropped with a warning
/// and the rest of the output is unconstrained: the run goes on — a malformed call becomes a
/// tool error the model sees — instead of failing.
pub(crate) fn constrained<T>(
    constraint: &mut Option<Box<dyn Constraint>>,
    step: impl FnOnce(&mut dyn Constraint) -> Result<T, LocalError>,
) -> Option<T> {
    match step(constraint.as_deref_mut()?) {
        Ok(value) => Some(value),
        Err(error) => {
            tracing::warn!(%error, "constrained decoding failed: the rest of the output is free");
            *constraint = None;
            None
        }
    }
}

/// One generation.
pub(crate) struct Job {
    pub(crate) prompt: Vec<u32>,
    /// How many tokens of `prompt` the weights' KV cache holds already (a cached prefix,
    /// [`prefill`]); fewer than the prompt's length.
    pub(crate) cached: usize,
    pub(crate) max_tokens: usize,
    pub(crate) sampling: SamplingParams,
    pub(crate) constraint: Option<Box<dyn Constraint>>,
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// A stop token, or the end of a constrained output.
    Stop,
    /// The token limit.
    Length,
    /// The caller stopped listening.
    Cancelled,
}

/// What a generation did and how long it took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenerationStats {
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Generated tokens (the stop token not included).
    pub completion_tokens: usize,
    /// Why it ended.
    pub finish: Finish,
    /// Time to evaluate the prompt.
    pub prompt_eval: Duration,
    /// Time from the start to the first generated token.
    pub first_token: Duration,
    /// Total time.
    pub total: Duration,
}

impl GenerationStats {
    /// Prompt tokens per second.
    pub fn prompt_tokens_per_second(&self) -> f64 {
        per_second(self.prompt_tokens, self.prompt_eval)
    }

    /// Generated tokens per second, after the first one.
    pub fn generation_tokens_per_second(&self) -> f64 {
        per_second(
            self.completion_tokens.saturating_sub(1),
            self.total.saturating_sub(self.first_token),
        )
    }
}

fn per_second(count: usize, time: Duration) -> f64 {
    if time.is_zero() {
        0.0
    } else {
        count as f64 / time.as_secs_f64()
    }
}

/// Feeds `tokens` at `position` into the weights' KV cache (from an empty cache when
/// `position` is 0), to be continued by a [`generate`] whose [`Job::cached`] is
/// `position + tokens.len()`.
pub(crate) fn prefill(
    weights: &mut Weights,
    tokens: &[u32],
    position: usize,
) -> Result<(), LocalError> {
    if position == 0 {
        weights.reset();
    }
    let chunk_size = weights.architecture().prompt_chunk();
    for (index, chunk) in tokens.chunks(chunk_size).enumerate() {
        weights.forward(chunk, position + index * chunk_size)?;
    }
    Ok(())
}

/// Runs a generation on this thread. `emit` gets each piece of complete text (an empty piece
/// only asks) and returns false when nobody listens any more: the generation then stops.
pub(crate) fn generate(
    weights: &mut Weights,
    tokenizer: &Tokenizer,
    mut job: Job,
    context_length: usize,
    mut emit: impl FnMut(String) -> bool,
) -> Result<GenerationStats, LocalError> {
    let start = Instant::now();
    let prompt_tokens = job.prompt.len();
    if prompt_tokens == 0 {
        return Err(LocalError::InvalidRequest("the prompt is empty".into()));
    }
    if prompt_tokens >= context_length {
        return Err(LocalError::ContextLength { prompt: prompt_tokens, context: context_length });
    }
    let max_tokens = job.max_tokens.min(context_length - prompt_tokens);
    let mut stats = GenerationStats {
        prompt_tokens,
        completion_tokens: 0,
        finish: Finish::Stop,
        prompt_eval: Duration::ZERO,
        first_token: Duration::ZERO,
        total: Duration::ZERO,
    };
    if job.cached >= prompt_tokens {
        return Err(LocalError::InvalidRequest("the whole prompt is cached".into()));
    }
    if job.cached == 0 {
        weights.reset();
    }
    let chunk_size = weights.architecture().prompt_chunk();
    let mut logits = None;
    for (index, chunk) in job.prompt[job.cached..].chunks(chunk_size).enumerate() {
        logits = Some(weights.forward(chunk, job.cached + index * chunk_size)?);
        if index > 0 && !emit(String::new()) {
            stats.finish = Finish::Cancelled;
            stats.total = start.elapsed();
            return Ok(stats);
        }
    }
    stats.prompt_eval = start.elapsed();
    let mut sampler = Sampler::new(job.sampling);
    let mut text = Utf8Stream::default();
    let mut position = prompt_tokens;
    let mut finish = Finish::Length;
    'generation: while stats.completion_tokens < max_tokens {
        // Text the constraint forces is fed as whole tokens, without sampling.
        let mut tokens = constrained(&mut job.constraint, |c| c.forced()).unwrap_or_default();
        tokens.truncate(max_tokens - stats.completion_tokens);
        if tokens.is_empty() {
            let Some(current) = logits.take() else { break };
            let values: Vec<f32> = current
                .squeeze(0)
                .and_then(|t| t.to_dtype(candle_core::DType::F32))
                .and_then(|t| t.to_vec1())
                .map_err(LocalError::model)?;
            let mask = constrained(&mut job.constraint, |c| c.mask()).flatten();
            let allowed = mask
                .as_ref()
                .map(|mask| move |id: u32| mask.get(id as usize).copied().unwrap_or(false));
            let token =
                sampler.sample(values, allowed.as_ref().map(|f| f as &dyn Fn(u32) -> bool))?;
            constrained(&mut job.constraint, |c| c.commit(token));
            tokens.push(token);
        }
        if stats.completion_tokens == 0 {
            stats.first_token = start.elapsed();
        }
        for &token in &tokens {
            if tokenizer.stop_tokens().contains(&token) {
                finish = Finish::Stop;
                break 'generation;
            }
            stats.completion_tokens += 1;
            let piece = text.push(tokenizer.token_bytes(token));
            if !emit(piece) {
                finish = Finish::Cancelled;
                break 'generation;
            }
        }
        if job.constraint.as_ref().is_some_and(|c| c.is_finished()) {
            finish = Finish::Stop;
            break;
        }
        if stats.completion_tokens >= max_tokens {
            break;
        }
        logits = Some(weights.forward(&tokens, position)?);
        position += tokens.len();
    }
    let rest = text.finish();
    if !rest.is_empty() && finish != Finish::Cancelled {
        emit(rest);
    }
    stats.finish = finish;
    stats.total = start.elapsed();
    Ok(stats)
}

#[cfg(test)]
mod tests;
