//! The runs UI's actions (`POST /ui/api/…`) over the echo agent: chat, answer, approve,
//! reject, cancel, fork — and the refusals that keep them from being forged. Every answer
//! and body is checked against `docs/schema/ui-api.schema.json`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop_server::Auth;
use common::{start, TestServer};
use secrecy::SecretString;
use serde_json::{json, Value};
use std::time::Duration;

/// Asserts that `value` is a `definition` of the UI API's schema.
fn assert_schema(definition: &str, value: &Value) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema/ui-api.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let root = json!({"$defs": schema["$defs"], "$ref": format!("#/$defs/{definition}")});
    let validator = jsonschema::validator_for(&root).unwrap();
    let errors: Vec<String> = validator.iter_errors(value).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "not a {definition}: {errors:?}\n{value:#}");
}

/// What a body of each action is, in the schema.
fn body_definition(path: &str) -> &'static str {
    match path.rsplit('/').next().unwrap() {
        "chat" => "ChatBody",
        "decide" => "DecideBody",
        "answer" => "AnswerBody",
        "fork" => "ForkBody",
        _ => "ReasonBody",
    }
}

async fn post(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let response =
        server.client.post(format!("{}{path}", server.root)).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let answer = response.json().await.unwrap_or(Value::Null);
    if status == 202 {
        assert_schema(body_definition(path), &body);
        assert_schema(if path.ends_with("/chat") { "Chatted" } else { "Acted" }, &answer);
    } else {
        assert_schema("Error", &answer);
        assert_eq!(answer["error"]["status"], status);
    }
    (status, answer)
}

async fn run_of(server: &TestServer, run_id: &str) -> Value {
    let url = format!("{}/ui/api/runs/{run_id}", server.root);
    let run = server.client.get(url).send().await.unwrap().json().await.unwrap();
    assert_schema("RunDetail", &run);
    run
}

/// The run once its registry row is in `state` and its journal as long as the row says
/// (within 10 s: the journal is read before the row, so an entry may come in between).
async fn wait_for(server: &TestServer, run_id: &str, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let run = run_of(server, run_id).await;
        let read = run["entries"].as_array().map_or(0, Vec::len);
        if run["run"]["state"] == state && run["run"]["entries"] == read {
            return run;
        }
        assert!(tokio::time::Instant::now() < deadline, "run {run_id} never {state}: {run}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn entries<'a>(run: &'a Value, kind: &str) -> Vec<&'a Value> {
    run["entries"].as_array().unwrap().iter().filter(|e| e["kind"] == kind).collect()
}

fn answer(run: &Value) -> String {
    let last = run["entries"].as_array().unwrap().last().unwrap();
    last["event"]["outcome"]["answer"].as_str().unwrap_or_default().to_owned()
}

async fn chat(server: &TestServer, body: Value) -> (String, String) {
    let (status, started) = post(server, "/ui/api/chat", body).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["agent"], "echo");
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    (run_id, started["session"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_chat_starts_a_conversation_and_continues_it() {
    let server = start(None).await;
    let (status, agents) = {
        let url = format!("{}/ui/api/agents", server.root);
        let response = server.client.get(url).send().await.unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap())
    };
    assert_eq!(status, 200);
    assert_schema("Agents", &agents);
    assert_eq!(agents["agents"][0]["name"], "echo");

    let (first, session) = chat(&server, json!({"text": "hello there"})).await;
    let run = wait_for(&server, &first, "finished").await;
    assert_eq!(answer(&run), "hello there");
    // The next turn of the same conversation: the session as the list shows it works too.
    let listed = run["run"]["session"].as_str().unwrap().to_owned();
    assert!(listed.ends_with(&session), "{listed} / {session}");
    let (second, again) = chat(&server, json!({"text": "and again", "session": listed})).await;
    assert_eq!(again, session);
    assert_ne!(second, first);
    wait_for(&server, &second, "finished").await;
    let url = format!("{}/ui/api/runs?session={listed}", server.root);
    let page: Value = server.client.get(url).send().await.unwrap().json().await.unwrap();
    assert_schema("RunsPage", &page);
    assert_eq!(page["runs"].as_array().unwrap().len(), 2, "{page}");

    let (status, refused) = post(&server, "/ui/api/chat", json!({"text": "  "})).await;
    assert_eq!(status, 400, "{refused}");
    let (status, _) = post(&server, "/ui/api/chat", json!({"text": "x", "agent": "nobody"})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_deferred_call_is_approved_or_rejected_and_the_run_goes_on() {
    let server = start(None).await;
    let cases = [
        ("approve", None, Some(" Alice\u{1b}[31m "), "ui:Alice[31m"),
        ("reject", Some("not today"), None, "ui"),
    ];
    for (decision, reason, by, journaled) in cases {
        let (run_id, _) = chat(&server, json!({"text": "approve"})).await;
        let run = wait_for(&server, &run_id, "suspended").await;
        let requested = entries(&run, "approval_requested");
        let call_id = requested[0]["event"]["call"]["id"].as_str().unwrap().to_owned();
        let path = format!("/ui/api/runs/{run_id}/decide");
        let (status, refused) =
            post(&server, &path, json!({"call_id": "no-such-call", "decision": decision})).await;
        assert!(status == 400 || status == 409, "{status} {refused}");
        let body = json!({"call_id": call_id, "decision": decision, "reason": reason, "by": by});
        let (status, done) = post(&server, &path, body).await;
        assert_eq!(status, 202, "{done}");
        assert_eq!(done["continued"], true);
        let run = wait_for(&server, &run_id, "finished").await;
        let decided = entries(&run, "approval_decided");
        assert_eq!(decided[0]["event"]["decision"]["kind"], decision, "{run}");
        assert_eq!(decided[0]["event"]["by"], journaled, "who decided, control characters dropped");
        if let Some(reason) = reason {
            assert_eq!(decided[0]["event"]["decision"]["reason"], reason);
        }
    }
}

#[tokio::test]
async fn a_question_is_answered_from_the_page() {
    let server = start(None).await;
    let (run_id, _) = chat(&server, json!({"text": "ask what is your name?"})).await;
    wait_for(&server, &run_id, "suspended").await;
    let path = format!("/ui/api/runs/{run_id}/answer");
    let (status, done) = post(&server, &path, json!({"text": "Ada"})).await;
    assert_eq!(status, 202, "{done}");
    let run = wait_for(&server, &run_id, "finished").await;
    assert!(answer(&run).contains("Ada"), "{run}");
    // Answered already: the run does not wait any more.
    let (status, refused) = post(&server, &path, json!({"text": "Bob"})).await;
    assert_eq!(status, 409, "{refused}");
}

#[tokio::test]
async fn a_run_is_cancelled_from_the_page() {
    let server = start(None).await;
    let (run_id, _) = chat(&server, json!({"text": "slow 30"})).await;
    wait_for(&server, &run_id, "running").await;
    let path = format!("/ui/api/runs/{run_id}/cancel");
    let (status, done) = post(&server, &path, json!({})).await;
    assert_eq!(status, 202, "{done}");
    wait_for(&server, &run_id, "cancelled").await;
    let (status, _) = post(&server, &path, json!({})).await;
    assert_eq!(status, 409, "a cancelled run cannot be cancelled again");
}

#[tokio::test]
async fn a_fork_with_an_edited_tool_result_answers_differently() {
    let server = start(None).await;
    let (origin, _) = chat(&server, json!({"text": "calc 2 + 2"})).await;
    let run = wait_for(&server, &origin, "finished").await;
    let completed = entries(&run, "tool_completed")[0];
    let at_seq = completed["seq"].as_u64().unwrap();
    let call_id = completed["event"]["result"]["call_id"].as_str().unwrap();
    let edit = json!({"kind": "tool_result", "call_id": call_id, "result": "5"});
    let path = format!("/ui/api/runs/{origin}/fork");
    let (status, forked) = post(&server, &path, json!({"at_seq": at_seq, "edit": edit})).await;
    assert_eq!(status, 202, "{forked}");
    let fork = forked["run_id"].as_str().unwrap();
    assert_ne!(fork, origin);
    let forked_run = wait_for(&server, fork, "finished").await;
    assert_eq!(answer(&run), "The result is 4.", "{run}");
    assert_eq!(answer(&forked_run), "The result is 5.", "{forked_run}");
    let marker = entries(&forked_run, "run_forked");
    assert_eq!(marker[0]["event"]["origin_run_id"], origin.as_str());
    // Linked both ways: the fork names its origin, the origin lists its forks.
    assert_eq!(forked_run["run"]["origin"], origin.as_str(), "{forked_run}");
    let url = format!("{}/ui/api/runs?origin={origin}", server.root);
    let forks: Value = server.client.get(url).send().await.unwrap().json().await.unwrap();
    assert_schema("RunsPage", &forks);
    let forks: Vec<&str> =
        forks["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(forks, [fork]);

    // The model's answer, replaced at the run's end: a finished fork with that answer.
    let end = run["entries"].as_array().unwrap().last().unwrap()["seq"].as_u64().unwrap();
    let edit = json!({"kind": "model_answer", "text": "The result is four."});
    let (status, forked) = post(&server, &path, json!({"at_seq": end, "edit": edit})).await;
    assert_eq!(status, 202, "{forked}");
    let answered = wait_for(&server, forked["run_id"].as_str().unwrap(), "finished").await;
    assert_eq!(answer(&answered), "The result is four.", "{answered}");
    assert_eq!(answered["run"]["answer"], "The result is four.");

    // A point past the end, a bad edit: refused with a reason.
    let (status, refused) = post(&server, &path, json!({"at_seq": 10_000})).await;
    assert_eq!(status, 409, "{refused}");
    let (status, refused) = post(&server, &path, json!({"at_seq": 1, "edit": {"kind": "x"}})).await;
    assert_eq!(status, 422, "{refused}");
}

#[tokio::test]
async fn actions_refuse_other_sites_forms_and_gets() {
    let server = start(None).await;
    let (run_id, _) = chat(&server, json!({"text": "slow 30"})).await;
    let url = format!("{}/ui/api/runs/{run_id}/cancel", server.root);
    // A form post (no JSON): 415, nothing done.
    let response = server
        .client
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("reason=x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 415);
    // Another origin, or a browser that says another site sent it: 403.
    for (name, value) in [("origin", "http://evil.example"), ("sec-fetch-site", "cross-site")] {
        let response =
            server.client.post(&url).header(name, value).json(&json!({})).send().await.unwrap();
        assert_eq!(response.status(), 403, "{name}: {value}");
    }
    // No state change on GET.
    let response = server.client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(run_of(&server, &run_id).await["run"]["state"], "running");
    // The same origin may.
    let host = server.root.trim_start_matches("http://").to_owned();
    let response = server
        .client
        .post(&url)
        .header("origin", format!("http://{host}"))
        .header("sec-fetch-site", "same-origin")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
}

#[tokio::test]
async fn actions_need_the_servers_token() {
    let token = "ui-act-token";
    let server = start(Some(Auth::Bearer(vec![SecretString::from(token.to_owned())]))).await;
    let (status, body) = post(&server, "/ui/api/chat", json!({"text": "hello"})).await;
    assert_eq!(status, 401, "{body}");
    let response = server
        .client
        .post(format!("{}/ui/api/chat", server.root))
        .bearer_auth(token)
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
}

#[tokio::test]
async fn a_live_run_streams_its_text_between_the_journal_entries() {
    let server = start(None).await;
    let (run_id, _) = chat(&server, json!({"text": "stream 100"})).await;
    let url = format!("{}/ui/api/runs/{run_id}/events", server.root);
    let body = server.client.get(url).send().await.unwrap().text().await.unwrap();
    let (mut text, mut deltas, mut seqs) = (String::new(), 0, Vec::new());
    for block in body.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let field = |name: &str| {
            block.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned())
        };
        let Some(data) = field("data:") else { continue };
        match field("event:").as_deref() {
            Some("delta") => {
                let delta: Value = serde_json::from_str(&data).unwrap();
                assert_schema("Delta", &delta);
                assert!(field("id:").is_none(), "a delta has no id: {block}");
                text.push_str(delta["delta"].as_str().unwrap());
                deltas += 1;
            }
            Some("end") => {}
            other => {
                assert_eq!(other, None, "{block}");
                let entry: Value = serde_json::from_str(&data).unwrap();
                assert_schema("Entry", &entry);
                seqs.push(entry["seq"].as_u64().unwrap());
            }
        }
    }
    assert!(body.contains("event: end"), "{body}");
    assert!(deltas > 10, "{deltas} deltas in {body}");
    let run = run_of(&server, &run_id).await;
    assert!(answer(&run).ends_with(&text), "the streamed text is the answer's end: {text}");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "every entry once, in order");
}
