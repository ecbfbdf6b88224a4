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
  ``{"method", "path", "range", "status", "action", "bytes", "time"}`` (``status`` is what the
  client was sent, ``null`` for a dropped connection; ``bytes`` the body bytes sent;
  ``action`` the rule applied (``truncate-body`` / ``truncate-range`` for truncations) or
  ``null``). An entry is logged when its request arrives and its status and action are set
  before the answer goes out, so a client that got an answer always finds them.
  ``DELETE /__proxy/log`` empties it.
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

from faultproxy_control import ACTIONS, CONTROL_PREFIX, ProxyControl, RuleError, validate_rule  # noqa: F401 - re-exported
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
        """Append one request to the log and the counters (when it arrives, before forwarding:
        a client that got any answer finds its entry in the log)."""
        with self.lock:
            self.log.append(entry)
            self.requests += 1
            self.by_method[entry["method"]] = self.by_method.get(entry["method"], 0) + 1

    def update(self, entry: dict[str, Any], **fields: Any) -> None:
        """Set fields of a logged entry (under the lock)."""
        with self.lock:
            entry.update(fields)

    def sent(self, entry: dict[str, Any], nbytes: int) -> None:
        """Count ``nbytes`` body bytes about to be sent for ``entry``."""
        with self.lock:
            entry["bytes"] += nbytes
            self.bytes += nbytes


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
                    entries = [dict(e) for e in st.log]
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
    def _begin(self) -> None:
        """Log this request as it arrives (status, action and bytes filled in before the answer)."""
        self.entry: dict[str, Any] = {
            "method": self.command,
            "path": self.path,
            "range": self.headers.get("Range"),
            "status": None,
            "action": None,
            "bytes": 0,
            "time": time.time(),
        }
        self.state.record(self.entry)

    def _log(self, status: int | None, action: str | None) -> None:
        """Record the status and action of the answer, before any of it is sent."""
        self.state.update(self.entry, status=status, action=action)

    def _write(self, data: bytes, wire: bytes | None = None) -> None:
        """Send body bytes ``data`` (as ``wire`` when chunk-framed), counted first."""
        self.state.sent(self.entry, len(data))
        self.wfile.write(data if wire is None else wire)

    def _send_error_xml(self, status: int) -> None:
        code, message = S3_ERROR_CODES.get(status, ("InjectedError", "Injected by faultproxy"))
        resource = urllib.parse.urlsplit(self.path).path
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<Resource>{resource}</Resource><RequestId>faultproxy</RequestId></Error>"
        ).encode()
        self._log(status, "status")
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self._write(body)

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
        self._begin()
        rule = st.take_rule(self.command, self.path)
        action = rule["action"] if rule else None
        if action == "close":
            self._log(None, "close")
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
            self._log(502, "upstream-error")
            self.send_response(502)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self._write(data)
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
        self._log(resp.status, action)
        # The upstream's own Server and Date headers are relayed: not a second pair.
        self.send_response_only(resp.status, resp.reason)
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
                    self._write(data, b"%x\r\n%s\r\n" % (len(data), data))
                else:
                    self._write(data)
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
