use super::*;
use agentloop::message::ToolResult;

fn said(messages: &[Message]) -> String {
    described(decide(messages, &[]))
}

fn described(reply: Reply) -> String {
    match reply {
        Reply::Text { chunks, .. } => chunks.concat(),
        Reply::Call { name, arguments, .. } => format!("call {name} {arguments}"),
        Reply::Fail(message) => format!("fail {message}"),
    }
}

#[test]
fn the_first_word_decides() {
    assert_eq!(said(&[Message::user("hello world")]), "hello world");
    assert_eq!(said(&[Message::user("stream 3")]), "chunk 1 chunk 2 chunk 3");
    assert_eq!(said(&[Message::user("calc 2 + 2")]), r#"call calculator {"expression":"2 + 2"}"#);
    assert_eq!(said(&[Message::user("ask Why?")]), r#"call ask_user {"question":"Why?"}"#);
    assert!(said(&[Message::user("fail")]).starts_with("fail "));
}

#[test]
fn a_tool_result_is_answered_and_an_answer_is_thanked() {
    let call = ToolCall { id: "c1".into(), name: "calculator".into(), arguments: "{}".into() };
    let mut assistant = Message::assistant("");
    assistant.content = vec![agentloop::message::Part::ToolCall(call)];
    let messages = [
        Message::user("calc 2 + 2"),
        assistant,
        Message::tool_results([ToolResult::ok("c1", "4")]),
    ];
    assert_eq!(said(&messages), "The result is 4.");

    let ask = ToolCall { id: "c2".into(), name: "ask_user".into(), arguments: "{}".into() };
    let mut asked = Message::assistant("");
    asked.content = vec![agentloop::message::Part::ToolCall(ask)];
    let messages = [
        Message::user("ask Colour?"),
        asked,
        Message::tool_results([ToolResult::ok("c2", "Colour?")]),
        Message::user("blue"),
    ];
    assert_eq!(said(&messages), "Thank you. You answered: blue");
}

#[test]
fn with_the_answer_tool_the_message_is_the_answer() {
    let answer = |text: &str| described(decide(&[Message::user(text)], &[OUTPUT_TOOL]));
    assert_eq!(answer(r#"{"city": "Lyon"}"#), r#"call final_answer {"city":"Lyon"}"#);
    assert_eq!(answer("Lyon"), r#"call final_answer {"response":"Lyon"}"#);
    // The commands still work.
    assert_eq!(answer("calc 1 + 1"), r#"call calculator {"expression":"1 + 1"}"#);
}

#[test]
fn steps_calls_the_calculator_n_times_then_answers() {
    let step = |id: &str, result: &str| {
        let call = ToolCall { id: id.into(), name: "calculator".into(), arguments: "{}".into() };
        let mut assistant = Message::assistant("");
        assistant.content = vec![agentloop::message::Part::ToolCall(call)];
        [assistant, Message::tool_results([ToolResult::ok(id, result)])]
    };
    let mut messages = vec![Message::user("steps 2 0")];
    assert_eq!(described(decide(&messages, &[])), r#"call calculator {"expression":"0 + 1"}"#);
    messages.extend(step("c1", "1"));
    assert_eq!(described(decide(&messages, &[])), r#"call calculator {"expression":"1 + 1"}"#);
    messages.extend(step("c2", "2"));
    assert_eq!(said(&messages), "Done: 2 steps, the last said 2.");
}

#[test]
fn remote_asks_an_offered_remote_agent() {
    let ask = |text: &str, tools: &[&str]| described(decide(&[Message::user(text)], tools));
    assert_eq!(
        ask("remote weather rain in Oslo?", &["weather"]),
        r#"call weather {"message":"rain in Oslo?"}"#
    );
    assert!(ask("remote weather rain?", &[]).starts_with("No remote agent 'weather'"));
    assert!(ask("remote weather", &["weather"]).starts_with("No remote agent"));
}
