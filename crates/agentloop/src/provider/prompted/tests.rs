#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{ToolResult, Usage};
use crate::provider::scripted::{ScriptedModel, ScriptedTurn};
use crate::provider::{collect, ModelResponse};
use crate::Agent;
use proptest::prelude::*;

fn parser() -> ToolCallParser {
    ToolCallParser::with_id_prefix("c")
}

/// Parses the pieces in order and finishes.
fn parse(pieces: &[&str]) -> Vec<StreamChunk> {
    let mut parser = parser();
    let mut out = Vec::new();
    for piece in pieces {
        parser.push(piece, &mut out);
    }
    parser.finish(true, &mut out);
    out
}

/// Adjacent text and reasoning deltas merged (chunking changes only where deltas are cut).
fn merged(chunks: Vec<StreamChunk>) -> Vec<StreamChunk> {
    let mut out: Vec<StreamChunk> = Vec::new();
    for chunk in chunks {
        match (out.last_mut(), chunk) {
            (Some(StreamChunk::TextDelta { text }), StreamChunk::TextDelta { text: more }) => {
                text.push_str(&more)
            }
            (
                Some(StreamChunk::ReasoningDelta { text }),
                StreamChunk::ReasoningDelta { text: more },
            ) => text.push_str(&more),
            (_, chunk) => out.push(chunk),
        }
    }
    out
}

/// Every piece of one character.
fn by_char(text: &str) -> Vec<String> {
    text.chars().map(String::from).collect()
}

fn call(id: &str, name: &str, arguments: &str) -> Vec<StreamChunk> {
    vec![
        StreamChunk::ToolCallStart { id: id.into(), name: name.into() },
        StreamChunk::ToolCallDelta { id: id.into(), delta: arguments.into() },
        StreamChunk::ToolCallEnd { id: id.into() },
    ]
}

fn text(text: &str) -> StreamChunk {
    StreamChunk::TextDelta { text: text.into() }
}

const HERMES: &str =
    "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>";

#[test]
fn hermes_call_in_one_chunk() {
    assert_eq!(parse(&[HERMES]), call("c0", "add", r#"{"a":2,"b":3}"#));
}

#[test]
fn hermes_call_split_at_every_character() {
    let pieces = by_char(HERMES);
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    assert_eq!(parse(&pieces), call("c0", "add", r#"{"a":2,"b":3}"#));
}

#[test]
fn tags_split_inside_the_tag_name() {
    let out = parse(&[
        "Sure. <to",
        "ol_ca",
        "ll>{\"name\": \"add\", \"arguments\": {}}</tool",
        "_call> Done.",
    ]);
    let mut expected = vec![text("Sure.")];
    expected.extend(call("c0", "add", "{}"));
    expected.push(text("Done."));
    assert_eq!(merged(out), expected);
}

#[test]
fn text_around_and_between_several_calls() {
    let input = format!("Let me add.\n{HERMES}\n{HERMES}\nThat is all.");
    let out = parse(&[&input]);
    let mut expected = vec![text("Let me add.")];
    expected.extend(call("c0", "add", r#"{"a":2,"b":3}"#));
    expected.extend(call("c1", "add", r#"{"a":2,"b":3}"#));
    expected.push(text("That is all."));
    assert_eq!(out, expected);
}

#[test]
fn text_that_only_looks_like_tags_passes_through() {
    let input = "a < b, <b>bold</b> and <tool-ish> <thinker> <tool_calls";
    let out = parse(&[input]);
    assert_eq!(merged(out), vec![text(input)]);
    let pieces = by_char(input);
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    assert_eq!(merged(parse(&pieces)), vec![text(input)]);
}

#[test]
fn server_tool_format() {
    let out = parse(&[
        "<tool>{\"server_name\": \"files\", \"tool_name\": \"read\", ",
        "\"arguments\": {\"path\": \"a.txt\"}}</tool>",
    ]);
    assert_eq!(out, call("c0", "read", r#"{"path":"a.txt"}"#));
}

#[test]
fn thinking_blocks_become_reasoning() {
    for (open, close) in [("<think>", "</think>"), ("<thinking>", "</thinking>")] {
        let input = format!("{open}I should add 2 and 3.{close}\n{HERMES}");
        let pieces = by_char(&input);
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let mut expected = vec![
            StreamChunk::ReasoningDelta { text: "I should add 2 and 3.".into() },
            StreamChunk::ReasoningEnd { opaque: None },
        ];
        expected.extend(call("c0", "add", r#"{"a":2,"b":3}"#));
        assert_eq!(merged(parse(&pieces)), expected, "{open}");
    }
}

#[test]
fn reasoning_streams_before_the_block_closes() {
    let mut parser = parser();
    let mut out = Vec::new();
    parser.push("<think>step one, step two</th", &mut out);
    assert_eq!(out, vec![StreamChunk::ReasoningDelta { text: "step one, step two".into() }]);
}

#[test]
fn malformed_json_keeps_the_name_and_the_raw_text() {
    let body = r#"{"name": "add", "arguments": {"a": 2, "b": }}"#;
    let out = parse(&[&format!("<tool_call>{body}</tool_call>")]);
    assert_eq!(out, call("c0", "add", body));
    let StreamChunk::ToolCallDelta { delta, .. } = &out[1] else { panic!() };
    assert!(crate::tool::parse_arguments(delta).is_err());
}

#[test]
fn unreadable_call_gets_the_malformed_name() {
    let out = parse(&["<tool_call>add(2, 3)</tool_call>"]);
    assert_eq!(out, call("c0", MALFORMED_CALL_NAME, "add(2, 3)"));
    let out = parse(&["<tool_call>[1, 2]</tool_call>"]);
    assert_eq!(out, call("c0", MALFORMED_CALL_NAME, "[1, 2]"));
}

#[test]
fn arguments_sent_as_a_string_or_missing() {
    let out = parse(&[r#"<tool_call>{"name": "add", "arguments": "{\"a\": 1}"}</tool_call>"#]);
    assert_eq!(out, call("c0", "add", r#"{"a": 1}"#));
    let out = parse(&[r#"<tool_call>{"name": "now"}</tool_call>"#]);
    assert_eq!(out, call("c0", "now", "{}"));
}

#[test]
fn unclosed_call_at_the_end() {
    // A whole body without the closing tag (the model stopped there): a call.
    let out = parse(&[r#"<tool_call>{"name": "add", "arguments": {"a": 1}}"#]);
    assert_eq!(out, call("c0", "add", r#"{"a":1}"#));
    // A body cut by the token limit: dropped.
    let mut parser = parser();
    let mut out = Vec::new();
    parser.push(r#"Hi <tool_call>{"name": "add", "argu"#, &mut out);
    assert!(parser.in_call());
    parser.finish(false, &mut out);
    assert_eq!(out, vec![text("Hi")]);
    // The same at a normal stop: a malformed call the model hears about.
    let out = parse(&[r#"<tool_call>{"name": "add", "argu"#]);
    assert_eq!(out, call("c0", "add", r#"{"name": "add", "argu"#));
}

#[test]
fn unclosed_thinking_and_partial_tag_at_the_end() {
    let out = parse(&["<think>hmm"]);
    assert_eq!(
        out,
        vec![
            StreamChunk::ReasoningDelta { text: "hmm".into() },
            StreamChunk::ReasoningEnd { opaque: None }
        ]
    );
    assert_eq!(merged(parse(&["The answer is 5 <tool"])), vec![text("The answer is 5 <tool")]);
}

#[test]
fn multibyte_text_around_tags() {
    let input = format!("héllo wörld ✓ {HERMES} ünïcode <— tag");
    let pieces = by_char(&input);
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let mut expected = vec![text("héllo wörld ✓")];
    expected.extend(call("c0", "add", r#"{"a":2,"b":3}"#));
    expected.push(text("ünïcode <— tag"));
    assert_eq!(merged(parse(&pieces)), expected);
}

#[test]
fn tools_prompt_describes_tools_format_and_choice() {
    let tools = vec![ToolSpec {
        name: "add".into(),
        description: "Adds.".into(),
        parameters: json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
    }];
    let hermes = PromptedProtocol::new(ToolCallFormat::Hermes);
    let prompt = hermes.tools_prompt(&tools, &ToolChoice::Required);
    assert!(
        prompt.contains(r#"{"type":"function","function":{"name":"add","description":"Adds.","parameters":{"properties":{"a":{"type":"integer"}},"type":"object"}}}"#),
        "{prompt}"
    );
    assert!(prompt.contains("<tool_call>\n{\"name\": <tool-name>"));
    assert!(prompt.ends_with("You must call at least one tool now."));
    let server = PromptedProtocol::new(ToolCallFormat::ServerTool).with_server_name("calc");
    let prompt = server.tools_prompt(&tools, &ToolChoice::Named("add".into()));
    assert!(prompt.contains(r#""server_name":"calc""#), "{prompt}");
    assert!(prompt.contains("<tool>\n{\"server_name\": \"calc\", \"tool_name\": <tool-name>"));
    assert!(prompt.ends_with("You must call the tool \"add\" now."));
    assert_eq!(
        server.call_text("add", r#"{"a": 1}"#),
        "<tool>\n{\"server_name\": \"calc\", \"tool_name\": \"add\", \"arguments\": {\"a\":1}}\n</tool>"
    );
}

fn tool_history() -> Vec<Message> {
    let mut assistant = Message::assistant("Adding.");
    assistant.content.insert(
        0,
        Part::Reasoning(crate::message::Reasoning { text: "think".into(), opaque: None }),
    );
    assistant.content.push(Part::ToolCall(ToolCall {
        id: "x1".into(),
        name: "add".into(),
        arguments: r#"{"a":2}"#.into(),
    }));
    assistant.content.push(Part::ToolCall(ToolCall {
        id: "x2".into(),
        name: "add".into(),
        arguments: "{oops".into(),
    }));
    vec![
        Message::user("What is 2 + 3?"),
        assistant,
        Message::tool_results([
            ToolResult::ok("x1", json!(5)),
            ToolResult::error("x2", "Error: bad JSON"),
        ]),
    ]
}

#[test]
fn rewrite_puts_tools_in_the_instructions_and_history_in_text() {
    let request = ModelRequest {
        instructions: Some("Be brief.".into()),
        messages: Arc::new(tool_history()),
        tools: Arc::new(vec![ToolSpec {
            name: "add".into(),
            description: "Adds.".into(),
            parameters: json!({"type": "object"}),
        }]),
        tool_choice: ToolChoice::Required,
        ..ModelRequest::default()
    };
    let rewritten = PromptedProtocol::default().rewrite(request);
    assert!(rewritten.tools.is_empty());
    assert_eq!(rewritten.tool_choice, ToolChoice::None);
    let instructions = rewritten.instructions.unwrap();
    assert!(instructions.starts_with("Be brief.\n\n# Tools"), "{instructions}");
    assert!(instructions.contains("You must call at least one tool now."));
    let messages = &rewritten.messages;
    assert_eq!(messages[0], Message::user("What is 2 + 3?"));
    assert_eq!(
        messages[1],
        Message::assistant(
            "Adding.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\":2}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": \"{oops\"}\n</tool_call>"
        )
    );
    assert_eq!(
        messages[2],
        Message::user("<tool_response>\n5\n</tool_response>\n<tool_response>\nError: bad JSON\n</tool_response>")
    );
    // The server format names the tool in each result.
    let server =
        PromptedProtocol::new(ToolCallFormat::ServerTool).rewrite_messages(&tool_history());
    assert_eq!(
        server[2].text(),
        "<tool_result>\n{\"content\":\"5\",\"server_name\":\"agentloop\",\"tool_name\":\"add\"}\n</tool_result>\n<tool_result>\n{\"content\":\"Error: bad JSON\",\"server_name\":\"agentloop\",\"tool_name\":\"add\"}\n</tool_result>"
    );
}

#[test]
fn rewrite_without_tools_or_with_choice_none_adds_no_prompt() {
    let request = ModelRequest {
        instructions: Some("Be brief.".into()),
        messages: Arc::new(tool_history()),
        tools: Arc::new(vec![ToolSpec {
            name: "add".into(),
            description: String::new(),
            parameters: json!({}),
        }]),
        tool_choice: ToolChoice::None,
        ..ModelRequest::default()
    };
    let rewritten = PromptedProtocol::default().rewrite(request);
    assert_eq!(rewritten.instructions.as_deref(), Some("Be brief."));
    assert!(rewritten.messages.iter().all(|m| m.role != Role::Tool && !m.has_tool_calls()));
}

async fn respond(turn: ScriptedTurn) -> ModelResponse {
    let model = PromptedTools::new(ScriptedModel::new([turn]).with_chunk_chars(3));
    collect(model.stream(ModelRequest::default())).await.unwrap()
}

#[tokio::test]
async fn wrapper_turns_text_calls_into_calls_and_finishes_with_tool_calls() {
    let response = respond(ScriptedTurn::text(format!("<think>sum</think>{HERMES}"))).await;
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    let calls: Vec<_> = response.message.tool_calls().collect();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("add", r#"{"a":2,"b":3}"#));
    assert_eq!(response.message.reasoning_text(), "sum");
    assert_eq!(response.message.text(), "");
    // A complete call followed by rambling up to the token limit is still a call.
    let cut = respond(
        ScriptedTurn::text(format!("{HERMES} and then I went on and on"))
            .with_finish(FinishReason::Length),
    )
    .await;
    assert_eq!(cut.finish_reason, FinishReason::ToolCalls);
    // Plain text stays plain.
    let plain = respond(ScriptedTurn::text("The answer is 5.").with_usage(Usage {
        input: 3,
        output: 4,
        ..Usage::default()
    }))
    .await;
    assert_eq!(plain.finish_reason, FinishReason::Stop);
    assert_eq!(plain.message.text(), "The answer is 5.");
    assert_eq!(plain.usage.output, 4);
}

/// Adds two integers.
#[crate::tool]
async fn add(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b).ok_or_else(|| "overflow".to_string())
}

/// A provider without native tool calling.
struct NoTools(Arc<ScriptedModel>);

impl Provider for NoTools {
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        self.0.stream(request)
    }
    fn supports_tools(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn agent_falls_back_to_prompted_calls_and_the_model_sees_results_and_errors() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text(format!(
            "{HERMES}\n<tool_call>{{\"name\": \"add\", \"arguments\": {{\"a\": 1,}}}}</tool_call>"
        )),
        ScriptedTurn::text("2 + 3 = 5"),
    ]));
    let agent = Agent::builder(NoTools(model.clone())).tool(Add).build().unwrap();
    let outcome = agent.run("What is 2 + 3?").await.unwrap();
    assert_eq!(outcome.answer, "2 + 3 = 5");
    let audit = &outcome.metrics.audit;
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[0].result, Some(json!(5).into()));
    assert!(audit[1].is_error);
    let requests = model.requests();
    assert!(requests.iter().all(|r| r.tools.is_empty()));
    assert!(requests[0].instructions.as_ref().unwrap().contains("\"name\":\"add\""));
    let results = requests[1].messages.last().unwrap();
    assert_eq!(results.role, Role::User);
    let results = results.text();
    assert!(results.starts_with("<tool_response>\n5\n</tool_response>"), "{results}");
    assert!(results.contains("not valid JSON"), "{results}");
}

#[tokio::test]
async fn native_providers_keep_native_tools_unless_told_otherwise() {
    let native = Arc::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let agent = Agent::builder(native.clone()).tool(Add).build().unwrap();
    agent.run("hi").await.unwrap();
    assert_eq!(native.requests()[0].tools.len(), 1);
    let forced = Arc::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let agent = Agent::builder(forced.clone())
        .tool(Add)
        .tool_protocol(ToolProtocol::Prompted(ToolCallFormat::ServerTool))
        .build()
        .unwrap();
    agent.run("hi").await.unwrap();
    assert!(forced.requests()[0].tools.is_empty());
    assert!(forced.requests()[0].instructions.as_ref().unwrap().contains("<tool>"));
    let never = Arc::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let agent = Agent::builder(NoTools(never.clone()))
        .tool(Add)
        .tool_protocol(ToolProtocol::Native)
        .build()
        .unwrap();
    agent.run("hi").await.unwrap();
    assert_eq!(never.requests()[0].tools.len(), 1);
}

/// One segment of generated text.
#[derive(Debug, Clone)]
enum Segment {
    Text(String),
    Think(String),
    Call(String, Value),
}

fn segment() -> impl Strategy<Value = Segment> {
    let args = proptest::collection::btree_map("[a-z]{1,6}", any::<i32>(), 0..4)
        .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k, json!(v))).collect()));
    prop_oneof![
        "[a-zA-Z0-9 .,!?\n]{1,20}".prop_map(Segment::Text),
        "[a-z ]{1,20}".prop_map(Segment::Think),
        ("[a-z_]{1,10}", args).prop_map(|(name, args)| Segment::Call(name, args)),
    ]
}

/// Cuts `text` at these fractions (on character boundaries).
fn cut<'a>(text: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let mut points: Vec<usize> =
        cuts.iter().map(|c| c % (text.len() + 1)).filter(|&p| text.is_char_boundary(p)).collect();
    points.sort_unstable();
    points.dedup();
    let mut pieces = Vec::new();
    let mut from = 0;
    for point in points {
        pieces.push(&text[from..point]);
        from = point;
    }
    pieces.push(&text[from..]);
    pieces
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(
        text in r#"(.|<tool_call>|</tool_call>|<tool>|</tool>|<think>|</think>|<thinking>|\{"name": ?"|"arguments": ?|\}){0,40}"#,
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        complete in any::<bool>(),
    ) {
        let mut parser = parser();
        let mut out = Vec::new();
        for piece in cut(&text, &cuts) {
            parser.push(piece, &mut out);
        }
        parser.finish(complete, &mut out);
        // Every call is well-formed: start, optional delta, end, with one id.
        let mut open: Option<String> = None;
        for chunk in &out {
            match chunk {
                StreamChunk::ToolCallStart { id, .. } => { prop_assert!(open.is_none()); open = Some(id.clone()); }
                StreamChunk::ToolCallDelta { id, .. } => prop_assert_eq!(Some(id), open.as_ref()),
                StreamChunk::ToolCallEnd { id } => { prop_assert_eq!(Some(id), open.as_ref()); open = None; }
                _ => prop_assert!(open.is_none()),
            }
        }
    }

    #[test]
    fn rechunking_gives_the_same_output(
        segments in proptest::collection::vec(segment(), 0..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
        server in any::<bool>(),
    ) {
        let protocol = PromptedProtocol::new(if server { ToolCallFormat::ServerTool } else { ToolCallFormat::Hermes });
        let mut text = String::new();
        let mut expected_calls = Vec::new();
        for segment in &segments {
            match segment {
                Segment::Text(t) => text.push_str(t),
                Segment::Think(t) => text.push_str(&format!("<think>{t}</think>")),
                Segment::Call(name, args) => {
                    text.push_str(&protocol.call_text(name, &args.to_string()));
                    expected_calls.push((name.clone(), args.to_string()));
                }
            }
        }
        let whole = merged(parse(&[&text]));
        let pieces = cut(&text, &cuts);
        let chunked = merged(parse(&pieces));
        prop_assert_eq!(&chunked, &whole);
        let mut calls = Vec::new();
        let mut current = None;
        for chunk in whole {
            match chunk {
                StreamChunk::ToolCallStart { name, .. } => current = Some((name, String::new())),
                StreamChunk::ToolCallDelta { delta, .. } => if let Some((_, args)) = current.as_mut() { args.push_str(&delta) },
                StreamChunk::ToolCallEnd { .. } => calls.extend(current.take()),
                _ => {}
            }
        }
        prop_assert_eq!(calls, expected_calls);
    }
}

#[test]
fn prompt_schemas_keep_constraints_and_drop_generator_bookkeeping() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "AddArgs",
        "description": "Arguments of add.",
        "type": "object",
        "properties": {
            "a": {"type": "integer", "format": "int64", "description": "The first number."},
            "b": {"type": "number", "format": "double", "minimum": 0},
            "title": {"type": "string", "format": "date-time", "title": "Title"},
            "tags": {"type": "array", "items": {"type": "integer", "format": "uint32"}},
            "mode": {"enum": [{"title": "kept", "format": "int64"}], "default": "x"}
        },
        "required": ["a", "b"],
        "additionalProperties": false
    });
    assert_eq!(
        prompt_schema(&schema),
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "The first number."},
                "b": {"type": "number", "minimum": 0},
                "title": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "integer"}},
                "mode": {"enum": [{"title": "kept", "format": "int64"}], "default": "x"}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        })
    );
}

#[test]
fn the_tools_prompt_shows_the_small_schema() {
    let tool = ToolSpec {
        name: "add".into(),
        description: "Adds.".into(),
        parameters: json!({"title": "AddArgs", "type": "object",
            "properties": {"a": {"type": "integer", "format": "int64"}}}),
    };
    let prompt =
        PromptedProtocol::new(ToolCallFormat::Hermes).tools_prompt(&[tool], &ToolChoice::Auto);
    assert!(
        prompt.contains(r#""parameters":{"properties":{"a":{"type":"integer"}},"type":"object"}"#),
        "{prompt}"
    );
}

#[test]
fn a_long_call_in_small_pieces_is_parsed_in_linear_time() {
    // 800 KB of arguments in 16-byte pieces (searching the whole body for the closing tag
    // with each piece took seconds), then the closing tag split across two pieces.
    let value = "x".repeat(800_000);
    let body = format!(r#"{{"name": "write", "arguments": {{"text": "{value}"}}}}"#);
    let mut pieces: Vec<&str> = vec!["<tool_call>"];
    let mut rest = body.as_str();
    while !rest.is_empty() {
        let (piece, tail) = rest.split_at(rest.len().min(16));
        pieces.push(piece);
        rest = tail;
    }
    pieces.extend(["</tool_", "call> done"]);
    let started = std::time::Instant::now();
    let out = parse(&pieces);
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    let arguments: String = out
        .iter()
        .filter_map(|chunk| match chunk {
            StreamChunk::ToolCallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(arguments.len(), value.len() + r#"{"text":""}"#.len(), "{}", &arguments[..40]);
    assert!(matches!(out.last(), Some(StreamChunk::TextDelta { text }) if text == "done"));
}

#[test]
fn a_call_longer_than_the_limit_is_dropped_and_reported() {
    let mut parser = ToolCallParser::with_id_prefix("c").with_max_call_bytes(64);
    let mut out = Vec::new();
    parser.push("Calling. <tool_call>{\"name\": \"write\", \"arguments\": {\"text\": \"", &mut out);
    assert!(!parser.overflowed());
    parser.push(&"x".repeat(100), &mut out);
    assert!(parser.overflowed());
    parser.push("\"}}</tool_call> more text", &mut out);
    parser.finish(true, &mut out);
    assert_eq!(out, vec![text("Calling.")], "the call and what follows are dropped");
}

#[tokio::test]
async fn a_stream_with_an_overlong_call_ends_with_a_protocol_error() {
    // 9 MiB of call body without its closing tag: past the 8 MiB default.
    let piece = "x".repeat(1 << 20);
    let mut chunks = vec![Ok(StreamChunk::TextDelta { text: "<tool_call>{\"a\": \"".into() })];
    chunks.extend((0..9).map(|_| Ok(StreamChunk::TextDelta { text: piece.clone() })));
    chunks.push(Ok(StreamChunk::Finish { reason: FinishReason::Stop }));
    let protocol = PromptedProtocol::new(ToolCallFormat::Hermes);
    let stream = protocol.parse_stream(Box::pin(futures::stream::iter(chunks)));
    let error = collect(stream).await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::Protocol { message, .. }
            if message.contains("longer than 8388608 bytes")),
        "{error:?}"
    );
    // The limit is the protocol's.
    let chunks = vec![
        Ok(StreamChunk::TextDelta { text: "<tool_call>{\"a\": \"".into() }),
        Ok(StreamChunk::TextDelta { text: "x".repeat(200) }),
    ];
    let protocol = PromptedProtocol::new(ToolCallFormat::Hermes).with_max_call_bytes(100);
    let stream = protocol.parse_stream(Box::pin(futures::stream::iter(chunks)));
    let error = collect(stream).await.unwrap_err();
    assert!(error.to_string().contains("longer than 100 bytes"), "{error}");
}
