#!/usr/bin/env python3
"""Side-by-side random-patch benchmark: slidestream vs the readers people use today.

The same seeded level-0 locations go through every reader that imports (openslide-python +
openslide-bin, fastslide, tiffslide) and through slidestream's native reader (the
`slidestream bench` CLI, Rust API, one caller thread). Readers alternate within each round;
the median of the rounds is reported with the ratio of slidestream to each peer.

usage: compare.py SLIDE [--patches 2000] [--size 256] [--level 0] [--rounds 3] [--seed 0]
                  [--threads 1] [--binary target/release/slidestream] [--json OUT.json]

Prints a markdown table. Every reader runs single-threaded from the caller's view; `--threads`
is the number of decode threads slidestream may use inside one read (RAYON-style pool).
"""
import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time


def locations(path, level, size, n, seed, slidestream_bin):
    info = json.loads(subprocess.check_output([slidestream_bin, "info", path, "--json"]))
    w, h = info["level_dimensions"][level]
    ds = info["level_downsamples"][level]
    rng = random.Random(seed)
    return [
        (int(rng.randrange(max(1, w - size)) * ds), int(rng.randrange(max(1, h - size)) * ds))
        for _ in range(n)
    ]


def run_slidestream(binary, path, level, size, locs, threads):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(f"{x},{y}" for x, y in locs))
        name = f.name
    try:
        cmd = [binary, "--threads", str(threads), "bench", path, "--level", str(level), "--size", str(size), "--locations", name, "--json"]
        out = json.loads(subprocess.check_output(cmd))
        return out["seconds"]
    finally:
        os.unlink(name)


def python_readers():
    readers = {}
    try:
        import openslide

        def openslide_run(path, level, size, locs):
            s = openslide.OpenSlide(path)
            t0 = time.perf_counter()
            for loc in locs:
                s.read_region(loc, level, (size, size))
            dt = time.perf_counter() - t0
            s.close()
            return dt

        readers[f"openslide {openslide.__library_version__}"] = openslide_run
    except Exception as e:  # noqa: BLE001
        print(f"# openslide unavailable: {e}", file=sys.stderr)
    try:
        import fastslide

        def fastslide_run(path, level, size, locs):
            s = fastslide.FastSlide.from_file_path(path)
            t0 = time.perf_counter()
            for loc in locs:
                s.read_region(location=loc, level=level, size=(size, size))
            dt = time.perf_counter() - t0
            s.close()
            return dt

        readers[f"fastslide {fastslide.__version__}"] = fastslide_run
    except Exception as e:  # noqa: BLE001
        print(f"# fastslide unavailable: {e}", file=sys.stderr)
    try:
        import tiffslide

        def tiffslide_run(path, level, size, locs):
            s = tiffslide.TiffSlide(path)
            t0 = time.perf_counter()
            for loc in locs:
                s.read_region(loc, level, (size, size), as_array=True)
            dt = time.perf_counter() - t0
            s.close()
            return dt

        readers[f"tiffslide {tiffslide.__version__}"] = tiffslide_run
    except Exception as e:  # noqa: BLE001
        print(f"# tiffslide unavailable: {e}", file=sys.stderr)
    return readers


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slide")
    ap.add_argument("--patches", type=int, default=2000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--level", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "slidestream"))
    ap.add_argument("--json")
    a = ap.parse_args(argv)

    locs = locations(a.slide, a.level, a.size, a.patches, a.seed, a.binary)
    readers = {"slidestream": lambda p, l, s, x: run_slidestream(a.binary, p, l, s, x, a.threads)}
    readers.update(python_readers())
    times = {name: [] for name in readers}
    for r in range(a.rounds):
        # Alternate the order each round so no reader always runs on a warmer machine.
        order = list(readers) if r % 2 == 0 else list(reversed(readers))
        for name in order:
            times[name].append(readers[name](a.slide, a.level, a.size, locs))
    rate = {name: a.patches / statistics.median(t) for name, t in times.items()}
    ours = rate["slidestream"]
    lines = [
        f"workload: {a.patches} random {a.size}x{a.size} patches, level {a.level}, seed {a.seed}, "
        f"1 caller thread (slidestream decode threads: {a.threads}), median of {a.rounds} rounds",
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "",
        "| reader | patches/s | MP/s | slidestream / reader |",
        "|---|---:|---:|---:|",
    ]
    for name, v in sorted(rate.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {name} | {v:.0f} | {v * a.size * a.size / 1e6:.1f} | {ours / v:.2f} |")
    print("\n".join(lines))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "patches_per_s": rate, "seconds": times}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
