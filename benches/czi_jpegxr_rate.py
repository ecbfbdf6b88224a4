"""CZI JPEG XR decode rate on one core: slidestream (jxrlib through the `jpegxr` crate, the
CZI driver's read path) against czifile + imagecodecs (jxrlib through imagecodecs).

    SLIDESTREAM_DECODE_THREADS=1 SLIDESTREAM_CACHE_BYTES=0 python benches/czi_jpegxr_rate.py [N]

Writes an Axioscan-like CZI of N (default 64) Bgr24 JPEG XR subblocks of 1024×1024 tissue-like
pixels (imagecodecs' encoder at level 0.9, lossy as scanners write) side by side, then times:
slidestream's `read_region` of the whole level (every subblock decoded once, the tile cache off,
one decode thread) and czifile's decode of each subblock (`SubBlockSegment.data`), one thread.
Prints subblocks/s and megapixels/s for each.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
import time


os.environ.setdefault("SLIDESTREAM_DECODE_THREADS", "1")
os.environ.setdefault("SLIDESTREAM_CACHE_BYTES", "0")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "scripts"))

import czifile  # noqa: E402
import imagecodecs  # noqa: E402
from vendor_slides import czi  # noqa: E402
from vendor_slides.common import tissue_like  # noqa: E402

import slidestream  # noqa: E402


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    edge = 1024
    subs = []
    for i in range(n):
        px = tissue_like(edge, edge, seed=i)[..., ::-1].copy()
        b = bytearray(imagecodecs.jpegxr_encode(px, level=0.9))
        j = b.find(czi.RGB24)
        b[j + 15] = 0x0C
        subs.append(("Bgr24", "jpegxr", [("X", i * edge, edge, edge), ("Y", 0, edge, edge), ("C", 0, 1, 1)], bytes(b)))
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "jxr.czi"
        path.write_bytes(czi.czi_bytes(subs, czi.metadata_xml((n * edge, edge), 1, "Bgr24")))
        mb = path.stat().st_size / 1e6
        s = slidestream.Slide(path)
        s.read_region((0, 0), 0, (edge, edge))  # warm-up (one subblock)
        t = time.perf_counter()
        s.read_region((0, 0), 0, (n * edge, edge))
        ours = time.perf_counter() - t
        with czifile.CziFile(str(path)) as f:
            entries = list(f.subblock_directory)
            entries[0].data_segment().data(resize=False)
            t = time.perf_counter()
            for de in entries:
                de.data_segment().data(resize=False)
            theirs = time.perf_counter() - t
    mpx = n * edge * edge / 1e6
    print(f"{n} JPEG XR subblocks of {edge}x{edge} Bgr24 ({mb:.1f} MB, {8 * mb * 1e6 / (n * edge * edge):.2f} bits/pixel), one core:")
    print(f"  slidestream read_region : {n / ours:7.1f} subblocks/s  {mpx / ours:6.1f} Mpx/s")
    print(f"  czifile + imagecodecs   : {n / theirs:7.1f} subblocks/s  {mpx / theirs:6.1f} Mpx/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
