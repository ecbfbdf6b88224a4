"""slidestream.deepzoom.DeepZoomGenerator against openslide-python's DeepZoomGenerator.

1. Geometry (level sizes, tile counts, every tile's read_region coordinates and size, DZI) is
   exactly equal, for slidestream.OpenSlide and slidestream.Slide inputs and several
   tile_size / overlap / limit_bounds settings.
2. Tile rendering is exactly OpenSlide's: fed the same openslide.OpenSlide object, both
   generators give bit-identical tiles (same read, compositing and Lanczos reduction).
3. Tiles rendered from slidestream's pixels: where the slide level read is aligned (its
   level-0 origin is a multiple of the level downsample, so OpenSlide does not resample),
   they equal OpenSlide's within the codec tolerance (0 lossless; JPEG / JPEG 2000: 2, or 3
   when the tile is Lanczos-reduced, whose kernel's absolute weight sum is < 1.5). Unaligned
   reads are checked by rendering through a stand-in slide that resamples slidestream's
   pixels bilinearly at OpenSlide's sub-pixel offset (as test_parity); that adds one rounding
   of the resampling and one of OpenSlide's premultiplied storage, so the tolerance there is
   codec + 2, + 1 more when reduced.
"""

from __future__ import annotations

import numpy as np
import pytest

import slidestream
from _parity_helpers import (
    slide_path,
    LOSSY_COMPRESSIONS,
    first_difference,
    max_abs_diff,
    openslide_origin,
    page_compressions,
    read_as_openslide,
)
from slidestream.deepzoom import DeepZoomGenerator

openslide = pytest.importorskip("openslide")
odz = pytest.importorskip("openslide.deepzoom")
PIL_Image = pytest.importorskip("PIL.Image")

SLIDES = [
    "boxes.tiff",
    "CMU-1-Small-Region.svs",
    "cog.tiff",
    "small_aperio.svs",
    "tcga-cr-7395-01a-01-ts1.svs",
    "tiled-jpeg-rgb-u8.tif",
    "tiff_tiled_planar_lzw.tiff",
    "yb10kx5k.zstd.tiff",
]
SETTINGS = [
    dict(),
    dict(tile_size=256, overlap=0),
    dict(tile_size=510, overlap=2, limit_bounds=True),
    dict(tile_size=97, overlap=3),
]


def _path(name: str) -> str:
    return str(slide_path(name))


def _lossy(name: str) -> bool:
    return any(c in LOSSY_COMPRESSIONS for c in page_compressions(slide_path(name)).values())


def _all_addresses(dz):
    for level, (cols, rows) in enumerate(dz.level_tiles):
        for row in range(rows):
            for col in range(cols):
                yield level, (col, row)


def _sample_addresses(dz, per_level: int = 12):
    """Every tile of levels with few tiles; a deterministic spread (corners included) of the
    others."""
    for level, (cols, rows) in enumerate(dz.level_tiles):
        n = cols * rows
        if n <= per_level:
            picks = range(n)
        else:
            picks = sorted({0, n - 1, cols - 1, n - cols} | {(i * 7919) % n for i in range(per_level - 4)})
        for i in picks:
            yield level, (i % cols, i // cols)


@pytest.mark.parametrize("name", SLIDES)
def test_geometry_matches_openslide(name):
    osr = openslide.OpenSlide(_path(name))
    inputs = [slidestream.OpenSlide(_path(name)), slidestream.Slide(_path(name))]
    for kw in SETTINGS:
        theirs = odz.DeepZoomGenerator(osr, **kw)
        for src in inputs:
            ours = DeepZoomGenerator(src, **kw)
            assert ours.level_count == theirs.level_count
            assert ours.level_tiles == theirs.level_tiles
            assert ours.level_dimensions == theirs.level_dimensions
            assert ours.tile_count == theirs.tile_count
            for fmt in ("jpeg", "png"):
                assert ours.get_dzi(fmt) == theirs.get_dzi(fmt)
            for level, address in _all_addresses(theirs):
                assert ours.get_tile_coordinates(level, address) == theirs.get_tile_coordinates(level, address), (kw, level, address)
                assert ours.get_tile_dimensions(level, address) == theirs.get_tile_dimensions(level, address), (kw, level, address)


def test_invalid_level_and_address():
    ours = DeepZoomGenerator(slidestream.OpenSlide(_path("boxes.tiff")))
    n = ours.level_count
    cols, rows = ours.level_tiles[n - 1]
    for level, address in [(n, (0, 0)), (-1, (0, 0)), (n - 1, (cols, 0)), (n - 1, (0, rows)), (n - 1, (-1, 0))]:
        with pytest.raises(ValueError):
            ours.get_tile(level, address)
        with pytest.raises(ValueError):
            ours.get_tile_coordinates(level, address)
    assert repr(ours) == "DeepZoomGenerator(OpenSlide(%r), tile_size=254, overlap=1, limit_bounds=False)" % _path("boxes.tiff")


@pytest.mark.parametrize("name", ["boxes.tiff", "cog.tiff", "CMU-1-Small-Region.svs", "tcga-cr-7395-01a-01-ts1.svs"])
def test_rendering_is_openslides(name):
    """Same slide object in, bit-identical tiles out (modes, sizes, ICC info, pixels)."""
    osr = openslide.OpenSlide(_path(name))
    # Low Deep Zoom levels of single-level slides read (and reduce) the whole slide: one
    # setting is enough there.
    for kw in SETTINGS[:2] if osr.level_count > 1 and osr.dimensions[0] < 1000 else SETTINGS[:1]:
        theirs = odz.DeepZoomGenerator(osr, **kw)
        ours = DeepZoomGenerator(osr, **kw)
        for level, address in _sample_addresses(theirs, per_level=6):
            a, b = ours.get_tile(level, address), theirs.get_tile(level, address)
            assert a.mode == b.mode == "RGB" and a.size == b.size
            assert a.info == b.info
            assert np.array_equal(np.asarray(a), np.asarray(b)), (kw, level, address)


class _OpenSlideResampling:
    """A stand-in slide over slidestream.Slide whose read_region returns what OpenSlide returns
    (bilinear resampling at OpenSlide's sub-pixel level origin), for checking unaligned tiles."""

    def __init__(self, slide: slidestream.Slide) -> None:
        self._s = slide
        self.properties = slide.properties
        self.level_dimensions = slide.level_dimensions
        self.level_downsamples = slide.level_downsamples
        self.color_profile = None

    def get_best_level_for_downsample(self, d: float) -> int:
        return self._s.get_best_level_for_downsample(d)

    def read_region(self, location, level, size):
        return PIL_Image.fromarray(read_as_openslide(self._s, location, level, size))


@pytest.mark.parametrize("name", SLIDES)
def test_tiles_match_openslide(name):
    """Tiles from slidestream's pixels vs openslide's generator (module docstring, point 3)."""
    osr = openslide.OpenSlide(_path(name))
    osr.set_cache(openslide.OpenSlideCache(256 << 20))
    src = slidestream.OpenSlide(_path(name))
    theirs = odz.DeepZoomGenerator(osr)
    ours = DeepZoomGenerator(src)
    from_slide = DeepZoomGenerator(src.slide)
    shim = DeepZoomGenerator(_OpenSlideResampling(src.slide))
    codec = 2 if _lossy(name) else 0
    seen = {"aligned": 0, "unaligned": 0}
    for level, address in _sample_addresses(theirs):
        (loc, slide_level, size) = theirs.get_tile_coordinates(level, address)
        reduced = tuple(size) != theirs.get_tile_dimensions(level, address)
        ds = osr.level_downsamples[slide_level]
        expected = theirs.get_tile(level, address)
        tile = ours.get_tile(level, address)
        assert isinstance(tile, PIL_Image.Image) and tile.mode == "RGB" and tile.size == expected.size
        assert tile.info.get("icc_profile") == expected.info.get("icc_profile")
        # slidestream.Slide input renders the same tile as slidestream.OpenSlide input.
        assert np.array_equal(np.asarray(from_slide.get_tile(level, address)), np.asarray(tile))
        b = np.asarray(expected)
        if all(openslide_origin(v, ds)[1] == 0 for v in loc):
            tol = codec + (1 if reduced and codec else 0)
            a = np.asarray(tile)
            seen["aligned"] += 1
        else:
            tol = codec + 2 + (1 if reduced else 0)
            a = np.asarray(shim.get_tile(level, address))
            seen["unaligned"] += 1
        d = max_abs_diff(a, b)
        assert d <= tol, f"level {level} tile {address} ({loc}, {slide_level}, {size}): max abs diff {d} > {tol} {first_difference(a, b)}"
    assert seen["aligned"] > 0
    if name in ("tcga-cr-7395-01a-01-ts1.svs", "yb10kx5k.zstd.tiff"):
        assert seen["unaligned"] > 0, seen  # these have levels with fractional downsamples
