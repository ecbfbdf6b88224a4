#!/usr/bin/env python3
"""One large device batch from Python, timed in a warm interpreter: the "Python batch of 4096"
of the redesign's before/after check (docs/benchmarks.md).

usage: python benches/gpu_batch_py.py SLIDE [--patches 4096] [--size 256] [--rounds 5] [--seed 0]
                                        [--device cuda] [--label NAME]

Opens SLIDE with its own cold 4 GiB host cache per round (``cache_bytes``), starts the GPU
engine and reads one batch of ``--patches`` random level-0 patches once to warm the engine and
the output memory pool (not timed), then per round: the device tile cache emptied
(``slidestream.gpu_clear_cache()``), a fresh ``Slide`` and one ``read_regions(..., device=DEVICE)``
of a new random batch (a device result is complete when the call returns: its
``__cuda_array_interface__`` has stream None). Prints one line: label, the median patches/s, and every round.
Without ``--device`` (``--device cpu``) the same runs on the CPU path into numpy.
"""
import argparse
import random
import statistics
import sys
import time

import slidestream


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("slide")
    ap.add_argument("--patches", type=int, default=4096)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--label", default="slidestream")
    a = ap.parse_args()
    dev = None if a.device == "cpu" else a.device
    rng = random.Random(a.seed)
    with slidestream.Slide(a.slide) as s:
        w, h = s.dimensions
    locs = lambda: [(rng.randrange(0, w - a.size), rng.randrange(0, h - a.size)) for _ in range(a.patches)]
    clear = getattr(slidestream, "gpu_clear_cache", None)
    with slidestream.Slide(a.slide, cache_bytes=4 << 30) as s:
        out = s.read_regions(locs(), 0, (a.size, a.size), device=dev)
        del out
    rates = []
    for _ in range(a.rounds):
        if clear is not None and dev is not None:
            clear()
        batch = locs()
        with slidestream.Slide(a.slide, cache_bytes=4 << 30) as s:
            t0 = time.perf_counter()
            out = s.read_regions(batch, 0, (a.size, a.size), device=dev)
            dt = time.perf_counter() - t0
        del out
        rates.append(a.patches / dt)
    print(f"{a.label}: python batch of {a.patches} random {a.size}² patches, device={a.device}: median {statistics.median(rates):,.0f} patches/s "
          f"(rounds: {', '.join(f'{r:,.0f}' for r in rates)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
