//! Structured output end to end: an agent asked for a typed answer, against HTTP servers that
//! play real recorded provider streams (Anthropic's structured-output mode and a final-answer
//! tool call, from public SDK fixtures: `../shared/fixtures/recorded/corpus/INDEX.tsv`) and
//! scripted chat completions. The schema on the wire, the validated output, the retry after a
//! wrong answer, and the partial-object events.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;
mod shared_fixtures;

use agentloop::event::Event;
use agentloop::prelude::*;
use agentloop::provider::anthropic::Anthropic;
use agentloop::provider::openai::{Compat, OpenAi};
use agentloop::run::{OutputMode, OutputSpec, StopReason, OUTPUT_TOOL};
use futures::StreamExt;
use http_support::*;
use serde::Deserialize;
use serde_json::{json, Value};
use shared_fixtures::recorded;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer};

const DIR: &str = "corpus";

fn anthropic(base: &str) -> impl Provider {
    let config = Anthropic::config("claude-sonnet-4-5").base_url(base).api_key("k");
    Anthropic::with_config(config, Anthropic::messages("claude-sonnet-4-5")).unwrap()
}

/// Characters of a story (the schema of the recorded structured answer).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Cast {
    characters: Vec<Character>,
}

/// One character.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Character {
    name: String,
    class: String,
    description: String,
}

/// Every `output_delta` of a stream, and its outcome.
async fn partials_and_outcome(mut events: agentloop::EventStream) -> (Vec<Value>, Outcome) {
    let mut partials = Vec::new();
    while let Some(event) = events.next().await {
        match event {
            Event::OutputDelta { partial } => partials.push(partial),
            Event::RunFinished { outcome } => return (partials, *outcome),
            Event::RunFailed { error, .. } => panic!("the run failed: {error}"),
            _ => {}
        }
    }
    panic!("no outcome")
}

#[tokio::test]
async fn anthropic_native_structured_output_on_a_real_recording() {
    let server = MockServer::start().await;
    // Served only to a request that asks for the schema in Anthropic's form.
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(body_partial_json(json!({"output_config": {"format": {"type": "json_schema"}}})))
        .respond_with(sse(as_sse(&recorded(
            DIR,
            "anthropic__anthropic-json-output-format.1.chunks.txt",
        ))))
        .mount(&server)
        .await;
    let agent = Agent::builder(anthropic(&server.uri())).build().unwrap();
    let cast: Cast = agent.run_as("Make up three characters.").await.unwrap();
    assert_eq!(cast.characters.len(), 3);
    assert_eq!(cast.characters[0].name, "Theron Ironheart");
    assert_eq!(cast.characters[0].class, "warrior");
    assert!(cast.characters.iter().all(|c| !c.description.is_empty()));
    let body = &bodies(&server).await[0];
    let schema = &body["output_config"]["format"]["schema"];
    assert_eq!(schema["additionalProperties"], false, "closed for Anthropic");
    assert_eq!(schema["required"], json!(["characters"]));
    assert!(body.get("tools").is_none(), "native mode: no final-answer tool");

    // Streamed: the partial values grow towards the output.
    let spec = OutputSpec::of::<Cast>();
    let events = agent.run_stream_with("Again.", RunOptions::default().output(spec));
    let (partials, outcome) = partials_and_outcome(events).await;
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    let output = outcome.output.unwrap();
    assert!(partials.len() >= 5, "{} partial values", partials.len());
    assert_eq!(partials.last(), Some(&output));
    assert_eq!(partials[0], json!({}));
    let names = |v: &Value| v["characters"].as_array().map_or(0, Vec::len);
    assert!(partials.windows(2).all(|w| names(&w[0]) <= names(&w[1])), "they only grow");
}

/// Weather elements (the schema of the recorded final-answer tool call).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Report {
    elements: Vec<Weather>,
}

/// The weather at one place.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Weather {
    location: String,
    temperature: i64,
    condition: String,
}

#[tokio::test]
async fn the_final_answer_tool_on_a_real_recorded_tool_call() {
    let server = MockServer::start().await;
    // The recording's tool is named `json` (the SDK's answer tool); ours is `final_answer`.
    let stream = recorded(DIR, "anthropic__anthropic-json-tool.1.chunks.txt")
        .replace(r#""name":"json""#, &format!(r#""name":"{OUTPUT_TOOL}""#));
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(sse(as_sse(&stream)))
        .mount(&server)
        .await;
    let spec = OutputSpec::of::<Report>().with_mode(OutputMode::Tool);
    let agent = Agent::builder(anthropic(&server.uri())).output(spec.clone()).build().unwrap();
    let report: Report = agent.run_as("Weather in San Francisco?").await.unwrap();
    assert_eq!(report.elements.len(), 1);
    assert_eq!(report.elements[0].location, "San Francisco");
    assert_eq!(report.elements[0].temperature, 58);
    assert_eq!(report.elements[0].condition, "sunny");
    let body = &bodies(&server).await[0];
    assert_eq!(body["tools"][0]["name"], OUTPUT_TOOL);
    assert_eq!(body["tools"][0]["input_schema"]["required"], json!(["elements"]));
    assert_eq!(body["tool_choice"], json!({"type": "any"}), "a tool call is required");
    assert!(body.get("output_config").is_none());

    let events = agent.run_stream_with("Again.", RunOptions::default().output(spec));
    let (partials, outcome) = partials_and_outcome(events).await;
    assert_eq!(outcome.stop_reason, StopReason::DoneTool { tool: OUTPUT_TOOL.into() });
    assert_eq!(partials.last(), outcome.output.as_ref());
}

fn completion(text: &str) -> String {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
    })
    .to_string()
}

/// A city and how many live there.
#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct City {
    name: String,
    population: u64,
}

fn chat(base: &str) -> impl Provider {
    let compat = Compat::openai().base_url(format!("{base}/v1")).api_key("k").streaming(false);
    OpenAi::compatible(compat, "gpt-4.1").unwrap()
}

#[tokio::test]
async fn a_wrong_answer_goes_back_with_its_errors_and_the_next_one_is_taken() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, completion(r#"{"name": "Lyon", "population": "big"}"#)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, completion(r#"{"name": "Lyon", "population": 522250}"#)))
        .with_priority(2)
        .mount(&server)
        .await;
    let agent = Agent::builder(chat(&server.uri())).build().unwrap();
    let city: City = agent.run_as("The third city of France?").await.unwrap();
    assert_eq!(city, City { name: "Lyon".into(), population: 522_250 });
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let format = &bodies[0]["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "City");
    assert_eq!(format["json_schema"]["description"], "A city and how many live there.");
    // `population: u64` has format `uint64`, which strict mode does not know: left out of the
    // strict schema, its bounds kept.
    assert_eq!(format["json_schema"]["strict"], true);
    let population = &format["json_schema"]["schema"]["properties"]["population"];
    assert!(population.get("format").is_none(), "{population}");
    assert_eq!(population["minimum"], 0);
    let retry = bodies[1]["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(retry["role"], "user");
    let text = retry["content"].as_str().unwrap();
    assert!(text.contains("/population"), "{text}");
}

#[tokio::test]
async fn an_answer_that_never_fits_fails_with_a_typed_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, completion("Lyon, I think.")))
        .mount(&server)
        .await;
    let spec = OutputSpec::of::<City>().with_max_retries(1);
    let agent = Agent::builder(chat(&server.uri())).output(spec).build().unwrap();
    let error = agent.run_as::<City>("The third city of France?").await.unwrap_err();
    let outcome = error.outcome().expect("an outcome");
    let StopReason::OutputInvalid { errors } = &outcome.stop_reason else {
        panic!("{:?}", outcome.stop_reason)
    };
    assert!(errors.contains("not JSON"), "{errors}");
    assert_eq!(bodies(&server).await.len(), 2, "one answer and one retry");
}

/// A trip, with what may be left out.
#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
struct Trip {
    to: String,
    #[serde(default)]
    nights: u32,
    note: Option<String>,
    via: Option<City>,
}

#[tokio::test]
async fn optional_fields_go_strict_as_nullable_and_their_nulls_come_back_as_left_out() {
    let server = MockServer::start().await;
    let answer = r#"{"to": "Lyon", "nights": null, "note": null, "via": {"name": "Dijon", "population": 159346}}"#;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(json_response(200, completion(answer)))
        .mount(&server)
        .await;
    let agent = Agent::builder(chat(&server.uri())).build().unwrap();
    let trip: Trip = agent.run_as("A trip to Lyon?").await.unwrap();
    assert_eq!(
        trip,
        Trip {
            to: "Lyon".into(),
            nights: 0,
            note: None,
            via: Some(City { name: "Dijon".into(), population: 159_346 }),
        }
    );
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 1, "taken at once, no retry");
    let format = &bodies[0]["response_format"]["json_schema"];
    assert_eq!(format["strict"], true);
    let schema = &format["schema"];
    let mut required: Vec<&str> =
        schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    required.sort_unstable();
    assert_eq!(required, ["nights", "note", "to", "via"]);
    assert_eq!(schema["properties"]["nights"]["type"], json!(["integer", "null"]));
    assert_eq!(schema["additionalProperties"], false);
}
