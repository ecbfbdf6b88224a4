"""Sakura SVSlide files (SQLite databases) as OpenSlide 4.0.1's ``sakura`` driver reads them
(OpenSlide's Sakura format page; behaviour checked with OpenSlide on these files):

* ``DataManagerSQLiteConfigXPO`` names the unique table (here ``SVGigaPixelImage Data``: a
  name that needs quoting), whose ``++MagicBytes`` row holds ``SVGigaPixelImage``;
* the ``Header`` blob: little-endian u32 tile size, width, height, and at 16 the number of
  focal planes (3: OpenSlide reads plane 1, the middle one; the others are tinted);
* tiles are rows ``T;x|y;downsample;colour;plane`` (level-0 coordinates of the top-left
  corner; colour 0 red, 1 green, 2 blue), each a greyscale JPEG of one colour, plus the
  ``...#`` MD5 rows the scanner writes; levels at downsamples 1, 2, 4 of an image whose size
  is not a multiple of 4 (level sizes are integer divisions);
* tile (1, 1) of level 0 lacks its green blob: transparent; a tile on plane 0 only exists at
  (0, 0) of level 2 (levels come from plane 0's ids, pixels from the middle plane);
* ``SVSlideDataXPO``/``SVHRScanDataXPO``/``SVScannedImageDataXPO`` give the ``sakura.*``
  properties, mpp, objective power and the label, macro and thumbnail JPEGs.
"""

from __future__ import annotations

import hashlib
import io
import pathlib
import sqlite3
import struct
from typing import List

import numpy as np
from PIL import Image

from .common import Generated, Region, assert_close, downscale, tissue_like
from .trestle import check_mean, jpeg

TS = 128
TABLE = "SVGigaPixelImage Data"
PLANES = 3
TINT = {0: 60, 2: -60}
MISSING = (1, 1)  # level-0 tile lacking its green blob


def grey_jpeg(channel: np.ndarray, quality: int = 90) -> bytes:
    """One baseline greyscale JPEG of a ``TS`` x ``TS`` channel."""
    buf = io.BytesIO()
    Image.fromarray(channel, "L").save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def _tile(img: np.ndarray, c: int, r: int) -> np.ndarray:
    part = img[r * TS:(r + 1) * TS, c * TS:(c + 1) * TS]
    return np.pad(part, ((0, TS - part.shape[0]), (0, TS - part.shape[1]), (0, 0)), mode="edge")


def _schema(db: sqlite3.Connection) -> None:
    db.executescript(
        f"""
        CREATE TABLE DataManagerSQLiteConfigXPO (OID INTEGER PRIMARY KEY, TableName TEXT);
        CREATE TABLE "{TABLE}" (id TEXT PRIMARY KEY, size INTEGER, data BLOB);
        CREATE TABLE SVSlideDataXPO (OID INTEGER PRIMARY KEY, m_labelScan INTEGER, m_overviewScan INTEGER, SlideId TEXT,
            Date TEXT, Description TEXT, Creator TEXT, DiagnosisCode TEXT, HRScanCount INTEGER, Keywords TEXT,
            TotalDataSizeBytes INTEGER);
        CREATE TABLE SVHRScanDataXPO (OID INTEGER PRIMARY KEY, ParentSlide INTEGER, ScanId TEXT, Date TEXT, Description TEXT,
            Name TEXT, PosOnSlideMm BLOB, ResolutionMmPerPix REAL, NominalLensMagnification REAL, ThumbnailImage BLOB,
            TotalDataSizeBytes INTEGER, FocussingMethod INTEGER, FocusStack BLOB);
        CREATE TABLE SVScannedImageDataXPO (OID INTEGER PRIMARY KEY, Id TEXT, PosOnSlideMm BLOB, ScanCenterPosMm BLOB,
            ResolutionMmPerPix REAL, Image BLOB, ThumbnailImage BLOB);
        CREATE TABLE tile (TILEID TEXT, PYRAMIDLEVEL INTEGER, COLUMNINDEX INTEGER, ROWINDEX INTEGER, COLORINDEX INTEGER);
        """
    )


def _sakura(out_dir: pathlib.Path) -> Generated:
    w0, h0 = 700, 530
    truth = tissue_like(w0, h0, seed=61)
    label, macro = tissue_like(160, 96, seed=62), tissue_like(300, 120, seed=63)
    thumb = downscale(truth, 8)
    path = out_dir / "sakura.svslide"
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    _schema(db)
    rows = []

    def put(key: str, data: bytes) -> None:
        rows.append((key, len(data), data))

    put("++MagicBytes", b"SVGigaPixelImage")
    put("++VersionBytes", b"1.0.0")
    put("Header", struct.pack("<IIIIIIIHIIIIII", TS, w0, h0, 8, PLANES, 3, 1, 256, 1, 2, 3, 4, 5, 6))
    dims = []
    total = 0
    for d in (1, 2, 4):
        img = truth if d == 1 else downscale(truth, d)[: h0 // d, : w0 // d]
        h, w = h0 // d, w0 // d
        img = img[:h, :w]
        dims.append((w, h))
        for z in range(PLANES):
            plane = img if z == 1 else np.clip(img.astype(np.int16) + TINT[z], 0, 255).astype(np.uint8)
            # plane 0 holds only one tile per level: levels come from plane 0's ids
            cells = [(c, r) for r in range(-(-h // TS)) for c in range(-(-w // TS))]
            if z == 0:
                cells = cells[:1]
            for c, r in cells:
                t = _tile(plane, c, r)
                for color in range(3):
                    if z == 1 and d == 1 and (c, r) == MISSING and color == 1:
                        continue
                    key = f"T;{c * TS * d}|{r * TS * d};{d};{color};{z}"
                    data = grey_jpeg(np.ascontiguousarray(t[..., color]))
                    put(key, data)
                    put(key + "#", hashlib.md5(data).digest())
                    total += len(data)
                    db.execute("INSERT INTO tile VALUES (?, ?, ?, ?, ?)", (key, d, c * TS * d, r * TS * d, color))
    put("TOTAL_SIZE", b"")
    db.executemany(f'INSERT INTO "{TABLE}" VALUES (?, ?, ?)', rows)
    db.execute("INSERT INTO DataManagerSQLiteConfigXPO VALUES (1, ?)", (TABLE,))
    db.execute(
        "INSERT INTO SVScannedImageDataXPO VALUES (7, 'label-uuid', x'00', x'00', 0.05, ?, NULL), (8, 'macro-uuid', x'00', x'00', 0.02, ?, NULL)",
        (jpeg(label), jpeg(macro)),
    )
    db.execute(
        "INSERT INTO SVSlideDataXPO VALUES (3, 7, 8, '5b7c9c4e-slide', '2014-05-06 10:11:12', 'generated slide', 'slidestream', '0', 1, '',"
        " ?)", (total,)
    )
    db.execute(
        "INSERT INTO SVHRScanDataXPO VALUES (4, 3, 'a1b2c3-scan', '2014-05-06', 'scan description', 'Scan 1', x'00', 0.000248, 20.0,"
        " ?, ?, 1, ?)", (jpeg(thumb), total, bytes(8 * PLANES))
    )
    db.commit()
    db.close()
    mx, my = MISSING

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (w0, h0)))
        present = np.ones((h0, w0), bool)
        present[my * TS:(my + 1) * TS, mx * TS:(mx + 1) * TS] = False
        assert (got[..., 3][~present] == 0).all() and (got[..., 3][present] == 255).all(), "Sakura missing tile"
        check_mean(got[..., :3][present], truth[present], "Sakura level 0 (middle plane)")
        check_mean(np.asarray(osr.associated_images["thumbnail"].convert("RGB")), thumb, "Sakura thumbnail")
        assert_close(np.asarray(osr.read_region((0, 0), 2, (1, 1)))[..., 3], np.full((1, 1), 255, np.uint8), 0, "level 2 origin")
        assert osr.level_downsamples == (1.0, 2.0, 4.0), osr.level_downsamples

    return Generated(
        name=path.name,
        vendor="sakura",
        level_dimensions=dims,
        regions=[
            Region("l0_all", 0, (0, 0), (w0, h0)),
            Region("l0_missing", 0, (100, 100), (80, 70)),
            Region("l0_edge", 0, (640, 500), (64, 64)),
            Region("l1_all", 1, (0, 0), dims[1]),
            Region("l2_part", 2, (100, 60), (90, 70)),
        ],
        associated=("label", "macro", "thumbnail"),
        properties={"sakura.SlideId": "5b7c9c4e-slide", "sakura.NominalLensMagnification": "20", "openslide.objective-power": "20",
                    "sakura.VersionBytes": "1.0.0", "sakura.FocussingMethod": "1"},
        check=check,
        note="Sakura: SQLite database, 3 focal planes (the middle read), 3 levels of 128x128 tiles, each colour a greyscale "
        "JPEG; one tile lacks a colour (transparent); label, macro and thumbnail JPEGs.",
    )


def build(out_dir: pathlib.Path) -> List[Generated]:
    return [_sakura(out_dir)]


if __name__ == "__main__":
    import sys

    from .common import main

    sys.exit(main(build, sys.argv))
