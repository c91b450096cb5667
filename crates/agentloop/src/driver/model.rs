//! One model call: `before_model` hooks, the provider stream with its deltas, cancellation,
//! the attempts under the [`RetryPolicy`](crate::provider::RetryPolicy) (retries before any
//! content, each a streamed `model_retrying`), `after_model` hooks, and the result fed to the
//! run: a response, or one `model_failed` that the run's re-ask rule then judges
//! (`docs/PROVIDERS.md`, "Retries").

use super::partial::PartialOutput;
use super::{fail_hook, fail_on_error, Driver, Outbox, Scope};
use crate::event::Event;
use crate::message::{Message, Part, Role};
use crate::provider::{ModelRequest, ModelResponse, ProviderError, ResponseAssembler, StreamChunk};
use crate::run::Run;
use futures::StreamExt;
use std::time::Instant;

/// How a model call ended, as seen by the driver.
enum ModelCall {
    Responded(ModelResponse),
    Failed(ProviderError),
    Cancelled,
}

impl Driver {
    pub(super) async fn model_call(
        &self,
        run: &mut Run,
        scope: &Scope,
        request: ModelRequest,
        out: &Outbox,
    ) {
        let mut events = Vec::new();
        let ctx = scope.hook_context(run);
        let request = if self.hooks.is_empty() {
            Ok(request)
        } else {
            match self.hooks.before_model(&ctx, request, &mut events).await {
                Ok(request) => request,
                Err(failure) => {
                    fail_hook(run, failure);
                    out.send(events.drain(..).chain(run.drain_events())).await;
                    return;
                }
            }
        };
        out.send(events.drain(..)).await;
        let started = Instant::now();
        let ended = match request {
            // A hook answered instead of the model.
            Err(response) => ModelCall::Responded(response),
            Ok(mut request) => {
                if let Some(observer) = &self.observer {
                    request.trace_parent = observer.trace_parent(None);
                }
                // One waiter for the whole call (registering one per chunk costs a lock and
                // an unregistration each time): a cancellation, or the deadline — the run's
                // time limit, or the wind-down call's own budget.
                let deadline = if run.is_winding_down() {
                    Some(started + run.config().wind_down_timeout())
                } else {
                    scope.deadline
                };
                let mut cancelled = std::pin::pin!(scope.interrupted(deadline));
                let output = if self.quiet { None } else { run.config().output.as_ref() };
                let mut attempt = 1u32;
                let whole = !self.provider.streams();
                loop {
                    // How the attempt ended, and whether content reached the caller.
                    let (ended, delivered) = if whole {
                        // The provider gets the whole response anyway: take it as it is.
                        let next = tokio::select! {
                            biased;
                            () = &mut cancelled => None,
                            next = self.provider.complete(request.clone()) => Some(next),
                        };
                        let ended = match next {
                            None => ModelCall::Cancelled,
                            Some(Ok(response)) => {
                                let typed = PartialOutput::of_whole(output, &response);
                                let response =
                                    as_streamed(response, (!self.quiet).then_some(&mut events));
                                events.extend(typed);
                                out.send(events.drain(..)).await;
                                ModelCall::Responded(response)
                            }
                            Some(Err(error)) => ModelCall::Failed(error),
                        };
                        (ended, false)
                    } else {
                        let mut chunks = self.provider.stream(request.clone());
                        let mut assembler = ResponseAssembler::default();
                        let mut partial = PartialOutput::new(output);
                        let mut delivered = false;
                        let ended = loop {
                            let next = tokio::select! {
                                biased;
                                () = &mut cancelled => break ModelCall::Cancelled,
                                next = chunks.next() => next,
                            };
                            match next {
                                None => {
                                    if let Some(partial) = &mut partial {
                                        out.push(partial.finish());
                                    }
                                    break ModelCall::Responded(
                                        std::mem::take(&mut assembler).finish(),
                                    );
                                }
                                Some(Err(error)) => break ModelCall::Failed(error),
                                Some(Ok(chunk)) => {
                                    // A delta counts as delivered whether or not it is
                                    // streamed, so that retries do not depend on `quiet`.
                                    if is_delta(&chunk) {
                                        delivered = true;
                                        if !self.quiet {
                                            // Handed out when the driver next
                                            // waits (for the network, at the latest).
                                            out.push(delta_event(&chunk));
                                            if let Some(partial) = &mut partial {
                                                out.push(partial.push(&chunk));
                                            }
                                        }
                                    }
                                    if let Err(error) = assembler.push(chunk) {
                                        break ModelCall::Failed(error);
                                    }
                                }
                            }
                        };
                        // `chunks` (and the request it holds) is dropped before the run
                        // appends to the history it shares.
                        drop(chunks);
                        (ended, delivered)
                    };
                    // Retry only what nothing was delivered from: a stream that already
                    // streamed content to the caller is not silently re-sent (the run
                    // decides).
                    let mut ended = ended;
                    let delay = match &mut ended {
                        ModelCall::Failed(error) if !delivered => {
                            self.retry.as_ref().and_then(|policy| {
                                if error.is_unreachable() {
                                    scope.unreachable_delay(policy, error)
                                } else {
                                    policy.next_delay_within(attempt, error, started.elapsed())
                                }
                            })
                        }
                        _ => None,
                    };
                    let (Some(delay), ModelCall::Failed(error)) = (delay, &ended) else {
                        break ended;
                    };
                    let retrying = Event::ModelRetrying {
                        attempt,
                        delay_ms: crate::run::millis(delay),
                        error: error.clone(),
                    };
                    out.send([retrying]).await;
                    tokio::select! {
                        biased;
                        () = &mut cancelled => break ModelCall::Cancelled,
                        () = tokio::time::sleep(delay) => {}
                    }
                    attempt += 1;
                }
            }
        };
        let now = Instant::now();
        scope.tick_at(run, now);
        match &ended {
            ModelCall::Failed(error) if error.is_unreachable() => {}
            ModelCall::Cancelled => {}
            _ => scope.reached(),
        }
        match ended {
            ModelCall::Responded(response) => {
                let observed = if self.hooks.is_empty() {
                    Ok(())
                } else {
                    self.hooks.after_model(&ctx, &response, &mut events).await
                };
                match observed {
                    Ok(()) => {
                        let fed = run.model_responded(response, now - started);
                        fail_on_error(run, fed);
                    }
                    Err(failure) => fail_hook(run, failure),
                }
            }
            ModelCall::Failed(error) => {
                let fed = run.model_failed(error);
                fail_on_error(run, fed);
            }
            ModelCall::Cancelled if scope.control.cancel.is_cancelled() => {
                run.cancel(scope.control.cancel_reason());
            }
            // The deadline passed while the call was going on.
            ModelCall::Cancelled => {
                let fed = run.time_limit_passed();
                fail_on_error(run, fed);
            }
        }
        let made = events.drain(..).chain(run.drain_events());
        if self.hooks.is_empty() {
            // Not waited for: without hooks nothing runs before the driver's next step sends
            // these with what it makes at once (the iteration's end, the run's end), so a
            // journal commits them together, before the next side effect starts.
            out.push(made);
        } else {
            // Hooks (user code) run first: the answer is the caller's (and the journal's) now.
            out.send(made).await;
        }
    }
}

/// A whole response as the chunk path would have delivered it: the delta events its chunks
/// would have streamed (added to `events`, unless it is `None`), and the response as
/// [`ResponseAssembler`] would have rebuilt it from them (assistant role, adjacent text parts
/// joined, only text, reasoning, tool-call, opaque and citation parts), without the chunks.
fn as_streamed(response: ModelResponse, mut events: Option<&mut Vec<Event>>) -> ModelResponse {
    let ModelResponse { message, finish_reason, usage, id, model, provider } = response;
    let mut parts: Vec<Part> = Vec::with_capacity(message.content.len());
    let mut emit = |event: &dyn Fn() -> Event| {
        if let Some(events) = events.as_mut() {
            events.push(event());
        }
    };
    for part in message.content {
        match part {
            Part::Text { text } => {
                emit(&|| Event::TextDelta { delta: text.clone() });
                match parts.last_mut() {
                    Some(Part::Text { text: current }) => current.push_str(&text),
                    _ => parts.push(Part::Text { text }),
                }
            }
            Part::Reasoning(reasoning) => {
                if !reasoning.text.is_empty() {
                    emit(&|| Event::ReasoningDelta { delta: reasoning.text.clone() });
                }
                parts.push(Part::Reasoning(reasoning));
            }
            Part::ToolCall(call) => {
                emit(&|| Event::ToolCallStreamStarted {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                });
                if !call.arguments.is_empty() {
                    emit(&|| Event::ToolArgumentsDelta {
                        call_id: call.id.clone(),
                        delta: call.arguments.clone(),
                    });
                }
                parts.push(Part::ToolCall(call));
            }
            Part::Opaque(opaque) => {
                emit(&|| Event::OpaqueContent { part: opaque.clone() });
                parts.push(Part::Opaque(opaque));
            }
            Part::Citation(citation) => {
                emit(&|| Event::Citation { citation: citation.clone() });
                parts.push(Part::Citation(citation));
            }
            Part::Image { .. } | Part::File { .. } | Part::ToolResult(_) => {}
        }
    }
    ModelResponse {
        message: Message { role: Role::Assistant, content: parts },
        finish_reason,
        usage,
        id,
        model,
        provider,
    }
}

/// Whether `chunk` is content the caller sees as a delta event.
fn is_delta(chunk: &StreamChunk) -> bool {
    matches!(
        chunk,
        StreamChunk::TextDelta { .. }
            | StreamChunk::ReasoningDelta { .. }
            | StreamChunk::ToolCallStart { .. }
            | StreamChunk::ToolCallDelta { .. }
            | StreamChunk::Opaque { .. }
            | StreamChunk::Citation { .. }
    )
}

/// The transient event that streams a chunk to the caller, if any.
fn delta_event(chunk: &StreamChunk) -> Option<Event> {
    match chunk {
        StreamChunk::TextDelta { text } => Some(Event::TextDelta { delta: text.clone() }),
        StreamChunk::ReasoningDelta { text } => Some(Event::ReasoningDelta { delta: text.clone() }),
        StreamChunk::ToolCallStart { id, name } => {
            Some(Event::ToolCallStreamStarted { call_id: id.clone(), name: name.clone() })
        }
        StreamChunk::ToolCallDelta { id, delta } => {
            Some(Event::ToolArgumentsDelta { call_id: id.clone(), delta: delta.clone() })
        }
        StreamChunk::Opaque { provider, kind, value } => Some(Event::OpaqueContent {
            part: crate::message::Opaque::new(provider.clone(), kind.clone(), value.clone()),
        }),
        StreamChunk::Citation { provider, value } => Some(Event::Citation {
            citation: crate::message::Citation::from_value(provider.clone(), value.clone()),
        }),
        StreamChunk::ResponseInfo { .. }
        | StreamChunk::Answered { .. }
        | StreamChunk::ReasoningEnd { .. }
        | StreamChunk::ToolCallEnd { .. }
        | StreamChunk::Usage { .. }
        | StreamChunk::Finish { .. } => None,
    }
}

#[cfg(test)]
mod tests;
