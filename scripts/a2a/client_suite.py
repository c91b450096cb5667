#!/usr/bin/env python3
"""The official A2A Python client (a2a-sdk 1.x) against `agentloop serve --agent echo`.

usage: client_suite.py AGENT_URL [--binding JSONRPC|HTTP+JSON] [--push]

AGENT_URL is the agent's base URL (its card is AGENT_URL/.well-known/agent-card.json).
Runs every scenario, prints one line per scenario (PASS/FAIL and why), and exits 1 if
any failed. The echo agent's commands drive the task states (see
crates/agentloop-server/src/echo.rs). With --push (the server must allow 127.0.0.1 as a
push destination), a webhook on 127.0.0.1 receives a task's updates.
"""
import argparse
import asyncio
import http.server
import json
import queue
import sys
import threading
import traceback

import httpx

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import (
    get_artifact_text,
    get_message_text,
    new_data_message,
    new_text_message,
)
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError


class Suite:
    def __init__(self, url: str, binding: str, http: httpx.AsyncClient) -> None:
        self.url, self.binding, self.http = url, binding, http
        self.failures = 0

    async def client(self, streaming: bool):
        cfg = ClientConfig(
            streaming=streaming,
            httpx_client=self.http,
            supported_protocol_bindings=[self.binding],
            use_client_preference=True,
        )
        return await create_client(self.url, client_config=cfg)

    async def run(self, name, scenario) -> None:
        try:
            await scenario()
            print(f"PASS {self.binding} {name}")
        except Exception:  # noqa: BLE001 - every failure is reported
            self.failures += 1
            print(f"FAIL {self.binding} {name}")
            traceback.print_exc(file=sys.stdout)


def payload(event):
    kind = event.WhichOneof("payload")
    return kind, getattr(event, kind)


def state_of(event):
    kind, body = payload(event)
    if kind == "task":
        return body.status.state
    if kind == "status_update":
        return body.status.state
    return None


async def collect(events):
    out = []
    async for event in events:
        out.append(event)
    return out


class Webhook:
    """A webhook on 127.0.0.1: every POST's token header and JSON body, in a queue."""

    def __init__(self) -> None:
        received = self.received = queue.Queue()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                received.put((self.headers.get("X-A2A-Notification-Token"), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def states(self, until, timeout=20.0):
        """The states of the updates received, until one is `until`."""
        seen = []
        while True:
            token, body = self.received.get(timeout=timeout)
            state = (body.get("statusUpdate") or body.get("task") or {}).get("status", {}).get("state")
            seen.append((token, state))
            if state == until:
                return seen


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--binding", default="JSONRPC")
    ap.add_argument("--push", action="store_true")
    args = ap.parse_args()
    async with httpx.AsyncClient(timeout=60) as http:
        suite = Suite(args.url, args.binding, http)
        streaming = await suite.client(True)
        blocking = await suite.client(False)
        state = {}

        async def stream_in_order():
            msg = new_text_message("stream 4", role=Role.ROLE_USER)
            events = await collect(streaming.send_message(SendMessageRequest(message=msg)))
            kinds = [payload(e)[0] for e in events]
            expect(kinds[0] == "task", f"first event {kinds[0]}")
            expect(state_of(events[-1]) == TaskState.TASK_STATE_COMPLETED, f"last {events[-1]}")
            chunks = [payload(e)[1] for e in events if payload(e)[0] == "artifact_update"]
            expect(len(chunks) == 5, f"{len(chunks)} artifact updates")
            last = chunks[-1]
            expect(last.last_chunk, "the last chunk says so")
            expect(get_artifact_text(last.artifact) == "chunk 1 chunk 2 chunk 3 chunk 4", "answer")
            state["task"] = payload(events[0])[1].id
            state["context"] = payload(events[0])[1].context_id

        async def blocking_send():
            msg = new_text_message("hello from python", role=Role.ROLE_USER)
            events = await collect(blocking.send_message(SendMessageRequest(message=msg)))
            expect(len(events) == 1, f"{len(events)} responses")
            task = payload(events[0])[1]
            expect(task.status.state == TaskState.TASK_STATE_COMPLETED, f"state {task.status.state}")
            expect(get_artifact_text(task.artifacts[0]) == "hello from python", "echoed")

        async def get_with_history():
            task = await blocking.get_task(GetTaskRequest(id=state["task"], history_length=1))
            expect(task.status.state == TaskState.TASK_STATE_COMPLETED, "completed")
            expect(len(task.history) == 1, f"history {len(task.history)}")
            expect(task.history[0].role == Role.ROLE_AGENT, "the last message is the agent's")

        async def list_tasks():
            listed = await blocking.list_tasks(ListTasksRequest(context_id=state["context"]))
            expect([t.id for t in listed.tasks] == [state["task"]], f"{[t.id for t in listed.tasks]}")
            page = await blocking.list_tasks(ListTasksRequest(page_size=1))
            expect(len(page.tasks) == 1 and page.next_page_token, "a page and a token")
            nxt = await blocking.list_tasks(ListTasksRequest(page_size=1, page_token=page.next_page_token))
            expect(nxt.tasks[0].id != page.tasks[0].id, "the next page moves on")

        async def cancel():
            msg = new_text_message("slow 30", role=Role.ROLE_USER)
            cfg = SendMessageConfiguration(return_immediately=True)
            events = await collect(blocking.send_message(SendMessageRequest(message=msg, configuration=cfg)))
            task = payload(events[0])[1]
            cancelled = await blocking.cancel_task(CancelTaskRequest(id=task.id))
            expect(cancelled.status.state == TaskState.TASK_STATE_CANCELED, f"{cancelled.status.state}")
            try:
                await blocking.cancel_task(CancelTaskRequest(id=task.id))
                raise AssertionError("a second cancel was accepted")
            except TaskNotCancelableError:
                pass

        async def subscribe_after_disconnect():
            msg = new_text_message("stream 40", role=Role.ROLE_USER)
            events = streaming.send_message(SendMessageRequest(message=msg))
            first = await events.__anext__()
            task_id = payload(first)[1].id
            await events.__anext__()
            await events.aclose()  # the client goes away mid-stream; the task goes on
            resumed = await collect(streaming.subscribe(SubscribeToTaskRequest(id=task_id)))
            expect(state_of(resumed[-1]) == TaskState.TASK_STATE_COMPLETED, f"last {resumed[-1]}")
            task = await blocking.get_task(GetTaskRequest(id=task_id))
            text = get_artifact_text(task.artifacts[0])
            expect(text == " ".join(f"chunk {i}" for i in range(1, 41)), f"answer {text[:60]}")

        async def input_required_round_trip():
            msg = new_text_message("ask What is your favourite colour?", role=Role.ROLE_USER)
            events = await collect(streaming.send_message(SendMessageRequest(message=msg)))
            expect(state_of(events[-1]) == TaskState.TASK_STATE_INPUT_REQUIRED, f"{events[-1]}")
            status = payload(events[-1])[1].status
            expect(get_message_text(status.message) == "What is your favourite colour?", "question")
            task_id, context_id = payload(events[0])[1].id, payload(events[0])[1].context_id
            answer = new_text_message("green", role=Role.ROLE_USER, task_id=task_id, context_id=context_id)
            events = await collect(streaming.send_message(SendMessageRequest(message=answer)))
            expect(state_of(events[-1]) == TaskState.TASK_STATE_COMPLETED, f"{events[-1]}")
            task = await blocking.get_task(GetTaskRequest(id=task_id))
            expect(get_artifact_text(task.artifacts[0]) == "Thank you. You answered: green", "answer")

        async def approval_round_trip():
            msg = new_text_message("approve", role=Role.ROLE_USER)
            events = await collect(blocking.send_message(SendMessageRequest(message=msg)))
            task = payload(events[-1])[1]
            expect(task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, "waits for approval")
            decision = new_data_message({"decision": "approve"}, role=Role.ROLE_USER,
                                        task_id=task.id, context_id=task.context_id)
            events = await collect(blocking.send_message(SendMessageRequest(message=decision)))
            done = payload(events[-1])[1]
            expect(done.status.state == TaskState.TASK_STATE_COMPLETED, f"{done.status.state}")
            expect("ran" in get_artifact_text(done.artifacts[0]), "the guarded action ran")

        async def failure():
            msg = new_text_message("fail", role=Role.ROLE_USER)
            events = await collect(streaming.send_message(SendMessageRequest(message=msg)))
            expect(state_of(events[-1]) == TaskState.TASK_STATE_FAILED, f"{events[-1]}")

        async def unknown_task():
            try:
                await blocking.get_task(GetTaskRequest(id="run_does_not_exist"))
                raise AssertionError("an unknown task was found")
            except TaskNotFoundError:
                pass

        async def push_to_a_webhook():
            hook = Webhook()
            msg = new_text_message("slow 1", role=Role.ROLE_USER)
            cfg = SendMessageConfiguration(return_immediately=True)
            events = await collect(blocking.send_message(SendMessageRequest(message=msg, configuration=cfg)))
            task = payload(events[0])[1]
            config = TaskPushNotificationConfig(task_id=task.id, url=hook.url, token="hook-secret")
            created = await blocking.create_task_push_notification_config(config)
            expect(created.id and created.url == hook.url, f"created {created}")
            got = await blocking.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=created.id))
            expect(got.url == hook.url, "get")
            listed = await blocking.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id))
            expect([c.id for c in listed.configs] == [created.id], "list")
            seen = await asyncio.to_thread(hook.states, "TASK_STATE_COMPLETED")
            expect(all(token == "hook-secret" for token, _ in seen), "the token header")
            expect(seen[-1][1] == "TASK_STATE_COMPLETED", f"{seen}")
            await blocking.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=created.id))
            listed = await blocking.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id))
            expect(len(listed.configs) == 0, "deleted")
            hook.server.shutdown()

        scenarios = [
            ("stream in order", stream_in_order),
            ("blocking send", blocking_send),
            ("get with history", get_with_history),
            ("list and page", list_tasks),
            ("cancel", cancel),
            ("subscribe after disconnect", subscribe_after_disconnect),
            ("input-required round trip", input_required_round_trip),
            ("approval round trip", approval_round_trip),
            ("failure", failure),
            ("unknown task", unknown_task),
        ]
        if args.push:
            scenarios.append(("push to a webhook", push_to_a_webhook))
        for name, scenario in scenarios:
            await suite.run(name, scenario)
        await streaming.close()
        await blocking.close()
        return 1 if suite.failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
