//! A `converse-stream` body (the binary AWS event stream) fed in pieces, and a whole Converse
//! body: never a panic; frames cut anywhere decode to the same chunks as the whole stream; the
//! chunks assemble.
//!
//! Input: a piece size byte, then the bytes.
#![no_main]

use agentloop::provider::bedrock::{decode_response, EventStreamDecoder};
use agentloop::provider::{ResponseAssembler, StreamChunk};
use libfuzzer_sys::fuzz_target;

fn decode(bytes: &[u8], step: usize) -> Result<Vec<StreamChunk>, String> {
    let mut decoder = EventStreamDecoder::new();
    let mut out = Vec::new();
    for piece in bytes.chunks(step.max(1)) {
        decoder.push(piece, &mut out).map_err(|e| e.to_string())?;
    }
    decoder.finish(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let [step, bytes @ ..] = data else { return };
    let whole = decode(bytes, bytes.len());
    let pieces = decode(bytes, usize::from(*step));
    if let (Ok(whole), Ok(pieces)) = (&whole, &pieces) {
        assert_eq!(whole, pieces);
        let mut assembler = ResponseAssembler::default();
        for chunk in whole.iter().cloned() {
            if assembler.push(chunk).is_err() {
                break;
            }
        }
        let _ = assembler.finish();
    }
    let _ = decode_response(bytes);
});
