#!/usr/bin/env python3
"""Patches/s into GPU memory with one process per GPU (issue 18): the same call measures
world sizes 1, 2, ... one after the other and reports the speed-up.

usage:
  ddp_patches.py --slides DIR_OR_GLOB [--slides ...] [--world-sizes 1,2] [--batch 256]
                 [--size 256] [--warmup 5] [--batches 40] [--sampler random|grid]
                 [--min-tissue 0.5] [--seed 0] [--threads-per-rank N] [--out FILE.json]
                 [--device cuda|cpu]

Method. For each world size W in ``--world-sizes`` (in the order given, sequentially, each a
fresh set of W processes started with ``torch.multiprocessing.spawn``), rank r:

1. joins a ``torch.distributed`` group over ``tcp://127.0.0.1:PORT`` (a free port per world
   size; backend ``nccl`` on GPUs, ``gloo`` with ``--device cpu``), ``torch.cuda.set_device(r)``;
2. opens every slide and makes a ``slidestream.torch.PatchLoader(slides, sampler, SIZE,
   batch_size=B, device=f"cuda:{r}")`` (``rank``/``world_size`` from the group): batches of
   patches across all slides. ``--sampler random``: a
   :class:`slidestream.sampling.RandomPatchSampler` over the slides' tissue (``--min-tissue``,
   seeded with ``--seed``), which the loader splits per rank (``sampler.split(r, W,
   epoch=e)``: the ranks draw different patches). ``--sampler grid``: the non-overlapping
   level-0 grid of every slide (tissue-filtered by ``--min-tissue``), shuffled (``--seed``)
   and split by the loader (DistributedSampler's rule), epochs repeated as needed;
3. consumes ``--warmup`` batches (engine start, kernels, nvJPEG, the memory pool; not timed),
   then ``dist.barrier()``, ``torch.cuda.synchronize()``, and times ``--batches`` batches until
   a final ``torch.cuda.synchronize()``. A batch counts when the loader yields it: a CUDA
   ``uint8`` tensor (B, SIZE, SIZE, 3) complete in device ``r``'s memory (slidestream
   synchronises its own streams before a read returns). The loader reads ahead (``prefetch=2``
   batches) while the caller consumes, as in training; nothing else runs on the GPU;
4. ``all_reduce`` of the patch counts (SUM) and of the timed seconds (MAX); every rank's own
   count and seconds are gathered on rank 0.

Reported per world size: each rank's patches/s (its patches / its seconds), the total
(all ranks' patches / the slowest rank's seconds: the aggregate rate of the group), and the
speed-up of each world size over the first one given (the issue's target: 2 GPUs ≥ 1.8 × 1).
The ranks share the host's CPU cores and page cache; ``--threads-per-rank`` sets
``RAYON_NUM_THREADS`` (slidestream's decode threads) per rank (default: unset, every rank uses
every core, as a plain DDP script would). The slide files are read once before the runs (page
cache warm for every world size).

Refuses (exit status 2, a message naming the numbers) when a world size exceeds
``torch.cuda.device_count()`` or no slide is found; without PyTorch it says so (exit 2). The
module imports without torch (the harness's smoke test imports it); ``--device cpu`` runs the
whole harness on the CPU path with ``gloo`` (no GPU needed: the smoke test's mode).

Output: a markdown table on stdout and, with ``--out``, the JSON report (config, host, runs,
speed-ups).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import platform
import socket
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

SLIDE_SUFFIXES = (".svs", ".tif", ".tiff", ".ndpi", ".scn", ".bif", ".mrxs", ".dcm", ".vms")
#: The issue's target for 2 GPUs over 1.
TARGET_SPEEDUP_2 = 1.8


class Refused(Exception):
    """The run cannot be made as asked (the message says why); exit status 2."""


def parse_world_sizes(text: str) -> List[int]:
    """``"1,2"`` → ``[1, 2]``. Raises Refused for anything but positive ints, or repeats."""
    try:
        sizes = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise Refused(f"--world-sizes must be comma-separated integers, not {text!r}") from None
    if not sizes or any(s < 1 for s in sizes) or len(set(sizes)) != len(sizes):
        raise Refused(f"--world-sizes must be distinct integers >= 1, not {text!r}")
    return sizes


def find_slides(patterns: Sequence[str]) -> List[str]:
    """The slide files named by ``patterns`` (a directory: its files with a slide suffix; else
    a glob or a path), sorted, without duplicates. Raises Refused when none is found."""
    out: List[str] = []
    for p in patterns:
        path = pathlib.Path(p)
        if path.is_dir():
            found = sorted(str(f) for f in path.iterdir() if f.is_file() and f.suffix.lower() in SLIDE_SUFFIXES)
        else:
            found = sorted(glob.glob(p)) if any(c in p for c in "*?[") else ([p] if path.is_file() else [])
        out += [f for f in found if f not in out]
    if not out:
        raise Refused(f"no slide found in {list(patterns)!r}")
    return out


def check_devices(world_sizes: Sequence[int], device: str, available: int) -> None:
    """Refused when a world size needs more GPUs than ``available`` (device ``cuda`` only)."""
    if device == "cuda" and max(world_sizes) > available:
        raise Refused(f"--world-sizes {','.join(map(str, world_sizes))} needs {max(world_sizes)} GPUs; "
                      f"torch.cuda.device_count() is {available} (one process per GPU: give at most {available})")


def summarize(world_size: int, ranks: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One world size's report from its ranks' ``{"rank", "patches", "seconds", ...}``:
    per-rank patches/s, the total rate (sum of patches / the slowest rank's seconds)."""
    if sorted(r["rank"] for r in ranks) != list(range(world_size)):
        raise ValueError(f"ranks {[r['rank'] for r in ranks]} for world size {world_size}")
    slowest = max(r["seconds"] for r in ranks)
    patches = sum(r["patches"] for r in ranks)
    per_rank = [dict(r, patches_per_s=r["patches"] / r["seconds"] if r["seconds"] > 0 else 0.0) for r in sorted(ranks, key=lambda r: r["rank"])]
    return {"world_size": world_size, "ranks": per_rank, "patches": patches, "seconds": slowest,
            "total_patches_per_s": patches / slowest if slowest > 0 else 0.0}


def speedups(runs: List[Dict[str, Any]]) -> Dict[str, float]:
    """Each world size's total rate over the first run's, keyed by the world size (str)."""
    base = runs[0]["total_patches_per_s"]
    return {str(r["world_size"]): (r["total_patches_per_s"] / base if base > 0 else 0.0) for r in runs}


def markdown(runs: List[Dict[str, Any]], ups: Dict[str, float]) -> str:
    lines = ["| world size | per-rank patches/s | total patches/s | speed-up |", "|---:|---|---:|---:|"]
    for r in runs:
        per = ", ".join(f"{x['patches_per_s']:.0f}" for x in r["ranks"])
        lines.append(f"| {r['world_size']} | {per} | {r['total_patches_per_s']:.0f} | {ups[str(r['world_size'])]:.2f} |")
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _batches(loader: Any, n: int):
    """``n`` batches of ``loader``, epochs repeated when one ends (a finite row set)."""
    got = 0
    while got < n:
        before = got
        for batch, meta in loader:
            yield batch, meta
            got += 1
            if got == n:
                return
        if got == before:
            raise RuntimeError("the loader yields no batch (no rows for this rank?)")


def _make_sampler(cfg: Dict[str, Any], slides: List[Any]) -> Any:
    from slidestream.sampling import GridSampler, RandomPatchSampler

    size = (cfg["size"], cfg["size"])
    if cfg["sampler"] == "random":
        return RandomPatchSampler(slides, size, min_tissue=cfg["min_tissue"], seed=cfg["seed"])
    import numpy as np

    grids = [GridSampler(s, size, min_tissue=cfg["min_tissue"], slide_index=i).patches for i, s in enumerate(slides)]
    return np.concatenate(grids)


def _rank_main(rank: int, world_size: int, cfg: Dict[str, Any], port: int, out_dir: str) -> None:
    """One rank of one world size (the function ``torch.multiprocessing.spawn`` runs)."""
    if cfg["threads_per_rank"]:
        os.environ["RAYON_NUM_THREADS"] = str(cfg["threads_per_rank"])
    import torch
    import torch.distributed as dist

    import slidestream
    from slidestream.torch import PatchLoader

    on_gpu = cfg["device"] == "cuda"
    if on_gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if on_gpu else "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        slides = [slidestream.Slide(p) for p in cfg["slides"]]
        sampler = _make_sampler(cfg, slides)
        finite = cfg["sampler"] == "grid"
        loader = PatchLoader(slides, sampler, cfg["size"], batch_size=cfg["batch"], device=f"cuda:{rank}" if on_gpu else None,
                             num_batches=None if finite else cfg["warmup"] + cfg["batches"], shuffle=finite, seed=cfg["seed"])
        assert (loader.rank, loader.world_size) == (rank, world_size)
        sync = torch.cuda.synchronize if on_gpu else (lambda: None)
        it = _batches(loader, cfg["warmup"] + cfg["batches"])
        warm = time.perf_counter()
        for _ in range(cfg["warmup"]):
            next(it)
        warm = time.perf_counter() - warm
        dist.barrier()
        sync()
        t0 = time.perf_counter()
        patches = 0
        for _ in range(cfg["batches"]):
            batch, _meta = next(it)
            patches += int(batch.shape[0])
        sync()
        seconds = time.perf_counter() - t0
        it.close()
        loader.close()
        dev = torch.device("cuda", rank) if on_gpu else torch.device("cpu")
        total = torch.tensor([patches], dtype=torch.int64, device=dev)
        slowest = torch.tensor([seconds], dtype=torch.float64, device=dev)
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        mine = {"rank": rank, "patches": patches, "seconds": seconds, "warmup_s": warm, "device": str(dev),
                "gpu": torch.cuda.get_device_name(rank) if on_gpu else None}
        gathered: List[Any] = [None] * world_size
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            report = {"ranks": gathered, "all_reduce_patches": int(total.item()), "all_reduce_max_seconds": float(slowest.item())}
            pathlib.Path(out_dir, f"ws{world_size}.json").write_text(json.dumps(report))
        for s in slides:
            s.close()
    finally:
        dist.destroy_process_group()


def run(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Every world size of ``cfg`` in turn; the report (see the module docs)."""
    import torch
    import torch.multiprocessing as tmp

    for p in cfg["slides"]:  # page cache warm for every world size alike
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass
    runs = []
    with tempfile.TemporaryDirectory(prefix="ddp_patches-") as out_dir:
        for ws in cfg["world_sizes"]:
            tmp.spawn(_rank_main, args=(ws, cfg, free_port(), out_dir), nprocs=ws, join=True)
            rep = json.loads(pathlib.Path(out_dir, f"ws{ws}.json").read_text())
            run_ = summarize(ws, rep["ranks"])
            if rep["all_reduce_patches"] != run_["patches"]:
                raise RuntimeError(f"world size {ws}: all_reduce counted {rep['all_reduce_patches']} patches, the ranks {run_['patches']}")
            runs.append(run_)
    ups = speedups(runs)
    return {"config": {k: v for k, v in cfg.items()}, "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "gpus": torch.cuda.device_count() if cfg["device"] == "cuda" else 0},
            "runs": runs, "speedup": ups, "target_speedup_2": TARGET_SPEEDUP_2}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--slides", action="append", required=True, help="a directory, a glob or a file (repeatable)")
    ap.add_argument("--world-sizes", default="1,2")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--sampler", choices=("random", "grid"), default="random")
    ap.add_argument("--min-tissue", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads-per-rank", type=int, default=0)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", default=None, help="write the JSON report here")
    a = ap.parse_args(argv)
    try:
        for name in ("batch", "size", "batches"):
            if getattr(a, name) < 1:
                raise Refused(f"--{name} must be >= 1")
        if a.warmup < 0:
            raise Refused("--warmup must be >= 0")
        world_sizes = parse_world_sizes(a.world_sizes)
        slides = find_slides(a.slides)
        try:
            import torch
        except ImportError:
            raise Refused("this benchmark needs PyTorch (torch.distributed, one process per GPU): pip install torch") from None
        check_devices(world_sizes, a.device, torch.cuda.device_count() if a.device == "cuda" else 0)
    except Refused as e:
        print(f"ddp_patches: {e}", file=sys.stderr)
        return 2
    cfg = {"slides": slides, "world_sizes": world_sizes, "batch": a.batch, "size": a.size, "warmup": a.warmup, "batches": a.batches,
           "sampler": a.sampler, "min_tissue": a.min_tissue, "seed": a.seed, "threads_per_rank": a.threads_per_rank, "device": a.device}
    report = run(cfg)
    print(markdown(report["runs"], report["speedup"]))
    if a.out:
        pathlib.Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(a.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
