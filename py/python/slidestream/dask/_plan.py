"""How :mod:`slidestream.dask` cuts many patches into tasks (pure: numpy in, numpy out).

A task reads a run of consecutive patch rows and ends when the tiles it needs — distinct
``(slide, level, column, row)`` tiles of the slides' tile grids, counted from each slide's
:class:`SlideGeometry` — reach ``task_tiles``, or its output reaches ``max_patches`` patches.
So a task's work is a number of tile decodes (what costs), not a number of patches: 256 patches
that share 40 tiles make one task, 256 patches scattered over 1000 tiles make four.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .._args import check_int, check_level, normalize_locations
from .._errors import InvalidArgumentError
from .._slide import Slide


@dataclass(frozen=True)
class SlideGeometry:
    """What planning needs of one slide, per level ``k``: ``dimensions[k]`` (width, height)
    and ``tile_sizes[k]`` (width, height) in pixels of level ``k``, ``downsamples[k]`` (level-0
    pixels per level-``k`` pixel, OpenSlide's ``level_downsamples``)."""

    dimensions: Tuple[Tuple[int, int], ...]
    tile_sizes: Tuple[Tuple[int, int], ...]
    downsamples: Tuple[float, ...]

    @classmethod
    def of(cls, slide: Slide) -> "SlideGeometry":
        """The geometry of an open slide."""
        return cls(
            tuple(tuple(int(v) for v in d) for d in slide.level_dimensions),  # type: ignore[misc]
            tuple(tuple(int(v) for v in t) for t in slide.level_tile_sizes),  # type: ignore[misc]
            tuple(float(d) for d in slide.level_downsamples),
        )


def patch_rows(patches: Any, n_slides: int, level: Optional[int], *, single: bool, n: Optional[int] = None,
               unknown_level: bool = False) -> np.ndarray:
    """The patches of a call as int64 rows (n, 4) ``(slide_index, level, x, y)``, C-contiguous.

    ``patches`` is an integer array / sequence of rows ``(slide_index, level, x, y)`` (then
    ``level`` must be None or equal every row's), of ``(slide_index, x, y)`` (``level``, default
    0, applies; with ``unknown_level`` the level is -1, chosen later by a resolution), of
    ``(x, y)`` with a single slide; an object with a ``patches`` array (e.g.
    :class:`slidestream.sampling.GridSampler`); or one with ``sample(n)`` (e.g.
    :class:`~slidestream.sampling.RandomPatchSampler`; ``n`` required). Raises TypeError /
    ValueError for other shapes, dtypes or a missing ``n``, IndexError or InvalidArgumentError
    for a slide index out of range."""
    level = None if level is None else check_level(level)
    sample = getattr(patches, "sample", None)
    if callable(sample) and not isinstance(patches, np.ndarray):
        if n is None:
            raise ValueError("n (the number of patches to draw) is required with a random sampler (an object with .sample(n))")
        patches = sample(check_int(n, "n", min_value=0))
    elif n is not None:
        raise ValueError("n applies only to a random sampler (an object with .sample(n))")
    patches = getattr(patches, "patches", patches)
    arr = np.asarray(patches) if isinstance(patches, np.ndarray) or hasattr(patches, "__array__") else None
    if arr is None and hasattr(patches, "__len__") and not isinstance(patches, (str, bytes)) and len(patches):
        first = patches[0] if hasattr(patches, "__getitem__") else None
        if first is not None and hasattr(first, "__len__") and len(first) == 4:
            arr = np.asarray([tuple(r) for r in patches])
    if arr is not None and arr.ndim == 2 and arr.shape[1] == 4:
        if arr.dtype.kind not in "iu":
            raise TypeError(f"patch rows (slide_index, level, x, y) must be integers, got dtype {arr.dtype}")
        rows = np.ascontiguousarray(arr, dtype=np.int64)
        if rows.shape[0]:
            if rows[:, 0].min() < 0 or rows[:, 0].max() >= n_slides:
                bad = int(rows[(rows[:, 0] < 0) | (rows[:, 0] >= n_slides), 0][0])
                raise InvalidArgumentError(f"patch rows: slide index {bad} out of range for {n_slides} slide(s)")
            if rows[:, 1].min() < 0:
                raise InvalidArgumentError(f"patch rows: level {int(rows[:, 1].min())} does not exist (levels are 0 or more)")
            if level is not None and np.any(rows[:, 1] != level):
                raise ValueError(f"level={level} was given but the patch rows carry other levels ({sorted(set(rows[:, 1].tolist()))[:5]}); give level=None")
        return rows
    locs = normalize_locations(patches, n_slides, allow_xy=single)
    rows = np.empty((locs.shape[0], 4), dtype=np.int64)
    rows[:, 0] = locs[:, 0]
    rows[:, 1] = -1 if unknown_level else (0 if level is None else level)
    rows[:, 2:] = locs[:, 1:]
    return rows


def tile_ranges(rows: np.ndarray, geometries: Sequence[SlideGeometry], size: Tuple[int, int]) -> np.ndarray:
    """For each row ``(slide, level, x, y)``, the tiles its patch touches as int64 (n, 4)
    ``(col0, col1, row0, row1)``, half-open, of the patch's pixels inside the level (an empty range
    for a patch wholly outside it). The level origin of a patch is
    ``floor(x / downsample)`` (slidestream's exact crop; docs/architecture.md). Raises
    InvalidArgumentError for a level the row's slide does not have."""
    n = rows.shape[0]
    out = np.zeros((n, 4), dtype=np.int64)
    w, h = size
    for s in np.unique(rows[:, 0]) if n else ():
        g = geometries[int(s)]
        on_s = rows[:, 0] == s
        for lv in np.unique(rows[on_s, 1]):
            lv = int(lv)
            if lv >= len(g.downsamples):
                raise InvalidArgumentError(f"slide {int(s)}: level {lv} does not exist (level count {len(g.downsamples)})")
            sel = np.flatnonzero(on_s & (rows[:, 1] == lv))
            d = g.downsamples[lv]
            (lw, lh), (tw, th) = g.dimensions[lv], g.tile_sizes[lv]
            lx = np.floor(rows[sel, 2] / d).astype(np.int64)
            ly = np.floor(rows[sel, 3] / d).astype(np.int64)
            # The patch's pixels inside the level, then the tiles holding them.
            x0, x1 = np.clip(lx, 0, lw), np.clip(lx + w, 0, lw)
            y0, y1 = np.clip(ly, 0, lh), np.clip(ly + h, 0, lh)
            inside = (x1 > x0) & (y1 > y0)
            out[sel, 0] = np.where(inside, x0 // tw, 0)
            out[sel, 1] = np.where(inside, (x1 - 1) // tw + 1, 0)
            out[sel, 2] = np.where(inside, y0 // th, 0)
            out[sel, 3] = np.where(inside, (y1 - 1) // th + 1, 0)
    return out


def partition(rows: np.ndarray, ranges: np.ndarray, task_tiles: int, max_patches: int) -> List[Tuple[int, int]]:
    """Cut consecutive ``rows`` into tasks ``[(start, end), ...]`` covering them in order: a
    task takes rows until one more would bring its distinct tiles (of ``ranges``, as
    :func:`tile_ranges` gives) past ``task_tiles`` or its rows past ``max_patches``; a single
    patch needing more tiles than ``task_tiles`` is a task of its own."""
    n = rows.shape[0]
    bounds: List[Tuple[int, int]] = []
    start = 0
    seen: set = set()
    for i in range(n):
        s, lv = int(rows[i, 0]), int(rows[i, 1])
        c0, c1, r0, r1 = (int(v) for v in ranges[i])
        tiles = {(s, lv, c, r) for r in range(r0, r1) for c in range(c0, c1)}
        new = tiles - seen
        if i > start and (len(seen) + len(new) > task_tiles or i - start >= max_patches):
            bounds.append((start, i))
            start, seen = i, tiles
        else:
            seen |= new
    if n:
        bounds.append((start, n))
    return bounds


def locality_order(rows: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """A stable order of ``rows`` that groups them by slide and level, then by tile row and
    column of their first tile: patches sharing tiles become neighbours, so tasks decode each
    tile once. int64 (n,) positions into ``rows``."""
    return np.lexsort((rows[:, 2], ranges[:, 0], ranges[:, 2], rows[:, 1], rows[:, 0])).astype(np.int64)
