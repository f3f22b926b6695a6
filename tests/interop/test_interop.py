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

import os
import pathlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, ListToolsResult, TextContent

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

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult: ...


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


@asynccontextmanager
async def serve(era: str, start_dir: pathlib.Path) -> AsyncIterator[Tools]:
    """A fresh server process, connected in the given era."""
    assert BINARY.is_file(), f"no server binary at {BINARY}: build it first, or set SHELLKEEP_BIN"
    params = StdioServerParameters(
        command=str(BINARY),
        args=["--no-rc", "--cwd", str(start_dir)],
        cwd=str(start_dir),
        # The SDK passes only a few safe variables (HOME, PATH, ...) on; a
        # private XDG_CONFIG_HOME keeps a policy file on the machine out too.
        env={"SHELLKEEP_LOG": "warn", "XDG_CONFIG_HOME": str(start_dir / ".config")},
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


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.mark.anyio
async def test_lists_tools_with_output_schemas(era: str, tmp_path: pathlib.Path) -> None:
    async with serve(era, tmp_path) as tools:
        listed = await tools.list_tools()
        by_name = {tool.name: tool for tool in listed.tools}
        assert sorted(by_name) == ["policy_explain", "run", "terminal"]
        for tool in by_name.values():
            assert tool.output_schema is not None, tool.name
            assert tool.output_schema.get("type") == "object", tool.name
        terminal_props = by_name["terminal"].input_schema["properties"]
        assert {"command", "is_input", "timeout", "reset", "session"} <= set(terminal_props)
        run_props = by_name["run"].input_schema["properties"]
        assert {"command", "timeout_sec", "cwd", "env", "stdin"} <= set(run_props)


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
        pytest.param({"command": "echo hi", "bogus": 1}, "unknown field", id="unknown-argument"),
        pytest.param({"command": "echo hi", "session": "other"}, "default session", id="unknown-session"),
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
        assert any("The command timed out after 0.3 seconds." in note for note in running["notes"])
        refused = await tools.call_tool("terminal", {"command": "echo second"})
        assert refused.is_error
        assert refused.structured_content is not None
        assert refused.structured_content["status"] == "not_executed"
        assert any("is NOT executed" in note for note in refused.structured_content["notes"])
        stopped = await terminal(tools, "C-c", is_input=True, timeout=CALL_TIMEOUT / 2)
        assert stopped["exit_code"] == 130
        assert "CTRL+C was sent." in stopped["notes"]
