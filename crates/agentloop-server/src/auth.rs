//! Credentials a server can require: bearer tokens (`Authorization: Bearer …`) or API keys
//! in a header. Compared in constant time; never logged. The agent card stays public and
//! declares the scheme.

use a2a::SecurityScheme;
use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};

/// What a request must carry.
#[derive(Clone)]
pub enum Auth {
    /// `Authorization: Bearer <token>`, one of these.
    Bearer(Vec<SecretString>),
    /// `<header>: <key>`, one of these.
    ApiKey {
        /// The header (e.g. `X-API-Key`).
        header: String,
        /// The keys.
        keys: Vec<SecretString>,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bearer(tokens) => write!(f, "Bearer({} tokens)", tokens.len()),
            Self::ApiKey { header, keys } => write!(f, "ApiKey({header}, {} keys)", keys.len()),
        }
    }
}

/// Equal in time independent of where they differ (the length may show).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Auth {
    /// Whether the request's headers carry a valid credential.
    pub fn allows(&self, headers: &HeaderMap) -> bool {
        let (given, secrets) = match self {
            Self::Bearer(tokens) => {
                let given = headers
                    .get(http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
                (given, tokens)
            }
            Self::ApiKey { header, keys } => {
                (headers.get(header.as_str()).and_then(|v| v.to_str().ok()), keys)
            }
        };
        let Some(given) = given.map(str::trim) else { return false };
        // Check every secret, so the time does not tell which one matched.
        secrets.iter().fold(false, |ok, secret| {
            same(given.as_bytes(), secret.expose_secret().as_bytes()) | ok
        })
    }

    /// The card's name for the scheme, and the scheme.
    pub fn scheme(&self) -> (String, SecurityScheme) {
        match self {
            Self::Bearer(_) => ("bearer".to_owned(), crate::card::scheme_of(None)),
            Self::ApiKey { header, .. } => {
                ("apiKey".to_owned(), crate::card::scheme_of(Some(header)))
            }
        }
    }

    /// The `WWW-Authenticate` value of a 401.
    pub fn challenge(&self) -> &'static str {
        match self {
            Self::Bearer(_) => "Bearer",
            Self::ApiKey { .. } => "ApiKey",
        }
    }
}
