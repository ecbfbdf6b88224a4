"""Bad MIRAX inputs OpenSlide 4.0.1 refuses, written under ``OUT_DIR/bad-mirax/`` with
``cases.json``, for ``core/tests/mirax_generated.rs``.

Each case is a small valid slide (``mirax_layout.build_slide``) with one thing broken. OpenSlide is
asked about every case here: it must fail to open it (``openslide_at: "open"``) or open it
and fail to read level 0 (``"read"``); the script stops otherwise. ``cases.json``:
``{"cases": [{"name", "file" (relative to bad-mirax/), "kind" (the error kind slidestream
must give: "format" | "unsupported" | "io"), "at" ("open" | "read": where slidestream must
fail; "read" = reading the whole of level 0), "openslide_at", "openslide_error", "what"}]}``.

slidestream reads at open what OpenSlide reads at open (Slidedat.ini, Index.dat, the
position record, the associated images' headers, the lowest level's images for the
quickhash) and also looks at every data file (its length and identity), so one case fails
earlier than in OpenSlide, which opens a data file at its first read: a missing data file of
level-0 images only (``io`` at open; ``openslide_at`` says ``read``). A data file cut short,
or a damaged image, fails at the read in both.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import struct
from typing import List, Optional

import numpy as np

from . import mirax_writer as mw
from .mirax_layout import Spec, build_slide

BAD = "bad-mirax"


def _spec(name: str, **kw) -> Spec:
    base = dict(nx=2, ny=2, w=64, h=64, exps=(0, 1), nfiles=3, seed=70, associated=("label",), bom=False)
    base.update(kw)
    return Spec(name, **base)


def _ini_replace(parts, group: str, key: str, value: Optional[str]) -> None:
    kvs = parts["ini"].groups[group]
    for i, (k, _) in enumerate(kvs):
        if k == key:
            if value is None:
                del kvs[i]
            else:
                kvs[i] = (k, value)
            return
    raise KeyError(key)


def _index(parts) -> bytearray:
    return bytearray(mw.index_dat(parts["slide_id"], parts["levels"], parts["pages0"], parts["nonhier"]))


def _level0_file(parts) -> int:
    """A data file holding level-0 images only (OpenSlide reads it first at a level-0 read)."""
    used = {r.fileno for _, r in parts["levels"][-1]} | {r.fileno for r in parts["nonhier"]}
    for _, r in parts["levels"][0]:
        if r.fileno not in used:
            return r.fileno
    raise AssertionError("every data file holds a last-level image")


def _cases():
    """(name, spec kwargs, mutate(parts), kind, at, what)."""

    def no_slidedat(p):
        p["skip"] = ["Slidedat.ini"]

    def hier0_not_zoom(p):
        g = p["ini"].groups["HIERARCHICAL"]
        g[:] = [(k.replace("HIER_0_", "HIER_1_") if k.startswith("HIER_0_") else k, v) for k, v in g]
        _ini_replace(p, "HIERARCHICAL", "HIER_COUNT", "2")
        g += [("HIER_0_NAME", "Microscope focus level"), ("HIER_0_COUNT", "1"), ("HIER_0_VAL_0", "FocusLevel_0"),
              ("HIER_0_VAL_0_SECTION", "LAYER_1_LEVEL_0_SECTION")]

    def index_version(p):
        idx = _index(p)
        idx[0:5] = b"01.01"
        p["index"] = bytes(idx)

    def index_uuid(p):
        _ini_replace(p, "GENERAL", "SLIDE_ID", "f" * 32)

    def pointer_past_eof(p):
        idx = _index(p)
        root = 5 + len(p["slide_id"])
        idx[root : root + 4] = struct.pack("<i", len(idx) + 4096)
        p["index"] = bytes(idx)

    def fileno_too_big(p):
        idx, rec = p["levels"][0][1]
        p["levels"][0][1] = (idx, mw.Record(3, rec.offset, rec.length))

    def x_not_multiple(p):
        idx, rec = p["levels"][1][0]
        p["levels"][1][0] = (idx + 1, rec)

    def y_too_big(p):
        idx, rec = p["levels"][0][0]
        p["levels"][0][0] = (idx + 2 * 2 * 2, rec)  # y = 4 with IMAGENUMBER_Y 2

    def position_flag_2(p):
        rec = p["nonhier"][-1]
        p["data"].files[rec.fileno][rec.offset] = 2

    def position_size(p):
        rec = p["nonhier"][-1]
        p["nonhier"][-1] = mw.Record(rec.fileno, rec.offset, rec.length - 9)

    def bad_zlib(p):
        rec = p["nonhier"][-1]
        f = p["data"].files[rec.fileno]
        f[rec.offset : rec.offset + rec.length] = b"\x55" * rec.length

    def format_unknown(p):
        for k in range(2):
            _ini_replace(p, f"LAYER_0_LEVEL_{k}_SECTION", "IMAGE_FORMAT", "JPEG2000")

    def assoc_not_jpeg(p):
        sec = [g for g in p["ini"].groups if g.startswith("NONHIERLAYER_")][0]
        _ini_replace(p, sec, "BARCODE_IMAGE_TYPE", "PNG")

    def nonhier_count_zero(p):
        _ini_replace(p, "HIERARCHICAL", "NONHIER_0_COUNT", "0")

    def imagenumber_zero(p):
        _ini_replace(p, "GENERAL", "IMAGENUMBER_X", "0")

    def concat_zero(p):
        _ini_replace(p, "LAYER_0_LEVEL_1_SECTION", "IMAGE_CONCAT_FACTOR", "0")

    def no_index(p):
        p["skip"] = ["Index.dat"]

    def truncated_data(p):
        fno = _level0_file(p)
        recs = [r for _, r in p["levels"][0] if r.fileno == fno]
        last = max(recs, key=lambda r: r.offset)
        del p["data"].files[fno][last.offset + last.length // 2 :]

    def missing_data(p):
        p["skip"] = [p["data"].names()[_level0_file(p)]]

    def corrupt_tile(p):
        _, rec = p["levels"][0][0]
        f = p["data"].files[rec.fileno]
        f[rec.offset + 2 : rec.offset + rec.length] = b"\x13" * (rec.length - 2)

    def bmp_wrong_size(p):
        # Level-0 images stored 1 px narrower than DIGITIZER_WIDTH says (records rewritten).
        data, recs = p["data"], p["levels"][0]
        for i, (idx, rec) in enumerate(recs):
            img = np.zeros((64, 63, 3), np.uint8) + 100
            recs[i] = (idx, data.add(rec.fileno, mw.bmp24(img)))

    pos = [(0, 0), (56, 0), (0, 56), (56, 56)]
    P = dict(overlap=(8, 8), positions=pos, record="raw")
    Z = dict(overlap=(8, 8), positions=pos, record="zlib")
    return [
        ("missing-slidedat", {}, no_slidedat, "unsupported", "open", "the folder has no Slidedat.ini (not detected as MIRAX)"),
        ("hier0-not-zoom-level", {}, hier0_not_zoom, "format", "open", "HIER_1, not HIER_0, is the Slide zoom level"),
        ("index-version", {}, index_version, "format", "open", "Index.dat starts 01.01, not 01.02"),
        ("index-slide-id", {}, index_uuid, "format", "open", "SLIDE_ID differs from Index.dat's"),
        ("index-pointer-past-eof", {}, pointer_past_eof, "format", "open", "the hier table pointer lies past the end of Index.dat"),
        ("fileno-out-of-range", {}, fileno_too_big, "format", "open", "a level-0 record names data file 3 of FILE_COUNT 3"),
        ("x-not-concat-multiple", {}, x_not_multiple, "format", "open", "a level-1 record at image x = 1 (concat 2)"),
        ("y-out-of-range", {}, y_too_big, "format", "open", "a level-0 record at image y = 4 of IMAGENUMBER_Y 2"),
        ("position-flag-2", P, position_flag_2, "format", "open", "a VIMSLIDE_POSITION_BUFFER flag byte of 2"),
        ("position-buffer-size", P, position_size, "format", "open", "the position record is 9 bytes short"),
        ("position-zlib-corrupt", Z, bad_zlib, "format", "open", "the StitchingIntensityLayer record does not inflate"),
        ("image-format-unknown", {}, format_unknown, "unsupported", "open", "IMAGE_FORMAT=JPEG2000"),
        ("associated-not-jpeg", {}, assoc_not_jpeg, "unsupported", "open", "BARCODE_IMAGE_TYPE=PNG"),
        ("nonhier-count-zero", {}, nonhier_count_zero, "format", "open", "NONHIER_0_COUNT=0"),
        ("imagenumber-x-zero", {}, imagenumber_zero, "format", "open", "IMAGENUMBER_X=0"),
        ("concat-exponent-zero", {}, concat_zero, "format", "open", "level 1 IMAGE_CONCAT_FACTOR=0"),
        ("index-missing", {}, no_index, "io", "open", "Index.dat is missing"),
        ("data-file-missing", {}, missing_data, "io", "open", "a data file of level-0 images only is missing (OpenSlide fails at read)"),
        ("data-file-truncated", {}, truncated_data, "format", "read", "a data file ends in the middle of a level-0 image"),
        ("tile-corrupt", {}, corrupt_tile, "format", "read", "a level-0 JPEG's bytes after SOI are garbage"),
        ("bmp-wrong-size", dict(fmt="BMP24"), bmp_wrong_size, "format", "read", "level-0 BMP24 images 63 px wide, DIGITIZER_WIDTH 64"),
    ]


def build(out_dir: pathlib.Path) -> List[dict]:
    """Write every case and ``cases.json``; checks OpenSlide refuses each (AssertionError
    otherwise)."""
    import openslide

    root = out_dir / BAD
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cases = []
    for name, kw, mutate, kind, at, what in _cases():
        path, model, _ = build_slide(root, _spec(name, **kw), mutate=mutate)
        osr_at, msg = None, ""
        try:
            osr = openslide.OpenSlide(str(path))
        except (openslide.OpenSlideError, openslide.OpenSlideUnsupportedFormatError) as e:
            osr_at, msg = "open", str(e)
        else:
            try:
                osr.read_region((0, 0), 0, osr.level_dimensions[0])
            except openslide.OpenSlideError as e:
                osr_at, msg = "read", str(e)
            osr.close()
        assert osr_at is not None, f"bad-mirax/{name}: OpenSlide opens and reads it"
        if kind == "unsupported" and name == "missing-slidedat":
            assert openslide.OpenSlide.detect_format(str(path)) is None, f"{name}: OpenSlide detects it"
        cases.append(dict(name=name, file=path.name, kind=kind, at=at, openslide_at=osr_at, openslide_error=msg, what=what))
    (root / "cases.json").write_text(json.dumps({"cases": cases}, indent=1))
    return cases
