//! The secrets of a provider — its API key, the values of its credential headers — kept
//! out of everything it reports: an error whose message or excerpt holds one (a server that
//! echoes the key in a 401 body) has it replaced by a redacted form (`sk-…abcd`) before the
//! error reaches a log, an event, the journal or an output.

use super::ProviderError;
use serde_json::Value;
use std::borrow::Cow;

/// Secrets shorter than this are not looked for (they would match ordinary text).
const MIN_SECRET: usize = 8;

/// Header names whose values are credentials.
const CREDENTIAL_HEADERS: [&str; 7] =
    ["authorization", "key", "token", "secret", "password", "cookie", "credential"];

/// The secrets to redact, each with its redacted form.
#[derive(Clone, Default)]
pub struct Secrets {
    pairs: Vec<(String, String)>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} redacted)", self.pairs.len())
    }
}

impl Secrets {
    /// No secrets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a secret (ignored when shorter than 8 characters).
    pub fn add(&mut self, secret: &str) {
        let secret = secret.trim();
        if secret.chars().count() >= MIN_SECRET && !self.pairs.iter().any(|(s, _)| s == secret) {
            self.pairs.push((secret.to_owned(), redacted(secret)));
            // Longest first: a secret that contains another is replaced whole.
            self.pairs.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        }
    }

    /// Adds the value of header `name` when the name says it is a credential.
    pub fn add_header(&mut self, name: &str, value: &str) {
        let name = name.to_ascii_lowercase();
        if CREDENTIAL_HEADERS.iter().any(|word| name.contains(word)) {
            // `Bearer <token>`: the token is the secret.
            let value = value.strip_prefix("Bearer ").unwrap_or(value);
            self.add(value);
        }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `text` with every secret replaced by its redacted form.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for (secret, shown) in &self.pairs {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), shown));
            }
        }
        text
    }

    /// `error` with every secret in its text redacted.
    pub fn redact_error(&self, error: ProviderError) -> ProviderError {
        if self.is_empty() {
            return error;
        }
        let Ok(mut value) = serde_json::to_value(&error) else { return error };
        if !self.redact_value(&mut value) {
            return error;
        }
        serde_json::from_value(value).unwrap_or(error)
    }

    /// Redacts every string in `value`; whether one changed.
    fn redact_value(&self, value: &mut Value) -> bool {
        match value {
            Value::String(text) => match self.redact(text) {
                Cow::Owned(clean) => {
                    *text = clean;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            Value::Array(items) => items.iter_mut().fold(false, |c, v| self.redact_value(v) | c),
            Value::Object(fields) => {
                fields.values_mut().fold(false, |c, v| self.redact_value(v) | c)
            }
            _ => false,
        }
    }
}

/// How a secret is shown: its first three and last four characters (`sk-…abcd`), or only
/// `…` when it is too short to show any of it safely.
pub fn redacted(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() < 16 {
        return "…".to_owned();
    }
    let head: String = chars[..3].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests;
