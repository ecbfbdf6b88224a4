"""Hamamatsu VMS and VMU slides (``scripts/vendor_slides/vms.py``, written here with OpenSlide's
reference output) through the Python API and the OpenSlide drop-in: vendor ``hamamatsu``,
levels, properties, associated images and regions equal OpenSlide 4.0.1's (0 difference); a
damaged slide raises a typed error naming the missing file. core/tests/vms.rs covers the other
bad inputs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL")
pytest.importorskip("openslide")

import slidestream  # noqa: E402
from slidestream import Slide  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def vms(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from vendor_slides import vms as gen
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    out = tmp_path_factory.mktemp("vms")
    assert gen.main(["vms", str(out)]) == 0
    return out


def _png(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGBA"))


@pytest.mark.parametrize("name", ["vms-2x2", "vms-3x1-444", "vmu-320x200"])
def test_vms_matches_openslide(vms, name):
    ref = vms / "reference-multifile" / name
    doc = json.loads((ref / "regions.json").read_text())
    props = json.loads((ref / "properties.json").read_text())
    path = vms / doc["open"]
    assert slidestream.detect_vendor(str(path)) == "hamamatsu"
    s = Slide(path)
    assert s.level_dimensions == tuple(tuple(d) for d in doc["level_dimensions"])
    assert dict(s.properties) == props
    for r in doc["regions"]:
        got = np.asarray(s.read_region(tuple(r["location"]), r["level"], tuple(r["size"])))
        assert np.array_equal(got, _png(ref / r["png"])), r["name"]
    for an, a in doc["associated_images"].items():
        assert np.array_equal(np.asarray(s.read_associated(an)), _png(ref / a["png"])), an
    # The OpenSlide drop-in.
    o = slidestream.OpenSlide(str(path))
    assert o.properties["openslide.vendor"] == "hamamatsu"
    assert slidestream.OpenSlide.detect_format(str(path)) == "hamamatsu"
    assert sorted(o.associated_images) == sorted(doc["associated_images"])
    r = doc["regions"][0]
    img = o.read_region(tuple(r["location"]), r["level"], tuple(r["size"]))
    assert np.array_equal(np.asarray(img.convert("RGBA")), _png(ref / r["png"]))
    o.close()


def test_missing_image_file_names_it(vms, tmp_path):
    d = tmp_path / "broken"
    shutil.copytree(vms / "vms-2x2", d)
    (d / "slide_1_1.jpg").unlink()
    with pytest.raises((slidestream.SlideError, OSError)) as e:
        Slide(d / "slide.vms")
    assert "slide_1_1.jpg" in str(e.value)


def test_vmu_bad_ngr_raises_format_error(vms, tmp_path):
    d = tmp_path / "bad-ngr"
    shutil.copytree(vms / "vmu-320x200", d)
    p = d / "slide.ngr"
    b = bytearray(p.read_bytes())
    b[12:16] = (0).to_bytes(4, "little")  # column width 0
    p.write_bytes(bytes(b))
    with pytest.raises(slidestream.CorruptDataError) as e:
        Slide(d / "slide.vmu")
    assert "slide.ngr" in str(e.value)
    # 16-bit samples read through read_region_channels as stored.
    s = Slide(vms / "vmu-320x200")
    raw = np.asarray(s.read_region_channels((0, 0), 0, (64, 64)))
    assert raw.dtype == np.uint16
    rgba = np.asarray(s.read_region((0, 0), 0, (64, 64)))
    assert np.array_equal(((raw[..., :3] >> 4) & 0xFF).astype(np.uint8), rgba[..., :3])
