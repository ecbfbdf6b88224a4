"""Akoya / PerkinElmer QPTIFF slides open through ``slidestream.Slide`` as vendor ``qptiff`` and
read what tifffile reads (OpenSlide 4.0.1 has no QPTIFF driver, so tifffile is the oracle).
The slides are written here by ``scripts/vendor_slides/qptiff.py`` (brightfield RGB, deflate
and JPEG; 4-channel fluorescence uint8 and uint16, tiled and stripped); the Rust test
core/tests/qptiff.rs covers every window and the hostile headers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
pytest.importorskip("PIL")

import slidestream  # noqa: E402
from slidestream import Slide  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def qptiffs(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("qptiff_gen", ROOT / "scripts/vendor_slides/qptiff.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = tmp_path_factory.mktemp("qptiff")
    gen.main(out)
    return out, json.loads((out / "cases.json").read_text())["cases"]


def _oracle(path: Path, case: dict, k: int) -> np.ndarray:
    lv = case["levels"][k]
    n = 3 if case["rgb"] else len(case["channels"])
    dtype = np.dtype(case["dtype"]).newbyteorder("<")
    return np.frombuffer(path.read_bytes(), dtype).reshape(lv["height"], lv["width"], n)


def test_every_level_and_channel_reads_as_tifffile(qptiffs):
    out, cases = qptiffs
    assert len(cases) == 6
    for case in cases:
        name = case["file"]
        s = Slide(out / name)
        assert s.vendor == "qptiff", name
        assert s.level_count == len(case["levels"]) == 3
        assert list(s.level_dimensions) == [(lv["width"], lv["height"]) for lv in case["levels"]]
        assert sorted(s.associated_images) == ["label", "macro", "thumbnail"]
        props = s.properties
        assert abs(float(props["openslide.mpp-x"]) - case["mpp"]) < 1e-6
        assert props["qptiff.ImageType"] == "FullResolution"
        tol = case["tolerance"]
        for k in range(s.level_count):
            want = _oracle(out / f"{name}.L{k}.raw", case, k)
            h, w = want.shape[:2]
            got = s.read_region_channels((0, 0), k, (w, h))
            assert got.dtype == np.dtype(case["dtype"]), name
            diff = np.abs(got.astype(np.int32) - want.astype(np.int32)).max()
            assert diff <= tol, f"{name} level {k}: max abs diff {diff}"
            rgba = s.read_region((0, 0), k, (w, h))
            shown = want if case["rgb"] else np.repeat(want[:, :, :1] >> (8 if want.dtype.itemsize == 2 else 0), 3, axis=2)
            diff = np.abs(rgba[:, :, :3].astype(np.int32) - shown.astype(np.int32)).max()
            assert diff <= tol and (rgba[:, :, 3] == 255).all(), f"{name} level {k}: read_region max abs diff {diff}"
        if not case["rgb"]:
            assert s.channel_names == [c["name"] for c in case["channels"]]
            for i, c in enumerate(case["channels"]):
                rgb = "".join(f"{int(v):02X}" for v in c["color"].split(","))
                assert props[f"qptiff.channel[{i}].color-rgb"] == rgb
            assert s.channel_colors == [tuple(int(v) for v in c["color"].split(",")) for c in case["channels"]]
        else:
            assert s.channel_names == ["R", "G", "B"]
            assert s.channel_colors == [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
            # One channel, by index, from a window of level 1.
            want = _oracle(out / f"{name}.L1.raw", case, 1)
            got = s.read_region_channels((40, 60), 1, (33, 17), [2])
            np.testing.assert_array_equal(got[:, :, 0], want[30:47, 20:53, 2])


def test_bad_qptiffs_raise_typed_errors(qptiffs):
    out, _ = qptiffs
    for name in ["bad-xml.qptiff", "channel-mismatch.qptiff"]:
        with pytest.raises(slidestream.CorruptDataError) as e:
            Slide(out / "bad" / name)
        assert name in str(e.value)
