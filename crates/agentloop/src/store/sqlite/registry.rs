//! The run registry in SQLite: the `runs` table, one row per run, kept up to date by every
//! append in the append's own transaction (state, times, length, parent, usage and cost),
//! and `list_runs`, which reads it with each run's lease (`LEFT JOIN leases`).

use super::statements::{Sql, Statements};
use super::{backend, int, uint};
use crate::message::Usage;
use crate::store::{
    cost_of, from_json, input_preview, to_json, RunFilter, RunState, RunSummary, StoreError,
    SummaryUpdate,
};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, Connection, OptionalExtension};

/// The migration that adds the registry's columns (the 4th): the parent run, the price, the
/// usage and cost so far. Runs journaled before it get their price and usage from their
/// journals (their cost follows in [`backfill_costs`]).
pub(super) const MIGRATION: &str = r"
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN price TEXT;
ALTER TABLE runs ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cached_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
CREATE INDEX runs_by_parent ON runs (parent_run_id, created_ms);
UPDATE runs SET price = (
    SELECT json_extract(j.event, '$.config.price') FROM journal j
    WHERE j.run_id = runs.run_id AND j.seq = 0
      AND json_extract(j.event, '$.type') = 'run_started'
);
WITH used AS (
    SELECT run_id,
           SUM(COALESCE(json_extract(event, '$.usage.input'), 0)) AS input,
           SUM(COALESCE(json_extract(event, '$.usage.output'), 0)) AS output,
           SUM(COALESCE(json_extract(event, '$.usage.cached_input'), 0)) AS cached_input,
           SUM(COALESCE(json_extract(event, '$.usage.reasoning'), 0)) AS reasoning
    FROM journal
    WHERE json_extract(event, '$.type') IN ('model_responded', 'compaction_completed')
    GROUP BY run_id
)
UPDATE runs SET input_tokens = used.input, output_tokens = used.output,
    cached_input_tokens = used.cached_input, reasoning_tokens = used.reasoning
FROM used WHERE used.run_id = runs.run_id;
";

/// The migration that adds the registry's texts and the indexes a listing by state or by
/// origin reads (the 8th): the run a fork was made from, the start of the input and of the
/// answer; and who made the decisions requested of a run (`run_controls.decided_by`). Runs journaled before it get their origin and answer from their journals here,
/// their input in [`backfill_inputs`].
pub(super) const TEXTS_MIGRATION: &str = r"
ALTER TABLE runs ADD COLUMN origin_run_id TEXT;
ALTER TABLE runs ADD COLUMN input_text TEXT;
ALTER TABLE runs ADD COLUMN answer_text TEXT;
CREATE INDEX runs_by_state ON runs (state, created_ms, run_id);
CREATE INDEX runs_by_origin ON runs (origin_run_id, created_ms);
ALTER TABLE run_controls ADD COLUMN decided_by TEXT;
UPDATE runs SET origin_run_id = (
    SELECT json_extract(j.event, '$.origin_run_id') FROM journal j
    WHERE j.run_key = runs.run_key AND json_extract(j.event, '$.type') = 'run_forked'
    ORDER BY j.seq LIMIT 1
);
UPDATE runs SET answer_text = (
    SELECT NULLIF(substr(json_extract(j.event, '$.outcome.answer'), 1, 500), '') FROM journal j
    WHERE j.run_key = runs.run_key AND json_extract(j.event, '$.type') = 'run_finished'
    ORDER BY j.seq DESC LIMIT 1
);
";

/// After [`TEXTS_MIGRATION`]: the input of each run, from its `run_started`, a thousand runs
/// at a time (a journal whose first entry does not read as one is left without:
/// `RunService::check` reports it).
pub(super) fn backfill_inputs(conn: &Connection) -> Result<(), StoreError> {
    let mut select = conn
        .prepare(
            "SELECT r.run_key, j.event FROM runs r JOIN journal j \
             ON j.run_key = r.run_key AND j.seq = 0 \
             WHERE r.run_key > ?1 ORDER BY r.run_key LIMIT 1000",
        )
        .map_err(backend)?;
    let mut update =
        conn.prepare("UPDATE runs SET input_text = ?2 WHERE run_key = ?1").map_err(backend)?;
    let mut after = i64::MIN;
    loop {
        let firsts = select
            .query_map([after], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(backend)?;
        let Some(&(last, _)) = firsts.last() else { return Ok(()) };
        after = last;
        for (key, event) in firsts {
            let Ok(crate::event::Event::RunStarted { input, .. }) = serde_json::from_str(&event)
            else {
                continue;
            };
            if let Some(text) = input_preview(&input) {
                update.execute(params![key, text]).map_err(backend)?;
            }
        }
    }
}

/// After [`MIGRATION`]: the cost of the runs it found usage for, at their price (computed
/// here, with the same function as on append).
pub(super) fn backfill_costs(conn: &Connection) -> Result<(), StoreError> {
    let priced = {
        let mut select = conn
            .prepare(
                "SELECT run_id, price, input_tokens, output_tokens, cached_input_tokens, \
                 reasoning_tokens FROM runs WHERE price IS NOT NULL",
            )
            .map_err(backend)?;
        let rows = select
            .query_map([], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?, usage_at(row, 2)?))
            })
            .map_err(backend)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(backend)?
    };
    let mut update =
        conn.prepare("UPDATE runs SET cost_usd = ?2 WHERE run_id = ?1").map_err(backend)?;
    for (run_id, price, usage) in priced {
        let price = price.map(|json| from_json(&json, &format!("run '{run_id}': its price")));
        let cost = cost_of(price.transpose()?.as_ref(), &usage);
        update.execute(params![run_id, cost]).map_err(backend)?;
    }
    Ok(())
}

/// A run's usage from four integer columns starting at `first`.
fn usage_at(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Usage> {
    Ok(Usage {
        input: uint(row.get(first)?),
        output: uint(row.get(first + 1)?),
        cached_input: uint(row.get(first + 2)?),
        reasoning: uint(row.get(first + 3)?),
        // The registry keeps no cache writes: its cost prices them as input.
        cache_write_input: 0,
    })
}

/// What an append reads of its run's row: its key, the journal's length, and the price and
/// usage its cost is computed from.
pub(super) struct Current {
    /// The run's key (`None`: no row yet).
    key: Option<i64>,
    /// The journal's length (0: no row yet).
    pub(super) next_seq: u64,
    price: Option<String>,
    usage: Usage,
}

/// The run's row as an append needs it (inside the append's transaction).
pub(super) fn current(conn: &Connection, run_id: &str) -> Result<Current, StoreError> {
    conn.prepare_cached(
        "SELECT run_key, next_seq, price, input_tokens, output_tokens, cached_input_tokens, \
         reasoning_tokens FROM runs WHERE run_id = ?1",
    )
    .and_then(|mut s| {
        s.query_row([run_id], |row| {
            Ok(Current {
                key: Some(row.get(0)?),
                next_seq: uint(row.get(1)?),
                price: row.get(2)?,
                usage: usage_at(row, 3)?,
            })
        })
        .optional()
    })
    .map_err(backend)
    .map(|row| {
        row.unwrap_or(Current { key: None, next_seq: 0, price: None, usage: Usage::default() })
    })
}

/// An append's fast path, for a run whose row exists and a batch without `run_started`: one
/// statement checks the journal's length (`expected`) and, with a `fence`, that the lease's
/// owner and epoch are still the stored ones, and writes the run's row (its length `next`,
/// state, time and usage); a second reads the run's key (and what its cost needs, which
/// follows when the usage changed). Gives the run's key, or `None` when a check refused it:
/// nothing was written, and [`current`] and the lease tell why.
///
/// Not `UPDATE … RETURNING`: SQLite gathers a `RETURNING` clause's rows in a temporary
/// b-tree that it opens, zeroes a page for and closes again at every execution, which cost
/// the writer thread 15–20 % of its instructions (callgrind, `bench-driver --store sqlite`);
/// an indexed read of the row just written is far cheaper. `OR FAIL`: with its default
/// conflict resolution (`ABORT`) SQLite keeps a statement journal to undo a failed `UPDATE`
/// halfway (a copy of the run's page, allocated and freed again at every append); the
/// statement updates one row, and should it fail the batch's transaction (or the append's
/// savepoint) is rolled back anyway.
pub(super) fn advance(
    statements: &mut Statements<'_>,
    run_id: &str,
    expected: u64,
    next: u64,
    update: &SummaryUpdate,
    fence: Option<(&str, u64)>,
) -> Result<Option<i64>, StoreError> {
    let usage = update.usage;
    let (owner, epoch) = fence.map_or((None, 0), |(owner, epoch)| (Some(owner), epoch));
    let (state, last_ms, next) = (update.state.as_str(), int(update.last_ms), int(next));
    let (expected, epoch) = (int(expected), int(epoch));
    let tokens = [usage.input, usage.output, usage.cached_input, usage.reasoning].map(int);
    let values: [&dyn rusqlite::ToSql; 13] = [
        &run_id,
        &expected,
        &state,
        &last_ms,
        &next,
        &tokens[0],
        &tokens[1],
        &tokens[2],
        &tokens[3],
        &owner,
        &epoch,
        &update.origin_run_id,
        &update.answer,
    ];
    let mut advance = |sql: Sql| {
        let values = match sql {
            Sql::AdvanceState => &values[..],
            _ => &values[..11],
        };
        statements.get(sql).and_then(|s| s.execute(values)).map_err(backend)
    };
    // Most appends leave the state as it is (a round of the loop): they do not write it. One
    // that changes it (a run that finishes, suspends, goes on) or names the origin or the
    // answer writes them all; an append that was expected to leave the state but finds the
    // run in another (one that goes on after a pause) writes it too.
    let stays = update.state == RunState::Running
        && update.origin_run_id.is_none()
        && update.answer.is_none();
    let mut changed = if stays { advance(Sql::Advance)? } else { 0 };
    if changed == 0 {
        changed = advance(Sql::AdvanceState)?;
    }
    if changed == 0 {
        return Ok(None);
    }
    let (key, price, total) = statements
        .get(Sql::RunKey)
        .and_then(|s| {
            s.query_row([run_id], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?, usage_at(row, 2)?))
            })
        })
        .map_err(backend)?;
    if usage != Usage::default() {
        let price = price
            .as_deref()
            .map(|json| from_json(json, &format!("run '{run_id}': its price")))
            .transpose()?;
        let conn = statements.conn();
        conn.prepare_cached("UPDATE runs SET cost_usd = ?2 WHERE run_key = ?1")
            .and_then(|mut s| s.execute(params![key, cost_of(price.as_ref(), &total)]))
            .map_err(backend)?;
    }
    Ok(Some(key))
}

/// Writes what `update` says of the run's origin, input and answer (each only when the
/// batch held it: `run_forked`, `run_started`, `run_finished`) into the run's row `key`.
pub(super) fn write_texts(
    conn: &Connection,
    key: i64,
    update: &SummaryUpdate,
) -> Result<(), StoreError> {
    let columns = [
        ("origin_run_id", &update.origin_run_id),
        ("input_text", &update.input),
        ("answer_text", &update.answer),
    ];
    for (column, value) in columns {
        if let Some(value) = value {
            conn.prepare_cached(&format!(
                "UPDATE runs SET {column} = NULLIF(?2, '') WHERE run_key = ?1"
            ))
            .and_then(|mut s| s.execute(params![key, value]))
            .map_err(backend)?;
        }
    }
    Ok(())
}

/// Writes what an append of `update` changes in the run's row, creating it for a run's first
/// append (inside the append's transaction, before the entries): `current` is the row before,
/// `next` the new length. Gives the run's key.
pub(super) fn apply(
    conn: &Connection,
    run_id: &str,
    current: &Current,
    next: u64,
    update: &SummaryUpdate,
) -> Result<i64, StoreError> {
    let state = update.state.as_str();
    let mut usage = current.usage;
    usage += update.usage;
    let price_json = match &update.started {
        Some(started) => started.price.as_ref().map(to_json).transpose()?,
        None => current.price.clone(),
    };
    // The cost changes only with the usage (or the price of a `run_started`).
    let cost = if update.usage != Usage::default() || update.started.is_some() {
        let price = match &update.started {
            Some(started) => started.price,
            None => price_json
                .as_deref()
                .map(|json| from_json(json, &format!("run '{run_id}': its price")))
                .transpose()?,
        };
        Some(cost_of(price.as_ref(), &usage))
    } else {
        None
    };
    let Some(key) = current.key else {
        let started = update.started.clone().unwrap_or_default();
        conn.prepare_cached(
            "INSERT INTO runs (run_id, agent, context_id, parent_run_id, state, created_ms, \
             updated_ms, next_seq, price, input_tokens, output_tokens, cached_input_tokens, \
             reasoning_tokens, cost_usd, origin_run_id, input_text, answer_text) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
             NULLIF(?16, ''), NULLIF(?17, ''))",
        )
        .and_then(|mut s| {
            s.execute(params![
                run_id,
                started.agent,
                started.context_id,
                started.parent_run_id,
                state,
                int(update.first_ms),
                int(update.last_ms),
                int(next),
                price_json,
                int(usage.input),
                int(usage.output),
                int(usage.cached_input),
                int(usage.reasoning),
                cost.unwrap_or(0.0),
                update.origin_run_id,
                update.input,
                update.answer,
            ])
        })
        .map_err(backend)?;
        return Ok(conn.last_insert_rowid());
    };
    conn.prepare_cached(
        "UPDATE runs SET state = ?2, updated_ms = ?3, next_seq = ?4, input_tokens = ?5, \
         output_tokens = ?6, cached_input_tokens = ?7, reasoning_tokens = ?8, \
         cost_usd = COALESCE(?9, cost_usd) WHERE run_key = ?1",
    )
    .and_then(|mut s| {
        s.execute(params![
            key,
            state,
            int(update.last_ms),
            int(next),
            int(usage.input),
            int(usage.output),
            int(usage.cached_input),
            int(usage.reasoning),
            cost,
        ])
    })
    .map_err(backend)?;
    if let Some(started) = &update.started {
        conn.execute(
            "UPDATE runs SET agent = ?2, context_id = ?3, parent_run_id = ?4, price = ?5 \
             WHERE run_key = ?1",
            params![key, started.agent, started.context_id, started.parent_run_id, price_json],
        )
        .map_err(backend)?;
    }
    write_texts(conn, key, update)?;
    Ok(key)
}

/// The columns [`summary_of`] reads, in its order, of `runs r LEFT JOIN leases l`.
pub(super) const SUMMARY_COLUMNS: &str = "r.run_id, r.agent, r.context_id, r.parent_run_id, \
    r.state, r.created_ms, r.updated_ms, r.next_seq, r.input_tokens, r.output_tokens, \
    r.cached_input_tokens, r.reasoning_tokens, r.cost_usd, l.owner, l.expires_at_ms, \
    r.origin_run_id, r.input_text, r.answer_text";

/// How many columns [`SUMMARY_COLUMNS`] names (a query's next column is at this index).
pub(super) const SUMMARY_WIDTH: usize = 18;

/// One listed row ([`SUMMARY_COLUMNS`]): the summary, and its state as stored.
pub(super) fn summary_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<(RunSummary, String)> {
    let mut summary = RunSummary {
        run_id: row.get(0)?,
        agent: row.get(1)?,
        context_id: row.get(2)?,
        parent_run_id: row.get(3)?,
        origin_run_id: row.get(15)?,
        input: row.get(16)?,
        answer: row.get(17)?,
        state: RunState::Running,
        created_ms: uint(row.get(5)?),
        updated_ms: uint(row.get(6)?),
        entries: uint(row.get(7)?),
        owner: None,
        lease_expires_at_ms: None,
        usage: usage_at(row, 8)?,
        cost_usd: row.get(12)?,
    };
    let expires_at_ms: Option<i64> = row.get(14)?;
    summary.set_lease(row.get(13)?, expires_at_ms.map_or(0, uint));
    Ok((summary, row.get(4)?))
}

/// A `LIKE` pattern (with `\` as its escape) that matches text containing `text`.
fn like_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// The runs matching `filter`, newest first, each with its lease. A row whose journal does not
/// hold its first and last entries (a damaged store: rows deleted by hand) is left out, as
/// `load` finds no such run; `RunService::check` reports it.
pub(super) fn list(conn: &Connection, filter: &RunFilter) -> Result<Vec<RunSummary>, StoreError> {
    let mut sql = format!(
        "SELECT {SUMMARY_COLUMNS} FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id \
         WHERE 1"
    );
    let mut args: Vec<SqlValue> = Vec::new();
    let mut text = |sql: &mut String, clause: &str, value: &Option<String>| {
        if let Some(value) = value {
            sql.push_str(clause);
            args.push(SqlValue::Text(value.clone()));
        }
    };
    text(&mut sql, " AND r.agent = ?", &filter.agent);
    text(&mut sql, " AND r.context_id = ?", &filter.context_id);
    text(&mut sql, " AND r.parent_run_id = ?", &filter.parent_run_id);
    text(&mut sql, " AND r.origin_run_id = ?", &filter.origin_run_id);
    text(&mut sql, " AND r.state = ?", &filter.state.map(|s| s.as_str().to_owned()));
    if let Some(pattern) = filter.text.as_deref().map(like_pattern) {
        sql.push_str(" AND (r.input_text LIKE ? ESCAPE '\\' OR r.answer_text LIKE ? ESCAPE '\\')");
        args.extend([SqlValue::Text(pattern.clone()), SqlValue::Text(pattern)]);
    }
    if let Some(from) = filter.created_from_ms {
        sql.push_str(" AND r.created_ms >= ?");
        args.push(SqlValue::Integer(int(from)));
    }
    if let Some(before) = filter.created_before_ms {
        sql.push_str(" AND r.created_ms < ?");
        args.push(SqlValue::Integer(int(before)));
    }
    if let Some(cursor) = &filter.after {
        sql.push_str(" AND (r.created_ms, r.run_id) < (?, ?)");
        args.push(SqlValue::Integer(int(cursor.created_ms)));
        args.push(SqlValue::Text(cursor.run_id.clone()));
    }
    // Last, so that a row the filters leave out costs no probe of the journal.
    sql.push_str(
        " AND EXISTS (SELECT 1 FROM journal j WHERE j.run_key = r.run_key AND j.seq = 0) \
         AND EXISTS (SELECT 1 FROM journal j WHERE j.run_key = r.run_key \
         AND j.seq = r.next_seq - 1)",
    );
    sql.push_str(" ORDER BY r.created_ms DESC, r.run_id DESC");
    if let Some(limit) = filter.limit {
        sql.push_str(" LIMIT ?");
        args.push(SqlValue::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
    }
    let mut select = conn.prepare_cached(&sql).map_err(backend)?;
    let rows = select.query_map(rusqlite::params_from_iter(args), summary_of).map_err(backend)?;
    let mut runs = Vec::new();
    for row in rows {
        let (mut summary, state) = row.map_err(backend)?;
        summary.state = RunState::parse(&state).ok_or_else(|| {
            StoreError::Corrupt(format!("run '{}': unknown state '{state}'", summary.run_id))
        })?;
        runs.push(summary);
    }
    Ok(runs)
}

#[cfg(test)]
mod tests;
