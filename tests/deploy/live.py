#!/usr/bin/env python3
"""The deploy examples with the real server: shellkeep's Streamable HTTP
transport (`serve --http`) on a loopback port, and

- deploy/Dockerfile's HEALTHCHECK command, run as the image runs it: it
  passes while the server serves and fails once it is gone;
- deploy/kubernetes.yaml's probes: GET /healthz as the kubelet asks it
  (its Host the pod's address, which no --allowed-host names) gets 200;
- deploy/nginx.conf and deploy/Caddyfile in front of it, as proxies.py runs
  them: a client that reaches the public name through the proxy gets 401
  without its token and 403 from a foreign `Origin`, and with both right
  opens a protocol session (2025-11-25) and calls `terminal`, whose
  progress reaches it while the command runs: the command waits for a file
  the client makes only once a progress notification came through, so a
  proxy that holds the stream back fails the check instead of passing
  late.

The binary is $SHELLKEEP_BIN, else target/debug/shellkeep (under
$CARGO_TARGET_DIR when set); one without `serve --http` is skipped, said
so. Standard library only; every wait has a deadline. Usage: live.py.
"""

import http.client
import json
import os
import pathlib
import re
import secrets
import signal
import subprocess
import sys
import tempfile

import proxies
from proxies import DEADLINE, ORIGIN, PUBLIC_NAME, ROOT

FOREIGN_ORIGIN = "https://evil.example"


def binary():
    explicit = os.environ.get("SHELLKEEP_BIN")
    if explicit:
        return pathlib.Path(explicit)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    return (target if target.is_absolute() else ROOT / target) / "debug/shellkeep"


class Server:
    """shellkeep serving HTTP on a free loopback port, in its own scratch
    directory, with one token."""

    def __init__(self, program, scratch):
        self.port = proxies.free_port()
        self.token = secrets.token_hex(16)
        self.cwd = scratch / "work"
        self.cwd.mkdir()
        env = dict(
            os.environ,
            SHELLKEEP_TOKEN=self.token,
            SHELLKEEP_CWD=str(self.cwd),
            SHELLKEEP_NO_RC="true",
            XDG_STATE_HOME=str(scratch / "state"),
            XDG_CONFIG_HOME=str(scratch / "config"),
        )
        for name in list(env):
            if name.startswith("SHELLKEEP_") and name not in {
                "SHELLKEEP_TOKEN", "SHELLKEEP_CWD", "SHELLKEEP_NO_RC"
            }:
                del env[name]
        self.log = scratch / "server.log"
        self.process = subprocess.Popen(
            [str(program), "serve", "--http", f"127.0.0.1:{self.port}",
             "--allowed-host", PUBLIC_NAME, "--allowed-origin", ORIGIN],
            cwd=self.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.log, "wb"),
        )
        proxies.wait_for_port(self.port, self.process)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def healthcheck_command(port):
    """deploy/Dockerfile's HEALTHCHECK command, for a server on `port`."""
    dockerfile = (ROOT / "deploy/Dockerfile").read_text()
    found = re.search(r"^HEALTHCHECK [^\n]*\\\n\s*CMD (\[.*\])\s*$", dockerfile, re.M)
    if not found:
        raise SystemExit("deploy/Dockerfile has no `HEALTHCHECK … \\` then `CMD [...]` lines")
    command = json.loads(found.group(1))
    if not any("8765" in word for word in command):
        raise SystemExit("the HEALTHCHECK no longer asks port 8765: update " + __file__)
    return [word.replace("8765", str(port)) for word in command]


class Connection(http.client.HTTPSConnection):
    """A connection to the proxy on `port` that names the public name
    (TLS server name and `Host`), as a client of shell.example.com would."""

    def __init__(self, port):
        super().__init__("127.0.0.1", port, timeout=DEADLINE)

    def connect(self):
        self.sock = proxies.connect(self.port)


def post(port, message, token, origin=ORIGIN, session=None):
    connection = Connection(port)
    body = json.dumps(message).encode()
    connection.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
    headers = {
        "Host": PUBLIC_NAME,
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(body)),
        "Origin": origin,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if session is not None:
        headers["Mcp-Session-Id"] = session
    for name, value in headers.items():
        connection.putheader(name, value)
    connection.endheaders(body)
    return connection.getresponse()


def messages(response):
    """The JSON-RPC messages of an event stream (or of a JSON body), one by
    one, as they arrive."""
    if response.getheader("Content-Type", "").startswith("application/json"):
        yield json.loads(response.read())
        return
    data = []
    while True:
        line = response.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            text = "\n".join(data)
            data = []
            if text.strip():
                yield json.loads(text)


def call_terminal(port, server, session):
    """Calls `terminal`, in a session of its own, with a command that waits
    for a file the client makes once a progress notification came through.
    Returns None if it completed so, "cut" if the stream ended with no
    message at all, else what went wrong."""
    mark = secrets.token_hex(4)
    ready = server.cwd / f"ready-{mark}"
    command = (f"echo first-{mark}; while [ ! -e ready-{mark} ]; do sleep 0.05; done; "
               f"echo done-{mark}")
    call = {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "terminal",
                   "arguments": {"command": command, "timeout": 15, "session": f"deploy-{mark}"},
                   "_meta": {"progressToken": f"p-{mark}"}},
    }
    response = post(port, call, token=server.token, session=session)
    seen = 0
    progressed = False
    result = None
    for message in messages(response):
        seen += 1
        if message.get("method") == "notifications/progress":
            progressed = True
            ready.touch()
        elif message.get("id") == 2:
            result = message
            break
    if response.status == 200 and seen == 0:
        return "cut"
    structured = (result or {}).get("result", {}).get("structuredContent", {})
    if not progressed:
        return (f"no progress came through before the result: {response.status} "
                f"{response.getheader('Content-Type')!r}, {result!r}")
    if structured.get("status") != "completed" or f"done-{mark}" not in structured.get("output", ""):
        return f"the call did not complete with its output: {result!r}"
    return None


def through(proxy, server, scratch):
    problems = []
    port = proxies.free_port()
    start = proxies.start_nginx if proxy == "nginx" else proxies.start_caddy
    process = start(scratch, port, server.port)
    try:
        proxies.wait_for_port(port, process)
        initialize = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "deploy-live", "version": "1"}},
        }
        response = post(port, initialize, token=None)
        response.read()
        if response.status != 401 or not response.getheader("WWW-Authenticate", "").startswith("Bearer"):
            problems.append(f"without a token: {response.status} {response.getheader('WWW-Authenticate')!r}")
        response = post(port, initialize, token=server.token, origin=FOREIGN_ORIGIN)
        response.read()
        if response.status != 403:
            problems.append(f"from a foreign Origin: {response.status}, not 403")

        response = post(port, initialize, token=server.token)
        session = response.getheader("Mcp-Session-Id")
        replies = [m for m in messages(response) if m.get("id") == 1]
        if response.status != 200 or not session or not replies or "result" not in replies[0]:
            return problems + [f"initialize: {response.status}, session {session!r}, {replies!r}"]
        response = post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                         token=server.token, session=session)
        response.read()
        if response.status not in (200, 202):
            problems.append(f"notifications/initialized: {response.status}")

        for attempt in (1, 2):
            outcome = call_terminal(port, server, session)
            if outcome != "cut" or attempt == 2:
                break
            # Caddy 2.6 (Debian 12's) now and then closes its connection to
            # the server just after a stream's first event ("reading from
            # backend: use of closed network connection"), about once in 50
            # calls here; nginx, and no proxy, never did.
            print(f"notice: {proxy} cut the call's stream after its first event; once more")
        if outcome == "cut":
            problems.append("the call's stream was cut after its first event, twice")
        elif outcome:
            problems.append(outcome)
    finally:
        process.terminate()
        try:
            process.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return problems


def main():
    program = binary()
    if not program.is_file():
        raise SystemExit(f"error: no shellkeep binary at {program}: `cargo build -p shellkeep` "
                         "makes one, or name one in $SHELLKEEP_BIN")
    help_text = subprocess.run([str(program), "serve", "--help"], capture_output=True, text=True)
    if help_text.returncode != 0 or "--http" not in help_text.stdout:
        print(f"skipped: {program} has no `serve --http` (the HTTP transport is not in this build)")
        return
    failed = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = pathlib.Path(scratch_name)
        server = Server(program, scratch)
        try:
            check = subprocess.run(healthcheck_command(server.port), capture_output=True,
                                   timeout=DEADLINE)
            if check.returncode != 0:
                failed.append(f"Dockerfile HEALTHCHECK: exit {check.returncode} while serving "
                              f"{check.stderr.decode()!r}")
            else:
                print("ok: the Dockerfile's HEALTHCHECK passes while shellkeep serves")
            # The kubelet's probe names the pod's address as its Host.
            probe = http.client.HTTPConnection("127.0.0.1", server.port, timeout=DEADLINE)
            probe.putrequest("GET", "/healthz", skip_host=True)
            probe.putheader("Host", "10.1.2.3:8765")
            probe.putheader("User-Agent", "kube-probe/1.37")
            probe.endheaders()
            answer = probe.getresponse()
            if (answer.status, answer.read()) != (200, b"ok"):
                failed.append(f"a Kubernetes probe's GET /healthz: {answer.status}")
            else:
                print("ok: a Kubernetes probe's GET /healthz (its Host the pod's address) gets 200 ok")
            for proxy in ["nginx", "caddy"]:
                proxy_scratch = scratch / proxy
                proxy_scratch.mkdir()
                problems = through(proxy, server, proxy_scratch)
                failed += [f"{proxy}: {p}" for p in problems]
                if not problems:
                    print(f"ok: through {proxy}, shellkeep refuses a missing token and a foreign "
                          "Origin, and a call's progress streams to the client while it runs")
        finally:
            server.stop()
            if failed:
                sys.stderr.write(server.log.read_text()[-4000:])
        check = subprocess.run(healthcheck_command(server.port), capture_output=True,
                               timeout=DEADLINE)
        if check.returncode == 0:
            failed.append("Dockerfile HEALTHCHECK: passes with the server gone")
    for problem in failed:
        print(f"error: {problem}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
