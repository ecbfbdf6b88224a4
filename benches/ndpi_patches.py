#!/usr/bin/env python3
"""Random 256² level-0 patches of a large NDPI: slidestream vs OpenSlide, CPU, one thread,
in the same run (issue 15 target: slidestream ≥ 3× OpenSlide).

usage: python benches/ndpi_patches.py [--slide /tmp/ndpi-big.ndpi] [--size 40960]
                                      [--patches 1000] [--rounds 3] [--patch 256]

Writes the slide first when it does not exist (``scripts/vendor_slides/hamamatsu.py``'s
``write_large_ndpi``: SIZE² px, YCbCr 4:2:2, 512×8 restart-interval tiles, MCU starts tag).
One thread: ``RAYON_NUM_THREADS=1`` and ``SLIDESTREAM_IO_DEPTH=1`` (set here, before
slidestream is imported) make slidestream decode and read on the calling thread; OpenSlide's
``read_region`` is single-threaded. Each round opens a fresh handle of each reader (default
caches: slidestream's 256 MiB, OpenSlide's 32 MiB), reads the same seeded locations, readers
alternate which goes first; patches/s per round and the median are printed, plus a pixel check
of a few patches (max abs difference slidestream vs OpenSlide).
"""
import argparse
import os
import pathlib
import random
import statistics
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["SLIDESTREAM_IO_DEPTH"] = "1"

import numpy as np  # noqa: E402
import openslide  # noqa: E402

import slidestream  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
from vendor_slides.hamamatsu import write_large_ndpi  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slide", type=pathlib.Path, default=pathlib.Path("/tmp/ndpi-big.ndpi"))
    ap.add_argument("--size", type=int, default=40960)
    ap.add_argument("--patches", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--patch", type=int, default=256)
    a = ap.parse_args()
    if not a.slide.exists():
        t0 = time.perf_counter()
        n = write_large_ndpi(a.slide, a.size, a.size)
        print(f"wrote {a.slide}: {a.size}x{a.size}, {n / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s")
    sz = a.patch
    with openslide.OpenSlide(str(a.slide)) as o:
        w, h = o.dimensions
        tile = (o.properties["openslide.level[0].tile-width"], o.properties["openslide.level[0].tile-height"])
    print(f"{a.slide}: {w}x{h}, tiles {tile[0]}x{tile[1]}, {a.patches} random {sz}² level-0 patches, {a.rounds} rounds, one thread")
    res = {"slidestream": [], "openslide": []}
    for r in range(a.rounds):
        rng = random.Random(r)
        locs = [(rng.randrange(w - sz), rng.randrange(h - sz)) for _ in range(a.patches)]
        order = ["slidestream", "openslide"] if r % 2 == 0 else ["openslide", "slidestream"]
        for reader in order:
            if reader == "slidestream":
                s = slidestream.Slide(str(a.slide))
                t0 = time.perf_counter()
                for loc in locs:
                    s.read_region(loc, 0, (sz, sz))
                dt = time.perf_counter() - t0
                s.close()
            else:
                o = openslide.OpenSlide(str(a.slide))
                t0 = time.perf_counter()
                for loc in locs:
                    o.read_region(loc, 0, (sz, sz))
                dt = time.perf_counter() - t0
                o.close()
            res[reader].append(a.patches / dt)
        print(f"round {r}: slidestream {res['slidestream'][-1]:.0f} patches/s, openslide {res['openslide'][-1]:.0f} patches/s")
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"| reader | patches/s (median of {a.rounds}) |")
    print("|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:.0f} |")
    print(f"slidestream / openslide = {med['slidestream'] / med['openslide']:.2f}x")
    # Pixel check.
    s, o = slidestream.Slide(str(a.slide)), openslide.OpenSlide(str(a.slide))
    rng = random.Random(99)
    worst = 0
    for _ in range(8):
        loc = (rng.randrange(w - sz), rng.randrange(h - sz))
        d = np.abs(np.asarray(s.read_region(loc, 0, (sz, sz))).astype(int) - np.asarray(o.read_region(loc, 0, (sz, sz))).astype(int)).max()
        worst = max(worst, int(d))
    print(f"pixel check: max abs difference over 8 patches = {worst}")


if __name__ == "__main__":
    main()
