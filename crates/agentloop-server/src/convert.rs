//! Messages between A2A and agentloop: an incoming A2A message becomes the run's user
//! message (text as text, a data part as its JSON text, a file or image by URL or inline
//! bytes), checked against the agent's input modes and the part size limit; a run's messages
//! become the task's history (user and agent text, files and images; tool calls and results
//! stay inside the run).

use a2a::{Part as A2aPart, PartContent, Role as A2aRole};
use agentloop::message::{MediaSource, Message, Part, Role};
use agentloop::run::OutputSpec;
use base64::Engine;
use serde_json::Value;

/// Why an incoming message was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConvertError {
    /// The message has no parts, or a part is empty or not from the user.
    #[error("{0}")]
    Invalid(String),
    /// A part's media type is not one the agent accepts.
    #[error("media type '{0}' is not accepted by this agent")]
    ContentType(String),
    /// A part is larger than the limit.
    #[error("part {index} is {size} bytes, over the limit of {limit}")]
    TooLarge {
        /// The part's index.
        index: usize,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

/// What an agent accepts.
#[derive(Debug, Clone)]
pub struct InputPolicy {
    /// Media types accepted for file and data parts (`text/plain` is always accepted for
    /// text; `application/json` for data parts when listed). A type ending in `/*` accepts
    /// the whole family.
    pub input_modes: Vec<String>,
    /// The largest part, in bytes (text length, JSON length, or decoded file size).
    pub max_part_bytes: usize,
}

impl Default for InputPolicy {
    fn default() -> Self {
        Self {
            input_modes: vec!["text/plain".into(), "application/json".into()],
            max_part_bytes: 512 * 1024,
        }
    }
}

impl InputPolicy {
    fn accepts(&self, media_type: &str) -> bool {
        let media_type = media_type.split(';').next().unwrap_or_default().trim();
        self.input_modes.iter().any(|mode| {
            mode.eq_ignore_ascii_case(media_type)
                || mode.strip_suffix("/*").is_some_and(|family| {
                    media_type.split('/').next().is_some_and(|f| f.eq_ignore_ascii_case(family))
                })
        })
    }
}

/// The user message of an incoming A2A message.
pub fn to_user_message(
    message: &a2a::Message,
    policy: &InputPolicy,
) -> Result<Message, ConvertError> {
    if message.role != A2aRole::User {
        return Err(ConvertError::Invalid("the message's role must be ROLE_USER".into()));
    }
    if message.parts.is_empty() {
        return Err(ConvertError::Invalid("the message has no parts".into()));
    }
    let mut content = Vec::with_capacity(message.parts.len());
    for (index, part) in message.parts.iter().enumerate() {
        content.push(to_part(index, part, policy)?);
    }
    Ok(Message { role: Role::User, content })
}

fn to_part(index: usize, part: &A2aPart, policy: &InputPolicy) -> Result<Part, ConvertError> {
    let limit = |size: usize| {
        if size > policy.max_part_bytes {
            Err(ConvertError::TooLarge { index, size, limit: policy.max_part_bytes })
        } else {
            Ok(())
        }
    };
    let media_type = part.media_type.as_deref();
    match &part.content {
        PartContent::Text(text) => {
            limit(text.len())?;
            if let Some(media_type) = media_type.filter(|m| !m.starts_with("text/")) {
                return Err(ConvertError::ContentType(media_type.to_owned()));
            }
            Ok(Part::text(text.clone()))
        }
        PartContent::Data(value) => {
            let media_type = media_type.unwrap_or("application/json");
            if !policy.accepts(media_type) {
                return Err(ConvertError::ContentType(media_type.to_owned()));
            }
            let text = serde_json::to_string(value).unwrap_or_default();
            limit(text.len())?;
            Ok(Part::text(text))
        }
        PartContent::Url(url) => {
            let media_type = media_type.ok_or_else(|| {
                ConvertError::Invalid(format!("part {index}: a URL part needs a mediaType"))
            })?;
            if !policy.accepts(media_type) {
                return Err(ConvertError::ContentType(media_type.to_owned()));
            }
            limit(url.len())?;
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(ConvertError::Invalid(format!("part {index}: not an http(s) URL")));
            }
            let source = MediaSource::Url { url: url.clone() };
            Ok(media_part(media_type, source, part.filename.clone()))
        }
        PartContent::Raw(bytes) => {
            let media_type = media_type.ok_or_else(|| {
                ConvertError::Invalid(format!("part {index}: a raw part needs a mediaType"))
            })?;
            if !policy.accepts(media_type) {
                return Err(ConvertError::ContentType(media_type.to_owned()));
            }
            limit(bytes.len())?;
            let data = base64::engine::general_purpose::STANDARD.encode(bytes);
            let source = MediaSource::Base64 { media_type: media_type.to_owned(), data };
            Ok(media_part(media_type, source, part.filename.clone()))
        }
    }
}

fn media_part(media_type: &str, source: MediaSource, filename: Option<String>) -> Part {
    if media_type.starts_with("image/") {
        Part::Image { source }
    } else {
        Part::File { source, filename }
    }
}

/// The extension by which a client chooses the typed answer of the task its message starts
/// (declared on every agent card): the message's metadata
/// `{"agentloop": {"output": {"schema": …, "name": …, "description": …, "maxRetries": …}}}`
/// (`schema` required, a JSON Schema; the rest optional). The task then ends with a data part
/// holding the validated answer, as if the served agent had that output schema.
pub const OUTPUT_EXTENSION: &str = "urn:agentloop:a2a:output-schema:v1";

/// The largest output schema a message may carry, in bytes of JSON.
pub const MAX_OUTPUT_SCHEMA_BYTES: usize = 64 * 1024;

/// The output a message asks for ([`OUTPUT_EXTENSION`]), if it asks for one.
pub fn requested_output(message: &a2a::Message) -> Result<Option<OutputSpec>, ConvertError> {
    let Some(request) = message
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.get("agentloop"))
        .and_then(|ours| ours.get("output"))
    else {
        return Ok(None);
    };
    let invalid = |why: String| ConvertError::Invalid(format!("metadata agentloop.output: {why}"));
    let Some(request) = request.as_object() else {
        return Err(invalid("not an object".into()));
    };
    let schema = request.get("schema").ok_or_else(|| invalid("no schema".into()))?;
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(invalid("the schema is not a JSON Schema (an object)".into()));
    }
    let size = serde_json::to_string(schema).map(|text| text.len()).unwrap_or(usize::MAX);
    if size > MAX_OUTPUT_SCHEMA_BYTES {
        return Err(invalid(format!(
            "the schema is {size} bytes, over the limit of {MAX_OUTPUT_SCHEMA_BYTES}"
        )));
    }
    let text = |field: &str| -> Result<Option<&str>, ConvertError> {
        match request.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if text.len() <= 4096 => Ok(Some(text)),
            Some(_) => Err(invalid(format!("{field} is not a string of at most 4096 bytes"))),
        }
    };
    let mut spec = OutputSpec::new(text("name")?.unwrap_or("answer"), schema.clone());
    if let Some(description) = text("description")? {
        spec = spec.with_description(description);
    }
    match request.get("maxRetries") {
        None | Some(Value::Null) => {}
        Some(retries) => {
            let retries = retries
                .as_u64()
                .filter(|&n| n <= 10)
                .ok_or_else(|| invalid("maxRetries is not a whole number from 0 to 10".into()))?;
            spec = spec.with_max_retries(retries as u32);
        }
    }
    spec.check_schema().map_err(|error| invalid(format!("the schema is not valid: {error}")))?;
    Ok(Some(spec))
}

/// The A2A message of one of a run's messages (`None` for what a client does not see:
/// system and tool messages, and assistant messages without text, files or images).
pub fn to_a2a_message(
    message: &Message,
    message_id: String,
    task_id: &str,
    context_id: &str,
) -> Option<a2a::Message> {
    let role = match message.role {
        Role::User => A2aRole::User,
        Role::Assistant => A2aRole::Agent,
        _ => return None,
    };
    let parts: Vec<A2aPart> = message.content.iter().filter_map(to_a2a_part).collect();
    if parts.is_empty() {
        return None;
    }
    Some(a2a::Message {
        message_id,
        context_id: Some(context_id.to_owned()),
        task_id: Some(task_id.to_owned()),
        role,
        parts,
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    })
}

fn to_a2a_part(part: &Part) -> Option<A2aPart> {
    let (source, filename) = match part {
        Part::Text { text } if !text.is_empty() => return Some(A2aPart::text(text.clone())),
        Part::Image { source } => (source, None),
        Part::File { source, filename } => (source, filename.clone()),
        _ => return None,
    };
    let part = match source {
        MediaSource::Url { url } => A2aPart::url(url.clone()),
        MediaSource::Base64 { media_type, data } => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(data).ok()?;
            A2aPart::raw(bytes).with_media_type(media_type.clone())
        }
    };
    Some(match filename {
        Some(name) => part.with_filename(name),
        None => part,
    })
}

/// An agent message of plain text.
pub fn agent_text(
    text: impl Into<String>,
    message_id: String,
    task_id: &str,
    context_id: &str,
) -> a2a::Message {
    a2a::Message {
        message_id,
        context_id: Some(context_id.to_owned()),
        task_id: Some(task_id.to_owned()),
        role: A2aRole::Agent,
        parts: vec![A2aPart::text(text)],
        metadata: None,
        extensions: None,
        reference_task_ids: None,
    }
}

#[cfg(test)]
mod tests;
