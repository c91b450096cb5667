//! Server-sent events of each provider format, through the SSE parser and the format's
//! stream decoder into a whole response: never a panic, and the same result whether the bytes
//! arrive whole or in pieces.
//!
//! Input: a format byte, a byte giving how many piece sizes follow, the sizes, then the body.
#![no_main]

use agentloop::message::Part;
use agentloop::provider::sse::chunk_stream;
use agentloop::provider::{ModelResponse, ProviderError, ResponseAssembler};
use agentloop_fuzz::{format, pieces};
use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fn decode(selector: u8, parts: Vec<Bytes>) -> Result<ModelResponse, ProviderError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    runtime.block_on(async move {
        let bytes = futures::stream::iter(parts.into_iter().map(Ok::<_, std::io::Error>));
        let mut stream =
            chunk_stream(bytes, Duration::from_secs(60), format(selector).stream_decoder(), |e| {
                ProviderError::Network { message: e.to_string() }
            });
        let mut assembler = ResponseAssembler::default();
        while let Some(chunk) = stream.next().await {
            assembler.push(chunk?)?;
        }
        Ok(assembler.finish())
    })
}

/// `response` with its tool call ids numbered in order (Gemini's wire has none: the decoder
/// makes random ones).
fn numbered(
    response: Result<ModelResponse, ProviderError>,
) -> Result<ModelResponse, ProviderError> {
    let mut response = response?;
    let calls = response.message.content.iter_mut().filter_map(|part| match part {
        Part::ToolCall(call) => Some(call),
        _ => None,
    });
    for (n, call) in calls.enumerate() {
        call.id = format!("call_{n}");
    }
    Ok(response)
}

fuzz_target!(|data: &[u8]| {
    let [selector, count, rest @ ..] = data else { return };
    let count = usize::from(*count % 8).min(rest.len());
    let (sizes, body) = rest.split_at(count);
    let whole = numbered(decode(*selector, vec![Bytes::copy_from_slice(body)]));
    let cut = pieces(body, sizes).into_iter().map(Bytes::copy_from_slice).collect();
    let in_pieces = numbered(decode(*selector, cut));
    assert_eq!(whole, in_pieces, "the same bytes in pieces decoded differently");
});
