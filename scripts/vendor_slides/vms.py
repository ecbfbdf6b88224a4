"""Hamamatsu VMS and VMU slides (issue 31 item 5): a key file (``.vms``, INI text) naming a grid of JPEG
image files, a map file, an optimisation file and a macro image, all in one folder.

A VMU slide (``.vmu``) names one NGR image file (raw 16-bit RGB in columns) and an NGR map.

Each image file is one JPEG whose restart intervals are the tiles, assembled from tiles encoded
one by one with the same tables (``hamamatsu.encode_level``, as the NDPI strips); the known
pixels are the tiles as Pillow decodes them. 4:2:2 and 4:4:4 only: OpenSlide 4.0.1 cannot read
multi-row 4:2:0 restart-interval JPEGs (see ``hamamatsu.build``). Layout facts follow OpenSlide
4.0.1's ``openslide-vendor-hamamatsu.c`` (see ``core/src/format/hamamatsu/vms.rs``).

    python -m vendor_slides.vms OUT_DIR      (from scripts/)

writes the slides and OpenSlide's reference output (``OUT_DIR/reference-multifile/<name>/``)
without the other vendors' slides: ``core/tests/vms.rs`` runs it at test time.
"""

from __future__ import annotations

import pathlib
import struct
import sys
from typing import Dict, List, Sequence

import numpy as np

from .common import Generated, Region, assert_close, tissue_like
from .hamamatsu import _jpeg_tile, encode_level


def _with_comment(jpg: bytes, text: bytes) -> bytes:
    """``jpg`` with a COM segment right after SOI."""
    return jpg[:2] + b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text + jpg[2:]


def _opt_records(starts: Sequence[int], tiles_across: int) -> bytes:
    """Optimisation-file records of one image file: for each tile row, 40 bytes whose first 8
    are the row's first tile start (little-endian)."""
    rows = len(starts) // tiles_across
    return b"".join(struct.pack("<q", starts[r * tiles_across]) + b"\0" * 32 for r in range(rows))


def write_vms(folder: pathlib.Path, stem: str, base: np.ndarray, col_w: Sequence[int], row_h: Sequence[int], tile_w: int,
              subsampling: int, mapimg: np.ndarray, map_tile_w: int, keys: Dict[str, str], opt: bool, macro: bool,
              bom: bool = False, three_dims: bool = False) -> np.ndarray:
    """Write ``folder/stem.vms`` and its files; return the level-0 known pixels (transparent
    where OpenSlide paints no tile: alpha 0)."""
    folder.mkdir(parents=True, exist_ok=True)
    mcu = 8
    known = np.zeros(base.shape[:2] + (4,), np.uint8)
    lines = ["[Virtual Microscope Specimen]", "NoLayers=1", f"NoJpegColumns={len(col_w)}", f"NoJpegRows={len(row_h)}"]
    opt_bytes = b""
    y = 0
    for r, h in enumerate(row_h):
        x = 0
        for c, w in enumerate(col_w):
            strip, starts, k = encode_level(np.ascontiguousarray(base[y:y + h, x:x + w]), tile_w, mcu, subsampling, 85)
            if r == 0 and c == 0:
                commented = _with_comment(strip, b"slidestream VMS test\0ignored after NUL")
                starts = [s + len(commented) - len(strip) for s in starts]
                strip = commented
            name = f"{stem}_{c}_{r}.jpg" if (r, c) != (0, 0) else f"{stem}.jpg"
            (folder / name).write_bytes(strip)
            key = "ImageFile" if (r, c) == (0, 0) else (f"ImageFile(0,{c},{r})" if three_dims else f"ImageFile({c},{r})")
            lines.append(f"{key}={name}")
            opt_bytes += _opt_records(starts, w // tile_w)
            kh, kw = k.shape[:2]
            known[y:y + kh, x:x + kw, :3] = k
            known[y:y + kh, x:x + kw, 3] = 255
            x += w
        y += h
    if three_dims:
        lines.append("ImageFile(1,0,0)=missing_layer_1.jpg")  # layer 1: skipped
    mstrip, _, _ = encode_level(mapimg, map_tile_w, 8, 0, 85)
    (folder / f"{stem}_map.jpg").write_bytes(mstrip)
    lines.append(f"MapFile={stem}_map.jpg")
    if opt:
        (folder / f"{stem}.opt").write_bytes(opt_bytes)
        lines.append(f"OptimisationFile={stem}.opt")
    if macro:
        (folder / f"{stem}_macro.jpg").write_bytes(_jpeg_tile(tissue_like(200, 80, seed=31), 2, 90))
        lines.append(f"MacroImage={stem}_macro.jpg")
    lines += [f"{k}={v}" for k, v in keys.items()]
    text = "\r\n".join(lines) + "\r\n"
    (folder / f"{stem}.vms").write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return known


def _ngr(path: pathlib.Path, px: np.ndarray, column_width: int, pad: int = 0) -> None:
    """An NGR file: ``GN``, width, height and column width (little-endian int32 at 4, 8, 12),
    the pixel-data offset at 24, then ``px`` (16-bit RGB) column after column."""
    h, w = px.shape[:2]
    assert w % column_width == 0
    head = b"GN\0\0" + struct.pack("<3i", w, h, column_width) + b"\0" * 8 + struct.pack("<i", 28 + pad) + b"\0" * pad
    cols = [np.ascontiguousarray(px[:, c:c + column_width]).astype("<u2").tobytes() for c in range(0, w, column_width)]
    path.write_bytes(head + b"".join(cols))


def write_vmu(folder: pathlib.Path, stem: str, base: np.ndarray, column_width: int, mapimg: np.ndarray, map_column_width: int,
              keys: Dict[str, str]) -> np.ndarray:
    """Write ``folder/stem.vmu``, its NGR image and map files and a macro; return the level-0
    known pixels (bits 4..12 of each 16-bit sample, as OpenSlide shows them)."""
    folder.mkdir(parents=True, exist_ok=True)
    _ngr(folder / f"{stem}.ngr", base, column_width, pad=4)
    _ngr(folder / f"{stem}_map.ngr", mapimg, map_column_width)
    (folder / f"{stem}_macro.jpg").write_bytes(_jpeg_tile(tissue_like(200, 80, seed=35), 2, 90))
    lines = ["[Uncompressed Virtual Microscope Specimen]", "NoLayers=1", f"ImageFile={stem}.ngr", f"MapFile={stem}_map.ngr",
             f"MacroImage={stem}_macro.jpg", "BitsPerPixel=36", "PixelOrder=RGB"] + [f"{k}={v}" for k, v in keys.items()]
    (folder / f"{stem}.vmu").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    known = np.full(base.shape[:2] + (4,), 255, np.uint8)
    known[..., :3] = (base >> 4) & 0xFF
    return known


def _check(known: np.ndarray):
    def check(osr) -> None:
        h, w = known.shape[:2]
        got = np.asarray(osr.read_region((0, 0), 0, (w, h)))
        assert_close(got, known, 0, "level 0 (RGBA, unpainted pixels transparent)")
    return check


def build(out: pathlib.Path) -> List[Generated]:
    """The generated VMS and VMU slides (each a folder opened by its key file)."""
    slides = []
    # 1. 2x2 grid, 4:2:2 (MCU 16x8), 64x8 tiles (restart interval 4 MCUs); the last column
    #    narrower (3 tiles across), the last row with a partial MCU row (its pixels unpainted);
    #    a map whose width equals level 0's 1/4 (it replaces that DCT-scaled level); the
    #    optimisation file; a macro; a COM comment in image file 0.
    base = tissue_like(448, 220, seed=31)
    mapimg = tissue_like(112, 55, seed=32)
    keys = {"PhysicalWidth": "112000", "PhysicalHeight": "55000", "SourceLens": "20", "XOffsetFromSlideCentre": "-1234",
            "YOffsetFromSlideCentre": "5678", "AuthCode": "ABC=DEF", "Reference": "slidestream test"}
    name = "vms-2x2"
    known = write_vms(out / name, "slide", base, [256, 192], [120, 100], 64, 1, mapimg, 56, keys, opt=True, macro=True)
    slides.append(Generated(
        name=name, open=f"{name}/slide.vms", vendor="hamamatsu",
        level_dimensions=[(448, 220), (224, 110), (112, 55), (56, 27), (28, 13), (14, 6)],
        associated=["macro"],
        properties={"openslide.objective-power": "20", "openslide.mpp-x": "0.25", "openslide.mpp-y": "0.25",
                    "openslide.comment": "slidestream VMS test", "hamamatsu.AuthCode": "ABC=DEF"},
        regions=[Region("all_l0", 0, (0, 0), (448, 220)), Region("corner_l0", 0, (200, 90), (120, 60)),
                 Region("past_edge_l0", 0, (400, 200), (100, 40)), Region("l1", 1, (0, 0), (224, 110)),
                 Region("l1_cross", 1, (150, 50), (100, 80)), Region("l2_map", 2, (0, 0), (112, 55)),
                 Region("l3", 3, (0, 0), (56, 27)), Region("l5", 5, (0, 0), (14, 6))],
        check=_check(known),
        note="2x2 image files, 4:2:2, 64x8 tiles, narrower last column, partial last MCU row, map replacing 1/4, optimisation file, macro, comment",
    ))
    # 2. 3x1 grid, 4:4:4 (MCU 8x8), 32x8 tiles; no optimisation file, no macro; a UTF-8 BOM,
    #    3-number ImageFile keys and a layer-1 file that is never opened; no physical size.
    base = tissue_like(288, 64, seed=33)
    mapimg = tissue_like(72, 16, seed=34)
    name = "vms-3x1-444"
    known = write_vms(out / name, "s", base, [96, 96, 96], [64], 32, 0, mapimg, 24, {"SourceLens": "40"}, opt=False, macro=False,
                      bom=True, three_dims=True)
    slides.append(Generated(
        name=name, open=f"{name}/s.vms", vendor="hamamatsu",
        level_dimensions=[(288, 64), (144, 32), (72, 16), (36, 8), (18, 4), (9, 2)],
        properties={"openslide.objective-power": "40"},
        regions=[Region("all_l0", 0, (0, 0), (288, 64)), Region("cross_l0", 0, (80, 10), (40, 40)),
                 Region("l1", 1, (0, 0), (144, 32)), Region("l2_map", 2, (0, 0), (72, 16)), Region("l5", 5, (0, 0), (9, 2))],
        check=_check(known),
        note="3x1 image files, 4:4:4, 32x8 tiles, BOM, ImageFile(z,x,y) keys, layer 1 skipped, no optimisation file or macro",
    ))
    # 3. VMU: a 320x200 NGR image in 64-pixel columns (OpenSlide refuses a width that is not a
    #    multiple of the column width), 16-bit samples over the whole range (values >= 4096
    #    show OpenSlide's 8-bit wrap), a 64x50 NGR map in 32-pixel columns, a macro; the pixel
    #    data 4 bytes after the header. Level-1 regions start at multiples of its downsample
    #    (4.5): slidestream does not resample fractional level offsets as OpenSlide does.
    rng = np.random.default_rng(36)
    base = rng.integers(0, 1 << 16, size=(200, 320, 3), dtype=np.uint16)
    base[:100] = (tissue_like(320, 100, seed=36).astype(np.uint16) << 4) | rng.integers(0, 16, size=(100, 320, 3), dtype=np.uint16)
    mapimg = rng.integers(0, 1 << 12, size=(50, 64, 3), dtype=np.uint16)
    name = "vmu-320x200"
    known = write_vmu(out / name, "slide", base, 64, mapimg, 32, {"PhysicalWidth": "150000", "PhysicalHeight": "100000", "SourceLens": "20"})
    slides.append(Generated(
        name=name, open=f"{name}/slide.vmu", vendor="hamamatsu",
        level_dimensions=[(320, 200), (64, 50)],
        associated=["macro"],
        properties={"openslide.objective-power": "20", "openslide.mpp-x": "0.46875", "openslide.mpp-y": "0.5",
                    "hamamatsu.BitsPerPixel": "36"},
        regions=[Region("all_l0", 0, (0, 0), (320, 200)), Region("cross_columns_l0", 0, (50, 40), (100, 90)),
                 Region("past_edge_l0", 0, (300, 180), (60, 50)), Region("before_origin_l0", 0, (-10, -20), (30, 40)),
                 Region("map_l1", 1, (0, 0), (64, 50)), Region("map_cross_l1", 1, (18, 27), (60, 40))],
        check=_check(known),
        note="VMU: NGR image (64-pixel columns, partial last row band) and NGR map, macro, full-range 16-bit samples",
    ))
    return slides


def main(argv: List[str]) -> int:
    from .common import check_with_openslide, write_reference

    out = pathlib.Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for slide in build(out):
        osr = check_with_openslide(out / slide.open_path, slide)
        write_reference(osr, slide, out / slide.reference_kind / slide.name)
        osr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
