#!/usr/bin/env python3
"""Memory and time of reads of hostile files (issue 13): peak RSS and wall time of one call per
process, measured with GNU time (`/usr/bin/time -v`, "Maximum resident set size"), beside the
process's RSS just before the call (Python, numpy and the open slide) and the bound the issue
sets: output bytes + cache budget + 256 MiB.

usage: benches/hostile_bounds.py [--big /tmp/big72k.svs] [--cli target/release/slidestream]

Files: the decompression bombs of core/tests/corrupt/oom/ (core/tests/corrupt/make_bombs.py)
and, with --big, a 72000^2 single-level slide made by make_big_svs.py
(`make_big_svs.py /tmp/big72k.svs --tiles-x 300 --tiles-y 300 --levels 1`) for the thumbnail
row. Needs slidestream importable (the README's test command installs it into .venv) and
/usr/bin/time. Prints a markdown table; nothing here is a pass/fail check (see
core/tests/memory.rs for the asserted bounds).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OOM = os.path.join(HERE, "..", "core", "tests", "corrupt", "oom")
CACHE = 256 << 20  # SLIDESTREAM_CACHE_BYTES default

# One call per child process: (label, python statement; `s` is the open Slide, `out` the result).
CALLS = {
    "read_regions 1x1 at every tile": "locs=[(c*tw+1, r*th+1) for r in range(rows) for c in range(cols)]; out=s.read_regions(locs, 0, (1, 1))",
    "read_region one row, whole width": "out=s.read_region((0, 1), 0, (min(w, 65536), 1))",
    "get_thumbnail 512": "out=s.get_thumbnail((512, 512))",
}

CHILD = r"""
import json, sys, time, resource
import slidestream
path, stmt = sys.argv[1], sys.argv[2]
s = slidestream.Slide(path)
w, h = s.dimensions
tw, th = (int(v) for v in s.level_tile_sizes[0])
cols, rows = -(-w // tw), -(-h // th)
rss = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024
t = time.perf_counter()
try:
    exec(stmt)
    result = "pixels, %d bytes" % out.nbytes
    nbytes = out.nbytes
except Exception as e:
    result = "%s: %s" % (type(e).__name__, str(e)[:90])
    nbytes = 0
print(json.dumps({"before": rss, "seconds": time.perf_counter() - t, "result": result, "out": nbytes}))
"""


def measure(path, stmt):
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as log:
        p = subprocess.run(["/usr/bin/time", "-v", "-o", log.name, sys.executable, "-c", CHILD, path, stmt],
                           capture_output=True, text=True, timeout=600)
        peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(log.name).read()).group(1)) * 1024
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else json.dumps({"before": 0, "seconds": 0, "result": p.stderr[-200:], "out": 0})
    r = json.loads(line)
    r["peak"] = peak
    return r


def cli_tiles(cli, path):
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as log:
        p = subprocess.run(["/usr/bin/time", "-v", "-o", log.name, cli, "tiles", path], capture_output=True, text=True, timeout=600)
        text = open(log.name).read()
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) * 1024
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text).group(1)
    secs = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.split(":"))))
    res = (p.stdout + p.stderr).strip().splitlines()
    return {"peak": peak, "before": 0, "seconds": secs, "result": (res[-1] if res else "")[:100], "out": 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", help="72000^2 single-level slide for the thumbnail row")
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "target", "release", "slidestream"))
    a = ap.parse_args()
    files = sorted(os.path.join(OOM, f) for f in os.listdir(OOM) if "shared" in f and f.endswith(".tif"))
    print("| file | call | result | s | RSS before (MiB) | peak RSS (MiB) | bound: out + cache + 256 MiB |")
    print("|---|---|---|---:|---:|---:|---:|")
    mib = lambda b: f"{b / (1 << 20):.0f}"
    rows = [(f, label, stmt) for f in files for label, stmt in CALLS.items()]
    if a.big:
        rows.append((a.big, "get_thumbnail 512", CALLS["get_thumbnail 512"]))
        rows.append((a.big, "get_thumbnail 1024", "out=s.get_thumbnail((1024, 1024))"))
    for f, label, stmt in rows:
        r = measure(f, stmt)
        bound = r["out"] + CACHE + (256 << 20)
        print(f"| {os.path.basename(f)} | {label} | {r['result']} | {r['seconds']:.2f} | {mib(r['before'])} | {mib(r['peak'])} | {mib(bound)} |", flush=True)
    if os.path.exists(a.cli):
        for f in files:
            r = cli_tiles(a.cli, f)
            print(f"| {os.path.basename(f)} | CLI `tiles` (every tile) | {r['result']} | {r['seconds']:.2f} | — | {mib(r['peak'])} | {mib(CACHE + (256 << 20))} |", flush=True)


if __name__ == "__main__":
    main()
