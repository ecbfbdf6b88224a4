"""The model behind ``mirax.py``'s slides: ``Spec`` (what to write), ``build_slide`` (writes
the files through ``mirax_writer.py`` and returns the ``Model`` of what OpenSlide 4.0.1 shows)
and ``composite`` (a level painted from the stored images as OpenSlide paints it). Geometry as
``openslide-vendor-mirax.c`` and the tilemap of ``openslide-grid.c`` place MIRAX tiles:

* The scanner's camera takes photos at camera positions (from the position record, else
  nominal: position p at ((p % px) * (image_w * d - overlap_x), (p / px) * (image_h * d -
  overlap_y)), px = IMAGENUMBER_X / d); each photo is stored as d x d images (d =
  CameraImageDivisionsPerSide) placed edge to edge. At level k (image_concat c = 2^(sum of
  the concat exponents)) an image at (x, y) (multiples of c, level-0 image units) is c x c
  level-0 images downscaled by c; with a position record or a level-0 overlap, it is cut
  into max(1, c / d)^2 sub-tiles, each placed at its camera position / c in tilemap cell
  (x / min(c, d) + i, y / min(c, d) + j); otherwise placed whole at the nominal position / c
  in cell (x / c, y / c). A level-0 position (0, 0) other than position 0 is inactive (its
  images are skipped, at every level); a later record for a cell replaces the earlier.
* Level size: the level-0 images across minus the level-0 overlap after every division
  group but the last, divided by c (integer); downsample = c_k / c_0.
* Tiles are painted rows bottom to top, columns right to left, each over what is not yet
  painted: of overlapping tiles the one with the larger cell (row, column) shows. The parts a
  stored image loses to a neighbour are tinted, so another order shows.

Every position is a multiple of the largest concat factor (asserted), so every placement is
integral at every level and OpenSlide copies pixels without resampling; the expected level-k
pixels are then the box-filtered known pixels wherever a tile lies (``build_slide`` builds
the stored images so; ``mirax._generated`` asserts the model shows exactly that).
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import zlib
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from . import mirax_writer as mw
from .common import downscale, tissue_like


# A repeated key with backslashes and trailing spaces (GLib's raw value: kept as written).
QUIRK_COMMENT_LINE = "SLIDE_COMMENT=second, C:\\scans\\n1\\s;x  "
TINT = np.array([60, -60, 60], np.int16)
INACTIVE_COLOUR = (20, 220, 40)  # stored for inactive positions: must never show
FILL_BGR = 0xF4F0F2  # IMAGE_FILL_COLOR_BGR: RGB (242, 240, 244)


@dataclasses.dataclass
class Spec:
    """One MIRAX slide to write. ``positions`` (level-0 pixels per camera position, flag 1)
    makes a position record (``record``: ``"raw"`` VIMSLIDE_POSITION_BUFFER or ``"zlib"``
    StitchingIntensityLayer); ``dropped``: level-0 images (x, y) not stored; ``inactive``:
    camera positions written as (0, 0)."""

    name: str
    nx: int
    ny: int
    w: int = 128
    h: int = 128
    d: int = 1
    exps: Tuple[int, ...] = (0, 1, 1)
    overlap: Tuple[int, int] = (0, 0)
    positions: Optional[List[Tuple[int, int]]] = None
    record: str = "raw"
    fmt: str = "JPEG"
    nfiles: int = 2
    pages0: int = 1
    dropped: Set[Tuple[int, int]] = dataclasses.field(default_factory=set)
    inactive: Set[int] = dataclasses.field(default_factory=set)
    associated: Tuple[str, ...] = ()
    objective: Optional[str] = "20"
    mpp: Tuple[str, str] = ("0.242", "0.2431")  # level 0, as written (OpenSlide reformats them)
    seed: int = 0
    bom: bool = True
    shuffle0: bool = False  # level-0 index records out of row order
    nonhier_odd: bool = False  # nonhier pages' ignored second value 1253 (seen in real slides)
    other_nonhier_first: bool = False
    # GKeyFile details in Slidedat.ini (comment, empty key, spaces around "=", trailing
    # spaces, backslashes, a repeated key and a repeated group), all of which OpenSlide reads
    # as GLib does: raw values, the last of a repeated key, an empty key skipped.
    quirks: bool = False
    # A level-0 image (x, y) recorded twice: first with a decoy image, then with the real one
    # (OpenSlide's tile map keeps the later tile of a cell).
    duplicate: Optional[Tuple[int, int]] = None
    # A second hierarchy after the zoom levels (HIER_1 "Microscope focus level", one value, an
    # empty record list in Index.dat), as real slides have.
    focus_hier: bool = False
    # The .mrxs file's bytes: never read by OpenSlide (real ones hold a small binary header).
    mrxs: bytes = b"MRXS\x00\x01" + bytes(range(58))


@dataclasses.dataclass
class Model:
    """What OpenSlide will show: per level its image_concat, size and the tiles it places —
    (x, y, w, h, row, col, image, src_x, src_y): level pixels, tilemap cell, the stored image
    (before encoding) and the sub-tile's origin in it; the known pixels (level 0, covering
    every placement) and the associated images' pixels."""

    concat: List[int]
    positions: List[Tuple[int, int]]  # level-0 pixels per camera position
    level_dims: List[Tuple[int, int]]
    truth: np.ndarray
    placed: List[list]
    assoc: Dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


def _concats(s: Spec) -> List[int]:
    out, e = [], 0
    for x in s.exps:
        e += x
        out.append(1 << e)
    return out


def _camera_positions(s: Spec) -> List[Tuple[int, int]]:
    px, py = s.nx // s.d, s.ny // s.d
    if s.positions is not None:
        assert len(s.positions) == px * py
        pos = list(s.positions)
    else:
        pos = [((p % px) * (s.w * s.d - s.overlap[0]), (p // px) * (s.h * s.d - s.overlap[1])) for p in range(px * py)]
    return [(0, 0) if p in s.inactive else v for p, v in enumerate(pos)]


def _level_dims(s: Spec, concat: Sequence[int]) -> List[Tuple[int, int]]:
    def base(n, size, ov):
        return sum(size if (i % s.d != s.d - 1 or i == n - 1) else size - ov for i in range(n))

    bw, bh = base(s.nx, s.w, s.overlap[0]), base(s.ny, s.h, s.overlap[1])
    return [(bw // c, bh // c) for c in concat]


def _image_origin(s: Spec, pos, xx: int, yy: int) -> Tuple[int, int]:
    """Level-0 pixel of the top-left of level-0 image (xx, yy)."""
    cp = (yy // s.d) * (s.nx // s.d) + xx // s.d
    return pos[cp][0] + s.w * (xx % s.d), pos[cp][1] + s.h * (yy % s.d)


def _subtiles(s: Spec, concat: int) -> int:
    """tiles_per_image of a level of image_concat ``concat``."""
    if s.positions is not None or s.overlap != (0, 0):
        return max(1, concat // s.d)
    return 1


def build_slide(out_dir: pathlib.Path, s: Spec, mutate=None) -> Tuple[pathlib.Path, Model, Dict]:
    """Write slide ``s``; ``mutate(parts)`` (bad-input cases) may change the INI, index,
    data files and position bytes before they are written. Returns the ``.mrxs`` path, the
    model of what OpenSlide shows and the written parts."""
    concat = _concats(s)
    pos = _camera_positions(s)
    dims = _level_dims(s, concat)
    cmax = concat[-1]
    assert all(x % cmax == 0 and y % cmax == 0 for x, y in pos), "positions must be integral at every level"
    # Level-0 images actually placed: stored and at an active position.
    px = s.nx // s.d
    active_pos = set()
    stored0 = []
    for yy in range(s.ny):
        for xx in range(s.nx):
            if (xx, yy) in s.dropped:
                continue
            stored0.append((xx, yy))
            cp = (yy // s.d) * px + xx // s.d
            if cp not in s.inactive:
                active_pos.add(cp)
    # The known pixels: a canvas covering every placement at every level.
    ext_w = max([_image_origin(s, pos, xx, yy)[0] + s.w for xx, yy in stored0] + [-(-s.nx // cmax) * cmax * s.w])
    ext_h = max([_image_origin(s, pos, xx, yy)[1] + s.h for xx, yy in stored0] + [-(-s.ny // cmax) * cmax * s.h])
    ext_w, ext_h = -(-ext_w // cmax) * cmax, -(-ext_h // cmax) * cmax
    truth = tissue_like(ext_w, ext_h, seed=s.seed)
    # Level-0 tiles: (x, y, w, h, row, col) — OpenSlide's paint priority is (row, col).
    def rank_map(tiles, W, H):
        win = np.full((H, W), -1, np.int64)
        for i in sorted(range(len(tiles)), key=lambda i: (tiles[i][4], tiles[i][5])):
            x, y, w, h = tiles[i][:4]
            win[y : y + h, x : x + w] = i
        return win

    l0 = [(xx, yy) for xx, yy in stored0 if ((yy // s.d) * px + xx // s.d) in active_pos]
    tiles0 = [(*_image_origin(s, pos, xx, yy), s.w, s.h, yy, xx) for xx, yy in l0]
    win0 = rank_map(tiles0, ext_w, ext_h)
    # Stored level-0 image content: the truth at its place, the parts another image covers
    # tinted; inactive positions a colour that must never show.
    content: Dict[Tuple[int, int], np.ndarray] = {}
    for xx, yy in stored0:
        cp = (yy // s.d) * px + xx // s.d
        if cp in s.inactive:
            content[(xx, yy)] = np.full((s.h, s.w, 3), INACTIVE_COLOUR, np.uint8)
            continue
        i = l0.index((xx, yy))
        x, y = tiles0[i][:2]
        t = truth[y : y + s.h, x : x + s.w].astype(np.int16)
        hidden = win0[y : y + s.h, x : x + s.w] != i
        t[hidden] += TINT
        content[(xx, yy)] = np.clip(t, 0, 255).astype(np.uint8)

    def l0_image(xx, yy):
        if (xx, yy) in content:
            return content[(xx, yy)]
        # Not stored (outside the grid, or dropped): what a scanner fills in; shown only
        # where a whole image of a higher level reaches past the level (no sub-tiles).
        x, y = xx * s.w, yy * s.h
        return truth[y : y + s.h, x : x + s.w] if (x + s.w <= ext_w and y + s.h <= ext_h) else np.full((s.h, s.w, 3), 128, np.uint8)

    data = mw.DataFiles(s.nfiles)
    enc = mw.ENCODERS[s.fmt]
    levels_recs = []
    placed = []
    for k, c in enumerate(concat):
        tpi = _subtiles(s, c)
        tw, th = s.w // tpi, s.h // tpi
        recs, tiles = [], []
        for y in range(0, s.ny, c):
            for x in range(0, s.nx, c):
                if k == 0 and (x, y) in s.dropped:
                    continue
                # Skip images every level-0 image of which is dropped.
                if not any((x + i, y + j) in stored0 for j in range(c) for i in range(c) if x + i < s.nx and y + j < s.ny):
                    continue
                mosaic = np.concatenate(
                    [np.concatenate([l0_image(x + i, y + j) for i in range(c)], axis=1) for j in range(c)], axis=0
                )
                img = mosaic if c == 1 else downscale(mosaic, c)
                fileno = ((x // c + y // c) % s.nfiles) if k == 0 else (k % s.nfiles)
                if k == 0 and s.duplicate == (x, y):
                    decoy = np.full_like(img, INACTIVE_COLOUR)
                    recs.append((y * s.nx + x, data.add(fileno, enc(decoy))))
                recs.append((y * s.nx + x, data.add(fileno, enc(img))))
                sub = s.positions is not None or s.overlap != (0, 0)
                div = min(c, s.d) if sub else c
                per_tile = 1 if sub else max(1, c // s.d)
                for yi in range(tpi):
                    yy = y + yi * s.d
                    if yy >= s.ny:
                        break
                    for xi in range(tpi):
                        xx = x + xi * s.d
                        if xx >= s.nx:
                            break
                        xp, yp = xx // s.d, yy // s.d
                        if not any((yp + j) * px + xp + i in active_pos for j in range(per_tile) for i in range(per_tile)):
                            continue
                        ox, oy = _image_origin(s, pos, xx, yy)
                        tiles.append((ox // c, oy // c, tw, th, y // div + yi, x // div + xi, img, tw * xi, th * yi))
        if k == 0 and s.shuffle0:
            recs = [recs[i] for i in np.random.default_rng(s.seed).permutation(len(recs))]
        levels_recs.append(recs)
        placed.append(tiles)

    # Associated images and the position record, in data file 0.
    nonhier_recs: List[mw.Record] = []
    names: List[Tuple[str, List[Tuple[str, str]]]] = []  # (NAME, [(VAL, SECTION)])
    sections: Dict[str, List[Tuple[str, str]]] = {}
    assoc_pixels = {}
    if s.other_nonhier_first:
        nonhier_recs.append(data.add(0, b"\x01\x02\x03\x04" * 8))
        names.append(("VIMSLIDE_HISTOGRAM_DATA", [("default", "NONHIERLAYER_HIST_SECTION")]))
        sections["NONHIERLAYER_HIST_SECTION"] = [("HISTOGRAM_FORMAT", "1")]
    if s.associated:
        vals = []
        for assoc, val, key, size, seed in (
            ("macro", "ScanDataLayer_SlideThumbnail", "THUMBNAIL_IMAGE_TYPE", (300, 120), 51),
            ("label", "ScanDataLayer_SlideBarcode", "BARCODE_IMAGE_TYPE", (120, 100), 52),
            ("thumbnail", "ScanDataLayer_SlidePreview", "PREVIEW_IMAGE_TYPE", (160, 96), 53),
        ):
            if assoc not in s.associated:
                continue
            px_ = tissue_like(size[0], size[1], seed=seed + s.seed)
            assoc_pixels[assoc] = px_
            nonhier_recs.append(data.add(0, mw.jpeg(px_, quality=92)))
            sec = f"NONHIERLAYER_{len(names)}_LEVEL_{len(vals)}_SECTION"
            vals.append((val, sec))
            sections[sec] = [(key, "JPEG"), ("IMAGE_WIDTH", str(size[0])), ("IMAGE_HEIGHT", str(size[1]))]
        names.append(("Scan data layer", vals))
    pos_bytes = None
    if s.positions is not None:
        raw = mw.position_buffer([(1, x // concat[0], y // concat[0]) for x, y in pos])
        pos_bytes = raw if s.record == "raw" else zlib.compress(raw, 9)
        nonhier_recs.append(data.add(0, pos_bytes))
        nm = "VIMSLIDE_POSITION_BUFFER" if s.record == "raw" else "StitchingIntensityLayer"
        sec = f"NONHIERLAYER_{len(names)}_SECTION"
        names.append((nm, [("default", sec)]))
        sections[sec] = [("VIMSLIDE_POSITION_DATA_FORMAT_VERSION", "257")]

    slide_id = hashlib.sha256(s.name.encode()).hexdigest()[:32]
    ini = mw.Ini(bom=s.bom)
    ini.set("GENERAL", "SLIDE_VERSION", "1.9")
    ini.set("GENERAL", "SLIDE_ID", slide_id)
    ini.set("GENERAL", "SLIDE_NAME", s.name)
    ini.set("GENERAL", "SLIDE_CREATIONDATETIME", "01/12/2026 10:00:00")
    ini.set("GENERAL", "IMAGENUMBER_X", s.nx)
    ini.set("GENERAL", "IMAGENUMBER_Y", s.ny)
    if s.objective is not None:
        ini.set("GENERAL", "OBJECTIVE_MAGNIFICATION", s.objective)
    ini.set("GENERAL", "CameraImageDivisionsPerSide", s.d)
    ini.set("HIERARCHICAL", "HIER_COUNT", 2 if s.focus_hier else 1)
    ini.set("HIERARCHICAL", "NONHIER_COUNT", len(names))
    ini.set("HIERARCHICAL", "INDEXFILE", "Index.dat")
    ini.set("HIERARCHICAL", "HIER_0_NAME", "Slide zoom level")
    ini.set("HIERARCHICAL", "HIER_0_COUNT", len(concat))
    for k in range(len(concat)):
        ini.set("HIERARCHICAL", f"HIER_0_VAL_{k}", f"ZoomLevel_{k}")
        ini.set("HIERARCHICAL", f"HIER_0_VAL_{k}_SECTION", f"LAYER_0_LEVEL_{k}_SECTION")
    if s.focus_hier:
        for key, v in (("NAME", "Microscope focus level"), ("COUNT", 1), ("VAL_0", "FocusLevel_0"),
                       ("VAL_0_SECTION", "LAYER_1_LEVEL_0_SECTION")):
            ini.set("HIERARCHICAL", f"HIER_1_{key}", v)
        sections["LAYER_1_LEVEL_0_SECTION"] = [("FOCUS_LEVEL", "0")]
    for i, (nm, vals) in enumerate(names):
        ini.set("HIERARCHICAL", f"NONHIER_{i}_NAME", nm)
        ini.set("HIERARCHICAL", f"NONHIER_{i}_COUNT", len(vals))
        for j, (v, sec) in enumerate(vals):
            ini.set("HIERARCHICAL", f"NONHIER_{i}_VAL_{j}", v)
            ini.set("HIERARCHICAL", f"NONHIER_{i}_VAL_{j}_SECTION", sec)
    ini.set("DATAFILE", "FILE_COUNT", s.nfiles)
    for k, fname in enumerate(data.names()):
        ini.set("DATAFILE", f"FILE_{k}", fname)
    for k, c in enumerate(concat):
        g = f"LAYER_0_LEVEL_{k}_SECTION"
        ini.set(g, "IMAGE_FORMAT", s.fmt)
        ini.set(g, "IMAGE_CONCAT_FACTOR", s.exps[k])
        ov = lambda v: f"{v / c:g}"  # noqa: E731
        ini.set(g, "OVERLAP_X", ov(s.overlap[0]))
        ini.set(g, "OVERLAP_Y", ov(s.overlap[1]))
        ini.set(g, "MICROMETER_PER_PIXEL_X", f"{float(s.mpp[0]) * c / concat[0]:g}" if k else s.mpp[0])
        ini.set(g, "MICROMETER_PER_PIXEL_Y", f"{float(s.mpp[1]) * c / concat[0]:g}" if k else s.mpp[1])
        ini.set(g, "IMAGE_FILL_COLOR_BGR", FILL_BGR)
        ini.set(g, "DIGITIZER_WIDTH", s.w)
        ini.set(g, "DIGITIZER_HEIGHT", s.h)
        if s.fmt == "JPEG":
            ini.set(g, "IMAGE_QUALITY", 95)
    for sec, kvs in sections.items():
        for key, v in kvs:
            ini.set(sec, key, v)
    if s.quirks:
        ini.set("GENERAL", "SLIDE_COMMENT", "first")
        ini.extra_lines["GENERAL"] = [
            "# written by scripts/vendor_slides/mirax.py",
            "=a value without a key",
            QUIRK_COMMENT_LINE,
            "  PROJECT_NAME  =  generated \u00b5m",
            "",
        ]
        ini.tail = "[GENERAL]\r\nSLIDE_TYPE=brightfield\r\n"
    if s.focus_hier:
        levels_recs.append([])  # the focus level's (empty) record list, after the zoom levels'
    parts = dict(ini=ini, levels=levels_recs, pages0=s.pages0, nonhier=nonhier_recs, data=data, slide_id=slide_id, skip=[], mrxs=s.mrxs)
    if mutate is not None:
        mutate(parts)
    index = parts.get("index") or mw.index_dat(parts["slide_id"], parts["levels"], parts["pages0"], parts["nonhier"],
                                               nonhier_second=1253 if s.nonhier_odd else 0)
    path = mw.write_slide(out_dir, s.name, parts["ini"], index, parts["data"], mrxs=parts["mrxs"], skip=parts["skip"])
    return path, Model(concat, pos, dims, truth, placed, assoc_pixels), parts


def composite(model: Model, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """Level k as OpenSlide paints it from the stored (not yet encoded) images: (rgb, covered)
    over the whole known-pixel canvas at that level."""
    c = model.concat[k]
    H, W = model.truth.shape[0] // c, model.truth.shape[1] // c
    rgb = np.zeros((H, W, 3), np.uint8)
    cov = np.zeros((H, W), bool)
    for x, y, w, h, row, col, img, sx, sy in sorted(model.placed[k], key=lambda t: (t[4], t[5])):
        part = img[sy : sy + h, sx : sx + w]
        ph, pw = min(h, H - y), min(w, W - x)
        rgb[y : y + ph, x : x + pw] = part[:ph, :pw]
        cov[y : y + ph, x : x + pw] = True
    return rgb, cov
