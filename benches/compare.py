#!/usr/bin/env python3
"""Side-by-side tile-read benchmark: slidestream and every other slide reader that imports.

One command runs the same seeded workloads through

* ``slidestream``        slidestream's Python API (``slidestream.Slide``), default decode pool
                         (``RAYON_NUM_THREADS`` unset: all cores);
* ``slidestream-1dt``    the same with one decode thread (``RAYON_NUM_THREADS=1``);
* ``slidestream-cli``    the Rust CLI (``slidestream bench``: ``Slide::read_region_into`` in a
                         loop, one caller thread, its own timer); 1-thread random workloads only;
* ``slidestream-cli-cuda`` with ``--cuda-cli PATH`` (a ``--features cuda`` build of the CLI):
                         ``slidestream gpu-region --patches N``, random 256² level-0 patches
                         file → device, one region per call; rand256-1t only, and with the
                         CLI's own seeded locations (not the shared ones): an extra row;
* ``slidestream-cuda``   slidestream's CUDA path from Python, when the package has one
                         (``slidestream.cuda_available()`` returning True; older builds lack the
                         function: reported unavailable). Per-patch workloads call
                         ``Slide.read_region(..., device="cuda")`` (a ``slidestream.DeviceArray``,
                         data ready on return), batch workloads one ``Slide.read_regions(...,
                         device="cuda")`` per batch, ``scan-l0`` ``read_regions`` over the
                         tile-aligned locations in chunks of ``--scan-batch`` tiles. Every run
                         records ``slidestream.gpu_stats()`` (I/O path, read amplification,
                         decodes per backend, device tile cache) before and after the timed reads.
* ``openslide``          openslide-python + openslide-bin;
* ``tiffslide``, ``fastslide``;
* ``cucim-cpu``, ``cucim-cuda``  cuCIM's ``CuImage.read_region(..., device="cpu"|"cuda")``.

Readers that do not import (or have no CUDA device) are listed as unavailable with the reason.

Method. Every measurement runs in a fresh interpreter (so every reader starts with empty
in-process caches, with its default cache settings), opens the slide, then times only the reads;
every read ends with a numpy uint8 array (OpenSlide's PIL image is converted with
``np.asarray``; the CUDA rows' results stay on the device: slidestream's are ready when the
call returns, cuCIM's are followed by a device synchronize (CuPy or PyTorch) before the timer
stops). Device tile caches are per process, so cold runs of the CUDA rows start empty too.
For each workload the readers alternate within a round (the order is rotated every round), and
the median of the rounds is reported with patches/s, MP/s and the ratio slidestream / reader
(slidestream = the Python API row). The 1-minute load average is recorded before every measurement.

Workloads (``--workloads``, comma-separated; level-0 locations come from one seeded generator
per workload, identical for every reader):

  rand256-1t, rand512-1t   random 256² / 512² level-0 patches, one caller thread
  rand256-mt, rand512-mt   the same on a pool of ``--threads`` caller threads (default: all
                           cores), patches split into contiguous chunks. Thread-safe readers
                           (slidestream, OpenSlide, FastSlide) share one handle; tiffslide and
                           cuCIM get one handle per thread (``--mt-handles`` changes that)
  scan-l0                  sequential scan (row-major) of level-0 tiles, one read per tile of the
                           slide's tile size, one caller thread; capped at ``--scan-tiles``
  rand256-l1, rand256-l2   random 256² patches of levels 1 and 2, one caller thread
  batch1024                ``--batch`` random 256² level-0 patches into one (n, 256, 256, 3)
                           array: ``slidestream.Slide.read_regions`` and cuCIM's batched
                           ``read_region(locations, batch_size=..., num_workers=--threads)``;
                           the others loop and copy the RGB channels into a preallocated array
  batch4096                the same with ``--batch-large`` patches (default 4096: the GPU
                           target, "4096 random 256² level-0 patches, file → device tensor,
                           ≥ 25,000 patches/s")

MP/s is reported for every row (in the summary table for ``scan-l0``: the GPU scan target is
≥ 3 GP/s); a "GPU targets" section compares ``slidestream-cuda`` with both targets.

Failures. Every measurement (and probe) runs in its own process group with a timeout
(``--measure-timeout-s``, default 120 s; ``--probe-timeout``): on expiry the whole group is
killed with SIGKILL and the run is recorded as ``timeout`` ("timed out after 120 s"); a worker
killed by a signal or exiting without a result is recorded as ``crashed`` (signal or exit
status and the last line of its stderr, e.g. glibc's "free(): double free detected"). Either way
the run goes on with the next reader and workload. After a timeout the reader's remaining rounds
of that workload are skipped, and a reader that timed out ``--max-timeouts`` times (default 2)
is dropped for the rest of the run; the report lists every failed run.

Time budget (``--budget-s B``): no measurement or probe starts after B seconds from the start,
and each one's timeout is capped at the time left, so the measuring ends by B whatever hangs
(a run stopped that way is recorded as ``budget``; the report then takes a few seconds to
write). Workloads and runs not started are marked as skipped in the report.

Page cache (``--cache warm,cold``): warm = the file's pages are in memory (a warm-up read of the
whole file first); cold (for ``--cold-workloads``) = before every measurement
``echo 1 > /proc/sys/vm/drop_caches`` (needs root); where that is refused, every cold
measurement reads a fresh copy of the file (written, fsync'ed, then evicted with
posix_fadvise(DONTNEED), best effort), and the report says so. ``--warm-workloads`` limits
the warm runs to some workloads (the others run cold only).

Levels are matched by dimensions: a reader that does not see a level with slidestream's level-k
dimensions (tiffslide treats the second IFD of an SVS as its thumbnail) is n/a there.

Inputs: the SLIDE arguments (default ``/tmp/big.svs``, made with ``make_big_svs.py`` when
missing: 48000² level 0, real scanner JPEG tiles) get every workload; every file of
``--testdata`` (default ``../shared/testdata``) that every available reader opens and reads gets
``rand256-1t`` (patch edge clamped to the image) and ``scan-l0``.

Output (``--out``, default ``docs/benchmarks``): ``compare-NAME.md`` (markdown tables),
``compare-NAME.json`` (every run), and PNG bar charts ``compare-NAME-<slide>-rates.png`` and
``-ratios.png`` (matplotlib; skipped with a note when it is missing). The markdown also goes to
stdout; progress goes to stderr.

examples:
  compare.py                                   # full run: /tmp/big.svs warm + cold, testdata
  compare.py --quick                           # minutes: 100 patches, 1 round, warm only
  compare.py --readers slidestream,slidestream-cuda,cucim-cuda --workloads batch4096,scan-l0 \
      --measure-timeout-s 60 --max-timeouts 1 --budget-s 480
  compare.py SLIDE --workloads rand256-1t --readers slidestream,openslide,fastslide --rounds 5
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

ALL_WORKLOADS = ["rand256-1t", "rand512-1t", "rand256-mt", "rand512-mt", "scan-l0", "rand256-l1", "rand256-l2", "batch1024", "batch4096"]
BATCH_WORKLOADS = ("batch1024", "batch4096")
ALL_READERS = ["slidestream", "slidestream-1dt", "slidestream-cli", "slidestream-cuda", "slidestream-cli-cuda", "openslide", "tiffslide", "fastslide", "cucim-cpu", "cucim-cuda"]
REF = "slidestream"
# readers whose handle may be shared by threads (documented thread-safe; reads release the GIL)
THREAD_SAFE = {"slidestream", "slidestream-1dt", "slidestream-cuda", "openslide", "fastslide"}
SLIDE_EXT = (".svs", ".tif", ".tiff", ".ndpi", ".scn", ".bif", ".vms", ".mrxs")


# --------------------------------------------------------------------------------------------
# worker side: runs in a fresh interpreter, one reader, one measurement
# --------------------------------------------------------------------------------------------

_SYNC: list = []


def _prepare_cuda_sync():
    """Import a device-synchronize function (CuPy, else PyTorch) before any timer starts."""
    for mod, fn in (("cupy", lambda m: m.cuda.runtime.deviceSynchronize()), ("torch", lambda m: m.cuda.synchronize())):
        try:
            m = __import__(mod)
            fn(m)
            _SYNC.append(lambda m=m, fn=fn: fn(m))
            return
        except Exception:  # noqa: BLE001
            continue


def _cuda_sync():
    for f in _SYNC[:1]:
        f()


def _to_host(arr):
    """A host numpy copy of a device array (CuPy, else PyTorch via DLPack), or None."""
    import numpy as np

    if isinstance(arr, np.ndarray):
        return arr
    try:
        import cupy

        return cupy.asnumpy(cupy.asarray(arr))
    except Exception:  # noqa: BLE001
        pass
    try:
        import torch

        return torch.from_dlpack(arr).cpu().numpy()
    except Exception:  # noqa: BLE001
        pass
    try:  # a device array with its own host copy (__array__)
        host = np.asarray(arr)
        return host if host.dtype == np.uint8 and host.ndim == 3 else None
    except Exception:  # noqa: BLE001
        return None


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    try:
        return _jsonable(x.item())  # numpy scalars
    except Exception:  # noqa: BLE001
        return str(x)


# gpu_stats() entries that are levels, not counters: taken as they are after the reads
STATS_GAUGES = {"hardware_engines", "cache_entries", "cache_resident_bytes", "cache_capacity_bytes", "read_amplification", "device",
                "entries", "resident_bytes", "capacity_bytes"}


def stats_delta(before, after):
    """Counters of `after` minus `before` (numbers but STATS_GAUGES; nested dicts recursively; the
    rest from `after`), with read_amplification recomputed from the byte deltas."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return after
    out = {}
    for k, v in after.items():
        b = before.get(k)
        if isinstance(v, dict):
            out[k] = stats_delta(b if isinstance(b, dict) else {}, v)
        elif (k not in STATS_GAUGES and isinstance(v, (int, float)) and not isinstance(v, bool)
              and isinstance(b, (int, float)) and not isinstance(b, bool)):
            out[k] = v - b
        else:
            out[k] = v
    if "tile_bytes" in out:
        read = sum(out.get(k) or 0 for k in ("posix_bytes", "cufile_gds_bytes", "cufile_compat_bytes"))
        out["read_amplification"] = read / out["tile_bytes"] if out["tile_bytes"] else 0.0
    return out


def _test_fault(key, stage):
    """Test hook: COMPARE_TEST_FAULT="reader=hang|crash[,reader=...]" makes that reader's
    measurement (not its probe) hang (after starting a `sleep` child in its process group, whose
    pid goes to $COMPARE_TEST_FAULT_PIDFILE when set) or abort. Used by the smoke tests only."""
    spec = os.environ.get("COMPARE_TEST_FAULT")
    if not spec or stage != "measure":
        return
    for item in spec.split(","):
        r, _, what = item.partition("=")
        if r.strip() != key:
            continue
        what = what.strip()
        if what == "hang":
            child = subprocess.Popen(["sleep", "3600"])
            pidfile = os.environ.get("COMPARE_TEST_FAULT_PIDFILE")
            if pidfile:
                with open(pidfile, "a") as f:
                    f.write(f"{child.pid}\n")
            while True:
                time.sleep(3600)
        elif what == "crash":
            sys.stderr.write("compare.py test fault: aborting\n")
            sys.stderr.flush()
            os.abort()


class _Adapter:
    """One reader: open, level dimensions, read one region, optional batch API."""

    batch = None
    device = "cpu"
    sync = False  # results need a device synchronize before the timer stops
    scan_batched = False  # scan-l0 through the batch API (tile-aligned locations, chunks of --scan-batch)
    stats = None  # callable returning a dict of counters (slidestream.gpu_stats)

    @staticmethod
    def batch_locs(locs0):
        return locs0

    def close(self, h):
        try:
            h.close()
        except Exception:  # noqa: BLE001
            pass


def make_adapter(key):
    import numpy as np

    a = _Adapter()
    a.key = key
    if key in ("slidestream", "slidestream-1dt", "slidestream-cuda"):
        import slidestream

        a.version = slidestream.__version__ if hasattr(slidestream, "__version__") else "?"
        a.open = lambda p: slidestream.Slide(p)
        a.levels = lambda h: [tuple(d) for d in h.level_dimensions]
        if key == "slidestream-cuda":
            hook = getattr(slidestream, "cuda_available", None)
            if not callable(hook):
                raise RuntimeError(f"slidestream {a.version} has no CUDA path in Python (no slidestream.cuda_available())")
            try:
                ok = bool(hook())
            except Exception as e:  # noqa: BLE001
                raise RuntimeError(f"slidestream.cuda_available() raised {type(e).__name__}: {e}") from None
            if not ok:
                raise RuntimeError(f"slidestream {a.version}: slidestream.cuda_available() is False (a build without CUDA, or no usable device)")
            a.device = "cuda"
            a.sync = False  # DeviceArray data are ready when read_region(s) returns
            a.scan_batched = True
            a.read = lambda h, x0, y0, lx, ly, lv, w, hh: h.read_region((x0, y0), lv, (w, hh), device="cuda")
            a.batch = lambda h, locs0, lv, w, hh, threads: h.read_regions(locs0, lv, (w, hh), device="cuda")
            gs = getattr(slidestream, "gpu_stats", None)
            if callable(gs):
                a.stats = lambda: _jsonable(dict(gs(0)))
        else:
            a.read = lambda h, x0, y0, lx, ly, lv, w, hh: h.read_region((x0, y0), lv, (w, hh))
            a.batch = lambda h, locs0, lv, w, hh, threads: h.read_regions(locs0, lv, (w, hh))
    elif key == "openslide":
        import openslide

        a.version = f"{openslide.__library_version__} (openslide-python {openslide.__version__})"
        a.open = lambda p: openslide.OpenSlide(p)
        a.levels = lambda h: [tuple(d) for d in h.level_dimensions]
        a.read = lambda h, x0, y0, lx, ly, lv, w, hh: np.asarray(h.read_region((x0, y0), lv, (w, hh)))
    elif key == "tiffslide":
        import tiffslide

        a.version = tiffslide.__version__
        a.open = lambda p: tiffslide.TiffSlide(p)
        a.levels = lambda h: [tuple(d) for d in h.level_dimensions]
        a.read = lambda h, x0, y0, lx, ly, lv, w, hh: h.read_region((x0, y0), lv, (w, hh), as_array=True)
    elif key == "fastslide":
        import fastslide

        a.version = fastslide.__version__
        a.open = lambda p: fastslide.FastSlide.from_file_path(p)
        a.levels = lambda h: [tuple(d) for d in h.level_dimensions]
        # FastSlide takes level-native coordinates.
        a.read = lambda h, x0, y0, lx, ly, lv, w, hh: h.read_region((lx, ly), lv, (w, hh)).numpy()
    elif key in ("cucim-cpu", "cucim-cuda"):
        import cucim
        from cucim import CuImage

        a.version = getattr(cucim, "__version__", "?")
        dev = "cuda" if key == "cucim-cuda" else "cpu"
        a.device = dev
        a.sync = dev == "cuda"
        a.open = lambda p: CuImage(p)
        a.levels = lambda h: [tuple(d) for d in h.resolutions["level_dimensions"]]
        if dev == "cpu":
            a.read = lambda h, x0, y0, lx, ly, lv, w, hh: np.asarray(h.read_region((x0, y0), (w, hh), lv))
        else:
            a.read = lambda h, x0, y0, lx, ly, lv, w, hh: h.read_region((x0, y0), (w, hh), lv, device="cuda")

        def cucim_batch(h, locs0, lv, w, hh, threads, _dev=dev):
            bs = int(os.environ.get("COMPARE_CUCIM_BATCH_SIZE", "0")) or len(locs0)
            it = h.read_region(locs0, (w, hh), lv, batch_size=bs, num_workers=threads, device=_dev)
            return [np.asarray(b) if _dev == "cpu" else b for b in it]

        a.batch = cucim_batch
        a.batch_locs = lambda locs0: locs0.tolist()  # cuCIM 26.10 rejects numpy int64 arrays here; lists work
        a.close = lambda h: None
    else:
        raise ValueError(f"unknown reader {key}")
    if a.sync:
        _prepare_cuda_sync()
    return a


def worker_probe(spec):
    """Open the file, list levels, read a centred sample of level 0; save it as .npy."""
    import numpy as np

    _test_fault(spec["reader"], "probe")
    a = make_adapter(spec["reader"])
    h = a.open(spec["path"])
    levels = a.levels(h)
    W, H = levels[0]
    s = max(1, min(64, W, H))
    x, y = (W - s) // 2, (H - s) // 2
    arr = a.read(h, x, y, x, y, 0, s, s)
    extra = {}
    if a.device == "cuda":
        if a.sync:
            _cuda_sync()
        # slidestream's device arrays are copied back (CuPy or PyTorch) for the pixel check;
        # cuCIM's stay on the device (no check)
        arr = _to_host(arr) if a.key == "slidestream-cuda" else None
        if arr is None and a.key == "slidestream-cuda":
            extra["sample_note"] = "no host copy of the device sample (CuPy, PyTorch, __array__): no pixel check"
    if arr is not None:
        arr = np.asarray(arr)
        if arr.ndim != 3 or arr.shape[:2] != (s, s):
            raise RuntimeError(f"sample read returned shape {arr.shape}, expected ({s}, {s}, 3|4)")
        np.save(spec["sample"], arr)
    if a.stats is not None:
        extra["gpu_stats"] = a.stats()
    a.close(h)
    return dict({"version": a.version, "levels": levels, "sample_shape": None if arr is None else list(arr.shape)}, **extra)


def worker_measure(spec):
    import numpy as np

    _test_fault(spec["reader"], "measure")
    a = make_adapter(spec["reader"])
    locs = np.load(spec["locs"])  # (n, 6): x0, y0, lx, ly, w, h
    lv, mode, threads = spec["level"], spec["mode"], spec["threads"]
    n = len(locs)
    pixels = int((locs[:, 4] * locs[:, 5]).sum())
    rows = [tuple(int(v) for v in r) for r in locs]
    read = a.read
    sync = _cuda_sync if a.sync else (lambda: None)

    def loop(h, part):
        for x0, y0, lx, ly, w, hh in part:
            read(h, x0, y0, lx, ly, lv, w, hh)

    def warm_up(h):
        # one 16² read at the level's origin before the timer (library and device initialisation)
        read(h, 0, 0, 0, 0, lv, 16, 16)
        sync()

    def finish(res, api):
        res.update(seconds=dt, n=n, pixels=pixels, api=api)
        if a.stats is not None:
            after = a.stats()
            res["gpu_stats"] = after
            res["gpu_stats_timed"] = stats_delta(before, after)
        return res

    before = None
    if mode in ("loop", "scan"):
        h = a.open(spec["path"])
        warm_up(h)
        api = "loop"
        chunks = None
        if mode == "scan" and a.scan_batched and a.batch is not None:
            # tile-aligned locations through the batch API: runs of equal size, chunks of --scan-batch
            cap = max(1, int(spec.get("scan_batch") or 1024))
            chunks, i = [], 0
            while i < n:
                j = i
                while j < n and j - i < cap and (rows[j][4], rows[j][5]) == (rows[i][4], rows[i][5]):
                    j += 1
                chunks.append((a.batch_locs(np.ascontiguousarray(locs[i:j, :2], dtype=np.int64)), rows[i][4], rows[i][5]))
                i = j
            api = "batch"
        before = a.stats() if a.stats is not None else None
        t0 = time.perf_counter()
        if chunks is not None:
            for locs0, w, hh in chunks:
                out = a.batch(h, locs0, lv, w, hh, threads)
                del out
        else:
            loop(h, rows)
        sync()
        dt = time.perf_counter() - t0
        res = finish({}, api)
        a.close(h)
        return res
    if mode == "mt":
        shared = spec["handles"] == "shared"
        handles = [a.open(spec["path"])] if shared else [a.open(spec["path"]) for _ in range(threads)]
        for h in handles:
            warm_up(h)
        parts = [rows[i * n // threads:(i + 1) * n // threads] for i in range(threads)]
        barrier = threading.Barrier(threads + 1)
        errors = []

        def run(i):
            barrier.wait()
            try:
                loop(handles[0 if shared else i], parts[i])
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for t in ts:
            t.start()
        before = a.stats() if a.stats is not None else None
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        sync()
        dt = time.perf_counter() - t0
        if errors:
            raise errors[0]
        res = finish({}, "mt")
        for h in handles:
            a.close(h)
        return res
    if mode == "batch":
        h = a.open(spec["path"])
        warm_up(h)
        w, hh = rows[0][4], rows[0][5]
        if a.batch is not None:
            locs0 = a.batch_locs(np.ascontiguousarray(locs[:, :2], dtype=np.int64))
            before = a.stats() if a.stats is not None else None
            t0 = time.perf_counter()
            out = a.batch(h, locs0, lv, w, hh, threads)
            sync()
            dt = time.perf_counter() - t0
            api = "batch"
        else:
            t0 = time.perf_counter()
            out = np.empty((n, hh, w, 3), np.uint8)
            for i, (x0, y0, lx, ly, _w, _h) in enumerate(rows):
                out[i] = read(h, x0, y0, lx, ly, lv, w, hh)[..., :3]
            dt = time.perf_counter() - t0
            api = "loop"
        del out
        res = finish({}, api)
        a.close(h)
        return res
    raise ValueError(mode)


def worker_main():
    spec = json.loads(sys.stdin.read())
    try:
        res = worker_probe(spec) if spec.get("probe") else worker_measure(spec)
    except Exception as e:  # noqa: BLE001
        res = {"error": " ".join(f"{type(e).__name__}: {e}".split())[:240], "status": "error"}
    sys.stdout.write("\n@@RESULT@@" + json.dumps(res, default=str) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (some readers' atexit hooks are slow)


# --------------------------------------------------------------------------------------------
# driver side
# --------------------------------------------------------------------------------------------

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def reader_env(key, args):
    env = dict(os.environ)
    env.pop("RAYON_NUM_THREADS", None)  # default decode pool (all cores) unless the row says otherwise
    if key == "slidestream-1dt":
        env["RAYON_NUM_THREADS"] = "1"
    if args.cucim_batch_size:
        env["COMPARE_CUCIM_BATCH_SIZE"] = str(args.cucim_batch_size)
    return env


def run_group(cmd, timeout, input_text=None, env=None):
    """Run `cmd` as the leader of a new session (its own process group) with a timeout; on expiry
    kill the whole group (the worker and whatever it started) with SIGKILL.
    Returns (returncode, stdout, stderr, timed_out)."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)

    def kill_group():
        # the leader is not reaped yet (communicate() did not return), so its pid still names our group
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    try:
        out, err = p.communicate(input_text, timeout=max(0.1, timeout))
        return p.returncode, out, err, False
    except subprocess.TimeoutExpired:
        kill_group()
    except BaseException:
        kill_group()
        raise
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # a process that left the group still holds the pipes
        out, err = "", "the worker's process group did not exit within 30 s of SIGKILL"
    return p.returncode, out or "", err or "", True


def time_left(args):
    """Seconds left of --budget-s, or None without a budget."""
    if not getattr(args, "budget_s", 0) or getattr(args, "t0", None) is None:
        return None
    return args.t0 + args.budget_s - time.time()


def budgeted_timeout(args, timeout):
    """(timeout, capped): the timeout of a run starting now, capped at the time left of the budget."""
    left = time_left(args)
    if left is None or left >= timeout:
        return float(timeout), False
    return max(0.0, left), True


def fmt_s(t):
    """Seconds for messages: whole numbers without decimals."""
    return f"{t:.0f}" if abs(t - round(t)) < 0.05 else f"{t:.1f}"


def failed_run(rc, out, err, timed_out, timeout, capped):
    """The record of a run that gave no result: status timeout, budget or crashed."""
    if timed_out:
        if capped:
            return {"error": f"stopped at the end of the time budget (--budget-s) after {fmt_s(timeout)} s", "status": "budget", "timeout_s": round(timeout, 1)}
        return {"error": f"timed out after {fmt_s(timeout)} s (process group killed)", "status": "timeout", "timeout_s": round(timeout, 1)}
    lines = [ln.strip() for ln in ((err or "") + "\n" + (out or "")).splitlines() if ln.strip() and "@@RESULT@@" not in ln]
    # prefer the C library's own words (double free, segfault messages) over Python's traceback tail
    tail = next((ln for ln in reversed((err or "").splitlines()) if ln.strip()), lines[-1] if lines else "")
    tail = " ".join(tail.split())[:200]
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return {"error": f"crashed: killed by {name}" + (f" ({tail})" if tail else ""), "status": "crashed", "returncode": rc, "signal": name}
    return {"error": f"crashed: exited with status {rc} without a result" + (f" ({tail})" if tail else ""), "status": "crashed", "returncode": rc}


def run_worker(key, spec, args, timeout):
    spec = dict(spec, reader=key)
    t, capped = budgeted_timeout(args, timeout)
    rc, out, err, timed_out = run_group([sys.executable, os.path.abspath(__file__), "--worker"], t, json.dumps(spec), reader_env(key, args))
    marker = out.rfind("@@RESULT@@")
    if marker >= 0:
        try:
            res = json.loads(out[marker + len("@@RESULT@@"):].strip().splitlines()[0])
            if timed_out:
                res["note"] = f"result written, but the worker did not exit within {t:.0f} s (killed)"
            return res
        except (ValueError, IndexError):
            pass
    return failed_run(rc, out, err, timed_out, t, capped)


def cli_info(binary, path):
    return json.loads(subprocess.check_output([binary, "info", path, "--json"], stderr=subprocess.DEVNULL, timeout=60))


def run_cli(binary, path, level, size, locs, args, threads=None):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(f"{int(r[0])},{int(r[1])}" for r in locs))
        name = f.name
    try:
        cmd = [binary] + (["--threads", str(threads)] if threads else []) + ["bench", path, "--level", str(level), "--size", str(size), "--locations", name, "--json"]
        t, capped = budgeted_timeout(args, args.measure_timeout_s)
        rc, out, err, timed_out = run_group(cmd, t)
        if timed_out or (rc is not None and rc < 0):
            return failed_run(rc, out, err, timed_out, t, capped)
        if rc != 0:
            return {"error": f"slidestream bench exited {rc}: {err.strip()[-200:]}", "status": "error"}
        res = json.loads(out)
        px = int(sum(int(r[4]) * int(r[5]) for r in locs))
        return {"seconds": res["seconds"], "n": len(locs), "pixels": px, "api": "loop"}
    finally:
        os.unlink(name)


def run_cuda_cli(binary, path, size, n, args):
    import re

    t, capped = budgeted_timeout(args, args.measure_timeout_s)
    rc, out, err, timed_out = run_group([binary, "gpu-region", path, "--size", str(size), "--patches", str(n)], t)
    if timed_out or (rc is not None and rc < 0):
        return failed_run(rc, out, err, timed_out, t, capped)
    m = re.search(r"one region per call: ([0-9.]+) patches/s", out)
    if rc != 0 or not m:
        return {"error": f"gpu-region exited {rc}: {(err or out).strip()[-200:]}", "status": "error"}
    rate = float(m.group(1))
    return {"seconds": n / rate, "n": n, "pixels": n * size * size, "api": "loop"}


class PageCache:
    """Warm: read the whole file once. Cold: drop the page cache (root) or use a fresh copy."""

    def __init__(self, allow_cold):
        self.method = None
        self.note = ""
        if not allow_cold:
            return
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1")
            self.method = "drop_caches"
            self.note = "cold = `sync; echo 1 > /proc/sys/vm/drop_caches` before every measurement"
        except OSError as e:
            self.method = "fresh-copy"
            self.note = (f"cold: dropping the page cache was refused ({e.strerror}); every cold measurement reads a fresh "
                         "copy of the file (written, fsync'ed, evicted with posix_fadvise(DONTNEED) — best effort, "
                         "the kernel may keep some pages)")

    @staticmethod
    def warm(path):
        with open(path, "rb", buffering=0) as f:
            while f.read(16 << 20):
                pass

    def cold(self, path):
        """Return the path to read for a cold measurement (and a cleanup callable)."""
        if self.method == "drop_caches":
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1")
            return path, lambda: None
        d = tempfile.mkdtemp(prefix="compare-cold-", dir=os.path.dirname(os.path.abspath(path)) if os.access(os.path.dirname(os.path.abspath(path)), os.W_OK) else None)
        dst = os.path.join(d, os.path.basename(path))
        shutil.copyfile(path, dst)
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        return dst, lambda: shutil.rmtree(d, ignore_errors=True)


def seeded_rng(seed, name):
    import numpy as np

    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def make_locs(wl, dims, downs, tile, args, clamp=False):
    """Rows (x0, y0, lx, ly, w, h) for a workload, or (None, reason)."""
    import numpy as np

    if wl == "scan-l0":
        (W, H), (tw, th) = dims[0], tile
        rows = []
        cap = args.scan_tiles or None
        for ty in range(-(-H // th)):
            for tx in range(-(-W // tw)):
                x, y = tx * tw, ty * th
                rows.append((x, y, x, y, min(tw, W - x), min(th, H - y)))
                if cap and len(rows) >= cap:
                    break
            if cap and len(rows) >= cap:
                break
        return np.array(rows, np.int64), None
    size = 512 if wl.startswith("rand512") else 256
    level = {"rand256-l1": 1, "rand256-l2": 2}.get(wl, 0)
    if level >= len(dims):
        return None, f"slide has no level {level}"
    W, H = dims[level]
    if clamp:
        size = max(1, min(size, W, H))
    if W < size or H < size:
        return None, f"level {level} ({W}×{H}) is smaller than {size}²"
    n = {"batch1024": args.batch, "batch4096": getattr(args, "batch_large", 4096)}.get(wl) or (args.patches if not clamp else args.testdata_patches)
    rng = seeded_rng(args.seed, wl)
    lx = rng.integers(0, W - size + 1, n)
    ly = rng.integers(0, H - size + 1, n)
    ds = downs[level]
    x0 = (lx * ds).astype(np.int64)
    y0 = (ly * ds).astype(np.int64)
    return np.stack([x0, y0, lx, ly, np.full(n, size), np.full(n, size)], axis=1).astype(np.int64), None


def over_budget(args):
    """True when no run should start any more (less than a second of --budget-s left)."""
    left = time_left(args)
    return left is not None and left < 1.0


def wl_mode(wl):
    return "mt" if wl.endswith("-mt") else "batch" if wl in BATCH_WORKLOADS else "scan" if wl == "scan-l0" else "loop"


def wl_level(wl):
    return {"rand256-l1": 1, "rand256-l2": 2}.get(wl, 0)


def wl_describe(wl, args, size=None):
    d = {
        "rand256-1t": "random 256² level-0 patches, 1 thread",
        "rand512-1t": "random 512² level-0 patches, 1 thread",
        "rand256-mt": f"random 256² level-0 patches, {args.threads} threads",
        "rand512-mt": f"random 512² level-0 patches, {args.threads} threads",
        "scan-l0": "level-0 tile scan (row-major), 1 thread",
        "rand256-l1": "random 256² level-1 patches, 1 thread",
        "rand256-l2": "random 256² level-2 patches, 1 thread",
        "batch1024": f"batch of {args.batch} random 256² level-0 patches",
        "batch4096": f"batch of {getattr(args, 'batch_large', 4096)} random 256² level-0 patches",
    }[wl]
    if size is not None and size != 256 and wl == "rand256-1t":
        d = d.replace("256²", f"{size}²")
    return d


def sample_diff(ref_npy, other_npy):
    """Max |Δ| of RGB over pixels opaque in both samples, or None."""
    import numpy as np

    try:
        a, b = np.load(ref_npy), np.load(other_npy)
    except OSError:
        return None
    if a.shape[:2] != b.shape[:2]:
        return None
    mask = np.ones(a.shape[:2], bool)
    for x in (a, b):
        if x.shape[2] == 4:
            mask &= x[..., 3] == 255
    if not mask.any():
        return None
    return int(np.abs(a[..., :3].astype(np.int16) - b[..., :3].astype(np.int16))[mask].max())


def probe_slide(path, readers, args, tmp, stop_at_first_failure=False):
    """Probe every reader on one file. Returns {reader: {version, levels, diff} | {error}}."""
    out = {}
    base = "slidestream"
    order = [base] + [r for r in readers if r not in (base, "slidestream-1dt", "slidestream-cli", "slidestream-cli-cuda")]
    for key in order:
        sample = os.path.join(tmp, f"sample-{key}.npy")
        if over_budget(args) and key != base:
            out[key] = {"error": "not probed: the time budget (--budget-s) was spent", "status": "skipped"}
            continue
        res = run_worker(key, {"probe": True, "path": path, "sample": sample}, args, timeout=args.probe_timeout)
        if res.get("status") in ("timeout", "budget", "crashed"):
            res["error"] = f"probe {res['error']}"
        if "error" not in res:
            res["sample"] = sample
        out[key] = res
        if stop_at_first_failure and "error" in res:
            break
    if "error" not in out[base]:
        for key, res in out.items():
            if key != base and "error" not in res:
                res["diff"] = sample_diff(out[base]["sample"], res["sample"]) if os.path.exists(res["sample"]) else None
        for alias in ("slidestream-1dt",):
            if alias in readers:
                out[alias] = dict(out[base])
        if "slidestream-cli" in readers:
            if args.binary and os.path.exists(args.binary):
                try:
                    cli_info(args.binary, path)
                    out["slidestream-cli"] = dict(out[base], version=f"{out[base]['version']} (Rust CLI)")
                except Exception as e:  # noqa: BLE001
                    out["slidestream-cli"] = {"error": f"slidestream info failed: {e}"}
            else:
                out["slidestream-cli"] = {"error": f"no CLI binary at {args.binary} (cargo build --release)"}
        if "slidestream-cli-cuda" in readers:
            if not args.cuda_cli:
                out["slidestream-cli-cuda"] = {"error": "no --cuda-cli given (a `cargo build --release -p slidestream --features cuda` binary)"}
            elif not os.path.exists(args.cuda_cli):
                out["slidestream-cli-cuda"] = {"error": f"no file {args.cuda_cli}"}
            else:
                t, capped = budgeted_timeout(args, args.probe_timeout)
                rc, gout, gerr, timed_out = run_group([args.cuda_cli, "gpu-probe"], t)
                if timed_out or (rc is not None and rc < 0):
                    out["slidestream-cli-cuda"] = failed_run(rc, gout, gerr, timed_out, t, capped)
                    out["slidestream-cli-cuda"]["error"] = "gpu-probe " + out["slidestream-cli-cuda"]["error"]
                else:
                    out["slidestream-cli-cuda"] = (dict(out[base], version=f"{out[base]['version']} (Rust CLI, CUDA)") if rc == 0
                                                   else {"error": "gpu-probe failed: " + " ".join((gerr or gout).split())[-200:]})
    return out


def machine_info():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    gpu = ""
    try:
        g = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        if g.returncode == 0 and g.stdout.strip():
            gpu = "; GPU " + "; ".join(sorted(set(g.stdout.strip().splitlines())))
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{platform.node()}: {os.cpu_count()} CPUs ({cpu}){mem}, {platform.system()} {platform.release()}, Python {platform.python_version()}{gpu}"


def git_rev():
    try:
        rev = subprocess.check_output(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], text=True, stderr=subprocess.DEVNULL).strip()
        dirty = subprocess.check_output(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], text=True, stderr=subprocess.DEVNULL).strip()
        return rev + (" (uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "?"


def default_make_big():
    for p in (os.path.join(REPO, "..", "shared", "tools", "make_big_svs.py"), os.path.join(HERE, "make_big_svs.py")):
        if os.path.exists(p):
            return os.path.abspath(p)
    return None


def default_testdata():
    p = os.path.abspath(os.path.join(REPO, "..", "shared", "testdata"))
    return p if os.path.isdir(p) else "none"


def fmt_rate(v):
    return "—" if v is None else (f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}")


def fmt_ratio(v):
    return "—" if v is None else f"{v:.2f}×"


def run_outcome(r):
    """One round as it appears in the report: its seconds, or what became of it."""
    if "error" not in r:
        return round(r["seconds"], 4)
    st = r.get("status", "error")
    if st in ("timeout", "budget"):
        return f"{st} {fmt_s(r.get('timeout_s', 0))} s"
    if st == "crashed":
        return f"crashed ({r['signal']})" if r.get("signal") else f"crashed (exit {r.get('returncode')})"
    return st


def summarize(runs):
    ok = [r for r in runs if "error" not in r]
    fails = [r for r in runs if "error" in r]
    outcomes = [run_outcome(r) for r in runs]
    if not ok:
        if not runs:
            return {"error": "not run", "status": "skipped", "outcomes": []}
        # the first failure that ran (a skip only when nothing ran)
        first = next((r for r in fails if r.get("status") != "skipped"), fails[0])
        out = {k: first[k] for k in ("error", "status", "timeout_s", "returncode", "signal") if k in first}
        out.setdefault("status", "error")
        out["outcomes"] = outcomes
        out["errors"] = [r["error"] for r in fails]
        return out
    secs = [r["seconds"] for r in ok]
    med = statistics.median(secs)
    n, px = ok[0]["n"], ok[0]["pixels"]
    loads = [r["load"] for r in runs if "load" in r]
    res = {"runs_s": secs, "median_s": med, "n": n, "pixels": px, "patches_per_s": n / med if med > 0 else None,
           "mp_per_s": px / med / 1e6 if med > 0 else None, "api": ok[0].get("api"),
           "spread": (max(secs) - min(secs)) / med if med > 0 and len(secs) > 1 else 0.0,
           "load_min": min(loads) if loads else None, "load_max": max(loads) if loads else None,
           "errors": [r["error"] for r in fails], "outcomes": outcomes,
           "failed_runs": sum(1 for r in fails if r.get("status") != "skipped"), "skipped_runs": sum(1 for r in fails if r.get("status") == "skipped")}
    # GPU counters of the run nearest the median (slidestream-cuda)
    mid = min(ok, key=lambda r: abs(r["seconds"] - med))
    for k in ("gpu_stats", "gpu_stats_timed"):
        if k in mid:
            res[k] = mid[k]
    return res


class RunState:
    """Timeouts per reader across the run; readers dropped after --max-timeouts."""

    def __init__(self, max_timeouts):
        self.max_timeouts = max_timeouts
        self.timeouts = {}  # reader -> ["wl cache round k", ...]
        self.dropped = {}  # reader -> reason
        self.failures = []  # every failed run: {slide, workload, cache, round, reader, status, error}

    def record(self, slide, wl, cache, rnd, reader, res):
        if "error" not in res or res.get("status") == "skipped":
            return
        self.failures.append({"slide": os.path.basename(slide), "workload": wl, "cache": cache, "round": rnd + 1, "reader": reader,
                              "status": res.get("status", "error"), "error": res["error"]})
        if res.get("status") == "timeout":
            self.timeouts.setdefault(reader, []).append(f"{wl} {cache} round {rnd + 1}")
            if self.max_timeouts and len(self.timeouts[reader]) >= self.max_timeouts and reader not in self.dropped:
                self.dropped[reader] = (f"dropped after {len(self.timeouts[reader])} timeout(s) ({'; '.join(self.timeouts[reader])}; "
                                        f"--max-timeouts {self.max_timeouts}): not run afterwards")
                log(f"    {reader}: {self.dropped[reader]}")


def bench_slide(path, workloads, readers, probe, args, pc, clamp, tmp):
    """Run every workload × cache state on one slide. Returns {f"{wl}|{cache}": {...}}."""
    import numpy as np

    ref = probe["slidestream"]
    dims, downs = ref["levels"], ref["downsamples"]
    tile = ref["tile"]
    present = [r for r in readers if r in probe and "error" not in probe[r]]
    results = {}
    # every warm workload first (the file read once beforehand), then the cold ones: a cold
    # measurement empties the page cache, which would leave the next warm one half cold
    warm_only = getattr(args, "warm_workloads", None)
    plan = [(wl, "warm") for wl in workloads if "warm" in args.cache and (clamp or warm_only is None or wl in warm_only)]
    plan += [(wl, "cold") for wl in workloads if "cold" in args.cache and wl in args.cold_workloads and not clamp]
    for i, (wl, cache) in enumerate(plan):
        if cache == "warm" and i == 0:
            PageCache.warm(path)
        locs, why = make_locs(wl, dims, downs, tile, args, clamp=clamp)
        key = f"{wl}|{cache}"
        entry = {"workload": wl, "cache": cache, "readers": {}}
        results[key] = entry
        if over_budget(args):
            locs, why = None, f"skipped: the time budget (--budget-s {args.budget_s}) was spent"
        if locs is None:
            entry["na"] = why
            log(f"  {wl} ({cache}): n/a — {why}")
            continue
        entry["describe"] = wl_describe(wl, args, int(locs[0, 4]) if clamp else None)
        entry["size"] = [int(locs[0, 4]), int(locs[0, 5])] if wl != "scan-l0" else list(tile)
        entry["n"] = int(len(locs))
        level = wl_level(wl)
        locfile = os.path.join(tmp, f"locs-{wl}.npy")
        np.save(locfile, locs)
        # which readers take part, and at which of their levels
        part = {}
        for r in present:
            if r == "slidestream-cli" and wl_mode(wl) != "loop":
                entry["readers"][r] = {"na": "CLI `bench` times 1-thread random patches only"}
                continue
            if r == "slidestream-cli-cuda" and (wl != "rand256-1t" or clamp):
                entry["readers"][r] = {"na": "CLI `gpu-region` times random 256² level-0 patches only"}
                continue
            rl = probe[r]["levels"]
            want = tuple(dims[level])
            if want not in [tuple(x) for x in rl]:
                entry["readers"][r] = {"na": f"no level with {want[0]}×{want[1]} (levels {', '.join(f'{a}×{b}' for a, b in rl)})"}
                continue
            part[r] = [tuple(x) for x in rl].index(want)
        runs = {r: [] for r in part}
        state = args._state
        timed_out = {}  # reader -> round of its timeout in this workload
        for rnd in range(args.rounds):
            order = list(part)
            k = rnd % max(1, len(order))
            order = order[k:] + order[:k]
            if rnd % 2:
                order.reverse()
            for r in order:
                # one record per round and reader (skips included), so rounds stay paired
                skip = None
                if r in state.dropped:
                    skip = state.dropped[r]
                elif r in timed_out:
                    skip = f"not run: timed out in round {timed_out[r]}"
                elif over_budget(args):
                    skip = f"not run: the time budget (--budget-s {args.budget_s}) was spent"
                if skip:
                    runs[r].append({"error": skip, "status": "skipped"})
                    continue
                read_path, cleanup = (path, lambda: None)
                if cache == "cold":
                    read_path, cleanup = pc.cold(path)
                load = os.getloadavg()[0]
                try:
                    if r == "slidestream-cli":
                        res = run_cli(args.binary, read_path, level, int(locs[0, 4]), locs, args)
                    elif r == "slidestream-cli-cuda":
                        res = run_cuda_cli(args.cuda_cli, read_path, int(locs[0, 4]), len(locs), args)
                    else:
                        res = run_worker(r, {"path": read_path, "locs": locfile, "level": part[r], "mode": wl_mode(wl),
                                             "threads": args.threads, "scan_batch": args.scan_batch,
                                             "handles": "shared" if (args.mt_handles == "shared" or (args.mt_handles == "auto" and r in THREAD_SAFE)) else "per-thread"},
                                         args, timeout=args.measure_timeout_s)
                finally:
                    cleanup()
                res["load"] = load
                runs[r].append(res)
                state.record(path, wl, cache, rnd, r, res)
                if res.get("status") == "timeout":
                    timed_out[r] = rnd + 1
                if "error" in res:
                    log(f"    {wl} {cache} round {rnd + 1} {r}: {res.get('status', 'error').upper()} {res['error']}")
                else:
                    log(f"    {wl} {cache} round {rnd + 1} {r}: {res['n'] / res['seconds']:.1f} patches/s ({res['seconds']:.2f} s, load {load:.2f})")
        for r in part:
            entry["readers"][r] = summarize(runs[r])
        refrate = entry["readers"].get(REF, {}).get("patches_per_s")
        for r, s in entry["readers"].items():
            v = s.get("patches_per_s")
            s["ratio"] = refrate / v if refrate and v else None
        # ratio per round (paired), reported beside the ratio of medians
        if REF in runs:
            for r in part:
                pairs = [(a["seconds"], b["seconds"]) for a, b in zip(runs[REF], runs[r]) if "error" not in a and "error" not in b]
                if pairs:
                    entry["readers"][r]["ratio_paired_median"] = statistics.median(rs / ss for ss, rs in pairs)
    return results


def reader_label(key, probe):
    p = probe.get(key, {})
    v = p.get("version", "")
    names = {
        "slidestream": f"slidestream {v} (Python)",
        "slidestream-1dt": f"slidestream {v} (Python, 1 decode thread)",
        "slidestream-cli": f"slidestream {v.split(' ')[0]} (Rust CLI)" if v else "slidestream (Rust CLI)",
        "slidestream-cuda": f"slidestream {v} (CUDA)",
        "slidestream-cli-cuda": f"slidestream {v.split(' ')[0]} (Rust CLI, CUDA gpu-region)" if v else "slidestream (Rust CLI, CUDA)",
        "openslide": f"OpenSlide {v}",
        "tiffslide": f"tiffslide {v}",
        "fastslide": f"FastSlide {v}",
        "cucim-cpu": f"cuCIM {v} (cpu)",
        "cucim-cuda": f"cuCIM {v} (cuda)",
    }
    return names.get(key, key)


# ------------------------------------------------------------------ report: markdown and plots

def md_esc(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def fail_cell(s):
    """Summary-table cell of a reader whose every round failed."""
    st = s.get("status", "error")
    if st == "timeout":
        return f"**timed out** after {fmt_s(s.get('timeout_s', 0))} s"
    if st == "budget":
        return "stopped by the time budget"
    if st == "crashed":
        return f"**crashed** ({s['signal'] if s.get('signal') else 'exit ' + str(s.get('returncode'))})"
    if st == "skipped":
        return "skipped"
    return "error"


def fmt_outcomes(s):
    outs = s.get("outcomes")
    if outs is None:  # reports written before outcomes were recorded
        outs = s.get("runs_s", [])
    return ", ".join(f"{x:.3f}" if isinstance(x, (int, float)) else str(x) for x in outs)


def fmt_bytes(v):
    return "?" if v is None else f"{v / 1e6:.1f} MB"


def gpu_stats_line(gs):
    """One line of slidestream.gpu_stats() counters (deltas of the timed reads)."""
    if not isinstance(gs, dict):
        return str(gs)
    cache = gs.get("cache") if isinstance(gs.get("cache"), dict) else {}
    hits = gs.get("cache_hits", cache.get("hits"))
    misses = gs.get("cache_misses", cache.get("misses"))
    ra = gs.get("read_amplification")
    dec = [f"{name} {gs[k]}" for k, name in (("decoded_hardware", "hardware"), ("decoded_device_bitstream", "device-bitstream"),
                                              ("decoded_hybrid", "hybrid"), ("decoded_cpu", "cpu")) if k in gs]
    read = sum(gs.get(k) or 0 for k in ("posix_bytes", "cufile_gds_bytes", "cufile_compat_bytes"))
    parts = [f"I/O path {gs.get('io_path', '?')}" + (f" ({gs['io_reason']})" if gs.get("io_reason") else ""),
             f"read amplification {ra:.2f}" if isinstance(ra, (int, float)) else "read amplification ?",
             "decoded " + (", ".join(dec) if dec else "?"),
             f"device tile cache {hits} hits / {misses} misses",
             f"{fmt_bytes(read)} read (posix {fmt_bytes(gs.get('posix_bytes'))}, cuFile compat {fmt_bytes(gs.get('cufile_compat_bytes'))}"
             + (f", GDS {fmt_bytes(gs.get('cufile_gds_bytes'))}" if gs.get("cufile_gds_bytes") else "") + f") for {fmt_bytes(gs.get('tile_bytes'))} of tiles"]
    if gs.get("nvjpeg_backend"):
        parts.append(f"nvJPEG backend {gs['nvjpeg_backend']} ({gs.get('hardware_engines', '?')} hardware engines)")
    if gs.get("gpu_batch_fallbacks"):
        parts.append(f"{gs['gpu_batch_fallbacks']} GPU batch fallback(s)")
    if gs.get("cpu_fallback_reason"):
        parts.append(f"last CPU fallback: {gs['cpu_fallback_reason']}")
    return "; ".join(parts)


# The GPU targets of the issue tracker (slidestream-cuda): (workload, metric, target, text)
GPU_TARGETS = [("batch4096", "patches_per_s", 25000, "4096 random 256² level-0 patches, file → device tensor: ≥ 25,000 patches/s"),
               ("scan-l0", "mp_per_s", 3000, "level-0 tile scan: ≥ 3 GP/s (3,000 MP/s)")]


def md_slide_tables(sres, readers, labels, args, title):
    lines = []
    cols = [r for r in readers if any(r in e["readers"] for e in sres["results"].values())]
    lines.append(f"#### {title}")
    lines.append("")
    lines.append("patches/s (slidestream / reader); median of " + f"{args.rounds} round{'s' if args.rounds != 1 else ''}"
                 + "; `scan-l0` also in MP/s")
    lines.append("")
    lines.append("| workload | page cache | " + " | ".join(labels[r] for r in cols) + " |")
    lines.append("|---|---|" + "---:|" * len(cols))
    partial = batched = False
    for key, e in sres["results"].items():
        desc = e.get("describe", e["workload"])
        if "na" in e:
            cell = "skipped" if e["na"].startswith("skipped") else "n/a"
            lines.append(f"| {e['workload']} | {e['cache']} | " + " | ".join(cell for _ in cols) + f" |  <!-- {md_esc(e['na'])} -->")
            continue
        cells = []
        for r in cols:
            s = e["readers"].get(r)
            if s is None:
                cells.append("")
            elif "na" in s:
                cells.append("n/a")
            elif "error" in s:
                cells.append(fail_cell(s))
            else:
                api = ""
                if s.get("api") == "batch" and (e["workload"] in BATCH_WORKLOADS or e["workload"] == "scan-l0"):
                    api, batched = " ᵇ", True
                mark = ""
                if s.get("failed_runs") or s.get("skipped_runs"):
                    mark, partial = " †", True
                mp = f" · {s['mp_per_s']:.0f} MP/s" if e["workload"] == "scan-l0" and s.get("mp_per_s") else ""
                cells.append(f"{fmt_rate(s['patches_per_s'])}{api}{mark} ({fmt_ratio(s['ratio'])}){mp}")
        lines.append(f"| {e['workload']}: {desc} | {e['cache']} | " + " | ".join(cells) + " |")
    lines.append("")
    if batched:
        cuda_scan = ("; `slidestream-cuda` scans with `read_regions` over tile-aligned locations, "
                     f"{getattr(args, 'scan_batch', 1024)} tiles a call") if "slidestream-cuda" in cols else ""
        lines.append(f"ᵇ the reader's batch API (`Slide.read_regions`, cuCIM batched `read_region`{cuda_scan}); others loop "
                     "(batches: into a preallocated array).")
        lines.append("")
    if any(e.get("na", "").startswith("skipped") for e in sres["results"].values()) or any(
            s.get("status") == "skipped" for e in sres["results"].values() for s in e["readers"].values()):
        lines.append("skipped: not run, because the time budget (`--budget-s`) was spent or the reader had timed out before "
                     "(the reason is in the detailed table).")
        lines.append("")
    if partial:
        lines.append("† median of the rounds that ran: the others failed (timed out, crashed) or were skipped; see \"Failed runs\" and the detailed table.")
        lines.append("")
    if any(s.get("status") in ("timeout", "crashed", "budget") for e in sres["results"].values() for s in e["readers"].values()):
        lines.append("**timed out** after N s: the measurement's process group was killed after its timeout (`--measure-timeout-s`); "
                     "**crashed**: the worker died (signal or exit status in \"Failed runs\"); stopped by the time budget: still running "
                     "when `--budget-s` ran out. Either way the run went on with the next reader.")
        lines.append("")
    notes = []
    for key, e in sres["results"].items():
        s = e["readers"].get("slidestream-cuda") or {}
        if s.get("gpu_stats_timed") is not None:
            notes.append(f"- `{e['workload']}` {e['cache']}: {gpu_stats_line(s['gpu_stats_timed'])}")
    if notes:
        lines.append("GPU path of `slidestream-cuda` (`slidestream.gpu_stats()`, counters of the timed reads of the median run):")
        lines.append("")
        lines.extend(notes)
        lines.append("")
    targets = []
    for wl, metric, goal, text in GPU_TARGETS:
        for cache in ("warm", "cold"):
            e = sres["results"].get(f"{wl}|{cache}") or {}
            s = (e.get("readers") or {}).get("slidestream-cuda") or {}
            if "na" in e or not s:
                continue
            if "error" in s:
                targets.append(f"- {text}, {cache}: {fail_cell(s).replace('**', '')} — not measured")
                continue
            v = s.get(metric)
            if v is None:
                continue
            unit = "patches/s" if metric == "patches_per_s" else "MP/s"
            n = e.get("n") or s.get("n")
            what = f" ({n} patches)" if wl == "batch4096" and n != 4096 else f" ({n} tiles)" if wl == "scan-l0" else ""
            targets.append(f"- {text}, {cache}{what}: **{v:,.0f} {unit}** ({v / goal:.2f}× the target): {'met' if v >= goal else 'not met'}")
    if targets:
        lines.append("GPU targets (`slidestream-cuda`):")
        lines.append("")
        lines.extend(targets)
        lines.append("")
    return lines


def md_long_table(sres, labels):
    lines = ["| workload | page cache | reader | patches/s | MP/s | slidestream / reader | paired ratio | runs (s) | spread | load (1-min) |",
             "|---|---|---|---:|---:|---:|---:|---|---:|---|"]
    for key, e in sres["results"].items():
        if "na" in e:
            lines.append(f"| {e['workload']} | {e['cache']} | all | n/a: {md_esc(e['na'])} | | | | | | |")
            continue
        for r, s in e["readers"].items():
            if "na" in s:
                lines.append(f"| {e['workload']} | {e['cache']} | {labels[r]} | n/a: {md_esc(s['na'])} | | | | | | |")
            elif "error" in s:
                # the messages of timeouts, crashes, budget stops and skips say what happened; errors get a prefix
                msg = s["error"] if s.get("status") in ("timeout", "crashed", "budget", "skipped") else f"error: {s['error']}"
                lines.append(f"| {e['workload']} | {e['cache']} | {labels[r]} | {md_esc(msg)} | | | | {md_esc(fmt_outcomes(s))} | | |")
            else:
                pr = s.get("ratio_paired_median")
                load = f"{s['load_min']:.2f}–{s['load_max']:.2f}" if s.get("load_min") is not None else ""
                lines.append(f"| {e['workload']} | {e['cache']} | {labels[r]} | {fmt_rate(s['patches_per_s'])} | {s['mp_per_s']:.1f} | "
                             f"{fmt_ratio(s['ratio'])} | {fmt_ratio(pr)} | {md_esc(fmt_outcomes(s))} | {100 * s['spread']:.0f} % | {load} |")
    return lines


def md_report(report, args):
    labels = report["labels"]
    readers = report["readers_run"]
    L = []
    L.append(f"# compare.py — {report['name']}")
    L.append("")
    L.append(f"- date: {report['date']} (UTC {report['started_utc']} – {report['finished_utc']}, {report['wall_s']:.0f} s)")
    L.append(f"- machine: {report['machine']}")
    L.append(f"- slidestream: {report['slidestream_version']}, git {report['git']}; CLI `{report['binary']}`")
    L.append(f"- command: `{report['command']}` (niceness {report['nice']})")
    L.append(f"- load average before / after: {report['load_before'][0]:.2f} / {report['load_after'][0]:.2f} (1-min; every row lists the range seen before its runs)")
    L.append(f"- threads for the `-mt` workloads and cuCIM batches: {args.threads}; handles in `-mt`: "
             + ("one shared handle for slidestream, OpenSlide and FastSlide, one per thread for tiffslide and cuCIM" if args.mt_handles == "auto" else f"{args.mt_handles} for every reader"))
    L.append(f"- page cache: warm = whole file read first; {report['cold_note'] or 'cold not run'}")
    L.append("- every measurement: fresh interpreter, slide opened before the timer, reader's default caches; alternating (rotated) order per round")
    mt = getattr(args, "measure_timeout_s", None)
    if mt and "failures" in report:  # runs since the per-measurement timeouts
        budget = getattr(args, "budget_s", 0)
        L.append(f"- timeouts: {mt:.0f} s per measurement, {getattr(args, 'probe_timeout', 60):.0f} s per probe (the worker's whole process group is killed on expiry); "
                 + (f"a reader is dropped after {args.max_timeouts} timeout(s); " if getattr(args, "max_timeouts", 0) else "")
                 + (f"time budget {budget} s (no run starts after it, and runs are stopped at it)" if budget else "no time budget"))
    L.append("")
    L.append("Readers:")
    L.append("")
    for r in readers:
        L.append(f"- {labels[r]}")
    if report["unavailable"]:
        L.append("")
        L.append("Unavailable:")
        L.append("")
        for r, why in report["unavailable"].items():
            L.append(f"- `{r}`: {why}")
    if report.get("dropped"):
        L.append("")
        L.append("Dropped during the run:")
        L.append("")
        for r, why in report["dropped"].items():
            L.append(f"- {labels.get(r, r)}: {why}")
    L.append("")
    for s in report["slides"]:
        L.append(f"## {s['path']}")
        L.append("")
        L.append(f"{s['describe']}")
        L.append("")
        if s.get("diffs"):
            L.append("Pixel check (centred 64² of level 0, max |ΔRGB| vs slidestream): " + ", ".join(f"{labels.get(r, r)} {d}" for r, d in s["diffs"].items()))
            L.append("")
        L.extend(md_slide_tables(s, readers, labels, args, "Summary"))
        L.append("#### Every reader and run")
        L.append("")
        L.extend(md_long_table(s, labels))
        L.append("")
        for p in s.get("plots", []):
            L.append(f"![{os.path.basename(p)}]({os.path.basename(p)})")
        L.append("")
    if report.get("testdata"):
        td = report["testdata"]
        L.append(f"## Test files ({td['dir']})")
        L.append("")
        L.append(f"Files every available reader opens and reads: {len(td['slides'])}. Workloads: `rand256-1t` with the patch edge clamped to the image "
                 f"({args.testdata_patches} patches) and `scan-l0`, warm page cache. Small files fit in every reader's cache after the first reads.")
        L.append("")
        if td["excluded"]:
            L.append("Excluded (a reader failed to open or read them):")
            L.append("")
            for f, why in td["excluded"].items():
                L.append(f"- `{f}`: {why}")
            L.append("")
        cols = [r for r in readers if any(r in e["readers"] for s in td["slides"] for e in s["results"].values())]
        L.append("patches/s (slidestream / reader)")
        L.append("")
        L.append("| file | workload | " + " | ".join(labels[r] for r in cols) + " | pixel check: max abs ΔRGB vs slidestream |")
        L.append("|---|---|" + "---:|" * len(cols) + "---|")
        for s in td["slides"]:
            for key, e in s["results"].items():
                if "na" in e:
                    continue
                cells = []
                for r in cols:
                    x = e["readers"].get(r)
                    cells.append("" if x is None else "n/a" if "na" in x else fail_cell(x) if "error" in x else f"{fmt_rate(x['patches_per_s'])} ({fmt_ratio(x['ratio'])})")
                check = ", ".join(f"{labels.get(r, r).split(' ')[0]} {d}" for r, d in s.get("diffs", {}).items()) if e["workload"] == "rand256-1t" else ""
                nreads = next((x["n"] for x in e["readers"].values() if "n" in x), None)
                what = f"{e.get('describe', e['workload'])} ({nreads} read{'s' if nreads != 1 else ''} per run)"
                L.append(f"| {os.path.basename(s['path'])} | {what} | " + " | ".join(cells) + f" | {check} |")
        L.append("")
        for p in td.get("plots", []):
            L.append(f"![{os.path.basename(p)}]({os.path.basename(p)})")
        L.append("")
    if report.get("failures"):
        L.append("## Failed runs")
        L.append("")
        L.append("Every measurement that gave no result (timeouts: the process group was killed; skipped rounds are not listed).")
        L.append("")
        L.append("| file | workload | page cache | round | reader | status | message |")
        L.append("|---|---|---|---:|---|---|---|")
        for f in report["failures"]:
            L.append(f"| {f['slide']} | {f['workload']} | {f['cache']} | {f['round']} | {labels.get(f['reader'], f['reader'])} | **{f['status']}** | {md_esc(f['error'])} |")
        L.append("")
    return "\n".join(L) + "\n"


def plots(report, outdir, name):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return [], f"plots skipped: {e}"
    labels = report["labels"]
    colours = {"slidestream": "#1f77b4", "slidestream-1dt": "#6baed6", "slidestream-cli": "#08306b", "slidestream-cuda": "#17becf",
               "openslide": "#d62728", "tiffslide": "#2ca02c", "fastslide": "#ff7f0e", "cucim-cpu": "#9467bd", "cucim-cuda": "#8c564b"}

    def grouped(groups, series, value, ylabel, title, fname, logy=False, hlines=()):
        """groups: list of str; series: list of reader keys; value(g_index, r) -> float|None."""
        series = [r for r in series if any(value(i, r) for i in range(len(groups)))]
        if not groups or not series:
            return None
        fig, ax = plt.subplots(figsize=(min(15, max(7, 0.22 * len(groups) * len(series) + 3)), 5.6))
        width = 0.8 / len(series)
        for j, r in enumerate(series):
            xs, ys = [], []
            for i in range(len(groups)):
                v = value(i, r)
                if v:
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(v)
            ax.bar(xs, ys, width, label=labels.get(r, r), color=colours.get(r))
        top = max((value(i, r) or 0) for i in range(len(groups)) for r in series)
        if not logy and hlines and top > 12:
            logy = True  # ratios spanning orders of magnitude (tiny test files)
        for y, txt in hlines:
            ax.axhline(y, color="grey", lw=0.8, ls="--")
            ax.text(len(groups) - 0.5, y, txt, ha="right", va="bottom", fontsize=7, color="dimgrey",
                    bbox=dict(facecolor="white", alpha=0.8, lw=0, pad=1))
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        if logy:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        path = os.path.join(outdir, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    made = []
    readers = report["readers_run"]
    peers = [r for r in readers if r != REF]
    for s in report["slides"]:
        entries = [e for e in s["results"].values() if "na" not in e]
        groups = [f"{e['workload']}" + (" cold" if e["cache"] == "cold" else "") for e in entries]
        stem = os.path.splitext(os.path.basename(s["path"]))[0]
        rate = lambda i, r: (entries[i]["readers"].get(r) or {}).get("patches_per_s")  # noqa: E731
        ratio = lambda i, r: (entries[i]["readers"].get(r) or {}).get("ratio")  # noqa: E731
        p = grouped(groups, readers, rate, "patches/s (log)", f"{stem}: patches/s per workload ({report['name']})", f"compare-{name}-{stem}-rates.png", logy=True)
        if p:
            made.append(p)
            s.setdefault("plots", []).append(p)
        p = grouped(groups, peers, ratio, "slidestream / reader", f"{stem}: slidestream speed ÷ reader speed ({report['name']})", f"compare-{name}-{stem}-ratios.png",
                    hlines=[(1.0, "1×"), (1.5, "target vs FastSlide (rand256-1t)"), (3.0, "target vs OpenSlide (rand256-1t)")])
        if p:
            made.append(p)
            s.setdefault("plots", []).append(p)
    td = report.get("testdata")
    if td and td["slides"]:
        for wl in ("rand256-1t", "scan-l0"):
            ents = [(os.path.basename(s["path"]), s["results"].get(f"{wl}|warm")) for s in td["slides"]]
            ents = [(f, e) for f, e in ents if e and "na" not in e]
            groups = [f for f, _ in ents]
            p = grouped(groups, readers, lambda i, r: (ents[i][1]["readers"].get(r) or {}).get("patches_per_s"), "patches/s (log)",
                        f"test files, {wl}: patches/s ({report['name']})", f"compare-{name}-testdata-{wl}-rates.png", logy=True)
            if p:
                made.append(p)
                td.setdefault("plots", []).append(p)
        ents = [(os.path.basename(s["path"]), s["results"].get("rand256-1t|warm")) for s in td["slides"]]
        ents = [(f, e) for f, e in ents if e and "na" not in e]
        p = grouped([f for f, _ in ents], peers, lambda i, r: (ents[i][1]["readers"].get(r) or {}).get("ratio"), "slidestream / reader",
                    f"test files, rand256-1t: slidestream ÷ reader ({report['name']})", f"compare-{name}-testdata-ratios.png", hlines=[(1.0, "1×")])
        if p:
            made.append(p)
            td.setdefault("plots", []).append(p)
    return made, None


# ------------------------------------------------------------------ main

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("slides", nargs="*", help="slides that get every workload (default /tmp/big.svs, made if missing)")
    ap.add_argument("--quick", action="store_true", help="small run: --patches 100 --rounds 1 --scan-tiles 300 --batch 128 --batch-large 256 --testdata-patches 30 --cache warm (explicit options win)")
    ap.add_argument("--workloads", help=f"comma list from {','.join(ALL_WORKLOADS)} (default all)")
    ap.add_argument("--readers", help=f"comma list from {','.join(ALL_READERS)} (default all that are available)")
    ap.add_argument("--patches", type=int, help="random patches per measurement (default 1000)")
    ap.add_argument("--rounds", type=int, help="rounds; the median is reported (default 3)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="caller threads for -mt workloads, cuCIM batch workers (default: all cores)")
    ap.add_argument("--mt-handles", choices=["auto", "shared", "per-thread"], default="auto",
                    help="auto: thread-safe readers share one handle, tiffslide and cuCIM get one per thread")
    ap.add_argument("--scan-tiles", type=int, help="cap on tiles in scan-l0, 0 = every tile (default 10000)")
    ap.add_argument("--batch", type=int, help="patches in batch1024 (default 1024)")
    ap.add_argument("--batch-large", type=int, help="patches in batch4096 (default 4096)")
    ap.add_argument("--scan-batch", type=int, default=1024, help="tiles per read_regions call when slidestream-cuda scans (default 1024)")
    ap.add_argument("--cache", help="comma list of warm,cold (default warm,cold)")
    ap.add_argument("--cold-workloads", default="rand256-1t,rand256-mt,scan-l0,batch1024", help="workloads also run with a cold page cache")
    ap.add_argument("--warm-workloads", help="the workloads run with a warm page cache (default: every one of --workloads); "
                                             "the others of --workloads run cold only (if in --cold-workloads)")
    ap.add_argument("--testdata", default=None, help="folder of test files ('none' to skip; default ../shared/testdata)")
    ap.add_argument("--testdata-patches", type=int, help="random patches per test file (default 200)")
    ap.add_argument("--testdata-max-bytes", type=int, default=64 << 20, help="skip test files larger than this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--binary", default=os.path.join(REPO, "target", "release", "slidestream"), help="slidestream CLI for the Rust row")
    ap.add_argument("--make-big-svs", default=None, help="make_big_svs.py used to create a missing default slide")
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "benchmarks"), help="output folder")
    ap.add_argument("--name", default="local", help="report name: files are compare-NAME.*")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--cucim-batch-size", type=int, default=0, help="cuCIM batch_size in the batch workloads (default: the whole batch)")
    ap.add_argument("--measure-timeout-s", "--timeout", dest="measure_timeout_s", type=float, default=120,
                    help="seconds per measurement; on expiry the worker's process group is killed and the run is recorded as timed out (default 120)")
    ap.add_argument("--max-timeouts", type=int, default=2, help="drop a reader for the rest of the run after this many timeouts (0: never; default 2)")
    ap.add_argument("--probe-timeout", type=float, default=60, help="seconds per reader probe (default 60)")
    ap.add_argument("--json", help="also write the JSON here")
    ap.add_argument("--cuda-cli", help="a CUDA build of the slidestream CLI: adds the gpu-region row (rand256-1t)")
    ap.add_argument("--from-json", help="measure nothing: re-write the markdown and charts of an earlier run's JSON into --out")
    ap.add_argument("--budget-s", type=int, default=0,
                    help="time budget from the start: no measurement or probe starts after this many seconds, and running ones are stopped "
                         "at it, so the measuring ends by then whatever hangs; the report follows in seconds (0: no limit)")
    a = ap.parse_args(argv)
    q = a.quick
    a.patches = a.patches or (100 if q else 1000)
    a.rounds = a.rounds or (1 if q else 3)
    a.scan_tiles = a.scan_tiles if a.scan_tiles is not None else (300 if q else 10000)
    a.batch = a.batch or (128 if q else 1024)
    a.batch_large = a.batch_large or (256 if q else 4096)
    a.testdata_patches = a.testdata_patches or (30 if q else 200)
    a.cache = [c.strip() for c in (a.cache or ("warm" if q else "warm,cold")).split(",") if c.strip()]
    if a.measure_timeout_s <= 0:
        ap.error("--measure-timeout-s must be positive")
    a.cold_workloads = [w.strip() for w in a.cold_workloads.split(",") if w.strip()]
    a.warm_workloads = [w.strip() for w in a.warm_workloads.split(",") if w.strip()] if a.warm_workloads else None
    a.workloads = [w.strip() for w in a.workloads.split(",")] if a.workloads else list(ALL_WORKLOADS)
    a.readers = [r.strip() for r in a.readers.split(",")] if a.readers else list(ALL_READERS)
    for w in a.workloads + a.cold_workloads + (a.warm_workloads or []):
        if w not in ALL_WORKLOADS:
            ap.error(f"unknown workload {w}")
    for r in a.readers:
        if r not in ALL_READERS:
            ap.error(f"unknown reader {r}")
    if REF not in a.readers:
        a.readers.insert(0, REF)  # the reference row is always measured
    a.testdata = a.testdata or default_testdata()
    return a


def write_outputs(report, args, out, name):
    os.makedirs(out, exist_ok=True)
    if not args.no_plots:
        for s in report["slides"] + (report.get("testdata") or {}).get("slides", []):
            s.pop("plots", None)
        if report.get("testdata"):
            report["testdata"].pop("plots", None)
        made, note = plots(report, out, name)
        report["plots"] = [os.path.basename(p) for p in made]
        if note:
            report["plot_note"] = note
            log(note)
    md = md_report(report, args)
    with open(os.path.join(out, f"compare-{name}.md"), "w") as f:
        f.write(md)
    for path in [os.path.join(out, f"compare-{name}.json")] + ([args.json] if args.json else []):
        with open(path, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return md


def rerender(args):
    with open(args.from_json) as f:
        report = json.load(f)
    run_args = argparse.Namespace(**dict(report["args"], no_plots=args.no_plots, json=args.json))
    if getattr(run_args, "measure_timeout_s", None) is None:  # reports of runs before --measure-timeout-s
        run_args.measure_timeout_s = getattr(run_args, "timeout", None)
    md = write_outputs(report, run_args, args.out, report["name"])
    print(md)
    return 0


def main(argv=None):
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main()
        return 0
    args = parse_args(argv)
    if args.from_json:
        return rerender(args)
    t_start = args.t0 = time.time()
    args._state = RunState(args.max_timeouts)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()
    os.makedirs(args.out, exist_ok=True)
    slides = args.slides or ["/tmp/big.svs"]
    for s in slides:
        if not os.path.exists(s):
            if s == "/tmp/big.svs" and (args.make_big_svs or default_make_big()):
                tool = args.make_big_svs or default_make_big()
                log(f"making {s} with {tool}")
                subprocess.check_call([sys.executable, tool, s])
            else:
                sys.exit(f"compare.py: {s} does not exist")
    pc = PageCache("cold" in args.cache)
    if "cold" in args.cache and pc.method is None:
        args.cache.remove("cold")
    tmp = tempfile.mkdtemp(prefix="compare-")
    report = {"name": args.name, "date": datetime.date.today().isoformat(), "started_utc": started.strftime("%H:%M"),
              "machine": machine_info(), "git": git_rev(), "binary": args.binary if os.path.exists(args.binary) else "(none)",
              "command": " ".join([os.path.relpath(x, REPO) if x.startswith(REPO + os.sep) else x for x in [sys.executable] + sys.argv]),
              "nice": os.nice(0), "load_before": load_before, "cold_method": pc.method, "cold_note": pc.note,
              "args": {k: v for k, v in vars(args).items() if not k.startswith("_")}, "slides": [], "unavailable": {}, "labels": {}}
    try:
        # -- probe the readers on the first slide; the available ones are the readers of this run
        probes = {}
        for s in slides:
            log(f"probing readers on {s}")
            pr = probe_slide(s, args.readers, args, tmp)
            if "error" in pr["slidestream"]:
                sys.exit(f"compare.py: slidestream cannot read {s}: {pr['slidestream']['error']}")
            probes[s] = pr
        first = probes[slides[0]]
        readers = [r for r in args.readers if r in first and "error" not in first[r]]
        for r in args.readers:
            if r not in readers:
                report["unavailable"][r] = first.get(r, {}).get("error", "not probed")
        # richer reasons for the GPU readers
        if "cucim-cuda" in report["unavailable"] and "cucim-cpu" in report["unavailable"]:
            report["unavailable"]["cucim-cuda"] = report["unavailable"]["cucim-cpu"] + " (cuCIM not importable)"
        report["readers_run"] = readers
        for s in slides:
            for r in readers:
                report["labels"][r] = reader_label(r, probes[s])
        for r in args.readers:
            report["labels"].setdefault(r, r)
        ssv = probes[slides[0]]["slidestream"]["version"]
        try:
            import slidestream as _ss  # noqa: F401  (only for core_version; the runs use fresh interpreters)

            ssv = f"{ssv} (core {_ss.core_version() if callable(getattr(_ss, 'core_version', None)) else getattr(_ss, 'core_version', '?')})"
        except Exception:  # noqa: BLE001
            pass
        report["slidestream_version"] = ssv
        log("readers: " + ", ".join(report["labels"][r] for r in readers) + ("; unavailable: " + ", ".join(report["unavailable"]) if report["unavailable"] else ""))

        def geometry(path, pr):
            import slidestream

            with slidestream.Slide(path) as sl:
                pr["slidestream"]["levels"] = [list(d) for d in sl.level_dimensions]
                pr["slidestream"]["downsamples"] = list(sl.level_downsamples)
                pr["slidestream"]["tile"] = list(sl.level_tile_sizes[0])
                desc = (f"{sl.vendor}, level 0 {sl.dimensions[0]}×{sl.dimensions[1]}, {sl.level_count} level(s) "
                        f"({', '.join(f'{w}×{h}' for w, h in sl.level_dimensions)}), level-0 tiles {sl.level_tile_sizes[0][0]}×{sl.level_tile_sizes[0][1]}, "
                        f"{os.path.getsize(path) / 1e6:.0f} MB")
            return desc

        for s in slides:
            pr = probes[s]
            desc = geometry(s, pr)
            log(f"== {s}: {desc}")
            res = bench_slide(s, args.workloads, readers, pr, args, pc, clamp=False, tmp=tmp)
            diffs = {r: pr[r].get("diff") for r in readers if r in pr and r not in (REF, "slidestream-1dt", "slidestream-cli") and "diff" in pr[r]}
            report["slides"].append({"path": s, "describe": desc, "results": res, "diffs": diffs,
                                     "levels": {r: pr[r].get("levels") for r in readers if r in pr}})

        # -- test files that every available reader opens
        if args.testdata and args.testdata != "none" and os.path.isdir(args.testdata):
            td = {"dir": args.testdata, "slides": [], "excluded": {}}
            report["testdata"] = td
            td_args = argparse.Namespace(**vars(args))
            td_args.cache = ["warm"]
            td_wl = [w for w in ("rand256-1t", "scan-l0") if w in args.workloads]
            probe_readers = [r for r in readers if r not in ("slidestream-1dt", "slidestream-cli", "slidestream-cli-cuda")]
            for f in sorted(os.listdir(args.testdata)):
                p = os.path.join(args.testdata, f)
                if not os.path.isfile(p) or not f.lower().endswith(SLIDE_EXT) or os.path.getsize(p) > args.testdata_max_bytes:
                    continue
                if over_budget(args):
                    td["excluded"][f] = "not run: the time budget (--budget-s) was spent"
                    continue
                log(f"probing {f}")
                pr = probe_slide(p, probe_readers, args, tmp, stop_at_first_failure=True)
                bad = {r: x["error"] for r, x in pr.items() if "error" in x}
                missing = [r for r in probe_readers if r not in pr]
                if bad or missing:
                    td["excluded"][f] = "; ".join(f"{report['labels'].get(r, r)}: {e}" for r, e in bad.items()) + (
                        f" (not tried: {', '.join(missing)})" if missing else "")
                    continue
                if "slidestream-1dt" in readers:
                    pr["slidestream-1dt"] = dict(pr["slidestream"])
                if "slidestream-cli" in readers:
                    pr["slidestream-cli"] = dict(pr["slidestream"])
                desc = geometry(p, pr)
                log(f"== {f}: {desc}")
                res = bench_slide(p, td_wl, readers, pr, td_args, pc, clamp=True, tmp=tmp)
                diffs = {r: pr[r].get("diff") for r in readers if r in pr and "diff" in pr[r] and r not in (REF, "slidestream-1dt", "slidestream-cli")}
                td["slides"].append({"path": p, "describe": desc, "results": res, "diffs": diffs})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    report["dropped"] = dict(args._state.dropped)
    report["failures"] = list(args._state.failures)
    report["load_after"] = os.getloadavg()
    report["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M")
    report["wall_s"] = time.time() - t_start
    md = write_outputs(report, args, args.out, args.name)
    print(md)
    log(f"wrote {args.out}/compare-{args.name}.md, .json" + (f" and {len(report.get('plots', []))} PNGs" if report.get("plots") else "") + f" in {report['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
