"""The real MCP clients, driven end to end against the debug binary.

* **Claude Code** and **Gemini CLI** each run a scripted day of work
  (``cd``, a venv, a failing test, a cut output read back with ``output``, a
  background dev server, pdb ``up``/``down``, ``cat`` reading input with no
  prompt, a curses menu driven with ``keys``, an idle remote session left past twice the unwatched-time limit,
  a 100 kB-per-stream ``run``) against ``model_api.py``, a local stand-in for
  their model API that answers with the script's tool calls and records every
  request. The test then reads each tool result as the client handed it to
  its model (Claude Code hands over the structured content as JSON, Gemini
  CLI the text) and checks that every call succeeded and that the facts an
  agent needs are there, in whichever form the client chose.
* The **TypeScript SDK** (``ts_client.mjs``) calls every reply kind with its
  ``structuredContent`` validation on.
* The **MCP Inspector** CLI lists the tools with ``--strict`` and calls
  ``terminal`` over Streamable HTTP (``serve --http``, a bearer token), in
  both protocol eras.

The clients are installed by ``tests/clients/setup`` into ``.clients/``
(``SHELLKEEP_CLIENTS_DIR``). Without them the tests are skipped, except under
``CI=true``, where they fail. The server binary is ``SHELLKEEP_BIN`` (default
``target/debug/shellkeep``). shellkeep starts with a policy whose one
category allows ``LIMIT_SEC`` of unwatched time, so "left for twice the
limit" takes seconds, not minutes.

What a fact is, in each form, is the table ``FACTS`` below: one place to
adjust when the field names of the structured content settle.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from programs import write_programs

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
BINARY = pathlib.Path(os.environ.get("SHELLKEEP_BIN", REPO / "target" / "debug" / "shellkeep"))
CLIENTS = pathlib.Path(os.environ.get("SHELLKEEP_CLIENTS_DIR", REPO / ".clients"))
if not CLIENTS.is_absolute():
    CLIENTS = REPO / CLIENTS
MODULES = CLIENTS / "node_modules"
NODE = MODULES / ".bin" / "node"
CLAUDE = MODULES / ".bin" / "claude"
GEMINI = MODULES / "@google" / "gemini-cli" / "bundle" / "gemini.js"
INSPECTOR = MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"

# The unwatched-time limit of the policy shellkeep starts with, in seconds.
LIMIT_SEC = 5
# The most a whole client run may take: past it the run is a hang.
CLIENT_DEADLINE_SEC = 240
# No reply, in either form, may exceed this many characters (the budget).
REPLY_BUDGET = 40_000

Reply = dict[str, Any] | str  # the structured content (JSON) or the text, as the model got it


def raw(reply: Reply) -> str:
    """A reply as the characters the model read."""
    return reply if isinstance(reply, str) else json.dumps(reply, separators=(",", ":"))


def strings(value: Any) -> str:
    """Every string inside a JSON value, joined by newlines: its text unescaped."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(strings(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(strings(v) for v in value.values())
    return ""


def before_output(reply: dict[str, Any], needle: str, output_keys: tuple[str, ...] = ("output",)) -> bool:
    """`needle` is in the serialized reply, before every output body."""
    text = raw(reply)
    at = text.find(needle)
    if at < 0:
        return False
    starts = [text.find(f'"{key}":') for key in output_keys if f'"{key}":' in text]
    return all(at < start for start in starts)


def has_output_call(reply: dict[str, Any]) -> bool:
    """A ready-made `output` call for the lines left out comes before the output."""
    match = re.search(r'\{[^{}]*"command":\d+[^{}]*"offset":-?\d+[^{}]*\}', raw(reply))
    return match is not None and before_output(reply, match.group(0))


def json_cut_notice(reply: dict[str, Any], keys: tuple[str, ...] = ("output",)) -> bool:
    """The cut is said before the output (a field naming what was omitted)."""
    head = raw(reply)
    positions = [head.find(f'"{key}":') for key in keys if f'"{key}":' in head]
    head = head[: min(positions)] if positions else head
    return re.search(r"omitted", head) is not None


@dataclass
class Fact:
    """One fact an agent needs: how each form carries it."""

    json: Callable[[dict[str, Any], Any], bool]
    text: Callable[[str, Any], bool]


# The facts an agent needs for its next step, as the spec words them, in both forms.
# `arg` is the step's expected value where a fact has one. Field names of the structured
# content are not final: adjust them here.
FACTS: dict[str, Fact] = {
    "completed": Fact(
        json=lambda d, _: d.get("status") == "completed",
        text=lambda t, _: "[The command completed with exit code" in t,
    ),
    "exit_code": Fact(
        json=lambda d, n: d.get("exit_code") == n,
        text=lambda t, n: f"exit code {n}." in t,
    ),
    "cwd": Fact(
        json=lambda d, tail: str(d.get("cwd", "")).endswith(tail),
        text=lambda t, tail: re.search(r"\[Current working directory: [^\]]*" + re.escape(tail) + r"\]", t) is not None,
    ),
    "python_interpreter": Fact(
        json=lambda d, tail: tail in str(d.get("python_interpreter", "")),
        text=lambda t, tail: re.search(r"\[Python interpreter: [^\]]*" + re.escape(tail), t) is not None,
    ),
    "says": Fact(  # the output shows this text
        json=lambda d, s: s in raw(d) or s in strings(d),
        text=lambda t, s: s in t,
    ),
    "cut_notice": Fact(
        json=lambda d, _: d.get("truncated") is True and json_cut_notice(d),
        text=lambda t, _: re.search(r"\[\.\.\. \d+ characters \(\d+ lines\) omitted", t) is not None,
    ),
    "output_call": Fact(
        json=lambda d, _: has_output_call(d),
        text=lambda t, _: "[Read the lines left out with the output tool: {" in t,
    ),
    "background_no_limit": Fact(
        json=lambda d, _: d.get("background") is True and ("no_time_limit" in d or "time_limit" in d),
        text=lambda t, _: "No time limit" in t and "Background job started" in t,
    ),
    "waiting_for_input": Fact(
        json=lambda d, _: d.get("status") == "waiting_for_input",
        text=lambda t, _: "waits for input" in t,
    ),
    "reader": Fact(  # who reads the input: the program or the shell
        json=lambda d, _: d.get("reader") in ("program", "shell"),
        text=lambda t, _: "waits for input" in t,
    ),
    "no_prompt": Fact(  # a program reads its input on an empty line: who reads, and that C-d ends it
        json=lambda d, _: d.get("status") == "waiting_for_input" and d.get("reader") is not None and "C-d" in raw(d),
        text=lambda t, _: "no prompt (C-d ends input)" in t,
    ),
    "alive": Fact(  # still running, not stopped by the unwatched-time limit
        json=lambda d, _: d.get("status") != "killed" and "timeout_reason" not in d,
        text=lambda t, _: "killed" not in t.lower() and "stopped" not in t.lower(),
    ),
    "run_cut_notice": Fact(
        json=lambda d, _: (
            isinstance(d.get("stdoutOutputCall"), dict)
            and isinstance(d.get("stderrOutputCall"), dict)
            and before_output(d, '"stdoutOutputCall"', ("stdout", "stderr"))
            and before_output(d, '"stderrOutputCall"', ("stdout", "stderr"))
        ),
        text=lambda t, _: "[Read the lines of stdout left out" in t and "[Read the lines of stderr left out" in t,
    ),
    "lists_background_job": Fact(
        json=lambda d, s: s in raw(d) and "background" in raw(d),
        text=lambda t, s: f"- {s}: background job" in t,
    ),
}


@dataclass
class Step:
    """One scripted tool call and the facts its result must carry."""

    id: str
    tool: str
    args: dict[str, Any]
    facts: dict[str, Any] = field(default_factory=dict)
    args_from_previous: str | None = None

    def call(self) -> dict[str, Any]:
        """The call as the model stand-in's script has it."""
        call: dict[str, Any] = {"id": self.id, "tool": self.tool, "args": self.args}
        if self.args_from_previous:
            call["args_from_previous"] = self.args_from_previous
        return call


# What Claude Code's ToolSearch is asked to load (its MCP tools are deferred until then).
TOOL_SEARCH = "select:" + ",".join(
    f"mcp__shellkeep__{t}" for t in ("terminal", "output", "run", "sessions", "session_close", "policy_explain")
)


def the_day(client: str, http_port: int) -> list[list[Step]]:
    """The scripted day, as turns of calls, for `client` ("claude" or "gemini")."""
    claude = client == "claude"
    # Claude Code passes any argument through; Gemini CLI checks arguments against the
    # schema first and adds `wait_for_previous` itself. They go on calls that change no
    # state, so one refused call does not change where the rest of the day runs.
    openhands = {"summary": "scripted step", "security_risk": "LOW"} if claude else {}
    n = iter(range(1, 1000))

    def step(tool: str, args: dict[str, Any], **facts: Any) -> Step:
        return Step(id=f"sk{next(n):02d}", tool=tool, args=args, facts=facts)

    turns: list[list[Step]] = []
    if claude:
        turns.append([Step(id="sk00", tool="ToolSearch", args={"query": TOOL_SEARCH, "max_results": 6})])
    turns += [
        [
            step(
                "terminal",
                {"command": "cd proj && python3 -m venv --without-pip .venv && source .venv/bin/activate"},
                completed=None,
                exit_code=0,
                cwd="/proj",
                python_interpreter="/proj/.venv/bin/python",
            )
        ],
        [step("terminal", {"command": "python -m unittest test_math", **openhands}, completed=None, exit_code=1, says="FAILED (failures=1)")],
    ]
    if claude:
        turns.append(
            [
                step(
                    "terminal",
                    {"command": "echo one > order.txt && echo two >> order.txt && cat order.txt", "wait_for_previous": True},
                    says="one\ntwo",
                )
            ]
        )
    else:
        # One turn, two calls: Gemini CLI runs them in parallel; the second waits for the first.
        turns.append(
            [
                step("terminal", {"command": "sleep 1; echo one > order.txt"}, completed=None),
                step("terminal", {"command": "echo two >> order.txt && cat order.txt", "wait_for_previous": True}, says="one\ntwo"),
            ]
        )
    turns += [
        [step("terminal", {"command": "seq 1 200000", **openhands}, completed=None, exit_code=0, cut_notice=None, output_call=None)],
        [
            Step(
                id=f"sk{next(n):02d}",
                tool="output",
                args={"offset": 100000, "limit": 5},
                args_from_previous="output_call",
                facts={"read_back": None},
            )
        ],
        [
            step(
                "terminal",
                {"command": f"python3 -m http.server {http_port} --bind 127.0.0.1", "background": True, "session": "devserver"},
                background_no_limit=None,
            )
        ],
        [
            step(
                "terminal",
                {
                    "command": f"curl -sS --retry 20 --retry-connrefused --retry-delay 1 -o /dev/null -w 'HTTP %{{http_code}}\\n' http://127.0.0.1:{http_port}/"
                },
                completed=None,
                exit_code=0,
                says="HTTP 200",
            )
        ],
        [step("terminal", {"command": "python crash.py"}, waiting_for_input=None, reader=None, says="ZeroDivisionError")],
        [step("terminal", {"command": "up", "is_input": True}, says="outer()")],
        [step("terminal", {"command": "down", "is_input": True}, says="inner()")],
        [step("terminal", {"command": "q", "is_input": True}, completed=None, exit_code=0, says="post-mortem over")],
        [step("terminal", {"command": "cat > notes.txt"}, waiting_for_input=None, no_prompt=None)],
        [step("terminal", {"command": "first note", "is_input": True})],
        [step("terminal", {"command": "C-d", "is_input": True}, completed=None, exit_code=0)],
        [step("terminal", {"command": "python menu.py"}, says="banana")],
        [step("terminal", {"command": "", "keys": ["DOWN", "DOWN", "ENTER"]}, completed=None, exit_code=0, says="chose: cherry")],
        # Only if the keys did not end the menu: C-c ends it, so the rest of the day runs.
        [step("terminal", {"command": "C-c", "is_input": True})],
        [step("terminal", {"command": "python remote.py {peer_port}"}, says="connected to the remote end")],
        # Twice the limit and more, spent in another session: nobody watches the remote one.
        [step("terminal", {"command": f"sleep {2 * LIMIT_SEC + 2}", "session": "clock", "timeout": 60}, completed=None)],
        [step("terminal", {"command": "ping", "is_input": True}, alive=None, says="echo: ping")],
        [step("terminal", {"command": "C-d", "is_input": True}, completed=None, says="logout")],
        [step("run", {"command": "seq 1 20000; seq 1 20000 >&2", **openhands}, run_cut_notice=None, says="20000")],
        [step("sessions", {}, lists_background_job="devserver")],
        [step("session_close", {"session": "devserver"}, says="devserver")],
    ]
    return turns


def policy_file(directory: pathlib.Path) -> pathlib.Path:
    """A policy whose one category allows LIMIT_SEC of unwatched time."""
    path = directory / "policy.json"
    path.write_text(
        json.dumps(
            {
                "version": "1.0",
                "description": "short limits for the client tests",
                "categories": {"short": {"exec_timeout_sec": LIMIT_SEC, "no_output_timeout_sec": LIMIT_SEC}},
                "command_patterns": {},
                "default_category": "short",
            }
        )
    )
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_clients() -> None:
    """Skips (fails under CI=true) when the clients or the binary are missing."""
    missing = [str(p) for p in (NODE, CLAUDE, GEMINI, BINARY) if not p.exists()]
    if missing:
        message = f"missing {', '.join(missing)}: run tests/clients/setup and cargo build"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def base_env(home: pathlib.Path) -> dict[str, str]:
    """A clean environment: nothing of the machine's own clients, keys or settings."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "xterm-256color",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "SHELLKEEP_LOG": "warn",
    }


@dataclass
class Outcome:
    """What a client run left: each call's result as the model got it."""

    results: dict[str, tuple[Reply, bool]]  # id -> (reply, is_error)
    derived: dict[str, bool | None]  # id -> whether args_from_previous found its call
    log: str


class ModelApi:
    """The model stand-in, as a process, with its script and record."""

    def __init__(self, work: pathlib.Path, turns: list[list[Step]]) -> None:
        self.script = work / "script.json"
        self.record = work / "requests.jsonl"
        ports = work / "ports.json"
        self.script.write_text(json.dumps({"turns": [[s.call() for s in t] for t in turns], "final": "The day is done."}))
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "model_api.py"), str(self.script), str(self.record), str(ports)],
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not ports.exists():
            assert self.process.poll() is None, "the model stand-in exited at start"
            assert time.monotonic() < deadline, "the model stand-in did not start within 30 s"
            time.sleep(0.05)
        self.ports = json.loads(ports.read_text())

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def requests(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]


def claude_results(requests: list[dict[str, Any]]) -> dict[str, tuple[Reply, bool]]:
    """Claude Code: each tool_result of the main requests, by call id."""
    results: dict[str, tuple[Reply, bool]] = {}
    for request in requests:
        if not request.get("main"):
            continue
        for message in request["body"].get("messages", []):
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") != "tool_result":
                    continue
                body = block.get("content", "")
                if isinstance(body, list):
                    body = "\n".join(b.get("text", "") for b in body if isinstance(b, dict))
                reply: Reply = body
                try:
                    parsed = json.loads(body)
                    if isinstance(parsed, dict):
                        reply = parsed
                except ValueError:
                    pass
                # The first request after a call is what the model read; later ones may compact it.
                results.setdefault(str(block.get("tool_use_id", "")).removeprefix("toolu_"), (reply, bool(block.get("is_error"))))
    return results


def gemini_results(requests: list[dict[str, Any]]) -> dict[str, tuple[Reply, bool]]:
    """Gemini CLI: each functionResponse of the main requests, by call id."""
    results: dict[str, tuple[Reply, bool]] = {}
    for request in requests:
        if not request.get("main"):
            continue
        for content in request["body"].get("contents", []):
            for part in content.get("parts", []):
                response = part.get("functionResponse")
                if not response:
                    continue
                body = response.get("response", {})
                if "error" in body:
                    results.setdefault(str(response.get("id", "")), (str(body["error"]), True))
                else:
                    results.setdefault(str(response.get("id", "")), (str(body.get("output", json.dumps(body))), False))
    return results


def run_client(client: str, tmp_path: pathlib.Path) -> tuple[list[list[Step]], Outcome]:
    """Runs `client` through the day; returns the turns and what its model was handed."""
    require_clients()
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    write_programs(work / "proj")
    turns = the_day(client, free_port())
    api = ModelApi(tmp_path, turns)
    try:
        return turns, drive(client, api, home, work, tmp_path)
    finally:
        api.close()


def drive(client: str, api: ModelApi, home: pathlib.Path, work: pathlib.Path, tmp_path: pathlib.Path) -> Outcome:
    """Starts the client in `work` against the stand-in and waits for it to end."""
    server = {"command": str(BINARY), "args": ["--no-rc", "--policy", str(policy_file(tmp_path))]}
    env = base_env(home)
    base_url = f"http://127.0.0.1:{api.ports['api']}"
    prompt = "Work through the day with the shellkeep tools."
    if client == "claude":
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"shellkeep": server}}))
        env |= {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-api03-dummy",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        command = [
            str(CLAUDE),
            "-p",
            prompt,
            "--mcp-config",
            str(config),
            "--strict-mcp-config",
            "--allowedTools",
            "mcp__shellkeep",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "claude-sonnet-4-5",
        ]
    else:
        gemini_dir = home / ".gemini"
        gemini_dir.mkdir(parents=True)
        settings = {
            "mcpServers": {"shellkeep": {**server, "trust": True}},
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        (gemini_dir / "settings.json").write_text(json.dumps(settings))
        (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(work): "TRUST_FOLDER"}))
        env |= {"GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_API_KEY": "dummy-key"}
        command = [str(NODE), str(GEMINI), "-p", prompt, "--yolo", "-o", "stream-json", "-m", "gemini-2.5-pro"]
    log = tmp_path / f"{client}.log"
    with log.open("w") as out:
        try:
            finished = subprocess.run(
                command, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=CLIENT_DEADLINE_SEC
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{client} did not finish within {CLIENT_DEADLINE_SEC} s; log: {log}")
    text = log.read_text(errors="replace")
    assert finished.returncode == 0, f"{client} exited with {finished.returncode}:\n{text[-3000:]}"
    requests = api.requests()
    results = claude_results(requests) if client == "claude" else gemini_results(requests)
    derived = {c["id"]: c.get("derived") for r in requests for c in (r.get("calls") or [])}
    return Outcome(results=results, derived=derived, log=text)


def check(turns: list[list[Step]], outcome: Outcome) -> list[str]:
    """Every failed check of the day, as lines: call id, tool, what is wrong."""
    failures = []
    for turn in turns:
        for s in turn:
            where = f"{s.id} {s.tool} {json.dumps(s.args)[:80]}"
            if s.id not in outcome.results:
                failures.append(f"{where}: no result reached the model")
                continue
            reply, is_error = outcome.results[s.id]
            if is_error:
                failures.append(f"{where}: the call failed: {raw(reply)[:300]}")
                continue
            if s.tool == "ToolSearch":
                continue
            text = raw(reply)
            if len(text) > REPLY_BUDGET:
                failures.append(f"{where}: {len(text)} characters, over the {REPLY_BUDGET} budget")
            if "<persisted-output>" in text or "Output too large" in text:
                failures.append(f"{where}: the client replaced the result by a file ({text[:120]!r})")
            for name, arg in s.facts.items():
                if name == "read_back":
                    if outcome.derived.get(s.id) is not True:
                        failures.append(f"{where}: read_back: no output call in the cut reply to follow")
                    elif not re.search(r"\b\d{3,6}\b", text):
                        failures.append(f"{where}: read_back: the page has no lines")
                    continue
                fact = FACTS[name]
                good = fact.json(reply, arg) if isinstance(reply, dict) else fact.text(reply, arg)
                if not good:
                    form = "json" if isinstance(reply, dict) else "text"
                    failures.append(f"{where}: {name}({arg!r}) missing in the {form}: {text[:400]!r}")
    return failures


def day_test(client: str, tmp_path: pathlib.Path) -> None:
    turns, outcome = run_client(client, tmp_path)
    failures = check(turns, outcome)
    report = tmp_path / "failures.txt"
    report.write_text("\n".join(failures))
    assert not failures, f"{len(failures)} checks failed ({client}):\n" + "\n".join(failures)


def test_claude_code_scripted_day(tmp_path: pathlib.Path) -> None:
    day_test("claude", tmp_path)


def test_gemini_cli_scripted_day(tmp_path: pathlib.Path) -> None:
    day_test("gemini", tmp_path)


# ------------------------------------------------------------------ TypeScript SDK

# (tool, arguments, isError expected: True, False, or None for either). Every reply kind.
EVERY_REPLY_KIND: list[tuple[str, dict[str, Any], bool | None]] = [
    ("terminal", {"command": "echo hi"}, False),  # completed
    ("terminal", {"command": "false"}, False),  # non-zero exit
    ("terminal", {"command": "sleep 3; echo slept", "timeout": 1}, False),  # running, with timeout
    ("terminal", {"command": "echo refused"}, None),  # refused while running
    ("terminal", {"command": "", "timeout": 10}, False),  # poll to the end
    ("terminal", {"command": "read line", "timeout": 5}, False),  # the shell waits, no prompt
    ("terminal", {"command": "C-d", "is_input": True}, False),
    ("terminal", {"command": "python3 -c \"x = input('name? '); print('hello', x)\"", "timeout": 5}, False),  # prompt
    ("terminal", {"command": "Bob", "is_input": True}, False),
    ("terminal", {"command": "sleep 30", "timeout": 1}, False),
    ("terminal", {"command": "C-c", "is_input": True}, False),  # C-c
    ("terminal", {"command": "seq 1 200000"}, False),  # cut output
    ("output", {}, False),  # the latest command's first page
    ("output", {"offset": 100000, "limit": 50}, False),  # a page from the middle
    ("output", {"offset": -5}, False),  # the tail
    ("output", {"session": "nosuch"}, True),
    ("terminal", {"command": "for i in 1 2 3; do echo job-$i; sleep 1; done", "background": True, "session": "bgjob"}, False),
    ("terminal", {"command": "", "session": "bgjob", "timeout": 10}, False),  # background poll to its end
    ("terminal", {"command": "pwd", "session": "named"}, False),  # named session
    ("sessions", {}, False),
    ("output", {"session": "bgjob"}, False),
    ("session_close", {"session": "named"}, False),
    ("session_close", {"session": "nosuch"}, True),
    ("run", {"command": "echo ok"}, False),  # success
    ("run", {"command": "echo err >&2; exit 3"}, False),  # non-zero exit
    ("run", {"command": "sleep 10", "timeout_sec": 1}, False),  # timeout
    ("run", {"command": "seq 1 200000; seq 1 200000 >&2"}, False),  # both streams cut
    ("output", {"run": 4, "stream": "stderr", "offset": 100000, "limit": 5}, False),
    ("run", {"command": "cat; echo $GREETING; pwd", "stdin": "in\n", "env": {"GREETING": "hey"}, "cwd": "/"}, False),
    ("policy_explain", {"command": "cd demo && cargo build --release"}, False),
    ("policy_explain", {"command": "sleep 1", "timeout_sec": 5}, False),
    ("terminal", {"command": "x", "reset": True, "is_input": True}, True),  # bad arguments
    ("terminal", {"command": 5}, True),
    ("terminal", {"command": "echo x", "timout": 3}, True),  # a near miss names the right one
    ("output", {"stream": "stderr"}, True),
    ("run", {"command": "true", "env": {"A=B": "c"}}, True),
    ("terminal", {"command": "echo fresh", "reset": True}, False),  # reset
]

# What real clients add on their own, and `null` for "not given": must not fail a call.
CLIENT_ARGUMENTS: list[tuple[str, dict[str, Any], bool | None]] = [
    ("terminal", {"command": "echo zero"}, False),
    ("terminal", {"command": "echo one", "wait_for_previous": True}, False),
    ("sessions", {"wait_for_previous": False}, False),
    ("terminal", {"command": "echo two", "summary": "print two", "security_risk": "LOW"}, False),
    ("run", {"command": "echo three", "summary": "print three", "security_risk": "LOW"}, False),
    ("terminal", {"command": "echo four", "timeout": None, "is_input": None, "session": None}, False),
    ("output", {"offset": None, "limit": None}, False),
]


def ts_calls(tmp_path: pathlib.Path, calls: list[tuple[str, dict[str, Any], bool | None]]) -> list[dict[str, Any]]:
    """Runs `ts_client.mjs` with these calls; returns its results (tools/list first)."""
    require_clients()
    # The script resolves the SDK from its own directory: give it the installed modules.
    script = tmp_path / "ts_client.mjs"
    script.write_text((HERE / "ts_client.mjs").read_text())
    (tmp_path / "node_modules").symlink_to(MODULES)
    start = tmp_path / "start"
    start.mkdir()
    plan = {
        "command": str(BINARY),
        "args": ["--no-rc", "--cwd", str(start)],
        "cwd": str(start),
        "env": {**base_env(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")},
        "calls": [{"tool": tool, "arguments": args, "timeout_ms": 60_000} for tool, args, _ in calls],
    }
    finished = subprocess.run(
        [str(NODE), str(script)], input=json.dumps(plan), capture_output=True, text=True, timeout=CLIENT_DEADLINE_SEC
    )
    assert finished.returncode == 0, f"ts_client.mjs exited with {finished.returncode}:\n{finished.stderr[-3000:]}"
    results = json.loads(finished.stdout)
    assert len(results) == len(calls) + 1
    return results


def ts_failures(calls: list[tuple[str, dict[str, Any], bool | None]], results: list[dict[str, Any]]) -> list[str]:
    """Every call the SDK threw on or whose isError was not the expected one."""
    failures = []
    for (tool, args, expected), result in zip(calls, results[1:], strict=True):
        where = f"{tool} {json.dumps(args)[:100]}"
        if result["error"] is not None:
            failures.append(f"{where}: the SDK threw: {result['error'][:400]}")
        elif expected is not None and result["isError"] != expected:
            failures.append(f"{where}: isError {result['isError']}, expected {expected}: {result['text'][:300]!r}")
        elif not result["isError"] and result["structured"] is None:
            failures.append(f"{where}: no structured content")
    return failures


@pytest.fixture(scope="module")
def every_reply_kind(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The TypeScript SDK's results for EVERY_REPLY_KIND, made once for the tests below."""
    return ts_calls(tmp_path_factory.mktemp("ts"), EVERY_REPLY_KIND)


def test_typescript_sdk_validates_every_reply_kind(every_reply_kind: list[dict[str, Any]]) -> None:
    listed = every_reply_kind[0]
    assert sorted(listed["tools"]) == ["output", "policy_explain", "run", "session_close", "sessions", "terminal"]
    assert sorted(listed["withOutputSchema"]) == sorted(listed["tools"]), "every tool declares an output schema"
    assert sorted(listed["validating"]) == sorted(listed["tools"]), "the SDK validates every tool's structured content"
    failures = ts_failures(EVERY_REPLY_KIND, every_reply_kind)
    assert not failures, "\n".join(failures)


def test_typescript_sdk_every_reply_within_budget(every_reply_kind: list[dict[str, Any]]) -> None:
    """No reply kind exceeds the budget, in its text or in its structured content."""
    failures = []
    for (tool, args, _), result in zip(EVERY_REPLY_KIND, every_reply_kind[1:], strict=True):
        forms = {"text": result.get("text") or "", "json": raw(result["structured"]) if result.get("structured") else ""}
        for form, value in forms.items():
            if len(value) > REPLY_BUDGET:
                failures.append(f"{tool} {json.dumps(args)[:100]}: {len(value)} characters of {form}")
    assert not failures, f"over {REPLY_BUDGET} characters:\n" + "\n".join(failures)


def test_typescript_sdk_accepts_the_arguments_clients_add(tmp_path: pathlib.Path) -> None:
    failures = ts_failures(CLIENT_ARGUMENTS, ts_calls(tmp_path, CLIENT_ARGUMENTS))
    assert not failures, "\n".join(failures)


# --- The MCP Inspector CLI over Streamable HTTP ---

INSPECTOR_TOKEN = "1nspect0r" + "0" * 46 + "1nspect0r"


@pytest.fixture
def http_server(tmp_path: pathlib.Path) -> Any:
    """`shellkeep serve --http` on a free loopback port with one token; its URL."""
    missing = [str(p) for p in (NODE, INSPECTOR, BINARY) if not p.exists()]
    if missing:
        message = f"missing {', '.join(missing)}: run tests/clients/setup and cargo build"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "server.log"
    env = {**base_env(tmp_path), "SHELLKEEP_TOKEN": INSPECTOR_TOKEN, "XDG_STATE_HOME": str(tmp_path / "state")}
    with log.open("wb") as stderr:
        server = subprocess.Popen(
            [str(BINARY), "--no-rc", "--cwd", str(work), "serve", "--http", "127.0.0.1:0"],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 20
        while not (found := re.search(r"serving MCP on (http://\S+/mcp)", log.read_text(errors="replace"))):
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.01)
        yield found.group(1).rstrip(";")
    finally:
        server.terminate()
        server.wait(timeout=20)


def inspector(url: str, era: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """The Inspector CLI against `url` in `era`, with the bearer token, as JSON."""
    command = [str(NODE), str(INSPECTOR), "--cli", url, "--transport", "http"]
    command += ["--header", f"Authorization: Bearer {INSPECTOR_TOKEN}", "--protocol-era", era, "--format", "json"]
    return subprocess.run(command + list(arguments), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_inspector_cli_lists_and_calls_over_http(http_server: str, era: str) -> None:
    listed = inspector(http_server, era, "--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stderr
    names = {tool["name"] for tool in json.loads(listed.stdout)["result"]["tools"]}
    assert {"terminal", "run", "output", "sessions", "session_close", "policy_explain"} <= names
    called = inspector(
        http_server, era, "--method", "tools/call", "--tool-name", "terminal", "--tool-arg", "command=echo hi-$((6*7))"
    )
    assert called.returncode == 0, called.stderr
    reply = json.loads(called.stdout)["result"]["structuredContent"]
    assert (reply["status"], reply["output"], reply["exit_code"]) == ("completed", "hi-42\n", 0), reply
    # Without the token the Inspector is refused.
    command = [str(NODE), str(INSPECTOR), "--cli", http_server, "--transport", "http", "--protocol-era", era]
    refused = subprocess.run(command + ["--method", "tools/list"], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0, refused.stdout
