//! `http_get`: fetches a URL whose host is on an allow list.

use crate::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// GETs URLs of allowed hosts only.
#[derive(Debug, Clone)]
pub struct HttpGet {
    /// `Err` with the reason when the client could not be built (each call reports it).
    client: Result<reqwest::Client, String>,
    allowed_hosts: Vec<String>,
    max_bytes: usize,
}

/// Arguments of [`HttpGet`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct HttpGetArgs {
    /// An http(s) URL on an allowed host.
    pub url: String,
}

impl HttpGet {
    /// Allows these hosts (exact names; an entry starting with `.` allows its subdomains).
    pub fn new(allowed_hosts: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let client = crate::tls::http_client_builder()
            .map_err(|e| e.to_string())
            .and_then(|builder| {
                builder.timeout(Duration::from_secs(20)).build().map_err(|e| e.to_string())
            })
            .map_err(|e| format!("the HTTP client could not be built: {e}"));
        Self {
            client,
            allowed_hosts: allowed_hosts.into_iter().map(Into::into).collect(),
            max_bytes: 256 * 1024,
        }
    }

    /// Bodies longer than this are cut (default 256 KiB).
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Whether a host is on the allow list.
    pub fn allowed(&self, host: &str) -> bool {
        self.allowed_hosts.iter().any(|allowed| match allowed.strip_prefix('.') {
            Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
            None => host == allowed,
        })
    }
}

impl Tool for HttpGet {
    const NAME: &'static str = "http_get";
    type Args = HttpGetArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        format!(
            "Fetch a URL with GET and return the status and body. Allowed hosts: {}.",
            self.allowed_hosts.join(", ")
        )
    }

    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_secs(25))
    }

    async fn call(&self, args: HttpGetArgs, _ctx: ToolContext) -> Result<String, String> {
        let url = reqwest::Url::parse(&args.url).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("only http and https URLs are allowed, not {}", url.scheme()));
        }
        let host = url.host_str().unwrap_or_default().to_owned();
        if !self.allowed(&host) {
            return Err(format!(
                "host '{host}' is not allowed (allowed: {})",
                self.allowed_hosts.join(", ")
            ));
        }
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let mut response =
            client.get(url).send().await.map_err(|e| format!("request failed: {e}"))?;
        let status = response.status();
        let mut body = Vec::new();
        let mut cut = false;
        while let Some(chunk) =
            response.chunk().await.map_err(|e| format!("reading the body failed: {e}"))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > self.max_bytes {
                body.truncate(self.max_bytes);
                cut = true;
                break;
            }
        }
        let mut text = format!("HTTP {}\n{}", status.as_u16(), String::from_utf8_lossy(&body));
        if cut {
            text.push_str(&format!("\n[… body cut at {} bytes]", self.max_bytes));
        }
        Ok(text)
    }
}
