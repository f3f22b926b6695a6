#!/usr/bin/env python3
"""Runs deploy/nginx.conf and deploy/Caddyfile for real, on loopback ports,
in front of a stand-in for shellkeep, and checks what the snippets promise:

- a reply streams through unbuffered: the stand-in sends a first event and
  waits until the client has read it before it sends the rest (a proxy that
  buffers holds that event until the stand-in gives up waiting, which
  fails the check);
- shellkeep sees the public name as `Host`, and `Origin` and
  `Authorization` as the client sent them;
- a body of 3 MiB passes (nginx's own limit is 1 MiB unless raised);
- /healthz reaches shellkeep; any other path is answered 404 by the proxy.

The snippets are changed only where a test run must: the proxy listens on a
free loopback port instead of 443, forwards to the stand-in's port instead
of 8765, and serves a throwaway self-signed certificate (nginx) or Caddy's
own local authority (never ACME). Standard library only; every wait has a
deadline. Usage: proxies.py nginx|caddy (both when none is named).
"""

import http.server
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
PUBLIC_NAME = "shell.example.com"
ORIGIN = "https://app.example.com"
TOKEN = "Bearer test-token-not-a-secret"
# How long the stand-in waits for the client to read the first event, and
# how long anything else may take.
DEADLINE = 20.0


class Upstream(http.server.ThreadingHTTPServer):
    """The stand-in for shellkeep: what it saw, and the first event's
    hand-over."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen = []
        self.first_read = threading.Event()
        self.waited_in_vain = False


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.seen.append(("GET", self.path, dict(self.headers), 0))
        body = b"ok" if self.path == "/healthz" else b"not found"
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        received = 0
        while received < length:
            chunk = self.rfile.read(min(65536, length - received))
            if not chunk:
                break
            received += len(chunk)
        self.server.seen.append(("POST", self.path, dict(self.headers), received))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.chunk(b"event: message\ndata: first\n\n")
        if not self.server.first_read.wait(DEADLINE):
            self.server.waited_in_vain = True
        self.chunk(b"event: message\ndata: second\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port, process):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the proxy exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the proxy did not listen on port {port} within {DEADLINE} s")


def replace_once(text, old, new, what):
    if text.count(old) != 1:
        raise SystemExit(f"{what} no longer holds `{old}` once: update {__file__}")
    return text.replace(old, new)


def start_nginx(scratch, port, upstream_port):
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", f"/CN={PUBLIC_NAME}",
         "-keyout", f"{scratch}/key.pem", "-out", f"{scratch}/cert.pem"],
        check=True, capture_output=True,
    )
    site = (ROOT / "deploy/nginx.conf").read_text()
    site = replace_once(site, "listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;", "nginx.conf")
    site = replace_once(site, "listen [::]:443 ssl;", "", "nginx.conf")
    site = replace_once(site, f"/etc/letsencrypt/live/{PUBLIC_NAME}/fullchain.pem",
                        f"{scratch}/cert.pem", "nginx.conf")
    site = replace_once(site, f"/etc/letsencrypt/live/{PUBLIC_NAME}/privkey.pem",
                        f"{scratch}/key.pem", "nginx.conf")
    site = site.replace("127.0.0.1:8765", f"127.0.0.1:{upstream_port}")
    (scratch / "site.conf").write_text(site)
    temp_paths = "".join(
        f"    {name}_temp_path {scratch}/{name};\n"
        for name in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
    )
    (scratch / "nginx.conf").write_text(
        f"pid {scratch}/nginx.pid;\nerror_log stderr;\ndaemon off;\nevents {{}}\n"
        f"http {{\n    access_log off;\n{temp_paths}    include {scratch}/site.conf;\n}}\n"
    )
    return subprocess.Popen(["nginx", "-p", str(scratch), "-c", f"{scratch}/nginx.conf"])


def start_caddy(scratch, port, upstream_port):
    site = (ROOT / "deploy/Caddyfile").read_text()
    site = site.replace("127.0.0.1:8765", f"127.0.0.1:{upstream_port}")
    # Caddy's own authority instead of ACME (and no OCSP), loopback ports
    # only, no admin API: it reaches nothing beyond this machine.
    options = (
        "{\n\tadmin off\n\tlocal_certs\n\tskip_install_trust\n\tocsp_stapling off\n"
        "\tdefault_bind 127.0.0.1\n"
        f"\thttp_port {free_port()}\n\thttps_port {port}\n}}\n\n"
    )
    (scratch / "Caddyfile").write_text(options + site)
    env = dict(os.environ, XDG_DATA_HOME=str(scratch), XDG_CONFIG_HOME=str(scratch))
    return subprocess.Popen(
        ["caddy", "run", "--adapter", "caddyfile", "--config", f"{scratch}/Caddyfile"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(scratch / "caddy.log", "wb"),
    )


def connect(port):
    # The check is of the proxying, not of the certificate: it is not verified.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    return context.wrap_socket(raw, server_hostname=PUBLIC_NAME)


def read_response_head(stream):
    status = stream.readline().decode()
    headers = {}
    while (line := stream.readline().decode().strip()):
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def simple_get(port, path):
    with connect(port) as tls:
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {PUBLIC_NAME}\r\nConnection: close\r\n\r\n".encode())
        stream = tls.makefile("rb")
        status, _ = read_response_head(stream)
        return status.split()[1], stream.read()


def check(proxy):
    upstream = Upstream()
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    upstream_port = upstream.server_address[1]
    port = free_port()
    problems = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = pathlib.Path(scratch_name)
        start = start_nginx if proxy == "nginx" else start_caddy
        process = start(scratch, port, upstream_port)
        try:
            wait_for_port(port, process)
            # The MCP endpoint: a 3 MiB body, an event stream back.
            body = b"x" * (3 * 1024 * 1024)
            with connect(port) as tls:
                tls.sendall(
                    (f"POST /mcp HTTP/1.1\r\nHost: {PUBLIC_NAME}\r\nOrigin: {ORIGIN}\r\n"
                     f"Authorization: {TOKEN}\r\nContent-Type: application/json\r\n"
                     f"Accept: application/json, text/event-stream\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
                )
                tls.sendall(body)
                stream = tls.makefile("rb")
                status, headers = read_response_head(stream)
                if " 200" not in status:
                    problems.append(f"POST /mcp with 3 MiB answered {status.strip()}")
                else:
                    seen = b""
                    while b"data: first" not in seen:
                        line = stream.readline()
                        if not line:
                            break
                        seen += line
                    upstream.first_read.set()
                    rest = stream.read()
                    if b"data: first" not in seen or b"data: second" not in rest:
                        problems.append(f"the event stream came through incomplete: {seen + rest!r}")
                    if upstream.waited_in_vain:
                        problems.append(
                            "the first event reached the client only after the stand-in gave up "
                            "waiting: the proxy buffers the event stream"
                        )
            posts = [s for s in upstream.seen if s[0] == "POST"]
            if not posts:
                problems.append("the stand-in got no POST /mcp")
            else:
                _, path, headers_seen, length = posts[0]
                headers_seen = {k.lower(): v for k, v in headers_seen.items()}
                expected = {"host": PUBLIC_NAME, "origin": ORIGIN, "authorization": TOKEN}
                for name, value in expected.items():
                    if headers_seen.get(name) != value:
                        problems.append(f"shellkeep would see {name}: {headers_seen.get(name)!r}, not {value!r}")
                if path != "/mcp" or length != len(body):
                    problems.append(f"the stand-in got {path} with {length} bytes, not /mcp with {len(body)}")
            # The probe, and a path that is not shellkeep's.
            status, text = simple_get(port, "/healthz")
            if status != "200" or text != b"ok":
                problems.append(f"GET /healthz answered {status} {text!r}")
            before = len(upstream.seen)
            status, _ = simple_get(port, "/other")
            if status != "404" or len(upstream.seen) != before:
                problems.append(f"GET /other answered {status}, or reached shellkeep")
        finally:
            process.terminate()
            try:
                process.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            upstream.first_read.set()
            upstream.shutdown()
            if problems and proxy == "caddy":
                sys.stderr.write((scratch / "caddy.log").read_text()[-4000:])
    return problems


def main():
    proxies = sys.argv[1:] or ["nginx", "caddy"]
    failed = False
    for proxy in proxies:
        problems = check(proxy)
        for problem in problems:
            print(f"error: {proxy}: {problem}", file=sys.stderr)
        failed |= bool(problems)
        if not problems:
            print(f"ok: {proxy} streams unbuffered, passes Host, Origin, Authorization and a 3 MiB body, "
                  f"serves /healthz, refuses other paths")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
