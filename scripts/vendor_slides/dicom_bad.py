"""Bad DICOM WSI inputs, each in ``bad-dicom/<case>/``, listed in ``bad-dicom/cases.json``.

Every case is checked against OpenSlide 4.0.1 when written: OpenSlide must refuse it (at open,
or at reading level 0 for ``stage: read``), or, for ``error: null`` cases, open it with the
levels listed. The ``error`` is the slidestream error kind (``Error::kind_name``) expected:
``unsupported`` for what is valid DICOM but outside what is read (SOP class, transfer syntax,
sample layout, unaligned sparse positions), ``format`` for an inconsistent series or frame,
``usage`` for a folder holding two series (OpenSlide takes files only: our rule).
"""

from __future__ import annotations

import json
import pathlib
import shutil
from typing import Dict, List

import numpy as np

from . import dicomwrite as dw
from .common import tissue_like

TILE = 64
CT_IMAGE = "1.2.840.10008.5.1.4.1.1.2"


def _img(seed: int, w: int = 150, h: int = 100) -> np.ndarray:
    return tissue_like(w, h, seed=seed)


def _volume(case: str, path: str = "level-0.dcm", img=None, ts=dw.TS_JPEG, enc=dw.jpeg_ybr, photometric="YBR_FULL_422", series=None, **kw) -> dw.Instance:
    img = _img(70) if img is None else img
    frames = [enc(t) for _, _, t in dw.tiles(img, TILE, TILE)]
    return dw.Instance(path, "VOLUME", ts, photometric, (TILE, TILE), (img.shape[1], img.shape[0]), frames, series or dw.uid("bad", case),
                       dw.uid("bad", case, path), dw.uid("bad-study"), **kw)


def _sixteen_bit(ds) -> None:
    ds.BitsAllocated, ds.BitsStored, ds.HighBit = 16, 16, 15
    ds.PixelData = ds.PixelData + ds.PixelData


def _grey(ds) -> None:
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.PixelData = ds.PixelData[: len(ds.PixelData) // 3]


def _label(case: str, sop: str) -> dw.Instance:
    img = _img(71, 60, 40)
    return dw.Instance(f"label-{sop}.dcm", "LABEL", dw.TS_JPEG, "YBR_FULL_422", (60, 40), (60, 40), [dw.jpeg_ybr(img)], dw.uid("bad", case),
                       dw.uid("bad", case, sop), dw.uid("bad-study"))


def _cases() -> Dict[str, List[dw.Instance]]:
    """Case name -> instances (the first is the file to open)."""
    cases: Dict[str, List[dw.Instance]] = {}
    cases["wrong-sop-class"] = [_volume("wrong-sop-class", sop_class=CT_IMAGE)]
    cases["jpeg-ls"] = [_volume("jpeg-ls", ts=dw.TS_JPEG_LS)]
    cases["bits-allocated-16"] = [_volume("bits-allocated-16", ts=dw.TS_EXPLICIT, enc=dw.raw, photometric="RGB", edit=_sixteen_bit)]
    cases["samples-per-pixel-1"] = [_volume("samples-per-pixel-1", ts=dw.TS_EXPLICIT, enc=dw.raw, photometric="RGB", edit=_grey)]
    cases["duplicate-label"] = [_volume("duplicate-label"), _label("duplicate-label", "a"), _label("duplicate-label", "b")]
    img = _img(72, 192, 64)  # 3 x 1 tiles, one per member; member 2 absent
    frames = [dw.jpeg_ybr(t) for _, _, t in dw.tiles(img, TILE, TILE)]
    cuid = dw.uid("bad", "concat")
    cases["concat-missing-member"] = [
        dw.Instance(f"level-0-part{n}.dcm", "VOLUME", dw.TS_JPEG, "YBR_FULL_422", (TILE, TILE), (192, 64), [frames[n - 1]], dw.uid("bad", "concat-missing"),
                    dw.uid("bad", "concat-missing", str(n)), dw.uid("bad-study"), concat=(cuid, n, 3, n - 1))
        for n in (1, 3)
    ]

    def localizer(ds):
        ds.ImageType = ["ORIGINAL", "PRIMARY", "LOCALIZER", "NONE"]

    cases["unknown-flavor-only"] = [_volume("unknown-flavor-only", edit=localizer)]
    small = _img(73, 56, 64)  # a 56 x 64 JPEG in a 64 x 64 frame
    inst = _volume("frame-size-mismatch", img=_img(73, 64, 64))
    inst.frames = [dw.jpeg_ybr(small)]
    cases["frame-size-mismatch"] = [inst]
    sp = _volume("sparse-unaligned")
    sp.positions = [(1 + (i % 3) * TILE + (5 if i == 1 else 0), 1 + (i // 3) * TILE) for i in range(len(sp.frames))]
    cases["sparse-unaligned"] = [sp]
    cases["j2k-lossless-ict"] = [_volume("j2k-lossless-ict", ts=dw.TS_J2K_LOSSLESS, enc=lambda t: dw.j2k(t, True, True), photometric="YBR_ICT")]
    cases["native-ybr"] = [_volume("native-ybr", ts=dw.TS_EXPLICIT, enc=dw.raw, photometric="YBR_FULL")]

    def planes(ds):
        ds.TotalPixelMatrixFocalPlanes = 2

    cases["focal-planes-2"] = [_volume("focal-planes-2", edit=planes)]
    img2 = _img(76, 128, 64)
    f2 = [dw.jpeg_ybr(t) for _, _, t in dw.tiles(img2, TILE, TILE)]

    def member(case, n, number, cuid, total=2):
        return dw.Instance(f"level-0-{n}.dcm", "VOLUME", dw.TS_JPEG, "YBR_FULL_422", (TILE, TILE), (128, 64), [f2[n]], dw.uid("bad", case),
                           dw.uid("bad", case, str(n)), dw.uid("bad-study"), concat=None if cuid is None else (cuid, number, total, n))

    cases["concat-duplicate-number"] = [member("concat-duplicate-number", n, 1, dw.uid("c1")) for n in (0, 1)]
    cases["concat-uid-differs"] = [member("concat-uid-differs", n, n + 1, dw.uid("c2", str(n))) for n in (0, 1)]
    cases["two-levels-same-size"] = [member("two-levels-same-size", n, 0, None) for n in (0, 1)]
    cases["concat-one-member"] = [member("concat-one-member", 0, 1, dw.uid("c3"), total=1)]

    def fewer_fragments(ds):
        ds.NumberOfFrames = ds.NumberOfFrames + 1

    cases["frame-count-mismatch"] = [_volume("frame-count-mismatch", offsets="none", edit=fewer_fragments)]

    def short_native(ds):
        ds.PixelData = ds.PixelData[: len(ds.PixelData) - 3 * TILE * TILE]

    cases["native-short"] = [_volume("native-short", ts=dw.TS_EXPLICIT, enc=dw.raw, photometric="RGB", edit=short_native)]
    lab = _label("label-concatenation", "a")
    lab.concat = (dw.uid("bad", "label-concat"), 1, 2, 0)
    cases["label-concatenation"] = [_volume("label-concatenation"), lab]
    cases["two-series"] = [
        _volume("two-series", path="a.dcm", img=_img(74, 150, 100), series=dw.uid("bad", "two-series", "A")),
        _volume("two-series", path="b.dcm", img=_img(75, 100, 70), series=dw.uid("bad", "two-series", "B")),
    ]
    return cases


# case -> (stage, slidestream error kind)
EXPECT = {
    "wrong-sop-class": ("open", "unsupported"),
    "jpeg-ls": ("open", "unsupported"),
    "bits-allocated-16": ("open", "unsupported"),
    "samples-per-pixel-1": ("open", "unsupported"),
    "duplicate-label": ("open", "format"),
    "concat-missing-member": ("open", "format"),
    "unknown-flavor-only": ("open", "format"),
    "frame-size-mismatch": ("read", "format"),
    "sparse-unaligned": ("open", "unsupported"),
    "j2k-lossless-ict": ("open", "unsupported"),
    "native-ybr": ("open", "unsupported"),
    "focal-planes-2": ("open", "unsupported"),
    "concat-duplicate-number": ("open", "format"),
    "concat-uid-differs": ("open", "format"),
    "two-levels-same-size": ("open", "format"),
    "concat-one-member": ("open", "format"),
    "frame-count-mismatch": ("read", "format"),
    "native-short": ("read", "format"),
    "label-concatenation": ("open", "format"),
}


def _openslide_error(path: pathlib.Path, stage: str) -> str:
    """OpenSlide's error for ``path`` at ``stage``; raises ``AssertionError`` if it has none."""
    import openslide

    try:
        osr = openslide.OpenSlide(str(path))
    except openslide.OpenSlideError as e:
        assert stage == "open", f"{path}: OpenSlide fails at open, expected at {stage}: {e}"
        return str(e) or type(e).__name__
    try:
        assert stage == "read", f"{path}: OpenSlide opens it"
        try:
            osr.read_region((0, 0), 0, osr.level_dimensions[0])
        except openslide.OpenSlideError as e:
            return str(e)
        raise AssertionError(f"{path}: OpenSlide reads level 0")
    finally:
        osr.close()


def build(out: pathlib.Path) -> None:
    """Write ``out/bad-dicom/`` and its ``cases.json``, checking each case with OpenSlide."""
    import openslide

    root = out / "bad-dicom"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    doc = []
    for case, insts in _cases().items():
        d = root / case
        d.mkdir()
        for i in insts:
            dw.write(i, d / i.path)
        if case == "two-series":
            # By folder: two series, a usage error. By file: the file's series (OpenSlide).
            doc.append({"case": case, "open": f"bad-dicom/{case}", "stage": "open", "error": "usage", "openslide": None})
            for i in insts:
                osr = openslide.OpenSlide(str(d / i.path))
                dims = [list(x) for x in osr.level_dimensions]
                assert dims == [list(i.total)], f"{case}/{i.path}: OpenSlide levels {dims}"
                osr.close()
                doc.append({"case": f"{case}/{i.path}", "open": f"bad-dicom/{case}/{i.path}", "stage": "open", "error": None, "level_dimensions": dims})
            continue
        stage, kind = EXPECT[case]
        err = _openslide_error(d / insts[0].path, stage).replace(str(out), "OUT")
        doc.append({"case": case, "open": f"bad-dicom/{case}/{insts[0].path}", "stage": stage, "error": kind, "openslide": err})
    (root / "cases.json").write_text(json.dumps(doc, indent=1))
