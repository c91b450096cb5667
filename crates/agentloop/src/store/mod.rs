//! Durable stores: the run journal ([`RunStore`]), the conversation of multi-turn sessions
//! ([`SessionStore`]) and artifacts ([`ArtifactStore`]).
//!
//! A run's journal is its durable [`Event`]s, in order, each stored as a [`JournalEntry`]
//! (a dense 0-based sequence number, the time it was appended, the schema version and the
//! event, as JSON). [`Run::from_journal`](crate::run::Run::from_journal) folds it back into
//! the run, so a run survives a crash: [`Agent::resume`](crate::Agent::resume) continues it
//! without running a tool whose result is journaled.
//!
//! Appends use optimistic concurrency: [`RunStore::append`] names the sequence number it
//! expects the first new entry to get; if another writer appended first, it fails with
//! [`StoreError::Conflict`] and writes nothing, so a journal is never interleaved. An append
//! writes only the new entries.
//!
//! **Large outputs by reference**: the SQLite and Redis stores journal a tool output of at
//! least [`DEFAULT_LARGE_OUTPUT_BYTES`] (configurable per store) as a reference to an
//! artifact of the run ([`ArtifactStore`]) written with the append, and put it back when they
//! load the journal: what a caller appends and what it loads are the same events.
//!
//! Implementations: [`MemoryStore`] (tests, one process), [`sqlite::SqliteStore`] (feature
//! `sqlite`, on by default) and [`redis::RedisStore`] (feature `redis`). An agent built with
//! [`AgentBuilder::store`](crate::AgentBuilder::store) journals every run through
//! [`journaled`].

mod admin;
mod codec;
pub(crate) mod control_watch;
pub(crate) mod journal;
pub mod lease;
mod memory;
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) mod outputs;
#[cfg(feature = "redis")]
pub mod redis;
mod registry;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod stats;

pub use admin::{OrphanJournal, RegistryPage, RegistryRow, Removal, RemovalRule};
pub use journal::{journaled, journaled_with_lease, Durability, REMOTE_CONTROL_POLL};
pub use lease::{Lease, DEFAULT_LEASE_TTL};
pub use memory::MemoryStore;
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub use outputs::DEFAULT_LARGE_OUTPUT_BYTES;
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) use registry::input_preview;
#[cfg(feature = "redis")]
pub(crate) use registry::preview;
pub(crate) use registry::{cost_of, SummaryUpdate};
pub use registry::{RunCursor, RunFilter, RunSummary, PREVIEW_CHARS};
pub use stats::WriteStats;

#[cfg(any(test, feature = "redis"))]
pub(crate) use codec::decode_entry_json;
pub(crate) use codec::{check_batch, check_dense, check_dense_from, decode_parts};
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) use codec::{from_json, to_json, write_json, JSON_PER_ENTRY};

use crate::event::{Event, JournalEvent};
use crate::message::Message;
use crate::run::{Decision, SCHEMA_VERSION};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One entry of a run journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JournalEntry {
    /// Its position in the journal: 0 for `run_started`, then 1, 2, … without gaps.
    pub seq: u64,
    /// When it was appended (milliseconds since the Unix epoch).
    pub at_ms: u64,
    /// The journal format it was written with ([`SCHEMA_VERSION`] for this build).
    pub schema_version: u32,
    /// The durable event (a journal holds no stream-only one: see [`JournalEvent`]).
    pub event: JournalEvent,
}

impl JournalEntry {
    /// An entry for `event` at `seq`, stamped now with this build's schema version.
    pub fn new(seq: u64, event: JournalEvent) -> Self {
        Self { seq, at_ms: now_ms(), schema_version: SCHEMA_VERSION, event }
    }

    /// An entry for `event` at `seq`, stamped now — refused when `event` is stream-only.
    pub fn of(seq: u64, event: Event) -> Result<Self, StoreError> {
        let event = JournalEvent::new(event).map_err(|e| StoreError::Invalid(e.to_string()))?;
        Ok(Self::new(seq, event))
    }
}

/// The current time in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// What went wrong in a store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer appended first: nothing was written.
    #[error(
        "journal conflict on run '{run_id}': expected to append at seq {expected}, but the \
         journal has {actual} entries (another writer appended first)"
    )]
    Conflict {
        /// The run.
        run_id: String,
        /// The sequence number the append expected.
        expected: u64,
        /// The journal's length (the next sequence number).
        actual: u64,
    },
    /// A journal entry written by a build with another journal format.
    #[error(
        "run '{run_id}', entry {seq}: journal schema version {found} is not supported (this \
         build reads version {supported}); read it with a matching agentloop version"
    )]
    UnsupportedSchema {
        /// The run.
        run_id: String,
        /// The entry.
        seq: u64,
        /// The version found.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// A turn is already running in this session.
    #[error("session '{context_id}' is busy with run '{run_id}': wait until its turn ends")]
    SessionBusy {
        /// The session.
        context_id: String,
        /// The run of the turn in progress.
        run_id: String,
    },
    /// A turn ended that is not the session's turn in progress.
    #[error("session '{context_id}' has no turn in progress for run '{run_id}' (it is {state})")]
    NotInTurn {
        /// The session.
        context_id: String,
        /// The run that tried to end the turn.
        run_id: String,
        /// The session's state.
        state: SessionState,
    },
    /// Another executor holds the run's lease: it is running (or its process died less than
    /// a lease's TTL ago).
    #[error(
        "run '{run_id}' is being executed by '{owner}' (its lease expires in {expires_in_ms} ms \
         unless renewed; if that process died, try again then)"
    )]
    LeaseHeld {
        /// The run.
        run_id: String,
        /// The holder.
        owner: String,
        /// How long the lease lasts without renewal.
        expires_in_ms: u64,
    },
    /// A newer claim took the run's lease: this executor must stop (nothing was written).
    #[error(
        "run '{run_id}': the lease of epoch {epoch} was taken over ('{current_owner}' holds \
         epoch {current_epoch}); this executor stops"
    )]
    LeaseLost {
        /// The run.
        run_id: String,
        /// The epoch of the lease that was used.
        epoch: u64,
        /// The holder of the current lease (empty: released).
        current_owner: String,
        /// The current epoch.
        current_epoch: u64,
    },
    /// The thing does not exist.
    #[error("{what} '{id}' not found")]
    NotFound {
        /// What kind of thing (`artifact`, `session`, …).
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// The call's arguments are wrong (e.g. entries whose sequence numbers have gaps).
    #[error("invalid store call: {0}")]
    Invalid(String),
    /// Stored data that cannot be read (bad JSON, a journal with gaps).
    #[error("corrupt store data: {0}")]
    Corrupt(String),
    /// The store does not do this (a store of the user's own that left the trait's default).
    #[error("this store does not support {0}")]
    Unsupported(&'static str),
    /// The backend failed (I/O, connection, SQL).
    #[error("{backend} store error: {message}")]
    Backend {
        /// `sqlite`, `redis`, …
        backend: &'static str,
        /// What it said.
        message: String,
    },
}

/// Where a run stands, as derived from its journal's last event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// No terminal event yet (or the run continued after a suspension).
    Running,
    /// `run_finished`.
    Finished,
    /// `run_failed`.
    Failed,
    /// `run_cancelled`.
    Cancelled,
    /// Waiting for a human: `run_suspended` (approval decisions), or `run_finished` with
    /// the stop reason `awaiting_input` (the answer to an ask-user question).
    Suspended,
    /// Waiting for an operator: `run_suspended` with the stop reason `needs_attention` (a
    /// crash left a call in flight whose tool is not safe to run twice).
    NeedsAttention,
}

impl RunState {
    /// The state after `event` was journaled.
    pub fn after(event: &Event) -> Self {
        match event {
            Event::RunFinished { outcome }
                if matches!(outcome.stop_reason, crate::run::StopReason::AwaitingInput { .. }) =>
            {
                Self::Suspended
            }
            Event::RunFinished { .. } => Self::Finished,
            Event::RunFailed { .. } => Self::Failed,
            Event::RunCancelled { .. } => Self::Cancelled,
            Event::RunSuspended { outcome }
                if matches!(outcome.stop_reason, crate::run::StopReason::NeedsAttention { .. }) =>
            {
                Self::NeedsAttention
            }
            Event::RunSuspended { .. } => Self::Suspended,
            _ => Self::Running,
        }
    }

    /// Its name (`running`, `finished`, …), as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Suspended => "suspended",
            Self::NeedsAttention => "needs_attention",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "running" => Self::Running,
            "finished" => Self::Finished,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            "suspended" => Self::Suspended,
            "needs_attention" => Self::NeedsAttention,
            _ => return None,
        })
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where run journals live.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Appends entries built elsewhere (their `seq`s must be `expected_seq`, `expected_seq +
    /// 1`, …): imports, copies between stores. Fails with [`StoreError::Conflict`], writing
    /// nothing, unless the journal has exactly `expected_seq` entries. Returns the next
    /// sequence number.
    async fn append_entries(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError>;

    /// Appends durable events at `expected_seq` (stamped now, with this build's schema
    /// version): a stream-only event is refused ([`StoreError::Invalid`], nothing appended).
    /// Same conflict rule as [`append_entries`](Self::append_entries).
    async fn append(
        &self,
        run_id: &str,
        expected_seq: u64,
        events: &[Event],
    ) -> Result<u64, StoreError> {
        let entries = (expected_seq..)
            .zip(events)
            .map(|(seq, event)| JournalEntry::of(seq, event.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        self.append_entries(run_id, expected_seq, &entries).await
    }

    /// The whole journal of a run, in order (empty when the run is unknown). Fails with
    /// [`StoreError::UnsupportedSchema`] on an entry of a schema version this build does not
    /// read.
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError>;

    /// The journal's length: the sequence number the next append must expect.
    async fn next_seq(&self, run_id: &str) -> Result<u64, StoreError>;

    /// Runs matching the filter, newest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError>;

    /// Deletes a run's journal; returns whether it existed.
    async fn delete_run(&self, run_id: &str) -> Result<bool, StoreError>;

    /// Takes the run's lease for `owner` for `ttl` (see [`lease`]): atomically, when no lease
    /// is live; fails with [`StoreError::LeaseHeld`] otherwise.
    async fn claim(&self, run_id: &str, owner: &str, ttl: Duration) -> Result<Lease, StoreError>;

    /// Extends `lease` by `ttl` from now; fails with [`StoreError::LeaseLost`] when it is no
    /// longer the run's lease.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError>;

    /// Gives `lease` up (the run can be claimed at once). Releasing a lease that was taken
    /// over is not an error and changes nothing.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// The journal from `from_seq` on (what a subscriber that has seen the entries before
    /// `from_seq` needs). The default loads the whole journal and skips.
    async fn load_from(
        &self,
        run_id: &str,
        from_seq: u64,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let mut entries = self.load(run_id).await?;
        let skip = usize::try_from(from_seq).unwrap_or(usize::MAX).min(entries.len());
        entries.drain(..skip);
        Ok(entries)
    }

    /// A push channel for followers of the run's journal: a stream that yields at least
    /// once after each append from then on (any process), so that
    /// [`RunService::subscribe`](crate::service::RunService::subscribe) reads the journal
    /// when it grew instead of every poll interval. `None` (the default): the store has no
    /// push channel, and a follower polls. Redis has one (pub/sub); SQLite and memory poll.
    async fn watch(
        &self,
        _run_id: &str,
    ) -> Result<Option<futures::stream::BoxStream<'static, ()>>, StoreError> {
        Ok(None)
    }

    /// Records a request for the run's executor, wherever it runs (see [`RemoteControl`]): it
    /// polls [`remote_control`](Self::remote_control) and acts at its next safe point.
    async fn request_control(
        &self,
        run_id: &str,
        request: ControlRequest,
    ) -> Result<RemoteControl, StoreError>;

    /// What has been requested of the run's executor from outside (empty when nothing was).
    async fn remote_control(&self, run_id: &str) -> Result<RemoteControl, StoreError>;

    /// [`remote_control`](Self::remote_control) of each of `run_ids`, in one go where the
    /// store can (one SQLite job, one Redis pipeline): an agent reads its runs' controls with
    /// one call per interval. The default reads them one by one.
    async fn remote_controls(
        &self,
        run_ids: &[String],
    ) -> Result<Vec<(String, RemoteControl)>, StoreError> {
        let mut controls = Vec::with_capacity(run_ids.len());
        for run_id in run_ids {
            controls.push((run_id.clone(), self.remote_control(run_id).await?));
        }
        Ok(controls)
    }

    /// [`append_entries`](Self::append_entries) by the holder of `lease`: refused with
    /// [`StoreError::LeaseLost`], writing nothing, when a newer claim exists.
    async fn append_fenced(
        &self,
        lease: &Lease,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError>;

    /// Removes each of `run_ids` with everything it owns, its sub-agent runs included (see
    /// [`Removal`] and the [`admin`](RemovalRule) notes), all together — one transaction, one
    /// script — unless it, or a descendant, has a live lease or it no longer matches `rule`.
    /// One answer per run id, in order.
    async fn remove_runs(
        &self,
        _run_ids: &[String],
        _rule: &RemovalRule,
    ) -> Result<Vec<Removal>, StoreError> {
        Err(StoreError::Unsupported("removing runs"))
    }

    /// A page of about `limit` registry rows from `cursor` (`None`: the first page; then the
    /// page's `next`), each with its journal's stored length — every row, whatever its
    /// journal holds (a listing leaves out a row whose journal is damaged).
    async fn registry_rows(
        &self,
        _cursor: Option<&str>,
        _limit: usize,
    ) -> Result<RegistryPage, StoreError> {
        Err(StoreError::Unsupported("reading the registry rows"))
    }

    /// The journals that have no registry row.
    async fn orphan_journals(&self) -> Result<Vec<OrphanJournal>, StoreError> {
        Err(StoreError::Unsupported("finding journals without a registry row"))
    }

    /// Writes the run's registry row again from its journal (state, length, times, names,
    /// usage and cost); `false` when the run has no journal.
    async fn rebuild_registry(&self, _run_id: &str) -> Result<bool, StoreError> {
        Err(StoreError::Unsupported("rebuilding a registry row"))
    }

    /// Gives an orphan journal the registry row its entries describe, or removes it when
    /// that cannot be (it names no run, or a run that has another journal). The run id it
    /// was adopted under, if it was.
    async fn adopt_journal(&self, _orphan: &OrphanJournal) -> Result<Option<String>, StoreError> {
        Err(StoreError::Unsupported("adopting a journal"))
    }

    /// What this store has written since it was opened (appends, entries, commits), where it
    /// counts them (the memory, SQLite and Redis stores do); the default is `None`.
    fn write_stats(&self) -> Option<WriteStats> {
        None
    }
}

/// What has been requested of a run's executor from another process: the state the run
/// should be in, applied by the executor at its next safe point (a pause), at once (a
/// cancel), or when it continues a run that waits (the decisions on deferred calls, the
/// answer to a question). State, not a queue: requesting a pause twice pauses once; a
/// decision on a call that no longer waits, or an answer to a question the run no longer
/// asks, is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteControl {
    /// Cancel, with this reason (the first request's reason wins; never withdrawn).
    pub cancel: Option<String>,
    /// Be paused, with this reason (`None`: run).
    pub pause: Option<String>,
    /// Decisions on calls deferred for approval, by call id (the last request per call wins).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decisions: BTreeMap<String, Decision>,
    /// Who made each of `decisions`, by call id, when the request said
    /// ([`ControlRequest::Decide`]'s `by`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decided_by: BTreeMap<String, String>,
    /// The answer to the question the run asked (an ask-user tool), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InputAnswer>,
}

/// An answer to the question a run asked: it applies to the run only while the journal's
/// last entry is still the one at `for_seq` (the entry that stopped the run to ask).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputAnswer {
    /// The sequence number of the entry that asked (the run's `run_finished`).
    pub for_seq: u64,
    /// The answer, as the user's next message.
    pub text: String,
}

/// A request for a run's executor (see [`RunStore::request_control`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRequest {
    /// Cancel the run (as [`RunHandle::cancel`](crate::RunHandle::cancel)).
    Cancel(String),
    /// Pause at the next safe point (as [`RunHandle::pause_with`](crate::RunHandle::pause_with)).
    Pause(String),
    /// Go on after a pause.
    Resume,
    /// Decide on a call deferred for approval.
    Decide {
        /// The call.
        call_id: String,
        /// The decision.
        decision: Decision,
        /// Who decided, as the caller names them (journaled with the decision).
        by: Option<String>,
    },
    /// Answer the question the run asked.
    Input(InputAnswer),
}

impl RemoteControl {
    /// The state after `request`.
    pub fn apply(mut self, request: ControlRequest) -> Self {
        match request {
            ControlRequest::Cancel(reason) => {
                self.cancel.get_or_insert(reason);
            }
            ControlRequest::Pause(reason) => self.pause = Some(reason),
            ControlRequest::Resume => self.pause = None,
            ControlRequest::Decide { call_id, decision, by } => {
                match by {
                    Some(by) => self.decided_by.insert(call_id.clone(), by),
                    None => self.decided_by.remove(&call_id),
                };
                self.decisions.insert(call_id, decision);
            }
            ControlRequest::Input(answer) => self.input = Some(answer),
        }
        self
    }
}

/// Where a multi-turn session stands: created → ready → busy → ready → …
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Opened; no turn has run yet.
    Created,
    /// Between turns.
    Ready,
    /// A turn is running.
    Busy,
}

impl SessionState {
    /// Its name (`created`, `ready`, `busy`), as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Ready => "ready",
            Self::Busy => "busy",
        }
    }

    /// Parses a stored name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "created" => Self::Created,
            "ready" => Self::Ready,
            "busy" => Self::Busy,
            _ => return None,
        })
    }
}

impl std::fmt::Display for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session (`RunConfig::context_id` of its runs).
    pub context_id: String,
    /// Where it stands.
    pub state: SessionState,
    /// The run of the turn in progress (busy) or of the last turn.
    pub run_id: Option<String>,
    /// Turns ended so far.
    pub turns: u64,
    /// Messages in its conversation.
    pub messages: u64,
    /// When it was created (ms since the Unix epoch).
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
}

impl SessionInfo {
    /// A new session, created now.
    pub fn new(context_id: impl Into<String>) -> Self {
        let now = now_ms();
        Self {
            context_id: context_id.into(),
            state: SessionState::Created,
            run_id: None,
            turns: 0,
            messages: 0,
            created_ms: now,
            updated_ms: now,
        }
    }
}

/// Where the conversations of multi-turn sessions live. Only the conversation is stored
/// (user, assistant and tool messages), never the instructions: they are injected at call
/// time. A turn is `begin_turn` (ready → busy, returns the history) … `end_turn` (appends the
/// turn's new messages, busy → ready).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The session, created (state `created`) if it does not exist.
    async fn open_session(&self, context_id: &str) -> Result<SessionInfo, StoreError>;

    /// The session, if it exists.
    async fn get_session(&self, context_id: &str) -> Result<Option<SessionInfo>, StoreError>;

    /// Starts a turn for `run_id` (creating the session if needed) and returns the
    /// conversation so far. Fails with [`StoreError::SessionBusy`] while another turn runs.
    async fn begin_turn(&self, context_id: &str, run_id: &str) -> Result<Vec<Message>, StoreError>;

    /// Ends the turn of `run_id`, appending its new messages (none for a turn that failed or
    /// was cancelled). Fails with [`StoreError::NotInTurn`] if that turn is not in progress.
    async fn end_turn(
        &self,
        context_id: &str,
        run_id: &str,
        new_messages: &[Message],
    ) -> Result<SessionInfo, StoreError>;

    /// The conversation so far.
    async fn session_messages(&self, context_id: &str) -> Result<Vec<Message>, StoreError>;

    /// Deletes the session and its conversation; returns whether it existed.
    async fn delete_session(&self, context_id: &str) -> Result<bool, StoreError>;
}

/// An artifact's description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    /// Its id (a new time-ordered id).
    pub id: String,
    /// The run it belongs to.
    pub run_id: String,
    /// Its name (e.g. a file name).
    pub name: String,
    /// Its MIME type.
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// How many chunks it was written in.
    pub chunks: u64,
    /// When it was created (ms since the Unix epoch).
    pub created_ms: u64,
    /// When it last grew.
    pub updated_ms: u64,
}

/// An artifact with its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Its description.
    pub meta: ArtifactMeta,
    /// Its bytes (the chunks, concatenated).
    pub data: Vec<u8>,
}

/// A new artifact, for [`ArtifactStore::create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewArtifact<'a> {
    /// The run it belongs to.
    pub run_id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its MIME type.
    pub media_type: &'a str,
    /// Its first bytes (may be empty).
    pub data: &'a [u8],
}

impl NewArtifact<'_> {
    /// Its description, with a new id, made at `at_ms`, its first bytes as one chunk.
    pub(crate) fn meta(&self, at_ms: u64) -> ArtifactMeta {
        ArtifactMeta {
            id: new_artifact_id(),
            run_id: self.run_id.to_owned(),
            name: self.name.to_owned(),
            media_type: self.media_type.to_owned(),
            size: self.data.len() as u64,
            chunks: u64::from(!self.data.is_empty()),
            created_ms: at_ms,
            updated_ms: at_ms,
        }
    }
}

/// Where large outputs of a run live (trimmed tool outputs, files an agent produces).
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Creates an artifact with its first bytes.
    async fn create_artifact(&self, artifact: NewArtifact<'_>) -> Result<ArtifactMeta, StoreError>;

    /// Appends a chunk; fails with [`StoreError::NotFound`] if the artifact does not exist.
    async fn append_chunk(&self, id: &str, chunk: &[u8]) -> Result<ArtifactMeta, StoreError>;

    /// The artifact with its content.
    async fn get_artifact(&self, id: &str) -> Result<Option<Artifact>, StoreError>;

    /// The artifacts of a run, oldest first.
    async fn list_artifacts(&self, run_id: &str) -> Result<Vec<ArtifactMeta>, StoreError>;

    /// Deletes an artifact; returns whether it existed.
    async fn delete_artifact(&self, id: &str) -> Result<bool, StoreError>;
}

/// A new artifact id.
pub(crate) fn new_artifact_id() -> String {
    format!("art_{}", uuid::Uuid::now_v7().simple())
}

#[cfg(test)]
mod tests;
