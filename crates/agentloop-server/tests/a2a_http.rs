//! The A2A server over HTTP, both bindings, against the echo agent on SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{message, sse_events, start, state_of};
use secrecy::SecretString;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_names_both_bindings_and_the_skill() {
    let server = start(None).await;
    for url in [
        format!("{}/.well-known/agent-card.json", server.url),
        format!("{}/.well-known/agent-card.json", server.root),
    ] {
        let card: Value = server.client.get(&url).send().await.unwrap().json().await.unwrap();
        assert_eq!(card["name"], "echo");
        assert_eq!(card["capabilities"]["streaming"], true);
        let bindings: Vec<&str> = card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["protocolBinding"].as_str().unwrap())
            .collect();
        assert_eq!(bindings, ["JSONRPC", "HTTP+JSON"]);
        assert_eq!(card["supportedInterfaces"][0]["url"], server.url);
        assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
        let tags = card["skills"][0]["tags"].as_array().unwrap();
        assert!(tags.contains(&json!("calculator")), "{card}");
        assert!(card.get("securitySchemes").is_none());
        assert_eq!(
            card["capabilities"]["extensions"][0]["uri"],
            agentloop_server::convert::OUTPUT_EXTENSION
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_get_and_list_over_json_rpc() {
    let server = start(None).await;
    let task = server.send("hello agent", None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello agent");
    let id = task["id"].as_str().unwrap();
    let context = task["contextId"].as_str().unwrap();

    let got = server.result("GetTask", json!({"id": id, "historyLength": 1})).await;
    assert_eq!(got["history"].as_array().unwrap().len(), 1);
    assert_eq!(got["history"][0]["role"], "ROLE_AGENT");

    // A second task in the same context: the agent's session keeps the conversation.
    let mut second = message("second", None);
    second["contextId"] = json!(context);
    let task2 = server.result("SendMessage", json!({"message": second})).await["task"].clone();
    assert_eq!(task2["contextId"], context);
    let listed = server.result("ListTasks", json!({"contextId": context})).await;
    assert_eq!(listed["totalSize"], 2);
    let ids: Vec<&str> =
        listed["tasks"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [task2["id"].as_str().unwrap(), id], "newest first");

    // Paging.
    let page = server.result("ListTasks", json!({"pageSize": 1})).await;
    assert_eq!(page["tasks"].as_array().unwrap().len(), 1);
    let next = page["nextPageToken"].as_str().unwrap();
    let page2 = server.result("ListTasks", json!({"pageSize": 1, "pageToken": next})).await;
    assert_eq!(page2["tasks"][0]["id"], id);
    let done = server.result("ListTasks", json!({"status": "TASK_STATE_COMPLETED"})).await;
    assert_eq!(done["tasks"].as_array().unwrap().len(), 2);
    let waiting = server.result("ListTasks", json!({"status": "TASK_STATE_INPUT_REQUIRED"})).await;
    assert_eq!(waiting["tasks"].as_array().unwrap().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sends_the_task_chunks_the_answer_and_the_end_in_order() {
    let server = start(None).await;
    let events = server
        .rpc_stream("SendStreamingMessage", json!({"message": message("stream 4", None)}), None)
        .await;
    let updates: Vec<&Value> = events.iter().map(|(_, e)| &e["result"]).collect();
    assert!(updates[0].get("task").is_some(), "{updates:?}");
    assert_eq!(state_of(updates[1]), Some("TASK_STATE_WORKING"));
    let chunks: Vec<&str> = updates
        .iter()
        .filter_map(|u| u.get("artifactUpdate"))
        .map(|a| a["artifact"]["parts"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        chunks,
        ["chunk 1 ", "chunk 2 ", "chunk 3 ", "chunk 4", "chunk 1 chunk 2 chunk 3 chunk 4"]
    );
    assert_eq!(state_of(updates.last().unwrap()), Some("TASK_STATE_COMPLETED"));
    // Event ids never go back.
    let seqs: Vec<u64> =
        events.iter().filter_map(|(id, _)| id.as_ref()?.split('.').next()?.parse().ok()).collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_is_answered_by_the_next_message_to_the_task() {
    let server = start(None).await;
    let task = server.send("ask What is your favourite colour?", None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "What is your favourite colour?");
    let id = task["id"].as_str().unwrap();
    let done = server.send("blue", Some(id)).await;
    assert_eq!(done["id"], id, "the same task goes on");
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "Thank you. You answered: blue");
    let history: Vec<&str> = done["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["parts"][0]["text"].as_str())
        .collect();
    assert!(history.contains(&"blue"), "{history:?}");
    // A finished task cannot be continued.
    let again = server.rpc("SendMessage", json!({"message": message("more", Some(id))})).await;
    assert_eq!(again["error"]["code"], -32004);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_a_data_part_and_the_call_then_runs() {
    let server = start(None).await;
    let task = server.send("approve", None).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let parts = task["status"]["message"]["parts"].as_array().unwrap();
    let calls = parts.iter().find_map(|p| p.get("data")).unwrap()["approvalRequired"].clone();
    assert_eq!(calls[0]["tool"], "guarded_action");
    let id = task["id"].as_str().unwrap();
    // Text that is not a decision is refused; the task still waits.
    let vague = server.rpc("SendMessage", json!({"message": message("hmm", Some(id))})).await;
    assert_eq!(vague["error"]["code"], -32602);
    let mut decision = message("", Some(id));
    decision["parts"] = json!([{"data": {"decision": "approve"}}]);
    let done = server.result("SendMessage", json!({"message": decision})).await["task"].clone();
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "Guarded action: the guarded action ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_a_working_task_and_a_waiting_one() {
    let server = start(None).await;
    let params =
        json!({"message": message("slow 30", None), "configuration": {"returnImmediately": true}});
    let task = server.result("SendMessage", params).await["task"].clone();
    let id = task["id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let cancelled = server.result("CancelTask", json!({"id": id})).await;
    assert_eq!(cancelled["status"]["state"], "TASK_STATE_CANCELED");
    assert!(started.elapsed().as_secs() < 5);
    let again = server.rpc("CancelTask", json!({"id": id})).await;
    assert_eq!(again["error"]["code"], -32002);

    let waiting = server.send("ask Anything?", None).await;
    let cancelled = server.result("CancelTask", json!({"id": waiting["id"]})).await;
    assert_eq!(cancelled["status"]["state"], "TASK_STATE_CANCELED");
    // The session is free again.
    let mut next = message("hello", None);
    next["contextId"] = waiting["contextId"].clone();
    let task = server.result("SendMessage", json!({"message": next})).await["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_follows_a_task_from_the_journal_and_resumes_after_an_event_id() {
    let server = start(None).await;
    let params =
        json!({"message": message("slow 0.5", None), "configuration": {"returnImmediately": true}});
    let id = server.result("SendMessage", params).await["task"]["id"].as_str().unwrap().to_owned();
    let events = server.rpc_stream("SubscribeToTask", json!({"id": id}), None).await;
    assert!(events[0].1["result"].get("task").is_some());
    assert_eq!(state_of(&events.last().unwrap().1["result"]), Some("TASK_STATE_COMPLETED"));
    assert!(events.iter().any(|(_, e)| e["result"].get("artifactUpdate").is_some()));

    // Ended: a new subscription is refused; one that resumes gets what follows the id.
    let refused = server.rpc("SubscribeToTask", json!({"id": id})).await;
    assert_eq!(refused["error"]["code"], -32004);
    let resumed = server.rpc_stream("SubscribeToTask", json!({"id": id}), Some("0")).await;
    assert!(resumed[0].1["result"].get("task").is_none(), "no snapshot on resume");
    assert_eq!(state_of(&resumed.last().unwrap().1["result"]), Some("TASK_STATE_COMPLETED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rest_binding() {
    let server = start(None).await;
    let body = json!({"message": message("rest hello", None)});
    let response: Value = server
        .client
        .post(format!("{}/message:send", server.url))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = response["task"]["id"].as_str().unwrap();
    assert_eq!(response["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let task: Value = server
        .client
        .get(format!("{}/tasks/{id}?historyLength=1", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(task["history"].as_array().unwrap().len(), 1);
    let listed: Value = server
        .client
        .get(format!("{}/tasks?pageSize=5", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tasks"][0]["id"], id);
    let missing = server.client.get(format!("{}/tasks/run_nope", server.url)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let error: Value = missing.json().await.unwrap();
    assert_eq!(error["error"]["details"][0]["reason"], "TASK_NOT_FOUND");

    let stream_body = json!({"message": message("stream 2", None)});
    let response = server
        .client
        .post(format!("{}/message:stream", server.url))
        .json(&stream_body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = sse_events(response).await;
    assert!(events[0].1.get("task").is_some());
    assert_eq!(state_of(&events.last().unwrap().1), Some("TASK_STATE_COMPLETED"));

    let slow =
        json!({"message": message("slow 30", None), "configuration": {"returnImmediately": true}});
    let slow: Value = server
        .client
        .post(format!("{}/message:send", server.url))
        .json(&slow)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let slow_id = slow["task"]["id"].as_str().unwrap();
    let cancelled: Value = server
        .client
        .post(format!("{}/tasks/{slow_id}:cancel", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cancelled["status"]["state"], "TASK_STATE_CANCELED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_guard_every_method_but_the_card() {
    let server =
        start(Some(agentloop_server::Auth::Bearer(vec![SecretString::from("s3cret".to_owned())])))
            .await;
    let card: Value = server
        .client
        .get(format!("{}/.well-known/agent-card.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"].is_object(), "{card}");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    for token in [None, Some("wrong"), Some("s3cret ")] {
        let mut request = server.client.post(&server.url).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        if token == Some("s3cret ") {
            assert_eq!(response.status(), 200, "trailing space trimmed");
        } else {
            assert_eq!(response.status(), 401);
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
        }
    }
    let rest = server.client.get(format!("{}/tasks", server.url)).send().await.unwrap();
    assert_eq!(rest.status(), 401);
    let ok = server
        .client
        .get(format!("{}/tasks", server.url))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_chooses_its_task_s_typed_answer() {
    let server = start(None).await;
    let schema = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "people": {"type": "integer", "minimum": 0}},
        "required": ["city"],
    });
    let with_output = |text: &str, output: Value| {
        let mut m = message(text, None);
        m["metadata"] = json!({"agentloop": {"output": output}});
        m["extensions"] = json!([agentloop_server::convert::OUTPUT_EXTENSION]);
        m
    };
    let output = json!({"schema": schema, "name": "place", "description": "A place."});
    let sent = with_output(r#"{"city": "Lyon", "people": 522250}"#, output.clone());
    let task = server.result("SendMessage", json!({"message": sent})).await["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let part = &task["artifacts"][0]["parts"][0];
    assert_eq!(part["data"], json!({"city": "Lyon", "people": 522250}), "{task}");
    // Read back from the journal: the same.
    let id = task["id"].as_str().unwrap();
    let got = server.result("GetTask", json!({"id": id})).await;
    assert_eq!(got["artifacts"][0]["parts"][0]["data"]["city"], "Lyon");

    // An answer the schema refuses: sent back, then the task fails with the errors.
    let wrong = with_output(r#"{"people": -1}"#, json!({"schema": schema, "maxRetries": 0}));
    let task = server.result("SendMessage", json!({"message": wrong})).await["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert_eq!(task["metadata"]["agentloop"]["stopReason"], "output_invalid");
    let errors = task["metadata"]["agentloop"]["detail"]["errors"].as_str().unwrap();
    assert!(errors.contains("\"city\" is a required property"), "{errors}");

    // Without it, the same text is the answer's text.
    let plain = server.send(r#"{"city": "Lyon"}"#, None).await;
    assert_eq!(plain["artifacts"][0]["parts"][0]["text"], r#"{"city": "Lyon"}"#);

    // Refused: not a schema, a schema no validator takes, too large, on a continued task.
    for (output, why) in [
        (json!("a string"), "not an object"),
        (json!({"schema": 3}), "not a JSON Schema"),
        (json!({"schema": {"type": "nonsense"}}), "not valid"),
        (json!({"schema": {"description": "x".repeat(70_000)}}), "over the limit"),
        (json!({"schema": schema, "maxRetries": 99}), "maxRetries"),
    ] {
        let response =
            server.rpc("SendMessage", json!({"message": with_output("hi", output)})).await;
        assert_eq!(response["error"]["code"], -32602, "{response}");
        let text = response["error"]["message"].as_str().unwrap();
        assert!(text.contains(why), "{why}: {text}");
    }
    let asked = server.send("ask Which city?", None).await;
    let mut answer = with_output("Lyon", json!({"schema": schema}));
    answer["taskId"] = asked["id"].clone();
    let response = server.rpc("SendMessage", json!({"message": answer})).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
}
