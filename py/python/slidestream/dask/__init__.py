"""Dask adapter: slides, patches and per-slide work as lazy Dask collections, for a thread,
process or ``dask.distributed`` scheduler alike.

``import slidestream.dask`` does not import dask (nor ``distributed``): each function imports
what it needs when called.

* :func:`read_level` — one pyramid level as a dask array (chunks = tiles).
* :func:`read_patches` — patches of many slides as a dask array (n, height, width, 3), tasks
  sized by the tiles they decode.
* :func:`map_patches` — a function of every patch batch as a dask dataframe of per-patch values
  (features, tissue fractions, predictions), on CPU or on each worker's GPU.
* :func:`map_slides` — one task per slide (thumbnails, tissue masks, patch coordinates, QC).
* :class:`SlidestreamWorkers` / :func:`setup_workers` — a ``distributed.WorkerPlugin``: the host
  tile cache budget and decode threads per worker, one GPU per worker
  (``device="worker"``, :func:`worker_device`).

Every task carries slide **paths** (and storage options), never open handles: it opens the
slide in the process that runs it through a per-process cache of open slides, so graphs are
cheap to ship and each worker opens a slide once. Pixels are numpy ``uint8``, RGB; transparent
and outside pixels are composited over ``background`` (int or (r, g, b)). Coordinates ``x, y``
are **level-0 pixels**, sizes pixels of the level read. Example::

    import slidestream.dask as ssd
    lvl = ssd.read_level("slide.svs", 2)                       # (h, w, 3) uint8, lazy
    patches = ssd.read_patches(["a.svs", "b.svs"], [(0, 0, 0), (1, 512, 512)], 256)
    means = ssd.map_patches(paths, rows, lambda b, r: {"mean": b.mean(axis=(1, 2, 3))}, 256)

docs/python.md ("Many slides on Dask") has a whole pipeline: thumbnails, tissue masks and patch
coordinates of a folder of slides written to Zarr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._level import read_level
from ._patches import map_patches, read_patches
from ._plan import SlideGeometry
from ._slides import SlideFailure, map_slides
from ._workers import setup_workers, worker_device

__all__ = ["read_level", "read_patches", "map_patches", "map_slides", "SlideFailure", "SlideGeometry",
           "SlidestreamWorkers", "setup_workers", "worker_device"]


def __getattr__(name: str) -> Any:
    if name == "SlidestreamWorkers":  # made on first use: it derives from distributed.WorkerPlugin
        from ._workers import _plugin_class

        return _plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # at run time made on first lookup (__getattr__ above)
    from ._workers import SlidestreamWorkers


def __dir__() -> list:
    return sorted(set(globals()) | {"SlidestreamWorkers"})
