"""Trestle, Huron and ARGOS slides (``scripts/vendor_slides/{trestle,huron,argos}.py``, written
here with OpenSlide's reference output) through the Python API and the OpenSlide drop-in: the
vendor names OpenSlide reports, levels, properties, associated images and regions equal
OpenSlide 4.0.1's (0 difference); damaged files raise typed errors naming the file.
core/tests/tiff_vendors.rs covers the other bad inputs."""

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
SLIDES = [("trestle-overlaps.tif", "trestle"), ("trestle-plain.tif", "trestle"), ("huron.tif", "huron"), ("argos.avs", "argos")]


@pytest.fixture(scope="module")
def slides(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from vendor_slides import argos, common, huron, trestle
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    out = tmp_path_factory.mktemp("tiff-vendors")
    for mod in (trestle, huron, argos):
        assert common.main(mod.build, ["gen", str(out)]) == 0
    return out


def _png(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGBA"))


@pytest.mark.parametrize("name,vendor", SLIDES)
def test_matches_openslide(slides, name, vendor):
    ref = slides / "reference" / name
    doc = json.loads((ref / "regions.json").read_text())
    props = json.loads((ref / "properties.json").read_text())
    path = slides / name
    assert slidestream.detect_vendor(str(path)) == vendor
    s = Slide(path)
    assert s.level_dimensions == tuple(tuple(d) for d in doc["level_dimensions"])
    assert dict(s.properties) == props
    for r in doc["regions"]:
        got = np.asarray(s.read_region(tuple(r["location"]), r["level"], tuple(r["size"])))
        assert np.array_equal(got, _png(ref / r["png"])), r["name"]
    for an, a in doc["associated_images"].items():
        assert np.array_equal(np.asarray(s.read_associated(an)), _png(ref / a["png"])), an
    # The OpenSlide drop-in reports OpenSlide's vendor names.
    o = slidestream.OpenSlide(str(path))
    assert o.properties["openslide.vendor"] == vendor
    assert slidestream.OpenSlide.detect_format(str(path)) == vendor
    assert sorted(o.associated_images) == sorted(doc["associated_images"])
    r = doc["regions"][0]
    img = o.read_region(tuple(r["location"]), r["level"], tuple(r["size"]))
    assert np.array_equal(np.asarray(img.convert("RGBA")), _png(ref / r["png"]))
    o.close()


def test_trestle_macro_file_is_optional(slides, tmp_path):
    shutil.copy(slides / "trestle-overlaps.tif", tmp_path / "t.tif")
    assert Slide(tmp_path / "t.tif").associated_images == {}
    shutil.copy(slides / "trestle-overlaps.Full", tmp_path / "t.Full")
    assert set(Slide(tmp_path / "t.tif").associated_images) == {"macro"}


def test_damaged_files_raise_typed_errors(slides, tmp_path):
    # A truncated file (its directories cut off).
    for name, _ in SLIDES:
        b = (slides / name).read_bytes()
        p = tmp_path / name
        p.write_bytes(b[: len(b) * 3 // 5])
        with pytest.raises(slidestream.SlideError) as e:
            Slide(p).level_count
        assert name in str(e.value)
    # ARGOS focal-plane indices that are not integers.
    p = tmp_path / "bad-z.avs"
    p.write_bytes((slides / "argos.avs").read_bytes().replace(b"<MaxZ>1</MaxZ>", b"<MaxZ>x</MaxZ>"))
    with pytest.raises(slidestream.CorruptDataError) as e:
        Slide(p).level_count
    assert "focal plane" in str(e.value) and "bad-z.avs" in str(e.value)
