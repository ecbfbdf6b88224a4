"""Shared helpers of the framework adapters (:mod:`slidestream.torch`, :mod:`slidestream.dask`).

Nothing here imports a framework. Locations are level-0 pixels; patch arrays are numpy
``uint8`` (n, height, width, 3), RGB, composited over a background.
"""

from __future__ import annotations

import collections
import math
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Sequence, Tuple

import numpy as np

from ._typing import PathLike
from ._patches import read_patches
from ._slide import Slide


def read_patch_batch(
    get_slide: Callable[[int], Slide],
    rows: np.ndarray,
    size: Tuple[int, int],
    background: Any,
) -> np.ndarray:
    """Read patches (rows of ``rows``: slide_index, level, x, y with x, y in level-0 pixels)
    as one batch: one :meth:`Slide.read_regions` call when they come from one slide and one
    level, else one cross-slide :func:`slidestream.read_patches` call (the tiles of all slides
    decoded together). Returns uint8 (n, height, width, 3) RGB in the order of ``rows``."""
    n = rows.shape[0]
    w, h = size
    if n == 0:
        return np.empty((0, h, w, 3), np.uint8)
    idx = rows[:, 0]
    first, level = int(idx[0]), int(rows[0, 1])
    if np.all(idx == first) and np.all(rows[:, 1] == level):
        # One slide, one level: read_regions output is already in order, no copy.
        return get_slide(first).read_regions(np.ascontiguousarray(rows[:, 2:]), level, (w, h), background=background)

    used, slot_of = np.unique(idx, return_inverse=True)
    remapped = np.array(rows, dtype=np.int64, copy=True)
    remapped[:, 0] = slot_of.reshape(-1)
    out = read_patches([get_slide(int(k)) for k in used], remapped, (w, h), background=background)
    assert isinstance(out, np.ndarray)  # the CPU form (no device given)
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
        #: How many times each path was opened by this cache (``os.fsencode(path)`` → count):
        #: one per path for as long as it stays among the ``capacity`` most recently used.
        self.opens: "collections.Counter[bytes]" = collections.Counter()

    def get(self, path: PathLike, cache_bytes: Any = None, storage_options: Any = None) -> Slide:
        """The slide at ``path`` (a URL with its ``storage_options`` dict included), opened
        on first use in this process."""
        key = (os.fsencode(path), cache_bytes, tuple(sorted((storage_options or {}).items())))
        with self._lock:
            s = self._slides.get(key)
            if s is not None:
                self._slides.move_to_end(key)
                return s
        s = Slide(path, cache_bytes=cache_bytes, storage_options=storage_options or None)
        with self._lock:
            self.opens[key[0]] += 1
            self._slides[key] = s
            self._slides.move_to_end(key)
            while len(self._slides) > self.capacity:
                self._slides.popitem(last=False)
        return s

    def clear(self) -> None:
        """Drop every cached slide and the open counts."""
        with self._lock:
            self._slides.clear()
            self.opens.clear()


def as_slides(paths_or_slides: Any, cache_bytes: Any, storage_options: Any = None) -> Tuple[Sequence[Slide], bool]:
    """Return (slides, single): ``paths_or_slides`` is one path / :class:`Slide` or a sequence
    of them. Paths (and URLs, opened with ``storage_options``) become lazily opened
    :class:`Slide` objects (opened on first read)."""

    def one(p: Any) -> Slide:
        if isinstance(p, Slide):
            return p
        if isinstance(p, (str, bytes, os.PathLike)):
            return Slide(p, cache_bytes=cache_bytes, lazy=True, storage_options=storage_options)
        raise TypeError(f"expected a path (str, bytes, os.PathLike) or slidestream.Slide, got {type(p).__name__}")

    if isinstance(paths_or_slides, (str, bytes, os.PathLike, Slide)):
        return [one(paths_or_slides)], True
    slides = [one(p) for p in paths_or_slides]
    if not slides:
        raise ValueError("no slides given")
    return slides, False
