#!/usr/bin/env python3
"""Writes each fuzz target's seed corpus into OUT/<target>/, from the repository's own test
fixtures (wire fixtures, golden journals, the documented config examples), the real provider
streams other projects recorded (read from ../shared/fixtures/recorded/ beside the repository:
such data is never committed to it), a few hand-written inputs, and the inputs that once
failed (fuzz/regressions/). Usage: fuzz/seeds.py OUT"""
import base64
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "crates/agentloop/tests/fixtures"
# Data other projects recorded: beside the repository, never in it.
RECORDED = ROOT.parent / "shared/fixtures/recorded"
# The wire formats, as the targets number them (fuzz/src/lib.rs).
FORMATS = {"openai": 0, "chat": 0, "openai_responses": 1, "responses": 1, "anthropic": 2, "gemini": 3}
SIZES = bytes([3, 7, 13, 64])


def write(out, target, name, data):
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def main():
    out = pathlib.Path(sys.argv[1])
    corpus = RECORDED / "corpus"
    if not (corpus / "INDEX.tsv").is_file():
        sys.exit(f"seeds.py: missing {corpus / 'INDEX.tsv'}: the recorded streams are read from "
                 "../shared/fixtures/recorded/ relative to the repository root")
    # SSE streams: the fixtures as written, and the recorded corpus (one event's JSON a line)
    # framed as SSE; whole responses and error bodies.
    for folder, selector in FORMATS.items():
        for path in sorted((FIXTURES / folder).glob("*")) if (FIXTURES / folder).is_dir() else []:
            if path.suffix == ".sse":
                data = bytes([selector, len(SIZES)]) + SIZES + path.read_bytes()
                write(out, "sse_stream", f"{folder}-{path.stem}", data)
            elif path.suffix == ".json":
                write(out, "whole_response", f"{folder}-{path.stem}", bytes([selector, 0]) + path.read_bytes())
    for row in (corpus / "INDEX.tsv").read_text().splitlines():
        fields = row.split("\t")
        if len(fields) < 2 or fields[1] not in FORMATS:
            continue
        path = corpus / fields[0]
        if not path.is_file():
            continue
        events = []
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line:
                continue
            kind = ""
            try:
                kind = json.loads(line).get("type", "")
            except (ValueError, AttributeError):
                pass
            events.append((f"event: {kind}\n" if kind else "") + f"data: {line}\n\n")
        data = bytes([FORMATS[fields[1]], len(SIZES)]) + SIZES + "".join(events).encode()
        write(out, "sse_stream", "corpus-" + path.name.replace("/", "-"), data)
    # The prompted parser: text with calls in both formats, thinking, and broken calls.
    texts = [
        'Let me add. <tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>',
        '<think>the user wants a file</think><tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>',
        '<tool>{"server_name": "s", "tool_name": "t", "arguments": {"x": 1}}</tool> done',
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1+',
        "<tool_call>not json</tool_call><tool_call>{}</tool_call>",
        "Plain answer with a < sign and </tool_call> stray.",
    ]
    for i, text in enumerate(texts):
        for flag in (0, 1):
            write(out, "prompted_parser", f"text{i}-{flag}", bytes([len(SIZES)]) + SIZES + bytes([flag]) + text.encode())
    # Journals: the golden ones, whole and each entry's event alone.
    for path in sorted((FIXTURES / "golden").glob("*.jsonl")):
        write(out, "journal", path.stem, path.read_bytes())
        for i, line in enumerate(path.read_text().splitlines()):
            write(out, "journal", f"{path.stem}-event{i}", json.dumps(json.loads(line)["event"]).encode())
    # Config: every TOML example in the docs, the README and the config tests.
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", doc.read_text(), re.S)):
            write(out, "config", f"{doc.stem}-{i}", block.encode())
    tests = (ROOT / "crates/agentloop-cli/src/config/tests.rs").read_text()
    for i, block in enumerate(re.findall(r'r#"(.*?)"#', tests, re.S)):
        write(out, "config", f"tests-{i}", block.encode())
    for i, block in enumerate(re.findall(r'"(\[[a-z]+\][^"]*)"', tests)):
        write(out, "config", f"tests-line-{i}", block.replace("\\n", "\n").encode())
    # A2A requests: each JSON-RPC method, and the REST endpoints.
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "calc 2+3"}]}
    calls = {
        "SendMessage": {"message": message},
        "SendStreamingMessage": {"message": {**message, "parts": [{"text": "stream 2"}]}},
        "GetTask": {"id": "t1", "historyLength": 2},
        "ListTasks": {"pageSize": 2},
        "CancelTask": {"id": "t1"},
        "SubscribeToTask": {"id": "t1"},
        "GetExtendedAgentCard": {},
        "CreateTaskPushNotificationConfig": {"taskId": "t1", "url": "http://127.0.0.1:9/hook"},
    }
    for i, (method, params) in enumerate(calls.items()):
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        write(out, "a2a_request", f"rpc-{method}", b"\x00" + body.encode())
    write(out, "a2a_request", "rest-send", b"\x01" + json.dumps({"message": message}).encode())
    write(out, "a2a_request", "rest-cancel", b"\x02t1:cancel\n{}")
    write(out, "a2a_request", "rest-get", b"\x03t1\n")
    write(out, "a2a_request", "rest-list", b"\x04pageSize=2&status=TASK_STATE_COMPLETED\n")
    # Bedrock: the recorded converse-stream bodies (the `!!binary` blocks of the cassettes), in
    # pieces of 1, 7 and 4096 bytes, and the whole bodies' JSON (not parsed: YAML is read with
    # the standard library only).
    cassettes = RECORDED / "bedrock-converse"
    for path in sorted(cassettes.glob("*.yaml")):
        blocks = re.findall(r"!!binary \|\n((?:[ \t]+[A-Za-z0-9+/=]+\n)+)", path.read_text())
        for i, block in enumerate(blocks):
            data = base64.b64decode("".join(block.split()))
            # Event streams only (the cassettes also hold images and documents).
            if b":event-type" not in data[:256]:
                continue
            for step in (1, 7, 255):
                write(out, "bedrock_event_stream", f"{path.stem}-{i}-{step}", bytes([step]) + data)
    # Inputs that once failed a target (fuzz/regressions/TARGET/): they must pass for good.
    for path in sorted((ROOT / "fuzz/regressions").glob("*/*")):
        write(out, path.parent.name, "regression-" + path.name, path.read_bytes())


if __name__ == "__main__":
    main()
