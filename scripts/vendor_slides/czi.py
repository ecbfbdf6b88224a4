"""Zeiss CZI (ZISRAW) slides: Axioscan-style slide scans and small microscopy files.

    python scripts/vendor_slides/czi.py OUT_DIR     # every slide, with cases.json

The segment layout follows OpenSlide's zeiss driver structures, czifile's reader and
OpenSlide's CZI ImHex pattern (see ``core/src/format/zeiss/segments.rs``): a file header, the
metadata XML, one ``ZISRAWSUBBLOCK`` segment per subblock (its directory entry, padding to
256 bytes, a small XML, the pixels), the subblock directory, attachments and their directory.

Slide scans (``build``; OpenSlide 4.0.1 reads them, ``make_vendor_slides.py`` writes their
references): two scenes of overlapping level-0 subblocks of several sizes, each subblock
tinted so overlaps show which one is on top (the later directory entry, as OpenSlide 4.0.1
paints them, listed against their ``M`` order), pyramid
subblocks at downsample 2 (both scenes) and 4 (the first scene only, so not a level: not
every scene has it), a negative origin, Label and SlidePreview attachments (embedded CZIs) and
a JPEG Thumbnail. Pixel types Bgr24 and Bgr48; uncompressed, zstd0 and zstd1 (HiLo packing
for Bgr48). ``build_czifile_only`` writes what OpenSlide 4.0.1 does not read: JPEG XR (BGR24,
whose container says 24bppBGR, as Zeiss's), and Gray8/Gray16 channels with a Z dimension.
"""

from __future__ import annotations

import io
import json
import pathlib
import struct
import sys
import uuid
from typing import List

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from vendor_slides.common import Generated, Region, assert_close, tissue_like  # noqa: E402
else:
    from .common import Generated, Region, assert_close, tissue_like

PIXEL = {"Gray8": (0, 1, np.uint8), "Gray16": (1, 1, np.uint16), "Bgr24": (3, 3, np.uint8), "Bgr48": (4, 3, np.uint16)}
COMP = {"none": 0, "jpegxr": 4, "zstd0": 5, "zstd1": 6}
RGB24 = bytes.fromhex("24c3dd6f034efe4bb1853d77768dc90d")  # jxrlib's GUID_PKPixelFormat24bppRGB


def segment(sid: str, data: bytes) -> bytes:
    """A segment: 16-byte id, allocated and used size, data padded to 32 bytes."""
    pad = (-len(data)) % 32
    return sid.encode().ljust(16, b"\0") + struct.pack("<qq", len(data) + pad, len(data)) + data + b"\0" * pad


def encode(px: np.ndarray, comp: str, hilo: bool = True) -> bytes:
    """Pixels (stored order: B, G, R) as a subblock's data."""
    raw = np.ascontiguousarray(px).astype(px.dtype.newbyteorder("<")).tobytes()
    if comp == "none":
        return raw
    import imagecodecs
    z = lambda b: imagecodecs.zstd_encode(b, level=3)
    if comp == "zstd0":
        return z(raw)
    if comp == "zstd1":
        if hilo and px.dtype == np.uint16:
            b = np.frombuffer(raw, np.uint8)
            return bytes([3, 1, 1]) + z(b[0::2].tobytes() + b[1::2].tobytes())
        return bytes([3, 1, 0]) + z(raw)
    if px.ndim == 3:
        # The encoder takes R, G, B: the colours, not the stored order. The container then says
        # 24bppBGR (memory blue first, as Zeiss's files): the same codestream, decoded to B, G, R.
        px = px[..., ::-1]
    b = bytearray(imagecodecs.jpegxr_encode(np.ascontiguousarray(px), level=1.0))
    if px.ndim == 3 and px.dtype == np.uint8:
        i = b.find(RGB24)
        b[i + 15] = 0x0C  # 24bppRGB -> 24bppBGR
    return bytes(b)


def dv_entry(pixel: str, comp: str, pos: int, dims) -> bytes:
    e = b"DV" + struct.pack("<iqiiB5si", PIXEL[pixel][0], pos, 0, COMP[comp], 2 if any(d[0] == "X" and d[2] != d[3] for d in dims) else 0, b"", len(dims))
    for name, start, size, stored in dims:
        e += name.encode().ljust(4, b"\0") + struct.pack("<iifi", start, size, 0.0, stored)
    return e


def czi_bytes(subblocks, xml: str = "", attachments=(), guid: bytes = b"") -> bytes:
    """A CZI file: ``subblocks`` as (pixel type, compression, dims [(name, start, size, stored)],
    data), listed in the directory in that order; ``attachments`` as (name, type, bytes)."""
    guid = guid or uuid.uuid5(uuid.NAMESPACE_URL, xml + str(len(subblocks))).bytes
    body = bytearray(b"\0" * (32 + 512))
    meta_pos = len(body)
    x = xml.encode()
    body += segment("ZISRAWMETADATA", struct.pack("<ii", len(x), 0) + b"\0" * 248 + x)
    entries = []
    for pixel, comp, dims, data in subblocks:
        pos = len(body)
        e = dv_entry(pixel, comp, pos, dims)
        m = b"<METADATA><Tags /></METADATA>"
        head = struct.pack("<iiq", len(m), 0, len(data)) + e
        head += b"\0" * max(0, 256 - len(head))
        body += segment("ZISRAWSUBBLOCK", head + m + data)
        entries.append(e)
    dir_pos = len(body)
    body += segment("ZISRAWDIRECTORY", struct.pack("<i", len(entries)) + b"\0" * 124 + b"".join(entries))
    att_entries = []
    for name, ftype, data in attachments:
        pos = len(body)
        a = b"A1" + b"\0" * 10 + struct.pack("<qi", pos, 0) + uuid.uuid5(uuid.NAMESPACE_URL, name).bytes + ftype.encode().ljust(8, b"\0") + name.encode().ljust(80, b"\0")
        body += segment("ZISRAWATTACH", struct.pack("<i", len(data)) + b"\0" * 12 + a + b"\0" * 112 + data)
        att_entries.append(a)
    att_pos = 0
    if att_entries:
        att_pos = len(body)
        body += segment("ZISRAWATTDIR", struct.pack("<i", len(att_entries)) + b"\0" * 252 + b"".join(att_entries))
    hdr = struct.pack("<iiii16s16siqqiq", 1, 0, 0, 0, guid, guid, 0, dir_pos, meta_pos, 0, att_pos)
    body[:32 + 512] = segment("ZISRAWFILE", hdr + b"\0" * (512 - len(hdr)))
    return bytes(body)


def metadata_xml(size, scenes: int, pixel: str, channels=("TL Brightfield",), barcode: str = "SS-0001") -> str:
    chans = "".join(f'<Channel Id="Channel:{i}" Name="{n}"><ExposureTime>{100 + i}</ExposureTime></Channel>' for i, n in enumerate(channels))
    return (
        "<ImageDocument><Metadata>"
        "<Experiment><ExperimentBlocks /></Experiment>"
        f"<Information><Image><SizeX>{size[0]}</SizeX><SizeY>{size[1]}</SizeY><SizeS>{scenes}</SizeS><SizeC>{len(channels)}</SizeC>"
        f"<PixelType>{pixel}</PixelType><ComponentBitCount>{8 if pixel in ('Gray8', 'Bgr24') else 12}</ComponentBitCount>"
        '<ObjectiveSettings><ObjectiveRef Id="Objective:1" /></ObjectiveSettings>'
        f"<Dimensions><Channels>{chans}</Channels>"
        '<S><Scenes><Scene Index="0" Name="Scene A"><CenterPosition>1,2</CenterPosition></Scene><Scene Index="1" Name="Scene B" /></Scenes></S></Dimensions></Image>'
        '<Instrument><Microscopes><Microscope Id="Microscope:1" Name="Axioscan 7" /></Microscopes>'
        '<Objectives><Objective Id="Objective:1" Name="Plan-Apochromat 20x/0.8"><NominalMagnification>20</NominalMagnification></Objective></Objectives>'
        '<Detectors><Detector Id="Detector:1"><GammaDefault>0.45</GammaDefault></Detector></Detectors></Instrument></Information>'
        f'<Scaling><Items><Distance Id="X"><Value>2.2E-07</Value><DefaultUnitFormat>µm</DefaultUnitFormat></Distance><Distance Id="Y"><Value>2.2E-07</Value></Distance></Items></Scaling>'
        f'<DisplaySetting><Channels><Channel Id="Channel:0" Name="TL Brightfield"><Gamma>0.45</Gamma></Channel></Channels></DisplaySetting>'
        f'<AttachmentInfos><AttachmentInfo Id="Label"><Label><Barcodes><Barcode Id="Barcode:1"><Content>{barcode}</Content></Barcode></Barcodes></Label></AttachmentInfo></AttachmentInfos>'
        "</Metadata></ImageDocument>"
    )


def scan(pixel: str, comp: str, hilo: bool = True, seed: int = 0, deep: bool = False):
    """An Axioscan-style scan: (subblocks, truth per level as RGBA uint8 / native arrays,
    level sizes). Two scenes; level-0 subblocks of 160x128 (edges smaller) advancing 150x120,
    tinted per subblock, painted by M; pyramid subblocks of 128x96 at downsample 2 (both
    scenes) and 4 (the first; both when ``deep``)."""
    ox, oy = -4096, 2048  # the file's origin: positions are relative to the top-left subblock
    scenes = [(0, 0, 610, 400), (720, 40, 380, 300)]
    size = (1100, 400)
    wide = PIXEL[pixel][2] == np.uint16
    canvas = np.zeros((size[1], size[0], 4), np.uint16 if wide else np.uint8)
    subs, paint = [], []
    m = 0
    for s, (sx, sy, sw, sh) in enumerate(scenes):
        base = tissue_like(sw, sh, seed=seed + s).astype(np.uint16)
        for ty in range(0, sh - 8, 120):
            for tx in range(0, sw - 10, 150):
                w, h = min(160, sw - tx), min(128, sh - ty)
                tint = (m * 23) % 40
                px = np.clip(base[ty:ty + h, tx:tx + w] + tint, 0, 255)
                if wide:
                    px = px * 257 - (m * 11 % 200)
                px = px.astype(PIXEL[pixel][2])
                paint.append((m, sx + tx, sy + ty, px))
                dims = [("X", ox + sx + tx, w, w), ("Y", oy + sy + ty, h, h), ("C", 0, 1, 1), ("S", s, 1, 1), ("M", m, 1, 1)]
                subs.append((pixel, comp, dims, encode(px[..., ::-1], comp, hilo)))
                m += 1
    # The directory lists them in reverse M order: OpenSlide 4.0.1 paints in directory order
    # (a later entry on top) whatever M says, and so does slidestream.
    subs.reverse()
    for _, x, y, px in reversed(paint):
        canvas[y:y + px.shape[0], x:x + px.shape[1], :3] = px
        canvas[y:y + px.shape[0], x:x + px.shape[1], 3] = 65535 if wide else 255
    levels = [canvas]
    for ds in (2, 4):
        lv = np.zeros((size[1] // ds, size[0] // ds, 4), canvas.dtype)
        for s, (sx, sy, sw, sh) in enumerate(scenes):
            if ds == 4 and s == 1 and not deep:
                continue
            small = canvas[sy:sy + sh:ds, sx:sx + sw:ds]
            for ty in range(0, small.shape[0], 96):
                for tx in range(0, small.shape[1], 128):
                    px = small[ty:ty + 96, tx:tx + 128]
                    h, w = px.shape[:2]
                    dims = [("X", ox + sx + tx * ds, w * ds, w), ("Y", oy + sy + ty * ds, h * ds, h), ("C", 0, 1, 1), ("S", s, 1, 1), ("M", 0, 1, 1)]
                    subs.append((pixel, comp, dims, encode(np.ascontiguousarray(px[..., 2::-1]), comp, hilo)))
                    lv[sy // ds + ty:sy // ds + ty + h, sx // ds + tx:sx // ds + tx + w] = px
        levels.append(lv)
    nlev = 3 if deep else 2
    return subs, levels[:nlev], [(size[0] // d, size[1] // d) for d in (1, 2, 4)][:nlev], size


def to8(a: np.ndarray) -> np.ndarray:
    """RGBA as OpenSlide shows it: 16-bit samples keep their high byte."""
    return (a >> 8).astype(np.uint8) if a.dtype == np.uint16 else a


def attachments(seed: int):
    from PIL import Image
    label = tissue_like(120, 80, seed=seed + 10)
    preview = tissue_like(200, 80, seed=seed + 11)
    thumb = tissue_like(110, 40, seed=seed + 12)
    one = lambda px, comp: czi_bytes([("Bgr24", comp, [("X", 0, px.shape[1], px.shape[1]), ("Y", 0, px.shape[0], px.shape[0]), ("C", 0, 1, 1)], encode(px[..., ::-1], comp))])
    buf = io.BytesIO()
    Image.fromarray(thumb).save(buf, "JPEG", quality=95)
    atts = [("Label", "CZI", one(label, "none")), ("SlidePreview", "CZI", one(preview, "zstd0")), ("Thumbnail", "JPG", buf.getvalue()), ("TimeStamps", "CZTIMS", b"\0" * 16)]
    return atts, {"label": label, "macro": preview, "thumbnail": thumb}


def write_scan(path: pathlib.Path, pixel: str, comp: str, hilo: bool = True, seed: int = 0, deep: bool = False):
    subs, levels, dims, size = scan(pixel, comp, hilo, seed, deep)
    atts, assoc = attachments(seed)
    path.write_bytes(czi_bytes(subs, metadata_xml(size, 2, pixel), atts))
    return levels, dims, assoc


def _check(levels, assoc):
    def check(osr):
        for k, want in enumerate(levels):
            got = np.asarray(osr.read_region((0, 0), k, osr.level_dimensions[k]))
            assert_close(got, to8(want), 0, f"level {k}")
        for name, want in assoc.items():
            got = np.asarray(osr.associated_images[name].convert("RGB"))
            assert_close(got, want, 6 if name == "thumbnail" else 0, name)
    return check


def build(out: pathlib.Path) -> List[Generated]:
    """The slide scans OpenSlide 4.0.1 reads (uncompressed, zstd0, zstd1; Bgr24, Bgr48)."""
    slides = []
    for name, pixel, comp, hilo, deep in [("czi-bgr24-raw.czi", "Bgr24", "none", False, False), ("czi-bgr24-zstd0.czi", "Bgr24", "zstd0", False, True),
                                          ("czi-bgr24-zstd1.czi", "Bgr24", "zstd1", False, False), ("czi-bgr48-zstd1-hilo.czi", "Bgr48", "zstd1", True, False)]:
        levels, dims, assoc = write_scan(out / name, pixel, comp, hilo, seed=len(slides) * 3, deep=deep)
        slides.append(Generated(
            name=name, vendor="zeiss", level_dimensions=dims, associated=["label", "macro", "thumbnail"],
            properties={"openslide.mpp-x": "0.22", "openslide.objective-power": "20", "openslide.region[1].x": "720",
                        "zeiss.Information.Image.PixelType": pixel, "zeiss.Scaling.Items.X.Value": "2.2E-07"},
            regions=[Region("all_l0", 0, (0, 0), dims[0]), Region("overlaps_l0", 0, (130, 100), (200, 160)), Region("gap", 0, (600, 0), (140, 80)),
                     Region("past_edge", 0, (1000, 350), (200, 100)), Region("l1", 1, (0, 0), dims[1]), Region(f"l{len(dims) - 1}", len(dims) - 1, (0, 0), dims[-1])],
            check=_check(levels, assoc),
            note=f"2 scenes, overlapping subblocks painted by M, pyramid subblocks, {pixel} {comp}{' HiLo' if hilo and pixel == 'Bgr48' else ''}, label/macro/thumbnail",
        ))
    return slides


def build_czifile_only(out: pathlib.Path) -> List[dict]:
    """Files OpenSlide 4.0.1 refuses (JPEG XR, grey channels); cases for czifile comparisons."""
    cases = []
    levels, dims, _ = write_scan(out / "czi-bgr24-jpegxr.czi", "Bgr24", "jpegxr", seed=20, deep=True)
    cases.append({"file": "czi-bgr24-jpegxr.czi", "levels": dims, "channels": ["R", "G", "B"]})
    for name, pixel, comp in [("czi-gray16-2ch-zstd1.czi", "Gray16", "zstd1"), ("czi-gray8-3ch-jpegxr.czi", "Gray8", "jpegxr")]:
        nch = 2 if pixel == "Gray16" else 3
        rng = np.random.default_rng(len(cases))
        subs = []
        m = 0
        for z in (0, 1):
            for c in range(nch):
                for (x, y) in [(-100, -50), (90, -50), (-100, 60), (90, 60)]:
                    px = (rng.integers(0, 4096 if pixel == "Gray16" else 256, (128, 200))).astype(PIXEL[pixel][2])
                    dims = [("Z", z, 1, 1), ("C", c, 1, 1), ("M", m % 4, 1, 1), ("Y", y, 128, 128), ("X", x, 200, 200)]
                    subs.append((pixel, comp, dims, encode(px, comp)))
                    m += 1
        names = [f"Dye {c}" for c in range(nch)]
        (out / name).write_bytes(czi_bytes(subs, metadata_xml((200, 128), 1, pixel, names)))
        cases.append({"file": name, "levels": [(390, 238)], "channels": names})
    return cases


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    slides = build(out)
    cases = [{"file": s.name, "levels": s.level_dimensions, "channels": ["R", "G", "B"]} for s in slides] + build_czifile_only(out)
    (out / "cases.json").write_text(json.dumps({"cases": cases}, indent=1))
    print(f"{len(cases)} CZI files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
