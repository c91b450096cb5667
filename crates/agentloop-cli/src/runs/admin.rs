//! `agentloop runs delete | prune | check`: keeping the store in order, through the run
//! service — a run deleted with everything it owns and its sub-agent runs, the runs past an
//! age pruned in batches, the registry checked against the journals (and repaired with
//! `--fix`). The A2A server's push configs of the deleted runs go with them.

use super::{cell, Stores};
use crate::config::StoreSection;
use agentloop::service::{Problem, PruneOptions, Repair, RunService};
use agentloop::store::RunState;
use agentloop_server::push::DeletePushConfigs;
use clap::Subcommand;
use std::sync::Arc;
use std::time::Duration;

/// The maintenance commands of `agentloop runs`.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Deletes a run with everything it owns (journal, registry row, lease, controls,
    /// artifacts, push configs) and its sub-agent runs, all together. Refused while an
    /// executor holds the lease of the run or of one of its sub-agent runs.
    Delete {
        /// The run id.
        run_id: String,
    },
    /// Deletes the runs whose last entry is older than a duration, in batches, skipping those
    /// an executor holds.
    Prune {
        /// How old a run's last entry must be: a number and a unit, `30d`, `12h`, `90m`, `45s`.
        #[arg(long, value_name = "AGE", value_parser = parse_age)]
        older_than: Duration,
        /// Only runs in these states (comma separated; default: finished, failed, cancelled).
        #[arg(long, value_delimiter = ',', value_parser = parse_state)]
        state: Vec<RunState>,
        /// Runs deleted per transaction (SQLite) or script call (Redis).
        #[arg(long, default_value_t = agentloop::service::DEFAULT_PRUNE_BATCH)]
        batch: usize,
    },
    /// Compares the run registry with the journals; exits with 1 when they disagree (and
    /// `--fix` did not put it right).
    Check {
        /// Repair what can be: rebuild a row from its journal, remove a row without a journal,
        /// give a journal without a row one.
        #[arg(long)]
        fix: bool,
    },
}

/// A duration such as `30d`, `12h`, `90m` or `45s`.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let expected = "expected a whole number and a unit: d, h, m or s (e.g. 30d, 12h, 90m, 45s)";
    let text = text.trim();
    let Some(unit) = text.chars().last() else { return Err(format!("empty duration: {expected}")) };
    let seconds: u64 = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return Err(format!("'{text}' has no unit: {expected}")),
    };
    let number = &text[..text.len() - unit.len_utf8()];
    let count: u64 =
        number.parse().map_err(|_| format!("'{text}' is not a duration: {expected}"))?;
    count
        .checked_mul(seconds)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("'{text}' is too long a duration"))
}

fn parse_state(text: &str) -> Result<RunState, String> {
    RunState::parse(text).ok_or_else(|| {
        format!(
            "unknown state '{text}' (expected running, finished, failed, cancelled, suspended or \
             needs_attention)"
        )
    })
}

/// The run service over the store, deleting the served agents' push configs with their runs.
async fn service(stores: &Stores, section: &StoreSection) -> anyhow::Result<RunService> {
    let service = RunService::new(stores.runs.clone());
    Ok(match crate::serve::push_store(section).await? {
        Some(push) => service.on_deleted(Arc::new(DeletePushConfigs(push))),
        None => service,
    })
}

/// Runs `command`; the process's exit code.
pub async fn run(
    command: AdminCommand,
    stores: &Stores,
    section: &StoreSection,
) -> anyhow::Result<i32> {
    let service = service(stores, section).await?;
    match command {
        AdminCommand::Delete { run_id } => {
            let deleted = service.delete(&run_id).await?;
            let children = deleted.len().saturating_sub(1);
            let note = match children {
                0 => String::new(),
                n => format!(" and its {n} sub-agent run{}", if n == 1 { "" } else { "s" }),
            };
            println!("deleted run {}{note}", cell(&run_id));
            Ok(0)
        }
        AdminCommand::Prune { older_than, state, batch } => {
            let mut options = PruneOptions::older_than(older_than).batch(batch);
            if !state.is_empty() {
                options = options.states(state);
            }
            let states: Vec<&str> = options.states.iter().map(|s| s.as_str()).collect();
            let started = std::time::Instant::now();
            let report = service.prune(&options).await?;
            println!(
                "pruned {} runs ({}) whose last entry is older than {} s, in {} batches, in \
                 {:.1} s; skipped {} held by an executor, {} that changed meanwhile",
                report.removed,
                states.join(", "),
                older_than.as_secs(),
                report.batches,
                started.elapsed().as_secs_f64(),
                report.skipped_live,
                report.skipped_changed
            );
            Ok(0)
        }
        AdminCommand::Check { fix } => check(&service, fix).await,
    }
}

async fn check(service: &RunService, fix: bool) -> anyhow::Result<i32> {
    let report = service.check().await?;
    println!(
        "checked {} runs ({} not compared: an executor holds them)",
        report.checked, report.live
    );
    for problem in &report.problems {
        println!("problem: {}", cell(&describe(problem)));
    }
    if report.is_clean() {
        println!("the registry agrees with the journals");
        return Ok(0);
    }
    if !fix {
        println!("{} problems; `agentloop runs check --fix` repairs them", report.problems.len());
        return Ok(1);
    }
    let repairs = service.repair(&report).await?;
    for repair in &repairs {
        let line = match repair {
            Repair::Rebuilt(id) => format!("rebuilt the registry row of {id} from its journal"),
            Repair::Removed(id) => format!("removed the registry row of {id} (it had no journal)"),
            Repair::Adopted(id) => format!("gave the journal of {id} its registry row"),
            Repair::Dropped(at) => format!("removed the journal at {at} (it names no run)"),
            Repair::Left { problem, why } => format!("left: {} ({why})", describe(problem)),
            other => format!("{other:?}"),
        };
        println!("fixed: {}", cell(&line));
    }
    let left = repairs.iter().filter(|r| !r.is_fixed()).count();
    if left > 0 {
        println!("{left} problems left");
        return Ok(1);
    }
    println!("repaired {} problems", repairs.len());
    Ok(0)
}

fn describe(problem: &Problem) -> String {
    match problem {
        Problem::RowWithoutJournal { run_id, children } => {
            format!("{run_id}: a registry row without a journal ({children} sub-agent runs)")
        }
        Problem::JournalWithoutRow(orphan) => format!(
            "a journal of {} entries without a registry row ({} at {})",
            orphan.entries,
            orphan.run_id.as_deref().unwrap_or("no run id"),
            orphan.locator
        ),
        Problem::Disagrees { run_id, fields } => {
            let fields: Vec<String> = fields
                .iter()
                .map(|f| {
                    format!(
                        "{} {} in the registry, {} in the journal",
                        f.field, f.registry, f.journal
                    )
                })
                .collect();
            format!("{run_id}: {}", fields.join("; "))
        }
        Problem::Unreadable { run_id, error } => {
            format!("{run_id}: its journal does not load: {error}")
        }
        Problem::MissingParent { run_id, parent_run_id } => {
            format!("{run_id}: its parent {parent_run_id} has no registry row")
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_age;
    use std::time::Duration;

    #[test]
    fn ages_parse_with_their_units_and_clear_errors() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_age("90m"), Ok(Duration::from_secs(90 * 60)));
        assert_eq!(parse_age("45s"), Ok(Duration::from_secs(45)));
        for bad in ["", "30", "d", "3.5d", "-1d", "30x", "1日"] {
            let error = parse_age(bad).unwrap_err();
            assert!(
                error.contains("e.g. 30d, 12h, 90m, 45s") || error.contains("empty"),
                "{bad}: {error}"
            );
        }
        assert!(parse_age("99999999999999999d").unwrap_err().contains("too long"));
    }
}
