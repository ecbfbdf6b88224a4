"""Philips, Leica and MIRAX slides through the drop-in and Deep Zoom, against live OpenSlide:
``openslide.bounds-*`` / ``openslide.region[i].*`` where OpenSlide sets them (Leica; MIRAX
when the level-0 tiles do not cover the level, ``mirax-sparse``), none where it does not
(Philips, the other MIRAX slides), Deep Zoom geometry with and without ``limit_bounds``, and the
full-resolution Deep Zoom tiles (whole-pixel level-0 coordinates) within the JPEG tolerance."""

from __future__ import annotations

import numpy as np
import pytest

import slidestream
from _parity_helpers import max_abs_diff, vendor_slides
from slidestream.deepzoom import DeepZoomGenerator

openslide = pytest.importorskip("openslide")
odz = pytest.importorskip("openslide.deepzoom")

VENDORS = ("philips", "leica", "mirax")


def _files():
    root = vendor_slides()
    if root is None:
        return ["<none>"]
    names = []
    for p in sorted(root.iterdir()):
        if p.is_file() and p.name != "MANIFEST.md":
            try:
                if openslide.OpenSlide.detect_format(str(p)) in VENDORS:
                    names.append(p.name)
            except Exception:
                pass
    return names or ["<none>"]


FILES = _files()


def _pair(name):
    if name == "<none>":
        pytest.skip("no generated Philips/Leica/MIRAX slides (run scripts/make_vendor_slides.py)")
    path = str(vendor_slides() / name)
    return openslide.OpenSlide(path), slidestream.OpenSlide(path)


@pytest.mark.parametrize("name", FILES)
def test_bounds_and_region_properties_are_openslides(name):
    osr, ours = _pair(name)
    keys = lambda props: {k: v for k, v in props.items() if k.startswith(("openslide.bounds-", "openslide.region[", "openslide.background-color"))}
    assert keys(dict(ours.properties)) == keys(dict(osr.properties))
    if osr.properties["openslide.vendor"] == "leica" or name == "mirax-sparse.mrxs":
        assert "openslide.bounds-x" in ours.properties
    elif osr.properties["openslide.vendor"] == "philips":
        assert "openslide.bounds-x" not in ours.properties


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("limit_bounds", [False, True])
def test_deep_zoom_geometry_and_full_resolution_tiles(name, limit_bounds):
    osr, ours = _pair(name)
    theirs = odz.DeepZoomGenerator(osr, tile_size=128, overlap=1, limit_bounds=limit_bounds)
    mine = DeepZoomGenerator(ours, tile_size=128, overlap=1, limit_bounds=limit_bounds)
    assert mine.level_count == theirs.level_count
    assert mine.level_tiles == theirs.level_tiles
    assert mine.level_dimensions == theirs.level_dimensions
    top = theirs.level_count - 1
    cols, rows = theirs.level_tiles[top]
    for row in range(rows):
        for col in range(cols):
            assert mine.get_tile_coordinates(top, (col, row)) == theirs.get_tile_coordinates(top, (col, row))
            a = np.asarray(mine.get_tile(top, (col, row)))
            b = np.asarray(theirs.get_tile(top, (col, row)))
            assert a.shape == b.shape
            assert max_abs_diff(a, b) <= 2, (name, limit_bounds, col, row)
