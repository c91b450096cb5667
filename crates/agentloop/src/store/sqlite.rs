//! [`SqliteStore`]: runs, sessions and artifacts in one SQLite file (WAL mode,
//! `synchronous=NORMAL`, schema migrations with a version table). The default file is
//! `./.agentloop/agentloop.db`.
//!
//! SQLite calls block, so they run on a dedicated connection thread; the async methods send
//! it a job and await the answer. Journal appends are **group-committed** on that thread: the
//! appends of all runs queued while a transaction commits share the next one (an append its
//! checks refuse writes nothing), and each is acknowledged once its transaction committed
//! (`writer.rs`; [`SqliteOptions::max_batch`], [`SqliteOptions::group_commit_delay`]). A
//! second thread checkpoints the write-ahead log (`checkpointer.rs`), so that the writer
//! does not.
//! Several processes may share one file: every write is an
//! `IMMEDIATE` transaction (a `busy_timeout` waits for the other writer), and the
//! expected-sequence check runs inside it, so two writers never interleave a journal.
//!
//! With `synchronous=NORMAL` in WAL mode a commit survives a crash of the process (the
//! crash test kills it with SIGKILL); the last commits may be lost if the machine loses
//! power. Set [`SqliteOptions::synchronous_full`] to pay an fsync per append instead.

use super::{
    check_batch, check_dense_from, decode_parts, from_json, now_ms, outputs, to_json, write_json,
    ControlRequest, JournalEntry, Lease, RemoteControl, RunFilter, RunStore, RunSummary,
    SessionInfo, SessionState, SessionStore, StoreError, SummaryUpdate, JSON_PER_ENTRY,
};
use crate::message::Message;
use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

mod admin;
mod artifacts;
mod checkpointer;
mod lease;
mod registry;
mod schema;
mod statements;
mod writer;

use super::stats::WriteCounters;
use schema::{current_version, migrate};
use writer::{Append, Courier, Couriers, Grouping, Job, Op};

/// The default database file.
pub const DEFAULT_PATH: &str = ".agentloop/agentloop.db";

/// Options of [`SqliteStore::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// How long a write waits for another process's write (default 5 s).
    pub busy_timeout: Duration,
    /// `synchronous=FULL` (an fsync per commit) instead of `NORMAL`.
    pub synchronous_full: bool,
    /// Journal appends committed in one transaction at most (group commit; default 256).
    pub max_batch: usize,
    /// How long the first append of a batch waits for others to join it (default zero:
    /// a batch is what queued while the last transaction committed, so a run alone is not
    /// slower; 1–2 ms gathers bigger batches under load at that cost in latency).
    pub group_commit_delay: Duration,
    /// The connection's page cache in KiB (default 16 MiB, SQLite's own default is 2 MiB):
    /// pages are taken from it as needed, up to this. With many runs at once their journals'
    /// pages no longer fit in 2 MiB, and every append read its pages back from the file.
    pub cache_kib: u32,
    /// How often a thread of the store's own copies the write-ahead log into the database
    /// file (a `PASSIVE` checkpoint, which neither waits for the writer nor makes it wait;
    /// default 100 ms). Zero: no such thread, the writer checkpoints at
    /// [`checkpoint_pages`](Self::checkpoint_pages) as SQLite does by default.
    pub checkpoint_interval: Duration,
    /// Pages the write-ahead log may grow to before the connection that commits copies it
    /// into the database file itself (SQLite's automatic checkpoint; default 40,000, about
    /// 160 MB, a backstop for when the checkpoint thread cannot keep up; SQLite's own default
    /// is 1,000).
    pub checkpoint_pages: u32,
    /// Tool outputs of at least this many bytes are journaled by reference: kept as an
    /// artifact of the run, written in the append's transaction, and put back when the
    /// journal is loaded (default [`DEFAULT_LARGE_OUTPUT_BYTES`], 32 KiB; `None`: always in
    /// the journal). See [`crate::store`], "large outputs by reference".
    ///
    /// [`DEFAULT_LARGE_OUTPUT_BYTES`]: crate::store::DEFAULT_LARGE_OUTPUT_BYTES
    pub large_output_bytes: Option<usize>,
    /// Whether a committed batch wakes each runtime that awaits its answers once (default
    /// `true`): a task of the store's on that runtime gets the batch's answers and wakes the
    /// waiting tasks from there, so they are queued as tasks woken on the runtime are.
    /// `false`: the connection thread wakes each waiting task itself, from outside the
    /// runtime, and tokio takes such tasks last while others are ready (one per 31 polls by
    /// default, `global_queue_interval`), which under load makes an append wait longer in the
    /// runtime's queue than in the store (docs/PERFORMANCE.md, "ninth step"). Callers that
    /// are not a runtime's task (a future that `block_on` polls) are always woken directly.
    pub wake_per_batch: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            synchronous_full: false,
            max_batch: 256,
            group_commit_delay: Duration::ZERO,
            cache_kib: 16 * 1024,
            checkpoint_interval: Duration::from_millis(100),
            checkpoint_pages: 40_000,
            large_output_bytes: Some(super::DEFAULT_LARGE_OUTPUT_BYTES),
            wake_per_batch: true,
        }
    }
}

/// Runs, sessions and artifacts in a SQLite file. Cheap to share (`Arc`); one connection
/// thread per store.
pub struct SqliteStore {
    jobs: mpsc::Sender<Job>,
    path: PathBuf,
    /// Dropped with the store, it stops the checkpoint thread.
    _checkpointer: Option<mpsc::Sender<()>>,
    /// What the connection thread has committed.
    counters: Arc<WriteCounters>,
    /// [`SqliteOptions::large_output_bytes`].
    large_output_bytes: Option<usize>,
    /// The couriers that answer the waiters of each runtime; `None` without
    /// [`SqliteOptions::wake_per_batch`].
    couriers: Option<Couriers>,
}

/// The size in bytes the write-ahead log file is cut back to after a checkpoint, should it
/// have grown beyond (SQLite otherwise keeps the file at its largest).
const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).finish()
    }
}

fn backend(error: impl std::fmt::Display) -> StoreError {
    StoreError::Backend { backend: "sqlite", message: error.to_string() }
}

fn closed() -> StoreError {
    backend("the connection thread has stopped")
}

/// A stored integer as u64 (SQLite integers are signed).
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn uint(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl SqliteStore {
    /// Opens (creating it and its directory if needed) the default file,
    /// `./.agentloop/agentloop.db`.
    pub fn open_default() -> Result<Self, StoreError> {
        Self::open(DEFAULT_PATH)
    }

    /// Opens (creating if needed) a database file and brings its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// [`open`](Self::open) with options.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| backend(format!("cannot create directory {}: {e}", dir.display())))?;
        }
        let mut conn = Connection::open(&path).map_err(backend)?;
        conn.busy_timeout(options.busy_timeout).map_err(backend)?;
        let synchronous = if options.synchronous_full { "FULL" } else { "NORMAL" };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; \
             PRAGMA cache_size = -{}; PRAGMA wal_autocheckpoint = {}; \
             PRAGMA journal_size_limit = {};",
            options.cache_kib, options.checkpoint_pages, WAL_SIZE_LIMIT
        ))
        .map_err(backend)?;
        migrate(&mut conn)?;
        let checkpointer = checkpointer::start(&path, &options)?;
        let (jobs, receiver) = mpsc::channel::<Job>();
        let grouping =
            Grouping { max_batch: options.max_batch.max(1), delay: options.group_commit_delay };
        let counters = Arc::new(WriteCounters::default());
        let served = counters.clone();
        std::thread::Builder::new()
            .name("agentloop-sqlite".into())
            .spawn(move || writer::serve(conn, receiver, grouping, &served))
            .map_err(|e| backend(format!("cannot start the connection thread: {e}")))?;
        Ok(Self {
            jobs,
            path,
            _checkpointer: checkpointer,
            counters,
            large_output_bytes: options.large_output_bytes,
            couriers: options.wake_per_batch.then(Couriers::default),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the file (the number of migrations applied).
    pub async fn schema_version(&self) -> Result<u32, StoreError> {
        self.call(|conn| current_version(conn)).await
    }

    /// Runs `job` on the connection thread.
    async fn call<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let courier = self.courier();
        self.jobs
            .send(Job::Any(Box::new(move |conn| {
                let result = job(conn);
                let send = move || {
                    let _ = reply.send(result);
                };
                match courier {
                    Some(courier) => courier.reply(Box::new(send)),
                    None => send(),
                }
            })))
            .map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// Who wakes the calling task with a batched op's answer (`None`: the connection thread).
    fn courier(&self) -> Option<Courier> {
        self.couriers.as_ref().and_then(Couriers::current)
    }

    /// Queues `op` for the writer's next batch and waits for its answer.
    async fn batched<T>(
        &self,
        op: Op,
        answer: tokio::sync::oneshot::Receiver<Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.jobs.send(Job::Batched(op)).map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }
}

/// An append's entries ready to insert: their events' JSON one after the other in one
/// buffer (one allocation for the append, not one growing string per entry) and each entry's
/// row.
struct Rows {
    json: Vec<u8>,
    rows: Vec<Row>,
}

/// An entry ready to insert; its event's JSON ends at `end` in [`Rows::json`].
struct Row {
    seq: u64,
    at_ms: u64,
    schema_version: u32,
    end: usize,
}

impl Rows {
    fn encode(entries: &[JournalEntry]) -> Result<Self, StoreError> {
        let mut json = Vec::with_capacity(entries.len() * JSON_PER_ENTRY);
        let mut rows = Vec::with_capacity(entries.len());
        for entry in entries {
            write_json(&mut json, &entry.event)?;
            rows.push(Row {
                seq: entry.seq,
                at_ms: entry.at_ms,
                schema_version: entry.schema_version,
                end: json.len(),
            });
        }
        Ok(Self { json, rows })
    }

    fn len(&self) -> usize {
        self.rows.len()
    }

    /// Each row with its event's JSON.
    fn iter(&self) -> impl Iterator<Item = (&Row, &[u8])> {
        let mut start = 0;
        self.rows.iter().map(move |row| {
            let json = self.json.get(start..row.end).unwrap_or_default();
            start = row.end;
            (row, json)
        })
    }
}

impl SqliteStore {
    /// An append, fenced by `fence` when given (checked in the append's transaction).
    async fn append(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
        fence: Option<Lease>,
    ) -> Result<u64, StoreError> {
        check_batch(expected_seq, entries)?;
        let Some(update) = SummaryUpdate::of(entries) else {
            let actual = self.next_seq(run_id).await?;
            return if actual == expected_seq {
                Ok(actual)
            } else {
                Err(StoreError::Conflict {
                    run_id: run_id.to_owned(),
                    expected: expected_seq,
                    actual,
                })
            };
        };
        let (stored, artifacts) =
            match outputs::by_reference(run_id, entries, self.large_output_bytes) {
                Some((stored, artifacts)) => (Cow::Owned(stored), artifacts),
                None => (Cow::Borrowed(entries), Vec::new()),
            };
        let rows = Rows::encode(&stored)?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let append = Append {
            run_id: run_id.to_owned(),
            expected_seq,
            rows,
            artifacts,
            update,
            fence,
            reply,
            courier: self.courier(),
            queued: std::time::Instant::now(),
        };
        self.jobs.send(Job::Batched(Op::Append(Box::new(append)))).map_err(|_| closed())?;
        let answer = answer.await.map_err(|_| closed())?;
        drop(answer.spent);
        answer.result
    }
}

#[async_trait]
impl RunStore for SqliteStore {
    async fn append_entries(
        &self,
        run_id: &str,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.append(run_id, expected_seq, entries, None).await
    }

    async fn append_fenced(
        &self,
        lease: &Lease,
        expected_seq: u64,
        entries: &[JournalEntry],
    ) -> Result<u64, StoreError> {
        self.append(&lease.run_id, expected_seq, entries, Some(lease.clone())).await
    }

    async fn claim(&self, run_id: &str, owner: &str, ttl: Duration) -> Result<Lease, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        let claim = writer::Claim { run_id, owner, ttl, reply, courier: self.courier() };
        self.batched(Op::Claim(Box::new(claim)), answer).await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<Lease, StoreError> {
        let lease = lease.clone();
        self.call(move |conn| lease::renew(conn, &lease, ttl)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let release = writer::Release { lease: lease.clone(), reply, courier: self.courier() };
        self.batched(Op::Release(Box::new(release)), answer).await
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.load_from(run_id, 0).await
    }

    async fn load_from(&self, run_id: &str, from: u64) -> Result<Vec<JournalEntry>, StoreError> {
        let run_id = run_id.to_owned();
        self.call(move |conn| {
            let mut select = conn
                .prepare_cached(
                    "SELECT seq, at_ms, schema_version, event FROM journal \
                     WHERE run_key = (SELECT run_key FROM runs WHERE run_id = ?1) \
                     AND seq >= ?2 ORDER BY seq",
                )
                .map_err(backend)?;
            let rows = select
                .query_map(params![run_id, int(from)], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, u32>(2)?,
                        row.get::<_, String>(3)?,
                    ))
                })
                .map_err(backend)?;
            let mut entries = Vec::new();
            for row in rows {
                let (seq, at_ms, version, event) = row.map_err(backend)?;
                let event = from_json(&event, &format!("run '{run_id}', entry {seq}"))?;
                entries.push(decode_parts(&run_id, uint(seq), uint(at_ms), version, event)?);
            }
            check_dense_from(&run_id, from, &entries)?;
            outputs::restore(&run_id, &mut entries, |id| artifacts::data(conn, id))?;
            Ok(entries)
        })
        .await
    }

    async fn request_control(
        &self,
        run_id: &str,
        request: ControlRequest,
    ) -> Result<RemoteControl, StoreError> {
        let run_id = run_id.to_owned();
        self.call(move |conn| lease::request_control(conn, &run_id, request)).await
    }

    async fn remote_control(&self, run_id: &str) -> Result<RemoteControl, StoreError> {
        let run_id = run_id.to_owned();
        self.call(move |conn| lease::remote_control(conn, &run_id)).await
    }

    async fn remote_controls(
        &self,
        run_ids: &[String],
    ) -> Result<Vec<(String, RemoteControl)>, StoreError> {
        // One job on the connection thread for all of them.
        let run_ids = run_ids.to_vec();
        self.call(move |conn| {
            run_ids
                .into_iter()
                .map(|run_id| lease::remote_control(conn, &run_id).map(|c| (run_id, c)))
                .collect()
        })
        .await
    }

    async fn next_seq(&self, run_id: &str) -> Result<u64, StoreError> {
        let run_id = run_id.to_owned();
        self.call(move |conn| {
            conn.prepare_cached("SELECT next_seq FROM runs WHERE run_id = ?1")
                .and_then(|mut s| s.query_row([&run_id], |row| row.get::<_, i64>(0)).optional())
                .map(|n| n.map_or(0, uint))
                .map_err(backend)
        })
        .await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
        let filter = filter.clone();
        self.call(move |conn| registry::list(conn, &filter)).await
    }

    async fn delete_run(&self, run_id: &str) -> Result<bool, StoreError> {
        let run_id = run_id.to_owned();
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            tx.execute(
                "DELETE FROM journal WHERE run_key = (SELECT run_key FROM runs WHERE run_id = ?1)",
                [&run_id],
            )
            .map_err(backend)?;
            tx.execute("DELETE FROM run_controls WHERE run_id = ?1", [&run_id]).map_err(backend)?;
            artifacts::delete_of_run(&tx, &run_id).map_err(backend)?;
            let deleted =
                tx.execute("DELETE FROM runs WHERE run_id = ?1", [&run_id]).map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(deleted > 0)
        })
        .await
    }

    async fn remove_runs(
        &self,
        run_ids: &[String],
        rule: &super::RemovalRule,
    ) -> Result<Vec<super::Removal>, StoreError> {
        let (run_ids, rule) = (run_ids.to_vec(), rule.clone());
        self.call(move |conn| admin::remove(conn, &run_ids, &rule)).await
    }

    async fn registry_rows(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<super::RegistryPage, StoreError> {
        let after = after.map(str::to_owned);
        let rows = self.call(move |conn| admin::rows(conn, after.as_deref(), limit)).await?;
        let next = rows.last().filter(|_| rows.len() == limit).map(|r| r.summary.run_id.clone());
        Ok(super::RegistryPage::new(rows, next))
    }

    async fn orphan_journals(&self) -> Result<Vec<super::OrphanJournal>, StoreError> {
        self.call(|conn| admin::orphans(conn)).await
    }

    async fn rebuild_registry(&self, run_id: &str) -> Result<bool, StoreError> {
        let run_id = run_id.to_owned();
        self.call(move |conn| admin::rebuild(conn, &run_id)).await
    }

    async fn adopt_journal(
        &self,
        orphan: &super::OrphanJournal,
    ) -> Result<Option<String>, StoreError> {
        let orphan = orphan.clone();
        self.call(move |conn| admin::adopt(conn, &orphan)).await
    }

    fn write_stats(&self) -> Option<super::WriteStats> {
        Some(self.counters.snapshot())
    }
}

fn session_info(conn: &Connection, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
    conn.prepare_cached(
        "SELECT state, run_id, turns, messages, created_ms, updated_ms FROM sessions \
         WHERE context_id = ?1",
    )
    .and_then(|mut s| {
        s.query_row([context_id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, i64>(5)?,
            ))
        })
        .optional()
    })
    .map_err(backend)?
    .map(|(state, run_id, turns, messages, created_ms, updated_ms)| {
        Ok(SessionInfo {
            context_id: context_id.to_owned(),
            state: SessionState::parse(&state).ok_or_else(|| {
                StoreError::Corrupt(format!("session '{context_id}': unknown state '{state}'"))
            })?,
            run_id,
            turns: uint(turns),
            messages: uint(messages),
            created_ms: uint(created_ms),
            updated_ms: uint(updated_ms),
        })
    })
    .transpose()
}

/// The session, created if missing (inside the caller's transaction).
fn open_session(conn: &Connection, context_id: &str) -> Result<SessionInfo, StoreError> {
    if let Some(info) = session_info(conn, context_id)? {
        return Ok(info);
    }
    let info = SessionInfo::new(context_id);
    conn.execute(
        "INSERT INTO sessions (context_id, state, run_id, turns, messages, created_ms, \
         updated_ms) VALUES (?1, ?2, NULL, 0, 0, ?3, ?3)",
        params![context_id, info.state.as_str(), int(info.created_ms)],
    )
    .map_err(backend)?;
    Ok(info)
}

fn session_messages(conn: &Connection, context_id: &str) -> Result<Vec<Message>, StoreError> {
    let mut select = conn
        .prepare_cached("SELECT message FROM session_messages WHERE context_id = ?1 ORDER BY seq")
        .map_err(backend)?;
    let rows = select.query_map([context_id], |row| row.get::<_, String>(0)).map_err(backend)?;
    let mut messages = Vec::new();
    for row in rows {
        let json = row.map_err(backend)?;
        messages.push(from_json(&json, &format!("session '{context_id}': a message"))?);
    }
    Ok(messages)
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn open_session(&self, context_id: &str) -> Result<SessionInfo, StoreError> {
        let context_id = context_id.to_owned();
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            let info = open_session(&tx, &context_id)?;
            tx.commit().map_err(backend)?;
            Ok(info)
        })
        .await
    }

    async fn get_session(&self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
        let context_id = context_id.to_owned();
        self.call(move |conn| session_info(conn, &context_id)).await
    }

    async fn begin_turn(&self, context_id: &str, run_id: &str) -> Result<Vec<Message>, StoreError> {
        let (context_id, run_id) = (context_id.to_owned(), run_id.to_owned());
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            let info = open_session(&tx, &context_id)?;
            if info.state == SessionState::Busy {
                return Err(StoreError::SessionBusy {
                    context_id,
                    run_id: info.run_id.unwrap_or_default(),
                });
            }
            tx.execute(
                "UPDATE sessions SET state = 'busy', run_id = ?2, updated_ms = ?3 \
                 WHERE context_id = ?1",
                params![context_id, run_id, int(now_ms())],
            )
            .map_err(backend)?;
            let messages = session_messages(&tx, &context_id)?;
            tx.commit().map_err(backend)?;
            Ok(messages)
        })
        .await
    }

    async fn end_turn(
        &self,
        context_id: &str,
        run_id: &str,
        new_messages: &[Message],
    ) -> Result<SessionInfo, StoreError> {
        let (context_id, run_id) = (context_id.to_owned(), run_id.to_owned());
        let messages = new_messages.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            let mut info = session_info(&tx, &context_id)?
                .ok_or_else(|| StoreError::NotFound { what: "session", id: context_id.clone() })?;
            if info.state != SessionState::Busy || info.run_id.as_deref() != Some(&run_id) {
                return Err(StoreError::NotInTurn { context_id, run_id, state: info.state });
            }
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO session_messages (context_id, seq, message) \
                         VALUES (?1, ?2, ?3)",
                    )
                    .map_err(backend)?;
                for (seq, message) in (info.messages..).zip(&messages) {
                    insert.execute(params![context_id, int(seq), message]).map_err(backend)?;
                }
            }
            info.state = SessionState::Ready;
            info.turns += 1;
            info.messages += messages.len() as u64;
            info.updated_ms = now_ms();
            tx.execute(
                "UPDATE sessions SET state = 'ready', turns = ?2, messages = ?3, updated_ms = ?4 \
                 WHERE context_id = ?1",
                params![context_id, int(info.turns), int(info.messages), int(info.updated_ms)],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(info)
        })
        .await
    }

    async fn session_messages(&self, context_id: &str) -> Result<Vec<Message>, StoreError> {
        let context_id = context_id.to_owned();
        self.call(move |conn| session_messages(conn, &context_id)).await
    }

    async fn delete_session(&self, context_id: &str) -> Result<bool, StoreError> {
        let context_id = context_id.to_owned();
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            tx.execute("DELETE FROM session_messages WHERE context_id = ?1", [&context_id])
                .map_err(backend)?;
            let deleted = tx
                .execute("DELETE FROM sessions WHERE context_id = ?1", [&context_id])
                .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(deleted > 0)
        })
        .await
    }
}
