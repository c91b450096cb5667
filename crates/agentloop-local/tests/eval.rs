//! Ten tasks of the evaluation set (`eval/tasks.json`, every 4.4th, so spread over its
//! categories) on the default local model with the default agent: none may be empty, and at
//! least [`REQUIRED`] must be right — what the default model reached when the test was written
//! (docs/PERFORMANCE.md, "Local model: evaluation"), so that a regression fails. The issue's
//! target is nine: measured 9 on 2026-11-29 (8 before answers were kept from numbers of their
//! own), but one of the ten is a file task whose tool choice changes from run to run.
//! Skipped (with a notice) when the model file is not in the cache, unless
//! `AGENTLOOP_EVAL_REQUIRED` is set (as `.ci/run` sets it, after fetching the model).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use agentloop_local::eval;
use agentloop_local::fetch::{self, KNOWN_MODELS};

/// Right answers required of the ten.
const REQUIRED: usize = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_eval_tasks_reach_the_measured_accuracy_and_none_is_empty() {
    let required = std::env::var_os("AGENTLOOP_EVAL_REQUIRED").is_some();
    let default = &KNOWN_MODELS[0];
    let path = fetch::cached_path(default, None).unwrap();
    if !path.exists() {
        assert!(!required, "AGENTLOOP_EVAL_REQUIRED is set and {} is missing", path.display());
        eprintln!("skipped: no model file at {} (run `agentloop model fetch`)", path.display());
        return;
    }
    let model = tokio::task::spawn_blocking(move || agentloop_local::recipe::model(&path).build())
        .await
        .unwrap()
        .unwrap();
    let tasks = eval::parse(eval::TASKS_JSON).unwrap();
    let step = tasks.len() as f64 / 10.0;
    let chosen: Vec<&eval::Task> = (0..10).map(|i| &tasks[(i as f64 * step) as usize]).collect();
    let mut results = Vec::new();
    for task in chosen {
        let result = eval::run_task(&model, task).await.unwrap();
        eprintln!("{} {} {:?}", result.correct, result.id, result.answer);
        results.push(result);
    }
    let report = eval::report(default.name, &results);
    eprintln!("{report}");
    let correct = results.iter().filter(|r| r.correct).count();
    let empty = results.iter().filter(|r| r.empty).count();
    assert!(correct >= REQUIRED, "{correct} of 10 right (required: {REQUIRED}):\n{report}");
    assert_eq!(empty, 0, "{report}");
}
