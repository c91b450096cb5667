//! The browser UI's page and JSON API (`/ui`, `/ui/api/…`) over the echo agent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use agentloop_server::Auth;
use common::{sse_events, start, TestServer};
use secrecy::SecretString;
use serde_json::Value;
use std::collections::HashSet;

async fn get(server: &TestServer, path: &str) -> reqwest::Response {
    server.client.get(format!("{}{path}", server.root)).send().await.unwrap()
}

async fn get_json(server: &TestServer, path: &str) -> (u16, Value) {
    let response = get(server, path).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_page_and_its_assets_carry_a_strict_csp() {
    let server = start(None).await;
    for (path, kind) in [
        ("/ui", "text/html"),
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/act.js", "text/javascript"),
        ("/ui/waterfall.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ] {
        let response = get(&server, path).await;
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers();
        assert!(headers["content-type"].to_str().unwrap().starts_with(kind), "{path}");
        assert_eq!(headers["content-security-policy"], agentloop_server::ui::CSP, "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
    }
    let page = get(&server, "/ui").await.text().await.unwrap();
    assert!(page.contains(r#"<script src="/ui/app.js" defer></script>"#));
    // No inline script: the only script element loads the file.
    assert_eq!(page.matches("<script").count(), 3);
    assert!(page.contains(r#"<script src="/ui/waterfall.js" defer></script>"#));
    assert!(page.contains(r#"<script src="/ui/act.js" defer></script>"#));
    for path in ["/ui/app.js", "/ui/act.js", "/ui/waterfall.js"] {
        let script = get(&server, path).await.text().await.unwrap();
        assert!(!script.contains("innerHTML"), "{path}: the page sets text, never HTML");
    }
    // The API answers carry the headers too.
    let response = get(&server, "/ui/api/runs").await;
    assert_eq!(response.headers()["content-security-policy"], agentloop_server::ui::CSP);
}

#[tokio::test]
async fn the_list_filters_and_pages_with_a_cursor() {
    let server = start(None).await;
    let mut started = Vec::new();
    for text in ["hello", "calc 2 + 2", "fail", "one more", "and another"] {
        let task = server.send(text, None).await;
        started.push(task["id"].as_str().unwrap().to_owned());
    }
    let (status, all) = get_json(&server, "/ui/api/runs").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["runs"].as_array().unwrap().len(), 5);
    assert!(all["next"].is_null());
    let row = &all["runs"][0];
    for field in ["run_id", "state", "agent", "session", "created_ms", "updated_ms", "entries"] {
        assert!(row.get(field).is_some(), "{field} in {row}");
    }
    assert_eq!(row["agent"], "echo");

    // State and agent filters.
    let (_, failed) = get_json(&server, "/ui/api/runs?state=failed").await;
    assert_eq!(failed["runs"].as_array().unwrap().len(), 1, "{failed}");
    assert_eq!(failed["runs"][0]["state"], "failed");
    let (_, finished) = get_json(&server, "/ui/api/runs?state=finished&agent=echo").await;
    assert_eq!(finished["runs"].as_array().unwrap().len(), 4);
    let (_, nobody) = get_json(&server, "/ui/api/runs?agent=nobody").await;
    assert!(nobody["runs"].as_array().unwrap().is_empty());
    // A time range: the runs created in it.
    let (first, last) =
        (all["runs"][4]["created_ms"].as_u64().unwrap(), row["created_ms"].as_u64().unwrap());
    let (_, range) =
        get_json(&server, &format!("/ui/api/runs?since={first}&until={}", last + 1)).await;
    assert_eq!(range["runs"].as_array().unwrap().len(), 5, "{range}");
    let (_, later) = get_json(&server, &format!("/ui/api/runs?since={}", last + 1)).await;
    assert!(later["runs"].as_array().unwrap().is_empty(), "{later}");
    let (_, earlier) = get_json(&server, &format!("/ui/api/runs?until={first}")).await;
    assert!(earlier["runs"].as_array().unwrap().is_empty(), "{earlier}");
    let session = row["session"].as_str().unwrap();
    let (_, one) = get_json(&server, &format!("/ui/api/runs?session={session}")).await;
    assert_eq!(ids(&one), vec![row["run_id"].as_str().unwrap().to_owned()]);
    // A search: in the input and in the answer, ASCII letters in either case.
    assert_eq!(row["input"], "and another", "{row}");
    let (_, calc) = get_json(&server, "/ui/api/runs?q=CALC%202").await;
    assert_eq!(calc["runs"].as_array().unwrap().len(), 1, "{calc}");
    assert_eq!(calc["runs"][0]["input"], "calc 2 + 2");
    let answered = calc["runs"][0]["answer"].as_str().unwrap().to_owned();
    let (_, by_answer) = get_json(&server, &format!("/ui/api/runs?q={answered}")).await;
    assert_eq!(ids(&by_answer), ids(&calc), "{by_answer}");
    let (_, none) = get_json(&server, "/ui/api/runs?q=nothing%20like%20this").await;
    assert!(none["runs"].as_array().unwrap().is_empty());
    let (_, blank) = get_json(&server, "/ui/api/runs?q=%20%20").await;
    assert_eq!(ids(&blank), ids(&all), "a blank search is no filter");

    // Pages of 2: every run once, in the order of the whole listing.
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(cursor) => format!("/ui/api/runs?limit=2&after={cursor}"),
            None => "/ui/api/runs?limit=2".to_owned(),
        };
        let (status, page) = get_json(&server, &path).await;
        assert_eq!(status, 200, "{page}");
        assert!(page["runs"].as_array().unwrap().len() <= 2);
        paged.extend(ids(&page));
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, ids(&all));
    assert_eq!(paged.iter().collect::<HashSet<_>>().len(), 5);
}

#[tokio::test]
async fn bad_parameters_get_400_with_a_message() {
    let server = start(None).await;
    for (query, says) in [
        ("state=sleeping", "state"),
        ("limit=0", "limit"),
        ("limit=many", "limit"),
        ("limit=100000", "limit"),
        ("after=%21%21", "after"),
        ("colour=blue", "colour"),
        ("since=5&until=5", "since"),
        ("since=yesterday", "since"),
        (&format!("q={}", "x".repeat(201)), "q"),
    ] {
        let (status, body) = get_json(&server, &format!("/ui/api/runs?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{query}: {message}");
    }
    let response = server
        .client
        .get(format!("{}/ui/api/runs/some-run/events", server.root))
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let (status, body) = get_json(&server, "/ui/api/runs/no-such-run").await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = get_json(&server, "/ui/api/runs/no-such-run/events").await;
    assert_eq!(status, 404);
    let (status, _) = get_json(&server, "/ui/api/nothing-here").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_run_shows_its_summary_and_journal() {
    let server = start(None).await;
    let task = server.send("calc 2 + 2", None).await;
    let run_id = task["id"].as_str().unwrap();
    let (status, body) = get_json(&server, &format!("/ui/api/runs/{run_id}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["run"]["run_id"], run_id);
    assert_eq!(body["run"]["state"], "finished");
    let entries = body["entries"].as_array().unwrap();
    assert_eq!(body["run"]["entries"], entries.len());
    for (seq, entry) in entries.iter().enumerate() {
        assert_eq!(entry["seq"], seq);
        assert!(entry["at_ms"].as_u64().unwrap() > 0);
        assert_eq!(entry["kind"], entry["event"]["type"], "{entry}");
    }
    let kinds: Vec<&str> = entries.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"run_started"));
    assert_eq!(kinds.last(), Some(&"run_finished"));
    let completed = entries.iter().find(|e| e["kind"] == "tool_completed").unwrap();
    assert_eq!(completed["event"]["name"], "calculator");
}

#[tokio::test]
async fn events_resume_after_last_event_id_without_gap_or_duplicate() {
    let server = start(None).await;
    let task = server.send("calc 2 + 2", None).await;
    let run_id = task["id"].as_str().unwrap();
    let url = format!("{}/ui/api/runs/{run_id}/events", server.root);
    let response = server.client.get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let all = sse_events(response).await;
    let seqs: Vec<u64> = all.iter().filter_map(|(id, _)| id.as_ref()?.parse().ok()).collect();
    let total = seqs.len() as u64;
    assert!(total >= 4, "{all:?}");
    assert_eq!(seqs, (0..total).collect::<Vec<_>>(), "every entry once, in order");
    let (_, last) = all.last().unwrap();
    assert_eq!(last, &serde_json::json!({}), "the stream ends with `end`");
    for (id, data) in &all[..all.len() - 1] {
        assert_eq!(id.as_deref(), Some(data["seq"].to_string().as_str()));
    }

    // Resumed after seq 1: from 2 on, nothing before, nothing missing.
    let response = server.client.get(&url).header("Last-Event-ID", "1").send().await.unwrap();
    let resumed = sse_events(response).await;
    let seqs: Vec<u64> = resumed.iter().filter_map(|(id, _)| id.as_ref()?.parse().ok()).collect();
    assert_eq!(seqs, (2..total).collect::<Vec<_>>());
}

#[tokio::test]
async fn events_follow_a_running_run_to_its_end() {
    let server = start(None).await;
    // `slow 1` is still running when the stream opens.
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": common::message("slow 1", None),
            "configuration": {"returnImmediately": true}}});
    let response: Value =
        server.client.post(&server.url).json(&body).send().await.unwrap().json().await.unwrap();
    let run_id = response["result"]["task"]["id"].as_str().unwrap().to_owned();
    let url = format!("{}/ui/api/runs/{run_id}/events", server.root);
    let events = sse_events(server.client.get(&url).send().await.unwrap()).await;
    let kinds: Vec<&str> = events.iter().filter_map(|(_, data)| data["kind"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
}

#[tokio::test]
async fn the_api_requires_the_servers_token_but_the_page_does_not() {
    let auth = Auth::Bearer(vec![SecretString::from("ui-secret".to_owned())]);
    let server = start(Some(auth)).await;
    for path in ["/ui/api/runs", "/ui/api/runs/any", "/ui/api/runs/any/events"] {
        let response = get(&server, path).await;
        assert_eq!(response.status(), 401, "{path}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["scheme"], "bearer");
    }
    let response = server
        .client
        .get(format!("{}/ui/api/runs", server.root))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = server
        .client
        .get(format!("{}/ui/api/runs", server.root))
        .bearer_auth("ui-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(get(&server, "/ui").await.status(), 200);
}
