#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn secrets_are_shown_by_their_ends_and_errors_lose_them_everywhere() {
    let key = "sk-proj-0123456789abcdefWXYZ";
    let mut secrets = Secrets::new();
    secrets.add(key);
    secrets.add_header("X-Custom-Token", "tok-9876543210");
    secrets.add_header("anthropic-version", "2023-06-01");
    secrets.add("short");
    assert_eq!(redacted(key), "sk-…WXYZ");
    assert_eq!(secrets.redact(&format!("bad key {key}!")), "bad key sk-…WXYZ!");
    assert_eq!(secrets.redact("tok-9876543210"), "…");
    assert_eq!(secrets.redact("2023-06-01 short"), "2023-06-01 short");
    let error = ProviderError::Auth { status: 401, message: format!("Incorrect API key: {key}") };
    let clean = secrets.redact_error(error);
    assert_eq!(clean.to_string(), "authentication failed (401): Incorrect API key: sk-…WXYZ");
    let protocol = ProviderError::protocol("bad", &format!("{{\"key\": \"{key}\"}}"));
    assert!(!format!("{:?}", secrets.redact_error(protocol)).contains(key));
    assert!(!format!("{secrets:?}").contains(key));
}
