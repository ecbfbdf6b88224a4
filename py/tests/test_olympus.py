"""Olympus / Evident VSI + ETS slides open through ``slidestream.Slide`` as vendor ``olympus`` and
read what slideio reads (OpenSlide 4.0.1 has no VSI driver). Slides: the generated ones of
``scripts/vendor_slides/vsi.py`` (brightfield JPEG and raw, 2-channel uint16 fluorescence) and the
real JPEG 2000 fluorescence file of ``../shared/formats3``. A second oracle is the generator's
``decode_ets``: the ETS tile table decoded independently (Pillow, numpy, imagecodecs). The Rust
test core/tests/olympus.rs covers the hostile inputs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL")

import slidestream  # noqa: E402
from slidestream import Slide  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FORMATS3 = ROOT.parent / "shared" / "formats3"


def _gen():
    spec = importlib.util.spec_from_file_location("vsi_gen", ROOT / "scripts/vendor_slides/vsi.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


@pytest.fixture(scope="module")
def vsis(tmp_path_factory):
    gen = _gen()
    out = tmp_path_factory.mktemp("vsi")
    gen.main(out)
    return gen, out, json.loads((out / "cases.json").read_text())["cases"]


def _slideio_block(path: Path, rect, size=None):
    slideio = pytest.importorskip("slideio")
    scene = slideio.open_slide(str(path), "VSI").get_scene(0)
    kw = {"size": size} if size else {}
    return scene, np.asarray(scene.read_block(rect, **kw))


def test_generated_vsis_read_as_the_ets_tile_table(vsis):
    gen, out, cases = vsis
    for case in cases:
        s = Slide(out / case["file"])
        assert s.vendor == "olympus"
        assert [list(d) for d in s.level_dimensions] == case["level_sizes"]
        assert s.properties["olympus.ets.file"] == case["ets"]
        n = max(1, len(case["channels"]))
        for k, (w, h) in enumerate(case["level_sizes"]):
            for c in range(n):
                want, mask = gen.oracle_levels(out, case, c)[k]
                if case["channels"]:
                    got = s.read_region_channels((0, 0), k, (w, h), [c])
                    np.testing.assert_array_equal(got, want)
                else:
                    got = np.asarray(s.read_region((0, 0), k, (w, h)))
                    assert (got[:, :, 3][~mask] == 0).all() and (got[:, :, 3][mask] == 255).all()
                    diff = np.abs(got[:, :, :3].astype(int) - want.astype(int))[mask].max()
                    assert diff <= case["tolerance"], f"{case['file']} level {k}: {diff}"


def test_generated_vsis_equal_slideio(vsis):
    _, out, cases = vsis
    for case in cases:
        if case["file"] == "brightfield-raw.vsi":
            # slideio 2.10 reads raw RGB ETS tiles as its white background (its raw uint16
            # fluorescence read is exact): this file is checked against the tile table only.
            continue
        s = Slide(out / case["file"])
        w, h = case["size"]
        _, want = _slideio_block(out / case["file"], (0, 0, w, h))
        want = want.reshape(h, w, -1)
        mask = np.fromfile(out / f"{case['file']}.L0.mask", np.uint8).reshape(h, w).astype(bool)
        if case["channels"]:
            got = s.read_region_channels((0, 0), 0, (w, h))
            np.testing.assert_array_equal(got, want)
        else:
            got = np.asarray(s.read_region((0, 0), 0, (w, h)))[:, :, :3]
            diff = np.abs(got.astype(int) - want.astype(int))[mask].max()
            assert diff <= case["tolerance"], f"{case['file']}: {diff} against slideio"


@pytest.mark.skipif(not (FORMATS3 / "vsi-ets-test-jpg2k.vsi").is_file(), reason="../shared/formats3 not present")
def test_real_jpeg2000_vsi_equals_slideio_and_the_tile_table():
    path = FORMATS3 / "vsi-ets-test-jpg2k.vsi"
    s = Slide(path)
    assert s.vendor == "olympus"
    assert s.level_dimensions == ((1645, 1682),)
    assert s.channel_names == ["C405", "C488"]
    assert s.properties["openslide.objective-power"] == "60"
    got = s.read_region_channels((0, 0), 0, (1645, 1682))
    assert got.dtype == np.uint16
    scene, want = _slideio_block(path, (0, 0, 1645, 1682))
    assert scene.num_channels == 2 and scene.num_z_slices == 11
    np.testing.assert_array_equal(got, want.reshape(1682, 1645, 2))  # plane z = 0 is blank: fluo-j2k-u16.vsi checks values
    # The tile table decoded independently (imagecodecs' OpenJPEG): plane z = 0, t = 0.
    imagecodecs = pytest.importorskip("imagecodecs")  # noqa: F841
    gen = _gen()
    for c in range(2):
        decoded, _, _, _ = gen.decode_ets(FORMATS3 / "_vsi-ets-test-jpg2k_/stack1/frame_t_0.ets", z_index=3, c_index=4, channel=c)
        (tile,) = [v for (lv, x, y), v in decoded.items() if (lv, x, y) == (0, 0, 0)]
        np.testing.assert_array_equal(got[:, :, c], tile[:, :, 0])


def test_missing_ets_and_bad_slides_raise_typed_errors(vsis):
    _, out, _ = vsis
    with pytest.raises(FileNotFoundError) as e:
        Slide(out / "bad" / "no-ets.vsi")
    assert "_no-ets_/stack10001/frame_t.ets" in str(e.value)
    if (FORMATS3 / "Image_Mouse13_PB_H7-no-ets.vsi").is_file():
        with pytest.raises(FileNotFoundError) as e:
            Slide(FORMATS3 / "Image_Mouse13_PB_H7-no-ets.vsi")
        assert "stack10001/frame_t.ets" in str(e.value)
    for name in ["jpeg-lossless.vsi", "origin.vsi"]:
        with pytest.raises(slidestream.UnsupportedFormatError) as e:
            Slide(out / "bad" / name)
        assert name[: -len(".vsi")] in str(e.value)  # the .vsi, or the ETS file at fault
