"""``slidestream.read_patches``: one batch of patches drawn from many slides."""

from __future__ import annotations

from typing import Any, Sequence, Tuple, Union

import numpy as np

from ._args import normalize_size
from ._errors import InvalidArgumentError
from ._slide import Slide
from ._slidestream import DeviceArray, _read_patches, _resize_patches_device


def read_patches(
    slides: Sequence[Slide],
    requests: Any,
    size: Tuple[int, int],
    *,
    background: Any = None,
    device: Any = None,
    mpp: Any = None,
    magnification: Any = None,
    fallback_mpp: Any = None,
    fallback_magnification: Any = None,
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

    Physical resolution: with ``mpp=`` (µm per output pixel) or ``magnification=`` (objective
    power), ``size`` is in output pixels at that resolution and each slide is read from the
    coarsest level at or below it, then reduced (:mod:`slidestream.resolution`: the level,
    scale and filter; ``fallback_mpp=`` / ``fallback_magnification=`` for slides without the
    property). Rows are then ``(slide_index, x, y)`` (n, 3), or ``(slide_index, level, x, y)``
    whose level must be the one chosen for that slide (the rows a sampler made with the same
    ``mpp=`` gives); another level is an InvalidArgumentError. With a ``device`` the patches
    are read and reduced on that GPU (the CPU path's filter taps, so the same pixels) into one
    :class:`DeviceArray`.

    Raises TypeError for requests that are not integer rows of four, InvalidArgumentError for a
    slide index or level that does not exist or a value outside int64, LimitsExceededError when the output exceeds the
    smallest ``max_region_bytes`` of the slides involved, each slide's read errors (on a GPU, the
    first patch whose tile failed), ValueError for an invalid ``device`` and GpuError when CUDA
    is unavailable or this build has no GPU support."""
    slides = list(slides)
    for i, s in enumerate(slides):
        if not isinstance(s, Slide):
            raise TypeError(f"slides[{i}] must be a slidestream.Slide, not {type(s).__name__}")
    if mpp is not None or magnification is not None:
        return _read_at_resolution(slides, requests, size, background, device, mpp=mpp, magnification=magnification,
                                   fallback_mpp=fallback_mpp, fallback_magnification=fallback_magnification)
    if fallback_mpp is not None or fallback_magnification is not None:
        raise InvalidArgumentError("fallback_mpp= / fallback_magnification= apply only with mpp= or magnification=")
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


def _read_at_resolution(slides: Sequence[Slide], requests: Any, size: Any, background: Any, device: Any, **target: Any) -> Union[np.ndarray, DeviceArray]:
    """read_patches with mpp= / magnification= (see its docs): one level read per slide, in
    one cross-slide call per read size, then reduced."""
    from .resolution import _resolve_all, resize_patches

    on_device = device is not None and device != "cpu"
    slides = list(slides)
    for i, s in enumerate(slides):
        if not isinstance(s, Slide):
            raise TypeError(f"slides[{i}] must be a slidestream.Slide, not {type(s).__name__}")
    out_size = normalize_size(size)
    arr = np.asarray(requests)
    if arr.size == 0 and not on_device:
        return np.empty((0, out_size[1], out_size[0], 3), np.uint8)
    if arr.size == 0:
        return _read_patches(slides, np.zeros((0, 4), np.int64), out_size, background, device)
    if arr.ndim != 2 or arr.shape[1] not in (3, 4) or arr.dtype.kind not in "iu":
        raise TypeError(f"with mpp= / magnification=, requests must be integer rows (slide_index, x, y) or (slide_index, level, x, y), got shape {arr.shape}, dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    idx = arr[:, 0]
    if idx.min() < 0 or idx.max() >= len(slides):
        raise InvalidArgumentError(f"requests: slide index {int(idx[(idx < 0) | (idx >= len(slides))][0])} out of range for {len(slides)} slide(s)")
    # Only the slides the rows use are resolved (another may lack the mpp and not matter).
    used = [int(k) for k in np.unique(idx)]
    res_of = dict(zip(used, _resolve_all([slides[k] for k in used], **target)))
    levels = np.array([res_of[int(k)].level for k in idx], np.int64)
    if arr.shape[1] == 4:
        bad = np.flatnonzero(arr[:, 1] != levels)
        if bad.size:
            k = int(bad[0])
            raise InvalidArgumentError(
                f"requests[{k}] has level {int(arr[k, 1])}, but {target} reads slide {int(idx[k])} from level {int(levels[k])}; "
                "give (slide_index, x, y) rows or the rows of a sampler made with the same resolution"
            )
        xy = arr[:, 2:]
    else:
        xy = arr[:, 1:]
    read_sizes = {k: r.read_size(out_size) for k, r in res_of.items()}
    groups: list = []  # (the read batch of one read size, its output rows)
    for rs in sorted(set(read_sizes.values())):
        group = [k for k, v in read_sizes.items() if v == rs]
        sel = np.flatnonzero(np.isin(idx, group))
        if sel.size == 0:
            continue
        rows = np.empty((sel.size, 4), np.int64)
        rows[:, 0], rows[:, 1], rows[:, 2:] = idx[sel], levels[sel], xy[sel]
        groups.append((_read_patches(slides, np.ascontiguousarray(rows), rs, background, device), sel))
    if on_device:
        # Resized on the GPU with the CPU path's taps (the same pixels), into one array.
        if len(groups) == 1 and tuple(groups[0][0].shape[1:3]) == (out_size[1], out_size[0]):
            return groups[0][0]  # read at exactly the requested scale, rows in order
        return _resize_patches_device([(a, sel.astype(np.int64)) for a, sel in groups], arr.shape[0], out_size)
    out = np.empty((arr.shape[0], out_size[1], out_size[0], 3), np.uint8)
    for got, sel in groups:
        out[sel] = resize_patches(np.asarray(got), out_size)
    return out
