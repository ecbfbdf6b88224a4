#!/usr/bin/env python3
"""Tile decode rate of the GPU engine per slide: every stored level-0 tile read once through
``read_regions(..., device=DEVICE)`` in batches of tile-aligned patches, so each patch is one
tile and no tile is read twice. Used for the issue-15 "NDPI through nvJPEG against Aperio" row
(docs/gpu.md): the same engine on an NDPI (tiles = runs of restart intervals, framed per tile)
and on an Aperio SVS (tiles with JPEGTables spliced).

usage: python benches/gpu_tile_rate.py SLIDE [SLIDE ...] [--batch 1024] [--rounds 3]
                                       [--max-tiles 20000] [--device cuda]

Per slide and round: a fresh ``Slide``, the device tile cache emptied, the engine counters
zeroed, then the level-0 tiles (row-major, at most ``--max-tiles``) in batches of ``--batch``
patches the size of a tile. Prints per slide one line: the tile size, tiles, the median
tiles/s and MP/s over the rounds, and where the tiles were decoded (``gpu_stats``:
``decoded_hardware`` / ``decoded_device_bitstream`` / ``decoded_hybrid`` / ``decoded_cpu``).
The first round of the first slide warms the engine and is not counted.
"""
import argparse
import statistics
import time

import slidestream


def run(path, a, warm=False):
    with slidestream.Slide(path) as s:
        (tw, th) = s.level_tile_sizes[0]
        w, h = s.dimensions
    cols, rows = -(-w // tw), -(-h // th)
    locs = [(c * tw, r * th) for r in range(rows) for c in range(cols) if (c + 1) * tw <= w and (r + 1) * th <= h]
    locs = locs[: a.max_tiles]
    rates, where = [], {}
    for rnd in range(a.rounds + (1 if warm else 0)):
        slidestream.gpu_clear_cache()
        slidestream.gpu_reset_stats()
        with slidestream.Slide(path) as s:
            t0 = time.perf_counter()
            for i in range(0, len(locs), a.batch):
                out = s.read_regions(locs[i : i + a.batch], 0, (tw, th), device=a.device)
                del out
            dt = time.perf_counter() - t0
        st = slidestream.gpu_stats()
        if warm and rnd == 0:
            continue
        rates.append(len(locs) / dt)
        where = {k: st.get(k, 0) for k in ("decoded_hardware", "decoded_device_bitstream", "decoded_hybrid", "decoded_cpu")}
        where["io_path"] = st.get("io_path")
    med = statistics.median(rates)
    print(
        f"{path}: tile {tw}x{th}, {len(locs)} tiles, {med:,.0f} tiles/s, {med * tw * th / 1e6:,.0f} MP/s "
        f"(rounds: {', '.join(f'{r:,.0f}' for r in rates)}); decoded: {where}",
        flush=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("slides", nargs="+")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tiles", type=int, default=20000)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    for i, p in enumerate(a.slides):
        run(p, a, warm=(i == 0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
