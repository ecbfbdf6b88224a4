#!/usr/bin/env python3
"""Reading at a physical resolution: the cost of the reduction step, side by side.

usage: resize_rate.py [SLIDE] [--patches 256] [--size 256] [--mpp 0.998] [--rounds 3] [--device cuda]

One batch of random level-0 patches of SLIDE (default: the bundled CMU-1-Small-Region.svs,
0.499 µm/px, so ``--mpp 0.998`` reads 512² and halves it). Per round, in one process: the read at
the level's size alone (``read_patches(..., read size)``), the reduction of that batch by
slidestream's native resize (``slidestream.resolution.resize_patches``) and by a per-patch
Pillow ``LANCZOS`` loop (the filter it reproduces), and the whole ``read_patches(..., mpp=)``
call. Prints patches/s per step and round, then medians. Page cache warm (one read first).
With ``--device cuda`` the same steps also run on the GPU (the read into device memory, the
device resize ``_resize_patches_device``, the whole ``read_patches(..., mpp=, device=)``),
each synchronised, and the device result is checked equal to the CPU one.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np

import slidestream as ss
from slidestream.resolution import resize_patches, resolve

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slide", nargs="?", default=str(HERE.parent / "assets" / "CMU-1-Small-Region.svs"))
    ap.add_argument("--patches", type=int, default=256)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--mpp", type=float, default=0.998)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default=None, help="also time the GPU steps on this device (e.g. cuda)")
    a = ap.parse_args()
    s = ss.Slide(a.slide)
    r = resolve(s, mpp=a.mpp)
    rw, rh = r.read_size((a.size, a.size))
    w, h = s.level_dimensions[r.level]
    ds = s.level_downsamples[r.level]
    rng = np.random.default_rng(0)
    rows = np.zeros((a.patches, 4), np.int64)
    rows[:, 1] = r.level
    rows[:, 2] = (rng.integers(0, max(1, w - rw), a.patches) * ds).astype(np.int64)
    rows[:, 3] = (rng.integers(0, max(1, h - rh), a.patches) * ds).astype(np.int64)
    ss.read_patches([s], rows, (rw, rh))
    print(f"{a.slide}: level {r.level}, read {rw}x{rh} -> {a.size}x{a.size} (scale {r.scale:.3f}), {a.patches} patches")
    try:
        from PIL import Image
    except ImportError:
        Image = None
    rates: dict = {}

    def timed(name, f):
        t = time.perf_counter()
        out = f()
        rates.setdefault(name, []).append(a.patches / (time.perf_counter() - t))
        return out

    for k in range(a.rounds):
        got = timed("read at the level's size", lambda: ss.read_patches([s], rows, (rw, rh)))
        timed("native resize", lambda: resize_patches(got, (a.size, a.size)))
        if Image is not None:
            timed("Pillow LANCZOS per patch", lambda: [Image.fromarray(p).resize((a.size, a.size), Image.Resampling.LANCZOS) for p in got])
        cpu = timed("read_patches(mpp=)", lambda: ss.read_patches([s], rows, a.size, mpp=a.mpp))
        if a.device:
            from slidestream._slidestream import _resize_patches_device

            d = timed("device: read at the level's size", lambda: ss.read_patches([s], rows, (rw, rh), device=a.device))
            idx = np.arange(a.patches, dtype=np.int64)
            timed("device: resize", lambda: _resize_patches_device([(d, idx)], a.patches, (a.size, a.size)))
            dev = timed("device: read_patches(mpp=)", lambda: ss.read_patches([s], rows, a.size, mpp=a.mpp, device=a.device))
            assert np.array_equal(np.asarray(dev), cpu), "device batch differs from the CPU batch"
        print(f"round {k}: " + ", ".join(f"{n} {v[-1]:,.0f}/s" for n, v in rates.items()))
    print("medians: " + ", ".join(f"{n} {statistics.median(v):,.0f}/s" for n, v in rates.items()))


if __name__ == "__main__":
    main()
