"""3DHISTECH MIRAX slides (``X.mrxs`` + folder ``X/``) with known pixels, checked on OpenSlide
4.0.1 (``openslide-vendor-mirax.c``, ``openslide-grid.c``). The layout model is in
``mirax_layout.py``, the file writers in ``mirax_writer.py``, the bad inputs in
``mirax_bad.py`` (written under ``OUT_DIR/bad-mirax/``).

Slides: ``mirax-simple`` (4x3 images, 3 levels, 2 data files, level 0 in 2 index pages,
label + macro + thumbnail, GKeyFile details in Slidedat.ini), ``mirax-overlap``
(VIMSLIDE_POSITION_BUFFER, 8 px overlaps, jitter, a focus hierarchy), ``mirax-divisions`` (2
divisions per side, StitchingIntensityLayer, level 2 sub-tiling its images),
``mirax-divisions4`` (4 divisions per side, 4 levels), ``mirax-sparse`` (a missing image
column, an inactive position, a duplicate record: bounds), ``mirax-png`` and ``mirax-bmp``
(lossless: exact pixels). Each ``check`` reads every level whole from OpenSlide and compares
it with the box-filtered known pixels where tiles lie (exact for PNG/BMP, JPEG q95 4:4:4
within a small mean and 99th percentile, which the tinted overlaps of a wrong paint order
exceed) and transparent elsewhere.
"""

from __future__ import annotations

import hashlib
import pathlib
from typing import Dict, List, Sequence, Tuple

import numpy as np

from .common import Generated, Region, downscale
from .mirax_layout import QUIRK_COMMENT_LINE, Model, Spec, build_slide, composite

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
        for name, px_ in model.assoc.items():
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
