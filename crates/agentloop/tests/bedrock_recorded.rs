//! The Bedrock Converse wire format on the 77 recorded Bedrock exchanges in
//! `../shared/fixtures/recorded/bedrock-converse/` (VCR cassettes of real traffic; see its
//! ORIGIN.md): every response decodes — whole bodies and the binary event streams of
//! `converse-stream` alike — to what the recording holds, errors are classified, and bad
//! frames are clear errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::message::{FinishReason, Part};
use agentloop::provider::bedrock::{decode_response, EventStreamDecoder};
use agentloop::provider::{
    ModelRequest, ModelResponse, ProviderError, ResponseAssembler, StreamChunk,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/recorded/bedrock-converse")
}

/// One recorded exchange: the request's URI and body, the response's status and body.
struct Exchange {
    file: String,
    uri: String,
    request: Value,
    status: u64,
    /// A whole body (JSON), or the bytes of an event stream.
    body: Body,
}

enum Body {
    Json(Value),
    Stream(Vec<u8>),
    None,
}

/// `!!binary` scalars come back tagged (or as a string): their base64, decoded.
fn binary(value: &serde_yaml::Value) -> Option<Vec<u8>> {
    let text = match value {
        serde_yaml::Value::Tagged(tagged) => tagged.value.as_str()?.to_owned(),
        serde_yaml::Value::String(text) => text.clone(),
        _ => return None,
    };
    let clean: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    decode_base64(&clean)
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        })
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            acc |= value(*c)? << (18 - 6 * i);
        }
        let n = chunk.len().saturating_sub(1);
        out.extend(acc.to_be_bytes()[1..=n].iter());
    }
    Some(out)
}

fn exchanges() -> Vec<Exchange> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("../shared/fixtures/recorded/bedrock-converse")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let yaml: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for interaction in yaml["interactions"].as_sequence().unwrap() {
            let request = &interaction["request"];
            let response = &interaction["response"];
            let body = if let Some(parsed) = response.get("parsed_body") {
                Body::Json(serde_json::to_value(parsed).unwrap())
            } else if let Some(bytes) =
                response.get("body").and_then(|b| b.get("string")).and_then(binary)
            {
                Body::Stream(bytes)
            } else {
                Body::None
            };
            let request_body = request["body"].as_str().and_then(|b| serde_json::from_str(b).ok());
            out.push(Exchange {
                file: file.clone(),
                uri: request["uri"].as_str().unwrap_or_default().to_owned(),
                request: request_body.unwrap_or(Value::Null),
                status: response["status"]["code"].as_u64().unwrap_or(0),
                body,
            });
        }
    }
    out
}

/// Feeds `bytes` in pieces of `step` bytes: the chunks, or the first error.
fn decode_stream(bytes: &[u8], step: usize) -> Result<Vec<StreamChunk>, ProviderError> {
    let mut decoder = EventStreamDecoder::new();
    let mut out = Vec::new();
    for piece in bytes.chunks(step.max(1)) {
        decoder.push(piece, &mut out)?;
    }
    decoder.finish(&mut out)?;
    Ok(out)
}

fn assemble(chunks: Vec<StreamChunk>) -> ModelResponse {
    let mut assembler = ResponseAssembler::default();
    for chunk in chunks {
        assembler.push(chunk).unwrap();
    }
    assembler.finish()
}

#[test]
fn every_recorded_response_decodes() {
    let exchanges = exchanges();
    assert!(exchanges.len() >= 77, "{} exchanges", exchanges.len());
    let (mut whole, mut streamed, mut errors) = (0, 0, 0);
    // The Converse exchanges (the cassettes also hold `count-tokens` calls, not decoded here).
    let converse =
        |e: &&Exchange| e.uri.ends_with("/converse") || e.uri.ends_with("/converse-stream");
    for exchange in exchanges.iter().filter(converse) {
        let label = format!("{} ({})", exchange.file, exchange.uri);
        match &exchange.body {
            Body::Json(body) if exchange.status == 200 => {
                let response = decode_response(body.to_string().as_bytes())
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                let recorded = body["output"]["message"]["content"].as_array().unwrap();
                let texts: String = recorded.iter().filter_map(|b| b["text"].as_str()).collect();
                assert_eq!(response.message.text(), texts, "{label}");
                let calls = recorded.iter().filter(|b| b.get("toolUse").is_some()).count();
                assert_eq!(response.message.tool_calls().count(), calls, "{label}");
                let input = body["usage"]["inputTokens"].as_u64().unwrap_or(0);
                assert!(response.usage.input >= input, "{label}");
                whole += 1;
            }
            Body::Json(body) => {
                // An error response: `message` names what went wrong.
                assert!(
                    body.get("message").or_else(|| body.get("Message")).is_some(),
                    "{label}: {body}"
                );
                errors += 1;
            }
            Body::Stream(bytes) => {
                let chunks =
                    decode_stream(bytes, bytes.len()).unwrap_or_else(|e| panic!("{label}: {e}"));
                // The same in pieces of 7 bytes: frames split anywhere.
                assert_eq!(decode_stream(bytes, 7).unwrap(), chunks, "{label}");
                let response = assemble(chunks);
                assert!(
                    !response.message.content.is_empty()
                        || response.finish_reason != FinishReason::Stop,
                    "{label}: an empty answer"
                );
                streamed += 1;
            }
            Body::None => {}
        }
    }
    assert!(
        whole >= 40 && streamed >= 8 && errors >= 1,
        "{whole} whole, {streamed} streamed, {errors} errors"
    );
}

fn exchange(file: &str) -> Exchange {
    exchanges().into_iter().find(|e| e.file == file).unwrap_or_else(|| panic!("no {file}"))
}

#[test]
fn a_streamed_thinking_turn_keeps_its_reasoning_and_signature() {
    let recorded = exchange("test_bedrock_model_thinking_part_stream.yaml");
    let Body::Stream(bytes) = &recorded.body else { panic!("not a stream") };
    let response = assemble(decode_stream(bytes, 64).unwrap());
    let Some(Part::Reasoning(reasoning)) = response.message.content.first() else {
        panic!("{:?}", response.message.content)
    };
    assert!(reasoning.text.starts_with("The user has greeted me"), "{}", reasoning.text);
    let signature = reasoning.opaque.as_ref().unwrap()["bedrock"]["signature"].as_str().unwrap();
    assert!(signature.starts_with("Eu0CCkgIBxAB"), "{signature}");
    assert_eq!(response.message.text(), "Hello! It's nice to meet you. How can I help you today?");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    assert_eq!((response.usage.input, response.usage.output), (36, 73));
}

#[test]
fn cache_writes_and_reads_are_read_from_the_usage() {
    let recorded = exchange("test_bedrock_cache_write_and_read.yaml");
    let Body::Json(body) = &recorded.body else { panic!() };
    let usage = decode_response(body.to_string().as_bytes()).unwrap().usage;
    assert_eq!((usage.input, usage.cached_input, usage.cache_write_input), (1324, 0, 1322));
    // The recorded request carries its cache points where Bedrock takes them.
    assert!(recorded.request.to_string().contains(r#"{"cachePoint":{"type":"default"}}"#));
}

#[test]
fn redacted_reasoning_is_kept_to_go_back() {
    let recorded = exchange("test_bedrock_model_thinking_part_redacted.yaml");
    let Body::Json(body) = &recorded.body else { panic!() };
    let response = decode_response(body.to_string().as_bytes()).unwrap();
    let Some(Part::Reasoning(reasoning)) = response.message.content.first() else { panic!() };
    assert!(reasoning.text.is_empty());
    assert!(reasoning.opaque.as_ref().unwrap()["bedrock"]["redactedContent"].is_string());
}

#[test]
fn bad_frames_and_exceptions_are_clear_errors_never_panics() {
    let recorded = exchange("test_bedrock_model_stream.yaml");
    let Body::Stream(bytes) = &recorded.body else { panic!() };
    // A flipped payload byte: the message CRC no longer matches.
    let mut corrupted = bytes.clone();
    corrupted[40] ^= 0x55;
    let error = decode_stream(&corrupted, corrupted.len()).unwrap_err();
    assert!(
        matches!(&error, ProviderError::Protocol { message, .. } if message.contains("frame")),
        "{error:?}"
    );
    // A prelude CRC broken.
    let mut prelude = bytes.clone();
    prelude[9] ^= 0x01;
    assert!(matches!(decode_stream(&prelude, 5).unwrap_err(), ProviderError::Protocol { .. }));
    // Cut inside a frame, or before messageStop.
    assert!(matches!(
        decode_stream(&bytes[..bytes.len() - 3], 100).unwrap_err(),
        ProviderError::Network { .. }
    ));
    // Exception events, as Bedrock sends them mid-stream.
    for (kind, want) in [
        ("throttlingException", "RateLimited"),
        ("validationException", "InvalidRequest"),
        ("modelStreamErrorException", "Server"),
        ("serviceUnavailableException", "Server"),
    ] {
        let frame = exception_frame(kind, "it went wrong");
        let error = decode_stream(&frame, 3).unwrap_err();
        assert!(format!("{error:?}").starts_with(want), "{kind}: {error:?}");
        assert!(error.to_string().contains("it went wrong"), "{error}");
    }
    assert!(decode_stream(&exception_frame("throttlingException", "x"), 64)
        .unwrap_err()
        .is_retryable());
}

/// An exception frame as `converse-stream` sends one.
fn exception_frame(kind: &str, message: &str) -> Vec<u8> {
    use aws_smithy_eventstream::frame::write_message_to;
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let payload = serde_json::json!({"message": message}).to_string();
    let message = Message::new(payload.into_bytes())
        .add_header(Header::new(":message-type", HeaderValue::String("exception".into())))
        .add_header(Header::new(":exception-type", HeaderValue::String(kind.to_owned().into())))
        .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())));
    let mut out = Vec::new();
    write_message_to(&message, &mut out).unwrap();
    out
}

/// The canonical request of a recorded Converse body, when it uses only what agentloop's
/// requests carry (text, images and documents as bytes, tool calls and results, tools,
/// instructions, `maxTokens`, `temperature`, cache points); `None` otherwise. A cache point
/// inside a message's content ends a canonical message there (consecutive user messages are
/// one API message again) and becomes an explicit `CachePoint::Message`; one after the system
/// prompt or the tools `Instructions` or `Tools`.
fn canonical(body: &Value) -> Option<ModelRequest> {
    use agentloop::message::{MediaSource, Message, Role, ToolCall, ToolResult, ToolResultContent};
    use agentloop::provider::{CachePoint, CachePolicy, ToolChoice};
    use agentloop::tool::ToolSpec;
    let mut points = Vec::new();
    let bytes = |block: &Value, media_type: String| -> Option<MediaSource> {
        let data = block["source"]["bytes"].as_str()?.to_owned();
        Some(MediaSource::Base64 { media_type, data })
    };
    let object = body.as_object()?;
    if object
        .keys()
        .any(|k| !["messages", "system", "inferenceConfig", "toolConfig"].contains(&k.as_str()))
    {
        return None;
    }
    let mut request = ModelRequest::default();
    let mut messages = Vec::new();
    let mut system: Vec<&str> = Vec::new();
    for block in body["system"].as_array()? {
        match block["text"].as_str() {
            Some(text) => system.push(text),
            None if block.get("cachePoint").is_some() => points.push(CachePoint::Instructions),
            None => return None,
        }
    }
    if let Some((first, rest)) = system.split_first() {
        request.instructions = Some((*first).to_owned());
        messages.extend(rest.iter().map(|text| Message::system(*text)));
    }
    for message in body["messages"].as_array()? {
        let role = if message["role"] == "assistant" { Role::Assistant } else { Role::User };
        let mut parts = Vec::new();
        for block in message["content"].as_array()? {
            if block.get("cachePoint").is_some() {
                messages.push(Message { role, content: std::mem::take(&mut parts) });
                points.push(CachePoint::Message(messages.len() - 1));
            } else if let Some(text) = block["text"].as_str() {
                parts.push(Part::text(text));
            } else if let Some(image) = block.get("image") {
                let media_type = format!("image/{}", image["format"].as_str()?);
                parts.push(Part::Image { source: bytes(image, media_type)? });
            } else if let Some(document) = block.get("document") {
                let media_type = match document["format"].as_str()? {
                    "txt" => "text/plain",
                    "pdf" => "application/pdf",
                    "csv" => "text/csv",
                    "md" => "text/markdown",
                    "html" => "text/html",
                    _ => return None,
                };
                parts.push(Part::File {
                    source: bytes(document, media_type.to_owned())?,
                    filename: document["name"].as_str().map(str::to_owned),
                });
            } else if let Some(call) = block.get("toolUse") {
                parts.push(Part::ToolCall(ToolCall {
                    id: call["toolUseId"].as_str()?.into(),
                    name: call["name"].as_str()?.into(),
                    arguments: call["input"].to_string(),
                }));
            } else if let Some(result) = block.get("toolResult") {
                let [content] = result["content"].as_array()?.as_slice() else { return None };
                let content = match (content.get("text"), content.get("json")) {
                    (Some(Value::String(text)), None) => ToolResultContent::Text(text.clone()),
                    (None, Some(json)) if json.is_object() => ToolResultContent::Json(json.clone()),
                    _ => return None,
                };
                let mut result_ = ToolResult::ok(result["toolUseId"].as_str()?, content);
                result_.is_error = result.get("status").is_some_and(|s| s == "error");
                parts.push(Part::ToolResult(result_));
            } else {
                return None;
            }
        }
        if !parts.is_empty() {
            messages.push(Message { role, content: parts });
        }
    }
    request.messages = std::sync::Arc::new(messages);
    let inference = body["inferenceConfig"].as_object()?;
    if inference.keys().any(|k| k != "maxTokens" && k != "temperature") {
        return None;
    }
    request.max_tokens = inference.get("maxTokens").and_then(Value::as_u64).map(|n| n as u32);
    request.temperature = inference.get("temperature").and_then(Value::as_f64).map(|t| t as f32);
    if let Some(config) = body.get("toolConfig") {
        let mut tools = Vec::new();
        for tool in config["tools"].as_array()? {
            if tool.get("cachePoint").is_some() {
                points.push(CachePoint::Tools);
                continue;
            }
            let spec = tool.get("toolSpec")?;
            tools.push(ToolSpec {
                name: spec["name"].as_str()?.into(),
                description: spec["description"].as_str().unwrap_or_default().into(),
                parameters: spec["inputSchema"]["json"].clone(),
            });
        }
        request.tools = std::sync::Arc::new(tools);
        request.tool_choice = match config.get("toolChoice") {
            None => ToolChoice::None,
            Some(choice) if choice.get("auto").is_some() => ToolChoice::Auto,
            Some(choice) if choice.get("any").is_some() => ToolChoice::Required,
            Some(choice) => ToolChoice::Named(choice["tool"]["name"].as_str()?.into()),
        };
    }
    let policy = if points.is_empty() { CachePolicy::off() } else { CachePolicy::explicit(points) };
    Some(request.with_cache(policy))
}

/// The recorded body without what an empty field adds (`"system": []`, `"inferenceConfig": {}`)
/// and the `"status": "success"` of tool results that some recordings spell out (agentloop
/// sends a status only for an error: Writer's models refuse the field).
fn without_empty(body: &Value) -> Value {
    let mut body = body.clone();
    for message in body["messages"].as_array_mut().into_iter().flatten() {
        for block in message["content"].as_array_mut().into_iter().flatten() {
            if let Some(Value::Object(result)) = block.get_mut("toolResult") {
                if result.get("status").is_some_and(|s| s == "success") {
                    result.remove("status");
                }
            }
        }
    }
    if let Some(map) = body.as_object_mut() {
        map.retain(|_, v| {
            !(v.as_array().is_some_and(Vec::is_empty)
                || v.as_object().is_some_and(|o| o.is_empty()))
        });
    }
    body
}

#[test]
fn the_request_built_for_a_recorded_conversation_is_the_recorded_one() {
    use agentloop::provider::bedrock::{encode_body, Bedrock};
    let (mut compared, mut cached) = (0, 0);
    for exchange in exchanges() {
        let Some(request) = canonical(&exchange.request) else { continue };
        let model = exchange.uri.rsplit('/').nth(1).unwrap_or_default().replace("%3A", ":");
        let format = Bedrock::converse(model);
        let built = encode_body(&format, &request).unwrap();
        assert_eq!(built, without_empty(&exchange.request), "{} ({})", exchange.file, exchange.uri);
        compared += 1;
        cached += usize::from(exchange.request.to_string().contains("cachePoint"));
    }
    eprintln!("{compared} recorded requests rebuilt equal, {cached} of them with cache points");
    assert!(compared >= 54, "{compared} requests compared");
    assert!(cached >= 9, "{cached} requests with cache points compared");
}
