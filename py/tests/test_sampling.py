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
    every = GridSampler(s, (512, 512), min_tissue=0)
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
    a = GridSampler(s, 256, overlap=56, min_tissue=0)
    b = GridSampler(s, (256, 256), stride=(200, 200), min_tissue=0)
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


# --- masks and slides in every accepted form (no mask is ever ignored) ---------------------------


def _box_mask(shape, box, dtype=bool):
    """A (h, w) mask with ``box`` = (x0, y0, x1, y1) in mask pixels set."""
    m = np.zeros(shape, dtype=dtype)
    x0, y0, x1, y1 = box
    m[y0:y1, x0:x1] = 1 if dtype is not bool else True
    return m


def test_numpy_masks_at_any_scale_are_used_by_both_samplers(tmp_path):
    s = _slide(tmp_path, "a.tif")
    # A mask at 1/16 of level 0 covering only the left quarter of the real tissue: patches
    # must come from there, not from the tissue the thumbnail would find.
    arr = _box_mask((H // 16, W // 16), (64, 32, 96, 128), dtype=np.uint8) * 255
    grid = GridSampler(s, 128, mask=arr)
    assert len(grid) > 0
    assert (grid.patches[:, 2] >= 64 * 16 - 64).all() and (grid.patches[:, 2] + 128 <= 96 * 16 + 64).all()
    assert grid.tissue is not None and (grid.tissue >= 0.5).all()
    keep_all = GridSampler(s, 128, mask=arr, min_tissue=0)
    assert len(keep_all) == 32 * 24 and keep_all.tissue is not None and keep_all.tissue.min() == 0.0
    r = RandomPatchSampler([s], 128, masks=[arr], seed=1).sample(200)
    assert (r[:, 2] >= 64 * 16 - 64).all() and (r[:, 2] + 128 <= 96 * 16 + 64).all()
    # A bool mask at full level-0 size and a callable giving one are the same mask.
    full = np.zeros((H, W), bool)
    full[32 * 16 : 128 * 16, 64 * 16 : 96 * 16] = True
    assert np.array_equal(GridSampler(s, 128, mask=full).patches, grid.patches)
    assert np.array_equal(GridSampler(s, 128, mask=lambda sl: arr).patches, grid.patches)


def test_paths_slides_and_lists_are_accepted_everywhere(tmp_path):
    s = _slide(tmp_path, "a.tif")
    path = str(tmp_path / "a.tif")
    assert np.array_equal(tissue_mask(path).mask, tissue_mask(s).mask)
    both = tissue_mask([path, s], progress=False)
    assert isinstance(both, list) and len(both) == 2 and np.array_equal(both[0].mask, both[1].mask)
    assert np.array_equal(GridSampler(path, 256).patches, GridSampler(s, 256).patches)
    a = RandomPatchSampler([path], 256, seed=2).sample(10)
    b = RandomPatchSampler(s, 256, seed=2).sample(10)
    assert np.array_equal(a, b)
    two = GridSampler([path, s], 512, min_tissue=0, slide_index=1)
    assert two.shapes == [(6, 8), (6, 8)] and len(two) == 96
    assert set(two.patches[:, 0]) == {1, 2}
    with pytest.raises(slidestream.InvalidArgumentError, match="shapes"):
        two.shape
    with pytest.raises(TypeError):
        GridSampler(42, 256)


def test_one_default_min_tissue_and_glass_is_dropped_by_default(tmp_path):
    from slidestream.sampling import DEFAULT_MIN_TISSUE

    s = _slide(tmp_path, "a.tif")
    g, r = GridSampler(s, 512), RandomPatchSampler(s, 512, seed=0)
    assert g.min_tissue == r.min_tissue == DEFAULT_MIN_TISSUE == 0.5
    for _, _, x, y in g.patches:
        assert _true_fraction(int(x), int(y), 512, 512) >= 0.5
    assert len(g) < len(GridSampler(s, 512, min_tissue=0))


def test_masks_that_cannot_be_used_are_errors_saying_why(tmp_path):
    E = slidestream.InvalidArgumentError
    s = _slide(tmp_path, "a.tif")
    other = _slide(tmp_path, "b.tif")
    good = np.ones((H // 8, W // 8), bool)
    cases = [
        (np.ones((H // 8, W // 8), np.float32), "dtype float32"),
        (np.ones((10, 10), bool), "aspect ratio"),
        (np.ones((H // 8, W // 8, 3), np.uint8), "2-d"),
        (np.ones((H * 2, W * 2), bool), "larger than"),
        (np.ones((0, 5), bool), "2-d|empty"),
        (lambda sl: np.ones((3, 3), np.float64), "returned by the callable"),
        (lambda sl: 1 / 0, "ZeroDivisionError"),
    ]
    for bad, why in cases:
        with pytest.raises(E, match=why):
            GridSampler(s, 128, mask=bad)
        with pytest.raises(E, match=why):
            RandomPatchSampler([s], 128, masks=[bad])
    with pytest.raises(E, match="2 masks for 1 slides"):
        RandomPatchSampler([s], 128, masks=[good, good])
    with pytest.raises(E, match="one mask for 2 slides"):
        RandomPatchSampler([s, other], 128, masks=good)
    # A TissueMask made for a slide of another size (here: half the width covered).
    wrong = slidestream.sampling.TissueMask(mask=tissue_mask(s).mask, downsample=2.0, threshold=1, method="saturation")
    with pytest.raises(E, match="another slide"):
        GridSampler(s, 128, mask=wrong)
    with pytest.raises(TypeError):
        GridSampler(s, 128, mask="mask.png")
    with pytest.raises(E, match="positive finite"):
        type(tissue_mask(s))(mask=good, downsample=0, threshold=1, method="x")


def test_sampler_errors_are_the_librarys_and_reprs_say_what_they_hold(tmp_path):
    E = slidestream.InvalidArgumentError
    s = _slide(tmp_path, "a.tif")
    blank = _slide(tmp_path, "blank.tif", tissue=False)
    with pytest.raises(E, match="no slides given"):
        RandomPatchSampler([], 128)
    with pytest.raises(E, match="no slide has tissue"):
        RandomPatchSampler([blank], 128)
    with pytest.raises(E):
        RandomPatchSampler([s], 128, weighting="uniform")
    with pytest.raises(E):
        RandomPatchSampler([s], 128, level=5)
    with pytest.raises(E):
        GridSampler(s, 128, min_tissue=2)
    with pytest.raises(E):
        RandomPatchSampler([s], 128, seed=0).split(3, 2)
    with pytest.raises(E, match="candidate patches in a row"):
        RandomPatchSampler([s], 2048, min_tissue=1.0, max_tries=20, seed=0).sample(5)
    r = repr(RandomPatchSampler([s, s], (256, 128), seed=7))
    assert r.startswith("RandomPatchSampler(2 slides, size=(256, 128), level=0, min_tissue=0.5") and "seed=7" in r
    g = repr(GridSampler(s, 512, min_tissue=0))
    assert "a.tif" in g and "48 of 48 patches" in g and "grid 6x8" in g
    m = repr(tissue_mask(s))
    assert m.startswith("TissueMask(1024x768, downsample=4") and "tissue=" in m and "array(" not in m


def test_tissue_mask_fractions_of_sampler_rows(tmp_path):
    s = _slide(tmp_path, "a.tif")
    m = tissue_mask(s)
    g = GridSampler(s, 256, min_tissue=0, mask=m)
    assert np.allclose(m.fractions(g.patches, 256), g.tissue)
    assert np.allclose(m.fractions(g.patches, 256, s), [_true_fraction(int(x), int(y), 256, 256) for _, _, x, y in g.patches])
    assert 0 < m.tissue_fraction < 1
    arr_mask = slidestream.sampling.TissueMask.from_array(m.mask.astype(np.uint8), s)
    assert arr_mask.method == "array" and arr_mask.downsample == m.downsample


def test_progress_switches(monkeypatch):
    from slidestream import progress

    monkeypatch.delenv("SLIDESTREAM_PROGRESS", raising=False)
    progress.set_enabled(None)
    assert progress.enabled(False) is False and progress.enabled(True) is True
    monkeypatch.setenv("SLIDESTREAM_PROGRESS", "0")
    assert progress.enabled() is False
    assert list(progress.bar([1, 2, 3], desc="x")) == [1, 2, 3]
    monkeypatch.setenv("SLIDESTREAM_PROGRESS", "on")
    assert progress.enabled() is True
    assert list(progress.bar(range(4), desc="x")) == [0, 1, 2, 3]  # with or without tqdm
    progress.set_enabled(False)
    try:
        assert progress.enabled() is False
    finally:
        progress.set_enabled(None)
    monkeypatch.setenv("SLIDESTREAM_PROGRESS", "maybe")
    with pytest.raises(slidestream.InvalidArgumentError, match="SLIDESTREAM_PROGRESS"):
        progress.enabled()
    with pytest.raises(TypeError):
        progress.set_enabled("yes")


def test_preview_tints_the_mask_and_outlines_the_patches(tmp_path):
    pytest.importorskip("PIL")
    from slidestream.sampling import preview

    s = _slide(tmp_path, "a.tif")
    thumb = s.get_thumbnail((512, 512))  # 512 x 384: 8 level-0 px per thumbnail px
    plain = np.asarray(preview(s, max_size=512))
    assert plain.shape == thumb.shape and np.array_equal(plain, thumb)
    tinted = np.asarray(preview(s, mask=True, max_size=512, mask_color=(0, 255, 0), mask_alpha=0.5))
    x0, y0, x1, y1 = (v // 8 for v in TISSUE)
    inside, outside = tinted[y0 + 5 : y1 - 5, x0 + 5 : x1 - 5], tinted[: y0 - 5]
    assert np.array_equal(outside, thumb[: y0 - 5]), "glass is not tinted"
    want = (thumb[y0 + 5 : y1 - 5, x0 + 5 : x1 - 5].astype(np.float32) * 0.5 + np.array([0, 127.5, 0])).round()
    assert np.abs(inside.astype(np.float32) - want).max() <= 1
    rows = np.array([[0, 0, 1024, 512], [1, 0, 0, 0]], np.int64)  # slide 1's row is not drawn
    boxed = np.asarray(preview(s, patches=rows, size=256, max_size=512, patch_color=(255, 0, 0)))
    assert tuple(boxed[512 // 8, 1024 // 8]) == (255, 0, 0) and tuple(boxed[512 // 8, (1024 + 255) // 8]) == (255, 0, 0)
    assert tuple(boxed[5, 5]) == tuple(thumb[5, 5])
    grid = GridSampler(s, 512, slide_index=4)
    g = np.asarray(preview(s, patches=grid, max_size=512, patch_color=(255, 0, 0)))
    assert (g == (255, 0, 0)).all(axis=-1).sum() > 0
    r = RandomPatchSampler(s, 256, seed=3)
    r.sample(3)
    preview(s, patches=r, n=50)
    after = r.sample(3)
    assert np.array_equal(after, (lambda t: (t.sample(3), t.sample(3))[1])(RandomPatchSampler(s, 256, seed=3))), "preview leaves the sampler's stream alone"
    with pytest.raises(slidestream.InvalidArgumentError, match="size="):
        preview(s, patches=rows)
    with pytest.raises(slidestream.InvalidArgumentError, match="aspect"):
        preview(s, mask=np.ones((5, 50), bool))


def test_slide_repr_html_shows_the_slide(tmp_path):
    pytest.importorskip("PIL")
    s = _slide(tmp_path, "a.tif")
    h = s._repr_html_()
    assert "data:image/png;base64," in h and "a.tif" in h and "4,096 × 3,072" in h and "downsample" in h
    s.close()
    assert "a.tif" in s._repr_html_() and "<img" not in s._repr_html_()


def test_progress_bars_over_slides_show_with_tqdm_and_stay_silent_when_off(tmp_path, monkeypatch):
    """With tqdm importable and progress on, GridSampler and RandomPatchSampler over several
    slides and tissue_mask over a list draw a bar (a stand-in tqdm records them); off: none."""
    import sys
    import types

    from slidestream import progress

    made = []

    class FakeTqdm:
        def __init__(self, it, **kw):
            made.append(kw["desc"])
            self.it = it

        def __iter__(self):
            return iter(self.it)

    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    s = _slide(tmp_path, "a.tif")
    t = _slide(tmp_path, "b.tif")
    GridSampler([s, t], 512, progress=True)
    RandomPatchSampler([s, t], 256, progress=True)
    tissue_mask([s, t], progress=True)
    assert made == ["grid", "tissue masks", "tissue masks"]
    made.clear()
    monkeypatch.setenv("SLIDESTREAM_PROGRESS", "0")
    GridSampler([s, t], 512)
    RandomPatchSampler([s, t], 256)
    assert made == []
    with progress.dask_bar():
        pass  # off: a no-op context
