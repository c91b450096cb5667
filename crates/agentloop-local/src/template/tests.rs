use super::*;
use agentloop::message::{MediaSource, Message, ToolCall, ToolResult};
use agentloop::provider::{PromptedProtocol, ToolChoice};
use agentloop::tool::ToolSpec;
use serde_json::json;
use std::sync::Arc;

/// SmolLM2-135M-Instruct's `tokenizer.chat_template`.
const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

fn smollm2() -> ChatTemplate {
    ChatTemplate::new(SMOLLM2, "<|im_start|>", "<|im_end|>").unwrap()
}

fn tool_conversation() -> ModelRequest {
    let call = ToolCall {
        id: "call_1".into(),
        name: "calculator".into(),
        arguments: r#"{"expression":"17 * 23"}"#.into(),
    };
    let mut assistant = Message::assistant("");
    assistant.content = vec![Part::ToolCall(call)];
    let result =
        ToolResult { call_id: "call_1".into(), content: json!(391.0).into(), is_error: false };
    ModelRequest::default().with_instructions("You are terse.").with_messages(vec![
            Message::user("What is 17 multiplied by 23?"),
            assistant,
            Message::tool_results([result]),
        ]).with_tools(vec![ToolSpec {
            name: "calculator".into(),
            description: "Evaluate an arithmetic expression.".into(),
            parameters: json!({"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}),
        }]).with_tool_choice(ToolChoice::Auto)
}

#[test]
fn renders_a_tool_conversation_with_the_models_template() {
    let request = PromptedProtocol::default().rewrite(tool_conversation());
    let messages = chat_messages(&request).unwrap();
    let prompt = smollm2().render(&messages, None, true).unwrap();
    let expected = concat!(
        "<|im_start|>system\nYou are terse.\n\n# Tools\n\nYou may call one or more tools to assist with the user query.\n\n",
        "You are provided with tool signatures within <tools></tools> XML tags:\n<tools>\n",
        r#"{"type":"function","function":{"name":"calculator","description":"Evaluate an arithmetic expression.","parameters":{"properties":{"expression":{"type":"string"}},"required":["expression"],"type":"object"}}}"#,
        "\n</tools>\n\nFor each tool call, return a json object with the tool name and arguments within <tool_call></tool_call> XML tags:\n",
        "<tool_call>\n{\"name\": <tool-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n",
        "<|im_start|>user\nWhat is 17 multiplied by 23?<|im_end|>\n",
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\":\"17 * 23\"}}\n</tool_call><|im_end|>\n",
        "<|im_start|>user\n<tool_response>\n391.0\n</tool_response><|im_end|>\n",
        "<|im_start|>assistant\n",
    );
    assert_eq!(prompt, expected);
}

#[test]
fn default_system_prompt_and_no_generation_prompt() {
    let messages = [ChatMessage::new("user", "Hi")];
    let prompt = smollm2().render(&messages, None, false).unwrap();
    assert_eq!(
        prompt,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    );
}

#[test]
fn hugging_face_helpers() {
    let source = "{{ bos_token }}{% for m in messages %}{{ m.role | upper }}:{{ m.content.strip() }}\n{% endfor %}\
        {% if tools %}{% for t in tools %}{{ t | tojson }}|{{ t | tojson(indent=2) }}{% endfor %}{% endif %}\
        {% if messages | length > 5 %}{{ raise_exception('too long') }}{% endif %}{{ eos_token }}";
    let template = ChatTemplate::new(source, "<s>", "</s>").unwrap();
    let tools = [json!({"name": "f", "args": [1, 2.5, "<&>é"], "empty": {}})];
    let out = template.render(&[ChatMessage::new("user", "  hi  ")], Some(&tools), true).unwrap();
    assert_eq!(
        out,
        "<s>USER:hi\n{\"name\": \"f\", \"args\": [1, 2.5, \"<&>é\"], \"empty\": {}}|{\n  \"name\": \"f\",\n  \"args\": [\n    1,\n    2.5,\n    \"<&>é\"\n  ],\n  \"empty\": {}\n}</s>"
    );
    let many = vec![ChatMessage::new("user", "x"); 6];
    let error = template.render(&many, None, true).unwrap_err();
    assert!(error.to_string().contains("too long"), "{error}");
}

#[test]
fn bad_templates_and_requests_are_errors() {
    let error = ChatTemplate::new("{% for %}", "", "").unwrap_err();
    assert!(matches!(error, LocalError::Template(_)), "{error}");
    let mut request = ModelRequest::default();
    let mut message = Message::user("look");
    message.content.push(Part::Image {
        source: MediaSource::Url { url: "https://example.invalid/a.png".into() },
    });
    request.messages = Arc::new(vec![message]);
    let error = chat_messages(&request).unwrap_err();
    assert!(matches!(error, LocalError::InvalidRequest(_)), "{error}");
}
