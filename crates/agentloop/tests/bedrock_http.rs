//! Bedrock over HTTP: a wiremock server answers with recorded `converse-stream` and
//! `converse` bodies (`../shared/fixtures/recorded/bedrock-converse/`); requests are signed
//! with SigV4 (or carry an API key as a bearer token), go to the model's percent-encoded path,
//! and the agent loop runs on what comes back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::prelude::*;
use agentloop::provider::bedrock::{AwsCredentials, AwsEnvironment, Bedrock};
use agentloop::provider::{HttpConfig, Provider, ProviderError};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const MODEL: &str = "us.amazon.nova-micro-v1:0";

/// The first `!!binary` response body of a cassette (its event stream), decoded.
fn recorded_stream(file: &str) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/recorded/bedrock-converse");
    let text = std::fs::read_to_string(dir.join(file)).unwrap();
    let start = text.find("string: !!binary |").unwrap();
    let base64: String = text[start..]
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with("        "))
        .flat_map(|line| line.trim().chars())
        .collect();
    decode_base64(&base64)
}

fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => u32::from(c - b'A'),
        b'a'..=b'z' => u32::from(c - b'a') + 26,
        b'0'..=b'9' => u32::from(c - b'0') + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let acc =
            chunk.iter().enumerate().fold(0u32, |acc, (i, c)| acc | value(*c) << (18 - 6 * i));
        out.extend(&acc.to_be_bytes()[1..chunk.len()]);
    }
    out
}

fn signed(server: &MockServer, token: Option<&str>) -> agentloop::provider::HttpProvider<Bedrock> {
    let credentials = AwsCredentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        token.map(str::to_owned),
    );
    let format = Bedrock::converse(MODEL).with_credentials("us-east-1", credentials);
    Bedrock::with_config(HttpConfig::new(server.uri(), MODEL), format).unwrap()
}

#[tokio::test]
async fn a_signed_streamed_call_runs_the_loop_on_a_recorded_stream() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/model/us.amazon.nova-micro-v1%3A0/converse-stream"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/vnd.amazon.eventstream")
                .set_body_bytes(recorded_stream("test_bedrock_model_stream.yaml")),
        )
        .mount(&server)
        .await;
    let agent = Agent::builder(signed(&server, Some("session-token")))
        .instructions("Be brief.")
        .build()
        .unwrap();
    let outcome = agent.run("What is the capital of France?").await.unwrap();
    assert!(!outcome.answer.is_empty());
    assert!(outcome.usage.input > 0 && outcome.usage.output > 0, "{:?}", outcome.usage);
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    let header = |name: &str| sent.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    let authorization = header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
        "{authorization}"
    );
    assert!(authorization.contains("/us-east-1/bedrock/aws4_request"), "{authorization}");
    assert!(
        authorization.contains("SignedHeaders=") && authorization.contains("x-amz-date"),
        "{authorization}"
    );
    assert!(header("x-amz-date").is_some());
    assert_eq!(header("x-amz-security-token").as_deref(), Some("session-token"));
    let body: serde_json::Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["system"][0]["text"], "Be brief.");
    assert_eq!(body["messages"][0]["content"][0]["text"], "What is the capital of France?");
}

#[tokio::test]
async fn an_api_key_is_a_bearer_token_and_nothing_is_signed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "output": {"message": {"role": "assistant", "content": [{"text": "Paris."}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 7, "outputTokens": 2, "totalTokens": 9}
        })))
        .mount(&server)
        .await;
    let config = HttpConfig::new(server.uri(), MODEL).api_key("bedrock-api-key").streaming(false);
    let provider = Bedrock::with_config(config, Bedrock::converse(MODEL)).unwrap();
    let response = provider
        .complete(agentloop::provider::ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.message.text(), "Paris.");
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests[0].url.path(), "/model/us.amazon.nova-micro-v1%3A0/converse");
    assert_eq!(requests[0].headers.get("authorization").unwrap(), "Bearer bedrock-api-key");
    assert!(requests[0].headers.get("x-amz-date").is_none());
}

#[tokio::test]
async fn errors_are_classified_from_the_status_and_the_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .insert_header(
                    "x-amzn-errortype",
                    "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
                )
                .set_body_json(
                    serde_json::json!({"message": "The provided model identifier is invalid."}),
                ),
        )
        .mount(&server)
        .await;
    let error = signed(&server, None)
        .complete(agentloop::provider::ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        ProviderError::InvalidRequest {
            message: "The provided model identifier is invalid.".into()
        }
    );
    // Without credentials or a key, nothing is sent.
    let bare = Bedrock::with_config(HttpConfig::new(server.uri(), MODEL), Bedrock::converse(MODEL))
        .unwrap();
    let error = bare
        .complete(agentloop::provider::ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ProviderError::Auth { message, .. } if message.contains("no AWS credentials")),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[test]
fn credentials_and_region_come_from_the_environment_then_the_profile_files() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/credentials"),
        "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = s2\naws_session_token = t2\n",
    )
    .unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        "[default]\nregion = eu-west-1\n[profile work]\nregion = us-west-2\n",
    )
    .unwrap();
    let home_dir = home.path().to_string_lossy().into_owned();
    let vars = |pairs: Vec<(&'static str, String)>| {
        move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())
    };
    let files = vars(vec![("HOME", home_dir.clone())]);
    let aws = AwsEnvironment::new(&files);
    assert_eq!(aws.credentials().unwrap().unwrap().access_key_id(), "AKIDDEFAULT");
    assert_eq!(aws.region().unwrap().as_deref(), Some("eu-west-1"));
    let work = vars(vec![("HOME", home_dir.clone()), ("AWS_PROFILE", "work".into())]);
    let aws = AwsEnvironment::new(&work);
    let credentials = aws.credentials().unwrap().unwrap();
    assert_eq!(
        (credentials.access_key_id(), credentials.session_token()),
        ("AKIDWORK", Some("t2"))
    );
    assert_eq!(aws.region().unwrap().as_deref(), Some("us-west-2"));
    // The environment wins over the files.
    let env = vars(vec![
        ("HOME", home_dir),
        ("AWS_ACCESS_KEY_ID", "AKIDENV".into()),
        ("AWS_SECRET_ACCESS_KEY", "s3".into()),
        ("AWS_REGION", "ap-south-1".into()),
    ]);
    let aws = AwsEnvironment::new(&env);
    assert_eq!(aws.credentials().unwrap().unwrap().access_key_id(), "AKIDENV");
    assert_eq!(aws.region().unwrap().as_deref(), Some("ap-south-1"));
    // Nothing anywhere.
    let none = vars(vec![]);
    assert!(AwsEnvironment::new(&none).credentials().unwrap().is_none());
    // The secret key never shows in a debug print.
    assert!(!format!("{credentials:?}").contains("s2"));
}
