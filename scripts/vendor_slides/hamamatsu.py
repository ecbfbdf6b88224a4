"""Hamamatsu NDPI-layout slides (issue 15): classic TIFF with NDPI's 8-byte IFD offsets, each
pyramid level one JPEG strip whose restart intervals are the tiles, NDPI tags 65420-65449.

The strip of a level is assembled from tiles encoded one by one with the same tables (Pillow /
libjpeg-turbo, baseline, standard Huffman tables): the first tile's header with the level's
size in SOF and a DRI marker, then each tile's entropy-coded data separated by RSTn markers
(restart intervals reset the DC predictors, so the concatenation is one valid JPEG). The known
pixels of a level are the tiles as Pillow decodes them. Layout facts follow OpenSlide 4.0.1's
``openslide-vendor-hamamatsu.c`` (see ``core/src/format/hamamatsu.rs``).

``write_large_ndpi`` writes the benchmark slide (>= 40000² px) from a few distinct tiles reused.
"""

from __future__ import annotations

import io
import pathlib
import struct
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .common import Generated, Region, assert_close, tissue_like

PROPERTY_MAP = "Created=2026/12/01\r\nProduct=SLIDESTREAM-TEST\r\nNDP.S/N=000000\r\nEmpty=\r\n"


def _jpeg_tile(px: np.ndarray, subsampling: int, quality: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(px).save(buf, "JPEG", quality=quality, subsampling=subsampling, optimize=False)
    return buf.getvalue()


def _split(jpg: bytes) -> Tuple[bytes, bytes, int]:
    """(header up to and including SOS, entropy-coded data without EOI, SOF offset)."""
    i, sof = 2, -1
    while True:
        m = jpg[i + 1]
        n = struct.unpack(">H", jpg[i + 2:i + 4])[0]
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            sof = i
        if m == 0xDA:
            end = i + 2 + n
            assert jpg[-2:] == b"\xff\xd9"
            return jpg[:end], jpg[end:-2], sof
        i += 2 + n


def _decode(jpg: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB"))


def strip_jpeg(tiles: Sequence[bytes], tiles_across: int, width: int, height: int, tile_w: int, mcu_w: int) -> Tuple[bytes, List[int]]:
    """One JPEG strip from independently encoded tiles (row-major): returns the strip and the
    MCU start of every tile (offset from the strip start)."""
    header, _, sof = _split(tiles[0])
    sos = header.rindex(b"\xff\xda")
    sof_w = width if width <= 65535 else 0
    sof_h = height if height <= 65535 else 0
    hdr = bytearray(header)
    hdr[sof + 5:sof + 9] = struct.pack(">HH", sof_h, sof_w)
    dri = b"\xff\xdd\x00\x04" + struct.pack(">H", tile_w // mcu_w)
    hdr = bytes(hdr[:sos]) + dri + bytes(hdr[sos:])
    out = bytearray(hdr)
    starts = []
    for k, t in enumerate(tiles):
        if k:
            out += bytes([0xFF, 0xD0 + (k - 1) % 8])
        starts.append(len(out))
        out += _split(t)[1]
    out += b"\xff\xd9"
    return bytes(out), starts


class _Ifd:
    def __init__(self) -> None:
        self.entries: Dict[int, Tuple[int, int, bytes]] = {}

    def add(self, tag: int, typ: int, values, count: Optional[int] = None) -> None:
        fmt = {1: "B", 2: "s", 3: "H", 4: "I", 5: "II", 9: "i", 11: "f"}[typ]
        if typ == 2:
            data = values.encode() + b"\0"
            count = len(data)
        elif typ == 5:
            data = b"".join(struct.pack("<II", *v) for v in values)
            count = len(values)
        else:
            data = b"".join(struct.pack("<" + fmt, v) for v in values)
            count = len(values)
        self.entries[tag] = (typ, count, data)


def write_ndpi(path: pathlib.Path, ifds: List[Tuple[_Ifd, bytes]]) -> None:
    """Write NDPI-style classic TIFF: header with an 8-byte first-IFD offset, each IFD's strip
    then its out-of-line values then the directory (8-byte next offset, then 4 bytes per entry
    with the high bits of its value, as Hamamatsu writes and tifffile reads; OpenSlide ignores
    them). StripOffsets (273) is filled in here."""
    out = bytearray(b"II*\0" + b"\0" * 8)
    link = 4
    for ifd, strip in ifds:
        strip_off = len(out)
        out += strip
        ifd.add(273, 4, [strip_off])
        ifd.add(279, 4, [len(strip)])
        blobs = {}
        for tag, (typ, count, data) in sorted(ifd.entries.items()):
            if len(data) > 4:
                if len(out) % 2:
                    out += b"\0"
                blobs[tag] = len(out)
                out += data
        if len(out) % 2:
            out += b"\0"
        diroff = len(out)
        struct.pack_into("<Q", out, link, diroff)
        out += struct.pack("<H", len(ifd.entries))
        for tag, (typ, count, data) in sorted(ifd.entries.items()):
            val = struct.pack("<I", blobs[tag]) if tag in blobs else data.ljust(4, b"\0")
            out += struct.pack("<HHI", tag, typ, count) + val
        link = len(out)
        out += b"\0" * 8
        out += b"\0" * (4 * len(ifd.entries))  # high 32 bits of each value (NDPI; tifffile reads them)
    path.write_bytes(bytes(out))


def level_ifd(width: int, height: int, lens: float, mcu_starts: Optional[List[int]], props: bool) -> _Ifd:
    ifd = _Ifd()
    ifd.add(256, 4, [width])
    ifd.add(257, 4, [height])
    ifd.add(258, 3, [8, 8, 8])
    ifd.add(259, 3, [7])
    ifd.add(262, 3, [6])
    ifd.add(271, 2, "Hamamatsu")
    ifd.add(272, 2, "SLIDESTREAM-TEST")
    ifd.add(277, 3, [3])
    ifd.add(278, 4, [height])
    ifd.add(282, 5, [(40000, 1)])
    ifd.add(283, 5, [(40000, 1)])
    ifd.add(296, 3, [3])
    ifd.add(65420, 4, [1])
    ifd.add(65421, 11, [lens])
    ifd.add(65422, 9, [1234567])
    ifd.add(65423, 9, [-7654])
    ifd.add(65424, 9, [0])
    if mcu_starts is not None:
        ifd.add(65426, 4, mcu_starts)
    if props:
        ifd.add(65449, 2, PROPERTY_MAP)
    return ifd


def encode_level(px: np.ndarray, tile_w: int, mcu: int, subsampling: int, quality: int):
    """Tiles of ``px`` (whole tiles only; the rest of the image is not stored, as in an NDPI
    whose size is not a multiple of the tile size) → (strip, MCU starts, decoded pixels)."""
    h, w = px.shape[:2]
    across, down = w // tile_w, h // mcu
    # Pad to whole MCU rows/columns: the strip's last partial MCU row is coded too.
    rows = -(-h // mcu)
    pad = np.pad(px, ((0, rows * mcu - h), (0, 0), (0, 0)), mode="edge")
    tiles, known = [], np.zeros((down * mcu, across * tile_w, 3), np.uint8)
    for r in range(rows):
        for c in range(across):
            jpg = _jpeg_tile(np.ascontiguousarray(pad[r * mcu:(r + 1) * mcu, c * tile_w:(c + 1) * tile_w]), subsampling, quality)
            tiles.append(jpg)
            if r < down:
                known[r * mcu:(r + 1) * mcu, c * tile_w:(c + 1) * tile_w] = _decode(jpg)
    strip, starts = strip_jpeg(tiles, across, w, h, tile_w, 8 if subsampling == 0 else 16)
    return strip, starts[: across * down], known


def macro_ifd() -> Tuple[_Ifd, bytes]:
    jpg = _jpeg_tile(tissue_like(320, 96, seed=9), 2, 90)
    ifd = level_ifd(320, 96, -1.0, None, False)
    return ifd, jpg


def map_ifd() -> Tuple[_Ifd, bytes]:
    ifd = _Ifd()
    for tag, typ, v in [(256, 4, [40]), (257, 4, [12]), (258, 3, [8]), (259, 3, [1]), (262, 3, [1]), (277, 3, [1]), (278, 4, [12]),
                        (65420, 4, [1]), (65421, 11, [-2.0]), (65422, 9, [0]), (65423, 9, [0])]:
        ifd.add(tag, typ, v)
    return ifd, bytes(range(40)) * 12


def _check(levels: List[Tuple[int, np.ndarray]], tol: int):
    def check(osr) -> None:
        for k, known in levels:
            h, w = known.shape[:2]
            ds = round(osr.level_downsamples[k])
            got = np.asarray(osr.read_region((0, 0), k, (w, h)))
            assert (got[..., 3] == 255).all(), f"level {k}: transparent pixels inside the tiles"
            assert_close(got[..., :3], known, tol, f"level {k} (downsample {ds})")
    return check


def build(out: pathlib.Path) -> List[Generated]:
    """The generated NDPI slides. OpenSlide 4.0.1 fails on 4:2:0 levels taller than one MCU row
    (libjpeg decodes the next iMCU row for the chroma upsampling context and meets the EOI that
    ends the tile: "found marker 0xd9 instead of RST0"), so the 4:2:0 files have one MCU row
    and the multi-row ones are 4:2:2 and 4:4:4."""
    slides = []
    # 1. Brightfield 4:2:2, restart interval of 5 MCUs (80x8 tiles, not a power of two),
    #    heights that are not a multiple of the tile height (OpenSlide leaves the last partial
    #    MCU row unpainted), two stored levels, MCU starts tag, macro and map.
    base = tissue_like(1280, 1004, seed=15)
    s0, m0, k0 = encode_level(base, 80, 8, 1, 85)
    low = base[:1000].reshape(250, 4, 320, 4, 3).mean(axis=(1, 3)).round().astype(np.uint8)
    low = np.concatenate([low, low[-1:]], axis=0)  # 320x251
    s1, m1, k1 = encode_level(low, 64, 8, 1, 85)
    name = "ndpi-422-ri5.ndpi"
    write_ndpi(out / name, [(level_ifd(1280, 1004, 20.0, m0, True), s0), (level_ifd(320, 251, 20.0, m1, False), s1), macro_ifd(), map_ifd()])
    slides.append(Generated(
        name=name, vendor="hamamatsu",
        level_dimensions=[(1280, 1004), (640, 502), (320, 251), (160, 125), (80, 62), (40, 31)],
        associated=["macro"],
        properties={"hamamatsu.SourceLens": "20", "openslide.objective-power": "20", "openslide.mpp-x": "0.25",
                    "hamamatsu.Product": "SLIDESTREAM-TEST", "hamamatsu.XOffsetFromSlideCentre": "1234567",
                    "hamamatsu.YOffsetFromSlideCentre": "-7654"},
        regions=[Region("origin_l0", 0, (0, 0), (256, 256)), Region("tilecross_l0", 0, (70, 10), (200, 40)),
                 Region("bottom_edge_l0", 0, (1100, 950), (256, 100)), Region("l1", 1, (301, 199), (300, 200)),
                 Region("l2_stored", 2, (0, 0), (320, 251)), Region("l3", 3, (0, 0), (160, 125)),
                 Region("l5_full", 5, (0, 0), (40, 31))],
        check=_check([(0, k0), (2, k1)], 0),
        note="4:2:2, 80x8 tiles (restart interval 5 MCUs), 2 stored levels + 4 DCT-scaled, partial last MCU row, MCU starts, macro, map",
    ))
    # 2. 4:4:4 without the MCU starts tag: the restart markers are found by a scan.
    base = tissue_like(640, 480, seed=16)
    s0, _, k0 = encode_level(base, 128, 8, 0, 80)
    name = "ndpi-444-nomcu.ndpi"
    write_ndpi(out / name, [(level_ifd(640, 480, 40.0, None, True), s0)])
    slides.append(Generated(
        name=name, vendor="hamamatsu", level_dimensions=[(640, 480), (320, 240), (160, 120), (80, 60)],
        properties={"openslide.objective-power": "40"},
        regions=[Region("origin_l0", 0, (0, 0), (300, 200)), Region("cross_l0", 0, (100, 200), (300, 250)),
                 Region("l2", 2, (0, 0), (160, 120))],
        check=_check([(0, k0)], 0),
        note="4:4:4, 128x8 tiles, no MCU starts tag (restart markers found by a scan)",
    ))
    # 3. 4:2:0, one MCU row, a level wider than 65,535 px (SOF width 0: the TIFF width is used).
    wide = tissue_like(66560, 16, seed=17)
    s0, m0, k0 = encode_level(wide, 5120, 16, 2, 80)
    name = "ndpi-420-wide.ndpi"
    write_ndpi(out / name, [(level_ifd(66560, 16, 20.0, m0, True), s0)])
    slides.append(Generated(
        name=name, vendor="hamamatsu", level_dimensions=[(66560, 16), (33280, 8), (16640, 4), (8320, 2)],
        regions=[Region("origin_l0", 0, (0, 0), (256, 16)), Region("past_65535_l0", 0, (65400, 0), (400, 16)),
                 Region("l1", 1, (40000, 0), (500, 8)), Region("l3_part", 3, (0, 0), (1000, 2))],
        check=_check_wide(k0),
        note="4:2:0 66560x16 level (SOF width 0), 5120x16 tiles (restart interval 320 MCUs), MCU starts",
    ))
    # 4. 4:2:0, one MCU row, restart interval 7 MCUs (112x16 tiles), MCU starts.
    strip = tissue_like(1568, 16, seed=18)
    s0, m0, k0 = encode_level(strip, 112, 16, 2, 90)
    name = "ndpi-420-ri7.ndpi"
    write_ndpi(out / name, [(level_ifd(1568, 16, 10.0, m0, True), s0)])
    slides.append(Generated(
        name=name, vendor="hamamatsu", level_dimensions=[(1568, 16), (784, 8), (392, 4), (196, 2)],
        regions=[Region("all_l0", 0, (0, 0), (1568, 16)), Region("cross_l0", 0, (100, 3), (300, 10)), Region("l2", 2, (0, 0), (392, 4))],
        check=_check([(0, k0)], 0),
        note="4:2:0, 112x16 tiles (restart interval 7 MCUs), one MCU row",
    ))
    return slides


def _check_wide(known: np.ndarray):
    def check(osr) -> None:
        for x in (0, 30000, 61440):
            got = np.asarray(osr.read_region((x, 0), 0, (5120, 16)))
            assert_close(got[..., :3], known[:, x:x + 5120], 0, f"wide level at x={x}")
    return check


def write_large_ndpi(path: pathlib.Path, width: int = 40960, height: int = 40960, tile_w: int = 512, quality: int = 80, variants: int = 64) -> int:
    """Write a large brightfield NDPI for benchmarks: one ``width × height`` level (multiples
    of ``tile_w`` and 8), YCbCr 4:2:2 tiles of ``tile_w × 8`` (one restart interval of
    ``tile_w / 16`` MCUs; 4:2:2 because OpenSlide cannot read multi-row 4:2:0 NDPI levels, see
    ``build``) cut from ``tissue_like`` content, ``variants`` distinct tiles reused cyclically
    (fast to write), MCU starts tag. Returns the file size in bytes. The strip is streamed to
    disk; OpenSlide synthesises the 1/2, 1/4, 1/8 levels."""
    assert width % tile_w == 0 and height % 8 == 0 and tile_w % 16 == 0
    mcu_h = 8
    src = tissue_like(tile_w * 8, mcu_h * (variants // 8), seed=40)
    enc = []
    for v in range(variants):
        r, c = divmod(v, 8)
        enc.append(_split(_jpeg_tile(np.ascontiguousarray(src[r * mcu_h:(r + 1) * mcu_h, c * tile_w:(c + 1) * tile_w]), 1, quality)))
    header, sof = enc[0][0], enc[0][2]
    hdr = bytearray(header)
    hdr[sof + 5:sof + 9] = struct.pack(">HH", height if height <= 65535 else 0, width if width <= 65535 else 0)
    sos = bytes(hdr).rindex(b"\xff\xda")
    hdr = bytes(hdr[:sos]) + b"\xff\xdd\x00\x04" + struct.pack(">H", tile_w // 16) + bytes(hdr[sos:])
    across, down = width // tile_w, height // mcu_h
    n = across * down
    starts = []
    with open(path, "wb") as f:
        f.write(b"II*\0" + b"\0" * 8)
        strip_off = f.tell()
        f.write(hdr)
        pos = len(hdr)
        for k in range(n):
            if k:
                f.write(bytes([0xFF, 0xD0 + (k - 1) % 8]))
                pos += 2
            starts.append(pos)
            data = enc[(k * 7 + k // across) % variants][1]
            f.write(data)
            pos += len(data)
        f.write(b"\xff\xd9")
        pos += 2
        assert strip_off + pos < 1 << 32, "classic TIFF offsets"
        ifd = level_ifd(width, height, 40.0, starts, True)
        ifd.add(273, 4, [strip_off])
        ifd.add(279, 4, [pos])
        blobs = {}
        cur = strip_off + pos
        body = bytearray()
        for tag, (typ, count, data) in sorted(ifd.entries.items()):
            if len(data) > 4:
                if (cur + len(body)) % 2:
                    body += b"\0"
                blobs[tag] = cur + len(body)
                body += data
        if (cur + len(body)) % 2:
            body += b"\0"
        diroff = cur + len(body)
        body += struct.pack("<H", len(ifd.entries))
        for tag, (typ, count, data) in sorted(ifd.entries.items()):
            val = struct.pack("<I", blobs[tag]) if tag in blobs else data.ljust(4, b"\0")
            body += struct.pack("<HHI", tag, typ, count) + val
        body += b"\0" * 8
        body += b"\0" * (4 * len(ifd.entries))  # high 32 bits of each value (NDPI)
        f.write(body)
        f.seek(4)
        f.write(struct.pack("<Q", diroff))
    return path.stat().st_size
