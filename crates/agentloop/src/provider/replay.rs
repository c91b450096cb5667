//! Record and replay: reproduce a run offline.
//!
//! - [`RecordingProvider`] wraps a provider and writes every request with its streamed
//!   response (each chunk with its time) to a JSONL cassette, one line per model call.
//! - [`ReplayProvider`] serves a cassette in order and fails loudly, with a diff, when a
//!   request differs from the recorded one (the prompt, the tools or the history changed).
//! - `agent::JournalReplay` replays a run from its journal alone, without calling the model
//!   or the tools, on a [`ReplayProvider`] that serves the journaled responses.
//!
//! A cassette holds the calls of one run (or of runs made one after the other): the replay
//! serves them in the order they were recorded.

use super::{
    ChunkStream, ModelRequest, ModelResponse, Provider, ProviderError, RetryPolicy, StreamChunk,
};
use futures::future::BoxFuture;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One recorded model call: a line of a cassette.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    /// The request as the provider received it.
    pub request: ModelRequest,
    /// The response, piece by piece.
    pub chunks: Vec<RecordedChunk>,
    /// Whether the response stream ended (`false`: the call was cancelled midway).
    pub complete: bool,
}

/// One piece of a recorded response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedChunk {
    /// Milliseconds after the request was sent.
    pub at_ms: u64,
    /// The chunk, or the error the stream ended with.
    #[serde(flatten)]
    pub item: Recorded,
}

/// A chunk or an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recorded {
    /// A stream chunk.
    Chunk(StreamChunk),
    /// The error the stream failed with.
    Error(ProviderError),
}

/// A cassette or journal could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The file could not be read or written.
    #[error("cassette {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// A line is not a recorded interaction.
    #[error("cassette line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The journal cannot be replayed.
    #[error("the journal cannot be replayed: {0}")]
    Journal(String),
}

/// Wraps a provider and records every call to a JSONL cassette. Each call's line is written
/// (a small blocking write) when its response stream ends or is dropped. A
/// [`complete`](Provider::complete) call is the inner provider's `complete`, recorded as the
/// chunks of the whole response (all at the time it arrived); every other [`Provider`] method
/// is the inner provider's.
pub struct RecordingProvider<P> {
    inner: P,
    path: PathBuf,
    file: Arc<Mutex<std::fs::File>>,
}

impl<P> std::fmt::Debug for RecordingProvider<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingProvider").field("path", &self.path).finish()
    }
}

impl<P: Provider> RecordingProvider<P> {
    /// Records to `path`, replacing the file.
    pub fn create(inner: P, path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        Self::open(inner, path.as_ref(), false)
    }

    /// Records to `path`, after the calls it holds already.
    pub fn append(inner: P, path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        Self::open(inner, path.as_ref(), true)
    }

    fn open(inner: P, path: &Path, append: bool) -> Result<Self, ReplayError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(path)
            .map_err(|e| io_error(path, e))?;
        Ok(Self { inner, path: path.to_path_buf(), file: Arc::new(Mutex::new(file)) })
    }

    /// The cassette file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn io_error(path: &Path, error: impl std::fmt::Display) -> ReplayError {
    ReplayError::Io { path: path.display().to_string(), message: error.to_string() }
}

fn millis_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Writes its interaction when dropped (at the end of the stream, or when it is cancelled).
struct Tape {
    file: Arc<Mutex<std::fs::File>>,
    interaction: Interaction,
}

impl Drop for Tape {
    fn drop(&mut self) {
        let line = match serde_json::to_string(&self.interaction) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "recording: the interaction is not serializable");
                return;
            }
        };
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = writeln!(file, "{line}") {
            tracing::error!(%error, "recording: the cassette could not be written");
        }
    }
}

impl<P: Provider> Provider for RecordingProvider<P> {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let started = Instant::now();
        let mut inner = self.inner.stream(request.clone());
        let mut tape = Tape {
            file: self.file.clone(),
            interaction: Interaction { request, chunks: Vec::new(), complete: false },
        };
        Box::pin(async_stream::stream! {
            while let Some(item) = inner.next().await {
                let recorded = match &item {
                    Ok(chunk) => Recorded::Chunk(chunk.clone()),
                    Err(error) => Recorded::Error(error.clone()),
                };
                tape.interaction.chunks.push(RecordedChunk { at_ms: millis_since(started), item: recorded });
                let failed = item.is_err();
                yield item;
                if failed {
                    break;
                }
            }
            tape.interaction.complete = true;
            drop(tape);
        })
    }

    fn complete(
        &self,
        request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        let started = Instant::now();
        let whole = self.inner.complete(request.clone());
        let mut tape = Tape {
            file: self.file.clone(),
            interaction: Interaction { request, chunks: Vec::new(), complete: false },
        };
        Box::pin(async move {
            let response = whole.await;
            let at_ms = millis_since(started);
            let recorded: Vec<Recorded> = match &response {
                Ok(response) => super::sse::response_chunks(response.clone())
                    .into_iter()
                    .map(Recorded::Chunk)
                    .collect(),
                Err(error) => vec![Recorded::Error(error.clone())],
            };
            tape.interaction.chunks =
                recorded.into_iter().map(|item| RecordedChunk { at_ms, item }).collect();
            tape.interaction.complete = true;
            drop(tape);
            response
        })
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn streams(&self) -> bool {
        self.inner.streams()
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        self.inner.retry_policy()
    }

    fn family(&self) -> &str {
        self.inner.family()
    }

    fn supports_tools(&self) -> bool {
        self.inner.supports_tools()
    }

    fn native_output(&self, with_tools: bool) -> bool {
        self.inner.native_output(with_tools)
    }
    fn secrets(&self) -> super::secrets::Secrets {
        self.inner.secrets()
    }
}

/// Serves a cassette: the n-th request gets the n-th recorded response, if the request is the
/// recorded one; otherwise the call fails with a [`ProviderError::Other`] that lists what
/// changed.
#[derive(Debug)]
pub struct ReplayProvider {
    interactions: Vec<Interaction>,
    next: AtomicUsize,
    timing: bool,
    /// Compare each request with the recorded one (a journal replay has no requests).
    check: bool,
}

impl ReplayProvider {
    /// Serves these interactions.
    pub fn new(interactions: Vec<Interaction>) -> Self {
        Self { interactions, next: AtomicUsize::new(0), timing: false, check: true }
    }

    /// Reads a cassette file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ReplayError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
        Self::from_jsonl(&text)
    }

    /// Reads a cassette's text.
    pub fn from_jsonl(text: &str) -> Result<Self, ReplayError> {
        let interactions = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(index, line)| {
                serde_json::from_str(line)
                    .map_err(|e| ReplayError::Parse { line: index + 1, message: e.to_string() })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self::new(interactions))
    }

    /// Waits as long as the recording did before each chunk (default: no waiting).
    pub fn with_timing(mut self, timing: bool) -> Self {
        self.timing = timing;
        self
    }

    /// The recorded interactions.
    pub fn interactions(&self) -> &[Interaction] {
        &self.interactions
    }

    /// How many recorded calls were not served yet.
    pub fn remaining(&self) -> usize {
        self.interactions.len().saturating_sub(self.next.load(Ordering::SeqCst))
    }

    /// Serves these responses (each its chunks, or the error the call failed with) in order,
    /// whatever the requests: a journal holds no requests to compare.
    pub(crate) fn responses(responses: &[Result<Vec<StreamChunk>, ProviderError>]) -> Self {
        let interactions = responses
            .iter()
            .map(|response| Interaction {
                request: ModelRequest::default(),
                chunks: match response {
                    Ok(chunks) => chunks
                        .iter()
                        .map(|c| RecordedChunk { at_ms: 0, item: Recorded::Chunk(c.clone()) })
                        .collect(),
                    Err(error) => {
                        vec![RecordedChunk { at_ms: 0, item: Recorded::Error(error.clone()) }]
                    }
                },
                complete: true,
            })
            .collect();
        Self { check: false, ..Self::new(interactions) }
    }
}

fn fail(message: String) -> ChunkStream {
    Box::pin(futures::stream::once(async move { Err(ProviderError::Other { message }) }))
}

impl Provider for ReplayProvider {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        let Some(recorded) = self.interactions.get(index) else {
            return fail(format!(
                "replay: request {} was not recorded (the cassette has {})",
                index + 1,
                self.interactions.len()
            ));
        };
        let diff = if self.check {
            match (serde_json::to_value(&request), serde_json::to_value(&recorded.request)) {
                (Ok(got), Ok(want)) => json_diff(&want, &got),
                (Err(e), _) | (_, Err(e)) => vec![format!("the request is not serializable: {e}")],
            }
        } else {
            Vec::new()
        };
        if !diff.is_empty() {
            return fail(format!(
                "replay: request {} differs from the cassette:\n{}",
                index + 1,
                diff.join("\n")
            ));
        }
        let chunks = recorded.chunks.clone();
        let timing = self.timing;
        Box::pin(async_stream::stream! {
            let started = tokio::time::Instant::now();
            for chunk in chunks {
                if timing {
                    tokio::time::sleep_until(started + Duration::from_millis(chunk.at_ms)).await;
                }
                match chunk.item {
                    Recorded::Chunk(chunk) => yield Ok(chunk),
                    Recorded::Error(error) => {
                        yield Err(error);
                        return;
                    }
                }
            }
        })
    }

    fn family(&self) -> &str {
        "replay"
    }

    fn name(&self) -> &str {
        "replay"
    }
}

/// At most this many differences are listed.
const MAX_DIFFS: usize = 20;

/// The differences between a recorded value and a new one, as `path: recorded … ≠ now …`
/// lines (at most [`MAX_DIFFS`], then a count).
pub fn json_diff(recorded: &Value, now: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_at("", recorded, now, &mut out);
    if out.len() > MAX_DIFFS {
        let more = out.len() - MAX_DIFFS;
        out.truncate(MAX_DIFFS);
        out.push(format!("… and {more} more differences"));
    }
    out
}

fn short(value: Option<&Value>) -> String {
    let Some(value) = value else { return "(missing)".into() };
    let text = crate::canonical::to_string(value);
    match text.char_indices().nth(120) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

fn diff_at(path: &str, recorded: &Value, now: &Value, out: &mut Vec<String>) {
    match (recorded, now) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let here = format!("{path}/{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff_at(&here, x, y, out),
                    (x, y) => out.push(format!("{here}: recorded {} ≠ now {}", short(x), short(y))),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for index in 0..a.len().max(b.len()) {
                let here = format!("{path}/{index}");
                match (a.get(index), b.get(index)) {
                    (Some(x), Some(y)) => diff_at(&here, x, y, out),
                    (x, y) => out.push(format!("{here}: recorded {} ≠ now {}", short(x), short(y))),
                }
            }
        }
        (a, b) if a != b => {
            let here = if path.is_empty() { "/" } else { path };
            out.push(format!("{here}: recorded {} ≠ now {}", short(Some(a)), short(Some(b))));
        }
        _ => {}
    }
}
