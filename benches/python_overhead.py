#!/usr/bin/env python3
"""Cost of the Python layer, and the gain of batched reads.

usage: python benches/python_overhead.py [SLIDE] [--threads 2] [--patches 2000] [--rounds 5]
                                         [--batch 1024] [--binary target/release/slidestream]
                                         [--json OUT.json]

SLIDE defaults to /tmp/big.svs when it exists (48000² level 0; create it with
``python ../shared/tools/make_big_svs.py /tmp/big.svs``), else the bundled sample slide.

(a) Python overhead of ``Slide.read_region`` over the Rust call, 256² RGBA patches of level 0.
    The Rust side is the ``slidestream bench`` CLI (``Slide::read_region_into`` in a loop on one
    caller thread, ``--threads T`` decode threads); the Python side is a loop of
    ``slide.read_region(loc, 0, (256, 256))`` in a fresh interpreter whose decode pool has the
    same T threads (``RAYON_NUM_THREADS=T``). Both read the same locations file in the same
    order, each in a fresh process (cold tile cache, warm page cache); the two alternate within
    each round and the median of the rounds is reported. Three workloads:

    * ``cold``: ``--patches`` random locations over the whole level (the random-patch workload
      of ``compare.py``; mostly cache misses, partial JPEG decoding);
    * ``warm``: 64 random locations inside a 2048² window, repeated K times, with
      ``SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION=0`` so tiles are cached whole. Each side runs
      the file of K repeats and the file of 1 repeat; warm time = t(K) − t(1), i.e. the
      K − 1 passes served from the cache (the Rust call is then mostly a memcpy, so the fixed
      per-call cost of the Python layer shows most);
    * ``null``: 1×1 reads wholly outside the image (nothing is decoded; pure call cost).

    overhead = median over rounds of t_python / t_rust − 1 (target ≤ 5 %); µs/read columns use
    the median times. The Python side also allocates a fresh
    output buffer per call and wraps it in a numpy array; the CLI reuses one buffer. Both are
    part of what a Python caller pays, so both count as overhead.

(b) ``Slide.read_regions`` of ``--batch`` random 256² level-0 patches vs the same number of
    ``read_region`` calls, in one interpreter, each on a fresh ``Slide`` with its own cold
    256 MiB tile cache, alternating, median of the rounds. Speed-up = t_loop / t_batch
    (target ≥ 1.5×). read_regions returns RGB composited over the background, read_region RGBA;
    the loop is timed without any compositing. Speed-up = median over rounds of
    t_loop / t_batch. With ``--window W`` (default 4096) the same
    comparison is repeated with the patches inside one random W² area, where patches share
    tiles (a tissue region sampled densely).

Prints a markdown summary and, with --json, writes every number.
"""

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SAMPLE = os.path.join(REPO, "assets", "CMU-1-Small-Region.svs")

PY_WORKER = r"""
import sys, time
import slidestream
path, level, size, locfile = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
locs = [tuple(int(v) for v in line.split(",")) for line in open(locfile) if line.strip()]
s = slidestream.Slide(path)
read = s.read_region
sz = (size, size)
t0 = time.perf_counter()
for loc in locs:
    read(loc, level, sz)
print(time.perf_counter() - t0)
"""


def slide_geometry(binary, path):
    info = json.loads(subprocess.check_output([binary, "info", path, "--json"]))
    return info["level_dimensions"][0]


def write_locs(locs, reps=1):
    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    f.write("\n".join(f"{x},{y}" for _ in range(reps) for x, y in locs))
    f.close()
    return f.name


def env_with(threads, extra=None):
    e = dict(os.environ)
    e["RAYON_NUM_THREADS"] = str(threads)
    e.update(extra or {})
    return e


def time_rust(binary, path, size, locfile, threads, extra_env=None):
    cmd = [binary, "--threads", str(threads), "bench", path, "--level", "0", "--size", str(size), "--locations", locfile, "--json"]
    return json.loads(subprocess.check_output(cmd, env=env_with(threads, extra_env)))["seconds"]


def time_python(path, size, locfile, threads, extra_env=None):
    out = subprocess.check_output([sys.executable, "-c", PY_WORKER, path, "0", str(size), locfile], env=env_with(threads, extra_env))
    return float(out.decode().strip().splitlines()[-1])


def paired(rounds, rust, python):
    rs, ps = [], []
    for r in range(rounds):
        pair = [("rust", rust), ("python", python)]
        for name, fn in pair if r % 2 == 0 else reversed(pair):
            (rs if name == "rust" else ps).append(fn())
    return rs, ps


def part_a(a, path, dims):
    w, h = dims
    size = 256
    rng = random.Random(a.seed)
    res = {}

    # cold: random over the whole level
    cold = [(rng.randrange(max(1, w - size)), rng.randrange(max(1, h - size))) for _ in range(a.patches)]
    f = write_locs(cold)
    try:
        rs, ps = paired(a.rounds, lambda: time_rust(a.binary, path, size, f, a.threads), lambda: time_python(path, size, f, a.threads))
    finally:
        os.unlink(f)
    res["cold"] = summarize(rs, ps, len(cold))

    # warm: a 2048² window, tiles cached whole
    win = 2048
    x0, y0 = rng.randrange(max(1, w - win)), rng.randrange(max(1, h - win))
    warm = [(x0 + rng.randrange(win - size), y0 + rng.randrange(win - size)) for _ in range(64)]
    K = a.warm_reps
    fK, f1 = write_locs(warm, K), write_locs(warm, 1)
    env = {"SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION": "0"}
    try:
        rs, ps = paired(
            a.rounds,
            lambda: time_rust(a.binary, path, size, fK, a.threads, env) - time_rust(a.binary, path, size, f1, a.threads, env),
            lambda: time_python(path, size, fK, a.threads, env) - time_python(path, size, f1, a.threads, env),
        )
    finally:
        os.unlink(fK)
        os.unlink(f1)
    res["warm"] = summarize(rs, ps, 64 * (K - 1))

    # null: 1x1 wholly outside the image
    null = [(-10 - i, -10) for i in range(a.patches)]
    f = write_locs(null)
    try:
        rs, ps = paired(a.rounds, lambda: time_rust(a.binary, path, 1, f, a.threads), lambda: time_python(path, 1, f, a.threads))
    finally:
        os.unlink(f)
    res["null"] = summarize(rs, ps, len(null))
    return res


def summarize(rs, ps, n):
    r, p = statistics.median(rs), statistics.median(ps)
    return {
        "reads": n,
        "rust_s": rs,
        "python_s": ps,
        "rust_us_per_read": r / n * 1e6,
        "python_us_per_read": p / n * 1e6,
        "overhead_us_per_read": (p - r) / n * 1e6,
        # Median of the per-round ratios: each round's pair ran back to back, so a change of
        # machine load between rounds cancels out.
        "overhead": statistics.median(pi / ri for pi, ri in zip(ps, rs)) - 1 if min(rs) > 0 else float("inf"),
    }


def part_b(a, path, dims, window=None):
    import numpy as np

    import slidestream

    w, h = dims
    size = 256
    rng = np.random.default_rng(a.seed + 1)
    loops, batches = [], []
    for r in range(a.rounds):
        if window:
            # A tissue-sized area: patches overlap and share tiles.
            x0, y0 = rng.integers(0, w - window), rng.integers(0, h - window)
            locs = np.stack([x0 + rng.integers(0, window - size, a.batch), y0 + rng.integers(0, window - size, a.batch)], axis=1).astype(np.int64)
        else:
            locs = np.stack([rng.integers(0, w - size, a.batch), rng.integers(0, h - size, a.batch)], axis=1).astype(np.int64)
        tuples = [tuple(map(int, xy)) for xy in locs]

        def loop():
            s = slidestream.Slide(path, cache_bytes=256 << 20)
            t0 = time.perf_counter()
            for loc in tuples:
                s.read_region(loc, 0, (size, size))
            dt = time.perf_counter() - t0
            s.close()
            return dt

        def batch():
            s = slidestream.Slide(path, cache_bytes=256 << 20)
            t0 = time.perf_counter()
            s.read_regions(locs, 0, (size, size))
            dt = time.perf_counter() - t0
            s.close()
            return dt

        order = [("loop", loop), ("batch", batch)]
        for name, fn in order if r % 2 == 0 else reversed(order):
            (loops if name == "loop" else batches).append(fn())
    lt, bt = statistics.median(loops), statistics.median(batches)
    speedup = statistics.median(li / bi for li, bi in zip(loops, batches))  # per-round pairs
    return {"patches": a.batch, "window": window, "loop_s": loops, "batch_s": batches, "loop_patches_per_s": a.batch / lt, "batch_patches_per_s": a.batch / bt, "speedup": speedup}


def machine():
    """The machine line of compare.py's reports (one definition for both harnesses)."""
    sys.path.insert(0, HERE)
    from compare import machine_info

    return machine_info()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slide", nargs="?", default="/tmp/big.svs" if os.path.exists("/tmp/big.svs") else SAMPLE)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--patches", type=int, default=2000)
    ap.add_argument("--warm-reps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--binary", default=os.path.join(REPO, "target", "release", "slidestream"))
    ap.add_argument("--json")
    ap.add_argument("--window", type=int, default=4096, help="(b) also run with the patches inside one random WINDOW² area (0: skip)")
    ap.add_argument("--only", choices=["a", "b"])
    a = ap.parse_args(argv)
    # (b) runs in this process: give its decode pool the same thread count (read when the
    # first slide is opened).
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)

    dims = slide_geometry(a.binary, a.slide)
    out = {
        "machine": machine(),
        "date": datetime.date.today().isoformat(),
        "command": " ".join([os.path.relpath(sys.executable, REPO) if sys.executable.startswith(REPO) else sys.executable] + sys.argv),
        "slide": a.slide,
        "dimensions": dims,
        "threads": a.threads,
        "load_before": os.getloadavg(),
    }
    if a.only != "b":
        out["a"] = part_a(a, a.slide, dims)
    if a.only != "a":
        out["b"] = part_b(a, a.slide, dims)
        if a.window:
            out["b_window"] = part_b(a, a.slide, dims, a.window)
    out["load_after"] = os.getloadavg()

    print(f"# {out['machine']}; {out['date']}; slide {a.slide} {dims[0]}x{dims[1]}; {a.threads} decode threads")
    print(f"# load average before {out['load_before'][0]:.2f}, after {out['load_after'][0]:.2f}")
    if "a" in out:
        print("\n| workload | reads | Rust µs/read | Python µs/read | overhead µs/read | overhead |")
        print("|---|---:|---:|---:|---:|---:|")
        for k, v in out["a"].items():
            print(f"| {k} | {v['reads']} | {v['rust_us_per_read']:.1f} | {v['python_us_per_read']:.1f} | {v['overhead_us_per_read']:.1f} | {100 * v['overhead']:+.1f} % |")
    if "b" in out:
        print(f"\n| {a.batch} random 256² patches | read_region loop, patches/s | read_regions, patches/s | speed-up |")
        print("|---|---:|---:|---:|")
        for key in ("b", "b_window"):
            if key in out:
                b = out[key]
                where = f"inside one {b['window']}² area" if b["window"] else "over the whole level"
                print(f"| {where} | {b['loop_patches_per_s']:.0f} | {b['batch_patches_per_s']:.0f} | {b['speedup']:.2f}× |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
