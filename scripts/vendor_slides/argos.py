"""ARGOS AVS BigTIFFs as OpenSlide 4.0.1's ``argos`` driver reads them (OpenSlide's ARGOS
format page and the vendor document it links; behaviour checked with OpenSlide on these files):

* BigTIFF; IFD 0 is tiled; tag 65000 of IFD 0 holds the metadata XML (root
  ``Argos.Scan.Metadata``), written without the terminating NUL as the scanners do;
* one pyramid per focal plane, lowest plane first; OpenSlide reads plane
  ``(MaxZ - MinZ) / 2`` (here MinZ -1, MaxZ 1: the middle one of three);
* missing tiles: TileOffset and TileByteCount 0 (transparent);
* the second-to-last IFD (stripped) is the thumbnail, the last the macro;
* ``argos.*`` properties from the XML's simple elements; ``openslide.barcode``,
  ``openslide.objective-power``; ``tiff.*`` and mpp from the chosen plane's level-0 IFD.

The other planes hold other pixels (tinted), so a reader of the wrong plane fails the check.
"""

from __future__ import annotations

import pathlib
from typing import List

import numpy as np

from . import tiffbuild as tb
from .common import Generated, Region, assert_close, downscale, tissue_like
from .huron import strip_ifd
from .trestle import T, check_mean, overlapped_tiles

XML = (
    '<?xml version="1.0" encoding="utf-8"?>\n<Argos.Scan.Metadata>\n  <Barcode>AVS-0042</Barcode>\n'
    "  <ObjectiveMagnification>40</ObjectiveMagnification>\n  <MinZ>-1</MinZ>\n  <MaxZ>1</MaxZ>\n  <ZRange>2.5</ZRange>\n"
    '  <ScanArea><Left>1.25</Left><Top>0.5</Top><Unit kind="cm">cm</Unit></ScanArea>\n  <Empty/>\n</Argos.Scan.Metadata>'
)
MISSING = {(1, 1), (3, 0), (0, 2)}


def _argos(out_dir: pathlib.Path) -> Generated:
    w0, h0 = 512, 384
    truth = tissue_like(w0, h0, seed=51)
    thumb, macro = downscale(truth, 8), tissue_like(240, 80, seed=52)
    ifds: List[tb.Ifd] = []
    dims = []
    for z in range(3):
        plane = truth if z == 1 else np.clip(truth.astype(np.int16) + (60 if z == 0 else -60), 0, 255).astype(np.uint8)
        for k, f in enumerate((1, 2)):
            img = plane if f == 1 else downscale(plane, f)
            h, w = img.shape[:2]
            across, down = -(-w // T), -(-h // T)
            tiles = overlapped_tiles(img, across, down, 0, 0)
            if z == 1 and k == 0:
                tiles = [b"" if (i % across, i // across) in MISSING else t for i, t in enumerate(tiles)]
            extra = {305: (tb.ASCII, f"ARGOS Scanner plane {z}"), 282: (tb.RATIONAL, [(40000, 1)]), 283: (tb.RATIONAL, [(40000, 1)]),
                     296: (tb.SHORT, 3)}
            if k == 0:
                extra[270] = (tb.ASCII, f"focal plane {z}")
            if z == 0 and k == 0:
                extra[65000] = (tb.ASCII_RAW, XML)
            ifds.append(tb.tiled_ifd(w, h, T, tiles, spp=3, photometric=6, compression=7, extra=extra))
            if z == 1:
                dims.append((w, h))
    ifds += [strip_ifd(thumb, {}), strip_ifd(macro, {})]
    path = out_dir / "argos.avs"
    tb.write(path, ifds, bigtiff=True)

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (w0, h0)))
        present = np.ones((h0, w0), bool)
        for c, r in MISSING:
            present[r * T:(r + 1) * T, c * T:(c + 1) * T] = False
        assert (got[..., 3][~present] == 0).all() and (got[..., 3][present] == 255).all(), "ARGOS missing tiles"
        check_mean(got[..., :3][present], truth[present], "ARGOS level 0 (middle plane)")
        assert_close(np.asarray(osr.associated_images["macro"].convert("RGB")), macro, 0, "ARGOS macro")
        assert osr.properties["tiff.Software"] == "ARGOS Scanner plane 1"

    return Generated(
        name=path.name,
        vendor="argos",
        level_dimensions=dims,
        regions=[
            Region("l0_all", 0, (0, 0), (w0, h0)),
            Region("l0_missing_corner", 0, (100, 100), (60, 50)),
            Region("l0_edge", 0, (480, 360), (64, 64)),
            Region("l1_all", 1, (0, 0), dims[1]),
            Region("l1_part", 1, (130, 70), (80, 60)),
        ],
        associated=("thumbnail", "macro"),
        properties={"argos.Barcode": "AVS-0042", "openslide.barcode": "AVS-0042", "openslide.objective-power": "40",
                    "argos.ScanArea.Left": "1.25", "openslide.mpp-x": "0.25"},
        check=check,
        note="ARGOS: BigTIFF, 3 focal planes of 2 levels (128x128 JPEG tiles; the middle plane read, 3 missing tiles), "
        "metadata XML in tag 65000 without its NUL; thumbnail and macro as deflate strips.",
    )


def build(out_dir: pathlib.Path) -> List[Generated]:
    return [_argos(out_dir)]


if __name__ == "__main__":
    import sys

    from .common import main

    sys.exit(main(build, sys.argv))
