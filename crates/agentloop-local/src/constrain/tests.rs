use super::*;
use crate::engine::{Sampler, SamplingParams};
use crate::gguf::Metadata;
use agentloop::message::{Message, ToolCall};
use candle_core::quantized::gguf_file;

fn spec(name: &str, parameters: Value) -> ToolSpec {
    ToolSpec { name: name.into(), description: String::new(), parameters }
}

#[test]
fn the_grammar_has_one_alternative_per_tool() {
    let protocol = PromptedProtocol::default();
    let a = spec("add", json!({"type": "object", "properties": {"x": {"type": "integer"}}}));
    let b = spec("echo", Value::Null);
    let grammar = lark_grammar(&[&a, &b], &protocol, true, None);
    assert!(grammar.text.starts_with("start: call_0 | call_1\n"), "{}", grammar.text);
    let call_0 = r#"call_0: "<tool_call>\n{\"name\": \"add\", \"arguments\": " a0_r"#;
    assert!(grammar.text.contains(call_0), "{}", grammar.text);
    assert!(grammar.text.contains(r#""}\n</tool_call>""#), "{}", grammar.text);
    // `echo` takes no arguments: `{}` only.
    assert!(grammar.text.contains("a1_r0: \"{}\"\n"), "{}", grammar.text);
    let longest_add =
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"x\": -999999999999999}}\n</tool_call>";
    assert_eq!(grammar.max_bytes, longest_add.len() + 2, "{}", grammar.text);
}

fn model_tokenizer() -> Option<Arc<Tokenizer>> {
    let path = crate::test_model_path()?;
    let mut file = std::fs::File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    Some(Arc::new(Tokenizer::from_metadata(&Metadata(&content.metadata)).unwrap()))
}

fn request(choice: ToolChoice) -> ModelRequest {
    let calculator = spec(
        "calculator",
        json!({"type": "object", "properties": {"expression": {"type": "string", "maxLength": 12}}, "required": ["expression"], "additionalProperties": false}),
    );
    let pick = spec(
        "pick",
        json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}, "c": {"enum": ["red", "blue"]}}, "required": ["n", "c"], "additionalProperties": false}),
    );
    ModelRequest::default().with_tools(vec![calculator, pick]).with_tool_choice(choice)
}

/// Random logits through the mask still give a well-formed call.
fn random_call(
    grammar: &ToolGrammar,
    tokenizer: &Tokenizer,
    choice: ToolChoice,
    seed: u64,
) -> String {
    let protocol = PromptedProtocol::default();
    let constraint = grammar.constraint(&request(choice), &protocol, None).unwrap().unwrap();
    decode_randomly(constraint, tokenizer, seed)
}

/// Random logits through the mask of `constraint`, until it is finished (at most 300
/// tokens); the text.
fn decode_randomly(
    mut constraint: Box<dyn Constraint>,
    tokenizer: &Tokenizer,
    seed: u64,
) -> String {
    let mut sampler = Sampler::new(SamplingParams { temperature: 1.0, top_p: None, seed });
    let mut noise = seed;
    let mut ids = Vec::new();
    for _ in 0..300 {
        let forced = constraint.forced().unwrap();
        if !forced.is_empty() {
            ids.extend(forced);
            if constraint.is_finished() {
                break;
            }
            continue;
        }
        let mask = constraint.mask().unwrap().unwrap();
        let logits: Vec<f32> = (0..mask.len())
            .map(|_| {
                noise = noise.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (noise >> 40) as f32 / (1u64 << 24) as f32 * 4.0
            })
            .collect();
        let allowed = |id: u32| mask[id as usize];
        let token = sampler.sample(logits, Some(&allowed)).unwrap();
        constraint.commit(token).unwrap();
        if tokenizer.stop_tokens().contains(&token) {
            break;
        }
        ids.push(token);
        if constraint.is_finished() {
            break;
        }
    }
    assert!(constraint.is_finished(), "{:?}", tokenizer.decode(&ids));
    tokenizer.decode(&ids)
}

#[test]
fn constrained_calls_are_well_formed() {
    let Some(tokenizer) = model_tokenizer() else { return };
    let grammar = ToolGrammar::new(Arc::clone(&tokenizer), tokenizer.vocab_size()).unwrap();
    let mut names = std::collections::HashSet::new();
    for seed in 0..6 {
        let text = random_call(&grammar, &tokenizer, ToolChoice::Required, seed);
        let body = text
            .strip_prefix("<tool_call>\n")
            .and_then(|t| t.strip_suffix("\n</tool_call>"))
            .unwrap_or_else(|| panic!("{text:?}"));
        let call: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        let name = call["name"].as_str().unwrap().to_owned();
        let arguments = call["arguments"].as_object().unwrap();
        match name.as_str() {
            "calculator" => {
                assert_eq!(arguments.len(), 1, "{text}");
                assert!(arguments["expression"].as_str().unwrap().chars().count() <= 12);
            }
            "pick" => {
                let n = arguments["n"].as_i64().unwrap();
                assert!((0..=99).contains(&n), "{text}");
                assert!(["red", "blue"].contains(&arguments["c"].as_str().unwrap()), "{text}");
            }
            other => panic!("unexpected tool {other}"),
        }
        names.insert(name);
    }
    let text = random_call(&grammar, &tokenizer, ToolChoice::Named("pick".into()), 11);
    assert!(text.starts_with("<tool_call>\n{\"name\": \"pick\""), "{text}");
}

#[test]
fn auto_allows_a_call_or_an_answer_and_unknown_names_are_errors() {
    let Some(tokenizer) = model_tokenizer() else { return };
    let grammar = ToolGrammar::new(Arc::clone(&tokenizer), tokenizer.vocab_size()).unwrap();
    let protocol = PromptedProtocol::default();
    assert!(grammar.constraint(&request(ToolChoice::Auto), &protocol, None).unwrap().is_some());
    let unconstrained = ToolGrammar::new(Arc::clone(&tokenizer), tokenizer.vocab_size())
        .unwrap()
        .constrain_auto(false);
    assert!(unconstrained
        .constraint(&request(ToolChoice::Auto), &protocol, None)
        .unwrap()
        .is_none());
    assert!(grammar.constraint(&request(ToolChoice::None), &protocol, None).unwrap().is_none());
    let error = grammar
        .constraint(&request(ToolChoice::Named("nope".into())), &protocol, None)
        .err()
        .unwrap();
    assert!(error.to_string().contains("nope"), "{error}");
}

#[test]
fn a_schema_that_cannot_be_bounded_as_written_still_gets_a_bounded_call() {
    let Some(tokenizer) = model_tokenizer() else { return };
    let grammar = ToolGrammar::new(Arc::clone(&tokenizer), tokenizer.vocab_size()).unwrap();
    let mut request = request(ToolChoice::Required);
    request.tools = Arc::new(vec![spec("bad", json!({"type": "object", "$ref": "#/nowhere"}))]);
    // An unresolvable `$ref`: the arguments become any bounded JSON object.
    let constraint = grammar.constraint(&request, &PromptedProtocol::default(), None).unwrap();
    assert!(constraint.is_some());
}

#[test]
fn a_result_that_json_would_escape_is_not_quoted() {
    let Some(tokenizer) = model_tokenizer() else { return };
    let grammar = ToolGrammar::new(Arc::clone(&tokenizer), tokenizer.vocab_size()).unwrap();
    let protocol = PromptedProtocol::default();
    let done = spec(
        "task_complete",
        json!({"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}}, "required": ["answer"]}),
    );
    for result in [r#"["a.txt","b.csv"]"#, r"C:\\temp", "42"] {
        let call = ToolCall { id: "c1".into(), name: "list_dir".into(), arguments: "{}".into() };
        let request = ModelRequest::new(vec![
            Message::user("Which files are here?"),
            Message { role: Role::Assistant, content: vec![Part::ToolCall(call)] },
            Message::tool_results([agentloop::message::ToolResult::ok("c1", result)]),
        ])
        .with_tools(vec![done.clone()])
        .with_tool_choice(ToolChoice::Named("task_complete".into()));
        let quote = result_to_quote(&request);
        let text = quote.map(|quote| quote.text);
        assert_eq!(text.as_deref(), (result == "42").then_some("42"), "{result}");
        let mut constraint = grammar.constraint(&request, &protocol, None).unwrap().unwrap();
        let forced = constraint.forced().unwrap();
        assert!(tokenizer.decode(&forced).contains(r#"{"answer": "#), "{result}");
        let mask = constraint.mask().unwrap().unwrap();
        assert!(mask.iter().any(|allowed| *allowed), "{result}: nothing allowed");
    }
}

/// The numbers a quoting answer may hold come from the question on: the question, the calls'
/// arguments, the results; not the worked examples before it.
#[test]
fn a_quote_takes_its_numbers_from_the_question_on() {
    let call = |id: &str, expression: &str| {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: "calculator".into(),
            arguments: format!(r#"{{"expression":"{expression}"}}"#),
        })
    };
    let request = ModelRequest::new(vec![
        Message::system("Results are numbers like 7."),
        Message::user("What is 3 times 4?"),
        Message { role: Role::Assistant, content: vec![call("e1", "3 * 4")] },
        Message::tool_results([agentloop::message::ToolResult::ok("e1", "12")]),
        Message::new(Role::Assistant, "12"),
        Message::user("How many days are in 3 weeks?"),
        Message { role: Role::Assistant, content: vec![call("c1", "3 * 7")] },
        Message::tool_results([agentloop::message::ToolResult::ok("c1", "21")]),
    ]);
    let quote = result_to_quote(&request).unwrap();
    assert_eq!(quote.text, "21");
    assert_eq!(quote.numbers, Some(vec!["21".to_owned(), "3".to_owned(), "7".to_owned()]));
}

#[test]
fn numbers_are_digit_runs_with_their_decimal_points() {
    let found: Vec<&str> = numbers("It is 42. Then 2.5, 1.2.3 and .5 or 7..8 x9").collect();
    assert_eq!(found, ["42", "2.5", "1.2.3", "5", "7", "8", "9"]);
    assert_eq!(numbers("none").count(), 0);
    assert_eq!(numbers("2.923003274661806e+48").collect::<Vec<_>>(), ["2.923003274661806", "48"]);
    // A result whose number is followed by a period inside it cannot hold to the numbers
    // rule (it would forbid the result itself): it is quoted with any numbers.
    for (text, inside) in
        [("file1.txt", true), ("v1.2.3.tar", true), ("It is 42.", false), ("2.5", false)]
    {
        assert_eq!(period_after_a_number(text), inside, "{text}");
        assert_eq!(Quote::with_numbers(text, []).numbers.is_none(), inside, "{text}");
    }
}

/// A quote with as many numbers as it may hold decodes with the model's vocabulary: every
/// mask of random answers under it is computed (the lexer's regexes stay within llguidance's
/// bounds), as a `task_complete` argument and as a text answer.
#[test]
fn a_quote_with_the_most_numbers_decodes() {
    let Some(tokenizer) = model_tokenizer() else { return };
    let grammar = ToolGrammar::new(Arc::clone(&tokenizer), tokenizer.vocab_size()).unwrap();
    let protocol = PromptedProtocol::default();
    let numbers: Vec<String> =
        (0..QUOTE_NUMBERS - 1).map(|i| format!("{}.{}", 1000 + i * 37, i)).collect();
    let call = ToolCall {
        id: "c1".into(),
        name: "calculator".into(),
        arguments: json!({"expression": numbers.join(" + ")}).to_string(),
    };
    let conversation = vec![
        Message::user(format!("Add {}.", numbers.join(", "))),
        Message { role: Role::Assistant, content: vec![Part::ToolCall(call)] },
        Message::tool_results([agentloop::message::ToolResult::ok("c1", "123456.5")]),
    ];
    let done = spec(
        "task_complete",
        json!({"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}}, "required": ["answer"]}),
    );
    let named = ModelRequest::new(conversation.clone())
        .with_tools(vec![done.clone()])
        .with_tool_choice(ToolChoice::Named("task_complete".into()));
    let quote = result_to_quote(&named).unwrap();
    assert_eq!(quote.numbers.as_ref().map(Vec::len), Some(QUOTE_NUMBERS));
    let text =
        ModelRequest::new(conversation).with_tools(vec![done]).with_tool_choice(ToolChoice::None);
    for seed in 0..3 {
        for request in [&named, &text] {
            let constraint = grammar.constraint(request, &protocol, None).unwrap().unwrap();
            let answer = decode_randomly(constraint, &tokenizer, seed);
            assert!(answer.contains("123456.5"), "{answer}");
        }
    }
}

/// With the workspace known, random calls of the file tools under the model's vocabulary
/// name only what exists there; a question that names a file is never answered by a listing.
#[test]
fn file_tool_calls_name_what_exists() {
    use agentloop::tool::builtin::{ListDir, ReadFile, Workspace};
    use agentloop::tool::DynTool;
    let Some(tokenizer) = model_tokenizer() else { return };
    let grammar = ToolGrammar::new(Arc::clone(&tokenizer), tokenizer.vocab_size()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    for file in ["notes.txt", "data.csv", "docs/a.md"] {
        std::fs::write(dir.path().join(file), "x").unwrap();
    }
    let root = Workspace::new(dir.path()).unwrap();
    let tools = vec![ReadFile(root.clone()).spec(), ListDir(root).spec()];
    let protocol = PromptedProtocol::default();
    for (question, allowed) in [
        ("Which files are here?", &["read_file", "list_dir"][..]),
        ("What does notes.txt say?", &["read_file"][..]),
    ] {
        let request = ModelRequest::new(vec![Message::user(question)])
            .with_tools(tools.clone())
            .with_tool_choice(ToolChoice::Required);
        for seed in 0..6 {
            let constraint =
                grammar.constraint(&request, &protocol, Some(dir.path())).unwrap().unwrap();
            let text = decode_randomly(constraint, &tokenizer, seed);
            let json =
                text.trim().trim_start_matches("<tool_call>").trim_end_matches("</tool_call>");
            let call: Value = serde_json::from_str(json.trim()).unwrap();
            let name = call["name"].as_str().unwrap();
            assert!(allowed.contains(&name), "{question}: {text}");
            let path = call["arguments"].get("path").and_then(Value::as_str);
            let exists = match name {
                "read_file" => {
                    path.is_some_and(|p| ["notes.txt", "data.csv", "docs/a.md"].contains(&p))
                }
                _ => path.is_none_or(|p| [".", "docs"].contains(&p)),
            };
            assert!(exists, "{question}: {text}");
        }
    }
}
