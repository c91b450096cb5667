//! `--provider bedrock`: the region and credentials from the standard AWS variables, requests
//! signed, the answer decoded (a wiremock server stands in for Bedrock Runtime at `base_url`);
//! without a region or credentials, a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::cli as agentloop;
use predicates::prelude::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn the_bedrock_provider_signs_and_answers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/model/us.amazon.nova-micro-v1%3A0/converse-stream"))
        .respond_with(ResponseTemplate::new(403).set_body_json(serde_json::json!({
            "message": "The security token included in the request is invalid."
        })))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let base = server.uri();
    let output = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || {
            agentloop(&dir)
                .env("AWS_REGION", "us-east-1")
                .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
                .env("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
                .env_remove("AWS_BEARER_TOKEN_BEDROCK")
                .args(["--provider", "bedrock", "--model", "us.amazon.nova-micro-v1:0"])
                .args(["--base-url", &base, "run", "hi"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    // Bedrock refused the (example) key: the error is the provider's, as an auth error.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("The security token included in the request is invalid"), "{stderr}");
    let requests = server.received_requests().await.unwrap();
    let authorization = requests[0].headers.get("authorization").unwrap().to_str().unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
        "{authorization}"
    );
    // The secret key never reaches the output.
    assert!(!stderr.contains("wJalrXUtnFEMI"));
}

#[test]
fn without_a_region_or_credentials_the_error_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let bare = |dir: &std::path::Path| {
        let mut command = agentloop(dir);
        for name in [
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_PROFILE",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_BEARER_TOKEN_BEDROCK",
            "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
        ] {
            command.env_remove(name);
        }
        command.args(["--provider", "bedrock", "--model", "m", "run", "hi"]);
        command
    };
    bare(dir.path())
        .assert()
        .failure()
        .stderr(predicate::str::contains("no AWS region: set AWS_REGION"));
    bare(dir.path())
        .env("AWS_REGION", "us-east-1")
        .assert()
        .failure()
        .stderr(predicate::str::contains("no AWS credentials"));
    agentloop(dir.path())
        .args(["--provider", "bedrock", "run", "hi"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("the bedrock provider needs --model"));
}
