//! Large tool outputs by reference: a durable store keeps a tool output of at least its
//! `large_output_bytes` as an artifact of the run and journals a reference; loading the
//! journal puts the output back, so the stream, the loaded journal and a resumed run see the
//! same output.

use super::*;
use agentloop::message::ToolResultContent;
use agentloop::prelude::tool;
use agentloop::run::RunError;
use serde_json::Value;

/// Writes `lines` lines of text (27 bytes each).
#[tool]
async fn dump(lines: usize) -> Result<String, String> {
    Ok("a line of a large output..\n".repeat(lines))
}

/// Lists `n` records as JSON.
#[tool]
async fn listing(n: usize) -> Result<Value, String> {
    Ok(Value::Array(
        (0..n).map(|i| json!({"id": i, "name": format!("file-{i}.txt"), "size": i * 7})).collect(),
    ))
}

/// The text `dump` writes for 4,000 lines (108,000 bytes, over the 32 KiB default).
fn dumped() -> String {
    "a line of a large output..\n".repeat(4_000)
}

/// An agent's run with a large text output, a large JSON output and a small one: the stream
/// has the outputs, the loaded journal equals the stream's durable events, and (when
/// `by_reference`) the two large outputs are the run's artifacts, byte for byte, deleted with
/// the run. A journal whose reference was not put back does not fold.
pub(super) async fn large_outputs(store: Stores, by_reference: bool) {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("dump", json!({"lines": 4_000}))
            .with_tool_call("listing", json!({"n": 2_000}))
            .with_tool_call("add", json!({"a": 2, "b": 3})),
        ScriptedTurn::text("done"),
    ]);
    let agent = Agent::builder(model)
        .tool(Dump)
        .tool(Listing)
        .tool(Add)
        .store(store.clone())
        .build()
        .unwrap();
    let events = collect(agent.run_stream("dump it")).await;
    let run_id = common::outcome(&events[..events.len() - 1]).run_id;
    let outputs: Vec<(String, ToolResultContent)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCompleted { name, result, .. } => {
                Some((name.clone(), result.content.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    let text = outputs.iter().find(|(name, _)| name == "dump").unwrap();
    assert_eq!(text.1, ToolResultContent::Text(dumped()), "the stream has the output itself");
    let json_bytes = match &outputs.iter().find(|(name, _)| name == "listing").unwrap().1 {
        ToolResultContent::Json(value) => agentloop::canonical::to_string(value).len(),
        other => panic!("listing gave {other:?}"),
    };
    assert!(json_bytes > 32 * 1024, "{json_bytes}");

    let durable: Vec<Event> = events.iter().filter(|e| e.is_durable()).cloned().collect();
    let loaded = store.load(&run_id).await.unwrap();
    let folded: Vec<Event> = loaded.iter().map(|entry| (*entry.event).clone()).collect();
    assert_eq!(folded, durable, "loading puts the outputs back");
    assert_eq!(store.load_from(&run_id, 3).await.unwrap()[..], loaded[3..]);
    Run::from_journal(&folded).unwrap();

    let kept = store.list_artifacts(&run_id).await.unwrap();
    if by_reference {
        let mut sizes: Vec<(u64, &str)> =
            kept.iter().map(|a| (a.size, a.media_type.as_str())).collect();
        sizes.sort_unstable();
        assert_eq!(
            sizes,
            [(json_bytes as u64, "application/json"), (108_000, "text/plain; charset=utf-8")]
        );
        let text_artifact = kept.iter().find(|a| a.size == 108_000).unwrap();
        assert!(text_artifact.name.starts_with("tool-output-"), "{}", text_artifact.name);
        let data = store.get_artifact(&text_artifact.id).await.unwrap().unwrap().data;
        assert_eq!(data, dumped().into_bytes());
    } else {
        assert!(kept.is_empty(), "{kept:?}");
    }

    // A journal read without its store (here: a reference put in by hand) does not fold.
    let mut unloaded = folded.clone();
    for event in &mut unloaded {
        if let Event::ToolCompleted { name, result, .. } = event {
            if name == "dump" {
                result.content =
                    ToolResultContent::Stored(Box::new(agentloop::message::StoredOutput {
                        artifact: "art_gone".into(),
                        bytes: 108_000,
                        json: false,
                    }));
            }
        }
    }
    let error = Run::from_journal(&unloaded).unwrap_err();
    assert!(matches!(&error, RunError::UnloadedOutput { artifact, .. } if artifact == "art_gone"));

    assert!(store.delete_run(&run_id).await.unwrap());
    assert!(store.list_artifacts(&run_id).await.unwrap().is_empty(), "deleted with the run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_keeps_outputs_in_its_journal() {
    large_outputs(Arc::new(MemoryStore::new()), false).await;
}

/// SQLite: the journal's rows stay small (the outputs are artifact rows); with
/// `large_output_bytes: None` they are in the journal.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_large_outputs_by_reference() {
    use agentloop::store::sqlite::{SqliteOptions, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    for (name, limit) in [("a.db", Some(32 * 1024)), ("b.db", None)] {
        let path = dir.path().join(name);
        let options = SqliteOptions { large_output_bytes: limit, ..SqliteOptions::default() };
        let store = SqliteStore::open_with(&path, options).unwrap();
        large_outputs(Arc::new(store), limit.is_some()).await;
    }
    // The rows of a run journaled by reference: none holds an output.
    let path = dir.path().join("c.db");
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("dump", json!({"lines": 4_000})),
        ScriptedTurn::text("done"),
    ]);
    let agent = Agent::builder(model).tool(Dump).store(store.clone()).build().unwrap();
    agent.run("dump it").await.unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (result, all): (i64, i64) = conn
        .query_row(
            "SELECT max(CASE WHEN event LIKE '%\"tool_completed\"%' THEN length(event) END), \
             sum(length(event)) FROM journal",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert!(result < 1_024, "the tool_completed row has {result} bytes");
    assert!(all < 20_000, "the journal has {all} bytes (the output alone is 108,000)");
}

/// Redis: the journal's entries stay small; the artifacts' keys go with the run (the
/// suite's wrapper checks that no key is left).
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keeps_large_outputs_by_reference() {
    with_redis(|store| large_outputs(store, true)).await;
}
