"""Shared helpers of the OpenSlide parity tests (test_parity, test_compat, test_deepzoom).

OpenSlide's pixel model for ``read_region(location, level, size)`` (docs/openslide-notes.md §4):
on each axis, a location ``v < 0`` makes OpenSlide start at level pixel ``-trunc(-v / ds)``
with no sub-pixel offset; otherwise the level origin is the real number ``v / ds`` and tiles
are painted at that sub-pixel offset with bilinear filtering (the fraction quantised to
1/65536). slidestream starts at the level pixel ``floor(v / ds)``. When OpenSlide's origin is a
whole pixel both read the same pixels; otherwise OpenSlide's output is the bilinear
resampling of slidestream's pixels at the fractional offset.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest

LOSSY_COMPRESSIONS = {7, 33003, 33005, 34712, 50001}
# Max abs difference per channel allowed between two decoders of a lossy codec.
LOSSY_TOLERANCE = 2

SLIDE_SUFFIXES = {".svs", ".tif", ".tiff", ".ndpi", ".scn", ".bif", ".mrxs", ".dcm"}


def _registered_vendors() -> Tuple[str, ...]:
    """The format drivers slidestream has, in detection order: ``format_verdicts`` of a file no
    driver accepts names every driver (kept in step with the registry, not by hand)."""
    import tempfile

    import slidestream

    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(b"not a slide: no format driver accepts these bytes" * 4)
        f.flush()
        verdicts = slidestream.format_verdicts(f.name)
    assert "accepted" not in verdicts.values(), verdicts
    return tuple(verdicts)


# Vendors slidestream has a driver for; OpenSlide-readable files of other vendors must be
# refused with UnsupportedFormatError.
SUPPORTED_VENDORS = _registered_vendors()
# Generated OME-TIFF slides (left to test_channels.py, see slide_files).
OME_SUFFIX = ".ome.tif"
# Test ids of generated vendor slides start with this prefix (see slide_path).
GENERATED_PREFIX = "gen:"


def vendor_slides() -> Optional[pathlib.Path]:
    """The generated vendor slides (``$SLIDESTREAM_VENDOR_SLIDES``, else
    ``target/vendor-slides``; written by ``scripts/make_vendor_slides.py``), or ``None``."""
    root = os.environ.get("SLIDESTREAM_VENDOR_SLIDES")
    p = pathlib.Path(root) if root else pathlib.Path(__file__).resolve().parents[2] / "target" / "vendor-slides"
    return p if (p / "MANIFEST.md").is_file() else None


def slide_path(name: str) -> pathlib.Path:
    """The path of a test id from ``slide_files()``: a shared test slide by file name, or a
    generated vendor slide as ``gen:<file>``. A slide of several files (a DICOM folder) is
    named by its folder and resolves to the file its reference names
    (``reference-multifile/<folder>/regions.json["open"]``), the file OpenSlide opens."""
    if name.startswith(GENERATED_PREFIX):
        root = vendor_slides()
        if root is None:
            pytest.skip("generated vendor slides not found (run scripts/make_vendor_slides.py)")
        return _resolve(root, name[len(GENERATED_PREFIX):])
    return _resolve(locate_testdata(), name)


def _resolve(root: pathlib.Path, name: str) -> pathlib.Path:
    """``root / name``, or for a folder slide the file its multi-file reference opens."""
    path = root / name
    if path.is_dir():
        return root / json.loads((root / "reference-multifile" / name / "regions.json").read_text())["open"]
    return path


def _folder_slides(root: pathlib.Path) -> List[str]:
    """Folders of ``root`` that are slides of several files: those with a
    ``reference-multifile/<folder>/regions.json`` naming the file to open."""
    ref = root / "reference-multifile"
    if not ref.is_dir():
        return []
    return sorted(
        d.name for d in ref.iterdir() if (root / d.name).is_dir() and "open" in json.loads((d / "regions.json").read_text() or "{}")
    )


def locate_testdata() -> pathlib.Path:
    """``$SLIDESTREAM_TESTDATA`` (as the Rust tests), else ``../shared/testdata`` next to the
    repository; skips the test when it is absent."""
    td = _testdata_dir()
    if not td.is_dir():
        pytest.skip(f"test slides not found at {td}")
    return td


def _testdata_dir() -> pathlib.Path:
    """``$SLIDESTREAM_TESTDATA`` (as the Rust tests), else ``../shared/testdata`` next to the
    repository."""
    env = os.environ.get("SLIDESTREAM_TESTDATA")
    return pathlib.Path(env) if env else pathlib.Path(__file__).resolve().parents[3] / "shared" / "testdata"


def slide_files() -> List[str]:
    """Names of the slide files in the test-data folder (for parametrisation; empty when the
    folder is absent, in which case the single placeholder test skips)."""
    td = _testdata_dir()
    names = []
    if td.is_dir():
        names = sorted(p.name for p in td.iterdir() if p.is_file() and p.suffix.lower() in SLIDE_SUFFIXES)
        names += _folder_slides(td)
    gen = vendor_slides()
    if gen is not None:
        # OME-TIFF files are compared in test_channels.py: OpenSlide 4.0.1 reads them as
        # generic-tiff level 0 only, slidestream's ome-tiff driver adds the SubIFD levels.
        names += sorted(
            GENERATED_PREFIX + p.name for p in gen.iterdir() if p.is_file() and p.name != "MANIFEST.md" and not p.name.endswith(OME_SUFFIX)
        )
        names += [GENERATED_PREFIX + n for n in _folder_slides(gen)]
    return names or ["<no testdata>"]


def openslide_or_skip(name: str):
    """openslide.OpenSlide for a test file, or skip when openslide-python is missing or
    OpenSlide cannot open the file."""
    openslide = pytest.importorskip("openslide")
    path = slide_path(name)
    try:
        return openslide.OpenSlide(str(path))
    except openslide.OpenSlideError as e:
        pytest.skip(f"OpenSlide cannot open {name}: {e}")


def page_compressions(path: pathlib.Path) -> Dict[Tuple[int, int, bool], int]:
    """(width, height, tiled) → TIFF compression code of every IFD of a file (tifffile).
    A MIRAX slide (``X.mrxs`` + folder ``X/``) has no IFDs: its levels (tiled, sizes from
    OpenSlide) get the code of their ``IMAGE_FORMAT`` in ``X/Slidedat.ini`` (JPEG 7, PNG and
    BMP24 1 = lossless), its associated images (always JPEG) 7. For a DICOM file: of every
    instance of its series in its folder (pydicom), the transfer syntax as the TIFF code of the
    same codec (JPEG 7, lossy JPEG 2000 33003, lossless JPEG 2000 and native 1: OpenJPEG
    decodes reversible codestreams exactly), keyed tiled and not."""
    if path.suffix.lower() == ".mrxs":
        return _mirax_compressions(path)
    if path.suffix.lower() == ".dcm":
        return _dicom_compressions(path)
    if path.suffix.lower() in (".vms", ".vmu", ".svslide"):
        return _hamamatsu_key_compressions(path)
    if path.suffix.lower() == ".czi":
        return _czi_compressions(path)
    tifffile = pytest.importorskip("tifffile")
    out: Dict[Tuple[int, int, bool], int] = {}
    with tifffile.TiffFile(str(path)) as t:
        for p in t.pages:
            out.setdefault((int(p.imagewidth), int(p.imagelength), bool(p.is_tiled)), int(p.compression))
    return out


def _hamamatsu_key_compressions(path: pathlib.Path) -> Dict[Tuple[int, int, bool], int]:
    """A Hamamatsu VMS / VMU key file has no IFDs of its own: its levels (sizes from OpenSlide)
    get JPEG's code 7 (VMS: JPEG image files and map) or 1 (VMU: raw NGR files), its
    associated images (the macro JPEG) 7. A Sakura SVSlide (an SQLite database, no IFDs either):
    JPEG for its levels (one greyscale JPEG per colour) and associated images."""
    openslide = pytest.importorskip("openslide")
    code = 1 if path.suffix.lower() == ".vmu" else 7
    out: Dict[Tuple[int, int, bool], int] = {}
    with openslide.OpenSlide(str(path)) as osr:
        for w, h in osr.level_dimensions:
            out.setdefault((w, h, True), code)
        for img in osr.associated_images.values():
            out.setdefault((img.size[0], img.size[1], False), 7)
    return out


def _czi_compressions(path: pathlib.Path) -> Dict[Tuple[int, int, bool], int]:
    """A Zeiss CZI has no IFDs: the slide scans OpenSlide reads are uncompressed or zstd, so
    their levels and embedded-CZI associated images (label, macro) get code 1 (lossless); the
    thumbnail (a JPEG attachment) 7. Sizes from OpenSlide."""
    openslide = pytest.importorskip("openslide")
    out: Dict[Tuple[int, int, bool], int] = {}
    with openslide.OpenSlide(str(path)) as osr:
        for w, h in osr.level_dimensions:
            out.setdefault((w, h, True), 1)
        for name, img in osr.associated_images.items():
            out.setdefault((img.size[0], img.size[1], False), 7 if name == "thumbnail" else 1)
    return out


def _mirax_compressions(path: pathlib.Path) -> Dict[Tuple[int, int, bool], int]:
    openslide = pytest.importorskip("openslide")
    groups: Dict[str, Dict[str, str]] = {}
    group = None
    for line in (path.parent / path.stem / "Slidedat.ini").read_text(encoding="utf-8-sig").splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            group = groups.setdefault(line[1:-1], {})
        elif "=" in line and group is not None:
            k, v = line.split("=", 1)
            group[k.strip()] = v.strip()
    hier = groups.get("HIERARCHICAL", {})
    out: Dict[Tuple[int, int, bool], int] = {}
    with openslide.OpenSlide(str(path)) as osr:
        for k, (w, h) in enumerate(osr.level_dimensions):
            fmt = groups.get(hier.get(f"HIER_0_VAL_{k}_SECTION", ""), {}).get("IMAGE_FORMAT", "JPEG")
            out.setdefault((w, h, True), 7 if fmt == "JPEG" else 1)
        for img in osr.associated_images.values():
            out.setdefault((img.size[0], img.size[1], False), 7)
    return out


DICOM_WSI = "1.2.840.10008.5.1.4.1.1.77.1.6"
DICOM_TS_AS_TIFF = {"1.2.840.10008.1.2.4.50": 7, "1.2.840.10008.1.2.4.91": 33003, "1.2.840.10008.1.2.4.90": 1, "1.2.840.10008.1.2.1": 1}


def _dicom_compressions(path: pathlib.Path) -> Dict[Tuple[int, int, bool], int]:
    pydicom = pytest.importorskip("pydicom")
    series = pydicom.dcmread(str(path), stop_before_pixels=True).SeriesInstanceUID
    out: Dict[Tuple[int, int, bool], int] = {}
    for f in sorted(path.parent.iterdir()):
        try:
            ds = pydicom.dcmread(str(f), stop_before_pixels=True)
        except Exception:  # not DICOM: OpenSlide skips it too
            continue
        flavor = list(ds.get("ImageType", []))[2:3]
        if ds.get("SeriesInstanceUID") != series or ds.get("SOPClassUID") != DICOM_WSI or flavor not in (["VOLUME"], ["LABEL"], ["OVERVIEW"], ["THUMBNAIL"]):
            continue
        code = DICOM_TS_AS_TIFF.get(str(ds.file_meta.TransferSyntaxUID), 7)
        for tiled in (True, False):
            out.setdefault((int(ds.TotalPixelMatrixColumns), int(ds.TotalPixelMatrixRows), tiled), code)
    return out


def tolerance_for(path: pathlib.Path, width: int, height: int, tiled: bool) -> int:
    """Allowed max abs difference for the image of that size: 0 for lossless codecs,
    LOSSY_TOLERANCE for JPEG / JPEG 2000 / WebP (different decoders may round differently).
    Hamamatsu NDPI: every image OpenSlide exposes is JPEG (levels are JPEG strips, most of them
    synthesised by DCT scaling, so they match no IFD; the macro is JPEG)."""
    if path.suffix.lower() == ".ndpi":
        return LOSSY_TOLERANCE
    pages = page_compressions(path)
    comp = pages.get((width, height, tiled))
    if comp is None:
        # Level sizes from metadata rather than an IFD (Philips clips padded IFDs, a Leica level
        # is the whole slide around its main image) and associated images stored outside any
        # IFD (Philips's base64 JPEGs in the XML): lossy when any image of the file is.
        assert pages, f"{path.name}: no IFDs"
        return LOSSY_TOLERANCE if any(c in LOSSY_COMPRESSIONS for c in pages.values()) else 0
    return LOSSY_TOLERANCE if comp in LOSSY_COMPRESSIONS else 0


def openslide_origin(v: int, ds: float) -> Tuple[int, float]:
    """OpenSlide's level origin on one axis for level-0 coordinate ``v`` at downsample ``ds``:
    (whole level pixel, fraction in [0, 1) quantised to 1/65536)."""
    if v < 0:
        return -math.trunc(-v / ds), 0.0
    x = v / ds
    whole = math.floor(x)
    q = round((x - whole) * 65536)  # round half to even, as pixman's fixed point
    if q == 65536:
        return whole + 1, 0.0
    return whole, q / 65536


def level0_for_origin(origin: int, ds: float) -> int:
    """A level-0 coordinate that slidestream maps to level pixel ``origin``
    (``floor(v / ds) == origin``)."""
    v = math.ceil(origin * ds)
    assert math.floor(v / ds) == origin, (origin, ds, v)
    return v


def premultiply(rgba: np.ndarray) -> np.ndarray:
    """float premultiplied copy of a uint8 RGBA array (..., 4)."""
    f = rgba.astype(np.float64)
    a = f[..., 3:4] / 255.0
    out = f.copy()
    out[..., :3] *= a
    return out


def bilinear_premultiplied(big: np.ndarray, w: int, h: int, fx: float, fy: float) -> np.ndarray:
    """Bilinear resampling (premultiplied, float) of ``big`` (h+1, w+1, 4) uint8 RGBA at the
    offset (fx, fy): the pixels OpenSlide paints for a region starting at that sub-pixel
    offset of the level."""
    p = premultiply(big)
    return (
        p[:h, :w] * (1 - fx) * (1 - fy)
        + p[:h, 1 : w + 1] * fx * (1 - fy)
        + p[1 : h + 1, :w] * (1 - fx) * fy
        + p[1 : h + 1, 1 : w + 1] * fx * fy
    )


def unpremultiply_like_openslide(p: np.ndarray) -> np.ndarray:
    """uint8 straight RGBA from float premultiplied values, the way OpenSlide + openslide-python
    store them (cairo ARGB32 quantisation, then ``c = 255 * c // a``)."""
    q = np.clip(np.round(p), 0, 255).astype(np.int64)
    a = q[..., 3:4]
    rgb = np.where(a == 0, 0, np.where(a == 255, q[..., :3], (255 * q[..., :3]) // np.maximum(a, 1)))
    return np.concatenate([np.clip(rgb, 0, 255), a], axis=-1).astype(np.uint8)


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> int:
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.size == 0:
        return 0
    return int(np.abs(a.astype(np.int64) - b.astype(np.int64)).max())


def read_as_openslide(slide, location: Tuple[int, int], level: int, size: Tuple[int, int]) -> np.ndarray:
    """What OpenSlide returns for this read, modelled from slidestream's own pixels
    (``slide``: slidestream.Slide): uint8 (h, w, 4) straight RGBA. Whole-pixel origins are a
    plain slidestream read; fractional ones the bilinear resampling at the offset."""
    ds = float(slide.level_downsamples[level])
    (ox, fx), (oy, fy) = openslide_origin(location[0], ds), openslide_origin(location[1], ds)
    loc = (level0_for_origin(ox, ds), level0_for_origin(oy, ds))
    w, h = size
    if fx == 0 and fy == 0:
        return np.asarray(slide.read_region(loc, level, (w, h)))
    big = np.asarray(slide.read_region(loc, level, (w + 1, h + 1)))
    return unpremultiply_like_openslide(bilinear_premultiplied(big, w, h, fx, fy))


def fractional(location: Tuple[int, int], ds: float) -> bool:
    """True when OpenSlide paints this location at a sub-pixel offset."""
    return any(openslide_origin(v, ds)[1] != 0 for v in location)


def shifted(location: Tuple[int, int], ds: float) -> bool:
    """True when slidestream's level origin floor(v/ds) differs from OpenSlide's whole-pixel
    origin (negative locations that are not a multiple of the downsample)."""
    return any(openslide_origin(v, ds)[0] != math.floor(v / ds) for v in location)


def first_difference(a: np.ndarray, b: np.ndarray) -> Optional[str]:
    """Human-readable position of the largest difference (for assertion messages)."""
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    d = np.abs(a.astype(np.int64) - b.astype(np.int64))
    if d.size == 0 or d.max() == 0:
        return None
    y, x, c = np.unravel_index(int(d.argmax()), d.shape)
    return f"at (x={x}, y={y}, channel {c}): {a[y, x].tolist()} vs {b[y, x].tolist()}"
