#!/usr/bin/env python3
"""Training-loop benchmark of issue 14: batches of random patches across many slides, from
Python, through slidestream's batch call, its prefetching loader, a plain torch DataLoader and
the peer readers, in one run.

usage:
  training_loop.py --make 8 --from /tmp/big.svs --dir /tmp/tl-slides [--out DIR]   # H200 run
  training_loop.py --slides A.svs B.svs ... [--batches 40] [--warmup 5] [--batch 256]
  training_loop.py --quick                          # small CPU run with the test slides
  training_loop.py ... --only rp-cpu loader-cpu     # some rows (names below; prefixes match)

Method. Every row runs in a fresh interpreter (``--row-timeout`` s, default 180; killed and
recorded as failed on expiry), so no row inherits another's tile caches, GPU memory pool or
warm engine. A row makes ``--warmup`` untimed batches, then times ``--batches`` batches (the
steady state) and reports patches/s = batches × batch / seconds. Every batch is ``--batch``
random ``--size``² level-0 patches, slide chosen uniformly among the slides of the row, x/y
uniform inside the slide (seeded: every row reads the same patches). Device results count as
done when they are complete: slidestream's device arrays are complete when the call returns;
cuCIM's are followed by a device synchronize.

Rows ("N" = the number of slides given, 8 for the issue):
  rp-device-1         read_patches(device="cuda"), 1 slide
  rp-device-N         read_patches(device="cuda") across N slides: one call per batch
  rp-cpu-N            read_patches() on the CPU (numpy), across N slides
  per-slide-device-N  the old style: one Slide.read_regions(device="cuda") per slide of the
                      batch (grouped by slide, no gather into one tensor): the issue's 7.4k/s
  loader-device-N     slidestream.torch.PatchLoader(device="cuda"), no model step
  loader-device-N-step  the same with a simulated model step per batch on the consumer's
                      stream (torch.cuda._sleep calibrated to --step-ms, then a sum over the
                      batch, then waiting for that stream only); reports the rate and the
                      ratio rate ÷ min(no-step rate, batch / step) (the target is ≥ 0.9)
  loader-device-N-readers2, loader-device-N-step-readers2  the same two with readers=2 (two
                      batches read at once); loader-device-N-readers3: three
  loader-cpu-N, loader-cpu-N-step  slidestream.PatchBatches on the CPU path (numpy; the step is
                      a time.sleep(--step-ms), standing in for a model step on another device)
  dataloader-device-N torch DataLoader over slidestream.torch.PatchDataset(device="cuda"),
                      num_workers=0 (default collate: one torch.stack per batch)
  dataloader-cpu-N    the same on the CPU path with --workers worker processes
                      (RAYON_NUM_THREADS=1 each), then .cuda() per batch (when a GPU is there)
  batch4096-device    one read_patches(device="cuda") of --big-batch random patches of slide 0
                      (file pages warm: the whole file read first; device tile cache empty;
                      the engine warmed up first on another slide file, not timed)
  batch4096-device-cold  the same after dropping the page cache (`sync; echo 3 >
                      /proc/sys/vm/drop_caches`, or posix_fadvise(POSIX_FADV_DONTNEED) on slide
                      0's file where that is not permitted; the row says which)
  first-read          a fresh process: import, open, then its first read_patches(device="cuda")
                      of --batch patches, each timed; SLIDESTREAM_GPU_TRACE=1, its stderr saved
                      to --out/training_loop-first-read.stderr.txt
  cucim-cpu-N, cucim-cuda-N  cuCIM CuImage.read_region(locations, batch_size=, num_workers=
                      --threads, device=) once per slide of the batch (cuCIM has no cross-slide
                      call)
  openslide-N         OpenSlide on a pool of --threads threads, one handle per thread per slide,
                      read_region per patch into one (n, h, w, 3) array

Rows run in the order above, the peers (OpenSlide, cuCIM) last. Every row but the cold one
finds the slide files in the page cache (each file read once at the start and after the drop).
Rows that cannot run here (no GPU, a reader or torch missing) are printed as skipped with the
reason. Device rows first start the engine and wait for its background warm-up to finish
(``engine_warm_s`` in the row), so the timed batches are the steady state. Output: one JSON line
per row on stdout, then a markdown table; with ``--out DIR`` also training_loop.jsonl and
training_loop.md there. Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULT = "TRAINING_LOOP_RESULT "


class Skip(Exception):
    """A row that cannot run here; the message says why."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_compare():
    """benches/compare.py as a module (its reader adapters: cuCIM, OpenSlide, device sync)."""
    spec = importlib.util.spec_from_file_location("compare", os.path.join(HERE, "compare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------------------------
# worker side: one row in a fresh interpreter
# --------------------------------------------------------------------------------------------


def make_rows(spec, n_slides: int, n_batches: int, dims):
    """``n_batches`` int64 arrays (batch, 4) of (slide_index, 0, x, y), seeded."""
    import numpy as np

    rng = np.random.default_rng(spec["seed"])
    size = spec["size"]
    out = []
    for _ in range(n_batches):
        idx = rng.integers(0, n_slides, spec["batch"])
        rows = np.zeros((spec["batch"], 4), np.int64)
        rows[:, 0] = idx
        for i in range(n_slides):
            sel = idx == i
            w, h = dims[i]
            rows[sel, 2] = rng.integers(0, max(1, w - size), int(sel.sum()))
            rows[sel, 3] = rng.integers(0, max(1, h - size), int(sel.sum()))
        out.append(rows)
    return out


def need_gpu():
    import slidestream

    if not slidestream.cuda_available():
        raise Skip("no usable CUDA device (slidestream.cuda_available() is False)")


def need_torch(cuda: bool = False):
    try:
        import torch
    except ImportError:
        raise Skip("PyTorch is not installed") from None
    if cuda and not torch.cuda.is_available():
        raise Skip("torch.cuda.is_available() is False")
    return torch


def warm_engine(slides, res):
    """Start the GPU engine (one small device read) and wait, at most 60 s, for its background
    warm-up (nvJPEG, lanes, CPU workers) to finish, so that the timed batches measure the
    steady state (the first reads of a process decode on the CPU while it runs); the seconds
    waited go into ``res``."""
    import numpy as np
    import slidestream

    t = time.perf_counter()
    slidestream.read_patches(slides[:1], np.zeros((1, 4), dtype=np.int64), (64, 64), device="cuda")
    while time.perf_counter() - t < 60:
        status = slidestream.gpu_stats().get("warmup", "")
        if "background" in status.split(";", 1)[-1] and "not started" not in status:
            break
        time.sleep(0.05)
    res["engine_warm_s"] = round(time.perf_counter() - t, 3)
    res["warmup_status"] = slidestream.gpu_stats().get("warmup", "")


def timed_batches(spec, run_one, batches):
    """Run ``run_one(rows)`` over warm-up then timed batches; (seconds of the timed part). The
    process's CPU seconds per wall second over the timed part (host cores busy, all threads) go
    into ``spec["cores_busy"]``."""
    w = spec["warmup"]
    for rows in batches[:w]:
        run_one(rows)
    t, c = time.perf_counter(), time.process_time()
    for rows in batches[w:]:
        run_one(rows)
    dt = time.perf_counter() - t
    spec["cores_busy"] = (time.process_time() - c) / dt
    return dt


def calibrate_gpu_sleep(torch, ms: float):
    """Cycles of torch.cuda._sleep that last ``ms`` on this GPU, and the measured step (ms)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 2_000_000
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    for _ in range(3):
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        cycles = max(1000, int(cycles * ms / max(1e-3, start.elapsed_time(end))))
    times = []
    for _ in range(5):
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return cycles, statistics.median(times)


def worker(spec) -> dict:
    import numpy as np
    import slidestream

    row = spec["row"]
    kind = spec["kind"]
    paths = spec["slides"] if not spec.get("one_slide") else spec["slides"][:1]
    n_total = spec["warmup"] + spec["batches"]
    size = spec["size"]
    res = {"row": row, "slides": len(paths), "batch": spec["batch"], "batches": spec["batches"], "warmup": spec["warmup"], "size": size}

    if kind in ("rp-device", "rp-cpu", "per-slide-device", "batch-device"):
        device = None if kind == "rp-cpu" else "cuda"
        if device:
            need_gpu()
        slides = [slidestream.Slide(p) for p in paths]
        if device:
            warm_engine(slides, res)
        if kind == "batch-device":
            return worker_big_batch(spec, res, slides)
        batches = make_rows(spec, len(slides), n_total, [s.dimensions for s in slides])
        if kind == "per-slide-device":

            def one(rows):
                for i in np.unique(rows[:, 0]):
                    sel = rows[:, 0] == i
                    slides[int(i)].read_regions(rows[sel, 2:], 0, (size, size), device="cuda")
        else:

            def one(rows):
                slidestream.read_patches(slides, rows, (size, size), device=device)

        dt = timed_batches(spec, one, batches)
    elif kind in ("loader-device", "loader-cpu"):
        dt = worker_loader(spec, res, paths, n_total)
    elif kind in ("dataloader-device", "dataloader-cpu"):
        dt = worker_dataloader(spec, res, paths, n_total)
    elif kind in ("cucim-cpu", "cucim-cuda"):
        dt = worker_cucim(spec, res, paths, n_total)
    elif kind == "openslide":
        dt = worker_openslide(spec, res, paths, n_total)
    elif kind == "first-read":
        return worker_first_read(spec, res)
    else:
        raise ValueError(f"unknown row kind {kind}")
    res["seconds"] = dt
    if "cores_busy" in spec:
        res["cores_busy"] = round(spec["cores_busy"], 2)
    res["patches_per_s"] = spec["batches"] * spec["batch"] / dt
    return res


def worker_big_batch(spec, res, slides):
    import slidestream

    n = spec["big_batch"]
    size = spec["size"]
    res["slides"] = 1
    big = dict(spec, batch=n)
    # Engine start and memory pool warm-up (not timed) on another slide file when there is one,
    # so that the cold row's drop of slide 0's pages stays in effect.
    other = slides[-1]
    res["warmup_slide"] = "another slide file" if len(slides) > 1 else "the same slide file (only one given)"
    warm_rows = make_rows(dict(big, seed=spec["seed"] + 1), 1, 1, [other.dimensions])[0]
    slidestream.read_patches([other], warm_rows, (size, size), device="cuda")
    rows = make_rows(big, 1, 1, [slides[0].dimensions])[0]
    slidestream.gpu_clear_cache()
    fresh = slidestream.Slide(slides[0].path, cache_bytes=4 << 30)  # a cold host tile cache too
    t = time.perf_counter()
    out = slidestream.read_patches([fresh], rows, (size, size), device="cuda")
    dt = time.perf_counter() - t
    assert tuple(out.shape) == (n, size, size, 3)
    res.update(batch=n, batches=1, warmup=0, slides=1, seconds=dt, patches_per_s=n / dt, page_cache=spec.get("page_cache"))
    try:
        res["gpu_stats"] = {k: v for k, v in slidestream.gpu_stats().items() if isinstance(v, (int, float, str))}
    except Exception:  # noqa: BLE001
        pass
    return res


def worker_loader(spec, res, paths, n_total):
    import slidestream

    device = "cuda" if spec["kind"] == "loader-device" else None
    step_ms = spec.get("step_ms") or 0.0
    slides = [slidestream.Slide(p) for p in paths]
    batches = make_rows(spec, len(slides), n_total, [s.dimensions for s in slides])

    class Replay:  # the row's seeded batches, as a random sampler
        def __init__(self):
            self.k = 0

        def sample(self, n):
            rows = batches[self.k]
            self.k += 1
            return rows

    size = (spec["size"], spec["size"])
    if device:
        need_gpu()
        torch = need_torch(cuda=True)
        from slidestream.torch import PatchLoader

        warm_engine(slides, res)

        loader = PatchLoader(slides, Replay(), size, batch_size=spec["batch"], num_batches=n_total, device=device, prefetch=spec["prefetch"], readers=spec.get("readers", 1))
        step = None
        if step_ms:
            cycles, measured = calibrate_gpu_sleep(torch, step_ms)
            res["step_ms_measured"] = measured
            res["step"] = f"torch.cuda._sleep({cycles}) + x.sum() on the consumer's stream, then that stream's event waited for"

            def step(x):
                torch.cuda._sleep(cycles)
                x.sum()
                ev = torch.cuda.Event()
                ev.record()
                ev.synchronize()
    else:
        loader = slidestream.PatchBatches(slides, Replay(), size, batch_size=spec["batch"], num_batches=n_total, prefetch=spec["prefetch"], readers=spec.get("readers", 1))
        step = None
        if step_ms:
            res["step"] = f"time.sleep({step_ms / 1000})"

            def step(x):
                time.sleep(step_ms / 1000)

    t = c = None
    k = 0
    for x, meta in loader:
        if k == spec["warmup"]:
            t, c = time.perf_counter(), time.process_time()
        if step is not None:
            step(x)
        del x
        k += 1
    dt = time.perf_counter() - t
    # Host cores busy over the timed batches (all of the process's threads: readers, decoders).
    spec["cores_busy"] = (time.process_time() - c) / dt
    loader.close()
    res["prefetch"] = spec["prefetch"]
    if step_ms:
        res["step_ms"] = step_ms
    return dt


def worker_dataloader(spec, res, paths, n_total):
    import numpy as np
    import slidestream

    device = spec["kind"] == "dataloader-device"
    if device:
        need_gpu()
    torch = need_torch(cuda=device)
    from slidestream.torch import PatchDataset
    from torch.utils.data import DataLoader

    with_dims = [slidestream.Slide(p) for p in paths]
    batches = make_rows(spec, len(paths), n_total, [s.dimensions for s in with_dims])
    for s in with_dims:
        s.close()
    rows = np.concatenate(batches)
    size = spec["size"]
    if device:
        with slidestream.Slide(paths[0]) as first:
            warm_engine([first], res)
        ds = PatchDataset(list(paths), rows, size, device="cuda")
        dl = DataLoader(ds, batch_size=spec["batch"], shuffle=False, num_workers=0)
        move = None
    else:
        workers = spec["workers"]
        ds = PatchDataset(list(paths), rows, size)
        dl = DataLoader(ds, batch_size=spec["batch"], shuffle=False, num_workers=workers)
        res["workers"] = workers
        move = torch.cuda.is_available()
        res["to_cuda"] = bool(move)
    t = None
    for k, x in enumerate(dl):
        if k == spec["warmup"]:
            t = time.perf_counter()
        if move:
            x = x.cuda()
            torch.cuda.current_stream().synchronize()
        del x
    if device:
        torch.cuda.synchronize()
    return time.perf_counter() - t


def worker_cucim(spec, res, paths, n_total):
    compare = load_compare()
    key = spec["kind"]
    if key == "cucim-cuda":
        need_gpu()
    try:
        a = compare.make_adapter(key)
    except Exception as e:  # noqa: BLE001
        raise Skip(f"cuCIM: {type(e).__name__}: {e}") from None
    import numpy as np

    handles = [a.open(p) for p in paths]
    dims = [tuple(a.levels(h)[0]) for h in handles]
    batches = make_rows(spec, len(paths), n_total, dims)
    size = spec["size"]
    threads = spec["threads"]
    res["version"] = a.version

    def one(rows):
        outs = []
        for i in np.unique(rows[:, 0]):
            sel = rows[:, 0] == i
            outs.append(a.batch(handles[int(i)], a.batch_locs(np.ascontiguousarray(rows[sel, 2:])), 0, size, size, threads))
        if a.sync:
            compare._cuda_sync()
        return outs

    return timed_batches(spec, one, batches)


def worker_openslide(spec, res, paths, n_total):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    try:
        import openslide
    except ImportError as e:
        raise Skip(f"openslide-python: {e}") from None
    res["version"] = f"{openslide.__library_version__} (openslide-python {openslide.__version__})"
    dims = []
    for p in paths:
        with openslide.OpenSlide(p) as s:
            dims.append(s.dimensions)
    batches = make_rows(spec, len(paths), n_total, dims)
    size = spec["size"]
    threads = spec["threads"]
    local = threading.local()

    def handle(i):
        hs = getattr(local, "handles", None)
        if hs is None:
            hs = local.handles = {}
        h = hs.get(i)
        if h is None:
            h = hs[i] = openslide.OpenSlide(paths[i])
        return h

    pool = ThreadPoolExecutor(threads)

    def one(rows):
        out = np.empty((rows.shape[0], size, size, 3), np.uint8)

        def part(ks):
            for k in ks:
                i, _, x, y = (int(v) for v in rows[k])
                out[k] = np.asarray(handle(i).read_region((x, y), 0, (size, size)))[..., :3]

        list(pool.map(part, np.array_split(np.arange(rows.shape[0]), threads)))
        return out

    res["threads"] = threads
    try:
        return timed_batches(spec, one, batches)
    finally:
        pool.shutdown()


FIRST_READ = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import slidestream
t1 = time.perf_counter()
s = slidestream.Slide(sys.argv[1])
t2 = time.perf_counter()
rows = np.array(json.loads(sys.argv[2]), dtype=np.int64)
size = int(sys.argv[3])
out = slidestream.read_patches([s], rows, (size, size), device="cuda")
t3 = time.perf_counter()
out2 = slidestream.read_patches([s], rows + np.array([0, 0, 240, 240]), (size, size), device="cuda")
t4 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_read_s": t3 - t2, "second_read_s": t4 - t3, "shape": list(out.shape),
                  "warmup": slidestream.gpu_stats().get("warmup")}))
"""


def worker_first_read(spec, res):
    need_gpu()
    import slidestream

    with slidestream.Slide(spec["slides"][0]) as s:
        dims = [s.dimensions]
    rows = make_rows(spec, 1, 1, dims)[0]
    env = dict(os.environ, SLIDESTREAM_GPU_TRACE="1")
    r = subprocess.run([sys.executable, "-c", FIRST_READ, spec["slides"][0], json.dumps(rows.tolist()), str(spec["size"])],
                       capture_output=True, text=True, env=env, timeout=spec["row_timeout"])
    if spec.get("out"):
        path = os.path.join(spec["out"], "training_loop-first-read.stderr.txt")
        with open(path, "w") as f:
            f.write(r.stderr)
        res["stderr_file"] = path
    if r.returncode != 0:
        raise RuntimeError(f"first-read process exited {r.returncode}: {r.stderr.strip().splitlines()[-1:] }")
    data = json.loads(r.stdout.strip().splitlines()[-1])
    res.update(data)
    res.update(batches=1, warmup=0, slides=1, seconds=data["first_read_s"], patches_per_s=spec["batch"] / data["first_read_s"])
    return res


def worker_main(spec_json: str) -> int:
    spec = json.loads(spec_json)
    try:
        res = worker(spec)
        res["status"] = "ok"
    except Skip as e:
        res = {"row": spec["row"], "status": "skipped", "reason": str(e)}
    print(RESULT + json.dumps(res), flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------------------------


def row_specs(n: int):
    """(name, kind, extra spec) of every row, in report order."""
    N = str(n)
    return [
        ("rp-device-1", "rp-device", {"one_slide": True}),
        (f"rp-device-{N}", "rp-device", {}),
        (f"rp-cpu-{N}", "rp-cpu", {}),
        (f"per-slide-device-{N}", "per-slide-device", {}),
        (f"loader-device-{N}", "loader-device", {}),
        (f"loader-device-{N}-step", "loader-device", {"step": True}),
        (f"loader-device-{N}-readers2", "loader-device", {"readers": 2}),
        (f"loader-device-{N}-step-readers2", "loader-device", {"step": True, "readers": 2}),
        (f"loader-device-{N}-readers3", "loader-device", {"readers": 3}),
        (f"loader-cpu-{N}", "loader-cpu", {}),
        (f"loader-cpu-{N}-step", "loader-cpu", {"step": True}),
        (f"dataloader-device-{N}", "dataloader-device", {}),
        (f"dataloader-cpu-{N}", "dataloader-cpu", {}),
        ("batch4096-device", "batch-device", {"page_cache": "warm"}),
        ("batch4096-device-cold", "batch-device", {"page_cache": "cold"}),
        ("first-read", "first-read", {"one_slide": True}),
        # the peers last: a hang there (cuCIM's device path has hung before) costs only them
        (f"openslide-{N}", "openslide", {}),
        (f"cucim-cpu-{N}", "cucim-cpu", {}),
        (f"cucim-cuda-{N}", "cucim-cuda", {}),
    ]


#: Row kinds that need a GPU (skipped by the parent, before any page-cache drop, without one).
GPU_KINDS = {"rp-device", "per-slide-device", "loader-device", "dataloader-device", "cucim-cuda", "batch-device", "first-read"}


def gpu_reason():
    """None when slidestream sees a usable CUDA device, else why not."""
    try:
        import slidestream
    except ImportError as e:
        return f"slidestream does not import: {e}"
    if not slidestream.cuda_available():
        return "no usable CUDA device (slidestream.cuda_available() is False)"
    return None


def drop_page_cache(paths) -> str:
    """Evict the slides' pages: drop_caches where permitted, else posix_fadvise per file."""
    try:
        subprocess.run(["sync"], check=False)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches (sync; echo 3 > /proc/sys/vm/drop_caches)"
    except OSError as e:
        why = f"{type(e).__name__}: {e.strerror or e}"
    if not hasattr(os, "posix_fadvise"):
        return f"none (drop_caches refused: {why}; no posix_fadvise)"
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd) if hasattr(os, "fdatasync") else None
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return f"posix_fadvise(POSIX_FADV_DONTNEED) per slide file (drop_caches refused: {why}; best effort)"


def warm_page_cache(paths) -> None:
    for p in paths:
        with open(p, "rb") as f:
            while f.read(16 << 20):
                pass


def run_row(args, name, kind, extra, deadline) -> dict:
    spec = {
        "row": name, "kind": kind, "slides": args.slide_paths, "batch": args.batch, "batches": args.batches,
        "warmup": args.warmup, "size": args.size, "seed": args.seed, "threads": args.threads, "workers": args.workers,
        "prefetch": args.prefetch, "big_batch": args.big_batch, "row_timeout": args.row_timeout, "out": args.out,
        "step_ms": args.step_ms if extra.get("step") else 0.0,
    }
    spec.update({k: v for k, v in extra.items() if k != "step"})
    if args.gpu_reason and kind in GPU_KINDS:
        return {"row": name, "status": "skipped", "reason": args.gpu_reason}
    env = dict(os.environ)
    if kind == "dataloader-cpu":
        env["RAYON_NUM_THREADS"] = "1"  # workers × decode threads ≈ cores (docs/python.md)
    if kind == "batch-device":
        files = args.slide_paths[:1]
        if extra["page_cache"] == "cold":
            spec["page_cache"] = drop_page_cache(files)
        else:
            warm_page_cache(files)
            spec["page_cache"] = "warm (whole file read first)"
    timeout = min(args.row_timeout, max(1.0, deadline - time.monotonic()))
    if deadline - time.monotonic() < 5:
        return {"row": name, "status": "skipped", "reason": "--budget-s spent"}
    t = time.monotonic()
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--_worker", json.dumps(spec)], capture_output=True, text=True,
                           env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-500:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        return {"row": name, "status": "failed", "reason": f"timed out after {timeout:.0f} s", "stderr_tail": tail}
    for line in r.stdout.splitlines():
        if line.startswith(RESULT):
            res = json.loads(line[len(RESULT):])
            res["wall_s"] = time.monotonic() - t
            return res
    err = r.stderr.strip().splitlines()
    return {"row": name, "status": "failed", "reason": f"exit {r.returncode}: {err[-1] if err else 'no output'}", "stderr_tail": "\n".join(err[-15:])}


def derive(results):
    """The step rows' ratio: rate with the step ÷ min(no-step rate, batch / step)."""
    by = {r["row"]: r for r in results}
    for r in results:
        if r.get("status") == "ok" and r["row"].endswith("-step"):
            base = by.get(r["row"][: -len("-step")])
            if base and base.get("status") == "ok":
                step_ms = r.get("step_ms_measured") or r.get("step_ms")
                ideal = min(base["patches_per_s"], r["batch"] / (step_ms / 1000.0))
                r["no_step_patches_per_s"] = base["patches_per_s"]
                r["ideal_patches_per_s"] = ideal
                r["overlap_ratio"] = r["patches_per_s"] / ideal


def markdown(results, args) -> str:
    lines = [
        f"Training-loop benchmark: {len(args.slide_paths)} slide(s), batches of {args.batch} random {args.size}² level-0 patches, "
        f"{args.warmup} warm-up + {args.batches} timed batches per row (fresh interpreter per row).",
        "",
        "| row | status | patches/s | batches × batch | notes |",
        "|---|---|---:|---|---|",
    ]
    for r in results:
        if r.get("status") != "ok":
            lines.append(f"| {r['row']} | {r.get('status')} | | | {r.get('reason', '')} |")
            continue
        notes = []
        if "overlap_ratio" in r:
            notes.append(f"ratio {r['overlap_ratio']:.2f} of min(no-step {r['no_step_patches_per_s']:,.0f}, batch/step {r['batch'] / ((r.get('step_ms_measured') or r['step_ms']) / 1000):,.0f})")
        if r.get("step_ms_measured"):
            notes.append(f"step {r['step_ms_measured']:.2f} ms")
        for k in ("cores_busy", "page_cache", "note", "version", "workers", "threads"):
            if r.get(k):
                notes.append(f"{k}: {r[k]}")
        if r["row"] == "first-read":
            notes.append(f"import {r['import_s']:.2f} s, open {r['open_s'] * 1000:.1f} ms, first read {r['first_read_s']:.2f} s")
        lines.append(f"| {r['row']} | ok | {r['patches_per_s']:,.0f} | {r['batches']} × {r['batch']} | {'; '.join(notes)} |")
    return "\n".join(lines) + "\n"


def prepare_slides(args):
    if args.quick and not args.slides and not args.make:
        src = os.path.join(REPO, "assets", "CMU-1-Small-Region.svs")
        if not os.path.exists(src):
            src = os.path.join(os.path.dirname(REPO), "shared", "testdata", "CMU-1-Small-Region.svs")
        args.make, args.from_, args.dir = 2, src, args.dir or tempfile.mkdtemp(prefix="training_loop-")
    if args.make:
        if not args.from_:
            sys.exit("--make needs --from SLIDE")
        d = args.dir or tempfile.mkdtemp(prefix="training_loop-")
        os.makedirs(d, exist_ok=True)
        ext = os.path.splitext(args.from_)[1] or ".svs"
        paths = []
        for i in range(args.make):
            p = os.path.join(d, f"slide-{i}{ext}")
            if not (os.path.exists(p) and os.path.getsize(p) == os.path.getsize(args.from_)):
                log(f"copying {args.from_} -> {p}")
                shutil.copyfile(args.from_, p)
            paths.append(p)
        return paths
    if not args.slides:
        sys.exit("give --slides PATH... or --make N --from SLIDE [--dir DIR] (or --quick)")
    return list(args.slides)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--_worker":
        return worker_main(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--slides", nargs="+", help="slide files (the N slides of the -N rows; slide 0 for the 1-slide rows)")
    ap.add_argument("--make", type=int, help="make N copies of --from in --dir and use them")
    ap.add_argument("--from", dest="from_", help="the slide to copy (--make)")
    ap.add_argument("--dir", help="folder of the copies (--make; default a new temporary folder)")
    ap.add_argument("--batches", type=int, default=40, help="timed batches per row (default 40)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed batches first (default 5)")
    ap.add_argument("--batch", type=int, default=256, help="patches per batch (default 256)")
    ap.add_argument("--size", type=int, default=256, help="patch edge in level-0 pixels (default 256)")
    ap.add_argument("--big-batch", type=int, default=4096, help="patches of the batch4096 rows (default 4096)")
    ap.add_argument("--threads", type=int, default=16, help="OpenSlide threads and cuCIM num_workers (default 16)")
    ap.add_argument("--workers", type=int, default=15, help="DataLoader workers of dataloader-cpu (default 15)")
    ap.add_argument("--prefetch", type=int, default=2, help="the loaders' prefetch (default 2)")
    ap.add_argument("--step-ms", type=float, default=10.0, help="simulated model step of the -step rows (default 10 ms)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="+", metavar="ROW", help="run only these rows (names or prefixes, e.g. rp-cpu loader-)")
    ap.add_argument("--row-timeout", type=float, default=180.0, help="seconds per row before it is killed (default 180)")
    ap.add_argument("--budget-s", type=float, default=540.0,
                    help="no row starts after this many seconds from the start, and a running one is stopped then (default 540)")
    ap.add_argument("--out", help="folder for training_loop.jsonl / .md and the first read's stderr")
    ap.add_argument("--quick", action="store_true",
                    help="small run (2 copies of CMU-1-Small-Region.svs, batches of 32 64² patches, 3+1 batches, 2 threads): "
                         "runs on a CPU-only machine")
    args = ap.parse_args()
    deadline = time.monotonic() + args.budget_s  # the copies (--make) count too
    if args.quick:
        for k, v in (("batches", 3), ("warmup", 1), ("batch", 32), ("size", 64), ("big_batch", 128), ("threads", 2), ("workers", 2),
                     ("row_timeout", 120.0)):
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    args.slide_paths = [os.path.abspath(p) for p in prepare_slides(args)]
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    args.gpu_reason = gpu_reason()
    rows = row_specs(len(args.slide_paths))
    if args.only:
        rows = [r for r in rows if any(r[0] == o or r[0].startswith(o) for o in args.only)]
        if not rows:
            sys.exit(f"--only {args.only}: no such row (rows: {', '.join(r[0] for r in row_specs(len(args.slide_paths)))})")
    # Every row but the cold one reads with the slides' pages in memory: warm them now and again
    # after a page-cache drop.
    log(f"reading {len(args.slide_paths)} slide file(s) once (page cache warm)")
    warm_page_cache(args.slide_paths)
    results = []
    for name, kind, extra in rows:
        log(f"== {name}")
        res = run_row(args, name, kind, extra, deadline)
        results.append(res)
        if extra.get("page_cache") == "cold" and res.get("status") != "skipped":
            warm_page_cache(args.slide_paths)
        msg = f"{res['patches_per_s']:,.0f} patches/s" if res.get("status") == "ok" else f"{res.get('status')}: {res.get('reason')}"
        log(f"   {msg}")
    derive(results)
    for r in results:
        print(json.dumps(r), flush=True)
    md = markdown(results, args)
    print()
    print(md)
    if args.out:
        with open(os.path.join(args.out, "training_loop.jsonl"), "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
        with open(os.path.join(args.out, "training_loop.md"), "w") as f:
            f.write(md)
    return 1 if any(r.get("status") == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
