#!/usr/bin/env python3
"""A small HTTP fault and delay proxy for the remote-slide tests and benchmarks.

It sits between a client (slidestream's remote ``ByteSource``, s3fs, curl) and one upstream
HTTP server (moto's S3 server, nginx), forwards every request with keep-alive on both sides and
streams response bodies, and can be told to misbehave for the next *k* matching requests.
Standard library only (``http.server`` + ``http.client``).

Command line::

    faultproxy.py --upstream http://127.0.0.1:9000 --listen 127.0.0.1:0 \\
                  --port-file /tmp/proxy.port --delay-ms 10

``--delay-ms N`` sleeps N ms before forwarding each request upstream and N ms again before
sending its response back, so every request's round trip grows by 2×N ms (``--delay-ms 10`` is
a 20 ms RTT). ``--port-file`` receives the bound port (decimal, newline) once the proxy accepts
connections: with ``--listen HOST:0`` the OS picks a free port.

Control API (on the proxy's own port; every other path is forwarded):

* ``POST /__proxy/rules`` with a JSON rule or list of rules (appended, first match wins)::

      {"path": "cog.tiff",       # substring of the request path (with query); "" matches all
       "method": "GET",          # optional; any method when absent
       "count": 2,               # apply to the next k matching requests (default 1; null: always)
       "action": "status",       # status | delay_ms | truncate | close
       "status": 503,            # for "status": 400..599 (S3-style XML error body)
       "delay_ms": 1000,         # for "delay_ms": sleep, then forward
       "mode": "body",           # for "truncate": "body" (keep the promised Content-Length,
                                 #   send fewer bytes, then close) or "range" (a correct but
                                 #   shorter Content-Range / Content-Length on a 206)
       "bytes": 100}             # for "truncate": body bytes to send (default: half)

  answers ``{"rules": [...]}`` (all rules with their remaining counts).
* ``DELETE /__proxy/rules``: drop every rule. ``GET /__proxy/rules``: list them.
* ``GET /__proxy/log``: JSON list of the requests seen, oldest first, each
  ``{"method", "path", "range", "status", "action", "bytes"}`` (``status`` is what the client
  was sent, ``null`` for a dropped connection; ``bytes`` the body bytes sent; ``action`` the
  rule applied or ``null``). ``DELETE /__proxy/log`` empties it.
* ``GET /__proxy/stats``: ``{"requests": n, "bytes": n, "by_method": {...}}`` since start
  (not reset by ``DELETE /__proxy/log``).
* ``POST /__proxy/config`` ``{"delay_ms": N}``: change the added delay at run time.

``ProxyControl`` is a tiny client for that API, for tests.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

CONTROL_PREFIX = "/__proxy/"
ACTIONS = ("status", "delay_ms", "truncate", "close")
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
}
S3_ERROR_CODES = {
    400: ("InvalidRequest", "Invalid request (injected by faultproxy)"),
    403: ("AccessDenied", "Access Denied (injected by faultproxy)"),
    404: ("NoSuchKey", "The specified key does not exist (injected by faultproxy)"),
    416: ("InvalidRange", "The requested range is not satisfiable (injected by faultproxy)"),
    500: ("InternalError", "We encountered an internal error (injected by faultproxy)"),
    503: ("SlowDown", "Please reduce your request rate (injected by faultproxy)"),
}
CHUNK = 64 * 1024


class RuleError(ValueError):
    """A control-API rule that is malformed (unknown action, bad status, bad count...)."""


def validate_rule(raw: Any) -> dict[str, Any]:
    """Check one rule from the control API and return it normalised.

    Raises ``RuleError`` naming the bad field for anything that is not a JSON object with a
    known ``action`` and well-typed parameters (see the module docstring for the fields).
    """
    if not isinstance(raw, dict):
        raise RuleError(f"a rule must be a JSON object, got {type(raw).__name__}")
    known = {"path", "method", "count", "action", "status", "delay_ms", "mode", "bytes"}
    unknown = set(raw) - known
    if unknown:
        raise RuleError(f"unknown rule field(s) {sorted(unknown)}; known: {sorted(known)}")
    action = raw.get("action")
    if action not in ACTIONS:
        raise RuleError(f"rule action must be one of {ACTIONS}, got {action!r}")
    path = raw.get("path", "")
    if not isinstance(path, str):
        raise RuleError("rule 'path' must be a string (a substring of the request path)")
    method = raw.get("method")
    if method is not None and not isinstance(method, str):
        raise RuleError("rule 'method' must be a string such as 'GET'")
    count = raw.get("count", 1)
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise RuleError(f"rule 'count' must be a positive integer or null, got {count!r}")
    rule: dict[str, Any] = {
        "path": path,
        "method": method.upper() if method else None,
        "count": count,
        "action": action,
    }
    if action == "status":
        status = raw.get("status")
        if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
            raise RuleError(f"a 'status' rule needs 'status' in 400..599, got {status!r}")
        rule["status"] = status
    elif action == "delay_ms":
        delay = raw.get("delay_ms")
        if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
            raise RuleError(f"a 'delay_ms' rule needs 'delay_ms' >= 0 (ms), got {delay!r}")
        rule["delay_ms"] = delay
    elif action == "truncate":
        mode = raw.get("mode", "body")
        if mode not in ("body", "range"):
            raise RuleError(f"a 'truncate' rule's 'mode' must be 'body' or 'range', got {mode!r}")
        nbytes = raw.get("bytes")
        if nbytes is not None and (
            not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0
        ):
            raise RuleError(f"a 'truncate' rule's 'bytes' must be an integer >= 0, got {nbytes!r}")
        rule["mode"] = mode
        rule["bytes"] = nbytes
    return rule


class ProxyState:
    """Rules, request log, counters and the added delay, shared by the handler threads."""

    def __init__(self, upstream: str, delay_ms: float) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"--upstream must be an http://HOST[:PORT][/prefix] URL, got {upstream!r}")
        self.upstream_host = parsed.hostname
        self.upstream_port = parsed.port or 80
        self.upstream_prefix = parsed.path.rstrip("/")
        self.delay_ms = float(delay_ms)
        self.lock = threading.Lock()
        self.rules: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = []
        self.requests = 0
        self.bytes = 0
        self.by_method: dict[str, int] = {}

    def take_rule(self, method: str, path: str) -> dict[str, Any] | None:
        """Return (a copy of) the first rule matching this request and use up one of its count."""
        with self.lock:
            for rule in self.rules:
                if rule["method"] is not None and rule["method"] != method:
                    continue
                if rule["path"] not in path:
                    continue
                taken = dict(rule)
                if rule["count"] is not None:
                    rule["count"] -= 1
                    if rule["count"] == 0:
                        self.rules.remove(rule)
                return taken
        return None

    def record(self, entry: dict[str, Any]) -> None:
        """Append one request to the log and the counters."""
        with self.lock:
            self.log.append(entry)
            self.requests += 1
            self.bytes += entry.get("bytes") or 0
            self.by_method[entry["method"]] = self.by_method.get(entry["method"], 0) + 1


class _DropConnection(Exception):
    """Raised inside the handler to close the client connection without a response."""


class ProxyHandler(http.server.BaseHTTPRequestHandler):
    """Forwards one client connection's requests to the upstream over one kept-alive connection."""

    protocol_version = "HTTP/1.1"
    server_version = "faultproxy/1"
    state: ProxyState  # set on the subclass made by make_server

    def setup(self) -> None:
        super().setup()
        self.upstream: http.client.HTTPConnection | None = None

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self.upstream is not None:
                self.upstream.close()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base class name
        pass  # the request log is served by the control API instead

    # -- dispatch ---------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._dispatch()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_OPTIONS = do_PATCH = do_GET

    def _dispatch(self) -> None:
        if self.path.startswith(CONTROL_PREFIX):
            self._control()
            return
        try:
            self._forward()
        except _DropConnection:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- control API ------------------------------------------------------------------------
    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _control(self) -> None:
        st = self.state
        route = self.path[len(CONTROL_PREFIX):].split("?")[0].strip("/")
        body = self._read_body()
        try:
            if route == "rules" and self.command == "POST":
                raw = json.loads(body or b"null")
                rules = [validate_rule(r) for r in (raw if isinstance(raw, list) else [raw])]
                with st.lock:
                    st.rules.extend(rules)
                    current = [dict(r) for r in st.rules]
                self._send_json(200, {"rules": current})
            elif route == "rules" and self.command == "DELETE":
                with st.lock:
                    st.rules.clear()
                self._send_json(200, {"rules": []})
            elif route == "rules" and self.command == "GET":
                with st.lock:
                    current = [dict(r) for r in st.rules]
                self._send_json(200, {"rules": current})
            elif route == "log" and self.command == "GET":
                with st.lock:
                    entries = list(st.log)
                self._send_json(200, entries)
            elif route == "log" and self.command == "DELETE":
                with st.lock:
                    st.log.clear()
                self._send_json(200, [])
            elif route == "stats" and self.command == "GET":
                with st.lock:
                    stats = {
                        "requests": st.requests,
                        "bytes": st.bytes,
                        "by_method": dict(st.by_method),
                        "delay_ms": st.delay_ms,
                    }
                self._send_json(200, stats)
            elif route == "config" and self.command == "POST":
                raw = json.loads(body or b"{}")
                delay = raw.get("delay_ms") if isinstance(raw, dict) else None
                if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
                    raise RuleError(f"config needs 'delay_ms' >= 0 (ms), got {delay!r}")
                with st.lock:
                    st.delay_ms = float(delay)
                self._send_json(200, {"delay_ms": st.delay_ms})
            elif route == "health":
                self._send_json(200, {"ok": True})
            else:
                self._send_json(404, {"error": f"no control route {self.command} {self.path}"})
        except (RuleError, json.JSONDecodeError) as exc:
            self._send_json(400, {"error": str(exc)})

    # -- forwarding -------------------------------------------------------------------------
    def _log(self, status: int | None, action: str | None, nbytes: int) -> None:
        self.state.record(
            {
                "method": self.command,
                "path": self.path,
                "range": self.headers.get("Range"),
                "status": status,
                "action": action,
                "bytes": nbytes,
                "time": time.time(),
            }
        )

    def _send_error_xml(self, status: int) -> None:
        code, message = S3_ERROR_CODES.get(status, ("InjectedError", "Injected by faultproxy"))
        resource = urllib.parse.urlsplit(self.path).path
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<Resource>{resource}</Resource><RequestId>faultproxy</RequestId></Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._log(status, "status", 0 if self.command == "HEAD" else len(body))

    def _upstream_request(self, body: bytes) -> http.client.HTTPResponse:
        """Send the request upstream (reconnecting once if a kept-alive connection went stale)."""
        st = self.state
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or self.command in ("PUT", "POST", "PATCH"):
            headers["Content-Length"] = str(len(body))
        target = st.upstream_prefix + self.path
        for attempt in (0, 1):
            if self.upstream is None:
                self.upstream = http.client.HTTPConnection(
                    st.upstream_host, st.upstream_port, timeout=300
                )
            try:
                self.upstream.request(self.command, target, body=body or None, headers=headers)
                return self.upstream.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.upstream.close()
                self.upstream = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def _forward(self) -> None:
        st = self.state
        body = self._read_body()
        rule = st.take_rule(self.command, self.path)
        action = rule["action"] if rule else None
        if action == "close":
            self._log(None, "close", 0)
            raise _DropConnection()
        if action == "status":
            self._send_error_xml(rule["status"])
            return
        if action == "delay_ms":
            time.sleep(rule["delay_ms"] / 1000.0)
        if st.delay_ms:
            time.sleep(st.delay_ms / 1000.0)
        try:
            resp = self._upstream_request(body)
        except OSError as exc:
            data = f"faultproxy: upstream failed: {exc}".encode()
            self.send_response(502)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self._log(502, "upstream-error", len(data))
            return
        if st.delay_ms:
            time.sleep(st.delay_ms / 1000.0)
        try:
            self._relay(resp, rule)
        finally:
            if resp.will_close and self.upstream is not None:
                self.upstream.close()
                self.upstream = None

    def _relay(self, resp: http.client.HTTPResponse, rule: dict[str, Any] | None) -> None:
        headers = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
        length_hdr = resp.getheader("Content-Length")
        length = int(length_hdr) if length_hdr is not None else None
        has_body = self.command != "HEAD" and resp.status not in (204, 304) and resp.status >= 200
        action = rule["action"] if rule else None
        limit = None  # body bytes to send, when truncating
        if action == "truncate" and has_body:
            promised = length if length is not None else 0
            limit = rule["bytes"] if rule["bytes"] is not None else promised // 2
            limit = min(limit, max(promised - 1, 0))
            content_range = resp.getheader("Content-Range")
            if rule["mode"] == "range" and resp.status == 206 and content_range:
                # A correct, shorter answer: bytes start-(start+limit-1)/total.
                unit, _, spec = content_range.partition(" ")
                span, _, total = spec.partition("/")
                start = int(span.split("-")[0])
                limit = max(limit, 1)
                new_range = f"{unit} {start}-{start + limit - 1}/{total}"
                headers = [
                    (k, new_range if k.lower() == "content-range" else v)
                    for k, v in headers
                    if k.lower() != "content-length"
                ]
                headers.append(("Content-Length", str(limit)))
                length = limit
                action = "truncate-range"
            else:
                action = "truncate-body"
        self.send_response(resp.status, resp.reason)
        chunked = has_body and length is None
        for key, value in headers:
            self.send_header(key, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        if action == "truncate-body":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        sent = 0
        if has_body:
            while True:
                want = CHUNK if limit is None else min(CHUNK, limit - sent)
                if want <= 0:
                    break
                data = resp.read(want)
                if not data:
                    break
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                else:
                    self.wfile.write(data)
                sent += len(data)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            if limit is not None:
                # The rest of the upstream body is not wanted: do not reuse that connection.
                resp.close()
                if self.upstream is not None:
                    self.upstream.close()
                    self.upstream = None
        self.wfile.flush()
        self._log(resp.status, action, sent)


class ProxyServer(http.server.ThreadingHTTPServer):
    """The threaded server; ``.state`` holds the rules and the log."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
    state: ProxyState

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that hang up mid-answer; report anything else."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def make_server(upstream: str, host: str = "127.0.0.1", port: int = 0, delay_ms: float = 0) -> ProxyServer:
    """Build (bind, not yet serve) a proxy to ``upstream`` on ``host:port`` (0: a free port).

    ``delay_ms`` is added before forwarding and again before answering (ms). Raises
    ``ValueError`` for an upstream that is not an ``http://`` URL and ``OSError`` if the
    address cannot be bound.
    """
    state = ProxyState(upstream, delay_ms)
    handler = type("BoundProxyHandler", (ProxyHandler,), {"state": state})
    server = ProxyServer((host, port), handler)
    server.state = state
    return server


class ProxyControl:
    """Client for a running proxy's control API (``base`` is e.g. ``http://127.0.0.1:PORT``)."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")

    def _call(self, method: str, route: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + CONTROL_PREFIX + route,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def add_rule(self, **rule: Any) -> list[dict[str, Any]]:
        """Append one rule (fields as in the module docstring); returns the current rules.

        Raises ``urllib.error.HTTPError`` (400) for a malformed rule.
        """
        return self._call("POST", "rules", rule)["rules"]

    def rules(self) -> list[dict[str, Any]]:
        """The rules still active, with their remaining counts."""
        return self._call("GET", "rules")["rules"]

    def clear_rules(self) -> None:
        """Drop every rule."""
        self._call("DELETE", "rules")

    def log(self) -> list[dict[str, Any]]:
        """Every request seen since start or the last ``clear_log``, oldest first."""
        return self._call("GET", "log")

    def clear_log(self) -> None:
        """Empty the request log (counters in ``stats`` keep running)."""
        self._call("DELETE", "log")

    def stats(self) -> dict[str, Any]:
        """Request and byte counters since the proxy started."""
        return self._call("GET", "stats")

    def set_delay(self, delay_ms: float) -> None:
        """Change the delay added each way per request (ms)."""
        self._call("POST", "config", {"delay_ms": delay_ms})


def _parse_listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen must be HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    """Run the proxy in the foreground until SIGTERM / Ctrl-C; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="upstream base URL, http://HOST:PORT[/prefix]")
    ap.add_argument("--listen", type=_parse_listen, default=("127.0.0.1", 0),
                    help="HOST:PORT to listen on (port 0: a free one); default 127.0.0.1:0")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--delay-ms", type=float, default=0.0,
                    help="ms added before forwarding and again before answering each request "
                         "(round trip +2×N ms)")
    args = ap.parse_args(argv)
    if args.delay_ms < 0:
        ap.error("--delay-ms must be >= 0")
    try:
        server = make_server(args.upstream, args.listen[0], args.listen[1], args.delay_ms)
    except ValueError as exc:
        ap.error(str(exc))
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{port}\n")
        os.replace(tmp, args.port_file)
    print(f"faultproxy listening on {args.listen[0]}:{port} -> {args.upstream}", file=sys.stderr, flush=True)
    import signal

    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
