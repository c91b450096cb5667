//! Speed of the local model on this machine: prompt evaluation and generation in tokens per
//! second, and the latency to the first streamed token.
//!
//! ```sh
//! cargo run --release -p agentloop-local --example local_speed [-- [--quantized] [MODEL.gguf]]
//! ```
//!
//! The model is the path argument, else `AGENTLOOP_LOCAL_MODEL`, else the cached
//! SmolLM2-135M-Instruct. `--quantized` keeps the file's weight formats instead of expanding
//! them to `f32` ([`Dequantize::Never`]).

use agentloop::message::Message;
use agentloop::provider::{ModelRequest, Provider, StreamChunk};
use agentloop_local::{Dequantize, LocalModel};
use futures::StreamExt;
use std::path::PathBuf;
use std::time::Instant;

const RUNS: usize = 3;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let quantized = args.iter().any(|a| a == "--quantized");
    let path = args
        .iter()
        .find(|a| *a != "--quantized")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("AGENTLOOP_LOCAL_MODEL").map(PathBuf::from))
        .or_else(|| {
            std::env::var_os("HOME").map(|home| {
                PathBuf::from(home).join(".cache/agentloop/models/SmolLM2-135M-Instruct.Q4_1.gguf")
            })
        })
        .ok_or("no model path")?;
    let start = Instant::now();
    let policy = if quantized { Dequantize::Never } else { Dequantize::Auto };
    let model = LocalModel::builder(&path).temperature(0.0).dequantize(policy).build()?;
    println!(
        "model: {} (loaded in {:.2} s, weights {:?})",
        path.display(),
        start.elapsed().as_secs_f64(),
        policy
    );
    println!("threads: {}", std::thread::available_parallelism().map_or(1, |n| n.get()));

    // Prompt evaluation and generation, raw prompt (no template), greedy.
    let prompt = "The history of the printing press is a long one. ".repeat(30);
    let (mut prompt_rates, mut gen_rates, mut first) = (Vec::new(), Vec::new(), Vec::new());
    let mut prompt_tokens = 0;
    for _ in 0..RUNS {
        let (_, stats) = model.complete_raw(&prompt, 128)?;
        prompt_tokens = stats.prompt_tokens;
        prompt_rates.push(stats.prompt_tokens_per_second());
        gen_rates.push(stats.generation_tokens_per_second());
        first.push(stats.first_token.as_secs_f64() * 1000.0);
    }
    println!(
        "prompt eval: {prompt_tokens} tokens, {:.0} tokens/s; generation: 128 tokens, {:.1} tokens/s; first token {:.0} ms (median of {RUNS})",
        median(prompt_rates),
        median(gen_rates),
        median(first)
    );

    // First-token latency through the provider: a short chat request, template applied.
    let mut latencies = Vec::new();
    let mut chat_prompt = 0;
    for _ in 0..RUNS {
        let request = ModelRequest::new(vec![Message::user("What is the capital of France?")])
            .with_max_tokens(16);
        let start = Instant::now();
        let mut stream = model.stream(request);
        let mut seen = false;
        while let Some(chunk) = stream.next().await {
            match chunk? {
                StreamChunk::TextDelta { .. } if !seen => {
                    latencies.push(start.elapsed().as_secs_f64() * 1000.0);
                    seen = true;
                }
                StreamChunk::Usage { usage } => chat_prompt = usage.input,
                _ => {}
            }
        }
    }
    println!(
        "chat request ({chat_prompt} prompt tokens): first streamed token after {:.0} ms (median of {RUNS})",
        median(latencies)
    );
    Ok(())
}
