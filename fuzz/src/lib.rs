//! What the fuzz targets share: the provider wire formats, and cutting an input into pieces
//! at places the input itself chooses (a parser must give the same result however its input
//! arrives).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::provider::anthropic::Anthropic;
use agentloop::provider::gemini::Gemini;
use agentloop::provider::openai::{Dialect, OpenAiChat};
use agentloop::provider::openai_responses::OpenAiResponses;
use agentloop::provider::wire::WireFormat;

/// The wire formats, by the first byte of an input (its low two bits).
pub fn format(selector: u8) -> Box<dyn WireFormat> {
    match selector % 4 {
        0 => Box::new(OpenAiChat::new("m", Dialect::compatible())),
        1 => Box::new(OpenAiResponses::new("m", Dialect::openai())),
        2 => Box::new(Anthropic::messages("m")),
        _ => Box::new(Gemini::new("m")),
    }
}

/// Where `len` bytes are cut into pieces whose lengths cycle through `sizes` (a size of 0
/// counts as 1), each cut moved forward until `at_boundary` allows it.
fn cuts(len: usize, sizes: &[u8], at_boundary: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    for i in 0.. {
        if at >= len {
            break;
        }
        let size = sizes.get(i % sizes.len().max(1)).map_or(len, |&s| usize::from(s).max(1));
        at = (at + size).min(len);
        while !at_boundary(at) {
            at += 1;
        }
        out.push(at);
    }
    out
}

/// `data` cut into pieces whose lengths cycle through `sizes` (a size of 0 counts as 1).
pub fn pieces<'a>(data: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    let ends = cuts(data.len(), sizes, |_| true);
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts.zip(ends.iter().copied()).map(|(from, to)| &data[from..to]).collect()
}

/// `text` cut into pieces at char boundaries, lengths cycling through `sizes`.
pub fn text_pieces<'a>(text: &'a str, sizes: &[u8]) -> Vec<&'a str> {
    let ends = cuts(text.len(), sizes, |at| text.is_char_boundary(at));
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts.zip(ends.iter().copied()).map(|(from, to)| &text[from..to]).collect()
}
