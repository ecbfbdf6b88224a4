"""``slidestream.dask.map_slides``: one task per slide, for per-slide work over a cohort
(thumbnails, tissue masks, patch coordinates, QC)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List

from .._errors import InvalidArgumentError
from ._common import SLIDES
from ._patches import _slide_lists

if TYPE_CHECKING:
    import dask.bag

__all__ = ["map_slides", "SlideFailure"]


class SlideFailure:
    """What :func:`map_slides` (``errors="return"``) gives for a slide whose task raised:
    ``index`` (position in ``paths``), ``path``, ``error`` (the exception, with its type)."""

    __slots__ = ("index", "path", "error")

    def __init__(self, index: int, path: Any, error: BaseException) -> None:
        self.index = index
        self.path = path
        self.error = error

    def __repr__(self) -> str:
        return f"SlideFailure(index={self.index}, path={self.path!r}, error={self.error!r})"

    def __reduce__(self) -> Any:
        return (SlideFailure, (self.index, self.path, self.error))


def _slide_task(fn: Callable[..., Any], index: int, path: Any, storage: Any, with_index: bool, errors: str) -> List[Any]:
    try:
        slide = SLIDES.get(path, storage_options=storage)
        return [fn(index, slide) if with_index else fn(slide)]
    except Exception as e:  # noqa: BLE001 - handed back as data when errors="return"
        if errors == "return":
            return [SlideFailure(index, path, e)]
        raise


def map_slides(paths: Any, fn: Callable[..., Any], *, with_index: bool = False, errors: str = "raise", storage_options: Any = None) -> "dask.bag.Bag":
    """``fn(slide)`` (or ``fn(index, slide)`` with ``with_index``) for every slide of ``paths``
    as a lazy ``dask.bag.Bag``: one partition and one task per slide, in the order of
    ``paths``; ``.compute()`` gives the list of results.

    * ``paths``: slide paths or URLs (``str``, ``bytes``, ``os.PathLike``, :class:`Slide` for
      its path and storage options), or one. The task opens the slide in the worker's process
      (once per process: the handle is kept for later tasks on that slide) and passes the
      open :class:`slidestream.Slide`; keep it only for the call.
    * ``errors``: ``"raise"`` (default) — a failing slide fails the computation with its
      exception; ``"return"`` — it gives a :class:`SlideFailure` in its place and the other
      slides go on (a cohort with one corrupt slide still finishes).
    * ``storage_options``: for URLs, the store's options as :class:`slidestream.Slide`'s.

    Call :func:`slidestream.dask.worker_device` inside ``fn`` for the GPU the worker was given.
    Raises InvalidArgumentError (a ValueError) for no slides or a bad ``errors``, TypeError for a non-callable ``fn``."""
    import dask
    import dask.bag as db
    from dask.base import tokenize

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if errors not in ("raise", "return"):
        raise InvalidArgumentError(f"errors must be 'raise' or 'return', not {errors!r}")
    plist, slist, _given, _single = _slide_lists(paths, storage_options)
    parts = [
        dask.delayed(_slide_task, pure=True)(fn, k, p, st, bool(with_index), errors, dask_key_name=f"slidestream-map_slides-{tokenize(fn, k, p, st, with_index, errors)}")
        for k, (p, st) in enumerate(zip(plist, slist))
    ]
    return db.from_delayed(parts)
