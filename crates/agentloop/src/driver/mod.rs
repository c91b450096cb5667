//! The async driver: carries out the [`Run`]'s steps (provider stream, tool execution with a
//! concurrency limit, hooks, pause and cancellation) and streams every event. It decides
//! nothing: every branch that decides lives in [`Run`].
//!
//! Event order: the model's deltas as they arrive, then the turn's reasoning, text (not for
//! the final answer) and detected calls; then for each call `step_started`, `tool_started`,
//! its result event and `step_completed`. With a concurrency limit of 1 the calls' groups
//! follow each other in call order; with more, each call's own events keep that order but
//! the groups interleave as the calls start and finish. Results always join the history in
//! call order. A call's nested events (work it started, such as a sub-agent's run) come
//! between its `tool_started` and its result event, as the call emits them.

mod links;
mod model;
mod outbox;
mod partial;
mod tools;

use crate::control::Control;
use crate::event::Event;
use crate::hooks::{CriticalFailure, HookContext, HookSet};
use crate::message::Message;
use crate::provider::Provider;
use crate::run::{Run, RunConfig, RunError, Step};
use crate::tool::ToolExecutor;
use futures::stream::BoxStream;
use outbox::{Driven, Outbox};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A stream of run events.
pub type EventStream = BoxStream<'static, Event>;

/// What the driver needs besides the run: the model, the tools, the hooks.
#[derive(Clone)]
pub(crate) struct Driver {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) tools: Arc<ToolExecutor>,
    pub(crate) hooks: Arc<HookSet>,
    /// Counts tokens for the window and compaction (`None`: the run's estimate).
    pub(crate) counter: Option<Arc<dyn crate::context::TokenCounter>>,
    /// How failed model calls are retried before any content arrived (the attempts tier of
    /// `docs/PROVIDERS.md`, "Retries").
    pub(crate) retry: Option<crate::provider::RetryPolicy>,
    /// Tool calls of one model turn that may run at once.
    pub(crate) concurrency: usize,
    /// Streams only the durable events (and the few the driver adds, such as retries): no
    /// deltas, no notices. For a caller that only wants the outcome ([`crate::Agent::run`]).
    pub(crate) quiet: bool,
    /// The observer of the run being driven, asked for the trace context of the model's
    /// requests and of the tool calls (`None`: not observed).
    pub(crate) observer: Option<Arc<dyn crate::observe::RunObserver>>,
    /// Redacted from every tool result and tool error before the run records it.
    pub(crate) secrets: Arc<crate::provider::secrets::Secrets>,
}

/// A run's observer as the tools' source of trace context.
struct ObserverTrace(Arc<dyn crate::observe::RunObserver>);

impl crate::tool::CallTrace for ObserverTrace {
    fn trace_parent(&self, call_id: &str) -> Option<String> {
        self.0.trace_parent(Some(call_id))
    }
}

/// Where a driven run comes from.
pub(crate) enum Start {
    /// A new run (the `before_run` hooks may change its configuration).
    New { run_id: String, config: Box<RunConfig>, input: Vec<Message> },
    /// A run rebuilt from its journal.
    Existing(Box<Run>),
}

/// Per-run values every step needs.
struct Scope {
    run_id: Arc<str>,
    metadata: Arc<Map<String, Value>>,
    control: Arc<Control>,
    clock: Instant,
    base_elapsed: Duration,
    /// When the run's time limit passes (`None`: no limit).
    deadline: Option<Instant>,
    /// Requests in a row that could not reach the model's server.
    unreachable: Unreachable,
}

/// The run's budget for a model server that cannot be reached
/// ([`RetryPolicy::with_unreachable_budget`](crate::provider::RetryPolicy::with_unreachable_budget)):
/// how many requests in a row failed to connect, and when the first of them did.
#[derive(Default)]
struct Unreachable {
    failures: AtomicU32,
    /// Milliseconds from the scope's clock to the first failure.
    first_ms: AtomicU64,
}

impl Scope {
    /// A request reached the model's server: the unreachable budget is whole again.
    fn reached(&self) {
        if self.unreachable.failures.load(Ordering::Relaxed) != 0 {
            self.unreachable.failures.store(0, Ordering::Relaxed);
        }
    }

    /// One more request failed to connect: how long to wait before the next one, or `None`
    /// when the budget is spent. `error` is given the count and the time when it is.
    fn unreachable_delay(
        &self,
        policy: &crate::provider::RetryPolicy,
        error: &mut crate::provider::ProviderError,
    ) -> Option<Duration> {
        let now_ms = crate::run::millis(self.clock.elapsed());
        let failures = self.unreachable.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if failures == 1 {
            self.unreachable.first_ms.store(now_ms, Ordering::Relaxed);
        }
        let since = Duration::from_millis(
            now_ms.saturating_sub(self.unreachable.first_ms.load(Ordering::Relaxed)),
        );
        let delay = policy.next_unreachable_delay(failures, since);
        if delay.is_none() {
            if let crate::provider::ProviderError::Unreachable { message } = error {
                let plural = if failures == 1 { "" } else { "s" };
                message.push_str(&format!(
                    " ({failures} request{plural} in {:.1} s)",
                    since.as_secs_f64()
                ));
            }
        }
        delay
    }

    /// Resolves when the run is cancelled or `deadline` passes.
    async fn interrupted(&self, deadline: Option<Instant>) {
        match deadline {
            None => self.control.cancel.cancelled().await,
            Some(_) => tokio::select! {
                biased;
                () = self.control.cancel.cancelled() => {}
                () = sleep_until(deadline) => {}
            },
        }
    }
}

impl Scope {
    fn hook_context(&self, run: &Run) -> HookContext {
        HookContext {
            run_id: self.run_id.clone(),
            iteration: run.iteration(),
            metadata: self.metadata.clone(),
        }
    }

    fn tick(&self, run: &mut Run) {
        self.tick_at(run, Instant::now());
    }

    /// [`tick`](Self::tick) with a clock reading the caller also needs.
    fn tick_at(&self, run: &mut Run, now: Instant) {
        run.set_elapsed(self.base_elapsed + now.saturating_duration_since(self.clock));
    }
}

impl Driver {
    /// Drives a run to its end (or suspension), streaming every event.
    pub(crate) fn drive(self, start: Start, control: Arc<Control>) -> EventStream {
        let outbox = Arc::new(Outbox::default());
        Box::pin(Driven::new(outbox.clone(), self.drive_into(start, control, outbox)))
    }

    /// The run's future: every event goes to `out`.
    async fn drive_into(self, start: Start, control: Arc<Control>, out: Arc<Outbox>) {
        let out = &*out;
        let mut events = Vec::new();
        let mut run = match start {
            Start::Existing(run) => *run,
            Start::New { run_id, config, input } => {
                if self.hooks.is_empty() {
                    Run::new(run_id, *config, input)
                } else {
                    match self.hooks.before_run((*config).clone(), &mut events).await {
                        Ok(config) => Run::new(run_id, config, input),
                        Err(failure) => {
                            let mut run = Run::new(run_id, *config, input);
                            run.fail_hook(failure.hook, failure.error);
                            run
                        }
                    }
                }
            }
        };
        if let Some(counter) = &self.counter {
            run.set_token_counter(counter.clone());
        }
        run.set_quiet(self.quiet);
        let clock = Instant::now();
        let base_elapsed = Duration::from_millis(run.elapsed_ms());
        let scope = Scope {
            run_id: Arc::from(run.run_id()),
            metadata: Arc::new(run.config().metadata.clone()),
            control,
            clock,
            base_elapsed,
            deadline: run.config().deadline(clock, base_elapsed),
            unreachable: Unreachable::default(),
        };
        out.send(run.drain_events().chain(events.drain(..))).await;
        let mut pauses = scope.control.subscribe();
        loop {
            scope.tick(&mut run);
            if scope.control.cancel.is_cancelled() {
                run.cancel(scope.control.cancel_reason());
            }
            // Between two steps: a safe point to stop at (`RunHandle::stop_at_safe_point`).
            if scope.control.stop.is_cancelled() && !run.is_ending() && !run.has_events() {
                return;
            }
            if run.is_between_iterations() && !self.hooks.is_empty() {
                let ctx = scope.hook_context(&run);
                match self.hooks.pause_check(&ctx, &mut events).await {
                    Ok(Some(reason)) => scope.control.pause(reason),
                    Ok(None) => {}
                    Err(failure) => fail_hook(&mut run, failure),
                }
            }
            // The machine decides where a requested pause takes effect (`Step::Paused`).
            run.request_pause(scope.control.pause_reason());
            let step = run.next_step();
            let made = events.drain(..).chain(run.drain_events());
            if matches!(step, Step::CallTools(_)) && self.hooks.is_empty() {
                // Not waited for: without hooks the first call's `tool_started` follows at
                // once and is sent with these (a model's answer that asks for tools), so a
                // journal commits them together, before the tool starts.
                out.push(made);
            } else {
                out.send(made).await;
            }
            match step {
                Step::Paused(_) => {
                    wait_for_resume(&scope, &mut pauses).await;
                    // Cancelled while paused: the run ends paused (no `resumed`).
                    if scope.control.cancel.is_cancelled() {
                        run.cancel(scope.control.cancel_reason());
                    }
                }
                Step::Finish(outcome) => {
                    if run.is_finishing() {
                        let ctx = scope.hook_context(&run);
                        let continued = match self
                            .hooks
                            .on_incomplete_work(&ctx, &outcome, &mut events)
                            .await
                        {
                            Ok(Some(prompt)) => run.continue_with(prompt),
                            Ok(None) => false,
                            Err(failure) => {
                                fail_hook(&mut run, failure);
                                false
                            }
                        };
                        if !continued && run.is_finishing() {
                            match self.hooks.after_run(&ctx, outcome, &mut events).await {
                                Ok(outcome) => run.finish(outcome),
                                Err(failure) => fail_hook(&mut run, failure),
                            }
                        }
                        out.send(events.drain(..).chain(run.drain_events())).await;
                        if continued {
                            continue;
                        }
                    }
                    break;
                }
                Step::CallModel(request) => self.model_call(&mut run, &scope, request, out).await,
                Step::Compact(request) => {
                    let summary = tokio::select! {
                        biased;
                        () = scope.interrupted(scope.deadline) => None,
                        summary = crate::provider::collect(self.provider.stream(request)) => Some(summary),
                    };
                    scope.tick(&mut run);
                    let fed = match summary {
                        Some(Ok(response)) => run.compacted(response),
                        Some(Err(error)) => run.compaction_failed(error.to_string()),
                        None if !scope.control.cancel.is_cancelled() => run.compaction_failed(
                            "the run's time limit passed during the compaction".to_owned(),
                        ),
                        None => {
                            run.cancel(scope.control.cancel_reason());
                            Ok(())
                        }
                    };
                    fail_on_error(&mut run, fed);
                    out.send(run.drain_events()).await;
                }
                Step::CallTools(invocations) => {
                    self.tool_calls(&mut run, &scope, &mut pauses, invocations, out).await;
                }
            }
        }
    }
}

/// Resolves at `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Waits until the pause is lifted or the run is cancelled.
async fn wait_for_resume(scope: &Scope, pauses: &mut tokio::sync::watch::Receiver<Option<String>>) {
    while scope.control.pause_reason().is_some()
        && !scope.control.cancel.is_cancelled()
        && !scope.control.stop.is_cancelled()
    {
        tokio::select! {
            () = scope.control.cancel.cancelled() => {}
            () = scope.control.stop.cancelled() => {}
            changed = pauses.changed() => if changed.is_err() { break },
        }
    }
}

/// A critical hook failed: the run fails.
fn fail_hook(run: &mut Run, failure: CriticalFailure) {
    run.fail_hook(failure.hook, failure.error);
}

/// A command the run refused means the driver and the run disagree: end the run rather than
/// loop.
fn fail_on_error(run: &mut Run, result: Result<(), RunError>) {
    if let Err(error) = result {
        tracing::error!(%error, "driver: the run refused a result");
        run.fail(format!("internal error: {error}"));
    }
}
