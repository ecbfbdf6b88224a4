"""A small HTTP server on 127.0.0.1 for the remote hardening tests (test_remote_hardening.py):
it serves one file with HEAD and ranged GET (`Content-Range`, an `ETag`), and can be told to
stall: accept the request and never answer, as a hung server does.

Standard library only, so a test's child interpreter can start one itself."""
from __future__ import annotations

import http.server
import os
import pathlib
import re
import socket
import threading


class RangeServer(http.server.ThreadingHTTPServer):
    """Serves ``path`` at every URL path. ``stall`` (a threading.Event) set makes every later
    request wait, unanswered, until the server closes; ``stall_get`` stalls only GETs;
    ``stalled`` is set once a request is being held so."""

    daemon_threads = True

    def __init__(self, path: os.PathLike[str] | str, stall: bool = False, stall_get: bool = False) -> None:
        self.data = pathlib.Path(path).read_bytes()
        self.stall = threading.Event()
        self.stall_get = threading.Event()
        self.closing = threading.Event()
        self.connected = threading.Event()
        self.stalled = threading.Event()
        if stall:
            self.stall.set()
        if stall_get:
            self.stall_get.set()
        super().__init__(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str = "x.svs") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"

    def close(self) -> None:
        self.closing.set()
        self.shutdown()
        self.server_close()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: RangeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - base class name
        pass

    def _stalled(self, get: bool) -> bool:
        self.server.connected.set()
        if self.server.stall.is_set() or (get and self.server.stall_get.is_set()):
            self.server.stalled.set()
            self.server.closing.wait()
            return True
        return False

    def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
        if self._stalled(False):
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.server.data)))
        self.send_header("ETag", '"e1"')
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self._stalled(True):
            return
        data = self.server.data
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start, end = (int(m.group(1)), int(m.group(2) or len(data) - 1)) if m else (0, len(data) - 1)
        end = min(end, len(data) - 1)
        body = data[start : end + 1]
        self.send_response(206 if m else 200)
        if m:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", '"e1"')
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError, socket.error):
            pass
