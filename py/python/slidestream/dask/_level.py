"""``slidestream.dask.read_level``: one pyramid level as a lazy dask array (chunks = tiles)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Tuple

import numpy as np

from .._args import check_int, check_level
from .._batch import level0_origin
from .._errors import InvalidArgumentError
from .._slide import Slide
from ._common import SLIDES, fspath, stat_token, storage_of

if TYPE_CHECKING:  # dask is optional and imported lazily at run time.
    import dask.array

__all__ = ["read_level"]


def _read_level_block(
    path: Any, level: int, downsample: float, background: Any, storage_options: Any = None, block_info: Any = None
) -> np.ndarray:
    (y0, y1), (x0, x1), _ = block_info[None]["array-location"]
    slide = SLIDES.get(path, storage_options=storage_options)
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

    p = fspath(path)
    storage = storage_of(path, storage_options)
    level = check_level(level)
    with Slide(p, storage_options=storage) as s:
        if level >= s.level_count:
            _raise_invalid_level(s, level)
        width, height = s.level_dimensions[level]
        tw, th = s.level_tile_sizes[level]
        downsample = s.level_downsamples[level]
        remote = s.io_stats().get("remote")
    # A remote object's version is its ETag (a local file's: size and mtime).
    version = remote["etag"] if remote else stat_token(p)
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
