use super::*;

#[test]
fn page_tokens_round_trip_and_garbage_is_refused() {
    let cursor = RunCursor { created_ms: 1_700_000_000_000, run_id: "run_abc".into() };
    assert_eq!(parse_page_token(&page_token(&cursor)).unwrap(), cursor);
    for bad in ["", "nodot", "x.run", "12.", &format!("1.{}", "a".repeat(200))] {
        let error = parse_page_token(bad).unwrap_err();
        assert_eq!(error.code, a2a::error_code::INVALID_PARAMS, "{bad}");
    }
}

#[test]
fn names_must_be_path_segments() {
    assert!(valid_name("echo"));
    assert!(valid_name("research-agent_2"));
    for bad in ["", "Echo", "a/b", "a b", "..", &"x".repeat(65)] {
        assert!(!valid_name(bad), "{bad}");
    }
}

#[test]
fn decisions_come_from_data_or_a_plain_word() {
    let waiting = vec!["c1".to_owned(), "c2".to_owned()];
    let data = |v: Value| a2a::Message::new(a2a::Role::User, vec![a2a::Part::data(v)]);
    let all = parse_decisions(&data(serde_json::json!({"decision": "approve"})), &waiting).unwrap();
    assert_eq!(all, vec![("c1".into(), Decision::Approve), ("c2".into(), Decision::Approve)]);
    let one = parse_decisions(
        &data(serde_json::json!({"decision": "reject", "callId": "c2", "reason": "no"})),
        &waiting,
    )
    .unwrap();
    assert_eq!(one, vec![("c2".into(), Decision::Reject { reason: "no".into() })]);
    let word = a2a::Message::new(a2a::Role::User, vec![a2a::Part::text("Yes.")]);
    assert_eq!(parse_decisions(&word, &waiting).unwrap().len(), 2);
    let unknown = data(serde_json::json!({"decision": "approve", "callId": "c9"}));
    assert_eq!(
        parse_decisions(&unknown, &waiting).unwrap_err().code,
        a2a::error_code::INVALID_PARAMS
    );
    let chatter = a2a::Message::new(a2a::Role::User, vec![a2a::Part::text("maybe later")]);
    assert_eq!(
        parse_decisions(&chatter, &waiting).unwrap_err().code,
        a2a::error_code::INVALID_PARAMS
    );
}

#[test]
fn who_decided_comes_from_a_data_part_or_is_the_channel() {
    let data = |v: Value| a2a::Message::new(a2a::Role::User, vec![a2a::Part::data(v)]);
    let named = data(serde_json::json!({"decision": "approve", "by": " ops:\u{1b}[2Jbob\n "}));
    assert_eq!(decided_by(&named), "ops:[2Jbob", "control characters dropped, trimmed");
    assert_eq!(decided_by(&data(serde_json::json!({"decision": "approve"}))), "a2a");
    assert_eq!(decided_by(&data(serde_json::json!({"by": "  "}))), "a2a");
    assert_eq!(decider_name(&"x".repeat(150)).chars().count(), 100);
}
