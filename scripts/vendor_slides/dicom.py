"""DICOM VL Whole Slide Microscopy series (one folder per slide) as OpenSlide 4.0.1's
``openslide-vendor-dicom.c`` and libdicom read them, and bad inputs OpenSlide refuses.

Layout facts (see ``dicomwrite.py`` and docs/formats.md): a slide is the instances of one
SeriesInstanceUID in one folder; levels are VOLUME instances grouped by total pixel matrix
size (a level may be split into concatenation members: ConcatenationUID, InConcatenationNumber,
ConcatenationFrameOffsetNumber); LABEL / OVERVIEW / THUMBNAIL instances are the associated
images ``label`` / ``macro`` / ``thumbnail``. TILED_FULL frames are in raster order (frame =
column + row x tiles across - ConcatenationFrameOffsetNumber); TILED_SPARSE frames are placed
by their per-frame Plane Position, tiles without a frame are transparent.

Slides (``dicom-*`` folders; each ``check`` compares OpenSlide's pixels with the frames as
Pillow decodes them, laid out where the generator put them, and with the known pixels):
sparse (TILED_SPARSE, shuffled frames, a missing tile), concat (level 0 in two concatenation
members), offsets-bot / -eot / -none (the same pixels located three ways), j2k-rct / j2k-rgb
(lossless .4.90) and j2k-ict (lossy .4.91), associated (label native, macro YBR JPEG,
thumbnail RGB JPEG with ICC), props (the ``dicom.*`` formatting per VR), native (explicit VR
LE uncompressed, 3 levels), ybr-icc (JPEG YBR_FULL_422, 3 levels, ICC, PixelSpacing x != y,
ObjectiveLensPower). Bad inputs go to ``bad-dicom/<case>/`` with ``bad-dicom/cases.json``
(file to open relative to the output directory, stage ``open`` or ``read``, the slidestream
error kind expected, and OpenSlide's error); ``core/tests/dicom_generated.rs`` reads it.
"""

from __future__ import annotations

import pathlib
import shutil
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import dicomwrite as dw
from .common import Generated, Region, assert_close, downscale, tissue_like

TILE = 128
L0 = (520, 392)  # 5 x 4 tiles of 128 (partial edge tiles); level 1 260 x 196, level 2 130 x 98 (downsamples 2, 4)
STUDY = dw.uid("study")

Cells = Dict[Tuple[int, int], bytes]


class Level:
    """One level as written: total size, tile size, transfer syntax and the frame stored for
    each (column, row) cell (absent cells have no frame)."""

    def __init__(self, img: np.ndarray, tile: Tuple[int, int], ts: str, enc, skip=()):
        self.img = img
        self.total = (img.shape[1], img.shape[0])
        self.tile = tile
        self.ts = ts
        self.cells: Cells = {(c, r): enc(t) for c, r, t in dw.tiles(img, *tile) if (c, r) not in skip}
        self.across = -(-self.total[0] // tile[0])
        self.down = -(-self.total[1] // tile[1])

    def raster(self) -> List[bytes]:
        """Frames in TILED_FULL order (every cell must be present)."""
        return [self.cells[(c, r)] for r in range(self.down) for c in range(self.across)]

    def expected(self) -> np.ndarray:
        """RGBA (h, w, 4) a reader gives for the level: decoded frames, transparent where no
        frame is."""
        tw, th = self.tile
        canvas = np.zeros((self.down * th, self.across * tw, 4), np.uint8)
        for (c, r), f in self.cells.items():
            canvas[r * th:(r + 1) * th, c * tw:(c + 1) * tw, :3] = dw.decode(f, self.ts, tw, th)
            canvas[r * th:(r + 1) * th, c * tw:(c + 1) * tw, 3] = 255
        return canvas[: self.total[1], : self.total[0]]


def _pyramid(seed: int, n: int) -> List[np.ndarray]:
    img = tissue_like(*L0, seed=seed)
    return [img] + [downscale(img, 2 ** k) for k in range(1, n)]


def _check_levels(levels: List[Level], tol: int, assoc: Optional[Dict[str, Level]] = None):
    """A ``check``: every level read whole equals the decoded frames (within ``tol``), and the
    decoded frames are the known pixels within the codec's loss; associated images the same."""

    def check(osr):
        for k, lv in enumerate(levels):
            got = np.asarray(osr.read_region((0, 0), k, lv.total))
            want = lv.expected()
            assert_close(got, want, tol, f"level {k}")
            opaque = want[..., 3] == 255
            d = np.abs(want[..., :3].astype(int) - lv.img.astype(int))[opaque]
            assert d.size == 0 or d.mean() < 4, f"level {k}: decoded frames are not the known pixels (mean {d.mean():.1f})"
        for name, lv in (assoc or {}).items():
            got = np.asarray(osr.associated_images[name].convert("RGBA"))
            assert_close(got, lv.expected(), tol, f"associated {name}")

    return check


def _regions(levels: List[Level]) -> List[Region]:
    rs = [Region(f"level{k}_full", k, (0, 0), lv.total) for k, lv in enumerate(levels)]
    rs += [
        Region("tilecross_l0", 0, (100, 70), (200, 150)),
        Region("oob_l0", 0, (L0[0] - 60, -20), (100, 90)),
    ]
    return rs


def _write(out: pathlib.Path, folder: str, insts: List[dw.Instance]) -> None:
    d = out / folder
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    for i in insts:
        dw.write(i, d / i.path)


def _series(name: str, levels: List[Level], photometric: str, offsets: str = "bot", **kw) -> List[dw.Instance]:
    series = dw.uid(name)
    return [
        dw.Instance(
            f"level-{k}.dcm", "VOLUME", lv.ts, photometric, lv.tile, lv.total, lv.raster(), series, dw.uid(name, f"level{k}"), STUDY,
            offsets=offsets, **kw,
        )
        for k, lv in enumerate(levels)
    ]


def _assoc(name: str, flavor: str, img: np.ndarray, ts: str, photometric: str, enc, **kw) -> Tuple[Level, dw.Instance]:
    lv = Level(img, (img.shape[1], img.shape[0]), ts, enc)
    inst = dw.Instance(f"{flavor.lower()}.dcm", flavor, ts, photometric, lv.tile, lv.total, lv.raster(), dw.uid(name), dw.uid(name, flavor), STUDY, **kw)
    return lv, inst


def _icc() -> bytes:
    """An sRGB ICC profile (LittleCMS through Pillow), creation date fixed for determinism."""
    from PIL import ImageCms

    b = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    b[24:36] = bytes([0x07, 0xEA, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0])  # 2026-01-01 00:00:00
    return bytes(b)


def _slide(out, folder, levels, insts, tol, note, assoc=None, assoc_names=(), props=None) -> Generated:
    _write(out, folder, insts)
    return Generated(
        name=folder,
        open=f"{folder}/{insts[0].path}",
        vendor="dicom",
        level_dimensions=[lv.total for lv in levels],
        regions=_regions(levels),
        associated=assoc_names,
        properties=props or {},
        check=_check_levels(levels, tol, assoc),
        note=note,
    )


def sparse(out: pathlib.Path) -> Generated:
    """(a) TILED_SPARSE level 0 with per-frame Plane Positions, frames in a shuffled order and
    tile (2, 1) missing; level 1 TILED_FULL."""
    imgs = _pyramid(51, 2)
    l0 = Level(imgs[0], (TILE, TILE), dw.TS_JPEG, dw.jpeg_rgb, skip={(2, 1)})
    l1 = Level(imgs[1], (TILE, TILE), dw.TS_JPEG, dw.jpeg_rgb)
    order = sorted(l0.cells, key=lambda cr: (cr[0] * 7 + cr[1] * 3) % 11 * 100 + cr[0] * 10 + cr[1])
    name = "dicom-sparse"
    series = dw.uid(name)
    insts = [
        dw.Instance("level-0.dcm", "VOLUME", dw.TS_JPEG, "RGB", l0.tile, l0.total, [l0.cells[cr] for cr in order], series, dw.uid(name, "0"), STUDY,
                    positions=[(c * TILE + 1, r * TILE + 1) for c, r in order]),
        dw.Instance("level-1.dcm", "VOLUME", dw.TS_JPEG, "RGB", l1.tile, l1.total, l1.raster(), series, dw.uid(name, "1"), STUDY),
    ]
    return _slide(out, name, [l0, l1], insts, 2, "TILED_SPARSE, shuffled frames, tile (2,1) missing (transparent)")


def sparse_overwrite(out: pathlib.Path) -> Generated:
    """(a') TILED_SPARSE where tile (1, 0) is stored twice (a wrong frame first: the later frame
    at a position wins) and one frame lies outside the grid (ignored)."""
    img = tissue_like(*L0, seed=61)
    lv = Level(img, (TILE, TILE), dw.TS_JPEG, dw.jpeg_ybr)
    order = sorted(lv.cells)
    wrong = dw.jpeg_ybr(255 - dict(((c, r), t) for c, r, t in dw.tiles(img, TILE, TILE))[(1, 0)])
    frames = [wrong] + [lv.cells[cr] for cr in order] + [lv.cells[(0, 0)]]
    # The outside frame is below the last row. (A column past the last one is not ignored by
    # libdicom 4.0.1's reader: its tile index row x across + column wraps into the next row —
    # OpenSlide shows it at (0, row + 1); not generated, see the report of issue 16.)
    positions = [(TILE + 1, 1)] + [(c * TILE + 1, r * TILE + 1) for c, r in order] + [(1, lv.down * TILE + 1)]
    name = "dicom-sparse-overwrite"
    insts = [dw.Instance("level-0.dcm", "VOLUME", dw.TS_JPEG, "YBR_FULL_422", lv.tile, lv.total, frames, dw.uid(name), dw.uid(name, "0"), STUDY,
                         positions=positions)]
    return _slide(out, name, [lv], insts, 2, "TILED_SPARSE: a position stored twice (later wins), a frame outside the grid")


def navigation(out: pathlib.Path) -> Generated:
    """(f') A ReferencedImageNavigationSequence (0048,0200): libdicom's metadata stops there,
    so the elements after it (SharedFunctionalGroupsSequence: the mpp) are not properties."""
    img = tissue_like(300, 200, seed=62)
    lv = Level(img, (TILE, TILE), dw.TS_JPEG, dw.jpeg_ybr)
    name = "dicom-navigation"

    def nav(ds):
        from pydicom.dataset import Dataset
        from pydicom.sequence import Sequence as Seq

        item = Dataset()
        item.ReferencedSOPClassUID = dw.SOP_WSI
        item.ReferencedSOPInstanceUID = dw.uid(name, "0")
        item.ReferencedFrameNumber = "1"
        item.TopLeftHandCornerOfLocalizerArea = [1, 1]
        item.BottomRightHandCornerOfLocalizerArea = [128, 128]
        item.PixelSpacing = ["0.0005", "0.0005"]
        ds.ReferencedImageNavigationSequence = Seq([item])

    insts = _series(name, [lv], "YBR_FULL_422", edit=nav)
    g = _slide(out, name, [lv], insts, 2, "ReferencedImageNavigationSequence: later elements (mpp) absent")
    return g


def concat(out: pathlib.Path) -> Generated:
    """(b) Level 0 (20 frames) split into two concatenation members of 12 and 8 frames; the
    second member's file name sorts first."""
    imgs = _pyramid(52, 2)
    l0 = Level(imgs[0], (TILE, TILE), dw.TS_JPEG, dw.jpeg_ybr)
    l1 = Level(imgs[1], (TILE, TILE), dw.TS_JPEG, dw.jpeg_ybr)
    name = "dicom-concat"
    series = dw.uid(name)
    cuid = dw.uid(name, "concat")
    f = l0.raster()
    insts = [
        dw.Instance("level-0-part1.dcm", "VOLUME", dw.TS_JPEG, "YBR_FULL_422", l0.tile, l0.total, f[:12], series, dw.uid(name, "0a"), STUDY,
                    concat=(cuid, 1, 2, 0)),
        dw.Instance("a-level-0-part2.dcm", "VOLUME", dw.TS_JPEG, "YBR_FULL_422", l0.tile, l0.total, f[12:], series, dw.uid(name, "0b"), STUDY,
                    concat=(cuid, 2, 2, 12)),
        dw.Instance("level-1.dcm", "VOLUME", dw.TS_JPEG, "YBR_FULL_422", l1.tile, l1.total, l1.raster(), series, dw.uid(name, "1"), STUDY),
    ]
    g = _slide(out, name, [l0, l1], insts, 2, "level 0 in two concatenation members (12 + 8 frames); siblings OpenSlide skips")
    _siblings(out / name, series, l1)
    g.extra["refused_files"] = _refused(out, name)
    return g


def _siblings(d: pathlib.Path, series: str, lv: Level) -> None:
    """Files of a slide's folder OpenSlide skips when it gathers the series: a text file, a CT
    image of the same series (another SOP class) and a LOCALIZER instance of the same series
    (an image flavor that is neither a level nor an associated image)."""
    (d / "notes.txt").write_text("not a DICOM file\n")
    ct = dw.Instance("ct.dcm", "VOLUME", lv.ts, "YBR_FULL_422", lv.tile, lv.total, lv.raster(), series, dw.uid(series, "ct"), STUDY,
                     sop_class="1.2.840.10008.5.1.4.1.1.2")
    dw.write(ct, d / ct.path)

    def localizer(ds):
        ds.ImageType = ["ORIGINAL", "PRIMARY", "LOCALIZER", "NONE"]

    loc = dw.Instance("localizer.dcm", "VOLUME", lv.ts, "YBR_FULL_422", lv.tile, (lv.total[0] - 10, lv.total[1]), lv.raster(), series,
                      dw.uid(series, "localizer"), STUDY, edit=localizer)
    dw.write(loc, d / loc.path)


def _refused(out: pathlib.Path, folder: str) -> List[str]:
    """Files of ``folder`` OpenSlide refuses to open (relative to ``out``); every other file opens
    the folder's slide (checked)."""
    import openslide

    refused, props = [], None
    for f in sorted((out / folder).iterdir()):
        try:
            osr = openslide.OpenSlide(str(f))
        except openslide.OpenSlideError:
            refused.append(f"{folder}/{f.name}")
            continue
        p = dict(osr.properties)
        assert props is None or p == props, f"{f}: OpenSlide opens another slide"
        props = p
        osr.close()
    return refused


def offsets(out: pathlib.Path, mode: str) -> Generated:
    """(c) The same pixels with frames located by the Basic Offset Table (``bot``), the
    Extended Offset Table (``eot``, empty BOT) or neither (``none``)."""
    imgs = _pyramid(53, 2)
    levels = [Level(i, (TILE, TILE), dw.TS_JPEG, dw.jpeg_ybr) for i in imgs]
    name = f"dicom-offsets-{mode}"
    insts = _series(name, levels, "YBR_FULL_422", offsets=mode)
    return _slide(out, name, levels, insts, 2, f"frames located by {dict(bot='the Basic Offset Table', eot='the Extended Offset Table', none='scanning the fragments')[mode]}")


def j2k(out: pathlib.Path, kind: str) -> Generated:
    """(d) JPEG 2000: ``rct`` lossless .4.90 YBR_RCT, ``rgb`` lossless .4.90 RGB (no MCT),
    ``ict`` lossy .4.91 YBR_ICT."""
    imgs = _pyramid(54, 2)
    ts, photometric, lossless, mct = {
        "rct": (dw.TS_J2K_LOSSLESS, "YBR_RCT", True, True),
        "rgb": (dw.TS_J2K_LOSSLESS, "RGB", True, False),
        "ict": (dw.TS_J2K, "YBR_ICT", False, True),
    }[kind]
    # Lossless reduced levels are one frame each: where OpenSlide paints two tiles at a
    # fractional offset it rounds twice, one more than the parity tests allow for lossless
    # levels (as generic.py).
    levels = [Level(i, (TILE, TILE) if k == 0 or not lossless else (i.shape[1], i.shape[0]), ts, lambda t: dw.j2k(t, lossless, mct))
              for k, i in enumerate(imgs)]
    name = f"dicom-j2k-{kind}"
    insts = _series(name, levels, photometric)
    if lossless:
        for lv in levels:  # reversible: the decoded frames are the known pixels exactly
            assert_close(lv.expected()[..., :3], lv.img, 0, f"{name}: lossless frames")
    return _slide(out, name, levels, insts, 0 if lossless else 2, f"JPEG 2000 {photometric} ({'lossless' if lossless else 'lossy'})")


def associated(out: pathlib.Path) -> Generated:
    """(e) Two JPEG RGB levels plus LABEL (native RGB), OVERVIEW (JPEG YBR_FULL_422) and
    THUMBNAIL (JPEG RGB, with its own ICC profile)."""
    imgs = _pyramid(55, 2)
    levels = [Level(i, (TILE, TILE), dw.TS_JPEG, dw.jpeg_rgb) for i in imgs]
    name = "dicom-associated"
    insts = _series(name, levels, "RGB")
    label, li = _assoc(name, "LABEL", tissue_like(96, 80, seed=56), dw.TS_EXPLICIT, "RGB", dw.raw)
    macro, mi = _assoc(name, "OVERVIEW", tissue_like(200, 88, seed=57), dw.TS_JPEG, "YBR_FULL_422", dw.jpeg_ybr)
    thumb, ti = _assoc(name, "THUMBNAIL", downscale(imgs[0], 4), dw.TS_JPEG, "RGB", dw.jpeg_rgb, icc=_icc())
    return _slide(out, name, levels, insts + [li, mi, ti], 2, "label (native), macro (YBR JPEG), thumbnail (RGB JPEG, ICC)",
                  assoc={"label": label, "macro": macro, "thumbnail": thumb}, assoc_names=("label", "macro", "thumbnail"))


def _props_edit(ds) -> None:
    """Elements of every VR libdicom formats, multi-valued, nested, padded and empty (their
    ``dicom.*`` properties are whatever OpenSlide 4.0.1 makes of them: the reference)."""
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence as Seq

    ds.RetrieveAETitle = ["AE_ONE", "AE_TWO"]  # AE
    ds.PatientAge = "042Y"  # AS
    ds.PatientSex = "O"  # CS
    ds.StudyDate = "20200101"  # DA
    ds.ContentDate = "20200101\\20200102"  # DA, two values (not split by libdicom)
    ds.PatientWeight = ".000499"  # DS, kept as written
    ds.PatientSize = "2e-3"
    ds.AcquisitionDateTime = "20260101120000.123456+0100"  # DT
    ds.ImagedVolumeHeight = 0.1  # FL (not exact in binary32)
    ds.LongitudinalTemporalOffsetFromEvent = 3.141592653589793  # FD
    ds.DiffusionGradientOrientation = [0.1, -2.5, 1e-300]  # FD, 3 values
    ds.AcquisitionNumber = " 7"  # IS, leading space
    ds.PixelAspectRatio = "4\\3"  # IS, two values
    ds.SoftwareVersions = ["v1.0", "build 2"]  # LO, two values
    ds.DeviceSerialNumber = "serial  "  # LO, two trailing spaces
    ds.SeriesDescription = ""  # LO, empty
    ds.ImageComments = "line one\r\nline two \\ backslash"  # LT
    ds.ReferringPhysicianName = "Doe^John\\Roe^Jane"  # PN, two values
    ds.AccessionNumber = "ACC 1 "  # SH
    ds.StationName = "  lead"  # SH, leading spaces
    ds.ReferencePixelX0 = -12345  # SL
    ds.TagAngleSecondAxis = -7  # SS
    ds.InstitutionAddress = "1 Main St\\Apt 2"  # ST
    ds.StudyTime = "120000.5"  # TM
    ds.ContentTime = "120000\\130000"  # TM, two values
    ds.StrainDescription = "strain a\\strain b"  # UC
    ds.RelatedGeneralSOPClassUID = ["1.2.840.10008.5.1.4.1.1.77.1.6", "1.2.840.10008.5.1.4.1.1.77.1.2"]  # UI, two values
    ds.RetrieveURL = "https://example.org/a\\b"  # UR
    ds.StrainAdditionalInformation = "free text\\with backslash "  # UT
    ds.ReferencedStudySequence = Seq([])  # empty sequence
    dim = []
    for ptr, grp in ((0x0048021E, 0x0048021A), (0x0048021F, 0x0048021A)):
        item = Dataset()
        item.DimensionIndexPointer = ptr  # AT
        item.FunctionalGroupPointer = grp
        dim.append(item)
    ds.DimensionIndexSequence = Seq(dim)
    steps = []
    for i, (code, text) in enumerate((("111701", "processing"), ("430864009", "staining"))):
        cn = Dataset()
        cn.CodeValue = code
        cn.CodingSchemeDesignator = "DCM" if i == 0 else "SCT"
        cn.CodeMeaning = text
        ci = Dataset()
        ci.ValueType = "TEXT"
        ci.ConceptNameCodeSequence = Seq([cn])
        ci.TextValue = f"step {i} "
        step = Dataset()
        step.SpecimenPreparationStepContentItemSequence = Seq([ci])
        steps.append(step)
    spec = Dataset()
    spec.SpecimenIdentifier = "S-1"
    spec.SpecimenUID = dw.uid("specimen")
    spec.SpecimenPreparationSequence = Seq(steps)
    ds.SpecimenDescriptionSequence = Seq([spec])
    # Private tags: libdicom's dictionary names (0009,0010) `PrivateCreator` (also in a
    # sequence item); other private creators and private elements are not properties.
    ds.add_new(0x00090010, "LO", "SLIDESTREAM")
    ds.add_new(0x00090011, "LO", "SECOND CREATOR")
    ds.add_new(0x00091001, "LO", "private value")
    ds.add_new(0x00110010, "LO", "OTHER GROUP")
    ds.add_new(0x00111001, "LO", "other private value")
    ref = Dataset()
    ref.add_new(0x00090010, "LO", "IN ITEM")
    ref.ReferencedSOPClassUID = "1.2.840.10008.5.1.4.1.1.77.1.6"
    ref.ReferencedSOPInstanceUID = dw.uid("referenced")
    ds.ReferencedImageSequence = Seq([ref])


def props(out: pathlib.Path) -> Generated:
    """(f) One native level with elements of every VR (``_props_edit``)."""
    img = tissue_like(200, 150, seed=58)
    levels = [Level(img, (TILE, TILE), dw.TS_EXPLICIT, dw.raw)]
    name = "dicom-props"
    insts = _series(name, levels, "RGB", edit=_props_edit)
    g = _slide(out, name, levels, insts, 0, "dicom.* formatting of every VR")
    g.regions = [Region("level0_full", 0, (0, 0), levels[0].total)]
    return g


def native(out: pathlib.Path) -> Generated:
    """(g) Explicit VR little endian, uncompressed RGB, 3 levels: level 0 in 100 x 100 frames,
    TILED_FULL with per-frame Plane Positions (raster order; libdicom then places frames by
    position); level 1 (one 260 x 196 frame: lossless reduced levels are one frame, see
    ``j2k``) without DimensionOrganizationType (TILED_FULL by default); level 2 one frame."""
    imgs = _pyramid(59, 3)
    levels = [Level(i, (100, 100) if k == 0 else (i.shape[1], i.shape[0]), dw.TS_EXPLICIT, dw.raw) for k, i in enumerate(imgs)]
    name = "dicom-native"
    insts = _series(name, levels, "RGB")
    lv = levels[0]
    insts[0].positions = [(c * 100 + 1, r * 100 + 1) for r in range(lv.down) for c in range(lv.across)]
    insts[0].dim_org = "TILED_FULL"
    insts[1].dim_org = None
    return _slide(out, name, levels, insts, 0, "native RGB, 3 levels; TILED_FULL with positions; no DimensionOrganizationType")


def ybr_icc(out: pathlib.Path) -> Generated:
    """(h) JPEG baseline YBR_FULL_422, 3 levels (one file each), ICC profile, PixelSpacing
    (row 0.000251 mm, column 0.000498 mm), ObjectiveLensPower 40.0."""
    levels = [Level(i, (TILE, TILE), dw.TS_JPEG, dw.jpeg_ybr) for i in _pyramid(60, 3)]
    name = "dicom-ybr-icc"
    insts = _series(name, levels, "YBR_FULL_422", icc=_icc(), pixel_spacing=("0.000251", "0.000498"), objective="40.0")
    return _slide(out, name, levels, insts, 2, "YBR_FULL_422 JPEG, ICC, mpp x != y, objective power",
                  props={"openslide.mpp-x": _mpp("0.000498"), "openslide.mpp-y": _mpp("0.000251")})


def _mpp(spacing_mm: str) -> str:
    """OpenSlide's mpp string for a PixelSpacing value: 1000 x the value, ``%.17g``."""
    return f"{1000 * float(spacing_mm):.17g}"


def build(out: pathlib.Path) -> List[Generated]:
    """Write the DICOM slides and the bad inputs into ``out``; return what OpenSlide must report
    for each slide."""
    slides = [
        sparse(out), sparse_overwrite(out), navigation(out), concat(out), offsets(out, "bot"), offsets(out, "eot"), offsets(out, "none"),
        j2k(out, "rct"), j2k(out, "rgb"), j2k(out, "ict"), associated(out), props(out), native(out), ybr_icc(out),
    ]
    from . import dicom_bad

    dicom_bad.build(out)
    return slides
