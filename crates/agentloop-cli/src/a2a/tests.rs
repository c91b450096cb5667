use super::*;
use agentloop_a2a::a2a::{AgentCapabilities, AgentInterface, AgentSkill};

#[test]
fn remote_text_is_escaped_for_the_terminal() {
    assert_eq!(escape("a\u{1b}[31mred\nline\ttab"), "a\\u{1b}[31mred\nline\ttab");
    assert_eq!(escape("evil\u{202e}txt"), "evil\\u{202e}txt");
    assert_eq!(escape("plain é ✓"), "plain é ✓");
}

#[test]
fn json_output_keeps_its_meaning_and_loses_unsafe_characters() {
    let value = serde_json::json!({"name": "x\u{202e}y\u{1b}z", "n": 1});
    let text = json_safe(&serde_json::to_string_pretty(&value).unwrap());
    assert!(!text.chars().any(|c| c == '\u{202e}' || c == '\u{1b}'), "{text}");
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back, value);
}

#[test]
fn the_card_shows_every_part_escaped() {
    let card = AgentCard {
        name: "Bad\u{1b}]0;title\u{7}".into(),
        description: "Does things.".into(),
        version: "1.2.3".into(),
        supported_interfaces: vec![AgentInterface::new("http://h/a", "JSONRPC")],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: None,
            extensions: None,
            extended_agent_card: None,
        },
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![AgentSkill {
            id: "s1".into(),
            name: "Skill".into(),
            description: "One skill.".into(),
            tags: vec!["t1".into(), "t2".into()],
            examples: Some(vec!["do it".into()]),
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: None,
        security_requirements: None,
        signatures: None,
    };
    let text = card_text(&card);
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text}");
    assert!(text.starts_with("name: Bad\\u{1b}]0;title\\u{7}\n"), "{text}");
    assert!(text.contains("version: 1.2.3\n"), "{text}");
    let interface = &card.supported_interfaces[0];
    let version = if interface.protocol_version.is_empty() {
        String::new()
    } else {
        format!(" {}", interface.protocol_version)
    };
    assert!(text.contains(&format!("interfaces:\n  JSONRPC{version}  http://h/a\n")), "{text}");
    assert!(
        text.contains("capabilities: streaming yes, push notifications no, extended card no\n"),
        "{text}"
    );
    assert!(
        text.contains("  - Skill (s1): One skill.\n    tags: t1, t2\n    e.g. do it\n"),
        "{text}"
    );
}

#[test]
fn a_replacing_chunk_prints_only_what_it_adds() {
    let mut view = TaskView::new(false, false, "http://h".into());
    assert_eq!(view.artifact_delta("a", "chunk 1 ".into(), false), "chunk 1 ");
    assert_eq!(view.artifact_delta("a", "chunk 2".into(), true), "chunk 2");
    assert_eq!(view.artifact_delta("a", "chunk 1 chunk 2".into(), false), "");
    assert_eq!(view.artifact_delta("a", "chunk 1 chunk 2.".into(), false), ".");
    // Different text replaces it: shown whole, on its own line (the view is mid-line only
    // once it printed; here nothing was printed, so no newline).
    assert_eq!(view.artifact_delta("a", "other".into(), false), "other");
    view.at_line_start = false;
    assert_eq!(view.artifact_delta("a", "again".into(), false), "\nagain");
}
