//! One config's delivery: claims the config's lease, follows its task's journal from the
//! config's cursor and POSTs each update to the webhook, retrying with backoff, saving the
//! cursor as it goes; renews the lease while it runs, stops at once if the lease is lost,
//! and releases it when it ends.

use super::allow::Denied;
use super::store::{Cursor, PushRecord};
use super::{next_generation, Inner};
use crate::mapping::EventMapper;
use crate::tasks::Host;
use a2a::StreamResponse;
use agentloop::event::Event;
use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use reqwest::Url;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The first wait before looking again for a stopped task's next entry.
const MIN_POLL: Duration = Duration::from_millis(200);

/// Starts the delivery of `record` (replacing a running one for the same config when
/// `replace`; else nothing if one runs) once it holds the config's lease. Whether it
/// started: not when another delivery, of this server or another, holds the lease.
pub(super) async fn spawn(
    inner: &Arc<Inner>,
    host: Arc<Host>,
    record: PushRecord,
    replace: bool,
) -> bool {
    let key = (record.task_id().to_owned(), record.id().to_owned());
    let generation = next_generation(inner);
    let token = inner.stop.child_token();
    {
        let mut loops = inner.loops();
        if token.is_cancelled() || (!replace && loops.contains_key(&key)) {
            return false;
        }
        if let Some((_, old)) = loops.insert(key.clone(), (generation, token.clone())) {
            old.cancel();
        }
    }
    // Each delivery is an owner of its own: a replaced or ended one never releases the
    // lease of the one after it.
    let owner = format!("{}/{generation}", inner.owner);
    let lease = Lease { owner, record, asked: Instant::now() };
    if !lease.claim(inner).await {
        forget(inner, &key, generation);
        return false;
    }
    let inner = inner.clone();
    tokio::spawn(async move {
        let lost = tokio::select! {
            () = token.cancelled() => false,
            () = run(&inner, &host, &lease.record) => false,
            () = lease.hold(&inner) => true,
        };
        if !lost {
            lease.release(&inner).await;
        }
        forget(&inner, &key, generation);
    });
    true
}

/// Forgets the running delivery `generation` of `key` (not one that replaced it).
fn forget(inner: &Inner, key: &(String, String), generation: u64) {
    let mut loops = inner.loops();
    if loops.get(key).is_some_and(|(g, _)| *g == generation) {
        loops.remove(key);
    }
}

/// A delivery's lease on its config.
struct Lease {
    owner: String,
    record: PushRecord,
    /// When it was claimed (asked for).
    asked: Instant,
}

impl Lease {
    /// Whether the lease is taken.
    async fn claim(&self, inner: &Inner) -> bool {
        let (task_id, id) = (self.record.task_id(), self.record.id());
        match inner.store.claim(task_id, id, &self.owner, inner.options.lease_ttl).await {
            Ok(taken) => taken,
            Err(error) => {
                tracing::warn!(%error, task_id, config_id = id,
                    "push: the delivery lease could not be claimed");
                false
            }
        }
    }

    /// Renews the lease every third of its TTL; returns when it is lost: another owner has
    /// it, it was dropped, or renewals failed until it could expire before the next one
    /// (the delivery stops before another server may take the lease).
    async fn hold(&self, inner: &Inner) {
        let (task_id, id) = (self.record.task_id(), self.record.id());
        let ttl = inner.options.lease_ttl;
        let every = (ttl / 3).max(Duration::from_millis(1));
        // The lease lasts at least until `ttl` after the last claim or renewal was asked.
        let mut expires = self.asked + ttl;
        loop {
            tokio::time::sleep(every).await;
            let asked = Instant::now();
            let renew = inner.store.renew(task_id, id, &self.owner, ttl);
            let error = match tokio::time::timeout_at(expires, renew).await {
                Ok(Ok(true)) => {
                    expires = asked + ttl;
                    continue;
                }
                Ok(Ok(false)) => {
                    tracing::info!(
                        task_id,
                        config_id = id,
                        "push: the delivery lease was lost, the delivery stops"
                    );
                    return;
                }
                Ok(Err(error)) => error.to_string(),
                Err(_) => "the store did not answer in time".to_owned(),
            };
            if Instant::now() + every >= expires {
                tracing::warn!(
                    error,
                    task_id,
                    config_id = id,
                    "push: the delivery lease could not be renewed before it expires, \
                     the delivery stops"
                );
                return;
            }
            tracing::warn!(
                error,
                task_id,
                config_id = id,
                "push: the delivery lease could not be renewed, trying again"
            );
        }
    }

    /// Releases the lease (best effort: else it expires).
    async fn release(&self, inner: &Inner) {
        let (task_id, id) = (self.record.task_id(), self.record.id());
        if let Err(error) = inner.store.release(task_id, id, &self.owner).await {
            tracing::debug!(%error, task_id, config_id = id,
                "push: the delivery lease could not be released");
        }
    }
}

/// Where and how one config's updates go.
struct Target {
    url: Url,
    /// The URL's host (what logs name: never the URL, which may hold a secret).
    host: String,
    /// The host, when it is an IP literal (checked before each request; names are checked
    /// by the client's resolver).
    literal: Option<IpAddr>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Target {
    fn of(config: &a2a::TaskPushNotificationConfig) -> Option<Self> {
        let url = Url::parse(&config.url).ok()?;
        let host = url.host_str()?.to_owned();
        let literal = host.trim_start_matches('[').trim_end_matches(']').parse().ok();
        let mut headers = vec![
            (CONTENT_TYPE, HeaderValue::from_static("application/a2a+json")),
            (HeaderName::from_static("a2a-version"), HeaderValue::from_static("1.0")),
        ];
        if let Some(token) = &config.token {
            let mut value = HeaderValue::from_str(token).ok()?;
            value.set_sensitive(true);
            headers.push((HeaderName::from_static("x-a2a-notification-token"), value));
        }
        if let Some(auth) = &config.authentication {
            let value = match &auth.credentials {
                Some(credentials) => format!("{} {credentials}", auth.scheme),
                None => auth.scheme.clone(),
            };
            let mut value = HeaderValue::from_str(&value).ok()?;
            value.set_sensitive(true);
            headers.push((AUTHORIZATION, value));
        }
        Some(Self { url, host, literal, headers })
    }
}

/// Why one attempt failed (never holding the URL or a secret).
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("{0}")]
    Denied(#[from] Denied),
    #[error("request failed: {0}")]
    Network(String),
    #[error("the webhook answered {0}")]
    Status(u16),
    #[error("the webhook answered a redirect ({0}); redirects are not followed")]
    Redirect(u16),
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Failure::Network(_) => true,
            Failure::Status(status) => *status == 429 || *status >= 500,
            Failure::Denied(_) | Failure::Redirect(_) => false,
        }
    }
}

async fn post(inner: &Inner, target: &Target, body: &[u8]) -> Result<(), Failure> {
    if let Some(addr) = target.literal {
        inner.allow.check_literal(addr)?;
    }
    let client = inner.client.as_ref().ok_or_else(|| Failure::Network("no HTTP client".into()))?;
    let mut request = client.post(target.url.clone()).body(body.to_vec());
    for (name, value) in &target.headers {
        request = request.header(name, value.clone());
    }
    let response =
        request.send().await.map_err(|e| Failure::Network(e.without_url().to_string()))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else if status.is_redirection() {
        Err(Failure::Redirect(status.as_u16()))
    } else {
        Err(Failure::Status(status.as_u16()))
    }
}

/// Delivers one update, retrying; whether it was delivered (a given-up update is logged).
async fn deliver(
    inner: &Inner,
    record: &PushRecord,
    target: &Target,
    update: &StreamResponse,
) -> bool {
    let body = match serde_json::to_vec(update) {
        Ok(body) => body,
        Err(error) => {
            tracing::error!(%error, "push: an update could not be serialized");
            return false;
        }
    };
    let options = &inner.options;
    let backoff = ExponentialBuilder::default()
        .with_min_delay(options.min_backoff)
        .with_max_delay(options.max_backoff)
        .with_max_times(options.attempts.saturating_sub(1))
        .with_jitter();
    let attempt = || post(inner, target, &body);
    let result = attempt
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(Failure::retryable)
        .notify(|error, wait| {
            tracing::debug!(task_id = record.task_id(), config_id = record.id(), host = target.host,
                %error, ?wait, "push: delivery failed, retrying");
        })
        .await;
    match result {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(task_id = record.task_id(), config_id = record.id(), host = target.host,
                %error, attempts = options.attempts, "push: an update was given up");
            false
        }
    }
}

async fn save(inner: &Inner, record: &PushRecord, cursor: Cursor) {
    if let Err(error) = inner.store.advance(record.task_id(), record.id(), cursor).await {
        tracing::warn!(%error, task_id = record.task_id(), config_id = record.id(),
            "push: the delivery cursor could not be saved");
    }
}

fn terminal(update: &StreamResponse) -> bool {
    match update {
        StreamResponse::StatusUpdate(update) => update.status.state.is_terminal(),
        StreamResponse::Task(task) => task.status.state.is_terminal(),
        _ => false,
    }
}

/// Delivers the updates of journal entry `seq`; whether the task ended with it.
async fn entry(
    inner: &Inner,
    record: &PushRecord,
    target: &Target,
    mapper: &mut EventMapper,
    seq: u64,
    at_ms: u64,
    event: &Event,
) -> bool {
    let updates = mapper.map(seq, at_ms, event);
    if updates.is_empty() {
        return false;
    }
    let mut ended = false;
    for update in &updates {
        deliver(inner, record, target, update).await;
        ended |= terminal(update);
    }
    save(inner, record, Cursor { next_seq: Some(seq + 1), done: ended }).await;
    ended
}

/// The delivery of one config, until its task ends (or it is stopped).
async fn run(inner: &Inner, host: &Host, record: &PushRecord) {
    let task_id = record.task_id();
    let Some(target) = Target::of(&record.config) else {
        tracing::warn!(task_id, config_id = record.id(), "push: a stored config is not usable");
        save(inner, record, Cursor { done: true, ..record.cursor }).await;
        return;
    };
    // A task just started may not have its first entry yet.
    let mut tries = 0;
    let fold = loop {
        match host.fold(task_id).await {
            Ok(fold) => break fold,
            Err(error) if error.code == a2a::error_code::TASK_NOT_FOUND && tries < 100 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => {
                tracing::warn!(task_id, error = error.message, "push: the task cannot be read");
                return;
            }
        }
    };
    let mut mapper = EventMapper::new(task_id, fold.context_id());
    let after_fold = fold.last_seq().map_or(0, |seq| seq + 1);
    let mut next = match record.cursor.next_seq {
        Some(next) => next,
        None => {
            let task = StreamResponse::Task(fold.task(None, true));
            deliver(inner, record, &target, &task).await;
            let ended = terminal(&task);
            save(inner, record, Cursor { next_seq: Some(after_fold), done: ended }).await;
            if ended {
                return;
            }
            after_fold
        }
    };
    if fold.state().is_terminal() && next >= after_fold {
        save(inner, record, Cursor { next_seq: Some(next), done: true }).await;
        return;
    }
    let service = host.service();
    loop {
        let mut journal = service.subscribe(task_id, next);
        while let Some(item) = journal.next().await {
            match item {
                Ok(envelope) if envelope.seq >= next => {
                    next = envelope.seq + 1;
                    let (seq, at_ms) = (envelope.seq, envelope.at_ms);
                    if entry(inner, record, &target, &mut mapper, seq, at_ms, &envelope.event).await
                    {
                        return;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, task_id, "push: the journal cannot be read");
                    break;
                }
            }
        }
        // The run stopped (it waits for input, or its executor died) or the store failed:
        // look for the next entry, less and less often.
        let mut wait = MIN_POLL;
        loop {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(inner.options.max_poll.max(MIN_POLL));
            let entries = match service.store().load_from(task_id, next).await {
                Ok(entries) => entries,
                Err(error) => {
                    tracing::warn!(%error, task_id, "push: the journal cannot be read");
                    continue;
                }
            };
            if entries.is_empty() {
                continue;
            }
            for journal_entry in &entries {
                if journal_entry.seq < next {
                    continue;
                }
                next = journal_entry.seq + 1;
                let (seq, at_ms) = (journal_entry.seq, journal_entry.at_ms);
                if entry(inner, record, &target, &mut mapper, seq, at_ms, &journal_entry.event)
                    .await
                {
                    return;
                }
            }
            break;
        }
    }
}
