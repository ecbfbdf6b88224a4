"""Philips TIFF layout (OpenSlide 4.0.1 ``openslide-vendor-philips-tiff.c``): Software starts
with "Philips", IFD 0's ImageDescription is a ``DataObject ObjectType="DPUfsImport"`` XML
document with one ``WSI`` scanned image whose ``PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE``
gives one ``DICOM_PIXEL_SPACING`` per tiled IFD (OpenSlide takes the level sizes and integer
downsamples from these, clipping the TIFF's padded sizes); reduced levels carry
NewSubfileType 1; tiles of byte count 0 are missing (sparse slides); a label or macro is an
untiled IFD whose ImageDescription starts with "Label"/"Macro", else a base64 JPEG in the
XML (``PIM_DP_IMAGE_DATA`` of a ``LABELIMAGE``/``MACROIMAGE`` scanned image).

Three files:

* ``philips-sparse.tiff``: 3 levels, 64 px JPEG tiles, four level-0 tiles and two level-1
  tiles stored with offset and byte count 0; the last level's IFD is one tile column wider
  than the XML says (OpenSlide clips it, and hashes every tile of the IFD); label from an
  IFD, macro from the XML.
* ``philips-xml.tiff``: 4 levels of a 1000x700 level 0 in 128 px tiles, padded IFDs; label
  and macro both base64 JPEGs in the XML, the macro's text broken into lines with
  ``&#10;`` character references.
* ``philips-depth.tiff``: ImageDepth = TileDepth = 2 in both IFDs (Philips DP v1.1 writes
  the level count there); OpenSlide reads it as 2-D.
"""

from __future__ import annotations

import base64
import io
import pathlib
import struct
from typing import List

import numpy as np

from .common import Generated, Region, assert_close, downscale, tissue_like

SOFTWARE = "Philips DP v1.0"


def _jpeg_bytes(img: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _xml(spacings_mm: List[float], label_b64: str | None, macro_b64: str | None, derivation: str) -> str:
    reps = "".join(
        f"""<DataObject ObjectType="PixelDataRepresentation">
<Attribute Name="DICOM_PIXEL_SPACING" Group="0x0028" Element="0x0030" PMSVR="IDoubleArray">"{s:.9g}" "{s:.9g}"</Attribute>
<Attribute Name="PIIM_PIXEL_DATA_REPRESENTATION_NUMBER" Group="0x101D" Element="0x1009" PMSVR="IUInt16">{i}</Attribute>
</DataObject>
"""
        for i, s in enumerate(spacings_mm)
    )
    assoc = ""
    for kind, data in (("LABELIMAGE", label_b64), ("MACROIMAGE", macro_b64)):
        if data is None:
            continue
        assoc += f"""<DataObject ObjectType="DPScannedImage">
<Attribute Name="PIM_DP_IMAGE_TYPE" Group="0x101D" Element="0x1004" PMSVR="IString">{kind}</Attribute>
<Attribute Name="PIM_DP_IMAGE_DATA" Group="0x101D" Element="0x1005" PMSVR="IString">{data}</Attribute>
</DataObject>
"""
    return f"""<?xml version="1.0" encoding="UTF-8" ?>
<DataObject ObjectType="DPUfsImport">
<Attribute Name="DICOM_MANUFACTURER" Group="0x0008" Element="0x0070" PMSVR="IString">PHILIPS</Attribute>
<Attribute Name="DICOM_SOFTWARE_VERSIONS" Group="0x0018" Element="0x1020" PMSVR="IStringArray">"1.0" "2.0"</Attribute>
<Attribute Name="PIM_DP_UFS_BARCODE" Group="0x301D" Element="0x1002" PMSVR="IString">{base64.b64encode(b"SLIDE-0042").decode()}</Attribute>
<Attribute Name="PIM_DP_SCANNED_IMAGES" Group="0x301D" Element="0x1003" PMSVR="IDataObjectArray">
<Array>
{assoc}<DataObject ObjectType="DPScannedImage">
<Attribute Name="DICOM_DERIVATION_DESCRIPTION" Group="0x0008" Element="0x2111" PMSVR="IString">{derivation}</Attribute>
<Attribute Name="DICOM_PIXEL_SPACING" Group="0x0028" Element="0x0030" PMSVR="IDoubleArray">"{spacings_mm[0]:.9g}" "{spacings_mm[0]:.9g}"</Attribute>
<Attribute Name="PIM_DP_IMAGE_TYPE" Group="0x101D" Element="0x1004" PMSVR="IString">WSI</Attribute>
<Attribute Name="PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE" Group="0x1001" Element="0x8B01" PMSVR="IDataObjectArray">
<Array>
{reps}</Array>
</Attribute>
</DataObject>
</Array>
</Attribute>
</DataObject>
"""


def _tiles(img: np.ndarray, tile: int):
    """The JPEG tiles of ``img`` in TIFF order (edge tiles padded with the edge pixels),
    YCbCr 4:2:0 as Philips scanners write them."""
    h, w = img.shape[:2]
    th, tw = -(-h // tile), -(-w // tile)
    pad = np.pad(img, ((0, th * tile - h), (0, tw * tile - w), (0, 0)), mode="edge")
    for r in range(th):
        for c in range(tw):
            yield _jpeg_bytes(pad[r * tile : (r + 1) * tile, c * tile : (c + 1) * tile])


def _allow_precompressed_jpeg(tifffile) -> None:
    """tifffile looks up a JPEG encoder even for pre-encoded tiles (and needs imagecodecs for
    one): register a placeholder that is never called, since every tile arrives encoded."""

    def never(*_a, **_k):
        raise RuntimeError("tiles are pre-encoded")

    tifffile.TIFF.COMPRESSORS._codecs.setdefault(7, never)


def _write(path: pathlib.Path, xml: str, levels: List[np.ndarray], tile: int, label: np.ndarray | None) -> None:
    import tifffile

    _allow_precompressed_jpeg(tifffile)
    jpeg = dict(compression="jpeg", photometric="ycbcr", subsampling=(2, 2), dtype=np.uint8, metadata=None)
    with tifffile.TiffWriter(path) as tw:
        for k, img in enumerate(levels):
            tw.write(
                _tiles(img, tile),
                shape=img.shape,
                tile=(tile, tile),
                subfiletype=0 if k == 0 else 1,
                description=xml if k == 0 else None,
                software=SOFTWARE,
                **jpeg,
            )
        if label is not None:
            # One strip: a whole JPEG of the label.
            tw.write(iter([_jpeg_bytes(label)]), shape=label.shape, rowsperstrip=label.shape[0], description="Label", **jpeg)


def _blank_tiles(path: pathlib.Path, page: int, tiles: List[int]) -> None:
    """Set the offset and byte count of tiles ``tiles`` (TIFF order) of IFD ``page`` to 0."""
    import tifffile

    with tifffile.TiffFile(path) as tf:
        p = tf.pages[page]
        offs, counts = p.tags["TileOffsets"], p.tags["TileByteCounts"]
        assert offs.dtype == counts.dtype == 4 or True
        patches = []
        for tag in (offs, counts):
            size = {3: 2, 4: 4, 16: 8}[int(tag.dtype)]
            fmt = {2: "<H", 4: "<I", 8: "<Q"}[size]
            for t in tiles:
                patches.append((tag.valueoffset + t * size, struct.pack(fmt, 0)))
    with open(path, "r+b") as f:
        for off, b in patches:
            f.seek(off)
            f.write(b)


def _pad(img: np.ndarray, w: int, h: int) -> np.ndarray:
    out = np.full((h, w, 3), 255, np.uint8)
    out[: img.shape[0], : img.shape[1]] = img[:h, :w]
    return out


def _sparse(out: pathlib.Path) -> Generated:
    name = "philips-sparse.tiff"
    l0 = tissue_like(640, 448, seed=21)
    l1 = downscale(l0, 2)  # 320x224
    l2 = downscale(l0, 4)  # 160x112; the IFD is 256 wide: one extra tile column
    levels = [l0, _pad(l1, 320, 256), _pad(l2, 256, 128)]
    label = tissue_like(120, 80, seed=22)
    macro = tissue_like(200, 96, seed=23)
    macro_b64 = base64.b64encode(_jpeg_bytes(macro)).decode()
    deriv = 'tiff-useBigTIFF=0-useRgb=0-levels=40,10002,10000-processing=0-q80-sourceFilename="a-b"'
    xml = _xml([0.00025, 0.0005, 0.001], None, macro_b64, deriv)
    _write(out / name, xml, levels, 64, label)
    # Level 0: 10x7 tiles; level 1: 5x4 tiles.
    blank0, blank1 = [0, 1, 10, 35], [4, 19]
    _blank_tiles(out / name, 0, blank0)
    _blank_tiles(out / name, 1, blank1)

    def check(osr) -> None:
        got = np.asarray(osr.read_region((128, 128), 0, (192, 192)))
        assert_close(got[..., :3], l0[128:320, 128:320], 24, f"{name} level 0")
        assert (got[..., 3] == 255).all(), f"{name}: stored tiles opaque"
        miss = np.asarray(osr.read_region((0, 0), 0, (128, 64)))
        assert (miss[..., 3] == 0).all(), f"{name}: missing tiles read transparent"
        got2 = np.asarray(osr.read_region((0, 0), 2, (160, 112)))
        assert_close(got2[..., :3], l2, 24, f"{name} level 2")
        assert_close(np.asarray(osr.associated_images["macro"].convert("RGB")), macro, 24, f"{name} macro")
        assert_close(np.asarray(osr.associated_images["label"].convert("RGB")), label, 24, f"{name} label")

    return Generated(
        name=name,
        vendor="philips",
        level_dimensions=[(640, 448), (320, 224), (160, 112)],
        regions=[
            Region("l0_missing_corner", 0, (0, 0), (200, 150)),
            Region("l0_mid", 0, (100, 60), (300, 250)),
            Region("l0_missing_tile_35", 0, (300, 180), (150, 100)),
            Region("l1_missing", 1, (200, 0), (160, 150)),
            Region("l1_all", 1, (0, 0), (320, 224)),
            Region("l2_all", 2, (0, 0), (160, 112)),
            Region("l2_past_edge", 2, (400, 300), (100, 80)),
            Region("outside", 0, (600, 400), (100, 100)),
        ],
        associated=("label", "macro"),
        properties={"openslide.mpp-x": "0.25", "openslide.objective-power": "40", "openslide.barcode": "SLIDE-0042", "openslide.level[2].downsample": "4"},
        check=check,
        note="Sparse (zero byte counts), label IFD, macro in the XML, last IFD wider than the XML level.",
    )


def _xml_assoc(out: pathlib.Path) -> Generated:
    name = "philips-xml.tiff"
    l0 = tissue_like(1000, 700, seed=31)
    levels = [_pad(l0, 1024, 768)]
    for k in (2, 4, 8):
        d = downscale(l0, k)
        levels.append(_pad(d, -(-d.shape[1] // 128) * 128, -(-d.shape[0] // 128) * 128))
    label = tissue_like(96, 64, seed=32)
    macro = tissue_like(160, 80, seed=33)
    label_b64 = base64.b64encode(_jpeg_bytes(label)).decode()
    m = base64.b64encode(_jpeg_bytes(macro)).decode()
    macro_b64 = "&#10;".join(m[i : i + 76] for i in range(0, len(m), 76))
    deriv = "tiff-useBigTIFF=1-useRgb=0-levels=10003,10002,10000,10001-processing=0-q80"
    xml = _xml([0.000227273 * k for k in (1, 2, 4, 8)], label_b64, macro_b64, deriv)
    _write(out / name, xml, levels, 128, None)

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (1000, 700)))
        assert_close(got[..., :3], l0, 24, f"{name} level 0")
        assert_close(np.asarray(osr.associated_images["label"].convert("RGB")), label, 24, f"{name} label")
        assert_close(np.asarray(osr.associated_images["macro"].convert("RGB")), macro, 24, f"{name} macro")

    # OpenSlide keeps the padded level-0 size and clips the reduced levels to l0 / downsample.
    return Generated(
        name=name,
        vendor="philips",
        level_dimensions=[(1024, 768), (512, 384), (256, 192), (128, 96)],
        regions=[
            Region("l0_all", 0, (0, 0), (1024, 768)),
            Region("l0_edge", 0, (900, 600), (200, 200)),
            Region("l1_all", 1, (0, 0), (512, 384)),
            Region("l2_all", 2, (0, 0), (256, 192)),
            Region("l3_all", 3, (0, 0), (128, 96)),
            Region("l3_off", 3, (-40, 8), (100, 100)),
        ],
        associated=("label", "macro"),
        check=check,
        note="Label and macro as base64 JPEG in the XML (macro text broken by &#10; references); padded IFDs.",
    )


def _depth(out: pathlib.Path) -> Generated:
    """ImageDepth = TileDepth = 2 (the level count) in every IFD, as Philips DP v1.1 writes;
    tifffile will not write those tags, so placeholders are written and renumbered."""
    import tifffile

    name = "philips-depth.tiff"
    l0 = tissue_like(256, 192, seed=61)
    levels = [l0, downscale(l0, 2)]
    xml = _xml([0.0005, 0.001], None, None, "tiff-levels=20,10001")
    _allow_precompressed_jpeg(tifffile)
    jpeg = dict(compression="jpeg", photometric="ycbcr", subsampling=(2, 2), dtype=np.uint8, metadata=None)
    placeholders = [(32990, "I", 1, len(levels), True), (32991, "I", 1, len(levels), True)]
    with tifffile.TiffWriter(out / name) as tw:
        for k, img in enumerate(levels):
            tw.write(_tiles(img, 64), shape=img.shape, tile=(64, 64), subfiletype=0 if k == 0 else 1, description=xml if k == 0 else None, software="Philips DP v1.1", extratags=placeholders, **jpeg)
    data = bytearray((out / name).read_bytes())
    with tifffile.TiffFile(out / name) as tf:
        entries = [(p.tags[32990].offset, p.tags[32991].offset) for p in tf.pages]
    for a, b in entries:
        struct.pack_into("<H", data, a, 32997)  # ImageDepth
        struct.pack_into("<H", data, b, 32998)  # TileDepth
    (out / name).write_bytes(bytes(data))
    with tifffile.TiffFile(out / name) as tf:
        assert int(tf.pages[0].tags[32997].value) == len(levels)

    def check(osr) -> None:
        got = np.asarray(osr.read_region((0, 0), 0, (256, 192)))
        assert_close(got[..., :3], l0, 24, f"{name} level 0")

    return Generated(
        name=name,
        vendor="philips",
        level_dimensions=[(256, 192), (128, 96)],
        regions=[Region("l0_all", 0, (0, 0), (256, 192)), Region("l1_all", 1, (0, 0), (128, 96)), Region("l1_edge", 1, (200, 150), (80, 60))],
        properties={"openslide.objective-power": "20", "openslide.mpp-x": "0.5"},
        check=check,
        note="ImageDepth = TileDepth = level count in every IFD (Philips DP v1.1).",
    )


def build(out: pathlib.Path) -> List[Generated]:
    """Write the Philips files into ``out``; return what OpenSlide must report for each."""
    return [_sparse(out), _xml_assoc(out), _depth(out)]
