//! Push notifications (A2A 1.0 §3.1.7–3.1.10, §4.3): a client registers webhooks for a task
//! (CreateTaskPushNotificationConfig, or `configuration.taskPushNotificationConfig` on
//! SendMessage) and the server POSTs the task's updates to each — the same
//! [`StreamResponse`](a2a::StreamResponse) objects a SubscribeToTask stream carries.
//!
//! - **Where**: only to destinations the operator allowed ([`PushAllow`],
//!   `ServerConfig::push_allow`; empty, the default, turns push off). The host is resolved
//!   and every address checked when a config is set, and again on every delivery (the HTTP
//!   client resolves through the allowlist); redirects are not followed, proxies not used.
//! - **What**: first the task as it stands when delivery starts, then one POST per update of
//!   every journaled event after it — status changes (tool calls included), the answer
//!   artifact, the final status — in journal order; stream-only text deltas are not pushed.
//!   Delivery of a config ends after the task's terminal status.
//! - **How**: `Content-Type: application/a2a+json`, the config's `token` in
//!   `X-A2A-Notification-Token`, its `authentication` as `Authorization: {scheme}
//!   {credentials}`; a timeout per request; network errors, 429 and 5xx retried with
//!   exponential backoff, at most [`DeliveryOptions::attempts`] times, then that update is
//!   given up (logged, without secrets or the URL) and delivery goes on with the next.
//! - **Durable, once across servers**: configs, each config's cursor (the next journal
//!   entry to deliver, saved after each entry) and each config's delivery lease live in a
//!   [`PushStore`] (memory, SQLite or Redis). A delivery claims its config's lease before it
//!   starts, renews it every third of [`DeliveryOptions::lease_ttl`] and releases it when it
//!   ends, so servers sharing one store deliver each update once: their recovery loops
//!   start only the deliveries that are not done and whose lease they take. A delivery that
//!   finds its lease lost stops at once. A restarted server resumes every delivery from its
//!   cursor, and when a server dies another one takes its deliveries over from their cursors
//!   once their leases expire: at-least-once — the updates of the entry being delivered when
//!   a process stopped are delivered again.
//! - **Secrets**: the token and credentials are stored, returned to the client by Get and
//!   List (the spec's config object), sent to the webhook, and never logged.

use crate::tasks::{internal, Host};
use a2a::{A2AError, ListTaskPushNotificationConfigsResponse, TaskPushNotificationConfig};
use http::HeaderValue;
use reqwest::Url;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

mod allow;
mod deliver;
pub mod redis;
pub mod sqlite;
mod store;

pub use allow::{is_public, AllowError, AllowResolver, Denied, PushAllow};
pub use store::{
    Cursor, DeletePushConfigs, MemoryPushStore, PushRecord, PushStore, PushStoreError,
};

/// The most configs one task may have.
pub const MAX_CONFIGS_PER_TASK: usize = 10;
const MAX_URL: usize = 2048;
const MAX_ID: usize = 128;
const MAX_TOKEN: usize = 1024;
const MAX_SCHEME: usize = 64;
const MAX_CREDENTIALS: usize = 4096;

/// How webhooks are called.
#[derive(Debug, Clone)]
pub struct DeliveryOptions {
    /// The timeout of one request. Default 10 s.
    pub timeout: Duration,
    /// Attempts per update (the first included) before it is given up. Default 5.
    pub attempts: usize,
    /// The first retry's delay (doubling, with jitter). Default 500 ms.
    pub min_backoff: Duration,
    /// The longest delay between attempts. Default 30 s.
    pub max_backoff: Duration,
    /// The longest a delivery waits between looks at a task that waits for input (or
    /// whose executor stopped) for its next entry. Default 5 s.
    pub max_poll: Duration,
    /// How long a delivery's lease on its config lasts unless renewed (it is renewed every
    /// third of it): how long the deliveries of a server that died wait before another
    /// server takes them over. Default 30 s.
    pub lease_ttl: Duration,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            attempts: 5,
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_poll: Duration::from_secs(5),
            lease_ttl: Duration::from_secs(30),
        }
    }
}

/// A config that passed validation and the allowlist (see [`Pusher::check`]).
#[derive(Clone)]
pub struct Checked(TaskPushNotificationConfig);

impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked").field("id", &self.0.id).finish_non_exhaustive()
    }
}

/// What the deliveries share.
pub(crate) struct Inner {
    store: Arc<dyn PushStore>,
    allow: Arc<PushAllow>,
    options: DeliveryOptions,
    /// `None` when it could not be built (push is off then).
    client: Option<reqwest::Client>,
    /// The running deliveries, by (task id, config id): their generation and stop token.
    loops: Mutex<HashMap<(String, String), (u64, CancellationToken)>>,
    generation: AtomicU64,
    /// This `Pusher`'s id (a UUID): with a delivery's generation, the owner of its lease.
    owner: String,
    /// Stops every delivery (the server stops).
    stop: CancellationToken,
}

impl Inner {
    fn loops(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), (u64, CancellationToken)>> {
        self.loops.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The push notifications of a server: configs, their checks and their deliveries.
/// Dropping it stops the deliveries and releases their leases (a durable store lets another
/// server resume them).
pub struct Pusher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("allow", &self.inner.allow)
            .field("store", &self.inner.store)
            .finish_non_exhaustive()
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        self.inner.stop.cancel();
    }
}

impl Pusher {
    /// Push notifications to the destinations `allow` allows, configs in `store`. (Off,
    /// with an error logged, if the HTTP client cannot be built.)
    pub fn new(allow: PushAllow, store: Arc<dyn PushStore>, options: DeliveryOptions) -> Self {
        let allow = Arc::new(allow);
        let client =
            agentloop::tls::http_client_builder().map_err(|e| e.to_string()).and_then(|builder| {
                builder
                    .no_proxy()
                    .timeout(options.timeout)
                    .connect_timeout(options.timeout)
                    .dns_resolver(Arc::new(AllowResolver::new(allow.clone())))
                    .user_agent(concat!("agentloop/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| e.without_url().to_string())
            });
        let (allow, client) = match client {
            Ok(client) => (allow, Some(client)),
            Err(error) => {
                tracing::error!(%error, "push: no HTTP client, push is off");
                (Arc::new(PushAllow::none()), None)
            }
        };
        Self {
            inner: Arc::new(Inner {
                store,
                allow,
                options,
                client,
                loops: Mutex::new(HashMap::new()),
                generation: AtomicU64::new(0),
                owner: uuid::Uuid::new_v4().to_string(),
                stop: CancellationToken::new(),
            }),
        }
    }

    /// Whether push notifications are on (the allowlist is not empty).
    pub fn enabled(&self) -> bool {
        !self.inner.allow.is_empty()
    }

    /// Stops every delivery.
    pub fn stop(&self) {
        self.inner.stop.cancel();
    }

    fn on(&self) -> Result<(), A2AError> {
        if self.enabled() {
            Ok(())
        } else {
            Err(A2AError::push_notification_not_supported())
        }
    }

    /// Validates `config` (URL, id, token, authentication; an id is made when it has none)
    /// and checks its URL against the allowlist, resolving its host.
    pub async fn check(&self, config: TaskPushNotificationConfig) -> Result<Checked, A2AError> {
        self.on()?;
        let (config, url) = validate(config)?;
        self.inner.allow.check_url(&url).await.map_err(|denied| {
            A2AError::invalid_params(format!("push notification URL refused: {denied}"))
        })?;
        Ok(Checked(config))
    }

    /// The push config of a SendMessage, checked (before the task starts).
    pub async fn check_send(
        &self,
        configuration: Option<&a2a::SendMessageConfiguration>,
    ) -> Result<Option<Checked>, A2AError> {
        match configuration.and_then(|c| c.task_push_notification_config.clone()) {
            Some(config) => self.check(config).await.map(Some),
            None => Ok(None),
        }
    }

    /// Saves a checked config for task `task_id` of `host` (replacing the one with its id)
    /// and starts its delivery (unless another server claimed its lease first: that one
    /// delivers it).
    pub async fn register(
        &self,
        host: &Arc<Host>,
        task_id: &str,
        checked: Checked,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        let mut config = checked.0;
        config.task_id = task_id.to_owned();
        let id = config.id.clone().unwrap_or_default();
        let existing = self.inner.store.list(task_id).await.map_err(internal)?;
        if existing.len() >= MAX_CONFIGS_PER_TASK && !existing.iter().any(|r| r.id() == id) {
            return Err(A2AError::invalid_params(format!(
                "a task has at most {MAX_CONFIGS_PER_TASK} push notification configs"
            )));
        }
        let record = PushRecord {
            agent: host.served().name().to_owned(),
            config: config.clone(),
            created_ms: agentloop::store::now_ms(),
            cursor: Cursor::default(),
        };
        self.inner.store.put(&record).await.map_err(internal)?;
        deliver::spawn(&self.inner, host.clone(), record, true).await;
        Ok(config)
    }

    /// CreateTaskPushNotificationConfig (`task_id`: the task named by the request).
    pub async fn create(
        &self,
        host: &Arc<Host>,
        task_id: &str,
        config: TaskPushNotificationConfig,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.on()?;
        if !config.task_id.is_empty() && config.task_id != task_id {
            return Err(A2AError::invalid_params("taskId does not match the task of the path"));
        }
        host.fold(task_id).await?;
        let checked = self.check(config).await?;
        self.register(host, task_id, checked).await
    }

    /// GetTaskPushNotificationConfig.
    pub async fn get(
        &self,
        host: &Host,
        task_id: &str,
        id: &str,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.on()?;
        host.fold(task_id).await?;
        match self.inner.store.get(task_id, id).await.map_err(internal)? {
            Some(record) => Ok(record.config),
            None => Err(A2AError::task_not_found(&format!("{task_id} (push config {id})"))),
        }
    }

    /// ListTaskPushNotificationConfigs (all of them: a task has at most
    /// [`MAX_CONFIGS_PER_TASK`]).
    pub async fn list(
        &self,
        host: &Host,
        task_id: &str,
    ) -> Result<ListTaskPushNotificationConfigsResponse, A2AError> {
        self.on()?;
        host.fold(task_id).await?;
        let records = self.inner.store.list(task_id).await.map_err(internal)?;
        Ok(ListTaskPushNotificationConfigsResponse {
            configs: records.into_iter().map(|r| r.config).collect(),
            next_page_token: None,
        })
    }

    /// DeleteTaskPushNotificationConfig: no more deliveries to it (idempotent).
    pub async fn delete(&self, host: &Host, task_id: &str, id: &str) -> Result<(), A2AError> {
        self.on()?;
        host.fold(task_id).await?;
        if let Some((_, token)) = self.inner.loops().remove(&(task_id.to_owned(), id.to_owned())) {
            token.cancel();
        }
        self.inner.store.delete(task_id, id).await.map_err(internal)?;
        Ok(())
    }

    /// Starts the deliveries that are not done and not running (after a restart, or one
    /// that stopped on a store error), for the tasks of `hosts` — those whose lease it
    /// takes: not those another server delivers. Returns how many.
    pub async fn recover(&self, hosts: &[Arc<Host>]) -> usize {
        if !self.enabled() || self.inner.stop.is_cancelled() {
            return 0;
        }
        let pending = match self.inner.store.pending().await {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(%error, "push: recovery could not list the configs");
                return 0;
            }
        };
        let mut started = 0;
        for record in pending {
            let key = (record.task_id().to_owned(), record.id().to_owned());
            if self.inner.loops().contains_key(&key) {
                continue;
            }
            let Some(host) = hosts.iter().find(|h| h.served().name() == record.agent) else {
                continue;
            };
            if deliver::spawn(&self.inner, host.clone(), record, false).await {
                started += 1;
            }
        }
        started
    }
}

/// Checks a config and fills in what the server decides (its id; no tenant).
fn validate(
    mut config: TaskPushNotificationConfig,
) -> Result<(TaskPushNotificationConfig, Url), A2AError> {
    let invalid =
        |what: &str| A2AError::invalid_params(format!("push notification config: {what}"));
    let raw = config.url.trim();
    if raw.is_empty() || raw.len() > MAX_URL {
        return Err(invalid(&format!("url must be 1-{MAX_URL} characters")));
    }
    let url = Url::parse(raw).map_err(|e| invalid(&format!("url is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("url must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("url has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("url must not hold credentials: use authentication"));
    }
    config.url = url.to_string();
    match config.id.as_deref() {
        None | Some("") => config.id = Some(uuid::Uuid::new_v4().to_string()),
        Some(id) => {
            let ok = id.len() <= MAX_ID
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b));
            if !ok {
                return Err(invalid(&format!(
                    "id must be 1-{MAX_ID} characters of A-Z, a-z, 0-9, '-', '_', '.', '~'"
                )));
            }
        }
    }
    if config.token.as_deref() == Some("") {
        config.token = None;
    }
    if let Some(token) = &config.token {
        if token.len() > MAX_TOKEN || HeaderValue::from_str(token).is_err() {
            return Err(invalid(&format!(
                "token must be at most {MAX_TOKEN} characters valid in an HTTP header"
            )));
        }
    }
    if let Some(auth) = &config.authentication {
        let token_char = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if auth.scheme.is_empty()
            || auth.scheme.len() > MAX_SCHEME
            || !auth.scheme.bytes().all(token_char)
        {
            return Err(invalid("authentication.scheme must be an HTTP auth scheme (e.g. Bearer)"));
        }
        if let Some(credentials) = &auth.credentials {
            if credentials.len() > MAX_CREDENTIALS || HeaderValue::from_str(credentials).is_err() {
                return Err(invalid(&format!(
                    "authentication.credentials must be at most {MAX_CREDENTIALS} characters \
                     valid in an HTTP header"
                )));
            }
        }
    }
    config.tenant = None;
    Ok((config, url))
}

fn next_generation(inner: &Inner) -> u64 {
    inner.generation.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests;
