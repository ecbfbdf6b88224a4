"""Sakura SVSlide slides (``scripts/vendor_slides/sakura.py``, an SQLite database written here
with OpenSlide's reference output) through the Python API and the OpenSlide drop-in: vendor
``sakura``, levels, downsamples, properties (quickhash included), associated images and regions
equal OpenSlide 4.0.1's (0 difference); batches equal regions; damaged databases raise typed
errors naming the file. core/tests/sakura.rs covers the other bad inputs."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL")
pytest.importorskip("openslide")

import slidestream  # noqa: E402
from slidestream import Slide  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NAME = "sakura.svslide"


@pytest.fixture(scope="module")
def slides(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from vendor_slides import common, sakura
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    out = tmp_path_factory.mktemp("sakura")
    assert common.main(sakura.build, ["gen", str(out)]) == 0
    return out


def _png(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGBA"))


def test_matches_openslide(slides):
    ref = slides / "reference" / NAME
    doc = json.loads((ref / "regions.json").read_text())
    props = json.loads((ref / "properties.json").read_text())
    path = slides / NAME
    assert slidestream.detect_vendor(str(path)) == "sakura"
    s = Slide(path)
    assert s.level_dimensions == tuple(tuple(d) for d in doc["level_dimensions"])
    assert tuple(s.level_downsamples) == tuple(doc["level_downsamples"])
    assert dict(s.properties) == props
    for r in doc["regions"]:
        got = np.asarray(s.read_region(tuple(r["location"]), r["level"], tuple(r["size"])))
        assert np.array_equal(got, _png(ref / r["png"])), r["name"]
    for an, a in doc["associated_images"].items():
        assert np.array_equal(np.asarray(s.read_associated(an)), _png(ref / a["png"])), an
    # A batch equals the regions (RGB of the opaque part).
    r = doc["regions"][1]
    batch = s.read_regions([tuple(r["location"])], r["level"], tuple(r["size"]))
    want = _png(ref / r["png"])
    opaque = want[..., 3] == 255
    assert np.array_equal(np.asarray(batch)[0][opaque], want[..., :3][opaque])
    # The OpenSlide drop-in reports OpenSlide's vendor name and pixels.
    o = slidestream.OpenSlide(str(path))
    assert o.properties["openslide.vendor"] == "sakura"
    assert slidestream.OpenSlide.detect_format(str(path)) == "sakura"
    assert sorted(o.associated_images) == sorted(doc["associated_images"])
    r = doc["regions"][0]
    img = o.read_region(tuple(r["location"]), r["level"], tuple(r["size"]))
    assert np.array_equal(np.asarray(img.convert("RGBA")), _png(ref / r["png"]))
    o.close()


def _copy(slides, tmp_path, sql: str) -> Path:
    p = tmp_path / NAME
    p.write_bytes((slides / NAME).read_bytes())
    db = sqlite3.connect(p)
    db.executescript(sql)
    db.close()
    return p


def test_damaged_databases_raise_typed_errors(slides, tmp_path):
    # Truncated: not a readable database.
    b = (slides / NAME).read_bytes()
    p = tmp_path / "cut.svslide"
    p.write_bytes(b[: len(b) // 3])
    with pytest.raises(slidestream.SlideError) as e:
        Slide(p).level_count
    assert "cut.svslide" in str(e.value)
    # A tile blob that is not a JPEG: the read fails naming the file; the slide stays usable.
    p = _copy(slides, tmp_path, "UPDATE \"SVGigaPixelImage Data\" SET data = x'00112233' WHERE id = 'T;0|0;1;2;1';")
    s = Slide(p)
    with pytest.raises(slidestream.CorruptDataError) as e:
        s.read_region((0, 0), 0, (16, 16))
    assert NAME in str(e.value)
    assert np.asarray(s.read_region((300, 300), 0, (8, 8))).shape == (8, 8, 4)
