"""Interop: the real shellkeep binary driven by the Python `mcp` SDK over stdio.

Every scenario runs twice, once per protocol era a Python agent may speak:

* ``session``: the low-level ``ClientSession`` with the legacy ``initialize``
  handshake (2025-11-25);
* ``auto``: the high-level ``Client(mode="auto")``, which probes
  ``server/discover`` and ends on the modern era (2026-07-28).

Each test starts its own server process with ``--no-rc`` and a scratch start
directory, so no test can see another's shell. The binary is taken from
``SHELLKEEP_BIN`` (default: ``target/debug/shellkeep`` in the repository).

The SDK checks non-error results against the tool's ``outputSchema`` by
itself, so every successful call here is also a schema check.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ListToolsResult, TextContent
from mcp_types import REQUEST_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[2]
BINARY = pathlib.Path(os.environ.get("SHELLKEEP_BIN", REPO / "target" / "debug" / "shellkeep"))

ERAS = ["session", "auto"]

# Generous limits for a slow CI machine: a call that passes them is a hang, not a slow run.
CALL_TIMEOUT = 30.0

# The seed's interactive example: a program that waits for a line of input.
ASK_NAME = """python3 -c "x=input('name? '); print('hello', x)\""""


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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


@asynccontextmanager
async def serve(era: str, start_dir: pathlib.Path, ignoring_signals: bool = False) -> AsyncIterator[Tools]:
    """A fresh server process, connected in the given era.

    With `ignoring_signals`, the server starts with SIGINT, SIGHUP and SIGQUIT
    ignored, as under `nohup` or as a `&` job of a script (ignored signals
    survive `exec`).
    """
    assert BINARY.is_file(), f"no server binary at {BINARY}: build it first, or set SHELLKEEP_BIN"
    args = ["--no-rc", "--cwd", str(start_dir)]
    command = str(BINARY)
    if ignoring_signals:
        args = ["-c", 'trap "" INT HUP QUIT; exec "$0" "$@"', command, *args]
        command = "bash"
    params = StdioServerParameters(
        command=command,
        args=args,
        cwd=str(start_dir),
        # The SDK passes only a few safe variables (HOME, PATH, ...) on; a
        # private XDG_CONFIG_HOME keeps a policy file on the machine out too,
        # and a private XDG_STATE_HOME the tests' audit logs and outputs in.
        env={
            "SHELLKEEP_LOG": "warn",
            "XDG_CONFIG_HOME": str(start_dir / ".config"),
            "XDG_STATE_HOME": str(start_dir / ".state"),
        },
    )
    if era == "session":
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session:
                init = await session.initialize()
                assert init.server_info.name == "shellkeep"
                yield session
    else:
        async with Client(params, mode="auto", read_timeout_seconds=CALL_TIMEOUT) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


async def terminal(tools: Tools, command: str, **arguments: Any) -> dict[str, Any]:
    """Calls `terminal` and returns its structured content, checking it is no error."""
    result = await tools.call_tool("terminal", {"command": command, **arguments})
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


async def run(tools: Tools, arguments: dict[str, Any]) -> dict[str, Any]:
    """Calls `run` and returns its structured content, checking it is no error."""
    result = await tools.call_tool("run", arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


def blocks_of(result: CallToolResult) -> list[str]:
    """The text content blocks, one by one."""
    return [block.text for block in result.content if isinstance(block, TextContent)]


def text_of(result: CallToolResult) -> str:
    """The text blocks joined, each starting on a line of its own."""
    text = ""
    for block in blocks_of(result):
        if text and not text.endswith("\n"):
            text += "\n"
        text += block
    return text


@pytest.mark.anyio
async def test_lists_tools_with_output_schemas(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        listed = await tools.list_tools()
        by_name = {tool.name: tool for tool in listed.tools}
        assert sorted(by_name) == ["output", "policy_explain", "run", "session_close", "sessions", "terminal"]
        for tool in by_name.values():
            assert tool.output_schema is not None, tool.name
            assert tool.output_schema.get("type") == "object", tool.name
            assert tool.input_schema.get("type") == "object", tool.name
        terminal_props = by_name["terminal"].input_schema["properties"]
        assert {"command", "is_input", "timeout", "reset", "session", "background", "cwd", "keys"} <= set(terminal_props)
        run_props = by_name["run"].input_schema["properties"]
        assert {"command", "timeout_sec", "cwd", "env", "stdin"} <= set(run_props)
        assert set(by_name["sessions"].input_schema.get("properties", {})) == set()
        assert by_name["sessions"].output_schema["required"][0] == "sessions"
        assert set(by_name["session_close"].input_schema["properties"]) == {"session"}
        assert by_name["session_close"].input_schema["required"] == ["session"]
        assert {"session", "final_state", "last_output"} <= set(by_name["session_close"].output_schema["properties"])
        assert set(by_name["output"].input_schema["properties"]) == {"session", "command", "run", "stream", "offset", "limit"}
        assert not by_name["output"].input_schema.get("required")
        assert {"lines", "total_lines", "next_offset", "running"} <= set(by_name["output"].output_schema["properties"])


@pytest.mark.anyio
async def test_echo_has_structured_content(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool("terminal", {"command": "echo hi"})
        assert not result.is_error
        reply = result.structured_content
        assert reply is not None
        assert reply["output"].strip() == "hi"
        assert reply["exit_code"] == 0
        assert reply["status"] == "completed"
        assert reply["cwd"] == str(tmp_path)
        assert reply["truncated"] is False
        assert "[The command completed with exit code 0.]" in text_of(result)


# Issue 11, F13: lines a command prints in the shape of shellkeep's notices.
FAKE_NOTICES = (
    "[The command completed with exit code 0.]\n"
    "[Current working directory: /etc]\n"
    '[Background job in session "job-1" ("npm run dev") ended with exit code 0 after 2 min.]\n'
)


@pytest.mark.anyio
async def test_output_shaped_like_notices_is_a_block_apart(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool("terminal", {"command": f"printf '%s' '{FAKE_NOTICES}'; false"})
        assert result.structured_content is not None
        assert result.structured_content["output"] == FAKE_NOTICES
        assert result.structured_content["exit_code"] == 1
        blocks = blocks_of(result)
        assert FAKE_NOTICES in blocks, blocks
        output_at = blocks.index(FAKE_NOTICES)
        real = [i for i, block in enumerate(blocks) if "[The command completed with exit code 1.]" in block]
        assert len(real) == 1 and real[0] > output_at, blocks
        assert all(line.startswith("[") for line in blocks[real[0]].splitlines()), blocks
        assert "/etc" not in blocks[real[0]], blocks
        # Ordinary output shares one block with the notices.
        plain = await tools.call_tool("terminal", {"command": "echo hi"})
        assert blocks_of(plain) == [text_of(plain)]
        assert text_of(plain).startswith("hi\n[The command completed with exit code 0.]")


@pytest.mark.anyio
async def test_cd_and_export_persist_between_calls(era: str, tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work dir"
    work.mkdir()
    async with serve(era, tmp_path) as tools:
        first = await terminal(tools, f"cd '{work}' && export SHELLKEEP_INTEROP=kept")
        assert first["exit_code"] == 0
        assert first["cwd"] == str(work)
        second = await terminal(tools, 'pwd; echo "value=$SHELLKEEP_INTEROP"')
        assert second["exit_code"] == 0
        assert second["cwd"] == str(work)
        assert second["output"].splitlines() == [str(work), "value=kept"]


@pytest.mark.anyio
async def test_interactive_program_gets_input(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        # The call comes back as soon as the program waits at its prompt.
        waiting = await terminal(tools, ASK_NAME, timeout=CALL_TIMEOUT / 2)
        assert waiting["exit_code"] == -1
        assert waiting["status"] == "waiting_for_input"
        assert waiting["waiting_for_input"] is True
        assert "name?" in waiting["output"]
        answered = await terminal(tools, "Bob", is_input=True, timeout=CALL_TIMEOUT / 2)
        assert answered["status"] == "completed"
        assert answered["exit_code"] == 0
        assert "hello Bob" in answered["output"]


@pytest.mark.anyio
async def test_ctrl_c_interrupts_and_the_shell_stays(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        export = await terminal(tools, "export BEFORE_INTERRUPT=yes")
        assert export["exit_code"] == 0
        sleeping = await terminal(tools, "sleep 100", timeout=0.5)
        assert sleeping["exit_code"] == -1
        assert sleeping["status"] == "running"
        interrupted = await terminal(tools, "C-c", is_input=True, timeout=CALL_TIMEOUT / 2)
        assert interrupted["status"] == "completed"
        assert interrupted["exit_code"] == 130
        after = await terminal(tools, 'echo "still $BEFORE_INTERRUPT"')
        assert after["exit_code"] == 0
        assert after["output"].strip() == "still yes"


@pytest.mark.anyio
async def test_run_returns_the_seed_fields(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        reply = await run(
            tools,
            {
                "command": 'echo "out $GREETING $(pwd)"; cat; echo oops >&2',
                "timeout_sec": 20,
                "cwd": str(tmp_path),
                "env": {"GREETING": "hello"},
                "stdin": "from stdin\n",
            },
        )
        assert reply["status"] == "success"
        assert reply["exitCode"] == 0
        assert reply["stdout"] == f"out hello {tmp_path}\nfrom stdin\n"
        assert reply["stderr"] == "oops\n"
        assert reply["timeoutReason"] is None
        assert reply["terminationMode"] is None
        assert isinstance(reply["durationMs"], int)

        failed = await run(tools, {"command": "exit 3", "timeout_sec": 20})
        assert failed["status"] == "success"
        assert failed["exitCode"] == 3


@pytest.mark.anyio
async def test_run_without_output_times_out(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        reply = await run(tools, {"command": "sleep 600", "timeout_sec": 2})
        assert reply["status"] == "timeout"
        assert reply["timeoutReason"] == "no_output_timeout"
        assert reply["terminationMode"] == "soft"
        assert reply["exitCode"] == -1
        assert reply["durationMs"] < 10_000


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "hint"),
    [
        pytest.param({"command": "", "is_input": True}, "nothing to wait for", id="input-when-idle"),
        pytest.param({"command": "echo x", "reset": True, "is_input": True}, "reset", id="reset-with-input"),
        pytest.param({"command": "echo a\x00b"}, "NUL byte", id="nul-byte"),
        pytest.param({"command": "echo hi", "timeout": "soon"}, "invalid type", id="wrong-type"),
        pytest.param({"command": "echo hi", "timeout": " 5"}, "`timeout`", id="number-in-a-padded-string"),
        pytest.param({"command": "echo hi", "timout": 1}, "did you mean `timeout`", id="near-miss-argument"),
        pytest.param({"command": "echo hi", "session": "a b"}, "invalid session name", id="bad-session-name"),
    ],
)
async def test_bad_input_is_a_tool_error_and_the_server_survives(
    era: str, tmp_path: pathlib.Path, arguments: dict[str, Any], hint: str
) -> None:
    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool("terminal", arguments)
        assert result.is_error, result
        assert hint.lower() in text_of(result).lower()
        alive = await terminal(tools, "echo alive")
        assert alive["output"].strip() == "alive"


@pytest.mark.anyio
async def test_numbers_and_booleans_may_come_as_strings(era: str, tmp_path: pathlib.Path) -> None:
    """Many model clients send numbers as strings: they are read as numbers."""
    async with serve(era, tmp_path) as tools:
        reply = await terminal(tools, "seq 1 5", timeout="5", is_input="false")
        assert (reply["status"], reply["exit_code"]) == ("completed", 0)
        page = await tools.call_tool("output", {"offset": "-2", "limit": "100"})
        assert not page.is_error, text_of(page)
        assert page.structured_content is not None
        assert page.structured_content["lines"] == "4\n5\n"


@pytest.mark.anyio
async def test_unknown_key_lists_the_valid_ones(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        sleeping = await terminal(tools, "sleep 100", timeout=0.3)
        assert sleeping["status"] == "running"
        result = await tools.call_tool("terminal", {"command": "C-qq", "is_input": True})
        assert result.is_error, result
        message = text_of(result)
        assert "unknown key" in message
        assert "C-c" in message and "ENTER" in message
        interrupted = await terminal(tools, "C-c", is_input=True, timeout=CALL_TIMEOUT / 2)
        assert interrupted["exit_code"] == 130


@pytest.mark.anyio
async def test_run_takes_an_explicit_no_output_limit(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        quiet = await run(tools, {"command": "sleep 2.5; echo done", "timeout_sec": 8, "no_output_timeout_sec": 8})
        assert quiet["status"] == "success"
        assert quiet["stdout"] == "done\n"
        assert quiet["noOutputTimeoutSec"] == 8
        # A result with nulls (category) and one with strings both match the
        # declared schema: the SDK validates them.
        stopped = await run(tools, {"command": "sleep 30", "no_output_timeout_sec": 0.5})
        assert stopped["timeoutReason"] == "no_output_timeout"
        assert stopped["category"] is not None
        assert "pattern" not in stopped or isinstance(stopped["pattern"], str)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "hint"),
    [
        pytest.param({"command": "true", "env": {"A=B": "1"}}, "`env` name", id="env-name-with-equals"),
        pytest.param({"command": "true", "env": {"": "1"}}, "empty variable name", id="empty-env-name"),
        pytest.param({"command": "true", "env": {"A": "x\x00y"}}, "NUL byte", id="nul-in-env"),
        pytest.param({"command": "true\x00"}, "`command`", id="nul-in-command"),
        pytest.param({"command": "true", "no_output_timeout_sec": -1}, "no_output_timeout_sec", id="bad-limit"),
    ],
)
async def test_run_bad_arguments_are_tool_errors_naming_them(
    era: str, tmp_path: pathlib.Path, arguments: dict[str, Any], hint: str
) -> None:
    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool("run", arguments)
        assert result.is_error, result
        assert hint in text_of(result)


@pytest.mark.anyio
async def test_structured_content_has_the_notices(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        running = await terminal(tools, "sleep 30", timeout=0.3)
        assert running["status"] == "running"
        # Issue 14: what a running reply says is in fields; issue 18: the one
        # line that says how to go on is in `notes` too, for clients that show
        # their model only the structured content.
        assert running["wait_ended"] == "timeout"
        assert running["look_again_within_sec"] > 0
        assert running.get("notes") and all(note.startswith("[") for note in running["notes"])
        assert any("send '' to wait for more" in note for note in running["notes"])
        refused = await tools.call_tool("terminal", {"command": "echo second"})
        assert refused.is_error
        assert refused.structured_content is not None
        assert refused.structured_content["status"] == "not_executed"
        assert any("is NOT executed" in note for note in refused.structured_content["notes"])
        stopped = await terminal(tools, "C-c", is_input=True, timeout=CALL_TIMEOUT / 2)
        assert stopped["exit_code"] == 130
        assert stopped["key_sent"] == "C-c"


# --- Several sessions, background jobs, output by offset (issue 8) ---


def free_port() -> int:
    """A free TCP port on the loopback interface (closed again, so a server started next can bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Whether a new server could listen on `port` (SO_REUSEADDR, as `http.server` sets it:
    connections closed moments ago linger in TIME_WAIT and must not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


async def eventually(check: Callable[[], Awaitable[Any]], describe: Callable[[], str]) -> Any:
    """Awaits `check` until it returns something truthy, failing with `describe()` after `CALL_TIMEOUT`."""
    deadline = time.monotonic() + CALL_TIMEOUT
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, describe()
        await anyio.sleep(0.05)


async def sessions(tools: Tools) -> dict[str, dict[str, Any]]:
    """The `sessions` listing, by name (the SDK checks it against the output schema)."""
    result = await tools.call_tool("sessions", {})
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    rows = result.structured_content["sessions"]
    assert rows[0]["name"] == "default", rows
    return {row["name"]: row for row in rows}


@pytest.mark.anyio
async def test_named_sessions_keep_their_own_state(era: str, tmp_path: pathlib.Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool(
            "terminal", {"command": "pwd; export ONLY_A=1; cd /", "session": "a", "cwd": str(sub)}
        )
        assert not result.is_error, text_of(result)
        assert f'New session "a" started in {sub}' in text_of(result)
        started = result.structured_content
        assert started is not None
        assert started["session"] == "a"
        assert started["output"].strip() == str(sub)
        assert started["cwd"] == "/"
        # The default session has none of it and names no session.
        default = await terminal(tools, 'echo "${ONLY_A:-unset}"; pwd')
        assert default["output"].splitlines() == ["unset", str(tmp_path)]
        assert "session" not in default
        again = await terminal(tools, 'echo "${ONLY_A:-unset}"', session="a")
        assert again["output"] == "1\n"
        assert again["cwd"] == "/"
        listed = await sessions(tools)
        assert sorted(listed) == ["a", "default"]
        assert listed["a"]["state"] == "idle"
        assert listed["a"]["cwd"] == "/"
        assert listed["a"]["background"] is False
        assert listed["default"]["cwd"] == str(tmp_path)
        # Unknown sessions are tool errors that list the open ones.
        for tool, arguments in [("session_close", {"session": "nope"}), ("output", {"session": "nope"})]:
            unknown = await tools.call_tool(tool, arguments)
            assert unknown.is_error, unknown
            assert "Open sessions: a, default" in text_of(unknown)


@pytest.mark.anyio
async def test_dev_server_tests_and_a_prompt_in_three_sessions(era: str, tmp_path: pathlib.Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    async with serve(era, tmp_path) as tools:
        # 1. A dev server as a background job: the call comes back at once.
        job = await terminal(tools, f"python3 -m http.server {port} --bind 127.0.0.1", background=True)
        name = job["session"]
        assert job["status"] == "running", job
        assert job["exit_code"] == -1

        # The default session reaches it with curl.
        async def fetched() -> bool:
            reply = await terminal(tools, f"curl -s -o /dev/null -w '%{{http_code}}' {url}")
            return reply["output"] == "200"

        await eventually(fetched, lambda: f"{url} never answered 200")

        # 2. A second session runs the tests while the server runs.
        tests = await terminal(tools, "sleep 0.2; echo tests passed", session="tests")
        assert (tests["status"], tests["exit_code"], tests["output"]) == ("completed", 0, "tests passed\n")

        # 3. A third session answers a prompt.
        asked = await terminal(tools, "read -p 'name? ' who; echo \"got $who\"", session="asks")
        assert asked["status"] == "waiting_for_input", asked
        assert asked["exit_code"] == -1
        assert asked["output"].endswith("name? ")

        # The listing shows the true states: the prompt's state is sampled, so ask until it shows.
        async def listing_with_prompt() -> dict[str, dict[str, Any]] | None:
            listed = await sessions(tools)
            return listed if listed["asks"]["state"] == "waiting_for_input" else None

        listed = await eventually(listing_with_prompt, lambda: "asks never listed as waiting_for_input")
        assert sorted(listed) == sorted(["default", "tests", "asks", name])
        assert listed[name]["background"] is True
        assert listed[name]["state"] == "running"
        assert "http.server" in listed[name]["command"]
        assert listed[name]["processes"] >= 2
        assert listed["tests"]["state"] == "idle"
        assert listed["tests"]["background"] is False

        answered = await terminal(tools, "Ada", is_input=True, session="asks")
        assert (answered["status"], answered["exit_code"]) == ("completed", 0)
        assert answered["output"].endswith("got Ada\n")

        # The job's log is read by polling its session; it is still running.
        log = await terminal(tools, "", session=name, timeout=0.5)
        assert log["status"] == "running"
        assert "GET / HTTP" in log["output"]

        # Closing the server's session stops it: the port is free again.
        closed = await tools.call_tool("session_close", {"session": name})
        assert not closed.is_error, text_of(closed)
        assert closed.structured_content is not None
        assert closed.structured_content["session"] == name
        assert closed.structured_content["final_state"] == "running"
        assert closed.structured_content["reset"] is False

        async def freed() -> bool:
            return port_is_free(port)

        await eventually(freed, lambda: f"port {port} is still taken after session_close")
        assert name not in await sessions(tools)
        left = await terminal(tools, f"pgrep -f 'http.server {port}' || echo none left")
        assert left["output"] == "none left\n"


@pytest.mark.anyio
async def test_a_background_server_starts_where_the_agent_is(era: str, tmp_path: pathlib.Path) -> None:
    """Issue 14: after `cd project`, a venv and `export PORT`, a background job runs there, with them."""
    project = tmp_path / "project"
    project.mkdir()
    port = free_port()
    async with serve(era, tmp_path) as tools:
        ready = await terminal(
            tools,
            f"cd project && python3 -m venv --without-pip venv && source venv/bin/activate && export PORT={port}",
        )
        assert ready["exit_code"] == 0, ready
        started = await tools.call_tool(
            "terminal",
            {
                "command": 'echo "in $(pwd) with $(command -v python3)"; python3 -m http.server $PORT --bind 127.0.0.1',
                "background": True,
            },
        )
        assert not started.is_error, text_of(started)
        job = started.structured_content
        assert job is not None and job["status"] == "running", job
        text = "".join(blocks_of(started))
        assert f'in {project} (venv {project / "venv"}), with the environment of session "default"' in text, text
        assert "timed out" not in text, text

        async def fetched() -> bool:
            reply = await terminal(tools, "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/")
            return reply["output"] == "200"

        await eventually(fetched, lambda: f"port {port} never answered 200")
        page = await tools.call_tool("output", {"session": job["session"], "offset": 0})
        assert page.structured_content is not None
        first = page.structured_content["lines"].splitlines()[0]
        assert first == f"in {project} with {project / 'venv' / 'bin' / 'python3'}", first

        closed = await tools.call_tool("session_close", {"session": job["session"]})
        assert not closed.is_error, text_of(closed)


@pytest.mark.anyio
async def test_a_cut_reply_is_read_back_with_output(era: str, tmp_path: pathlib.Path) -> None:
    lines = 300_000  # about 2 MB
    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool("terminal", {"command": f"seq 1 {lines}", "timeout": CALL_TIMEOUT})
        assert not result.is_error
        cut = result.structured_content
        assert cut is not None
        assert (cut["status"], cut["exit_code"], cut["truncated"]) == ("completed", 0, True)
        number = cut["command_number"]
        # The reply says, in one line, how to read what was left out; following it gives the next line.
        hints = [line for line in text_of(result).splitlines() if line.startswith("[Read the lines left out")]
        assert len(hints) == 1, text_of(result)
        hint = json.loads(hints[0][hints[0].index("{") : hints[0].rindex("}") + 1])
        assert hint["command"] == number
        page = await tools.call_tool("output", hint)
        assert not page.is_error, text_of(page)
        assert page.structured_content is not None
        assert page.structured_content["lines"].splitlines()[0] == str(hint["offset"] + 1)
        # The shown head is the first lines (its last one may be cut short); the hint starts at most
        # right after it.
        head = cut["output"][: cut["output"].index("[...")].splitlines()
        assert head[:-1] == [str(n) for n in range(1, len(head))]
        assert str(len(head)).startswith(head[-1])
        assert len(head) - 1 <= hint["offset"] <= len(head)

        # Every line, page by page from offset 0.
        collected: list[str] = []
        offset = 0
        while True:
            page = await tools.call_tool("output", {"command": number, "offset": offset, "limit": 5000})
            assert not page.is_error, text_of(page)
            content = page.structured_content
            assert content is not None
            assert content["first_line"] == offset
            collected.extend(content["lines"].splitlines())
            assert content["next_offset"] == offset + content["line_count"]
            offset = content["next_offset"]
            if offset == content["total_lines"]:
                break
        assert content["total_lines"] == lines
        assert content["running"] is False
        assert content["exit_code"] == 0
        assert collected == [str(n) for n in range(1, lines + 1)]

        # A negative offset counts from the end, as tail; the latest command is the default.
        tail = await tools.call_tool("output", {"offset": -3})
        assert tail.structured_content is not None
        assert tail.structured_content["lines"] == f"{lines - 2}\n{lines - 1}\n{lines}\n"
        assert tail.structured_content["first_line"] == lines - 3
        unknown = await tools.call_tool("output", {"command": number + 50})
        assert unknown.is_error
        assert f"command {number + 50} is not kept" in text_of(unknown)


# --- Long, cancelled and interactive work (issue 6) ---


@pytest.mark.anyio
async def test_a_cancelled_call_loses_nothing(era: str, tmp_path: pathlib.Path) -> None:
    command = "for i in 1 2 3; do echo line$i; sleep 0.4; done; echo finished"
    async with serve(era, tmp_path) as tools:
        arguments = {"command": command, "timeout": CALL_TIMEOUT}
        # The SDK gives up on a call in two ways; each sends notifications/cancelled for it.
        for how in ["read-timeout", "task-cancelled"]:
            if how == "read-timeout":
                with pytest.raises(MCPError) as raised:
                    await tools.call_tool("terminal", arguments, read_timeout_seconds=0.6)
                assert raised.value.code == REQUEST_TIMEOUT
            else:
                with anyio.move_on_after(0.6) as scope:
                    await tools.call_tool("terminal", arguments)
                assert scope.cancelled_caught
            delivered = await terminal(tools, "", timeout=CALL_TIMEOUT / 2)
            assert delivered["status"] == "completed", (how, delivered)
            assert delivered["exit_code"] == 0
            assert delivered["output"] == "line1\nline2\nline3\nfinished\n", (how, delivered)
            assert isinstance(delivered["previous_call_cancelled_sec_ago"], (int, float))
            assert any("cancelled by the client" in note for note in delivered["notes"]), (how, delivered)
            after = await terminal(tools, "echo after")
            assert (after["status"], after["output"]) == ("completed", "after\n"), (how, after)
            assert "previous_call_cancelled_sec_ago" not in after


@pytest.mark.anyio
async def test_six_repl_prompts_are_answered_one_by_one(era: str, tmp_path: pathlib.Path) -> None:
    # Each step must come back on its prompt, long before the 30 s silence return:
    # a call that waits that out fails on this client-side limit instead.
    quick = CALL_TIMEOUT / 2
    async with serve(era, tmp_path) as tools:

        async def step(text: str, **arguments: Any) -> dict[str, Any]:
            result = await tools.call_tool("terminal", {"command": text, **arguments}, read_timeout_seconds=quick)
            assert not result.is_error, text_of(result)
            assert result.structured_content is not None
            return result.structured_content

        started = await step("python3 -q")
        assert started["status"] == "waiting_for_input", started
        assert started["output"].endswith(">>> ")
        steps = [
            ("x = 6", None),
            ("y = 7", None),
            ("x * y", "42"),
            ("def twice(n): return 2 * n", None),
            (["ENTER"], None),  # the Enter key ends the block at the "..." prompt (an empty command only polls)
            ("twice(x * y)", "84"),
        ]
        for text, printed in steps:
            keys = {"keys": text} if isinstance(text, list) else {}
            reply = await step("" if keys else text, is_input=True, **keys)
            assert reply["status"] == "waiting_for_input", (text, reply)
            assert reply["exit_code"] == -1
            assert reply["output"].rstrip().endswith((">>>", "...")), (text, reply)
            if printed is not None:
                assert printed in reply["output"].splitlines(), (text, reply)
        ended = await step("exit()", is_input=True)
        assert (ended["status"], ended["exit_code"]) == ("completed", 0)


@pytest.mark.anyio
async def test_exec_bash_and_prompt_command_keep_the_session_working(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool("terminal", {"command": "exec bash --norc"})
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None
        assert (result.structured_content["status"], result.structured_content["exit_code"]) == ("completed", 0)
        assert "reinstalled" in text_of(result)
        for setting in ["PROMPT_COMMAND=", "unset PROMPT_COMMAND"]:
            changed = await terminal(tools, setting)
            assert (changed["status"], changed["exit_code"]) == ("completed", 0), (setting, changed)
            failed = await terminal(tools, "false")
            assert (failed["status"], failed["exit_code"]) == ("completed", 1), (setting, failed)
            status = await terminal(tools, "echo $?")
            assert (status["exit_code"], status["output"]) == (0, "1\n"), (setting, status)
        moved = await terminal(tools, "mkdir -p d && cd d && (exit 3)")
        assert (moved["status"], moved["exit_code"]) == ("completed", 3)
        assert moved["cwd"] == str(tmp_path / "d")


@pytest.mark.anyio
async def test_a_here_document_is_fed_line_by_line(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        opened = await terminal(tools, "cat << EOF", timeout=CALL_TIMEOUT / 2)
        assert opened["exit_code"] == -1
        assert opened["waiting_for_input"] is True, opened
        assert opened["output"] == ""
        for line in ["line 1", "line 2"]:
            fed = await terminal(tools, line, is_input=True, timeout=CALL_TIMEOUT / 2)
            assert fed["exit_code"] == -1, (line, fed)
        closed = await terminal(tools, "EOF", is_input=True, timeout=CALL_TIMEOUT / 2)
        assert (closed["status"], closed["exit_code"]) == ("completed", 0)
        assert closed["output"] == "line 1\nline 2\n"


@pytest.mark.anyio
async def test_a_waiting_call_sends_progress(era: str, tmp_path: pathlib.Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with serve(era, tmp_path) as tools:
        result = await tools.call_tool(
            "terminal",
            {"command": "for i in 1 2 3; do echo step$i; sleep 1; done", "timeout": CALL_TIMEOUT},
            progress_callback=on_progress,
        )
        assert not result.is_error, text_of(result)
        assert result.structured_content is not None
        assert result.structured_content["status"] == "completed"
        assert result.structured_content["output"] == "step1\nstep2\nstep3\n"
        assert 2 <= len(seen) <= 4, seen
        progress = [p for p, _, _ in seen]
        assert progress == sorted(set(progress)), seen
        assert all(message is not None and message.startswith("step") for _, _, message in seen), seen


@pytest.mark.anyio
async def test_sessions_run_in_parallel_and_a_job_end_is_reported_once(era: str, tmp_path: pathlib.Path) -> None:
    names = ["default", "b", "c", "d"]
    # Each command waits until all four have started: they only complete if the sessions run side by side.
    barrier = "touch {me}.flag; until [ -e default.flag ] && [ -e b.flag ] && [ -e c.flag ] && [ -e d.flag ]; do sleep 0.05; done; echo done"
    async with serve(era, tmp_path) as tools:
        for name in names[1:]:
            await terminal(tools, "true", session=name, cwd=str(tmp_path))
        replies: dict[str, dict[str, Any]] = {}

        async def call(name: str) -> None:
            replies[name] = await terminal(tools, barrier.format(me=name), session=name, timeout=CALL_TIMEOUT / 2)

        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(call, name)
        for name in names:
            assert (replies[name]["status"], replies[name]["output"]) == ("completed", "done\n"), replies[name]

        # A background job's end is told once, in the next reply of any call.
        job = await terminal(
            tools, "echo working; until [ -e go.flag ]; do sleep 0.05; done; (exit 3)", background=True, session="short"
        )
        assert (job["session"], job["status"]) == ("short", "running"), job
        (tmp_path / "go.flag").touch()

        async def told() -> dict[str, Any] | None:
            result = await tools.call_tool("run", {"command": "true"})
            said = "ended with exit code 3" in text_of(result)
            return result.structured_content if said else None

        notice = await eventually(told, lambda: "the end of job short was never reported")
        assert notice["jobs_ended"][0]["session"] == "short"
        assert notice["jobs_ended"][0]["exit_code"] == 3
        again = await tools.call_tool("terminal", {"command": "true"})
        assert "ended with exit code" not in text_of(again)
        listed = await sessions(tools)
        assert listed["short"]["background"] is True
        assert listed["short"]["exit_code"] == 3

        # While a call waits on a job, `sessions` and `output` answer at once, and so does another session.
        follow = await terminal(
            tools, "echo first; until [ -e stop.flag ]; do sleep 0.05; done; echo last", background=True, session="follow"
        )
        assert follow["status"] == "running", follow
        waited: dict[str, Any] = {}

        async def wait_on_follow() -> None:
            waited.update(await terminal(tools, "", session="follow", timeout=CALL_TIMEOUT / 2))

        async with anyio.create_task_group() as group:
            group.start_soon(wait_on_follow)
            listed = await sessions(tools)
            assert listed["follow"]["state"] == "running", listed
            page = await tools.call_tool("output", {"session": "follow", "offset": -1})
            assert page.structured_content is not None
            assert (page.structured_content["lines"], page.structured_content["running"]) == ("first\n", True)
            elsewhere = await terminal(tools, "echo elsewhere")
            assert elsewhere["output"] == "elsewhere\n"
            assert not waited, "the waiting call returned before the job ended"
            (tmp_path / "stop.flag").touch()
        assert (waited["status"], waited["exit_code"], waited["output"]) == ("completed", 0, "last\n"), waited

        # Closing `default` resets it.
        await terminal(tools, "export KEEP=1")
        closed = await tools.call_tool("session_close", {"session": "default"})
        assert closed.structured_content is not None
        assert closed.structured_content["reset"] is True
        fresh = await terminal(tools, 'echo "${KEEP:-gone}"')
        assert fresh["output"] == "gone\n"


@pytest.mark.anyio
async def test_ctrl_c_works_from_a_server_started_with_signals_ignored(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path, ignoring_signals=True) as tools:
        # A command's process has default dispositions for SIGHUP, SIGINT and SIGQUIT (bits 0 to 2).
        inherited = await terminal(tools, "grep SigIgn /proc/self/status")
        assert int(inherited["output"].split()[1], 16) & 0b111 == 0, inherited
        sleeping = await terminal(tools, "sleep 100", timeout=0.5)
        assert sleeping["status"] == "running"
        interrupted = await terminal(tools, "C-c", is_input=True, timeout=CALL_TIMEOUT / 2)
        assert (interrupted["status"], interrupted["exit_code"]) == ("completed", 130), interrupted
        after = await terminal(tools, "echo after")
        assert after["output"] == "after\n"
