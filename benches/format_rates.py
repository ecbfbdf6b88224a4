#!/usr/bin/env python3
"""Random patches per slide format, CPU and device side by side (one row per slide).

usage: format_rates.py SLIDE [SLIDE ...] [--patches 256] [--size 256] [--rounds 3]
                       [--device cuda] [--json OUT]

For each slide: one batch of ``--patches`` random level-0 patches of ``--size``² (smaller
where the slide is smaller), read with ``Slide.read_regions`` (RGB over white) per round, the
slide opened with no tile cache (``cache_bytes=0``) so every round decodes; with ``--device``
the same batch on the GPU (its device tile cache cleared before every round) and the device
batch compared with the CPU batch (max abs difference; 0 expected: the GPU path decodes JPEG
bit-exactly and other codecs on its CPU workers). Prints a markdown table: format (vendor),
slide, level-0 size, patch size, CPU patches/s, device patches/s, max diff (medians of the
rounds). Page cache warm (one untimed read first).

With ``--levels`` and ``--device``, every level is also compared: up to 16 regions of up to
1024² covering it, each read with ``read_region`` (RGBA) on the CPU and on the device; the
largest difference over all levels is the "levels diff" column (0 expected). The device columns
count the timed rounds' work (``gpu_stats`` after a reset): tiles decoded by nvJPEG (hardware,
device bitstream or hybrid back end) / on the CPU, and the bytes read per I/O path.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

import slidestream as ss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slides", nargs="+")
    ap.add_argument("--patches", type=int, default=256)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--levels", action="store_true", help="with --device: compare every level's regions too")
    a = ap.parse_args()
    rows = []
    print("| format | slide | level 0 | patch | CPU patches/s | device patches/s | max diff | levels diff | device tiles: nvJPEG / CPU | device bytes read |")
    print("|---|---|---|---|---:|---:|---:|---:|---|---|")
    for path in a.slides:
        try:
            s = ss.Slide(path, cache_bytes=0)
        except Exception as e:  # noqa: BLE001 - a row saying why
            print(f"| ? | {os.path.basename(path)} | error: {type(e).__name__}: {e} | | | | | | | |")
            continue
        try:
            w, h = s.dimensions
            p = max(1, min(a.size, w, h))
            rng = np.random.default_rng(0)
            locs = np.stack([rng.integers(0, max(1, w - p + 1), a.patches), rng.integers(0, max(1, h - p + 1), a.patches)], axis=1)
            cpu_batch = s.read_regions(locs, 0, (p, p))
            cpu, dev, diff = [], [], None
            for _ in range(a.rounds):
                t = time.perf_counter()
                cpu_batch = s.read_regions(locs, 0, (p, p))
                cpu.append(a.patches / (time.perf_counter() - t))
            tiles = io = None
            if a.device:
                ss.gpu_reset_stats(a.device)
                s.read_regions(locs, 0, (p, p), device=a.device)
                for _ in range(a.rounds):
                    ss.gpu_clear_cache(a.device)
                    t = time.perf_counter()
                    d = s.read_regions(locs, 0, (p, p), device=a.device)
                    dev.append(a.patches / (time.perf_counter() - t))
                diff = int(np.abs(np.asarray(d).astype(np.int16) - cpu_batch.astype(np.int16)).max())
                st = ss.gpu_stats(a.device)
                nv = st["decoded_hardware"] + st["decoded_device_bitstream"] + st["decoded_hybrid"]
                tiles = f"{nv} / {st['decoded_cpu']}"
                io = " ".join(f"{k.removesuffix('_bytes')} {st[k] >> 10} KiB" for k in ("posix_bytes", "cufile_compat_bytes", "cufile_gds_bytes") if st[k])
            level_diff = levels_diff(s, a.device) if a.device and a.levels else None
            vendor = s.properties.get("openslide.vendor", "?")
            row = dict(format=vendor, slide=os.path.basename(os.path.dirname(path)) + "/" + os.path.basename(path), size=[w, h], patch=p,
                       cpu=statistics.median(cpu), device=statistics.median(dev) if dev else None, max_diff=diff,
                       levels_diff=level_diff, tiles_nvjpeg_cpu=tiles, io=io)
            rows.append(row)
            dv = f"{row['device']:,.0f}" if dev else "—"
            print(f"| {vendor} | {row['slide']} | {w}×{h} | {p}² | {row['cpu']:,.0f} | {dv} | {'—' if diff is None else diff} | {'—' if level_diff is None else level_diff} | {tiles or '—'} | {io or '—'} |", flush=True)
        except Exception as e:  # noqa: BLE001 - a row saying why, then the next slide
            print(f"| {s.properties.get('openslide.vendor', '?')} | {os.path.basename(path)} | read error: {type(e).__name__}: {e} | | | | | | | |", flush=True)
            rows.append(dict(slide=path, error=f"{type(e).__name__}: {e}"))
        s.close()
    if a.device:
        # Which path the bytes took and which decoder took the tiles, over the whole run.
        st = ss.gpu_stats(a.device)
        print("gpu_stats:", json.dumps({k: v for k, v in st.items() if any(w in k for w in ("path", "tiles", "fallback", "bytes"))}, default=str))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "gpu_stats": ss.gpu_stats(a.device) if a.device else None}, f, indent=1, default=str)


def levels_diff(s, device) -> int:
    """Largest |device - CPU| over up to 16 regions of up to 1024² covering each level (RGBA)."""
    worst = 0
    for level, (lw, lh) in enumerate(s.level_dimensions):
        ds = s.level_downsamples[level]
        step = 1024
        starts = [(x, y) for y in range(0, lh, step) for x in range(0, lw, step)][:16]
        for x, y in starts:
            size = (min(step, lw - x), min(step, lh - y))
            loc = (int(x * ds), int(y * ds))
            cpu = np.asarray(s.read_region(loc, level, size))
            dev = np.asarray(s.read_region(loc, level, size, device=device))
            worst = max(worst, int(np.abs(dev.astype(np.int16) - cpu.astype(np.int16)).max()))
    return worst


if __name__ == "__main__":
    main()
