"""Shared helpers of the framework adapters (:mod:`slidestream.torch`, :mod:`slidestream.dask`).

Nothing here imports a framework. Locations are level-0 pixels; patch arrays are numpy
``uint8`` (n, height, width, 3), RGB, composited over a background.
"""

from __future__ import annotations

import collections

import math
import operator
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import numpy as np

from ._errors import InvalidArgumentError
from ._slide import Slide

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def check_int(value: Any, name: str, *, min_value: Optional[int] = None, allow_bool: bool = True) -> int:
    """``value`` as a Python int: anything with ``__index__`` (ints, numpy integers; bools
    unless ``allow_bool`` is False).

    Raises :class:`TypeError` naming ``name`` for anything else (a float, a str, None), and
    :class:`~slidestream.InvalidArgumentError` (a ValueError) below ``min_value`` or outside
    the 64-bit signed range."""
    if isinstance(value, (bool, np.bool_)) and not allow_bool:
        raise TypeError(f"{name} must be an int, got bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if min_value is not None and v < min_value:
        what = "non-negative" if min_value == 0 else "positive" if min_value == 1 else f">= {min_value}"
        raise InvalidArgumentError(f"{name} must be {what}, got {v}")
    if not _I64_MIN <= v <= _I64_MAX:
        raise InvalidArgumentError(f"{name} {v} is out of range (-2**63..2**63)")
    return v


def check_pair(value: Any, name: str, form: str) -> Tuple[Any, Any]:
    """The two items of a pair argument (``(width, height)``, ``(x, y)``): a tuple, list or
    1-d array of length 2. Raises :class:`TypeError` for anything else, :class:`ValueError`
    for a sequence of another length."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
        raise TypeError(f"{name} must be a pair {form} of ints, got {type(value).__name__}")
    if len(value) != 2:
        raise ValueError(f"{name} must be a pair {form} of ints, got {len(value)} values")
    return value[0], value[1]


def check_level(level: Any) -> int:
    """A pyramid ``level`` argument checked before any read: :class:`TypeError` for a
    non-integer (bools included), :class:`~slidestream.InvalidArgumentError` (a ValueError) for
    a negative level or one past 2**63 (levels past the last one are the slide's check)."""
    v = check_int(level, "level", allow_bool=False)
    if v < 0:
        raise InvalidArgumentError(f"level must be a non-negative int, got {v}")
    return v


def check_positive_size(size: Any, name: str = "size") -> Tuple[int, int]:
    """A ``(width, height)`` pair of positive ints (thumbnail sizes).

    Raises :class:`TypeError` for a non-pair or non-ints, :class:`ValueError` for a sequence of
    another length, :class:`~slidestream.InvalidArgumentError` (a ValueError) for a width or
    height that is not positive or does not fit in 64 bits."""
    a, b = check_pair(size, name, "(width, height)")
    return check_int(a, f"{name} width", min_value=1), check_int(b, f"{name} height", min_value=1)


def normalize_size(size: Any) -> Tuple[int, int]:
    """``size`` as (width, height): an int gives a square patch. Both must be > 0.

    Raises :class:`TypeError` for non-integers, :class:`ValueError` (InvalidArgumentError) for
    sizes that are not positive."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, (bool, np.bool_)):
        w = h = check_int(size, "size", min_value=1)
        return w, h
    return check_positive_size(size)


#: What ``locations`` of the framework adapters may be, for error messages.
_LOCATIONS_ACCEPTED = "locations must be an integer array of shape (n, 3) / (n, 2) or a sequence of (slide_index, x, y) triples / (x, y) pairs"


def normalize_locations(locations: Any, n_slides: int, *, allow_xy: bool) -> np.ndarray:
    """Return an int64 array (n, 3) of (slide_index, x, y).

    ``locations`` is a sequence of (slide_index, x, y) triples or an integer array (n, 3); when
    ``allow_xy`` (one slide), (x, y) pairs / arrays (n, 2) are accepted and get slide index 0.
    Any integer dtype and byte order is cast safely (values outside the 64-bit signed range
    raise :class:`~slidestream.InvalidArgumentError`); whole-number floats are accepted;
    a mapping, a set, a str, bool or other non-numeric values raise :class:`TypeError`; another
    shape or fractional floats raise :class:`ValueError`. Slide indices are checked against
    ``n_slides`` (:class:`IndexError`).
    """
    array_like = isinstance(locations, np.ndarray) or hasattr(locations, "__array__")  # torch tensors too
    if isinstance(locations, (str, bytes, Mapping, set, frozenset)) or not (array_like or hasattr(locations, "__len__")):
        raise TypeError(f"{_LOCATIONS_ACCEPTED}, got {type(locations).__name__}")
    arr = np.asarray(locations) if array_like or len(locations) else np.empty((0, 3), np.int64)
    if arr.dtype.kind == "O":
        try:
            rows = [tuple(check_int(v, "locations value") for v in row) for row in arr.reshape(arr.shape[0], -1)] if arr.ndim else None
        except TypeError:
            raise TypeError(f"{_LOCATIONS_ACCEPTED}, got values that are not ints") from None
        if rows is None:
            raise TypeError(f"{_LOCATIONS_ACCEPTED}, got {type(locations).__name__}")
        arr = np.array(rows, np.int64).reshape(arr.shape) if rows else np.empty((0, 3), np.int64)
    if arr.size == 0:
        arr = arr.reshape(0, 3 if arr.ndim != 2 or arr.shape[1] != 2 else 2)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{_LOCATIONS_ACCEPTED}, got values of dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] not in ((2, 3) if allow_xy else (3,)):
        want = "(n, 2) or (n, 3)" if allow_xy else "(n, 3) (slide_index, x, y)"
        raise ValueError(f"locations must have shape {want}, got {arr.shape}")
    if arr.size and arr.dtype.kind == "f":
        if not (np.all(np.isfinite(arr)) and np.all(arr == np.floor(arr))):
            raise ValueError(f"locations must be integers (level-0 pixels), got dtype {arr.dtype}")
        if arr.min() < -(2.0**63) or arr.max() >= 2.0**63:
            raise InvalidArgumentError("locations value out of range (-2**63..2**63)")
    if arr.size and arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and int(arr.max()) > _I64_MAX:
        raise InvalidArgumentError(f"locations value {int(arr.max())} is out of range (-2**63..2**63)")
    arr = arr.astype(np.int64)
    if arr.shape[1] == 2:
        arr = np.concatenate([np.zeros((arr.shape[0], 1), np.int64), arr], axis=1)
    if arr.shape[0] and (arr[:, 0].min() < 0 or arr[:, 0].max() >= n_slides):
        bad = arr[(arr[:, 0] < 0) | (arr[:, 0] >= n_slides), 0][0]
        raise IndexError(f"slide index {bad} out of range for {n_slides} slide(s)")
    return np.ascontiguousarray(arr)


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
    from ._patches import read_patches

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
