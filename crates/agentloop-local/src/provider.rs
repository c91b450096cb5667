//! [`LocalModel`]: the [`Provider`] that runs a GGUF model in this process.

use crate::engine::{
    self, Architecture, Constraint, Dequantize, Finish, GenerationStats, Job, SamplingParams,
};
use crate::template::{chat_messages, ChatTemplate};
use crate::tokenizer::Tokenizer;
use crate::LocalError;
use agentloop::message::{FinishReason, Usage};
use agentloop::provider::{
    ChunkStream, ModelRequest, PromptedProtocol, Provider, StreamChunk, ToolChoice,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// How many generated pieces may wait in the channel before the generation thread blocks.
const CHANNEL_CAPACITY: usize = 64;

/// Settings of a [`LocalModel`]; [`build`](Self::build) loads the file.
#[derive(Debug, Clone)]
pub struct LocalModelBuilder {
    path: PathBuf,
    template: Option<String>,
    sampling: SamplingParams,
    max_tokens: usize,
    context_size: Option<usize>,
    constrain_tool_calls: bool,
    constrain_auto: bool,
    examples: Option<Examples>,
    dequantize: Dequantize,
    workspace: Option<PathBuf>,
}

/// Worked examples for the tools of a request: conversation turns put before its messages.
pub type Examples = fn(&[agentloop::tool::ToolSpec]) -> Vec<agentloop::message::Message>;

impl LocalModelBuilder {
    /// Whether the weights are expanded to `f32` at load time (default
    /// [`Dequantize::Auto`]: when they take at most 2 GiB so).
    pub fn dequantize(mut self, policy: Dequantize) -> Self {
        self.dequantize = policy;
        self
    }

    /// Uses this chat template (Jinja) instead of the file's `tokenizer.chat_template`.
    pub fn chat_template(mut self, template: impl Into<String>) -> Self {
        self.template = Some(template.into());
        self
    }

    /// Sampling temperature when the request sets none (default 0.2; 0 is greedy).
    pub fn temperature(mut self, temperature: f64) -> Self {
        self.sampling.temperature = temperature;
        self
    }

    /// Nucleus sampling threshold (default 0.9; `None` or 1 samples from all tokens).
    pub fn top_p(mut self, top_p: Option<f64>) -> Self {
        self.sampling.top_p = top_p;
        self
    }

    /// The random seed (default 42): the same request gives the same answer.
    pub fn seed(mut self, seed: u64) -> Self {
        self.sampling.seed = seed;
        self
    }

    /// Generated-token limit when the request sets none (default 512).
    pub fn max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The context window in tokens (default and maximum: the model's, at most 4096).
    pub fn context_size(mut self, tokens: usize) -> Self {
        self.context_size = Some(tokens);
        self
    }

    /// Whether a request whose tool choice is `required` or a named tool is forced, token by
    /// token, into a well-formed call of one of its tools (default true).
    pub fn constrain_tool_calls(mut self, yes: bool) -> Self {
        self.constrain_tool_calls = yes;
        self
    }

    /// Whether a request with tools whose tool choice is `auto` is constrained to either a
    /// well-formed call or a one-line text answer that starts with neither `<` nor
    /// whitespace, and a `none` request right after a tool result to that answer (default
    /// false; needs [`constrain_tool_calls`](Self::constrain_tool_calls)). Off by default:
    /// SmolLM2-135M, which tends to start an answer after a tool result with `<` (echoing the
    /// `<tool_response>` markup), then calls the tool again and again, since under the grammar
    /// a `<` can only begin a call. The default agent ([`crate::recipe`]) does not need it: it
    /// names the tool of every step.
    pub fn constrain_auto_tool_calls(mut self, yes: bool) -> Self {
        self.constrain_auto = yes;
        self
    }

    /// Worked examples put before the conversation of every request that offers tools, chosen
    /// for its tools (e.g. [`crate::recipe::examples`]); real turns in the model's own chat
    /// format teach a small model more than the same examples described in its instructions.
    /// They are part of the prompt, not of the agent's history (nothing is journaled), and
    /// the prefix cache keeps them evaluated.
    pub fn examples(mut self, examples: Examples) -> Self {
        self.examples = Some(examples);
        self
    }

    /// The directory the agent's file tools (`read_file`, `list_dir`) work in: a forced call
    /// of one names a path that exists there when the request is made (see
    /// [`LocalModel::with_workspace`]).
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// Checks the settings and loads the model (blocking: reads the whole file; in async code
    /// call it from `spawn_blocking`).
    pub fn build(self) -> Result<LocalModel, LocalError> {
        let SamplingParams { temperature, top_p, .. } = self.sampling;
        if !temperature.is_finite() || temperature < 0.0 {
            return Err(LocalError::Config(format!("temperature {temperature} is not >= 0")));
        }
        if let Some(p) = top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(LocalError::Config(format!("top_p {p} is not in (0, 1]")));
            }
        }
        if self.max_tokens == 0 {
            return Err(LocalError::Config("max_tokens is 0".into()));
        }
        if self.context_size.is_some_and(|n| n < 16) {
            return Err(LocalError::Config("context_size is below 16 tokens".into()));
        }
        let loaded = engine::load(&self.path, self.dequantize)?;
        let source = match self.template.or(loaded.chat_template) {
            Some(source) => source,
            None => {
                return Err(LocalError::Template(format!(
                "{} has no tokenizer.chat_template: set one with LocalModelBuilder::chat_template",
                self.path.display()
            )))
            }
        };
        let template = ChatTemplate::new(source, loaded.bos_text, loaded.eos_text)?;
        let context =
            self.context_size.map_or(loaded.context_length, |n| n.min(loaded.context_length));
        let name = self
            .path
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_else(|| "local".to_owned());
        let tokenizer = Arc::new(loaded.tokenizer);
        let vocab_size = loaded.vocab_size;
        let grammar = if self.constrain_tool_calls {
            Some(
                crate::constrain::ToolGrammar::new(Arc::clone(&tokenizer), vocab_size)?
                    .constrain_auto(self.constrain_auto),
            )
        } else {
            None
        };
        Ok(LocalModel {
            inner: Arc::new(Inner {
                weights: loaded.weights,
                tokenizer,
                template,
                protocol: PromptedProtocol::default(),
                context,
                add_bos: loaded.add_bos,
                sampling: self.sampling,
                max_tokens: self.max_tokens,
                grammar,
                examples: self.examples,
                active: Arc::new(AtomicUsize::new(0)),
                prefixes: crate::prefix::PrefixCache::default(),
            }),
            name,
            workspace: self.workspace.map(Arc::from),
        })
    }
}

struct Inner {
    weights: engine::Weights,
    tokenizer: Arc<Tokenizer>,
    template: ChatTemplate,
    protocol: PromptedProtocol,
    context: usize,
    add_bos: bool,
    sampling: SamplingParams,
    max_tokens: usize,
    grammar: Option<crate::constrain::ToolGrammar>,
    examples: Option<Examples>,
    active: Arc<AtomicUsize>,
    /// KV caches of recent prompt prefixes.
    prefixes: crate::prefix::PrefixCache,
}

/// A GGUF model run in this process on the CPU (llama architecture, byte-level BPE tokenizer).
///
/// Tools work through the prompt in the Hermes format ([`PromptedProtocol`]): the tool schemas
/// go into the system prompt, and calls are parsed out of the generated text, so the agent sees
/// ordinary tool-call chunks. When a request requires a tool call, the output is constrained to
/// a well-formed call whose arguments match the tool's schema.
///
/// Cloning is cheap (the weights are shared). Each request runs on its own thread with a fresh
/// KV cache; dropping the stream stops the generation within one token.
#[derive(Clone)]
pub struct LocalModel {
    inner: Arc<Inner>,
    name: String,
    /// The file tools' directory ([`LocalModel::with_workspace`]).
    workspace: Option<Arc<Path>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("context", &self.inner.context)
            .field("sampling", &self.inner.sampling)
            .finish_non_exhaustive()
    }
}

/// What the generation thread sends.
enum Message {
    Text(String),
    Done(GenerationStats),
    Failed(LocalError),
}

/// Decrements the active-generation count when the thread ends, however it ends.
struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LocalModel {
    /// Settings for the model at `path`.
    pub fn builder(path: impl AsRef<Path>) -> LocalModelBuilder {
        LocalModelBuilder {
            path: path.as_ref().to_owned(),
            template: None,
            sampling: SamplingParams { temperature: 0.2, top_p: Some(0.9), seed: 42 },
            max_tokens: 512,
            context_size: None,
            constrain_tool_calls: true,
            constrain_auto: false,
            examples: None,
            dequantize: Dequantize::Auto,
            workspace: None,
        }
    }

    /// This model (the weights shared) for an agent whose file tools (`read_file`,
    /// `list_dir`) work in `dir`: when a request forces a call of one, its `path` can only
    /// name what exists there at that moment (its files for `read_file`, its directories for
    /// `list_dir`; up to 200 entries, 3 levels deep, hidden ones left out; a larger directory
    /// is not enumerated). A small model otherwise makes paths up.
    pub fn with_workspace(&self, dir: impl AsRef<Path>) -> Self {
        Self { workspace: Some(Arc::from(dir.as_ref())), ..self.clone() }
    }

    /// Loads the model at `path` with the default settings.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, LocalError> {
        Self::builder(path).build()
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.inner.tokenizer
    }

    /// The context window in tokens.
    pub fn context_size(&self) -> usize {
        self.inner.context
    }

    /// How many generations are running now.
    pub fn active_generations(&self) -> usize {
        self.inner.active.load(Ordering::SeqCst)
    }

    /// The prompt text a request becomes (tools and tool calls written as text, the chat
    /// template applied, the generation prompt added).
    ///
    /// When tool calls are constrained, the prompt shows the tools as for `auto` whatever the
    /// request's tool choice: the grammar enforces the choice, and a prompt that is the same at
    /// every step of a turn lets the next step reuse the cached prefix.
    pub fn render_prompt(&self, request: &ModelRequest) -> Result<String, LocalError> {
        let mut request = request.clone();
        if self.inner.grammar.is_some() && !request.tools.is_empty() {
            request.tool_choice = ToolChoice::Auto;
        }
        if let Some(output) = &request.output {
            // The grammar holds the answer to the schema; the model is told what it is for.
            let note = format!(
                "Answer with only a JSON object that matches this JSON Schema:\n{}",
                output.wire_schema()
            );
            request.instructions = Some(match request.instructions.take() {
                Some(instructions) => format!("{instructions}\n\n{note}"),
                None => note,
            });
        }
        if let Some(examples) = self.inner.examples.filter(|_| !request.tools.is_empty()) {
            let mut messages = examples(&request.tools);
            messages.extend(request.messages.iter().cloned());
            request.messages = Arc::new(messages);
        }
        let request = self.inner.protocol.rewrite(request);
        let messages = chat_messages(&request)?;
        self.inner.template.render(&messages, None, true)
    }

    /// Continues a raw prompt (no chat template), blocking this thread: the generated text and
    /// what it took. For benchmarks and tests.
    pub fn complete_raw(
        &self,
        prompt: &str,
        max_tokens: usize,
    ) -> Result<(String, GenerationStats), LocalError> {
        let job = Job {
            prompt: self.inner.tokenizer.encode(prompt)?,
            cached: 0,
            max_tokens,
            sampling: self.inner.sampling,
            constraint: None,
        };
        let mut weights = self.inner.weights.clone();
        let mut text = String::new();
        let stats = engine::generate(
            &mut weights,
            &self.inner.tokenizer,
            job,
            self.inner.context,
            |piece| {
                text.push_str(&piece);
                true
            },
        )?;
        Ok((text, stats))
    }

    /// Prepares a request's job: the prompt tokens, the limits, the constraint.
    fn job(&self, request: ModelRequest) -> Result<Job, LocalError> {
        let constraint: Option<Box<dyn Constraint>> = match &self.inner.grammar {
            Some(grammar) => {
                grammar.constraint(&request, &self.inner.protocol, self.workspace.as_deref())?
            }
            None => None,
        };
        let mut sampling = self.inner.sampling;
        if let Some(temperature) = request.temperature {
            sampling.temperature = f64::from(temperature.max(0.0));
        }
        let max_tokens = request.max_tokens.map_or(self.inner.max_tokens, |n| n as usize);
        let prompt = self.render_prompt(&request)?;
        let mut tokens = self.inner.tokenizer.encode(&prompt)?;
        if let Some(bos) = self.inner.tokenizer.bos().filter(|_| self.inner.add_bos) {
            if tokens.first() != Some(&bos) {
                tokens.insert(0, bos);
            }
        }
        Ok(Job { prompt: tokens, cached: 0, max_tokens, sampling, constraint })
    }

    /// Starts the generation thread; the stream of its raw text.
    fn start(&self, request: ModelRequest) -> Result<ChunkStream, LocalError> {
        let mut job = self.job(request)?;
        let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
        let inner = Arc::clone(&self.inner);
        inner.active.fetch_add(1, Ordering::SeqCst);
        let guard = ActiveGuard(Arc::clone(&inner.active));
        std::thread::Builder::new()
            .name(format!("agentloop-local {}", self.name))
            .spawn(move || {
                let _guard = guard;
                // Llama-family networks run a prompt in batches from any position, so every
                // turn boundary is kept; Gemma 3 runs later tokens one by one, so only the last.
                let all = matches!(inner.weights.architecture(), Architecture::Llama);
                let result = crate::prefix::warm(
                    &inner.prefixes,
                    &inner.weights,
                    &inner.tokenizer,
                    &job.prompt,
                    all,
                )
                .and_then(|(mut weights, cached)| {
                    job.cached = cached;
                    engine::generate(&mut weights, &inner.tokenizer, job, inner.context, |piece| {
                        if piece.is_empty() {
                            !tx.is_closed()
                        } else {
                            tx.blocking_send(Message::Text(piece)).is_ok()
                        }
                    })
                });
                let last = match result {
                    Ok(stats) if stats.finish == Finish::Cancelled => return,
                    Ok(stats) => Message::Done(stats),
                    Err(error) => Message::Failed(error),
                };
                // Nobody may listen any more; nothing to do then.
                let _ = tx.blocking_send(last);
            })
            .map_err(|e| LocalError::Thread(e.to_string()))?;
        Ok(Box::pin(async_stream::stream! {
            let mut done = false;
            while let Some(message) = rx.recv().await {
                match message {
                    Message::Text(text) => yield Ok(StreamChunk::TextDelta { text }),
                    Message::Done(stats) => {
                        let usage = Usage {
                            input: stats.prompt_tokens as u64,
                            output: stats.completion_tokens as u64,
                            ..Usage::default()
                        };
                        yield Ok(StreamChunk::Usage { usage });
                        let reason = match stats.finish {
                            Finish::Length => FinishReason::Length,
                            Finish::Stop | Finish::Cancelled => FinishReason::Stop,
                        };
                        yield Ok(StreamChunk::Finish { reason });
                        done = true;
                    }
                    Message::Failed(error) => {
                        yield Err(error.into());
                        done = true;
                    }
                }
            }
            if !done {
                yield Err(LocalError::Thread("the generation thread ended without an answer".into()).into());
            }
        }))
    }
}

impl Provider for LocalModel {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let raw = match self.start(request) {
            Ok(stream) => stream,
            Err(error) => {
                let error = error.into();
                Box::pin(futures::stream::once(async move { Err(error) }))
            }
        };
        self.inner.protocol.parse_stream(raw)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn family(&self) -> &str {
        "local"
    }

    fn supports_tools(&self) -> bool {
        true
    }

    /// An answer without tools is decoded under a grammar compiled from the output schema;
    /// with tools, the run's final-answer tool is (its call forced by the tool grammar).
    fn native_output(&self, with_tools: bool) -> bool {
        !with_tools && self.inner.grammar.is_some()
    }
}

#[cfg(test)]
mod tests;
