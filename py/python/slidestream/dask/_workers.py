"""Dask workers for slidestream: per-worker settings (the host tile cache budget, decode
threads) and one GPU per worker, as a ``distributed.WorkerPlugin``.

``import slidestream.dask`` does not import ``distributed``: :class:`SlidestreamWorkers` is made
the first time it is looked up, :func:`setup_workers` imports it when called.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from .. import config
from .._args import check_int
from .._errors import InvalidArgumentError

__all__ = ["setup_workers", "worker_device", "resolve_device"]

# Worker address → CUDA ordinal, set by the plugin in the worker's process (several workers of
# one process — a threads-only LocalCluster — each have their own entry).
_DEVICES: Dict[str, Optional[int]] = {}
_LOCK = threading.Lock()


def _current_worker() -> Any:
    try:
        from distributed import get_worker
    except ImportError:
        return None
    try:
        return get_worker()
    except ValueError:  # not inside a task of a worker
        return None


def worker_device() -> Optional[int]:
    """The CUDA ordinal :class:`SlidestreamWorkers` gave the Dask worker running the calling
    task, or None (no plugin, ``gpus=None``, or not called from a task on a worker)."""
    w = _current_worker()
    if w is None:
        return None
    with _LOCK:
        return _DEVICES.get(w.address)


def resolve_device(device: Any) -> Optional[int]:
    """A task's ``device`` argument as a CUDA ordinal or None (the CPU): ``None`` / ``"cpu"``
    → None; ``"worker"`` → :func:`worker_device` (None when the worker has no GPU); anything
    else as :func:`slidestream.read_patches`' ``device`` (``"cuda"``, ``"cuda:N"``, an int)."""
    if device is None or device == "cpu":
        return None
    if device == "worker":
        return worker_device()
    from .._slidestream import _parse_device

    return _parse_device(device)


def _gpu_list(gpus: Any) -> Optional[List[int]]:
    if gpus is None:
        return None
    if isinstance(gpus, str):
        if gpus != "all":
            raise ValueError(f"gpus must be None, 'all' or a sequence of CUDA ordinals, not {gpus!r}")
        return []  # resolved in the worker: every device it sees
    if isinstance(gpus, (bool, int)) or not hasattr(gpus, "__iter__"):
        raise TypeError(f"gpus must be None, 'all' or a sequence of CUDA ordinals, not {type(gpus).__name__}")
    out = [check_int(g, "gpus", min_value=0, allow_bool=False) for g in gpus]
    if not out:
        raise ValueError("gpus is empty; give None for CPU workers")
    return out


_MAKE_LOCK = threading.Lock()


def _plugin_class() -> type:
    with _MAKE_LOCK:  # one class per process (pickle checks identity)
        made = globals().get("SlidestreamWorkers")
        if made is None:
            made = _make_plugin_class()
        return made  # type: ignore[no-any-return]


class _Workers:
    """The methods of :class:`SlidestreamWorkers` (the class made with ``distributed``'s
    ``WorkerPlugin`` as a base on first lookup). Set up every Dask worker for slidestream (register with
    ``client.register_plugin(SlidestreamWorkers(...))`` or :func:`setup_workers`; workers
    that join later get it too).

    * ``cache_bytes``: the worker process's host tile cache (``SLIDESTREAM_CACHE_BYTES``),
      bytes, >= 0. Per process: with several threads per worker they share it.
    * ``decode_threads``: slidestream's CPU decode threads in the worker process
      (``RAYON_NUM_THREADS``); ``"auto"`` (default) = the worker's Dask thread count, so
      ``n`` workers of ``t`` threads on a host decode on ``n·t`` threads, not ``n·cores``;
      None leaves it (one per core).
    * ``gpus``: None (CPU workers), ``"all"`` (every device the worker sees) or CUDA
      ordinals; worker ``k`` (a LocalCluster's worker name ``k``; other names count in the
      order workers set up) gets ``gpus[k % len(gpus)]``, read by tasks given
      ``device="worker"``. Each worker process then uses its own device only (its own
      engine and context); a failing GPU fails that worker's tasks, not the others'.
      Under dask-cuda (``CUDA_VISIBLE_DEVICES`` set per worker) give ``gpus=[0]``.
    * ``settings``: any other slidestream settings (names as :func:`slidestream.config.set`).

    A setting a worker's process already fixed (a slide was read there before) raises
    :class:`slidestream.InvalidArgumentError` from the registration; a bad value
    :class:`slidestream.ConfigError`; ``gpus`` on a worker without CUDA
    :class:`slidestream.GpuUnavailableError`."""

    idempotent = False
    name = "slidestream"

    def __init__(self, *, cache_bytes: Optional[int] = None, decode_threads: Union[int, str, None] = "auto",
                 gpus: Union[None, str, Sequence[int]] = None, settings: Optional[Mapping[str, Any]] = None) -> None:
        self.cache_bytes = None if cache_bytes is None else check_int(cache_bytes, "cache_bytes", min_value=0, allow_bool=False)
        if decode_threads not in (None, "auto"):
            decode_threads = check_int(decode_threads, "decode_threads", min_value=1, allow_bool=False)
        self.decode_threads = decode_threads
        self.gpus = _gpu_list(gpus)
        self.settings = dict(settings or {})

    def setup(self, worker: Any) -> None:
        values = dict(self.settings)
        if self.cache_bytes is not None:
            values["SLIDESTREAM_CACHE_BYTES"] = self.cache_bytes
        if values:
            config.set(values)
        threads = worker.state.nthreads if self.decode_threads == "auto" else self.decode_threads
        if threads is not None:
            os.environ["RAYON_NUM_THREADS"] = str(int(threads))
        device = None
        if self.gpus is not None:
            device = _pick_gpu(self.gpus, worker)
        with _LOCK:
            _DEVICES[worker.address] = device

    def teardown(self, worker: Any) -> None:
        with _LOCK:
            _DEVICES.pop(worker.address, None)


def _make_plugin_class() -> type:
    from distributed import WorkerPlugin

    # Pickled by reference (slidestream.dask._workers.SlidestreamWorkers, made again by the
    # module's __getattr__ in the worker), not by value.
    made = type("SlidestreamWorkers", (_Workers, WorkerPlugin), {"__module__": __name__, "__qualname__": "SlidestreamWorkers", "__doc__": _Workers.__doc__})
    globals()["SlidestreamWorkers"] = made
    return made


def __getattr__(name: str) -> Any:
    if name == "SlidestreamWorkers":
        return _plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ORDER = {"n": 0}


def _pick_gpu(gpus: List[int], worker: Any) -> int:
    from .._errors import GpuUnavailableError
    from .._slidestream import cuda_available, gpu_probe

    if not cuda_available():
        raise GpuUnavailableError(f"worker {worker.address}: gpus={gpus or 'all'} was given but no usable CUDA device is present")
    count = len(gpu_probe()["devices"])
    pool = gpus or list(range(count))
    name = worker.name
    if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
        k = int(name)
    else:
        with _LOCK:
            k = _ORDER["n"]
            _ORDER["n"] += 1
    ordinal = pool[k % len(pool)]
    if ordinal >= count:
        raise InvalidArgumentError(f"worker {worker.address}: gpus names device {ordinal} but this worker sees {count}")
    return ordinal


def setup_workers(client: Any, **kwargs: Any) -> Dict[str, Optional[int]]:
    """Register :class:`SlidestreamWorkers` (``kwargs`` as its parameters) on ``client``'s
    cluster and return each worker's CUDA ordinal (worker address → ordinal or None). Errors of
    a worker's set-up are raised here."""
    plugin = _plugin_class()(**kwargs)
    client.register_plugin(plugin)
    return client.run(worker_device_of_self)


def worker_device_of_self(dask_worker: Any) -> Optional[int]:
    """The ordinal the plugin gave ``dask_worker`` (for ``client.run``)."""
    with _LOCK:
        return _DEVICES.get(dask_worker.address)


if TYPE_CHECKING:  # what type checkers see; at run time the class comes from _plugin_class
    SlidestreamWorkers = _Workers
