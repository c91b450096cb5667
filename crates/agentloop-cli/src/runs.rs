//! `agentloop runs`: the runs kept in the store — list, show a run's timeline, resume an
//! interrupted run, replay a recorded one without the model or the tools.

use crate::config::StoreSection;
use crate::render::Ending;
use agentloop::agent::JournalReplay;
use agentloop::event::ForkEdit;
use agentloop::run::Decision;
use agentloop::store::{JournalEntry, MemoryStore, RunFilter, RunState, RunStore, SessionStore};
use agentloop::{Event, EventStream, StopReason};
use anyhow::{bail, Context};
use std::sync::Arc;

pub mod admin;

/// The configured store, as a run journal and as a session store.
pub struct Stores {
    /// Where runs are journaled.
    pub runs: Arc<dyn RunStore>,
    /// Where chat sessions keep their conversations.
    pub sessions: Arc<dyn SessionStore>,
}

impl Stores {
    fn of<S: RunStore + SessionStore + 'static>(store: S) -> Self {
        let store = Arc::new(store);
        Self { runs: store.clone(), sessions: store }
    }
}

/// Opens the configured store (SQLite at `.agentloop/agentloop.db` by default).
pub async fn open(section: &StoreSection) -> anyhow::Result<Stores> {
    Ok(match section.kind.as_deref().unwrap_or("sqlite") {
        "sqlite" => {
            let path = section
                .path
                .clone()
                .unwrap_or_else(|| agentloop::store::sqlite::DEFAULT_PATH.into());
            let options = agentloop::store::sqlite::SqliteOptions {
                large_output_bytes: section.large_output_limit(),
                ..Default::default()
            };
            let store = agentloop::store::sqlite::SqliteStore::open_with(&path, options)
                .with_context(|| {
                    format!(
                        "opening the SQLite store {} (if it is damaged or not a store, move it \
                     aside: a new one is created; or set [store] path)",
                        crate::safe::escape(&path.display().to_string())
                    )
                })?;
            Stores::of(store)
        }
        "redis" => {
            let Some(url) = &section.url else {
                bail!("[store] kind = \"redis\" needs url = \"redis://…\"")
            };
            let options = agentloop::store::redis::RedisOptions::default()
                .prefix(section.redis_prefix())
                .large_output_bytes(section.large_output_limit());
            Stores::of(
                agentloop::store::redis::RedisStore::connect_with(url, options)
                    .await
                    .context("connecting to Redis")?,
            )
        }
        "memory" => Stores::of(MemoryStore::new()),
        other => bail!("unknown store '{other}'"),
    })
}

pub(crate) fn time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// A stored name as one table cell: control characters (a newline, an escape sequence) are
/// shown escaped, so a name cannot break the table or drive the terminal.
pub fn cell(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() })
        .collect()
}

/// `runs list`: the run registry — state, agent, parent, tokens and cost so far, times, and
/// the executor that holds the run's lease (only while it is live).
pub async fn list(
    store: &dyn RunStore,
    state: Option<&str>,
    parent: Option<&str>,
    limit: usize,
) -> anyhow::Result<()> {
    let mut filter = RunFilter::all().limit(limit);
    if let Some(state) = state {
        let Some(state) = RunState::parse(state) else {
            bail!(
                "unknown state '{}' (expected running, finished, failed, cancelled, suspended or \
                 needs_attention)",
                cell(state)
            )
        };
        filter = filter.state(state);
    }
    if let Some(parent) = parent {
        filter = filter.parent_run_id(parent);
    }
    let runs = store.list_runs(&filter).await?;
    let now = agentloop::store::now_ms();
    println!(
        "{:<36}  {:<15}  {:<12}  {:<36}  {:>15}  {:>10}  {:>7}  {:<19}  {:<19}  OWNER",
        "RUN",
        "STATE",
        "AGENT",
        "PARENT",
        "TOKENS IN/OUT",
        "COST USD",
        "ENTRIES",
        "CREATED",
        "UPDATED"
    );
    for run in runs {
        let owner = match &run.owner {
            Some(owner) if run.lease_is_live(now) => cell(owner),
            _ => "-".into(),
        };
        println!(
            "{:<36}  {:<15}  {:<12}  {:<36}  {:>15}  {:>10.4}  {:>7}  {:<19}  {:<19}  {owner}",
            cell(&run.run_id),
            run.state.as_str(),
            run.agent.as_deref().map_or_else(|| "-".into(), cell),
            run.parent_run_id.as_deref().map_or_else(|| "-".into(), cell),
            format!("{}/{}", run.usage.input, run.usage.output),
            run.cost_usd,
            run.entries,
            time(run.created_ms),
            time(run.updated_ms)
        );
    }
    Ok(())
}

async fn journal(store: &dyn RunStore, run_id: &str) -> anyhow::Result<Vec<JournalEntry>> {
    let entries = store.load(run_id).await?;
    if entries.is_empty() {
        bail!("no run '{run_id}' in the store");
    }
    Ok(entries)
}

fn one_line(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// `runs show`: the timeline of a run.
pub async fn show(store: &dyn RunStore, run_id: &str) -> anyhow::Result<()> {
    let entries = journal(store, run_id).await?;
    let start = entries.first().map_or(0, |e| e.at_ms);
    for entry in &entries {
        // The entry's number (what `runs fork --at` takes), then its time.
        let at = format!(
            "#{:<3} +{:>7.3}s",
            entry.seq,
            entry.at_ms.saturating_sub(start) as f64 / 1000.0
        );
        let line = match &*entry.event {
            Event::RunStarted { run_id, config, input } => format!(
                "run {run_id} started (agent {}): {}",
                config.agent.as_deref().unwrap_or("-"),
                one_line(&input.last().map(|m| m.text()).unwrap_or_default(), 100)
            ),
            Event::IterationStarted { iteration, .. } => format!("iteration {iteration}"),
            Event::IterationCompleted { iteration, duration_ms } => {
                format!("iteration {iteration} done in {duration_ms} ms")
            }
            Event::ModelResponded {
                message, finish_reason, usage, duration_ms, provider, ..
            } => format!(
                "  model{}: {} ms, {} in{} / {} out tokens, {}{}",
                provider.as_deref().map_or_else(String::new, |p| format!(" ({})", one_line(p, 60))),
                duration_ms,
                usage.input,
                cache_note(usage),
                usage.output,
                finish_reason.as_str(),
                if message.text().is_empty() {
                    String::new()
                } else {
                    format!(": {}", one_line(&message.text(), 80))
                }
            ),
            Event::ModelFailed { error, .. } => format!("  model failed: {error}"),
            Event::ToolStarted { call, arguments } => {
                format!("  → {}({})", call.name, one_line(&arguments.to_string(), 100))
            }
            Event::ToolCompleted { name, result, duration_ms, .. } => {
                format!(
                    "  ← {name}: {} ({duration_ms} ms)",
                    one_line(&result.content.to_text(), 100)
                )
            }
            Event::ToolFailed { name, error, .. } => format!("  ✗ {name}: {error}"),
            Event::ToolTimedOut { name, timeout_ms, .. } => {
                format!("  ✗ {name}: timed out after {timeout_ms} ms")
            }
            Event::RunFinished { outcome } | Event::RunSuspended { outcome } => format!(
                "{} after {} iterations, {} tokens: {}",
                entry.event.kind().trim_start_matches("run_"),
                outcome.iterations,
                outcome.usage.total(),
                one_line(&outcome.answer, 120)
            ),
            Event::ApprovalRequested { call, arguments } => format!(
                "  ? {}({}) waits for approval: call id {}",
                call.name,
                one_line(&arguments.to_string(), 100),
                call.id
            ),
            Event::ApprovalDecided { call_id, decision, by } => {
                let by = by.as_deref().map(|by| format!(" (by {})", one_line(by, 60)));
                let by = by.unwrap_or_default();
                match decision {
                    Decision::Approve => format!("  approved {call_id}{by}"),
                    Decision::Reject { reason } => format!("  rejected {call_id}{by}: {reason}"),
                    Decision::SetResult { result } => format!(
                        "  result set for {call_id}{by}: {}",
                        one_line(&result.to_string(), 100)
                    ),
                    other => format!("  decided {call_id}{by}: {other:?}"),
                }
            }
            Event::AttentionNeeded { call_id, reason } => {
                format!("  ! {call_id} needs attention: {}", one_line(reason, 140))
            }
            Event::InputProvided { message } => {
                format!("answered: {}", one_line(&message.text(), 100))
            }
            Event::RunForked { origin_run_id, at_seq, edit } => {
                let edit = match edit {
                    Some(ForkEdit::ToolResult { call_id, result }) => format!(
                        ", result of {call_id} set to {}",
                        one_line(&result.to_string(), 80)
                    ),
                    Some(ForkEdit::UserMessage { text }) => {
                        format!(", then the user: {}", one_line(text, 80))
                    }
                    Some(ForkEdit::ModelAnswer { text }) => {
                        format!(", the answer replaced by: {}", one_line(text, 80))
                    }
                    Some(other) => format!(", {other:?}"),
                    None => String::new(),
                };
                format!("forked from run {origin_run_id} at #{at_seq}{edit}")
            }
            Event::RunFailed { error, .. } => format!("failed: {error}"),
            Event::RunCancelled { reason, .. } => format!("cancelled: {reason}"),
            other => other.kind().replace('_', " "),
        };
        // Model and tool text may hold control characters: shown escaped.
        println!("{at}  {}", cell(&line));
        if let Some(remote) = entry.event.remote() {
            println!("{:width$}      {}", "", cell(&remote_line(remote)), width = at.len());
        }
    }
    for line in summary(run_id, &entries) {
        println!("{}", cell(&line));
    }
    Ok(())
}

/// The remote agent's task a call ran as: its agent, task, state and page.
fn remote_line(remote: &agentloop::tool::RemoteTask) -> String {
    let state = remote.state.as_deref().map(|state| format!(" ({state})")).unwrap_or_default();
    let page = remote.view_url.as_deref().map(|url| format!(": {url}")).unwrap_or_default();
    format!(
        "remote agent {} at {}, task {}{state}{page}",
        one_line(&remote.agent, 60),
        remote.url,
        remote.task_id
    )
}

/// The run's latency, cost and trace, under its journal.
fn summary(run_id: &str, entries: &[JournalEntry]) -> Vec<String> {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else { return Vec::new() };
    let mut lines = vec![format!(
        "latency: {:.3} s from the first to the last entry",
        last.at_ms.saturating_sub(first.at_ms) as f64 / 1000.0
    )];
    if let Some(outcome) = entries.iter().rev().find_map(|e| e.event.outcome()) {
        let metrics = &outcome.metrics;
        lines.push(format!(
            "time: model {} ms in {} calls, tools {} ms in {} calls",
            metrics.model_time_ms, metrics.model_calls, metrics.tool_time_ms, metrics.tool_calls
        ));
        lines.push(format!(
            "cost: ${:.6} ({} tokens: {} in{}, {} out)",
            metrics.cost_usd,
            outcome.usage.total(),
            outcome.usage.input,
            cache_note(&outcome.usage),
            outcome.usage.output
        ));
        if let StopReason::NeedsAttention { calls, reason } = &outcome.stop_reason {
            lines.extend(crate::render::attention_lines(run_id, calls, reason));
        }
    }
    #[cfg(feature = "otel")]
    if let Event::RunStarted { run_id, config, .. } = &*first.event {
        let trace = agentloop_otel::trace_id(run_id, config.trace_parent.as_deref());
        lines.push(format!("trace: {trace}"));
    }
    lines
}

/// Renders a stream to the end.
pub async fn render(events: EventStream, json: bool) -> Ending {
    crate::render::show_events(events, json, None::<fn()>).await
}

/// `runs replay`: the run again from its journal, without the model or the tools.
pub async fn replay(store: &dyn RunStore, run_id: &str, json: bool) -> anyhow::Result<Ending> {
    let entries = journal(store, run_id).await?;
    let events: Vec<Event> = entries.into_iter().map(|e| e.event.into_event()).collect();
    let replay = JournalReplay::from_journal(&events).context("reading the journal")?;
    Ok(render(replay.run().context("building the replay")?, json).await)
}

/// What of the input the provider's cache served and took: ` (1800 cached, 300 written)`,
/// or nothing when it did neither.
fn cache_note(usage: &agentloop::message::Usage) -> String {
    match (usage.cached_input, usage.cache_write_input) {
        (0, 0) => String::new(),
        (read, 0) => format!(" ({read} cached)"),
        (0, written) => format!(" ({written} written to cache)"),
        (read, written) => format!(" ({read} cached, {written} written to cache)"),
    }
}

#[cfg(test)]
mod cache_note_tests {
    use super::cache_note;
    use agentloop::message::Usage;

    #[test]
    fn the_cache_note_says_what_the_cache_served_and_took() {
        let usage = |cached_input, cache_write_input| Usage {
            input: 2160,
            cached_input,
            cache_write_input,
            ..Usage::default()
        };
        assert_eq!(cache_note(&usage(0, 0)), "");
        assert_eq!(cache_note(&usage(2048, 0)), " (2048 cached)");
        assert_eq!(cache_note(&usage(0, 100)), " (100 written to cache)");
        assert_eq!(cache_note(&usage(2048, 100)), " (2048 cached, 100 written to cache)");
    }
}
