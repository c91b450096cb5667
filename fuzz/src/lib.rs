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

/// `data` cut into pieces whose lengths cycle through `sizes` (a size of 0 counts as 1).
pub fn pieces<'a>(data: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes.get(i % sizes.len().max(1)).map_or(rest.len(), |&s| usize::from(s).max(1));
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        out.push(piece);
        rest = tail;
        i += 1;
    }
    out
}

/// `text` cut into pieces at char boundaries, lengths cycling through `sizes`.
pub fn text_pieces<'a>(text: &'a str, sizes: &[u8]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes.get(i % sizes.len().max(1)).map_or(rest.len(), |&s| usize::from(s).max(1));
        let mut cut = size.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
        i += 1;
    }
    out
}
