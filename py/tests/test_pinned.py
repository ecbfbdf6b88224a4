"""Host batches read into a caller's destination: the native read-ahead's ``submit(rows, out=)``
(numpy, runs everywhere) and ``PatchLoader(pin_memory=True)``, which reads each batch straight
into page-locked memory from PyTorch's allocator (needs torch; the pinned reads need CUDA).
No timing thresholds: the speed of pinned batches lives in benches/model_fed.py."""
from __future__ import annotations

import gc
import os
import pathlib

import numpy as np
import pytest

import slidestream
from slidestream import InvalidArgumentError, Slide
from slidestream._slidestream import _Prefetcher

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = DATA / "CMU-1-Small-Region.svs"
SMALL = DATA / "small_aperio.svs"
SIZE = (64, 48)

pytestmark = pytest.mark.skipif(not (CMU.exists() and SMALL.exists()), reason=f"test slides not found under {DATA}")
HOOKS = bool(getattr(slidestream._slidestream, "_test_hooks", False))


def rows(n: int, seed: int) -> np.ndarray:
    """n (slide, level, x, y) rows over both slides, some reaching past the slide's edge (so
    part of those patches is background)."""
    rng = np.random.default_rng(seed)
    r = np.zeros((n, 4), np.int64)
    r[:, 0] = rng.integers(0, 2, n)
    r[:, 2] = rng.integers(-20, 2200, n)
    r[:, 3] = rng.integers(-20, 1500, n)
    return r


@pytest.fixture
def slides():
    s = [Slide(CMU), Slide(SMALL)]
    yield s
    for x in s:
        x.close()


def dest(n: int, fill: int = 7) -> np.ndarray:
    return np.full((n, SIZE[1], SIZE[0], 3), fill, np.uint8)


def test_a_batch_is_read_into_the_given_array(slides):
    pf = _Prefetcher(slides, SIZE, background=(10, 20, 30), readers=2)
    batches = [rows(9, s) for s in range(4)]
    outs = [dest(9) if k % 2 == 0 else None for k in range(4)]  # with and without a destination
    for r, o in zip(batches, outs):
        pf.submit(r) if o is None else pf.submit(r, o)
    for r, o in zip(batches, outs):
        got = pf.take(30)
        want = slidestream.read_patches(slides, r, SIZE, background=(10, 20, 30))
        if o is not None:
            assert got is o, "take returns the destination itself"
        assert got.shape == want.shape and np.array_equal(got, want)
    pf.close()


def test_a_bad_destination_is_refused_before_anything_is_read(slides):
    pf = _Prefetcher(slides, SIZE)
    r = rows(4, 1)
    transposed = np.zeros((4, SIZE[0], SIZE[0], 3), np.uint8).transpose(0, 2, 1, 3)
    read_only = dest(4)
    read_only.setflags(write=False)
    cases = [
        (dest(5), "shape"),  # one patch too many
        (np.zeros((4, SIZE[1], SIZE[0], 4), np.uint8), "shape"),  # RGBA
        (np.zeros((4, SIZE[1], SIZE[0], 3), np.float32), "uint8"),
        (np.zeros((4, SIZE[1] * SIZE[0] * 3), np.uint8), "4-D"),
        ([[0]], "4-D"),
        (read_only, "writeable"),
    ]
    if SIZE[0] == SIZE[1]:
        cases.append((transposed, "contiguous"))
    for out, word in cases:
        with pytest.raises(ValueError, match=word):
            pf.submit(r, out)
    assert pf.pending() == 0, "a refused batch is not queued"
    good = dest(4)
    pf.submit(r, good)
    assert pf.take(30) is good
    pf.close()


def test_a_non_contiguous_destination_is_refused(slides):
    pf = _Prefetcher(slides, SIZE)
    wide = np.zeros((4, SIZE[1], SIZE[0] * 2, 3), np.uint8)[:, :, ::2]  # right shape, strided
    assert wide.shape == (4, SIZE[1], SIZE[0], 3)
    with pytest.raises(ValueError, match="contiguous"):
        pf.submit(rows(4, 2), wide)
    pf.close()


@pytest.mark.skipif(not HOOKS, reason="needs a test-hooks build (_test_stall_next_prefetch)")
def test_dropping_the_prefetcher_mid_read_keeps_the_destination_alive(slides):
    """The only reference to the destination is the job's while its read stalls: dropping the
    prefetcher (no close) and collecting must not free memory a read thread still writes; the
    read finishes into it and the process goes on."""
    slidestream._slidestream._test_stall_next_prefetch(0.5)
    pf = _Prefetcher(slides, SIZE)
    pf.submit(rows(16, 3), dest(16))
    pf.submit(rows(16, 4), dest(16))
    del pf
    gc.collect()
    # Garbage of the same size, allocated while the stalled read is about to write.
    junk = [np.full((16, SIZE[1], SIZE[0], 3), 1, np.uint8) for _ in range(8)]
    deadline = 30.0
    import time

    t0 = time.monotonic()
    while slidestream._slidestream._prefetch_threads() and time.monotonic() - t0 < deadline:
        time.sleep(0.05)
    assert not slidestream._slidestream._prefetch_threads(), "the read thread ends once its read returns"
    assert all((j == 1).all() for j in junk), "no read wrote into memory it did not own"
    # The process goes on: a new prefetcher reads into its destination.
    pf = _Prefetcher(slides, SIZE)
    r, out = rows(5, 5), dest(5)
    pf.submit(r, out)
    assert pf.take(30) is out and np.array_equal(out, slidestream.read_patches(slides, r, SIZE))
    pf.close()


# ---- PatchLoader(pin_memory=True): needs torch ----------------------------------------------


def test_pin_memory_is_checked():
    torch = pytest.importorskip("torch")
    from slidestream.torch import PatchLoader

    one_slide = rows(4, 0) * [0, 1, 1, 1]
    with pytest.raises(InvalidArgumentError, match="True or False"):
        PatchLoader([CMU], one_slide, SIZE, pin_memory=1)
    with pytest.raises(InvalidArgumentError, match="device batches"):
        PatchLoader([CMU], one_slide, SIZE, pin_memory=True, device="cuda")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidArgumentError, match="needs CUDA"):
            PatchLoader([CMU], one_slide, SIZE, pin_memory=True)


@pytest.mark.parametrize("path", ["native", "resize"])
def test_pinned_batches_equal_unpinned_ones(slides, path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("pinned memory needs CUDA")
    from slidestream.torch import PatchLoader

    r = rows(40, 11)
    r[:, 0] = 0  # CMU-1-Small-Region: one level, so mpp=1.0 reads level 0 and halves it
    kw = {"mpp": 1.0} if path == "resize" else {}
    plain = [b for b, _ in PatchLoader(slides[:1], r, SIZE, batch_size=16, **kw)]
    loader = PatchLoader(slides[:1], r, SIZE, batch_size=16, pin_memory=True, **kw)
    pinned = [b for b, _ in loader]
    assert len(plain) == len(pinned) == 3
    for a, b in zip(plain, pinned):
        assert b.is_pinned() and not a.is_pinned()
        assert b.dtype == torch.uint8 and b.shape == a.shape and torch.equal(a, b)
    # A non-blocking copy from a pinned batch, then the batch dropped while the copy may run.
    it = iter(PatchLoader(slides[:1], r, SIZE, batch_size=16, pin_memory=True, **kw))
    copies = []
    for b, _ in it:
        copies.append(b.to("cuda", non_blocking=True))
        del b
    torch.cuda.synchronize()
    for a, c in zip(plain, copies):
        assert torch.equal(a, c.cpu())
