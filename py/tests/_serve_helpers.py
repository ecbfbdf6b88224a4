"""What the `slidestream serve` tests share: where the binary and the test slides are, and
:class:`Server`, the server in a child process (``--port 0``, its address read from the first
line it prints)."""

from __future__ import annotations

import http.client
import io
import json
import os
import pathlib
import re
import subprocess
import threading
import urllib.request

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
# $SLIDESTREAM_TESTDATA, else ../shared/testdata next to the repository (as _parity_helpers).
TESTDATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA") or ROOT.parent / "shared" / "testdata")
CLI = pathlib.Path(os.environ.get("SLIDESTREAM_CLI", ROOT / "target" / "release" / "slidestream"))
TIMEOUT = 60.0


class Server:
    """``slidestream serve PATH --port 0 ARGS`` in a child process; ``host``, ``port``,
    ``netloc``, ``url`` and the slide ``count`` from its first stdout line; its stdout lines in
    ``lines`` and stderr lines in ``errors``."""

    LINE = re.compile(r"^slidestream serve: listening on http://([^/\s]+):(\d+)/ \((\d+) slides?\)$")

    def __init__(self, path: pathlib.Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [str(CLI), "serve", str(path), "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        first: list[str] = []
        got = threading.Event()

        def read_stdout() -> None:
            for line in self.proc.stdout:
                if not first:
                    first.append(line.rstrip("\n"))
                    got.set()
                self.lines.append(line)
            got.set()

        def read_stderr() -> None:
            for line in self.proc.stderr:
                self.errors.append(line)

        threading.Thread(target=read_stdout, daemon=True).start()
        threading.Thread(target=read_stderr, daemon=True).start()
        if not got.wait(TIMEOUT) or not first:
            self.stop()
            raise AssertionError(f"slidestream serve printed no line; stderr: {''.join(self.errors)[-2000:]}")
        m = self.LINE.match(first[0])
        assert m, f"unexpected first line {first[0]!r}"
        self.host, self.port, self.count = m.group(1), int(m.group(2)), int(m.group(3))
        self.netloc = f"{self.host}:{self.port}"
        self.url = f"http://{self.netloc}/"

    def request(self, path: str, headers: dict | None = None, method: str = "GET"):
        """(status, headers with lower-case names, body) of ``path`` sent as is (no
        normalisation of ``..`` or percent escapes)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for k, v in (headers or {}).items():
                conn.putheader(k, v)
            conn.endheaders()
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def get(self, path: str) -> bytes:
        """The body of ``path`` (urllib: an HTTP error raises)."""
        with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=TIMEOUT) as r:
            return r.read()

    def ok(self, path: str, ctype: str | None = None) -> bytes:
        status, headers, body = self.request(path)
        assert status == 200, (path, status, body[:300])
        if ctype is not None:
            assert headers["content-type"].split(";")[0].strip() == ctype, (path, headers["content-type"])
        return body

    def json(self, path: str):
        return json.loads(self.ok(path))

    def image(self, path: str) -> np.ndarray:
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(self.ok(path))))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
