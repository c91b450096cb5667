//! `bench-cache`: what Anthropic's prompt cache saves an agent loop, with the breakpoints
//! agentloop places (`CachePolicy::auto`) against none (`CachePolicy::off`) — `docs/PROVIDERS.md`,
//! "Prompt caching".
//!
//! `cargo run --release -p agentloop-bench --bin bench-cache [-- --iterations 20]`: builds the
//! requests of a tool loop as a run sends them (instructions, tools, the history so far),
//! encodes each with the Anthropic wire format, and bills it as Anthropic documents: the
//! longest prefix up to a breakpoint that an earlier request wrote is a cache read (0.1 × the
//! input price), the rest up to the request's last breakpoint a cache write (1.25 ×, the
//! 5-minute cache), everything after it full price; every breakpoint's prefix is written. Tokens
//! are counted with the o200k tokenizer on each block's JSON, which is close to, not equal to,
//! Anthropic's own count; the ratio is what the benchmark is about.
//!
//! The shape is a recorded one: the static prefix (instructions and tool definitions) is
//! sized like the one the recorded Anthropic prompt-cache exchange wrote (3,068 tokens, in
//! `../shared/fixtures/recorded/corpus/anthropic__anthropic-code-execution-20260120-prompt-cache.1.chunks.txt`),
//! and each iteration adds a tool call and a result of about 400 tokens.

use agentloop::context::tokens::{TiktokenCounter, TokenCounter};
use agentloop::message::{Message, Part, Role, ToolCall, ToolResult};
use agentloop::provider::wire::WireFormat;
use agentloop::provider::{Anthropic, CachePolicy, ModelRequest};
use agentloop::tool::ToolSpec;
use serde_json::{json, Value};
use std::error::Error;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Tokens of the recorded exchange's static prefix.
const RECORDED_PREFIX_TOKENS: usize = 3068;

/// What one request costs, in tokens of each kind.
#[derive(Debug, Default, Clone, Copy)]
struct Bill {
    full: usize,
    written: usize,
    read: usize,
}

impl Bill {
    /// Input tokens at full price that this bill is worth (writes 1.25 ×, reads 0.1 ×).
    fn full_price_equivalent(&self) -> f64 {
        self.full as f64 + 1.25 * self.written as f64 + 0.1 * self.read as f64
    }
}

/// The request's blocks in the order the API caches them (tools, system, message blocks),
/// each with its tokens, and the indexes of the blocks carrying a breakpoint.
fn blocks(body: &Value, counter: &dyn TokenCounter) -> (Vec<(String, usize)>, Vec<usize>) {
    let mut blocks = Vec::new();
    let mut marks = Vec::new();
    let mut push = |block: &Value| {
        if block.get("cache_control").is_some() {
            marks.push(blocks.len());
        }
        // The mark itself is not content: neither counted nor part of the cache key.
        let mut plain = block.clone();
        if let Some(map) = plain.as_object_mut() {
            map.remove("cache_control");
        }
        let text = plain.to_string();
        let tokens = counter.count_text(&text);
        blocks.push((text, tokens));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push(tool);
    }
    match &body["system"] {
        Value::String(text) => push(&json!({"type": "text", "text": text})),
        Value::Array(system) => system.iter().for_each(&mut push),
        _ => {}
    }
    for turn in body["messages"].as_array().into_iter().flatten() {
        for block in turn["content"].as_array().into_iter().flatten() {
            push(block);
        }
    }
    (blocks, marks)
}

/// Bills one request against the prefixes written so far, and writes its own.
fn bill(body: &Value, counter: &dyn TokenCounter, cache: &mut Vec<String>) -> Bill {
    let (blocks, marks) = blocks(body, counter);
    let total: usize = blocks.iter().map(|b| b.1).sum();
    let prefix = |end: usize| blocks[..=end].iter().map(|b| b.0.as_str()).collect::<String>();
    let tokens_to = |end: usize| blocks[..=end].iter().map(|b| b.1).sum::<usize>();
    let Some(&last) = marks.last() else {
        return Bill { full: total, ..Bill::default() };
    };
    let read =
        marks.iter().rev().find(|&&mark| cache.contains(&prefix(mark))).map(|&m| tokens_to(m));
    let read = read.unwrap_or(0);
    let written = tokens_to(last) - read;
    for &mark in &marks {
        let key = prefix(mark);
        if !cache.contains(&key) {
            cache.push(key);
        }
    }
    Bill { full: total - read - written, written, read }
}

/// A paragraph of about `tokens` tokens of varied prose (no repeated line), numbered `seed`.
fn prose(seed: usize, tokens: usize) -> String {
    const WORDS: [&str; 16] = [
        "release",
        "notes",
        "describe",
        "the",
        "scheduler",
        "change",
        "which",
        "moved",
        "timers",
        "into",
        "a",
        "wheel",
        "and",
        "cut",
        "latency",
        "by",
    ];
    let mut out = String::new();
    let mut state = seed as u64 * 2_654_435_761 + 1;
    for i in 0..tokens {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        out.push_str(WORDS[(state >> 60) as usize]);
        out.push(if i % 17 == 16 { '.' } else { ' ' });
        if i % 40 == 39 {
            out.push_str(&format!("{} ", state % 10_000));
        }
    }
    out
}

/// Instructions and six tools whose blocks come to about the recorded prefix.
fn static_prefix(counter: &dyn TokenCounter) -> (String, Vec<ToolSpec>) {
    let tools: Vec<ToolSpec> = ["search", "fetch", "read_file", "list_dir", "calculator", "shell"]
        .iter()
        .enumerate()
        .map(|(i, name)| ToolSpec {
            name: (*name).into(),
            description: prose(100 + i, 60),
            parameters: json!({"type": "object", "properties": {
                "query": {"type": "string", "description": prose(200 + i, 20)},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            }, "required": ["query"]}),
        })
        .collect();
    let tool_tokens: usize = tools
        .iter()
        .map(|t| counter.count_text(&json!({"name": t.name, "description": t.description, "input_schema": t.parameters}).to_string()))
        .sum();
    let instructions = prose(1, RECORDED_PREFIX_TOKENS.saturating_sub(tool_tokens));
    (instructions, tools)
}

fn main() -> Result<()> {
    let mut iterations = 20usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--iterations" => {
                iterations = args.next().ok_or("--iterations needs a number")?.parse()?
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let counter = TiktokenCounter::o200k()?;
    let (instructions, tools) = static_prefix(&counter);
    let mut history = vec![Message::user(
        "Find what changed in the scheduler across the last releases and summarise it.",
    )];
    let format = Anthropic::messages("claude-sonnet-4-5");
    let (mut on_cache, mut off_cache) = (Vec::new(), Vec::new());
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for iteration in 1..=iterations {
        let request = ModelRequest::new(history.clone())
            .with_instructions(instructions.clone())
            .with_tools(tools.clone());
        let auto = format.encode(&request.clone().with_cache(CachePolicy::auto()), true)?.body;
        let none = format.encode(&request.with_cache(CachePolicy::off()), true)?.body;
        on.push(bill(&auto, &counter, &mut on_cache));
        off.push(bill(&none, &counter, &mut off_cache));
        // The model calls a tool; its result comes back.
        let id = format!("toolu_{iteration:02}");
        let call = ToolCall {
            id: id.clone(),
            name: "search".into(),
            arguments: json!({"query": prose(iteration, 8)}).to_string(),
        };
        history.push(Message {
            role: Role::Assistant,
            content: vec![Part::text(prose(300 + iteration, 30)), Part::ToolCall(call)],
        });
        history.push(Message::tool_results([ToolResult::ok(id, prose(500 + iteration, 400))]));
    }
    let sum = |bills: &[Bill]| {
        bills.iter().fold(Bill::default(), |a, b| Bill {
            full: a.full + b.full,
            written: a.written + b.written,
            read: a.read + b.read,
        })
    };
    let (total_on, total_off) = (sum(&on), sum(&off));
    let input: usize = off.iter().map(|b| b.full).sum();
    println!("bench-cache: Anthropic, a {iterations}-iteration tool loop, static prefix ~{RECORDED_PREFIX_TOKENS} tokens");
    println!(
        "{:>9} {:>9} {:>11} {:>11} {:>9}",
        "iteration", "input", "full price", "cache write", "cache read"
    );
    for (i, bill) in on.iter().enumerate() {
        let input = bill.full + bill.written + bill.read;
        println!(
            "{:>9} {:>9} {:>11} {:>11} {:>9}",
            i + 1,
            input,
            bill.full,
            bill.written,
            bill.read
        );
    }
    println!("input tokens in all: {input}");
    println!(
        "caching off: {input} billed at full price; auto: {} full + {} written + {} read = {:.0} full-price equivalent ({:.1} % of off)",
        total_on.full,
        total_on.written,
        total_on.read,
        total_on.full_price_equivalent(),
        100.0 * total_on.full_price_equivalent() / total_off.full_price_equivalent()
    );
    Ok(())
}
