//! The UI's actions, each a POST with a JSON body: start or continue a conversation, answer
//! a run's question, decide on a deferred call, cancel, pause or resume a run, fork it.
//! Each goes through the run service and the served agent's host, so it works whichever
//! process or worker executes the run: a run of an A2A task is continued as its task (in its
//! session), another run of a served agent by its host (here, or by a worker when the host
//! queues), and a run of an agent not served here is only recorded (its executor applies
//! the request when it resumes the run).
//!
//! Cross-site requests cannot act: an action must carry `Content-Type: application/json`
//! (which a form cannot send, and which makes a browser ask first from another origin), is
//! refused when `Sec-Fetch-Site` says another site sent it or `Origin` names another host,
//! and needs the server's credentials when it has some.

use super::{refusal, ApiError, UiState};
use crate::tasks::{decider_name, Host};
use a2a::A2AError;
use agentloop::event::{Event, ForkEdit};
use agentloop::run::Decision;
use agentloop::service::ServiceError;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type Shared = State<Arc<UiState>>;
type Body<T> = Result<Json<T>, JsonRejection>;

/// The refusal of a request that may not act: without the server's credentials, or sent
/// from another site.
fn admit(state: &UiState, headers: &HeaderMap) -> Option<Response> {
    if let Some(refused) = refusal(state, headers) {
        return Some(refused);
    }
    let forbidden = |why: &str| {
        Some(ApiError::new(StatusCode::FORBIDDEN, format!("cross-site request refused: {why}")))
    };
    let text = |name: header::HeaderName| {
        headers.get(name).map(|value| value.to_str().unwrap_or_default().to_owned())
    };
    let refused = if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site"))
        .filter(|site| !matches!(site.as_str(), "same-origin" | "none"))
    {
        forbidden(&format!("Sec-Fetch-Site is {site}"))
    } else if let Some(origin) = text(header::ORIGIN) {
        let authority = origin.split_once("://").map_or("", |(_, rest)| rest);
        let host = text(header::HOST).unwrap_or_default();
        if authority.is_empty() || authority != host {
            forbidden("Origin is not this server")
        } else {
            None
        }
    } else {
        None
    };
    refused.map(IntoResponse::into_response)
}

/// The body, or a 400/415 that says what is wrong with it.
fn parsed<T>(body: Body<T>) -> Result<T, ApiError> {
    body.map(|Json(body)| body).map_err(|rejection| {
        ApiError::new(rejection.status(), format!("bad body: {}", rejection.body_text()))
    })
}

fn service_error(error: ServiceError) -> ApiError {
    match error {
        ServiceError::Store(error) => ApiError::store(&error),
        ServiceError::NotFound(_) => ApiError::not_found("no such run"),
        refused @ (ServiceError::NotAwaitingApproval { .. }
        | ServiceError::NotAwaitingInput(_)
        | ServiceError::ForkPoint { .. }) => {
            ApiError::new(StatusCode::CONFLICT, refused.to_string())
        }
        other => {
            tracing::warn!(error = %other, "ui api: an action failed");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string())
        }
    }
}

fn a2a_error(error: A2AError) -> ApiError {
    use a2a::error_code as code;
    let status = match error.code {
        code::INVALID_PARAMS | code::INVALID_REQUEST => StatusCode::BAD_REQUEST,
        code::TASK_NOT_FOUND => StatusCode::NOT_FOUND,
        code::TASK_NOT_CANCELABLE | code::UNSUPPORTED_OPERATION => StatusCode::CONFLICT,
        code::CONTENT_TYPE_NOT_SUPPORTED => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        crate::tasks::QUEUE_FULL => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, error.message)
}

/// Who a run belongs to: the host serving its agent (if any here), and its A2A context when
/// it is a task of that host.
struct Target {
    host: Option<Arc<Host>>,
    context: Option<String>,
    agent: Option<String>,
}

async fn target(state: &UiState, run_id: &str) -> Result<Target, ApiError> {
    let entries =
        state.service.store().load_from(run_id, 0).await.map_err(|e| ApiError::store(&e))?;
    let Some(first) = entries.first() else { return Err(ApiError::not_found("no such run")) };
    let Event::RunStarted { config, .. } = &*first.event else {
        return Err(ApiError::new(StatusCode::CONFLICT, "the run's journal has no start"));
    };
    let host = config
        .agent
        .as_deref()
        .and_then(|agent| state.hosts.iter().find(|host| host.served().name() == agent))
        .cloned();
    let context = match (&host, &config.context_id) {
        (Some(host), Some(session)) => host.context_of(session).map(str::to_owned),
        _ => None,
    };
    Ok(Target { host, context, agent: config.agent.clone() })
}

/// What an action answers: the run, and whether something here (or a worker) continues it.
fn done(run_id: &str, target: &Target, continued: bool) -> Response {
    let note = if continued {
        None
    } else {
        Some(format!(
            "recorded; agent '{}' is not served here, so the run goes on when its executor \
             resumes it (agentloop runs resume {run_id})",
            target.agent.as_deref().unwrap_or("(unnamed)")
        ))
    };
    let body = json!({"run_id": run_id, "continued": continued, "note": note});
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// Runs `action` once the request may act ([`admit`]); its error as the answer.
async fn acting(
    state: &UiState,
    headers: &HeaderMap,
    action: impl std::future::Future<Output = Result<Response, ApiError>>,
) -> Response {
    if let Some(refused) = admit(state, headers) {
        return refused;
    }
    action.await.unwrap_or_else(IntoResponse::into_response)
}

/// A message to the task `run_id` of `host` (an answer or a decision), continued as A2A does.
async fn to_task(host: &Arc<Host>, run_id: &str, part: a2a::Part) -> Result<(), ApiError> {
    let mut message = a2a::Message::new(a2a::Role::User, vec![part]);
    message.task_id = Some(run_id.to_owned());
    // The run goes on in a task of its own; nobody here listens to its events.
    drop(host.send(&message, None).await.map_err(a2a_error)?);
    Ok(())
}

/// The body of an action that may give a reason.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReasonBody {
    reason: Option<String>,
}

/// `POST /ui/api/runs/{id}/cancel` `{"reason"?}`.
pub(crate) async fn cancel(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    body: Body<ReasonBody>,
) -> Response {
    acting(&state, &headers, async {
        let body = parsed(body)?;
        let target = target(&state, &run_id).await?;
        match &target.host {
            Some(host) => {
                drop(host.cancel(&run_id).await.map_err(a2a_error)?);
            }
            None => {
                let reason = body.reason.unwrap_or_else(|| "cancelled from the UI".to_owned());
                state.service.cancel(&run_id, reason).await.map_err(service_error)?;
            }
        }
        Ok(done(&run_id, &target, target.host.is_some()))
    })
    .await
}

/// `POST /ui/api/runs/{id}/pause` `{"reason"?}`: the executor pauses at its next safe point.
pub(crate) async fn pause(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    body: Body<ReasonBody>,
) -> Response {
    acting(&state, &headers, async {
        let body = parsed(body)?;
        let target = target(&state, &run_id).await?;
        let reason = body.reason.unwrap_or_else(|| "paused from the UI".to_owned());
        state.service.pause(&run_id, reason).await.map_err(|e| ApiError::store(&e))?;
        Ok(done(&run_id, &target, true))
    })
    .await
}

/// `POST /ui/api/runs/{id}/resume` `{}`: the executor goes on after a pause.
pub(crate) async fn resume(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    body: Body<ReasonBody>,
) -> Response {
    acting(&state, &headers, async {
        parsed(body)?;
        let target = target(&state, &run_id).await?;
        state.service.resume(&run_id).await.map_err(|e| ApiError::store(&e))?;
        Ok(done(&run_id, &target, true))
    })
    .await
}

/// A decision's kind.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    Approve,
    Reject,
}

/// The body of `decide`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecideBody {
    call_id: String,
    decision: Verdict,
    reason: Option<String>,
    /// Who decides, as the person at the page named themselves.
    by: Option<String>,
}

/// Who decided from the page, as the journal records it: `ui:` and the name given
/// ([`decider_name`]), or `ui`.
fn decided_by(by: Option<String>) -> String {
    match decider_name(&by.unwrap_or_default()) {
        name if name.is_empty() => "ui".to_owned(),
        name => format!("ui:{name}"),
    }
}

/// `POST /ui/api/runs/{id}/decide`
/// `{"call_id", "decision": "approve"|"reject", "reason"?, "by"?}`: journaled as decided by
/// `ui:{by}` (`ui` without a name).
pub(crate) async fn decide(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    body: Body<DecideBody>,
) -> Response {
    acting(&state, &headers, async {
        let body = parsed(body)?;
        let target = target(&state, &run_id).await?;
        let reason = body.reason.filter(|r| !r.trim().is_empty());
        let by = decided_by(body.by);
        if let (Some(host), Some(_)) = (&target.host, &target.context) {
            let mut data = json!({"callId": body.call_id, "by": by});
            data["decision"] = Value::from(match body.decision {
                Verdict::Approve => "approve",
                Verdict::Reject => "reject",
            });
            if let Some(reason) = reason {
                data["reason"] = Value::from(reason);
            }
            to_task(host, &run_id, a2a::Part::data(data)).await?;
            return Ok(done(&run_id, &target, true));
        }
        let decision = match body.decision {
            Verdict::Approve => Decision::Approve,
            Verdict::Reject => Decision::Reject {
                reason: reason.unwrap_or_else(|| "rejected from the UI".to_owned()),
            },
        };
        let decided = state.service.decide_by(&run_id, &body.call_id, decision, Some(by)).await;
        decided.map_err(service_error)?;
        continue_recorded(&run_id, &target).await
    })
    .await
}

/// After a request recorded through the service: the host of the run's agent continues it.
async fn continue_recorded(run_id: &str, target: &Target) -> Result<Response, ApiError> {
    match &target.host {
        Some(host) => {
            host.continue_recorded(run_id).await.map_err(a2a_error)?;
            Ok(done(run_id, target, true))
        }
        None => Ok(done(run_id, target, false)),
    }
}

/// The body of `answer` and `chat`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerBody {
    text: String,
}

fn text_of(text: String) -> Result<String, ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("text: must not be empty"));
    }
    Ok(text)
}

/// `POST /ui/api/runs/{id}/answer` `{"text"}`: answers the question the run stopped to ask.
pub(crate) async fn answer(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    body: Body<AnswerBody>,
) -> Response {
    acting(&state, &headers, async {
        let text = text_of(parsed(body)?.text)?;
        let target = target(&state, &run_id).await?;
        if let (Some(host), Some(_)) = (&target.host, &target.context) {
            to_task(host, &run_id, a2a::Part::text(text)).await?;
            return Ok(done(&run_id, &target, true));
        }
        state.service.send_input(&run_id, text).await.map_err(service_error)?;
        continue_recorded(&run_id, &target).await
    })
    .await
}

/// The body of `fork`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    at_seq: u64,
    edit: Option<ForkEdit>,
}

/// `POST /ui/api/runs/{id}/fork` `{"at_seq", "edit"?}`: a new run from the journal up to
/// `at_seq` with the edit (`{"kind": "tool_result", "call_id", "result"}`,
/// `{"kind": "user_message", "text"}` or `{"kind": "model_answer", "text"}`), continued by the
/// host of its agent. Answers
/// `{"run_id": fork, …}`.
pub(crate) async fn fork(
    State(state): Shared,
    headers: HeaderMap,
    Path(run_id): Path<String>,
    body: Body<ForkBody>,
) -> Response {
    acting(&state, &headers, async {
        let body = parsed(body)?;
        let target = target(&state, &run_id).await?;
        let fork_id =
            state.service.fork(&run_id, body.at_seq, body.edit).await.map_err(service_error)?;
        let continued = match &target.host {
            Some(host) => {
                host.continue_stored(&fork_id).await.map_err(a2a_error)?;
                true
            }
            None => false,
        };
        Ok(done(&fork_id, &target, continued))
    })
    .await
}

/// The body of `chat`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChatBody {
    agent: Option<String>,
    session: Option<String>,
    text: String,
}

/// `POST /ui/api/chat` `{"text", "agent"?, "session"?}`: a new run of the agent (the first
/// served by default) in the session — a new conversation without one, the next turn of
/// that conversation with one (as an A2A message with that `contextId`). Answers
/// `{"run_id", "session"}`.
pub(crate) async fn chat(
    State(state): Shared,
    headers: HeaderMap,
    body: Body<ChatBody>,
) -> Response {
    acting(&state, &headers, async {
        let body = parsed(body)?;
        let text = text_of(body.text)?;
        let host = match body.agent.as_deref().filter(|a| !a.is_empty()) {
            Some(agent) => state.hosts.iter().find(|h| h.served().name() == agent),
            None => state.hosts.first(),
        }
        .ok_or_else(|| ApiError::not_found("no such agent served here"))?;
        let mut message = a2a::Message::new(a2a::Role::User, vec![a2a::Part::text(text)]);
        // A session as the list shows it (`a2a/{agent}/{context}`) or the bare context.
        message.context_id = body
            .session
            .filter(|s| !s.trim().is_empty())
            .map(|s| host.context_of(&s).map_or(s.clone(), str::to_owned));
        let accepted = host.send(&message, None).await.map_err(a2a_error)?;
        let body = json!({"run_id": accepted.task.id, "session": accepted.task.context_id,
            "agent": host.served().name()});
        Ok((StatusCode::ACCEPTED, Json(body)).into_response())
    })
    .await
}

/// `GET /ui/api/agents`: `{"agents": [{"name", "description", "queued"}], "trace_url"}`,
/// the agents served here (a chat can start a run of each) and the link to a run's trace.
pub(crate) async fn agents(State(state): Shared, headers: HeaderMap) -> Response {
    if let Some(refused) = refusal(&state, &headers) {
        return refused;
    }
    let agents: Vec<Value> = state
        .hosts
        .iter()
        .map(|host| {
            json!({"name": host.served().name(), "description": host.served().description,
                "queued": host.is_queued()})
        })
        .collect();
    Json(json!({"agents": agents, "trace_url": state.trace_url})).into_response()
}
