"""Device reads on several GPUs (issue 18): ``device="cuda:N"`` on every visible device gives
pixels equal to the CPU path in memory of device N (DLPack device ``(kDLCUDA, N)``, the CUDA
Array Interface pointer on device N as the driver reports it); an ordinal past the device count
raises :class:`slidestream.GpuUnavailableError` and the other devices keep reading; two
threads read on two devices at once; a read leaves the calling thread's current CUDA context
(torch's current device) as it was; ``device="cuda"`` under torch means torch's current device.

Skipped without a usable GPU (``slidestream.cuda_available()``); the tests needing two devices
skip with fewer; torch tests skip without torch. The driver is asked through ctypes (libcuda),
never through slidestream.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import pathlib
import subprocess
import sys
import threading
from typing import List

import numpy as np
import pytest

import slidestream
from slidestream import GpuError, GpuUnavailableError, PatchBatches, Slide

REPO = pathlib.Path(__file__).resolve().parents[2]
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"
HAS_GPU = slidestream.cuda_available()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="no usable CUDA device (slidestream.cuda_available() is False)")
HAS_TORCH = importlib.util.find_spec("torch") is not None
JPEG_TOLERANCE = 2
#: CUpointer_attribute CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL (cuda.h).
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
#: Generous bound telling a hang from a slow machine (not a speed threshold).
HANG_S = 300.0


def device_count() -> int:
    return len(slidestream.gpu_probe()["devices"])


def libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def pointer_device(ptr: int) -> int:
    """The device ordinal the driver says ``ptr`` lives on."""
    out = ctypes.c_int(-1)
    rc = libcuda().cuPointerGetAttribute(ctypes.byref(out), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ctypes.c_uint64(ptr))
    assert rc == 0, f"cuPointerGetAttribute returned {rc}"
    return out.value


def current_context() -> int:
    c = ctypes.c_void_p()
    assert libcuda().cuCtxGetCurrent(ctypes.byref(c)) == 0
    return c.value or 0


def max_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()) if a.size else 0


LOCS = [(0, 0), (100, 200), (1500, 2000), (-30, -40), (2100, 2900)]


@requires_gpu
def test_every_device_reads_like_the_cpu_into_its_own_memory():
    n = device_count()
    with Slide(CMU) as s:
        ref = s.read_regions(LOCS, 0, (256, 192))
        for dev in range(n):
            d = s.read_regions(LOCS, 0, (256, 192), device=f"cuda:{dev}")
            assert d.__dlpack_device__() == (2, dev)
            assert repr(d).endswith(f"device='cuda:{dev}')")
            ptr = d.__cuda_array_interface__["data"][0]
            assert pointer_device(ptr) == dev
            assert max_diff(d.numpy(), ref) <= JPEG_TOLERANCE
            one = s.read_region((100, 200), 0, (300, 200), device=dev)
            assert one.__dlpack_device__() == (2, dev) and pointer_device(one.__cuda_array_interface__["data"][0]) == dev
            rows = np.array([(0, 0, x, y) for x, y in LOCS], np.int64)
            rp = slidestream.read_patches([s], rows, (256, 192), device=f"cuda:{dev}")
            assert rp.__dlpack_device__() == (2, dev) and pointer_device(rp.__cuda_array_interface__["data"][0]) == dev
            assert max_diff(rp.numpy(), slidestream.read_patches([s], rows, (256, 192))) <= JPEG_TOLERANCE


@requires_gpu
def test_a_bad_ordinal_raises_and_the_other_devices_keep_reading():
    n = device_count()
    with Slide(CMU) as s:
        ref = s.read_region((0, 0), 0, (128, 128))
        for bad in (n, n + 5):
            for _ in range(2):  # a failed start is not remembered as a half-made engine
                with pytest.raises(GpuUnavailableError, match=str(bad)) as info:
                    s.read_region((0, 0), 0, (128, 128), device=f"cuda:{bad}")
                assert isinstance(info.value, GpuError)
            with PatchBatches([s], [(0, 0, 0, 0)], 64, device=bad) as ld:
                with pytest.raises(GpuUnavailableError):
                    list(ld)
            for dev in range(n):
                assert max_diff(s.read_region((0, 0), 0, (128, 128), device=dev).numpy(), ref) <= JPEG_TOLERANCE


@requires_gpu
def test_two_threads_read_on_two_devices_at_once():
    n = device_count()
    if n < 2:
        pytest.skip(f"{n} CUDA device(s); needs 2")
    with Slide(CMU) as s:
        ref = s.read_regions(LOCS * 20, 0, (128, 128))
        errors: List[BaseException] = []
        barrier = threading.Barrier(2)

        def work(dev: int) -> None:
            try:
                barrier.wait()
                for _ in range(10):
                    d = s.read_regions(LOCS * 20, 0, (128, 128), device=dev)
                    assert d.__dlpack_device__() == (2, dev)
                    assert max_diff(d.numpy(), ref) <= JPEG_TOLERANCE
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HANG_S)
            assert not t.is_alive(), "a device thread hangs"
        if errors:
            raise errors[0]


@requires_gpu
def test_a_read_leaves_the_threads_current_context_alone():
    out: dict = {}

    def work() -> None:
        try:
            assert libcuda().cuCtxSetCurrent(ctypes.c_void_p(0)) == 0
            with Slide(CMU) as s:
                d = s.read_region((0, 0), 0, (256, 256), device=0)
                out["after_read"] = current_context()
                d.numpy()
                out["after_copy"] = current_context()
                del d
                out["after_free"] = current_context()
                slidestream.cuda_available()
                out["after_probe"] = current_context()
        except BaseException as e:  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join(HANG_S)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    assert out == {"after_read": 0, "after_copy": 0, "after_free": 0, "after_probe": 0}


@requires_gpu
@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_cuda_means_torchs_current_device_and_reads_do_not_move_it():
    import torch

    n = min(device_count(), torch.cuda.device_count())
    target = n - 1  # the last device: not 0 when there are two
    torch.cuda.set_device(target)
    try:
        assert slidestream._slidestream._parse_device("cuda") == target
        assert slidestream._slidestream._parse_device(torch.device("cuda")) == target
        with Slide(CMU) as s:
            d = s.read_region((0, 0), 0, (64, 64), device="cuda")
            assert d.__dlpack_device__() == (2, target)
            for dev in range(n):  # reads on every device, the tensors freed from this thread
                t = torch.from_dlpack(s.read_region((0, 0), 0, (64, 64), device=dev))
                assert t.device == torch.device("cuda", dev)
                del t
                assert torch.cuda.current_device() == target
            x = torch.zeros(1, device="cuda")
            assert x.device.index == target
        from slidestream.torch import PatchLoader

        with PatchLoader([str(CMU)], [(0, 0, 0, 0), (0, 0, 64, 64)], 32, batch_size=2, device=torch.device("cuda")) as ld:
            (batch, _), = list(ld)
            assert batch.device == torch.device("cuda", target)
        assert torch.cuda.current_device() == target
    finally:
        torch.cuda.set_device(0)


@requires_gpu
def test_visible_devices_are_renumbered_from_zero():
    """With ``CUDA_VISIBLE_DEVICES`` naming one device (as a launcher may set per rank), that
    device is ``cuda:0`` and ``cuda:1`` does not exist (a fresh interpreter)."""
    n = device_count()
    code = (
        "import slidestream, sys\n"
        f"s = slidestream.Slide({str(CMU)!r})\n"
        "d = s.read_region((0, 0), 0, (32, 32), device='cuda:0')\n"
        "assert d.__dlpack_device__() == (2, 0)\n"
        "try:\n    s.read_region((0, 0), 0, (32, 32), device='cuda:1')\n"
        "except slidestream.GpuUnavailableError:\n    print('ok')\n"
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(n - 1))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=HANG_S)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]
