//! Prompt caching on the formats without breakpoints: OpenAI's `prompt_cache_key` (both chat
//! encoders and Responses), Gemini's `cachedContent`, and the cache tokens each usage reports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::Message;
use crate::tool::ToolSpec;
use openai::{Dialect, OpenAiChat};
use openai_responses::OpenAiResponses;
use serde_json::{json, Value};
use wire::WireFormat;

fn request() -> ModelRequest {
    ModelRequest::new(vec![Message::user("hi")]).with_instructions("Be brief.").with_tools(vec![
        ToolSpec {
            name: "search".into(),
            description: "searches".into(),
            parameters: json!({"type": "object"}),
        },
    ])
}

fn sent(format: &dyn WireFormat, request: &ModelRequest) -> Value {
    serde_json::from_slice(&format.encode_json(request, true).unwrap().body).unwrap()
}

#[test]
fn openai_formats_send_the_key_only_when_there_is_one() {
    let keyed = request().with_cache(CachePolicy::auto().with_key("support-bot"));
    let chat = OpenAiChat::new("gpt-4o", Dialect::openai());
    // Both chat encoders (the `Value` one and the streaming writer) agree.
    assert_eq!(chat.encode(&keyed, true).unwrap().body["prompt_cache_key"], "support-bot");
    assert_eq!(sent(&chat, &keyed)["prompt_cache_key"], "support-bot");
    assert_eq!(sent(&chat, &keyed), chat.encode(&keyed, true).unwrap().body);
    let responses = OpenAiResponses::new("gpt-5", Dialect::openai());
    assert_eq!(sent(&responses, &keyed)["prompt_cache_key"], "support-bot");
    for plain in [request(), request().with_cache(CachePolicy::off())] {
        assert!(sent(&chat, &plain).get("prompt_cache_key").is_none());
        assert!(sent(&responses, &plain).get("prompt_cache_key").is_none());
    }
}

#[test]
fn a_gemini_cache_made_ahead_replaces_the_system_instruction_and_the_tools() {
    let gemini = Gemini::new("gemini-2.5-flash");
    let plain = gemini.encode(&request(), true).unwrap().body;
    assert!(plain.get("systemInstruction").is_some() && plain.get("tools").is_some());
    assert!(plain.get("cachedContent").is_none());
    let cached =
        request().with_cache(CachePolicy::auto().with_cached_content("cachedContents/abc123"));
    let body = gemini.encode(&cached, true).unwrap().body;
    assert_eq!(body["cachedContent"], "cachedContents/abc123");
    for left_out in ["systemInstruction", "tools", "toolConfig"] {
        assert!(body.get(left_out).is_none(), "{left_out}: {body}");
    }
    assert_eq!(body["contents"], plain["contents"]);
}

#[test]
fn cache_reads_and_writes_are_read_from_every_usage_shape() {
    let chat = OpenAiChat::new("m", Dialect::openai());
    // A gateway in front of Anthropic: reads and writes in `prompt_tokens_details`.
    let gateway = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": 2000, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 1500, "cache_write_tokens": 400}}});
    let usage = chat.decode_response(gateway.to_string().as_bytes()).unwrap().usage;
    assert_eq!((usage.input, usage.cached_input, usage.cache_write_input), (2000, 1500, 400));
    // DeepSeek's own fields, without details.
    let deepseek = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": 339, "completion_tokens": 5,
        "prompt_cache_hit_tokens": 320, "prompt_cache_miss_tokens": 19}});
    let usage = chat.decode_response(deepseek.to_string().as_bytes()).unwrap().usage;
    assert_eq!((usage.input, usage.cached_input), (339, 320));
    let responses = OpenAiResponses::new("m", Dialect::openai());
    let body = json!({"id": "resp_1", "model": "m", "status": "completed", "output": [],
        "usage": {"input_tokens": 631, "output_tokens": 87,
            "input_tokens_details": {"cached_tokens": 200, "cache_write_tokens": 31},
            "output_tokens_details": {"reasoning_tokens": 37}}});
    let usage = responses.decode_response(body.to_string().as_bytes()).unwrap().usage;
    assert_eq!((usage.cached_input, usage.cache_write_input, usage.reasoning), (200, 31, 37));
}

#[test]
fn cache_reads_and_writes_have_their_own_prices() {
    use crate::terms::Price;
    let usage = crate::message::Usage {
        input: 1_000_000,
        cached_input: 600_000,
        cache_write_input: 300_000,
        ..crate::message::Usage::default()
    };
    // Anthropic's shape: reads at 0.1 ×, writes at 1.25 × the input price.
    let price = Price::per_million(3.0, 15.0).with_cached_input(0.3).with_cache_write(3.75);
    let cost = price.cost(&usage);
    assert!((cost - (0.1 * 3.0 + 0.6 * 0.3 + 0.3 * 3.75)).abs() < 1e-9, "{cost}");
    // Without their own prices, both are input.
    assert!((Price::per_million(3.0, 15.0).cost(&usage) - 3.0).abs() < 1e-9);
    // Writes never count more than the uncached rest.
    let odd = crate::message::Usage { input: 10, cached_input: 8, cache_write_input: 9, ..usage };
    assert!((price.cost(&odd) - (8.0 * 0.3 + 2.0 * 3.75) / 1e6).abs() < 1e-12);
}
