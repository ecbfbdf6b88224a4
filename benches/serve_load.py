#!/usr/bin/env python3
"""Load test of `slidestream serve` (docs/serve.md): tile requests from concurrent clients.

usage: benches/serve_load.py [PATH ...] [--cli target/release/slidestream] [--requests 2000]
                             [--clients 16] [--kind mixed|deepzoom|iiif] [--seed 0]
                             [--time-limit 300] [--header] [-- SERVER_ARGS ...]

Starts ``slidestream serve`` on 127.0.0.1 (``--port 0``) for the PATHs (slide files, copied
into a temporary directory, or one directory; default: the shared test slides
CMU-1-Small-Region.svs and tcga-cr-7395-01a-01-ts1.svs), lists every Deep Zoom tile (from each
slide's ``.dzi``) and every IIIF tile (from each slide's ``info.json`` ``tiles``: the region and
size a IIIF client asks for at each scale factor), and sends ``--requests`` of them, drawn at
random without repeats while there are enough (a larger count repeats the list, reshuffled),
from ``--clients`` threads, each with its own keep-alive connection. It stops by itself after
the requests, or after ``--time-limit`` seconds. Traffic goes to 127.0.0.1 only.

Prints a markdown table row (``--header``: the header first): the request mix, tiles/s over
the whole run, latency p50 / p99 / max in ms, answers other than 200, and the server's peak
resident memory (``VmHWM`` of /proc/PID/status, read before the server stops). Arguments after
``--`` go to ``slidestream serve`` (e.g. ``-- --max-requests 4 --max-area 4194304``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[1]
TESTDATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA") or ROOT.parent / "shared" / "testdata")
DEFAULT_SLIDES = ("CMU-1-Small-Region.svs", "tcga-cr-7395-01a-01-ts1.svs")
HOST = "127.0.0.1"
LINE = re.compile(r"^slidestream serve: listening on http://([^/\s]+):(\d+)/ \((\d+) slides?\)$")


def start_server(cli: str, path: pathlib.Path, extra: list[str]) -> tuple[subprocess.Popen, int, int]:
    proc = subprocess.Popen(
        [cli, "serve", str(path), "--host", HOST, "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    first = proc.stdout.readline().rstrip("\n")
    m = LINE.match(first)
    if not m:
        proc.kill()
        sys.exit(f"serve_load: unexpected first line from the server: {first!r}")
    if m.group(1) != HOST:
        proc.kill()
        sys.exit(f"serve_load: the server listens on {m.group(1)}, not {HOST}")
    # Keep draining stdout so that a chatty server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    return proc, int(m.group(2)), int(m.group(3))


def get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read()


def tile_paths(port: int, kind: str) -> list[str]:
    conn = http.client.HTTPConnection(HOST, port, timeout=60)
    status, body = get(conn, "/slides.json")
    if status != 200:
        sys.exit(f"serve_load: /slides.json answered {status}")
    out: list[str] = []
    for s in json.loads(body)["slides"]:
        sid = s["id"]
        if kind in ("mixed", "deepzoom"):
            status, body = get(conn, f"/deepzoom/{sid}.dzi")
            if status != 200:
                sys.exit(f"serve_load: {sid}.dzi answered {status}")
            img = ET.fromstring(body)
            size = img.find("{*}Size")
            ts = int(img.get("TileSize"))
            fmt = img.get("Format")
            w, h = int(size.get("Width")), int(size.get("Height"))
            dims = [(w, h)]
            while dims[-1] != (1, 1):
                dims.append((max(1, -(-dims[-1][0] // 2)), max(1, -(-dims[-1][1] // 2))))
            for level, (lw, lh) in enumerate(reversed(dims)):
                for row in range(-(-lh // ts)):
                    for col in range(-(-lw // ts)):
                        out.append(f"/deepzoom/{sid}_files/{level}/{col}_{row}.{fmt}")
        if kind in ("mixed", "iiif"):
            status, body = get(conn, f"/iiif/3/{sid}/info.json")
            if status != 200:
                sys.exit(f"serve_load: {sid} info.json answered {status}")
            info = json.loads(body)
            w, h = info["width"], info["height"]
            for t in info.get("tiles", []):
                tw, th = t["width"], t.get("height", t["width"])
                for sf in t["scaleFactors"]:
                    for y in range(0, h, th * sf):
                        for x in range(0, w, tw * sf):
                            rw, rh = min(tw * sf, w - x), min(th * sf, h - y)
                            out.append(f"/iiif/3/{sid}/{x},{y},{rw},{rh}/{-(-rw // sf)},{-(-rh // sf)}/0/default.jpg")
    conn.close()
    return out


def peak_rss_mib(pid: int) -> float | None:
    try:
        text = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmHWM:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) / 1024 if m else None


def run_load(port: int, paths: list[str], clients: int, time_limit: float):
    lock = threading.Lock()
    it = iter(paths)
    latencies: list[float] = []
    bad: dict[int, int] = {}
    deadline = time.monotonic() + time_limit

    def worker() -> None:
        conn = http.client.HTTPConnection(HOST, port, timeout=60)
        while time.monotonic() < deadline:
            with lock:
                path = next(it, None)
            if path is None:
                break
            t0 = time.perf_counter()
            try:
                status, _ = get(conn, path)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=60)
                status = -1
            dt = time.perf_counter() - t0
            with lock:
                latencies.append(dt)
                if status != 200:
                    bad[status] = bad.get(status, 0) + 1
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, latencies, bad


def pct(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def main() -> None:
    argv = sys.argv[1:]
    server_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, server_args = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", type=pathlib.Path)
    ap.add_argument("--cli", default=str(ROOT / "target" / "release" / "slidestream"))
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--kind", choices=("mixed", "deepzoom", "iiif"), default="mixed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--header", action="store_true")
    a = ap.parse_args(argv)
    if a.requests < 1 or a.clients < 1 or a.time_limit <= 0:
        ap.error("--requests, --clients and --time-limit must be positive")
    if not os.access(a.cli, os.X_OK):
        sys.exit(f"serve_load: {a.cli} missing (cargo build --release -p slidestream)")

    tmp = None
    paths = a.paths or [TESTDATA / n for n in DEFAULT_SLIDES]
    if len(paths) == 1 and paths[0].is_dir():
        served = paths[0]
    else:
        tmp = tempfile.mkdtemp(prefix="serve_load.")
        served = pathlib.Path(tmp)
        for p in paths:
            if not p.is_file():
                sys.exit(f"serve_load: {p} is not a file")
            shutil.copyfile(p, served / p.name)
    proc, port, count = start_server(a.cli, served, server_args)
    try:
        tiles = tile_paths(port, a.kind)
        if not tiles:
            sys.exit("serve_load: no tiles to request")
        rng = random.Random(a.seed)
        order: list[str] = []
        while len(order) < a.requests:
            batch = tiles[:]
            rng.shuffle(batch)
            order.extend(batch)
        order = order[: a.requests]
        wall, lat, bad = run_load(port, order, a.clients, a.time_limit)
        rss = peak_rss_mib(proc.pid)
        alive = proc.poll() is None
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    lat.sort()
    done = len(lat)
    ok = done - sum(bad.values())
    if a.header:
        print("| server args | slides | kind | distinct tiles | requests | clients | tiles/s | p50 ms | p99 ms | max ms | not 200 | peak RSS MiB |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    bad_s = ", ".join(f"{k if k >= 0 else 'conn'}: {v}" for k, v in sorted(bad.items())) or "0"
    if done < a.requests:
        bad_s += f" (stopped at {a.time_limit:g} s: {done}/{a.requests})"
    if not alive:
        bad_s += " (server exited)"
    print(
        f"| {' '.join(server_args) or '(defaults)'} | {count} | {a.kind} | {len(tiles)} | {done} | {a.clients} | "
        f"{ok / wall:.0f} | {pct(lat, 50) * 1e3:.1f} | {pct(lat, 99) * 1e3:.1f} | {lat[-1] * 1e3 if lat else float('nan'):.1f} | "
        f"{bad_s} | {rss if rss is not None else float('nan'):.0f} |"
    )
    if bad or not alive:
        sys.exit(1)


if __name__ == "__main__":
    main()
