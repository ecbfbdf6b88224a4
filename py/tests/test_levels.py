"""Bad levels: every method that takes a slide level refuses a negative level and
``level_count`` with the documented error, never an ``OverflowError`` or a wrong image.

* ``Slide.read_region`` / ``read_regions`` (CPU and ``device=``): InvalidArgumentError (a
  ValueError), TypeError for a non-integer;
* OpenSlide-compatible ``OpenSlide.read_region``: a transparent image of the size asked for,
  as OpenSlide (the native API's error is the drop-in's exception to "refuse");
  ``ImageSlide.read_region``: OpenSlideError, as openslide-python;
* ``DeepZoomGenerator.get_tile`` / ``get_tile_coordinates`` / ``get_tile_dimensions``:
  ValueError("Invalid level"), as openslide-python;
* ``slidestream.dask.read_level``, ``read_patches`` and ``torch.PatchDataset``:
  InvalidArgumentError (for a negative level when called, for a level past the end when read).
"""

from __future__ import annotations

import numpy as np
import pytest

import slidestream
from _parity_helpers import locate_testdata


@pytest.fixture
def boxes():
    with slidestream.Slide(locate_testdata() / "boxes.tiff") as s:
        yield s


def _bad_levels(s):
    return [-1, -(2**31), s.level_count, s.level_count + 7, 2**31, 2**63, 2**70, -(2**70)]


def test_slide_reads_refuse_bad_levels(boxes):
    s = boxes
    for level in _bad_levels(s):
        for call in (
            lambda: s.read_region((0, 0), level, (4, 4)),
            lambda: s.read_regions([(0, 0)], level, (4, 4)),
            lambda: s.read_regions(np.zeros((2, 2), np.int64), level, (4, 4), background=0),
            lambda: s.read_region((0, 0), np.int64(level) if abs(level) < 2**63 else level, (4, 4)),
        ):
            with pytest.raises(slidestream.InvalidArgumentError) as ei:
                call()
            assert isinstance(ei.value, ValueError)
            assert f"level {level} does not exist (level count {s.level_count})" in str(ei.value)
    for bad in (1.5, "0", None):
        with pytest.raises(TypeError):
            s.read_region((0, 0), bad, (4, 4))  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            s.read_regions([(0, 0)], bad, (4, 4))  # type: ignore[arg-type]
    # The slide stays usable, and valid levels (numpy ints too) still read.
    assert s.read_region((0, 0), np.int64(s.level_count - 1), (4, 4)).shape == (4, 4, 4)
    assert s.read_regions([(0, 0)], True, (4, 4)).shape == (1, 4, 4, 3)


def test_device_reads_refuse_negative_levels_before_the_gpu(boxes):
    """A negative level is refused by the bindings before any GPU work, so the error is the
    same with or without a GPU."""
    for level in (-1, -(2**70)):
        with pytest.raises(slidestream.InvalidArgumentError):
            boxes.read_region((0, 0), level, (4, 4), device="cuda")
        with pytest.raises(slidestream.InvalidArgumentError):
            boxes.read_regions([(0, 0)], level, (4, 4), device="cuda")
    if slidestream.cuda_available():
        with pytest.raises(slidestream.InvalidArgumentError):
            boxes.read_region((0, 0), boxes.level_count, (4, 4), device="cuda")
        with pytest.raises(slidestream.InvalidArgumentError):
            boxes.read_regions([(0, 0)], boxes.level_count, (4, 4), device="cuda")


def test_compat_read_region_of_bad_levels_is_transparent():
    """The drop-in reads a level that does not exist as a transparent image, as OpenSlide
    (test_compat_handles compares it with openslide-python); a non-int level is a TypeError."""
    pytest.importorskip("PIL.Image")
    path = locate_testdata() / "boxes.tiff"
    with slidestream.OpenSlide(path) as s:
        for level in _bad_levels(s):
            img = s.read_region((0, 0), level, (4, 4))
            assert (img.mode, img.size, img.getextrema()) == ("RGBA", (4, 4), ((0, 0),) * 4)
        for level in (1.0, "1", None):
            with pytest.raises(TypeError):
                s.read_region((0, 0), level, (4, 4))
        assert s.read_region((0, 0), s.level_count - 1, (4, 4)).getextrema()[3] == (255, 255)
    png = locate_testdata() / "reference" / "boxes.tiff" / "center_l0.png"
    with slidestream.ImageSlide(png) as i:
        for level in (-1, 1, 2**70):
            with pytest.raises(slidestream.OpenSlideError):
                i.read_region((0, 0), level, (4, 4))
    openslide = pytest.importorskip("openslide")
    with openslide.ImageSlide(str(png)) as theirs:
        with pytest.raises(openslide.OpenSlideError):
            theirs.read_region((0, 0), -1, (4, 4))


def test_deepzoom_refuses_bad_levels_as_openslide():
    pytest.importorskip("PIL.Image")
    from slidestream.deepzoom import DeepZoomGenerator

    path = locate_testdata() / "boxes.tiff"
    with slidestream.OpenSlide(path) as s:
        g = DeepZoomGenerator(s)
        for level in (-1, g.level_count, 2**70):
            for method in (g.get_tile, g.get_tile_coordinates, g.get_tile_dimensions):
                with pytest.raises(ValueError, match="Invalid level"):
                    method(level, (0, 0))
    openslide = pytest.importorskip("openslide")
    from openslide.deepzoom import DeepZoomGenerator as TheirGenerator

    with openslide.OpenSlide(str(path)) as theirs:
        tg = TheirGenerator(theirs)
        for level in (-1, tg.level_count):
            with pytest.raises(ValueError, match="Invalid level"):
                tg.get_tile(level, (0, 0))


def test_dask_and_torch_refuse_bad_levels():
    path = locate_testdata() / "boxes.tiff"
    import slidestream.dask as ssd
    from slidestream.torch import _PatchSource

    pytest.importorskip("dask.array")
    for level in (-1, 4, 2**70):
        with pytest.raises(slidestream.InvalidArgumentError):
            ssd.read_level(path, level)
    with pytest.raises(slidestream.InvalidArgumentError):
        ssd.read_patches([path], [(0, 0, 0)], 8, -1)
    with pytest.raises(slidestream.InvalidArgumentError):
        ssd.read_patches([path], [(0, 0, 0)], 8, 4)  # tasks sized by tiles: checked here
    lazy = ssd.read_patches([path], [(0, 0, 0)], 8, 4, batch=1)
    with pytest.raises(slidestream.InvalidArgumentError):
        lazy.compute(scheduler="sync")
    with pytest.raises(slidestream.InvalidArgumentError):
        _PatchSource(path, [(0, 0)], -1, 8)
    src = _PatchSource(path, [(0, 0)], 4, 8)
    with pytest.raises(slidestream.InvalidArgumentError):
        src.read_array(0)
