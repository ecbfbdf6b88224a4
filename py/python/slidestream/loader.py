"""A prefetching batch iterator over slides: :class:`PatchBatches`, usable without
any framework; :class:`slidestream.torch.PatchLoader` is the same yielding torch tensors.

Example::

    import slidestream
    from slidestream.sampling import RandomPatchSampler

    slides = [slidestream.Slide(p) for p in paths]
    sampler = RandomPatchSampler(slides, (256, 256), min_tissue=0.5, seed=0)
    batches = slidestream.PatchBatches(slides, sampler, (256, 256), batch_size=256, num_batches=100)
    for batch, meta in batches:           # batch: uint8 (256, 256, 256, 3), RGB, NHWC
        ...                               # meta.rows: int64 (256, 4) (slide_index, level, x, y)

The next batches are read while the caller computes (one :func:`slidestream.read_patches`
call per batch, the decoding on slidestream's own decode threads: no worker processes). The
reads run on slidestream's own threads, which never take the GIL, so a training loop that holds
the GIL almost all the time (PyTorch keeps it while a kernel launch waits for room in the
launch queue) does not stall them: the caller's thread plans the next batches when it takes
one. Only with a ``transform`` on the CPU path does a Python producer thread read and
transform the batches instead, so the transform overlaps the caller's work. Patches are rows
``(slide_index, level, x, y)``: ``x, y`` the top-left corner in **level-0 pixels** of slide
``slide_index``, the patch ``size`` (width, height) in pixels of ``level`` (as
:func:`slidestream.read_patches`).
"""

from __future__ import annotations

import math
import os
import weakref
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._args import check_int, normalize_size
from ._errors import GpuUnavailableError, InvalidArgumentError
from ._distributed import rank_share, resolve_rank, share_size
from ._producer import BatchMeta, _Closing, _EpochIterator, _NativeEpochIterator, _Reader, read_device_batch  # noqa: F401 (re-exported: slidestream.torch)
from ._slide import Slide
from ._slidestream import _parse_device, cuda_available

__all__ = ["PatchBatches", "BatchMeta"]

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


class PatchBatches(_Closing):
    """Batches of patches across slides, the next ones read while the caller computes.

    ``PatchBatches(slides, sampler, size, *, batch_size=256, num_batches=None, shuffle=False,
    seed=None, drop_last=False, transform=None, device=None, prefetch=2, readers=1,
    background=None, timeout=None, storage_options=None, rank=None, world_size=None)``

    * ``slides``: a sequence of :class:`slidestream.Slide` and/or paths; paths are opened here
      (FileNotFoundError, UnsupportedFormatError, ... now) and closed by :meth:`close`; given
      slides are left open.
    * ``sampler``: where the patches come from, rows ``(slide_index, level, x, y)`` (x, y in
      level-0 pixels, ``slide_index`` into ``slides``):

      - an object with ``sample(n) -> int array (n, 4)`` (e.g.
        :class:`slidestream.sampling.RandomPatchSampler`): random and endless; every batch is
        ``sampler.sample(batch_size)``, drawn when the batch is planned (``prefetch + readers``
        batches ahead, on the caller's thread; on the producer thread with a CPU
        ``transform``), so the sampler's own seed decides the patches (batches read ahead and then dropped by a ``break`` have
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
    * ``drop_last``: leave out a last batch smaller than ``batch_size`` (with
      ``world_size > 1`` also: cut the epoch's tail instead of padding it, see below).
    * ``rank``, ``world_size``: this process's share of the samples when several processes
      (one per GPU, ``torch.distributed``) read the same loader, as
      ``torch.utils.data.DistributedSampler``. Give both or neither; by default the rank and
      world size of an initialised ``torch.distributed`` default group when the caller has
      imported torch already (torch is never imported here), else rank 0 of 1 (no split).
      With a finite row set, epoch ``e``'s order (the shuffle, the same on every rank: with
      ``world_size > 1`` and ``seed=None`` the seed is 0, DistributedSampler's default, since
      the ranks must agree on it) is padded by repeating it from its start to a multiple of
      ``world_size`` rows (``drop_last=True``: its tail cut to one instead), and rank ``r``
      reads ``order[r::world_size]``, in batches of ``batch_size``: every rank gets the same
      number of rows and of batches (what DDP's collectives need); the ranks' shares are
      disjoint except for the padding rows and together cover every row (without
      ``drop_last``). With a random sampler that has ``split(rank, world_size, epoch=)``
      (:class:`~slidestream.sampling.RandomPatchSampler`), epoch ``e`` of rank ``r`` draws
      from ``sampler.split(r, world_size, epoch=e)``: the ranks draw different patches and
      each (rank, epoch) stream is reproducible (``set_epoch`` replays it). A sampler without
      ``split`` is used as it is on every rank: seed it per rank (the loader cannot tell a
      rank-aware sampler from one that is not). ValueError for one of the two alone or a rank
      outside ``[0, world_size)``.
    * ``transform``: callable applied to each whole batch (numpy array, DeviceArray or, with
      :class:`~slidestream.torch.PatchLoader`, tensor); its result is yielded instead. On the
      CPU path it runs in the producer thread (overlapped with the caller); on a device, in
      the caller's thread when the batch is taken (GPU work then goes on the caller's current
      stream).
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
    * ``mpp`` / ``magnification`` (with ``fallback_mpp`` / ``fallback_magnification``): read at
      a physical resolution, as :func:`slidestream.read_patches` (``size`` in pixels at that
      resolution; rows ``(slide_index, x, y)`` or a sampler made with the same resolution).
      The batches are read and resized on the producer thread (on the GPU with a
      ``device``: the CPU path's filter taps, the same pixels).
    * ``timeout``: seconds to wait for one batch before raising TimeoutError (default: wait as
      long as the read takes).
    * ``storage_options``: for paths that are URLs (``s3://``, ``gs://``, ``az://``,
      ``http(s)://``), the store's options, as :class:`slidestream.Slide`'s.

    Iterating yields ``(batch, meta)`` (meta a :class:`BatchMeta`: the rows, their indices, the
    epoch and batch index). Each ``iter()`` starts a new epoch (and stops a previous iteration
    still running). Leaving the loop early (``break``, an exception) and dropping the iterator,
    or calling its ``close()``, stops the reads ahead (one in progress finishes first) and frees
    the batches read ahead. A read that fails (a truncated or unreadable slide, a bad row) or a
    sampler that raises raises its exception, with its type, in the caller at that batch; the
    iteration then ends.
    ``len()`` is the number of batches per epoch (of this rank).

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
        storage_options: Optional[dict] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        mpp: Optional[float] = None,
        magnification: Optional[float] = None,
        fallback_mpp: Optional[float] = None,
        fallback_magnification: Optional[float] = None,
    ) -> None:
        #: This process's rank and the number of ranks sharing the samples (0 and 1: no split).
        self.rank, self.world_size = resolve_rank(rank, world_size)
        #: The physical resolution of the reads (``read_patches``' ``mpp=`` / ``magnification=``
        #: and fallbacks), empty when reading by level.
        self.resolution: dict = {k: v for k, v in (("mpp", mpp), ("magnification", magnification), ("fallback_mpp", fallback_mpp), ("fallback_magnification", fallback_magnification)) if v is not None}
        if self.resolution and mpp is None and magnification is None:
            raise InvalidArgumentError("fallback_mpp= / fallback_magnification= apply only with mpp= or magnification=")
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
                    opened = Slide(s, storage_options=storage_options)
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
        if seed is None and self.world_size > 1:
            seed = 0  # every rank must shuffle alike: DistributedSampler's default seed
        entropy = np.random.SeedSequence(seed).entropy
        #: The seed of the shuffles (the one given, or the one drawn when None was given; 0
        #: for None with ``world_size > 1``).
        self.seed: int = int(entropy)  # type: ignore[arg-type]
        self._epoch = 0
        self._current: Optional["weakref.ReferenceType[Union[_EpochIterator, _NativeEpochIterator]]"] = None
        self._closed = False

    def _destination(self) -> Optional[Callable[[int], Tuple[Any, np.ndarray]]]:
        """Where host batches are read to (a subclass hook: PatchLoader's pinned memory):
        ``f(n)`` -> (batch object, its writeable numpy uint8 (n, h, w, 3) view), or None for a
        fresh numpy array per batch (here)."""
        return None

    def _convert(self, batch: Any) -> Any:
        """What a read batch becomes before ``transform`` (a subclass hook: PatchLoader makes
        tensors); here the batch itself. Runs where the ``transform`` runs."""
        return batch

    def __len__(self) -> int:
        if self.rows is None:
            return int(self.num_batches or 0)
        n = share_size(self.rows.shape[0], self.world_size, self.drop_last)
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
        """The positions in :attr:`rows` this rank reads in epoch ``epoch``, in the order they
        are read (int64 (k,)): the epoch's order (all rows, or their shuffle), then this
        rank's share of it (the whole order with ``world_size == 1``; see ``rank``). The
        last partial batch is included even with ``drop_last``, and ``num_batches`` does not
        cut it. ValueError with a random sampler or a negative epoch."""
        if self.rows is None:
            raise ValueError("a random sampler has no fixed order")
        epoch = check_int(epoch, "epoch", min_value=0, allow_bool=False)
        n = self.rows.shape[0]
        if not self.shuffle:
            full = np.arange(n, dtype=np.int64)
        else:
            rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(epoch,)))
            full = rng.permutation(n).astype(np.int64)
        return rank_share(full, self.rank, self.world_size, self.drop_last)

    def epoch_sampler(self, epoch: int) -> Any:
        """The random sampler epoch ``epoch`` draws from: ``sampler.split(rank, world_size,
        epoch=epoch)`` with ``world_size > 1`` and a sampler that has ``split``, else the
        sampler given (its stream continuing across epochs). ValueError with a finite row set."""
        if self._sampler is None:
            raise ValueError("a finite row set has no random sampler")
        epoch = check_int(epoch, "epoch", min_value=0, allow_bool=False)
        split = getattr(self._sampler, "split", None)
        if self.world_size > 1 and callable(split):
            return split(self.rank, self.world_size, epoch=epoch)
        return self._sampler

    def _plan(self, epoch: int) -> Iterator[Tuple[np.ndarray, Optional[np.ndarray]]]:
        n_batches = len(self)
        bs = self.batch_size
        if self.rows is None:
            sampler, n_slides = self.epoch_sampler(epoch), len(self.slides)

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

    def __iter__(self) -> Union[_EpochIterator, _NativeEpochIterator]:
        if self._closed:
            raise ValueError("this loader is closed")
        prev = self._current() if self._current is not None else None
        if prev is not None:
            prev.close()
        epoch = self._epoch
        self._epoch += 1
        read = _Reader(self.slides, self.size, self.background, self.device, self._convert, self.transform, self.resolution,
                       self._destination())
        # Device batches, and host batches without a transform, are read ahead on native
        # threads that never need the GIL (a training loop holds it nearly all the time); a
        # host transform, or a resize to a physical resolution, runs on a producer thread,
        # overlapped with the consumer.
        native = (self.device is not None or self.transform is None) and not self.resolution
        it: Union[_EpochIterator, _NativeEpochIterator]
        if native:
            it = _NativeEpochIterator(self._plan(epoch), epoch, len(self), read, self.prefetch, self.timeout, self.readers)
        else:
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


    def __repr__(self) -> str:
        w, h = self.size
        src = f"{self.rows.shape[0]} rows" if self.rows is not None else f"random sampler, {self.num_batches} batches"
        dev = "" if self.device is None else f", device='cuda:{self.device}'"
        split = "" if self.world_size == 1 else f", rank={self.rank}, world_size={self.world_size}"
        return f"{type(self).__name__}({len(self.slides)} slide(s), {src}, size=({w}, {h}), batch_size={self.batch_size}{dev}{split})"
