"""Progress bars for long work (tissue masks over a cohort, grid sampling, the Dask cohort
functions): drawn with ``tqdm`` when it is installed, never otherwise (slidestream does not
depend on it). Dask computations (``map_slides(...).compute()``, ``read_patches`` arrays) show
theirs through :func:`dask_bar`, dask's own progress bar under the same switch.

Whether a bar is drawn, in order of precedence:

1. the call's own ``progress=`` argument: ``True`` draws one (if tqdm is installed),
   ``False`` never does;
2. :func:`set_enabled` (``True`` / ``False``; ``None`` returns to automatic);
3. the environment variable ``SLIDESTREAM_PROGRESS``: ``0`` / ``false`` / ``off`` silences
   every bar, ``1`` / ``true`` / ``on`` enables them (read at each call);
4. automatic: on when standard error is a terminal or the code runs in a Jupyter kernel.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Iterator, Optional, TypeVar

from ._errors import InvalidArgumentError

__all__ = ["bar", "dask_bar", "set_enabled", "enabled"]

T = TypeVar("T")

_forced: Optional[bool] = None


def set_enabled(flag: Optional[bool]) -> None:
    """Turn progress bars on (``True``) or off (``False``) for this process, or back to
    automatic (``None``; module docs). TypeError for anything else."""
    global _forced
    if flag is not None and not isinstance(flag, bool):
        raise TypeError(f"set_enabled takes True, False or None, got {type(flag).__name__}")
    _forced = flag


def _env() -> Optional[bool]:
    v = os.environ.get("SLIDESTREAM_PROGRESS")
    if v is None or v.strip() == "":
        return None
    t = v.strip().lower()
    if t in ("0", "false", "off", "no"):
        return False
    if t in ("1", "true", "on", "yes"):
        return True
    raise InvalidArgumentError(f"SLIDESTREAM_PROGRESS={v!r}: expected 0/1, true/false, on/off or yes/no")


def _interactive() -> bool:
    try:
        if sys.stderr is not None and sys.stderr.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    ip = sys.modules.get("IPython")
    if ip is not None:
        get = getattr(ip, "get_ipython", None)
        shell = get() if callable(get) else None
        return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"
    return False


def enabled(progress: Optional[bool] = None) -> bool:
    """Whether a bar would be drawn for a call given ``progress=`` (module docs), tqdm aside.
    Raises InvalidArgumentError for an unparsable ``SLIDESTREAM_PROGRESS``."""
    if progress is not None:
        return bool(progress)
    if _forced is not None:
        return _forced
    env = _env()
    return env if env is not None else _interactive()


def bar(iterable: Iterable[T], *, desc: str, unit: str = "it", total: Optional[int] = None, enable: Optional[bool] = None) -> Iterator[T]:
    """``iterable`` wrapped in a tqdm bar (``desc``, ``unit``, ``total`` as tqdm's) when
    :func:`enabled` says so and tqdm is installed; otherwise ``iterable`` itself, unchanged."""
    if not enabled(enable):
        return iter(iterable)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iter(iterable)
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    return iter(tqdm(iterable, desc=desc, unit=unit, total=total, leave=False))



class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def dask_bar(enable: Optional[bool] = None) -> Any:
    """A context manager showing the progress of the dask computations run inside it on a
    local scheduler (``dask.diagnostics.ProgressBar``) when :func:`enabled` says so and dask
    is installed; doing nothing otherwise. (A ``distributed`` client has its own dashboard and
    ``distributed.progress``.) Example: ``with slidestream.progress.dask_bar():
    results = ssd.map_slides(paths, fn).compute()``."""
    if not enabled(enable):
        return _Nothing()
    try:
        from dask.diagnostics import ProgressBar
    except ImportError:
        return _Nothing()
    return ProgressBar()
