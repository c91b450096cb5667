//! The async driver: carries out the [`Run`]'s steps (provider stream, tool execution with a
//! concurrency limit, cancellation) and streams every event. It decides nothing: every branch
//! that decides lives in [`Run`].
//!
//! Event order: the model's deltas as they arrive, then the turn's reasoning, text (not for
//! the final answer) and detected calls; then for each call `step_started`, `tool_started`,
//! its result event and `step_completed`. With a concurrency limit of 1 the calls' groups
//! follow each other in call order; with more, each call's own events keep that order but
//! the groups interleave as the calls start and finish. Results always join the history in
//! call order.

use crate::event::Event;
use crate::provider::{Provider, ProviderError, ResponseAssembler, StreamChunk};
use crate::run::{Run, RunError, Step};
use crate::tool::{parse_arguments, ToolContext, ToolExecution, ToolExecutor};
use futures::stream::{BoxStream, FuturesUnordered};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A stream of run events.
pub type EventStream = BoxStream<'static, Event>;

/// What the driver needs besides the run: the model, the tools and how to run them.
#[derive(Clone)]
pub(crate) struct Driver {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) tools: Arc<ToolExecutor>,
    /// Tool calls of one model turn that may run at once.
    pub(crate) concurrency: usize,
}

/// How a model call ended, as seen by the driver.
enum ModelCall {
    Responded,
    Failed(ProviderError),
    Cancelled,
}

impl Driver {
    /// Drives `run` to its end, streaming every event. Cancelling `cancel` stops the
    /// in-flight model call and tools and ends the run with `run_cancelled`; dropping the
    /// stream drops them too.
    pub(crate) fn drive(self, mut run: Run, cancel: CancellationToken) -> EventStream {
        Box::pin(async_stream::stream! {
            let run_id: Arc<str> = Arc::from(run.run_id());
            let metadata = Arc::new(run.config().metadata.clone());
            loop {
                if cancel.is_cancelled() {
                    run.cancel("cancelled by the caller");
                }
                let step = run.next_step();
                for event in run.drain_events() {
                    yield event;
                }
                match step {
                    Step::Finish(_) => break,
                    Step::CallModel(request) => {
                        let started = Instant::now();
                        let mut chunks = self.provider.stream(request);
                        let mut assembler = ResponseAssembler::default();
                        let ended = loop {
                            let next = tokio::select! {
                                biased;
                                () = cancel.cancelled() => break ModelCall::Cancelled,
                                next = chunks.next() => next,
                            };
                            match next {
                                None => break ModelCall::Responded,
                                Some(Err(error)) => break ModelCall::Failed(error),
                                Some(Ok(chunk)) => {
                                    if let Some(event) = delta_event(&chunk) {
                                        yield event;
                                    }
                                    if let Err(error) = assembler.push(chunk) {
                                        break ModelCall::Failed(error);
                                    }
                                }
                            }
                        };
                        drop(chunks);
                        let fed = match ended {
                            ModelCall::Responded => run.model_responded(assembler.finish(), started.elapsed()),
                            ModelCall::Failed(error) => run.model_failed(error),
                            ModelCall::Cancelled => {
                                run.cancel("cancelled by the caller");
                                Ok(())
                            }
                        };
                        fail_on_error(&mut run, fed);
                    }
                    Step::CallTools(calls) => {
                        let mut queue = calls.into_iter();
                        let mut running = FuturesUnordered::new();
                        loop {
                            if run.is_finished() {
                                break;
                            }
                            while running.len() < self.concurrency && !run.is_finished() {
                                let Some(call) = queue.next() else { break };
                                let arguments = parse_arguments(&call.arguments);
                                let started = run.tool_started(&call.id, arguments.as_ref().ok().cloned());
                                fail_on_error(&mut run, started);
                                for event in run.drain_events() {
                                    yield event;
                                }
                                let ctx = ToolContext {
                                    run_id: run_id.clone(),
                                    idempotency_key: format!("{run_id}:{}", call.id),
                                    call_id: call.id.clone(),
                                    cancel: cancel.child_token(),
                                    metadata: metadata.clone(),
                                };
                                let tools = self.tools.clone();
                                running.push(async move {
                                    let execution = tools.execute(&call.name, arguments, ctx).await;
                                    (call.id, execution)
                                });
                            }
                            let next = tokio::select! {
                                biased;
                                () = cancel.cancelled() => None,
                                next = running.next() => Some(next),
                            };
                            match next {
                                // Every call of the turn has finished.
                                Some(None) => break,
                                Some(Some((call_id, ToolExecution { result, duration }))) => {
                                    let fed = run.tool_finished(&call_id, result, duration);
                                    fail_on_error(&mut run, fed);
                                    for event in run.drain_events() {
                                        yield event;
                                    }
                                }
                                None => {
                                    // Cancelled: drop the running tools' futures.
                                    drop(running);
                                    run.cancel("cancelled by the caller");
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        })
    }
}

/// A command the run refused means the driver and the run disagree: end the run rather than
/// loop.
fn fail_on_error(run: &mut Run, result: Result<(), RunError>) {
    if let Err(error) = result {
        tracing::error!(%error, "driver: the run refused a result");
        run.fail(format!("internal error: {error}"));
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
