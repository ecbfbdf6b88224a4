"""Roche / Ventana slides: BIF (overlapping level-0 tiles stitched by the ``EncodeInfo`` joint
data, several AOIs) and the older "Ventana TIFF" (no EncodeInfo: a plain tiled pyramid).

Layout as OpenSlide 4.0.1's ``openslide-vendor-ventana.c`` reads it:

* IFD 0 carries the XMP packet (tag 700) whose root is ``iScan`` (or ``Metadata/iScan``); its
  attributes become ``ventana.*`` properties (Magnification → objective power, ScanRes → mpp).
* Pyramid IFDs have an ImageDescription with ``level=N mag=M``; downsample = mag0 / mag.
* BIF: the level-0 IFD's XMP is ``EncodeInfo``: ``AoiOrigin/*`` (OriginX/OriginY, in multiples
  of the tile size: the AOI's first grid column / row) and ``SlideStitchInfo/ImageInfo`` per
  AOI (tile Width/Height, NumCols/NumRows, Pos-X/Pos-Y, ``TileJointInfo`` with the overlaps).
  Tiles advance by tile size minus the confidence-weighted mean overlap; the reduced levels
  store each level-0 tile downscaled into a sub-tile of a regular mosaic, which OpenSlide
  places at the level-0 tile's position scaled down.
* ``Label_Image`` → macro, ``Thumbnail`` → thumbnail.

Every position here is an integer at every level (advances and AOI positions divisible by the
downsamples), so OpenSlide copies pixels without resampling. The parts of a tile that a tile
painted before it hides (its right and bottom overlaps, OpenSlide painting bottom-right first
with cairo's SATURATE operator) are tinted, so a reader that stacks tiles in another order
shows the tint.
"""

from __future__ import annotations

import io
import pathlib
from typing import Dict, List, Tuple

import numpy as np
import tifffile
from PIL import Image

from .common import Generated, Region, downscale, tissue_like

TW = TH = 128
ADV_X, ADV_Y = 112, 116  # tile advance: tile size minus the mean overlap
MAGS = (40, 20, 10)  # levels 0, 1, 2: downsamples 1, 2, 4
SCAN_RES = "0.25"
TINT = np.array([60, -60, 60], np.int16)


def _jpeg(tile: np.ndarray, quality: int = 92) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(tile).save(buf, "JPEG", quality=quality, subsampling=2)  # 4:2:0 YCbCr
    return buf.getvalue()


def _xmp(xml: str) -> Tuple[int, int, int, bytes, bool]:
    data = xml.encode()
    return (700, 1, len(data), data, True)  # XMLPacket, BYTE


def _iscan(root_metadata: bool) -> str:
    iscan = (
        f'<iScan Magnification="{MAGS[0]}" ScanRes="{SCAN_RES}" Z-layers="1" ScannerModel="VENTANA DP 200" '
        'UnitNumber="DP200-0042" BuildVersion="1.1.0.15854" SlideAnnotation="" ShowLabel="1" '
        'FocusMode="Auto" ScanMode="Regular" BaseName="generated" LabelBoundary="0" />'
    )
    if root_metadata:
        return f'<?xml version="1.0" encoding="utf-8"?><Metadata><Label /> {iscan}</Metadata>'
    return f'<?xml version="1.0" encoding="utf-8"?>{iscan}'


# The AOIs: first grid column and row, tiles across and down, Pos-X, Pos-Y (Pos-Y: from the
# bottom of the AOI up to a line below all AOIs).
AOIS = [
    dict(col=0, row=0, across=4, down=3, pos_x=0, pos_y=0),
    dict(col=6, row=1, across=2, down=2, pos_x=6 * ADV_X + 40, pos_y=60),
]
GRID_COLS, GRID_ROWS = 8, 3  # the level-0 TIFF's tile grid


def _areas() -> List[Dict[str, int]]:
    """Each AOI with its level-0 top-left ``x``, ``y`` as OpenSlide computes them."""
    heights = [(a["down"] - 1) * ADV_Y + TH for a in AOIS]
    top = max([0] + [a["pos_y"] + h for a, h in zip(AOIS, heights)])
    return [dict(a, x=a["pos_x"], y=top - a["pos_y"] - h) for a, h in zip(AOIS, heights)]


def _joint_pairs(a: Dict[str, int]) -> List[Tuple[str, int, int]]:
    """(direction, Tile1, Tile2) of one AOI's joints: tiles numbered from 1, rows from the
    bottom, every other row right to left; UP joins a tile (Tile1) to the one above it."""
    across, down = a["across"], a["down"]

    def number(col: int, row: int) -> int:  # grid (col, row), row 0 at the top
        r = down - 1 - row
        c = across - 1 - col if r % 2 else col
        return r * across + c + 1

    out = []
    for row in range(down):
        for col in range(across):
            if col + 1 < across:
                out.append(("RIGHT", number(col, row), number(col + 1, row)))
            if row + 1 < down:
                out.append(("UP", number(col, row + 1), number(col, row)))
    return out


def _joints(areas: List[Dict[str, int]]) -> List[str]:
    """The TileJointInfo elements of every AOI. Overlaps vary per joint (mean - 2, mean + 2
    alternately, the mean itself for the last of an odd count) so that the
    confidence-weighted mean over all AOIs is exactly tile size minus advance; the first RIGHT
    joint has confidence 0 and a wild overlap, which must not count."""
    pairs = [_joint_pairs(a) for a in areas]
    out = []
    for direction, mean in (("RIGHT", TW - ADV_X), ("UP", TH - ADV_Y)):
        special = lambda ai, d, t1: ai == 0 and d == "RIGHT" and t1 == 1  # noqa: E731
        n = sum(1 for ai, p in enumerate(pairs) for j in p if j[0] == direction and not special(ai, j[0], j[1]))
        vals = [mean + (2 if i % 2 else -2) for i in range(n)]
        if n % 2:
            vals[-1] = mean
        it = iter(vals)
        for ai, p in enumerate(pairs):
            for di, t1, t2 in p:
                if di != direction:
                    continue
                v, conf = (100, 0) if special(ai, di, t1) else (next(it), 70)
                ox, oy = (v, 1) if direction == "RIGHT" else (-1, v)
                out.append((ai, f'<TileJointInfo FlagJoined="1" Confidence="{conf}" Direction="{direction}" '
                            f'Tile1="{t1}" Tile2="{t2}" OverlapX="{ox}" OverlapY="{oy}" />'))
    return ["".join(x for ai2, x in out if ai2 == ai) for ai in range(len(areas))]


def _encode_info(areas: List[Dict[str, int]]) -> str:
    origins = "".join(f'<AOI{i} OriginX="{a["col"] * TW}" OriginY="{a["row"] * TH}" />' for i, a in enumerate(areas))
    joints = _joints(areas)
    infos = "".join(
        f'<ImageInfo AOIScanned="1" AOIIndex="{i}" Width="{TW}" Height="{TH}" NumRows="{a["down"]}" '
        f'NumCols="{a["across"]}" Pos-X="{a["pos_x"]}" Pos-Y="{a["pos_y"]}.0">{joints[i]}</ImageInfo>'
        for i, a in enumerate(areas)
    )
    # An AOI that was not scanned: skipped, and its origin entry with it.
    skipped = '<ImageInfo AOIScanned="0" AOIIndex="9" Width="1" Height="1" NumRows="1" NumCols="1" Pos-X="0" Pos-Y="0" />'
    return (
        '<?xml version="1.0" encoding="utf-8"?><EncodeInfo Ver="2"><SlideInfo><Label /></SlideInfo>'
        f'<AoiOrigin>{origins}<AOI9 OriginX="0" OriginY="0" /></AoiOrigin>'
        f"<SlideStitchInfo>{infos}{skipped}</SlideStitchInfo></EncodeInfo>"
    )


def _patch_jpeg_tags(path: pathlib.Path, pages) -> None:
    """Set Compression = 7 (JPEG) and Photometric = 6 (YCbCr) in place on the IFDs ``pages``,
    written uncompressed around pre-encoded JPEG tiles."""
    patches = []
    with tifffile.TiffFile(path) as tf:
        for i in pages:
            tags = tf.pages[i].tags
            patches += [(tags["Compression"].valueoffset, 7), (tags["PhotometricInterpretation"].valueoffset, 6)]
    with open(path, "r+b") as f:
        for off, v in patches:
            f.seek(off)
            f.write(int(v).to_bytes(2, "little"))


def _check_mean(got: np.ndarray, want: np.ndarray, what: str, loose: bool) -> None:
    """JPEG pixels near the known ones: small mean and 99th-percentile differences (looser
    for 32-pixel sub-tiles, where the 4:2:0 chroma of the tinted strips bleeds over). Tiles
    stacked in the wrong order show the tint (60) on about 14 % of the pixels."""
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))
    mean, p99 = float(d.mean()), float(np.percentile(d, 99))
    ok = (mean < 5.0 and p99 < 40) if loose else (mean < 3.0 and p99 < 24)
    assert ok, f"{what}: mean abs difference {mean:.2f}, 99th percentile {p99}"


def _bif(out_dir: pathlib.Path) -> Generated:
    areas = _areas()
    width0 = max(a["x"] + (a["across"] - 1) * ADV_X + TW for a in areas)
    height0 = max(a["y"] + (a["down"] - 1) * ADV_Y + TH for a in areas)
    truth = tissue_like(width0 + TW, height0 + TH, seed=15)
    # Level-0 tiles of the TIFF grid: AOI tiles are crops of the truth at their positions with
    # their hidden overlaps tinted; grid cells outside the AOIs hold a colour never shown.
    tiles: Dict[Tuple[int, int], np.ndarray] = {}
    covered = np.zeros((height0, width0), bool)
    for a in areas:
        for j in range(a["down"]):
            for i in range(a["across"]):
                x, y = a["x"] + i * ADV_X, a["y"] + j * ADV_Y
                t = truth[y : y + TH, x : x + TW].astype(np.int16)
                if i + 1 < a["across"]:
                    t[:, ADV_X:] += TINT
                if j + 1 < a["down"]:
                    t[ADV_Y:, :] += TINT
                tiles[(a["col"] + i, a["row"] + j)] = np.clip(t, 0, 255).astype(np.uint8)
                covered[y : y + TH, x : x + TW] = True
    filler = np.full((TH, TW, 3), (20, 200, 40), np.uint8)
    levels = []
    for k, mag in enumerate(MAGS):
        d = MAGS[0] // mag
        sw, sh = TW // d, TH // d
        w, h = GRID_COLS * sw, GRID_ROWS * sh  # the mosaic of sub-tiles
        mosaic = np.zeros((-(-h // TH) * TH, -(-w // TW) * TW, 3), np.uint8)
        for r in range(GRID_ROWS):
            for c in range(GRID_COLS):
                src = tiles.get((c, r), filler)
                mosaic[r * sh : (r + 1) * sh, c * sw : (c + 1) * sw] = src if d == 1 else downscale(src, d)
        levels.append((mag, w, h, mosaic))
    path = out_dir / "ventana-bif-overlaps.bif"
    label = tissue_like(180, 120, seed=16)
    thumb = downscale(truth[:height0, :width0], 8)
    with tifffile.TiffWriter(path) as tw:
        tw.write(label, description="Label_Image", photometric="rgb", compression="zlib", rowsperstrip=40,
                 extratags=[_xmp(_iscan(root_metadata=False))], metadata=None)
        tw.write(thumb, description="Thumbnail", photometric="rgb", compression="zlib", metadata=None)
        for k, (mag, w, h, mosaic) in enumerate(levels):
            def chunks(m=mosaic, w=w, h=h):
                for ty in range(0, h, TH):
                    for tx in range(0, w, TW):
                        yield _jpeg(m[ty : ty + TH, tx : tx + TW])
            extratags = [_xmp(_encode_info(areas))] if k == 0 else []
            # tifffile needs imagecodecs to write JPEG; the tiles are encoded here and written as
            # they are, and the Compression and Photometric tags patched below.
            tw.write(chunks(), shape=(h, w, 3), dtype=np.uint8, tile=(TH, TW), photometric="rgb",
                     description=f"level={k} mag={mag} quality=92", extratags=extratags, metadata=None)
    _patch_jpeg_tags(path, pages=range(2, 2 + len(levels)))

    def check(osr) -> None:
        for k, mag in enumerate(MAGS):
            d = MAGS[0] // mag
            lw, lh = osr.level_dimensions[k]
            got = np.asarray(osr.read_region((0, 0), k, (lw, lh)))
            cov = covered if d == 1 else downscale(covered[..., None].astype(np.uint8) * 255, d)[..., 0] == 255
            cov = cov[:lh, :lw]
            assert (got[..., 3][~cov] == 0).all() or d > 1, f"level {k}: pixels outside the AOIs are not transparent"
            want = truth[:height0, :width0] if d == 1 else downscale(truth[: lh * d, : lw * d], d)
            _check_mean(got[..., :3][cov], want[:lh, :lw][cov], f"BIF level {k} inside the AOIs", loose=d >= 4)
            assert (got[..., 3][cov] == 255).all(), f"level {k}: holes inside the AOIs"
        m = np.asarray(osr.associated_images["macro"].convert("RGB"))
        assert (m == label).all(), "macro differs from the Label_Image written"

    x1 = areas[1]["x"]
    regions = [
        Region("l0_overlap_corner", 0, (ADV_X - 20, ADV_Y - 20), (64, 64)),
        Region("l0_aoi0", 0, (0, 0), (464, 360)),
        Region("l0_between_aois", 0, (400, 20), (400, 200)),
        Region("l0_aoi1", 0, (x1 - 10, 40), (260, 280)),
        Region("l0_outside", 0, (-30, -30), (80, 80)),
        Region("l0_all", 0, (0, 0), (width0, height0)),
        Region("l1_all", 1, (0, 0), (width0 // 2, height0 // 2)),
        Region("l1_unaligned", 1, (226, 118), (120, 90)),
        Region("l2_all", 2, (0, 0), (width0 // 4, height0 // 4)),
        Region("l2_edge", 2, (900, 300), (40, 40)),
    ]
    return Generated(
        name=path.name,
        vendor="ventana",
        level_dimensions=[(width0 // (MAGS[0] // m), height0 // (MAGS[0] // m)) for m in MAGS],
        regions=regions,
        associated=("macro", "thumbnail"),
        properties={
            "ventana.Magnification": str(MAGS[0]),
            "openslide.objective-power": str(MAGS[0]),
            "openslide.mpp-x": SCAN_RES,
            "openslide.region[1].x": str(6 * ADV_X),
        },
        check=check,
        note="BIF: 2 scanned AOIs (4x3 and 2x2 tiles of 128x128, JPEG 4:2:0) + 1 skipped, overlaps 14/18 x and "
        "9/15 y (advance 112 x 116), 3 levels, hidden overlaps tinted; macro (Label_Image) + thumbnail.",
    )


def _ventana_tiff(out_dir: pathlib.Path) -> Generated:
    """The older layout: no EncodeInfo, so levels are plain tiled images (JPEG, as the
    scanners write them), the iScan element under a Metadata root."""
    w0, h0 = 600, 420
    truth = tissue_like(w0, h0, seed=17)
    path = out_dir / "ventana-tiff.tif"
    mags = (20, 10, 5)
    with tifffile.TiffWriter(path) as tw:
        tw.write(tissue_like(150, 100, seed=18), description="Label Image", photometric="rgb", compression="zlib",
                 extratags=[_xmp(_iscan(root_metadata=True))], metadata=None)
        for k, mag in enumerate(mags):
            img = truth if k == 0 else downscale(truth, mags[0] // mag)
            h, w = img.shape[:2]
            pad = np.zeros((-(-h // 128) * 128, -(-w // 128) * 128, 3), np.uint8)
            pad[:h, :w] = img

            def chunks(m=pad, w=w, h=h):
                for ty in range(0, h, 128):
                    for tx in range(0, w, 128):
                        yield _jpeg(m[ty : ty + 128, tx : tx + 128], quality=95)

            tw.write(chunks(), shape=(h, w, 3), dtype=np.uint8, tile=(128, 128), photometric="rgb",
                     description=f"level={k} mag={mag} quality=95", metadata=None)
        tw.write(downscale(truth, 6), description="Thumbnail", photometric="rgb", compression="zlib", metadata=None)
    _patch_jpeg_tags(path, pages=range(1, 1 + len(mags)))

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (w0, h0)))
        assert (got[..., 3] == 255).all(), "Ventana TIFF level 0 has holes"
        _check_mean(got[..., :3], truth, "Ventana TIFF level 0", loose=False)

    return Generated(
        name=path.name,
        vendor="ventana",
        level_dimensions=[(600, 420), (300, 210), (150, 105)],
        regions=[
            Region("l0_all", 0, (0, 0), (600, 420)),
            Region("l0_edge", 0, (550, 400), (100, 50)),
            Region("l1_part", 1, (64, 66), (200, 100)),
            Region("l2_all", 2, (-8, -8), (160, 120)),
        ],
        associated=("macro", "thumbnail"),
        properties={"openslide.objective-power": "40", "ventana.ScannerModel": "VENTANA DP 200"},
        check=check,
        note="Ventana TIFF: no EncodeInfo (regular tiles), JPEG 4:2:0 128x128, 3 levels; iScan under Metadata.",
    )


def build(out_dir: pathlib.Path) -> List[Generated]:
    return [_bif(out_dir), _ventana_tiff(out_dir)]
