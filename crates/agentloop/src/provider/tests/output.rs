//! Structured output on the wire: each API's native form of [`ModelRequest::output`], and
//! which providers offer it.

use super::*;
use crate::message::Message;
use crate::tool::ToolSpec;
use openai::{Compat, Dialect, OpenAiChat};
use openai_responses::OpenAiResponses;
use wire::WireFormat;

/// All properties required: strict mode is possible.
fn strict_output() -> OutputFormat {
    OutputFormat {
        name: "place".into(),
        description: Some("A place.".into()),
        schema: json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"city": {"type": "string"}, "population": {"type": ["integer", "null"]}},
            "required": ["city", "population"],
        }),
    }
}

/// A map of any keys: strict mode cannot express it.
fn open_map_output() -> OutputFormat {
    OutputFormat {
        name: "counts".into(),
        description: None,
        schema: json!({
            "type": "object",
            "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
            "required": ["counts"],
        }),
    }
}

/// An optional property.
fn loose_output() -> OutputFormat {
    OutputFormat {
        name: "place".into(),
        description: None,
        schema: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
            "required": ["city"],
        }),
    }
}

fn request(output: OutputFormat) -> ModelRequest {
    ModelRequest::new(vec![Message::user("Where?")]).with_output(output)
}

fn with_tool(request: ModelRequest) -> ModelRequest {
    request.with_tools(vec![ToolSpec {
        name: "search".into(),
        description: "Searches.".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }])
}

#[test]
fn openai_chat_sends_a_json_schema_response_format_strict_when_it_can_be() {
    let chat = OpenAiChat::new("gpt-4.1", Dialect::openai());
    let body = chat.encode(&request(strict_output()), false).unwrap().body;
    let closed = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": ["integer", "null"]}},
        "required": ["city", "population"],
        "additionalProperties": false,
    });
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "place", "description": "A place.", "schema": closed, "strict": true,
        }})
    );
    // An optional property: required and nullable, still strict.
    let body = chat.encode(&request(loose_output()), false).unwrap().body;
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "population": {"type": ["integer", "null"]},
            },
            "required": ["city", "population"],
            "additionalProperties": false,
        })
    );
    // A map strict mode cannot express: not strict, the schema as given.
    let body = chat.encode(&request(open_map_output()), false).unwrap().body;
    assert_eq!(body["response_format"]["json_schema"]["strict"], false);
    assert_eq!(body["response_format"]["json_schema"]["schema"], open_map_output().schema);
    // No schema, no response_format.
    let plain = ModelRequest::new(vec![Message::user("Where?")]);
    assert!(chat.encode(&plain, false).unwrap().body.get("response_format").is_none());
}

#[test]
fn a_server_without_json_schema_gets_json_object_and_no_native_output() {
    let deepseek = OpenAiChat::new("deepseek-chat", Compat::deepseek().dialect);
    let body = deepseek.encode(&request(strict_output()), true).unwrap().body;
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert!(!deepseek.native_output(false));
    let llama = OpenAiChat::new("m", Compat::llama_cpp().dialect);
    assert!(llama.native_output(true));
}

#[test]
fn responses_sends_text_format() {
    let responses = OpenAiResponses::new("gpt-5", Dialect::openai());
    let body = responses.encode(&request(strict_output()), true).unwrap().body;
    let format = &body["text"]["format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["name"], "place");
    assert_eq!(format["strict"], true);
    assert_eq!(format["description"], "A place.");
    assert_eq!(format["schema"]["additionalProperties"], false);
    assert!(format["schema"].get("$schema").is_none());
    let body = responses.encode(&request(open_map_output()), true).unwrap().body;
    assert_eq!(body["text"]["format"]["strict"], false);
    assert!(responses.native_output(true));
}

#[test]
fn anthropic_sends_output_config_with_every_object_closed() {
    let anthropic = Anthropic::messages("claude-sonnet-4-5");
    let body = anthropic.encode(&request(loose_output()), true).unwrap().body;
    assert_eq!(
        body["output_config"],
        json!({"format": {"type": "json_schema", "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
            "required": ["city"],
            "additionalProperties": false,
        }}})
    );
    assert!(anthropic.native_output(true));
}

#[test]
fn gemini_sends_a_json_mime_type_and_its_own_schema_form_and_only_without_tools() {
    let gemini = Gemini::new("gemini-2.5-flash");
    let body = gemini.encode(&request(strict_output()), true).unwrap().body;
    let config = &body["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(
        config["responseSchema"],
        json!({
            "type": "OBJECT",
            "properties": {
                "city": {"type": "STRING"},
                "population": {"type": "INTEGER", "nullable": true},
            },
            "required": ["city", "population"],
        })
    );
    assert!(gemini.native_output(false));
    assert!(!gemini.native_output(true), "Gemini 2 refuses responseSchema with functions");
    // With tools the request still carries it if asked (a caller's explicit native mode).
    let body = gemini.encode(&with_tool(request(loose_output())), true).unwrap().body;
    assert_eq!(body["generationConfig"]["responseMimeType"], "application/json");
}
