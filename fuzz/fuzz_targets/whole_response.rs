//! A whole (non-streamed) response body and an error body of each provider format: never a
//! panic; a decoded response serializes and reads back equal.
//!
//! Input: a format byte, a status byte, then the body.
#![no_main]

use agentloop::provider::{ModelResponse, ProviderError};
use agentloop_fuzz::format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [selector, status, body @ ..] = data else { return };
    let format = format(*selector);
    if let Ok(response) = format.decode_response(body) {
        let json = serde_json::to_string(&response).unwrap();
        let back: ModelResponse = serde_json::from_str(&json).unwrap();
        assert_eq!(back, response);
    }
    let status = 400 + u16::from(*status % 200);
    let text = String::from_utf8_lossy(body);
    let _ = format.classify_error(
        status,
        &text,
        ProviderError::Server { status, message: String::new() },
    );
});
