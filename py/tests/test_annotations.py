"""Annotations to masks and labels, against shapely's point-in-polygon at the pixel centres."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slidestream import InvalidArgumentError, Slide
from slidestream.annotations import Annotation, label_mask, polygons, rasterize, read_geojson
from slidestream.sampling import GridSampler, RandomPatchSampler

shapely = pytest.importorskip("shapely")

REPO = Path(__file__).resolve().parents[2]
CMU = REPO / "assets" / "CMU-1-Small-Region.svs"  # 2220 x 2967


def _star(rng, cx, cy, r0, r1, n):
    """A star-shaped (not convex) ring of n vertices around (cx, cy)."""
    ang = np.sort(rng.uniform(0, 2 * np.pi, n))
    rad = rng.uniform(r0, r1, n)
    return np.stack([cx + rad * np.cos(ang), cy + rad * np.sin(ang)], axis=1)


def _oracle(shape, d, polys):
    """Pixel centres inside any of ``polys`` (shapely Polygons), by shapely."""
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy = (xx + 0.5) * d, (yy + 0.5) * d
    out = np.zeros(shape, bool)
    for p in polys:
        out |= shapely.contains_xy(p, cx, cy)
    return out


@pytest.mark.parametrize("d", [1.0, 3.7, 8.0])
def test_rasterisation_equals_shapely_at_pixel_centres(d):
    rng = np.random.default_rng(int(d * 10))
    with Slide(CMU) as s:
        anns, shp = [], []
        for k in range(6):
            cx, cy = rng.uniform(0, 2220), rng.uniform(0, 2967)
            ext = _star(rng, cx, cy, 50, 600, 40)
            hole = _star(rng, cx, cy, 10, 40, 12)  # inside the star (its radii are >= 50)
            anns.append(Annotation(polygons=((ext, hole),), label="tumor" if k % 2 else "stroma"))
            shp.append(shapely.Polygon(ext, [hole]))
        m = rasterize(anns, s, downsample=d)
        assert m.method == "annotations" and m.downsample == d and m.mask.shape == (int(np.ceil(2967 / d)), int(np.ceil(2220 / d)))
        assert m.mask.any()
        assert all(p.is_valid for p in shp)
        assert np.array_equal(m.mask, _oracle(m.mask.shape, d, shp))
        # Only one class.
        t = rasterize(anns, s, downsample=d, labels=["tumor"])
        assert np.array_equal(t.mask, _oracle(t.mask.shape, d, [p for p, a in zip(shp, anns) if a.label == "tumor"]))


QUPATH = {
    "type": "FeatureCollection",
    "features": [
        {"type": "Feature", "id": "a", "geometry": {"type": "Polygon", "coordinates": [
            [[100, 100], [1100, 100], [1100, 1100], [100, 1100], [100, 100]],
            [[400, 400], [700, 400], [700, 700], [400, 700], [400, 400]]]},
         "properties": {"objectType": "annotation", "name": "region 1", "classification": {"name": "Tumor", "color": [200, 0, 0]}}},
        {"type": "Feature", "id": "b", "geometry": {"type": "MultiPolygon", "coordinates": [
            [[[1500, 1500], [2000, 1500], [2000, 2000], [1500, 2000], [1500, 1500]]],
            [[[600, 600], [900, 600], [900, 900], [600, 900], [600, 600]]]]},
         "properties": {"objectType": "annotation", "classification": {"name": "Stroma", "color": [0, 200, 0]}}},
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [5, 5]}, "properties": {}},
    ],
}


def test_qupath_geojson_is_read_from_a_file_a_string_or_objects(tmp_path):
    p = tmp_path / "slide.geojson"
    p.write_text(json.dumps(QUPATH))
    with pytest.warns(UserWarning, match="skipped 1 geometries without an area"):
        from_file = read_geojson(p)
    with pytest.warns(UserWarning):
        assert [a.label for a in read_geojson(json.dumps(QUPATH))] == ["Tumor", "Stroma"]
    with pytest.warns(UserWarning):
        assert len(read_geojson(QUPATH["features"])) == 2
    a, b = from_file
    assert a.name == "region 1" and len(a.polygons) == 1 and len(a.polygons[0]) == 2
    assert len(b.polygons) == 2 and a.polygons[0][0].shape == (4, 2)  # closing vertex dropped
    assert "Annotation(label='Tumor', 1 polygon(s), 1 hole(s)" in repr(a)
    for bad, why in [
        ({"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1]]]}}]}, "at least 3"),
        ({"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Curve"}}]}, "unknown GeoJSON geometry"),
        ({"type": "FeatureCollection", "features": [{"type": "Polygon"}]}, "feature 0: not a GeoJSON Feature"),
        ({"hello": 1}, "not GeoJSON"),
        ("{not json", "not JSON"),
        ({"type": "FeatureCollection", "features": [{"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, "x"], [2, 2]]]}}]}, "ring"),
    ]:
        with pytest.raises(InvalidArgumentError, match=why):
            read_geojson(bad)
    with pytest.raises(FileNotFoundError):
        read_geojson(tmp_path / "missing.geojson")
    with pytest.raises(TypeError):
        read_geojson(42)


def test_label_mask_paints_in_order_and_gives_class_fractions(tmp_path):
    with pytest.warns(UserWarning):
        anns = read_geojson(QUPATH)
    with Slide(CMU) as s:
        lm = label_mask(anns, s, downsample=4)
        assert lm.classes == ("Tumor", "Stroma") and lm.labels.dtype == np.uint16
        # The Stroma square (600..900) is painted over the Tumor ring and its hole.
        assert lm.labels[650 // 4, 650 // 4] == 2 and lm.labels[450 // 4, 450 // 4] == 0 and lm.labels[200 // 4, 200 // 4] == 1
        rows = np.array([(0, 0, 100, 100), (0, 0, 400, 400), (0, 0, 1500, 1500), (0, 0, 2100, 2800)], np.int64)
        f = lm.fractions(rows, 300, s)
        assert f.shape == (4, 3) and np.allclose(f.sum(axis=1), 1.0)
        assert np.allclose(f[0], [0, 1, 0]) and np.allclose(f[2], [0, 0, 1])
        # 400..700: the hole (unlabelled) except its 600..700 corner, Stroma.
        assert np.allclose(f[1], [(300 * 300 - 100 * 100) / 90000, 0, 100 * 100 / 90000])
        assert f[3, 0] == 1.0  # partly outside the slide: unlabelled
        with pytest.raises(InvalidArgumentError, match="no class"):
            lm.mask("Necrosis")
        assert "classes=['Tumor', 'Stroma']" in repr(lm)


def test_annotation_masks_drive_both_samplers():
    with Slide(CMU) as s:
        box = polygons([[(1000, 1000), (1800, 1000), (1800, 2000), (1000, 2000)]], label="roi")
        m = rasterize(box, s, level=0)
        assert m.mask.shape == (2967, 2220)
        g = GridSampler(s, 200, mask=m, min_tissue=1.0)
        assert len(g) > 0 and (g.patches[:, 2] >= 1000).all() and (g.patches[:, 2] + 200 <= 1800).all()
        lm = label_mask(box, s)
        r = RandomPatchSampler(s, 128, masks=[lm.mask("roi")], min_tissue=1.0, seed=0).sample(50)
        assert (r[:, 2] >= 1000).all() and (r[:, 3] + 128 <= 2000).all()
        assert np.array_equal(GridSampler(s, 200, mask=lm, min_tissue=1.0).patches, GridSampler(s, 200, mask=lm.mask(), min_tissue=1.0).patches)
        with pytest.raises(InvalidArgumentError, match="not both"):
            rasterize(box, s, level=0, downsample=2)
        with pytest.raises(InvalidArgumentError):
            polygons([[(0, 0), (1, 1)]])
        with pytest.raises(TypeError):
            rasterize([1, 2], s)
