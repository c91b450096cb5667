//! The prefix cache changes nothing but the time: greedy answers with a cached prefix are
//! those of a fresh model. Skipped (with a notice) when the model file is missing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use agentloop::message::Message;
use agentloop::provider::{ModelRequest, Provider, StreamChunk};
use agentloop_local::LocalModel;
use futures::StreamExt;
use std::path::PathBuf;
use std::time::Instant;

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("AGENTLOOP_LOCAL_MODEL").map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|home| {
            PathBuf::from(home).join(".cache/agentloop/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        })
    })?;
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: no model file at {}", path.display());
        None
    }
}

async fn answer(model: &LocalModel, messages: Vec<Message>) -> String {
    let request = ModelRequest::new(messages).with_max_tokens(12).with_temperature(0.0);
    let mut stream = model.stream(request);
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        if let StreamChunk::TextDelta { text: piece } = chunk.unwrap() {
            text.push_str(&piece);
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_prefix_gives_the_answers_of_a_fresh_model() {
    let Some(path) = model_path() else { return };
    let cached = LocalModel::builder(&path).build().unwrap();
    let system = Message::system("You are a terse assistant. ".repeat(20));
    let first = vec![system.clone(), Message::user("Name a colour.")];
    let started = Instant::now();
    let one = answer(&cached, first.clone()).await;
    let cold = started.elapsed();
    let started = Instant::now();
    let again = answer(&cached, first.clone()).await;
    let warm = started.elapsed();
    assert_eq!(one, again);
    eprintln!("cold {cold:?}, warm {warm:?}");
    // A longer conversation that starts with the first: the cache serves its prefix.
    let mut longer = first;
    longer.push(Message::assistant(one.clone()));
    longer.push(Message::user("Name another one."));
    let with_cache = answer(&cached, longer.clone()).await;
    let fresh = LocalModel::builder(&path).build().unwrap();
    let without = answer(&fresh, longer).await;
    assert_eq!(with_cache, without);
}
