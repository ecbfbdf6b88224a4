"""Scaling of the documented Dask cohort pipeline (docs/examples/dask_cohort.py) with the number
of worker processes: thumbnails + tissue masks + patch coordinates of every slide (map_slides),
then per-patch statistics of every tissue patch (read_patches, tasks sized by tiles), written to
Zarr — on a ``distributed.LocalCluster`` of N processes × 1 thread (slidestream decodes on one
thread per worker: SlidestreamWorkers' decode_threads="auto").

    python benches/dask_scaling.py SLIDE_DIR --workers 1,2,4,8,16 --out scaling.json

Per N: wall time of each stage (cluster start and the workers' first imports excluded),
slides/s, patches/s and the efficiency per worker = rate(N) / (N · rate(1)). ``--ceiling`` adds,
per N, the same patch work without Dask: N plain processes (multiprocessing spawn, one decode
thread each), each reading its share of the rows with ``Slide.read_regions`` in blocks of 256
and computing the same per-patch values — what this machine's cores give N independent
processes, so the pipeline's efficiency can be told apart from the machine's (shared caches,
clocks). Runs are sequential in one call, so the numbers compare. ``--budget-s`` skips the
worker counts left once that much wall time is spent.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent


def load_example():
    """docs/examples/dask_cohort.py as a module."""
    spec = importlib.util.spec_from_file_location("dask_cohort", HERE.parent / "docs" / "examples" / "dask_cohort.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _warm() -> None:
    """A worker's imports, done before the clock starts (a long-lived cluster has them)."""
    import zarr  # noqa: F401

    import slidestream.dask  # noqa: F401
    import slidestream.sampling  # noqa: F401


def _ceiling_worker(args):
    """One plain process of the ceiling run: its rows read and reduced; returns (start, end)."""
    paths, rows, size, barrier = args
    os.environ["RAYON_NUM_THREADS"] = "1"
    import numpy as np

    import slidestream

    ex = load_example()
    slides = {}
    barrier.wait()
    t0 = time.time()
    for s in np.unique(rows[:, 0]) if len(rows) else ():
        sel = rows[rows[:, 0] == s]
        slide = slides.setdefault(int(s), slidestream.Slide(paths[int(s)]))
        for b in range(0, len(sel), 256):
            part = sel[b : b + 256]
            ex.patch_stats(slide.read_regions(np.ascontiguousarray(part[:, 2:]), int(part[0, 1]), (size, size)))
    return t0, time.time()


def ceiling(n: int, paths, rows, size: int) -> float:
    """Patches/s of ``n`` plain processes sharing ``rows`` (contiguous shares, slide-grouped)."""
    import multiprocessing as mp

    import numpy as np

    ctx = mp.get_context("spawn")
    with ctx.Manager() as m:
        barrier = m.Barrier(n)
        shares = np.array_split(rows, n)
        with ctx.Pool(n) as pool:
            spans = pool.map(_ceiling_worker, [(paths, sh, size, barrier) for sh in shares])
    start, end = min(a for a, _ in spans), max(b for _, b in spans)
    return len(rows) / (end - start)


def run_one(n: int, paths, kw, scratch: str):
    from distributed import Client, LocalCluster

    import slidestream.dask as ssd

    ex = load_example()
    out = os.path.join(scratch, f"cohort-{n}.zarr")
    with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        ssd.setup_workers(client)
        client.run(_warm)
        r = ex.run(paths, out, **kw)
    import numpy as np
    import zarr

    np.save(os.path.join(scratch, "rows.npy"), zarr.open_group(out, mode="r")["patch_stats/rows"][...])
    shutil.rmtree(out, ignore_errors=True)
    r["workers"] = n
    r["slides_per_s"] = r["slides"] / r["summary_s"]
    r["patches_per_s"] = r["patches"] / r["patches_s"]
    r["slides_and_patches_per_s"] = r["slides"] / r["total_s"]
    return r


def _rows_of(path: str):
    import numpy as np

    return np.load(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slides", help="folder of slides or a glob")
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--patch", type=int, default=256)
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--min-tissue", type=float, default=0.5)
    ap.add_argument("--thumbnail", type=int, default=1024)
    ap.add_argument("--ceiling", action="store_true", help="also N plain processes doing the patch work (no Dask)")
    ap.add_argument("--budget-s", type=float, default=float("inf"))
    ap.add_argument("--out", help="JSON file for the results")
    a = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(a.slides, "*")) if os.path.isdir(a.slides) else glob.glob(a.slides))
    if not paths:
        print(f"no slides under {a.slides}", file=sys.stderr)
        return 2
    kw = dict(patch=a.patch, level=a.level, min_tissue=a.min_tissue, thumbnail=a.thumbnail)
    counts = [int(v) for v in a.workers.split(",")]
    results = []
    t0 = time.perf_counter()
    scratch = tempfile.mkdtemp(prefix="dask-scaling-")
    print(f"{len(paths)} slides, {os.cpu_count()} cores, stages: map_slides (level {a.level} grid, thumbnail {a.thumbnail}) + read_patches ({a.patch} px)")
    print(f"{'workers':>7} {'slides':>6} {'patches':>8} {'summary s':>9} {'patch s':>8} {'total s':>8} {'slides/s':>8} {'patches/s':>9} {'eff. slides':>11} {'eff. patches':>12} {'eff. total':>10}")
    for n in counts:
        spent = time.perf_counter() - t0
        if results and spent + results[-1]["total_s"] * results[0]["workers"] / n * 1.5 > a.budget_s:
            print(f"{n:>7} skipped: {spent:.0f} s of the {a.budget_s:.0f} s budget spent")
            continue
        r = run_one(n, paths, kw, scratch)
        if a.ceiling:
            rows = _rows_of(os.path.join(scratch, "rows.npy"))
            r["ceiling_patches_per_s"] = ceiling(n, paths, rows, a.patch)
        base = results[0] if results else r
        k = n / base["workers"]
        r["efficiency_slides"] = r["slides_per_s"] / (k * base["slides_per_s"])
        r["efficiency_patches"] = r["patches_per_s"] / (k * base["patches_per_s"])
        r["efficiency_total"] = r["slides_and_patches_per_s"] / (k * base["slides_and_patches_per_s"])
        if a.ceiling:
            r["efficiency_ceiling"] = r["ceiling_patches_per_s"] / (k * base["ceiling_patches_per_s"])
            r["patches_vs_ceiling"] = r["patches_per_s"] / r["ceiling_patches_per_s"]
        results.append(r)
        print(f"{n:>7} {r['slides']:>6} {r['patches']:>8} {r['summary_s']:>9.2f} {r['patches_s']:>8.2f} {r['total_s']:>8.2f} {r['slides_per_s']:>8.2f} "
              f"{r['patches_per_s']:>9.0f} {r['efficiency_slides']:>11.0%} {r['efficiency_patches']:>12.0%} {r['efficiency_total']:>10.0%}"
              + (f"  | no Dask: {r['ceiling_patches_per_s']:.0f} patches/s, eff. {r['efficiency_ceiling']:.0%}; Dask/plain {r['patches_vs_ceiling']:.0%}" if a.ceiling else ""), flush=True)
        if a.out:
            pathlib.Path(a.out).write_text(json.dumps({"cores": os.cpu_count(), "slides": len(paths), "args": vars(a), "results": results}, indent=1))
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
