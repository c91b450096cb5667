//! Runs the evaluation set (`eval/tasks.json`) on a local model with the default agent and
//! prints the Markdown report: correct / total, empty answers, tool calls and seconds per task,
//! and every miss with the model's answer.
//!
//! `cargo run --release -p agentloop-local --example local_eval -- [--model NAME_OR_PATH]
//! [--tasks N] [--only ID,ID] [--json FILE]`

use agentloop_local::eval::{self, TaskResult};
use agentloop_local::fetch::{self, FetchOptions, KNOWN_MODELS};
use std::path::PathBuf;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut model = "smollm2-135m".to_owned();
    let mut limit = usize::MAX;
    let mut only: Option<Vec<String>> = None;
    let mut json: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = args.next().ok_or("--model needs a value")?,
            "--tasks" => limit = args.next().ok_or("--tasks needs a value")?.parse()?,
            "--only" => {
                only = Some(
                    args.next().ok_or("--only needs ids")?.split(',').map(String::from).collect(),
                )
            }
            "--json" => json = Some(args.next().ok_or("--json needs a file")?.into()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let path = match KNOWN_MODELS.iter().find(|m| m.name == model) {
        Some(known) => fetch::fetch(known, &FetchOptions::default())?.path().to_owned(),
        None => PathBuf::from(&model),
    };
    let started = std::time::Instant::now();
    let local = tokio::task::spawn_blocking(move || agentloop_local::recipe::model(&path).build())
        .await??;
    eprintln!("loaded {model} in {:.1} s", started.elapsed().as_secs_f64());
    let tasks = eval::parse(eval::TASKS_JSON)?;
    let mut results: Vec<TaskResult> = Vec::new();
    for task in
        tasks.iter().filter(|t| only.as_ref().is_none_or(|ids| ids.contains(&t.id))).take(limit)
    {
        let result = eval::run_task(&local, task).await?;
        eprintln!(
            "{} {:<18} {:>5.1} s  {} calls  {:?}",
            if result.correct { "ok  " } else { "MISS" },
            result.id,
            result.seconds,
            result.tool_calls,
            result.answer
        );
        for call in &result.calls {
            eprintln!("       {call}");
        }
        results.push(result);
    }
    println!("{}", eval::report(&model, &results));
    if let Some(file) = json {
        std::fs::write(file, serde_json::to_string_pretty(&results)?)?;
    }
    Ok(())
}
