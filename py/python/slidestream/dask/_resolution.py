"""``mpp=`` / ``magnification=`` in :func:`slidestream.dask.read_patches` and
:func:`~slidestream.dask.map_patches`: the physical resolution of
:mod:`slidestream.resolution` (each slide read from the coarsest level at or below the
target, then reduced to the requested µm per pixel with that module's filter), planned here and
read in each task by :func:`slidestream.read_patches` with the same arguments."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._errors import InvalidArgumentError
from .._slide import Slide
from ..resolution import Resolution, resolve
from ._common import SLIDES
from ._plan import tile_ranges


def target_of(level: Any, device: Any, mpp: Any, magnification: Any, fallback_mpp: Any, fallback_magnification: Any) -> Optional[Dict[str, Any]]:
    """The resolution keywords of a call as a dict for :func:`slidestream.read_patches` (None
    when reading by level). InvalidArgumentError for fallbacks without a target or a target
    with ``level``."""
    if mpp is None and magnification is None:
        if fallback_mpp is not None or fallback_magnification is not None:
            raise InvalidArgumentError("fallback_mpp= / fallback_magnification= apply only with mpp= or magnification=")
        return None
    if mpp is not None and magnification is not None:
        raise InvalidArgumentError("give exactly one of mpp= and magnification=")
    if level is not None:
        raise InvalidArgumentError("give level= or mpp= / magnification=, not both (the resolution chooses each slide's level)")
    return {"mpp": mpp, "magnification": magnification, "fallback_mpp": fallback_mpp, "fallback_magnification": fallback_magnification}


def _resolve_task(path: Any, storage: Any, target: Dict[str, Any]) -> Resolution:
    return resolve(SLIDES.get(path, storage_options=storage), **target)


def resolutions(plist: List[Any], slist: List[Any], given: List[Optional[Slide]], used: np.ndarray, target: Dict[str, Any]) -> List[Optional[Resolution]]:
    """The :class:`~slidestream.resolution.Resolution` of every slide in ``used`` (others
    None): from a given :class:`Slide` directly, else by tasks on the active scheduler (which
    open the slides, as the geometry tasks do). Raises the resolution's errors (a slide
    without mpp and no fallback, a target finer than level 0) here, not in a task."""
    import dask

    out: List[Optional[Resolution]] = [None] * len(plist)
    todo = []
    for k in (int(v) for v in used):
        g = given[k]
        if g is not None:
            out[k] = resolve(g, **target)
        else:
            todo.append(k)
    if todo:
        got = dask.compute(*[dask.delayed(_resolve_task, pure=False)(plist[k], slist[k], target) for k in todo])
        for k, r in zip(todo, got):
            out[k] = r
    return out


def fill_levels(rows: np.ndarray, res: Sequence[Optional[Resolution]]) -> np.ndarray:
    """``rows`` (int64 (n, 4)) with each row's level the one its slide is read from: rows
    without a level (-1) get it; a row carrying another level is an InvalidArgumentError (rows
    of a sampler made with the same ``mpp=`` carry the right one)."""
    rows = rows.copy()
    chosen = np.array([-1 if r is None else r.level for r in res], np.int64)[rows[:, 0]]
    unknown = rows[:, 1] < 0
    bad = np.flatnonzero(~unknown & (rows[:, 1] != chosen))
    if bad.size:
        k = int(bad[0])
        raise InvalidArgumentError(
            f"patch row {k} has level {int(rows[k, 1])}, but the resolution reads slide {int(rows[k, 0])} from level "
            f"{int(chosen[k])}; give (slide_index, x, y) rows or the rows of a sampler made with the same resolution"
        )
    rows[unknown, 1] = chosen[unknown]
    return rows


def read_ranges(rows: np.ndarray, geos: Sequence[Any], res: Sequence[Optional[Resolution]], size: Tuple[int, int]) -> np.ndarray:
    """:func:`~slidestream.dask._plan.tile_ranges` of rows read at a resolution: each slide's
    patches cover :meth:`Resolution.read_size` pixels of its level, not ``size``."""
    out = np.zeros((rows.shape[0], 4), np.int64)
    sizes = {k: r.read_size(size) for k, r in enumerate(res) if r is not None}
    for rs in set(sizes.values()):
        sel = np.flatnonzero(np.isin(rows[:, 0], [k for k, v in sizes.items() if v == rs]))
        out[sel] = tile_ranges(rows[sel], geos, rs)
    return out


def read_rows(rows: np.ndarray) -> np.ndarray:
    """A task's rows for :func:`slidestream.read_patches` at a resolution: ``(slide_index,
    x, y)`` when the levels are still to be chosen (-1, the ``batch=`` path, where nothing is
    opened while planning), else the rows as they are."""
    if rows.shape[0] and (rows[:, 1] < 0).any():
        return np.ascontiguousarray(rows[:, [0, 2, 3]])
    return rows

