"""The GPU engine next to other GPU work: a model's kernels on PyTorch's default (legacy)
stream or on a stream of its own must never make a read wait, and reads made while other
streams are busy return the same pixels as the CPU path.

* ``test_reads_never_wait_for_*``: a fresh process starts the engine (``SLIDESTREAM_GPU_WARMUP=
  full``, so the lanes are warm), reads some batches once, then blocks a probe stream with
  ``torch.cuda._sleep`` (one thread spinning for many times the reads' duration) and reads the
  same way again: device batches imported into PyTorch with ``torch.from_dlpack`` and dropped,
  another copied to the host. The probe must still be running when the reads are done. A read
  that enqueued anything on the legacy default stream, or called anything that synchronises the
  device (``cuMemFree``, ``cuCtxSynchronize``, a synchronous copy, an allocation with implicit
  synchronisation), would wait for the probe, and the probe would be finished by then. The probe
  is the legacy default stream (PyTorch's default stream: the blocking-stream check) and a
  non-blocking PyTorch stream (the device-wide check).
* ``test_device_reads_under_busy_streams_equal_cpu``: while a thread keeps two streams busy
  with matrix products, many device batches (device cache cleared between some) equal the CPU
  batches, checked on the consumer's stream through PyTorch.
* ``test_stream_priority_setting``: the engine's streams get the device's greatest priority by
  default, 0 with ``normal``; a bad value fails the engine's start with ConfigError.
* ``test_gpu_wait_and_thread_nice_settings``: with blocking waits (the default) or spinning
  ones, and with the engine's threads at a raised nice value, a batch large enough for the
  lanes and the CPU workers equals the CPU path; ``gpu_stats()`` reports both settings; bad
  values fail the engine's start with ConfigError.

GPU only (skipped without ``slidestream.cuda_available()`` or PyTorch with CUDA). No timing
threshold: the probe's length is calibrated from the reads' own duration, and the assertion is
about order (the probe still running), not speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import slidestream
from slidestream import Slide

REPO = Path(__file__).resolve().parents[2]
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"
JPEG_TOLERANCE = 2

HAS_GPU = slidestream.cuda_available()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="no usable CUDA device (slidestream.cuda_available() is False)")


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    return torch


_PROBE = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import torch
    import slidestream

    probe_kind = sys.argv[2]
    s = slidestream.Slide(sys.argv[1])
    W, H = s.dimensions
    rng = np.random.default_rng(7)
    batches = [np.stack([np.zeros(96, np.int64), np.zeros(96, np.int64),
                         rng.integers(0, W - 256, 96), rng.integers(0, H - 256, 96)], axis=1) for _ in range(6)]
    refs = [slidestream.read_patches([s], rows, (256, 256)) for rows in batches]

    def reads():
        diff = 0
        for k, rows in enumerate(batches):
            slidestream.gpu_clear_cache()
            d = slidestream.read_patches([s], rows, (256, 256), device="cuda")
            if k % 2 == 0:
                t = torch.from_dlpack(d)   # consumer stream: torch's current one
                del t, d                   # freed in stream order there, or with a device wait
            else:
                diff = max(diff, int(np.abs(d.cpu().astype(np.int16) - refs[k]).max()))
                del d
        return diff

    reads()                                # warm: buffers grown, kernels loaded
    torch.cuda.synchronize()
    t0 = time.perf_counter(); reads(); torch.cuda.synchronize(); reads_s = time.perf_counter() - t0

    # Cycles per second of torch.cuda._sleep on this device.
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); torch.cuda._sleep(100_000_000); b.record(); b.synchronize()
    per_s = 100_000_000 / (a.elapsed_time(b) / 1e3)
    sleep_s = max(20 * reads_s, 3.0)

    probe = torch.cuda.default_stream() if probe_kind == "legacy" else torch.cuda.Stream()
    with torch.cuda.stream(probe):
        torch.cuda._sleep(int(per_s * sleep_s))
    t0 = time.perf_counter()
    diff = reads()
    under_probe_s = time.perf_counter() - t0
    still_running = not probe.query()
    torch.cuda.synchronize()
    st = slidestream.gpu_stats()
    print(json.dumps({"still_running": still_running, "reads_s": reads_s, "under_probe_s": under_probe_s,
                      "sleep_s": sleep_s, "diff": diff,
                      # nvJPEG on the hardware engines: host bitstreams (POSIX reads) or device
                      # bitstreams (cuFile reads, SLIDESTREAM_COMPAT_MODE=off).
                      "decoded_hardware": st["decoded_hardware"] + st["decoded_device_bitstream"],
                      "decoded_cpu": st["decoded_cpu"], "stream_priority": st["stream_priority"]}))
    """
)


def _run_probe(kind: str) -> dict:
    env = dict(os.environ, SLIDESTREAM_GPU_WARMUP="full")
    out = subprocess.run([sys.executable, "-c", _PROBE, str(CMU), kind], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@requires_gpu
def test_reads_never_wait_for_the_legacy_default_stream():
    """PyTorch's default stream busy: reads (and freeing their imported tensors, whose memory
    is freed in stream order on that very stream) do not wait for it."""
    _torch()
    r = _run_probe("legacy")
    assert r["decoded_hardware"] > 0, f"the GPU lanes decoded nothing, so the probe proves nothing: {r}"
    assert r["diff"] <= JPEG_TOLERANCE, r
    assert r["still_running"], f"the reads waited for the legacy default stream: {r}"


@requires_gpu
def test_reads_never_wait_for_the_whole_device():
    """A non-blocking stream of another library busy: no read synchronises the device."""
    _torch()
    r = _run_probe("side")
    assert r["decoded_hardware"] > 0, f"the GPU lanes decoded nothing, so the probe proves nothing: {r}"
    assert r["diff"] <= JPEG_TOLERANCE, r
    assert r["still_running"], f"a read synchronised the device: {r}"


@requires_gpu
def test_device_reads_under_busy_streams_equal_cpu():
    torch = _torch()
    stop = threading.Event()
    errors = []

    def busy():
        try:
            side = torch.cuda.Stream()
            x = torch.randn(2048, 2048, device="cuda")
            y = torch.randn(2048, 2048, device="cuda")
            while not stop.is_set():
                z = x @ y                      # the default (legacy) stream
                with torch.cuda.stream(side):
                    w = y @ x                  # a non-blocking stream
                del z, w
                torch.cuda.synchronize()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    th = threading.Thread(target=busy, daemon=True)
    th.start()
    try:
        with Slide(CMU) as s:
            W, H = s.dimensions
            rng = np.random.default_rng(11)
            for k in range(30):
                if k % 3 == 0:
                    slidestream.gpu_clear_cache()
                rows = np.stack([np.zeros(128, np.int64), np.zeros(128, np.int64),
                                 rng.integers(-100, W, 128), rng.integers(-100, H, 128)], axis=1)
                ref = slidestream.read_patches([s], rows, (224, 224))
                t = torch.from_dlpack(slidestream.read_patches([s], rows, (224, 224), device="cuda"))
                # Checked on the consumer's (current) stream, as a model would use it.
                sums = t.to(torch.int64).sum(dim=(1, 2, 3)).cpu().numpy()
                diff = int((t.to(torch.int16) - torch.from_numpy(ref).to("cuda", torch.int16)).abs().max())
                assert diff <= JPEG_TOLERANCE, f"batch {k}: max abs diff {diff}"
                ref_sums = ref.astype(np.int64).sum(axis=(1, 2, 3))
                assert np.all(np.abs(sums - ref_sums) <= JPEG_TOLERANCE * 224 * 224 * 3), f"batch {k}"
                del t
    finally:
        stop.set()
        th.join(timeout=60)
    assert not errors, errors


_START = "import json, sys, slidestream\ns = slidestream.Slide(sys.argv[1])\n"
_PRIORITY = _START + "s.read_region((0, 0), 0, (16, 16), device='cuda')\nprint(json.dumps(slidestream.gpu_stats()['stream_priority']))\n"


def _greatest_stream_priority() -> int:
    """The device's greatest stream priority from the driver (cuCtxGetStreamPriorityRange in
    device 0's primary context)."""
    import ctypes

    cu = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    least, greatest = ctypes.c_int(), ctypes.c_int()
    assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    try:
        assert cu.cuCtxPushCurrent_v2(ctx) == 0
        assert cu.cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)) == 0
        cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    finally:
        cu.cuDevicePrimaryCtxRelease_v2(dev)
    return greatest.value


@requires_gpu
def test_stream_priority_setting():
    got = {}
    for value in (None, "high", "normal", "NORMAL"):
        env = {k: v for k, v in os.environ.items() if k != "SLIDESTREAM_GPU_STREAM_PRIORITY"}
        if value is not None:
            env["SLIDESTREAM_GPU_STREAM_PRIORITY"] = value
        out = subprocess.run([sys.executable, "-c", _PRIORITY, str(CMU)], capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        got[value] = json.loads(out.stdout.strip().splitlines()[-1])
    # torch.cuda.Stream.priority_range() reports torch's clamped range (0, -3 on an H200), not
    # the driver's; ask the driver.
    assert got[None] == got["high"] == _greatest_stream_priority(), got
    assert got["normal"] == got["NORMAL"] == 0, got
    env = dict(os.environ, SLIDESTREAM_GPU_STREAM_PRIORITY="urgent")
    bad = _BAD_START
    out = subprocess.run([sys.executable, "-c", bad, str(CMU)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.startswith("ConfigError") and "SLIDESTREAM_GPU_STREAM_PRIORITY" in out.stdout, (out.stdout, out.stderr[-2000:])


# A bad engine setting fails the first open (every setting is checked there) or, when set after
# it, the engine's start: either way a ConfigError naming the variable.
_BAD_START = (
    "import sys, slidestream\ntry:\n    s = slidestream.Slide(sys.argv[1])\n    s.read_region((0, 0), 0, (16, 16), device='cuda')\n"
    "except slidestream.ConfigError as e:\n    print('ConfigError', e)\n"
)

_CONNECTIONS = _START + "s.read_region((0, 0), 0, (16, 16), device='cuda')\nprint(json.dumps(slidestream.gpu_stats()['cuda_connections']))\n"


@requires_gpu
@pytest.mark.parametrize("preset", [None, "8"])
def test_engine_reports_cuda_connections(preset):
    """The engine reports the CUDA_DEVICE_MAX_CONNECTIONS it started under: 32 from
    `import slidestream` when unset, the user's value otherwise."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    if preset is not None:
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = preset
    out = subprocess.run([sys.executable, "-c", _CONNECTIONS, str(CMU)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == int(preset or 32)


_WAIT = _START + textwrap.dedent(
    """
    import numpy as np
    locs = [(x, y) for x in range(0, 1900, 150) for y in range(0, 2600, 170)]
    cpu = s.read_regions(locs, 0, (256, 256))
    for _ in range(3):
        dev = s.read_regions(locs, 0, (256, 256), device="cuda").cpu()
        d = np.abs(dev.astype(np.int16) - cpu.astype(np.int16)).max()
        assert d <= 2, d  # nvJPEG's tiles: within JPEG decoders' rounding of the CPU path
    st = slidestream.gpu_stats()
    print(json.dumps({"wait": st["gpu_wait"], "nice": st["thread_nice"], "cpu": st["decoded_cpu"], "hw": st["decoded_hardware"] + st["decoded_device_bitstream"] + st["decoded_hybrid"] + st["decoded_sm"]}))
    """
)


@requires_gpu
def test_gpu_wait_and_thread_nice_settings():
    got = {}
    for wait, nice in ((None, None), ("block", "5"), ("SPIN", None)):
        env = {k: v for k, v in os.environ.items() if k not in ("SLIDESTREAM_GPU_WAIT", "SLIDESTREAM_THREAD_NICE")}
        env["SLIDESTREAM_GPU_WARMUP"] = "full"  # lanes warm: the batch goes to nvJPEG and the CPU workers
        if wait is not None:
            env["SLIDESTREAM_GPU_WAIT"] = wait
        if nice is not None:
            env["SLIDESTREAM_THREAD_NICE"] = nice
        out = subprocess.run([sys.executable, "-c", _WAIT, str(CMU)], capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        got[(wait, nice)] = json.loads(out.stdout.strip().splitlines()[-1])
    assert got[(None, None)]["wait"] == got[("block", "5")]["wait"] == "block", got
    assert got[("SPIN", None)]["wait"] == "spin", got
    assert got[("block", "5")]["nice"] == 5 and got[(None, None)]["nice"] == 0, got
    for v in got.values():
        assert v["cpu"] > 0 and v["hw"] > 0, got  # both kinds of decoder took part
    for var, bad in (("SLIDESTREAM_GPU_WAIT", "sleep"), ("SLIDESTREAM_THREAD_NICE", "20")):
        env = dict(os.environ, **{var: bad})
        out = subprocess.run([sys.executable, "-c", _BAD_START, str(CMU)], capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0 and out.stdout.startswith("ConfigError") and var in out.stdout, (var, out.stdout, out.stderr[-2000:])
