"""slidestream.tiatoolbox.SlidestreamWSIReader against TIAToolbox's own OpenSlide reader
(``tiatoolbox.wsicore.wsireader.OpenSlideWSIReader``) on the shared test slides: the same
``info`` (slide and level dimensions, downsamples, level count, mpp, objective power, vendor,
file path, raw properties), and the same ``read_rect`` / ``read_bounds`` / ``slide_thumbnail``
output for every resolution unit (``level``, ``mpp``, ``power``, ``baseline``), both coordinate
spaces, padding modes and interpolations, and the same errors (TIAToolbox's ValueError for a
bad unit, a level past the last, mpp / power a slide does not have).

Pixels: the two readers share every step but the read of the level (TIAToolbox's own level
choice, padding, OpenCV resize and background composite run on both), so where that read is the
same crop — a level origin on a whole level pixel: level 0 anywhere, other levels at multiples of
their integer downsample — the outputs are compared exactly (tolerance 0) for the JPEG slides
(Aperio, Hamamatsu NDPI on every level: libjpeg-turbo in both) and the lossless ones (deflate,
zstd). The JPEG 2000 slide is allowed the project's codec tolerance
(``_parity_helpers.LOSSY_TOLERANCE``, 2 grey levels): OpenSlide 4.0.1 and slidestream decode it
with different OpenJPEG builds (openslide-bin's and the one slidestream compiles), which differ
by at most 1 on this slide (measured over both whole levels); a resize averages pixels, so it
cannot widen the gap.

Needs TIAToolbox (which imports torch) and openslide-python: skipped (with the reason) where
they are missing. The tests of the lazy import run everywhere.
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

SLIDES = {
    "CMU-1-Small-Region.svs": 0,  # aperio, 1 level, JPEG, mpp 0.499, 20x
    "test3-DAPI-2-387.ndpi": 0,  # hamamatsu, 7 levels, JPEG strips, mpp 0.228, 40x
    "boxes.tiff": 0,  # generic-tiff, 4 levels (non-integer downsamples), deflate, mpp from TIFF tags
    "yb10kx5k.zstd.tiff": 0,  # generic-tiff BigTIFF, 5 levels, zstd, mpp from TIFF tags
    "tcga-cr-7395-01a-01-ts1.svs": LOSSY_TOLERANCE,  # aperio, 2 levels, JPEG 2000, no mpp, no power
}


# --- import laziness (runs without TIAToolbox) --------------------------------------------


def _run(code: str) -> subprocess.CompletedProcess:
    import slidestream

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(Path(slidestream.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")] if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_importing_slidestream_imports_no_tiatoolbox():
    out = _run(
        "import sys, slidestream, slidestream.tiatoolbox\n"
        "assert 'tiatoolbox' not in sys.modules and 'openslide' not in sys.modules\n"
        "assert 'SlidestreamWSIReader' in dir(slidestream.tiatoolbox)\n"
        "print('ok')"
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_without_tiatoolbox_the_lookup_names_the_package():
    out = _run(
        "import sys\n"
        "sys.modules['tiatoolbox'] = None\n"
        "import slidestream.tiatoolbox as t\n"
        "try:\n"
        "    t.SlidestreamWSIReader\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    assert out.returncode == 0, out.stderr
    assert "needs TIAToolbox" in out.stdout and "pip install tiatoolbox" in out.stdout


# --- against TIAToolbox's OpenSlide reader ------------------------------------------------


def _import_or_skip(module: str, what: str):
    """``module``, or skip the test saying what is missing and why the import failed."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.skip(f"{what}: {type(e).__name__}: {e}")


@pytest.fixture(scope="module")
def tia():
    """(SlidestreamWSIReader, tiatoolbox.wsicore.wsireader module) or skip."""
    _import_or_skip("openslide", "the reference reader needs openslide-python")
    wsireader = _import_or_skip("tiatoolbox.wsicore.wsireader", "TIAToolbox (pip install tiatoolbox; it imports torch)")
    from slidestream.tiatoolbox import SlidestreamWSIReader

    return SlidestreamWSIReader, wsireader


@pytest.fixture(scope="module")
def data():
    return locate_testdata()


def _pair(tia, data, name, **kwargs):
    cls, wr = tia
    path = data / name
    return cls(path, **kwargs), wr.OpenSlideWSIReader(path, **kwargs)


def _same(got, want, tol, what=""):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype == np.uint8, what
    d = max_abs_diff(got, want)
    assert d <= tol, f"{what}: max abs diff {d} > {tol}"


@pytest.mark.parametrize("name", list(SLIDES))
def test_info_equals_openslide_reader(tia, data, name):
    ours, theirs = _pair(tia, data, name)
    a, b = ours.info, theirs.info
    assert a.slide_dimensions == b.slide_dimensions
    assert a.level_count == b.level_count
    assert a.level_dimensions == b.level_dimensions
    assert a.level_downsamples == pytest.approx(b.level_downsamples, rel=1e-12)
    assert a.vendor == b.vendor
    assert a.axes == b.axes == "YXS"
    assert a.file_path == b.file_path == Path(data / name)
    assert (a.mpp is None) == (b.mpp is None)
    if b.mpp is not None:
        assert np.array_equal(a.mpp, b.mpp)
    assert a.objective_power == b.objective_power
    assert a.raw == b.raw
    assert a.as_dict().keys() == b.as_dict().keys()
    if name in ("CMU-1-Small-Region.svs", "test3-DAPI-2-387.ndpi"):
        assert a.mpp is not None and a.objective_power is not None


def _level_locations(info, level):
    """Level-0 (x, y) locations whose level origin is a whole level pixel in both readers
    (reads past the right / bottom edge and before the top-left one among them)."""
    ds = info.level_downsamples[level]
    w0, h0 = info.slide_dimensions
    if level == 0:
        return [(0, 0), (w0 // 2 + 1, h0 // 3), (w0 - 50, h0 - 40), (-20, -30)]
    if float(ds).is_integer():
        k = int(ds)
        return [(0, 0), ((w0 // (2 * k)) * k, (h0 // (3 * k)) * k), ((w0 // k - 30) * k, (h0 // k - 20) * k), (-3 * k, -5 * k)]
    return [(0, 0)]


@pytest.mark.parametrize("name", list(SLIDES))
def test_read_rect_and_bounds_by_level(tia, data, name):
    ours, theirs = _pair(tia, data, name)
    tol = SLIDES[name]
    for level in range(ours.info.level_count):
        for loc in _level_locations(ours.info, level):
            size = (131, 97)
            what = f"{name} level {level} location {loc}"
            _same(ours.read_rect(loc, size, resolution=level, units="level"), theirs.read_rect(loc, size, resolution=level, units="level"), tol, what)
            ds = ours.info.level_downsamples[level]
            bounds = (loc[0], loc[1], loc[0] + int(round(size[0] * ds)), loc[1] + int(round(size[1] * ds)))
            _same(ours.read_bounds(bounds, resolution=level, units="level"), theirs.read_bounds(bounds, resolution=level, units="level"), tol, what + " bounds")
    # The region read is the region asked for (not a blank or a constant image).
    w0, h0 = ours.info.slide_dimensions
    img = ours.read_rect((w0 // 2, h0 // 2), (64, 64))
    assert img.shape == (64, 64, 3) and img.std() > 0


def _resolutions(info):
    """(resolution, units) pairs that read from several levels and resize, for this slide."""
    out = [(1.0, "baseline"), (0.5, "baseline"), (0.3, "baseline"), (1.5, "baseline")]
    if info.level_count > 2:  # fractional levels interpolate between two levels
        out += [(0.5, "level"), (1.5, "level")]
    if info.mpp is not None:
        m = float(info.mpp[0])
        out += [(m, "mpp"), (m * 1.7, "mpp"), (m * 4.0, "mpp"), (m * 0.8, "mpp"), ((m * 2, m * 3), "mpp")]
    if info.objective_power is not None:
        p = info.objective_power
        out += [(p, "power"), (p / 2.5, "power"), (p / 8, "power"), (p * 1.25, "power")]
    return out


@pytest.mark.parametrize("name", list(SLIDES))
def test_read_at_every_unit_equals_openslide_reader(tia, data, name):
    ours, theirs = _pair(tia, data, name)
    tol = SLIDES[name]
    # Locations at multiples of 64: a whole pixel of every level of these slides whose
    # downsample is an integer (the read level's origin is then the same in both readers).
    info = ours.info
    int_levels = all(float(d).is_integer() for d in info.level_downsamples)
    locs = [(0, 0), (128, 64), (info.slide_dimensions[0] - 64, info.slide_dimensions[1] - 128)] if int_levels else [(0, 0)]
    n = 0
    for resolution, units in _resolutions(info):
        for loc in locs:
            what = f"{name} {resolution} {units} at {loc}"
            _same(ours.read_rect(loc, (120, 90), resolution=resolution, units=units),
                  theirs.read_rect(loc, (120, 90), resolution=resolution, units=units), tol, what)
            bounds = (loc[0], loc[1], loc[0] + 256, loc[1] + 192)
            _same(ours.read_bounds(bounds, resolution=resolution, units=units),
                  theirs.read_bounds(bounds, resolution=resolution, units=units), tol, what + " bounds")
            n += 1
    assert n >= 4


def test_coord_space_pad_and_interpolation(tia, data):
    for name in ("CMU-1-Small-Region.svs", "yb10kx5k.zstd.tiff"):
        ours, theirs = _pair(tia, data, name)
        tol = SLIDES[name]
        m = float(ours.info.mpp[0])
        for kwargs in (
            dict(coord_space="resolution"),
            dict(pad_mode="constant", pad_constant_values=128),
            dict(pad_mode="reflect"),
            dict(pad_mode=None),
            dict(interpolation="linear"),
            dict(interpolation="cubic"),
            dict(interpolation="lanczos"),
            dict(interpolation="nearest"),
        ):
            for resolution, units in ((m * 2.5, "mpp"), (0.75, "baseline"), (0, "level")):
                what = f"{name} {kwargs} {resolution} {units}"
                # Partly outside (top-left) for the padding cases; a whole pixel of level 1 too.
                loc = (-40, -30) if "pad_mode" in kwargs else (256, 128)
                _same(ours.read_rect(loc, (100, 80), resolution, units, **kwargs), theirs.read_rect(loc, (100, 80), resolution, units, **kwargs), tol, what)
                b = (loc[0], loc[1], loc[0] + 320, loc[1] + 192)
                _same(ours.read_bounds(b, resolution, units, **kwargs), theirs.read_bounds(b, resolution, units, **kwargs), tol, what + " bounds")
    # Wholly and partly outside the slide (the pad value goes into every channel, alpha too,
    # before the composite over white: TIAToolbox's rule, whichever reader).
    ours, theirs = _pair(tia, data, "CMU-1-Small-Region.svs")
    for loc in ((-40, -40), (-10, -20), (2200, 2950)):
        got = ours.read_rect(loc, (32, 32), pad_mode="constant", pad_constant_values=128)
        _same(got, theirs.read_rect(loc, (32, 32), pad_mode="constant", pad_constant_values=128), 0, f"outside at {loc}")
        corner = got[0, 0] if loc[0] < 0 else got[-1, -1]  # a pixel outside the slide
        assert (corner == 191).all()  # 128 over white: 128 + 255 * (1 - 128 / 255), rounded


def test_thumbnail_and_open(tia, data):
    cls, wr = tia
    ours, theirs = _pair(tia, data, "CMU-1-Small-Region.svs")
    _same(ours.slide_thumbnail(), theirs.slide_thumbnail(), 0, "thumbnail 1.25x")
    _same(ours.slide_thumbnail(resolution=4.0, units="mpp"), theirs.slide_thumbnail(resolution=4.0, units="mpp"), 0, "thumbnail 4 mpp")
    assert np.array_equal(ours.slide_dimensions(2.5, "power"), theirs.slide_dimensions(2.5, "power"))
    # WSIReader.open passes a reader through, so TIAToolbox's engines take this one.
    assert wr.WSIReader.open(ours) is ours
    # An open slidestream.Slide is used as is; manual mpp / power override the metadata.
    import slidestream

    with slidestream.Slide(data / "tcga-cr-7395-01a-01-ts1.svs") as s:
        r = cls(s, mpp=(0.25, 0.25), power=40)
        assert r.slide is s
        assert np.array_equal(r.info.mpp, [0.25, 0.25]) and r.info.objective_power == 40
        t = wr.OpenSlideWSIReader(data / "tcga-cr-7395-01a-01-ts1.svs", mpp=(0.25, 0.25), power=40)
        # (read from level 0: level 1's downsample, 2.0005, puts (512, 512) between its pixels)
        _same(r.read_rect((512, 512), (200, 150), resolution=0.4, units="mpp"), t.read_rect((512, 512), (200, 150), resolution=0.4, units="mpp"), 0, "manual mpp")
        _same(r.read_rect((512, 512), (200, 150), resolution=25, units="power"), t.read_rect((512, 512), (200, 150), resolution=25, units="power"), 0, "manual power")
    # Picklable (worker processes of TIAToolbox's engines).
    clone = pickle.loads(pickle.dumps(ours))
    assert np.array_equal(clone.read_rect((100, 100), (50, 40)), ours.read_rect((100, 100), (50, 40)))
    assert type(clone) is cls


def test_errors(tia, data):
    cls, wr = tia
    ours, theirs = _pair(tia, data, "test3-DAPI-2-387.ndpi")
    cases = [
        dict(resolution=0, units="furlong"),  # not a unit
        dict(resolution=7, units="level"),  # past the last level
        dict(resolution=0, units="level", interpolation="bicubic-ish"),  # not an interpolation
    ]
    for kwargs in cases:
        if "interpolation" in kwargs:
            kwargs = dict(kwargs, resolution=0.3, units="baseline")  # a resize, so the filter is used
        with pytest.raises(ValueError) as e_ours:
            ours.read_rect((0, 0), (32, 32), **kwargs)
        with pytest.raises(ValueError) as e_theirs:
            theirs.read_rect((0, 0), (32, 32), **kwargs)
        assert str(e_ours.value) == str(e_theirs.value)
        with pytest.raises(ValueError):
            ours.read_bounds((0, 0, 64, 64), **kwargs)
    # No mpp and no objective power in the metadata: 'mpp' / 'power' reads are refused.
    o2, t2 = _pair(tia, data, "tcga-cr-7395-01a-01-ts1.svs")
    assert o2.info.mpp is None and o2.info.objective_power is None
    for units in ("mpp", "power"):
        with pytest.raises(ValueError) as e_ours:
            o2.read_rect((0, 0), (16, 16), resolution=1, units=units)
        with pytest.raises(ValueError) as e_theirs:
            t2.read_rect((0, 0), (16, 16), resolution=1, units=units)
        assert str(e_ours.value) == str(e_theirs.value)
    with pytest.raises(ValueError, match="Invalid input_unit"):
        ours.convert_resolution_units(1, "furlong")
    with pytest.raises(FileNotFoundError):
        cls(data / "no-such-slide.svs")
    with pytest.raises(TypeError):
        cls(data / "CMU-1-Small-Region.svs", power="forty")
