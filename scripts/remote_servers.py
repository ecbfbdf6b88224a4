#!/usr/bin/env python3
"""Local object-storage and HTTP servers holding the test slides, for the remote-slide tests.

``start`` launches, each as its own process on a free loopback port:

* moto's S3 server (``python -m moto.server``), bucket ``slides`` holding every file of the
  shared test data (``../shared/testdata`` or ``$SLIDESTREAM_TESTDATA``) at its relative path,
  plus the files of ``$SLIDESTREAM_VENDOR_SLIDES`` (when set) under ``vendor/``;
* nginx (Debian's, unpacked by ``scripts/setup-nginx.sh``) in the foreground with its own
  config: ``/`` is the test data folder, ``/vendor/`` the vendor slides, ``/scratch/`` a
  writable folder for objects a test replaces; ranges and ETags on, an access log that tests
  can count requests in;
* one ``scripts/faultproxy.py`` in front of each server (fault rules, request log).

It writes a JSON state file (endpoints, bucket, credentials, pids, paths) and ``stop`` kills
everything it started (each process was started in its own session; its process group is
signalled) and removes the work folder.

    python scripts/remote_servers.py start --state /tmp/servers.json
    python scripts/remote_servers.py stop --state /tmp/servers.json

Importable: ``start_servers(state_path)`` returns the state dict, ``stop_servers(state)``
undoes it (used by the pytest session fixture when ``SLIDESTREAM_TEST_SERVERS`` is unset).
Needs boto3 (comes with ``moto[server]``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BUCKET = "slides"
REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
STATE_ENV = "SLIDESTREAM_TEST_SERVERS"
START_TIMEOUT_S = 60.0


class ServerError(RuntimeError):
    """A server could not be started (missing binary, did not come up in time, bad state file)."""


def default_testdata() -> Path:
    """The shared test slides: ``$SLIDESTREAM_TESTDATA`` or ``<repo>/../shared/testdata``."""
    env = os.environ.get("SLIDESTREAM_TESTDATA")
    return Path(env) if env else (REPO.parent / "shared" / "testdata").resolve()


def find_nginx() -> str:
    """Path of the nginx binary: ``$SLIDESTREAM_NGINX``, the cache of setup-nginx.sh, or PATH.

    Raises ``ServerError`` (telling how to install it) when there is none.
    """
    env = os.environ.get("SLIDESTREAM_NGINX")
    if env:
        return env
    cache = Path(
        os.environ.get("SLIDESTREAM_TEST_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "slidestream-test"
    )
    cached = cache / "nginx" / "usr" / "sbin" / "nginx"
    if cached.is_file():
        return str(cached)
    on_path = shutil.which("nginx")
    if on_path:
        return on_path
    raise ServerError(
        "no nginx found: run `bash scripts/setup-nginx.sh` (unpacks Debian's nginx into "
        f"{cache / 'nginx'}) or set SLIDESTREAM_NGINX"
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, what: str, log: Path) -> None:
    """Poll ``url`` until it answers (any HTTP status) or raise ``ServerError``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"{what} exited with status {proc.returncode}: {_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise ServerError(f"{what} did not answer {url} within {START_TIMEOUT_S:.0f} s: {_tail(log)}")


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def _spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``argv`` in its own session (its pid is its process group) logging to ``log``."""
    with open(log, "ab") as fh:
        return subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )


def _start_moto(work: Path) -> tuple[subprocess.Popen, str]:
    log = work / "moto.log"
    for _ in range(5):
        port = free_port()
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        proc = _spawn([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], log, env)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_http(url + "/moto-api/", proc, "moto server", log)
            return proc, url
        except ServerError:
            _kill(proc.pid)
            if "in use" not in _tail(log):
                raise
    raise ServerError(f"moto server could not bind a port: {_tail(log)}")


NGINX_CONF = """\
daemon off;
worker_processes 2;
{user}
pid {work}/nginx.pid;
error_log {work}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    default_type application/octet-stream;
    log_format counted '$request_method $uri "$http_range" $status $body_bytes_sent';
    access_log {work}/nginx-access.log counted;
    client_body_temp_path {work}/tmp/body;
    proxy_temp_path {work}/tmp/proxy;
    fastcgi_temp_path {work}/tmp/fastcgi;
    uwsgi_temp_path {work}/tmp/uwsgi;
    scgi_temp_path {work}/tmp/scgi;
    sendfile on;
    etag on;
    keepalive_requests 100000;
    keepalive_timeout 120s;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        location /vendor/ {{ alias {vendor}/; }}
        location /scratch/ {{ root {work}; }}
    }}
}}
"""


def _start_nginx(work: Path, root: Path, vendor: Path | None) -> tuple[subprocess.Popen, str]:
    nginx = find_nginx()
    log = work / "nginx.log"
    (work / "tmp").mkdir(exist_ok=True)
    vendor_dir = vendor if vendor else work / "no-vendor-slides"
    # As root, nginx's workers would switch to `nobody`, which cannot read the work folder.
    user = "user root;" if os.geteuid() == 0 else ""
    for _ in range(5):
        port = free_port()
        conf = work / "nginx.conf"
        conf.write_text(
            NGINX_CONF.format(user=user, work=work, port=port, root=root, vendor=vendor_dir)
        )
        proc = _spawn([nginx, "-p", str(work), "-c", str(conf), "-e", str(work / "nginx-error.log")], log)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_http(url + "/", proc, "nginx", log)
            return proc, url
        except ServerError:
            _kill(proc.pid)
            if "in use" not in _tail(work / "nginx-error.log") + _tail(log):
                raise ServerError(f"nginx failed: {_tail(work / 'nginx-error.log')} {_tail(log)}")
    raise ServerError(f"nginx could not bind a port: {_tail(work / 'nginx-error.log')}")


def _start_proxy(work: Path, name: str, upstream: str, delay_ms: float = 0) -> tuple[subprocess.Popen, str]:
    port_file = work / f"{name}.port"
    log = work / f"{name}.log"
    proc = _spawn(
        [
            sys.executable,
            str(REPO / "scripts" / "faultproxy.py"),
            "--upstream", upstream,
            "--listen", "127.0.0.1:0",
            "--port-file", str(port_file),
            "--delay-ms", str(delay_ms),
        ],
        log,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _kill(proc.pid)
            raise ServerError(f"faultproxy for {upstream} did not start: {_tail(log)}")
        time.sleep(0.05)
    url = f"http://127.0.0.1:{int(port_file.read_text())}"
    _wait_http(url + "/__proxy/health", proc, "faultproxy", log)
    return proc, url


def s3_client(endpoint: str) -> Any:
    """A boto3 S3 client for the moto server at ``endpoint`` (path-style, test credentials)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
    )


def _files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _upload(endpoint: str, uploads: list[tuple[Path, str]]) -> None:
    client = s3_client(endpoint)
    client.create_bucket(Bucket=BUCKET)

    def put(item: tuple[Path, str]) -> None:
        path, key = item
        client.upload_file(str(path), BUCKET, key)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(put, uploads))


def start_servers(
    state_path: str | os.PathLike[str] | None = None,
    testdata: Path | None = None,
    vendor: Path | None = None,
) -> dict[str, Any]:
    """Start moto, nginx and their fault proxies, upload the slides, return (and write) the state.

    ``testdata`` defaults to ``default_testdata()``, ``vendor`` to ``$SLIDESTREAM_VENDOR_SLIDES``
    (none when unset). The state is written to ``state_path`` when given. On any failure every
    process already started is stopped and ``ServerError`` (or the boto3 error) propagates.
    """
    testdata = Path(testdata or default_testdata()).resolve()
    if not testdata.is_dir():
        raise ServerError(f"test data folder {testdata} does not exist (set SLIDESTREAM_TESTDATA)")
    if vendor is None and os.environ.get("SLIDESTREAM_VENDOR_SLIDES"):
        vendor = Path(os.environ["SLIDESTREAM_VENDOR_SLIDES"])
    if vendor is not None:
        vendor = vendor.resolve()
        if not vendor.is_dir():
            raise ServerError(f"vendor slides folder {vendor} does not exist")
    work = Path(tempfile.mkdtemp(prefix="slidestream-servers-"))
    os.chmod(work, 0o755)
    (work / "scratch").mkdir()
    state: dict[str, Any] = {"work": str(work), "pids": [], "bucket": BUCKET, "region": REGION}
    try:
        moto, moto_url = _start_moto(work)
        state["pids"].append(moto.pid)
        nginx, nginx_url = _start_nginx(work, testdata, vendor)
        state["pids"].append(nginx.pid)
        s3_proxy, s3_proxy_url = _start_proxy(work, "s3-proxy", moto_url)
        state["pids"].append(s3_proxy.pid)
        http_proxy, http_proxy_url = _start_proxy(work, "http-proxy", nginx_url)
        state["pids"].append(http_proxy.pid)
        objects = _files_under(testdata)
        vendor_objects = _files_under(vendor) if vendor else []
        uploads = [(testdata / rel, rel) for rel in objects]
        uploads += [(vendor / rel, "vendor/" + rel) for rel in vendor_objects]  # type: ignore[operator]
        _upload(moto_url, uploads)
        state.update(
            {
                "credentials": {"access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY},
                "s3": {"endpoint": moto_url, "proxy": s3_proxy_url, "pid": moto.pid,
                       "proxy_pid": s3_proxy.pid},
                "http": {"base": nginx_url, "proxy": http_proxy_url, "pid": nginx.pid,
                         "proxy_pid": http_proxy.pid,
                         "access_log": str(work / "nginx-access.log"),
                         "scratch_dir": str(work / "scratch")},
                "testdata": str(testdata),
                "vendor": str(vendor) if vendor else None,
                "objects": objects,
                "vendor_objects": vendor_objects,
            }
        )
        if state_path is not None:
            Path(state_path).parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(str(state_path) + ".tmp")
            tmp.write_text(json.dumps(state, indent=2))
            os.replace(tmp, state_path)
    except BaseException:
        stop_servers(state)
        raise
    return state


def _kill(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM the process group ``pid`` leads (then SIGKILL after ``timeout`` s) and reap it."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (stop from another process): poll it
            done = 0
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
        if done:
            break
        time.sleep(0.05)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # Workers of that group (nginx's) may outlive their master by a moment.
    for _ in range(100):
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_servers(state: dict[str, Any]) -> None:
    """Kill every process in ``state["pids"]`` (with their process groups), remove the work folder."""
    for pid in reversed(state.get("pids", [])):
        _kill(int(pid))
    work = state.get("work")
    if work and Path(work).name.startswith("slidestream-servers-"):
        shutil.rmtree(work, ignore_errors=True)


def load_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a state file written by ``start``; ``ServerError`` if it is missing or not JSON."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ServerError(f"cannot read server state {path}: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    """CLI: ``start --state FILE`` / ``stop --state FILE``; returns the exit status."""
    ap = argparse.ArgumentParser(description="Start/stop the remote-slide test servers.")
    ap.add_argument("command", choices=["start", "stop"])
    ap.add_argument("--state", required=True, help="JSON state file (written by start, read by stop)")
    ap.add_argument("--testdata", type=Path, help="slides folder (default: ../shared/testdata)")
    args = ap.parse_args(argv)
    if args.command == "start":
        state = start_servers(args.state, testdata=args.testdata)
        print(
            f"s3 {state['s3']['endpoint']} (proxy {state['s3']['proxy']}), "
            f"http {state['http']['base']} (proxy {state['http']['proxy']}), "
            f"{len(state['objects']) + len(state['vendor_objects'])} objects; state in {args.state}",
            file=sys.stderr,
        )
    else:
        stop_servers(load_state(args.state))
        Path(args.state).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
