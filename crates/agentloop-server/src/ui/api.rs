//! The UI's JSON API, its reading half: the runs of the registry, one run's journal, and
//! the journal as it grows over SSE (with the text as the model streams it, when this
//! process executes the run). docs/UI.md gives the shapes.

use super::{refusal, ApiError, UiState};
use agentloop::event::Event;
use agentloop::protocol::Envelope;
use agentloop::store::{JournalEntry, RunCursor, RunFilter, RunState, RunSummary};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::broadcast;

/// The runs of a page when the request names no `limit`.
pub const DEFAULT_LIMIT: usize = 50;
/// The most runs of a page.
pub const MAX_LIMIT: usize = 500;
/// The longest search text (`q`).
pub const MAX_SEARCH_CHARS: usize = 200;

type Shared = State<Arc<UiState>>;

/// The query of `GET /ui/api/runs`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    state: Option<String>,
    agent: Option<String>,
    session: Option<String>,
    parent: Option<String>,
    /// Runs forked from this run.
    origin: Option<String>,
    /// Runs whose input or answer contains this text (ASCII letters in either case).
    q: Option<String>,
    /// Runs created at or after this time (ms since the Unix epoch).
    since: Option<u64>,
    /// Runs created before this time (ms since the Unix epoch).
    until: Option<u64>,
    limit: Option<usize>,
    after: Option<String>,
}

fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A cursor as the API hands it out: `created_ms:run_id`, base64url.
fn encode_cursor(cursor: &RunCursor) -> String {
    let raw = format!("{}:{}", cursor.created_ms, cursor.run_id);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_cursor(text: &str) -> Result<RunCursor, ApiError> {
    let bad = || ApiError::bad_request("after: not a cursor this API returned (see `next`)");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    let raw = String::from_utf8(raw).map_err(|_| bad())?;
    let (ms, run_id) = raw.split_once(':').ok_or_else(bad)?;
    let created_ms = ms.parse().map_err(|_| bad())?;
    if run_id.is_empty() {
        return Err(bad());
    }
    Ok(RunCursor { created_ms, run_id: run_id.to_owned() })
}

const STATES: [RunState; 6] = [
    RunState::Running,
    RunState::Finished,
    RunState::Failed,
    RunState::Cancelled,
    RunState::Suspended,
    RunState::NeedsAttention,
];

/// The registry's filter a query asks for, and the page size.
fn filter_of(query: ListQuery) -> Result<(RunFilter, usize), ApiError> {
    let mut filter = RunFilter::all();
    let nonempty = |value: Option<String>| value.filter(|v| !v.is_empty());
    if let Some(state) = nonempty(query.state) {
        let parsed = RunState::parse(&state).ok_or_else(|| {
            let names: Vec<&str> = STATES.iter().map(|s| s.as_str()).collect();
            ApiError::bad_request(format!("state: expected one of {}", names.join(", ")))
        })?;
        filter = filter.state(parsed);
    }
    if let Some(agent) = nonempty(query.agent) {
        filter = filter.agent(agent);
    }
    if let Some(session) = nonempty(query.session) {
        filter = filter.context_id(session);
    }
    if let Some(parent) = nonempty(query.parent) {
        filter = filter.parent_run_id(parent);
    }
    if let Some(origin) = nonempty(query.origin) {
        filter = filter.origin_run_id(origin);
    }
    if let Some(text) = query.q.map(|q| q.trim().to_owned()).filter(|q| !q.is_empty()) {
        if text.chars().count() > MAX_SEARCH_CHARS {
            return Err(ApiError::bad_request(format!("q: at most {MAX_SEARCH_CHARS} characters")));
        }
        filter = filter.text(text);
    }
    if query.since.is_some() || query.until.is_some() {
        let (since, until) = (query.since.unwrap_or(0), query.until.unwrap_or(u64::MAX));
        if since >= until {
            return Err(ApiError::bad_request("since: must be before until"));
        }
        filter = filter.created_between(since, until);
    }
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!("limit: expected 1 to {MAX_LIMIT}")));
    }
    if let Some(after) = nonempty(query.after) {
        filter = filter.after(decode_cursor(&after)?);
    }
    Ok((filter, limit))
}

/// A registry row as the API shows it.
fn row(run: &RunSummary) -> Value {
    json!({
        "run_id": run.run_id,
        "state": run.state.as_str(),
        "agent": run.agent,
        "session": run.context_id,
        "parent": run.parent_run_id,
        "origin": run.origin_run_id,
        "input": run.input,
        "answer": run.answer,
        "created_ms": run.created_ms,
        "updated_ms": run.updated_ms,
        "entries": run.entries,
        "owner": run.owner,
        "usage": run.usage,
        "cost_usd": run.cost_usd,
    })
}

/// A journal entry as the API shows it: `seq`, `at_ms`, `kind` and the event. Serialized as
/// it stands: a run of 1,000 iterations has 6,000 entries, and building a `Value` of each
/// first took about half the answer's time (docs/PERFORMANCE.md, "Runs UI").
#[derive(Serialize)]
struct Entry<'a> {
    seq: u64,
    at_ms: u64,
    kind: &'static str,
    event: &'a agentloop::Event,
}

fn entry(seq: u64, at_ms: u64, event: &agentloop::Event) -> Entry<'_> {
    Entry { seq, at_ms, kind: event.kind(), event }
}

/// The answer of `GET /ui/api/runs/{id}`.
#[derive(Serialize)]
struct Journal<'a> {
    run: Option<Value>,
    entries: Vec<Entry<'a>>,
}

/// `GET /ui/api/runs`: `{runs: [...], next: cursor|null}`, newest first.
pub(crate) async fn list(
    State(state): Shared,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Response {
    if let Some(refused) = refusal(&state, &headers) {
        return refused;
    }
    let result = async {
        let Query(query) = query.map_err(|rejection| {
            ApiError::bad_request(format!("bad query: {}", rejection.body_text()))
        })?;
        let (filter, limit) = filter_of(query)?;
        // One more than the page, to know whether another page follows.
        let mut runs =
            state.service.list(&filter.limit(limit + 1)).await.map_err(|e| ApiError::store(&e))?;
        let more = runs.len() > limit;
        runs.truncate(limit);
        let next = more.then(|| runs.last().map(|run| encode_cursor(&run.cursor()))).flatten();
        let runs: Vec<Value> = runs.iter().map(row).collect();
        Ok::<_, ApiError>(json!({"runs": runs, "next": next}))
    }
    .await;
    match result {
        Ok(body) => no_store(Json(body).into_response()),
        Err(error) => error.into_response(),
    }
}

/// The registry row of a run whose journal starts with `first` (runs are listed by creation
/// time, so the row is found among the runs created in that millisecond).
async fn summary_of(
    state: &UiState,
    run_id: &str,
    first: &JournalEntry,
) -> Result<Option<RunSummary>, ApiError> {
    let filter = RunFilter::all().created_between(first.at_ms, first.at_ms.saturating_add(1));
    let runs = state.service.list(&filter).await.map_err(|e| ApiError::store(&e))?;
    Ok(runs.into_iter().find(|run| run.run_id == run_id))
}

/// `GET /ui/api/runs/{id}`: `{run: row|null, entries: [...]}`; 404 for an unknown run.
pub(crate) async fn run(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
) -> Response {
    if let Some(refused) = refusal(&state, &headers) {
        return refused;
    }
    let result = async {
        let entries = state.service.store().load(&run_id).await.map_err(|e| ApiError::store(&e))?;
        let Some(first) = entries.first() else {
            return Err(ApiError::not_found("no such run"));
        };
        let summary = summary_of(&state, &run_id, first).await?;
        let shown = entries.iter().map(|e| entry(e.seq, e.at_ms, &e.event)).collect();
        let body = Journal { run: summary.as_ref().map(row), entries: shown };
        Ok(no_store(Json(body).into_response()))
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}

/// The seq after the one `Last-Event-ID` names (0 without the header).
fn resume_from(headers: &HeaderMap) -> Result<u64, ApiError> {
    let Some(value) = headers.get("last-event-id") else { return Ok(0) };
    let text = value.to_str().unwrap_or_default().trim();
    if text.is_empty() {
        return Ok(0);
    }
    let seq: u64 = text
        .parse()
        .map_err(|_| ApiError::bad_request("Last-Event-ID: expected an event id (a seq)"))?;
    Ok(seq.saturating_add(1))
}

/// What a watcher of a run's text deltas gets next: `None` once there is nothing more to
/// watch (never, without a watch).
async fn next_delta(deltas: &mut Option<broadcast::Receiver<Envelope>>) -> Option<Envelope> {
    let Some(receiver) = deltas else { return std::future::pending().await };
    loop {
        match receiver.recv().await {
            Ok(envelope) => return Some(envelope),
            // Missed some: the journal has the whole text once the model answered.
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}

/// A stream-only event as the `delta` SSE event has it: `{"kind", "delta"}` for the text and
/// the reasoning the model streams; `None` for the rest.
fn delta(envelope: &Envelope) -> Option<String> {
    let (kind, text) = match &envelope.event {
        Event::TextDelta { delta } => ("text", delta),
        Event::ReasoningDelta { delta } => ("reasoning", delta),
        _ => return None,
    };
    Some(json!({"kind": kind, "delta": text, "after_seq": envelope.seq}).to_string())
}

/// `GET /ui/api/runs/{id}/events`: the run's journal entries over SSE (event id: `seq`),
/// from the start or after `Last-Event-ID`, until the run stops; then an `end` event (none
/// when the store fails: the stream closes after an `error` event, and the client resumes).
/// While this process executes the run, the text the model streams comes between them as
/// `delta` events (no id: a resumed stream does not replay them).
pub(crate) async fn events(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
) -> Response {
    if let Some(refused) = refusal(&state, &headers) {
        return refused;
    }
    let from = match resume_from(&headers) {
        Ok(from) => from,
        Err(error) => return error.into_response(),
    };
    match state.service.store().next_seq(&run_id).await {
        Ok(0) => return ApiError::not_found("no such run").into_response(),
        Ok(_) => {}
        Err(error) => return ApiError::store(&error).into_response(),
    }
    let mut deltas = state.hosts.iter().find_map(|host| host.watch_deltas(&run_id));
    let mut journal = state.service.subscribe(&run_id, from);
    let stream = async_stream::stream! {
        loop {
            let next = tokio::select! {
                biased;
                entry = journal.next() => Next::Entry(entry),
                delta = next_delta(&mut deltas) => Next::Delta(delta),
            };
            match next {
                Next::Entry(None) => break,
                Next::Entry(Some(Ok(envelope))) => {
                    let shown = entry(envelope.seq, envelope.at_ms, &envelope.event);
                    match serde_json::to_string(&shown) {
                        Ok(data) => yield SseEvent::default().id(envelope.seq.to_string()).data(data),
                        Err(error) => {
                            tracing::warn!(%error, "ui api: an entry could not be encoded");
                            yield SseEvent::default().event("error")
                                .data(r#"{"message":"an entry could not be encoded"}"#);
                            return;
                        }
                    }
                }
                Next::Entry(Some(Err(error))) => {
                    // No `end`: the client reconnects with the last id it saw.
                    tracing::warn!(%error, "ui api: a subscription failed");
                    yield SseEvent::default().event("error")
                        .data(r#"{"message":"the run store failed"}"#);
                    return;
                }
                Next::Delta(None) => deltas = None,
                Next::Delta(Some(envelope)) => {
                    if let Some(data) = delta(&envelope) {
                        yield SseEvent::default().event("delta").data(data);
                    }
                }
            }
        }
        yield SseEvent::default().event("end").data("{}");
    };
    let stream = stream.map(Ok::<_, std::convert::Infallible>);
    no_store(
        Sse::new(stream).keep_alive(KeepAlive::new().interval(state.keep_alive)).into_response(),
    )
}

/// What the events stream waits for: the journal's next entry or a delta.
enum Next {
    Entry(Option<Result<Envelope, agentloop::store::StoreError>>),
    Delta(Option<Envelope>),
}

/// Any other path under `/ui/api/`.
pub(crate) async fn not_found() -> Response {
    ApiError::not_found("no such API endpoint (see docs/UI.md)").into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let cursor = RunCursor { created_ms: 17, run_id: "a:b/c".to_owned() };
        assert_eq!(decode_cursor(&encode_cursor(&cursor)).unwrap(), cursor);
        assert!(decode_cursor("not a cursor").is_err());
        assert!(
            decode_cursor(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("x:y")).is_err()
        );
    }
}
