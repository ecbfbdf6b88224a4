#!/usr/bin/env python3
"""Random 256² level-0 patches of the CMU DICOM WSI (12 files, JPEG 500×500 frames):
slidestream vs OpenSlide, CPU, one thread, in the same run (issue 16), and the difference
between this DICOM slide and ``CMU-1-Small-Region.svs`` (the same scan) at level 0.

usage: python benches/dicom_patches.py [--testdata ../shared/testdata] [--patches 1000]
                                       [--rounds 3] [--patch 256]

One thread: ``RAYON_NUM_THREADS=1`` and ``SLIDESTREAM_IO_DEPTH=1`` (set before slidestream is
imported); OpenSlide's ``read_region`` is single-threaded. Each round opens fresh handles
(default caches), reads the same seeded locations, readers alternate which goes first;
patches/s per round and the median are printed, plus a pixel check against OpenSlide.

SVS comparison: the DICOM frames are JFIF YCbCr JPEGs labelled Photometric RGB; OpenSlide
(and slidestream) show them without colour conversion. The script reports the mean and max
absolute difference from the SVS level 0 over the whole image both as labelled (slidestream's
read) and with the frames decoded as YCbCr (Pillow, which follows the JFIF marker), i.e. what
the JPEG re-encoding alone costs.
"""
import argparse
import os
import pathlib
import random
import statistics
import struct

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["SLIDESTREAM_IO_DEPTH"] = "1"

import io  # noqa: E402

import numpy as np  # noqa: E402
import openslide  # noqa: E402
from PIL import Image  # noqa: E402

import slidestream  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def frames_as_ycbcr(path: pathlib.Path, width: int, height: int, tile: int) -> np.ndarray:
    """Level 0 of a one-file DICOM level (empty Basic Offset Table, one item per frame,
    TILED_FULL) with each frame decoded by Pillow (JFIF: YCbCr → RGB)."""
    data = path.read_bytes()
    pix = data.rfind(b"\xe0\x7f\x10\x00OB")
    pos = pix + 12
    tag, n = struct.unpack_from("<4sI", data, pos)
    pos += 8 + n  # the Basic Offset Table
    out = np.zeros((height, width, 3), np.uint8)
    cols = -(-width // tile)
    k = 0
    while data[pos : pos + 4] == b"\xfe\xff\x00\xe0":
        n = struct.unpack_from("<I", data, pos + 4)[0]
        img = np.asarray(Image.open(io.BytesIO(data[pos + 8 : pos + 8 + n])).convert("RGB"))
        y, x = (k // cols) * tile, (k % cols) * tile
        h, w = min(tile, height - y), min(tile, width - x)
        out[y : y + h, x : x + w] = img[:h, :w]
        pos += 8 + n
        k += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", type=pathlib.Path, default=ROOT.parent / "shared" / "testdata")
    ap.add_argument("--patches", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--patch", type=int, default=256)
    a = ap.parse_args()
    slide = a.testdata / "CMU-1-Small-Region-dicom" / "level-0-frames-0-30.dcm"
    sz = a.patch
    with openslide.OpenSlide(str(slide)) as o:
        w, h = o.dimensions
    print(f"{slide}: {w}x{h}, {a.patches} random {sz}² level-0 patches, {a.rounds} rounds, one thread")
    res = {"slidestream": [], "openslide": []}
    for r in range(a.rounds):
        rng = random.Random(r)
        locs = [(rng.randrange(w - sz), rng.randrange(h - sz)) for _ in range(a.patches)]
        for reader in (["slidestream", "openslide"] if r % 2 == 0 else ["openslide", "slidestream"]):
            s = slidestream.Slide(str(slide)) if reader == "slidestream" else openslide.OpenSlide(str(slide))
            t0 = time_now()
            for loc in locs:
                s.read_region(loc, 0, (sz, sz))
            res[reader].append(a.patches / (time_now() - t0))
            s.close()
        print(f"round {r}: slidestream {res['slidestream'][-1]:.0f} patches/s, openslide {res['openslide'][-1]:.0f} patches/s")
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"| reader | patches/s (median of {a.rounds}) |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:.0f} |")
    print(f"slidestream / openslide = {med['slidestream'] / med['openslide']:.2f}x")
    s, o = slidestream.Slide(str(slide)), openslide.OpenSlide(str(slide))
    rng = random.Random(99)
    worst = 0
    for _ in range(16):
        loc = (rng.randrange(w - sz), rng.randrange(h - sz))
        d = np.abs(np.asarray(s.read_region(loc, 0, (sz, sz))).astype(int) - np.asarray(o.read_region(loc, 0, (sz, sz))).astype(int)).max()
        worst = max(worst, int(d))
    print(f"pixel check: max abs difference slidestream vs OpenSlide over 16 patches = {worst}")
    # The SVS of the same scan.
    svs = a.testdata / "CMU-1-Small-Region.svs"
    if svs.exists():
        ref = np.asarray(slidestream.Slide(str(svs)).read_region((0, 0), 0, (w, h)))[..., :3].astype(int)
        labelled = np.asarray(s.read_region((0, 0), 0, (w, h)))[..., :3].astype(int)
        ycbcr = frames_as_ycbcr(slide, w, h, 500).astype(int)
        for name, img in (("as labelled (RGB, OpenSlide's colours)", labelled), ("frames decoded as YCbCr (JFIF)", ycbcr)):
            d = np.abs(img - ref)
            print(f"DICOM vs SVS level 0, {name}: mean abs diff {d.mean():.2f}, max {d.max()}")


def time_now():
    import time

    return time.perf_counter()


if __name__ == "__main__":
    main()
