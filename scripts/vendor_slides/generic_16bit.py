"""Generic tiled TIFFs beyond 8-bit RGB main-chain pyramids.

* ``generic-subifd.tif``: RGB 8-bit 500x400 with 2 reduced levels in SubIFDs (no OME-XML).
  OpenSlide 4.0.1's generic-tiff walks the main IFD chain only (libtiff
  ``TIFFReadDirectory``), so it has one level; so has slidestream (the SubIFDs are not read).
* ``generic-rgb16.tif``: RGB uint16 450x330, deflate + horizontal predictor, one level (a
  reduced level made the parity test's model of OpenSlide's bilinear painting at fractional
  origins miss by 2 on these noisy samples; not investigated); OpenSlide scales samples to 8 bit through libtiff's RGBA
  interface, ``(v + 128) / 257``.
* ``generic-gray16.tif``: greyscale uint16 448x330, uncompressed (big-endian files are not generated: OpenSlide 4.0.1 detects none of tifffile's big-endian files); OpenSlide keeps
  the high byte.
Native samples of the 16-bit files are checked against the known arrays (``known.py``).
"""

from __future__ import annotations

import pathlib
from typing import List

import numpy as np
import tifffile

from .common import Generated, Region, assert_close, downscale, tissue_like
from .known import Known, crop, rgba_region


def _subifd(out: pathlib.Path) -> Generated:
    name = "generic-subifd.tif"
    l0 = tissue_like(500, 400, seed=21)
    with tifffile.TiffWriter(out / name) as tw:
        opts = dict(tile=(128, 128), photometric="rgb", compression="zlib", metadata=None)
        tw.write(l0, subifds=2, **opts)
        tw.write(downscale(l0, 2), subfiletype=1, **opts)
        tw.write(downscale(l0, 4), subfiletype=1, **opts)

    def check(osr) -> None:
        assert_close(np.asarray(osr.read_region((0, 0), 0, (500, 400)))[..., :3], l0, 0, name)

    return Generated(name, "generic-tiff", [(500, 400)], [Region("whole", 0, (0, 0), (500, 400)), Region("edge", 0, (450, 350), (80, 80))], check=check, note="SubIFD pyramid: level 0 only, as OpenSlide")


def _wide(out: pathlib.Path, rgb: bool) -> Generated:
    name = "generic-rgb16.tif" if rgb else "generic-gray16.tif"
    rng = np.random.default_rng(31 if rgb else 32)
    # greyscale: width a multiple of the tile width (libtiff's RGBA interface misplaces the
    # right edge of partial 16-bit grey tiles; see ome_tiff.py).
    h, w = (330, 450) if rgb else (330, 448)
    base = tissue_like(w, h, seed=33).astype(np.uint32)
    l0 = (base * 257 + rng.integers(0, 257, (h, w, 3))).astype(np.uint16)  # every low byte used
    if not rgb:
        l0 = l0[..., :1]
    if rgb:
        kw = dict(tile=(64, 64), photometric="rgb", compression="zlib", predictor=True, metadata=None)
        with tifffile.TiffWriter(out / name) as tw:
            tw.write(l0, **kw)
        levels = [l0]
    else:
        kw = dict(tile=(64, 64), photometric="minisblack", metadata=None)
        tifffile.imwrite(out / name, l0[..., 0], **kw)
        levels = [l0]
    to8 = (lambda a: ((a.astype(np.uint32) + 128) // 257).astype(np.uint8)) if rgb else (lambda a: (a >> 8).astype(np.uint8))
    k = Known(out, name, ["R", "G", "B"] if rgb else ["gray"])
    for lvl, (x, y, ww, hh) in [(0, (0, 0, w, h)), (0, (w - 50, 300, 100, 64)), (len(levels) - 1, (70, 30, 100, 90))]:
        ds = 2**lvl
        k.add("channels", lvl, (x, y), (ww, hh), crop(levels[lvl], x // ds, y // ds, ww, hh))
        k.add("rgba", lvl, (x, y), (ww, hh), rgba_region(to8(levels[lvl]), x // ds, y // ds, ww, hh))
    k.write()

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (w, h)))
        want = to8(l0)
        for c in range(3):
            assert_close(got[..., c], want[..., c if rgb else 0], 0, f"{name} channel {c}")

    dims = [(w, h)]
    regions = [Region("whole", 0, (0, 0), (w, h)), Region("edge", 0, (w - 30, 300), (60, 60))]
    return Generated(name, "generic-tiff", dims, regions, check=check, note="16-bit samples")


def build(out: pathlib.Path) -> List[Generated]:
    return [_subifd(out), _wide(out, True), _wide(out, False)]
