"""3DHISTECH MIRAX slides (``X.mrxs`` + folder ``X/``; files written by ``mirax_writer.py``)
with known pixels, read as OpenSlide 4.0.1's ``openslide-vendor-mirax.c`` and
``openslide-grid.c`` (tilemap) place them:

* The scanner's camera takes photos at camera positions (from the position record, else
  nominal: position p at ((p % px) * (image_w * d - overlap_x), (p / px) * (image_h * d -
  overlap_y)), px = IMAGENUMBER_X / d); each photo is stored as d x d images (d =
  CameraImageDivisionsPerSide) placed edge to edge. At level k (image_concat c = 2^(sum of
  the concat exponents)) an image at (x, y) (multiples of c, level-0 image units) is c x c
  level-0 images downscaled by c; with a position record or a level-0 overlap, it is cut
  into max(1, c / d)^2 sub-tiles, each placed at its camera position / c; otherwise placed
  whole at the nominal position / c. A level-0 position (0, 0) other than position 0 is
  inactive (its images are skipped, at every level).
* Level size: the level-0 images across minus the level-0 overlap after every division
  group but the last, divided by c (integer); downsample = c_k / c_0.
* Tiles are painted rows bottom to top, columns right to left, each over what is not yet
  painted: of overlapping tiles the one with the larger row, then the larger column, shows.
  The parts a generator image loses to a neighbour are tinted, so another order shows.

Every position here is a multiple of the largest concat factor, so every placement is
integral at every level and OpenSlide copies pixels without resampling; the expected level-k
pixels are then the box-filtered known pixels wherever a tile lies.

Slides: ``mirax-simple`` (4x3 images, 3 levels, 2 data files, level 0 in 2 index pages,
label + macro + thumbnail), ``mirax-overlap`` (VIMSLIDE_POSITION_BUFFER, 8 px overlaps,
jitter), ``mirax-divisions`` (2 divisions per side, StitchingIntensityLayer, level 2
sub-tiling its images), ``mirax-sparse`` (a missing image column and an inactive position:
bounds), ``mirax-png`` and ``mirax-bmp`` (lossless: exact pixels). Bad inputs OpenSlide
refuses: ``mirax_bad.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pathlib
import zlib
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from . import mirax_writer as mw
from .common import Generated, Region, downscale, tissue_like

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
    """What OpenSlide will show: per level, the placed tiles as (x, y, w, h, row, col) in level
    pixels, and the images stored."""

    concat: List[int]
    positions: List[Tuple[int, int]]  # level-0 pixels per camera position
    level_dims: List[Tuple[int, int]]
    truth: np.ndarray
    placed: List[list]  # per level: (x, y, w, h, row, col, image, src_x, src_y)


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
    model = Model(concat, pos, dims, truth, placed)
    model.assoc = assoc_pixels  # type: ignore[attr-defined]
    return path, model, parts


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


def _check_level(got: np.ndarray, want: np.ndarray, cov: np.ndarray, exact: bool, what: str) -> None:
    assert (got[..., 3][cov] == 255).all(), f"{what}: holes where tiles lie"
    assert (got[..., 3][~cov] == 0).all(), f"{what}: opaque pixels where no tile lies"
    d = np.abs(got[..., :3][cov].astype(np.int16) - want[cov].astype(np.int16))
    if exact:
        assert d.size == 0 or int(d.max()) == 0, f"{what}: max abs difference {int(d.max())} (lossless)"
    else:
        # JPEG q95 4:4:4: small differences; tiles stacked in another order show the tint
        # (60) on the overlap strips (several % of the pixels).
        mean, p99 = float(d.mean()), float(np.percentile(d, 99))
        assert mean < 2.0 and p99 < 12, f"{what}: mean abs difference {mean:.2f}, 99th percentile {p99}"


def _generated(path: pathlib.Path, s: Spec, model: Model, regions: List[Region], props: Dict[str, str], note: str,
               absent: Sequence[str] = ()) -> Generated:
    exact = s.fmt != "JPEG"
    wants = []
    for k, c in enumerate(model.concat):
        rgb, cov = composite(model, k)
        truth_k = model.truth if c == 1 else downscale(model.truth, c)
        # The generator's own model: what shows is the known pixels (no tint), wherever a
        # tile lies.
        assert (rgb[cov] == truth_k[cov]).all(), f"{s.name} level {k}: the model shows tinted or foreign pixels"
        lw, lh = model.level_dims[k]
        wants.append((truth_k[:lh, :lw], cov[:lh, :lw]))

    def check(osr) -> None:
        for k, (want, cov) in enumerate(wants):
            lw, lh = model.level_dims[k]
            got = np.asarray(osr.read_region((0, 0), k, (lw, lh)))
            _check_level(got, want, cov, exact, f"{s.name} level {k}")
        for name, px_ in getattr(model, "assoc", {}).items():
            img = np.asarray(osr.associated_images[name].convert("RGB"))
            d = np.abs(img.astype(np.int16) - px_.astype(np.int16))
            assert img.shape == px_.shape and float(d.mean()) < 3.0, f"{s.name}: associated {name} differs"
        for key in absent:
            assert key not in osr.properties, f"{s.name}: OpenSlide has {key} = {osr.properties[key]!r}"

    return Generated(
        name=path.name,
        vendor="mirax",
        level_dimensions=model.level_dims,
        regions=regions,
        associated=tuple(s.associated),
        properties=props,
        check=check,
        note=note,
    )


def _standard_regions(model: Model, extra: Sequence[Region] = ()) -> List[Region]:
    out = []
    for k, (w, h) in enumerate(model.level_dims):
        out.append(Region(f"l{k}_all", k, (0, 0), (w, h)))
    w0, h0 = model.level_dims[0]
    last = len(model.level_dims) - 1
    ds = model.concat[last] // model.concat[0]
    lw, lh = model.level_dims[last]
    out += [
        Region("l0_outside", 0, (-30, -20), (90, 70)),
        Region("l0_right_edge", 0, (w0 - 50, h0 // 3), (80, 60)),
        Region(f"l{last}_past_edge", last, ((lw - 20) * ds, (lh - 12) * ds), (40, 30)),
        *extra,
    ]
    return out


def _simple(out_dir: pathlib.Path) -> Generated:
    s = Spec("mirax-simple", nx=4, ny=3, pages0=2, associated=("macro", "label", "thumbnail"), seed=61, quirks=True)
    path, model, _ = build_slide(out_dir, s)
    regions = _standard_regions(model, [
        Region("l0_seam", 0, (100, 100), (60, 60)),
        Region("l1_part", 1, (66, 34), (120, 90)),
    ])
    return _generated(path, s, model, regions, {
        "mirax.GENERAL.SLIDE_ID": hashlib.sha256(s.name.encode()).hexdigest()[:32],
        "openslide.objective-power": "20",
        "openslide.level[0].tile-width": "128",
        "openslide.level[2].tile-height": "128",
        "openslide.background-color": "F2F0F4",
        "mirax.GENERAL.SLIDE_COMMENT": QUIRK_COMMENT_LINE.split("=", 1)[1],
        "mirax.GENERAL.PROJECT_NAME": "generated \u00b5m",
        "mirax.GENERAL.SLIDE_TYPE": "brightfield",
    }, "4x3 images of 128x128 JPEG, no overlap, no position record, 3 levels (concat 1, 2, 4); 2 data files; "
       "level 0 in 2 index pages; label + macro + thumbnail; BOM and GKeyFile details (comment, empty key, spaces, "
       "backslashes, repeated key and group) in Slidedat.ini.", absent=("openslide.bounds-x",))


def _jitter_positions(nx: int, ny: int, w: int, h: int, ov: int, step: int, per_tile: bool, seed: int) -> List[Tuple[int, int]]:
    """Camera positions on a grid of advance (w - ov, h - ov) moved by multiples of ``step``
    (-step, 0, +step): per tile, or per column (x) and per row (y) when not ``per_tile``."""
    rng = np.random.default_rng(seed)
    jx = rng.integers(-1, 2, size=(ny, nx)) * step
    jy = rng.integers(-1, 2, size=(ny, nx)) * step
    if not per_tile:
        jx = np.broadcast_to(jx[0:1, :], (ny, nx))
        jy = np.broadcast_to(jy[:, 0:1], (ny, nx))
    out = []
    for j in range(ny):
        for i in range(nx):
            x = i * (w - ov) + (int(jx[j, i]) if i else 0)
            y = j * (h - ov) + (int(jy[j, i]) if j else 0)
            out.append((x, y))
    return out


def _overlap(out_dir: pathlib.Path, name: str = "mirax-overlap", fmt: str = "JPEG", seed: int = 62, objective="40") -> Generated:
    pos = _jitter_positions(4, 3, 128, 128, 8, 4, per_tile=True, seed=seed)
    s = Spec(name, nx=4, ny=3, overlap=(8, 8), positions=pos, record="raw", fmt=fmt, nfiles=2, seed=seed,
             associated=("label",), objective=objective, focus_hier=True)
    path, model, _ = build_slide(out_dir, s)
    regions = _standard_regions(model, [
        Region("l0_corner", 0, (100, 100), (48, 48)),
        Region("l0_row_seam", 0, (60, 110), (200, 30)),
        Region("l1_corner", 1, (100, 100), (40, 40)),
        Region("l1_part", 1, (40, 20), (130, 100)),
    ])
    props = {"openslide.mpp-x": "0.24199999999999999"}
    if objective == "40":
        props["openslide.objective-power"] = "40"
    note = (f"4x3 images of 128x128 {fmt}, VIMSLIDE_POSITION_BUFFER: 8 px overlaps, positions moved by -4/0/+4 "
            "per image; 3 levels (sub-tiled: one image per camera position); hidden overlaps tinted; label; a "
            "second hierarchy (Microscope focus level) after the zoom levels.")
    absent = ["openslide.level[0].tile-width"] + ([] if objective == "40" else ["openslide.objective-power"])
    return _generated(path, s, model, regions, props, note, absent=absent)


def _divisions(out_dir: pathlib.Path) -> Generated:
    # 2x2 camera positions, each photo 2x2 images of 64 px; level 2 (concat 4) images hold
    # 2x2 photos, cut into 2x2 sub-tiles of 32 px.
    w = 64
    pos = _jitter_positions(2, 2, 2 * w, 2 * w, 8, 4, per_tile=False, seed=63)
    s = Spec("mirax-divisions", nx=4, ny=4, w=w, h=w, d=2, overlap=(8, 8), positions=pos, record="zlib", nfiles=1,
             associated=("macro", "thumbnail"), seed=63, other_nonhier_first=True, bom=False,
             shuffle0=True, nonhier_odd=True)
    path, model, _ = build_slide(out_dir, s)
    regions = _standard_regions(model, [
        Region("l0_photo_seam", 0, (100, 100), (60, 60)),
        Region("l1_seam", 1, (50, 50), (30, 30)),
        Region("l2_part", 2, (8, 8), (40, 40)),
    ])
    return _generated(path, s, model, regions, {"mirax.GENERAL.CameraImageDivisionsPerSide": "2"},
                      "CameraImageDivisionsPerSide 2: 2x2 camera positions of 2x2 images (64 px JPEG), "
                      "StitchingIntensityLayer (zlib) positions, 8 px overlaps moved per row/column; 3 levels, level 2 "
                      "sub-tiles its images; another nonhier layer before the scan data layer; level-0 records out of order; "
                      "nonhier pages with 1253 as their second value; 1 data file.")


def _divisions4(out_dir: pathlib.Path) -> Generated:
    # 2x2 camera positions, each photo 4x4 images of 32 px; level 1 (concat 2) images hold a
    # quarter of a photo (2 images per position side: the overlap is shared out), level 2 a
    # photo, level 3 2x2 photos cut into 16 px sub-tiles.
    w = 32
    pos = _jitter_positions(2, 2, 4 * w, 4 * w, 8, 8, per_tile=False, seed=67)
    s = Spec("mirax-divisions4", nx=8, ny=8, w=w, h=w, d=4, exps=(0, 1, 1, 1), overlap=(8, 8), positions=pos,
             record="raw", nfiles=3, seed=67, associated=("label", "thumbnail"))
    path, model, _ = build_slide(out_dir, s)
    regions = _standard_regions(model, [
        Region("l0_photo_seam", 0, (96, 96), (64, 64)),
        Region("l1_part", 1, (40, 40), (60, 60)),
        Region("l2_part", 2, (20, 24), (40, 30)),
    ])
    return _generated(path, s, model, regions, {"mirax.GENERAL.CameraImageDivisionsPerSide": "4"},
                      "CameraImageDivisionsPerSide 4: 2x2 camera positions of 4x4 images (32 px JPEG), position buffer, "
                      "8 px overlaps moved by -8/0/+8 per row/column; 4 levels (concat 1, 2, 4, 8: the last sub-tiles its "
                      "images); 3 data files; label + thumbnail.")


def _sparse(out_dir: pathlib.Path) -> Generated:
    nx, ny = 5, 3
    pos = [(i * 120, j * 120) for j in range(ny) for i in range(nx)]
    inactive = {1 * nx + 2}  # position (2, 1): (0, 0) in the record
    s = Spec("mirax-sparse", nx=nx, ny=ny, overlap=(8, 8), positions=pos, record="raw", nfiles=2,
             dropped={(0, j) for j in range(ny)}, inactive=inactive, seed=64, objective=None, duplicate=(3, 1))
    path, model, _ = build_slide(out_dir, s)
    regions = _standard_regions(model, [
        Region("l0_hole", 0, (200, 100), (160, 180)),
        Region("l0_left", 0, (80, 0), (100, 100)),
        Region("l1_hole", 1, (100, 50), (80, 90)),
    ])
    return _generated(path, s, model, regions, {"openslide.bounds-x": "120", "openslide.bounds-y": "0"},
                      "5x3 images of 128x128 JPEG on a 120 px grid (position buffer), image column 0 not stored (bounds), "
                      "camera position (2, 1) inactive ((0, 0) in the record; its stored images green); image (3, 1) "
                      "recorded twice (a green decoy first); no OBJECTIVE_MAGNIFICATION.", absent=("openslide.objective-power",))


def _bmp(out_dir: pathlib.Path) -> Generated:
    s = Spec("mirax-bmp", nx=3, ny=2, w=96, h=80, exps=(0, 1), fmt="BMP24", nfiles=2, seed=65, objective="",
             associated=("label",), mrxs=b"")
    path, model, _ = build_slide(out_dir, s)
    regions = _standard_regions(model, [Region("l0_seam", 0, (80, 60), (40, 40))])
    return _generated(path, s, model, regions, {"openslide.level[0].tile-width": "96"},
                      "3x2 images of 96x80 BMP24 (lossless), no overlap, 2 levels, 2 data files; empty "
                      "OBJECTIVE_MAGNIFICATION; label; empty .mrxs file.", absent=("openslide.objective-power",))


def build(out_dir: pathlib.Path) -> List[Generated]:
    from . import mirax_bad

    out = [
        _simple(out_dir),
        _overlap(out_dir),
        _divisions(out_dir),
        _divisions4(out_dir),
        _sparse(out_dir),
        _overlap(out_dir, "mirax-png", fmt="PNG", seed=66, objective="20.0"),
        _bmp(out_dir),
    ]
    mirax_bad.build(out_dir)
    return out
