"""Argument checks shared by every public function (a leaf module: it imports only numpy and
the exception classes, so the modules that read slides can all use it without importing each
other). Sizes are (width, height) in pixels, locations level-0 pixels, levels non-negative
ints; out-of-range values are :class:`~slidestream.InvalidArgumentError`, wrong types
:class:`TypeError`."""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, Optional, Tuple

import numpy as np

from ._errors import InvalidArgumentError



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
