#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::tokens::openai_encoding;
use super::window::{current_interaction, plan_window, WindowPlan};
use super::*;
use crate::message::{Message, Part, Role, ToolCall, ToolResult};

fn call(id: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![Part::ToolCall(ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        })],
    }
}

fn result(id: &str) -> Message {
    Message::tool_results([ToolResult::ok(id, "r")])
}

/// user, (assistant call, tool result) × n, then a final assistant call and its result.
fn history(rounds: usize) -> Vec<Message> {
    let mut out = vec![Message::user("task")];
    for i in 0..rounds {
        out.push(call(&format!("c{i}")));
        out.push(result(&format!("c{i}")));
    }
    out
}

#[test]
fn boundaries_never_split_a_call_from_its_result() {
    let messages = history(3);
    assert!(is_tool_boundary_safe(&messages, 0));
    assert!(is_tool_boundary_safe(&messages, 1));
    assert!(!is_tool_boundary_safe(&messages, 2), "starts with an orphan result");
    assert_eq!(find_safe_tool_boundary(&messages, 2), 3);
    assert_eq!(find_safe_tool_boundary(&messages, 6), 7, "past the end when nothing is safe");
    // A pending call at the very end is fine.
    let mut pending = history(1);
    pending.push(call("open"));
    assert!(is_tool_boundary_safe(&pending, 0));
    // A call answered late (something in between) is not balanced.
    let broken = vec![call("x"), Message::user("hi"), result("x")];
    assert!(!is_tool_boundary_safe(&broken, 0));
}

#[test]
fn the_window_keeps_pinned_messages_and_the_current_interaction() {
    let messages = history(10); // 21 messages
    let counts = vec![10; messages.len()];
    assert_eq!(current_interaction(&messages, 0), 19);
    let policy = WindowPolicy { max_messages: Some(6), max_tokens: None };
    let plan = plan_window(&messages, &counts, &[0], 0, (0, 0), policy).unwrap();
    assert_eq!(plan, WindowPlan { pinned: vec![0], start: 17, tokens: 50 });
    assert_eq!(plan.dropped(), 16);
    let plan = plan_window(
        &messages,
        &counts,
        &[0],
        0,
        (0, 0),
        WindowPolicy { max_messages: None, max_tokens: Some(95) },
    )
    .unwrap();
    assert!(plan.tokens <= 95);
    assert_eq!(plan.start % 2, 1, "starts at an assistant message");
    let everything =
        plan_window(&messages, &counts, &[0], 0, (0, 0), WindowPolicy::default()).unwrap();
    assert_eq!((everything.start, everything.pinned.len()), (0, 0));
}

#[test]
fn a_required_message_alone_over_the_budget_is_an_error() {
    let messages = history(2);
    let counts = vec![10, 10, 10, 10, 500];
    let error = plan_window(
        &messages,
        &counts,
        &[0],
        0,
        (0, 0),
        WindowPolicy { max_messages: None, max_tokens: Some(100) },
    )
    .unwrap_err();
    assert_eq!(error.needed, 520);
    assert_eq!(error.budget, 100);
}

#[test]
fn trimming_keeps_head_and_tail_and_pages_the_rest() {
    let full: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    let cut = trim::excerpt(&full, "call_7", 100);
    assert!(cut.starts_with("[This output was trimmed:"));
    assert!(cut.contains("ref \"call_7\""));
    assert!(cut.contains("line 0\n") && cut.contains("line 2999"));
    assert!(cut.len() < 600);
    let page = trim::page(&full, 100, 50);
    assert!(page.starts_with(&format!("[bytes 100-150 of {}.", full.len())));
    assert!(page.ends_with(&full[100..150]));
    let end = trim::page(&full, full.len() - 10, 1000);
    assert!(end.contains("This is the end."));
    // Never inside a UTF-8 character.
    let accents = "é".repeat(100);
    assert!(trim::page(&accents, 1, 3).contains('é'));
    let _ = trim::excerpt(&accents, "r", 7);
    let config = TrimConfig {
        per_tool: [("big".to_string(), 10)].into(),
        max_tokens: Some(1000),
        ..TrimConfig::default()
    };
    assert_eq!(config.limit_for("big"), Some(10));
    assert_eq!(config.limit_for("other"), Some(4000));
}

#[test]
fn counters_and_windows_by_model() {
    assert_eq!(openai_encoding("gpt-4o-mini"), Some("o200k_base"));
    assert_eq!(openai_encoding("openai/gpt-4.1"), Some("o200k_base"));
    assert_eq!(openai_encoding("gpt-4-0613"), Some("cl100k_base"));
    assert_eq!(openai_encoding("claude-sonnet-4"), None);
    assert_eq!(context_window_for("gpt-4o-2024-08-06"), Some(128_000));
    assert_eq!(context_window_for("gpt-4-0613"), Some(8_192));
    assert_eq!(context_window_for("claude-3-5-haiku"), Some(200_000));
    assert_eq!(context_window_for("unknown-model"), None);
    let exact = TiktokenCounter::o200k().unwrap();
    assert_eq!(exact.count_text("hello world"), 2);
    let estimate = EstimateCounter::default();
    assert_eq!(estimate.count_text("12345678"), 2);
    assert!(estimate.count_message(&Message::user("12345678")) > 2, "with per-message overhead");
    let config = ContextConfig { context_window: Some(10_000), ..ContextConfig::default() };
    assert_eq!(config.input_budget(None), Some(10_000 - 4096 - 512));
    assert_eq!(config.input_budget(Some(1000)), Some(10_000 - 1000 - 512));
}

mod window_properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Segment {
        User,
        Text,
        Calls(usize),
    }

    fn segment() -> impl Strategy<Value = Segment> {
        prop_oneof![1 => Just(Segment::User), 1 => Just(Segment::Text), 3 => (1usize..4).prop_map(Segment::Calls)]
    }

    /// A valid history: optional system messages, then segments; optionally a pending call
    /// at the end.
    fn build(systems: usize, segments: &[Segment], pending: bool) -> Vec<Message> {
        let mut out: Vec<Message> =
            (0..systems).map(|i| Message::system(format!("s{i}"))).collect();
        out.push(Message::user("task"));
        let mut n = 0;
        for segment in segments {
            match segment {
                Segment::User => out.push(Message::user("more")),
                Segment::Text => out.push(Message::assistant("thinking")),
                Segment::Calls(k) => {
                    let ids: Vec<String> = (0..*k)
                        .map(|_| {
                            n += 1;
                            format!("c{n}")
                        })
                        .collect();
                    out.push(Message {
                        role: Role::Assistant,
                        content: ids
                            .iter()
                            .map(|id| {
                                Part::ToolCall(ToolCall {
                                    id: id.clone(),
                                    name: "t".into(),
                                    arguments: "{}".into(),
                                })
                            })
                            .collect(),
                    });
                    out.push(Message::tool_results(ids.iter().map(|id| ToolResult::ok(id, "r"))));
                }
            }
        }
        if pending {
            out.push(call("pending"));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn windows_are_valid_and_within_limits(
            systems in 0usize..3,
            segments in prop::collection::vec(segment(), 0..40),
            pending in any::<bool>(),
            count_seed in prop::collection::vec(1usize..200, 200),
            max_messages in prop::option::of(1usize..30),
            max_tokens in prop::option::of(20usize..3000),
        ) {
            let messages = build(systems, &segments, pending);
            let counts: Vec<usize> = (0..messages.len()).map(|i| count_seed[i % count_seed.len()]).collect();
            let mut pinned: Vec<usize> = (0..systems).collect();
            pinned.push(systems);
            let policy = WindowPolicy { max_messages, max_tokens };
            let required = current_interaction(&messages, 0);
            let pinned_required: usize = pinned.iter().filter(|&&i| i < required).map(|&i| counts[i]).sum();
            let required_tokens: usize = counts[required..].iter().sum::<usize>() + pinned_required;
            match plan_window(&messages, &counts, &pinned, 0, (0, 0), policy) {
                Err(error) => {
                    prop_assert!(max_tokens.is_some_and(|max| required_tokens > max));
                    prop_assert_eq!(error.needed, required_tokens);
                }
                Ok(plan) => {
                    let view: Vec<&Message> = plan.pinned.iter().map(|&i| &messages[i]).chain(&messages[plan.start..]).collect();
                    let owned: Vec<Message> = view.iter().map(|m| (*m).clone()).collect();
                    // Valid for every provider: no orphan result, every call answered but the last.
                    let tail_start = plan.pinned.len();
                    prop_assert!(is_tool_boundary_safe(&owned[tail_start..], 0));
                    prop_assert!(owned[..tail_start].iter().all(|m| m.tool_results_iter().next().is_none()));
                    // System messages and the task are kept.
                    prop_assert_eq!(owned.iter().filter(|m| m.role == Role::System).count(), systems);
                    prop_assert!(owned.iter().any(|m| m.text() == "task"));
                    // The current interaction is always sent.
                    prop_assert!(plan.start <= required);
                    // Within limits (the required part alone may exceed a message limit).
                    let tokens: usize = plan.pinned.iter().map(|&i| counts[i]).sum::<usize>() + counts[plan.start..].iter().sum::<usize>();
                    prop_assert_eq!(plan.tokens, tokens);
                    if let Some(max) = max_tokens {
                        prop_assert!(tokens <= max);
                    }
                    if let Some(max) = max_messages {
                        let floor_len = pinned.iter().filter(|&&i| i < required).count() + messages.len() - required;
                        prop_assert!(owned.len() <= max.max(floor_len), "{} > {}", owned.len(), max);
                    }
                }
            }
        }
    }
}

#[test]
fn the_incremental_boundary_scan_agrees_with_the_full_scan() {
    use super::window::BoundaryScan;
    let mut open_call = history(2);
    open_call.push(call("open"));
    open_call.push(Message::user("between"));
    open_call.push(result("open"));
    open_call.push(call("x"));
    let mut orphan = history(1);
    orphan.push(result("nobody"));
    orphan.extend(history(1));
    let two_calls = Message {
        role: Role::Assistant,
        content: vec![
            Part::ToolCall(ToolCall { id: "p".into(), name: "t".into(), arguments: "{}".into() }),
            Part::ToolCall(ToolCall { id: "q".into(), name: "t".into(), arguments: "{}".into() }),
        ],
    };
    let parallel = vec![
        Message::user("go"),
        two_calls,
        Message::tool_results([ToolResult::ok("q", "1"), ToolResult::ok("p", "2")]),
        Message::assistant("done"),
    ];
    for messages in [history(4), open_call, orphan, parallel] {
        for start in 0..=messages.len() + 1 {
            // Grown one message at a time, and all at once.
            let mut scan = BoundaryScan::new(start);
            for len in 0..=messages.len() {
                let prefix = &messages[..len];
                assert_eq!(
                    scan.is_safe(prefix),
                    is_tool_boundary_safe(prefix, start),
                    "start {start}, length {len}: {messages:?}"
                );
            }
            let mut fresh = BoundaryScan::new(start);
            assert_eq!(fresh.is_safe(&messages), is_tool_boundary_safe(&messages, start));
            // A shorter history starts the scan over.
            assert_eq!(fresh.is_safe(&messages[..1]), is_tool_boundary_safe(&messages[..1], start));
        }
    }
}
