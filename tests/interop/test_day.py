"""A day of real work through the Python `mcp` SDK: the scenarios that used to trip an agent up.

* a package manager that polls the terminal while its child works (apt waiting for dpkg's
  triggers) is no prompt: the call completes, nothing claims the program waits for input, and
  the next command runs;
* a background server started after `cd project`, a venv's `activate` and `export PORT=…` runs
  in `project`, with the venv's Python and the port, and is reached from the terminal;
* the user's `~/.bash_history` keeps what it held and gains nothing of shellkeep's, after nested
  shells (whose rc appends to it), `exec bash` and a reset;
* the notices of running and waiting replies stay within their budget.

Each test starts its own server; the binary is the one `test_interop.py` uses.
"""

from __future__ import annotations

import os
import pathlib
import socket
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from mcp import StdioServerParameters
from mcp.client import Client
from mcp.types import CallToolResult
from test_interop import BINARY, CALL_TIMEOUT, Tools, blocks_of, serve, terminal, text_of

# A package manager's shape: it drains the terminal and reads its child's pipe in one `select`,
# and the child is silent for seconds at a time (dpkg's "Processing triggers for man-db").
FAKE_APT = textwrap.dedent(
    """\
    import os, select, subprocess, sys
    child = subprocess.Popen(
        ["sh", "-c", "echo 'Processing triggers for man-db ...'; sleep 4; echo 'Updating database of manual pages ...'; sleep 3; echo triggers-done"],
        stdout=subprocess.PIPE,
    )
    tty = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([tty, child.stdout], [], [])
        if tty in ready:
            os.read(tty, 1024)
        if child.stdout in ready:
            line = child.stdout.readline()
            if not line:
                break
            sys.stdout.write(line.decode())
            sys.stdout.flush()
    print("Setting up fake-package (1.0) ... exit", child.wait())
    """
)

# How a reply says a program waits for input, in any of its forms.
WAITING_WORDS = ("waiting for input", "waits for input", "is NOT executed")


def notices_of(result: CallToolResult, output: str) -> str:
    """The reply's text without the command's output block and the cwd and Python lines."""
    kept = []
    for block in blocks_of(result):
        if output and block.strip() == output.strip():
            continue
        for line in block.splitlines():
            if line.startswith(("[Current working directory:", "[Python interpreter:")):
                continue
            kept.append(line)
    return "\n".join(kept)


@pytest.mark.anyio
async def test_a_package_manager_polling_the_terminal_and_its_child_is_no_prompt(tmp_path: pathlib.Path) -> None:
    (tmp_path / "fake_apt.py").write_text(FAKE_APT)
    async with serve("session", tmp_path) as tools:
        result = await tools.call_tool("terminal", {"command": "python3 fake_apt.py", "timeout": 60})
        text = text_of(result)
        assert not result.is_error, text
        reply = result.structured_content
        assert reply is not None
        assert reply["status"] == "completed", text
        assert reply["exit_code"] == 0, text
        assert "triggers-done" in reply["output"], text
        assert "Setting up fake-package (1.0) ... exit 0" in reply["output"], text
        assert not any(word in text for word in WAITING_WORDS), text
        after = await terminal(tools, "echo next-command-ran")
        assert after["output"].strip() == "next-command-ran", after


@pytest.mark.anyio
async def test_a_polling_package_manager_that_outlives_the_call_is_running_not_waiting(tmp_path: pathlib.Path) -> None:
    (tmp_path / "fake_apt.py").write_text(FAKE_APT)
    async with serve("session", tmp_path) as tools:
        result = await tools.call_tool("terminal", {"command": "python3 fake_apt.py", "timeout": 2})
        text = text_of(result)
        reply = result.structured_content
        assert reply is not None
        assert reply["status"] == "running", text
        assert not any(word in text for word in WAITING_WORDS), text
        # Polls until it ends: never a claim that it waits for input.
        for _ in range(30):
            result = await tools.call_tool("terminal", {"command": "", "timeout": 5})
            text = text_of(result)
            assert not any(word in text for word in WAITING_WORDS), text
            assert result.structured_content is not None
            if result.structured_content["status"] == "completed":
                break
        assert result.structured_content["status"] == "completed", text
        assert result.structured_content["exit_code"] == 0, text


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.anyio
async def test_a_background_server_starts_where_the_agent_is(tmp_path: pathlib.Path) -> None:
    port = free_port()
    async with serve("session", tmp_path) as tools:
        setup = await terminal(
            tools,
            "mkdir -p project && cd project && python3 -m venv --without-pip venv"
            f" && . venv/bin/activate && export PORT={port} && echo marker > served-from-project.txt",
            timeout=60,
        )
        assert setup["exit_code"] == 0, setup
        project = tmp_path / "project"
        result = await tools.call_tool(
            "terminal",
            {"command": 'echo "job in $PWD with $(command -v python3) on $PORT"; exec python3 -m http.server "$PORT" --bind 127.0.0.1', "background": True},
        )
        text = text_of(result)
        assert not result.is_error, text
        assert str(project) in text, text
        job = result.structured_content
        assert job is not None
        name = job["session"]
        # The agent's session is free at once.
        free = await terminal(tools, "pwd")
        assert free["output"].strip() == str(project), free
        # What the job printed first (in the start reply, or a poll): where it runs, with which
        # Python, on which port.
        seen = text
        assert "job in" in seen or "with the environment of session" in seen, seen
        for _ in range(20):
            if "job in" in seen:
                break
            page = await tools.call_tool("terminal", {"command": "", "session": name, "timeout": 1})
            seen += text_of(page)
            if "job in" in seen:
                break
        assert f"job in {project} with {project}/venv/bin/python3 on {port}" in seen, seen
        # Reached from the terminal: the listing is the project's.
        fetch = await terminal(
            tools,
            "for i in $(seq 100); do python3 -c 'import os, urllib.request; "
            "print(urllib.request.urlopen(\"http://127.0.0.1:%s/\" % os.environ[\"PORT\"]).read().decode())'"
            " 2>/dev/null && break; sleep 0.1; done",
            timeout=30,
        )
        assert "served-from-project.txt" in fetch["output"], fetch
        closed = await tools.call_tool("session_close", {"session": name})
        assert not closed.is_error, text_of(closed)


@asynccontextmanager
async def serve_with_home(home: pathlib.Path, start_dir: pathlib.Path) -> AsyncIterator[Tools]:
    """A server whose shells read the user's own `~/.bashrc` from `home`."""
    params = StdioServerParameters(
        command=str(BINARY),
        args=["--cwd", str(start_dir)],
        cwd=str(start_dir),
        env={
            "HOME": str(home),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "SHELLKEEP_LOG": "warn",
            "XDG_CONFIG_HOME": str(home / ".config"),
        },
    )
    async with Client(params, mode="auto", read_timeout_seconds=CALL_TIMEOUT) as client:
        yield client


@pytest.mark.anyio
async def test_the_history_file_gains_nothing_of_shellkeeps(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    history = home / ".bash_history"
    history.write_text("echo from-an-earlier-day\n")
    (home / ".bashrc").write_text(
        "HISTFILE=~/.bash_history\nHISTSIZE=10000\nHISTFILESIZE=10000\nshopt -s histappend\n"
        "PROMPT_COMMAND='history -a'\n"
    )
    async with serve_with_home(home, tmp_path) as tools:
        await terminal(tools, "echo day-one")
        nested = await tools.call_tool("terminal", {"command": "bash"})
        assert not nested.is_error, text_of(nested)
        await terminal(tools, "echo inside-nested")
        await tools.call_tool("terminal", {"command": "exit"})
        await terminal(tools, "echo after-nested")
        await tools.call_tool("terminal", {"command": "exec bash"})
        await terminal(tools, "echo after-exec")
        reset = await tools.call_tool("terminal", {"command": "", "reset": True})
        assert not reset.is_error, text_of(reset)
        await terminal(tools, "echo after-reset")
    lines = history.read_text().splitlines()
    assert lines[0] == "echo from-an-earlier-day", lines
    theirs = [line for line in lines if "shellkeep" in line or "reinstall" in line or line.startswith(("{ .", " { ."))]
    assert not theirs, lines


@pytest.mark.anyio
async def test_running_and_waiting_notices_stay_within_their_budget(tmp_path: pathlib.Path) -> None:
    async with serve("session", tmp_path) as tools:
        running = await tools.call_tool("terminal", {"command": "echo started; sleep 30", "timeout": 1})
        assert running.structured_content is not None
        assert running.structured_content["status"] == "running", text_of(running)
        notices = notices_of(running, running.structured_content["output"])
        assert len(notices) <= 260, (len(notices), notices)
        poll = await tools.call_tool("terminal", {"command": "", "timeout": 1})
        assert poll.structured_content is not None
        notices = notices_of(poll, poll.structured_content["output"])
        assert len(notices) <= 260, (len(notices), notices)
        await tools.call_tool("terminal", {"command": "C-c", "is_input": True})
        waiting = await tools.call_tool("terminal", {"command": "read -r -p 'Your name? ' name; echo \"hi $name\"", "timeout": 10})
        assert waiting.structured_content is not None
        assert waiting.structured_content["status"] != "completed", text_of(waiting)
        notices = notices_of(waiting, waiting.structured_content["output"])
        assert len(notices) <= 260, (len(notices), notices)
        assert "is_input" in notices, notices
        answered = await terminal(tools, "Ada", is_input=True)
        assert "hi Ada" in answered["output"], answered
