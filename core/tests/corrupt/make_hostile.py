#!/usr/bin/env python3
"""Write the hand-made hostile files of core/tests/corrupt/ (see README.md there).

usage: make_hostile.py [TESTDATA_DIR]     (stdlib + Pillow; run from anywhere)

Every file is deterministic; re-running rewrites identical bytes. Files derived from a real
slide take it from ../shared/testdata (small_aperio.svs, 2.6 KB).
"""
import io
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../../shared/testdata")

BYTE, ASCII, SHORT, LONG, UNDEF, LONG8 = 1, 2, 3, 4, 7, 16
SIZE = {BYTE: 1, ASCII: 1, SHORT: 2, LONG: 4, UNDEF: 1, LONG8: 8}
FMT = {BYTE: "B", SHORT: "H", LONG: "I", LONG8: "Q"}


def write(kind: str, name: str, data: bytes) -> None:
    d = os.path.join(HERE, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
    print(f"{kind}/{name}: {len(data)} bytes")


class Tiff:
    """Minimal classic little-endian TIFF writer: IFDs written after the data, in order.

    An entry is (tag, type, values) with values a list of ints / bytes / str, or
    (tag, type, count, offset) for a raw claim (no data written)."""

    def __init__(self):
        self.data = bytearray(b"II*\0\0\0\0\0")

    def add(self, blob: bytes) -> int:
        if len(self.data) % 2:
            self.data += b"\0"
        off = len(self.data)
        self.data += blob
        return off

    def finish(self, ifds, loop_to=None) -> bytes:
        offsets = []
        fixups = []
        for entries in ifds:
            encoded = []
            for e in sorted(entries, key=lambda e: e[0]):
                if len(e) == 4:
                    tag, typ, count, off = e
                    encoded.append(struct.pack("<HHII", tag, typ, count, off))
                    continue
                tag, typ, vals = e
                if typ in (ASCII,):
                    raw = vals.encode() + b"\0"
                elif typ == UNDEF:
                    raw = bytes(vals)
                else:
                    raw = b"".join(struct.pack("<" + FMT[typ], v) for v in vals)
                count = len(raw) // SIZE[typ]
                if len(raw) <= 4:
                    field = raw.ljust(4, b"\0")
                else:
                    field = struct.pack("<I", self.add(raw))
                encoded.append(struct.pack("<HHI", tag, typ, count) + field)
            off = self.add(struct.pack("<H", len(encoded)) + b"".join(encoded) + b"\0\0\0\0")
            offsets.append(off)
            fixups.append(off + 2 + 12 * len(encoded))
        struct.pack_into("<I", self.data, 4, offsets[0])
        for i, f in enumerate(fixups):
            nxt = offsets[i + 1] if i + 1 < len(offsets) else (offsets[loop_to] if loop_to is not None else 0)
            struct.pack_into("<I", self.data, f, nxt)
        return bytes(self.data)


def tiled(w, h, tw, th, offsets, counts, compression=1, photometric=2, spp=3, extra=()):
    return [
        (256, LONG, [w]),
        (257, LONG, [h]),
        (258, SHORT, [8] * spp),
        (259, SHORT, [compression]),
        (262, SHORT, [photometric]),
        (277, SHORT, [spp]),
        (322, LONG, [tw]),
        (323, LONG, [th]),
        (324, LONG, offsets) if isinstance(offsets, list) else offsets,
        (325, LONG, counts) if isinstance(counts, list) else counts,
        *extra,
    ]


def one_tile_tiff(tile: bytes, w, h, tw, th, **kw) -> bytes:
    t = Tiff()
    off = t.add(tile)
    return t.finish([tiled(w, h, tw, th, [off], [len(tile)], **kw)])


# ------------------------------------------------------------------------------------------
# oom / hang: structure
# ------------------------------------------------------------------------------------------


def overlapping_ifds() -> bytes:
    """4096 IFDs of 16384 entries each, all read from ONE 245 KB entry table: IFD k starts
    12*k bytes after IFD k-1, so its entries are entries k..k+16383 of the table. The count of
    IFD k sits in the high half of entry k-1's value; the "next IFD" offset of IFD k is the
    tag+type word of entry k+16384. Every IFD is distinct (no loop) and lies inside the file,
    but together they hold 67 million entries: several GB of directory maps and seconds of
    parsing from a 310 KB file."""
    n, k_ifds = 16384, 4096
    t0 = 65538  # table start: next-IFD words >= 65536 give the entries a known type (1 = BYTE)
    head = bytearray(b"II*\0" + struct.pack("<I", t0 - 2))
    head += b"\0" * (t0 - 2 - len(head))
    head += struct.pack("<H", n)  # count of IFD 0
    table = bytearray()
    for j in range(n + k_ifds):
        if j < n:
            tag, typ = j, SHORT
        else:
            k = j - n  # this entry's first word is IFD k's next pointer
            nxt = t0 + 12 * (k + 1) - 2 if k + 1 < k_ifds else 0
            tag, typ = nxt & 0xFFFF, nxt >> 16
        # count 1 (inline), value: low half 0, high half = count of the IFD starting after it
        table += struct.pack("<HHIHH", tag, typ, 1, 0, n)
    return bytes(head + table)


def shared_tile_arrays() -> bytes:
    """An Aperio file of 1024 pyramid levels (1024x128 down to 1x128 pixels, 1x1-pixel tiles)
    whose TileOffsets and TileByteCounts are BYTE arrays all pointing at the same bytes (the
    IFDs themselves). Each level alone fits the 135 KB file; together they claim 67 million
    tiles: 1 GB of tile index (16 bytes a tile), 4 GB of transient u64 arrays and 17 GB of
    tag reads."""
    levels = 1024
    h = 128
    arrays_at = 8

    def build(claim):
        ifds = []
        for k in range(levels):
            w = 1024 - k
            count = min(w * h, claim)
            extra = [(270, ASCII, "Aperio hostile|AppMag = 20")] if k == 0 else []
            ifds.append(tiled(w, h, 1, 1, (324, BYTE, count, arrays_at), (325, BYTE, count, arrays_at), extra=extra))
        return Tiff().finish(ifds)

    size = len(build(1))  # the claims do not change the layout
    data = build(size - arrays_at)
    assert len(data) == size
    return data


def overlapping_tile_ranges() -> bytes:
    """A 128x128 uncompressed image of 64 tiles (16x16 RGB, 768 bytes) whose byte ranges form
    a chain: tile i is the 831 bytes at D + i, so each range ends one byte past the previous
    one. Before the planner fix, with a request limit below 831 bytes (the corpus test uses
    512), a whole-level read opened one overlapping request per tile: 53 KB read and held for
    894 bytes of data (64 GiB for 1 GiB tiles)."""
    t = Tiff()
    d = t.add(bytes((i * 7) % 256 for i in range(894)))
    return t.finish([tiled(128, 128, 16, 16, [d + i for i in range(64)], [831] * 64)])


def looping_ifds() -> bytes:
    t = Tiff()
    tile = t.add(bytes(16 * 16 * 3))
    ifd = tiled(16, 16, 16, 16, [tile], [768])
    return t.finish([ifd, ifd, ifd], loop_to=1)


def huge_tile_count() -> bytes:
    t = Tiff()
    tile = t.add(bytes(16 * 16 * 3))
    return t.finish([tiled(2**31 - 1, 2**31 - 1, 16, 16, [tile], [768])])


def tag_count_2_32() -> bytes:
    t = Tiff()
    t.add(bytes(16 * 16 * 3))
    return t.finish([tiled(16, 16, 16, 16, (324, LONG, 2**32 - 1, 8), [768])])


def bigtiff_2_64_entries() -> bytes:
    return b"II+\0" + struct.pack("<HHQ", 8, 0, 16) + struct.pack("<Q", 2**64 - 1) + bytes(32)


# ------------------------------------------------------------------------------------------
# JPEG 2000 codestreams whose SIZ sizes OpenJPEG's allocations
# ------------------------------------------------------------------------------------------


def j2k_stream(w, h, tw, th, comps, levels=0) -> bytes:
    """SOC SIZ COD QCD SOT SOD <junk> EOC: a main header OpenJPEG accepts."""
    siz = struct.pack(">HIIIIIIIIH", 0, w, h, 0, 0, tw, th, 0, 0, comps) + b"\x07\x01\x01" * comps
    cod = struct.pack(">BBHBBBBBB", 0, 0, 1, 0, levels, 4, 4, 0, 1)
    qcd = bytes([0x40]) + bytes([0x40] * (1 + 3 * levels))
    sot = struct.pack(">HIBB", 0, 0, 0, 1)
    out = b"\xff\x4f"
    for m, body in [(0x51, siz), (0x52, cod), (0x5C, qcd), (0x90, sot)]:
        out += bytes([0xFF, m]) + struct.pack(">H", len(body) + 2) + body
    return out + b"\xff\x93" + bytes(64) + b"\xff\xd9"


# ------------------------------------------------------------------------------------------
# Real tiles, damaged
# ------------------------------------------------------------------------------------------


def small_aperio() -> bytes:
    with open(os.path.join(TD, "small_aperio.svs"), "rb") as f:
        return f.read()


# small_aperio.svs: level 0 is one 64x64 JPEG tile of 263 bytes at offset 16 (a 16x16 image);
# IFD 1 is a stripped thumbnail.
TILE0_OFF, TILE0_LEN = 16, 263


def patched(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new) :]


def jpeg_segments(stream: bytes, start: int):
    i = start + 2
    while i + 4 <= len(stream) and stream[i] == 0xFF and stream[i + 1] != 0xDA:
        n = struct.unpack(">H", stream[i + 2 : i + 4])[0]
        yield stream[i + 1], i
        i += 2 + n


def sof_claiming(data: bytes, w: int, h: int) -> bytes:
    for m, i in jpeg_segments(data, TILE0_OFF):
        if m == 0xC0:
            return patched(data, i + 5, struct.pack(">HH", h, w))
    raise SystemExit("no SOF0 in small_aperio.svs tile")


def jpeg_tile_tiff(w, h, tw, th, size) -> bytes:
    from PIL import Image

    img = Image.new("RGB", size)
    img.putdata([((x * 5) % 256, (y * 3) % 256, (x + y) % 200) for y in range(size[1]) for x in range(size[0])])
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    return one_tile_tiff(buf.getvalue(), w, h, tw, th, compression=7, photometric=6)


# ------------------------------------------------------------------------------------------
# Progressive JPEG written to the JPEG spec's limits (ITU-T T.81 G.1.1.1: Al and Ah <= 13)
# ------------------------------------------------------------------------------------------


class BitWriter:
    """Entropy-coded segment bits, MSB first, padded with 1-bits, 0xFF stuffed (T.81 F.1.2.3)."""

    def __init__(self):
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, value: int, bits: int) -> None:
        for b in range(bits - 1, -1, -1):
            self.acc = (self.acc << 1) | ((value >> b) & 1)
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0)
                self.acc, self.n = 0, 0

    def zeros(self, bits: int) -> None:
        """`bits` zero bits, fast (whole zero bytes once aligned)."""
        while bits and self.n:
            self.put(0, 1)
            bits -= 1
        self.out += bytes(bits // 8)
        self.put(0, bits % 8)

    def finish(self) -> bytes:
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)
        return bytes(self.out)


def segment(marker: int, body: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body


def progressive_jpeg(w: int, h: int, comps: int, refine: bool) -> bytes:
    """A valid progressive (SOF2) JPEG whose every coefficient is 0 (a flat image), with one
    non-interleaved scan per component, coefficient and bit plane: DC first (Al = 13) and 13
    DC refinements, then for each AC coefficient k = 1..63 a first scan Ss = Se = k (Al = 13)
    and 13 refinements (Ah = a, Al = a - 1), i.e. 64 x 14 = 896 scans a component, the most
    T.81 allows without repeating a scan (libjpeg-turbo flags any repeat as a bogus
    progression). With `refine` False: one DC and 63 AC first scans with Al = 0 (64 scans a
    component). All blocks of an AC scan are one end-of-band run (EOB14 runs of 32767 blocks,
    then one EOBn for the rest), so a scan costs a few bytes while a decoder visits every
    block of the component in it."""
    blocks = -(-w // 8) * -(-h // 8)
    runs = [32767] * (blocks // 32767) + ([blocks % 32767] if blocks % 32767 else [])
    eob_n = sorted({r.bit_length() - 1 for r in runs}, reverse=True)  # EOBn symbols used
    # DC table 0: category 0 -> code '0'. AC table 0: EOBn symbols (n << 4), codes '0', '10',
    # '110', ... (never all ones).
    dht = bytes([0x00]) + bytes([1] + [0] * 15) + bytes([0])
    # Code lengths 1, 2, ..., k for k symbols: '0', '10', ..., k-1 ones then '0'.
    counts = [0] * 16
    for ln in range(1, len(eob_n) + 1):
        counts[ln - 1] += 1
    dht += bytes([0x10]) + bytes(counts) + bytes(n << 4 for n in eob_n)
    codes = {n: ((1 << i) - 1) << 1 for i, n in enumerate(eob_n)}  # i ones then a zero
    out = bytearray(b"\xff\xd8")
    out += segment(0xDB, bytes([0]) + bytes([1] * 64))
    out += segment(0xC2, struct.pack(">BHHB", 8, h, w, comps) + b"".join(bytes([c, 0x11, 0]) for c in range(comps)))
    out += segment(0xC4, dht)
    top = 13 if refine else 0

    def scan(c, ss, se, ah, al, data):
        out.extend(segment(0xDA, bytes([1, c, 0x00, ss, se, (ah << 4) | al])))
        out.extend(data)

    def eob_runs():
        bw = BitWriter()
        for r in runs:
            n = r.bit_length() - 1
            bw.put(codes[n], eob_n.index(n) + 1)
            bw.put(r - (1 << n), n)
        return bw.finish()

    ac = eob_runs()
    for c in range(comps):
        bw = BitWriter()
        bw.zeros(blocks)  # DC difference category 0 ('0') for every block
        scan(c, 0, 0, 0, top, bw.finish())
        for a in range(top, 0, -1):  # DC refinement: one raw bit a block
            bw = BitWriter()
            bw.zeros(blocks)
            scan(c, 0, 0, a, a - 1, bw.finish())
        for k in range(1, 64):
            scan(c, k, k, 0, top, ac)
            for a in range(top, 0, -1):
                scan(c, k, k, a, a - 1, ac)
    return bytes(out + b"\xff\xd9")


# ------------------------------------------------------------------------------------------
# Real CMU-1 tiles, damaged
# ------------------------------------------------------------------------------------------


def cmu1_tiles():
    """(JPEGTables, [tile bytes]) of CMU-1-Small-Region.svs level 0 (240x240 JPEG tiles,
    Photometric RGB, 10 x 13 tiles)."""
    with open(os.path.join(TD, "CMU-1-Small-Region.svs"), "rb") as f:
        d = f.read()
    off = struct.unpack("<I", d[4:8])[0]
    tags = {}
    for i in range(struct.unpack("<H", d[off : off + 2])[0]):
        tag, typ, cnt, val = struct.unpack("<HHII", d[off + 2 + 12 * i : off + 14 + 12 * i])
        tags[tag] = (cnt, val)
    n, o = tags[324]
    offs = struct.unpack(f"<{n}I", d[o : o + 4 * n])
    cnts = struct.unpack(f"<{n}I", d[tags[325][1] : tags[325][1] + 4 * n])
    tables = d[tags[347][1] : tags[347][1] + tags[347][0]]
    return tables, [d[a : a + b] for a, b in zip(offs, cnts)]


def scan_start(tile: bytes) -> int:
    """Offset of the first entropy-coded byte (after the SOS header)."""
    i = 2
    while tile[i + 1] != 0xDA:
        i += 2 + struct.unpack(">H", tile[i + 2 : i + 4])[0]
    return i + 2 + struct.unpack(">H", tile[i + 2 : i + 4])[0]


def damage_scan(tile: bytes, rng, n: int) -> bytes:
    """`n` entropy-coded bytes of `tile` replaced by other values, never creating or touching a
    0xFF (so the marker structure stays intact: only the Huffman-coded data is wrong)."""
    t = bytearray(tile)
    s, e = scan_start(tile), len(tile) - 2
    done = 0
    while done < n:
        i = rng.randrange(s + 1, e - 1)
        if 0xFF in (t[i - 1], t[i]):
            continue
        v = rng.randrange(0, 255)
        if v != t[i]:
            t[i] = v
            done += 1
    return bytes(t)


def jpeg_tiles_tiff(tiles, tables, w, h, tw, th) -> bytes:
    t = Tiff()
    offs = [t.add(x) for x in tiles]
    extra = [(347, UNDEF, list(tables))] if tables else []
    return t.finish([tiled(w, h, tw, th, offs, [len(x) for x in tiles], compression=7, photometric=2, extra=extra)])


# The 2 x 2 CMU-1 tiles of wrong-pixels/jpeg-scan-bytes-damaged.tif (indices into the 130 tiles
# of level 0: tissue-rich ones, 16-20 KB each) and the seed of their damage.
DAMAGED_TILES, DAMAGE_SEED = (35, 36, 45, 46), 13


def main() -> None:
    write("oom", "overlapping-ifds.tif", overlapping_ifds())
    write("oom", "shared-tile-arrays.svs", shared_tile_arrays())
    write("oom", "huge-tile-count.tif", huge_tile_count())
    write("oom", "tag-count-2e32.tif", tag_count_2_32())
    write("oom", "bigtiff-2e64-entries.tif", bigtiff_2_64_entries())
    # OpenJPEG allocates per-tile, per-component coding parameters from SIZ alone.
    write("oom", "j2k-siz-65025-tiles.tif", one_tile_tiff(j2k_stream(255, 255, 1, 1, 3), 255, 255, 256, 256, compression=33005))
    write("oom", "j2k-siz-16384-components.tif", one_tile_tiff(j2k_stream(256, 256, 16, 16, 16384), 256, 256, 256, 256, compression=33005))
    write("oom", "overlapping-tile-ranges.tif", overlapping_tile_ranges())
    # The `planner` fuzz target's crash input (see README.md), kept byte for byte.
    write("oom", "planner-overlap-past-max-request.planner", bytes.fromhex("0100ffffffffffff f404".replace(" ", "")))
    write("hang", "looping-ifd-chain.tif", looping_ifds())
    sa = small_aperio()
    write("panic", "jpeg-tile-0x11-0x00.svs", patched(sa, TILE0_OFF, b"\x11\x00"))
    write("panic", "jpeg-tile-zeroed.svs", patched(sa, TILE0_OFF, bytes(TILE0_LEN)))
    write("panic", "jpeg-sof-65000x65000.svs", sof_claiming(sa, 65000, 65000))
    write("panic", "truncated-before-ifds.svs", sa[: TILE0_OFF + TILE0_LEN // 2])
    write("wrong-pixels", "jpeg-tile-truncated.svs", patched(sa, TILE0_OFF + TILE0_LEN // 2, bytes(TILE0_LEN // 2 - 2) + b"\xff\xd9"))
    write("wrong-pixels", "jpeg-sof-8x8-in-16x16-image.svs", sof_claiming(sa, 8, 8))
    write("wrong-pixels", "jpeg-32x32-in-64x64-tile.tif", jpeg_tile_tiff(64, 64, 64, 64, (32, 32)))
    # Progressive JPEG: 3 x 896 = 2688 scans in a 256x256 tile (43 KB); and a 16384x16384 grey
    # tile of 64 scans (0.5 MB) whose whole-image coefficient buffer is 512 MiB.
    write("hang", "jpeg-progressive-2688-scans.tif", one_tile_tiff(progressive_jpeg(256, 256, 3, True), 256, 256, 256, 256, compression=7, photometric=2))
    write("oom", "jpeg-progressive-16384x16384.tif", one_tile_tiff(progressive_jpeg(16384, 16384, 1, False), 16384, 16384, 16384, 16384, compression=7, photometric=1, spp=1))
    import random

    tables, tiles = cmu1_tiles()
    rng = random.Random(DAMAGE_SEED)
    damaged = [damage_scan(tiles[k], rng, 3) for k in DAMAGED_TILES]
    write("wrong-pixels", "jpeg-scan-bytes-damaged.tif", jpeg_tiles_tiff(damaged, tables, 480, 480, 240, 240))
    # SOF of a real tile claiming component 0 is sampled 4x1 (it is coded 1x1).
    t = tiles[DAMAGED_TILES[0]]
    sof = next(i for m, i in jpeg_segments(t, 0) if m == 0xC0)
    write("wrong-pixels", "jpeg-sof-component-4x1.tif", jpeg_tiles_tiff([patched(t, sof + 11, b"\x41")], tables, 240, 240, 240, 240))


if __name__ == "__main__":
    main()
