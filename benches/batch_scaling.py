#!/usr/bin/env python3
"""One batch of random 256² level-0 patches on the CPU with 1..N threads: slidestream's
``Slide.read_regions`` (decode pool of T threads, ``SLIDESTREAM_DECODE_THREADS=T``) against
cuCIM's batched ``read_region(..., num_workers=T)``, each measurement in a fresh interpreter,
readers alternating, so the per-thread rate and how it scales are measured side by side.

usage: batch_scaling.py SLIDE [--patches 4096] [--threads 1,4,8,16] [--rounds 3] [--readers slidestream,cucim]

A reader `slidestream@DIR` is slidestream imported from DIR (put first on PYTHONPATH), to compare
two builds side by side: `--readers slidestream@/tmp/base,slidestream@/tmp/new,cucim`.

Method: locations from numpy's default_rng(seed = round) over the level-0 area (the same for both
readers in a round); the slide is opened and one patch read before the timer; the timed call is
one batch ending in a host array (n, 256, 256, 3) uint8; page cache warm (the file is read once
first). Prints one line per measurement and a table of medians: patches/s, patches/s per
thread, and slidestream ÷ cuCIM. A reader that cannot be imported is reported and skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
path, reader, n, threads, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if reader == "slidestream":
    import slidestream
    s = slidestream.Slide(path)
    w, h = s.dimensions
    s.read_region((0, 0), 0, (256, 256))
    batch = lambda locs: s.read_regions(locs, 0, (256, 256))
else:
    from cucim import CuImage
    s = CuImage(path)
    w, h = s.resolutions["level_dimensions"][0]
    np.asarray(s.read_region((0, 0), (256, 256), 0))
    def batch(locs):
        return [np.asarray(b) for b in s.read_region(locs.tolist(), (256, 256), 0, batch_size=len(locs), num_workers=threads)]
rng = np.random.default_rng(seed)
locs = np.stack([rng.integers(0, w - 256, n), rng.integers(0, h - 256, n)], axis=1).astype(np.int64)
t = time.perf_counter()
out = batch(locs)
dt = time.perf_counter() - t
print(json.dumps({"rate": n / dt}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slide")
    ap.add_argument("--patches", type=int, default=4096)
    ap.add_argument("--threads", default="1,4,8,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--readers", default="slidestream,cucim")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    readers = a.readers.split(",")
    with open(a.slide, "rb") as f:  # page cache warm
        while f.read(1 << 24):
            pass
    got: dict = {}
    dead: set = set()
    for r in range(a.rounds):
        for t in threads:
            for reader in readers if r % 2 == 0 else readers[::-1]:
                if reader in dead:
                    continue
                env = dict(os.environ, SLIDESTREAM_DECODE_THREADS=str(t), RAYON_NUM_THREADS=str(t))
                kind, _, where = reader.partition("@")
                if where:
                    env["PYTHONPATH"] = os.pathsep.join([where] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
                try:
                    p = subprocess.run([sys.executable, "-c", CHILD, a.slide, kind, str(a.patches), str(t), str(r)],
                                       capture_output=True, text=True, timeout=a.timeout, env=env)
                except subprocess.TimeoutExpired:
                    print(f"{reader} threads={t} round={r}: timed out", flush=True)
                    continue
                if p.returncode != 0:
                    print(f"{reader}: failed ({p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}); skipped", flush=True)
                    dead.add(reader)
                    continue
                rate = json.loads(p.stdout.strip().splitlines()[-1])["rate"]
                got.setdefault((reader, t), []).append(rate)
                print(f"{reader} threads={t} round={r}: {rate:.0f} patches/s", flush=True)
    print(f"\nmedians of {a.rounds} rounds, one batch of {a.patches} random 256² level-0 patches, patches/s (per thread)\n")
    ours = [r for r in readers if r.partition("@")[0] == "slidestream"]
    ratios = [r for r in ours if "cucim" in readers]
    print("| threads | " + " | ".join(readers) + " |" + "".join(f" {r} ÷ cuCIM |" for r in ratios))
    print("|---:|" + "---:|" * (len(readers) + len(ratios)))
    for t in threads:
        cells, med = [], {}
        for reader in readers:
            v = got.get((reader, t))
            if v:
                med[reader] = statistics.median(v)
                cells.append(f"{med[reader]:,.0f} ({med[reader] / t:,.0f})")
            else:
                cells.append("—")
        ratio = "".join(f" {med[r] / med['cucim']:.2f}× |" if r in med and "cucim" in med else " — |" for r in ratios)
        print(f"| {t} | " + " | ".join(cells) + " |" + ratio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
