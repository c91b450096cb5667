//! Pure conversions between MCP and agentloop: tool names, specs, call results and errors.

use super::{MAX_TOOL_NAME_LEN, NAME_SEPARATOR};
use crate::tool::{ToolError, ToolOutput, ToolSpec};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use rmcp::ServiceError;
use serde_json::Value;
use std::collections::HashMap;

/// The longest server name: leaves room for a useful tool name within the 64 characters.
pub(super) const MAX_SERVER_NAME_LEN: usize = 32;

/// Checks a server name: 1 to 32 of `[a-zA-Z0-9_-]`, no `__` (the separator) and no `_` at
/// either end (which would run into the separator).
pub(super) fn check_server_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_SERVER_NAME_LEN {
        return Err(format!("must be 1 to {MAX_SERVER_NAME_LEN} characters long"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err("may only contain ASCII letters, digits, '_' and '-'".into());
    }
    if name.contains(NAME_SEPARATOR) || name.starts_with('_') || name.ends_with('_') {
        return Err(format!(
            "may not contain '{NAME_SEPARATOR}' nor start or end with '_' (the name prefix \
             is `<server>{NAME_SEPARATOR}<tool>`)"
        ));
    }
    Ok(())
}

/// FNV-1a: a short, stable fingerprint (names end up in journals, so they must not change
/// between builds or processes).
fn fingerprint(text: &str) -> String {
    let hash = text
        .bytes()
        .fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193));
    format!("{hash:08x}")
}

/// The name the model sees for a server's tool: `<server>__<tool>`, with every character
/// outside `[a-zA-Z0-9_-]` replaced by `_`. A name longer than 64 characters is cut and ends
/// with `-` and 8 hex digits of the tool's original name, so it stays unique and stable.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let sanitized: String = tool
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    let name = format!("{server}{NAME_SEPARATOR}{sanitized}");
    if name.len() <= MAX_TOOL_NAME_LEN {
        return name;
    }
    with_suffix(&name, &fingerprint(tool))
}

/// `name` cut to fit `-<suffix>` within the limit (names are ASCII here).
fn with_suffix(name: &str, suffix: &str) -> String {
    let keep = MAX_TOOL_NAME_LEN.saturating_sub(suffix.len() + 1).min(name.len());
    format!("{}-{suffix}", &name[..keep])
}

/// A server's tools as the model sees them.
#[derive(Debug, Default)]
pub(super) struct ToolTable {
    /// Exposed name → the server's own name of the tool.
    pub(super) remote: HashMap<String, String>,
    /// In the server's order.
    pub(super) specs: Vec<ToolSpec>,
    /// Exposed names of the tools safe to run again after a crash: annotated
    /// `idempotentHint: true` or `readOnlyHint: true`.
    pub(super) safe_to_retry: std::collections::HashSet<String>,
}

impl ToolTable {
    /// Builds the table of a server's listed tools. Tools whose input schema is not a valid
    /// JSON Schema are left out (with a warning): the model could not call them correctly.
    pub(super) fn new(server: &str, tools: Vec<rmcp::model::Tool>) -> Self {
        let mut table = Self::default();
        for tool in tools {
            let parameters = Value::Object((*tool.input_schema).clone());
            if let Err(error) = jsonschema::validator_for(&parameters) {
                tracing::warn!(server, tool = %tool.name, %error, "MCP tool left out: its input schema is invalid");
                continue;
            }
            let mut name = exposed_name(server, &tool.name);
            if table.remote.contains_key(&name) {
                // Two names that differ only in replaced characters.
                name = with_suffix(&name, &fingerprint(&tool.name));
            }
            if table.remote.contains_key(&name) {
                tracing::warn!(server, tool = %tool.name, "MCP tool left out: its name is listed twice");
                continue;
            }
            let description = tool
                .description
                .map(|d| d.into_owned())
                .or_else(|| tool.title.clone())
                .unwrap_or_default();
            let hints = tool.annotations.as_ref();
            let hint = |hint: Option<bool>| hint == Some(true);
            if hints.is_some_and(|h| hint(h.idempotent_hint) || hint(h.read_only_hint)) {
                table.safe_to_retry.insert(name.clone());
            }
            table.remote.insert(name.clone(), tool.name.into_owned());
            table.specs.push(ToolSpec { name, description, parameters });
        }
        table
    }
}

/// Approximate decoded size of base64 data.
fn decoded_len(base64: &str) -> usize {
    base64.len() / 4 * 3
}

/// One content block as text for the model. Binary content is described, not included.
fn render(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!("[image: {}, {} bytes]", image.mime_type, decoded_len(&image.data))
        }
        ContentBlock::Audio(audio) => {
            format!("[audio: {}, {} bytes]", audio.mime_type, decoded_len(&audio.data))
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => format!(
                "[resource {uri}: {}, {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                decoded_len(blob)
            ),
            other => format!("[resource: {}]", serde_json::to_string(other).unwrap_or_default()),
        },
        ContentBlock::ResourceLink(link) => {
            format!("[resource link: {} <{}>]", link.name, link.uri)
        }
        // Kinds newer than this code: shown as their JSON.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Maps an MCP call result: `isError` becomes [`ToolError::Failed`] with the content's text;
/// otherwise structured content (when present) is the value, else the content as text (blocks
/// joined by newlines; images, audio and blobs described by type and size).
pub fn tool_output(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let text = result.content.iter().map(render).collect::<Vec<_>>().join("\n");
    let structured = result.structured_content.filter(|value| !value.is_null());
    if result.is_error == Some(true) {
        let message = match (text.is_empty(), structured) {
            (false, _) => text,
            (true, Some(value)) => crate::canonical::to_string(&value),
            (true, None) => "the tool reported an error without a message".to_owned(),
        };
        return Err(ToolError::Failed(message));
    }
    Ok(ToolOutput::Value(structured.unwrap_or(Value::String(text))))
}

/// Maps a failed MCP request of a call.
pub(super) fn call_error(server: &str, error: ServiceError) -> ToolError {
    match error {
        ServiceError::McpError(error) => ToolError::Failed(format!(
            "the MCP server '{server}' refused the call: {} (JSON-RPC error {})",
            error.message, error.code.0
        )),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => ToolError::Failed(
            format!("the MCP server '{server}' closed the connection during the call"),
        ),
        ServiceError::Timeout { timeout } => {
            ToolError::Timeout(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
        }
        ServiceError::Cancelled { .. } => ToolError::Cancelled,
        other => ToolError::Failed(format!("the MCP server '{server}' failed the call: {other}")),
    }
}
