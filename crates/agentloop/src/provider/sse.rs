//! Server-sent events: bytes → events (`parse.rs`) → [`StreamChunk`]s through a format's
//! [`StreamDecoder`], under [`StreamLimits`]: an idle timeout between events (bytes that
//! never complete an event do not keep a stream alive), an overall deadline, and size limits
//! on a line, an event and the whole response.

mod parse;

use super::wire::StreamDecoder;
use super::{ChunkStream, ModelResponse, ProviderError, StreamChunk};
use crate::message::Part;
use bytes::Bytes;
use futures::Stream;
use parse::{SseError, SseParser};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;

/// The bounds of one streamed response (see [`HttpConfig::stream_limits`](super::http::HttpConfig::stream_limits)).
/// Each one exceeded ends the stream with an error that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// The longest line, in bytes (default 32 MiB): [`ProviderError::Protocol`].
    pub max_line_bytes: usize,
    /// The largest event's data, in bytes (default 32 MiB): [`ProviderError::Protocol`].
    pub max_event_bytes: usize,
    /// The largest response, in bytes (default 256 MiB): [`ProviderError::Protocol`].
    pub max_response_bytes: usize,
    /// How long a stream may go on in all (default 30 min): [`ProviderError::Timeout`].
    pub max_duration: Duration,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            max_line_bytes: 32 << 20,
            max_event_bytes: 32 << 20,
            max_response_bytes: 256 << 20,
            max_duration: Duration::from_secs(30 * 60),
        }
    }
}

/// Decodes a byte stream of server-sent events with `decoder`, under the default
/// [`StreamLimits`].
///
/// - No complete event for `idle_timeout` → [`ProviderError::Timeout`] (bytes that do not
///   complete an event do not count: a server trickling a byte a second times out).
/// - A transport error (the connection dropped) → `map_err` of it (the HTTP provider maps
///   it to [`ProviderError::Network`]).
/// - Bytes that are not UTF-8 or not SSE → [`ProviderError::Protocol`] with an excerpt; what
///   the decoder rejects → its error.
/// - The end of the bytes → the decoder's [`finish`](StreamDecoder::finish) (which fails
///   when the stream ended before its terminal event).
///
/// The stream ends after the first error.
pub fn chunk_stream<S, E, F>(
    bytes: S,
    idle_timeout: Duration,
    decoder: Box<dyn StreamDecoder>,
    map_err: F,
) -> ChunkStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Send + 'static,
    F: Fn(E) -> ProviderError + Send + 'static,
{
    let timer = Box::pin(tokio::time::sleep(idle_timeout));
    let limits = StreamLimits::default();
    chunk_stream_with_timer(Box::pin(bytes), idle_timeout, limits, timer, decoder, map_err)
}

/// [`chunk_stream`] under `limits`, timed by `timer`, a timer the caller may have used
/// already (the HTTP provider's, for the response headers); it is pushed back to
/// `idle_timeout` at the start and after each event.
pub(crate) fn chunk_stream_with_timer<S, E, F>(
    bytes: S,
    idle_timeout: Duration,
    limits: StreamLimits,
    timer: Pin<Box<Sleep>>,
    decoder: Box<dyn StreamDecoder>,
    map_err: F,
) -> ChunkStream
where
    S: Stream<Item = Result<Bytes, E>> + Unpin + Send + 'static,
    E: Send + 'static,
    F: Fn(E) -> ProviderError + Send + 'static,
{
    Box::pin(SseChunks {
        bytes,
        idle: timer,
        idle_timeout,
        waiting: false,
        parser: SseParser::new(limits.max_line_bytes, limits.max_event_bytes),
        limits,
        received: 0,
        deadline: tokio::time::Instant::now() + limits.max_duration,
        decoder,
        decoded: Vec::new(),
        error: None,
        done: false,
        map_err,
    })
}

/// The stream [`chunk_stream_with_timer`] returns: a plain state machine (the chunks of a
/// response pass through no generator).
struct SseChunks<S, F> {
    bytes: S,
    /// One timer for the whole stream, pushed back when a read starts (a later deadline is
    /// an update of the registered timer, not a new one).
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    /// Waiting for an event (the idle deadline is set).
    waiting: bool,
    parser: SseParser,
    limits: StreamLimits,
    /// Bytes received so far.
    received: usize,
    /// When the stream has gone on too long.
    deadline: tokio::time::Instant,
    decoder: Box<dyn StreamDecoder>,
    /// What the decoder made of the last event, last chunk first: handed out from the end,
    /// then `error`, then the end. The decoder writes to it only once it is empty again.
    decoded: Vec<StreamChunk>,
    error: Option<ProviderError>,
    done: bool,
    map_err: F,
}

// Nothing is pinned in place: the byte stream is `Unpin`, the timer is boxed, and `map_err`
// is only called through a shared reference.
impl<S: Unpin, F> Unpin for SseChunks<S, F> {}

impl<S, F> SseChunks<S, F> {
    /// Queues what the decoder made, then `result`'s error (which ends the stream).
    fn take_decoded(&mut self, result: Result<(), ProviderError>) {
        self.decoded.reverse();
        if let Err(error) = result {
            self.fail(error);
        }
    }

    fn fail(&mut self, error: ProviderError) {
        self.error = Some(error);
        self.done = true;
    }

    /// Hands what the parser found to the decoder: an event (its output goes to `decoded`),
    /// or the parser's error.
    fn decode(&mut self, parsed: Result<(), SseError>) -> Result<(), ProviderError> {
        match parsed {
            Ok(()) => {
                self.decoder.decode(self.parser.name(), self.parser.data(), &mut self.decoded)
            }
            Err(error) => Err(sse_error(error, &self.limits)),
        }
    }
}

impl<S, E, F> Stream for SseChunks<S, F>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    F: Fn(E) -> ProviderError,
{
    type Item = Result<StreamChunk, ProviderError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(chunk) = this.decoded.pop() {
                return Poll::Ready(Some(Ok(chunk)));
            }
            if this.done {
                return Poll::Ready(this.error.take().map(Err));
            }
            // Every event complete in what was received, then more bytes.
            if let Some(event) = this.parser.next_event() {
                if event.is_ok() {
                    // An event: the idle deadline starts again.
                    this.waiting = false;
                }
                let result = this.decode(event);
                this.take_decoded(result);
                continue;
            }
            if !this.waiting {
                this.idle.as_mut().reset(tokio::time::Instant::now() + this.idle_timeout);
                this.waiting = true;
            }
            match Pin::new(&mut this.bytes).poll_next(cx) {
                Poll::Ready(Some(Ok(received))) => {
                    this.received = this.received.saturating_add(received.len());
                    if this.received > this.limits.max_response_bytes {
                        this.fail(ProviderError::Protocol {
                            message: format!(
                                "the streamed response is larger than its limit of {} bytes \
                                 (StreamLimits::max_response_bytes)",
                                this.limits.max_response_bytes
                            ),
                            excerpt: String::new(),
                        });
                    } else if tokio::time::Instant::now() >= this.deadline {
                        this.fail(ProviderError::Timeout {
                            message: format!(
                                "the stream went on for longer than its limit of {:?} \
                                 (StreamLimits::max_duration)",
                                this.limits.max_duration
                            ),
                        });
                    } else if let Some(result) =
                        this.decoder.decode_bytes(&received, &mut this.decoded)
                    {
                        // A binary framing (Bedrock's event stream): the decoder frames the
                        // bytes itself; what it completed starts the idle deadline again.
                        if !this.decoded.is_empty() {
                            this.waiting = false;
                        }
                        this.take_decoded(result);
                    } else {
                        this.parser.push(&received);
                    }
                }
                Poll::Ready(None) => {
                    if let Err(error) = this.parser.finish() {
                        this.done = true;
                        this.fail(sse_error(error, &this.limits));
                        continue;
                    }
                    // What the end of the bytes completes (a CR-only stream's last event).
                    let mut result = Ok(());
                    while let Some(event) = this.parser.next_event() {
                        result = this.decode(event);
                        if result.is_err() {
                            break;
                        }
                    }
                    this.done = true;
                    let result = result.and_then(|()| this.decoder.finish(&mut this.decoded));
                    this.take_decoded(result);
                }
                Poll::Ready(Some(Err(error))) => this.fail((this.map_err)(error)),
                Poll::Pending => {
                    if this.idle.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.fail(ProviderError::Timeout {
                        message: format!(
                            "the stream sent no event for {:?} (idle timeout)",
                            this.idle_timeout
                        ),
                    });
                }
            }
        }
    }
}

fn sse_error(error: SseError, limits: &StreamLimits) -> ProviderError {
    match error {
        SseError::NotUtf8(bytes) => ProviderError::protocol(
            "the event stream is not valid UTF-8",
            &String::from_utf8_lossy(&bytes),
        ),
        SseError::LineTooLong(size) => ProviderError::Protocol {
            message: format!(
                "an event-stream line of more than {size} bytes is over its limit of {} bytes \
                 (StreamLimits::max_line_bytes)",
                limits.max_line_bytes
            ),
            excerpt: String::new(),
        },
        SseError::EventTooLarge(size) => ProviderError::Protocol {
            message: format!(
                "an event of more than {size} bytes is over its limit of {} bytes \
                 (StreamLimits::max_event_bytes)",
                limits.max_event_bytes
            ),
            excerpt: String::new(),
        },
    }
}

/// A whole response as the chunks that stream it (for a server that answered a streamed
/// request with one JSON body).
pub fn response_chunks(response: ModelResponse) -> Vec<StreamChunk> {
    let mut chunks = Vec::new();
    if response.id.is_some() || response.model.is_some() {
        chunks.push(StreamChunk::ResponseInfo { id: response.id, model: response.model });
    }
    for part in response.message.content {
        match part {
            Part::Text { text } => chunks.push(StreamChunk::TextDelta { text }),
            Part::Reasoning(reasoning) => {
                if !reasoning.text.is_empty() {
                    chunks.push(StreamChunk::ReasoningDelta { text: reasoning.text });
                }
                chunks.push(StreamChunk::ReasoningEnd { opaque: reasoning.opaque });
            }
            Part::ToolCall(call) => {
                chunks.push(StreamChunk::ToolCallStart { id: call.id.clone(), name: call.name });
                if !call.arguments.is_empty() {
                    chunks.push(StreamChunk::ToolCallDelta {
                        id: call.id.clone(),
                        delta: call.arguments,
                    });
                }
                chunks.push(StreamChunk::ToolCallEnd { id: call.id });
            }
            Part::Opaque(opaque) => chunks.push(StreamChunk::Opaque {
                provider: opaque.provider,
                kind: opaque.kind,
                value: opaque.value,
            }),
            Part::Citation(citation) => chunks
                .push(StreamChunk::Citation { provider: citation.provider, value: citation.value }),
            Part::Image { .. } | Part::File { .. } | Part::ToolResult(_) => {}
        }
    }
    chunks.push(StreamChunk::Usage { usage: response.usage });
    chunks.push(StreamChunk::Finish { reason: response.finish_reason });
    chunks
}

#[cfg(test)]
mod tests;
