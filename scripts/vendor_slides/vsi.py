"""Synthetic Olympus / Evident cellSens VSI + ETS slides for core/tests/olympus.rs and
py/tests/test_olympus.py (generated at test time; OpenSlide 4.0.1 has no VSI driver, so they
are not among make_vendor_slides.py's OpenSlide-referenced slides).

Usage: python scripts/vendor_slides/vsi.py OUTDIR

Layout written (public facts: Bio-Formats' CellSensReader and slideio's VSI driver, the files
of ../shared/formats3): ``NAME.vsi`` is a little-endian TIFF whose IFD 0 is an uncompressed RGB
preview and whose record tree (24-byte volume headers of magic 21321, 16-byte field headers)
starts at offset 8; the pixels are in ``_NAME_/stack<id>/frame_t.ets`` (a 64-byte "SIS" header,
the "ETS" additional header, the tiles, then the tile table of (column, row, extra dimensions,
level) coordinates).

* ``brightfield-jpeg.vsi``: RGB, 64x64 JPEG tiles (Pillow, 4:4:4), 300x220, 3 levels, two
  level-0 tiles missing, background (240, 230, 250), a Z dimension of one plane;
* ``brightfield-raw.vsi``: the same image as raw RGB tiles, 2 levels, no missing tile;
* ``fluo-raw-u16.vsi``: 2 channels (DAPI, FITC) of uint16 raw tiles, 2 Z planes (plane 1 a
  different pattern: plane 0 must be read), 2 levels;
* ``fluo-j2k-u16.vsi``: 2 channels of uint16 lossless JPEG 2000 codestreams (imagecodecs, when
  installed; otherwise not written), 1 Z plane, 2 levels;
* ``bad/``: ``origin.vsi`` (a tile-grid origin of (64, 0, 0): refused), ``no-ets.vsi`` (the ETS
  file absent), ``jpeg-lossless.vsi`` (ETS compression 5: refused).

``cases.json`` lists each file's levels, channels, dtype, missing tiles and mpp. The test's
oracles are slideio's pixels (level 0) and :func:`decode_ets`, an independent decode of the ETS
tile table with Pillow (JPEG), imagecodecs (JPEG 2000) or numpy (raw).
"""

import io
import json
import struct
import sys
from pathlib import Path

import numpy as np
from PIL import Image

TILE = 64
MPP = 0.345
MAGNIFICATION = 20.0
TEXT, INT, BOOL, DOUBLE, DOUBLE2, RECT, INTS = 8192, 5, 12, 10, 260, 259, 8199
EXTENDED, EXTRA_TAG, INLINE = 1 << 28, 1 << 27, 1 << 30


# -- the record tree -------------------------------------------------------------------------


def field(tag, kind, value=b"", second=None, inline=None):
    """(header flags, tag, second tag, data bytes) of one field; `value` a volume's bytes for
    extended kinds 0-2."""
    flags = kind
    if second is not None:
        flags |= EXTRA_TAG
    if inline is not None:
        flags |= INLINE
    return (flags, tag, second, value, inline)


def text(tag, s):
    return field(tag, TEXT, s.encode("utf-16-le"))


def volume(fields):
    """A volume (header + fields), position-independent: next-field offsets are relative to
    its header. Property sets (kind 1|EXTENDED) carry their volume right after the field
    header with data size 0; new volume headers (kind 0|EXTENDED) carry it as their data."""
    out = bytearray(struct.pack("<HHIqII", 24, 21321, 1, 24, len(fields), 0))
    for i, (flags, tag, second, value, inline) in enumerate(fields):
        head = 16 + (4 if second is not None else 0)
        size = len(value)
        next_field = 0 if i + 1 == len(fields) else len(out) + head + size
        if flags & EXTENDED and flags & 0xFFFFFF in (1, 2):
            size = 0
        if inline is not None:
            size = inline
        out += struct.pack("<IiII", flags, tag, next_field, size)
        if second is not None:
            out += struct.pack("<i", second)
        out += value
    return bytes(out)


def prop_set(tag, fields, kind=1):
    return field(tag, EXTENDED | kind, volume(fields))


def new_volume(tag, fields, second=None):
    return field(tag, EXTENDED, volume(fields), second=second)


def stack(sid, name, kind, size, *, external=True, origin=(0, 0, 0), dims=(), channels=()):
    """A multidimensional image volume (2001) of stack `sid`."""
    frame = [prop_set(2018, [field(2053, RECT, struct.pack("<4i", 0, 0, *size)), field(2410, INTS, struct.pack(f"<{len(origin)}i", *origin)), field(20005, BOOL, inline=int(external))])]
    props = [
        text(2030, name),
        field(2074, INT, inline=kind),
        field(2019, DOUBLE2, struct.pack("<2d", MPP, MPP)),
        field(2020, 13, "10^-6m^1".encode("utf-16-le")),
        prop_set(2043, [prop_set(3, [prop_set(120114, [field(120060, DOUBLE, struct.pack("<d", MAGNIFICATION))])])], kind=2),
    ]
    fields = [field(2034, 4, struct.pack("<H", 255)), new_volume(2002, frame, second=0), prop_set(2005, props)]
    for d, meaning in enumerate(dims):
        chans = [new_volume(2008, [field(2023, INT, inline=meaning)], second=0)]
        if meaning == 4:
            chans = [new_volume(2008, ([field(2023, INT, inline=4)] if c == 0 else []) + [text(2419, n)], second=c) for c, n in enumerate(channels)]
        fields.append(new_volume(2007, chans, second=d))
    return new_volume(2001, fields, second=sid)


def tree(stacks):
    doc = prop_set(2, [text(34, "slidestream test writer"), text(35, "1.0"), text(11, "synthetic.vsi")])
    return volume([doc, new_volume(2000, [field(2035, 14, struct.pack("<I", 1))] + stacks, second=0)])


def write_vsi(path, record_tree, preview):
    """A little-endian TIFF: header, the record tree at 8, the preview's strip, IFD 0."""
    h, w, _ = preview.shape
    data_off = 8 + len(record_tree)
    strip = preview.tobytes()
    bps_off = data_off + len(strip)
    ifd_off = bps_off + 6 + (bps_off + 6) % 2
    entries = [(256, 3, 1, w), (257, 3, 1, h), (258, 3, 3, bps_off), (259, 3, 1, 1), (262, 3, 1, 2), (273, 4, 1, data_off), (277, 3, 1, 3), (278, 3, 1, h), (279, 4, 1, len(strip))]
    out = bytearray(b"II*\0" + struct.pack("<I", ifd_off)) + record_tree + strip + struct.pack("<3H", 8, 8, 8)
    out += b"\0" * (ifd_off - len(out))
    out += struct.pack("<H", len(entries))
    for tag, typ, count, value in entries:
        out += struct.pack("<HHI", tag, typ, count) + (struct.pack("<HH", value, 0) if typ == 3 and count == 1 else struct.pack("<I", value))
    out += struct.pack("<I", 0)
    Path(path).write_bytes(out)


# -- the ETS file ----------------------------------------------------------------------------


def write_ets(path, tiles, *, dims, pixel_type, components, compression, background, pyramid=True):
    """`tiles`: list of (coordinates, bytes) in storage order."""
    add = bytearray(228)
    struct.pack_into("<4s9I", add, 0, b"ETS\0", 0x30006, pixel_type, components, 1 if components == 1 else 3, compression, 90, TILE, TILE, 1)
    bg = struct.pack(f"<{len(background)}{'B' if pixel_type == 2 else 'H'}", *background)
    add[108 : 108 + len(bg)] = bg
    struct.pack_into("<II", add, 148, 0xFFFFFFFF, int(pyramid))
    data = bytearray()
    entries = []
    start = 64 + len(add)
    for coords, payload in tiles:
        entries.append((coords, start + len(data), len(payload)))
        data += payload
    table = start + len(data)
    out = bytearray(struct.pack("<4sIII QII QII QII", b"SIS\0", 64, 3, dims, 64, len(add), 0, table, len(entries), 0, 0, 0, 0))
    out += add + data
    for coords, off, n in entries:
        out += struct.pack(f"<I{dims}iQII", dims, *coords, off, n, 0)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(out)


def decode_ets(path, *, z_index=None, c_index=None, channel=0):
    """Independent oracle: the ETS tile table decoded into one array per level (plane 0 of Z,
    the given channel), (height, width, components), with `None` for missing tiles' pixels
    (a mask is returned too). Level sizes: Bio-Formats' rule from the given level-0 size."""
    b = Path(path).read_bytes()
    _, _, _, dims, add_off, _, _, table, count = struct.unpack_from("<4sIIIQIIQI", b, 0)
    _, _, ptype, comps, _, comp, _, tw, th, _ = struct.unpack_from("<4s9I", b, add_off)
    pyramid = struct.unpack_from("<I", b, add_off + 152)[0]
    tiles = []
    for i in range(count):
        e = struct.unpack_from(f"<I{dims}iQII", b, table + i * (20 + 4 * dims))
        coords, off, n = e[1 : 1 + dims], e[1 + dims], e[2 + dims]
        tiles.append((coords, b[off : off + n]))
    dtype = np.uint8 if ptype == 2 else np.dtype("<u2")
    decoded = {}
    for coords, payload in tiles:
        if z_index is not None and coords[z_index] != 0:
            continue
        if c_index is not None and coords[c_index] != channel:
            continue
        level = coords[-1] if pyramid else 0
        if comp == 0:
            px = np.frombuffer(payload, dtype).reshape(th, tw, comps)
        elif comp == 2:
            px = np.asarray(Image.open(io.BytesIO(payload)).convert("RGB" if comps == 3 else "L")).reshape(th, tw, comps)
        else:
            import imagecodecs

            px = imagecodecs.jpeg2k_decode(payload).reshape(th, tw, comps)
        decoded[(level, coords[0], coords[1])] = px
    return decoded, (tw, th), dtype, comps


def level_sizes(w, h, levels, max_tiles):
    sizes = [(w, h)]
    for k in range(1, levels):
        pw, ph = sizes[-1]
        cx, cy = TILE * (max_tiles[k][0] + 1), TILE * (max_tiles[k][1] + 1)
        half = lambda p, cap: p // 2 + 1 if p % 2 == 1 and p // 2 < cap else min(p // 2, cap)  # noqa: E731
        sizes.append((half(pw, cx), half(ph, cy)))
    return sizes


def assemble(decoded, sizes, comps, dtype):
    """(image, mask) per level from decoded tiles."""
    out = []
    for k, (w, h) in enumerate(sizes):
        img = np.zeros((h, w, comps), dtype)
        mask = np.zeros((h, w), bool)
        for (lv, x, y), px in decoded.items():
            if lv != k:
                continue
            x0, y0 = x * TILE, y * TILE
            ww, hh = min(TILE, w - x0), min(TILE, h - y0)
            img[y0 : y0 + hh, x0 : x0 + ww] = px[:hh, :ww]
            mask[y0 : y0 + hh, x0 : x0 + ww] = True
        out.append((img, mask))
    return out


# -- the slides ------------------------------------------------------------------------------


def pattern(h, w, c, seed, dtype=np.uint8):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    top = 255 if dtype == np.uint8 else 4000
    base = [(xx * 3 + yy * (i + 1) * 2) % top for i in range(c)]
    img = np.stack(base, axis=2).astype(np.float64)
    img += rng.integers(0, 12, size=img.shape)
    return np.clip(img, 0, top).astype(dtype)


def pyramid_of(img, n):
    out = [img]
    for _ in range(1, n):
        a = out[-1].astype(np.float64)
        h, w = a.shape[:2]
        a = np.pad(a, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        out.append(((a[0::2, 0::2] + a[1::2, 0::2] + a[0::2, 1::2] + a[1::2, 1::2]) / 4).round().astype(out[0].dtype))
    return out


def tiles_of(img, level, encode, extra=(), skip=()):
    h, w = img.shape[:2]
    out = []
    for y in range(-(-h // TILE)):
        for x in range(-(-w // TILE)):
            if (x, y) in skip:
                continue
            t = np.zeros((TILE, TILE, img.shape[2]), img.dtype)
            part = img[y * TILE : (y + 1) * TILE, x * TILE : (x + 1) * TILE]
            t[: part.shape[0], : part.shape[1]] = part
            # Edge padding repeats the last pixel (a JPEG block at the edge then stays smooth).
            if part.shape[0] < TILE:
                t[part.shape[0] :, : part.shape[1]] = part[-1:]
            if part.shape[1] < TILE:
                t[:, part.shape[1] :] = t[:, part.shape[1] - 1 : part.shape[1]]
            out.append(((x, y, *extra, level), encode(t)))
    return out


def jpeg(t):
    buf = io.BytesIO()
    Image.fromarray(t).save(buf, "JPEG", quality=90, subsampling=0)
    return buf.getvalue()


def raw(t):
    return t.astype(t.dtype.newbyteorder("<")).tobytes()


def write_slide(out, name, sid, levels_tiles, *, size, dims_meaning, ets_dims, pixel_type, components, compression, background, channels=(), origin=(0, 0, 0), write_ets_file=True):
    preview = pattern(40, 60, 3, 9)
    stacks = [stack(1, "Overview", 1, (600, 200), external=False), stack(sid, "20x", 0, size, origin=origin, dims=dims_meaning, channels=channels)]
    write_vsi(out / f"{name}.vsi", tree(stacks), preview)
    if write_ets_file:
        write_ets(out / f"_{name}_" / f"stack{sid}" / "frame_t.ets", levels_tiles, dims=ets_dims, pixel_type=pixel_type, components=components, compression=compression, background=background)
    return preview


def main(out):
    out = Path(out)
    (out / "bad").mkdir(parents=True, exist_ok=True)
    cases = []
    w, h = 300, 220
    rgb = pyramid_of(pattern(h, w, 3, 1), 3)
    # Brightfield JPEG: 3 levels, two missing tiles at level 0, Z of one plane.
    missing = [(1, 1), (4, 0)]
    tiles = []
    for k, img in enumerate(rgb):
        tiles += tiles_of(img, k, jpeg, extra=(0,), skip=missing if k == 0 else ())
    preview = write_slide(out, "brightfield-jpeg", 10001, tiles, size=(w, h), dims_meaning=(1,), ets_dims=4, pixel_type=2, components=3, compression=2, background=(240, 230, 250))
    np.asarray(preview).tofile(out / "brightfield-jpeg.thumbnail.raw")
    cases.append({"file": "brightfield-jpeg.vsi", "ets": "_brightfield-jpeg_/stack10001/frame_t.ets", "levels": 3, "size": [w, h], "channels": [], "dtype": "uint8", "missing": missing, "tolerance": 2, "background": "F0E6FA", "z_index": 2, "c_index": None})
    # Brightfield raw: 2 levels.
    tiles = []
    for k, img in enumerate(rgb[:2]):
        tiles += tiles_of(img, k, raw, extra=(0,))
    write_slide(out, "brightfield-raw", 10001, tiles, size=(w, h), dims_meaning=(1,), ets_dims=4, pixel_type=2, components=3, compression=0, background=(255, 255, 255))
    cases.append({"file": "brightfield-raw.vsi", "ets": "_brightfield-raw_/stack10001/frame_t.ets", "levels": 2, "size": [w, h], "channels": [], "dtype": "uint8", "missing": [], "tolerance": 0, "background": "FFFFFF", "z_index": 2, "c_index": None})
    # Fluorescence: 2 channels uint16 raw, 2 Z planes, 2 levels; coordinates (x, y, z, c, level).
    fw, fh = 170, 130
    names = ["DAPI", "FITC"]
    tiles = []
    for c in range(2):
        for z in range(2):
            lv = pyramid_of(pattern(fh, fw, 1, 10 + c + 5 * z, np.uint16), 2)
            for k, img in enumerate(lv):
                tiles += tiles_of(img, k, raw, extra=(z, c))
    write_slide(out, "fluo-raw-u16", 3, tiles, size=(fw, fh), dims_meaning=(1, 4), ets_dims=5, pixel_type=4, components=1, compression=0, background=(0,), channels=names)
    cases.append({"file": "fluo-raw-u16.vsi", "ets": "_fluo-raw-u16_/stack3/frame_t.ets", "levels": 2, "size": [fw, fh], "channels": names, "dtype": "uint16", "missing": [], "tolerance": 0, "background": "000000", "z_index": 2, "c_index": 3})
    # Fluorescence: 2 channels uint16 lossless JPEG 2000 (raw codestreams, as cellSens writes).
    try:
        import imagecodecs
    except ImportError:
        imagecodecs = None
    if imagecodecs is not None:
        def j2k(t):
            return imagecodecs.jpeg2k_encode(t[:, :, 0], level=0, codecformat="J2K")

        tiles = []
        for c in range(2):
            lv = pyramid_of(pattern(fh, fw, 1, 30 + c, np.uint16), 2)
            for k, img in enumerate(lv):
                tiles += tiles_of(img, k, j2k, extra=(0, c))
        write_slide(out, "fluo-j2k-u16", 7, tiles, size=(fw, fh), dims_meaning=(1, 4), ets_dims=5, pixel_type=4, components=1, compression=3, background=(0,), channels=names)
        cases.append({"file": "fluo-j2k-u16.vsi", "ets": "_fluo-j2k-u16_/stack7/frame_t.ets", "levels": 2, "size": [fw, fh], "channels": names, "dtype": "uint16", "missing": [], "tolerance": 0, "background": "000000", "z_index": 2, "c_index": 3})
    # Bad slides.
    small = tiles_of(rgb[0][:64, :64], 0, raw, extra=(0,))
    write_slide(out / "bad", "origin", 10001, small, size=(64, 64), dims_meaning=(1,), ets_dims=4, pixel_type=2, components=3, compression=0, background=(0, 0, 0), origin=(64, 0, 0))
    write_slide(out / "bad", "no-ets", 10001, small, size=(64, 64), dims_meaning=(1,), ets_dims=4, pixel_type=2, components=3, compression=0, background=(0, 0, 0), write_ets_file=False)
    write_slide(out / "bad", "jpeg-lossless", 10001, small, size=(64, 64), dims_meaning=(1,), ets_dims=4, pixel_type=2, components=3, compression=5, background=(0, 0, 0))
    for case in cases:
        write_oracle(out, case)
    (out / "cases.json").write_text(json.dumps({"cases": cases, "mpp": MPP, "objective": MAGNIFICATION}, indent=1))


def oracle_levels(out, case, channel=0):
    """[(image, mask)] per level of `case` from :func:`decode_ets` (channel `channel`)."""
    decoded, _, dtype, comps = decode_ets(Path(out) / case["ets"], z_index=case["z_index"], c_index=case["c_index"], channel=channel)
    max_tiles = [(0, 0)] * case["levels"]
    for lv, x, y in decoded:
        mx, my = max_tiles[lv]
        max_tiles[lv] = (max(mx, x), max(my, y))
    sizes = level_sizes(*case["size"], case["levels"], max_tiles)
    return assemble(decoded, sizes, comps, dtype)


def write_oracle(out, case):
    """``<file>.L<k>.raw``: level k channel-last (all channels; little-endian), and
    ``<file>.L<k>.mask``: 1 where a tile is stored, one byte a pixel."""
    n = max(1, len(case["channels"]))
    per_channel = [oracle_levels(out, case, c) for c in range(n)]
    case["level_sizes"] = []
    for k in range(case["levels"]):
        img = np.concatenate([per_channel[c][k][0] for c in range(n)], axis=2)
        h, w = img.shape[:2]
        case["level_sizes"].append([w, h])
        img.astype(img.dtype.newbyteorder("<")).tofile(out / f"{case['file']}.L{k}.raw")
        per_channel[0][k][1].astype(np.uint8).tofile(out / f"{case['file']}.L{k}.mask")


if __name__ == "__main__":
    main(sys.argv[1])
