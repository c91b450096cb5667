//! The prompted tool-call parser (tool calls written as tagged text by models without native
//! tool calling): never a panic, and the same response whether the text arrives whole or in
//! pieces (as a model streams it).
//!
//! Input: a byte giving how many piece sizes follow, the sizes, a flag byte, then the text.
#![no_main]

use agentloop::provider::prompted::ToolCallParser;
use agentloop::provider::{ModelResponse, ResponseAssembler, StreamChunk};
use agentloop_fuzz::text_pieces;
use libfuzzer_sys::fuzz_target;

fn parse(pieces: &[&str], complete_calls: bool) -> Result<ModelResponse, String> {
    let mut parser = ToolCallParser::with_id_prefix("call_");
    let mut chunks: Vec<StreamChunk> = Vec::new();
    for piece in pieces {
        parser.push(piece, &mut chunks);
    }
    parser.finish(complete_calls, &mut chunks);
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk).map_err(|e| e.to_string())?;
    }
    Ok(assembler.finish())
}

fuzz_target!(|data: &[u8]| {
    let [count, rest @ ..] = data else { return };
    let count = usize::from(*count % 8).min(rest.len());
    let (sizes, rest) = rest.split_at(count);
    let [flags, text @ ..] = rest else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let complete_calls = flags & 1 == 1;
    let whole = parse(&[text], complete_calls);
    let in_pieces = parse(&text_pieces(text, sizes), complete_calls);
    assert_eq!(whole, in_pieces, "the same text in pieces parsed differently");
});
