"""Huron TissueScope TIFFs as OpenSlide 4.0.1's ``huron`` driver reads them (OpenSlide's Huron
format page; behaviour checked with OpenSlide on these files):

* IFD 0 is tiled and its Make ("ImageMake") starts with ``Huron``;
* the tiled IFDs are the levels; IFD 1 (stripped) is the thumbnail, stripped IFDs with
  NewSubfileType 1 and 9 the label and macro (Aperio's layout);
* IFD 0's ImageDescription holds ``key = value`` lines (``huron.*`` properties, the first line
  included; OpenSlide reports no ``tiff.ImageDescription`` nor ``openslide.comment``);
* ``openslide.mpp-x/-y`` from X/YResolution in pixels per centimeter.

Tiles are JPEG (Pillow, YCbCr 4:2:0), associated images deflate strips.
"""

from __future__ import annotations

import pathlib
import zlib
from typing import Dict, List

import numpy as np

from . import tiffbuild as tb
from .common import Generated, Region, assert_close, downscale, tissue_like
from .trestle import T, check_mean, overlapped_tiles


def strip_ifd(img: np.ndarray, extra: Dict[int, tuple]) -> tb.Ifd:
    """A deflate-compressed RGB image in strips of 16 rows."""
    h, w = img.shape[:2]
    tags = {256: (tb.LONG, w), 257: (tb.LONG, h), 258: (tb.SHORT, [8] * 3), 259: (tb.SHORT, 8), 262: (tb.SHORT, 2),
            277: (tb.SHORT, 3), 278: (tb.LONG, 16), 284: (tb.SHORT, 1)}
    tags.update(extra)
    return tb.Ifd(tags, [zlib.compress(img[y:y + 16].tobytes(), 6) for y in range(0, h, 16)], tiled=False)


def _huron(out_dir: pathlib.Path) -> Generated:
    w0, h0 = 600, 420
    truth = tissue_like(w0, h0, seed=41)
    thumb, label, macro = downscale(truth, 8), tissue_like(90, 60, seed=42), tissue_like(200, 70, seed=43)
    desc = ("Huron TissueScope LE\r\nResolution = 0.2500 um\r\n  Scanner Model =  TissueScope LE120 \r\n"
            "Objective = 20x\r\nStitched=1\r\n")
    base = {271: (tb.ASCII, "Huron Digital Pathology"), 272: (tb.ASCII, "TissueScope LE120"), 270: (tb.ASCII, desc),
            305: (tb.ASCII, "TissueScope 3.2"), 282: (tb.RATIONAL, [(40000, 1)]), 283: (tb.RATIONAL, [(40000, 1)]), 296: (tb.SHORT, 3)}
    ifds: List[tb.Ifd] = []
    dims = []
    for k, f in enumerate((1, 2, 4)):
        img = truth if f == 1 else downscale(truth, f)
        h, w = img.shape[:2]
        tiles = overlapped_tiles(img, -(-w // T), -(-h // T), 0, 0)
        ifds.append(tb.tiled_ifd(w, h, T, tiles, spp=3, photometric=6, compression=7, extra=base if k == 0 else {270: (tb.ASCII, f"level {k}")}))
        dims.append((w, h))
        if k == 0:
            ifds.append(strip_ifd(thumb, {270: (tb.ASCII, "thumbnail")}))
    ifds.append(strip_ifd(label, {254: (tb.LONG, 1), 270: (tb.ASCII, "label")}))
    ifds.append(strip_ifd(macro, {254: (tb.LONG, 9), 270: (tb.ASCII, "macro")}))
    path = out_dir / "huron.tif"
    tb.write(path, ifds)

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (w0, h0)))
        assert (got[..., 3] == 255).all(), "Huron level 0 has holes"
        check_mean(got[..., :3], truth, "Huron level 0")
        for name, want in (("thumbnail", thumb), ("label", label), ("macro", macro)):
            assert_close(np.asarray(osr.associated_images[name].convert("RGB")), want, 0, f"Huron {name}")
        assert "tiff.ImageDescription" not in osr.properties and "openslide.comment" not in osr.properties

    return Generated(
        name=path.name,
        vendor="huron",
        level_dimensions=dims,
        regions=[
            Region("l0_all", 0, (0, 0), (w0, h0)),
            Region("l0_tile_corner", 0, (100, 100), (60, 50)),
            Region("l0_edge", 0, (560, 400), (64, 64)),
            Region("l1_all", 1, (0, 0), dims[1]),
            Region("l2_all", 2, (-8, -8), (160, 120)),
        ],
        associated=("thumbnail", "label", "macro"),
        properties={"huron.Resolution": "0.2500 um", "huron.Scanner Model": "TissueScope LE120", "openslide.mpp-x": "0.25"},
        check=check,
        note="Huron: 3 levels of 128x128 JPEG tiles (IFDs 0, 2, 3), thumbnail IFD 1, label (subfile 1) and macro "
        "(subfile 9) as deflate strips; CRLF key = value description; pixels per centimeter.",
    )


def build(out_dir: pathlib.Path) -> List[Generated]:
    return [_huron(out_dir)]


if __name__ == "__main__":
    import sys

    from .common import main

    sys.exit(main(build, sys.argv))
