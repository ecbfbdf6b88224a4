"""The prefetching loader (issue 14): ``slidestream.PatchBatches`` and
``slidestream.torch.PatchLoader``.

Batches equal direct ``read_patches`` / ``read_regions`` reads; shuffling is seeded, differs
across epochs and covers every row once; ``drop_last``; ``break`` and re-iteration; the producer
thread is gone and the batches freed after a stop; a slide that fails mid-epoch raises its
slidestream error in the consumer (never a hang: every consumer that could block runs in a
thread joined with a timeout). No timing thresholds. Torch tests skip without torch, device
tests without a GPU.
"""

from __future__ import annotations

import gc
import os
import pathlib
import shutil
import threading
import time
import weakref
from typing import Any, Callable, List

import numpy as np
import pytest

import slidestream
from slidestream import BatchMeta, GpuUnavailableError, InvalidArgumentError, PatchBatches, Slide, SlideError
from slidestream.sampling import GridSampler, RandomPatchSampler

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = DATA / "CMU-1-Small-Region.svs"
SMALL = DATA / "small_aperio.svs"

needs_data = pytest.mark.skipif(not (CMU.exists() and SMALL.exists()), reason=f"test slides not found under {DATA}")
HAS_GPU = slidestream.cuda_available()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="no usable CUDA device (slidestream.cuda_available() is False)")
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU; this machine has one")

#: Generous bound on how long a consumer may take to see the end or an error (not a speed
#: threshold: only what tells a hang from a slow machine).
HANG_S = 120.0
SIZE = (64, 48)


def loader_threads() -> List[Any]:
    """The loaders' threads alive now: Python producer threads (a CPU ``transform``) and
    slidestream's native read-ahead threads (``_prefetch_threads()``, counted, not listed)."""
    py_threads: List[Any] = [t for t in threading.enumerate() if t.name.startswith("slidestream-loader")]
    return py_threads + ["native read-ahead thread"] * slidestream._slidestream._prefetch_threads()


def wait_no_loader_threads() -> bool:
    """Wait (at most HANG_S) for every loader thread to end; whether they did."""
    deadline = time.monotonic() + HANG_S
    while loader_threads() and time.monotonic() < deadline:
        for t in loader_threads():
            if isinstance(t, threading.Thread):
                t.join(0.05)
            else:
                time.sleep(0.05)
    return not loader_threads()


def run_bounded(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread joined with a timeout: its result, or its exception re-raised;
    fails the test if it does not finish (a hang)."""
    out: dict = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(HANG_S)
    assert not t.is_alive(), f"consumer still waiting after {HANG_S} s: a hang"
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.fixture
def slides():
    s = [Slide(CMU), Slide(SMALL)]
    yield s
    for x in s:
        x.close()


def two_slide_rows(slides: List[Slide]) -> np.ndarray:
    """A grid over CMU-1-Small-Region (slide 0) and a few patches of small_aperio (slide 1),
    some past the edges, interleaved so that most batches span both slides."""
    grid = GridSampler(slides[0], SIZE, stride=(300, 400), min_tissue=0).patches
    small = np.array([(1, 0, x, y) for x, y in [(0, 0), (-8, 4), (5, 5), (10, -3), (2, 12), (-30, -30)]], dtype=np.int64)
    rows = np.concatenate([grid, small])
    order = np.random.default_rng(0).permutation(len(rows))
    return rows[order]


def collect(loader: Any) -> List[Any]:
    return run_bounded(lambda: [(b, m) for b, m in loader])


@needs_data
@pytest.mark.parametrize("readers", [1, 3])
def test_batches_equal_direct_reads(slides, readers):
    rows = two_slide_rows(slides)
    loader = PatchBatches(slides, rows, SIZE, batch_size=7, background=(0, 255, 0), readers=readers)
    assert len(loader) == -(-len(rows) // 7)
    got = collect(loader)
    assert len(got) == len(loader)
    for k, (batch, meta) in enumerate(got):
        assert isinstance(meta, BatchMeta) and meta.epoch == 0 and meta.index == k
        want_rows = rows[k * 7 : (k + 1) * 7]
        assert meta.rows.dtype == np.int64 and np.array_equal(meta.rows, want_rows)
        assert np.array_equal(meta.indices, np.arange(k * 7, k * 7 + len(want_rows)))
        assert isinstance(batch, np.ndarray) and batch.dtype == np.uint8 and batch.shape == (len(want_rows), 48, 64, 3)
        assert np.array_equal(batch, slidestream.read_patches(slides, want_rows, SIZE, background=(0, 255, 0)))
    # ... and each patch equals the per-slide read of its row.
    allp = np.concatenate([b for b, _ in got])
    for k, (i, level, x, y) in enumerate(rows):
        want = slides[int(i)].read_regions([(int(x), int(y))], int(level), SIZE, background=(0, 255, 0))[0]
        assert np.array_equal(allp[k], want), k
    assert not loader_threads()


@needs_data
def test_grid_sampler_and_paths(slides):
    grid = GridSampler(slides[0], (128, 128), stride=(500, 500), min_tissue=0)
    with PatchBatches([CMU], grid, (128, 128), batch_size=4, prefetch=1) as loader:
        owned = loader.slides[0]
        got = collect(loader)
        idx = np.concatenate([m.indices for _, m in got])
        assert np.array_equal(idx, np.arange(len(grid)))
        # The indices map each patch to its grid cell (for stitching).
        cells = grid.grid[idx]
        assert cells.shape == (len(grid), 2)
        assert np.array_equal(np.concatenate([b for b, _ in got]), slides[0].read_regions(grid.patches[:, 2:], 0, (128, 128)))
    assert owned.closed, "a slide the loader opened from a path is closed with the loader"
    assert not slides[0].closed
    with pytest.raises(ValueError, match="closed"):
        iter(loader)


@needs_data
def test_shuffle_is_seeded_differs_by_epoch_and_covers_every_row(slides):
    rows = two_slide_rows(slides)

    def epochs(seed: int, n: int) -> List[np.ndarray]:
        loader = PatchBatches(slides, rows, SIZE, batch_size=5, shuffle=True, seed=seed)
        out = []
        for e in range(n):
            got = collect(loader)
            assert all(m.epoch == e for _, m in got)
            idx = np.concatenate([m.indices for _, m in got])
            assert np.array_equal(np.sort(idx), np.arange(len(rows))), "every row once per epoch"
            assert np.array_equal(idx, loader.order(e))
            for b, m in got:
                assert np.array_equal(m.rows, rows[m.indices])
                assert np.array_equal(b, slidestream.read_patches(slides, m.rows, SIZE))
            out.append(idx)
        return out

    a, b, c = epochs(7, 2), epochs(7, 2), epochs(8, 1)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), "same seed, same orders"
    assert not np.array_equal(a[0], a[1]), "epochs differ"
    assert not np.array_equal(a[0], c[0]), "seeds differ"
    # set_epoch replays an epoch's order; seed=None draws a seed that reproduces the run.
    loader = PatchBatches(slides, rows, SIZE, batch_size=5, shuffle=True, seed=7)
    loader.set_epoch(1)
    assert np.array_equal(np.concatenate([m.indices for _, m in collect(loader)]), a[1])
    drawn = PatchBatches(slides, rows, SIZE, batch_size=5, shuffle=True)
    again = PatchBatches(slides, rows, SIZE, batch_size=5, shuffle=True, seed=drawn.seed)
    assert np.array_equal(drawn.order(0), again.order(0))
    # Without shuffle the order is the rows' own.
    assert np.array_equal(PatchBatches(slides, rows, SIZE).order(3), np.arange(len(rows)))


@needs_data
def test_drop_last_and_num_batches(slides):
    rows = two_slide_rows(slides)
    n = len(rows)
    assert n % 4, "the test needs a partial last batch"
    keep = PatchBatches(slides, rows, SIZE, batch_size=4)
    drop = PatchBatches(slides, rows, SIZE, batch_size=4, drop_last=True)
    capped = PatchBatches(slides, rows, SIZE, batch_size=4, num_batches=2)
    assert len(keep) == n // 4 + 1 and len(drop) == n // 4 and len(capped) == 2
    sizes = [b.shape[0] for b, _ in collect(keep)]
    assert sizes == [4] * (n // 4) + [n % 4]
    assert [b.shape[0] for b, _ in collect(drop)] == [4] * (n // 4)
    assert [m.index for _, m in collect(capped)] == [0, 1]
    empty = PatchBatches(slides, np.zeros((0, 4), np.int64), SIZE)
    assert len(empty) == 0 and collect(empty) == []


class ListSampler:
    """A random-style sampler (``.sample(n)``) drawing seeded rows over both slides."""

    def __init__(self, slides: List[Slide], seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.dims = [s.dimensions for s in slides]
        self.calls = 0

    def sample(self, n: int) -> np.ndarray:
        self.calls += 1
        i = self.rng.integers(0, len(self.dims), n)
        out = np.empty((n, 4), np.int64)
        out[:, 0] = i
        out[:, 1] = 0
        for k in range(n):
            w, h = self.dims[i[k]]
            out[k, 2] = self.rng.integers(-10, w)
            out[k, 3] = self.rng.integers(-10, h)
        return out


@needs_data
def test_random_sampler_batches(slides):
    loader = PatchBatches(slides, ListSampler(slides, 3), SIZE, batch_size=6, num_batches=5)
    assert len(loader) == 5
    got = collect(loader)
    want = ListSampler(slides, 3)
    assert [m.index for _, m in got] == list(range(5))
    for b, m in got:
        assert m.indices is None
        assert np.array_equal(m.rows, want.sample(6))
        assert np.array_equal(b, slidestream.read_patches(slides, m.rows, SIZE))
    # The tissue sampler of slidestream.sampling works as it is.
    rs = RandomPatchSampler([slides[0]], SIZE, min_tissue=0.0, seed=1)
    got = collect(PatchBatches([slides[0]], rs, SIZE, batch_size=8, num_batches=3))
    assert [b.shape for b, _ in got] == [(8, 48, 64, 3)] * 3
    for b, m in got:
        assert np.array_equal(b, slidestream.read_patches([slides[0]], m.rows, SIZE))


@needs_data
def test_transform_runs_in_the_producer(slides):
    seen = []

    def transform(batch: np.ndarray) -> Any:
        seen.append(threading.current_thread().name)
        return batch.mean(axis=(1, 2, 3))

    rows = two_slide_rows(slides)[:10]
    got = collect(PatchBatches(slides, rows, SIZE, batch_size=4, transform=transform))
    assert all(name.startswith("slidestream-loader") for name in seen) and len(seen) == 3
    want = slidestream.read_patches(slides, rows, SIZE).mean(axis=(1, 2, 3))
    assert np.allclose(np.concatenate([v for v, _ in got]), want)


@needs_data
@pytest.mark.parametrize("readers", [1, 2])
def test_break_then_reiterate_and_the_thread_is_gone(slides, readers):
    rows = two_slide_rows(slides)
    loader = PatchBatches(slides, rows, SIZE, batch_size=3, prefetch=2, readers=readers)

    def first_then_break() -> int:
        for batch, meta in loader:
            assert loader_threads(), "a producer thread runs while iterating"
            return meta.epoch
        raise AssertionError("no batch")

    assert run_bounded(first_then_break) == 0
    gc.collect()
    assert not loader_threads(), "break + dropping the iterator stops and joins the producer"
    # Re-iterating starts a new epoch, complete.
    got = collect(loader)
    assert [m.epoch for _, m in got] == [1] * len(loader)
    assert np.array_equal(np.concatenate([b for b, _ in got]), slidestream.read_patches(slides, rows, SIZE))
    # Explicit close of an iterator; a new iter() stops the previous one.
    it = iter(loader)
    next(it)
    it.close()
    assert not loader_threads()
    with pytest.raises(StopIteration):
        next(it)
    it1 = iter(loader)
    next(it1)
    it2 = iter(loader)
    with pytest.raises(StopIteration):
        next(it1)
    assert next(it2)[1].epoch == 4
    loader.close()
    assert not loader_threads()


@needs_data
def test_buffers_are_freed(slides):
    rows = two_slide_rows(slides)
    refs: List[weakref.ref] = []

    def track(batch: np.ndarray) -> np.ndarray:
        refs.append(weakref.ref(batch))
        return batch

    loader = PatchBatches(slides, rows, SIZE, batch_size=2, prefetch=3, transform=track)

    def consume_some() -> None:
        for k, (batch, _) in enumerate(loader):  # noqa: F821 (runs before the `del loader` below)
            if k == 2:
                break

    run_bounded(consume_some)
    gc.collect()
    assert len(refs) >= 3
    assert all(r() is None for r in refs), "batches read ahead are dropped when the iteration stops"
    refs.clear()
    run_bounded(lambda: [None for _ in loader])  # noqa: F821 (runs before the `del loader` below)
    gc.collect()
    assert len(refs) == len(loader) and all(r() is None for r in refs)  # noqa: F821 (as above)
    # Batches the consumer keeps stay valid after the loader is gone.
    kept = run_bounded(lambda: [b for b, _ in loader])  # noqa: F821 (as above)
    loader.close()
    del loader
    gc.collect()
    assert np.array_equal(np.concatenate(kept), slidestream.read_patches(slides, rows, SIZE))
    del kept
    gc.collect()
    assert all(r() is None for r in refs)
    assert not loader_threads()


@needs_data
@pytest.mark.parametrize("readers", [1, 2])
def test_a_bad_row_raises_in_the_consumer(slides, readers):
    rows = np.array([(0, 0, 0, 0), (0, 0, 100, 100), (0, 99, 0, 0), (1, 0, 0, 0)], dtype=np.int64)
    loader = PatchBatches(slides, rows, SIZE, batch_size=2, readers=readers)
    it = iter(loader)
    first = run_bounded(lambda: next(it))
    assert first[0].shape == (2, 48, 64, 3)
    with pytest.raises(InvalidArgumentError):
        run_bounded(lambda: next(it))
    with pytest.raises(StopIteration):
        next(it)
    assert not loader_threads()


class GatedSampler:
    """``sample(n)``: batch 0 at once; later batches only once ``gate`` is set, each on
    tiles of its own (tile row ``k`` of CMU-1-Small-Region: 240 px tiles), so that nothing of
    them is read before the test truncates the file."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.k = 0

    def sample(self, n: int) -> np.ndarray:
        k = self.k
        self.k += 1
        if k > 0:
            assert self.gate.wait(HANG_S)
        y = 240 * k + 10
        return np.array([(0, 0, 10 + 240 * j, y) for j in range(n)], dtype=np.int64)


@needs_data
@pytest.mark.parametrize("path", ["native", "thread"])
def test_a_slide_failing_mid_epoch_raises_not_hangs(tmp_path, path):
    """Batch 0 reads; the file is truncated before batch 1 is read (the Python producer path:
    its sampler waits for a gate; the native path: its read waits, a test hook)."""
    if path == "native" and not slidestream._slidestream._test_hooks:
        pytest.skip("needs a test-hooks build")
    copy = tmp_path / "copy.svs"
    shutil.copyfile(CMU, copy)
    slide = Slide(copy, cache_bytes=1 << 20)
    sampler = GatedSampler()
    if path == "native":
        sampler.gate.set()
        slidestream._slidestream._test_stall_next_prefetch(2.0, skip=1)
    loader = PatchBatches([slide], sampler, SIZE, batch_size=4, num_batches=8, prefetch=1,
                          transform=(lambda b: b) if path == "thread" else None)
    it = iter(loader)
    batch, meta = run_bounded(lambda: next(it))
    assert meta.index == 0 and np.array_equal(batch, Slide(CMU).read_regions(meta.rows[:, 2:], 0, SIZE))
    os.truncate(copy, 4096)  # the tile data are gone; the open slide's index is not
    sampler.gate.set()
    # Batch 1 is read after the truncation: its error (OSError naming the file, level and tile)
    # is the very next thing the consumer gets.
    with pytest.raises((SlideError, OSError)) as info:
        run_bounded(lambda: next(it))
    assert "copy.svs" in str(info.value) and "truncated" in str(info.value), info.value
    with pytest.raises(StopIteration):
        next(it)
    assert not loader_threads()
    # The loader can go on (a new epoch) and fails the same way, again without hanging.
    with pytest.raises((SlideError, OSError)):
        run_bounded(lambda: [m.index for _, m in loader])
    slide.close()


@needs_data
def test_timeout_and_stop_of_a_stuck_producer(slides):
    """A CPU ``transform`` puts sampling and reading on a Python producer thread: a sampler
    that hangs there times out in the consumer."""
    gate = threading.Event()

    class Stuck:
        def sample(self, n: int) -> np.ndarray:
            gate.wait(HANG_S)
            return np.zeros((n, 4), np.int64)

    it = iter(PatchBatches(slides, Stuck(), SIZE, batch_size=2, num_batches=3, timeout=0.2, transform=lambda b: b))
    with pytest.raises(TimeoutError):
        run_bounded(lambda: next(it))
    gate.set()
    for t in loader_threads():
        t.join(HANG_S)
    assert not loader_threads(), "the producer stops once its read returns"


@needs_data
@pytest.mark.skipif(not getattr(slidestream._slidestream, "_test_hooks", False), reason="needs a test-hooks build")
def test_timeout_and_stop_of_a_stuck_native_read(slides):
    """Without a CPU transform the reads run on native threads: a read that hangs times out
    in the consumer, the iteration ends, and the thread ends once its read returns."""
    rows = two_slide_rows(slides)
    slidestream._slidestream._test_stall_next_prefetch(3.0)
    it = iter(PatchBatches(slides, rows, SIZE, batch_size=2, prefetch=1, timeout=0.2))
    with pytest.raises(TimeoutError):
        run_bounded(lambda: next(it))
    with pytest.raises(StopIteration):
        next(it)
    assert wait_no_loader_threads(), "the read-ahead thread stops once its read returns"
    # A fresh iteration reads everything.
    got = collect(PatchBatches(slides, rows, SIZE, batch_size=2))
    assert np.array_equal(np.concatenate([b for b, _ in got]), slidestream.read_patches(slides, rows, SIZE))


@needs_data
@pytest.mark.skipif(not getattr(slidestream._slidestream, "_test_hooks", False), reason="needs a test-hooks build")
def test_a_panic_in_a_native_read_is_raised_at_its_batch(slides):
    rows = two_slide_rows(slides)
    it = iter(PatchBatches(slides, rows, SIZE, batch_size=2, prefetch=1))
    first, _ = next(it)
    slidestream._slidestream._test_panic_in_next_call("boom in a read-ahead thread")
    # Batches already read ahead come first; then the one whose read panicked raises.
    with pytest.raises(SlideError, match="internal error.*boom in a read-ahead thread"):
        for _ in range(len(rows)):
            next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert wait_no_loader_threads()


@needs_data
def test_native_read_ahead_does_not_need_the_gil(slides):
    """While the consumer's thread holds the GIL without a break (a C call that never releases
    it, as PyTorch's kernel launches do when the launch queue is full), the read-ahead still
    reads: after it, the batches submitted before are ready at once."""
    import ctypes
    rows = np.concatenate([two_slide_rows(slides)] * 8)
    loader = PatchBatches(slides, rows, SIZE, batch_size=4, prefetch=3, readers=2)
    it = iter(loader)
    pf = it._pf
    # Hold the GIL in C for a while: ctypes calls into libc's usleep through PyDLL (which does
    # not release the GIL). Nothing else in Python can run meanwhile.
    libc = ctypes.PyDLL(None)
    libc.usleep(ctypes.c_uint(1_500_000))
    # Every submitted batch was read during that time: take() finds them ready, with a zero
    # timeout (no waiting at all).
    n = pf.pending()
    assert n >= 2
    got = []
    for _ in range(n):
        b = pf.take(0.0)
        assert b is not None, "a batch submitted before the GIL was held was not read meanwhile"
        got.append(b)
    it.close()
    ref = slidestream.read_patches(slides, rows[: len(got) * 4], SIZE)
    assert np.array_equal(np.concatenate(got), ref)


@needs_data
def test_argument_errors(slides):
    rows = two_slide_rows(slides)
    with pytest.raises(ValueError, match="num_batches"):
        PatchBatches(slides, ListSampler(slides, 0), SIZE)
    with pytest.raises(ValueError, match="shuffle"):
        PatchBatches(slides, ListSampler(slides, 0), SIZE, num_batches=2, shuffle=True)
    with pytest.raises(ValueError):
        PatchBatches(slides, rows[:, :3], SIZE)
    with pytest.raises(TypeError):
        PatchBatches(slides, rows.astype(float), SIZE)
    with pytest.raises(InvalidArgumentError, match="out of range for 2 slide"):
        PatchBatches(slides, [(2, 0, 0, 0)], SIZE)
    assert len(PatchBatches(slides, [], SIZE)) == 0
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            PatchBatches(slides, rows, SIZE, timeout=bad)
    with pytest.raises(TypeError, match="timeout"):
        PatchBatches(slides, rows, SIZE, timeout="5")
    with pytest.raises(TypeError):
        PatchBatches(slides[0], rows, SIZE)
    with pytest.raises(TypeError):
        PatchBatches([slides[0], 3], rows, SIZE)
    with pytest.raises(ValueError):
        PatchBatches([], rows, SIZE)
    for bad in ({"batch_size": 0}, {"prefetch": 0}, {"readers": 0}, {"num_batches": -1}):
        with pytest.raises(ValueError):
            PatchBatches(slides, rows, SIZE, **bad)
    with pytest.raises(FileNotFoundError):
        PatchBatches([DATA / "no-such.svs"], rows, SIZE)
    with pytest.raises(ValueError):
        PatchBatches(slides, rows, SIZE, device="tpu")
    # A bad row from a random sampler is raised in the consumer.
    class Bad:
        def sample(self, n: int) -> np.ndarray:
            return np.zeros((n, 3), np.int64)

    with pytest.raises(ValueError, match="shape"):
        run_bounded(lambda: list(PatchBatches(slides, Bad(), SIZE, num_batches=1)))
    assert "2 slide(s)" in repr(PatchBatches(slides, rows, SIZE))


@no_gpu_only
@needs_data
def test_device_without_gpu_is_a_clear_error(slides):
    with pytest.raises(GpuUnavailableError, match="cuda_available"):
        PatchBatches(slides, two_slide_rows(slides), SIZE, device="cuda")


# ---------------------------------------------------------------------------------------------
# PyTorch


@needs_data
def test_patch_loader_yields_tensors(slides):
    torch = pytest.importorskip("torch")
    from slidestream.torch import PatchLoader

    rows = two_slide_rows(slides)
    loader = PatchLoader(slides, rows, SIZE, batch_size=5, shuffle=True, seed=1)
    got = collect(loader)
    for x, m in got:
        assert isinstance(x, torch.Tensor) and x.dtype == torch.uint8 and x.device.type == "cpu"
        assert tuple(x.shape[1:]) == (48, 64, 3)
        assert np.array_equal(x.numpy(), slidestream.read_patches(slides, m.rows, SIZE))
    f = PatchLoader(slides, rows, SIZE, batch_size=5, transform=lambda x: x.permute(0, 3, 1, 2).float() / 255)
    x, _ = run_bounded(lambda: next(iter(f)))
    assert x.dtype == torch.float32 and tuple(x.shape) == (5, 3, 48, 64)
    assert not loader_threads()


# ---------------------------------------------------------------------------------------------
# GPU

#: Max abs difference per channel between nvJPEG (GPU) and libjpeg-turbo (CPU) decoding.
JPEG_TOLERANCE = 2


@requires_gpu
@needs_data
def test_device_batches_match_cpu(slides):
    rows = two_slide_rows(slides)
    got = collect(PatchBatches(slides, rows, SIZE, batch_size=6, device="cuda"))
    for b, m in got:
        assert isinstance(b, slidestream.DeviceArray)
        host = b.cpu()
        want = slidestream.read_patches(slides, m.rows, SIZE)
        assert host.shape == want.shape
        assert int(np.abs(host.astype(np.int16) - want).max()) <= JPEG_TOLERANCE


@requires_gpu
@needs_data
def test_patch_loader_device_tensors_and_dataset(slides):
    torch = pytest.importorskip("torch")
    from slidestream.torch import PatchDataset, PatchLoader

    rows = two_slide_rows(slides)
    refs: List[weakref.ref] = []
    loader = PatchLoader(slides, rows, SIZE, batch_size=6, device="cuda", prefetch=2)
    got = collect(loader)
    for x, m in got:
        assert x.is_cuda and x.dtype == torch.uint8 and tuple(x.shape[1:]) == (48, 64, 3)
        want = slidestream.read_patches(slides, m.rows, SIZE)
        assert int((x.cpu().numpy().astype(np.int16) - want).__abs__().max()) <= JPEG_TOLERANCE
        refs.append(weakref.ref(x))
    del got, x
    gc.collect()
    assert all(r() is None for r in refs)
    # PatchDataset's device batches: one cross-slide read, the same pixels as its CPU batches.
    locs = rows[:, [0, 2, 3]]
    dev = PatchDataset(slides, locs, 0, SIZE, device="cuda")
    cpu = PatchDataset(slides, locs, 0, SIZE)
    idx = list(range(0, len(rows), 2))
    a = torch.stack(dev.__getitems__(idx)).cpu().numpy().astype(np.int16)
    b = torch.stack(cpu.__getitems__(idx)).numpy()
    assert int(np.abs(a - b).max()) <= JPEG_TOLERANCE


@needs_data
@pytest.mark.parametrize("delay", [0.0, 0.05])
@pytest.mark.parametrize("readers", [1, 2])
def test_a_loader_made_in_the_for_statement_yields_every_batch(slides, delay, readers):
    """``for b, m in PatchBatches(...)`` (no other reference to the loader, as in the
    grid-inference example): every batch arrives, with a fast and a slow consumer."""
    grid = GridSampler(slides[0], SIZE, stride=(250, 250), min_tissue=0)
    n = len(grid.patches)

    def consume() -> List[int]:
        seen = []
        for _batch, meta in PatchBatches([CMU], grid, SIZE, batch_size=4, readers=readers):
            seen.extend(meta.indices.tolist())
            time.sleep(delay)
        return seen

    for _ in range(3):
        assert sorted(run_bounded(consume)) == list(range(n))
        gc.collect()
        assert not loader_threads()
