"""Dask adapter: lazy dask arrays over slide levels and patch sets.

``import slidestream.dask`` does not import dask; :func:`read_level` and :func:`read_patches`
import ``dask.array`` when called.

Every task of the graphs built here carries file **paths**, never open file handles: the task
opens the slide in the process that runs it (a worker of ``dask.distributed`` included) through
a small per-process cache of open slides, so graphs are cheap to ship and work with thread,
process and distributed schedulers alike.

Pixels are numpy ``uint8``, RGB (3 channels), transparent pixels and pixels outside the image
composited over ``background`` (int or (r, g, b)). Example::

    import slidestream.dask as ssd
    lvl = ssd.read_level("slide.svs", 2)              # (height, width, 3) uint8, lazy
    mean = lvl.mean(axis=(0, 1)).compute()
    patches = ssd.read_patches(["a.svs", "b.svs"], [(0, 0, 0), (1, 512, 512)], 0, 256)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence, Tuple

import numpy as np

from ._errors import InvalidArgumentError
from ._batch import SlideCache, check_int, check_level, level0_origin, normalize_locations, normalize_size, read_patch_batch
from ._slide import Slide

if TYPE_CHECKING:  # dask is optional and imported lazily at run time.
    import dask.array

__all__ = ["read_level", "read_patches"]

# Slides opened by tasks in this process (by path). Module-level so it lives as long as the
# worker process; 32 slides at most, least recently used dropped first.
_SLIDES = SlideCache(32)


def _fspath(path: Any) -> Any:
    if isinstance(path, Slide):
        return os.fsdecode(bytes(path.path_bytes))
    p = os.fspath(path)
    return p


def _storage(path: Any, storage_options: Any) -> Any:
    """The storage options a task opens ``path`` with: a :class:`Slide`'s own, else the
    call's ``storage_options`` (None for local paths)."""
    if isinstance(path, Slide):
        return dict(path.storage_options) or None
    return storage_options


def _stat_token(path: Any) -> Tuple[int, int]:
    try:
        st = os.stat(path)
        return (st.st_size, st.st_mtime_ns)
    except OSError:
        return (-1, -1)


def _read_level_block(
    path: Any, level: int, downsample: float, background: Any, storage_options: Any = None, block_info: Any = None
) -> np.ndarray:
    (y0, y1), (x0, x1), _ = block_info[None]["array-location"]
    slide = _SLIDES.get(path, storage_options=storage_options)
    loc = [(level0_origin(x0, downsample), level0_origin(y0, downsample))]
    return slide.read_regions(loc, level, (x1 - x0, y1 - y0), background=background)[0]


def read_level(path: Any, level: int, *, chunks: Any = None, background: Any = 255, storage_options: Any = None) -> "dask.array.Array":
    """One pyramid level as a lazy dask array.

    * ``path``: ``str``, ``bytes`` or ``os.PathLike`` (a :class:`slidestream.Slide` is accepted
      and used for its path). The slide is opened once here for its geometry and again, by
      path, in every process that computes a chunk.
    * ``level``: pyramid level (0 = full resolution); InvalidArgumentError for one that does
      not exist, TypeError for a non-int.
    * ``chunks``: ``None`` (default) — one chunk per tile of the level (the level's
      ``level_tile_sizes`` entry), so every task decodes whole tiles exactly once; an ``int``
      ``k`` — square blocks of k × k tiles; a pair ``(chunk_height, chunk_width)`` in pixels
      of the level (ints, or tuples of explicit chunk lengths as in dask; multiples of the tile
      size avoid decoding a tile in two tasks). Lengths must be positive ints (ValueError /
      TypeError naming ``chunks`` otherwise).
    * ``background``: int or (r, g, b) for transparent / missing pixels.
    * ``storage_options``: for a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``), the
      store's options as :class:`slidestream.Slide`'s (a :class:`Slide` given as ``path``
      brings its own); they travel with every task.

    Returns a ``dask.array.Array`` of shape (height, width, 3), dtype ``uint8``, RGB, rows =
    level-``level`` y, columns = level-``level`` x; element ``[y, x]`` is level pixel (x, y)
    (level-0 pixel ≈ (x, y) × downsample). Errors (missing file, bad level) are raised here,
    before any task runs.
    """
    import dask.array as da
    from dask.array.core import normalize_chunks
    from dask.base import tokenize

    p = _fspath(path)
    storage = _storage(path, storage_options)
    level = check_level(level)
    with Slide(p, storage_options=storage) as s:
        if level >= s.level_count:
            _raise_invalid_level(s, level)
        width, height = s.level_dimensions[level]
        tw, th = s.level_tile_sizes[level]
        downsample = s.level_downsamples[level]
        remote = s.io_stats().get("remote")
    # A remote object's version is its ETag (a local file's: size and mtime).
    version = remote["etag"] if remote else _stat_token(p)
    ch, cw = normalize_chunks(_check_chunks(chunks, (th, tw)), shape=(height, width), dtype=np.uint8)
    name = "slidestream-read_level-" + tokenize(os.fsencode(p), version, storage, level, ch, cw, background)
    return da.map_blocks(
        _read_level_block,
        name=name,
        chunks=(ch, cw, (3,)),
        dtype=np.uint8,
        meta=np.empty((0, 0, 0), np.uint8),
        path=p,
        level=int(level),
        downsample=float(downsample),
        background=background,
        storage_options=storage,
    )


_CHUNKS_ACCEPTED = "chunks must be None, a positive int (tiles) or (chunk_height, chunk_width): positive ints or tuples of chunk lengths"


def _check_chunks(chunks: Any, tile: Tuple[int, int]) -> Tuple[Any, Any]:
    """``read_level``'s ``chunks`` as (rows, cols) for dask's ``normalize_chunks``: None → the
    tile size, an int k → k × k tiles, a pair of positive ints or of tuples of chunk lengths
    (dask's explicit form; dask checks that they add up to the level size).

    Raises :class:`TypeError` naming ``chunks`` for non-integers, :class:`ValueError` for
    lengths that are not positive (a zero chunk would divide by zero in dask)."""
    th, tw = tile
    if chunks is None:
        return th, tw
    if isinstance(chunks, (bool, np.bool_)) or isinstance(chunks, (float, np.floating, str, bytes)):
        raise TypeError(f"{_CHUNKS_ACCEPTED}, got {type(chunks).__name__}")
    if isinstance(chunks, (int, np.integer)):
        k = check_int(chunks, "chunks")
        if k <= 0:
            raise ValueError(f"chunks must be a positive number of tiles, got {k}")
        return th * k, tw * k
    try:
        pair = tuple(chunks)
    except TypeError:
        raise TypeError(f"{_CHUNKS_ACCEPTED}, got {type(chunks).__name__}") from None
    if len(pair) != 2:
        raise ValueError(f"{_CHUNKS_ACCEPTED}, got {chunks!r}")

    def one(axis: str, c: Any) -> Any:
        lengths = c if isinstance(c, (tuple, list)) else None
        for v in lengths if lengths is not None else (c,):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{_CHUNKS_ACCEPTED}; chunk {axis} {v!r} is not an int")
            if v <= 0:
                raise ValueError(f"chunks must be positive; chunk {axis} is {int(v)}")
        return tuple(int(v) for v in lengths) if lengths is not None else int(c)

    return one("height", pair[0]), one("width", pair[1])


def _raise_invalid_level(s: Slide, level: Any) -> None:
    raise InvalidArgumentError(f"{s.path!r}: level {level!r} does not exist (level count {s.level_count})")


def _read_patch_chunk(
    paths: Sequence[Any], locs: np.ndarray, level: int, size: Tuple[int, int], background: Any, storages: Any = None
) -> np.ndarray:
    st = storages or [None] * len(paths)
    return read_patch_batch(lambda k: _SLIDES.get(paths[k], storage_options=st[k]), locs, level, size, background)


def read_patches(
    paths: Any,
    locations: Any,
    level: int,
    size: Any,
    *,
    background: Any = 255,
    batch: int = 256,
    storage_options: Any = None,
) -> "dask.array.Array":
    """Many patches of many slides as a lazy dask array.

    * ``paths``: sequence of slide paths (``str``, ``bytes``, ``os.PathLike`` or
      :class:`slidestream.Slide`, used for its path), or a single path.
    * ``locations``: sequence of ``(slide_index, x, y)`` or an integer array (n, 3): index into
      ``paths`` and the patch's top-left corner in level-0 pixels. With a single path, ``(x, y)``
      pairs / an array (n, 2) are accepted.
    * ``level``: pyramid level read (a negative level raises
      :class:`slidestream.InvalidArgumentError`, a ValueError, and a non-int a TypeError,
      here; a level past the last one InvalidArgumentError when a chunk is computed);
      ``size``: (width, height) in pixels of that level, or an int for a square.
    * ``batch``: patches per task; each task makes one :meth:`Slide.read_regions` call per
      distinct slide among its patches (tiles shared by patches decoded once). Tasks only carry
      the paths they need.
    * ``storage_options``: for URLs, the store's options as :class:`slidestream.Slide`'s (the
      same for every URL; a :class:`Slide` in ``paths`` brings its own).

    Returns a ``dask.array.Array`` of shape (n, height, width, 3), dtype ``uint8``, RGB, in the
    order of ``locations``, chunked ``batch`` patches along axis 0. Files are not opened here;
    a missing file or bad level raises when the chunk is computed.
    """
    import dask
    import dask.array as da
    from dask.base import tokenize

    single = isinstance(paths, (str, bytes, os.PathLike, Slide))
    plist = [_fspath(paths)] if single else [_fspath(p) for p in paths]
    slist = [_storage(paths, storage_options)] if single else [_storage(p, storage_options) for p in paths]
    if not plist:
        raise ValueError("no slides given")
    locs = normalize_locations(locations, len(plist), allow_xy=single)
    level = check_level(level)
    w, h = normalize_size(size)
    if isinstance(batch, (bool, np.bool_)):
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    batch = check_int(batch, "batch")
    if batch <= 0:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    n = locs.shape[0]
    meta = np.empty((0, 0, 0, 0), np.uint8)
    if n == 0:
        return da.from_array(np.empty((0, h, w, 3), np.uint8), chunks=(1, h, w, 3))
    stats = [_stat_token(p) for p in plist]
    parts = []
    for start in range(0, n, batch):
        chunk = locs[start : start + batch]
        used, inverse = np.unique(chunk[:, 0], return_inverse=True)
        sub_paths = [plist[int(k)] for k in used]
        sub_storage = [slist[int(k)] for k in used]
        sub = chunk.copy()
        sub[:, 0] = inverse.reshape(-1)
        token = tokenize([os.fsencode(p) for p in sub_paths], [stats[int(k)] for k in used], sub_storage, sub, level, (w, h), background)
        d = dask.delayed(_read_patch_chunk, pure=True)(
            sub_paths, sub, int(level), (w, h), background, sub_storage, dask_key_name=f"slidestream-read_patches-{token}"
        )
        parts.append(da.from_delayed(d, shape=(sub.shape[0], h, w, 3), dtype=np.uint8, meta=meta))
    return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=0)
