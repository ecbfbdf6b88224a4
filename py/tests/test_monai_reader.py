"""slidestream.monai.SlidestreamWSIReader against MONAI's own OpenSlide backend
(``monai.data.wsi_reader.OpenSlideWSIReader``) on the shared test slides: the same metadata
(level count, sizes, downsamples, mpp, objective power, file path), the same level chosen for an
``mpp`` / ``power`` request (and the same error when none matches), the same patches and patch
metadata, the same batches of several slides, ``get_wsi_at_mpp`` and ``PatchWSIDataset`` items.

Pixels: a read whose level origin is a whole level pixel is the same crop in both readers, so
patches are compared exactly (tolerance 0) for the JPEG slides (Aperio, Hamamatsu NDPI on every
level, the COG: libjpeg-turbo in both) and the lossless ones (deflate, zstd). The JPEG 2000 slide
is allowed the project's codec tolerance (``_parity_helpers.LOSSY_TOLERANCE``, 2 grey levels):
OpenSlide 4.0.1 and slidestream decode it with different OpenJPEG builds (openslide-bin's and the
one slidestream compiles), which differ by at most 1 on this slide (measured over both whole
levels). Reads at other sub-pixel offsets are not compared (OpenSlide resamples them
bilinearly; docs/python.md, "Conventions").

Needs torch, MONAI and openslide-python: skipped (with the reason) where they are missing. The
tests of the lazy import run everywhere.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _parity_helpers import LOSSY_TOLERANCE, locate_testdata, max_abs_diff

REPO = Path(__file__).resolve().parents[2]

# name -> max abs difference allowed per level read (see the module docstring)
SLIDES = {
    "CMU-1-Small-Region.svs": 0,  # aperio, 1 level, JPEG, mpp 0.499, 20x
    "test3-DAPI-2-387.ndpi": 0,  # hamamatsu, 7 levels, JPEG strips, mpp 0.228, 40x
    "boxes.tiff": 0,  # generic-tiff, 4 levels (non-integer downsamples), deflate, mpp from TIFF tags
    "yb10kx5k.zstd.tiff": 0,  # generic-tiff BigTIFF, 5 levels, zstd, mpp from TIFF tags
    "tcga-cr-7395-01a-01-ts1.svs": LOSSY_TOLERANCE,  # aperio, 2 levels, JPEG 2000, no mpp, no power
    "cog.tiff": 0,  # generic-tiff, 5 tiny levels, JPEG (tiles larger than the image); no mpp
}


# --- import laziness (runs without MONAI) -------------------------------------------------


def _run(code: str) -> subprocess.CompletedProcess:
    import slidestream

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(slidestream.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")] if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_importing_slidestream_imports_neither_monai_nor_torch():
    out = _run(
        "import sys, slidestream, slidestream.monai\n"
        "bad = [m for m in ('monai', 'torch') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "assert 'SlidestreamWSIReader' in dir(slidestream.monai)\n"
        "print('ok')"
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_without_monai_the_lookup_names_the_package():
    # sys.modules["monai"] = None makes `import monai` fail, whether or not MONAI is installed.
    out = _run(
        "import sys\n"
        "sys.modules['monai'] = None\n"
        "import slidestream.monai as m\n"
        "try:\n"
        "    m.SlidestreamWSIReader\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    assert out.returncode == 0, out.stderr
    assert "needs MONAI" in out.stdout and "pip install monai" in out.stdout


# --- against MONAI's OpenSlide backend ----------------------------------------------------


def _import_or_skip(module: str, what: str):
    """``module``, or skip the test saying what is missing and why the import failed."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.skip(f"{what}: {type(e).__name__}: {e}")


@pytest.fixture(scope="module")
def mon():
    """(SlidestreamWSIReader, monai.data.wsi_reader module) or skip."""
    _import_or_skip("torch", "MONAI needs PyTorch")
    _import_or_skip("monai.data", "MONAI (pip install monai)")
    _import_or_skip("openslide", "the reference backend needs openslide-python")
    from monai.data import wsi_reader

    from slidestream.monai import SlidestreamWSIReader

    return SlidestreamWSIReader, wsi_reader


@pytest.fixture(scope="module")
def data():
    return locate_testdata()


def _pair(mon, data, name, **kwargs):
    """(our reader, its wsi, MONAI's OpenSlide reader, its wsi) for one slide."""
    cls, wr = mon
    ours, theirs = cls(**kwargs), wr.OpenSlideWSIReader(**kwargs)
    path = str(data / name)
    return ours, ours.read(path), theirs, theirs.read(path)


def _errors_alike(f_ours, f_theirs):
    """Both raise ValueError with the same message, or neither raises and both give the same."""
    try:
        want = f_theirs()
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            f_ours()
        assert str(got.value) == str(e)
        return None
    got = f_ours()
    assert got == want
    return got


@pytest.mark.parametrize("name", list(SLIDES))
def test_metadata_equals_openslide_backend(mon, data, name):
    ours, ow, theirs, tw = _pair(mon, data, name)
    assert ours.backend == "slidestream"
    n = ours.get_level_count(ow)
    assert n == theirs.get_level_count(tw)
    for level in range(n):
        assert ours.get_size(ow, level) == theirs.get_size(tw, level)
        assert ours.get_downsample_ratio(ow, level) == pytest.approx(theirs.get_downsample_ratio(tw, level), rel=1e-12)
        _errors_alike(lambda: ours.get_mpp(ow, level), lambda: theirs.get_mpp(tw, level))
        _errors_alike(lambda: ours.get_power(ow, level), lambda: theirs.get_power(tw, level))
    assert ours.get_file_path(ow) == theirs.get_file_path(tw) == os.path.abspath(data / name)
    assert ours.verify_suffix(str(data / name))
    # The slides with metadata do have it (so the comparison above is not between two errors).
    if name in ("CMU-1-Small-Region.svs", "test3-DAPI-2-387.ndpi"):
        assert ours.get_mpp(ow, 0)[0] > 0 and ours.get_power(ow, 0) > 0
    if name in ("boxes.tiff", "yb10kx5k.zstd.tiff"):
        assert ours.get_mpp(ow, 0)[0] > 0


def _cases(path: Path):
    """(level, (row, col) level-0 location, (height, width)) whose level origin is a whole level
    pixel in both readers: level 0 anywhere, other levels at (0, 0) and at multiples of an
    integer downsample. Some reach past the right / bottom edge."""
    import slidestream

    with slidestream.Slide(path) as s:
        w0, h0 = s.dimensions
        out = []
        for level, ((w, h), ds) in enumerate(zip(s.level_dimensions, s.level_downsamples)):
            size = (min(97, h), min(131, w))
            out.append((level, (0, 0), size))
            if level == 0:
                out += [(0, (h0 // 3, w0 // 2 + 1), size), (0, (h0 - 40, w0 - 50), size)]
            elif float(ds).is_integer():
                k = int(ds)
                out += [(level, ((h0 // (3 * k)) * k, (w0 // (2 * k)) * k), size), (level, ((h // 2) * k, (w - 30) * k), size)]
        return out


@pytest.mark.parametrize("name", list(SLIDES))
def test_patches_equal_openslide_backend(mon, data, name):
    ours, ow, theirs, tw = _pair(mon, data, name)
    tol = SLIDES[name]
    for level, loc, size in _cases(data / name):
        got, gmeta = ours.get_data(ow, location=loc, size=size, level=level)
        want, wmeta = theirs.get_data(tw, location=loc, size=size, level=level)
        what = f"{name} level {level} location {loc} size {size}"
        assert got.shape == want.shape == (3, *size), what
        assert got.dtype == want.dtype == np.uint8, what
        assert max_abs_diff(got, want) <= tol, f"{what}: max abs diff {max_abs_diff(got, want)} > {tol}"
        for key in ("original_channel_dim", "spatial_shape", "count", "path", "location", "size", "level"):
            assert np.array_equal(np.asarray(gmeta[key]), np.asarray(wmeta[key])), (what, key, gmeta[key], wmeta[key])
        assert gmeta["backend"] == "slidestream" and wmeta["backend"] == "openslide"


@pytest.mark.parametrize(
    "kwargs",
    [dict(mode="RGBA"), dict(dtype=np.float32), dict(channel_dim=-1), dict(channel_dim=1, mode="RGBA", dtype=np.int16)],
    ids=["rgba", "float32", "channels-last", "rgba-int16-dim1"],
)
def test_mode_dtype_channel_dim_equal_openslide_backend(mon, data, kwargs):
    ours, ow, theirs, tw = _pair(mon, data, "CMU-1-Small-Region.svs", **kwargs)
    # Partly outside the slide: RGBA alpha 0 / RGB 0 there in both.
    loc, size = (2967 - 30, 2220 - 70), (64, 96)
    got, _ = ours.get_data(ow, location=loc, size=size)
    want, _ = theirs.get_data(tw, location=loc, size=size)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got, want)
    assert not np.array_equal(got, np.zeros_like(got))


def test_torch_dtype_gives_a_tensor(mon, data):
    import torch

    ours, ow, theirs, tw = _pair(mon, data, "CMU-1-Small-Region.svs", dtype=torch.float32)
    got, _ = ours.get_data(ow, location=(100, 200), size=(32, 40))
    want, _ = theirs.get_data(tw, location=(100, 200), size=(32, 40))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and tuple(got.shape) == (3, 32, 40)
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", ["test3-DAPI-2-387.ndpi", "yb10kx5k.zstd.tiff", "boxes.tiff", "CMU-1-Small-Region.svs"])
def test_mpp_and_power_pick_the_level_openslide_picks(mon, data, name):
    ours, ow, theirs, tw = _pair(mon, data, name)
    n = ours.get_level_count(ow)
    mpps = [ours.get_mpp(ow, k) for k in range(n)]
    tried = 0
    for k in range(n):
        # On the level, inside the 5 % tolerance, and outside it (an error in both).
        for factor in (1.0, 1.03, 0.97, 1.2, 0.8):
            mpp = mpps[k][0] * factor
            lvl = _errors_alike(lambda: ours.get_valid_level(ow, None, mpp, None), lambda: theirs.get_valid_level(tw, None, mpp, None))
            tried += lvl is not None
            if lvl is not None:
                got, _ = ours.get_data(ow, location=(0, 0), size=(16, 24), mpp=mpp)
                want, _ = theirs.get_data(tw, location=(0, 0), size=(16, 24), mpp=mpp)
                assert max_abs_diff(got, want) <= SLIDES[name]
    assert tried >= n
    power = _errors_alike(lambda: ours.get_power(ow, 0), lambda: theirs.get_power(tw, 0))
    if power is not None:
        for k in range(n):
            p = power / ours.get_downsample_ratio(ow, k) * 1.02
            _errors_alike(lambda: ours.get_valid_level(ow, None, None, p), lambda: theirs.get_valid_level(tw, None, None, p))
        with pytest.raises(ValueError, match="power"):
            ours.get_valid_level(ow, None, None, power * 3)
    # Constructor defaults apply when get_data names no resolution.
    cls, wr = mon
    target = mpps[-1][0]
    got, meta = cls(mpp=target).get_data(ow, location=(0, 0), size=(8, 8))
    want, wmeta = wr.OpenSlideWSIReader(mpp=target).get_data(tw, location=(0, 0), size=(8, 8))
    assert meta["level"] == wmeta["level"] == n - 1
    assert max_abs_diff(got, want) <= SLIDES[name]


def test_several_slides_are_one_batched_read(mon, data, monkeypatch):
    import slidestream.monai as sm

    cls, wr = mon
    names = ["CMU-1-Small-Region.svs", "test3-DAPI-2-387.ndpi", "CMU-1-Small-Region.svs"]
    ours, theirs = cls(), wr.OpenSlideWSIReader()
    ow = ours.read([str(data / n) for n in names])
    tw = theirs.read([str(data / n) for n in names])
    assert isinstance(ow, list) and len(ow) == 3
    calls = []
    real = sm.read_patches
    monkeypatch.setattr(sm, "read_patches", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    for level, loc, size in [(0, (500, 700), (64, 80)), (1, (0, 0), (40, 30))]:
        if level == 1:  # CMU has one level: MONAI's own check refuses it for the batch
            with pytest.raises(ValueError, match="maximum level"):
                ours.get_data(ow, location=loc, size=size, level=level)
            continue
        got, gmeta = ours.get_data(ow, location=loc, size=size, level=level)
        want, wmeta = theirs.get_data(tw, location=loc, size=size, level=level)
        assert got.shape == want.shape == (9, *size)  # stacked along the channel axis (MONAI's rule)
        assert np.array_equal(got, want)
        assert np.array_equal(got[:3], got[6:]) and not np.array_equal(got[:3], got[3:6])
        assert gmeta["path"] == wmeta["path"] and np.array_equal(gmeta["location"], wmeta["location"])
    assert len(calls) == 1 and len(calls[0]) == 3  # one cross-slide read for the three patches
    # RGBA is read slide by slide, with the same result.
    got, _ = cls(mode="RGBA").get_data(ow, location=(10, 10), size=(8, 8))
    want, _ = wr.OpenSlideWSIReader(mode="RGBA").get_data(tw, location=(10, 10), size=(8, 8))
    assert got.shape == (12, 8, 8) and np.array_equal(got, want)


@pytest.mark.parametrize(
    "name, mpp",
    [("CMU-1-Small-Region.svs", 1.0), ("CMU-1-Small-Region.svs", 0.499 * 1.02), ("test3-DAPI-2-387.ndpi", 1.5), ("yb10kx5k.zstd.tiff", 352.85814912343398 * 4)],
    ids=["cmu-resized", "cmu-within-tolerance", "ndpi-resized", "zstd-level-2"],
)
def test_get_wsi_at_mpp_equals_openslide_backend(mon, data, name, mpp):
    pytest.importorskip("PIL")
    ours, ow, theirs, tw = _pair(mon, data, name)
    got = ours.get_wsi_at_mpp(ow, mpp)
    want = theirs.get_wsi_at_mpp(tw, mpp)
    assert got.shape == want.shape and got.dtype == want.dtype == np.uint8
    assert max_abs_diff(got, want) <= SLIDES[name]


def test_patch_wsi_dataset_and_load_image(mon, data):
    from monai.data import DataLoader, PatchWSIDataset
    from monai.transforms import LoadImage

    cls, _ = mon
    cmu = str(data / "CMU-1-Small-Region.svs")
    ndpi = str(data / "test3-DAPI-2-387.ndpi")
    items = [
        {"image": cmu, "location": [1000, 1200], "label": 1},
        {"image": ndpi, "location": [2000, 1500], "label": 0},
        {"image": cmu, "location": [40, 60], "label": 1},  # centre near the corner: partly outside
    ]
    ds = PatchWSIDataset(items, patch_size=(96, 128), patch_level=0, reader=cls)
    ref = PatchWSIDataset(items, patch_size=(96, 128), patch_level=0, reader="OpenSlide")
    assert ds.backend == "slidestream"
    for i in range(len(items)):
        got, want = ds[i], ref[i]
        assert tuple(got["image"].shape) == (3, 96, 128)
        assert np.array_equal(np.asarray(got["image"]), np.asarray(want["image"]))
        assert got["label"] == want["label"]
        assert np.array_equal(np.asarray(got["image"].meta["location"]), np.asarray(want["image"].meta["location"]))
    # An instance works too, and the dataset pickles (DataLoader worker processes).
    inst = PatchWSIDataset(items, patch_size=64, patch_level=0, reader=cls(channel_dim=-1))
    assert tuple(inst[0]["image"].shape) == (64, 64, 3)
    clone = pickle.loads(pickle.dumps(ds))
    assert np.array_equal(np.asarray(clone[0]["image"]), np.asarray(ds[0]["image"]))
    batches = list(DataLoader(ds, batch_size=3, num_workers=2))
    assert tuple(batches[0]["image"].shape) == (3, 3, 96, 128)
    assert np.array_equal(np.asarray(batches[0]["image"][1]), np.asarray(ds[1]["image"]))
    # LoadImage by dotted name: the whole level 5 of the NDPI slide.
    img = LoadImage(reader="slidestream.monai.SlidestreamWSIReader", level=5, image_only=True)(ndpi)
    ref_img = LoadImage(reader=mon[1].OpenSlideWSIReader(level=5), image_only=True)(ndpi)
    assert tuple(img.shape) == tuple(ref_img.shape) == (3, 152, 124)
    assert np.array_equal(np.asarray(img), np.asarray(ref_img))


def test_errors(mon, data):
    ours, ow, theirs, tw = _pair(mon, data, "test3-DAPI-2-387.ndpi")
    # A level past the last: MONAI's ValueError, the same message as its OpenSlide backend.
    _errors_alike(lambda: ours.get_data(ow, size=(8, 8), level=7), lambda: theirs.get_data(tw, size=(8, 8), level=7))
    with pytest.raises(ValueError, match="maximum level"):
        ours.get_data(ow, size=(8, 8), level=7)
    # A negative level: slidestream's InvalidArgumentError (a ValueError).
    import slidestream

    with pytest.raises(slidestream.InvalidArgumentError):
        ours.get_data(ow, size=(8, 8), level=-1)
    # Two resolutions at once; an mpp no level matches; outside the slide; a zero size.
    for kwargs in (dict(level=0, mpp=0.5), dict(mpp=0.1), dict(power=7), dict(location=(5000, 10)), dict(size=(0, 8))):
        call = dict(dict(location=(0, 0), size=(8, 8)), **kwargs)
        with pytest.raises(ValueError):
            ours.get_data(ow, **call)
        with pytest.raises(ValueError):
            theirs.get_data(tw, **call)
    # A mode other than RGB / RGBA.
    with pytest.raises(ValueError, match="mode"):
        ours.get_data(ow, location=(0, 0), size=(8, 8), mode="L")
    # A slide without mpp / power: the backends' ValueError.
    o2, w2, t2, tw2 = _pair(mon, data, "tcga-cr-7395-01a-01-ts1.svs")
    for f in (lambda r, w: r.get_mpp(w, 0), lambda r, w: r.get_power(w, 1), lambda r, w: r.get_data(w, size=(8, 8), mpp=0.5)):
        with pytest.raises(ValueError) as e_ours:
            f(o2, w2)
        with pytest.raises(ValueError) as e_theirs:
            f(t2, tw2)
        assert str(e_ours.value) == str(e_theirs.value)
    with pytest.raises(FileNotFoundError):
        ours.read(str(data / "no-such-slide.svs"))
    with pytest.raises(TypeError):
        ours.get_data(ow, location=(0.5, 0), size=(8, 8))
