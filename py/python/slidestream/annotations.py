"""Annotations to masks and labels: polygons drawn on a slide (QuPath's GeoJSON export, or
plain coordinate arrays) rasterised into a :class:`~slidestream.sampling.TissueMask` the
samplers take, or into a :class:`LabelMask` that gives each patch the share of every class.

Coordinates are **level-0 pixels** (x to the right, y down), as QuPath exports them
(its GeoJSON is in the full-resolution image's pixel space).

* :func:`read_geojson` — the annotations of a GeoJSON file, string or parsed object: a
  ``FeatureCollection``, a list of ``Feature`` objects (QuPath's "Export objects as GeoJSON"
  writes either), one ``Feature`` or a bare geometry. ``Polygon`` and ``MultiPolygon``
  geometries (also inside a ``GeometryCollection``) are read with their holes; the class is
  ``properties.classification.name`` (QuPath ≥ 0.2; a plain string is accepted too) and the
  name ``properties.name``. Geometries without an area (points, lines) are skipped with one
  :class:`UserWarning` giving their count. Anything else that is not GeoJSON is an
  :class:`~slidestream.InvalidArgumentError` saying where.
* :func:`polygons` — :class:`Annotation` objects from plain arrays: each (k, 2) array of
  level-0 (x, y) vertices is one polygon without holes.
* :func:`rasterize` — the union of annotations as a :class:`~slidestream.sampling.TissueMask`
  (``method="annotations"``) for ``mask=`` / ``masks=`` of both samplers.
* :func:`label_mask` — a :class:`LabelMask`: class index per mask pixel (0 = no class, later
  annotations painted over earlier ones, QuPath's drawing order), with per-patch class
  fractions (:meth:`LabelMask.fractions`) and one class as a mask (:meth:`LabelMask.mask`).

**Rasterisation rule.** Mask pixel (i, j) covers level-0 x in ``[i·d, (i+1)·d)`` and y in
``[j·d, (j+1)·d)``; it is inside a polygon when its centre ``((i + ½)·d, (j + ½)·d)`` is, by the
even–odd rule over the polygon's exterior and holes (a hole's pixels are outside; a polygon's
rings are closed whether or not the last vertex repeats the first). Several polygons combine
by union. This is the rule of ``shapely.contains_xy`` at the pixel centres (the tests' oracle)
for every centre not exactly on an edge. The mask's downsample ``d`` is a level's (``level=``),
a given one (``downsample=``), or by default the one that makes the mask at most ``max_size``
(2048) pixels a side, like :func:`~slidestream.sampling.tissue_mask`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ._args import check_int
from ._errors import InvalidArgumentError

__all__ = ["Annotation", "LabelMask", "read_geojson", "polygons", "rasterize", "label_mask"]

Ring = np.ndarray  # float64 (k, 2): level-0 (x, y) vertices


@dataclass(frozen=True)
class Annotation:
    """One annotated object: ``polygons`` a tuple of polygons, each a tuple of rings (the
    exterior first, then its holes), each ring a float64 (k, 2) array of level-0 (x, y)
    vertices (k ≥ 3); ``label`` its class (None when unclassified); ``name`` its name."""

    polygons: Tuple[Tuple[Ring, ...], ...]
    label: Optional[str] = None
    name: Optional[str] = None

    def __repr__(self) -> str:
        holes = sum(len(p) - 1 for p in self.polygons)
        return f"Annotation(label={self.label!r}, {len(self.polygons)} polygon(s), {holes} hole(s){'' if self.name is None else f', name={self.name!r}'})"


def _ring(coords: Any, where: str) -> Ring:
    try:
        a = np.asarray(coords, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{where}: a ring must be a list of [x, y] positions") from None
    if a.ndim != 2 or a.shape[1] < 2:
        raise InvalidArgumentError(f"{where}: a ring must be a list of [x, y] positions, got shape {a.shape}")
    a = np.ascontiguousarray(a[:, :2])
    if not np.isfinite(a).all():
        raise InvalidArgumentError(f"{where}: a ring has a coordinate that is not a finite number")
    if len(a) >= 2 and np.array_equal(a[0], a[-1]):
        a = a[:-1]
    if len(a) < 3:
        raise InvalidArgumentError(f"{where}: a ring needs at least 3 distinct vertices, got {len(a)}")
    return a


def _geometry_polygons(geom: Any, where: str, skipped: List[str]) -> List[Tuple[Ring, ...]]:
    if not isinstance(geom, dict) or "type" not in geom:
        raise InvalidArgumentError(f"{where}: not a GeoJSON geometry (an object with a 'type')")
    kind = geom["type"]
    if kind == "Polygon":
        rings = geom.get("coordinates")
        if not isinstance(rings, list) or not rings:
            raise InvalidArgumentError(f"{where}: a Polygon needs a list of rings")
        return [tuple(_ring(r, f"{where} ring {i}") for i, r in enumerate(rings))]
    if kind == "MultiPolygon":
        polys = geom.get("coordinates")
        if not isinstance(polys, list):
            raise InvalidArgumentError(f"{where}: a MultiPolygon needs a list of polygons")
        out = []
        for k, rings in enumerate(polys):
            if not isinstance(rings, list) or not rings:
                raise InvalidArgumentError(f"{where} polygon {k}: needs a list of rings")
            out.append(tuple(_ring(r, f"{where} polygon {k} ring {i}") for i, r in enumerate(rings)))
        return out
    if kind == "GeometryCollection":
        out = []
        for k, g in enumerate(geom.get("geometries") or []):
            out += _geometry_polygons(g, f"{where} geometry {k}", skipped)
        return out
    if kind in ("Point", "MultiPoint", "LineString", "MultiLineString"):
        skipped.append(kind)
        return []
    raise InvalidArgumentError(f"{where}: unknown GeoJSON geometry type {kind!r}")


def _label_of(props: Any) -> Tuple[Optional[str], Optional[str]]:
    if not isinstance(props, dict):
        return None, None
    c = props.get("classification")
    label = c.get("name") if isinstance(c, dict) else c if isinstance(c, str) else None
    name = props.get("name")
    return (str(label) if label is not None else None), (str(name) if name is not None else None)


def read_geojson(source: Any) -> List[Annotation]:
    """The annotations of a GeoJSON document (module docs): ``source`` is a path
    (``str`` / ``os.PathLike`` naming a file), a JSON string, or the parsed object. Returns
    one :class:`Annotation` per feature with an area, in the document's order.

    Raises FileNotFoundError / OSError for a file that cannot be read,
    InvalidArgumentError for text that is not JSON or JSON that is not GeoJSON (naming the
    feature and ring), TypeError for another kind of ``source``."""
    if isinstance(source, (bytes, bytearray)):
        source = source.decode("utf-8")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not source.lstrip().startswith(("{", "["))):
        with open(source, encoding="utf-8") as f:
            text = f.read()
        where0 = os.fspath(source)
    elif isinstance(source, str):
        text, where0 = source, "GeoJSON"
    elif isinstance(source, (dict, list)):
        text, where0 = None, "GeoJSON"
    else:
        raise TypeError(f"source must be a path, a JSON string or a parsed GeoJSON object, got {type(source).__name__}")
    if text is not None:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"{where0}: not JSON: {e}") from None
    else:
        doc = source
    if isinstance(doc, dict) and doc.get("type") == "FeatureCollection":
        features = doc.get("features")
    elif isinstance(doc, dict) and doc.get("type") == "Feature":
        features = [doc]
    elif isinstance(doc, list):
        features = doc
    elif isinstance(doc, dict) and "type" in doc:
        features = [{"type": "Feature", "geometry": doc, "properties": {}}]
    else:
        raise InvalidArgumentError(f"{where0}: not GeoJSON (a FeatureCollection, a list of Features, a Feature or a geometry)")
    if not isinstance(features, list):
        raise InvalidArgumentError(f"{where0}: 'features' must be a list")
    out: List[Annotation] = []
    skipped: List[str] = []
    for k, feat in enumerate(features):
        where = f"{where0}: feature {k}"
        if not isinstance(feat, dict) or feat.get("type") != "Feature":
            raise InvalidArgumentError(f"{where}: not a GeoJSON Feature")
        geom = feat.get("geometry")
        if geom is None:
            skipped.append("no geometry")
            continue
        polys = _geometry_polygons(geom, where, skipped)
        if polys:
            label, name = _label_of(feat.get("properties"))
            out.append(Annotation(polygons=tuple(polys), label=label, name=name))
    if skipped:
        counts: Dict[str, int] = {}
        for s in skipped:
            counts[s] = counts.get(s, 0) + 1
        warnings.warn(f"{where0}: skipped {len(skipped)} geometries without an area ({', '.join(f'{v} {k}' for k, v in counts.items())})", UserWarning, stacklevel=2)
    return out


def polygons(arrays: Iterable[Any], label: Optional[str] = None) -> List[Annotation]:
    """One :class:`Annotation` (class ``label``) per (k, 2) array of level-0 (x, y) vertices,
    each a polygon without holes. InvalidArgumentError for an array that is not (k ≥ 3, 2)."""
    return [Annotation(polygons=((_ring(a, f"polygon {i}"),),), label=label) for i, a in enumerate(arrays)]


def _fill(shape: Tuple[int, int], rings: Sequence[Ring], d: float) -> np.ndarray:
    """Bool (h, w): pixel centres inside ``rings`` (level-0 vertices) by the even–odd rule,
    on a grid of ``d`` level-0 pixels per mask pixel (module docs). A scanline fill: every
    non-horizontal edge gives one crossing per pixel-centre row it spans (half-open in y), the
    crossings of a row sorted and paired."""
    h, w = shape
    js: List[np.ndarray] = []
    xs: List[np.ndarray] = []
    for r in rings:
        p = r / d  # mask pixel units
        a, b = p, np.roll(p, -1, axis=0)
        y0, y1 = a[:, 1], b[:, 1]
        keep = y0 != y1
        a, b, y0, y1 = a[keep], b[keep], y0[keep], y1[keep]
        lo, hi = np.minimum(y0, y1), np.maximum(y0, y1)
        # Rows whose centre j + 0.5 lies in [lo, hi).
        j0 = np.clip(np.ceil(lo - 0.5), 0, h).astype(np.int64)
        j1 = np.clip(np.ceil(hi - 0.5), 0, h).astype(np.int64)
        n = np.maximum(j1 - j0, 0)
        if not n.any():
            continue
        edge = np.repeat(np.arange(len(n)), n)
        j = np.repeat(j0, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
        yc = j + 0.5
        t = (yc - a[edge, 1]) / (b[edge, 1] - a[edge, 1])
        js.append(j)
        xs.append(a[edge, 0] + t * (b[edge, 0] - a[edge, 0]))
    out = np.zeros((h, w), dtype=bool)
    if not js:
        return out
    j = np.concatenate(js)
    x = np.concatenate(xs)
    order = np.lexsort((x, j))
    j, x = j[order], x[order]
    # Crossings come in pairs per row (every ring is closed); pair them in order.
    start, end = x[0::2], x[1::2]
    row = j[0::2]
    # Pixels whose centre i + 0.5 lies in [start, end).
    i0 = np.clip(np.ceil(start - 0.5), 0, w).astype(np.int64)
    i1 = np.clip(np.ceil(end - 0.5), 0, w).astype(np.int64)
    ok = i1 > i0
    diff = np.zeros((h, w + 1), dtype=np.int32)
    np.add.at(diff, (row[ok], i0[ok]), 1)
    np.add.at(diff, (row[ok], i1[ok]), -1)
    return np.cumsum(diff[:, :w], axis=1) > 0


def _grid(slide: Any, level: Optional[int], downsample: Optional[float], max_size: int) -> Tuple[Tuple[int, int], float]:
    """(shape (h, w), downsample) of a mask covering ``slide``."""
    w0, h0 = slide.dimensions
    given = [v is not None for v in (level, downsample)]
    if sum(given) > 1:
        raise InvalidArgumentError("give level= or downsample=, not both")
    if level is not None:
        lv = check_int(level, "level", min_value=0)
        if lv >= slide.level_count:
            raise InvalidArgumentError(f"level {lv} does not exist (level count {slide.level_count})")
        d = float(slide.level_downsamples[lv])
    elif downsample is not None:
        if isinstance(downsample, bool) or not isinstance(downsample, (int, float, np.integer, np.floating)) or not math.isfinite(float(downsample)) or float(downsample) <= 0:
            raise InvalidArgumentError(f"downsample must be a positive number, got {downsample!r}")
        d = float(downsample)
    else:
        d = max(1.0, max(w0, h0) / check_int(max_size, "max_size", min_value=8))
    w, h = max(1, math.ceil(w0 / d)), max(1, math.ceil(h0 / d))
    if w * h > 1 << 30:
        raise InvalidArgumentError(f"a {w} x {h} mask is too large (more than 2**30 pixels); use a coarser level or downsample")
    return (h, w), d


def _prepare(annotations: Any, slide: Any, level: Any, downsample: Any, max_size: int) -> Tuple[List[Annotation], Tuple[int, int], float]:
    """The annotations as a list, and the mask grid (shape, downsample) over ``slide``."""
    from ._masks import _open_one

    return _as_annotations(annotations), *_grid(_open_one(slide, "slide"), level, downsample, max_size)


def _as_annotations(annotations: Any) -> List[Annotation]:
    if isinstance(annotations, Annotation):
        return [annotations]
    if isinstance(annotations, (str, os.PathLike, dict)):
        return read_geojson(annotations)
    out = list(annotations)
    for i, a in enumerate(out):
        if not isinstance(a, Annotation):
            raise TypeError(f"annotations[{i}] must be an Annotation (read_geojson, polygons), got {type(a).__name__}")
    return out


def rasterize(
    annotations: Any,
    slide: Any,
    *,
    labels: Optional[Sequence[str]] = None,
    level: Optional[int] = None,
    downsample: Optional[float] = None,
    max_size: int = 2048,
) -> Any:
    """The union of ``annotations`` (a list of :class:`Annotation`, or anything
    :func:`read_geojson` reads) — only those whose label is in ``labels`` when given — as a
    :class:`~slidestream.sampling.TissueMask` (``method="annotations"``, ``threshold=-1``)
    covering ``slide`` (a path or :class:`Slide`) at a level's downsample, a given
    ``downsample``, or at most ``max_size`` pixels a side (module docs: the rule). Use it as
    ``mask=`` / ``masks=`` of the samplers.

    Raises InvalidArgumentError for bad annotations, an unknown level, both ``level`` and
    ``downsample``, or a mask above 2**30 pixels; TypeError for arguments of the wrong type."""
    from ._masks import TissueMask

    anns, shape, d = _prepare(annotations, slide, level, downsample, max_size)
    wanted = None if labels is None else set(labels)
    mask = np.zeros(shape, dtype=bool)
    for a in anns:
        if wanted is not None and a.label not in wanted:
            continue
        for poly in a.polygons:
            mask |= _fill(shape, poly, d)
    return TissueMask(mask=mask, downsample=d, threshold=-1, method="annotations")


@dataclass(frozen=True, repr=False)
class LabelMask:
    """A class index per mask pixel: ``labels`` uint16 (h, w) (0 = no class, k = ``classes[k -
    1]``), each pixel covering ``downsample`` level-0 pixels a side as a
    :class:`~slidestream.sampling.TissueMask`'s; ``classes`` the class names in index order."""

    labels: np.ndarray
    classes: Tuple[str, ...]
    downsample: float

    def mask(self, cls: Optional[str] = None) -> Any:
        """The pixels of class ``cls`` (every labelled pixel when None) as a
        :class:`~slidestream.sampling.TissueMask`, for the samplers. InvalidArgumentError for a
        class not in :attr:`classes`."""
        from ._masks import TissueMask

        if cls is None:
            m = self.labels > 0
        else:
            if cls not in self.classes:
                raise InvalidArgumentError(f"no class {cls!r} (classes: {list(self.classes)})")
            m = self.labels == self.classes.index(cls) + 1
        return TissueMask(mask=m, downsample=self.downsample, threshold=-1, method="annotations")

    def fractions(self, patches: Any, size: Any, slide: Any = None) -> np.ndarray:
        """The share of each class in each patch: float64 (n, 1 + len(classes)), column 0 the
        unlabelled share, column k the share of ``classes[k - 1]`` (rows sum to 1 inside the
        slide; outside it counts as unlabelled). ``patches``: rows (slide_index, level, x, y)
        of ``size`` pixels of their level (levels other than 0 need ``slide``), as
        :meth:`TissueMask.fractions`."""
        out = np.empty((np.asarray(patches).reshape(-1, 4).shape[0], 1 + len(self.classes)), np.float64)
        for k in range(len(self.classes)):
            out[:, 1 + k] = self.mask(self.classes[k]).fractions(patches, size, slide)
        out[:, 0] = 1.0 - out[:, 1:].sum(axis=1)
        return out

    def __repr__(self) -> str:
        h, w = self.labels.shape
        return f"LabelMask({w}x{h}, downsample={self.downsample:.4g}, classes={list(self.classes)})"


def label_mask(
    annotations: Any,
    slide: Any,
    *,
    classes: Optional[Sequence[str]] = None,
    level: Optional[int] = None,
    downsample: Optional[float] = None,
    max_size: int = 2048,
) -> LabelMask:
    """A :class:`LabelMask` of ``annotations`` over ``slide`` (grid as :func:`rasterize`):
    ``classes`` the class names in index order (default: the labels found, in order of first
    appearance; unclassified annotations and those of other classes are not painted); later
    annotations are painted over earlier ones. InvalidArgumentError as :func:`rasterize`, or
    for more than 65535 classes."""
    anns, shape, d = _prepare(annotations, slide, level, downsample, max_size)
    if classes is None:
        seen: Dict[str, None] = {}
        for a in anns:
            if a.label is not None:
                seen.setdefault(a.label, None)
        classes = list(seen)
    classes = tuple(str(c) for c in classes)
    if len(classes) > 65535:
        raise InvalidArgumentError(f"{len(classes)} classes: at most 65535")
    index = {c: k + 1 for k, c in enumerate(classes)}
    labels = np.zeros(shape, dtype=np.uint16)
    for a in anns:
        k = index.get(a.label) if a.label is not None else None
        if k is None:
            continue
        for poly in a.polygons:
            labels[_fill(shape, poly, d)] = k
    return LabelMask(labels=labels, classes=classes, downsample=d)

