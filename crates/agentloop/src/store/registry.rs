//! The run registry: [`RunSummary`] (one run as [`RunStore::list_runs`] lists it), the
//! [`RunFilter`] of a listing and its [`RunCursor`], and [`SummaryUpdate`], what a batch of
//! appended entries changes in a run's summary (every store applies it on append, so a
//! listing never reads a journal).
//!
//! [`RunStore::list_runs`]: super::RunStore::list_runs

use super::{JournalEntry, RunState};
use crate::event::Event;
use crate::message::{Message, Role, Usage};
use crate::run::Price;
use serde::{Deserialize, Serialize};

/// How many characters of a run's input and answer its summary keeps (what a listing shows
/// and [`RunFilter::text`] searches).
pub const PREVIEW_CHARS: usize = 500;

/// One run, as listed by [`RunStore::list_runs`](super::RunStore::list_runs): the run
/// registry. Everything comes from what the stores keep up to date on each append (the
/// journal's first and last entries, `run_started`'s configuration, the usage of the model
/// calls) and from the run's lease; listing reads no journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run.
    pub run_id: String,
    /// The agent's name (`RunConfig::agent` in `run_started`).
    pub agent: Option<String>,
    /// The session (`RunConfig::context_id` in `run_started`).
    pub context_id: Option<String>,
    /// The run that started it (`RunConfig::parent_run_id` in `run_started`: a sub-agent's
    /// run names its caller's).
    #[serde(default)]
    pub parent_run_id: Option<String>,
    /// The run it was forked from ([`Event::RunForked`]'s `origin_run_id`).
    #[serde(default)]
    pub origin_run_id: Option<String>,
    /// The start of what the user asked: the text of the last user message of
    /// `run_started`'s input, cut to [`PREVIEW_CHARS`] characters (`None`: no user text).
    #[serde(default)]
    pub input: Option<String>,
    /// The start of the run's last answer (`run_finished`'s), cut to [`PREVIEW_CHARS`]
    /// characters (`None`: it has not finished, or answered nothing).
    #[serde(default)]
    pub answer: Option<String>,
    /// Where it stands.
    pub state: RunState,
    /// When its first entry was appended (ms since the Unix epoch).
    pub created_ms: u64,
    /// When its last entry was appended.
    pub updated_ms: u64,
    /// How many entries its journal has (the next sequence number).
    pub entries: u64,
    /// The holder of the run's lease (see [`lease`](super::lease)): the executor that
    /// claimed it and has not released it. `None` when the lease was released or never
    /// claimed. An executor that died stays the owner until another claims the run: see
    /// [`lease_is_live`](Self::lease_is_live).
    #[serde(default)]
    pub owner: Option<String>,
    /// When that lease expires unless renewed (ms since the Unix epoch, the store's clock;
    /// `None` with `owner`).
    #[serde(default)]
    pub lease_expires_at_ms: Option<u64>,
    /// The tokens of its journaled model calls so far (`model_responded` and
    /// `compaction_completed`), summed.
    #[serde(default)]
    pub usage: Usage,
    /// What `usage` cost, in USD, at the run's price (`RunConfig::price` in `run_started`,
    /// with [`Price::cost`]); 0 without a price. The run's `Metrics::cost_usd` adds the same
    /// per call, so the two agree up to rounding.
    #[serde(default)]
    pub cost_usd: f64,
}

impl RunSummary {
    /// Where a listing that ends with this run goes on: pass it to [`RunFilter::after`] for
    /// the next page.
    pub fn cursor(&self) -> RunCursor {
        RunCursor { created_ms: self.created_ms, run_id: self.run_id.clone() }
    }

    /// Whether its lease is held at `now_ms` (ms since the Unix epoch): an owner whose lease
    /// has not expired. A run with an owner but an expired lease lost its executor (it
    /// crashed); any process may resume it.
    pub fn lease_is_live(&self, now_ms: u64) -> bool {
        self.owner.is_some() && self.lease_expires_at_ms.is_some_and(|at| at > now_ms)
    }

    /// Sets the lease columns from the run's lease record (`None`: never claimed).
    pub(crate) fn set_lease(&mut self, owner: Option<String>, expires_at_ms: u64) {
        let owner = owner.filter(|o| !o.is_empty());
        self.lease_expires_at_ms = owner.as_ref().map(|_| expires_at_ms);
        self.owner = owner;
    }
}

/// A position in the listing order of runs (newest first, then by run id, descending): the
/// runs after it are older, or as old with a smaller id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunCursor {
    /// The creation time of the last run seen.
    pub created_ms: u64,
    /// Its id.
    pub run_id: String,
}

impl RunCursor {
    /// Whether `run` comes after this position.
    pub fn precedes(&self, run: &RunSummary) -> bool {
        run.created_ms < self.created_ms
            || (run.created_ms == self.created_ms && run.run_id < self.run_id)
    }
}

/// Which runs [`RunStore::list_runs`](super::RunStore::list_runs) returns: every set field
/// must match. Runs come newest first (by creation time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs of this agent.
    pub agent: Option<String>,
    /// Only runs of this session.
    pub context_id: Option<String>,
    /// Only runs started by this run (its sub-agents' runs).
    pub parent_run_id: Option<String>,
    /// Only runs forked from this run.
    pub origin_run_id: Option<String>,
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Only runs whose input or answer (as the summary keeps them: [`PREVIEW_CHARS`])
    /// contains this text, ignoring the case of ASCII letters.
    pub text: Option<String>,
    /// Only runs created at or after this time (ms since the Unix epoch).
    pub created_from_ms: Option<u64>,
    /// Only runs created before this time.
    pub created_before_ms: Option<u64>,
    /// At most this many runs.
    pub limit: Option<usize>,
    /// Only the runs after this position: the next page of a listing (see
    /// [`RunSummary::cursor`]).
    pub after: Option<RunCursor>,
}

impl RunFilter {
    /// Every run.
    pub fn all() -> Self {
        Self::default()
    }

    /// Only runs of this agent.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Only runs of this session.
    pub fn context_id(mut self, context_id: impl Into<String>) -> Self {
        self.context_id = Some(context_id.into());
        self
    }

    /// Only runs started by this run (`RunConfig::parent_run_id`).
    pub fn parent_run_id(mut self, parent_run_id: impl Into<String>) -> Self {
        self.parent_run_id = Some(parent_run_id.into());
        self
    }

    /// Only runs forked from this run ([`Event::RunForked`]).
    pub fn origin_run_id(mut self, origin_run_id: impl Into<String>) -> Self {
        self.origin_run_id = Some(origin_run_id.into());
        self
    }

    /// Only runs in this state.
    pub fn state(mut self, state: RunState) -> Self {
        self.state = Some(state);
        self
    }

    /// Only runs whose input or answer contains `text` (ASCII letters in either case).
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Only runs created in `[from_ms, before_ms)`.
    pub fn created_between(mut self, from_ms: u64, before_ms: u64) -> Self {
        self.created_from_ms = Some(from_ms);
        self.created_before_ms = Some(before_ms);
        self
    }

    /// At most this many runs.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Only the runs after `cursor` (the last run of the previous page).
    pub fn after(mut self, cursor: RunCursor) -> Self {
        self.after = Some(cursor);
        self
    }

    /// Whether a run matches (every field but `limit`).
    pub fn matches(&self, run: &RunSummary) -> bool {
        self.agent.as_ref().is_none_or(|a| run.agent.as_ref() == Some(a))
            && self.context_id.as_ref().is_none_or(|c| run.context_id.as_ref() == Some(c))
            && self.parent_run_id.as_ref().is_none_or(|p| run.parent_run_id.as_ref() == Some(p))
            && self.origin_run_id.as_ref().is_none_or(|o| run.origin_run_id.as_ref() == Some(o))
            && self.state.is_none_or(|s| run.state == s)
            && self.text.as_deref().is_none_or(|text| {
                [&run.input, &run.answer]
                    .into_iter()
                    .any(|field| field.as_deref().is_some_and(|f| contains_ignoring_case(f, text)))
            })
            && self.created_from_ms.is_none_or(|from| run.created_ms >= from)
            && self.created_before_ms.is_none_or(|before| run.created_ms < before)
            && self.after.as_ref().is_none_or(|cursor| cursor.precedes(run))
    }
}

/// What `run_started` says about a run, for its summary.
#[derive(Debug, Clone, Default)]
pub(crate) struct Started {
    pub(crate) agent: Option<String>,
    pub(crate) context_id: Option<String>,
    pub(crate) parent_run_id: Option<String>,
    /// The run's price (`RunConfig::price`).
    pub(crate) price: Option<Price>,
}

/// What a batch of entries changes in a run's summary.
pub(crate) struct SummaryUpdate {
    /// What `run_started` says, when the batch holds it.
    pub(crate) started: Option<Started>,
    /// The state after the batch.
    pub(crate) state: RunState,
    /// The first entry's time.
    pub(crate) first_ms: u64,
    /// The last entry's time.
    pub(crate) last_ms: u64,
    /// The tokens of the batch's model calls (`model_responded`, `compaction_completed`).
    pub(crate) usage: Usage,
    /// The run it was forked from, when the batch holds `run_forked`.
    pub(crate) origin_run_id: Option<String>,
    /// The input's preview, when the batch holds `run_started` (`Some("")`: no user text).
    pub(crate) input: Option<String>,
    /// The answer's preview, when the batch holds `run_finished`.
    pub(crate) answer: Option<String>,
}

impl SummaryUpdate {
    pub(crate) fn of(entries: &[JournalEntry]) -> Option<Self> {
        let (first, last) = (entries.first()?, entries.last()?);
        let (mut started, mut origin_run_id, mut input, mut answer) = (None, None, None, None);
        let mut usage = Usage::default();
        for entry in entries {
            match &*entry.event {
                Event::RunStarted { config, input: messages, .. } => {
                    input = Some(input_preview(messages).unwrap_or_default());
                    started = Some(Started {
                        agent: config.agent.clone(),
                        context_id: config.context_id.clone(),
                        parent_run_id: config.parent_run_id.clone(),
                        price: config.price,
                    });
                }
                Event::ModelResponded { usage: used, .. } => usage += **used,
                Event::CompactionCompleted { usage: used, .. } => usage += *used,
                Event::RunForked { origin_run_id: origin, .. } => {
                    origin_run_id = Some(origin.clone());
                }
                Event::RunFinished { outcome } => answer = Some(preview(&outcome.answer)),
                _ => {}
            }
        }
        Some(Self {
            started,
            state: RunState::after(&last.event),
            first_ms: first.at_ms,
            last_ms: last.at_ms,
            usage,
            origin_run_id,
            input,
            answer,
        })
    }
}

/// The first [`PREVIEW_CHARS`] characters of `text`.
pub(crate) fn preview(text: &str) -> String {
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

/// The preview of a run's input: its last user message's text (`None`: no user text).
pub(crate) fn input_preview(messages: &[Message]) -> Option<String> {
    let last_user = messages.iter().rev().find(|m| m.role == Role::User)?;
    Some(preview(&last_user.text())).filter(|text| !text.is_empty())
}

/// Whether `haystack` contains `needle`, ASCII letters compared in either case (as SQLite's
/// `LIKE` and Lua's `string.lower` do).
pub(crate) fn contains_ignoring_case(haystack: &str, needle: &str) -> bool {
    let (haystack, needle) = (haystack.as_bytes(), needle.as_bytes());
    needle.is_empty()
        || haystack.windows(needle.len()).any(|window| window.eq_ignore_ascii_case(needle))
}

/// The cost of a run's `usage` at its price (0 without one): [`Price::cost`], as the run's
/// own metrics compute it.
pub(crate) fn cost_of(price: Option<&Price>, usage: &Usage) -> f64 {
    price.map_or(0.0, |price| price.cost(usage))
}

#[cfg(test)]
mod tests;
