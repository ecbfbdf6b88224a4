#!/usr/bin/env python3
"""DICOM WSI: random 256² level-0 patches, slidestream vs OpenSlide 4.0.1 in the same run, and
how the DICOM slide's pixels compare with the SVS of the same scan (issue 16).

usage: python benches/dicom_patches.py [--dicom DIR_OR_FILE] [--svs FILE] [--patches 2000]
                                       [--rounds 3] [--patch 256] [--threads N]

Speed: each round opens a fresh handle of each reader (default caches), reads the same seeded
locations one ``read_region`` at a time, readers alternate which goes first; plus slidestream's
batch call (``read_regions``, all patches in one call). ``--threads 1`` (default) sets
``RAYON_NUM_THREADS=1`` and ``SLIDESTREAM_IO_DEPTH=1`` before slidestream is imported, so both
readers decode on the calling thread; ``--threads 0`` leaves slidestream's defaults.

Pixels: the DICOM slide (``CMU-1-Small-Region-dicom``) and ``CMU-1-Small-Region.svs`` hold the
same scan at the same size; the DICOM frames were re-encoded by a converter. Their JPEG frames
are JFIF (YCbCr) streams labelled Photometric RGB, which OpenSlide 4.0.1 — and slidestream,
which follows it — decodes without colour conversion. The report gives the mean and maximum
absolute difference to the SVS over the patches (a) as both readers show the DICOM slide and
(b) after the JFIF YCbCr→RGB conversion (ITU-R BT.601 full range, as libjpeg) of that output,
i.e. what a decoder that trusts the JFIF marker shows.
"""
import argparse
import os
import pathlib
import random
import statistics
import time

ap = argparse.ArgumentParser()
root = pathlib.Path(__file__).resolve().parent.parent
data = root.parent / "shared" / "testdata"
ap.add_argument("--dicom", type=pathlib.Path, default=data / "CMU-1-Small-Region-dicom")
ap.add_argument("--svs", type=pathlib.Path, default=data / "CMU-1-Small-Region.svs")
ap.add_argument("--patches", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--patch", type=int, default=256)
ap.add_argument("--threads", type=int, default=1)
a = ap.parse_args()
if a.threads == 1:
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["SLIDESTREAM_IO_DEPTH"] = "1"

import numpy as np  # noqa: E402
import openslide  # noqa: E402

import slidestream  # noqa: E402


def opened_file(p: pathlib.Path) -> pathlib.Path:
    """OpenSlide takes a file: the first file of a DICOM folder (any instance opens the series)."""
    if p.is_dir():
        return sorted(q for q in p.iterdir() if q.is_file())[0]
    return p


def ycbcr_to_rgb(a: np.ndarray) -> np.ndarray:
    """JFIF YCbCr → RGB (libjpeg's jdcolor.c constants), rounded and clamped; alpha kept."""
    y, cb, cr = (a[..., i].astype(np.float64) for i in range(3))
    r = y + 1.402 * (cr - 128)
    g = y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128)
    b = y + 1.772 * (cb - 128)
    out = a.copy()
    for i, c in enumerate((r, g, b)):
        out[..., i] = np.clip(np.rint(c), 0, 255).astype(np.uint8)
    return out


def main():
    dcm = opened_file(a.dicom)
    sz = a.patch
    with openslide.OpenSlide(str(dcm)) as o:
        w, h = o.dimensions
        vendor = o.properties.get("openslide.vendor")
    with slidestream.Slide(str(a.dicom)) as s:
        assert s.dimensions == (w, h), (s.dimensions, (w, h))
        levels = s.level_count
    print(f"{a.dicom} ({vendor}, opened by OpenSlide as {dcm.name}): {w}x{h}, {levels} levels; "
          f"{a.patches} random {sz}² level-0 patches, {a.rounds} rounds, threads={a.threads or 'default'}")
    res = {"slidestream read_region": [], "openslide read_region": [], "slidestream read_regions (one call)": []}
    for r in range(a.rounds):
        rng = random.Random(r)
        locs = [(rng.randrange(w - sz), rng.randrange(h - sz)) for _ in range(a.patches)]
        order = ["slidestream", "openslide"] if r % 2 == 0 else ["openslide", "slidestream"]
        for reader in order:
            if reader == "slidestream":
                s = slidestream.Slide(str(dcm))
                t0 = time.perf_counter()
                for loc in locs:
                    s.read_region(loc, 0, (sz, sz))
                res["slidestream read_region"].append(a.patches / (time.perf_counter() - t0))
                s.close()
                s = slidestream.Slide(str(dcm))
                t0 = time.perf_counter()
                s.read_regions(np.asarray(locs, dtype=np.int64), 0, (sz, sz))
                res["slidestream read_regions (one call)"].append(a.patches / (time.perf_counter() - t0))
                s.close()
            else:
                o = openslide.OpenSlide(str(dcm))
                t0 = time.perf_counter()
                for loc in locs:
                    o.read_region(loc, 0, (sz, sz))
                res["openslide read_region"].append(a.patches / (time.perf_counter() - t0))
                o.close()
        print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in res.items()))
    med = {k: statistics.median(v) for k, v in res.items()}
    print(f"\n| reader | patches/s (median of {a.rounds}) |\n|---|---:|")
    for k, v in med.items():
        print(f"| {k} | {v:.0f} |")
    base = med["openslide read_region"]
    print(f"slidestream / openslide: read_region {med['slidestream read_region'] / base:.2f}x, "
          f"read_regions {med['slidestream read_regions (one call)'] / base:.2f}x")

    # Pixels: slidestream vs OpenSlide on the DICOM slide, and the DICOM slide vs the SVS.
    s, o = slidestream.Slide(str(dcm)), openslide.OpenSlide(str(dcm))
    rng = random.Random(99)
    locs = [(rng.randrange(w - sz), rng.randrange(h - sz)) for _ in range(64)]
    worst = 0
    diffs = {"as labelled (RGB)": [], "JFIF YCbCr converted": []}
    svs = openslide.OpenSlide(str(a.svs)) if a.svs.exists() else None
    for loc in locs:
        ours = np.asarray(s.read_region(loc, 0, (sz, sz)))
        theirs = np.asarray(o.read_region(loc, 0, (sz, sz)))
        worst = max(worst, int(np.abs(ours.astype(int) - theirs.astype(int)).max()))
        if svs is not None:
            ref = np.asarray(svs.read_region(loc, 0, (sz, sz)))[..., :3].astype(int)
            for k, img in (("as labelled (RGB)", ours), ("JFIF YCbCr converted", ycbcr_to_rgb(ours))):
                d = np.abs(img[..., :3].astype(int) - ref)
                diffs[k].append((d.mean(), d.max()))
    print(f"\npixel check: slidestream vs OpenSlide on the DICOM slide, max abs difference over 64 patches = {worst}")
    if svs is not None:
        print(f"\nDICOM vs {a.svs.name} (same scan), 64 random {sz}² level-0 patches:\n| DICOM pixels | mean abs diff | max abs diff |\n|---|---:|---:|")
        for k, v in diffs.items():
            print(f"| {k} | {statistics.mean(m for m, _ in v):.2f} | {max(x for _, x in v)} |")


if __name__ == "__main__":
    main()
