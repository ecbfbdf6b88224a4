"""Argument checking of every entry point (issue 13, rows F5, F12-F15):

* F5: non-UTF-8 file names, as the surrogate-escaped ``str`` and ``pathlib.Path`` that
  ``os.listdir`` / ``glob`` return, work wherever a path is taken;
* F12: out-of-range ints (negative sizes and byte counts, values >= 2**63) raise
  InvalidArgumentError (a ValueError), never OverflowError; non-ints raise our TypeError;
* F13: ``locations`` of any integer dtype / byte order, lists of lists, lists of numpy rows are
  read; anything else is a TypeError that says what is accepted;
* F14: thumbnail sizes, dask chunks and Deep Zoom parameters are validated (no
  ZeroDivisionError, no negative tile counts);
* F15: settings are read when a slide is opened, by every read (the test hooks part of F15
  is tested in test_gpu.py).
"""

from __future__ import annotations

import glob
import os
import pathlib
import shutil

import numpy as np
import pytest

import slidestream
from slidestream import InvalidArgumentError, LimitsExceededError, Slide, config

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path(os.environ.get("SLIDESTREAM_TESTDATA", REPO.parent / "shared" / "testdata"))
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"
BOXES = DATA / "boxes.tiff"

needs_data = pytest.mark.skipif(not BOXES.exists(), reason=f"test slides not found under {DATA}")


def _raises_not_overflow(exc, call):
    """``call()`` raises ``exc`` (and not OverflowError / ZeroDivisionError, which some of our
    exception classes are not, but a check against a broad ``exc`` could let through)."""
    with pytest.raises(exc) as ei:
        call()
    assert not isinstance(ei.value, (OverflowError, ZeroDivisionError)), repr(ei.value)
    return ei.value


# --- F5: non-UTF-8 names ------------------------------------------------------------------------


@pytest.fixture
def non_utf8(tmp_path):
    """A copy of CMU whose name is not valid UTF-8: (the name as os.listdir returns it, bytes)."""
    raw = os.fsencode(str(tmp_path)) + b"/caf\xe9-\xff.svs"
    shutil.copyfile(CMU, raw)
    listed = [os.path.join(str(tmp_path), n) for n in os.listdir(str(tmp_path))]
    assert len(listed) == 1 and os.fsencode(listed[0]) == raw
    return listed[0], raw


def test_non_utf8_names_as_str_and_pathlib_open_everywhere(non_utf8, tmp_path):
    name, raw = non_utf8
    with Slide(CMU) as ref:
        expected = ref.read_region((100, 200), 0, (32, 16))
    globbed = glob.glob(os.path.join(str(tmp_path), "*.svs"))
    for given in (name, pathlib.Path(name), globbed[0], next(pathlib.Path(tmp_path).iterdir()), raw):
        with Slide(given) as s:
            assert s.path == name and os.fsencode(s.path) == raw
            assert name in eval(repr(s)[len("slidestream.Slide") :])  # repr shows the name as Python does
            assert np.array_equal(s.read_region((100, 200), 0, (32, 16)), expected)
        assert slidestream.detect_vendor(given) == "aperio"
        assert slidestream.OpenSlide.detect_format(given) == "aperio"
        with slidestream.OpenSlide(given) as o:
            assert o.dimensions == (2220, 2967)
        with slidestream.open_slide(given) as o:
            assert isinstance(o, slidestream.OpenSlide)


def test_non_utf8_names_in_dask_and_patch_sources(non_utf8):
    pytest.importorskip("dask.array")
    import slidestream.dask as ssd
    from slidestream.torch import _PatchSource

    name, raw = non_utf8
    with Slide(CMU) as ref:
        expected = ref.read_regions([(10, 20)], 0, (16, 16))
    for given in (name, pathlib.Path(name)):
        got = ssd.read_patches(given, [(10, 20)], 16, 0).compute(scheduler="sync")
        assert np.array_equal(got, expected)
        assert ssd.read_level(given, 0).shape == (2967, 2220, 3)
        assert np.array_equal(_PatchSource(given, [(10, 20)], 0, 16).read_arrays([0]), expected)


def test_missing_non_utf8_name_reports_the_name_as_given(tmp_path):
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/gone-\xff.svs")
    for call in (lambda: Slide(name), lambda: Slide(pathlib.Path(name)), lambda: slidestream.OpenSlide(name)):
        e = _raises_not_overflow(FileNotFoundError, call)
        assert e.filename == name
    assert slidestream.detect_vendor(name) is None
    e = _raises_not_overflow(TypeError, lambda: Slide(3.5))
    assert "path must be str, bytes or os.PathLike" in str(e)


# --- F12: ints -----------------------------------------------------------------------------------


@needs_data
def test_out_of_range_ints_are_invalid_argument_errors():
    bad_bytes = (-1, -(2**63), 2**63, 2**64, 2**70)
    for v in bad_bytes:
        e = _raises_not_overflow(InvalidArgumentError, lambda: Slide(BOXES, cache_bytes=v))
        assert isinstance(e, ValueError) and "cache_bytes" in str(e)
    for v in (1.5, "1", b"1"):
        e = _raises_not_overflow(TypeError, lambda: Slide(BOXES, cache_bytes=v))
        assert "cache_bytes must be an int" in str(e)
    assert Slide(BOXES, cache_bytes=np.uint64(1 << 20)).cache_stats()["capacity_bytes"] == 1 << 20
    with Slide(BOXES) as s:
        for loc in ((2**63, 0), (0, -(2**63) - 1), (2**70, 2**70)):
            _raises_not_overflow(InvalidArgumentError, lambda: s.read_region(loc, 0, (8, 8)))
            _raises_not_overflow(InvalidArgumentError, lambda: s.read_regions([loc], 0, (8, 8)))
        for size in ((-1, 8), (8, -(2**70)), (2**63, 1), (1, 2**64)):
            e = _raises_not_overflow(InvalidArgumentError, lambda: s.read_region((0, 0), 0, size))
            assert "size" in str(e)
            _raises_not_overflow(InvalidArgumentError, lambda: s.read_regions([(0, 0)], 0, size))
            _raises_not_overflow(InvalidArgumentError, lambda: s.read_regions([(0, 0)], 0, size, device="cuda"))
        for level in (-1, 2**63, -(2**70)):
            _raises_not_overflow(InvalidArgumentError, lambda: s.read_region((0, 0), level, (8, 8)))
        for bad in ((1.5, 0), ("0", 0), None, 3):
            e = _raises_not_overflow(TypeError, lambda: s.read_region(bad, 0, (8, 8)))
            assert "location" in str(e)
            if bad == 3:
                continue  # an int size is a square (test_int_sizes_are_squares_everywhere)
            e = _raises_not_overflow(TypeError, lambda: s.read_region((0, 0), 0, bad))
            assert "size" in str(e)
        _raises_not_overflow(ValueError, lambda: s.read_region((0, 0, 0), 0, (8, 8)))
        # Any pair works: lists, numpy arrays, numpy ints.
        a = s.read_region((3, 4), 0, (8, 6))
        assert np.array_equal(s.read_region([3, 4], 0, [8, 6]), a)
        assert np.array_equal(s.read_region(np.array([3, 4], np.uint16), np.int8(0), np.array([8, 6])), a)
        assert s.read_region((0, 0), 0, (0, 0)).shape == (0, 0, 4)
        # Downsamples: numbers only; an int too large for a float is out of range.
        assert s.get_best_level_for_downsample(np.float32(2.0)) == s.get_best_level_for_downsample(2)
        _raises_not_overflow(InvalidArgumentError, lambda: s.get_best_level_for_downsample(10**400))
        e = _raises_not_overflow(TypeError, lambda: s.get_best_level_for_downsample("2"))
        assert "downsample must be a number" in str(e)
        e = _raises_not_overflow(TypeError, lambda: s.read_associated(3))
        assert "associated image name" in str(e)


@needs_data
def test_device_ordinals_out_of_range_are_value_errors():
    with Slide(BOXES) as s:
        for dev in (2**64, -(2**70), np.int64(-1)):
            _raises_not_overflow(ValueError, lambda: s.read_region((0, 0), 0, (8, 8), device=dev))
            _raises_not_overflow(ValueError, lambda: s.read_regions([(0, 0)], 0, (8, 8), device=dev))
            _raises_not_overflow(ValueError, lambda: slidestream.gpu_stats(dev))
            _raises_not_overflow(ValueError, lambda: slidestream.gpu_reset_stats(dev))
            _raises_not_overflow(ValueError, lambda: slidestream.gpu_clear_cache(dev))


@needs_data
def test_openslide_compat_ints():
    with slidestream.OpenSlide(BOXES) as o:
        # Any int that is not a level reads as transparent, as OpenSlide's missing levels.
        for level in (-1, 2**31, 2**63, 2**70, -(2**70)):
            assert o.read_region((0, 0), level, (8, 8)).getextrema() == ((0, 0),) * 4
        for loc in ((2**63, 0), (0, 2**64)):
            _raises_not_overflow(InvalidArgumentError, lambda: o.read_region(loc, 0, (8, 8)))
        for size in ((-1, 8), (2**63, 8)):
            _raises_not_overflow(slidestream.OpenSlideError, lambda: o.read_region((0, 0), 0, size))
        for bad in (1.5, "1"):
            _raises_not_overflow(TypeError, lambda: o.read_region((bad, 0), 0, (8, 8)))
            _raises_not_overflow(TypeError, lambda: o.read_region((0, 0), bad, (8, 8)))
            _raises_not_overflow(TypeError, lambda: o.read_region((0, 0), 0, (8, bad)))
        assert o.read_region((np.int64(0), 0), np.int32(0), (np.uint8(8), 8)).size == (8, 8)


def test_framework_adapter_ints():
    pytest.importorskip("dask.array")
    import slidestream.dask as ssd
    from slidestream.torch import _PatchSource

    for level in (-1, 2**70, -(2**70)):
        _raises_not_overflow(InvalidArgumentError, lambda: ssd.read_patches(CMU, [(0, 0)], 8, level))
        _raises_not_overflow(InvalidArgumentError, lambda: _PatchSource(CMU, [(0, 0)], level, 8))
    for size in (0, -1, (8, -(2**70))):
        _raises_not_overflow(ValueError, lambda: ssd.read_patches(CMU, [(0, 0)], size, 0))
    for size in (2.5, (8, 2.5), (8, "8"), "8"):
        e = _raises_not_overflow(TypeError, lambda: ssd.read_patches(CMU, [(0, 0)], size, 0))
        assert "size" in str(e)
    for batch in (0, -1, True):
        _raises_not_overflow(ValueError, lambda: ssd.read_patches(CMU, [(0, 0)], 8, 0, batch=batch))
    _raises_not_overflow(TypeError, lambda: ssd.read_patches(CMU, [(0, 0)], 8, 0, batch=2.0))
    for level in (1.0, "0", None):
        _raises_not_overflow(TypeError, lambda: _PatchSource(CMU, [(0, 0)], level, 8))
        _raises_not_overflow(TypeError, lambda: ssd.read_level(CMU, level))


# --- F13: locations ------------------------------------------------------------------------------


LOCS = [(0, 0), (100, 37), (2000, 2900), (-5, 7)]


@pytest.mark.parametrize("dtype", ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", ">i8", ">i4", ">u2", "<i2"])
def test_read_regions_takes_every_integer_dtype(dtype):
    info = np.iinfo(dtype)
    locs = [(x, y) for x, y in LOCS if info.min <= min(x, y) and max(x, y) <= info.max]
    with Slide(CMU) as s:
        expected = s.read_regions(np.array(locs, np.int64), 0, (16, 8))
        for arr in (np.array(locs, dtype), np.asfortranarray(np.array(locs, dtype)), np.repeat(np.array(locs, dtype), 2, axis=0)[::2]):
            assert np.array_equal(s.read_regions(arr, 0, (16, 8)), expected), arr.dtype


class _ArrayLike:
    """Not a sequence, but convertible with numpy.asarray (as torch tensors and DataFrames)."""

    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a


def test_read_regions_takes_sequences_of_pairs():
    with Slide(CMU) as s:
        expected = s.read_regions(np.array(LOCS, np.int64), 0, (16, 8))
        arr = np.array(LOCS, np.int32)
        for given in (
            [list(p) for p in LOCS],
            tuple(LOCS),
            list(arr),  # numpy rows
            [tuple(r) for r in arr],  # tuples of numpy ints
            [np.array(p, np.uint64) if min(p) >= 0 else np.array(p) for p in LOCS],
            np.array(LOCS, object),
            _ArrayLike(np.array(LOCS, ">i4")),  # a CPU torch tensor, a DataFrame
        ):
            assert np.array_equal(s.read_regions(given, 0, (16, 8)), expected), type(given)
        for empty in ([], (), np.empty((0, 2), np.int32), np.array([])):
            assert s.read_regions(empty, 0, (16, 8)).shape == (0, 8, 16, 3)


@pytest.mark.parametrize("device", [None, "cuda"])
def test_read_regions_refuses_what_is_not_locations(device):
    with Slide(CMU) as s:
        read = lambda locs: s.read_regions(locs, 0, (8, 8), device=device)  # noqa: E731
        for bad in ({(0, 0): 1}, {(0, 0)}, "00", b"00", 7, None, np.zeros((2, 2), np.float64), np.zeros((2, 2), bool), iter([(0, 0)])):
            e = _raises_not_overflow(TypeError, lambda: read(bad))
            assert "integer array of shape (n, 2) or a sequence of (x, y) pairs" in str(e), str(e)
        for bad in ([(0.5, 0)], [(0, "1")], [(0, 0), 5], [{0: 1, 1: 2}]):
            e = _raises_not_overflow(TypeError, lambda: read(bad))
            assert "locations[" in str(e) and "must be" in str(e), str(e)
        for bad in ([(0, 0, 0)], [(1,)], np.zeros((2, 3), np.int64), np.zeros((2,), np.int64), np.zeros((1, 1, 2), np.int64)):
            e = _raises_not_overflow(ValueError, lambda: read(bad))
            assert not isinstance(e, InvalidArgumentError) or "range" in str(e)
        for bad in (np.array([[2**63, 0]], np.uint64), np.array([[0, 2**64]], object), [(0, 2**63)], [(np.uint64(2**63), 0)]):
            e = _raises_not_overflow(InvalidArgumentError, lambda: read(bad))
            assert "out of range" in str(e)


def test_patch_sources_cast_locations_safely():
    pytest.importorskip("dask.array")
    import slidestream.dask as ssd
    from slidestream.torch import _PatchSource

    with Slide(CMU) as s:
        expected = s.read_regions([(10, 20), (30, 40)], 0, (8, 8))
    for given in (
        np.array([(10, 20), (30, 40)], ">u2"),
        [np.array([10, 20]), np.array([30, 40])],
        [[10, 20], [30, 40]],
        _ArrayLike(np.array([(10, 20), (30, 40)], "i2")),
    ):
        assert np.array_equal(_PatchSource(CMU, given, 0, 8).read_arrays([0, 1]), expected)
        assert np.array_equal(ssd.read_patches(CMU, given, 8, 0).compute(scheduler="sync"), expected)
    for bad in (np.array([[0, 2**63]], np.uint64), np.array([[0, 2**64]], object), [(0, 0, 2**63)], [(0, 1e30)]):
        _raises_not_overflow(InvalidArgumentError, lambda: _PatchSource(CMU, bad, 0, 8))
        _raises_not_overflow(InvalidArgumentError, lambda: ssd.read_patches(CMU, bad, 8, 0))
    for bad in ({(0, 0): 1}, "ab", np.zeros((1, 2), bool), [(0, "1")]):
        e = _raises_not_overflow(TypeError, lambda: _PatchSource(CMU, bad, 0, 8))
        assert "locations must be" in str(e)


# --- F14: thumbnails, chunks, Deep Zoom ----------------------------------------------------------


def test_thumbnail_sizes_are_checked():
    pytest.importorskip("PIL")
    with Slide(CMU) as s, slidestream.OpenSlide(CMU) as o:
        for thumb in (s.get_thumbnail, o.get_thumbnail):
            for size in ((0, 0), (0, 10), (10, -1), (-5, -5)):
                e = _raises_not_overflow(ValueError, lambda: thumb(size))
                assert "size" in str(e) and "positive" in str(e)
            for size in ((1.5, 10), ("10", 10), None, (10, 10, 10), True):
                e = _raises_not_overflow((TypeError, ValueError), lambda: thumb(size))
                assert "size" in str(e)
            _raises_not_overflow(InvalidArgumentError, lambda: thumb((2**63, 10)))
        # The native API takes an int for a square bound; the OpenSlide drop-in keeps
        # openslide-python's pair-only signature.
        assert np.array_equal(s.get_thumbnail(64), s.get_thumbnail((64, 64)))
        _raises_not_overflow(TypeError, lambda: o.get_thumbnail(10))
        assert max(s.get_thumbnail((64, 64)).shape[:2]) == 64
        assert max(o.get_thumbnail([64, np.int64(64)]).size) == 64


def test_dask_chunks_are_checked():
    pytest.importorskip("dask.array")
    import slidestream.dask as ssd

    for chunks in ((0, 0), (0, 256), (256, -1), -3, 0, ((0,), (256,))):
        e = _raises_not_overflow(ValueError, lambda: ssd.read_level(CMU, 0, chunks=chunks))
        assert "chunks" in str(e)
    for chunks in (2.5, "256", (256, 2.5), (256, "a"), True):
        e = _raises_not_overflow(TypeError, lambda: ssd.read_level(CMU, 0, chunks=chunks))
        assert "chunks" in str(e)
    assert ssd.read_level(CMU, 0, chunks=(512, np.int64(1024))).chunksize[:2] == (512, 1024)


def test_deepzoom_parameters_are_checked():
    pytest.importorskip("PIL")
    from slidestream.deepzoom import DeepZoomGenerator

    o = slidestream.OpenSlide(CMU)
    for ts in (0, -1, -254):
        e = _raises_not_overflow(ValueError, lambda: DeepZoomGenerator(o, tile_size=ts))
        assert "tile_size" in str(e)
    for ts in (1.5, "254", None, True):
        e = _raises_not_overflow(TypeError, lambda: DeepZoomGenerator(o, tile_size=ts))
        assert "tile_size" in str(e)
    for ov in (-1, -(2**70)):
        e = _raises_not_overflow(ValueError, lambda: DeepZoomGenerator(o, overlap=ov))
        assert "overlap" in str(e)
    for ov in (0.5, "1", None):
        _raises_not_overflow(TypeError, lambda: DeepZoomGenerator(o, overlap=ov))
    for lb in ("False", None, 0.0, [1]):
        e = _raises_not_overflow(TypeError, lambda: DeepZoomGenerator(o, limit_bounds=lb))
        assert "limit_bounds" in str(e)
    dz = DeepZoomGenerator(o, tile_size=np.int64(128), overlap=np.int8(0), limit_bounds=np.bool_(True))
    assert all(c > 0 and r > 0 for c, r in dz.level_tiles)
    n = dz.level_count
    for level, address in ((1.5, (0, 0)), (n - 1, (0.5, 0)), (n - 1, "00"), (n - 1, None)):
        _raises_not_overflow(TypeError, lambda: dz.get_tile(level, address))
    assert dz.get_tile(np.int64(n - 1), (np.int32(0), 0)).size == dz.get_tile_dimensions(n - 1, (0, 0))


# --- F15: when settings are read; test hooks -----------------------------------------------------


def test_settings_are_read_when_a_slide_is_opened_by_every_read():
    """The per-open settings (here max_region_bytes) are those in effect when the slide is
    opened, for read_region, read_regions (CPU and device form), get_thumbnail, the
    OpenSlide layer: a later change does not reach an open slide, and a slide opened under a
    scope keeps the scope's values after it ends."""
    before = Slide(CMU)
    with config.scope(max_region_bytes=1000):
        inside = Slide(CMU)
        inside_compat = slidestream.OpenSlide(CMU)
        assert before.read_region((0, 0), 0, (64, 64)).shape == (64, 64, 4)
        assert before.read_regions([(0, 0)] * 4, 0, (64, 64)).shape == (4, 64, 64, 3)
    for call in (
        lambda: inside.read_region((0, 0), 0, (64, 64)),
        lambda: inside.read_regions([(0, 0)], 0, (64, 64)),
        lambda: inside.read_regions([(0, 0)], 0, (64, 64), device="cuda"),
        lambda: inside.read_region((0, 0), 0, (64, 64), device="cuda"),
        lambda: inside_compat.read_region((0, 0), 0, (64, 64)),
    ):
        _raises_not_overflow(LimitsExceededError, call)
    # A small read fits in the limit captured at open.
    assert inside.read_regions([(0, 0)], 0, (8, 8)).shape == (1, 8, 8, 3)


def test_int_sizes_are_squares_everywhere():
    """read_region, read_regions, read_patches and get_thumbnail take one int for a square;
    a bool is not a size."""
    with Slide(CMU) as s:
        assert np.array_equal(s.read_region((10, 20), 0, 48), s.read_region((10, 20), 0, (48, 48)))
        assert np.array_equal(s.read_regions([(5, 5)], 0, np.int64(24)), s.read_regions([(5, 5)], 0, (24, 24)))
        assert np.array_equal(slidestream.read_patches([s], [(0, 0, 7, 9)], 16), s.read_regions([(7, 9)], 0, (16, 16)))
        for bad in (True, 2.0, "8"):
            e = _raises_not_overflow(TypeError, lambda: s.read_region((0, 0), 0, bad))
            assert "size" in str(e)
        _raises_not_overflow(InvalidArgumentError, lambda: s.read_region((0, 0), 0, -1))


def test_non_slide_errors_are_short_and_every_reason_is_one_call_away():
    """A file no driver takes: one short message with the likeliest reason; format_verdicts
    gives each driver's, in order."""
    from _parity_helpers import locate_testdata

    td = locate_testdata()
    with pytest.raises(slidestream.UnsupportedFormatError) as e:
        Slide(td / "broken.svs")
    msg = str(e.value)
    assert "not a TIFF, DICOM or MIRAX (.mrxs) slide file" in msg and "format_verdicts" in msg
    assert "aperio:" not in msg and "Dual-personality" not in msg and len(msg) - len(str(td / "broken.svs")) < 250
    with pytest.raises(slidestream.UnsupportedFormatError, match="a TIFF file no slide format takes: IFD 0 is not tiled"):
        Slide(td / "zero_gi.tif")
    v = slidestream.format_verdicts(td / "broken.svs")
    assert list(v)[-1] == "generic-tiff" and "aperio" in v and all(r != "accepted" for r in v.values())
    ok = slidestream.format_verdicts(td / "boxes.tiff")
    assert ok["generic-tiff"] == "accepted" and ok["aperio"] != "accepted"
    with pytest.raises(FileNotFoundError):
        slidestream.format_verdicts(td / "no-such-file.svs")
    with pytest.raises(TypeError):
        slidestream.format_verdicts(3.5)


def test_native_thumbnail_has_openslides_size_and_pixels():
    """Slide.get_thumbnail gives openslide-python's size (Pillow's thumbnail of the best level;
    a DICOM series at (512, 512) was 511 px tall before) and its pixels within 2 levels."""
    openslide = pytest.importorskip("openslide")
    pytest.importorskip("PIL")
    from _parity_helpers import locate_testdata

    td = locate_testdata()
    dicom = sorted((td / "CMU-1-Small-Region-dicom").glob("*.dcm"))
    cases = [(td / "CMU-1-Small-Region-dicom", dicom[0]), (CMU, CMU), (td / "tcga-cr-7395-01a-01-ts1.svs",) * 2]
    for ours, theirs in cases:
        for size in ((512, 512), (300, 100), (64, 64)):
            a = Slide(ours).get_thumbnail(size)
            b = np.asarray(openslide.OpenSlide(str(theirs)).get_thumbnail(size))
            assert a.shape == b.shape, (ours, size)
            assert np.abs(a.astype(int) - b).max() <= 2, (ours, size)
