#!/usr/bin/env python3
"""`Slide.read_regions` (one call) vs 1024 `Slide.read_region` calls producing the same batch.

usage: python benches/batch_vs_loop.py [SLIDE] [--patches 1024] [--size 256] [--rounds 5]

Three ways to get n random level-0 patches of one slide, each on a fresh `Slide` with a cold
256 MiB cache, readers alternating per round, median patches/s reported:
- loop_discard: n `read_region` calls whose arrays are dropped (the allocator recycles them:
  a lower bound on the loop's cost, not something a pipeline can use);
- loop_stack: n `read_region` calls copied into one preallocated (n, h, w, 3) array — the same
  output `read_regions` returns;
- batch: one `read_regions` call.
"""
import argparse
import random
import statistics
import time

import numpy as np

import slidestream


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("slide", nargs="?", default="/tmp/big.svs")
    ap.add_argument("--patches", type=int, default=1024)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    n, sz = a.patches, a.size
    modes = ["loop_discard", "loop_stack", "batch"]
    res = {m: [] for m in modes}
    for r in range(a.rounds):
        with slidestream.Slide(a.slide) as probe:
            w, h = probe.dimensions
        rng = random.Random(r)
        locs = [(rng.randrange(w - sz), rng.randrange(h - sz)) for _ in range(n)]
        for mode in modes if r % 2 == 0 else modes[::-1]:
            s = slidestream.Slide(a.slide, cache_bytes=256 << 20)
            t0 = time.perf_counter()
            if mode == "batch":
                s.read_regions(locs, 0, (sz, sz))
            elif mode == "loop_stack":
                out = np.empty((n, sz, sz, 3), np.uint8)
                for i, loc in enumerate(locs):
                    out[i] = s.read_region(loc, 0, (sz, sz))[..., :3]
            else:
                for loc in locs:
                    s.read_region(loc, 0, (sz, sz))
            res[mode].append(n / (time.perf_counter() - t0))
            s.close()
    med = {m: statistics.median(v) for m, v in res.items()}
    print(f"{n} random {sz}² patches of {a.slide}, median of {a.rounds} rounds (patches/s)")
    for m in modes:
        print(f"| {m} | {med[m]:.0f} |")
    print(f"batch / loop_discard = {med['batch'] / med['loop_discard']:.2f}x, "
          f"batch / loop_stack = {med['batch'] / med['loop_stack']:.2f}x")


if __name__ == "__main__":
    main()
