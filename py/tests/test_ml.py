"""Batched reads and the ML adapters: read_regions, slidestream.torch, slidestream.dask.

The PyTorch DataLoader tests need torch and skip without it; the rest of PatchDataset is
exercised with a minimal stand-in ``torch`` module when torch is absent (with the real one when
present).
"""

import math
import os
import pickle
import subprocess
import sys
import types
import zlib
from pathlib import Path

import numpy as np

import slidestream
import pytest

from slidestream import InvalidArgumentError, Slide
from slidestream._batch import level0_origin

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"
BOXES = DATA / "boxes.tiff"
WEBP = DATA / "usda_naip_256_webp_z3.tif"
SPARSE = DATA / "sparse.tiff"

needs_data = pytest.mark.skipif(not BOXES.exists(), reason=f"test slides not found under {DATA}")


def composite(rgba, background):
    """What read_regions promises: c·a/255 + bg·(1 − a/255), rounded, for each channel."""
    bg = np.broadcast_to(np.asarray(background, np.uint32), (3,))
    a = rgba[..., 3:4].astype(np.uint32)
    return ((rgba[..., :3].astype(np.uint32) * a + bg * (255 - a) + 127) // 255).astype(np.uint8)


def random_locations(slide, level, size, n, seed, margin=None):
    """Level-0 locations, a share of them partly or wholly outside the image."""
    rng = np.random.default_rng(seed)
    w0, h0 = slide.dimensions
    m = margin if margin is not None else int(max(size) * slide.level_downsamples[level]) + 50
    xs = rng.integers(-m, w0 + m, n)
    ys = rng.integers(-m, h0 + m, n)
    return np.stack([xs, ys], axis=1).astype(np.int64)


# --- read_regions ---------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize(
    "path,level,size",
    [(CMU, 0, (256, 256)), (CMU, 0, (61, 17)), (BOXES, 1, (40, 50)), (BOXES, 2, (33, 33)), (WEBP, 0, (256, 200)), (SPARSE, 3, (64, 64))],
    ids=["cmu-256", "cmu-odd", "boxes-l1", "boxes-l2", "webp-alpha", "sparse-missing"],
)
@pytest.mark.parametrize("background", [255, 0, (10, 200, 30)], ids=["bg255", "bg0", "bgtuple"])
def test_read_regions_equals_composited_read_region(path, level, size, background):
    with Slide(path) as s:
        locs = random_locations(s, level, size, 40, seed=zlib.crc32(f"{path.name}:{level}".encode()))
        locs[0] = (-10 * size[0] * 10, 0)  # wholly outside: all background
        expected = np.stack([composite(s.read_region(tuple(map(int, xy)), level, size), background) for xy in locs])
        as_array = s.read_regions(locs, level, size, background=background)
        as_tuples = s.read_regions([tuple(map(int, xy)) for xy in locs], level, size, background=background)
    assert as_array.shape == (len(locs), size[1], size[0], 3) and as_array.dtype == np.uint8
    assert np.array_equal(as_array, expected)
    assert np.array_equal(as_tuples, expected)
    assert np.all(as_array[0] == np.asarray(background, np.uint8))


@needs_data
def test_read_regions_outside_pixels_are_background_and_inside_match_rgb():
    with Slide(BOXES) as s:
        w, h = s.dimensions
        out = s.read_regions(np.array([[w - 10, h - 5]], np.int64), 0, (30, 20), background=(1, 2, 3))[0]
        rgba = s.read_region((w - 10, h - 5), 0, (30, 20))
    assert np.all(out[5:, :] == (1, 2, 3)) and np.all(out[:, 10:] == (1, 2, 3))
    assert np.array_equal(out[:5, :10], rgba[:5, :10, :3])
    assert np.all(rgba[:5, :10, 3] == 255) and np.all(rgba[5:, :, 3] == 0)


@needs_data
def test_read_regions_empty_and_bad_arguments():
    with Slide(BOXES) as s:
        assert s.read_regions([], 0, (8, 8)).shape == (0, 8, 8, 3)
        with pytest.raises(ValueError):
            s.read_regions(np.zeros((2, 3), np.int64), 0, (8, 8))
        with pytest.raises(ValueError):
            s.read_regions([(0, 0)], 0, (8, 8), background=256)
        with pytest.raises(InvalidArgumentError):
            s.read_regions([(0, 0)], 7, (8, 8))


def test_level0_origin_inverts_the_level_mapping():
    for ds in (1.0, 2.0, 4.016129032258064, 8.086312118570184, 3.9999999999999996, 16.000000000000004, 2.5):
        for p in list(range(0, 3000)) + [10**6 + 7, 2**31 - 1]:
            x = level0_origin(p, ds)
            assert math.floor(x / ds) == p, (ds, p, x)
            assert math.floor((x - 1) / ds) < p, (ds, p, x)


# --- import hygiene ----------------------------------------------------------------------------


def test_importing_slidestream_imports_no_framework():
    code = (
        "import sys, slidestream, slidestream.torch, slidestream.dask\n"
        "bad = [m for m in ('torch', 'dask', 'distributed') if m in sys.modules]\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# --- slidestream.torch --------------------------------------------------------------------------


def _stub_torch():
    """A stand-in for the few torch APIs PatchDataset uses (from_numpy, permute, unbind,
    utils.data.Dataset), backed by numpy views so "no copy" can be checked."""

    class Tensor:
        def __init__(self, a):
            self._a = a

        @property
        def shape(self):
            return self._a.shape

        def permute(self, *dims):
            return Tensor(self._a.transpose(dims))

        def unbind(self, dim=0):
            assert dim == 0
            return tuple(Tensor(x) for x in self._a)

        def numpy(self):
            return self._a

    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    torch.from_numpy = lambda a: Tensor(a)
    torch.uint8 = np.uint8
    utils = types.ModuleType("torch.utils")
    data = types.ModuleType("torch.utils.data")

    class Dataset:
        pass

    data.Dataset = Dataset
    utils.data = data
    torch.utils = utils
    return {"torch": torch, "torch.utils": utils, "torch.utils.data": data}


@pytest.fixture
def patch_dataset_cls(monkeypatch):
    """PatchDataset built on real torch when installed, else on the stand-in."""
    import slidestream.torch as sst

    try:
        import torch  # noqa: F401

        real = True
    except ImportError:
        real = False
        monkeypatch.delitem(sst.__dict__, "PatchDataset", raising=False)
        for name, mod in _stub_torch().items():
            monkeypatch.setitem(sys.modules, name, mod)
    cls = sst.PatchDataset
    yield cls
    if not real:
        sst.__dict__.pop("PatchDataset", None)


def to_np(t):
    return np.asarray(t.numpy())


def test_patch_dataset_without_torch_raises_import_error():
    try:
        import torch  # noqa: F401

        pytest.skip("torch is installed; this checks the message shown without it")
    except ImportError:
        pass
    import slidestream.torch as sst

    sst.__dict__.pop("PatchDataset", None)
    with pytest.raises(ImportError, match="needs PyTorch"):
        sst.PatchDataset  # noqa: B018


@needs_data
def test_patch_dataset_single_slide(patch_dataset_cls):
    locs = [(0, 0), (1000, 1500), (-100, -100), (2100, 2900)]
    ds = patch_dataset_cls(CMU, locs, 0, 128, background=(7, 8, 9))
    assert len(ds) == 4 and ds.level == 0 and ds.size == (128, 128)
    with Slide(CMU) as s:
        ref = s.read_regions(locs, 0, (128, 128), background=(7, 8, 9))
    for i in range(4):
        t = ds[i]
        assert tuple(t.shape) == (3, 128, 128)
        a = to_np(t)
        assert a.dtype == np.uint8
        assert np.array_equal(a, ref[i].transpose(2, 0, 1))
    assert np.array_equal(to_np(ds[-1]), to_np(ds[3]))
    assert np.array_equal(to_np(ds[np.int64(1)]), ref[1].transpose(2, 0, 1))
    with pytest.raises(IndexError):
        ds[4]
    with pytest.raises(IndexError):
        ds[-5]
    batch = ds.read_batch([3, 0, 1])
    assert tuple(batch.shape) == (3, 3, 128, 128)
    assert np.array_equal(to_np(batch), ref[[3, 0, 1]].transpose(0, 3, 1, 2))
    items = ds.__getitems__([2, 2])
    assert len(items) == 2 and all(np.array_equal(to_np(x), ref[2].transpose(2, 0, 1)) for x in items)


@needs_data
def test_patch_dataset_tensor_is_a_view_of_the_decoded_buffer(patch_dataset_cls):
    ds = patch_dataset_cls(CMU, [(0, 0)], 0, (64, 32))
    t = ds[0]
    a = to_np(t)
    assert a.shape == (3, 32, 64)
    # A CHW permutation of an HWC buffer, not a copy: channel stride 1 byte.
    assert a.strides == (1, 64 * 3, 3)


@needs_data
def test_patch_dataset_many_slides_transform_and_pickle(patch_dataset_cls, tmp_path):
    other = tmp_path / "tëst_スライド.svs"
    other.write_bytes(CMU.read_bytes())
    slides = [str(CMU), Slide(BOXES), other, os.fsencode(str(BOXES))]
    locs = np.array([(0, 100, 100), (1, 10, 20), (2, 1000, 1000), (3, -5, 240), (1, 290, 0), (0, 2200, 2900), (2, 0, 0)], np.int64)
    ds = patch_dataset_cls(slides, locs, 0, (48, 40))
    expected = []
    for k, x, y in locs:
        p = [CMU, BOXES, other, BOXES][k]
        with Slide(p) as s:
            expected.append(s.read_regions([(int(x), int(y))], 0, (48, 40))[0])
    expected = np.stack(expected)
    got = np.stack([to_np(ds[i]).transpose(1, 2, 0) for i in range(len(ds))])
    assert np.array_equal(got, expected)
    order = [6, 0, 3, 3, 1, 5]
    assert np.array_equal(to_np(ds.read_batch(order)).transpose(0, 2, 3, 1), expected[order])
    assert np.array_equal(ds.read_arrays(order), expected[order])

    clone = pickle.loads(pickle.dumps(ds))
    assert type(clone) is type(ds) and len(clone) == len(ds)
    assert np.array_equal(clone.read_arrays(range(len(ds))), expected)

    # transform receives the HWC uint8 array; its result is returned as is.
    ds_t = patch_dataset_cls(slides, locs, 0, (48, 40), transform=np.ascontiguousarray)
    assert np.array_equal(ds_t[2], expected[2])
    assert all(np.array_equal(a, expected[i]) for a, i in zip(ds_t.read_batch([4, 2]), [4, 2]))
    assert np.array_equal(pickle.loads(pickle.dumps(ds_t))[5], expected[5])


@needs_data
def test_patch_dataset_bad_arguments(patch_dataset_cls):
    with pytest.raises(ValueError):
        patch_dataset_cls([CMU, BOXES], [(0, 0)], 0, 64)  # (x, y) needs a single slide
    with pytest.raises(IndexError):
        patch_dataset_cls([CMU, BOXES], [(2, 0, 0)], 0, 64)
    with pytest.raises(ValueError):
        patch_dataset_cls(CMU, [(0, 0)], 0, 0)
    with pytest.raises(ValueError):
        patch_dataset_cls(CMU, [(0.5, 0)], 0, 16)
    with pytest.raises(TypeError):
        patch_dataset_cls(12, [(0, 0)], 0, 16)
    ds = patch_dataset_cls(CMU, [(0, 0)], 3, 16)
    with pytest.raises(InvalidArgumentError):
        ds[0]
    missing = patch_dataset_cls("/nonexistent/slide.svs", [(0, 0)], 0, 16)
    with pytest.raises(FileNotFoundError):
        missing[0]


def _expected_batches(slides, locs, level, size, batch_size):
    out = []
    for k, x, y in locs:
        with Slide(slides[k]) as s:
            out.append(s.read_regions([(int(x), int(y))], level, size)[0])
    arr = np.stack(out).transpose(0, 3, 1, 2)
    return [arr[i : i + batch_size] for i in range(0, len(arr), batch_size)]


@needs_data
@pytest.mark.parametrize("context", [None, "spawn"], ids=["default-context", "spawn"])
def test_torch_dataloader_batches_equal_direct_reads(context):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: DataLoader test skipped (run it where torch is available)")
    from torch.utils.data import DataLoader

    from slidestream.torch import PatchDataset

    slides = [str(CMU), str(BOXES)]
    rng = np.random.default_rng(5)
    n = 203  # not a multiple of the batch size
    k = rng.integers(0, 2, n)
    x = np.where(k == 0, rng.integers(-100, 2300, n), rng.integers(-20, 310, n))
    y = np.where(k == 0, rng.integers(-100, 3000, n), rng.integers(-20, 260, n))
    locs = np.stack([k, x, y], axis=1)
    ds = PatchDataset(slides, locs, 0, (64, 48))
    loader = DataLoader(ds, batch_size=16, num_workers=4, shuffle=False, multiprocessing_context=context)
    expected = _expected_batches(slides, locs, 0, (64, 48), 16)
    got = list(loader)
    assert len(got) == len(expected)
    for b, e in zip(got, expected):
        assert b.dtype == torch.uint8 and tuple(b.shape) == e.shape
        assert np.array_equal(b.numpy(), e)
    # Without automatic batching every sample goes through __getitem__.
    single = list(DataLoader(ds, batch_size=None, num_workers=4, multiprocessing_context=context))
    assert np.array_equal(np.stack([t.numpy() for t in single]), np.concatenate(expected))


@needs_data
def test_patch_dataset_takes_the_rows_every_other_function_takes(patch_dataset_cls):
    """(slide_index, level, x, y) rows, levels mixed across slides, equal read_patches; a
    GridSampler directly; the older (slide_index, x, y) + level form warns and reads the same."""
    from slidestream.sampling import GridSampler

    rows = np.array([(0, 0, 0, 0), (1, 0, 10, 20), (1, 1, 100, 50), (0, 0, -50, 2900), (1, 0, 300, 250)], np.int64)
    with Slide(CMU) as a, Slide(BOXES) as b:
        ref = slidestream.read_patches([a, b], rows, (64, 48), background=(1, 2, 3))
        grid = GridSampler(b, 64, level=1, min_tissue=0)
    ds = patch_dataset_cls([CMU, BOXES], rows, (64, 48), background=(1, 2, 3))
    assert len(ds) == 5 and ds.level is None and ds.size == (64, 48)
    assert "levels=[0, 1]" in repr(ds)
    assert np.array_equal(ds.read_arrays(range(5)), ref)
    for i in range(5):
        assert np.array_equal(to_np(ds[i]), ref[i].transpose(2, 0, 1))
    assert np.array_equal(to_np(ds.read_batch([4, 2])), ref[[4, 2]].transpose(0, 3, 1, 2))
    gds = patch_dataset_cls(BOXES, grid, 64)
    assert len(gds) == len(grid) and gds.level == 1
    with pytest.warns(DeprecationWarning, match=r"\(slide_index, level, x, y\)"):
        old = patch_dataset_cls([CMU, BOXES], rows[rows[:, 1] == 0][:, [0, 2, 3]], 0, (64, 48), background=(1, 2, 3))
    assert np.array_equal(old.read_arrays(range(len(old))), ref[rows[:, 1] == 0])
    assert np.array_equal(old.rows, rows[rows[:, 1] == 0])
    with pytest.raises(slidestream.InvalidArgumentError, match="carry their own level"):
        patch_dataset_cls(CMU, rows[:1], (64, 48), level=0)
    with pytest.raises(slidestream.InvalidArgumentError, match="negative"):
        patch_dataset_cls(CMU, [(0, -1, 0, 0)], 8)
    with pytest.raises(TypeError, match="needs a size"):
        patch_dataset_cls(CMU, rows[:1])


# --- slidestream.dask ---------------------------------------------------------------------------


def _worker_open_slides():
    from slidestream.dask._common import SLIDES

    return len(SLIDES._slides)


@needs_data
@pytest.mark.parametrize(
    "path,level,chunks",
    [(BOXES, 0, None), (BOXES, 2, None), (BOXES, 1, (50, 70)), (CMU, 0, 2), (CMU, 0, None)],
    ids=["boxes-l0-tiles", "boxes-l2-fractional-downsample", "boxes-l1-explicit", "cmu-2x2-tiles", "cmu-tiles"],
)
def test_dask_read_level_on_distributed_equals_direct_read(dask_client, path, level, chunks):
    import slidestream.dask as ssd

    arr = ssd.read_level(path, level, chunks=chunks, background=(0, 10, 20))
    with Slide(path) as s:
        w, h = s.level_dimensions[level]
        tw, th = s.level_tile_sizes[level]
        expected = s.read_regions([(0, 0)], level, (w, h), background=(0, 10, 20))[0]
    assert arr.shape == (h, w, 3) and arr.dtype == np.uint8
    if chunks is None or isinstance(chunks, int):
        k = chunks or 1
        assert set(arr.chunks[0][:-1]) <= {th * k} and set(arr.chunks[1][:-1]) <= {tw * k}
    else:
        assert arr.chunks[0][0] == chunks[0] and arr.chunks[1][0] == chunks[1]
    got = dask_client.compute(arr).result()
    assert isinstance(got, np.ndarray) and np.array_equal(got, expected)
    # The tasks ran in the worker processes and opened the slide there, by path.
    assert sum(dask_client.run(_worker_open_slides).values()) >= 1


@needs_data
def test_dask_read_patches_on_distributed_equals_read_regions(dask_client, tmp_path):
    import slidestream.dask as ssd

    other = tmp_path / "tëst_スライド.svs"
    other.write_bytes(CMU.read_bytes())
    paths = [CMU, BOXES, other]
    rng = np.random.default_rng(11)
    n = 300
    k = rng.integers(0, 3, n)
    x = np.where(k == 1, rng.integers(-20, 300, n), rng.integers(-50, 2250, n))
    y = np.where(k == 1, rng.integers(-20, 250, n), rng.integers(-50, 3000, n))
    locs = np.stack([k, x, y], axis=1)
    arr = ssd.read_patches(paths, locs, (40, 24), 0, batch=64)
    assert arr.shape == (n, 24, 40, 3) and arr.chunks[0] == (64, 64, 64, 64, 44)
    expected = np.empty((n, 24, 40, 3), np.uint8)
    for i, p in enumerate(paths):
        with Slide(p) as s:
            sel = np.flatnonzero(k == i)
            expected[sel] = s.read_regions(locs[sel, 1:], 0, (40, 24))
    got = dask_client.compute(arr).result()
    assert np.array_equal(got, expected)
    # One slide, (x, y) locations, the local threaded scheduler.
    one = ssd.read_patches(BOXES, [(0, 0), (100, 100)], 32, 1).compute(scheduler="threads")
    with Slide(BOXES) as s:
        assert np.array_equal(one, s.read_regions([(0, 0), (100, 100)], 1, (32, 32)))


@needs_data
def test_dask_errors():
    import slidestream.dask as ssd

    with pytest.raises(InvalidArgumentError):
        ssd.read_level(BOXES, 4)
    with pytest.raises(ValueError):
        ssd.read_level(BOXES, 0, chunks=0)
    with pytest.raises(FileNotFoundError):
        ssd.read_level(DATA / "no-such-slide.svs", 0)
    with pytest.raises(IndexError):
        ssd.read_patches([BOXES], [(1, 0, 0)], 8, 0)
    # Tasks sized by tiles open the slides first (errors now); batch= builds the graph unopened.
    with pytest.raises(FileNotFoundError):
        ssd.read_patches([DATA / "no-such-slide.svs"], [(0, 0, 0)], 8, 0)
    lazy = ssd.read_patches([DATA / "no-such-slide.svs"], [(0, 0, 0)], 8, 0, batch=16)
    with pytest.raises(FileNotFoundError):
        lazy.compute(scheduler="sync")
    assert ssd.read_patches([BOXES], np.zeros((0, 3), np.int64), 8, 0).shape == (0, 8, 8, 3)


@needs_data
def test_patch_dataset_at_a_resolution(patch_dataset_cls):
    from slidestream.sampling import GridSampler

    with Slide(CMU) as s:
        grid = GridSampler(s, 96, mpp=1.0, min_tissue=0)
        ref = slidestream.read_patches([s], grid.patches[:5], 96, mpp=1.0)
    ds = patch_dataset_cls(CMU, grid, 96, mpp=1.0)
    assert np.array_equal(ds.read_arrays(range(5)), ref)
    xy = patch_dataset_cls(CMU, grid.patches[:5, [0, 2, 3]], 96, mpp=1.0)
    assert np.array_equal(xy.read_arrays(range(5)), ref)
    assert np.array_equal(to_np(ds[0]), ref[0].transpose(2, 0, 1))
    with pytest.raises(slidestream.InvalidArgumentError, match="not both"):
        patch_dataset_cls(CMU, grid.patches[:5, [0, 2, 3]], 0, 96, mpp=1.0)
    # A device dataset at a resolution (read and resized on the GPU: test_gpu_resolution.py).
    dev = patch_dataset_cls(CMU, grid, 96, mpp=1.0, device="cuda")
    assert dev.resolution == {"mpp": 1.0} and dev.device == 0
