"""Synthetic Akoya / PerkinElmer QPTIFF slides for core/tests/qptiff.rs and py/tests/test_qptiff.py.

Usage: python scripts/vendor_slides/qptiff.py OUTDIR

Writes small QPTIFFs into OUTDIR in the layout tifffile's QPI series reader expects (tifffile
2026.3.3, ``TiffFile._series_qpi``) and the "PKI Image Format" document describes: every page
carries Software ``PerkinElmer-QPI`` and an XML ImageDescription with root
``PerkinElmer-QPI-ImageDescription`` whose ``ImageType`` names the page; pages in the order
full-resolution channel pages, ``Thumbnail``, the ``ReducedResolution`` page groups (each
level half the previous one, one page per channel), ``Overview``, ``Label``; X/YResolution in
pixels per centimeter.

* ``brightfield-deflate.qptiff``: one RGB page per level, 64x64 tiles, deflate;
* ``brightfield-jpeg.qptiff``: the same with JPEG tiles (YCbCr 4:4:4, encoded by Pillow and
  written as they are by tifffile);
* ``fluo-u8-tiled.qptiff`` / ``fluo-u16-tiled.qptiff``: 4 greyscale channel pages per level,
  uint8 deflate / uint16 deflate with predictor, tiled;
* ``fluo-u8-stripped.qptiff`` / ``fluo-u16-stripped.qptiff``: the same stored in strips
  (deflate / uncompressed);
* ``bad/``: ``bad-xml.qptiff`` (IFD 0's description does not parse), ``channel-mismatch.qptiff``
  (a reduced level with 3 pages for 4 channels).

For each slide: ``<file>.L<k>.raw`` holds the oracle's level ``k`` (tifffile's decode of each
page; Pillow's decode of each JPEG tile, as tifffile needs imagecodecs for JPEG), row-major,
channel-last (height, width, channels), little-endian; ``<file>.<name>.raw`` each associated
image (height, width, 3). ``cases.json`` lists each file's levels, channels (name, colour),
dtype, associated images, mpp and tolerance. Each tiled file is also checked against
tifffile's own QPI series (same levels and shapes). Only numpy, tifffile and Pillow are
needed; nothing is downloaded. OpenSlide 4.0.1 has no QPTIFF driver, so there is no OpenSlide
reference.
"""

import io
import json
import sys
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vendor_slides import tiffbuild as tb  # noqa: E402

MPP = 0.4977
PX_PER_CM = 1e4 / MPP
TILE = 64
CHANNELS = [
    # (Name, Biomarker or None, Color)
    ("DAPI", None, "0,0,255"),
    ("Opal 520", "CD8", "0,255,0"),
    ("Opal 570", "PD-L1", "255,255,0"),
    ("Opal 690", "", "255,0,0"),
]


def xml(image_type, name=None, biomarker=None, color=None, exposure=None):
    """A page description like the scanners' (CRLF, two-space indent, utf-16 declared)."""
    parts = [
        "<DescriptionVersion>2</DescriptionVersion>",
        "<AcquisitionSoftware>slidestream generator</AcquisitionSoftware>",
        f"<ImageType>{image_type}</ImageType>",
        "<Identifier>7d1b6d3e-4a0e-4f3c-9a52-1f2e3d4c5b6a</Identifier>",
        "<SlideID>QP-0001</SlideID>",
        "<Barcode>QPBC-42</Barcode>",
        "<ComputerName>GENERATOR</ComputerName>",
        "<IsUnmixedComponent>False</IsUnmixedComponent>",
    ]
    if exposure is not None:
        parts.append(f"<ExposureTime>{exposure}</ExposureTime>")
    if name is not None:
        parts.append(f"<Name>{name}</Name>")
    if biomarker is not None:
        parts.append(f"<Biomarker>{biomarker}</Biomarker>")
    if color is not None:
        parts.append(f"<Color>{color}</Color>")
        parts.append(f"<ExcitationFilter><Name>{name} ex</Name><Bands><Band><Cuton>440</Cuton><Cutoff>480</Cutoff></Band>"
                     "<Band><Cuton>500</Cuton><Cutoff>520</Cutoff></Band></Bands></ExcitationFilter>")
    parts += [
        "<Objective>20x [20x]</Objective>",
        "<ScanProfile>&lt;root&gt;&lt;Mode&gt;synthetic&lt;/Mode&gt;&lt;/root&gt;</ScanProfile>",
        "<ValidationCode>0123456789ABCDEF</ValidationCode>",
    ]
    body = "\r\n".join("  " + p for p in parts)
    return f'<?xml version="1.0" encoding="utf-16"?>\r\n<PerkinElmer-QPI-ImageDescription>\r\n{body}\r\n</PerkinElmer-QPI-ImageDescription>'


def pattern(h, w, c, seed, dtype=np.uint8):
    """Gradients plus noise, channel-last (h, w, c)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    top = 256 if dtype == np.uint8 else 65536
    chans = [((x * (3 + k) + y * (5 - k)) * (1 if top == 256 else 97)) % top for k in range(c)]
    a = np.stack(chans, axis=-1).astype(np.int64) + rng.integers(0, 24 if top == 256 else 4000, (h, w, c))
    return np.clip(a, 0, top - 1).astype(dtype)


def pyramid(base, n):
    """Level k is level k-1 with every other row and column (tifffile's QPI rule: shape // 2)."""
    out = [base]
    for _ in range(n - 1):
        p = out[-1]
        h, w = p.shape[0] // 2, p.shape[1] // 2
        out.append(np.ascontiguousarray(p[: 2 * h : 2, : 2 * w : 2]))
    return out


def jpeg_tiles(img):
    """Pillow JPEG tiles (quality 90, 4:4:4) of an RGB image, edge tiles padded by replication,
    and the image decoded back from them (the oracle)."""
    h, w = img.shape[:2]
    th, tw = -(-h // TILE), -(-w // TILE)
    padded = np.pad(img, ((0, th * TILE - h), (0, tw * TILE - w), (0, 0)), mode="edge")
    tiles, back = [], np.zeros_like(padded)
    for r in range(th):
        for c in range(tw):
            buf = io.BytesIO()
            Image.fromarray(padded[r * TILE:(r + 1) * TILE, c * TILE:(c + 1) * TILE]).save(buf, "JPEG", quality=90, subsampling=0)
            tiles.append(buf.getvalue())
            back[r * TILE:(r + 1) * TILE, c * TILE:(c + 1) * TILE] = np.asarray(Image.open(io.BytesIO(tiles[-1])).convert("RGB"))
    return tiles, back[:h, :w]


def write_jpeg(path, levels, assoc):
    """The brightfield layout with JPEG tiles (tifffile cannot write JPEG without imagecodecs,
    even precompressed): written with ``tiffbuild``; associated images as one uncompressed
    strip. Returns the decoded tiles of each level (the oracle)."""
    res = [(int(PX_PER_CM * 1000), 1000)]

    def rgb_tags(a, desc):
        return {256: (tb.LONG, a.shape[1]), 257: (tb.LONG, a.shape[0]), 258: (tb.SHORT, [8, 8, 8]), 270: (tb.ASCII, desc),
                277: (tb.SHORT, 3), 284: (tb.SHORT, 1), 305: (tb.ASCII, "PerkinElmer-QPI"), 282: (tb.RATIONAL, res),
                283: (tb.RATIONAL, res), 296: (tb.SHORT, 3)}

    def level(k, a):
        tiles, back = jpeg_tiles(a)
        oracle.append(back)
        tags = {**rgb_tags(a, xml("FullResolution" if k == 0 else "ReducedResolution")), 259: (tb.SHORT, 7), 262: (tb.SHORT, 6),
                322: (tb.SHORT, TILE), 323: (tb.SHORT, TILE), 530: (tb.SHORT, [1, 1])}
        return tb.Ifd(tags, tiles)

    def strip(a, image_type):
        tags = {**rgb_tags(a, xml(image_type)), 259: (tb.SHORT, 1), 262: (tb.SHORT, 2), 278: (tb.LONG, a.shape[0])}
        return tb.Ifd(tags, [np.ascontiguousarray(a).tobytes()], tiled=False)

    oracle = []
    ifds = [level(0, levels[0]), strip(assoc["thumbnail"], "Thumbnail")]
    ifds += [level(k, a) for k, a in enumerate(levels) if k > 0]
    ifds += [strip(assoc["macro"], "Overview"), strip(assoc["label"], "Label")]
    tb.write(path, ifds)
    return oracle


def write(path, levels, assoc, *, rgb, stored, jpeg=False):
    """levels[k]: (h, w, C) arrays (C channel pages, or one RGB page when ``rgb``); assoc: name -> RGB
    array for Thumbnail / Overview / Label. ``stored``: tifffile options of the pyramid pages.
    Returns the oracle levels (JPEG: the decoded tiles)."""
    if jpeg:
        return write_jpeg(path, levels, assoc)
    oracle = []
    with tifffile.TiffWriter(path) as t:
        common = dict(software="PerkinElmer-QPI", metadata=None, resolution=(PX_PER_CM, PX_PER_CM), resolutionunit="CENTIMETER")

        def pages(k, a):
            kind = "FullResolution" if k == 0 else "ReducedResolution"
            if rgb:
                t.write(a, photometric="rgb", description=xml(kind), **stored, **common)
                return
            for c, (name, marker, color) in enumerate(CHANNELS):
                t.write(np.ascontiguousarray(a[:, :, c]), photometric="minisblack",
                        description=xml(kind, name, marker, color, 100 * (c + 1)), **stored, **common)

        pages(0, levels[0])
        t.write(assoc["thumbnail"], photometric="rgb", description=xml("Thumbnail"), compression="zlib", rowsperstrip=8, **common)
        for k in range(1, len(levels)):
            pages(k, levels[k])
        t.write(assoc["macro"], photometric="rgb", description=xml("Overview"), rowsperstrip=16, **common)
        t.write(assoc["label"], photometric="rgb", description=xml("Label"), compression="zlib", **common)
    # The oracle: tifffile's decode of each page, in file order.
    n = 1 if rgb else len(CHANNELS)
    with tifffile.TiffFile(path) as t:
        idx = [list(range(n))]
        start = n + 1
        for _ in levels[1:]:
            idx.append(list(range(start, start + n)))
            start += n
        for group in idx:
            arrays = [t.pages[i].asarray() for i in group]
            oracle.append(arrays[0] if rgb else np.stack(arrays, axis=-1))
        s = t.series[0]
        assert t.is_qpi and s.kind == "qpi", path
        if t.pages[0].is_tiled:
            assert len(s.levels) == len(levels), (path, len(s.levels))
            for k, lv in enumerate(s.levels):
                want = levels[k].shape if rgb else (n, *levels[k].shape[:2])
                assert tuple(lv.shape) == want, (path, k, lv.shape, want)
    return oracle


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cases = []
    assoc = {
        "thumbnail": pattern(50, 62, 3, 11),
        "macro": pattern(90, 240, 3, 12),
        "label": pattern(70, 72, 3, 13),
    }

    def add(name, levels, oracle, rgb, dtype, tolerance=0):
        for k, a in enumerate(oracle):
            assert a.shape == levels[k].shape, (name, k, a.shape, levels[k].shape)
            if tolerance == 0:
                assert np.array_equal(a, levels[k]), (name, k)
            (out / f"{name}.L{k}.raw").write_bytes(np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())
        with tifffile.TiffFile(out / name) as t:
            pages = t.pages
            got = {"thumbnail": pages[1 if rgb else 4], "macro": pages[-2], "label": pages[-1]}
            for n, p in got.items():
                a = p.asarray()
                assert np.array_equal(a, assoc[n]), (name, n)
                (out / f"{name}.{n}.raw").write_bytes(a.tobytes())
        chans = [] if rgb else [{"name": (m or n), "color": c} for n, m, c in CHANNELS]
        cases.append({
            "file": name,
            "rgb": rgb,
            "dtype": dtype,
            "tolerance": tolerance,
            "mpp": MPP,
            "channels": chans,
            "levels": [{"width": a.shape[1], "height": a.shape[0]} for a in oracle],
            "associated": {n: [a.shape[1], a.shape[0]] for n, a in assoc.items()},
        })

    rgb = pyramid(pattern(380, 500, 3, 1), 3)
    name = "brightfield-deflate.qptiff"
    add(name, rgb, write(out / name, rgb, assoc, rgb=True, stored=dict(tile=(TILE, TILE), compression="zlib")), True, "uint8")
    name = "brightfield-jpeg.qptiff"
    # Both decoders are libjpeg(-turbo) builds: small IDCT differences allowed (as the stripped JPEG tests).
    add(name, rgb, write(out / name, rgb, assoc, rgb=True, stored={}, jpeg=True), True, "uint8", tolerance=4)

    for dtype, tag in ((np.uint8, "u8"), (np.uint16, "u16")):
        fl = pyramid(pattern(300, 410, len(CHANNELS), 2 if tag == "u8" else 3, dtype), 3)
        name = f"fluo-{tag}-tiled.qptiff"
        stored = dict(tile=(TILE, TILE), compression="zlib", predictor=(tag == "u16"))
        add(name, fl, write(out / name, fl, assoc, rgb=False, stored=stored), False, tag.replace("u", "uint"))
        name = f"fluo-{tag}-stripped.qptiff"
        stored = dict(rowsperstrip=16, compression="zlib") if tag == "u8" else dict(rowsperstrip=23)
        add(name, fl, write(out / name, fl, assoc, rgb=False, stored=stored), False, tag.replace("u", "uint"))

    bad = out / "bad"
    bad.mkdir(exist_ok=True)
    small = pyramid(pattern(128, 128, len(CHANNELS), 5), 2)
    # Level 1 with 3 pages for 4 channels.
    with tifffile.TiffWriter(bad / "channel-mismatch.qptiff") as t:
        common = dict(software="PerkinElmer-QPI", metadata=None, tile=(TILE, TILE), photometric="minisblack")
        for c, (n, m, col) in enumerate(CHANNELS):
            t.write(np.ascontiguousarray(small[0][:, :, c]), description=xml("FullResolution", n, m, col), **common)
        for c, (n, m, col) in enumerate(CHANNELS[:3]):
            t.write(np.ascontiguousarray(small[1][:, :, c]), description=xml("ReducedResolution", n, m, col), **common)
    with tifffile.TiffWriter(bad / "bad-xml.qptiff") as t:
        t.write(small[0][:, :, 0], software="PerkinElmer-QPI", metadata=None, tile=(TILE, TILE),
                description="<?xml version='1.0'?><PerkinElmer-QPI-ImageDescription><ImageType>FullResolution</Image")
    (out / "cases.json").write_text(json.dumps({"cases": cases}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
