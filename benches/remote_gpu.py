#!/usr/bin/env python3
"""Remote slides through the GPU engine (issue 17), on a machine with a GPU.

usage: python benches/remote_gpu.py --www DIR --direct URL [--delayed URL] [--big NAME]
                                    [--patches 4096] [--rounds 3] [--seed 0]

``DIR`` is served over HTTP at ``--direct`` (a range server on loopback) and, through the
latency proxy (``scripts/faultproxy.py --delay-ms 10``: 20 ms RTT), at ``--delayed``.

1. Conformance: every single-file slide of ``DIR`` that opens locally is opened from
   ``--direct``; several regions per level read to the device (``device="cuda"``) from the
   URL must equal the local file's device reads, byte for byte. Prints one line per slide and
   exits 1 on any difference.
2. Rates (with ``--big``): random 256² level-0 patches of ``DIR/NAME``, batches of 256 and of
   ``--patches``, into GPU memory, from the local file, from ``--direct`` and from
   ``--delayed``: patches/s (median of ``--rounds``, each round a fresh slide with a cold 4 GiB
   host cache and the device cache emptied), HTTP requests per patch and bytes received per patch, from
   ``io_stats()["remote"]``.
"""
import argparse
import os
import random
import statistics
import sys
import time

import numpy as np

import slidestream


def regions(s):
    out = []
    for lv in range(s.level_count):
        w, h = s.level_dimensions[lv]
        d = s.level_downsamples[lv]
        for fx, fy in ((0, 0), (0.37, 0.61), (0.9, 0.95)):
            out.append((lv, (int(w * fx * d), int(h * fy * d)), (min(300, w), min(200, h))))
    return out


def conformance(www, base):
    bad = 0
    for name in sorted(os.listdir(www)):
        p = os.path.join(www, name)
        if not os.path.isfile(p) or name.endswith((".md", ".json")) or name.startswith("big"):
            continue
        try:
            local = slidestream.Slide(p)
        except Exception as e:  # refused locally: must be refused remotely with the same class
            try:
                slidestream.Slide(f"{base}/{name}")
                print(f"{name}: opens remotely but not locally ({type(e).__name__})")
                bad += 1
            except Exception as e2:
                same = type(e2) is type(e)
                bad += not same
                print(f"{name}: refused locally and remotely ({type(e).__name__} / {type(e2).__name__}){'' if same else '  MISMATCH'}")
            continue
        remote = slidestream.Slide(f"{base}/{name}")
        ok = remote.properties == local.properties and remote.level_dimensions == local.level_dimensions
        n = 0
        for lv, loc, size in regions(local):
            try:
                a = local.read_regions([loc], lv, size, device="cuda").cpu()
            except Exception as e:
                try:
                    remote.read_regions([loc], lv, size, device="cuda")
                    ok = False
                except Exception as e2:
                    ok &= type(e2) is type(e)
                continue
            b = remote.read_regions([loc], lv, size, device="cuda").cpu()
            ok &= bool(np.array_equal(a, b))
            n += 1
        st = remote.io_stats()["remote"]
        print(f"{name}: {'equal' if ok else 'DIFFERENT'} ({n} device regions; open {st['open_requests']} requests, {st['requests']} in all)")
        bad += not ok
    return bad


def rates(www, base_direct, base_delayed, big, n_big, rounds, seed):
    path = os.path.join(www, big)
    with slidestream.Slide(path) as s:
        w, h = s.dimensions
    rng = random.Random(seed)
    for batch in (256, n_big):
        for label, src in (("local file", path), ("http loopback", f"{base_direct}/{big}"), ("http 20 ms RTT", f"{base_delayed}/{big}")):
            rs, reqs, byts = [], [], []
            # Warm the engine and the output pool (not timed).
            with slidestream.Slide(src, cache_bytes=4 << 30) as s:
                s.read_regions([(rng.randrange(w - 256), rng.randrange(h - 256)) for _ in range(batch)], 0, (256, 256), device="cuda")
            for _ in range(rounds):
                slidestream.gpu_clear_cache()
                locs = [(rng.randrange(w - 256), rng.randrange(h - 256)) for _ in range(batch)]
                with slidestream.Slide(src, cache_bytes=4 << 30) as s:
                    r0 = s.io_stats().get("remote") or {}
                    t0 = time.perf_counter()
                    out = s.read_regions(locs, 0, (256, 256), device="cuda")
                    dt = time.perf_counter() - t0
                    r1 = s.io_stats().get("remote") or {}
                del out
                rs.append(batch / dt)
                if r1:
                    reqs.append((r1["requests"] - r0["requests"]) / batch)
                    byts.append(r1["bytes"] - r0["bytes"])
            extra = ""
            if reqs:
                extra = f"; {statistics.median(reqs):.2f} requests/patch, {statistics.median(byts) / batch / 1024:.1f} KiB received/patch"
            print(f"batch {batch:5d}  {label:15s}: median {statistics.median(rs):9,.0f} device patches/s (rounds: {', '.join(f'{r:,.0f}' for r in rs)}){extra}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--www", required=True)
    ap.add_argument("--direct", required=True)
    ap.add_argument("--delayed")
    ap.add_argument("--big")
    ap.add_argument("--patches", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-conformance", action="store_true")
    a = ap.parse_args()
    bad = 0
    if not a.no_conformance:
        bad = conformance(a.www, a.direct)
        print(f"conformance: {'all equal' if not bad else f'{bad} slide(s) differ'}")
    if a.big and a.delayed:
        rates(a.www, a.direct, a.delayed, a.big, a.patches, a.rounds, a.seed)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
