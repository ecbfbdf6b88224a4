"""Stripped (untiled) TIFF pyramids for core/tests/stripped_tiff.rs and py/tests/test_stripped_tiff.py.

Usage: python scripts/vendor_slides/stripped.py OUTDIR

Writes small pyramids stored in strips (StripOffsets / StripByteCounts / RowsPerStrip, TIFF 6.0
section 3) into OUTDIR, with reduced levels as NewSubfileType pages (TIFF 6.0 section 8, bit 0)
or as SubIFDs (TIFF Technical Note 1; OME-TIFF's sub-resolutions), and for each level the
oracle's pixels: ``<name>.L<k>.raw`` (uint8, height x width x samples, row-major) decoded by
tifffile (uncompressed and deflate files, written by tifffile) or by Pillow's libtiff (LZW and
JPEG files, which tifffile cannot write or read without imagecodecs; Pillow writes them).
``cases.json`` lists each file: name, driver expected, codec, tolerance, and its levels
(width, height, samples). OpenSlide 4.0.1 refuses all of these files (its generic-tiff driver
needs a tiled IFD 0), so there is no OpenSlide reference.

Only numpy, tifffile and Pillow are needed (all in the test venv); nothing is downloaded.
"""

import json
import sys
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image


def pattern(h, w, spp, seed):
    """Smooth gradients plus noise: compressible, and every pixel differs from its neighbours."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    chans = [((x * (3 + c) + y * (5 - c)) % 256) for c in range(spp)]
    a = np.stack(chans, axis=-1).astype(np.int32) + rng.integers(0, 24, (h, w, spp))
    a = np.clip(a, 0, 255).astype(np.uint8)
    return a if spp > 1 else a[:, :, 0]


def levels(base, n):
    out = [base]
    for _ in range(n - 1):
        out.append(np.ascontiguousarray(out[-1][::2, ::2]))
    return out


def write_tifffile(path, lv, *, subifds, ome=False, **kw):
    """Level 0, then the reduced levels as SubIFDs of it or as NewSubfileType pages."""
    with tifffile.TiffWriter(path, ome=ome) as t:
        t.write(lv[0], subifds=len(lv) - 1 if subifds else None, metadata={} if ome else None, **kw)
        for a in lv[1:]:
            t.write(a, subfiletype=1, metadata=None, **kw)


def oracle_tifffile(path, n, subifds):
    with tifffile.TiffFile(path) as t:
        p0 = t.pages[0]
        assert not p0.is_tiled, path
        pages = [p0] + (list(p0.pages) if subifds else list(t.pages[1:n]))
        return [p.asarray() for p in pages[:n]]


def oracle_pillow(path, n):
    im = Image.open(path)
    out = []
    for k in range(n):
        im.seek(k)
        out.append(np.asarray(im.convert(im.mode)).copy())
    return out


def write_pillow(path, lv, compression, rps):
    ims = [Image.fromarray(a) for a in lv]
    # Every page gets NewSubfileType 1 (IFD 0 is level 0 whatever its NewSubfileType says).
    ims[0].save(path, compression=compression, save_all=True, append_images=ims[1:], tiffinfo={278: rps, 254: 1})


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cases = []

    def add(name, driver, codec, arrays, tolerance=0, layout="strips"):
        for k, a in enumerate(arrays):
            (out / f"{name}.L{k}.raw").write_bytes(np.ascontiguousarray(a).tobytes())
        lv = [{"width": a.shape[1], "height": a.shape[0], "samples": 1 if a.ndim == 2 else a.shape[2]} for a in arrays]
        cases.append({"file": name, "driver": driver, "codec": codec, "tolerance": tolerance, "levels": lv})

    rgb = levels(pattern(203, 301, 3, 1), 3)
    grey = levels(pattern(203, 301, 1, 2), 3)

    name = "generic-none-rgb-pages.tif"
    write_tifffile(out / name, rgb, subifds=False, rowsperstrip=16, photometric="rgb")
    add(name, "generic-tiff", "none", oracle_tifffile(out / name, 3, False))

    name = "generic-deflate-grey-predictor-pages.tif"
    write_tifffile(out / name, grey, subifds=False, rowsperstrip=7, compression="zlib", predictor=True, photometric="minisblack")
    add(name, "generic-tiff", "deflate", oracle_tifffile(out / name, 3, False))

    name = "generic-deflate-rgb-planar-subifds.tif"
    write_tifffile(out / name, [np.ascontiguousarray(np.moveaxis(a, -1, 0)) for a in rgb], subifds=True, rowsperstrip=10, compression="adobe_deflate", planarconfig="separate", photometric="rgb")
    add(name, "generic-tiff", "deflate", [np.moveaxis(a, 0, -1) for a in oracle_tifffile(out / name, 3, True)])

    name = "ome-deflate-rgb-subifds.ome.tif"
    write_tifffile(out / name, rgb, subifds=True, ome=True, rowsperstrip=32, compression="zlib", photometric="rgb")
    add(name, "ome-tiff", "deflate", oracle_tifffile(out / name, 3, True))

    name = "ome-none-grey-subifds.ome.tif"
    write_tifffile(out / name, grey, subifds=True, ome=True, rowsperstrip=1000, photometric="minisblack")
    add(name, "ome-tiff", "none", oracle_tifffile(out / name, 3, True))

    name = "pillow-lzw-rgb-pages.tif"
    write_pillow(out / name, rgb, "tiff_lzw", 16)
    add(name, "generic-tiff", "lzw", oracle_pillow(out / name, 3))

    name = "pillow-lzw-grey-pages.tif"
    write_pillow(out / name, grey, "tiff_lzw", 9)
    add(name, "generic-tiff", "lzw", oracle_pillow(out / name, 3))

    name = "pillow-jpeg-rgb-pages.tif"
    write_pillow(out / name, rgb, "jpeg", 16)
    # Both decoders are libjpeg(-turbo) builds; allow small IDCT differences.
    add(name, "generic-tiff", "jpeg", oracle_pillow(out / name, 3), tolerance=4)

    # One uncompressed strip of 3000 x 800 grey pixels (9.6 MB as RGBA): indexed as row bands.
    band = levels(pattern(800, 3000, 1, 3), 2)
    name = "generic-none-grey-one-strip.tif"
    write_tifffile(out / name, band, subifds=False, rowsperstrip=800, photometric="minisblack")
    add(name, "generic-tiff", "none", oracle_tifffile(out / name, 2, False))

    for c in cases:
        # The files are stripped, every level.
        with tifffile.TiffFile(out / c["file"]) as t:
            pages = [t.pages[0]] + list(t.pages[0].pages or []) + list(t.pages[1:])
            assert all(not p.is_tiled for p in pages), c["file"]
    (out / "cases.json").write_text(json.dumps({"cases": cases}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
