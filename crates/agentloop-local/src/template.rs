//! The chat template: the model's own Jinja template (`tokenizer.chat_template`), rendered with
//! MiniJinja the way Hugging Face's `apply_chat_template` does (trim and lstrip blocks,
//! `raise_exception`, Python-style `tojson`, Python string methods), with `messages`,
//! `add_generation_prompt`, `bos_token`, `eos_token` and, when given, `tools`.

use crate::LocalError;
use agentloop::message::{Part, Role};
use agentloop::provider::ModelRequest;
use minijinja::value::{Kwargs, Serde};
use minijinja::{Environment, Error, ErrorKind, Value};
use serde::Serialize;

const TEMPLATE_NAME: &str = "chat";

/// One message as chat templates see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate").field("bos", &self.bos).field("eos", &self.eos).finish()
    }
}

impl ChatTemplate {
    /// Compiles a template; `bos` and `eos` are the texts of the model's BOS and EOS tokens.
    pub fn new(
        source: impl Into<String>,
        bos: impl Into<String>,
        eos: impl Into<String>,
    ) -> Result<Self, LocalError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| LocalError::Template(e.to_string()))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, source.into())
            .map_err(|e| LocalError::Template(describe(&e)))?;
        Ok(Self { env, bos: bos.into(), eos: eos.into() })
    }

    /// Renders a conversation. `tools` are the tool definitions (OpenAI function format) for
    /// templates that lay them out themselves.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&[serde_json::Value]>,
        add_generation_prompt: bool,
    ) -> Result<String, LocalError> {
        let template =
            self.env.get_template(TEMPLATE_NAME).map_err(|e| LocalError::Template(describe(&e)))?;
        let context = minijinja::context! {
            messages => Value::from(Serde(messages)),
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos.as_str(),
            eos_token => self.eos.as_str(),
            tools => tools.map(|tools| Value::from(Serde(tools))),
        };
        template.render(context).map_err(|e| LocalError::Template(describe(&e)))
    }
}

/// A MiniJinja error with its cause chain and location.
fn describe(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// `raise_exception(message)`: templates call it to reject a conversation.
fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// `tojson` as Python's `json.dumps(ensure_ascii=False)`: `", "` and `": "` separators (`","`
/// with `indent`), optional `sort_keys`, no HTML escaping.
fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let json = serde_json::to_value(&value)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let mut out = String::new();
    python_json(&json, indent, sort_keys.unwrap_or(false), 0, &mut out);
    Ok(Value::from_safe_string(out))
}

/// Writes `value` the way Python's `json.dumps` does.
pub(crate) fn python_json(
    value: &serde_json::Value,
    indent: Option<usize>,
    sort_keys: bool,
    depth: usize,
    out: &mut String,
) {
    use serde_json::Value as J;
    let newline = |out: &mut String, depth: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(width * depth));
        }
    };
    let separator = if indent.is_some() { "," } else { ", " };
    match value {
        J::Array(items) if !items.is_empty() => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(separator);
                }
                newline(out, depth + 1);
                python_json(item, indent, sort_keys, depth + 1, out);
            }
            newline(out, depth);
            out.push(']');
        }
        J::Object(map) if !map.is_empty() => {
            let mut entries: Vec<_> = map.iter().collect();
            if sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push_str(separator);
                }
                newline(out, depth + 1);
                out.push_str(&J::String(key.clone()).to_string());
                out.push_str(": ");
                python_json(item, indent, sort_keys, depth + 1, out);
            }
            newline(out, depth);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The conversation of a request as chat-template messages: the instructions as a leading
/// `system` message, developer messages as `system`, tool results as `user` messages (a request
/// rewritten by the prompted protocol has none left), text parts joined.
pub fn chat_messages(request: &ModelRequest) -> Result<Vec<ChatMessage>, LocalError> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if let Some(instructions) = request.instructions.as_deref().filter(|s| !s.is_empty()) {
        out.push(ChatMessage::new("system", instructions));
    }
    for message in request.messages.iter() {
        let role = match message.role {
            Role::System | Role::Developer => "system",
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        let mut texts = Vec::new();
        for part in &message.content {
            match part {
                Part::Text { text } => texts.push(text.clone()),
                Part::Reasoning(_) | Part::Opaque(_) | Part::Citation(_) => {}
                Part::ToolCall(call) => {
                    texts.push(format!("{}({})", call.name, call.arguments));
                }
                Part::ToolResult(result) => texts.push(result.content.to_text()),
                Part::Image { .. } | Part::File { .. } => return Err(LocalError::InvalidRequest(
                    "the local model reads text only: the conversation holds an image or a file"
                        .into(),
                )),
            }
        }
        out.push(ChatMessage::new(role, texts.join("\n")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
