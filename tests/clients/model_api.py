#!/usr/bin/env python3
"""A local stand-in for the model APIs of Claude Code and Gemini CLI.

It plays the model's part of a conversation from a fixed script of tool
calls, so the real client does everything else (MCP, argument checks, what it
makes of the results), and it records every request body, so a test can read
the tool results exactly as the client handed them to its model.

Usage: ``model_api.py SCRIPT.json RECORD.jsonl PORT_FILE``. It binds
127.0.0.1 on a free port and writes ``{"api": PORT, "peer": PORT}`` to
PORT_FILE once it listens; ``peer`` is a TCP port that accepts connections
and echoes each line back as ``echo: LINE`` (the remote end of a stand-in for
``ssh``). It runs until killed.

The script is ``{"turns": [[CALL, ...], ...], "final": TEXT}``; a CALL is
``{"id": ID, "tool": SHORT_NAME, "args": {...}}``, where SHORT_NAME is the
MCP tool's own name (``terminal``): the client's name for it is looked up
among the tools of the request (Claude Code: ``mcp__shellkeep__terminal``,
Gemini: ``mcp_shellkeep_terminal``). A call with ``"args_from_previous":
"output_call"`` takes its arguments from the previous turn's result: the
``output`` call a cut reply names (in its text, or as a field of its JSON);
when there is none, it uses its own ``args`` and says so in the record.
``{peer_port}`` in a string argument becomes the echo peer's port.

Which turn comes next is read from the request itself (the ids of the tool
calls in its history), so a retried request gets the same answer. Requests that are not the main conversation (neither a shellkeep tool nor
Claude Code's ``ToolSearch`` offered: titles, summaries, Gemini's routing and next-speaker checks) get a
short text or a small JSON object, never an error.

Anthropic Messages: ``POST /v1/messages`` (streaming SSE or JSON),
``/v1/messages/count_tokens``; any other path answers ``{}``. Gemini:
``POST /v1beta/models/M:streamGenerateContent?alt=sse`` and
``:generateContent``, ``:countTokens``.

Bounds: a request body is read up to 64 MiB (a longer one is refused with
413); the echo peer reads lines of at most 64 KiB.
"""

from __future__ import annotations

import json
import os
import re
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 64 << 20
# How often one turn is answered with its calls before the script is called over.
MAX_REPEATS = 3

# An `output` call as a reply gives it: in the text, or as compact JSON of a field.
OUTPUT_CALL = re.compile(r'\{[^{}]*"command"\s*:\s*\d+[^{}]*"offset"\s*:\s*-?\d+[^{}]*\}')


class Script:
    """The scripted conversation and the record of every request."""

    def __init__(self, script_path: str, record_path: str) -> None:
        with open(script_path, encoding="utf-8") as f:
            script = json.load(f)
        self.turns: list[list[dict[str, Any]]] = script["turns"]
        self.final: str = script.get("final", "Done.")
        self.record_path = record_path
        self.lock = threading.Lock()
        self.asked: dict[int, int] = {}
        self.peer_port = 0

    def record(self, entry: dict[str, Any]) -> None:
        """Appends one line to the record."""
        with self.lock, open(self.record_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def calls_for(self, seen_ids: list[str], previous_result: str, names: list[str]) -> tuple[int, list[dict[str, Any]] | None]:
        """The next turn's number and calls (client tool names); no calls when the script is over.

        The next turn is the one after the last turn whose calls are in the history; a turn
        asked for more than `MAX_REPEATS` times ends the script, so a client that keeps
        retrying cannot loop for ever.
        """
        done_turns = 0
        for number, turn in enumerate(self.turns):
            if any(call["id"] in seen_ids for call in turn):
                done_turns = number + 1
        with self.lock:
            self.asked[done_turns] = self.asked.get(done_turns, 0) + 1
            repeats = self.asked[done_turns]
        if done_turns >= len(self.turns) or repeats > MAX_REPEATS:
            return done_turns, None
        calls = []
        for call in self.turns[done_turns]:
            args = dict(call.get("args", {}))
            derived = None
            if call.get("args_from_previous") == "output_call":
                found = find_output_call(previous_result)
                derived = found is not None
                if found is not None:
                    args = {**found, **{k: v for k, v in args.items() if k not in ("command", "offset", "limit")}}
            args = {k: v.replace("{peer_port}", str(self.peer_port)) if isinstance(v, str) else v for k, v in args.items()}
            name = client_name(call["tool"], names)
            calls.append({"id": call["id"], "name": name, "args": args, "derived": derived})
        return done_turns, calls


def find_output_call(result: str) -> dict[str, Any] | None:
    """The `output` call a reply names, from its text or its JSON (escaped or not)."""
    for text in (result, result.replace('\\"', '"')):
        for match in OUTPUT_CALL.finditer(text):
            try:
                call = json.loads(match.group(0))
            except ValueError:
                continue
            if isinstance(call, dict) and "run" not in call:
                return call
    return None


def client_name(short: str, names: list[str]) -> str:
    """The client's name of shellkeep's tool `short` among the offered names."""
    for name in names:
        if "shellkeep" in name and re.search(r"(^|_)" + re.escape(short) + "$", name):
            return name
    return short


def flatten(value: Any) -> str:
    """Every string inside a JSON value, joined: what a tool result says."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(flatten(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(flatten(v) for v in value.values())
    return json.dumps(value)


# ---------------------------------------------------------------- Anthropic


def anthropic_state(body: dict[str, Any]) -> tuple[list[str], str]:
    """The ids of the tool calls so far, and the last tool results' text."""
    ids = []
    previous = ""
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        if message.get("role") == "assistant":
            ids += [str(b.get("id", "")).removeprefix("toolu_") for b in content if b.get("type") == "tool_use"]
        if message.get("role") == "user":
            results = [flatten(b.get("content", "")) for b in content if b.get("type") == "tool_result"]
            if results:
                previous = "\n".join(results)
    return ids, previous


def anthropic_events(model: str, blocks: list[dict[str, Any]], stop: str) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of one streamed message."""
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_sk",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}},
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# ------------------------------------------------------------------- Gemini


def gemini_state(body: dict[str, Any]) -> tuple[list[str], str]:
    """The ids of the function calls so far, and the last function responses."""
    ids = []
    previous = ""
    for content in body.get("contents", []):
        parts = content.get("parts", [])
        ids += [str(p["functionCall"].get("id", "")) for p in parts if "functionCall" in p]
        responses = [flatten(p["functionResponse"].get("response", {})) for p in parts if "functionResponse" in p]
        if responses:
            previous = "\n".join(responses)
    return ids, previous


def gemini_response(model: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One GenerateContentResponse."""
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": model,
    }


def gemini_json_answer(body: dict[str, Any]) -> dict[str, Any]:
    """An answer to one of Gemini CLI's own JSON-mode questions (routing, next speaker)."""
    schema = json.dumps(body.get("generationConfig", {}))
    answer: dict[str, Any] = {"reasoning": "scripted"}
    if "next_speaker" in schema:
        answer["next_speaker"] = "user"
    if "model_choice" in schema:
        answer["model_choice"] = "pro"
    return answer


# ------------------------------------------------------------------- server


class Handler(BaseHTTPRequestHandler):
    """Both APIs on one port, told apart by path."""

    protocol_version = "HTTP/1.1"
    script: Script

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        self.script.record({"method": "GET", "path": self.path})
        self.send_json({})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_json({"error": {"message": "request body too large"}}, 413)
            return
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0]
        if path.startswith("/v1/messages"):
            self.anthropic(path, body)
        elif ":" in path and "/models/" in path:
            self.gemini(path, body)
        else:
            self.script.record({"method": "POST", "path": self.path, "body": body})
            self.send_json({})

    def anthropic(self, path: str, body: dict[str, Any]) -> None:
        if path.endswith("/count_tokens"):
            self.script.record({"api": "anthropic", "path": path})
            self.send_json({"input_tokens": 100})
            return
        names = [t.get("name", "") for t in body.get("tools", []) if isinstance(t, dict)]
        # Claude Code defers MCP tools: the main loop offers `ToolSearch`, which loads them.
        main = any("shellkeep" in n or n == "ToolSearch" for n in names)
        seen, previous = anthropic_state(body)
        done, calls = self.script.calls_for(seen, previous, names) if main else (len(seen), None)
        self.script.record({"api": "anthropic", "path": path, "main": main, "turn": done, "calls": calls, "body": body})
        model = body.get("model", "claude")
        if calls:
            blocks = [{"type": "tool_use", "id": "toolu_" + c["id"], "name": c["name"], "input": c["args"]} for c in calls]
            stop = "tool_use"
        else:
            blocks = [{"type": "text", "text": self.script.final if main else "Scripted session."}]
            stop = "end_turn"
        if body.get("stream"):
            self.send_sse([f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in anthropic_events(model, blocks, stop)])
        else:
            self.send_json(
                {
                    "id": "msg_sk",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                }
            )

    def gemini(self, path: str, body: dict[str, Any]) -> None:
        model, _, method = path.rsplit("/", 1)[-1].partition(":")
        if method == "countTokens":
            self.script.record({"api": "gemini", "path": path})
            self.send_json({"totalTokens": 100})
            return
        names = [
            d.get("name", "")
            for tool in body.get("tools", []) or []
            for d in tool.get("functionDeclarations", []) or []
        ]
        main = any("shellkeep" in n for n in names)
        seen, previous = gemini_state(body)
        done, calls = self.script.calls_for(seen, previous, names) if main else (len(seen), None)
        self.script.record({"api": "gemini", "path": path, "main": main, "turn": done, "calls": calls, "body": body})
        if calls:
            parts = [{"functionCall": {"id": c["id"], "name": c["name"], "args": c["args"]}} for c in calls]
        elif main:
            parts = [{"text": self.script.final}]
        elif "application/json" in json.dumps(body.get("generationConfig", {})):
            parts = [{"text": json.dumps(gemini_json_answer(body))}]
        else:
            parts = [{"text": "Scripted session."}]
        response = gemini_response(model, parts)
        if method == "streamGenerateContent":
            self.send_sse([f"data: {json.dumps(response)}\n\n"])
        else:
            self.send_json(response)

    def send_json(self, value: Any, status: int = 200) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events: list[str]) -> None:
        data = "".join(events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Echo(socketserver.StreamRequestHandler):
    """The far end of a remote session: each line comes back as ``echo: LINE``."""

    def handle(self) -> None:
        while True:
            line = self.rfile.readline(65536)
            if not line:
                return
            self.wfile.write(b"echo: " + line)


class EchoServer(socketserver.ThreadingTCPServer):
    """Threads die with the process; the port is reusable at once."""

    daemon_threads = True
    allow_reuse_address = True


def main() -> None:
    script_path, record_path, port_file = sys.argv[1:4]
    Handler.script = script = Script(script_path, record_path)
    api = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.daemon_threads = True
    peer = EchoServer(("127.0.0.1", 0), Echo)
    script.peer_port = peer.server_address[1]
    threading.Thread(target=peer.serve_forever, daemon=True).start()
    ports = {"api": api.server_address[1], "peer": peer.server_address[1]}
    with open(port_file + ".tmp", "w", encoding="utf-8") as f:
        json.dump(ports, f)
    # Renamed into place, so a reader never sees half a file.
    os.replace(port_file + ".tmp", port_file)
    try:
        api.serve_forever()
    finally:
        api.server_close()
        peer.server_close()


if __name__ == "__main__":
    main()
