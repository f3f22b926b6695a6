"""Interop over Streamable HTTP: the real shellkeep binary (`serve --http`) driven by the
Python `mcp` SDK's `streamable_http_client`, in both protocol eras it speaks:

* ``session``: the low-level ``ClientSession`` with the legacy ``initialize`` handshake
  (2025-11-25), which opens a protocol session (``Mcp-Session-Id``);
* ``auto``: the high-level ``Client(mode="auto")``, which probes ``server/discover`` and
  ends on the modern, stateless era (2026-07-28).

Each test starts its own server on a free loopback port with a token file of two
principals, ``alice`` and ``bob``, and sends ``Authorization: Bearer`` with every request.
The binary is taken from ``SHELLKEEP_BIN`` (default: ``target/debug/shellkeep``).
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import pytest
from mcp import ClientSession
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.types import CallToolResult, ListToolsResult, TextContent

REPO = pathlib.Path(__file__).resolve().parents[2]
BINARY = pathlib.Path(os.environ.get("SHELLKEEP_BIN", REPO / "target" / "debug" / "shellkeep"))

ERAS = ["session", "auto"]

# Generous limits for a slow CI machine: a call that passes them is a hang, not a slow run.
CALL_TIMEOUT = 30.0
START_TIMEOUT = 20.0

ALICE = "a11ce" + "0" * 54 + "a11ce"
BOB = "b0b" + "0" * 58 + "b0b"


class Tools(Protocol):
    """What both client kinds (`ClientSession` and `Client`) offer and these tests use."""

    async def list_tools(self) -> ListToolsResult: ...

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: ProgressFnT | None = None,
    ) -> CallToolResult: ...


@dataclass
class Server:
    """A running `shellkeep serve --http` and where it serves."""

    process: subprocess.Popen[bytes]
    url: str
    log: pathlib.Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[Server]:
    """A server with alice's and bob's tokens, stopped (SIGTERM) at the end of the test."""
    assert BINARY.is_file(), f"no server binary at {BINARY}: build it first, or set SHELLKEEP_BIN"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# who may call\nalice:{ALICE}\nbob:{BOB}\n")
    tokens.chmod(0o600)
    start_dir = tmp_path / "work"
    start_dir.mkdir()
    log = tmp_path / "server.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("SHELLKEEP_")}
    env.update(
        {
            "SHELLKEEP_LOG": "warn",
            "XDG_CONFIG_HOME": str(tmp_path / ".config"),
            "XDG_STATE_HOME": str(tmp_path / ".state"),
        }
    )
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [str(BINARY), "--no-rc", "--cwd", str(start_dir), "serve", "--http", "127.0.0.1:0", "--token-file", str(tokens)],
            cwd=start_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            found = re.search(r"serving MCP on (http://\S+/mcp)", log.read_text(errors="replace"))
            if found:
                break
            assert process.poll() is None, f"the server exited before serving:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the server never said where it serves:\n{log.read_text()}"
            time.sleep(0.01)
        yield Server(process, found.group(1).rstrip(";"), log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def connect(era: str, server: Server, token: str) -> AsyncIterator[Tools]:
    """A client of `server` in the given era, authenticating with `token`."""
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        transport = streamable_http_client(server.url, http_client=http)
        if era == "session":
            async with transport as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session:
                    init = await session.initialize()
                    assert init.server_info.name == "shellkeep"
                    yield session
        else:
            async with Client(transport, mode="auto", read_timeout_seconds=CALL_TIMEOUT) as client:
                assert client.protocol_version == "2026-07-28"
                yield client


def blocks_of(result: CallToolResult) -> list[str]:
    """The text content blocks, one by one."""
    return [block.text for block in result.content if isinstance(block, TextContent)]


def text_of(result: CallToolResult) -> str:
    """The text blocks joined, one a line."""
    return "\n".join(blocks_of(result))


async def terminal(tools: Tools, command: str, **arguments: Any) -> dict[str, Any]:
    """Calls `terminal` and returns its structured content, checking it is no error."""
    result = await tools.call_tool("terminal", {"command": command, **arguments})
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.anyio
async def test_tools_work_with_the_token(era: str, server: Server) -> None:
    async with connect(era, server, ALICE) as tools:
        listed = await tools.list_tools()
        assert {"terminal", "run", "output", "sessions", "session_close", "policy_explain"} <= {
            tool.name for tool in listed.tools
        }
        reply = await terminal(tools, "cd /tmp && echo hi-$((6*7))")
        assert (reply["status"], reply["output"], reply["exit_code"]) == ("completed", "hi-42\n", 0)
        # The shell persists between calls, whatever the era.
        assert (await terminal(tools, "pwd"))["output"] == "/tmp\n"
        result = await tools.call_tool("run", {"command": "echo from-run"})
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None
        assert result.structured_content["stdout"] == "from-run\n"


@pytest.mark.anyio
async def test_a_wrong_token_is_refused(era: str, server: Server) -> None:
    with pytest.raises(BaseException) as raised:
        with anyio.fail_after(CALL_TIMEOUT):
            async with connect(era, server, "not-a-token-of-this-server-0000") as tools:
                await tools.list_tools()
    # Refused at once (the SDK reports the 401 as a failed request), not a hang.
    assert "TimeoutError" not in repr(raised.value), repr(raised.value)


@pytest.mark.anyio
async def test_progress_arrives(era: str, server: Server) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(era, server, ALICE) as tools:
        result = await tools.call_tool(
            "terminal",
            {"command": "for i in 1 2 3; do echo step$i; sleep 1; done", "timeout": CALL_TIMEOUT},
            progress_callback=on_progress,
        )
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None
        assert result.structured_content["output"] == "step1\nstep2\nstep3\n"
        assert 2 <= len(seen) <= 4, seen
        progress = [p for p, _, _ in seen]
        assert progress == sorted(set(progress)), seen
        assert all(message is not None and message.startswith("step") for _, _, message in seen), seen


@pytest.mark.anyio
async def test_a_cancelled_call_keeps_its_command(era: str, server: Server) -> None:
    """The client gives up on a call (on HTTP: it closes the call's response stream, or sends
    notifications/cancelled in a protocol session); the command goes on, and the next call
    gets everything it printed."""
    command = "for i in 1 2 3; do echo line$i; sleep 0.4; done; echo finished"
    async with connect(era, server, ALICE) as tools:
        with anyio.move_on_after(0.6) as scope:
            await tools.call_tool("terminal", {"command": command, "timeout": CALL_TIMEOUT})
        assert scope.cancelled_caught
        delivered = await terminal(tools, "", timeout=CALL_TIMEOUT / 2)
        assert delivered["status"] == "completed", delivered
        assert delivered["output"] == "line1\nline2\nline3\nfinished\n", delivered
        assert isinstance(delivered["previous_call_cancelled_sec_ago"], (int, float)), delivered
        after = await terminal(tools, "echo after")
        assert (after["status"], after["output"]) == ("completed", "after\n"), after


@pytest.mark.anyio
async def test_two_principals_are_apart(era: str, server: Server) -> None:
    async with connect(era, server, ALICE) as alice, connect(era, server, BOB) as bob:
        await terminal(alice, "export MARK=alice-was-here")
        await terminal(alice, "echo in-build", session="build")
        assert (await terminal(bob, "echo [${MARK:-none}]"))["output"] == "[none]\n"
        assert (await terminal(alice, "echo [$MARK]"))["output"] == "[alice-was-here]\n"
        alice_sessions = await alice.call_tool("sessions", {})
        bob_sessions = await bob.call_tool("sessions", {})
        assert "build" in text_of(alice_sessions)
        assert "build" not in text_of(bob_sessions), text_of(bob_sessions)
        stolen = await bob.call_tool("output", {"session": "build"})
        assert stolen.is_error and "in-build" not in text_of(stolen), text_of(stolen)
        # Each principal numbers its own `run` outputs from 1.
        await alice.call_tool("run", {"command": "echo alice-run-output"})
        theirs = await bob.call_tool("output", {"run": 1, "stream": "stdout"})
        assert theirs.is_error and "alice-run-output" not in text_of(theirs), text_of(theirs)
        mine = await alice.call_tool("output", {"run": 1, "stream": "stdout"})
        assert "alice-run-output" in text_of(mine), text_of(mine)
