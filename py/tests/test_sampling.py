"""Tissue masks and samplers on a generated slide whose tissue is known exactly."""

import numpy as np
import pytest

import slidestream
from slidestream.sampling import GridSampler, RandomPatchSampler, otsu_threshold, tissue_mask

tifffile = pytest.importorskip("tifffile")

W, H = 4096, 3072
TISSUE = (1024, 512, 2560, 2048)  # x0, y0, x1, y1 in level-0 pixels (multiples of the mask's 4 px)


def _slide(tmp_path, name, tissue=True):
    img = np.full((H, W, 3), 245, dtype=np.uint8)  # glass
    if tissue:
        x0, y0, x1, y1 = TISSUE
        img[y0:y1, x0:x1] = (200, 90, 160)  # H&E-ish pink
    path = tmp_path / name
    tifffile.imwrite(path, img, tile=(256, 256), photometric="rgb")
    return slidestream.Slide(path)


def _true_fraction(x, y, w, h):
    x0, y0, x1, y1 = TISSUE
    ix = max(0, min(x + w, x1) - max(x, x0))
    iy = max(0, min(y + h, y1) - max(y, y0))
    return ix * iy / (w * h)


def test_otsu_splits_two_populations():
    v = np.concatenate([np.full(1000, 20), np.full(500, 200)]).astype(np.uint8)
    t = otsu_threshold(v)
    assert 20 <= t < 200
    assert otsu_threshold(np.full(10, 7, dtype=np.uint8)) == 255


def test_tissue_mask_finds_the_tissue(tmp_path):
    s = _slide(tmp_path, "a.tif")
    m = tissue_mask(s)
    assert m.mask.shape == (768, 1024) and m.downsample == 4.0
    x0, y0, x1, y1 = (v // 4 for v in TISSUE)
    want = np.zeros_like(m.mask)
    want[y0:y1, x0:x1] = True
    assert np.array_equal(m.mask, want)
    assert m.fraction(1024, 512, 256, 256) == 1.0 and m.fraction(0, 0, 256, 256) == 0.0
    assert abs(m.fraction(1024 - 128, 512, 256, 256) - 0.5) < 1e-9
    with pytest.raises(ValueError):
        tissue_mask(s, method="hue")


def test_random_patches_are_seeded_and_meet_the_tissue_fraction(tmp_path):
    slides = [_slide(tmp_path, "a.tif"), _slide(tmp_path, "blank.tif", tissue=False)]
    a = RandomPatchSampler(slides, (256, 256), min_tissue=0.75, seed=5).sample(300)
    b = RandomPatchSampler(slides, (256, 256), min_tissue=0.75, seed=5).sample(300)
    c = RandomPatchSampler(slides, (256, 256), min_tissue=0.75, seed=6).sample(300)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert set(a[:, 0]) == {0}, "the slide without tissue is never drawn"
    for _, level, x, y in a:
        assert level == 0 and _true_fraction(int(x), int(y), 256, 256) >= 0.75
    # The patches read in one cross-slide batch.
    batch = slidestream.read_patches(slides, a[:16], (256, 256))
    assert batch.shape == (16, 256, 256, 3)
    # Patches of level 1 (none here: one level) are refused; bad arguments are ValueErrors.
    with pytest.raises(ValueError):
        RandomPatchSampler(slides, (256, 256), level=1)
    with pytest.raises(ValueError):
        RandomPatchSampler(slides, (256, 256), min_tissue=1.5)
    with pytest.raises(ValueError):
        RandomPatchSampler([slides[1]], (256, 256))


def test_area_weighting_follows_tissue_area(tmp_path):
    big = _slide(tmp_path, "a.tif")
    img = np.full((H, W, 3), 245, dtype=np.uint8)
    img[512:1024, 1024:1536] = (200, 90, 160)  # 1/6 of the other slide's tissue
    tifffile.imwrite(tmp_path / "small.tif", img, tile=(256, 256), photometric="rgb")
    small = slidestream.Slide(tmp_path / "small.tif")
    picks = RandomPatchSampler([big, small], (128, 128), min_tissue=0.5, weighting="area", seed=1).sample(700)[:, 0]
    share = (picks == 1).mean()
    assert 0.08 < share < 0.22, share  # expected 1/7
    picks = RandomPatchSampler([big, small], (128, 128), min_tissue=0.5, weighting="slide", seed=1).sample(700)[:, 0]
    assert 0.4 < (picks == 1).mean() < 0.6


def test_grid_sampler_keeps_exactly_the_patches_with_enough_tissue(tmp_path):
    s = _slide(tmp_path, "a.tif")
    every = GridSampler(s, (512, 512))
    assert every.shape == (6, 8) and len(every) == 48
    grid = GridSampler(s, (512, 512), stride=(256, 256), min_tissue=0.5, slide_index=3)
    rows, cols = grid.shape
    assert (rows, cols) == (11, 15)
    kept = {(int(x), int(y)) for _, _, x, y in grid.patches}
    for gy in range(rows):
        for gx in range(cols):
            x, y = gx * 256, gy * 256
            assert ((x, y) in kept) == (_true_fraction(x, y, 512, 512) >= 0.5), (x, y)
    assert set(grid.patches[:, 0]) == {3}
    assert [tuple(g) for g in grid.grid] == [(int(x) // 256, int(y) // 256) for _, _, x, y in grid.patches]


def test_grid_overlap_and_int_sizes(tmp_path):
    """``overlap`` is size − stride; ints are square sizes; bad overlaps are refused."""
    s = _slide(tmp_path, "g.tif")
    a = GridSampler(s, 256, overlap=56)
    b = GridSampler(s, (256, 256), stride=(200, 200))
    assert np.array_equal(a.patches, b.patches) and a.shape == b.shape
    W, H = s.dimensions
    # The last column and row reach the level's edges: every pixel is covered.
    assert a.patches[:, 2].max() + 256 >= W and a.patches[:, 3].max() + 256 >= H
    assert a.patches[:, 2].max() < W and a.patches[:, 3].max() < H
    for bad in ({"overlap": 256}, {"overlap": -1}, {"overlap": 8, "stride": 100}):
        with pytest.raises(ValueError):
            GridSampler(s, 256, **bad)
    r = RandomPatchSampler([s], 128, min_tissue=0.0, seed=3)
    assert r.size == (128, 128) and r.sample(5).shape == (5, 4)
    assert slidestream.read_patches([s], r.sample(3), 64).shape == (3, 64, 64, 3)
