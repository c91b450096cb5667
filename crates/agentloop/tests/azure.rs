//! Azure OpenAI presets (`Compat::azure`, `Compat::azure_deployment`) against wiremock servers
//! that play real Azure recordings (`../shared/fixtures/recorded/corpus/`: a chat stream through
//! Azure's model router, a Responses stream of an Azure deployment): the URL each form asks
//! (`/openai/v1/…`; `/openai/deployments/NAME/…?api-version=…`), the key in `api-key` and
//! never in `Authorization`, an Entra token as a bearer instead.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod http_support;
mod shared_fixtures;

use agentloop::message::FinishReason;
use agentloop::provider::openai::{Compat, OpenAi};
use http_support::*;
use shared_fixtures::recorded;
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, Request};

/// Serves the recorded stream `file` at `api` to requests with `name: value`.
async fn serve(api: &str, file: &str, name: &str, value: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(api))
        .and(header(name, value))
        .respond_with(sse(as_sse(&recorded("corpus", file))))
        .mount(&server)
        .await;
    server
}

async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

#[tokio::test]
async fn the_v1_api_takes_chat_completions_with_the_key_in_api_key() {
    let file = "openai__azure-model-router.1.chunks.txt";
    let server = serve("/openai/v1/chat/completions", file, "api-key", "azure-key").await;
    let azure = Compat::azure(&format!("{}/", server.uri())).api_key("azure-key");
    let provider = OpenAi::compatible(azure, "model-router").unwrap();
    let (chunks, error) = stream_all(&provider, simple_request("Capital of Denmark?")).await;
    assert_eq!(error, None);
    let response = assemble(&chunks);
    assert_eq!(response.message.text(), "Capital of Denmark.");
    assert_eq!(response.finish_reason, FinishReason::Stop);
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert!(sent[0].headers.get("authorization").is_none(), "the key is not a bearer token");
    assert_eq!(sent[0].url.query(), None);
    let body: serde_json::Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["model"], "model-router");
    // OpenAI's dialect: instructions as `developer`, `max_completion_tokens`.
    assert_eq!(body["messages"][0]["role"], "developer");
}

#[tokio::test]
async fn the_v1_api_takes_the_responses_api_too() {
    let file = "azure__azure-text.1.chunks.txt";
    let server = serve("/openai/v1/responses", file, "api-key", "azure-key").await;
    let azure = Compat::azure(&server.uri()).api_key("azure-key");
    let provider = OpenAi::responses_compatible(azure, "gpt-4.1-mini").unwrap();
    let (chunks, error) = stream_all(&provider, simple_request("Say hello.")).await;
    assert_eq!(error, None);
    assert_eq!(assemble(&chunks).message.text(), "Hello");
}

#[tokio::test]
async fn a_deployment_url_carries_the_api_version_on_every_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/openai/deployments/my-gpt/chat/completions"))
        .and(query_param("api-version", "2024-10-21"))
        .and(header("api-key", "azure-key"))
        .respond_with(sse(as_sse(&recorded("corpus", "openai__azure-model-router.1.chunks.txt"))))
        .mount(&server)
        .await;
    let azure =
        Compat::azure_deployment(&server.uri(), "my-gpt", "2024-10-21").api_key("azure-key");
    let provider = OpenAi::compatible(azure, "my-gpt").unwrap();
    for _ in 0..2 {
        let (chunks, error) = stream_all(&provider, simple_request("Capital of Denmark?")).await;
        assert_eq!(error, None);
        assert_eq!(assemble(&chunks).message.text(), "Capital of Denmark.");
    }
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn an_entra_token_goes_as_a_bearer_and_no_key_is_an_error() {
    let file = "openai__azure-model-router.1.chunks.txt";
    let server =
        serve("/openai/v1/chat/completions", file, "authorization", "Bearer entra-token").await;
    let azure = Compat::azure(&server.uri())
        .entra_token_env("AGENTLOOP_TEST_UNSET_ENTRA")
        .api_key("entra-token");
    let provider = OpenAi::compatible(azure, "model-router").unwrap();
    let (_, error) = stream_all(&provider, simple_request("Capital of Denmark?")).await;
    assert_eq!(error, None);
    assert!(requests(&server).await[0].headers.get("api-key").is_none());

    // Without a key (the variables unset), building fails and names the variable.
    let missing = Compat::azure(&server.uri()).api_key_env("AGENTLOOP_TEST_UNSET_AZURE_KEY");
    let error = OpenAi::compatible(missing, "model-router").unwrap_err();
    assert!(error.to_string().contains("AGENTLOOP_TEST_UNSET_AZURE_KEY"), "{error}");
}
