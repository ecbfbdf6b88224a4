#!/usr/bin/env python3
"""Cross-slide CPU batches (issue 14): one `slidestream.read_patches` call per batch against the
per-slide loop (`read_regions` per slide, grouped) producing the same output.

usage: benches/cross_slide_cpu.py SLIDE [--slides 8] [--batch 256] [--batches 40] [--rounds 3]

The slide is opened `--slides` times (distinct open slides: separate cache keys, like copies of
one file). Each batch draws `--batch` random 256² level-0 patches across the slides; both forms
read the same batches (seeded), alternating per round; the output of the two is compared once.
Prints patches/s per round and the medians.
"""
import argparse
import statistics
import time

import numpy as np

import slidestream


def batches(slides, n_batches, batch, size, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        rows = []
        for _ in range(batch):
            i = int(rng.integers(len(slides)))
            w, h = slides[i].dimensions
            rows.append((i, 0, int(rng.integers(0, w - size)), int(rng.integers(0, h - size))))
        out.append(np.array(rows, dtype=np.int64))
    return out


def per_slide(slides, req, size):
    out = np.empty((len(req), size, size, 3), dtype=np.uint8)
    for i in np.unique(req[:, 0]):
        sel = np.nonzero(req[:, 0] == i)[0]
        out[sel] = slides[int(i)].read_regions(req[sel][:, 2:4], 0, (size, size))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("slide")
    ap.add_argument("--slides", type=int, default=8)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=256)
    a = ap.parse_args()
    rates = {"read_patches": [], "per-slide loop": []}
    for r in range(a.rounds):
        for name in (["read_patches", "per-slide loop"] if r % 2 == 0 else ["per-slide loop", "read_patches"]):
            slides = [slidestream.Slide(a.slide, cache_bytes=64 << 20) for _ in range(a.slides)]
            bs = batches(slides, a.batches, a.batch, a.size, seed=100 + r)
            t = time.perf_counter()
            for req in bs:
                if name == "read_patches":
                    slidestream.read_patches(slides, req, (a.size, a.size))
                else:
                    per_slide(slides, req, a.size)
            rate = a.batches * a.batch / (time.perf_counter() - t)
            rates[name].append(rate)
            print(f"round {r} {name}: {rate:.0f} patches/s", flush=True)
    slides = [slidestream.Slide(a.slide) for _ in range(a.slides)]
    req = batches(slides, 1, a.batch, a.size, seed=7)[0]
    assert np.array_equal(slidestream.read_patches(slides, req, (a.size, a.size)), per_slide(slides, req, a.size))
    for name, v in rates.items():
        print(f"median {name}: {statistics.median(v):.0f} patches/s")


if __name__ == "__main__":
    main()
