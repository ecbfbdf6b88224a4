"""What every task of :mod:`slidestream.dask` shares: the per-process cache of open slides,
how a task names a slide (path + storage options, never a handle) and a file's version token."""

from __future__ import annotations

import os
from typing import Any, Tuple

from .._batch import SlideCache
from .._slide import Slide

#: Slides opened by tasks in this process (a Dask worker: one per worker process), by path and
#: storage options. Module-level so it lives as long as the process; the 32 most recently used
#: stay open (tasks grouped by slide, as these functions make them, reuse one handle).
SLIDES = SlideCache(32)


def fspath(path: Any) -> Any:
    """A task's name for ``path``: the path itself (``str`` / ``bytes``), a :class:`Slide`'s
    path, an ``os.PathLike``'s ``os.fspath``."""
    if isinstance(path, Slide):
        return os.fsdecode(bytes(path.path_bytes))
    return os.fspath(path)


def storage_of(path: Any, storage_options: Any) -> Any:
    """The storage options a task opens ``path`` with: a :class:`Slide`'s own, else the
    call's ``storage_options`` (None for local paths)."""
    if isinstance(path, Slide):
        return dict(path.storage_options) or None
    return storage_options


def stat_token(path: Any) -> Tuple[int, int]:
    """(size, mtime in ns) of a local file, (-1, -1) when it cannot be stat'ed (a URL, a
    missing file): part of a graph key, so a rewritten file gets new keys."""
    try:
        st = os.stat(path)
        return (st.st_size, st.st_mtime_ns)
    except (OSError, ValueError):
        return (-1, -1)
