//! The secret registry: API keys and the values of credential headers, kept out of everything
//! a run reports. A provider redacts its own from its errors (a server that echoes the key in
//! a 401 body); an agent holds its provider's and the ones it is given
//! ([`AgentBuilder::secret`](crate::AgentBuilder::secret)) and redacts them from every tool
//! result and tool error before the result is journaled, streamed or shown to the model (a
//! shell tool that prints the environment, an MCP server that echoes its token). The
//! redacted form is `sk-…abcd`.

use super::ProviderError;
use serde::de::DeserializeOwned;
use serde::Serialize;
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
            self.add_credential(value);
        }
    }

    /// Adds a credential: for `Bearer <token>`, the token (the part a server may echo).
    pub fn add_credential(&mut self, value: &str) {
        self.add(value.strip_prefix("Bearer ").unwrap_or(value));
    }

    /// Adds every secret of `other`.
    pub fn extend(&mut self, other: &Secrets) {
        for (secret, _) in &other.pairs {
            self.add(secret);
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
        self.redact_serde(error)
    }

    /// `value` with every secret in its strings redacted (through its JSON form; given back
    /// unchanged when it holds none).
    pub fn redact_serde<T: Serialize + DeserializeOwned>(&self, value: T) -> T {
        if self.is_empty() {
            return value;
        }
        let Ok(mut json) = serde_json::to_value(&value) else { return value };
        if !self.redact_value(&mut json) {
            return value;
        }
        serde_json::from_value(json).unwrap_or(value)
    }

    /// Redacts every string in `value` (object keys stay); whether one changed.
    pub fn redact_value(&self, value: &mut Value) -> bool {
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
