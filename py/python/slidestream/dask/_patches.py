"""``slidestream.dask.read_patches`` (patches of many slides as a dask array) and
``map_patches`` (a function of every patch batch as a dask dataframe of per-patch values)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from .._args import check_int, normalize_size
from .._errors import InvalidArgumentError
from .._slide import Slide
from ._common import SLIDES, fspath, stat_token, storage_of
from ._plan import SlideGeometry, locality_order, partition, patch_rows, tile_ranges
from ._resolution import fill_levels, read_ranges, read_rows, resolutions, target_of
from ._workers import resolve_device

if TYPE_CHECKING:  # dask is optional and imported lazily at run time.
    import dask.array
    import dask.dataframe

__all__ = ["read_patches", "map_patches"]

#: Default tile budget of one task (distinct tiles decoded): ~0.2–0.5 s of one core's JPEG work
#: for 240–512 px tiles, far above the scheduler's per-task cost (~1 ms), small enough that a
#: slide's patches spread over several workers.
TASK_TILES = 256


def _slide_lists(paths: Any, storage_options: Any) -> Tuple[List[Any], List[Any], List[Optional[Slide]], bool]:
    single = isinstance(paths, (str, bytes, os.PathLike, Slide))
    given = [paths] if single else list(paths)
    if not given:
        raise InvalidArgumentError("no slides given (paths is empty)")
    for p in given:
        if not isinstance(p, (str, bytes, os.PathLike, Slide)):
            raise TypeError(f"paths must be slide paths (str, bytes, os.PathLike) or slidestream.Slide, got {type(p).__name__}")
    return [fspath(p) for p in given], [storage_of(p, storage_options) for p in given], [p if isinstance(p, Slide) else None for p in given], single


def _geometry_task(path: Any, storage: Any) -> Tuple[SlideGeometry, Any]:
    s = SLIDES.get(path, storage_options=storage)
    return SlideGeometry.of(s), _version(s, path)


def _version(s: Slide, path: Any) -> Any:
    """A remote object's ETag, a local file's (size, mtime): part of the graph keys."""
    remote = s.io_stats().get("remote")
    return remote["etag"] if remote else stat_token(path)


def _geometries(plist: List[Any], slist: List[Any], slides: List[Optional[Slide]], used: np.ndarray) -> Tuple[List[Any], List[Any]]:
    """Geometry and version of every slide in ``used`` (others None): from a given
    :class:`Slide` directly, else opened by tasks on the active scheduler (a
    ``dask.distributed`` client's workers, which then hold the slides open)."""
    import dask

    geos: List[Any] = [None] * len(plist)
    versions: List[Any] = [None] * len(plist)
    todo = []
    for k in (int(v) for v in used):
        if slides[k] is not None:
            geos[k], versions[k] = SlideGeometry.of(slides[k]), _version(slides[k], plist[k])  # type: ignore[arg-type]
        else:
            todo.append(k)
    if todo:
        got = dask.compute(*[dask.delayed(_geometry_task, pure=False)(plist[k], slist[k]) for k in todo])
        for k, (g, v) in zip(todo, got):
            geos[k], versions[k] = g, v
    return geos, versions


def _read(paths: Sequence[Any], storages: Sequence[Any], rows: np.ndarray, size: Tuple[int, int], background: Any, device: Any,
          target: Optional[dict] = None) -> Any:
    """One task's patches: rows (n, 4) with slide indices into ``paths``; one read call (a
    single slide and level on the CPU: ``read_regions``; else one cross-slide batch; at a
    resolution, ``target``, one :func:`slidestream.read_patches` call with it, on the device
    too)."""
    from .._patches import read_patches as read_batch

    slides = [SLIDES.get(p, storage_options=st) for p, st in zip(paths, storages)]
    ordinal = resolve_device(device)
    if target is not None:
        return read_batch(slides, read_rows(rows), size, background=background, device=None if ordinal is None else f"cuda:{ordinal}", **target)
    if ordinal is None and rows.shape[0] and np.all(rows[:, :2] == rows[0, :2]):
        return slides[int(rows[0, 0])].read_regions(np.ascontiguousarray(rows[:, 2:]), int(rows[0, 1]), size, background=background)
    return read_batch(slides, rows, size, background=background, device=None if ordinal is None else f"cuda:{ordinal}")


def _read_patches_task(paths: Sequence[Any], storages: Sequence[Any], rows: np.ndarray, size: Tuple[int, int], background: Any,
                       target: Optional[dict] = None) -> np.ndarray:
    out = _read(paths, storages, rows, size, background, None, target)
    assert isinstance(out, np.ndarray)
    return out


def _tasks(plist: List[Any], slist: List[Any], rows: np.ndarray, bounds: List[Tuple[int, int]]):  # type: ignore[no-untyped-def]
    """Per task: (start, end, its paths, their storage options, its rows with task-local slide
    indices, the global indices of those slides)."""
    for start, end in bounds:
        chunk = rows[start:end]
        used, inverse = np.unique(chunk[:, 0], return_inverse=True)
        sub = chunk.copy()
        sub[:, 0] = inverse.reshape(-1)
        yield start, end, [plist[int(k)] for k in used], [slist[int(k)] for k in used], sub, used


def _check_task_size(task_tiles: Any, batch: Any) -> Tuple[int, Optional[int]]:
    """``task_tiles`` and ``batch`` checked: positive ints (ValueError for a bool, 0 or less;
    TypeError for a non-int)."""
    for name, v in (("task_tiles", task_tiles), ("batch", batch)):
        if isinstance(v, (bool, np.bool_)):
            raise InvalidArgumentError(f"{name} must be a positive int, got {v!r}")
    task_tiles = check_int(task_tiles, "task_tiles", min_value=1, allow_bool=False)
    if batch is not None:
        batch = check_int(batch, "batch", min_value=1, allow_bool=False)
    return task_tiles, batch


def _max_patches(size: Tuple[int, int]) -> int:
    """Patches per task so that its output stays within dask's ``array.chunk-size``."""
    import dask
    from dask.utils import parse_bytes

    limit = parse_bytes(dask.config.get("array.chunk-size", "128MiB"))
    return max(1, int(limit) // (size[0] * size[1] * 3))


def read_patches(
    paths: Any,
    sampler: Any,
    size: Any,
    level: Optional[int] = None,
    *,
    n: Optional[int] = None,
    background: Any = 255,
    task_tiles: int = TASK_TILES,
    batch: Optional[int] = None,
    storage_options: Any = None,
    mpp: Optional[float] = None,
    magnification: Optional[float] = None,
    fallback_mpp: Optional[float] = None,
    fallback_magnification: Optional[float] = None,
) -> "dask.array.Array":
    """Patches of many slides as a lazy dask array, in the order of the sampler's rows.

    * ``paths``: sequence of slide paths or URLs (``str``, ``bytes``, ``os.PathLike``, or
      :class:`slidestream.Slide`, which is used for its path and storage options), or one.
      Tasks carry paths, never handles; each worker process opens a slide once and keeps it
      (the 32 most recently used).
    * ``sampler``: the patches — rows ``(slide_index, level, x, y)`` (an int array (n, 4) or a
      sequence of 4-tuples; :meth:`RandomPatchSampler.sample` output, a
      :class:`~slidestream.sampling.GridSampler`, anything with a ``patches`` array), rows
      ``(slide_index, x, y)`` read at ``level``, ``(x, y)`` pairs with a single path, or a random
      sampler (an object with ``sample(n)``; ``n`` required). ``slide_index`` indexes
      ``paths``; ``x, y`` are the top-left corner in **level-0 pixels**.
    * ``size``: (width, height) in pixels of the patch's level, or an int (square).
    * ``level``: pyramid level for rows without one (default 0); with rows that carry a level,
      None or that same level.
    * ``task_tiles``: a task's budget of distinct tiles (see :mod:`slidestream.dask._plan`):
      consecutive patches go to one task until their tiles reach it, and never more than fit
      dask's ``array.chunk-size`` (128 MiB). Tasks are sized to the slides' tile grids, so
      the slides are opened first — by tasks on the active scheduler (a distributed client's
      workers) — for their tile geometry; errors (missing file, bad level) are raised here.
    * ``batch``: instead, exactly ``batch`` patches per task, nothing opened here (errors raise
      when a chunk is computed).
    * ``background``: int or (r, g, b) for pixels outside the image and missing tiles.
    * ``storage_options``: for URLs, the store's options as :class:`slidestream.Slide`'s.
    * ``mpp`` (µm per output pixel) or ``magnification`` (objective power), with
      ``fallback_mpp`` / ``fallback_magnification`` for slides without the property: read at a
      physical resolution instead of a level (:mod:`slidestream.resolution`: each slide from
      the coarsest level at or below the target, reduced with its documented filter), exactly as
      :func:`slidestream.read_patches` with the same arguments. ``size`` is then in output
      pixels, ``level`` must be None, and rows are ``(slide_index, x, y)`` (level-0 pixels) or
      ``(slide_index, level, x, y)`` carrying the level chosen for that slide (the rows of a
      sampler made with the same ``mpp=``). The slides are opened here for their mpp (also
      with ``batch``), so a slide without it and no fallback raises InvalidArgumentError here.

    Returns a ``dask.array.Array`` (n, height, width, 3) ``uint8``, RGB, chunk ``k`` one task
    (one :meth:`Slide.read_regions` call, or one cross-slide :func:`slidestream.read_patches`
    call when it spans slides or levels). Raises TypeError / ValueError for bad rows, size or
    task sizes, IndexError / InvalidArgumentError for slide indices or levels out of range."""
    import dask
    import dask.array as da
    from dask.base import tokenize

    plist, slist, given, single = _slide_lists(paths, storage_options)
    w, h = normalize_size(size)
    task_tiles, batch = _check_task_size(task_tiles, batch)
    target = target_of(level, None, mpp, magnification, fallback_mpp, fallback_magnification)
    rows = patch_rows(sampler, len(plist), level, single=single, n=n, unknown_level=target is not None)
    meta = np.empty((0, 0, 0, 0), np.uint8)
    if rows.shape[0] == 0:
        return da.from_array(np.empty((0, h, w, 3), np.uint8), chunks=(1, h, w, 3))
    res = resolutions(plist, slist, given, np.unique(rows[:, 0]), target) if target is not None else None
    if res is not None:
        rows = fill_levels(rows, res)
    if batch is not None:
        bounds = [(s, min(s + batch, rows.shape[0])) for s in range(0, rows.shape[0], batch)]
        versions = [stat_token(p) for p in plist]
    else:
        geos, versions = _geometries(plist, slist, given, np.unique(rows[:, 0]))
        ranges = tile_ranges(rows, geos, (w, h)) if res is None else read_ranges(rows, geos, res, (w, h))
        bounds = partition(rows, ranges, task_tiles, _max_patches((w, h)))
    parts = []
    for _s, _e, sub_paths, sub_storage, sub, used in _tasks(plist, slist, rows, bounds):
        token = tokenize([os.fsencode(p) for p in sub_paths], [versions[int(k)] for k in used], sub_storage, sub, (w, h), background, target)
        d = dask.delayed(_read_patches_task, pure=True)(sub_paths, sub_storage, sub, (w, h), background, target, dask_key_name=f"slidestream-read_patches-{token}")
        parts.append(da.from_delayed(d, shape=(sub.shape[0], h, w, 3), dtype=np.uint8, meta=meta))
    return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=0)


_BASE_COLUMNS = ("slide", "level", "x", "y")


def _map_task(fn: Callable[..., Any], paths: Sequence[Any], storages: Sequence[Any], rows: np.ndarray, used: np.ndarray,
              positions: np.ndarray, size: Tuple[int, int], background: Any, device: Any, target: Optional[dict] = None) -> Any:
    import pandas as pd  # type: ignore[import-untyped]

    batch = _read(paths, storages, rows, size, background, device, target)
    glob = rows.copy()
    glob[:, 0] = used[rows[:, 0]]
    values = fn(batch, glob)
    frame = values if isinstance(values, pd.DataFrame) else pd.DataFrame(values)
    if len(frame) != rows.shape[0]:
        raise ValueError(f"map_patches: fn returned {len(frame)} rows for a batch of {rows.shape[0]} patches (one row per patch expected)")
    clash = [c for c in frame.columns if c in _BASE_COLUMNS]
    if clash:
        raise ValueError(f"map_patches: fn's columns {clash} clash with the patch columns {list(_BASE_COLUMNS)}")
    base = pd.DataFrame({c: glob[:, i] for i, c in enumerate(_BASE_COLUMNS)}, index=pd.Index(positions, name="patch"))
    frame.index = base.index
    return pd.concat([base, frame], axis=1)


def _meta_frame(meta: Any) -> Any:
    import pandas as pd  # type: ignore[import-untyped]

    if meta is None:
        return None
    user = meta if isinstance(meta, pd.DataFrame) else pd.DataFrame({k: pd.Series(dtype=v) for k, v in dict(meta).items()})
    base = pd.DataFrame({c: pd.Series(dtype="int64") for c in _BASE_COLUMNS}, index=pd.Index([], dtype="int64", name="patch"))
    user = user.iloc[:0].copy()
    user.index = base.index
    return pd.concat([base, user], axis=1)


def map_patches(
    paths: Any,
    sampler: Any,
    fn: Callable[[Any, np.ndarray], Any],
    size: Any,
    level: Optional[int] = None,
    *,
    n: Optional[int] = None,
    meta: Any = None,
    sort: bool = True,
    task_tiles: int = TASK_TILES,
    background: Any = 255,
    device: Any = None,
    storage_options: Any = None,
    mpp: Optional[float] = None,
    magnification: Optional[float] = None,
    fallback_mpp: Optional[float] = None,
    fallback_magnification: Optional[float] = None,
) -> "dask.dataframe.DataFrame":
    """Per-patch values of ``fn`` over many slides as a lazy dask dataframe (one row per patch).

    ``paths``, ``sampler``, ``size``, ``level``, ``n``, ``task_tiles``, ``background``,
    ``storage_options`` and ``mpp`` / ``magnification`` (with their fallbacks; on a GPU too) as
    :func:`read_patches`; at a resolution ``rows`` carry the level each slide is read from. Each task reads its patches as one batch and
    calls ``fn(batch, rows)``: ``batch`` uint8 (k, height, width, 3) RGB — a numpy array on the
    CPU, a :class:`slidestream.DeviceArray` (``torch.from_dlpack`` / ``cupy.from_dlpack``) on
    a GPU — and ``rows`` int64 (k, 4) ``(slide_index, level, x, y)`` of those patches (indices
    into ``paths``). ``fn`` returns k values per column: a mapping column → array / list, or a
    pandas DataFrame of k rows.

    * ``sort``: group the patches by slide, level and tile position before cutting tasks
      (default), so tasks decode each tile once and touch one slide; rows keep their position
      in the sampler as the index.
    * ``meta``: fn's columns (a mapping column → dtype, or an empty DataFrame); None lets dask
      compute the first partition to learn them.
    * ``device``: None / ``"cpu"``; ``"worker"`` — the GPU :class:`SlidestreamWorkers` gave the
      worker (CPU if none); ``"cuda:N"`` / an int.

    Returns a ``dask.dataframe.DataFrame`` with columns ``slide``, ``level``, ``x``, ``y``
    (int64) then fn's, indexed by ``patch`` (the row's position in the sampler's rows), one
    partition per task. A task raises ValueError when fn returns another number of rows or a
    column named like the patch columns."""
    import dask
    import dask.dataframe as dd

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    plist, slist, given, single = _slide_lists(paths, storage_options)
    w, h = normalize_size(size)
    task_tiles, _ = _check_task_size(task_tiles, None)
    target = target_of(level, device, mpp, magnification, fallback_mpp, fallback_magnification)
    rows = patch_rows(sampler, len(plist), level, single=single, n=n, unknown_level=target is not None)
    if device not in (None, "cpu", "worker"):
        resolve_device(device)  # a bad device raises here, not in every task
    res = resolutions(plist, slist, given, np.unique(rows[:, 0]), target) if target is not None and rows.shape[0] else None
    if res is not None:
        rows = fill_levels(rows, res)
    geos, versions = _geometries(plist, slist, given, np.unique(rows[:, 0])) if rows.shape[0] else ([], [])
    ranges = tile_ranges(rows, geos, (w, h)) if res is None else read_ranges(rows, geos, res, (w, h))
    order = locality_order(rows, ranges) if sort else np.arange(rows.shape[0], dtype=np.int64)
    rows, ranges = rows[order], ranges[order]
    bounds = partition(rows, ranges, task_tiles, _max_patches((w, h)))
    parts = []
    for s, e, sub_paths, sub_storage, sub, used in _tasks(plist, slist, rows, bounds):
        key = dask.base.tokenize(fn, [os.fsencode(p) for p in sub_paths], [versions[int(k)] for k in used], sub_storage, sub, order[s:e], (w, h), background, device, target)
        parts.append(dask.delayed(_map_task, pure=True)(fn, sub_paths, sub_storage, sub, used, order[s:e], (w, h), background, device, target, dask_key_name=f"slidestream-map_patches-{key}"))
    frame_meta = _meta_frame(meta)
    if not parts:
        import pandas as pd  # type: ignore[import-untyped]

        empty = frame_meta if frame_meta is not None else _meta_frame({})
        return dd.from_pandas(empty if empty is not None else pd.DataFrame(), npartitions=1)
    return dd.from_delayed(parts, meta=frame_meta, verify_meta=False)
