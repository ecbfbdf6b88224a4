#!/usr/bin/env python3
"""Write a large one-level DICOM WSI file for benchmarks (issue 16): SIZE² pixels in TILE²
JPEG baseline frames (YBR_FULL_422, 4:2:2, as scanners' converters write), TILED_FULL, with a
Basic Offset Table.

usage: python benches/make_big_dicom.py OUT.dcm [--size 48000] [--tile 512] [--template FILE]

The header is taken from a DICOM WSI template (default: level 0 of the shared
``CMU-1-Small-Region-dicom``, so every attribute OpenSlide requires is there) with new UIDs and the
geometry replaced. Pixels: 64 distinct tissue-like frames (seeded), reused over the grid — every
frame is decoded on its own, so decode cost is that of distinct tiles, and writing stays fast.
Needs pydicom, numpy and Pillow.
"""
import argparse
import io
import pathlib

import numpy as np
import pydicom
from PIL import Image
from pydicom.encaps import encapsulate
from pydicom.uid import JPEGBaseline8Bit, generate_uid


def tissue_frame(rng: np.random.Generator, tile: int) -> bytes:
    """One JPEG frame: smooth pink/purple blobs with noise, quality 90, 4:2:2."""
    y, x = np.mgrid[0:tile, 0:tile].astype(np.float32) / tile
    f = np.zeros((tile, tile), np.float32)
    for _ in range(6):
        cx, cy, r = rng.random(3)
        f += np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (0.02 + 0.1 * r))
    f = np.clip(f / f.max(), 0, 1)
    noise = rng.normal(0, 12, (tile, tile, 3))
    base = np.array([235, 225, 235], np.float32) * (1 - f[..., None]) + np.array([170, 90, 160], np.float32) * f[..., None]
    rgb = np.clip(base + noise, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=90, subsampling="4:2:2")
    return buf.getvalue()


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--size", type=int, default=48000)
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--template", type=pathlib.Path,
                    default=root.parent / "shared" / "testdata" / "CMU-1-Small-Region-dicom" / "level-0-frames-0-30.dcm")
    a = ap.parse_args()
    tpl = a.template
    if tpl.is_dir() or not tpl.exists():
        d = tpl if tpl.is_dir() else tpl.parent
        # The largest file of the folder is level 0.
        tpl = max((p for p in d.iterdir() if p.is_file()), key=lambda p: p.stat().st_size)
    ds = pydicom.dcmread(tpl)
    rng = np.random.default_rng(0)
    frames = [tissue_frame(rng, a.tile) for _ in range(64)]
    across = -(-a.size // a.tile)
    n = across * across
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.SOPInstanceUID = generate_uid()
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    ds.SeriesInstanceUID = generate_uid()
    ds.ImageType = ["DERIVED", "PRIMARY", "VOLUME", "NONE"]
    ds.Rows = ds.Columns = a.tile
    ds.TotalPixelMatrixColumns = ds.TotalPixelMatrixRows = a.size
    ds.NumberOfFrames = n
    ds.PhotometricInterpretation = "YBR_FULL_422"
    ds.DimensionOrganizationType = "TILED_FULL"
    for tag in ("PerFrameFunctionalGroupsSequence", "ConcatenationUID", "InConcatenationNumber"):
        if tag in ds:
            delattr(ds, tag)
    ds.PixelData = encapsulate([frames[(i * 7919) % len(frames)] for i in range(n)], has_bot=True)
    ds["PixelData"].is_undefined_length = True
    ds.save_as(a.out, enforce_file_format=True)
    print(f"wrote {a.out}: {a.size}x{a.size}, {n} frames of {a.tile}², {a.out.stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
