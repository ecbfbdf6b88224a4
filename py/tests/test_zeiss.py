"""Zeiss CZI through the Python API, against czifile (with imagecodecs' JPEG XR and zstd).

Every file (the generated slide scans and microscopy files of ``scripts/vendor_slides/czi.py``
and the real files of ``shared/formats3``) is compared level by level with the oracle: czifile
walks the segments and decodes each subblock (uncompressed, and JPEG XR through imagecodecs;
czifile 2019.7.2.3 has no zstd, so zstd0/zstd1 data are decompressed here with imagecodecs,
zstd1's header and HiLo packing undone as OpenSlide's format page describes), and the test
places the subblocks as the driver's documented rules say (directory order, later on top;
position over the downsample; first plane of dimensions other than X, Y, C, S, M). czifile
returns every subblock as R, G, B; so does the oracle (czifile flips uncompressed Bgr subblocks; imagecodecs returns a 24bppBGR
JPEG XR codestream's colours as R, G, B). The generated slide scans are also compared with OpenSlide 4.0.1 by the
conformance battery and test_parity/test_compat (their references).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

czifile = pytest.importorskip("czifile")
imagecodecs = pytest.importorskip("imagecodecs")

import slidestream  # noqa: E402
from slidestream import Slide  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FORMATS3 = ROOT.parent / "shared" / "formats3"


@pytest.fixture(scope="module")
def czi_dir(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from vendor_slides import czi as gen
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    out = tmp_path_factory.mktemp("czi")
    gen.build(out)
    gen.build_czifile_only(out)
    return out


def _subblock(de) -> np.ndarray:
    """One subblock's pixels (H, W, samples), R, G, B or grey, as czifile (+ imagecodecs) decodes them."""
    seg = de.data_segment()
    dt = np.dtype(de.dtype)
    base, spp = dt.base, (dt.shape[0] if dt.shape else 1)
    size = {d.dimension: d.stored_size for d in de.dimension_entries}
    h, w = size["Y"], size["X"]
    if de.compression in (5, 6):
        raw = seg.data(raw=True)
        hilo = False
        if de.compression == 6:
            n = raw[0]
            hilo = n == 3 and raw[2] & 1 == 1
            raw = raw[n:]
        b = np.frombuffer(imagecodecs.zstd_decode(raw), np.uint8)
        if hilo:
            half = len(b) // 2
            b = np.stack([b[:half], b[half:]], -1).reshape(-1)
        px = b.view(base.newbyteorder("<")).reshape(h, w, spp)
        return px[..., ::-1] if spp == 3 else px
    return np.asarray(seg.data(resize=False)).reshape(h, w, spp)


def _oracle(path: Path, dims):
    """Per level, per channel (C values in order), the composited samples and coverage mask."""
    with czifile.CziFile(str(path), detectmosaic=False) as f:
        entries = list(f.subblock_directory)
        first = {}
        for de in entries:
            for d in de.dimension_entries:
                if d.dimension not in "XYCSM":
                    first[d.dimension] = min(first.get(d.dimension, d.start), d.start)
        shown = [de for de in entries if all(d.start == first[d.dimension] for d in de.dimension_entries if d.dimension in first)]
        pos = lambda de, n: next(d for d in de.dimension_entries if d.dimension == n)
        ox = min(pos(de, "X").start for de in shown)
        oy = min(pos(de, "Y").start for de in shown)
        cs = sorted({next((d.start for d in de.dimension_entries if d.dimension == "C"), 0) for de in shown})
        out = []
        for k, (lw, lh) in enumerate(dims):
            per_c = []
            for c in cs:
                canvas, mask = None, np.zeros((lh, lw), bool)
                for de in shown:
                    x, y = pos(de, "X"), pos(de, "Y")
                    ds = max(1, (x.size + x.stored_size // 2) // x.stored_size)
                    cc = next((d.start for d in de.dimension_entries if d.dimension == "C"), 0)
                    if cc != c or ds != round(dims[0][0] / lw):
                        continue
                    px = _subblock(de)
                    if canvas is None:
                        canvas = np.zeros((lh, lw, px.shape[2]), px.dtype)
                    X, Y = (x.start - ox) // ds, (y.start - oy) // ds
                    h, w = px.shape[:2]
                    x0, y0, x1, y1 = max(X, 0), max(Y, 0), min(X + w, lw), min(Y + h, lh)
                    if x0 < x1 and y0 < y1:
                        canvas[y0:y1, x0:x1] = px[y0 - Y:y1 - Y, x0 - X:x1 - X]
                        mask[y0:y1, x0:x1] = True
                per_c.append((canvas, mask))
            out.append(per_c)
        return out


GENERATED = [
    ("czi-bgr24-raw.czi", [(1100, 400), (550, 200)], 0),
    ("czi-bgr24-zstd0.czi", [(1100, 400), (550, 200), (275, 100)], 0),
    ("czi-bgr24-zstd1.czi", [(1100, 400), (550, 200)], 0),
    ("czi-bgr48-zstd1-hilo.czi", [(1100, 400), (550, 200)], 0),
    ("czi-bgr24-jpegxr.czi", [(1100, 400), (550, 200), (275, 100)], 0),
    ("czi-gray16-2ch-zstd1.czi", [(390, 238)], 0),
    ("czi-gray8-3ch-jpegxr.czi", [(390, 238)], 0),
]


def _compare(path: Path, dims, tol: int):
    s = Slide(path)
    assert slidestream.detect_vendor(str(path)) == "zeiss"
    assert [tuple(d) for d in s.level_dimensions] == [tuple(d) for d in dims]
    oracle = _oracle(path, dims)
    worst = 0
    for k, (w, h) in enumerate(dims):
        got = np.asarray(s.read_region_channels((0, 0), k, (w, h)))
        want = np.concatenate([c for c, _ in oracle[k]], axis=-1)
        mask = oracle[k][0][1]
        assert got.shape == want.shape and got.dtype == want.dtype, (k, got.shape, want.shape, got.dtype, want.dtype)
        d = int(np.abs(got.astype(np.int64) - want.astype(np.int64))[mask].max(initial=0))
        worst = max(worst, d)
        assert d <= tol, f"{path.name} level {k}: channels differ by {d}"
        assert not got[~mask].any(), "uncovered pixels are 0"
        # read_region: the first channel, 16-bit samples by their high byte, transparent where no subblock.
        rgba = np.asarray(s.read_region((0, 0), k, (w, h)))
        first = oracle[k][0][0]
        first8 = (first >> 8).astype(np.uint8) if first.dtype == np.uint16 else first
        rgb = np.repeat(first8, 3, axis=-1) if first8.shape[-1] == 1 else first8
        assert int(np.abs(rgba[..., :3][mask].astype(int) - rgb[mask].astype(int)).max(initial=0)) <= tol
        assert (rgba[..., 3][mask] == 255).all() and (rgba[..., 3][~mask] == 0).all()
    return worst


@pytest.mark.parametrize("name,dims,tol", GENERATED)
def test_generated_czi_equals_czifile(czi_dir, name, dims, tol):
    assert _compare(czi_dir / name, dims, tol) == 0


@pytest.mark.parametrize("name,dims", [("RGB-multichannel.czi", [(147, 81)]), ("tiles.czi", [(510, 512)])])
def test_real_czi_equals_czifile(name, dims):
    path = FORMATS3 / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    assert _compare(path, dims, 0) == 0


def test_channel_names_and_associated_images(czi_dir):
    s = Slide(czi_dir / "czi-gray16-2ch-zstd1.czi")
    assert list(s.channel_names) == ["Dye 0", "Dye 1"]
    s = Slide(czi_dir / "czi-bgr24-jpegxr.czi")
    assert sorted(s.associated_images) == ["label", "macro", "thumbnail"]
    assert s.properties["zeiss.Information.Instrument.Microscopes.Microscope:1.Name"] == "Axioscan 7"
    assert s.properties["openslide.mpp-x"] == "0.22"


def test_bad_czi_raises_typed_errors(tmp_path):
    bad = tmp_path / "bad.czi"
    bad.write_bytes(b"ZISRAWFILE" + b"\0" * 100)
    with pytest.raises(slidestream.SlideError) as e:
        Slide(bad)
    assert "bad.czi" in str(e.value)
