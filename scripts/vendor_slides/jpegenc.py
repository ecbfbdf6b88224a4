"""A small baseline JPEG encoder for the JPEG tiles Pillow cannot write: any number of
components (1 to 4: e.g. grey + alpha, 2 components), each sampled 1x1, interleaved in one
scan, no colour transform (the samples are coded as given).

The quantisation and Huffman tables are Pillow's own (its luminance table for ``quality`` and
the standard Huffman tables of ITU-T T.81 Annex K, read back from a JPEG Pillow writes), used
for every component. Deterministic; numpy does the DCT, Python the entropy coding (fine for
the small tiles of the generated slides).
"""

from __future__ import annotations

import io
import struct
from typing import Dict, List, Optional, Tuple

import numpy as np

# Zigzag order: ZIGZAG[k] is the row-major index of the k-th coefficient.
ZIGZAG = np.array(
    [0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
     35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55,
     62, 63]
)


def _segments(jpeg: bytes) -> List[Tuple[int, bytes]]:
    """(marker, payload) of each segment before SOS."""
    out, i = [], 2
    while i < len(jpeg):
        marker = jpeg[i + 1]
        if marker == 0xDA:
            break
        n = struct.unpack(">H", jpeg[i + 2:i + 4])[0]
        out.append((marker, jpeg[i + 4:i + 2 + n]))
        i += 2 + n
    return out


def _pillow_tables(quality: int) -> Tuple[np.ndarray, Dict[Tuple[int, int], Tuple[bytes, bytes]]]:
    """Pillow's luminance quantisation table (natural order) and its Huffman tables keyed
    (class, id) -> (16 code-length counts, symbols)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (8, 8), 128).save(buf, "JPEG", quality=quality, optimize=False)
    q = None
    huff = {}
    for marker, p in _segments(buf.getvalue()):
        if marker == 0xDB:
            assert p[0] == 0, "8-bit table 0"
            q = np.zeros(64, np.int32)
            q[ZIGZAG] = np.frombuffer(p[1:65], np.uint8)
        elif marker == 0xC4:
            i = 0
            while i < len(p):
                tc, th = p[i] >> 4, p[i] & 15
                counts = p[i + 1:i + 17]
                n = sum(counts)
                huff[(tc, th)] = (bytes(counts), bytes(p[i + 17:i + 17 + n]))
                i += 17 + n
    assert q is not None and (0, 0) in huff and (1, 0) in huff
    return q.reshape(8, 8), huff


def _codes(counts: bytes, symbols: bytes) -> Dict[int, Tuple[int, int]]:
    """Canonical Huffman codes: symbol -> (code, length) (T.81 Annex C)."""
    out, code, k = {}, 0, 0
    for length in range(1, 17):
        for _ in range(counts[length - 1]):
            out[symbols[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return out


class _Bits:
    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, code: int, length: int) -> None:
        self.acc = (self.acc << length) | code
        self.n += length
        while self.n >= 8:
            self.n -= 8
            b = (self.acc >> self.n) & 0xFF
            self.out.append(b)
            if b == 0xFF:
                self.out.append(0)
        self.acc &= (1 << self.n) - 1

    def flush(self) -> bytes:
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)
        return bytes(self.out)


def _magnitude(v: int) -> Tuple[int, int]:
    """(size category, appended bits) of a coefficient value (T.81 F.1.2.1)."""
    a = abs(v)
    s = a.bit_length()
    bits = v if v >= 0 else v + (1 << s) - 1
    return s, bits


def _dct_matrix() -> np.ndarray:
    c = np.zeros((8, 8))
    for u in range(8):
        for x in range(8):
            c[u, x] = (np.sqrt(1 / 8) if u == 0 else np.sqrt(2 / 8)) * np.cos((2 * x + 1) * u * np.pi / 16)
    return c


def encode(samples: np.ndarray, quality: int = 90, adobe_transform: Optional[int] = None) -> bytes:
    """Encode ``samples`` (uint8, shape (h, w) or (h, w, n), n = 1..4) as a baseline JPEG
    with n components (ids 1..n, all sampled 1x1), coded without colour transform. With
    ``adobe_transform`` an Adobe APP14 marker with that transform flag is written."""
    a = samples if samples.ndim == 3 else samples[..., None]
    h, w, n = a.shape
    assert a.dtype == np.uint8 and 1 <= n <= 4
    q, huff = _pillow_tables(quality)
    ph, pw = -(-h // 8) * 8, -(-w // 8) * 8
    pad = np.pad(a, ((0, ph - h), (0, pw - w), (0, 0)), mode="edge").astype(np.float64) - 128.0
    c = _dct_matrix()
    # blocks[by, bx, comp, 8, 8]
    blocks = pad.reshape(ph // 8, 8, pw // 8, 8, n).transpose(0, 2, 4, 1, 3)
    coef = np.einsum("ux,...xy,vy->...uv", c, blocks, c)
    quant = np.round(coef / q).astype(np.int64).reshape(ph // 8, pw // 8, n, 64)[..., ZIGZAG]
    dc_codes, ac_codes = _codes(*huff[(0, 0)]), _codes(*huff[(1, 0)])
    bits = _Bits()
    pred = [0] * n
    for by in range(ph // 8):
        for bx in range(pw // 8):
            for ci in range(n):
                z = quant[by, bx, ci].tolist()
                diff = z[0] - pred[ci]
                pred[ci] = z[0]
                s, v = _magnitude(diff)
                bits.put(*dc_codes[s])
                if s:
                    bits.put(v, s)
                run = 0
                last = max((k for k in range(1, 64) if z[k] != 0), default=0)
                for k in range(1, last + 1):
                    if z[k] == 0:
                        run += 1
                        continue
                    while run > 15:
                        bits.put(*ac_codes[0xF0])
                        run -= 16
                    s, v = _magnitude(z[k])
                    bits.put(*ac_codes[(run << 4) | s])
                    bits.put(v, s)
                    run = 0
                if last < 63:
                    bits.put(*ac_codes[0x00])
    data = bits.flush()

    def seg(marker: int, payload: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(payload) + 2) + payload

    out = bytearray(b"\xff\xd8")
    if adobe_transform is not None:
        out += seg(0xEE, b"Adobe" + struct.pack(">HHHB", 100, 0, 0, adobe_transform))
    out += seg(0xDB, b"\x00" + bytes(q.reshape(64)[ZIGZAG].astype(np.uint8)))
    sof = struct.pack(">BHHB", 8, h, w, n) + b"".join(struct.pack(">BBB", i + 1, 0x11, 0) for i in range(n))
    out += seg(0xC0, sof)
    for (tc, th), (counts, syms) in sorted(huff.items()):
        if th == 0:
            out += seg(0xC4, bytes([(tc << 4) | th]) + counts + syms)
    sos = struct.pack(">B", n) + b"".join(struct.pack(">BB", i + 1, 0x00) for i in range(n)) + b"\x00\x3f\x00"
    out += seg(0xDA, sos)
    out += data + b"\xff\xd9"
    return bytes(out)
