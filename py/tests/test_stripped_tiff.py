"""Stripped (untiled) TIFF pyramids open through ``slidestream.Slide`` and read what tifffile
reads (OpenSlide 4.0.1 refuses these files, so tifffile is the oracle). The files are written
here with tifffile: an OME-TIFF whose reduced levels are SubIFDs (deflate, RGB) and a generic
TIFF whose reduced levels are NewSubfileType pages (uncompressed, greyscale). The Rust test
core/tests/stripped_tiff.rs covers the other codecs and the hostile headers."""

from __future__ import annotations

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")

from slidestream import Slide  # noqa: E402


def _pattern(h: int, w: int, spp: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (h, w, spp), dtype=np.uint8)
    return a if spp > 1 else a[:, :, 0]


def _rgba(a: np.ndarray) -> np.ndarray:
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    return np.concatenate([a, np.full(a.shape[:2] + (1,), 255, np.uint8)], axis=2)


@pytest.mark.parametrize(
    "name, spp, subifds, kw",
    [
        ("strips.ome.tif", 3, True, dict(compression="zlib", rowsperstrip=12, photometric="rgb")),
        ("strips-pages.tif", 1, False, dict(rowsperstrip=5, photometric="minisblack")),
    ],
)
def test_stripped_pyramid_reads_as_tifffile(tmp_path, name, spp, subifds, kw):
    base = _pattern(157, 211, spp)
    levels = [base, np.ascontiguousarray(base[::2, ::2]), np.ascontiguousarray(base[::4, ::4])]
    path = tmp_path / name
    ome = name.endswith(".ome.tif")
    with tifffile.TiffWriter(path, ome=ome) as t:
        t.write(levels[0], subifds=2 if subifds else None, metadata={} if ome else None, **kw)
        for a in levels[1:]:
            t.write(a, subfiletype=1, metadata=None, **kw)
    with tifffile.TiffFile(path) as t:
        p0 = t.pages[0]
        assert not p0.is_tiled
        pages = [p0] + (list(p0.pages) if subifds else list(t.pages[1:]))
        oracle = [p.asarray() for p in pages]
    s = Slide(path)
    assert s.vendor == ("ome-tiff" if ome else "generic-tiff")
    assert s.level_count == 3
    for k, want in enumerate(oracle):
        h, w = want.shape[:2]
        assert s.level_dimensions[k] == (w, h)
        got = s.read_region((0, 0), k, (w, h))
        np.testing.assert_array_equal(got, _rgba(want))
    # A region across strip boundaries at level 0.
    got = s.read_region((17, 9), 0, (50, 40))
    np.testing.assert_array_equal(got, _rgba(oracle[0][9:49, 17:67]))
