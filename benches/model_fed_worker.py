"""Worker side of benches/model_fed.py: one row in a fresh interpreter (the models, the
feeders, the timed loops). Not run by hand: model_fed.py starts it as
``model_fed.py --_worker SPEC_JSON`` and, for the rows with the model in another process,
``model_fed.py --_model_proc SPEC_JSON``. Method and rows: model_fed.py's docstring.

A feeder is an iterator of uint8 batches (batch, size, size, 3), NHWC, RGB, on the model's
device; the step crops them to ``crop``² (center, or one random offset per batch), converts to
float, normalises, makes them channels_last and runs the model under bf16 autocast: SGD
training (cross-entropy against fixed random labels) or inference (``torch.inference_mode``).
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Every row imports slidestream first, as a training script does at its top (before any CUDA
# context exists: `import slidestream` raises CUDA_DEVICE_MAX_CONNECTIONS to 32 when unset), so
# all rows, peers' and synthetic included, run with the same CUDA environment.
try:
    import slidestream  # noqa: F401
except ImportError:  # the peer rows run without it
    pass


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


tl = _load("training_loop")  # make_rows, warm_engine, need_gpu, need_torch, Skip, log
Skip = tl.Skip
log = tl.log

#: model name -> (torchvision constructor, trains?)
MODELS = {"resnet50": ("resnet50", True), "vit_b_16": ("vit_b_16", False), "resnet18": ("resnet18", True)}


# --------------------------------------------------------------------------------------------
# the model step
# --------------------------------------------------------------------------------------------


class Step:
    """One model step on a uint8 NHWC batch: GPU crop + normalise + channels_last, then bf16
    autocast forward (and backward + SGD step when training). Never synchronises."""

    def __init__(self, torch, spec, device):
        try:
            import torchvision
        except ImportError as e:
            raise Skip(f"torchvision: {e}") from None
        name = spec["model"]
        ctor, self.train = MODELS[name]
        self.torch = torch
        crop = self.crop = spec["crop"]
        kw = {"image_size": crop} if name.startswith("vit") and crop != 224 else {}
        torch.manual_seed(spec["seed"])
        m = getattr(torchvision.models, ctor)(weights=None, **kw)
        self.model = m.to(device, memory_format=torch.channels_last)
        self.device_type = torch.device(device).type
        self.mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1) * 255
        self.rng = random.Random(spec["seed"])
        self.random_crop = spec["crop_mode"] == "random"
        if self.train:
            self.model.train()
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
            self.labels = torch.randint(0, 1000, (spec["batch"],), device=device)
        else:
            self.model.eval()

    def prep(self, x):
        """uint8 (n, h, w, 3) -> float (n, 3, crop, crop), normalised, channels_last."""
        h, w = x.shape[1], x.shape[2]
        c = self.crop
        if self.random_crop:
            oy, ox = self.rng.randint(0, h - c), self.rng.randint(0, w - c)
        else:
            oy, ox = (h - c) // 2, (w - c) // 2
        x = x[:, oy:oy + c, ox:ox + c, :].permute(0, 3, 1, 2).float()
        return ((x - self.mean) / self.std).contiguous(memory_format=self.torch.channels_last)

    def __call__(self, x):
        torch = self.torch
        x = self.prep(x)
        if self.train:
            with torch.autocast(self.device_type, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(self.model(x), self.labels[: x.shape[0]])
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        else:
            with torch.inference_mode(), torch.autocast(self.device_type, dtype=torch.bfloat16):
                self.model(x)


def sync(torch, device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


# --------------------------------------------------------------------------------------------
# feeders
# --------------------------------------------------------------------------------------------


class Replay:
    """The row's seeded batches as a random sampler (``.sample(n)``), cycling when exhausted."""

    def __init__(self, batches):
        self.batches, self.k = batches, 0

    def sample(self, n):
        rows = self.batches[self.k % len(self.batches)]
        self.k += 1
        return rows


def open_slides(spec):
    import slidestream

    slides = [slidestream.Slide(p) for p in spec["slides"]]
    return slides, [s.dimensions for s in slides]


def loader(spec, res, device_path: bool, num_batches: int):
    """slidestream.torch.PatchLoader over the row's batches (device path or CPU path)."""
    torch = tl.need_torch(cuda=device_path)
    from slidestream.torch import PatchLoader

    slides, dims = open_slides(spec)
    batches = tl.make_rows(spec, len(slides), min(num_batches, 400), dims)
    if device_path:
        tl.need_gpu()
        tl.warm_engine(slides, res)
    kw = {}
    if not device_path and spec.get("pin"):
        if not torch.cuda.is_available():
            raise Skip("pinned memory needs CUDA (torch.cuda.is_available() is False)")
        kw["pin_memory"] = True  # each batch decoded straight into page-locked memory
        res["pinned"] = "PatchLoader(pin_memory=True)"
    res["prefetch"], res["readers"] = spec["prefetch"], spec["readers"]
    return torch, PatchLoader(slides, Replay(batches), (spec["size"],) * 2, batch_size=spec["batch"], num_batches=num_batches,
                              device="cuda" if device_path else None, prefetch=spec["prefetch"], readers=spec["readers"], **kw)


def peer_dataset(torch, kind, paths, locs, size):
    """Map-style dataset of one patch per item read by cuCIM (CPU) or OpenSlide, each worker
    opening its own handles: uint8 tensor (size, size, 3)."""
    import numpy as np
    from torch.utils.data import Dataset

    class PeerDataset(Dataset):
        def __init__(self):
            self.handles = {}

        def __len__(self):
            return len(locs)

        def _handle(self, i):
            h = self.handles.get(i)
            if h is None:
                if kind == "cucim":
                    from cucim import CuImage

                    h = CuImage(paths[i])
                else:
                    import openslide

                    h = openslide.OpenSlide(paths[i])
                self.handles[i] = h
            return h

        def __getitem__(self, k):
            i, x, y = (int(v) for v in locs[k])
            h = self._handle(i)
            if kind == "cucim":
                a = np.asarray(h.read_region((x, y), (size, size), 0))[..., :3]
            else:
                a = np.asarray(h.read_region((x, y), 0, (size, size)))[..., :3]
            return torch.from_numpy(np.ascontiguousarray(a))

    return PeerDataset()


def dataloader(spec, res, kind, n_total):
    """A torch DataLoader (``spec["workers"]`` processes, pin_memory on CUDA) over PatchDataset
    (CPU path), cuCIM or OpenSlide; yields uint8 NHWC host batches."""
    import numpy as np

    torch = tl.need_torch()
    from torch.utils.data import DataLoader

    if kind == "cucim":
        try:
            import cucim
            from cucim import CuImage
        except Exception as e:  # noqa: BLE001
            raise Skip(f"cuCIM: {type(e).__name__}: {e}") from None
        res["version"] = f"cuCIM {getattr(cucim, '__version__', '?')} (CPU read_region)"
        dims = [tuple(CuImage(p).resolutions["level_dimensions"][0]) for p in spec["slides"]]
    elif kind == "openslide":
        try:
            import openslide
        except ImportError as e:
            raise Skip(f"openslide-python: {e}") from None
        res["version"] = f"OpenSlide {openslide.__library_version__}"
        dims = []
        for p in spec["slides"]:
            with openslide.OpenSlide(p) as s:
                dims.append(s.dimensions)
    else:
        slides, dims = open_slides(spec)
        for s in slides:
            s.close()
    batches = tl.make_rows(spec, len(spec["slides"]), n_total, dims)
    rows = np.concatenate(batches)
    locs = rows[:, [0, 2, 3]]
    if kind == "dataset":
        from slidestream.torch import PatchDataset

        ds = PatchDataset(list(spec["slides"]), rows, spec["size"])
    else:
        ds = peer_dataset(torch, kind, list(spec["slides"]), locs, spec["size"])
    workers = spec["peer_workers"] if kind in ("cucim", "openslide") else spec["workers"]
    res["workers"] = workers
    cuda = torch.cuda.is_available()
    dl = DataLoader(ds, batch_size=spec["batch"], shuffle=False, num_workers=workers, pin_memory=cuda,
                    multiprocessing_context="fork" if workers else None, persistent_workers=False)

    def gen():
        for x in dl:
            yield x.permute(0, 2, 3, 1) if kind == "dataset" else x  # PatchDataset collates NCHW

    return torch, gen()


def make_feeder(spec, res, n_total):
    """(torch, model device, iterator of uint8 NHWC batches on that device, closer)."""
    f = spec["feeder"]
    if f == "synthetic":
        torch = tl.need_torch()
        device = "cuda" if torch.cuda.is_available() else "cpu"
        s = spec["size"]
        x = torch.randint(0, 256, (spec["batch"], s, s, 3), dtype=torch.uint8, device=device)

        def fixed():
            while True:
                yield x

        return torch, device, fixed(), lambda: None
    if f == "loader-device":
        torch, ld = loader(spec, res, True, n_total)
        return torch, "cuda", (x for x, _ in ld), ld.close
    torch = tl.need_torch()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if f == "loader-cpu":
        torch, ld = loader(spec, res, False, n_total)
        src, close = (x for x, _ in ld), ld.close
    elif f in ("dataset", "cucim", "openslide"):
        torch, src = dataloader(spec, res, f, n_total)
        close = lambda: None  # noqa: E731
    else:
        raise ValueError(f"unknown feeder {f}")
    res["to_device"] = f".to('{device}', non_blocking=True)"
    return torch, device, (x.to(device, non_blocking=True) for x in src), close


# --------------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------------


def fed_row(spec, res):
    """The model fed by a feeder. The model is built and warmed up first on a fixed tensor
    (``warmup`` steps), then the feeder is started and feeds ``feeder_warmup`` untimed steps,
    then ``steps`` timed steps end with one device synchronisation. ``feeder_warmup`` is
    ``warmup``, and for DataLoader feeders at least prefetch_factor (2) × workers: the batches
    the workers read ahead while they start would otherwise be counted as free."""
    w, n = spec["warmup"], spec["steps"]
    torch = tl.need_torch()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if spec["feeder"] == "loader-device":
        tl.need_gpu()
    step = Step(torch, spec, device)
    s = spec["size"]
    fixed = torch.randint(0, 256, (spec["batch"], s, s, 3), dtype=torch.uint8, device=device)
    for _ in range(w):
        step(fixed)
    sync(torch, device)
    del fixed
    fw = w
    if spec["feeder"] in ("dataset", "cucim", "openslide"):
        workers = spec["peer_workers"] if spec["feeder"] != "dataset" else spec["workers"]
        fw = max(w, 2 * workers)
    res["feeder_warmup"] = fw
    torch, device, it, close = make_feeder(spec, res, fw + n)
    try:
        for _ in range(fw):
            step(next(it))
        sync(torch, device)
        wait = 0.0
        # Where a slow step goes: CUDA events around each step on the model's stream give the
        # device time of the steps and the gaps between them (a gap = the device waited for the
        # host: the loop was late launching); the process's and the loop thread's CPU time say
        # how many cores the process used and how much of the window the loop thread ran.
        marks = [] if device == "cuda" else None
        cpu0, thr0 = os.times(), time.thread_time()
        t0 = time.perf_counter()
        for _ in range(n):
            tw = time.perf_counter()
            x = next(it)
            wait += time.perf_counter() - tw
            if marks is not None:
                a = torch.cuda.Event(enable_timing=True)
                a.record()
            step(x)
            if marks is not None:
                b = torch.cuda.Event(enable_timing=True)
                b.record()
                marks.append((a, b))
            del x
        sync(torch, device)
        dt = time.perf_counter() - t0
        cpu1, thr1 = os.times(), time.thread_time()
    finally:
        close()
    res.update(seconds=dt, images_per_s=n * spec["batch"] / dt, wait_s=wait, device=device)
    res["process_cores"] = round((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / dt, 2)
    res["loop_thread_cpu_share"] = round((thr1 - thr0) / dt, 3)
    if marks:
        busy = sum(a.elapsed_time(b) for a, b in marks) / 1e3
        gaps = sum(marks[i][1].elapsed_time(marks[i + 1][0]) for i in range(len(marks) - 1)) / 1e3
        res.update(device_step_s=round(busy, 4), device_gap_s=round(gaps, 4))
    return res


class BackgroundLoader:
    """PatchLoader(device="cuda") iterated in a background thread that drops each batch and
    records the time it arrived."""

    def __init__(self, spec, res):
        self.torch, self.ld = loader(spec, res, True, 10**7)
        self.times = []
        self.stop = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for x, _ in self.ld:
                del x
                self.times.append(time.perf_counter())
                if self.stop.is_set():
                    break
        except BaseException as e:  # noqa: BLE001
            self.error = e

    def wait_batches(self, k, timeout=120.0):
        t = time.perf_counter()
        while len(self.times) < k and self.thread.is_alive() and time.perf_counter() - t < timeout:
            time.sleep(0.005)
        self.check()

    def check(self):
        if self.error is not None:
            raise RuntimeError(f"background loader failed: {type(self.error).__name__}: {self.error}")
        if not self.thread.is_alive() and not self.stop.is_set():
            raise RuntimeError("background loader ended early")

    def rate(self, t0, t1, batch):
        k = sum(1 for t in self.times if t0 < t <= t1)
        return k * batch / (t1 - t0), k

    def close(self):
        self.stop.set()
        self.thread.join(60)
        self.ld.close()


def profile_steps(torch, spec, res, fn):
    """torch.profiler (CPU + CUDA activity) around ``fn()``; the trace gzipped into --out."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        fn()
        sync(torch, "cuda" if torch.cuda.is_available() else "cpu")
    if spec.get("out"):
        raw = os.path.join(spec["out"], "rows", f"{spec['row']}.trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as fi, gzip.open(raw + ".gz", "wb") as fo:
            shutil.copyfileobj(fi, fo)
        os.remove(raw)
        res["trace_file"] = raw + ".gz"
    res["profile_top"] = prof.key_averages().table(sort_by="cuda_time_total" if torch.cuda.is_available() else "cpu_time_total",
                                                    row_limit=15)


def loader_alone_row(spec, res):
    """The device loader in a background thread, the main thread idle: its standalone rate."""
    tl.need_gpu()
    bg = BackgroundLoader(spec, res)
    try:
        w, n = spec["warmup"], spec["steps"]
        bg.wait_batches(w + n)
        t0, t1 = bg.times[w - 1] if w else bg.times[0], bg.times[w + n - 1]
        res.update(loader_patches_per_s=(n if w else n - 1) * spec["batch"] / (t1 - t0), seconds=t1 - t0)
    finally:
        bg.close()
    return res


def loader_bg_row(spec, res):
    """The device loader in a background thread while the main thread trains (or infers) on a
    fixed device tensor; ``sync_each`` synchronises the device after every step."""
    tl.need_gpu()
    bg = BackgroundLoader(spec, res)
    torch = bg.torch
    try:
        bg.wait_batches(2)
        step = Step(torch, spec, "cuda")
        s = spec["size"]
        x = torch.randint(0, 256, (spec["batch"], s, s, 3), dtype=torch.uint8, device="cuda")
        for _ in range(spec["warmup"]):
            step(x)
        torch.cuda.synchronize()
        bg.check()
        t0 = time.perf_counter()
        for _ in range(spec["steps"]):
            step(x)
            if spec.get("sync_each"):
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        bg.check()
        rate, k = bg.rate(t0, t1, spec["batch"])
        res.update(seconds=t1 - t0, images_per_s=spec["steps"] * spec["batch"] / (t1 - t0), loader_patches_per_s=rate, loader_batches=k)
        if spec.get("profile"):
            profile_steps(torch, spec, res, lambda: [step(x) for _ in range(spec["profile_steps"])])
    finally:
        bg.close()
    return res


def loader_other_proc_row(spec, res):
    """The device loader in a background thread of this process while the model trains on a
    fixed tensor in another process (same GPU, no GIL shared)."""
    tl.need_gpu()
    bg = BackgroundLoader(spec, res)
    torch = bg.torch
    child = None
    try:
        bg.wait_batches(2)
        child = subprocess.Popen([sys.executable, os.path.join(HERE, "model_fed.py"), "--_model_proc", json.dumps(spec)],
                                 stdout=subprocess.PIPE, text=True)

        def expect(word):
            while True:
                line = child.stdout.readline()
                if not line:
                    raise RuntimeError(f"model process exited {child.wait()} before {word}")
                if line.startswith(word):
                    return line[len(word):].strip()

        expect("READY")
        t0 = time.perf_counter()
        model = json.loads(expect("TIMED"))
        t1 = time.perf_counter()
        bg.check()
        rate, k = bg.rate(t0, t1, spec["batch"])
        res.update(seconds=t1 - t0, loader_patches_per_s=rate, loader_batches=k, images_per_s=model["images_per_s"],
                   model_seconds=model["seconds"])
        if spec.get("profile"):
            profile_steps(torch, spec, res, lambda: expect("END"))
        child.wait(60)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        bg.close()
    return res


def model_proc_main(spec_json: str) -> int:
    """The other process of loader_other_proc_row: READY after warm-up, TIMED {json} after the
    timed steps, then (with --profile) ``profile_steps`` more steps and END."""
    spec = json.loads(spec_json)
    torch = tl.need_torch(cuda=True)
    step = Step(torch, spec, "cuda")
    s = spec["size"]
    x = torch.randint(0, 256, (spec["batch"], s, s, 3), dtype=torch.uint8, device="cuda")
    for _ in range(spec["warmup"]):
        step(x)
    torch.cuda.synchronize()
    print("READY", flush=True)
    t0 = time.perf_counter()
    for _ in range(spec["steps"]):
        step(x)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print("TIMED " + json.dumps({"seconds": dt, "images_per_s": spec["steps"] * spec["batch"] / dt}), flush=True)
    if spec.get("profile"):
        for _ in range(spec["profile_steps"]):
            step(x)
        torch.cuda.synchronize()
    print("END", flush=True)
    return 0


ROWS = {"fed": fed_row, "loader-alone": loader_alone_row, "loader-bg": loader_bg_row, "loader-other-proc": loader_other_proc_row}


def worker_main(spec_json: str, result_prefix: str) -> int:
    spec = json.loads(spec_json)
    res = {k: spec[k] for k in ("row", "model", "feeder", "batch", "steps", "warmup", "size", "crop") if k in spec}
    try:
        ROWS[spec["kind"]](spec, res)
        res["status"] = "ok"
        if os.environ.get("SLIDESTREAM_GPU_TRACE") and spec["feeder"] in ("loader-device",):
            import slidestream

            try:
                res["gpu_stats"] = {k: v for k, v in slidestream.gpu_stats().items() if isinstance(v, (int, float, str))}
            except Exception as e:  # noqa: BLE001
                res["gpu_stats"] = f"{type(e).__name__}: {e}"
    except Skip as e:
        res = {"row": spec["row"], "status": "skipped", "reason": str(e)}
    print(result_prefix + json.dumps(res), flush=True)
    return 0
