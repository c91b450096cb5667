//! Every recorded stream of the corpus (110 real streams of 12 providers' APIs, from
//! vercel/ai's fixtures, read from `../shared/fixtures/recorded/corpus/` beside the repository;
//! its `INDEX.tsv` names each file's source and commit) decoded by the wire format it is in: no
//! panic on any of them, and no fewer decoding cleanly than today (a ratchet: raise
//! `CLEAN_AT_LEAST` when a fix makes more of them pass).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::provider::anthropic::Anthropic;
use agentloop::provider::gemini::Gemini;
use agentloop::provider::openai::{Dialect, OpenAiChat};
use agentloop::provider::openai_responses::OpenAiResponses;
use agentloop::provider::wire::WireFormat;
use agentloop::provider::{ModelResponse, ProviderError, ResponseAssembler};
use serde_json::Value;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

mod shared_fixtures;
#[path = "recorded_corpus/whole.rs"]
mod whole;

/// Streams that decode from start to end without an error today: all but 9. Seven of those
/// end in an error by design: six ask the client to run an item agentloop does not run
/// (`apply_patch_call` twice, `custom_tool_call`, `local_shell_call`, `shell_call` outside a
/// container, a `tool_search_call` with `"execution": "client"`) and one is the API's own
/// error (quota exceeded). Two are hand-written by vercel/ai, not recordings, and malformed:
/// `parallel-tool-call-wrapper.1` (a JSON event cut short) and `spliced-message-start` (a
/// second message's block spliced into the first).
const CLEAN_AT_LEAST: usize = 101;

fn format(name: &str) -> Box<dyn WireFormat> {
    match name {
        "chat" => Box::new(OpenAiChat::new("m", Dialect::compatible())),
        "responses" => Box::new(OpenAiResponses::new("m", Dialect::openai())),
        "anthropic" => Box::new(Anthropic::messages("m")),
        "gemini" => Box::new(Gemini::new("m")),
        other => panic!("unknown format {other}"),
    }
}

/// Decodes a recorded stream (one event's JSON a line) and assembles the response.
fn replay(format: &dyn WireFormat, text: &str) -> Result<ModelResponse, ProviderError> {
    let mut decoder = format.stream_decoder();
    let mut chunks = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        decoder.decode("", line, &mut chunks)?;
    }
    decoder.finish(&mut chunks)?;
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk)?;
    }
    Ok(assembler.finish())
}

#[test]
fn every_recorded_stream_decodes_without_a_panic() {
    let index = shared_fixtures::recorded("corpus", "INDEX.tsv");
    let mut panics = Vec::new();
    let mut clean = 0;
    let mut by_format: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for row in index.lines().skip(1) {
        let fields: Vec<&str> = row.split('\t').collect();
        let (file, kind) = (fields[0], fields[1]);
        let text = shared_fixtures::recorded("corpus", file);
        let format = format(kind);
        let entry = by_format.entry(kind.to_owned()).or_default();
        entry.0 += 1;
        match catch_unwind(AssertUnwindSafe(|| replay(format.as_ref(), &text))) {
            Err(_) => panics.push(file.to_owned()),
            Ok(Ok(_)) => {
                clean += 1;
                entry.1 += 1;
            }
            Ok(Err(error)) => {
                let mut message = error.to_string();
                message.truncate(160);
                failures.push(format!("{file}: {message}"));
            }
        }
    }
    let total: usize = by_format.values().map(|(n, _)| n).sum();
    eprintln!("{clean} of {total} recorded streams decode cleanly; by format (streams, clean):");
    for (kind, (n, ok)) in &by_format {
        eprintln!("  {kind}: {n}, {ok}");
    }
    for failure in &failures {
        eprintln!("  error: {failure}");
    }
    assert!(total >= 100, "the corpus holds {total} streams");
    assert!(panics.is_empty(), "panicked on {panics:?}");
    assert!(clean >= CLEAN_AT_LEAST, "only {clean} decode cleanly (at least {CLEAN_AT_LEAST})");
}

/// The corpus's rows: (file, format, text).
fn corpus() -> Vec<(String, String, String)> {
    let index = shared_fixtures::recorded("corpus", "INDEX.tsv");
    index
        .lines()
        .skip(1)
        .map(|row| {
            let fields: Vec<&str> = row.split('\t').collect();
            let text = shared_fixtures::recorded("corpus", fields[0]);
            (fields[0].to_owned(), fields[1].to_owned(), text)
        })
        .collect()
}

/// A recorded stream and the same response whole, through `decode_response` (what
/// `complete()` decodes), give the same message, usage, finish reason, id and model.
#[test]
fn every_recorded_stream_matches_its_whole_response() {
    let mut compared = 0;
    let mut differ = Vec::new();
    let mut skipped = Vec::new();
    for (file, kind, text) in corpus() {
        let format = format(&kind);
        let Ok(streamed) = replay(format.as_ref(), &text) else {
            continue;
        };
        let events = match std::panic::catch_unwind(|| whole::events(&text)) {
            Ok(events) => events,
            Err(_) => {
                skipped.push(format!("{file}: a line is not JSON"));
                continue;
            }
        };
        let body = match whole::whole(&kind, &events) {
            Ok(body) => body,
            Err(why) => {
                skipped.push(format!("{file}: {why}"));
                continue;
            }
        };
        let decoded = format
            .decode_response(body.to_string().as_bytes())
            .unwrap_or_else(|error| panic!("{file}: the whole response does not decode: {error}"));
        compared += 1;
        let (streamed, decoded) = (normal(&streamed), normal(&decoded));
        if let Some((_, why)) = DIFFER_BY_RECORDING.iter().find(|(name, _)| *name == file) {
            assert_ne!(streamed, decoded, "{file} no longer differs ({why}): take it off the list");
            continue;
        }
        let mut paths = Vec::new();
        differences("", &streamed, &decoded, &mut paths);
        if !paths.is_empty() {
            differ.push(format!("{file}:\n  {}", paths.join("\n  ")));
        }
    }
    eprintln!("{compared} compared; skipped:");
    for skip in &skipped {
        eprintln!("  {skip}");
    }
    for difference in &differ {
        eprintln!("{difference}");
    }
    assert!(compared >= 97, "only {compared} compared");
    assert!(differ.is_empty(), "{} of {compared} differ", differ.len());
}

/// Recordings whose stream and whole response differ in the recording itself, not in how
/// agentloop decodes them.
const DIFFER_BY_RECORDING: &[(&str, &str)] = &[
    ("openai__github-copilot-id-rotation.1.chunks.txt", "the recorder rewrote every id"),
    (
        "openai__openai-phase.1.chunks.txt",
        "text deltas shortened by hand; the done events are whole",
    ),
    (
        "openai__openai-shell-container.1.chunks.txt",
        "text deltas shortened by hand; the done events are whole",
    ),
];

/// A response as JSON, with tool arguments parsed (their spacing and key order are the
/// encoder's) and encrypted blobs marked only as present (the API encrypts an item anew each
/// time it writes it: the stream's `output_item.done` and the final response differ).
fn normal(response: &agentloop::provider::ModelResponse) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (key, field) in fields.iter_mut() {
                    match (key.as_str(), &*field) {
                        ("arguments", Value::String(text)) => {
                            if let Ok(parsed) = serde_json::from_str::<Value>(text) {
                                *field = parsed;
                            }
                        }
                        ("encrypted_content" | "fingerprint", Value::String(_)) => {
                            *field = Value::String("<encrypted>".into());
                        }
                        _ => walk(field),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(response).unwrap();
    walk(&mut value);
    value
}

/// Where two values differ, as JSON paths with both sides cut short.
fn differences(path: &str, streamed: &Value, whole: &Value, out: &mut Vec<String>) {
    match (streamed, whole) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) =
                    (a.get(key).unwrap_or(&Value::Null), b.get(key).unwrap_or(&Value::Null));
                differences(&format!("{path}/{key}"), x, y, out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (index, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}/{index}"), x, y, out);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let kinds = |list: &Vec<Value>| {
                let kinds: Vec<String> = list.iter().map(|v| v["type"].to_string()).collect();
                kinds.join(",")
            };
            out.push(format!("{path}: streamed [{}] | whole [{}]", kinds(a), kinds(b)));
        }
        _ if streamed != whole => {
            let cut = |value: &Value| value.to_string().chars().take(90).collect::<String>();
            out.push(format!("{path}: streamed {} | whole {}", cut(streamed), cut(whole)));
        }
        _ => {}
    }
}

/// What each recorded stream gives — the finish reason, the usage, the text, the tool calls
/// and the other parts, or the error — reviewed against the recordings once and kept as a
/// snapshot, so a change in what any of them decodes to shows.
#[test]
fn every_recorded_stream_gives_the_expected_answer() {
    use agentloop::message::Part;
    let mut table = String::new();
    for (file, kind, text) in corpus() {
        let format = format(&kind);
        let line = match replay(format.as_ref(), &text) {
            Err(error) => format!("error: {}", cut(&error.to_string(), 100)),
            Ok(response) => {
                let usage = &response.usage;
                let mut line = format!(
                    "{:?}; usage in {} out {} cached {} reasoning {}",
                    response.finish_reason,
                    usage.input,
                    usage.output,
                    usage.cached_input,
                    usage.reasoning
                );
                let answer = response.message.text();
                if !answer.is_empty() {
                    line +=
                        &format!("; text {} chars {:?}", answer.chars().count(), cut(&answer, 40));
                }
                for part in &response.message.content {
                    match part {
                        Part::ToolCall(call) => {
                            line += &format!("; call {}({})", call.name, cut(&call.arguments, 60));
                        }
                        Part::Reasoning(reasoning) => {
                            line += &format!(
                                "; reasoning {} chars{}",
                                reasoning.text.chars().count(),
                                if reasoning.opaque.is_some() { " +opaque" } else { "" }
                            );
                        }
                        Part::Opaque(opaque) => line += &format!("; opaque {}", opaque.kind),
                        Part::Citation(citation) => {
                            line +=
                                &format!("; citation {}", citation.url.as_deref().unwrap_or("-"));
                        }
                        _ => {}
                    }
                }
                line
            }
        };
        table += &format!("{file}\n    {line}\n");
    }
    insta::assert_snapshot!("recorded_corpus_answers", table);
}

/// At most `n` characters of `text`, on one line.
fn cut(text: &str, n: usize) -> String {
    let one_line = text.replace('\n', "⏎");
    match one_line.char_indices().nth(n) {
        Some((end, _)) => format!("{}…", &one_line[..end]),
        None => one_line,
    }
}
