"""The producer side of :class:`slidestream.PatchBatches` (``loader.py``): the thread that
reads batches into a bounded queue, the epoch iterator that takes them out, and what a batch
carries (:class:`BatchMeta`). Internal; the public names are re-exported by ``loader``."""

from __future__ import annotations

import collections
import concurrent.futures
import queue
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from ._patches import read_patches
from ._slide import Slide
from ._slidestream import _Prefetcher

#: How long the producer and the consumer block on the queue before checking whether the
#: other side is gone (seconds). Not a limit on anything: only how quickly a stop is noticed.
_POLL_S = 0.05
#: How long closing waits for the producer thread to finish the read it is in (seconds).
_JOIN_S = 60.0


@dataclass(frozen=True)
class BatchMeta:
    """What a batch holds, to stitch predictions back onto the slides.

    * ``rows``: int64 array (n, 4), C-contiguous: ``(slide_index, level, x, y)`` of each patch
      of the batch, in batch order; ``x, y`` the top-left corner in level-0 pixels of slide
      ``slide_index`` (an index into the loader's ``slides``).
    * ``indices``: int64 array (n,): the position of each patch in the finite row set given as
      the sampler (e.g. an index into ``GridSampler.patches`` / ``.grid``), after shuffling;
      None for a random sampler.
    * ``epoch``: the epoch this batch belongs to (0 for the first iteration, counting up with
      every new iteration or as set by :meth:`PatchBatches.set_epoch`).
    * ``index``: the batch's position in its epoch (0, 1, ...).
    * ``downsample``: float64 array (n,): level-0 pixels per output pixel of each patch — the
      level's downsample (``Slide.level_downsamples[level]``) when reading by level, the
      :class:`slidestream.resolution.Resolution`'s ``downsample`` with ``mpp=`` /
      ``magnification=``. Patch ``k`` covers level-0 ``[x, x + width × downsample[k])`` ×
      ``[y, y + height × downsample[k])``. NaN for a row whose level or slide does not exist
      (its batch then raises when taken).
    """

    rows: np.ndarray
    indices: Optional[np.ndarray]
    epoch: int
    index: int
    downsample: Optional[np.ndarray] = None


class _End:
    """The producer's last item: the epoch is over."""


class _Failure:
    """The producer's last item when it failed: the exception to raise in the consumer."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_device_batch(slides: Sequence[Slide], rows: np.ndarray, size: Tuple[int, int], background: Any, device: int,
                      resolution: Optional[dict] = None) -> Any:
    """Rows (n, 4) ``(slide_index, level, x, y)`` read on CUDA device ``device`` in one
    :func:`slidestream.read_patches` call: a :class:`slidestream.DeviceArray` uint8
    (n, height, width, 3), RGB. One engine call for the whole batch (the tiles of every slide
    through one work queue); with ``resolution`` (``read_patches``' ``mpp=`` / ... keywords)
    one per read size, then resized on the device."""
    w, h = size
    return read_patches(slides, rows, (w, h), background=background, device=f"cuda:{device}", **(resolution or {}))


class _Reader:
    """What the producer thread needs to make one batch (no reference to the iterator, so a
    dropped iterator is collected and stops its producer)."""

    def __init__(self, slides: List[Slide], size: Tuple[int, int], background: Any, device: Optional[int],
                 convert: Callable[[Any], Any], transform: Optional[Callable[[Any], Any]], resolution: Optional[dict] = None,
                 destination: Optional[Callable[[int], Tuple[Any, np.ndarray]]] = None) -> None:
        self.slides = slides
        #: For host batches: ``destination(n)`` -> (batch object, its writeable numpy uint8 view
        #: (n, h, w, 3)) to read a batch of ``n`` patches into (PatchLoader's pinned memory);
        #: None: a fresh array per batch.
        self.destination = destination if device is None else None
        #: slide index -> level-0 pixels per output pixel at ``resolution`` (resolved once).
        self._resolved: dict = {}
        self.resolution = dict(resolution or {})
        self.size = size
        self.background = background
        self.device = device
        self.convert = convert
        self.transform = transform

    def meta(self, rows: np.ndarray, indices: Optional[np.ndarray], epoch: int, index: int) -> "BatchMeta":
        """The :class:`BatchMeta` of a batch of ``rows`` (its ``downsample`` column filled)."""
        return BatchMeta(rows=rows, indices=indices, epoch=epoch, index=index, downsample=self.downsamples(rows))

    def downsamples(self, rows: np.ndarray) -> np.ndarray:
        """float64 (n,): level-0 pixels per output pixel of each row; NaN where the slide or
        level does not exist or the resolution cannot be resolved (the read raises then)."""
        out = np.full(rows.shape[0], np.nan)
        if rows.shape[0] == 0:
            return out
        pairs, inverse = np.unique(rows[:, :2], axis=0, return_inverse=True)
        values = np.full(len(pairs), np.nan)
        for k, (s, level) in enumerate(pairs.tolist()):
            if not 0 <= s < len(self.slides):
                continue
            if self.resolution:
                if s not in self._resolved:
                    from .resolution import resolve

                    try:
                        self._resolved[s] = resolve(self.slides[s], **self.resolution).downsample
                    except Exception:  # noqa: BLE001 - the read raises it at the batch's turn
                        self._resolved[s] = float("nan")
                values[k] = self._resolved[s]
            else:
                ds = self.slides[s].level_downsamples
                if 0 <= level < len(ds):
                    values[k] = ds[level]
        out[:] = values[inverse.reshape(-1)]
        return out

    def __call__(self, rows: np.ndarray) -> Any:
        if self.device is None:
            batch: Any = read_patches(self.slides, rows, self.size, background=self.background, **self.resolution)
            if self.destination is not None:  # (the native read-ahead reads into it directly)
                dest, view = self.destination(len(batch))
                view[...] = batch
                batch = dest
        else:
            batch = read_device_batch(self.slides, rows, self.size, self.background, self.device, self.resolution)
        batch = self.convert(batch)
        if self.transform is not None:
            batch = self.transform(batch)
        return batch


def _produce(plan: Iterator[Tuple[np.ndarray, Optional[np.ndarray]]], epoch: int, read: _Reader, q: "queue.Queue[Any]", stop: threading.Event,
             readers: int = 1) -> None:
    """The producer thread: read every batch of ``plan`` into ``q``, in order, until the plan
    ends, a read fails (the exception goes into the queue) or ``stop`` is set (the consumer is
    gone). With ``readers`` > 1, that many reads run at once (on threads of a pool that is shut
    down, its reads finished, before this returns)."""

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    try:
        if readers <= 1:
            for index, (rows, indices) in enumerate(plan):
                if stop.is_set():
                    return
                item: Any = (read(rows), read.meta(rows, indices, epoch, index))
                if not put(item):
                    return
                del item  # the queue (then the consumer) holds the batch, not this frame
            put(_End())
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=readers, thread_name_prefix=f"slidestream-loader-epoch{epoch}-read") as pool:
            pending: "collections.deque[Tuple[concurrent.futures.Future[Any], BatchMeta]]" = collections.deque()
            try:
                for index, (rows, indices) in enumerate(plan):
                    if stop.is_set():
                        return
                    pending.append((pool.submit(read, rows), read.meta(rows, indices, epoch, index)))
                    if len(pending) >= readers:
                        fut, meta = pending.popleft()
                        if not put((fut.result(), meta)):
                            return
                        del fut
                while pending:
                    fut, meta = pending.popleft()
                    if not put((fut.result(), meta)):
                        return
                    del fut
            finally:
                for fut, _ in pending:
                    fut.cancel()
                pending.clear()
        put(_End())
    except BaseException as e:  # noqa: BLE001 - every failure goes to the consumer
        put(_Failure(e))


class _Closing:
    """``with`` and the finaliser call ``close()`` (which must be idempotent)."""

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self: "_C") -> "_C":
        return self

    def __exit__(self, *_args: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


_C = TypeVar("_C", bound=_Closing)


class _EpochIterator(_Closing):
    """One pass over the batches (what ``iter(PatchBatches)`` returns): yields
    ``(batch, BatchMeta)``; :meth:`close` (or dropping it, or leaving a ``for`` loop with
    ``break`` and letting it go) stops the producer thread and drops the batches read ahead."""

    def __init__(self, plan: Iterator[Tuple[np.ndarray, Optional[np.ndarray]]], epoch: int, n_batches: Optional[int],
                 read: _Reader, prefetch: int, timeout: Optional[float], readers: int = 1) -> None:
        self.epoch = epoch
        self._n = n_batches
        self._timeout = timeout
        self._q: "queue.Queue[Any]" = queue.Queue(maxsize=prefetch)
        self._stop = threading.Event()
        self._done = False
        self._owner: Any = None  # the PatchBatches of this iteration (set by its __iter__)
        self._thread = threading.Thread(
            target=_produce, args=(plan, epoch, read, self._q, self._stop, readers), name=f"slidestream-loader-epoch{epoch}", daemon=True
        )
        self._thread.start()

    def __iter__(self) -> "_EpochIterator":
        return self

    def __len__(self) -> int:
        if self._n is None:
            raise TypeError("the number of batches is not known")
        return self._n

    def __next__(self) -> Tuple[Any, BatchMeta]:
        if self._done:
            raise StopIteration
        waited = 0.0
        while True:
            try:
                item = self._q.get(timeout=_POLL_S)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._q.empty():
                    self.close()
                    raise RuntimeError("slidestream loader: the producer thread ended without a result") from None
                waited += _POLL_S
                if self._timeout is not None and waited >= self._timeout:
                    self._shutdown(join=False)  # the producer is stuck in a read: do not wait for it
                    raise TimeoutError(f"slidestream loader: no batch within timeout={self._timeout} s") from None
        if isinstance(item, _End):
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the producer thread (it finishes the read it is in), wait for it and drop the
        batches read ahead. Idempotent; later ``next()`` raises StopIteration."""
        self._shutdown(join=True)

    def _shutdown(self, join: bool) -> None:
        if threading.current_thread() is self._thread:
            # A finaliser running on the producer thread itself: stop producing, but leave the
            # batches already queued (and the end marker) to the consumer.
            self._stop.set()
            return
        self._done = True
        self._stop.set()
        while True:
            try:
                self._q.get_nowait()
            except queue.Empty:
                break
        t = self._thread
        if join and t.is_alive() and t is not threading.current_thread():
            t.join(_JOIN_S)
            if t.is_alive():  # pragma: no cover - a read blocked in the kernel for a minute
                warnings.warn(f"slidestream loader: producer thread still in a read after {_JOIN_S} s; left to finish on its own", RuntimeWarning, stacklevel=2)
        while True:  # what it put while we waited
            try:
                self._q.get_nowait()
            except queue.Empty:
                break


class _NativeEpochIterator(_Closing):
    """One pass over the batches, read ahead on slidestream's own threads (``_Prefetcher``):
    the consumer's thread plans the next batches and submits them (it holds the GIL anyway),
    the reads run without the GIL, and ``__next__`` waits for the oldest one with the GIL
    released. Used for device batches and for host batches without a ``transform`` (a host
    ``transform`` runs on the producer thread of :class:`_EpochIterator` instead, to overlap
    it with the consumer). Same interface and guarantees as :class:`_EpochIterator`: batches
    in plan order, at most ``prefetch + readers`` submitted and not yet taken, the read's
    exception raised at its batch, ``timeout``, ``close``."""

    def __init__(self, plan: Iterator[Tuple[np.ndarray, Optional[np.ndarray]]], epoch: int, n_batches: Optional[int],
                 read: _Reader, prefetch: int, timeout: Optional[float], readers: int = 1) -> None:
        self.epoch = epoch
        self._n = n_batches
        self._timeout = timeout
        self._done = False
        self._owner: Any = None  # the PatchBatches of this iteration (set by its __iter__)
        self._plan = enumerate(plan)
        self._plan_error: Optional[BaseException] = None
        self._plan_over = False
        self._metas: "collections.deque[BatchMeta]" = collections.deque()
        #: The destinations of the submitted batches (None entries when reading into fresh arrays).
        self._dests: "collections.deque[Any]" = collections.deque()
        self._depth = max(1, prefetch) + readers
        self._read = read
        device = None if read.device is None else f"cuda:{read.device}"
        self._pf = _Prefetcher(read.slides, read.size, read.background, device, readers)
        self._fill()

    def __iter__(self) -> "_NativeEpochIterator":
        return self

    def __len__(self) -> int:
        if self._n is None:
            raise TypeError("the number of batches is not known")
        return self._n

    def _fill(self) -> None:
        """Submit planned batches until ``prefetch + readers`` are outstanding; a plan error is
        kept and raised once the batches before it were taken."""
        while not self._plan_over and self._plan_error is None and len(self._metas) < self._depth:
            try:
                index, (rows, indices) = next(self._plan)
                dest = None
                if self._read.destination is not None:
                    dest, view = self._read.destination(len(rows))
                    self._pf.submit(rows, view)
                else:
                    self._pf.submit(rows)
            except StopIteration:
                self._plan_over = True
                return
            except BaseException as e:  # noqa: BLE001 - raised at its turn in __next__
                self._plan_error = e
                return
            self._metas.append(self._read.meta(rows, indices, self.epoch, index))
            self._dests.append(dest)

    def __next__(self) -> Tuple[Any, BatchMeta]:
        if self._done:
            raise StopIteration
        if not self._metas:
            err = self._plan_error
            self.close()
            if err is not None:
                raise err
            raise StopIteration
        try:
            batch = self._pf.take(self._timeout)
        except BaseException:
            self.close()
            raise
        if batch is None:
            self._shutdown(wait=False)  # a read is stuck: do not wait for it
            raise TimeoutError(f"slidestream loader: no batch within timeout={self._timeout} s")
        meta = self._metas.popleft()
        dest = self._dests.popleft()
        if dest is not None:
            batch = dest  # what the read filled (``batch`` is its numpy view)
        self._fill()  # the reads go on while the consumer computes
        batch = self._read.convert(batch)
        if self._read.transform is not None:
            batch = self._read.transform(batch)
        return batch, meta

    def close(self) -> None:
        """Stop reading ahead (a read in progress finishes first), drop the batches read
        ahead. Idempotent; later ``next()`` raises StopIteration."""
        self._shutdown(wait=True)

    def _shutdown(self, wait: bool) -> None:
        if self._done:
            return
        self._done = True
        self._metas.clear()
        pf = getattr(self, "_pf", None)
        # The destinations stay referenced by the prefetcher's jobs until their reads return.
        getattr(self, "_dests", collections.deque()).clear()
        if pf is not None:
            pf.close(wait)
