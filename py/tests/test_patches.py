"""slidestream.read_patches: one batch across slides and levels equals per-slide reads."""

import os
import pathlib

import numpy as np
import pytest

import slidestream
from slidestream import InvalidArgumentError, LimitsExceededError, Slide

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
FILES = ["CMU-1-Small-Region.svs", "boxes.tiff", "tcga-cr-7395-01a-01-ts1.svs", "sparse.tiff"]

needs_data = pytest.mark.skipif(not (DATA / "boxes.tiff").exists(), reason=f"test slides not found under {DATA}")


@needs_data
def test_cross_slide_batch_equals_per_slide_reads():
    slides = [Slide(DATA / f) for f in FILES]
    rng = np.random.default_rng(3)
    reqs = []
    for _ in range(60):
        i = int(rng.integers(len(slides)))
        s = slides[i]
        level = int(rng.integers(s.level_count))
        w, h = s.dimensions
        reqs.append((i, level, int(rng.integers(-100, w + 100)), int(rng.integers(-100, h + 100))))
    got = slidestream.read_patches(slides, reqs, (64, 48), background=(0, 255, 0))
    assert got.shape == (60, 48, 64, 3) and got.dtype == np.uint8
    for k, (i, level, x, y) in enumerate(reqs):
        want = slides[i].read_regions([(x, y)], level, (64, 48), background=(0, 255, 0))[0]
        assert np.array_equal(got[k], want), k
    # An integer array of any int dtype gives the same batch.
    for dtype in (np.int32, np.int64, np.uint32):
        arr = np.array([r for r in reqs if r[2] >= 0 and r[3] >= 0], dtype=dtype)
        sel = [k for k, r in enumerate(reqs) if r[2] >= 0 and r[3] >= 0]
        assert np.array_equal(slidestream.read_patches(slides, arr, (64, 48), background=(0, 255, 0)), got[sel])


@needs_data
def test_cross_slide_batch_errors():
    slides = [Slide(DATA / "boxes.tiff"), Slide(DATA / "CMU-1-Small-Region.svs")]
    assert slidestream.read_patches(slides, [], (8, 8)).shape == (0, 8, 8, 3)
    with pytest.raises(InvalidArgumentError, match="slide index 2"):
        slidestream.read_patches(slides, [(2, 0, 0, 0)], (8, 8))
    with pytest.raises(InvalidArgumentError):
        slidestream.read_patches(slides, [(0, 99, 0, 0)], (8, 8))
    with pytest.raises(InvalidArgumentError):
        slidestream.read_patches(slides, [(0, -1, 0, 0)], (8, 8))
    for bad in [[(0, 0, 0)], [(0, 0, 0.5, 1)], {"a": 1}, "0000", np.zeros((2, 4), dtype=float)]:
        with pytest.raises(TypeError):
            slidestream.read_patches(slides, bad, (8, 8))
    with pytest.raises(TypeError):
        slidestream.read_patches([slides[0], "boxes.tiff"], [(0, 0, 0, 0)], (8, 8))
    with pytest.raises(LimitsExceededError):
        slidestream.read_patches(slides, [(0, 0, 0, 0)] * 4, (40000, 40000))
    with pytest.raises(ValueError, match="invalid device"):
        slidestream.read_patches(slides, [(0, 0, 0, 0)], (8, 8), device="gpu")
    assert slidestream.read_patches(slides, [(0, 0, 0, 0)], (8, 8), device="cpu").shape == (1, 8, 8, 3)
    if not slidestream.cuda_available():
        with pytest.raises(slidestream.GpuUnavailableError):
            slidestream.read_patches(slides, [(0, 0, 0, 0)], (8, 8), device="cuda")
    # Argument errors come before any GPU work, with or without a GPU.
    with pytest.raises(InvalidArgumentError, match="slide index 2"):
        slidestream.read_patches(slides, [(2, 0, 0, 0)], (8, 8), device="cuda")
    with pytest.raises(LimitsExceededError):
        slidestream.read_patches(slides, [(0, 0, 0, 0)] * 4, (40000, 40000), device="cuda")
