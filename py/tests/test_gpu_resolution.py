"""Device batches at a physical resolution (``mpp=`` / ``magnification=`` with ``device=``): read
on the GPU at each slide's chosen level and reduced there by ``_resize_patches_device`` with the
CPU path's integer filter taps, so every device batch equals the CPU batch byte for byte. The
GPU tests skip without a usable CUDA device; the argument checks that need no GPU run
everywhere."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import slidestream
from slidestream import InvalidArgumentError, PatchBatches, Slide
from slidestream.sampling import GridSampler
from slidestream._slidestream import _resize_patches_device
from slidestream.resolution import resize_patches

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "assets" / "CMU-1-Small-Region.svs"  # 2220 x 2967, one level, mpp 0.499
CMU = BUNDLED  # a private copy while the GPU tests run (fixture below)
HAS_GPU = slidestream.cuda_available()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="no usable CUDA device (slidestream.cuda_available() is False)")
no_gpu_only = pytest.mark.skipif(HAS_GPU, reason="checks the behaviour without a GPU; this machine has one")


@pytest.fixture(autouse=True, scope="module")
def _private_copy(tmp_path_factory):
    """The device reads here go to a copy of the bundled slide: a slide's I/O statistics are
    per file, and other test modules check that the bundled one was read on the CPU only."""
    global CMU
    copy = tmp_path_factory.mktemp("gpu_resolution") / BUNDLED.name
    shutil.copyfile(BUNDLED, copy)
    CMU = copy
    yield
    CMU = BUNDLED


def _device_patches(slide: Slide, n: int, size, seed: int = 0):
    """n patches of ``size`` (w, h) read on the GPU from random places of the slide: the device
    array and its host copy."""
    rng = np.random.default_rng(seed)
    w, h = slide.dimensions
    locs = np.stack([rng.integers(0, w - size[0], n), rng.integers(0, h - size[1], n)], axis=1)
    dev = slide.read_regions(locs, 0, size, device="cuda")
    return dev, np.asarray(dev)


@requires_gpu
@pytest.mark.parametrize(("src", "dst"), [((512, 512), (256, 256)), ((301, 257), (224, 224)), ((100, 80), (37, 80)),
                                           ((64, 48), (64, 20)), ((50, 50), (120, 90)), ((40, 30), (40, 30))])
def test_device_resize_equals_the_cpu_resize(src, dst):
    with Slide(CMU) as s:
        dev, host = _device_patches(s, 5, src)
        got = _resize_patches_device([(dev, np.arange(5, dtype=np.int64))], 5, dst)
        assert got.shape == (5, dst[1], dst[0], 3)
        assert np.array_equal(np.asarray(got), resize_patches(host, dst))


@requires_gpu
def test_groups_land_at_their_rows_and_many_patches_are_chunked():
    with Slide(CMU) as s:
        a, ha = _device_patches(s, 3, (90, 70), seed=1)
        b, hb = _device_patches(s, 2, (45, 35), seed=2)
        got = np.asarray(_resize_patches_device([(a, np.array([4, 0, 2])), (b, np.array([1, 3]))], 5, (30, 20)))
        want = np.empty((5, 20, 30, 3), np.uint8)
        want[[4, 0, 2]] = resize_patches(ha, (30, 20))
        want[[1, 3]] = resize_patches(hb, (30, 20))
        assert np.array_equal(got, want)
        # More patches than one CUDA grid takes along z (65,535): tiny patches, two chunks.
        n = 70_000
        big = s.read_regions(np.zeros((n, 2), np.int64) + np.arange(n)[:, None] % 500, 0, (6, 5), device="cuda")
        got = np.asarray(_resize_patches_device([(big, np.arange(n, dtype=np.int64)[::-1].copy())], n, (3, 2)))
        assert np.array_equal(got[::-1], resize_patches(np.asarray(big), (3, 2)))


@requires_gpu
def test_device_batches_at_a_resolution_equal_the_cpu_batches():
    with Slide(CMU) as s, Slide(CMU) as t:
        grid = GridSampler([s, t], 128, mpp=1.0, min_tissue=0)
        rows = grid.patches[:40]
        cpu = slidestream.read_patches([s, t], rows, 128, mpp=1.0)
        dev = slidestream.read_patches([s, t], rows, 128, mpp=1.0, device="cuda")
        assert isinstance(dev, slidestream.DeviceArray) and np.array_equal(np.asarray(dev), cpu)
        # Two read sizes in one call (two groups): one slide at 1.0 µm/px via its fallback mpp.
        xy = np.array([[0, 100, 200], [1, 300, 40], [0, 0, 0], [1, 50, 60]], np.int64)
        kw = dict(mpp=1.0)
        cpu = slidestream.read_patches([s, t], xy, 96, **kw)
        assert np.array_equal(np.asarray(slidestream.read_patches([s, t], xy, 96, device="cuda", **kw)), cpu)
        # At exactly the level's scale no resize runs: still the CPU's pixels.
        cpu = slidestream.read_patches([s], xy[:1, :], 64, mpp=0.499)
        assert np.array_equal(np.asarray(slidestream.read_patches([s], xy[:1, :], 64, mpp=0.499, device="cuda")), cpu)
        # Empty requests: an empty device array of the output size.
        assert slidestream.read_patches([s], np.zeros((0, 3), np.int64), 64, mpp=1.0, device="cuda").shape == (0, 64, 64, 3)
        # The loader's device batches at a resolution.
        got = [np.asarray(b) for b, _ in PatchBatches([s, t], grid, 128, batch_size=16, num_batches=2, mpp=1.0, device="cuda")]
        want = [b for b, _ in PatchBatches([s, t], grid, 128, batch_size=16, num_batches=2, mpp=1.0)]
        assert all(np.array_equal(g, w) for g, w in zip(got, want))


@requires_gpu
def test_bad_groups_are_invalid_arguments():
    with Slide(CMU) as s:
        a, _ = _device_patches(s, 2, (20, 20))
        rgba = s.read_region((0, 0), 0, (8, 8), device="cuda")
        for groups, n, size in [
            ([(a, np.array([0, 0]))], 2, (5, 5)),   # an index twice
            ([(a, np.array([0, 1]))], 3, (5, 5)),   # an index not covered
            ([(a, np.array([0, 5]))], 2, (5, 5)),   # out of range
            ([(a, np.array([-1, 0]))], 2, (5, 5)),  # negative
            ([(a, np.array([0]))], 1, (5, 5)),      # fewer indices than patches
            ([(a, np.array([0, 1]))], 2, (0, 5)),   # zero size
            ([(rgba, np.array([0]))], 1, (5, 5)),   # not (m, h, w, 3)
        ]:
            with pytest.raises(InvalidArgumentError):
                _resize_patches_device(groups, n, size)


@no_gpu_only
def test_without_a_gpu_device_batches_at_a_resolution_raise_gpu_unavailable():
    with Slide(CMU) as s:
        with pytest.raises(slidestream.GpuUnavailableError):
            slidestream.read_patches([s], np.array([[0, 0, 0]]), 64, mpp=1.0, device="cuda")
