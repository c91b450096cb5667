//! The local provider on the real Gemma 3 270M GGUF (SentencePiece tokenizer, `gemma3`
//! architecture): a streamed answer, same seed same answer, and a required calculator call
//! that is well formed. Skipped (with a notice) when the file is missing: fetch it with
//! `agentloop model fetch gemma3-270m` or set `AGENTLOOP_GEMMA_MODEL` to its path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use agentloop::message::{FinishReason, Message};
use agentloop::provider::{ModelRequest, Provider, StreamChunk, ToolChoice};
use agentloop_local::fetch::{self, GEMMA3_270M};
use agentloop_local::LocalModel;
use futures::StreamExt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("AGENTLOOP_GEMMA_MODEL")
        .map(PathBuf::from)
        .or_else(|| Some(fetch::default_cache_dir().ok()?.join(GEMMA3_270M.file_name)))?;
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: no Gemma 3 file at {} (set AGENTLOOP_GEMMA_MODEL)", path.display());
        None
    }
}

/// One model for all the tests of this file (loading it takes seconds and gigabytes).
fn model() -> Option<LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Some(LocalModel::builder(model_path()?).context_size(2048).build().unwrap())
        })
        .clone()
}

fn ask(text: &str, max_tokens: u32) -> ModelRequest {
    ModelRequest::new(vec![Message::user(text)]).with_max_tokens(max_tokens).with_temperature(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_an_answer() {
    let Some(model) = model() else { return };
    assert_eq!(model.context_size(), 2048);
    let prompt = model.render_prompt(&ask("What is the capital of France?", 8)).unwrap();
    assert!(prompt.starts_with("<bos><start_of_turn>user\n"), "{prompt}");
    assert!(prompt.ends_with("<start_of_turn>model\n"), "{prompt}");
    let mut stream = model.stream(ask("What is the capital of France? Answer in one word.", 32));
    let mut text = String::new();
    let mut usage = None;
    let mut finish = None;
    let mut deltas = 0;
    while let Some(chunk) = stream.next().await {
        match chunk.unwrap() {
            StreamChunk::TextDelta { text: piece } => {
                deltas += 1;
                text.push_str(&piece);
            }
            StreamChunk::Usage { usage: u } => usage = Some(u),
            StreamChunk::Finish { reason } => finish = Some(reason),
            other => panic!("unexpected chunk {other:?}"),
        }
    }
    eprintln!("answer: {text:?}");
    let usage = usage.unwrap();
    assert!(deltas >= 2, "streamed in pieces: {deltas}");
    assert!(!text.trim().is_empty());
    assert!(!text.contains("<end_of_turn>"), "the stop token is not text: {text:?}");
    assert!(usage.input > 10 && usage.output <= 32, "{usage:?}");
    // The file is the pretrained model (its metadata names no instruction tuning): it may
    // wander from a chat question, so its end is `<end_of_turn>` or the token limit.
    let expected = if usage.output < 32 { FinishReason::Stop } else { FinishReason::Length };
    assert_eq!(finish, Some(expected));

    // A raw continuation (Gemma needs its BOS), greedy: fluent words (this 270M model does
    // not reliably know the fact; it said " the largest in the world. It is").
    let (text, stats) = model.complete_raw("<bos>The capital of France is", 8).unwrap();
    eprintln!("raw: {text:?}");
    assert!(
        text.split_whitespace().filter(|w| w.chars().all(char::is_alphabetic)).count() >= 4,
        "{text:?}"
    );
    assert!(stats.prompt_tokens >= 5, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_answer() {
    let Some(model) = model() else { return };
    let mut request = ask("Name three colors.", 24);
    request.temperature = Some(0.8);
    let a = model.complete(request.clone()).await.unwrap();
    let b = model.complete(request).await.unwrap();
    assert!(!a.message.text().trim().is_empty());
    assert_eq!(a.message.text(), b.message.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_tool_choice_gives_a_well_formed_call() {
    let Some(model) = model() else { return };
    let mut request = ask("What is 17 multiplied by 23?", 64);
    request.tools = Arc::new(vec![agentloop::tool::ToolSpec {
        name: "calculator".into(),
        description: "Evaluate an arithmetic expression.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"]
        }),
    }]);
    request.tool_choice = ToolChoice::Required;
    let response = model.complete(request).await.unwrap();
    assert_eq!(response.finish_reason, FinishReason::ToolCalls, "{:?}", response.message);
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{:?}", response.message);
    assert_eq!(calls[0].name, "calculator");
    let arguments: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    eprintln!("arguments: {arguments}");
    let expression = arguments["expression"].as_str().unwrap();
    assert!(!expression.is_empty(), "{arguments}");
}

/// The resident memory of this process, in MB (Linux).
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Load time, memory, prompt and generation speed with one weight policy (the prompt and the
/// token count of the `local_speed` example, greedy, median of 3). Run one policy per process,
/// in release mode:
/// `cargo test --release -p agentloop-local --test gemma -- --ignored --nocapture speed_never`
fn measure(policy: agentloop_local::Dequantize) {
    let Some(path) = model_path() else { return };
    let before = rss_mb();
    let start = std::time::Instant::now();
    let model = LocalModel::builder(&path).temperature(0.0).dequantize(policy).build().unwrap();
    let load = start.elapsed().as_secs_f64();
    let after = rss_mb();
    let prompt = "The history of the printing press is a long one. ".repeat(30);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut prompt_rates, mut gen_rates, mut tokens) = (Vec::new(), Vec::new(), 0);
    for _ in 0..3 {
        let (_, stats) = model.complete_raw(&prompt, 128).unwrap();
        tokens = stats.prompt_tokens;
        prompt_rates.push(stats.prompt_tokens_per_second());
        gen_rates.push(stats.generation_tokens_per_second());
    }
    println!(
        "{policy:?}: load {load:.2} s, RSS {before:.0} -> {after:.0} MB after load, {:.0} MB after \
         runs; prompt {tokens} tokens {:.0} tok/s; generation {:.1} tok/s",
        rss_mb(),
        median(prompt_rates),
        median(gen_rates)
    );
}

#[test]
#[ignore = "a measurement: run in release mode, one at a time"]
fn speed_always() {
    measure(agentloop_local::Dequantize::Always);
}

#[test]
#[ignore = "a measurement: run in release mode, one at a time"]
fn speed_scalar_formats() {
    measure(agentloop_local::Dequantize::ScalarFormats);
}

#[test]
#[ignore = "a measurement: run in release mode, one at a time"]
fn speed_never() {
    measure(agentloop_local::Dequantize::Never);
}
