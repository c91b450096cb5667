use super::*;
use crate::constrain::{lark_grammar, CallGrammar, Quote};
use agentloop::provider::PromptedProtocol;
use agentloop::tool::ToolSpec;
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use proptest::prelude::*;
use serde_json::json;
use std::sync::Arc;
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

/// A byte-level vocabulary without a model file: the 256 bytes, then multi-byte tokens of the
/// kind real vocabularies have (JSON punctuation, digits, words, the call tags), then an
/// end-of-sequence token.
struct TestEnv {
    trie: TokTrie,
}

impl TokenizerEnv for TestEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.greedy_tokenize(s)
    }
}

const MULTI_BYTE: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "\n",
    "{\"",
    "\": ",
    "\", \"",
    "\"}",
    "}}",
    "\"name\"",
    "\"arguments\"",
    "12",
    "345",
    "000",
    " * ",
    " + ",
    "expression",
    "path",
    "the",
    " the",
    "ing",
    "  ",
    "    ",
    "\\n",
    "\\\"",
    "\\u00",
    "true",
    "false",
    "null",
    ", ",
    "[",
    "]",
    "{",
    "}",
    "-",
    ".",
    "0.",
    "e+",
    "ab",
    "xyz",
    "é",
    "日本",
    "😀",
];

fn factory() -> ParserFactory {
    vocabulary().0
}

fn vocabulary() -> (ParserFactory, Vec<Vec<u8>>) {
    let mut words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    words.extend(MULTI_BYTE.iter().map(|w| w.as_bytes().to_vec()));
    let eos = u32::try_from(words.len()).unwrap();
    words.push(vec![TokTrie::SPECIAL_TOKEN_MARKER, b'e', b'o', b's']);
    let info = TokRxInfo::new(u32::try_from(words.len()).unwrap(), eos);
    let trie = TokTrie::from(&info, &words);
    let env: TokEnv = Arc::new(TestEnv { trie });
    let mut factory = ParserFactory::new_simple(&env).unwrap();
    factory.quiet();
    (factory, words)
}

fn spec(name: &str, parameters: Value) -> ToolSpec {
    ToolSpec { name: name.into(), description: String::new(), parameters }
}

fn compile_grammar(factory: &ParserFactory, grammar: &CallGrammar) -> Matcher {
    let parser = factory
        .create_parser(TopLevelGrammar::from_lark(grammar.text.clone()))
        .unwrap_or_else(|e| panic!("grammar does not compile: {e}\n{}", grammar.text));
    Matcher::new(Ok(parser))
}

/// Generates a call with random logits (seeded); the text, or a description of the failure.
/// Returns the text and whether the grammar accepted it within `limit` tokens.
fn generate(matcher: &mut Matcher, seed: u64, limit: usize) -> (String, bool) {
    let words = vocabulary().1;
    let mut noise = seed | 1;
    let mut bytes = Vec::new();
    let trie_bytes = |_: &Matcher, token: TokenId| words[token as usize].clone();
    for _ in 0..limit {
        if matcher.is_accepting().unwrap() {
            return (String::from_utf8_lossy(&bytes).into_owned(), true);
        }
        let mask = matcher.compute_mask().unwrap();
        let allowed: Vec<TokenId> =
            (0..mask.len() as u32).filter(|&t| mask.is_allowed(t)).collect();
        assert!(!allowed.is_empty(), "dead end after {:?}", String::from_utf8_lossy(&bytes));
        // Weighted toward the long and repetitive tokens a derailing model prefers.
        noise = noise.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let pick = if noise >> 62 == 0 {
            allowed.iter().copied().max_by_key(|&t| trie_bytes(matcher, t).len()).unwrap()
        } else {
            allowed[((noise >> 33) as usize) % allowed.len()]
        };
        bytes.extend(trie_bytes(matcher, pick));
        matcher.consume_token(pick).unwrap();
    }
    let accepting = matcher.is_accepting().unwrap();
    (String::from_utf8_lossy(&bytes).into_owned(), accepting)
}

/// The call's arguments, parsed.
fn arguments(text: &str) -> Value {
    let body = text
        .strip_prefix("<tool_call>\n")
        .and_then(|t| t.strip_suffix("\n</tool_call>"))
        .unwrap_or_else(|| panic!("not a call: {text:?}"));
    let call: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    call["arguments"].clone()
}

#[test]
fn strings_numbers_and_objects_are_bounded() {
    let compiled = compile(
        &json!({"type": "object", "properties": {"s": {"type": "string"}}}),
        "x_",
        true,
        None,
    );
    assert_eq!(compiled.max_bytes, 2 + (5 + 2 + CHAR_BYTES * DEFAULT_MAX_LENGTH) + 2);
    let limited = compile(
        &json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 10}}}),
        "x_",
        true,
        None,
    );
    assert_eq!(limited.max_bytes, 2 + (5 + 2 + CHAR_BYTES * 10) + 2);
    let huge = compile(&json!({"type": "string", "maxLength": 1_000_000}), "x_", true, None);
    assert_eq!(huge.max_bytes, 2 + CHAR_BYTES * STRING_CEILING);
    let number = compile(&json!({"type": "number"}), "x_", true, None);
    assert!(number.max_bytes <= 24, "{number:?}");
    let closed = compile(&json!({"type": "object"}), "x_", true, None);
    assert_eq!(closed.max_bytes, 2);
}

#[test]
fn unsatisfiable_and_recursive_schemas_fall_back_to_a_bounded_object() {
    let recursive = json!({
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["next"]}},
        "$ref": "#/$defs/node"
    });
    let compiled = compile(&recursive, "x_", true, None);
    assert!(compiled.max_bytes < 100_000, "{}", compiled.max_bytes);
    let unknown_ref = compile(&json!({"$ref": "#/nowhere"}), "x_", true, None);
    assert!(unknown_ref.max_bytes < 100_000);
    let factory = factory();
    for schema in [recursive, json!(false), json!({"$ref": "#/nowhere"})] {
        let tool = spec("t", schema);
        let grammar = lark_grammar(&[&tool], &PromptedProtocol::default(), true, None);
        let mut matcher = compile_grammar(&factory, &grammar);
        let (text, closed) = generate(&mut matcher, 3, grammar.max_bytes + 1);
        assert!(closed, "{text:?}");
        assert!(arguments(&text).is_object(), "{text}");
    }
}

#[test]
fn enums_patterns_ranges_and_required_properties_are_honoured() {
    let schema = json!({
        "type": "object",
        "properties": {
            "expression": {"type": "string", "pattern": "^[0-9+*/() .-]+$", "maxLength": 20},
            "colour": {"enum": ["red", "blue", 3]},
            "n": {"type": "integer", "minimum": 0, "maximum": 99},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
            "note": {"type": ["string", "null"], "maxLength": 4}
        },
        "required": ["expression", "colour", "n"]
    });
    let factory = factory();
    let tool = spec("calc", schema);
    let grammar = lark_grammar(&[&tool], &PromptedProtocol::default(), true, None);
    for seed in 0..40 {
        let mut matcher = compile_grammar(&factory, &grammar);
        let (text, closed) = generate(&mut matcher, seed, grammar.max_bytes + 1);
        assert!(closed, "{text:?}");
        let args = arguments(&text);
        let expression = args["expression"].as_str().unwrap();
        assert!(!expression.is_empty() && expression.chars().count() <= 20, "{text}");
        assert!(expression.chars().all(|c| "0123456789+*/() .-".contains(c)), "{text}");
        assert!([json!("red"), json!("blue"), json!(3)].contains(&args["colour"]), "{text}");
        assert!((0..=99).contains(&args["n"].as_i64().unwrap()), "{text}");
        if let Some(tags) = args.get("tags") {
            assert!(tags.as_array().unwrap().len() <= 2, "{text}");
        }
        if let Some(note) = args.get("note") {
            assert!(note.is_null() || note.as_str().unwrap().chars().count() <= 4, "{text}");
        }
        let keys: Vec<&String> = args.as_object().unwrap().keys().collect();
        assert!(keys
            .iter()
            .all(|k| ["expression", "colour", "n", "tags", "note"].contains(&k.as_str())));
    }
}

#[test]
fn a_pattern_the_engine_rejects_is_left_out() {
    let tool = spec(
        "t",
        json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(?<=a)b"}}, "required": ["s"]}),
    );
    let factory = factory();
    let with = lark_grammar(&[&tool], &PromptedProtocol::default(), true, None);
    assert!(factory.create_parser(TopLevelGrammar::from_lark(with.text)).is_err());
    let without = lark_grammar(&[&tool], &PromptedProtocol::default(), false, None);
    assert!(factory.create_parser(TopLevelGrammar::from_lark(without.text)).is_ok());
}

/// Random JSON Schemas: the building blocks tools use, nested.
fn schema_strategy() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        (0u64..50).prop_map(|n| json!({"type": "string", "maxLength": n})),
        Just(json!({"type": "string", "pattern": "^[a-z]+$"})),
        Just(json!({"type": "string", "format": "uri"})),
        Just(json!({"type": "integer"})),
        (-50i64..50, 0i64..100)
            .prop_map(|(a, b)| json!({"type": "integer", "minimum": a, "maximum": a + b})),
        Just(json!({"type": "integer", "minimum": 0})),
        Just(json!({"type": "number"})),
        Just(json!({"type": "boolean"})),
        Just(json!({"type": "null"})),
        Just(json!({})),
        Just(json!(true)),
        Just(json!({"enum": ["a", "b c", 1, null]})),
        Just(json!({"const": "fixed"})),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec((inner.clone(), any::<bool>()), 0..5).prop_map(|fields| {
                let mut properties = Map::new();
                let mut required = Vec::new();
                for (index, (schema, is_required)) in fields.into_iter().enumerate() {
                    properties.insert(format!("f{index}"), schema);
                    if is_required {
                        required.push(Value::from(format!("f{index}")));
                    }
                }
                json!({"type": "object", "properties": properties, "required": required})
            }),
            inner.clone().prop_map(|items| json!({"type": "array", "items": items})),
            (inner.clone(), 0u64..4)
                .prop_map(|(items, max)| json!({"type": "array", "items": items, "maxItems": max})),
            inner
                .clone()
                .prop_map(|values| json!({"type": "object", "additionalProperties": values})),
            prop::collection::vec(inner.clone(), 1..3)
                .prop_map(|options| json!({"anyOf": options})),
            prop::collection::vec(inner, 1..3).prop_map(|parts| json!({"allOf": parts})),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// No schema makes a constrained call unbounded: with random logits the call closes
    /// (the grammar accepts) within the bound derived from the schema, and it is JSON.
    #[test]
    fn every_call_closes_within_its_bound(properties in schema_strategy(), seed in any::<u64>()) {
        let schema = json!({"type": "object", "properties": {"a": properties}, "required": ["a"]});
        let tool = spec("tool", schema);
        let grammar = lark_grammar(&[&tool], &PromptedProtocol::default(), true, None);
        prop_assert!(grammar.max_bytes < 2_000_000, "bound {}", grammar.max_bytes);
        let factory = factory();
        let mut matcher = compile_grammar(&factory, &grammar);
        // Every token is at least one byte, so the byte bound is a token bound.
        let (text, closed) = generate(&mut matcher, seed, grammar.max_bytes + 1);
        prop_assert!(closed, "did not close within {} tokens: {:?}", grammar.max_bytes, text);
        prop_assert!(text.len() <= grammar.max_bytes, "{} > {}", text.len(), grammar.max_bytes);
        prop_assert!(arguments(&text).is_object());
    }
}

#[test]
fn an_auto_step_allows_a_call_or_a_bounded_line() {
    let tool = spec("calc", json!({"type": "object", "properties": {"x": {"type": "integer"}}}));
    let grammar = lark_grammar(&[&tool], &PromptedProtocol::default(), true, None);
    let text = crate::constrain::with_answer(&grammar.text, None);
    let factory = factory();
    let fresh = || {
        Matcher::new(Ok(factory.create_parser(TopLevelGrammar::from_lark(text.clone())).unwrap()))
    };
    // Single bytes are tokens 0..=255 of the test vocabulary.
    let allowed = |matcher: &mut Matcher, byte: u8| {
        matcher.compute_mask().unwrap().is_allowed(u32::from(byte))
    };
    let mut matcher = fresh();
    assert!(allowed(&mut matcher, b'<'), "a call may start");
    assert!(allowed(&mut matcher, b'T'), "an answer may start");
    assert!(!allowed(&mut matcher, b' ') && !allowed(&mut matcher, b'\n'));
    for byte in b"The answer is 4." {
        matcher.consume_token(u32::from(*byte)).unwrap();
    }
    assert!(matcher.is_accepting().unwrap(), "an answer ends where the model ends it");
    matcher.consume_token(u32::from(b'\n')).unwrap();
    let more = matcher.compute_mask().map(|mask| mask.is_allowed(u32::from(b'I')));
    assert!(!more.unwrap_or(false), "one line");
    // A model that repeats itself stops at the bound.
    let mut matcher = fresh();
    let mut count = 0;
    while allowed(&mut matcher, b'a') {
        matcher.consume_token(u32::from(b'a')).unwrap();
        count += 1;
        assert!(count <= crate::constrain::ANSWER_CHARS + 1);
    }
    assert_eq!(count, crate::constrain::ANSWER_CHARS + 1);
}

#[test]
fn an_answer_after_a_short_result_quotes_it() {
    let tool = spec("calc", json!({"type": "object", "properties": {"x": {"type": "integer"}}}));
    let grammar = lark_grammar(&[&tool], &PromptedProtocol::default(), true, None);
    let text = crate::constrain::with_answer(&grammar.text, Some(&Quote::text("4.5 (a+b)")));
    let factory = factory();
    let mut matcher =
        Matcher::new(Ok(factory.create_parser(TopLevelGrammar::from_lark(text)).unwrap()));
    for byte in b"It is 4.5 (a" {
        matcher.consume_token(u32::from(*byte)).unwrap();
    }
    assert!(!matcher.is_accepting().unwrap(), "the result is not quoted yet");
    for byte in b"+b)." {
        matcher.consume_token(u32::from(*byte)).unwrap();
    }
    assert!(matcher.is_accepting().unwrap());
}

#[test]
fn a_quoted_result_must_appear_in_the_top_level_string() {
    let tool = spec(
        "task_complete",
        json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}),
    );
    let grammar =
        lark_grammar(&[&tool], &PromptedProtocol::default(), true, Some(&Quote::text("391")));
    let factory = factory();
    for seed in 0..10 {
        let mut matcher = compile_grammar(&factory, &grammar);
        let (text, closed) = generate(&mut matcher, seed, grammar.max_bytes + 1);
        assert!(closed, "{text:?}");
        let answer = arguments(&text)["answer"].as_str().unwrap().to_owned();
        assert!(answer.contains("391"), "{text}");
    }
}

#[test]
fn a_quoting_answer_is_one_sentence() {
    let tool = spec(
        "task_complete",
        json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}),
    );
    let factory = factory();
    let accepts = |quote: &str, answer: &str| {
        let quote = Quote::text(quote);
        let grammar = lark_grammar(&[&tool], &PromptedProtocol::default(), true, Some(&quote));
        let mut matcher = compile_grammar(&factory, &grammar);
        let call = format!(
            "<tool_call>\n{{\"name\": \"task_complete\", \"arguments\": {{\"answer\": \"{answer}\"}}}}\n</tool_call>"
        );
        call.bytes().all(|byte| matcher.consume_token(u32::from(byte)).is_ok())
            && matcher.is_accepting().unwrap_or(false)
    };
    assert!(accepts("50", "The sum is 50."));
    assert!(accepts("10", "2.5 times 4 is 10"));
    assert!(!accepts("50", "50 is 50. The answer is 50."), "a second sentence");
    assert!(!accepts("50", "It is 50.."));
    // A result with a sentence break in it can still be quoted.
    assert!(accepts("ok. done", "It said ok. done"));
}

/// A quoting answer, as text or in `task_complete`, holds no number that the question, the
/// calls and the results do not ("The sum of 42 and 25 is 107." after `17 + 25` → 42).
#[test]
fn a_quoting_answer_holds_only_the_conversations_numbers() {
    let factory = factory();
    let quote = Quote::with_numbers("42", ["What is 17 plus 25?", r#"{"expression":"17 + 25"}"#]);
    assert_eq!(quote.numbers, Some(vec!["42".to_owned(), "17".to_owned(), "25".to_owned()]));
    let tool = spec(
        "task_complete",
        json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}),
    );
    let call = lark_grammar(&[&tool], &PromptedProtocol::default(), true, Some(&quote));
    let text = crate::constrain::answer_only(Some(&quote));
    let accepts = |answer: &str| {
        let mut as_text = Matcher::new(Ok(factory
            .create_parser(TopLevelGrammar::from_lark(text.clone()))
            .unwrap()));
        let text_ok = answer.bytes().all(|b| as_text.consume_token(u32::from(b)).is_ok())
            && as_text.is_accepting().unwrap_or(false);
        let mut as_call = compile_grammar(&factory, &call);
        let call = format!(
            "<tool_call>\n{{\"name\": \"task_complete\", \"arguments\": {{\"answer\": \"{answer}\"}}}}\n</tool_call>"
        );
        let call_ok = call.bytes().all(|b| as_call.consume_token(u32::from(b)).is_ok())
            && as_call.is_accepting().unwrap_or(false);
        assert_eq!(text_ok, call_ok, "{answer}: as text {text_ok}, as a call {call_ok}");
        text_ok
    };
    assert!(accepts("The sum of 17 and 25 is 42."));
    assert!(accepts("42"));
    assert!(accepts("It is 42, forty-two."));
    assert!(!accepts("The sum of 42 and 25 is 107."), "a number from nowhere");
    assert!(!accepts("42 is 42.55"), "a decimal from nowhere");
    assert!(!accepts("42 is 17.25"), "two numbers made one");
    assert!(!accepts("42 is 42.42"), "the result twice made one");
    assert!(accepts("42 is 42."), "a sentence's period");
    assert!(!accepts("42 is 42.com."), "a period after a number ends the answer");
    assert!(accepts("It is 42 (17 + 25)."));
    assert!(!accepts("It is 420."), "a longer number that starts with the result");
    assert!(!accepts("It is 142."), "a longer number that ends with the result");
    // Decimals are numbers of their own.
    let decimal = Quote::with_numbers("10", ["What is 2.5 times 4?"]);
    assert_eq!(decimal.numbers, Some(vec!["10".to_owned(), "2.5".to_owned(), "4".to_owned()]));
    let text = crate::constrain::answer_only(Some(&decimal));
    let accepts = |answer: &str| {
        let mut matcher = Matcher::new(Ok(factory
            .create_parser(TopLevelGrammar::from_lark(text.clone()))
            .unwrap()));
        answer.bytes().all(|b| matcher.consume_token(u32::from(b)).is_ok())
            && matcher.is_accepting().unwrap_or(false)
    };
    assert!(accepts("2.5 times 4 is 10."));
    assert!(!accepts("2 times 4 is 10."), "a part of a decimal");
    assert!(!accepts("2.5 times 4 is 10.5"));
    // A result without a digit: numbers are free.
    let word = Quote::with_numbers("Paris", ["What is the capital of France?"]);
    assert_eq!(word.numbers, None);
    assert_eq!(word.numbers_regex(), None);
}

/// A bounded integer is its digits only: no whitespace in front (the proptest above found
/// `"a":          -19`, over the byte bound, with this schema and seed).
#[test]
fn a_bounded_integer_has_no_whitespace_in_front() {
    let properties = json!({"allOf": [
        {"anyOf": [{"type": "string"}, {"type": "string"}]},
        {"allOf": [{"type": "integer", "minimum": -19, "maximum": -19}]},
    ]});
    let schema = json!({"type": "object", "properties": {"a": properties}, "required": ["a"]});
    let tool = spec("tool", schema);
    let grammar = lark_grammar(&[&tool], &PromptedProtocol::default(), true, None);
    let factory = factory();
    for seed in [9_193_607_875_687_342_392, 1, 2, 3] {
        let mut matcher = compile_grammar(&factory, &grammar);
        let (text, closed) = generate(&mut matcher, seed, grammar.max_bytes + 1);
        assert!(closed && text.len() <= grammar.max_bytes, "{text:?} over {}", grammar.max_bytes);
        assert_eq!(arguments(&text), json!({"a": -19}));
    }
}
