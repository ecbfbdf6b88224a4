"""Trestle / MedScan TIFFs as OpenSlide 4.0.1's ``trestle`` driver reads them (OpenSlide's
Trestle format page; behaviour checked with OpenSlide on these files):

* IFD 0's Software starts with ``MedScan``; every IFD is tiled; IFD 0's ImageDescription is
  ``key=value`` entries separated by ``;`` (``trestle.*`` properties);
* ``OverlapsXY`` lists (x, y) tile overlaps per level: tile (col, row) is painted at
  (col * (tile - ox), row * (tile - oy)), later tiles over earlier ones, and the level is
  narrower than its TIFF image by (tiles across - 1) * ox;
* ``Background Color`` (hex) and ``Objective Power`` (integer) give the standard properties;
  X/YResolution hold µm per pixel (copied to ``openslide.mpp-x/-y``);
* the macro image is the JPEG file ``<name>.Full`` beside the slide.

The parts of a tile that a later tile covers are tinted, so a reader that stacks the tiles in
another order (or ignores the overlaps) shows the tint. Tiles are JPEG (Pillow, YCbCr 4:2:0).
"""

from __future__ import annotations

import io
import pathlib
from typing import List, Tuple

import numpy as np
from PIL import Image

from . import tiffbuild as tb
from .common import Generated, Region, downscale, tissue_like

T = 128
TINT = np.array([70, -70, 70], np.int16)


def jpeg(tile: np.ndarray, quality: int = 92) -> bytes:
    """One baseline JPEG (YCbCr 4:2:0) of an RGB tile."""
    buf = io.BytesIO()
    Image.fromarray(tile).save(buf, "JPEG", quality=quality, subsampling=2)
    return buf.getvalue()


def _crop(img: np.ndarray, x: int, y: int) -> np.ndarray:
    """The ``T`` x ``T`` part of ``img`` at (x, y), padded by repeating its edge pixels."""
    part = img[y:y + T, x:x + T]
    return np.pad(part, ((0, T - part.shape[0]), (0, T - part.shape[1]), (0, 0)), mode="edge")


def overlapped_tiles(img: np.ndarray, across: int, down: int, ox: int, oy: int) -> List[bytes]:
    """JPEG tiles (TIFF order) that show ``img`` when painted at their advance with overlaps
    (ox, oy), later over earlier; the parts a later tile hides are tinted."""
    out = []
    for r in range(down):
        for c in range(across):
            t = _crop(img, c * (T - ox), r * (T - oy)).astype(np.int16)
            if c + 1 < across and ox:
                t[:, T - ox:] += TINT
            if r + 1 < down and oy:
                t[T - oy:, :] += TINT
            out.append(jpeg(np.clip(t, 0, 255).astype(np.uint8)))
    return out


def check_mean(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """JPEG pixels near the known ones (mean and 99th percentile of the difference); the tint
    (70) on a wrongly stacked overlap raises the 99th percentile well past the bound."""
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))
    mean, p99 = float(d.mean()), float(np.percentile(d, 99))
    assert mean < 3.0 and p99 < 24, f"{what}: mean abs difference {mean:.2f}, 99th percentile {p99}"


def _stored(level_w: int, level_h: int, ox: int, oy: int) -> Tuple[int, int, int, int]:
    """TIFF image size and tile counts of a level of ``level_w`` x ``level_h`` with overlaps."""
    across = max(1, -(-(level_w - ox) // (T - ox))) if level_w > T else 1
    down = max(1, -(-(level_h - oy) // (T - oy))) if level_h > T else 1
    return level_w + (across - 1) * ox, level_h + (down - 1) * oy, across, down


def _write(path: pathlib.Path, truth: np.ndarray, overlaps: List[Tuple[int, int]], factors, desc: str) -> List[Tuple[int, int]]:
    ifds, dims = [], []
    for k, f in enumerate(factors):
        img = truth if f == 1 else downscale(truth, f)[: truth.shape[0] // f, : truth.shape[1] // f]
        h, w = img.shape[:2]
        ox, oy = overlaps[k] if k < len(overlaps) else (0, 0)
        sw, sh, across, down = _stored(w, h, ox, oy)
        assert (-(-sw // T), -(-sh // T)) == (across, down), "tile counts of the stored image"
        extra = {305: (tb.ASCII, "MedScan 2.0.0.5"), 270: (tb.ASCII, desc), 282: (tb.RATIONAL, [(1, 2)]), 283: (tb.RATIONAL, [(1, 2)])}
        ifds.append(tb.tiled_ifd(sw, sh, T, overlapped_tiles(img, across, down, ox, oy), spp=3, photometric=6, compression=7, extra=extra))
        dims.append((w, h))
    tb.write(path, ifds)
    return dims


def _overlaps(out_dir: pathlib.Path) -> Generated:
    w0, h0 = 328, 306
    truth = tissue_like(w0, h0, seed=31)
    path = out_dir / "trestle-overlaps.tif"
    desc = "Background Color=F4F1F5;White Balance=FFFFFF;Objective Power=20;JPEG Quality=92;OverlapsXY= 16 12 8 6"
    dims = _write(path, truth, [(16, 12), (8, 6)], (1, 2, 4), desc)
    macro = tissue_like(160, 60, seed=32)
    buf = io.BytesIO()
    Image.fromarray(macro).save(buf, "JPEG", quality=95)
    (out_dir / "trestle-overlaps.Full").write_bytes(buf.getvalue())

    def check(osr) -> None:
        for k, f in enumerate((1, 2, 4)):
            lw, lh = osr.level_dimensions[k]
            got = np.asarray(osr.read_region((0, 0), k, (lw, lh)))
            assert (got[..., 3] == 255).all(), f"Trestle level {k} has holes"
            want = truth if f == 1 else downscale(truth, f)[:lh, :lw]
            check_mean(got[..., :3], want, f"Trestle level {k}")
        assert "openslide.level[0].tile-width" not in osr.properties, "tile sizes reported despite overlaps"

    return Generated(
        name=path.name,
        vendor="trestle",
        level_dimensions=dims,
        regions=[
            Region("l0_overlap_corner", 0, (100, 100), (40, 40)),
            Region("l0_all", 0, (0, 0), (w0, h0)),
            Region("l0_edge", 0, (300, 280), (64, 64)),
            Region("l0_outside", 0, (-20, -20), (60, 60)),
            Region("l1_all", 1, (0, 0), dims[1]),
            Region("l1_part", 1, (200, 100), (90, 70)),
            Region("l2_all", 2, (0, 0), dims[2]),
        ],
        associated=("macro",),
        properties={
            "trestle.OverlapsXY": "16 12 8 6",
            "openslide.objective-power": "20",
            "openslide.background-color": "F4F1F5",
            "openslide.mpp-x": "0.5",
        },
        check=check,
        note="Trestle: 3 levels of 128x128 JPEG tiles, overlaps 16x12 (level 0) and 8x6 (level 1), hidden overlaps "
        "tinted; macro from trestle-overlaps.Full.",
    )


def _plain(out_dir: pathlib.Path) -> Generated:
    w0, h0 = 300, 200
    truth = tissue_like(w0, h0, seed=33)
    path = out_dir / "trestle-plain.tif"
    desc = "Background Color=0xFFFFFF;Objective Power=40x;OverlapsXY= 0 0 0 0;Comment = no overlaps "
    dims = _write(path, truth, [], (1, 2), desc)

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (w0, h0)))
        check_mean(got[..., :3], truth, "Trestle plain level 0")
        assert osr.properties.get("openslide.level[0].tile-width") == str(T), "tile sizes missing without overlaps"

    return Generated(
        name=path.name,
        vendor="trestle",
        level_dimensions=dims,
        regions=[Region("l0_all", 0, (0, 0), (w0, h0)), Region("l0_tile_corner", 0, (100, 100), (60, 50)), Region("l1_all", 1, (0, 0), dims[1])],
        properties={"trestle.Comment": "no overlaps", "openslide.background-color": "FFFFFF"},
        check=check,
        note="Trestle without overlaps (zero OverlapsXY): plain tile grids with tile-size properties; objective power "
        "'40x' is not an integer (no openslide.objective-power); no .Full file (no macro).",
    )


def build(out_dir: pathlib.Path) -> List[Generated]:
    return [_overlaps(out_dir), _plain(out_dir)]


if __name__ == "__main__":
    import sys

    from .common import main

    sys.exit(main(build, sys.argv))
