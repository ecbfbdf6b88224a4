"""Device results: ``read_region`` / ``read_regions`` with ``device=``, ``slidestream.DeviceArray``
(DLPack, CUDA Array Interface, host copies), the GPU module functions and GPU errors.

Two groups:

* Tests that run everywhere (CI, machines without a GPU): device-argument parsing, the error a
  device read raises without a GPU, ``gpu_stats`` / ``io_stats`` without initialising CUDA,
  the CPU path unchanged, and the DLPack capsule protocol (names, deleter, ownership) checked
  with numpy on a host-memory capsule built by the same Rust code as the device one.
* GPU tests, skipped unless ``slidestream.cuda_available()``: device reads equal CPU reads on
  every test slide (JPEG within 2 per channel: nvJPEG vs libjpeg-turbo; other codecs exactly,
  they are decoded on the CPU and uploaded), zero-copy import into PyTorch / CuPy that outlives
  the DeviceArray, 16 threads, ``fork`` (refused with GpuForkError) and ``spawn`` workers.
"""

from __future__ import annotations

import ctypes
import gc
import json
import multiprocessing as mp
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any, List, Optional, Tuple

import numpy as np
import pytest

import slidestream
from slidestream import (
    CorruptDataError,
    DeviceArray,
    GpuError,
    GpuForkError,
    GpuUnavailableError,
    Slide,
    SlideError,
)

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"

HAS_GPU = slidestream.cuda_available()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="no usable CUDA device (slidestream.cuda_available() is False)")
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU; this machine has one")

#: Max abs difference per channel between nvJPEG (GPU) and libjpeg-turbo (CPU) decoding.
JPEG_TOLERANCE = 2

GPU_STATS_KEYS = {
    "compat_mode", "io_path", "io_reason",
    "posix_bytes", "posix_requests",
    "cufile_gds_bytes", "cufile_gds_requests", "cufile_compat_bytes", "cufile_compat_requests",
    "cufile_handle_failures", "cufile_handle_error", "cufile_skip_reason", "tile_bytes", "read_amplification",
    "decoded_hardware", "decoded_device_bitstream", "decoded_hybrid", "decoded_sm", "decoded_sm_partial", "sm_decoder", "decoded_cpu", "decoded_cpu_partial", "gpu_lanes", "cpu_workers",
    "gpu_batch_fallbacks", "cpu_fallback_reason", "nvjpeg_backend", "hardware_engines", "kernel_cache", "warmup", "stream_priority", "cuda_connections", "gpu_wait", "thread_nice",
    "cache_hits", "cache_misses", "cache_evictions", "cache_insertions", "cache_entries",
    "cache_resident_bytes", "cache_capacity_bytes", "device_tile_bytes",
}  # fmt: skip

SLIDE_SUFFIXES = {".svs", ".tif", ".tiff", ".ndpi"}


def ifd0_compression(path: Path) -> Optional[int]:
    """TIFF Compression tag (259) of IFD 0, read with tifffile, or None if it cannot parse it."""
    import tifffile

    try:
        with tifffile.TiffFile(path) as tf:
            return int(tf.pages[0].tags["Compression"].value)
    except Exception:  # noqa: BLE001 - not a TIFF (broken.svs): no tolerance question
        return None


def readable_slides() -> List[Path]:
    """Every test slide slidestream opens and reads (the bundled CMU-1-Small-Region.svs first),
    for parametrisation; files that fail to open or to read a pixel are left out."""
    out = [CMU]
    if DATA.is_dir():
        for p in sorted(DATA.iterdir()):
            if not p.is_file() or p.suffix.lower() not in SLIDE_SUFFIXES or p.name == CMU.name:
                continue
            try:
                with Slide(p) as s:
                    s.read_region((0, 0), s.level_count - 1, (1, 1))
            except (SlideError, OSError):
                continue
            out.append(p)
    return out


SLIDES = readable_slides()


def tolerance(path: Path) -> int:
    return JPEG_TOLERANCE if ifd0_compression(path) == 7 else 0


def max_diff(a: np.ndarray, b: np.ndarray) -> int:
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.size == 0:
        return 0
    return int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max())


def regions(slide: Slide, level: int) -> List[Tuple[Tuple[int, int], Tuple[int, int]]]:
    """(level-0 location, size) pairs on ``level``: origin, centre, across tile boundaries,
    across the right/bottom edges, partly negative, wholly outside, a single pixel."""
    W, H = slide.level_dimensions[level]
    ds = slide.level_downsamples[level]
    tw, th = slide.level_tile_sizes[level]
    w, h = min(257, W + 10), min(193, H + 10)
    px = [
        ((0, 0), (w, h)),
        ((W // 2 - w // 2, H // 2 - h // 2), (w, h)),
        ((max(tw - 7, 0), max(th - 5, 0)), (w, h)),
        ((W - w // 2, H - h // 3), (w, h)),
        ((-(w // 2), -(h // 3)), (w, h)),
        ((W + 50, H + 50), (w, h)),
        ((W - 1, H - 1), (1, 1)),
    ]
    return [((int(x * ds), int(y * ds)), size) for (x, y), size in px]


# --- everywhere -----------------------------------------------------------------------------


def test_cuda_available_is_a_bool_and_never_raises():
    for _ in range(3):
        assert slidestream.cuda_available() in (True, False)


def test_exception_hierarchy_and_exports():
    assert issubclass(GpuError, SlideError)
    assert issubclass(GpuUnavailableError, GpuError)
    assert issubclass(GpuForkError, GpuError)
    assert not issubclass(GpuForkError, GpuUnavailableError)
    for name in ("DeviceArray", "cuda_available", "gpu_probe", "gpu_stats", "gpu_reset_stats", "gpu_clear_cache",
                 "GpuUnavailableError", "GpuForkError"):  # fmt: skip
        assert name in slidestream.__all__
        assert getattr(slidestream, name) is not None
    assert DeviceArray.__module__ == "slidestream._slidestream"


def test_device_array_cannot_be_made_from_python():
    with pytest.raises(TypeError):
        DeviceArray()  # type: ignore[call-arg]


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "cuda:", "cuda:-1", "CUDA", " cuda", "cuda:0 ", "cpu:0", -1, True])
def test_bad_device_raises_value_error(device):
    with Slide(CMU) as s:
        with pytest.raises(ValueError, match="invalid device"):
            s.read_region((0, 0), 0, (8, 8), device=device)
        with pytest.raises(ValueError, match="invalid device"):
            s.read_regions([(0, 0)], 0, (8, 8), device=device)
    with pytest.raises(ValueError):
        slidestream.gpu_stats(device)


class FakeTorchDevice:
    def __init__(self, type: str, index: Optional[int] = None) -> None:
        self.type = type
        self.index = index


@pytest.mark.parametrize("device", [1.5, object(), b"cuda", [0]])
def test_device_of_wrong_type_raises_type_error(device):
    with Slide(CMU) as s:
        with pytest.raises(TypeError, match="device must be"):
            s.read_region((0, 0), 0, (8, 8), device=device)


def test_device_parsing():
    parse = slidestream._slidestream._parse_device
    assert parse(None) is None
    assert parse("cpu") is None
    assert parse("cuda") == 0
    assert parse("cuda:3") == 3
    assert parse(2) == 2
    assert parse(np.int64(1)) == 1
    assert parse(FakeTorchDevice("cuda", 1)) == 1
    assert parse(FakeTorchDevice("cuda", None)) == 0
    assert parse(FakeTorchDevice("cpu", None)) is None
    with pytest.raises(ValueError):
        parse(FakeTorchDevice("mps", 0))
    with pytest.raises(ValueError):
        parse(FakeTorchDevice("cuda", -2))


@pytest.mark.parametrize("device", [None, "cpu", FakeTorchDevice("cpu")])
def test_cpu_device_is_the_cpu_path(device):
    counters = ("decoded_cpu", "decoded_hardware", "decoded_hybrid", "posix_bytes", "cufile_gds_bytes", "cufile_compat_bytes")
    before = {k: slidestream.gpu_stats()[k] for k in counters}
    with Slide(CMU) as s:
        ref = s.read_region((1000, 1000), 0, (64, 48))
        got = s.read_region((1000, 1000), 0, (64, 48), device=device)
        assert type(got) is np.ndarray and got.dtype == np.uint8 and got.shape == (48, 64, 4)
        np.testing.assert_array_equal(got, ref)
        ref = s.read_regions([(0, 0), (2000, 2900)], 0, (32, 32), background=7)
        got = s.read_regions([(0, 0), (2000, 2900)], 0, (32, 32), background=7, device=device)
        assert type(got) is np.ndarray and got.shape == (2, 32, 32, 3)
        np.testing.assert_array_equal(got, ref)
        # No device work: no engine in this process ("gpu" absent from the slide's I/O
        # statistics), or one that an earlier test started and these reads left untouched.
        st = s.io_stats()
        assert "gpu" not in st or {k: slidestream.gpu_stats()[k] for k in counters} == before


@no_gpu_only
def test_device_read_without_gpu_raises_gpu_error():
    with Slide(CMU) as s:
        for dev in ("cuda", "cuda:1", 0, FakeTorchDevice("cuda", 0)):
            with pytest.raises(GpuError) as ei:
                s.read_region((0, 0), 0, (16, 16), device=dev)
            assert isinstance(ei.value, GpuUnavailableError)
            assert "GPU unavailable" in str(ei.value) or "without the `cuda` feature" in str(ei.value)
            with pytest.raises(GpuUnavailableError):
                s.read_regions([(0, 0), (5, 5)], 0, (16, 16), device=dev)
        # Nothing reached a GPU: no "gpu" entry, and the CPU path still works.
        assert "gpu" not in s.io_stats()
        assert s.read_region((0, 0), 0, (16, 16)).shape == (16, 16, 4)


def _forked_device_read(path: str) -> str:
    try:
        with Slide(path) as s:
            s.read_region((0, 0), 0, (8, 8), device="cuda")
        return "none"
    except Exception as e:
        return type(e).__name__


@no_gpu_only
@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_forked_child_without_gpu_gets_unavailable_not_fork_error():
    """The fork guard fires only when the parent really initialised CUDA."""
    with Slide(CMU) as s:
        with pytest.raises(GpuUnavailableError):
            s.read_region((0, 0), 0, (8, 8), device="cuda")
    assert not slidestream.cuda_available()
    with mp.get_context("fork").Pool(1) as pool:
        assert pool.apply(_forked_device_read, (str(CMU),)) == "GpuUnavailableError"


@no_gpu_only
def test_gpu_probe_without_gpu_raises_unavailable():
    with pytest.raises(GpuUnavailableError):
        slidestream.gpu_probe()


def test_gpu_stats_has_every_key_and_does_not_initialise_cuda():
    """In a fresh interpreter: gpu_stats() of devices 0 and 1, gpu_reset_stats(),
    gpu_clear_cache() and io_stats() after CPU reads must not load libcuda."""
    script = textwrap.dedent(
        f"""
        import json, slidestream
        out = {{}}
        out["keys"] = sorted(slidestream.gpu_stats())
        out["keys1"] = sorted(slidestream.gpu_stats("cuda:1"))
        st = slidestream.gpu_stats(0)
        out["zero"] = all(v == 0 for k, v in st.items() if not isinstance(v, str))
        out["types"] = {{k: type(v).__name__ for k, v in st.items()}}
        slidestream.gpu_reset_stats()
        slidestream.gpu_clear_cache(0)
        with slidestream.Slide({str(CMU)!r}) as s:
            s.read_region((0, 0), 0, (64, 64))
            out["io"] = sorted(s.io_stats())
        maps = open("/proc/self/maps").read() if __import__("os").path.exists("/proc/self/maps") else ""
        out["libcuda"] = "libcuda" in maps
        print(json.dumps(out))
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    import json

    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(out["keys"]) == GPU_STATS_KEYS, set(out["keys"]) ^ GPU_STATS_KEYS
    assert out["keys1"] == out["keys"]
    assert out["zero"], "an unused device must report zero counters"
    assert out["types"]["read_amplification"] == "float"
    for k in ("compat_mode", "io_path", "io_reason", "cpu_fallback_reason", "nvjpeg_backend"):
        assert out["types"][k] == "str"
    assert out["io"] == ["bytes", "path", "requests"], "no 'gpu' entry before a device read"
    assert not out["libcuda"], "gpu_stats / io_stats loaded libcuda"


def test_gpu_module_functions_validate_device():
    with pytest.raises(ValueError, match="CUDA device"):
        slidestream.gpu_stats("cpu")
    with pytest.raises(ValueError):
        slidestream.gpu_reset_stats(-1)
    with pytest.raises(ValueError):
        slidestream.gpu_clear_cache("tpu")
    assert slidestream.gpu_stats(FakeTorchDevice("cuda", 0)).keys() == GPU_STATS_KEYS


# --- the DLPack capsule protocol, on host memory -------------------------------------------------

_capi = ctypes.pythonapi
_capi.PyCapsule_GetName.restype = ctypes.c_char_p
_capi.PyCapsule_GetName.argtypes = [ctypes.py_object]
_capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _CapsuleProducer:
    """Hands a given capsule to ``numpy.from_dlpack`` (kDLCPU)."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, **_kw: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (1, 0)


# The capsule hooks exist only in test builds (feature `test-hooks`, as scripts/test-all.sh
# builds the extension); test_arguments.py checks that CI's build has them.
needs_test_hooks = pytest.mark.skipif(
    not slidestream._slidestream._test_hooks, reason="extension built without the test-hooks feature"
)


def _releases() -> int:
    return slidestream._slidestream._test_cpu_dlpack_releases()


def test_test_hooks_only_in_test_builds():
    """The DLPack test hooks exist only when the extension is built with the `test-hooks`
    feature (scripts/test-all.sh does); the module says which it is."""
    from slidestream import _slidestream

    hooks = sorted(n for n in vars(_slidestream) if n.startswith("_test_") and n != "_test_hooks")
    assert isinstance(_slidestream._test_hooks, bool)
    if _slidestream._test_hooks:
        assert hooks == [
            "_test_cpu_dlpack",
            "_test_cpu_dlpack_releases",
            "_test_panic_in_next_call",
            "_test_sigint_after_checks",
            "_test_sigint_after_next_call",
            "_test_stall_next_prefetch",
        ]
    else:
        assert hooks == []
    script = (pathlib.Path(__file__).resolve().parents[2] / "scripts" / "test-all.sh").read_text()
    assert "--features test-hooks" in script


@needs_test_hooks
def test_dlpack_capsule_layout():
    cap = slidestream._slidestream._test_cpu_dlpack([2, 3, 5])
    assert _capi.PyCapsule_GetName(cap) == b"dltensor"
    m = _DLManagedTensor.from_address(_capi.PyCapsule_GetPointer(cap, b"dltensor"))
    t = m.dl_tensor
    assert (t.device.device_type, t.device.device_id) == (1, 0)
    assert t.ndim == 3
    assert [t.shape[i] for i in range(3)] == [2, 3, 5]
    assert not t.strides  # NULL: compact row-major
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (1, 8, 1)  # kDLUInt, 8 bits
    assert t.byte_offset == 0
    assert m.deleter and m.manager_ctx
    data = (ctypes.c_uint8 * 30).from_address(t.data)
    assert list(data) == list(range(30))


@needs_test_hooks
def test_unconsumed_capsule_frees_its_tensor():
    before = _releases()
    cap = slidestream._slidestream._test_cpu_dlpack([4, 4])
    assert _releases() == before
    del cap
    gc.collect()
    assert _releases() == before + 1


@needs_test_hooks
def test_consumed_capsule_is_freed_by_the_consumer_only():
    before = _releases()
    cap = slidestream._slidestream._test_cpu_dlpack([3, 7, 2])
    a = np.from_dlpack(_CapsuleProducer(cap))
    assert _capi.PyCapsule_GetName(cap) == b"used_dltensor"
    assert a.shape == (3, 7, 2) and a.dtype == np.uint8 and a.flags.c_contiguous
    np.testing.assert_array_equal(a.ravel(), np.arange(42) % 251)
    del cap  # renamed: the capsule destructor must not free what numpy now owns
    gc.collect()
    assert _releases() == before
    assert int(a.sum()) == sum(range(42))  # still readable
    del a
    gc.collect()
    assert _releases() == before + 1


# --- GPU ------------------------------------------------------------------------------------------


def _slide_id(p: Path) -> str:
    return p.name


@requires_gpu
@pytest.mark.parametrize("path", SLIDES, ids=_slide_id)
def test_device_read_region_equals_cpu(path):
    tol = tolerance(path)
    with Slide(path) as s:
        for level in range(s.level_count):
            for loc, size in regions(s, level):
                ref = s.read_region(loc, level, size)
                d = s.read_region(loc, level, size, device="cuda")
                assert isinstance(d, DeviceArray)
                assert d.shape == ref.shape and d.dtype == np.uint8 and d.ndim == 3 and d.device == 0
                assert d.nbytes == ref.nbytes
                got = d.cpu()
                assert got.dtype == np.uint8 and got.shape == ref.shape
                diff = max_diff(got, ref)
                where = f"{path.name} level {level} location {loc} size {size}"
                assert diff <= tol, f"{where}: max abs diff {diff} > {tol}"
                np.testing.assert_array_equal(got[..., 3], ref[..., 3], err_msg=f"{where}: alpha differs")


@requires_gpu
@pytest.mark.parametrize("path", SLIDES, ids=_slide_id)
def test_device_read_regions_equals_cpu(path):
    tol = tolerance(path)
    with Slide(path) as s:
        for level in range(s.level_count):
            locs = [loc for loc, _ in regions(s, level)]
            W, H = s.level_dimensions[level]
            size = (min(96, W + 3), min(80, H + 3))
            for bg in (255, (10, 200, 30)):
                ref = s.read_regions(locs, level, size, background=bg)
                d = s.read_regions(np.asarray(locs, np.int64), level, size, background=bg, device="cuda:0")
                assert isinstance(d, DeviceArray) and d.shape == ref.shape and len(d) == len(locs)
                diff = max_diff(d.cpu(), ref)
                assert diff <= tol, f"{path.name} level {level} background {bg}: max abs diff {diff} > {tol}"


@requires_gpu
def test_device_array_interfaces():
    with Slide(CMU) as s:
        d = s.read_region((100, 200), 0, (300, 200), device=0)
        ref = s.read_region((100, 200), 0, (300, 200))
    assert d.shape == (200, 300, 4) and d.dtype == np.dtype("uint8") and len(d) == 200
    assert repr(d) == "slidestream.DeviceArray(shape=(200, 300, 4), dtype=uint8, device='cuda:0')"
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "|u1" and cai["shape"] == (200, 300, 4)
    assert cai["strides"] is None and cai["stream"] is None
    ptr, ro = cai["data"]
    assert isinstance(ptr, int) and ptr != 0 and ro is False
    assert d.__dlpack_device__() == (2, 0)
    host = d.numpy()
    assert max_diff(host, ref) <= JPEG_TOLERANCE
    np.testing.assert_array_equal(np.asarray(d), host)
    assert np.asarray(d, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError):
        d.__array__(copy=False)
    # dl_device=(1, 0): a host copy through DLPack.
    a = np.from_dlpack(_CapsuleProducer(d.__dlpack__(dl_device=(1, 0))))
    np.testing.assert_array_equal(a, host)
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError):
        d.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(2, 99))
    with pytest.raises(TypeError):
        d.__dlpack__(stream="default")
    cap = d.__dlpack__(stream=1, max_version=(1, 0))
    assert _capi.PyCapsule_GetName(cap) == b"dltensor"
    m = _DLManagedTensor.from_address(_capi.PyCapsule_GetPointer(cap, b"dltensor"))
    assert (m.dl_tensor.device.device_type, m.dl_tensor.device.device_id) == (2, 0)
    assert m.dl_tensor.data == ptr and m.dl_tensor.ndim == 3
    del cap
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(d)


def _churn_device_memory(s: Slide) -> None:
    """Allocate and free device arrays so freed memory would be reused."""
    for i in range(8):
        x = s.read_regions([(i * 10, i * 10)] * 4, 0, (512, 512), device="cuda")
        del x
    gc.collect()


@requires_gpu
def test_torch_from_dlpack_zero_copy_and_keeps_memory_alive():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    with Slide(CMU) as s:
        d = s.read_regions([(0, 0), (1000, 1500), (2100, 2900)], 0, (256, 256), device="cuda")
        ref = s.read_regions([(0, 0), (1000, 1500), (2100, 2900)], 0, (256, 256))
        ptr = d.__cuda_array_interface__["data"][0]
        t = torch.from_dlpack(d)
        assert t.device.type == "cuda" and t.dtype == torch.uint8 and tuple(t.shape) == ref.shape
        assert t.data_ptr() == ptr, "torch.from_dlpack copied"
        expected = d.cpu()
        assert max_diff(expected, ref) <= JPEG_TOLERANCE
        del d
        gc.collect()
        _churn_device_memory(s)
        np.testing.assert_array_equal(t.cpu().numpy(), expected)
        # Region (RGBA) too, with a torch.device argument.
        r = s.read_region((500, 500), 0, (128, 64), device=torch.device("cuda", 0))
        tr = torch.from_dlpack(r)
        assert tuple(tr.shape) == (64, 128, 4)
        assert max_diff(tr.cpu().numpy(), s.read_region((500, 500), 0, (128, 64))) <= JPEG_TOLERANCE
        del t, tr, r
        gc.collect()


@requires_gpu
def test_cupy_cuda_array_interface_and_dlpack():
    cupy = pytest.importorskip("cupy")
    with Slide(CMU) as s:
        d = s.read_regions([(0, 0), (700, 900)], 0, (200, 100), device="cuda")
        ptr = d.__cuda_array_interface__["data"][0]
        expected = d.cpu()
        c = cupy.asarray(d)  # __cuda_array_interface__
        assert c.data.ptr == ptr and c.shape == d.shape and c.dtype == cupy.uint8
        c2 = cupy.from_dlpack(d)
        assert c2.data.ptr == ptr
        del d
        gc.collect()
        _churn_device_memory(s)
        np.testing.assert_array_equal(cupy.asnumpy(c), expected)
        np.testing.assert_array_equal(cupy.asnumpy(c2), expected)


@requires_gpu
def test_device_read_of_corrupt_tile_raises_like_cpu():
    path = DATA / "unreadable.svs"
    if not path.exists():
        pytest.skip(f"{path} not found")
    with Slide(path) as s:
        for _ in range(2):
            with pytest.raises(CorruptDataError, match="tile"):
                s.read_region((0, 0), 0, (16, 16), device="cuda")
            with pytest.raises(CorruptDataError):
                s.read_regions([(100, 100), (0, 0)], 0, (16, 16), device="cuda")
        # A region missing the image needs no tile and works.
        d = s.read_region((1000, 1000), 0, (8, 8), device="cuda")
        assert not d.cpu().any()


@requires_gpu
def test_stats_after_device_reads():
    slidestream.gpu_clear_cache()
    slidestream.gpu_reset_stats()
    with Slide(CMU) as s:
        s.read_regions([(0, 0), (1000, 1000)], 0, (256, 256), device="cuda")
        st = slidestream.gpu_stats(0)
        assert set(st) == GPU_STATS_KEYS
        decoded = st["decoded_hardware"] + st["decoded_device_bitstream"] + st["decoded_hybrid"] + st["decoded_sm"] + st["decoded_cpu"]
        assert decoded > 0, st
        assert st["tile_bytes"] > 0 and st["read_amplification"] >= 1.0, st
        assert st["io_path"] in ("posix", "cufile", "cufile-compat"), st
        io = s.io_stats()
        assert "gpu" in io and io["gpu"]["device"] == 0
        assert set(io["gpu"]) == GPU_STATS_KEYS | {"device"}
    probe = slidestream.gpu_probe()
    assert probe["devices"] and probe["driver_version"] > 0
    assert isinstance(probe["devices"][0]["name"], str)


@requires_gpu
def test_sixteen_threads_equal_sequential_reads():
    with Slide(CMU) as s:
        rng = np.random.default_rng(7)
        jobs = [(int(x), int(y)) for x, y in zip(rng.integers(-100, 2200, 64), rng.integers(-100, 2900, 64))]
        expected = [s.read_region(loc, 0, (160, 120), device="cuda").cpu() for loc in jobs]
        expected_batch = s.read_regions(jobs, 0, (64, 64), device="cuda").cpu()
        slidestream.gpu_clear_cache()
        results: dict = {}
        errors: list = []
        barrier = threading.Barrier(16)

        def worker(k: int) -> None:
            try:
                barrier.wait()
                for i in range(k, len(jobs), 16):
                    results[i] = s.read_region(jobs[i], 0, (160, 120), device="cuda").cpu()
                results[("batch", k)] = s.read_regions(jobs, 0, (64, 64), device="cuda").cpu()
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for i, ref in enumerate(expected):
            assert max_diff(results[i], ref) == 0, f"region {jobs[i]}: differs from the sequential read"
        for k in range(16):
            assert max_diff(results[("batch", k)], expected_batch) == 0, f"thread {k}: batch differs"


# Set in the parent before forking, read by the forked child.
_INHERITED: Any = None


def _forked_child(path: str) -> Tuple[str, bool, str, str, bool, str, bool, str]:
    """In a forked child: a device read, a host copy of an inherited DeviceArray,
    cuda_available() and gpu_probe()."""
    try:
        with Slide(path) as s:
            s.read_region((0, 0), 0, (32, 32), device="cuda")
        r1 = ("none", False, "")
    except Exception as e:
        r1 = (type(e).__name__, isinstance(e, GpuError), str(e))
    try:
        _INHERITED.cpu()
        r2 = (False, "")
    except Exception as e:
        r2 = (isinstance(e, GpuError), f"{type(e).__name__}: {e}")
    try:
        slidestream.gpu_probe()
        r3 = "none"
    except Exception as e:
        r3 = type(e).__name__
    return (*r1, str(os.getpid()), *r2, slidestream.cuda_available(), r3)


def _spawned_read(args: Tuple[str, Tuple[int, int], Tuple[int, int]]) -> np.ndarray:
    path, loc, size = args
    with Slide(path) as s:
        return s.read_region(loc, 0, size, device="cuda").cpu()


@requires_gpu
@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_forked_child_gets_gpu_fork_error_and_parent_keeps_working():
    global _INHERITED
    with Slide(CMU) as s:
        _INHERITED = s.read_region((0, 0), 0, (32, 32), device="cuda")
        before = _INHERITED.cpu()
        ctx = mp.get_context("fork")
        with ctx.Pool(1) as pool:
            name, is_gpu, msg, child_pid, copy_is_gpu, copy_msg, available, probe = pool.apply(_forked_child, (str(CMU),))
        assert is_gpu and name == "GpuForkError", f"{name}: {msg}"
        assert "fork" in msg and child_pid in msg and str(os.getpid()) in msg, msg
        assert copy_is_gpu and "fork" in copy_msg, copy_msg
        assert available is False, "cuda_available() must be False in a forked child"
        assert probe == "GpuForkError", probe
        # The parent's arrays and the GPU path are unaffected.
        np.testing.assert_array_equal(_INHERITED.cpu(), before)
        again = s.read_region((0, 0), 0, (32, 32), device="cuda").cpu()
        np.testing.assert_array_equal(again, before)
        _INHERITED = None


@requires_gpu
def test_spawned_workers_can_use_the_gpu():
    jobs = [(str(CMU), (i * 200, i * 250), (96, 64)) for i in range(6)]
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        got = pool.map(_spawned_read, jobs)
    with Slide(CMU) as s:
        for (_, loc, size), g in zip(jobs, got):
            assert max_diff(g, s.read_region(loc, 0, size)) <= JPEG_TOLERANCE, loc


@requires_gpu
def test_patch_dataset_on_device_equals_cpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    from slidestream.torch import PatchDataset

    paths = [CMU, CMU]
    locs = [(0, 0, 0), (1, 500, 700), (0, 2100, 2900), (1, -20, 30)]
    cpu = PatchDataset(paths, locs, 0, (64, 48))
    dev = PatchDataset(paths, locs, 0, (64, 48), device="cuda")
    assert "cuda:0" in repr(dev)
    b = dev.read_batch([3, 1, 0, 2])
    assert b.device.type == "cuda" and tuple(b.shape) == (4, 3, 48, 64)
    assert max_diff(b.cpu().numpy(), cpu.read_batch([3, 1, 0, 2]).numpy()) <= JPEG_TOLERANCE
    x = dev[2]
    assert x.device.type == "cuda" and tuple(x.shape) == (3, 48, 64)
    assert max_diff(x.cpu().numpy(), cpu[2].numpy()) <= JPEG_TOLERANCE
    items = dev.__getitems__([0, 1])
    assert len(items) == 2 and all(t.device.type == "cuda" for t in items)
    single = PatchDataset(CMU, [(0, 0), (64, 64)], 0, 32, device=0)
    assert tuple(single.read_batch([0, 1]).shape) == (2, 3, 32, 32)


def test_patch_source_device_argument():
    from slidestream.torch import _PatchSource

    assert _PatchSource(CMU, [(0, 0)], 0, 16).device is None
    assert _PatchSource(CMU, [(0, 0)], 0, 16, device="cuda:1").device == 1
    with pytest.raises(ValueError):
        _PatchSource(CMU, [(0, 0)], 0, 16, device="tpu")


def _cross_slide_rows(slides: List[Slide], n: int, seed: int, size: Tuple[int, int]) -> np.ndarray:
    """``n`` seeded (slide index, level, x, y) rows over every slide and level (level-0 x, y;
    edges and outside included)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        i = int(rng.integers(len(slides)))
        s = slides[i]
        level = int(rng.integers(s.level_count))
        W, H = s.level_dimensions[level]
        ds = s.level_downsamples[level]
        x, y = int(rng.integers(-size[0], W + 20)), int(rng.integers(-size[1], H + 20))
        rows.append((i, level, int(x * ds), int(y * ds)))
    return np.asarray(rows, dtype=np.int64)


@requires_gpu
def test_device_read_patches_across_slides_equals_cpu():
    """Issue 14: one device batch over every readable test slide and level equals the CPU
    batch; a small batch (GPU lanes only) and a large one (CPU decode workers join)."""
    slides = [Slide(p) for p in SLIDES]
    tol = max(tolerance(p) for p in SLIDES)
    try:
        for n, size in ((24, (96, 80)), (1200, (128, 128))):
            slidestream.gpu_clear_cache()
            rows = _cross_slide_rows(slides, n, n, size)
            ref = slidestream.read_patches(slides, rows, size, background=(250, 10, 120))
            d = slidestream.read_patches(slides, rows, size, background=(250, 10, 120), device="cuda")
            assert isinstance(d, DeviceArray) and d.shape == ref.shape == (n, size[1], size[0], 3)
            diff = max_diff(d.cpu(), ref)
            assert diff <= tol, f"{n} patches over {len(slides)} slides: max abs diff {diff} > {tol}"
    finally:
        for s in slides:
            s.close()


@requires_gpu
def test_many_device_batches_never_corrupt_earlier_or_later_ones():
    """Issue 14 (torchvision #9606: nvJPEG's hardware batch decoder reported not to wait for
    the caller's stream on H100-class GPUs): 40 consecutive cross-slide batches reuse the
    engine's bitstream, scratch and output memory; each equals the CPU path, and the batches
    kept alive as torch tensors (zero-copy) keep their pixels while later batches decode."""
    torch = pytest.importorskip("torch")
    slides = [Slide(p) for p in SLIDES]
    tol = max(tolerance(p) for p in SLIDES)
    kept = []
    try:
        for k in range(40):
            if k % 4 == 0:
                slidestream.gpu_clear_cache()
            rows = _cross_slide_rows(slides, 256, 1000 + k, (256, 256))
            ref = slidestream.read_patches(slides, rows, (256, 256))
            d = slidestream.read_patches(slides, rows, (256, 256), device="cuda")
            t = torch.from_dlpack(d)
            got = t.cpu().numpy()
            assert max_diff(got, ref) <= tol, f"batch {k}"
            if k % 3 == 0:
                kept.append((k, got, t))
            del d
        torch.cuda.synchronize()
        for k, got, t in kept:
            np.testing.assert_array_equal(t.cpu().numpy(), got, err_msg=f"batch {k} changed after later batches")
    finally:
        for s in slides:
            s.close()


_FIRST_READS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import slidestream
    with slidestream.Slide(sys.argv[1]) as s:
        locs = [(x, y) for x in range(0, 2000, 250) for y in range(0, 1500, 250)]
        d = s.read_regions(locs, 0, (200, 200), device="cuda").cpu()
        ref = s.read_regions(locs, 0, (200, 200))
        st = slidestream.gpu_stats()
        print(json.dumps({"diff": int(np.abs(d.astype(np.int16) - ref).max()), "cpu": st["decoded_cpu"],
                          "reason": st["cpu_fallback_reason"], "warmup": st["warmup"]}))
    """
)


@requires_gpu
def test_first_reads_of_a_process_decode_on_the_cpu_while_the_lanes_start():
    """Issue 14 (a fast first read): with the default warm-up (``first``) the engine is
    returned before nvJPEG has started, and the reads before the background thread warmed a
    lane decode on the CPU: same pixels, ``decoded_cpu`` counted, the reason given."""
    env = {k: v for k, v in os.environ.items() if k != "SLIDESTREAM_GPU_WARMUP"}
    out = subprocess.run([sys.executable, "-c", _FIRST_READS, str(CMU)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["diff"] == 0, r
    # The background thread needs ~1 s (nvJPEG's handle, a lane's states) before its first
    # warm lane; a read made right after the start finds none.
    assert r["cpu"] > 0 and "still starting" in r["reason"], r
