"""Shared helpers of the framework adapters (:mod:`slidestream.torch`, :mod:`slidestream.dask`).

Nothing here imports a framework. Locations are level-0 pixels; patch arrays are numpy
``uint8`` (n, height, width, 3), RGB, composited over a background.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Sequence, Tuple, Union

import numpy as np

from ._slide import Slide

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def normalize_size(size: Any) -> Tuple[int, int]:
    """``size`` as (width, height): an int gives a square patch. Both must be > 0."""
    if isinstance(size, (int, np.integer)):
        w = h = int(size)
    else:
        try:
            w, h = (int(v) for v in size)
        except (TypeError, ValueError):
            raise ValueError(f"size must be an int or a (width, height) pair, got {size!r}") from None
    if w <= 0 or h <= 0:
        raise ValueError(f"size must be positive, got {(w, h)}")
    return w, h


def normalize_locations(locations: Any, n_slides: int, *, allow_xy: bool) -> np.ndarray:
    """Return an int64 array (n, 3) of (slide_index, x, y).

    ``locations`` is a sequence of (slide_index, x, y) triples or an integer array (n, 3); when
    ``allow_xy`` (one slide), (x, y) pairs / arrays (n, 2) are accepted and get slide index 0.
    Slide indices are checked against ``n_slides``.
    """
    arr = np.asarray(locations)
    if arr.size == 0:
        arr = arr.reshape(0, 3 if arr.ndim != 2 or arr.shape[1] != 2 else 2)
    if arr.ndim != 2 or arr.shape[1] not in ((2, 3) if allow_xy else (3,)):
        want = "(n, 2) or (n, 3)" if allow_xy else "(n, 3) (slide_index, x, y)"
        raise ValueError(f"locations must have shape {want}, got {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr)):
            pass  # whole-number floats are accepted
        else:
            raise ValueError(f"locations must be integers (level-0 pixels), got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.shape[1] == 2:
        arr = np.concatenate([np.zeros((arr.shape[0], 1), np.int64), arr], axis=1)
    if arr.shape[0] and (arr[:, 0].min() < 0 or arr[:, 0].max() >= n_slides):
        bad = arr[(arr[:, 0] < 0) | (arr[:, 0] >= n_slides), 0][0]
        raise IndexError(f"slide index {bad} out of range for {n_slides} slide(s)")
    return np.ascontiguousarray(arr)


def read_patch_batch(
    get_slide: Callable[[int], Slide],
    locs: np.ndarray,
    level: int,
    size: Tuple[int, int],
    background: Any,
) -> np.ndarray:
    """Read patches (rows of ``locs``: slide_index, x, y in level-0 pixels) with one
    :meth:`Slide.read_regions` call per distinct slide. Returns uint8 (n, height, width, 3) RGB
    in the order of ``locs``."""
    n = locs.shape[0]
    w, h = size
    if n == 0:
        return np.empty((0, h, w, 3), np.uint8)
    idx = locs[:, 0]
    first = int(idx[0])
    if np.all(idx == first):
        # One slide: read_regions output is already in order, no copy.
        return get_slide(first).read_regions(np.ascontiguousarray(locs[:, 1:]), level, (w, h), background=background)
    out = np.empty((n, h, w, 3), np.uint8)
    for k in np.unique(idx):
        sel = np.flatnonzero(idx == k)
        out[sel] = get_slide(int(k)).read_regions(np.ascontiguousarray(locs[sel, 1:]), level, (w, h), background=background)
    return out


def level0_origin(p: int, downsample: float) -> int:
    """The smallest level-0 coordinate whose level-k origin is ``p``.

    slidestream maps a level-0 location to level k as ``floor(location / downsample)``; this is
    its inverse, so a read at the returned location starts exactly at level-k pixel ``p``."""
    if downsample == 1.0:
        return int(p)
    x = math.ceil(p * downsample)
    while math.floor((x - 1) / downsample) >= p:
        x -= 1
    while math.floor(x / downsample) < p:
        x += 1
    return int(x)


class SlideCache:
    """A small per-process LRU of slides opened by path (for framework workers that receive
    paths, not slides). Evicted slides are dropped, not closed: a read still running in another
    thread keeps its slide alive, and the file closes when the last reference goes."""

    def __init__(self, capacity: int = 32) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._slides: "OrderedDict[Any, Slide]" = OrderedDict()

    def get(self, path: PathLike, cache_bytes: Any = None) -> Slide:
        key = (os.fsencode(path), cache_bytes)
        with self._lock:
            s = self._slides.get(key)
            if s is not None:
                self._slides.move_to_end(key)
                return s
        s = Slide(path, cache_bytes=cache_bytes)
        with self._lock:
            self._slides[key] = s
            self._slides.move_to_end(key)
            while len(self._slides) > self.capacity:
                self._slides.popitem(last=False)
        return s

    def clear(self) -> None:
        with self._lock:
            self._slides.clear()


def as_slides(paths_or_slides: Any, cache_bytes: Any) -> Tuple[Sequence[Slide], bool]:
    """Return (slides, single): ``paths_or_slides`` is one path / :class:`Slide` or a sequence
    of them. Paths become lazily opened :class:`Slide` objects (opened on first read)."""

    def one(p: Any) -> Slide:
        if isinstance(p, Slide):
            return p
        if isinstance(p, (str, bytes, os.PathLike)):
            return Slide(p, cache_bytes=cache_bytes, lazy=True)
        raise TypeError(f"expected a path (str, bytes, os.PathLike) or slidestream.Slide, got {type(p).__name__}")

    if isinstance(paths_or_slides, (str, bytes, os.PathLike, Slide)):
        return [one(paths_or_slides)], True
    slides = [one(p) for p in paths_or_slides]
    if not slides:
        raise ValueError("no slides given")
    return slides, False
