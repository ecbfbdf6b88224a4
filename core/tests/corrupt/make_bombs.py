#!/usr/bin/env python3
"""Write the decompression bombs of core/tests/corrupt/oom/ (see README.md there; issue 13 F1).

usage: make_bombs.py            (stdlib only; deterministic: re-running rewrites identical bytes)

Each file is a tiled TIFF whose tiles all point at ONE short compressed run, so a few KB claim
gigabytes of decoded pixels:

* zstd-4x16384-shared-run.tif: 2 x 2 tiles of 16384^2 RGB (768 MiB of samples, 1 GiB of RGBA
  each) from one 25 KB zstd frame of RLE blocks (RFC 8878);
* deflate-16x8192-shared-stream.tif: 4 x 4 tiles of 8192^2 RGB from one 195 KB zlib stream;
* lzw-8x8192-shared-stream.tif: 4 x 2 tiles of 8192^2 RGB from one TIFF-LZW stream of zeros
  (codes of ever longer runs, Clear when the 12-bit table fills, early change as libtiff);
* zstd-16x512-shared-run.tif: 4 x 4 tiles of 512^2 from one frame, each within the working
  set: they decode (core/tests/memory.rs measures the same shape at 64 x 1024^2 in waves).

The first three are refused with a Limits error before anything is decoded (one tile needs more
than SLIDESTREAM_READ_WORKING_BYTES); the last reads in bounded memory. benches/hostile_bounds.py
measures the peak RSS and time of reads of each.
"""
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_hostile import Tiff, tiled, write  # noqa: E402


def zstd_rle(byte: int, length: int) -> bytes:
    """A zstd frame (no content size, 128 KiB window) of RLE blocks: 4 bytes per 128 KiB."""
    out = bytearray(struct.pack("<I", 0xFD2FB528) + bytes([0x00, 7 << 3]))
    left = length
    while left:
        n = min(left, 128 << 10)
        left -= n
        header = (1 if left == 0 else 0) | (1 << 1) | (n << 3)
        out += struct.pack("<I", header)[:3] + bytes([byte])
    return bytes(out)


def lzw_run(byte: int, length: int) -> bytes:
    """TIFF LZW (MSB-first codes, early change) of `length` copies of `byte`, as libtiff's
    encoder would write it: the greedy LZW parse of a run emits the literal, then the entries for runs
    of 2, 3, 4, ... bytes; when the table reaches 4094 entries a Clear (256) restarts it."""
    clear, eoi, first = 256, 257, 258
    acc, nacc = 0, 0
    out = bytearray()

    def put(code: int, width: int) -> None:
        nonlocal acc, nacc
        acc = (acc << width) | code
        nacc += width
        while nacc >= 8:
            nacc -= 8
            out.append((acc >> nacc) & 0xFF)
        acc &= (1 << nacc) - 1

    width, free = 9, first
    put(clear, width)
    left = length
    run = 1  # length of the longest run in the table (1 = the literal)
    while left:
        take = min(run, left)
        put(byte if take == 1 else first + take - 2, width)
        left -= take
        if not left:
            break
        # The entry for this code plus the next byte: a run one longer.
        run = take + 1
        free += 1
        if free == 4094:
            put(clear, width)
            width, free, run = 9, first, 1
        elif free > (1 << width) - 1:
            width += 1
    put(eoi, width)
    if nacc:
        out.append((acc << (8 - nacc)) & 0xFF)
    return bytes(out)


def shared(run: bytes, cols: int, rows: int, tile: int, compression: int) -> bytes:
    t = Tiff()
    off = t.add(run)
    n = cols * rows
    return t.finish([tiled(cols * tile, rows * tile, tile, tile, [off] * n, [len(run)] * n, compression=compression)])


def main() -> None:
    write("oom", "zstd-4x16384-shared-run.tif", shared(zstd_rle(0, 16384 * 16384 * 3), 2, 2, 16384, 50000))
    write("oom", "deflate-16x8192-shared-stream.tif", shared(zlib.compress(bytes(8192 * 8192 * 3), 9), 4, 4, 8192, 8))
    write("oom", "lzw-8x8192-shared-stream.tif", shared(lzw_run(0, 8192 * 8192 * 3), 4, 2, 8192, 5))
    write("oom", "zstd-16x512-shared-run.tif", shared(zstd_rle(0x40, 512 * 512 * 3), 4, 4, 512, 50000))


if __name__ == "__main__":
    # Self-check of the LZW writer against libtiff (through Pillow) when Pillow is present:
    # a 2048 x 2048 RGB tile of 0x40 crosses every code width and one Clear.
    if "--check" in sys.argv:
        import io

        from PIL import Image

        t = Tiff()
        run = lzw_run(0x40, 2048 * 2048 * 3)
        off = t.add(run)
        data = t.finish([tiled(2048, 2048, 2048, 2048, [off], [len(run)], compression=5)])
        im = Image.open(io.BytesIO(data))
        im.load()
        assert im.size == (2048, 2048) and im.tobytes() == bytes([0x40]) * (2048 * 2048 * 3), "LZW self-check failed"
        print("LZW writer: libtiff decodes 12 MiB of 0x40 from", len(run), "bytes")
    else:
        main()
