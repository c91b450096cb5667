"""A small A2A 1.0 agent on the official a2a-sdk server framework (JSON-RPC and HTTP+JSON).

The peer of the agentloop-a2a integration tests. Install with scripts/a2a/install.sh, then:

    $AGENTLOOP_A2A_PYTHON scripts/a2a/py_agent.py --port 41241

It prints `READY <base url>` on stdout once it accepts connections. The agent card
(/.well-known/agent-card.json) lists the JSON-RPC interface at /jsonrpc first and the
HTTP+JSON interface at /rest (unless --binding picks one); the card says it streams
(unless --no-streaming).

What it does depends on the first word of the user's message:

- `stream ...`  three artifact chunks of one artifact (append), a working status, then completed
- `ask ...`     input-required ("What is your name?"); the follow-up on the same task
                completes with "Hello, <answer>!"
- `fail ...`    failed, with the status message "the remote agent failed on purpose"
- `reject ...`  rejected
- `slow ...`    working, then sleeps 60 s (in small steps) before completing: for cancel
- `message ...` a single Message reply (no task)
- `auth ...`    completes with "authorization: yes|no" (whether the request carried
                `Authorization: Bearer secret-token`) and "api key: yes|no" (`X-Api-Key: k-123`)
- anything else: an artifact "echo: <text>", then completed
"""

import argparse
import asyncio
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    TaskState,
)


class TestAgent(AgentExecutor):
    """The behaviours listed in the module docstring."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        word = text.split(" ", 1)[0].lower() if text else ""
        task = context.current_task

        if word == "message" and task is None:
            await event_queue.enqueue_event(
                new_text_message(f"a message reply to: {text}", role=Role.ROLE_AGENT)
            )
            return

        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def agent_text(value: str):
            return updater.new_agent_message([new_text_part(value)])

        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"Hello, {text}!")], name="greeting")
            await updater.complete()
            return

        if word == "stream":
            await updater.start_work(agent_text("streaming three chunks"))
            artifact_id = "stream-artifact"
            for i in range(1, 4):
                await asyncio.sleep(0.05)
                await updater.add_artifact(
                    [new_text_part(f"chunk {i}. ")],
                    artifact_id=artifact_id,
                    name="chunks",
                    append=i > 1,
                    last_chunk=i == 3,
                )
            await updater.complete(agent_text("all chunks sent"))
        elif word == "ask":
            await updater.requires_input(agent_text("What is your name?"))
        elif word == "fail":
            await updater.start_work()
            await updater.failed(agent_text("the remote agent failed on purpose"))
        elif word == "reject":
            await updater.reject(agent_text("the remote agent will not do that"))
        elif word == "slow":
            await updater.start_work(agent_text("working slowly"))
            for _ in range(600):
                await asyncio.sleep(0.1)
            await updater.add_artifact([new_text_part("slow work done")])
            await updater.complete()
        elif word == "auth":
            headers = {k.lower(): v for k, v in context.call_context.state.get("headers", {}).items()}
            authorized = headers.get("authorization") == "Bearer secret-token"
            api_key = headers.get("x-api-key") == "k-123"
            answer = (
                f"authorization: {'yes' if authorized else 'no'}, "
                f"api key: {'yes' if api_key else 'no'}"
            )
            await updater.add_artifact([new_text_part(answer)])
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(f"echo: {text}")], name="echo")
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.cancel(updater.new_agent_message([new_text_part("cancelled on request")]))


def card(base: str, bindings: list[str], streaming: bool) -> AgentCard:
    interfaces = []
    for binding in bindings:
        path = "/jsonrpc" if binding == "JSONRPC" else "/rest"
        interfaces.append(
            AgentInterface(url=base + path, protocol_binding=binding, protocol_version="1.0")
        )
    return AgentCard(
        name="Py Test Agent",
        description="A test agent on the a2a-sdk server framework.",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo",
                name="Echo",
                description="Repeats the message back.",
                tags=["test"],
                examples=["echo hello"],
            ),
            AgentSkill(
                id="greet",
                name="Greet",
                description="Asks for a name, then greets.",
                tags=["test"],
                examples=["ask"],
            ),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument(
        "--binding",
        action="append",
        choices=["JSONRPC", "HTTP+JSON"],
        help="the bindings the card lists, in order (default: both, JSON-RPC first)",
    )
    parser.add_argument(
        "--no-streaming",
        action="store_true",
        help="the card says the agent does not stream (clients use blocking sends)",
    )
    args = parser.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    base = f"http://{args.host}:{port}"

    agent_card = card(base, args.binding or ["JSONRPC", "HTTP+JSON"], not args.no_streaming)
    handler = DefaultRequestHandler(
        agent_executor=TestAgent(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    routes = []
    routes += create_agent_card_routes(agent_card)
    routes += create_jsonrpc_routes(handler, rpc_url="/jsonrpc")
    routes += create_rest_routes(handler, path_prefix="/rest")
    app = Starlette(routes=routes)

    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
                return
            await asyncio.sleep(0.02)
        print(f"READY {base}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
