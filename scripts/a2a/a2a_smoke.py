#!/usr/bin/env python3
"""Minimal A2A 1.0 client smoke test (a2a-sdk >= 1.0).

usage: a2a_smoke.py BASE_URL [TEXT] [--binding JSONRPC|HTTP+JSON] [--no-stream]
BASE_URL is where /.well-known/agent-card.json is served.
"""
import argparse
import asyncio

import httpx
from google.protobuf.json_format import MessageToJson

from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_stream_response_text, new_text_message
from a2a.types import GetTaskRequest, ListTasksRequest, Role, SendMessageRequest


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("text", nargs="?", default="hello from a2a-sdk")
    ap.add_argument("--binding", default="JSONRPC")
    ap.add_argument("--no-stream", action="store_true")
    a = ap.parse_args()

    async with httpx.AsyncClient(timeout=60) as http:
        cfg = ClientConfig(
            streaming=not a.no_stream,
            httpx_client=http,
            supported_protocol_bindings=[a.binding],
            use_client_preference=True,
        )
        client = await create_client(a.url, client_config=cfg)
        msg = new_text_message(a.text, role=Role.ROLE_USER)
        task_id = None
        # send_message streams (SendStreamingMessage) when both sides support it,
        # otherwise yields the single SendMessage result.
        async for ev in client.send_message(SendMessageRequest(message=msg)):
            kind = ev.WhichOneof("payload")
            print(f"[{kind}]", MessageToJson(ev, indent=None))
            body = getattr(ev, kind)
            task_id = getattr(body, "task_id", None) or getattr(body, "id", None) or task_id
            print("   text:", get_stream_response_text(ev))
        if task_id:
            t = await client.get_task(GetTaskRequest(id=task_id, history_length=10))
            print("[GetTask]", MessageToJson(t, indent=None))
            lst = await client.list_tasks(ListTasksRequest(page_size=5))
            print("[ListTasks]", len(lst.tasks), "tasks; next:", lst.next_page_token)
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
