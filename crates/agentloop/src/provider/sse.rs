//! Server-sent events: bytes → events (`parse.rs`) → [`StreamChunk`]s through a format's
//! [`StreamDecoder`], with an idle timeout between bytes.

mod parse;

use super::wire::StreamDecoder;
use super::{ChunkStream, ModelResponse, ProviderError, StreamChunk};
use crate::message::Part;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use parse::{NotUtf8, SseParser};
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Sleep;

/// Decodes a byte stream of server-sent events with `decoder`.
///
/// - No byte for `idle_timeout` → [`ProviderError::Timeout`].
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
    chunk_stream_with_timer(bytes, idle_timeout, timer, decoder, map_err)
}

/// [`chunk_stream`] timed by `timer`, a timer the caller may have used already (the HTTP
/// provider's, for the response headers); it is pushed back to `idle_timeout` before each
/// read.
pub(crate) fn chunk_stream_with_timer<S, E, F>(
    bytes: S,
    idle_timeout: Duration,
    timer: Pin<Box<Sleep>>,
    mut decoder: Box<dyn StreamDecoder>,
    map_err: F,
) -> ChunkStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Send + 'static,
    F: Fn(E) -> ProviderError + Send + 'static,
{
    Box::pin(async_stream::stream! {
        let mut bytes = std::pin::pin!(bytes);
        // One timer for the whole stream, pushed back before each read (a later deadline
        // is an atomic update of the registered timer, not a new one).
        let mut idle = timer;
        let mut parser = SseParser::default();
        let mut out = Vec::new();
        loop {
            // Every event complete in what was received, then more bytes.
            while let Some(event) = parser.next_event() {
                let result = match event {
                    Ok(()) => decoder.decode(parser.name(), parser.data(), &mut out),
                    Err(NotUtf8(bytes)) => Err(not_utf8(&bytes)),
                };
                for chunk in out.drain(..) {
                    yield Ok(chunk);
                }
                if let Err(error) = result {
                    yield Err(error);
                    return;
                }
            }
            idle.as_mut().reset(tokio::time::Instant::now() + idle_timeout);
            let next = tokio::select! {
                biased;
                next = bytes.next() => Some(next),
                () = &mut idle => None,
            };
            match next {
                Some(Some(Ok(received))) => parser.push(&received),
                Some(None) => {
                    if let Err(NotUtf8(bytes)) = parser.finish() {
                        yield Err(not_utf8(&bytes));
                        return;
                    }
                    let finished = decoder.finish(&mut out);
                    for chunk in out.drain(..) {
                        yield Ok(chunk);
                    }
                    if let Err(error) = finished {
                        yield Err(error);
                    }
                    return;
                }
                Some(Some(Err(error))) => {
                    yield Err(map_err(error));
                    return;
                }
                None => {
                    yield Err(ProviderError::Timeout {
                        message: format!("the stream was idle for {idle_timeout:?}"),
                    });
                    return;
                }
            }
        }
    })
}

fn not_utf8(bytes: &[u8]) -> ProviderError {
    ProviderError::protocol("the event stream is not valid UTF-8", &String::from_utf8_lossy(bytes))
}

/// A whole response as the chunks that stream it (for a server that answered a streamed
/// request with one JSON body).
pub fn response_chunks(response: ModelResponse) -> Vec<StreamChunk> {
    let mut chunks = Vec::new();
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
            Part::Image { .. } | Part::File { .. } | Part::ToolResult(_) => {}
        }
    }
    chunks.push(StreamChunk::Usage { usage: response.usage });
    chunks.push(StreamChunk::Finish { reason: response.finish_reason });
    chunks
}

#[cfg(test)]
mod tests;
