"""DICOM VL Whole Slide Microscopy series with High-Throughput JPEG 2000 frames (transfer
syntaxes 1.2.840.10008.1.2.4.201 lossless, .202 lossless RPCL, .203 lossy; PS3.5 A.4.11),
written with pydicom and OpenJPH (imagecodecs). OpenSlide 4.0.1 refuses these syntaxes, so they
are not among ``make_vendor_slides``' OpenSlide-referenced slides: tests generate them with
:func:`build` and compare with the known pixels (lossless: exactly) and with OpenJPH's own
decode of every frame (lossy), an independent decoder from the OpenJPEG slidestream uses.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import List

import numpy as np

from . import dicomwrite as dw
from .dicom import TILE, Level, _pyramid, _series, _write


@dataclasses.dataclass
class HtSlide:
    """One generated series: the file to open, its levels' known RGB pixels (h, w, 3), the
    pixels an independent decoder gives for its frames (RGBA), and the greatest difference a
    reader may show against the latter."""

    name: str
    open: pathlib.Path
    ts: str
    photometric: str
    known: List[np.ndarray]
    decoded: List[np.ndarray]
    tolerance: int


def _decoded(lv: Level) -> np.ndarray:
    tw, th = lv.tile
    canvas = np.zeros((lv.down * th, lv.across * tw, 4), np.uint8)
    for (c, r), f in lv.cells.items():
        canvas[r * th:(r + 1) * th, c * tw:(c + 1) * tw, :3] = dw.htj2k_decode(f)[:th, :tw]
        canvas[r * th:(r + 1) * th, c * tw:(c + 1) * tw, 3] = 255
    return canvas[: lv.total[1], : lv.total[0]]


def build(out: pathlib.Path) -> List[HtSlide]:
    """Write the HTJ2K series into ``out`` (one folder each) and describe them: ``rct``
    (.201, YBR_RCT), ``rpcl`` (.202, RGB without component transform) and ``ict`` (.203,
    YBR_ICT, lossy); two levels each (downsample 2), tiles of 128 with partial edge tiles."""
    imgs = _pyramid(56, 2)
    out = pathlib.Path(out)
    slides = []
    for kind, ts, photometric, lossless, mct in [
        ("rct", dw.TS_HTJ2K_LOSSLESS, "YBR_RCT", True, True),
        ("rpcl", dw.TS_HTJ2K_LOSSLESS_RPCL, "RGB", True, False),
        ("ict", dw.TS_HTJ2K, "YBR_ICT", False, True),
    ]:
        levels = [Level(i, (TILE, TILE), ts, lambda t, lossless=lossless, mct=mct: dw.htj2k(t, lossless, mct)) for i in imgs]
        name = f"dicom-htj2k-{kind}"
        insts = _series(name, levels, photometric)
        _write(out, name, insts)
        decoded = [_decoded(lv) for lv in levels]
        if lossless:
            for lv, d in zip(levels, decoded):
                assert np.array_equal(d[..., :3], lv.img), f"{name}: OpenJPH's lossless decode differs from the pixels written"
        slides.append(HtSlide(name, out / name / insts[0].path, ts, photometric, [lv.img for lv in levels], decoded, 0 if lossless else 2))
    return slides


if __name__ == "__main__":
    import sys

    for s in build(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "htj2k-slides")):
        print(s.name, s.open, s.ts)
