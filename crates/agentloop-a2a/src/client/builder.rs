//! [`A2aClientBuilder`]: headers, timeouts, limits, binding preference; card resolution.

use super::http::{read_bounded, status_error};
use super::{A2aClient, Binding, Inner};
use crate::error::A2aClientError;
use crate::text::sanitize;
use a2a::AgentCard;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION};
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::Duration;

/// The path of the agent card under an agent's base URL.
pub const AGENT_CARD_PATH: &str = "/.well-known/agent-card.json";

/// Builds an [`A2aClient`]: from an agent's base URL ([`resolve`](Self::resolve), which
/// fetches the card) or from a card in hand ([`connect`](Self::connect)).
///
/// Headers set here (a bearer token, an API key, anything else) go with every request,
/// including the card fetch; secret values are marked sensitive and never shown.
#[derive(Debug)]
pub struct A2aClientBuilder {
    headers: HeaderMap,
    timeout: Duration,
    connect_timeout: Duration,
    stream_idle_timeout: Duration,
    max_response_bytes: usize,
    max_event_bytes: usize,
    preferred: Vec<Binding>,
    http: Option<reqwest::Client>,
    error: Option<A2aClientError>,
}

impl Default for A2aClientBuilder {
    fn default() -> Self {
        Self {
            headers: HeaderMap::new(),
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            stream_idle_timeout: Duration::from_secs(120),
            max_response_bytes: 16 << 20,
            max_event_bytes: 4 << 20,
            preferred: vec![Binding::JsonRpc, Binding::HttpJson],
            http: None,
            error: None,
        }
    }
}

impl A2aClientBuilder {
    /// Sends `Authorization: Bearer <token>`.
    pub fn bearer_token(self, token: SecretString) -> Self {
        let value = format!("Bearer {}", token.expose_secret());
        self.insert(AUTHORIZATION.as_str(), &value, true)
    }

    /// Sends an API key in the header `name` (for an `apiKeySecurityScheme` in a header).
    pub fn api_key(self, name: &str, key: SecretString) -> Self {
        self.insert(name, key.expose_secret(), true)
    }

    /// Sends a header whose value is secret (never shown in errors or `Debug`).
    pub fn secret_header(self, name: &str, value: SecretString) -> Self {
        self.insert(name, value.expose_secret(), true)
    }

    /// Sends a header whose value is not secret.
    pub fn header(self, name: &str, value: &str) -> Self {
        self.insert(name, value, false)
    }

    fn insert(mut self, name: &str, value: &str, sensitive: bool) -> Self {
        let name_ok = HeaderName::from_bytes(name.as_bytes());
        let value_ok = HeaderValue::from_str(value);
        match (name_ok, value_ok) {
            (Ok(name), Ok(mut value)) => {
                value.set_sensitive(sensitive);
                self.headers.insert(name, value);
            }
            _ => {
                self.error.get_or_insert(A2aClientError::InvalidHeader(sanitize(name, 100)));
            }
        }
        self
    }

    /// The time a unary call (and the card fetch, and the start of a stream) may take
    /// (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The time to connect (default 10 s). Ignored with [`http_client`](Self::http_client).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The longest silence on a stream, keep-alives included (default 120 s).
    pub fn stream_idle_timeout(mut self, timeout: Duration) -> Self {
        self.stream_idle_timeout = timeout;
        self
    }

    /// The largest unary answer or agent card accepted (default 16 MiB).
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// The largest single streamed event accepted (default 4 MiB).
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// The bindings to use, most preferred first (default: JSON-RPC, then HTTP+JSON).
    pub fn prefer(mut self, bindings: impl IntoIterator<Item = Binding>) -> Self {
        self.preferred = bindings.into_iter().collect();
        self
    }

    /// Uses this HTTP client (its own timeouts, proxy and TLS settings) instead of a new one.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// Fetches the agent card from `base_url` (`<base_url>/.well-known/agent-card.json`, or
    /// `base_url` itself when it already names a `.json` file) and connects to the
    /// interface it offers that this client prefers.
    pub async fn resolve(self, base_url: &str) -> Result<A2aClient, A2aClientError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let card_url = card_url(base_url)?;
        let http = self.http_client_or_new()?;
        let response = http
            .get(card_url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json")
            .header(a2a::SVC_PARAM_VERSION, a2a::VERSION)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| A2aClientError::from_reqwest(e, self.timeout))?;
        let status = response.status();
        let body = read_bounded(response, self.max_response_bytes, self.timeout).await?;
        if !status.is_success() {
            return Err(status_error(status.as_u16(), &body));
        }
        let card: AgentCard = serde_json::from_slice(&body)
            .map_err(|e| A2aClientError::invalid(format!("agent card: {e}")))?;
        self.connect_with(card, Some(&card_url), http)
    }

    /// Connects to the interface of `card` this client prefers, without fetching anything.
    pub fn connect(self, card: AgentCard) -> Result<A2aClient, A2aClientError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let http = self.http_client_or_new()?;
        self.connect_with(card, None, http)
    }

    fn http_client_or_new(&self) -> Result<reqwest::Client, A2aClientError> {
        match &self.http {
            Some(client) => Ok(client.clone()),
            None => agentloop::tls::http_client_builder()
                .map_err(|e| A2aClientError::Transport(format!("TLS setup failed: {e}")))?
                // reqwest's own policy (up to 10, credentials dropped across hosts).
                .redirect(reqwest::redirect::Policy::default())
                .connect_timeout(self.connect_timeout)
                .build()
                .map_err(|e| A2aClientError::from_reqwest(e, self.timeout)),
        }
    }

    fn connect_with(
        self,
        card: AgentCard,
        card_url: Option<&Url>,
        http: reqwest::Client,
    ) -> Result<A2aClient, A2aClientError> {
        let (binding, url) = pick_interface(&card, &self.preferred, card_url)?;
        Ok(A2aClient {
            inner: Arc::new(Inner {
                http,
                card,
                binding,
                url,
                headers: self.headers,
                timeout: self.timeout,
                stream_idle_timeout: self.stream_idle_timeout,
                max_response_bytes: self.max_response_bytes,
                max_event_bytes: self.max_event_bytes,
                next_id: AtomicI64::new(1),
            }),
            trace_parent: None,
        })
    }
}

/// Where the card of the agent at `base_url` is.
pub(crate) fn card_url(base_url: &str) -> Result<Url, A2aClientError> {
    let url = Url::parse(base_url)
        .map_err(|e| A2aClientError::InvalidUrl(format!("{}: {e}", sanitize(base_url, 200))))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(A2aClientError::InvalidUrl(format!(
            "{}: only http and https are supported",
            sanitize(base_url, 200)
        )));
    }
    if url.path().ends_with(".json") {
        return Ok(url);
    }
    let mut with_card = url.clone();
    with_card.set_path(&format!("{}{AGENT_CARD_PATH}", url.path().trim_end_matches('/')));
    Ok(with_card)
}

/// The first interface of `card`, in the order of `preferred`, with a 1.x protocol version
/// (or none), as a binding and an absolute URL (a relative one is joined to the card's URL).
pub(crate) fn pick_interface(
    card: &AgentCard,
    preferred: &[Binding],
    card_url: Option<&Url>,
) -> Result<(Binding, Url), A2aClientError> {
    for binding in preferred {
        let found = card.supported_interfaces.iter().find(|interface| {
            interface.protocol_binding.eq_ignore_ascii_case(binding.protocol_name())
                && (interface.protocol_version.is_empty()
                    || interface.protocol_version == "1"
                    || interface.protocol_version.starts_with("1."))
        });
        if let Some(interface) = found {
            let url = match (Url::parse(&interface.url), card_url) {
                (Ok(url), _) => url,
                (Err(_), Some(base)) => base.join(&interface.url).map_err(|e| {
                    A2aClientError::InvalidUrl(format!("{}: {e}", sanitize(&interface.url, 200)))
                })?,
                (Err(e), None) => {
                    return Err(A2aClientError::InvalidUrl(format!(
                        "{}: {e}",
                        sanitize(&interface.url, 200)
                    )))
                }
            };
            if !matches!(url.scheme(), "http" | "https") {
                continue;
            }
            return Ok((*binding, url));
        }
    }
    let offered: Vec<String> = card
        .supported_interfaces
        .iter()
        .map(|i| sanitize(&format!("{} {}", i.protocol_binding, i.protocol_version), 60))
        .collect();
    Err(A2aClientError::NoSupportedInterface(if offered.is_empty() {
        "none".to_owned()
    } else {
        offered.join(", ")
    }))
}
