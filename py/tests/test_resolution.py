"""Reading at a physical resolution: the level chosen, the scale, errors, and patches equal to
an independent resize of OpenSlide's region (the oracle)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import slidestream
from slidestream import InvalidArgumentError, Slide
from slidestream.resolution import Resolution, resize_patches, resolve
from slidestream.sampling import GridSampler, RandomPatchSampler

from _parity_helpers import locate_testdata

REPO = Path(__file__).resolve().parents[2]
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"  # mpp 0.499, objective 20, one level


def _tcga():
    return Slide(locate_testdata() / "tcga-cr-7395-01a-01-ts1.svs")  # two levels (1, 2.0005), no mpp


def test_the_coarsest_level_at_or_below_the_target_is_read():
    with Slide(CMU) as s:
        r = resolve(s, mpp=1.0)
        assert r.level == 0 and abs(r.scale - 1.0 / 0.499) < 1e-9 and r.mpp == 1.0
        assert resolve(s, magnification=10) == Resolution(level=0, scale=2.0, downsample=2.0, mpp=pytest.approx(0.998))
        assert resolve(s, mpp=0.499).scale == 1.0  # level 0 itself: no resize
        with pytest.raises(InvalidArgumentError, match="finer than level 0"):
            resolve(s, mpp=0.25)
        with pytest.raises(InvalidArgumentError, match="exactly one"):
            resolve(s, mpp=1.0, magnification=10)
        with pytest.raises(InvalidArgumentError, match="exactly one"):
            resolve(s)
        with pytest.raises(InvalidArgumentError):
            resolve(s, mpp=-1)
        with pytest.raises(TypeError):
            resolve(s, mpp="1")
    t = _tcga()
    with pytest.raises(InvalidArgumentError, match="no mpp"):
        resolve(t, mpp=1.0)
    with pytest.raises(InvalidArgumentError, match="no objective power"):
        resolve(t, magnification=10)
    # Downsample 2.4: level 1 (2.0005) is the coarsest at or below it.
    r = resolve(t, mpp=0.6, fallback_mpp=0.25)
    assert r.level == 1 and abs(r.scale - 2.4 / t.level_downsamples[1]) < 1e-9
    # Downsample 1.5: only level 0 is at or below.
    assert resolve(t, mpp=0.375, fallback_mpp=0.25).level == 0
    # Exactly a level's downsample (within the tolerance): that level, no resize.
    r = resolve(t, mpp=0.25 * t.level_downsamples[1], fallback_mpp=0.25)
    assert (r.level, r.scale) == (1, 1.0)


def _oracle(path, x, y, level, read_size, out):
    """OpenSlide's region over white, resized with Pillow's Lanczos: computed independently."""
    openslide = pytest.importorskip("openslide")
    from PIL import Image

    reg = openslide.OpenSlide(str(path)).read_region((int(x), int(y)), int(level), read_size)
    bg = Image.new("RGB", reg.size, (255, 255, 255))
    bg.paste(reg, mask=reg.split()[3])
    return np.asarray(bg.resize(out, Image.Resampling.LANCZOS))


def test_mpp_batches_equal_an_independent_resize_of_openslides_region():
    pytest.importorskip("PIL")
    tcga_path = locate_testdata() / "tcga-cr-7395-01a-01-ts1.svs"
    with Slide(CMU) as s, Slide(tcga_path) as t:
        # Level-0 reads of both slides (the fallback 0.6 µm puts the TCGA slide's target
        # downsample at 1.67), and, with a fallback of 0.25 µm (downsample 4), level 1 of it
        # read at the origin: where OpenSlide's region is exactly the level's pixels (reads of
        # levels > 0 off their pixel grid are resampled by OpenSlide, README "accuracy").
        for kw, rows in (
            (dict(mpp=1.0, fallback_mpp=0.6), np.array([(0, 100, 200), (1, 0, 0), (0, 1500, 2000), (1, 2000, 1500), (1, -50, 30)], np.int64)),
            (dict(mpp=1.0, fallback_mpp=0.25), np.array([(1, 0, 0), (0, 7, 9)], np.int64)),
        ):
            got = slidestream.read_patches([s, t], rows, 224, **kw)
            assert got.shape == (len(rows), 224, 224, 3) and got.dtype == np.uint8
            res = [resolve(s, **kw), resolve(t, **kw)]
            assert res[1].level == (0 if kw["fallback_mpp"] == 0.6 else 1) and res[1].scale > 1
            for k, (i, x, y) in enumerate(rows):
                r = res[int(i)]
                want = _oracle(CMU if i == 0 else tcga_path, x, y, r.level, r.read_size((224, 224)), (224, 224))
                # The filter's tolerance: the same resize of pixels within 0-2 of OpenSlide's.
                assert np.abs(want.astype(int) - got[k]).max() <= 3, (kw, k)
        kw = dict(mpp=1.0, fallback_mpp=0.25)
        rows = np.array([(0, 100, 200), (1, 0, 0), (1, 2000, 1500)], np.int64)
        got = slidestream.read_patches([s, t], rows, 224, **kw)
        res = [resolve(s, **kw), resolve(t, **kw)]
        # The same rows with their levels (as a sampler gives them) read the same.
        with_levels = np.insert(rows, 1, [res[int(i)].level for i in rows[:, 0]], axis=1)
        assert np.array_equal(slidestream.read_patches([s, t], with_levels, 224, **kw), got)
        bad = with_levels.copy()
        bad[1, 1] = 0
        with pytest.raises(InvalidArgumentError, match="reads slide 1 from level 1"):
            slidestream.read_patches([s, t], bad, 224, **kw)
        with pytest.raises(InvalidArgumentError, match="no mpp"):
            slidestream.read_patches([s, t], rows, 224, mpp=1.0)
        if not slidestream.cuda_available():  # device batches at a resolution: test_gpu_resolution.py
            with pytest.raises(slidestream.GpuUnavailableError):
                slidestream.read_patches([s], rows[:1], 224, mpp=1.0, device="cuda")
        with pytest.raises(InvalidArgumentError, match="only with mpp"):
            slidestream.read_patches([s], [(0, 0, 0, 0)], 224, fallback_mpp=0.5)


def test_samplers_at_a_resolution_give_rows_read_patches_takes():
    with Slide(CMU) as s:
        d = 1.0 / 0.499
        g = GridSampler(s, 224, mpp=1.0, min_tissue=0)
        w0, h0 = s.dimensions
        cols, rows = -(-(int(np.ceil(w0 / d)) - 224) // 224) + 1, -(-(int(np.ceil(h0 / d)) - 224) // 224) + 1
        assert g.shape == (rows, cols) and g.resolutions[0].level == 0
        assert np.array_equal(g.patches[:, 2][: cols], np.ceil(np.arange(cols) * 224 * d).astype(np.int64))
        batch = slidestream.read_patches([s], g.patches[:6], 224, mpp=1.0)
        assert batch.shape == (6, 224, 224, 3)
        r = RandomPatchSampler(s, 112, magnification=5, seed=1)
        rows4 = r.sample(10)
        assert (rows4[:, 1] == 0).all() and r.resolutions[0].scale == 4.0
        assert slidestream.read_patches([s], rows4, 112, magnification=5).shape == (10, 112, 112, 3)
        # The footprint at 5x is 448 level-0 pixels: patches stay inside the slide.
        assert (rows4[:, 2] + 448 <= w0).all() and (rows4[:, 3] + 448 <= h0).all()
        with pytest.raises(InvalidArgumentError, match="not both"):
            GridSampler(s, 224, level=1, mpp=1.0)
        with pytest.raises(InvalidArgumentError, match="only with mpp"):
            RandomPatchSampler(s, 224, fallback_mpp=0.5)


def test_resize_is_pillows_lanczos_without_pillow(monkeypatch):
    """The native resize equals Pillow's LANCZOS within 2 grey levels on random and smooth
    patches, for reductions by integer and non-integer factors, and needs no Pillow."""
    from PIL import Image

    rng = np.random.default_rng(3)
    noise = rng.integers(0, 256, (3, 90, 70, 3), dtype=np.uint8)
    yy, xx = np.mgrid[0:90, 0:70]
    smooth = np.stack([(xx * 3) % 256, (yy * 2) % 256, (xx + yy) % 256], -1).astype(np.uint8)[None]
    cases = [(noise, (35, 45)), (noise, (23, 31)), (smooth, (35, 45)), (smooth, (64, 80))]
    want = [np.stack([np.asarray(Image.fromarray(p).resize(size, Image.Resampling.LANCZOS)) for p in a]) for a, size in cases]
    import builtins

    real = builtins.__import__

    def no_pil(name, *args, **kw):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    for (a, size), w in zip(cases, want):
        out = resize_patches(a, size)
        assert out.shape == (a.shape[0], size[1], size[0], 3) and out.dtype == np.uint8
        assert np.abs(out.astype(int) - w).max() <= 2, size
    a = noise[:1]
    assert resize_patches(a, (70, 90)) is a
    strided = noise[:, ::2, ::2]  # not contiguous: copied first
    assert np.array_equal(resize_patches(strided, (20, 30)), resize_patches(np.ascontiguousarray(strided), (20, 30)))
    with pytest.raises(ValueError):
        resize_patches(np.zeros((1, 4, 4, 4), np.uint8), (2, 2))
    with pytest.raises(ValueError):
        resize_patches(a, (0, 3))


def test_patch_batches_at_a_resolution_equal_read_patches():
    with Slide(CMU) as s:
        grid = GridSampler(s, 128, mpp=1.0, min_tissue=0)
        got = np.concatenate([b for b, _ in slidestream.PatchBatches([s], grid, 128, batch_size=16, mpp=1.0)])
        assert np.array_equal(got, slidestream.read_patches([s], grid.patches, 128, mpp=1.0))
        r = RandomPatchSampler(s, 64, magnification=5, seed=2)
        batches = [b for b, _ in slidestream.PatchBatches([s], r, 64, batch_size=8, num_batches=2, magnification=5)]
        assert len(batches) == 2 and batches[0].shape == (8, 64, 64, 3)
        if not slidestream.cuda_available():
            with pytest.raises(slidestream.GpuUnavailableError):
                slidestream.PatchBatches([s], grid, 128, mpp=1.0, device="cuda")
        with pytest.raises(InvalidArgumentError, match="only with mpp"):
            slidestream.PatchBatches([s], grid, 128, fallback_mpp=0.5)


def test_dask_patches_at_a_resolution_equal_read_patches_and_openslide():
    """slidestream.dask.read_patches / map_patches take mpp= like read_patches: the same
    pixels (so the same independent resize of OpenSlide's region), on the planned path and
    with batch= (where the levels are chosen in the tasks)."""
    pytest.importorskip("dask")
    pytest.importorskip("PIL")
    import slidestream.dask as ssd

    tcga_path = locate_testdata() / "tcga-cr-7395-01a-01-ts1.svs"
    paths = [str(CMU), str(tcga_path)]
    kw = dict(mpp=1.0, fallback_mpp=0.25)  # CMU: level 0, scale 2.004; TCGA: level 1, scale 2.0
    rows3 = np.array([(0, 100, 200), (1, 0, 0), (0, 1500, 2000), (1, 2000, 1500)], np.int64)
    slides = [Slide(p) for p in paths]
    want = slidestream.read_patches(slides, rows3, 224, **kw)
    for extra in ({}, {"batch": 3}, {"task_tiles": 4}):
        arr = ssd.read_patches(paths, rows3, 224, **kw, **extra)
        assert arr.shape == (4, 224, 224, 3) and arr.dtype == np.uint8
        assert np.array_equal(arr.compute(scheduler="synchronous"), want), extra
    res = [resolve(s, **kw) for s in slides]
    for k in (0, 1):  # the oracle: OpenSlide's region of the level chosen, resized with Lanczos
        i, x, y = rows3[k]
        r = res[int(i)]
        oracle = _oracle(paths[int(i)], x, y, r.level, r.read_size((224, 224)), (224, 224))
        assert np.abs(oracle.astype(int) - want[k]).max() <= 3
    # A sampler's rows at the same resolution (they carry the level) and map_patches' rows.
    grid = GridSampler(paths[0], 112, mpp=2.0)
    got = ssd.read_patches(paths[:1], grid, 112, mpp=2.0).compute(scheduler="synchronous")
    assert np.array_equal(got, slidestream.read_patches(slides[:1], grid.patches, 112, mpp=2.0))
    frame = ssd.map_patches(paths, rows3, lambda b, r: {"mean": b.reshape(len(b), -1).mean(axis=1)}, 224, **kw).compute(scheduler="synchronous")
    frame = frame.sort_index()
    assert frame["level"].tolist() == [res[int(i)].level for i in rows3[:, 0]]
    assert np.allclose(frame["mean"].to_numpy(), want.reshape(4, -1).mean(axis=1))
    # Errors are raised while building the graph, saying why.
    with pytest.raises(InvalidArgumentError, match="no mpp"):
        ssd.read_patches(paths, rows3, 224, mpp=1.0)
    with pytest.raises(InvalidArgumentError, match="not both"):
        ssd.read_patches(paths, rows3, 224, level=0, **kw)
    with pytest.raises(InvalidArgumentError, match="reads slide 1 from level 1"):
        ssd.read_patches(paths, np.array([(1, 0, 0, 0)]), 224, **kw)
    if not slidestream.cuda_available():  # device tasks at a resolution need a GPU, said at build
        with pytest.raises(slidestream.GpuUnavailableError):
            ssd.map_patches(paths, rows3, lambda b, r: {}, 224, device="cuda", **kw)
    with pytest.raises(InvalidArgumentError, match="only with mpp"):
        ssd.read_patches(paths, rows3, 224, fallback_mpp=0.25)
    with pytest.raises(InvalidArgumentError, match="no slides given"):
        ssd.read_patches([], rows3, 224)
    for s in slides:
        s.close()


def test_resolve_takes_a_path_and_reprs_name_the_resolution():
    assert resolve(str(CMU), mpp=1.0) == resolve(Slide(CMU), mpp=1.0)
    assert resolve(CMU, magnification=10).level == 0  # a pathlib.Path
    with pytest.raises(TypeError, match="Slide or a path"):
        resolve(3, mpp=1.0)
    g = GridSampler(CMU, 64, mpp=2.0)
    assert "mpp=2," in repr(g) and "level=" not in repr(g)
    r = RandomPatchSampler(CMU, 64, magnification=5, seed=1)
    assert "magnification=5," in repr(r) and "level=" not in repr(r)
    assert "level=0," in repr(GridSampler(CMU, 64))


def test_preview_of_a_grid_over_slides_at_a_resolution_outlines_each_slides_footprint():
    pytest.importorskip("PIL")
    from slidestream.sampling import preview

    one = GridSampler(CMU, 64, mpp=2.0, slide_index=1)
    two = GridSampler([CMU, CMU], 64, mpp=2.0)
    assert one.slide_index == 1 and two.slide_index == 0
    # Slide 1 of the two-slide grid has the same rows as the one-slide grid: the same picture
    # (patches 64 px at 2 µm/px cover ~256 level-0 pixels, not 64).
    a = np.asarray(preview(CMU, patches=two, slide_index=1))
    b = np.asarray(preview(CMU, patches=one))
    assert np.array_equal(a, b)
    rows_only = np.asarray(preview(CMU, patches=two.patches[two.patches[:, 0] == 1], size=64))
    assert not np.array_equal(a, rows_only)  # plain rows: 64 level pixels each
