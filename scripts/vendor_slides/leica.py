"""Leica SCN layout (OpenSlide 4.0.1 ``openslide-vendor-leica.c``): IFD 0 is tiled and its
ImageDescription is ``scn`` XML in the 2010/10/01 namespace: a ``collection`` (slide size in
nm, base64 barcode) of ``image`` elements, each with a ``view`` (size and offset in nm),
``pixels/dimension`` entries (one IFD each, z-plane 0) and an illumination source. The image
whose view is the whole collection is the macro; brightfield others are main images;
level sizes are the collection's size at each dimension's nm per pixel, the main image
placed at its offset (the rest transparent). ``openslide.region[i]`` / ``bounds-*`` give the
main images' level-0 rectangles; mpp from the main image's XResolution in px/cm.

``leica-scn.tiff`` (and ``leica-scn-2010-03.tiff``, the same in the older namespace with a
barcode attribute): a 1024x768 slide (500 nm per pixel), main image 512x384 at (256, 256)
in 3 dimensions (32 px JPEG tiles), a 320x240 macro in 2 dimensions, and a fluorescence
image that OpenSlide skips (so the quickhash covers the macro's smallest dimension).
``leica-two-areas.tiff``: two brightfield main images composited into each level
(``openslide.region[0..1]``, bounds their union), quickhash over the macro.
Offsets and sizes are whole tiles at every level.
"""

from __future__ import annotations

import base64
import pathlib
from typing import List

import numpy as np

from .common import Generated, Region, assert_close, downscale, tissue_like
from .philips import _allow_precompressed_jpeg, _tiles

NS = "http://www.leica-microsystems.com/scn/2010/10/01"
NS_OLD = "http://www.leica-microsystems.com/scn/2010/03/10"
NM_PER_PX = 500
SLIDE = (1024, 768)
MAIN = (512, 384)
OFFSET = (256, 256)


def _image(name: str, dims, view, objective: str, source: str, aperture: str) -> str:
    d = "".join(f'<dimension sizeX="{w}" sizeY="{h}" r="{r}" c="0" ifd="{ifd}"/>\n' for r, (w, h, ifd) in enumerate(dims))
    return f"""<image name="{name}" uuid="urn:uuid:{name}">
<creationDate>2026-01-02T03:04:05.06Z</creationDate>
<device model="Leica SCN400;Leica SCN" version="1.5.1.10864 2012/05/10 13:29:07;1.5.1.10804"/>
<pixels sizeX="{dims[0][0]}" sizeY="{dims[0][1]}">
{d}</pixels>
<view sizeX="{view[0]}" sizeY="{view[1]}" offsetX="{view[2]}" offsetY="{view[3]}" spacingZ="0"/>
<scanSettings>
<objectiveSettings><objective>{objective}</objective></objectiveSettings>
<illuminationSettings><numericalAperture>{aperture}</numericalAperture><illuminationSource>{source}</illuminationSource></illuminationSettings>
</scanSettings>
</image>
"""


def _two_areas(out: pathlib.Path) -> Generated:
    """Two brightfield main images composited into each level, plus a macro."""
    import tifffile

    name = "leica-two-areas.tiff"
    cw, ch = SLIDE[0] * NM_PER_PX, SLIDE[1] * NM_PER_PX
    a, b = tissue_like(256, 256, seed=51), tissue_like(384, 256, seed=52)
    pos_a, pos_b = (128, 128), (512, 384)
    macro = tissue_like(256, 192, seed=53)
    view = lambda img, pos: (img.shape[1] * NM_PER_PX, img.shape[0] * NM_PER_PX, pos[0] * NM_PER_PX, pos[1] * NM_PER_PX)
    dims = lambda img, first: [(img.shape[1] >> k, img.shape[0] >> k, first + k) for k in range(3)]
    xml = f"""<?xml version="1.0" encoding="utf-8"?>
<scn xmlns="{NS}">
<collection name="two" uuid="urn:uuid:two" sizeX="{cw}" sizeY="{ch}">
<barcode>{base64.b64encode(b"TWO").decode()}</barcode>
{_image("macro", [(256, 192, 0)], (cw, ch, 0, 0), "5", "brightfield", "0.1")}{_image("a", dims(a, 1), view(a, pos_a), "20", "brightfield", "0.4")}{_image("b", dims(b, 4), view(b, pos_b), "20", "brightfield", "0.4")}</collection>
</scn>
"""
    jpeg = dict(compression="jpeg", photometric="ycbcr", subsampling=(2, 2), dtype=np.uint8, metadata=None)
    px_per_cm = 1e7 / NM_PER_PX
    with tifffile.TiffWriter(out / name, bigtiff=True) as tw:
        tw.write(_tiles(macro, 64), shape=macro.shape, tile=(64, 64), description=xml, **jpeg)
        for img in (a, b):
            for k in range(3):
                d = downscale(img, 2**k)
                r = px_per_cm / 2**k
                tw.write(_tiles(d, 32), shape=d.shape, tile=(32, 32), resolution=(r, r), resolutionunit="CENTIMETER", **jpeg)

    def check(osr) -> None:
        for img, (x, y) in ((a, pos_a), (b, pos_b)):
            got = np.asarray(osr.read_region((x, y), 0, (img.shape[1], img.shape[0])))
            assert_close(got[..., :3], img, 24, f"{name} area at {(x, y)}")
        gap = np.asarray(osr.read_region((400, 100), 0, (100, 250)))
        assert (gap[..., 3] == 0).all(), f"{name}: between the areas is transparent"

    return Generated(
        name=name,
        vendor="leica",
        level_dimensions=[(1024, 768), (512, 384), (256, 192)],
        regions=[
            Region("l0_all", 0, (0, 0), (1024, 768)),
            Region("l0_a", 0, (100, 100), (300, 300)),
            Region("l0_b_edge", 0, (850, 600), (100, 100)),
            Region("l1_all", 1, (0, 0), (512, 384)),
            Region("l2_all", 2, (0, 0), (256, 192)),
        ],
        associated=("macro",),
        properties={"openslide.region[1].x": "512", "openslide.bounds-x": "128", "openslide.bounds-width": "768", "openslide.bounds-height": "512"},
        check=check,
        note="Two main images (areas) per level at whole-tile offsets; quickhash over the macro.",
    )


def build(out: pathlib.Path) -> List[Generated]:
    """Write the Leica files into ``out``; return what OpenSlide must report for each."""
    return [_one_area(out), _two_areas(out), _one_area(out, old_namespace=True)]


def _one_area(out: pathlib.Path, old_namespace: bool = False) -> Generated:
    """One main image; with ``old_namespace``, the 2010/03/10 namespace, whose barcode is a
    ``collection`` attribute taken as is."""
    import tifffile

    _allow_precompressed_jpeg(tifffile)
    name = "leica-scn-2010-03.tiff" if old_namespace else "leica-scn.tiff"
    ns = NS_OLD if old_namespace else NS
    barcode_attr = ' barcode="OLD-42"' if old_namespace else ""
    barcode_elem = "" if old_namespace else f"<barcode>{base64.b64encode(b'LEICA-7').decode()}</barcode>"
    cw, ch = SLIDE[0] * NM_PER_PX, SLIDE[1] * NM_PER_PX
    main = tissue_like(*MAIN, seed=41)
    mains = [main, downscale(main, 2), downscale(main, 4)]
    macro = tissue_like(320, 240, seed=42)
    macros = [macro, downscale(macro, 2)]
    fluo = tissue_like(64, 64, seed=43)
    xml = f"""<?xml version="1.0" encoding="utf-8"?>
<scn xmlns="{ns}">
<collection name="gen" uuid="urn:uuid:gen" sizeX="{cw}" sizeY="{ch}"{barcode_attr}>
{barcode_elem}
{_image("macro", [(320, 240, 0), (160, 120, 1)], (cw, ch, 0, 0), "5", "brightfield", "0.1")}{_image("main", [(512, 384, 2), (256, 192, 3), (128, 96, 4)], (MAIN[0] * NM_PER_PX, MAIN[1] * NM_PER_PX, OFFSET[0] * NM_PER_PX, OFFSET[1] * NM_PER_PX), "20", "brightfield", "0.4")}{_image("fluo", [(64, 64, 5)], (64 * NM_PER_PX, 64 * NM_PER_PX, 10000, 10000), "20", "fluorescence", "0.4")}</collection>
</scn>
"""
    jpeg = dict(compression="jpeg", photometric="ycbcr", subsampling=(2, 2), dtype=np.uint8, metadata=None)
    px_per_cm = 1e7 / NM_PER_PX
    with tifffile.TiffWriter(out / name, bigtiff=True) as tw:
        for k, img in enumerate(macros):
            tw.write(_tiles(img, 64), shape=img.shape, tile=(64, 64), description=xml if k == 0 else None, **jpeg)
        for k, img in enumerate(mains):
            r = px_per_cm / 2**k
            tw.write(_tiles(img, 32), shape=img.shape, tile=(32, 32), resolution=(r, r), resolutionunit="CENTIMETER", **jpeg)
        tw.write(_tiles(fluo, 32), shape=fluo.shape, tile=(32, 32), **jpeg)

    def check(osr) -> None:
        x, y = OFFSET
        got = np.asarray(osr.read_region((x, y), 0, MAIN))
        assert_close(got[..., :3], main, 24, f"{name} main image at its offset")
        assert (got[..., 3] == 255).all()
        outside = np.asarray(osr.read_region((0, 0), 0, (256, 256)))
        assert (outside[..., 3] == 0).all(), f"{name}: outside the main image is transparent"
        got2 = np.asarray(osr.read_region((x, y), 2, (128, 96)))
        assert_close(got2[..., :3], mains[2], 24, f"{name} level 2")
        assert_close(np.asarray(osr.associated_images["macro"].convert("RGB")), macro, 24, f"{name} macro")

    return Generated(
            name=name,
            vendor="leica",
            level_dimensions=[(1024, 768), (512, 384), (256, 192)],
            regions=[
                Region("l0_main", 0, OFFSET, MAIN),
                Region("l0_corner_edge", 0, (200, 220), (200, 150)),
                Region("l0_all", 0, (0, 0), (1024, 768)),
                Region("l1_all", 1, (0, 0), (512, 384)),
                Region("l2_all", 2, (0, 0), (256, 192)),
                Region("l1_edge", 1, (700, 600), (100, 60)),
            ],
            associated=("macro",),
            properties={
                "openslide.mpp-x": "0.5",
                "openslide.objective-power": "20",
                "openslide.bounds-x": "256",
                "openslide.bounds-width": "512",
                "leica.illumination-source": "brightfield",
                "openslide.barcode": "OLD-42" if old_namespace else "LEICA-7",
            },
            check=check,
            note="Main image at a whole-tile offset, macro, a fluorescence image OpenSlide skips.",
        )
