"""A prefetching batch iterator over slides (issue 14): :class:`PatchBatches`, usable without
any framework; :class:`slidestream.torch.PatchLoader` is the same yielding torch tensors.

Example::

    import slidestream
    from slidestream.sampling import RandomPatchSampler

    slides = [slidestream.Slide(p) for p in paths]
    sampler = RandomPatchSampler(slides, (256, 256), min_tissue=0.5, seed=0)
    batches = slidestream.PatchBatches(slides, sampler, (256, 256), batch_size=256, num_batches=100)
    for batch, meta in batches:           # batch: uint8 (256, 256, 256, 3), RGB, NHWC
        ...                               # meta.rows: int64 (256, 4) (slide_index, level, x, y)

A background thread reads the next batches (one :func:`slidestream.read_patches` call per
batch, the GIL released, the decoding on slidestream's own decode threads: no worker
processes) into a bounded queue while the caller computes. Patches are rows
``(slide_index, level, x, y)``: ``x, y`` the top-left corner in **level-0 pixels** of slide
``slide_index``, the patch ``size`` (width, height) in pixels of ``level`` (as
:func:`slidestream.read_patches`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import math
import os
import queue
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ._batch import check_int, normalize_size
from ._errors import GpuUnavailableError, InvalidArgumentError
from ._patches import read_patches
from ._slide import Slide
from ._slidestream import _parse_device, cuda_available

__all__ = ["PatchBatches", "BatchMeta"]

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
    """

    rows: np.ndarray
    indices: Optional[np.ndarray]
    epoch: int
    index: int


class _End:
    """The producer's last item: the epoch is over."""


class _Failure:
    """The producer's last item when it failed: the exception to raise in the consumer."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _device_arg(device: Any) -> Optional[int]:
    """The CUDA ordinal of a ``device=`` argument (None: the CPU path). Raises
    ValueError / TypeError for a bad device and :class:`~slidestream.GpuUnavailableError`
    when a device is asked for and :func:`slidestream.cuda_available` is False."""
    ordinal = _parse_device(device)
    if ordinal is not None and not cuda_available():
        raise GpuUnavailableError(
            f"device={device!r} was given but no usable CUDA device is present (slidestream.cuda_available() is False); "
            "use device=None for the CPU path"
        )
    return ordinal


def read_device_batch(slides: Sequence[Slide], rows: np.ndarray, size: Tuple[int, int], background: Any, device: int) -> Any:
    """Rows (n, 4) ``(slide_index, level, x, y)`` read on CUDA device ``device`` in one
    :func:`slidestream.read_patches` call: a :class:`slidestream.DeviceArray` uint8
    (n, height, width, 3), RGB. One engine call for the whole batch (the tiles of every slide
    through one work queue)."""
    w, h = size
    return read_patches(slides, rows, (w, h), background=background, device=f"cuda:{device}")


def _rows_array(rows: Any, n_slides: int, what: str) -> np.ndarray:
    """``rows`` as a C-contiguous int64 array (n, 4), slide indices checked."""
    arr = np.asarray(rows)
    if arr.size == 0:
        arr = np.zeros((0, 4), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"{what} must be rows (slide_index, level, x, y) of shape (n, 4), got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integers (slide_index, level, x, y), got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.shape[0] and (arr[:, 0].min() < 0 or arr[:, 0].max() >= n_slides):
        bad = int(arr[(arr[:, 0] < 0) | (arr[:, 0] >= n_slides), 0][0])
        raise InvalidArgumentError(f"{what}: slide index {bad} out of range for {n_slides} slide(s)")
    return arr


class _Reader:
    """What the producer thread needs to make one batch (no reference to the iterator, so a
    dropped iterator is collected and stops its producer)."""

    def __init__(self, slides: List[Slide], size: Tuple[int, int], background: Any, device: Optional[int],
                 convert: Callable[[Any], Any], transform: Optional[Callable[[Any], Any]]) -> None:
        self.slides = slides
        self.size = size
        self.background = background
        self.device = device
        self.convert = convert
        self.transform = transform

    def __call__(self, rows: np.ndarray) -> Any:
        if self.device is None:
            batch: Any = read_patches(self.slides, rows, self.size, background=self.background)
        else:
            batch = read_device_batch(self.slides, rows, self.size, self.background, self.device)
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
                item: Any = (read(rows), BatchMeta(rows=rows, indices=indices, epoch=epoch, index=index))
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
                    pending.append((pool.submit(read, rows), BatchMeta(rows=rows, indices=indices, epoch=epoch, index=index)))
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


class _EpochIterator:
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

    def __enter__(self) -> "_EpochIterator":
        return self

    def __exit__(self, *_args: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass


class PatchBatches:
    """Batches of patches across slides, the next ones read while the caller computes.

    ``PatchBatches(slides, sampler, size, *, batch_size=256, num_batches=None, shuffle=False,
    seed=None, drop_last=False, transform=None, device=None, prefetch=2, readers=1,
    background=None, timeout=None)``

    * ``slides``: a sequence of :class:`slidestream.Slide` and/or paths; paths are opened here
      (FileNotFoundError, UnsupportedFormatError, ... now) and closed by :meth:`close`; given
      slides are left open.
    * ``sampler``: where the patches come from, rows ``(slide_index, level, x, y)`` (x, y in
      level-0 pixels, ``slide_index`` into ``slides``):

      - an object with ``sample(n) -> int array (n, 4)`` (e.g.
        :class:`slidestream.sampling.RandomPatchSampler`): random and endless; every batch is
        ``sampler.sample(batch_size)``, drawn in the producer thread, so the sampler's own
        seed decides the patches (batches read ahead and then dropped by a ``break`` have
        consumed draws). ``num_batches`` (the epoch length) is required; ``shuffle`` and
        ``drop_last`` do not apply.
      - a finite set of rows: an int array (n, 4), a sequence of 4-tuples, an iterable of them,
        or an object with a ``patches`` array (e.g. :class:`slidestream.sampling.GridSampler`).
        An epoch is every row once, in order or (``shuffle=True``) in a new permutation per
        epoch; ``num_batches`` optionally caps the epoch.
    * ``size``: (width, height) of every patch in pixels of its level, or an int (square).
    * ``batch_size``: patches per batch (the last batch of a finite set may be smaller, unless
      ``drop_last``).
    * ``shuffle``, ``seed``: epoch ``e`` is ordered by a permutation drawn from
      ``numpy.random.default_rng(SeedSequence(seed, spawn_key=(e,)))``: the same seed gives the
      same order of every epoch, epochs differ from each other. ``seed=None`` draws one
      (:attr:`seed` tells which, to reproduce a run).
    * ``drop_last``: leave out a last batch smaller than ``batch_size``.
    * ``transform``: callable applied to each whole batch in the producer thread (numpy array,
      DeviceArray or, with :class:`~slidestream.torch.PatchLoader`, tensor); its result is
      yielded instead.
    * ``device``: None / ``"cpu"``: numpy ``uint8`` arrays (n, height, width, 3), RGB, NHWC,
      read on the CPU decode threads. A CUDA device (``"cuda"``, ``"cuda:N"``, an int,
      ``torch.device``): :class:`slidestream.DeviceArray` (n, height, width, 3) uint8 in that
      GPU's memory (``read_patches(..., device=)``; complete when the read returns, usable on
      any stream, no host copy). :class:`~slidestream.GpuUnavailableError` here when
      :func:`slidestream.cuda_available` is False.
    * ``prefetch``: finished batches waiting in the queue (>= 1; default 2); with the ones being
      read, at most ``prefetch + readers`` batches are alive besides those the caller holds.
    * ``readers``: batches read at once (>= 1; default 1), yielded in order. One read already
      uses every decode thread (and on a GPU every lane and CPU decode worker); a second one
      in flight fills the tail of the first (docs/benchmarks.md measures both).
    * ``background``: int or (r, g, b) outside the image and on missing tiles (white by default).
    * ``timeout``: seconds to wait for one batch before raising TimeoutError (default: wait as
      long as the read takes).

    Iterating yields ``(batch, meta)`` (meta a :class:`BatchMeta`: the rows, their indices, the
    epoch and batch index). Each ``iter()`` starts a new epoch (and stops a previous iteration
    still running). Leaving the loop early (``break``, an exception) and dropping the iterator,
    or calling its ``close()``, stops the producer thread and frees the batches read ahead. A
    read that fails in the producer (a truncated or unreadable slide, a bad row) raises its
    exception, with its type, in the caller at that batch; the iteration then ends.
    ``len()`` is the number of batches per epoch.

    Raises (at construction) ValueError for a missing ``num_batches`` with a random sampler,
    ``shuffle`` with one, rows of the wrong shape or a bad ``batch_size`` / ``prefetch``;
    TypeError for non-integer rows; InvalidArgumentError (a ValueError) for a slide index out of
    range, as :func:`slidestream.read_patches`.
    """

    def __init__(
        self,
        slides: Sequence[Any],
        sampler: Any,
        size: Any,
        *,
        batch_size: int = 256,
        num_batches: Optional[int] = None,
        shuffle: bool = False,
        seed: Optional[int] = None,
        drop_last: bool = False,
        transform: Optional[Callable[[Any], Any]] = None,
        device: Any = None,
        prefetch: int = 2,
        readers: int = 1,
        background: Any = None,
        timeout: Optional[float] = None,
    ) -> None:
        self.size = normalize_size(size)
        self.batch_size = check_int(batch_size, "batch_size", min_value=1, allow_bool=False)
        self.prefetch = check_int(prefetch, "prefetch", min_value=1, allow_bool=False)
        self.readers = check_int(readers, "readers", min_value=1, allow_bool=False)
        self.num_batches = None if num_batches is None else check_int(num_batches, "num_batches", min_value=0, allow_bool=False)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.transform = transform
        self.background = background
        if timeout is not None:
            if isinstance(timeout, (bool, str, bytes)) or not isinstance(timeout, (int, float, np.integer, np.floating)):
                raise TypeError(f"timeout must be a number of seconds or None, not {type(timeout).__name__}")
            if not math.isfinite(float(timeout)) or float(timeout) <= 0:
                raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.timeout = None if timeout is None else float(timeout)
        #: CUDA ordinal of the reads, or None (CPU).
        self.device: Optional[int] = _device_arg(device)
        if isinstance(slides, (str, bytes, os.PathLike, Slide)):
            raise TypeError("slides must be a sequence of slidestream.Slide or paths (wrap a single slide in a list)")
        self._owned: List[Slide] = []
        self.slides: List[Slide] = []
        try:
            for s in slides:
                if isinstance(s, Slide):
                    self.slides.append(s)
                elif isinstance(s, (str, bytes, os.PathLike)):
                    opened = Slide(s)
                    self._owned.append(opened)
                    self.slides.append(opened)
                else:
                    raise TypeError(f"slides must be slidestream.Slide objects or paths, got {type(s).__name__}")
        except BaseException:
            self._close_owned()
            raise
        if not self.slides:
            raise ValueError("no slides given")
        sample = getattr(sampler, "sample", None)
        self._sampler: Any = None
        self.rows: Optional[np.ndarray] = None
        if callable(sample) and not isinstance(sampler, np.ndarray):
            if self.num_batches is None:
                raise ValueError("num_batches is required with a random sampler (an object with .sample(n)): it sets the epoch length")
            if self.shuffle:
                raise ValueError("shuffle applies to a finite set of rows; a random sampler's own seed orders its patches")
            self._sampler = sampler
        else:
            src = getattr(sampler, "patches", sampler)
            if not isinstance(src, np.ndarray):
                if isinstance(src, (str, bytes)) or not hasattr(src, "__iter__"):
                    raise TypeError(f"sampler must have .sample(n) or be rows (slide_index, level, x, y), got {type(sampler).__name__}")
                src = [tuple(r) for r in src]
            #: The finite row set (int64 (n, 4)), or None with a random sampler.
            self.rows = _rows_array(src, len(self.slides), "sampler rows")
        entropy = np.random.SeedSequence(seed).entropy
        #: The seed of the shuffles (the one given, or the one drawn when None was given).
        self.seed: int = int(entropy)  # type: ignore[arg-type]
        self._epoch = 0
        self._current: Optional["weakref.ReferenceType[_EpochIterator]"] = None
        self._closed = False

    def _convert(self, batch: Any) -> Any:
        """What a read batch becomes before ``transform`` (a subclass hook: PatchLoader makes
        tensors); here the batch itself. Runs in the producer thread."""
        return batch

    def __len__(self) -> int:
        if self.rows is None:
            return int(self.num_batches or 0)
        n = self.rows.shape[0]
        full = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return full if self.num_batches is None else min(full, self.num_batches)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will be (0 at first; +1 with every ``iter()``)."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch`` (its shuffle order; to resume a run)."""
        self._epoch = check_int(epoch, "epoch", min_value=0, allow_bool=False)

    def order(self, epoch: int) -> np.ndarray:
        """The positions in :attr:`rows` of epoch ``epoch``, in the order they are read
        (int64 (n,)); ValueError with a random sampler."""
        if self.rows is None:
            raise ValueError("a random sampler has no fixed order")
        n = self.rows.shape[0]
        if not self.shuffle:
            return np.arange(n, dtype=np.int64)
        rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(check_int(epoch, "epoch", min_value=0),)))
        return rng.permutation(n).astype(np.int64)

    def _plan(self, epoch: int) -> Iterator[Tuple[np.ndarray, Optional[np.ndarray]]]:
        n_batches = len(self)
        bs = self.batch_size
        if self.rows is None:
            sampler, n_slides = self._sampler, len(self.slides)

            def random_plan() -> Iterator[Tuple[np.ndarray, Optional[np.ndarray]]]:
                for _ in range(n_batches):
                    yield _rows_array(sampler.sample(bs), n_slides, "sampler.sample(batch_size)"), None

            return random_plan()
        rows, order = self.rows, self.order(epoch)

        def finite_plan() -> Iterator[Tuple[np.ndarray, Optional[np.ndarray]]]:
            for b in range(n_batches):
                idx = order[b * bs : (b + 1) * bs]
                yield np.ascontiguousarray(rows[idx]), idx

        return finite_plan()

    def __iter__(self) -> _EpochIterator:
        if self._closed:
            raise ValueError("this loader is closed")
        prev = self._current() if self._current is not None else None
        if prev is not None:
            prev.close()
        epoch = self._epoch
        self._epoch += 1
        read = _Reader(self.slides, self.size, self.background, self.device, self._convert, self.transform)
        it = _EpochIterator(self._plan(epoch), epoch, len(self), read, self.prefetch, self.timeout, self.readers)
        # The iteration keeps its loader alive (``for b, m in PatchBatches(...)`` holds only the
        # iterator): otherwise the producer thread could drop the loader's last reference and
        # run its finaliser, which closes the iteration, before the consumer got every batch.
        it._owner = self
        self._current = weakref.ref(it)
        return it

    def _close_owned(self) -> None:
        for s in self._owned:
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass
        self._owned = []

    def close(self) -> None:
        """Stop a running iteration (as its ``close()``) and close the slides this loader
        opened from paths. Idempotent; iterating afterwards raises ValueError."""
        cur = self._current() if getattr(self, "_current", None) is not None else None  # type: ignore[misc]
        if cur is not None:
            cur.close()
        self._closed = True
        self._close_owned()

    def __enter__(self) -> "PatchBatches":
        return self

    def __exit__(self, *_args: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        w, h = self.size
        src = f"{self.rows.shape[0]} rows" if self.rows is not None else f"random sampler, {self.num_batches} batches"
        dev = "" if self.device is None else f", device='cuda:{self.device}'"
        return f"{type(self).__name__}({len(self.slides)} slide(s), {src}, size=({w}, {h}), batch_size={self.batch_size}{dev})"
