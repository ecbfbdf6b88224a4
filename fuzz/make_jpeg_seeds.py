#!/usr/bin/env python3
"""Seed corpus for the `jpeg_tile` fuzz target, from the JPEG tiles of the test slides.

The target reads: byte 0 = photometric selector (0 RGB, 1 YCbCr, 2 grey: value % 3), bytes 1-2 =
length (u16 LE) of a JPEGTables prefix, then JPEGTables followed by the tile's bytes; it decodes
into a 64x64 tile whose valid part is 48x40.

Written per source image (Compression 7): (a) a few real tiles with their real JPEGTables and
photometric, byte for byte (they are larger than 64x64, so they exercise the header/limit path);
(b) the same tiles with the SOF patched to 64x64 and 48x40 (the entropy data then decodes to
wrong pixels or fails: the error paths); and (c) 64x64 / 48x40 crops of the slide's pixels
re-encoded (4:2:0, 4:4:4, grey) and split into an abbreviated tables stream + tile stream, as
TIFF writers store them: these decode successfully and drive the splice and crop paths.

usage: make_jpeg_seeds.py OUT_DIR [TESTDATA_DIR]   (needs tifffile, Pillow)
"""
import hashlib
import io
import os
import struct
import sys

import tifffile
from PIL import Image

SOURCES = ["CMU-1-Small-Region.svs", "tiled-jpeg-rgb-u8.tif", "tiff_tiled_ycbcr_jpeg_2x2_sampling.tif", "quad-tile.jpg.tiff"]
TILES_PER_IMAGE = 3


def control(photometric: int, tables: bytes) -> bytes:
    """The target's three control bytes."""
    sel = {2: 0, 6: 1, 1: 2}.get(photometric, 0)
    return bytes([sel]) + struct.pack("<H", len(tables))


def segments(stream: bytes):
    """(marker, start, end) of each marker segment before SOS; SOS covers the rest."""
    i = 2
    while i + 4 <= len(stream) and stream[i] == 0xFF:
        m = stream[i + 1]
        if m == 0xDA:
            yield m, i, len(stream)
            return
        n = struct.unpack(">H", stream[i + 2 : i + 4])[0]
        yield m, i, i + 2 + n
        i += 2 + n


def patch_sof(tile: bytes, w: int, h: int) -> bytes:
    for m, s, _ in segments(tile):
        if m in (0xC0, 0xC1, 0xC2):
            return tile[: s + 5] + struct.pack(">HH", h, w) + tile[s + 9 :]
    return tile


def split_abbreviated(full: bytes):
    """A complete JPEG -> (tables stream SOI DQT DHT EOI, tile stream SOI <other segments> scan)."""
    tables, tile = bytearray(b"\xff\xd8"), bytearray(b"\xff\xd8")
    for m, s, e in segments(full):
        if m in (0xDB, 0xC4):
            tables += full[s:e]
        elif m in (0xE0, 0xEE):
            continue
        else:
            tile += full[s:e]
    tables += b"\xff\xd9"
    return bytes(tables), bytes(tile)


def main() -> None:
    out = sys.argv[1]
    td = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "../../shared/testdata")
    os.makedirs(out, exist_ok=True)
    seeds = []
    for name in SOURCES:
        path = os.path.join(td, name)
        if not os.path.exists(path):
            continue
        with tifffile.TiffFile(path) as tf, open(path, "rb") as f:
            for page in tf.pages:
                if page.compression != 7 or not page.is_tiled:
                    continue
                tables = page.jpegtables or b""
                photometric = int(page.photometric)
                for k, (off, cnt) in enumerate(zip(page.dataoffsets, page.databytecounts)):
                    if k >= TILES_PER_IMAGE:
                        break
                    if off == 0 or cnt == 0:
                        continue
                    f.seek(off)
                    tile = f.read(cnt)
                    seeds.append(control(photometric, tables) + tables + tile)
                    for w, h in [(64, 64), (48, 40)]:
                        seeds.append(control(photometric, tables) + tables + patch_sof(tile, w, h))
                # Re-encoded crops of the image's pixels.
                try:
                    px = page.asarray()
                except Exception:  # noqa: BLE001 - a page tifffile cannot decode just gives no crops
                    continue
                img = Image.fromarray(px[:64, :64, :3] if px.ndim == 3 else px[:64, :64])
                for w, h in [(64, 64), (48, 40)]:
                    crop = img.crop((0, 0, w, h))
                    for mode, sub, sel in [("RGB", 2, 1), ("RGB", 0, 1), ("L", 0, 2)]:
                        buf = io.BytesIO()
                        crop.convert(mode).save(buf, "JPEG", quality=85, subsampling=sub)
                        t, body = split_abbreviated(buf.getvalue())
                        seeds.append(bytes([sel]) + struct.pack("<H", len(t)) + t + body)
                        seeds.append(bytes([sel, 0, 0]) + buf.getvalue())  # no tables: complete stream
                break  # one JPEG image per file is enough
    for s in seeds:
        with open(os.path.join(out, hashlib.sha1(s).hexdigest()), "wb") as f:
            f.write(s)
    print(f"{len(seeds)} seeds written to {out}")


if __name__ == "__main__":
    main()
