//! One model call: `before_model` hooks, the provider stream with its deltas, cancellation,
//! `after_model` hooks, and the result fed to the run.

use super::{fail_hook, fail_on_error, Driver, Scope};
use crate::event::Event;
use crate::provider::{ModelRequest, ModelResponse, ProviderError, ResponseAssembler, StreamChunk};
use crate::run::Run;
use futures::{Stream, StreamExt};
use std::time::Instant;

/// How a model call ended, as seen by the driver.
enum ModelCall {
    Responded(ModelResponse),
    Failed(ProviderError),
    Cancelled,
}

impl Driver {
    pub(super) fn model_call<'a>(
        &'a self,
        run: &'a mut Run,
        scope: &'a Scope,
        request: ModelRequest,
    ) -> impl Stream<Item = Event> + Send + 'a {
        async_stream::stream! {
            let mut events = Vec::new();
            let ctx = scope.hook_context(run);
            let request = if self.hooks.is_empty() {
                Ok(request)
            } else {
                match self.hooks.before_model(&ctx, request, &mut events).await {
                    Ok(request) => request,
                    Err(failure) => {
                        fail_hook(run, failure);
                        for event in events.drain(..).chain(run.drain_events()) {
                            yield event;
                        }
                        return;
                    }
                }
            };
            for event in events.drain(..) {
                yield event;
            }
            let started = Instant::now();
            let ended = match request {
                // A hook answered instead of the model.
                Err(response) => ModelCall::Responded(response),
                Ok(request) => {
                    let mut attempt = 1u32;
                    loop {
                        let mut chunks = self.provider.stream(request.clone());
                        let mut assembler = ResponseAssembler::default();
                        let mut delivered = false;
                        let ended = loop {
                            let next = tokio::select! {
                                biased;
                                () = scope.control.cancel.cancelled() => break ModelCall::Cancelled,
                                next = chunks.next() => next,
                            };
                            match next {
                                None => break ModelCall::Responded(std::mem::take(&mut assembler).finish()),
                                Some(Err(error)) => break ModelCall::Failed(error),
                                Some(Ok(chunk)) => {
                                    if let Some(event) = delta_event(&chunk) {
                                        delivered = true;
                                        yield event;
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
                        // Retry only what nothing was delivered from: a stream that already
                        // streamed content to the caller is not silently re-sent (the run
                        // decides).
                        let delay = match &ended {
                            ModelCall::Failed(error) if !delivered => {
                                self.retry.as_ref().and_then(|policy| policy.next_delay(attempt, error))
                            }
                            _ => None,
                        };
                        let (Some(delay), ModelCall::Failed(error)) = (delay, &ended) else { break ended };
                        yield Event::ModelRetrying { attempt, delay_ms: crate::run::millis(delay), error: error.clone() };
                        tokio::select! {
                            biased;
                            () = scope.control.cancel.cancelled() => break ModelCall::Cancelled,
                            () = tokio::time::sleep(delay) => {}
                        }
                        attempt += 1;
                    }
                }
            };
            scope.tick(run);
            match ended {
                ModelCall::Responded(response) => {
                    let observed = if self.hooks.is_empty() {
                        Ok(())
                    } else {
                        self.hooks.after_model(&ctx, &response, &mut events).await
                    };
                    match observed {
                        Ok(()) => {
                            let fed = run.model_responded(response, started.elapsed());
                            fail_on_error(run, fed);
                        }
                        Err(failure) => fail_hook(run, failure),
                    }
                }
                ModelCall::Failed(error) => {
                    let fed = run.model_failed(error);
                    fail_on_error(run, fed);
                }
                ModelCall::Cancelled => run.cancel(scope.control.cancel_reason()),
            }
            for event in events.drain(..).chain(run.drain_events()) {
                yield event;
            }
        }
    }
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
        StreamChunk::ReasoningEnd { .. }
        | StreamChunk::ToolCallEnd { .. }
        | StreamChunk::Usage { .. }
        | StreamChunk::Finish { .. } => None,
    }
}
