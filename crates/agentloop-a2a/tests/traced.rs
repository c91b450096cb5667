//! Trace context across A2A: a run that calls a remote agent through `A2aAgentTool` sends
//! its tool call's `traceparent`; our server makes the remote task's run a child of it. Both
//! sides are traced by `agentloop-otel` into one in-memory sink, over both bindings.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agentloop::prelude::*;
use agentloop::provider::scripted::{ScriptedModel, ScriptedTurn};
use agentloop::store::MemoryStore;
use agentloop_a2a::{A2aAgentTool, A2aClient, Binding};
use agentloop_otel::testing::{MemorySink, Span};
use agentloop_otel::{Telemetry, TelemetryConfig};
use agentloop_server::{echo, ServedAgent, Server, ServerConfig};
use serde_json::json;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_agents_run_nests_under_the_calling_tool_span() {
    let exporter = MemorySink::default();
    let telemetry = Telemetry::with_sink(TelemetryConfig::default(), exporter.clone(), None);

    // The server: the echo agent, traced.
    let store = Arc::new(MemoryStore::new());
    let agent = echo::echo_builder(store.clone(), store)
        .unwrap()
        .observer(telemetry.observer())
        .build()
        .unwrap();
    let served = ServedAgent::new(agent, echo::ECHO_DESCRIPTION).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig { public_url: root.clone(), ..ServerConfig::default() };
    let server = Server::new(vec![served], config).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));

    // The spans of the bindings tried before.
    let mut seen = 0;
    for binding in [Binding::JsonRpc, Binding::HttpJson] {
        let client =
            A2aClient::builder().prefer([binding]).resolve(&format!("{root}/echo")).await.unwrap();
        let model = ScriptedModel::new([
            ScriptedTurn::tool_call("echo", json!({"message": "hello"})),
            ScriptedTurn::text("done"),
        ]);
        let caller = Agent::builder(model)
            .name("caller")
            .dyn_tool(Arc::new(A2aAgentTool::new(client)))
            .observer(telemetry.observer())
            .build()
            .unwrap();
        caller.run("Ask echo.").await.unwrap();
        telemetry.flush();
        let spans = exporter.spans()[seen..].to_vec();
        seen += spans.len();
        let find = |name: &str| -> &Span {
            spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
                panic!(
                    "{binding:?}: no {name} in {:?}",
                    spans.iter().map(|s| &s.name).collect::<Vec<_>>()
                )
            })
        };
        let caller_root = find("invoke_agent caller");
        let tool = find("execute_tool echo");
        let remote = find("invoke_agent echo");
        assert_eq!(remote.trace_id, caller_root.trace_id, "{binding:?}");
        assert_eq!(remote.parent_span_id, tool.span_id, "{binding:?}");
        assert!(remote.end_time_unix_nano <= tool.end_time_unix_nano, "{binding:?}");
    }
    let _ = stop.send(());
}
