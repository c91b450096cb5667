#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::{preset_named, scripted};
use agentloop::provider::scripted::ScriptedModel;

#[test]
fn every_preset_the_config_accepts_is_one_the_cli_can_build() {
    // `config::PRESETS` (checked when the file is read) and `preset_named` (used to build
    // the provider) are two lists: they must name the same presets.
    let section = crate::config::ProviderSection {
        base_url: Some("https://example-resource.openai.azure.com".into()),
        ..crate::config::ProviderSection::default()
    };
    for name in crate::config::PRESETS {
        assert!(preset_named(name, &section).is_ok(), "{name}");
    }
    assert!(preset_named("not-a-preset", &section).is_err());
    // Azure without an endpoint names what it needs (unless the environment has one).
    if std::env::var_os("AZURE_OPENAI_ENDPOINT").is_none() {
        let error = preset_named("azure", &crate::config::ProviderSection::default()).unwrap_err();
        assert!(error.to_string().contains("AZURE_OPENAI_ENDPOINT"), "{error}");
    }
}

/// A script object with `follow_history` plays the turn of the conversation's position:
/// twice the same request, twice the same turn; an array plays its turns in order.
#[tokio::test]
async fn a_script_that_follows_the_history_plays_by_position() {
    use agentloop::message::Message;
    use agentloop::provider::{ModelRequest, Provider, StreamChunk};
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let text_of = |model: &ScriptedModel, messages: Vec<Message>| {
        let request = ModelRequest::new(messages);
        let stream = model.stream(request);
        async move {
            let chunks: Vec<_> = stream.collect().await;
            chunks
                .into_iter()
                .filter_map(|c| match c {
                    Ok(StreamChunk::TextDelta { text }) => Some(text),
                    _ => None,
                })
                .collect::<String>()
        }
    };
    let path = dir.path().join("script.json");
    let turns = r#"[{"text": "first"}, {"text": "second"}]"#;
    std::fs::write(&path, format!(r#"{{"follow_history": true, "turns": {turns}}}"#)).unwrap();
    let model = scripted(&path).unwrap();
    let asked = vec![Message::user("hi")];
    assert_eq!(text_of(&model, asked.clone()).await, "first");
    assert_eq!(text_of(&model, asked.clone()).await, "first");
    let answered = vec![Message::user("hi"), Message::assistant("first"), Message::user("more")];
    assert_eq!(text_of(&model, answered).await, "first", "counted since the last user message");
    let went_on = vec![Message::user("hi"), Message::assistant("first")];
    assert_eq!(text_of(&model, went_on).await, "second");

    std::fs::write(&path, turns).unwrap();
    let model = scripted(&path).unwrap();
    assert_eq!(text_of(&model, asked.clone()).await, "first");
    assert_eq!(text_of(&model, asked).await, "second");

    std::fs::write(&path, r#"{"turns": [], "follow": true}"#).unwrap();
    let error = scripted(&path).unwrap_err().to_string();
    assert!(error.contains("script.json:1") && error.contains("unknown field"), "{error}");
}
