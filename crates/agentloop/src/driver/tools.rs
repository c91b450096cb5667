//! The tool calls of one iteration: budget gate, `before_tool` and approval hooks, concurrent
//! execution under the limit, `after_tool` hooks, pause at safe points, cancellation, and the
//! nested events the calls emit while they run.

use super::links::Links;
use super::{fail_hook, fail_on_error, wait_for_resume, Driver, Outbox, Scope};
use crate::event::Event;
use crate::hooks::{Approval, CriticalFailure, HookContext};
use crate::message::ToolCall;
use crate::provider::secrets::Secrets;
use crate::run::{Gate, Run, ToolInvocation};
use crate::tool::{parse_arguments, raw_arguments, CallLink, ToolContext, ToolError, ToolOutput};
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use serde_json::Value;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::watch;

/// What the hooks decided before a call.
enum Prepared {
    /// Run it with these arguments (or the argument parse error).
    Run(Result<Value, String>),
    /// Do not run it: this is its result (skip, mock, rejection).
    Answered(Result<ToolOutput, ToolError>),
    /// A human decides; the call waits with these arguments.
    Deferred(Value),
}

/// The running tool futures. Most turns make one call at a time: it runs in a box of its
/// own, and a `FuturesUnordered` is set up only when several run at once.
struct Running<F> {
    one: Option<Pin<Box<F>>>,
    many: Option<FuturesUnordered<F>>,
}

impl<F: Future> Running<F> {
    fn new() -> Self {
        Self { one: None, many: None }
    }

    fn len(&self) -> usize {
        usize::from(self.one.is_some()) + self.many.as_ref().map_or(0, FuturesUnordered::len)
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&mut self, future: F) {
        if self.is_empty() {
            self.one = Some(Box::pin(future));
        } else {
            self.many.get_or_insert_with(FuturesUnordered::new).push(future);
        }
    }

    /// The next future to finish (`None` when none runs).
    async fn next(&mut self) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            if let Some(one) = &mut self.one {
                if let Poll::Ready(output) = one.as_mut().poll(cx) {
                    self.one = None;
                    return Poll::Ready(Some(output));
                }
            }
            if let Some(many) = self.many.as_mut().filter(|many| !many.is_empty()) {
                if let Poll::Ready(Some(output)) = many.poll_next_unpin(cx) {
                    return Poll::Ready(Some(output));
                }
            }
            if self.is_empty() {
                Poll::Ready(None)
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// A finished tool future.
struct Finished {
    call: Arc<ToolCall>,
    result: Result<Result<ToolOutput, ToolError>, CriticalFailure>,
    duration: Duration,
    events: Vec<Event>,
}

impl Driver {
    pub(super) async fn tool_calls(
        &self,
        run: &mut Run,
        scope: &Scope,
        pauses: &mut watch::Receiver<Option<String>>,
        invocations: Vec<ToolInvocation>,
        out: &Outbox,
    ) {
        let mut events = Vec::new();
        let mut queue: VecDeque<ToolInvocation> = invocations.into();
        let mut running = Running::new();
        let mut links = Links::new(!self.quiet);
        let mut cancelled = std::pin::pin!(scope.control.cancel.cancelled());
        let mut deadline = std::pin::pin!(super::sleep_until(scope.deadline));
        let mut deadline_passed = false;
        loop {
            if run.is_ending() {
                break;
            }
            // Start calls up to the limit, unless a pause is requested (a safe point).
            run.request_pause(scope.control.pause_reason());
            let stopping = scope.control.stop.is_cancelled();
            while running.len() < self.concurrency
                && !run.pause_requested()
                && !run.is_ending()
                && !stopping
            {
                let Some(ToolInvocation { call, approved }) = queue.pop_front() else { break };
                scope.tick(run);
                let parsed = parse_arguments(&call.arguments);
                match run.gate_tool_with(&call.id, parsed.as_ref().ok()) {
                    Err(error) => fail_on_error(run, Err(error)),
                    Ok(Gate::Handled) => {}
                    Ok(Gate::Run) => {
                        let ctx = scope.hook_context(run);
                        match self.prepare(&ctx, &call, parsed, approved, &mut events).await {
                            Err(failure) => fail_hook(run, failure),
                            Ok(Prepared::Answered(result)) => {
                                let result = redacted(&self.secrets, result);
                                let fed = run.tool_finished(&call.id, result, Duration::ZERO);
                                fail_on_error(run, fed);
                            }
                            Ok(Prepared::Deferred(arguments)) => {
                                let fed = run.tool_deferred(&call.id, arguments);
                                fail_on_error(run, fed);
                            }
                            Ok(Prepared::Run(arguments)) => {
                                // The tool reads the journaled arguments in place.
                                let (parsed, error) = match arguments {
                                    Ok(arguments) => (Some(arguments), None),
                                    Err(error) => (None, Some(error)),
                                };
                                match run.tool_started(&call.id, parsed) {
                                    Ok(journaled) => {
                                        let arguments = error.map_or(Ok(journaled), Err);
                                        let link = links.link();
                                        running
                                            .push(self.execute(ctx, scope, link, call, arguments));
                                    }
                                    Err(error) => fail_on_error(run, Err(error)),
                                }
                            }
                        }
                    }
                }
                out.send(events.drain(..).chain(run.drain_events())).await;
            }
            if running.is_empty() {
                if queue.is_empty() || run.is_ending() || stopping {
                    break;
                }
                // A pause requested with calls left to start: this is a safe point.
                run.pause_point();
                out.send(run.drain_events()).await;
                wait_for_resume(scope, pauses).await;
                if !scope.control.cancel.is_cancelled() {
                    run.request_pause(scope.control.pause_reason());
                    run.pause_point();
                }
                out.send(run.drain_events()).await;
                if scope.control.cancel.is_cancelled() {
                    run.cancel(scope.control.cancel_reason());
                }
                continue;
            }
            // A call that finished first; nested events while none has (a call that keeps
            // emitting from a task of its own does not hold up the others' results).
            let next = tokio::select! {
                biased;
                () = &mut cancelled => None,
                () = &mut deadline, if !deadline_passed => {
                    // The run's time limit passed: the running calls are stopped and fail;
                    // the calls left are refused by the limit, and the run winds down.
                    deadline_passed = true;
                    out.push(links.take());
                    running = Running::new();
                    scope.tick(run);
                    for call in run.running_calls() {
                        let error = ToolError::Failed(
                            "the run's time limit passed while the tool ran: it was stopped"
                                .to_owned(),
                        );
                        let fed = run.tool_finished(&call.id, Err(error), Duration::ZERO);
                        fail_on_error(run, fed);
                    }
                    out.send(run.drain_events()).await;
                    continue;
                }
                next = running.next() => next,
                () = links.arrived() => {
                    out.send(links.take()).await;
                    continue;
                }
            };
            // What the calls emitted so far comes before what follows.
            out.push(links.take());
            let Some(finished) = next else {
                // Cancelled: drop the running tools' futures.
                running = Running::new();
                run.cancel(scope.control.cancel_reason());
                out.send(run.drain_events()).await;
                break;
            };
            scope.tick(run);
            match finished.result {
                Ok(result) => {
                    let call_id = &finished.call.id;
                    let report = links.report_of(call_id).unwrap_or_default();
                    let fed =
                        run.tool_finished_reporting(call_id, result, finished.duration, report);
                    fail_on_error(run, fed);
                }
                Err(failure) => fail_hook(run, failure),
            }
            let made = finished.events.into_iter().chain(run.drain_events());
            if running.is_empty() && self.hooks.is_empty() {
                // No other call to wait for and no hook to run: what follows at once (the
                // next calls' `tool_started`, or the iteration's end) is sent with these, and
                // a journal commits them together before the next side effect.
                out.push(made);
            } else {
                // Other calls run on, or hooks run next: the result is the caller's (and the
                // journal's) now.
                out.send(made).await;
            }
        }
        drop(running);
    }

    /// Runs the `before_tool` and approval hooks for a call.
    async fn prepare(
        &self,
        ctx: &HookContext,
        call: &ToolCall,
        parsed: Result<Value, String>,
        approved: bool,
        events: &mut Vec<Event>,
    ) -> Result<Prepared, CriticalFailure> {
        if self.hooks.is_empty() {
            return Ok(Prepared::Run(parsed));
        }
        // What the hooks see: the arguments, or the text wrapped when it is not JSON.
        let view = |arguments: &Result<Value, String>| match arguments {
            Ok(arguments) => arguments.clone(),
            Err(_) => raw_arguments::wrap(call.arguments.as_str()),
        };
        let mut arguments = parsed;
        let before = view(&arguments);
        match self.hooks.before_tool(ctx, call, before.clone(), events).await? {
            Err(answer) => return Ok(Prepared::Answered(answer)),
            Ok(rewritten) if rewritten != before => arguments = Ok(rewritten),
            Ok(_) => {}
        }
        if !approved {
            let view = view(&arguments);
            match self.hooks.approve_tool(ctx, call, &view, events).await? {
                Approval::Approve => {}
                Approval::Reject(reason) => {
                    return Ok(Prepared::Answered(Err(ToolError::Rejected(reason))))
                }
                Approval::Defer => return Ok(Prepared::Deferred(view)),
            }
        }
        Ok(Prepared::Run(arguments))
    }

    /// The future of one tool call: the tool under its timeout, then the `after_tool` hooks.
    fn execute(
        &self,
        hook_ctx: HookContext,
        scope: &Scope,
        link: CallLink,
        call: Arc<ToolCall>,
        arguments: Result<Arc<Value>, String>,
    ) -> impl std::future::Future<Output = Finished> + Send + 'static {
        let ctx = ToolContext {
            run_id: scope.run_id.clone(),
            idempotency_key: [&*scope.run_id, ":", &call.id].concat(),
            call_id: call.id.clone(),
            cancel: scope.control.cancel.child_token(),
            metadata: scope.metadata.clone(),
            trace: crate::tool::TraceLink(self.observer.clone().map(|observer| {
                Arc::new(super::ObserverTrace(observer)) as Arc<dyn crate::tool::CallTrace>
            })),
            link,
        };
        let tools = self.tools.clone();
        let hooks = self.hooks.clone();
        let secrets = self.secrets.clone();
        async move {
            let execution = tools.execute_shared(&call.name, arguments, ctx).await;
            // Before any hook sees it: a hook may log it.
            let result = redacted(&secrets, execution.result);
            let mut events = Vec::new();
            let result = if hooks.is_empty() {
                Ok(result)
            } else {
                hooks.after_tool(&hook_ctx, &call, result, &mut events).await
            };
            Finished { call, result, duration: execution.duration, events }
        }
    }
}

/// `result` with the agent's secrets redacted from its text (a tool that printed the
/// environment, a server that echoed its token).
fn redacted(
    secrets: &Secrets,
    result: Result<ToolOutput, ToolError>,
) -> Result<ToolOutput, ToolError> {
    if secrets.is_empty() {
        return result;
    }
    match result {
        Ok(ToolOutput::Value(mut value)) => {
            secrets.redact_value(&mut value);
            Ok(ToolOutput::Value(value))
        }
        Ok(ToolOutput::Done(answer)) => Ok(ToolOutput::Done(secrets.redact(&answer).into_owned())),
        Ok(ToolOutput::AskUser(question)) => {
            Ok(ToolOutput::AskUser(secrets.redact(&question).into_owned()))
        }
        Err(error) => Err(secrets.redact_serde(error)),
    }
}
