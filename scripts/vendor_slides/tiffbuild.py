"""A minimal classic (little-endian) TIFF writer for generated slides that tifffile cannot
write without imagecodecs (precompressed JPEG tiles) or that need exact control of every tag
(bogus ImageDepth, thousands of tiny IFDs).

Each IFD is given as its tags plus its tile (or strip) byte blobs; the writer lays out the
blobs, then the directories with their out-of-line values, and fills in the TileOffsets /
TileByteCounts (or StripOffsets / StripByteCounts) tags. TIFF 6.0 field types; ``write(..., bigtiff=True)`` writes BigTIFF (the BigTIFF design note of
libtiff: header ``II+\\0``, 8-byte offsets, 20-byte entries, LONG8 chunk offsets and counts).
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Dict, List, Sequence, Tuple, Union

BYTE, ASCII, SHORT, LONG, RATIONAL, UNDEFINED, LONG8 = 1, 2, 3, 4, 5, 7, 16
# ASCII_RAW: an ASCII value written without its terminating NUL (as some scanners do).
ASCII_RAW = -2
_FMT = {BYTE: "B", ASCII: "B", SHORT: "H", LONG: "I", UNDEFINED: "B", LONG8: "Q"}
_SIZE = {BYTE: 1, ASCII: 1, SHORT: 2, LONG: 4, RATIONAL: 8, UNDEFINED: 1, LONG8: 8}

Value = Union[int, str, bytes, Sequence[int], Sequence[Tuple[int, int]]]


@dataclasses.dataclass
class Ifd:
    """One directory: ``tags`` maps tag -> (field type, value); ``chunks`` are the stored
    tiles (``tiled``) or strips, in TIFF order; their offsets and byte counts are added."""

    tags: Dict[int, Tuple[int, Value]]
    chunks: List[bytes] = dataclasses.field(default_factory=list)
    tiled: bool = True


def _encode(ftype: int, value: Value) -> Tuple[bytes, int]:
    if ftype == ASCII_RAW:
        raw = value.encode() if isinstance(value, str) else bytes(value)
        return raw, len(raw)
    if ftype == ASCII:
        raw = (value.encode() if isinstance(value, str) else bytes(value)) + b"\0"
        return raw, len(raw)
    if ftype == UNDEFINED and isinstance(value, (bytes, bytearray)):
        return bytes(value), len(value)
    vals = [value] if isinstance(value, (int, tuple)) else list(value)
    if ftype == RATIONAL:
        return b"".join(struct.pack("<II", n, d) for n, d in vals), len(vals)
    return struct.pack("<" + _FMT[ftype] * len(vals), *vals), len(vals)


def write(path, ifds: Sequence[Ifd], bigtiff: bool = False) -> None:
    """Write ``ifds`` (IFD 0 first, chained in order) to ``path``; BigTIFF when ``bigtiff``."""
    out = bytearray(b"II+\0\x08\0\0\0" + bytes(8) if bigtiff else b"II*\0\0\0\0\0")
    # Entry layout: count field format, entry size, inline value bytes, link format.
    cfmt, esize, inline, lfmt = ("Q", 20, 8, "Q") if bigtiff else ("I", 12, 4, "I")
    placed = []
    for ifd in ifds:
        offs, counts = [], []
        for c in ifd.chunks:
            offs.append(len(out) if c else 0)
            counts.append(len(c))
            out += c
            if len(out) % 2:
                out += b"\0"
        placed.append((offs, counts))
    prev_next = 8 if bigtiff else 4  # where the previous "next IFD" pointer lives
    for ifd, (offs, counts) in zip(ifds, placed):
        tags = dict(ifd.tags)
        if ifd.chunks:
            o_tag, c_tag = (324, 325) if ifd.tiled else (273, 279)
            tags[o_tag] = (LONG8 if bigtiff else LONG, offs)
            tags[c_tag] = (LONG8 if bigtiff else LONG, counts)
        entries = sorted(tags.items())
        start = len(out)
        struct.pack_into("<" + lfmt, out, prev_next, start)
        body = bytearray(struct.pack("<Q" if bigtiff else "<H", len(entries)))
        extra = bytearray()
        extra_at = start + len(body) + esize * len(entries) + inline
        for tag, (ftype, value) in entries:
            raw, count = _encode(ftype, value)
            stored = ASCII if ftype == ASCII_RAW else ftype
            if len(raw) <= inline:
                body += struct.pack("<HH" + cfmt, tag, stored, count) + raw.ljust(inline, b"\0")
            else:
                body += struct.pack("<HH" + cfmt + lfmt, tag, stored, count, extra_at + len(extra))
                extra += raw
                if len(extra) % 2:
                    extra += b"\0"
        prev_next = start + len(body)
        body += bytes(inline)
        out += body + extra
    with open(path, "wb") as f:
        f.write(out)


def tiled_ifd(width: int, height: int, tile: int, chunks: List[bytes], *, spp: int, photometric: int,
              compression: int, extra: Dict[int, Tuple[int, Value]] = None) -> Ifd:
    """The usual tags of a tiled 8-bit image (extra tags added or overriding)."""
    tags = {
        256: (LONG, width),
        257: (LONG, height),
        258: (SHORT, [8] * spp),
        259: (SHORT, compression),
        262: (SHORT, photometric),
        277: (SHORT, spp),
        284: (SHORT, 1),
        322: (SHORT, tile),
        323: (SHORT, tile),
    }
    tags.update(extra or {})
    return Ifd(tags, chunks)
