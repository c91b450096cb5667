use super::*;
use a2a::{Part as A2aPart, Role as A2aRole};

fn message(parts: Vec<A2aPart>) -> a2a::Message {
    a2a::Message::new(A2aRole::User, parts)
}

#[test]
fn text_and_data_parts_become_the_user_message() {
    let policy = InputPolicy::default();
    let m = message(vec![A2aPart::text("hello"), A2aPart::data(serde_json::json!({"a": 1}))]);
    let user = to_user_message(&m, &policy).unwrap();
    assert_eq!(user.role, Role::User);
    assert_eq!(user.content, vec![Part::text("hello"), Part::text("{\"a\":1}")]);
}

#[test]
fn refuses_agent_role_empty_parts_unaccepted_types_and_oversized_parts() {
    let policy = InputPolicy { max_part_bytes: 8, ..InputPolicy::default() };
    let agent = a2a::Message::new(A2aRole::Agent, vec![A2aPart::text("x")]);
    assert!(matches!(to_user_message(&agent, &policy), Err(ConvertError::Invalid(_))));
    assert!(matches!(to_user_message(&message(vec![]), &policy), Err(ConvertError::Invalid(_))));
    let png = A2aPart::raw(vec![1, 2, 3]).with_media_type("image/png");
    assert_eq!(
        to_user_message(&message(vec![png]), &policy),
        Err(ConvertError::ContentType("image/png".into()))
    );
    let long = A2aPart::text("far more than eight bytes");
    assert!(matches!(
        to_user_message(&message(vec![long]), &policy),
        Err(ConvertError::TooLarge { index: 0, limit: 8, .. })
    ));
}

#[test]
fn accepted_images_keep_their_bytes_both_ways() {
    let policy = InputPolicy { input_modes: vec!["image/*".into()], ..InputPolicy::default() };
    let png = A2aPart::raw(vec![137, 80, 78, 71]).with_media_type("image/png");
    let user = to_user_message(&message(vec![png.clone()]), &policy).unwrap();
    assert!(
        matches!(&user.content[0], Part::Image { source: MediaSource::Base64 { media_type, .. } } if media_type == "image/png")
    );
    let back = to_a2a_message(&user, "m".into(), "t", "c").unwrap();
    assert_eq!(back.parts, vec![png]);
    assert_eq!(back.role, A2aRole::User);
}

#[test]
fn tool_messages_and_empty_assistant_turns_are_not_history() {
    let tool = Message::tool_results([agentloop::message::ToolResult::ok("c1", "4")]);
    assert!(to_a2a_message(&tool, "m".into(), "t", "c").is_none());
    let empty = Message { role: Role::Assistant, content: vec![] };
    assert!(to_a2a_message(&empty, "m".into(), "t", "c").is_none());
    let answer = to_a2a_message(&Message::assistant("4"), "m".into(), "t", "c").unwrap();
    assert_eq!(answer.role, A2aRole::Agent);
    assert_eq!(answer.text(), Some("4"));
}
