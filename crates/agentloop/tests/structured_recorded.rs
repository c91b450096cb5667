//! Typed answers (`run_as`) on real recorded structured-output responses of OpenAI chat
//! completions, the OpenAI Responses API and Gemini (pydantic-ai's VCR cassettes, their
//! response bodies kept as JSON, read from `../shared/fixtures/recorded/structured/`; sources in
//! `../shared/fixtures/recorded/README.md`). OpenAI's recordings are a tool call first and the
//! typed answer after the tool's result — tools first, answer last — and Gemini's include an
//! answer that leaves optional fields out.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;
mod shared_fixtures;

use agentloop::prelude::*;
use agentloop::provider::gemini::Gemini;
use agentloop::provider::openai::{Compat, OpenAi};
use http_support::*;
use serde::Deserialize;
use serde_json::{json, Value};
use shared_fixtures::recorded;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

const DIR: &str = "structured";

/// A city and its country.
#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct CityLocation {
    city: String,
    country: String,
}

/// The user's country.
#[tool]
async fn get_user_country() -> String {
    "Mexico".to_owned()
}

/// A server that answers the recorded responses `{name}.1.json`, `{name}.2.json`, … in turn
/// (the last one again after that).
async fn serve_in_turn(name: &str, count: usize) -> MockServer {
    let server = MockServer::start().await;
    for turn in 1..=count {
        let body = recorded(DIR, &format!("{name}.{turn}.json"));
        let mock = Mock::given(method("POST")).respond_with(json_response(200, body));
        let mock = if turn < count { mock.up_to_n_times(1) } else { mock };
        mock.with_priority(turn as u8).mount(&server).await;
    }
    server
}

/// Checks the run: its second request carried the tool's result, both carried the schema.
fn check_tool_then_answer(bodies: &[Value], schema_of: impl Fn(&Value) -> &Value, result: &str) {
    assert_eq!(bodies.len(), 2, "a tool call, then the answer");
    for body in bodies {
        let schema = schema_of(body);
        assert_eq!(schema["required"], json!(["city", "country"]), "{body}");
    }
    assert!(bodies[1].to_string().contains(result), "the tool's result went back");
}

/// The recorded conversation `name` through the provider `make` builds on the server's base
/// URL: the typed answer after the tool's result; the requests' bodies.
async fn tool_then_typed_answer<P: Provider + 'static>(
    name: &str,
    make: impl Fn(Compat) -> P,
) -> Vec<Value> {
    let server = serve_in_turn(name, 2).await;
    let compat =
        Compat::openai().base_url(format!("{}/v1", server.uri())).api_key("k").streaming(false);
    let agent = Agent::builder(make(compat)).tool(GetUserCountry).build().unwrap();
    let city: CityLocation =
        agent.run_as("What is the largest city in the user country?").await.unwrap();
    assert_eq!(city, CityLocation { city: "Mexico City".into(), country: "Mexico".into() });
    bodies(&server).await
}

#[tokio::test]
async fn openai_chat_recorded_tool_call_then_typed_answer() {
    let bodies = tool_then_typed_answer("openai-chat-native-output", |compat| {
        OpenAi::compatible(compat, "gpt-4o").unwrap()
    })
    .await;
    check_tool_then_answer(&bodies, |b| &b["response_format"]["json_schema"]["schema"], "Mexico");
    assert_eq!(bodies[0]["response_format"]["json_schema"]["strict"], true);
    assert_eq!(bodies[0]["tools"][0]["function"]["name"], "get_user_country");
}

#[tokio::test]
async fn openai_responses_recorded_tool_call_then_typed_answer() {
    let bodies = tool_then_typed_answer("openai-responses-native-output", |compat| {
        OpenAi::responses_compatible(compat, "gpt-4o").unwrap()
    })
    .await;
    check_tool_then_answer(&bodies, |b| &b["text"]["format"]["schema"], "function_call_output");
    assert_eq!(bodies[0]["text"]["format"]["strict"], true);
}

fn gemini(base: &str) -> impl Provider {
    let config = Gemini::config("gemini-2.5-flash").base_url(base).api_key("k").streaming(false);
    Gemini::with_config(config, Gemini::new("gemini-2.5-flash")).unwrap()
}

#[tokio::test]
async fn gemini_recorded_typed_answer() {
    let server = serve_in_turn("gemini-native-output", 1).await;
    let agent = Agent::builder(gemini(&server.uri())).build().unwrap();
    let city: CityLocation = agent.run_as("What is the largest city in Mexico?").await.unwrap();
    assert_eq!(city, CityLocation { city: "Mexico City".into(), country: "Mexico".into() });
    let body = &bodies(&server).await[0];
    assert_eq!(body["generationConfig"]["responseMimeType"], "application/json");
    assert_eq!(body["generationConfig"]["responseSchema"]["required"], json!(["city", "country"]));
}

/// A city, and what else is known of it.
#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct CityFacts {
    city: String,
    country: Option<String>,
    population: Option<u64>,
}

#[tokio::test]
async fn gemini_recorded_answers_with_and_without_the_optional_fields() {
    let server = serve_in_turn("gemini-optional-fields-native-output", 2).await;
    let agent = Agent::builder(gemini(&server.uri())).build().unwrap();
    let london: CityFacts =
        agent.run_as("Tell me about London, UK with population 9 million").await.unwrap();
    assert_eq!(
        london,
        CityFacts {
            city: "London".into(),
            country: Some("UK".into()),
            population: Some(9_000_000)
        }
    );
    let paris: CityFacts = agent.run_as("Just tell me a city: Paris").await.unwrap();
    assert_eq!(paris, CityFacts { city: "Paris".into(), country: None, population: None });
}
