"""DICOM WSI series with High-Throughput JPEG 2000 frames (transfer syntaxes .4.201 lossless,
.4.202 lossless RPCL, .4.203 lossy), written here by ``scripts/vendor_slides/dicom_htj2k.py``
(pydicom, OpenJPH through imagecodecs). OpenSlide 4.0.1 refuses these syntaxes, so the oracle
is the pixels written (lossless: exactly) and OpenJPH's decode of every frame (lossy: within
2 grey levels; slidestream decodes with OpenJPEG)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pydicom")
pytest.importorskip("imagecodecs")

from slidestream import Slide  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from vendor_slides import dicom_htj2k as gen
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return gen.build(tmp_path_factory.mktemp("htj2k"))


def test_htj2k_series_read_as_the_pixels_written_and_as_openjph_decodes_them(series):
    assert {s.ts.rsplit(".", 1)[1] for s in series} == {"201", "202", "203"}
    for s in series:
        with Slide(s.open) as slide:
            assert slide.properties["openslide.vendor"] == "dicom"
            assert slide.properties["dicom.TransferSyntaxUID"] == s.ts
            assert slide.level_dimensions == tuple((k.shape[1], k.shape[0]) for k in s.known)
            for level, (known, decoded) in enumerate(zip(s.known, s.decoded)):
                w, h = slide.level_dimensions[level]
                got = slide.read_region((0, 0), level, (w, h))
                assert (got[..., 3] == 255).all(), s.name
                diff = np.abs(got.astype(int) - decoded.astype(int)).max()
                assert diff <= s.tolerance, f"{s.name} level {level}: {diff} from OpenJPH's decode"
                if s.tolerance == 0:
                    assert np.array_equal(got[..., :3], known), f"{s.name} level {level}"
                # A patch batch at a fractional origin agrees with the region read.
                ds = slide.level_downsamples[level]
                loc = (int(37 * ds), int(21 * ds))
                patch = slide.read_regions([loc], level, (64, 48))[0]
                assert np.array_equal(patch, got[21:69, 37:101, :3]), f"{s.name} level {level}: batch"


def test_the_openslide_drop_in_reads_them_too(series):
    compat = pytest.importorskip("slidestream.openslide")
    s = series[0]
    with compat.OpenSlide(str(s.open)) as osr:
        assert osr.properties["openslide.vendor"] == "dicom"
        img = np.asarray(osr.read_region((0, 0), 0, osr.dimensions))
        assert np.array_equal(img[..., :3], s.known[0])

