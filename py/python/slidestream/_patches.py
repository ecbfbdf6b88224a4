"""``slidestream.read_patches``: one batch of patches drawn from many slides."""

from __future__ import annotations

from typing import Any, Sequence, Tuple, Union

import numpy as np

from ._batch import normalize_size
from ._errors import InvalidArgumentError
from ._slide import Slide
from ._slidestream import DeviceArray, _read_patches


def read_patches(
    slides: Sequence[Slide],
    requests: Any,
    size: Tuple[int, int],
    *,
    background: Any = None,
    device: Any = None,
) -> Union[np.ndarray, DeviceArray]:
    """Read one batch of patches across slides and levels: uint8 array (n, height, width, 3),
    RGB, patch ``k`` equal to
    ``slides[i].read_regions([(x, y)], level, size, background=background)[0]`` for
    ``requests[k] = (i, level, x, y)``. ``size`` may be an int (a square patch).

    slides: sequence of :class:`Slide`. requests: sequence of ``(slide_index, level, x, y)``
    (``x, y`` in level-0 pixels of that slide) or an integer array of shape (n, 4). size:
    ``(width, height)`` of every patch in pixels of its level. background: int or (r, g, b)
    (white by default) outside the image and on missing tiles.

    device: None or "cpu" → a numpy array; "cuda", "cuda:N", an int N or a ``torch.device`` →
    a :class:`DeviceArray` in that GPU's memory (``__dlpack__`` / ``__cuda_array_interface__``;
    complete when the call returns, so usable on any stream), pixels equal to the CPU result.

    The tiles of all slides are planned, read and decoded as one batch: on the CPU in waves
    within the working set, the slides' reads side by side on the decode threads; on a GPU as
    one engine call (one work queue for the tiles of every slide shared by the nvJPEG lanes and
    the CPU decode workers, one read plan per file per chunk, one assembly launch). Either way
    the decoders stay busy where a loop of per-slide ``read_regions`` calls waits for each
    slide's few tiles in turn. The GIL is released during the read.

    Raises TypeError for requests that are not integer rows of four, InvalidArgumentError for a
    slide index or level that does not exist or a value outside int64, LimitsExceededError when the output exceeds the
    smallest ``max_region_bytes`` of the slides involved, each slide's read errors (on a GPU, the
    first patch whose tile failed), ValueError for an invalid ``device`` and GpuError when CUDA
    is unavailable or this build has no GPU support."""
    slides = list(slides)
    for i, s in enumerate(slides):
        if not isinstance(s, Slide):
            raise TypeError(f"slides[{i}] must be a slidestream.Slide, not {type(s).__name__}")
    if isinstance(requests, (str, bytes, dict, set)):
        raise TypeError("requests must be a sequence of (slide_index, level, x, y) or an integer array of shape (n, 4)")
    arr = np.asarray(requests, dtype=object if not isinstance(requests, np.ndarray) else None)
    if arr.size == 0:
        arr = np.zeros((0, 4), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise TypeError(f"requests must have shape (n, 4) (rows of slide_index, level, x, y), got shape {arr.shape}")
    if arr.dtype == object:
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in arr.flat):
            raise TypeError("requests must hold ints (slide_index, level, x, y)")
        vals = [int(v) for v in arr.flat]
        if any(not (-(2**63) <= v < 2**63) for v in vals):
            raise InvalidArgumentError("requests values must fit in int64 (at most 2**63 - 1)")
        arr = np.array(vals, dtype=np.int64).reshape(-1, 4)
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"requests must be integers, got dtype {arr.dtype}")
    elif arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2**63:
        raise InvalidArgumentError("requests values must fit in int64 (at most 2**63 - 1)")
    if isinstance(size, (int, np.integer)) and not isinstance(size, (bool, np.bool_)):
        size = normalize_size(size)
    return _read_patches(slides, np.ascontiguousarray(arr, dtype=np.int64), size, background, device)
