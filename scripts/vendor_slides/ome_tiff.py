"""OME-TIFF slides (tifffile writes OME-XML and SubIFD pyramids natively).

OpenSlide 4.0.1 has no OME-TIFF driver: it opens these as generic-tiff with one level (IFD 0;
it never reads SubIFDs), a multichannel file as channel 0 in grey (16-bit: the high byte).
So OpenSlide checks level 0; the SubIFD levels and the native channel samples are checked
against the known pixels written by ``known.py`` (``core/tests/channels.rs``,
``py/tests/test_channels.py``).

* ``ome-brightfield.ome.tif``: RGB 600x500, deflate 128² tiles, 2 SubIFD levels, 0.25 µm/px
  (OME PhysicalSize and TIFF resolution agree).
* ``ome-mainchain.ome.tif``: RGB 400x300 whose reduced level is in the main chain (no SubIFDs):
  both levels as OpenSlide's generic-tiff.
* ``ome-fluo-u8.ome.tif``: 3 channels (DAPI, FITC, TRITC) uint8 CYX 520x400, 1 SubIFD level.
* ``ome-fluo-u16.ome.tif``: 4 channels uint16 CYX 512x400, 2 SubIFD levels,
  horizontal predictor.
"""

from __future__ import annotations

import pathlib
from typing import List

import numpy as np
import tifffile

from .common import Generated, Region, assert_close, downscale, tissue_like
from .known import Known, crop, rgba_region

RES = dict(resolution=(40000.0, 40000.0), resolutionunit="CENTIMETER")


def _brightfield(out: pathlib.Path) -> Generated:
    name = "ome-brightfield.ome.tif"
    l0 = tissue_like(600, 500, seed=11)
    levels = [l0, downscale(l0, 2), downscale(l0, 4)]
    with tifffile.TiffWriter(out / name, ome=True) as tw:
        opts = dict(tile=(128, 128), photometric="rgb", compression="zlib")
        tw.write(l0, subifds=2, metadata={"axes": "YXS", "PhysicalSizeX": 0.25, "PhysicalSizeY": 0.25, "Channel": {"Name": ["RGB"]}}, **RES, **opts)
        for lv in levels[1:]:
            tw.write(lv, subfiletype=1, **opts)
    k = Known(out, name, ["R", "G", "B"])
    for lvl, (x, y, w, h) in [(1, (0, 0, 300, 250)), (1, (200, 100, 128, 140)), (2, (-40, 380, 90, 60))]:
        ds = 2**lvl
        k.add("rgba", lvl, (x, y), (w, h), rgba_region(levels[lvl], x // ds, y // ds, w, h))
        k.add("channels", lvl, (x, y), (w, h), crop(levels[lvl], x // ds, y // ds, w, h))
    k.add("channels", 0, (100, 50), (64, 48), crop(l0, 100, 50, 64, 48)[..., [2, 0]], channels=[2, 0])
    k.write()

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (600, 500)))
        assert_close(got[..., :3], l0, 0, name)

    return Generated(
        name=name,
        vendor="generic-tiff",
        level_dimensions=[(600, 500)],
        regions=[Region("whole", 0, (0, 0), (600, 500)), Region("edge", 0, (520, 430), (100, 100)), Region("mid", 0, (129, 127), (200, 130))],
        properties={"openslide.mpp-x": "0.25", "openslide.mpp-y": "0.25"},
        check=check,
        note="OME-TIFF RGB, 2 SubIFD levels OpenSlide does not read (known pixels in known/)",
    )


def _fluo(out: pathlib.Path, dtype, n: int, sub: int, big_endian: bool, name: str, names: List[str]) -> Generated:
    rng = np.random.default_rng(5 + n)
    # 16-bit greyscale: a width that is a multiple of the tile width, because libtiff's RGBA
    # interface (OpenSlide's reader) misplaces the right edge of partial 16-bit grey tiles
    # (it skips the tile padding in bytes, not samples); slidestream reads them correctly.
    h, w = (400, 520) if dtype == np.uint8 else (400, 512)
    y, x = np.mgrid[0:h, 0:w]
    top = 255 if dtype == np.uint8 else 65535
    chans = []
    for c in range(n):
        blob = np.exp(-(((x - rng.uniform(0, w)) ** 2 + (y - rng.uniform(0, h)) ** 2) / (2 * (60 + 30 * c) ** 2)))
        noise = rng.integers(0, top // 16, (h, w))
        chans.append(np.clip(blob * top * 0.9 + noise, 0, top).astype(dtype))
    l0 = np.stack(chans)  # C, Y, X
    levels = [l0] + [l0[:, :: 2**k, :: 2**k].copy() for k in range(1, sub + 1)]
    kw = dict(tile=(128, 128), photometric="minisblack", compression="zlib", predictor=(dtype == np.uint16))
    with tifffile.TiffWriter(out / name, ome=True, byteorder=">" if big_endian else "<") as tw:
        tw.write(l0, subifds=sub, metadata={"axes": "CYX", "Channel": {"Name": names}, "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5}, resolution=(20000.0, 20000.0), resolutionunit="CENTIMETER", **kw)
        for lv in levels[1:]:
            tw.write(lv, subfiletype=1, **kw)
    hwc = [np.moveaxis(lv, 0, -1) for lv in levels]
    k = Known(out, name, names)
    for lvl, (x0, y0, ww, hh) in [(0, (0, 0, 520, 400)), (0, (300, 200, 300, 250)), (1, (60, 40, 150, 120)), (sub, (-8, -8, 64, 64)), (0, (480, 380, 64, 64))]:
        ds = 2**lvl
        k.add("channels", lvl, (x0, y0), (ww, hh), crop(hwc[lvl], x0 // ds, y0 // ds, ww, hh))
        c0 = hwc[lvl][..., :1]
        grey = c0 if dtype == np.uint8 else (c0 >> 8).astype(np.uint8)
        k.add("rgba", lvl, (x0, y0), (ww, hh), rgba_region(grey, x0 // ds, y0 // ds, ww, hh))
    k.add("channels", 1, (100, 100), (50, 40), crop(hwc[1], 50, 50, 50, 40)[..., [n - 1, 0, n - 1]], channels=[n - 1, 0, n - 1])
    k.write()

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (w, h)))
        want = l0[0] if dtype == np.uint8 else (l0[0] >> 8).astype(np.uint8)
        for c in range(3):
            assert_close(got[..., c], want, 0, f"{name} channel 0 as grey")

    return Generated(
        name=name,
        vendor="generic-tiff",
        level_dimensions=[(w, h)],
        regions=[Region("whole", 0, (0, 0), (w, h)), Region("corner", 0, (w - 70, 330), (100, 100))],
        properties={"openslide.mpp-x": "0.5"},
        check=check,
        note=f"OME-TIFF {n}-channel {np.dtype(dtype).name} fluorescence, one IFD per channel, {sub} SubIFD levels",
    )


def _main_chain(out: pathlib.Path) -> Generated:
    """A reduced level in the main IFD chain (NewSubfileType 1, a second OME Image), no SubIFDs:
    the levels are generic-tiff's, so OpenSlide reads both."""
    name = "ome-mainchain.ome.tif"
    l0 = tissue_like(400, 300, seed=12)
    opts = dict(tile=(128, 128), photometric="rgb", compression="zlib")
    with tifffile.TiffWriter(out / name, ome=True) as tw:
        tw.write(l0, metadata={"axes": "YXS"}, **opts)
        tw.write(downscale(l0, 2), subfiletype=1, metadata={"axes": "YXS"}, **opts)

    def check(osr) -> None:
        assert_close(np.asarray(osr.read_region((0, 0), 1, (200, 150)))[..., :3], downscale(l0, 2), 0, name)

    return Generated(
        name=name,
        vendor="generic-tiff",
        level_dimensions=[(400, 300), (200, 150)],
        regions=[Region("l0", 0, (0, 0), (400, 300)), Region("l1", 1, (0, 0), (200, 150)), Region("l1-edge", 1, (300, 250), (64, 64))],
        check=check,
        note="OME-TIFF with its reduced level in the main chain (levels as generic-tiff)",
    )


def build(out: pathlib.Path) -> List[Generated]:
    return [
        _brightfield(out),
        _main_chain(out),
        _fluo(out, np.uint8, 3, 1, False, "ome-fluo-u8.ome.tif", ["DAPI", "FITC", "TRITC"]),
        _fluo(out, np.uint16, 4, 2, False, "ome-fluo-u16.ome.tif", ["DAPI", "GFP", "Cy3", "Cy5"]),
    ]
