#!/usr/bin/env python3
"""Random 256² level-0 patches per second of one reader, from CALLERS Python threads sharing one
handle: one measurement in this (fresh) interpreter.

usage: rand_patch_rate.py SLIDE N SEED CALLERS READER   (READER: slidestream | fastslide | openslide)

The N locations come from numpy's default_rng(SEED) over the level-0 area, the same for every
reader; the slide is opened and one 256² patch read before the timer; every read ends in a numpy
array. Prints patches/s. benches/rand_patch_ab.sh alternates builds and readers with it.
"""
import sys
import threading
import time

import numpy as np

path, n, seed, threads, reader = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
if reader == "slidestream":
    import slidestream

    s = slidestream.Slide(path)
    w, h = s.dimensions
    read = lambda x, y: s.read_region((x, y), 0, (256, 256))  # noqa: E731
elif reader == "openslide":
    import openslide

    s = openslide.OpenSlide(path)
    w, h = s.dimensions
    read = lambda x, y: np.asarray(s.read_region((x, y), 0, (256, 256)))  # noqa: E731
elif reader == "fastslide":
    import fastslide

    s = fastslide.FastSlide.from_file_path(path)
    w, h = s.level_dimensions[0]
    read = lambda x, y: s.read_region((x, y), 0, (256, 256)).numpy()  # noqa: E731
else:
    sys.exit(f"unknown reader {reader}")
rng = np.random.default_rng(seed)
locs = list(zip(rng.integers(0, w - 256, n).tolist(), rng.integers(0, h - 256, n).tolist()))
read(0, 0)
parts = [locs[i * n // threads:(i + 1) * n // threads] for i in range(threads)]


def run(part):
    for x, y in part:
        read(x, y)


ts = [threading.Thread(target=run, args=(p,)) for p in parts]
t = time.perf_counter()
for th in ts:
    th.start()
for th in ts:
    th.join()
print(f"{n / (time.perf_counter() - t):.0f}")
