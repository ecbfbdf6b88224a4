#!/usr/bin/env python3
# ruff: noqa: E701, E702  (a compact probe script: one-line loops kept)
"""Write a BigTIFF whose level 0 is EDGE x EDGE pixels in 256x256 uncompressed RGB tiles; every
tile points at the same 196608-byte block (structure probe only). usage: make_bigtiff.py OUT EDGE"""
import struct
import sys
out, edge = sys.argv[1], int(sys.argv[2])
T = 256
n = ((edge + T - 1) // T) ** 2
tile = bytes(range(256)) * (T * T * 3 // 256)
SHORT, LONG, LONG8 = 3, 4, 16
entries = [(256, LONG, [edge]), (257, LONG, [edge]), (258, SHORT, [8, 8, 8]), (259, SHORT, [1]),
           (262, SHORT, [2]), (277, SHORT, [3]), (284, SHORT, [1]), (322, SHORT, [T]), (323, SHORT, [T]),
           (324, LONG8, None), (325, LONG8, [len(tile)] * n)]
FMT = {SHORT: "H", LONG: "I", LONG8: "Q"}
buf = bytearray(b"II" + struct.pack("<HHHQ", 43, 8, 0, 0))
data_off = len(buf); buf += tile
entries[9] = (324, LONG8, [data_off] * n)
ool = {}
for tag, typ, vals in entries:
    b = struct.pack("<%d%s" % (len(vals), FMT[typ]), *vals)
    if len(b) > 8:
        while len(buf) % 8: buf.append(0)
        ool[tag] = len(buf); buf += b
while len(buf) % 8: buf.append(0)
ifd = len(buf)
struct.pack_into("<Q", buf, 8, ifd)
buf += struct.pack("<Q", len(entries))
for tag, typ, vals in entries:
    b = struct.pack("<%d%s" % (len(vals), FMT[typ]), *vals)
    val = struct.pack("<Q", ool[tag]) if tag in ool else b.ljust(8, b"\0")
    buf += struct.pack("<HHQ", tag, typ, len(vals)) + val
buf += struct.pack("<Q", 0)
open(out, "wb").write(buf)
print(out, edge, "tiles", n, "array bytes", n * 8, "file", len(buf))
