"""PyTorch adapter: :class:`PatchDataset`, a map-style ``torch.utils.data.Dataset`` of patches.

``import slidestream`` never imports torch, and neither does ``import slidestream.torch``:
torch is imported the first time ``slidestream.torch.PatchDataset`` is looked up (the class
derives from ``torch.utils.data.Dataset``, so it is created then). Without torch installed that
lookup raises :class:`ImportError`.

Example::

    from slidestream.torch import PatchDataset
    from torch.utils.data import DataLoader

    ds = PatchDataset(["a.svs", "b.svs"], [(0, 0, 1000, 2000), (1, 0, 0, 512)], 256)
    x = ds[0]                       # torch.uint8, shape (3, 256, 256), CHW, RGB
    for batch in DataLoader(ds, batch_size=64, num_workers=4):
        ...                         # torch.uint8, shape (64, 3, 256, 256)

Prefetching loader: :class:`PatchLoader` (plain class, torch imported when one is made) yields
``(tensor, meta)`` batches read ahead on slidestream's own threads while the caller computes::

    from slidestream.torch import PatchLoader
    loader = PatchLoader(slides, sampler, 256, batch_size=256, num_batches=1000, device="cuda")
    for x, meta in loader:          # torch.uint8 (256, 256, 256, 3), NHWC, on cuda
        ...

Coordinate frame (as :meth:`slidestream.Slide.read_region`): ``x, y`` are the top-left corner
in **level-0 pixels** (may be negative or past the edge; those pixels get the background);
``size`` is (width, height) in **pixels of** ``level``; the level-``level`` origin of a patch
is ``floor(x / downsample), floor(y / downsample)``.

Batched reads: when a ``DataLoader`` uses automatic batching, torch (≥ 2.0) calls
``dataset.__getitems__(indices)``; :class:`PatchDataset` answers it with one cross-slide
:func:`slidestream.read_patches` call per batch (one :meth:`slidestream.Slide.read_regions`
when the batch has one slide; tiles shared by patches are decoded once, decoding runs on
slidestream's threads with the GIL released).

GPU: ``PatchDataset(..., device="cuda")`` (or ``"cuda:N"``, an int, a ``torch.device``) reads
every batch with one :func:`slidestream.read_patches` ``(device=...)`` call across its slides:
tiles are decoded by nvJPEG and patches assembled on the GPU, and samples come back as CUDA
``torch.uint8`` tensors (``torch.from_dlpack``, no copy). Use it with ``num_workers=0``: the batch is already decoded in
parallel on the GPU, and CUDA tensors made in worker processes cannot be sent to the main
process (their memory is not PyTorch's). ``fork`` workers cannot use CUDA at all once the
parent has (:class:`slidestream.GpuForkError`).

Workers: the dataset is picklable (slides pickle by path and reopen lazily in the worker), so
``spawn`` / ``forkserver`` workers work, and so does ``fork`` (slidestream re-creates its
thread pool and file handles in the child). Each worker process keeps its own tile cache
(``SLIDESTREAM_CACHE_BYTES``, 256 MiB by default) unless ``cache_bytes`` is given.
"""

from __future__ import annotations

import operator
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from ._args import check_level, normalize_locations, normalize_size
from ._batch import as_slides, read_patch_batch
from ._errors import InvalidArgumentError
from .loader import BatchMeta, PatchBatches, _rows_array, read_device_batch
from ._slidestream import _parse_device

__all__ = ["PatchDataset", "PatchLoader", "BatchMeta"]


def _is_rows4(src: Any) -> bool:
    """Whether ``src`` looks like rows (slide_index, level, x, y): a 2-d array-like with 4
    columns (an empty one counts only when it has that shape)."""
    if isinstance(src, (str, bytes, dict, set, frozenset)):
        return False
    try:
        a = np.asarray(src) if (isinstance(src, np.ndarray) or hasattr(src, "__array__") or hasattr(src, "__len__")) else None
    except Exception:
        return False
    return a is not None and a.ndim == 2 and a.shape[1] == 4


class _PatchSource:
    """The framework-free part of :class:`PatchDataset` (numpy in, numpy out)."""

    def __init__(
        self,
        paths_or_slides: Any,
        locations: Any,
        *args: Any,
        level: Any = None,
        size: Any = None,
        background: Any = 255,
        transform: Optional[Callable[[np.ndarray], Any]] = None,
        cache_bytes: Optional[int] = None,
        device: Any = None,
        storage_options: Optional[dict] = None,
        mpp: Optional[float] = None,
        magnification: Optional[float] = None,
        fallback_mpp: Optional[float] = None,
        fallback_magnification: Optional[float] = None,
    ) -> None:
        self.slides, single = as_slides(paths_or_slides, cache_bytes, storage_options)
        #: The physical resolution of the reads (read_patches' mpp= / magnification= and
        #: fallbacks), empty when reading by level.
        self.resolution: dict = {k: v for k, v in (("mpp", mpp), ("magnification", magnification), ("fallback_mpp", fallback_mpp), ("fallback_magnification", fallback_magnification)) if v is not None}
        if self.resolution:
            if mpp is None and magnification is None:
                raise InvalidArgumentError("fallback_mpp= / fallback_magnification= apply only with mpp= or magnification=")
            if level is not None or len(args) > 1:
                raise InvalidArgumentError("give a level or mpp= / magnification=, not both (the resolution chooses each slide's level)")
        src = getattr(locations, "patches", locations)  # a GridSampler gives its rows
        if self.resolution and not _is_rows4(src):
            # (slide_index, x, y) rows at a resolution: each slide's level is the one chosen.
            from .resolution import resolve

            locs = normalize_locations(src, len(self.slides), allow_xy=single)
            levels = {int(k): resolve(self.slides[int(k)], **self.resolution).level for k in np.unique(locs[:, 0])}
            src = np.stack([locs[:, 0], np.array([levels[int(k)] for k in locs[:, 0]], np.int64), locs[:, 1], locs[:, 2]], axis=1) if locs.size else np.zeros((0, 4), np.int64)
        if len(args) > 2:
            raise TypeError(f"PatchDataset takes at most 4 positional arguments, got {2 + len(args)}")
        if _is_rows4(src):
            # (slide_index, level, x, y) rows, as read_patches, the samplers and PatchBatches.
            if level is not None or len(args) == 2:
                raise InvalidArgumentError("rows (slide_index, level, x, y) carry their own level: call PatchDataset(slides, rows, size) without a level")
            if args:
                if size is not None:
                    raise TypeError("PatchDataset got size both as an argument and as size=")
                size = args[0]
            if size is None:
                raise TypeError("PatchDataset needs a size: PatchDataset(slides, rows, size)")
            self.rows = _rows_array(src, len(self.slides), "locations")
            if self.rows.shape[0] and self.rows[:, 1].min() < 0:
                raise InvalidArgumentError(f"locations: level {int(self.rows[:, 1].min())} is negative")
        else:
            # The older form: (slide_index, x, y) rows plus one level for all.
            if len(args) >= 1:
                if level is not None:
                    raise TypeError("PatchDataset got level both as an argument and as level=")
                level = args[0]
            if len(args) == 2:
                if size is not None:
                    raise TypeError("PatchDataset got size both as an argument and as size=")
                size = args[1]
            if level is None or size is None:
                raise TypeError("PatchDataset needs rows (slide_index, level, x, y) and a size, or the older locations (slide_index, x, y), level and size")
            warnings.warn(
                "PatchDataset(slides, locations, level, size) with (slide_index, x, y) locations is deprecated: "
                "give rows (slide_index, level, x, y) as read_patches, the samplers and PatchBatches take: "
                "PatchDataset(slides, rows, size)",
                DeprecationWarning,
                stacklevel=3,
            )
            locs = normalize_locations(src, len(self.slides), allow_xy=single)
            lv = check_level(level)
            self.rows = np.empty((locs.shape[0], 4), dtype=np.int64)
            self.rows[:, 0] = locs[:, 0]
            self.rows[:, 1] = lv
            self.rows[:, 2:] = locs[:, 1:]
        self.size = normalize_size(size)
        self.background = background
        self.transform = transform
        self.cache_bytes = cache_bytes
        #: CUDA ordinal of device reads, or None (CPU reads).
        self.device: Optional[int] = _parse_device(device)

    @property
    def locations(self) -> np.ndarray:
        """The (slide_index, x, y) columns of :attr:`rows`, int64 (n, 3) (the older form)."""
        return self.rows[:, [0, 2, 3]]

    @property
    def level(self) -> Optional[int]:
        """The level of every row when they share one, else None."""
        if self.rows.shape[0] == 0:
            return 0
        lv = self.rows[:, 1]
        return int(lv[0]) if np.all(lv == lv[0]) else None

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def _index(self, i: Any) -> int:
        n = len(self)
        try:
            j = operator.index(i)
        except TypeError:
            raise TypeError(f"index must be an int, got {type(i).__name__}") from None
        if j < -n or j >= n:
            raise IndexError(f"index {i} out of range for {n} patches")
        return j + n if j < 0 else j

    def _indices(self, indices: Any) -> np.ndarray:
        idx = np.asarray(indices).reshape(-1)
        if idx.size == 0:
            idx = idx.astype(np.int64)
        elif idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
        idx = idx.astype(np.int64)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"index out of range for {n} patches")
        return np.where(idx < 0, idx + n, idx)

    def read_array(self, i: int) -> np.ndarray:
        """Patch ``i`` as numpy uint8 (height, width, 3), RGB, HWC, composited over the
        background; no transform applied. Always read on the CPU, whatever ``device``."""
        j = self._index(i)
        return self._read(self.rows[j : j + 1])[0]

    def read_arrays(self, indices: Sequence[int]) -> np.ndarray:
        """Patches ``indices`` as numpy uint8 (n, height, width, 3), RGB, NHWC, in the order
        given; one ``read_regions`` call per distinct slide; no transform applied. Always read
        on the CPU, whatever ``device``."""
        idx = self._indices(indices)
        return self._read(self.rows[idx])

    def _read(self, rows: np.ndarray) -> np.ndarray:
        """Rows (slide_index, level, x, y) read on the CPU: one read_regions / read_patches call,
        at the physical resolution when one is set."""
        if self.resolution:
            from ._patches import read_patches

            out = read_patches(list(self.slides), rows, self.size, background=self.background, **self.resolution)
            assert isinstance(out, np.ndarray)  # the CPU form (no device at a resolution)
            return out
        return read_patch_batch(self.slides.__getitem__, rows, self.size, self.background)

    def __repr__(self) -> str:
        w, h = self.size
        dev = "" if self.device is None else f", device='cuda:{self.device}'"
        lv = self.level
        levels = f"level={lv}" if lv is not None else f"levels={sorted(set(int(v) for v in self.rows[:, 1]))}"
        return f"{type(self).__name__}({len(self.slides)} slide(s), {len(self)} patches, {levels}, size=({w}, {h}){dev})"


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "slidestream.torch (PatchDataset, PatchLoader) needs PyTorch (`pip install torch`); "
            "slidestream itself does not depend on it"
        ) from e
    return torch


class _TorchPatches(_PatchSource):
    """Map-style dataset of fixed-size patches from one or more slides.

    ``PatchDataset(paths_or_slides, rows, size, *, background=255, transform=None,
    cache_bytes=None, device=None, storage_options=None)``

    * ``paths_or_slides``: one path (``str``, ``bytes``, ``os.PathLike``) or
      :class:`slidestream.Slide`, or a sequence of them. Paths are opened lazily, on the first
      read of that slide in each process (errors such as :class:`FileNotFoundError` surface
      then); given slides are used as they are.
    * ``rows``: ``(slide_index, level, x, y)`` rows — a sequence of 4-tuples, an integer array
      (n, 4), or a :class:`slidestream.sampling.GridSampler` (its ``patches``) — the rows
      :func:`slidestream.read_patches`, the samplers and :class:`slidestream.PatchBatches`
      take. ``x, y``: the patch's top-left corner in level-0 pixels (int64); levels may differ
      between rows. A slide index out of range is an :class:`IndexError` /
      :class:`slidestream.InvalidArgumentError`; a level past the last one is an
      InvalidArgumentError when the patch is read.
    * Deprecated older form, still accepted with a :class:`DeprecationWarning`:
      ``PatchDataset(paths_or_slides, locations, level, size)`` with ``locations`` rows
      ``(slide_index, x, y)`` (an array (n, 3); with one slide also ``(x, y)`` pairs) and one
      ``level`` for all; a negative level raises :class:`slidestream.InvalidArgumentError`
      here, a non-int (a bool included) :class:`TypeError`. Giving a level with 4-column rows
      is an InvalidArgumentError (the rows carry their levels).
    * ``size``: patch (width, height) in pixels of each row's level, or an int for a square.
    * ``mpp`` / ``magnification`` (with ``fallback_mpp`` / ``fallback_magnification``): read
      at a physical resolution instead (:func:`slidestream.read_patches`): ``size`` in pixels
      at that resolution, rows ``(slide_index, x, y)`` or a sampler's made with the same
      resolution; on the GPU too with ``device``.
    * ``background``: int or (r, g, b) written outside the image and on missing tiles; partly
      transparent pixels are composited over it.
    * ``transform``: optional callable applied to each patch as a numpy uint8 array
      (height, width, 3), RGB, HWC; its result is returned instead of a tensor. It must be
      picklable for ``spawn`` workers.
    * ``cache_bytes``: private tile cache of that many bytes for each slide opened from a path
      (default: the process-wide cache).
    * ``storage_options``: for paths that are URLs (``s3://``, ``gs://``, ``az://``,
      ``http(s)://``), the store's options, as :class:`slidestream.Slide`'s.
    * ``device``: None / ``"cpu"`` (default: CPU reads, tensors in host memory) or a CUDA
      device (``"cuda"``, ``"cuda:N"``, an int, a ``torch.device``): patches are read with
      one cross-slide ``read_patches(..., device=...)`` call per item or DataLoader batch and
      returned as CUDA tensors (``torch.from_dlpack``, no
      copy); ``transform`` then receives the CUDA tensor (height, width, 3), HWC. Use
      ``num_workers=0`` (module docs). ValueError / TypeError for a bad device; reads raise
      :class:`slidestream.GpuError` subclasses when the GPU cannot be used.

    ``ds[i]`` → ``torch.uint8`` tensor (3, height, width), CHW, RGB — a view of the decoded
    buffer (``torch.from_numpy`` / ``torch.from_dlpack`` + ``permute``, no copy; call
    ``.contiguous()`` if needed), on the CPU or on ``device`` — or ``transform(array)``.
    """

    def _device_batch(self, rows: np.ndarray) -> Any:
        """Rows (slide_index, level, x, y) read on ``self.device``: CUDA ``torch.uint8``
        tensor (n, height, width, 3), RGB, NHWC; one cross-slide device
        :func:`slidestream.read_patches` call."""
        torch = _torch()
        n = rows.shape[0]
        w, h = self.size
        assert self.device is not None
        if n == 0:
            return torch.empty((0, h, w, 3), dtype=torch.uint8, device=torch.device("cuda", self.device))
        return torch.from_dlpack(read_device_batch(self.slides, np.ascontiguousarray(rows), (w, h), self.background, self.device, self.resolution))

    def __getitem__(self, i: int) -> Any:
        if self.device is not None:
            j = self._index(i)
            t = self._device_batch(self.rows[j : j + 1])[0]
            return self.transform(t) if self.transform is not None else t.permute(2, 0, 1)
        a = self.read_array(i)
        if self.transform is not None:
            return self.transform(a)
        # from_numpy shares the buffer (no copy); permute returns a CHW view.
        return _torch().from_numpy(a).permute(2, 0, 1)

    def __getitems__(self, indices: List[int]) -> List[Any]:
        """Batched fetch used by ``DataLoader`` (torch ≥ 2.0): a list of samples, each as
        ``ds[i]`` would return, read with one cross-slide ``read_patches`` call (CPU or device)."""
        if self.device is not None:
            t = self._device_batch(self.rows[self._indices(indices)])
            if self.transform is not None:
                return [self.transform(x) for x in t.unbind(0)]
            return list(t.permute(0, 3, 1, 2).unbind(0))
        arr = self.read_arrays(indices)
        if self.transform is not None:
            return [self.transform(a) for a in arr]
        return list(_torch().from_numpy(arr).permute(0, 3, 1, 2).unbind(0))

    def read_batch(self, indices: Sequence[int]) -> Any:
        """Read patches ``indices`` in one batched call (across slides).

        Returns a ``torch.uint8`` tensor (n, 3, height, width), NCHW, RGB (a view of one
        freshly decoded buffer, no copy; on ``device`` when one is set), or, with a
        ``transform``, the list ``[transform(a) for a in arrays]`` of the (height, width, 3)
        uint8 arrays (CUDA tensors with ``device``)."""
        if self.device is not None:
            t = self._device_batch(self.rows[self._indices(indices)])
            if self.transform is not None:
                return [self.transform(x) for x in t.unbind(0)]
            return t.permute(0, 3, 1, 2)
        arr = self.read_arrays(indices)
        if self.transform is not None:
            return [self.transform(a) for a in arr]
        return _torch().from_numpy(arr).permute(0, 3, 1, 2)


class PatchLoader(PatchBatches):
    """:class:`slidestream.PatchBatches` yielding PyTorch tensors: ``(tensor, meta)`` with the
    next batches already being read and decoded while the caller computes.

    ``PatchLoader(slides, sampler, size, *, batch_size=256, num_batches=None, shuffle=False,
    seed=None, drop_last=False, transform=None, device=None, pin_memory=False, prefetch=2,
    readers=1, background=None, timeout=None, storage_options=None, rank=None, world_size=None)`` — the
    arguments of :class:`slidestream.PatchBatches` (slides, sampler, epochs, ``break``, errors,
    ``meta`` and the rank split work the same way).

    * Under ``torch.distributed`` (one process per GPU): ``rank`` / ``world_size`` default to
      the initialised default group's, and each rank reads its own share of the samples
      (``DistributedSampler``'s rule for a row set; ``sampler.split(rank, world_size,
      epoch=)`` for a :class:`slidestream.sampling.RandomPatchSampler`); give each rank its
      own GPU with ``device=f"cuda:{local_rank}"`` (or ``torch.cuda.set_device(local_rank)``
      then ``device="cuda"``, which means torch's current device). docs/python.md, "Several
      GPUs and torch.distributed", has a DDP example.

    * CPU (``device=None``): ``torch.uint8`` tensor (n, height, width, 3), RGB, NHWC, in host
      memory (``torch.from_numpy`` of the decoded batch, no copy), decoded on slidestream's
      decode threads ahead of the caller (no worker processes).
    * ``pin_memory=True`` (CPU path): each batch is decoded straight into page-locked memory
      from PyTorch's pinned allocator (one copy into it on the producer-thread path), so
      ``batch.to("cuda", non_blocking=True)`` overlaps the model as with
      ``DataLoader(pin_memory=True)``; PyTorch reuses a freed batch's memory only after the
      copies recorded on it finished. :class:`slidestream.InvalidArgumentError` without CUDA,
      with ``device=``, or for a non-bool.
    * ``device="cuda"`` (``"cuda:N"``, an int, a ``torch.device``): a CUDA ``torch.uint8``
      tensor (n, height, width, 3) on that device, made with ``torch.from_dlpack`` from the
      :class:`slidestream.DeviceArray` that one cross-slide :func:`slidestream.read_patches`
      call returns: no copy to or from the host. The engine reads on its own CUDA streams and
      synchronises them before the read returns, so the tensor is complete when it is
      yielded and valid on any stream: it is ordered on the consumer's current stream
      trivially (nothing to wait for). Each batch is a fresh allocation from the engine's
      stream-ordered memory pool, freed when the last reference (the tensor) goes, in stream
      order on the caller's current stream when the batch was taken (the batch is imported
      with ``torch.from_dlpack`` on the caller's thread, as DLPack intends: use it on that
      stream, or keep it alive until work on other streams is done), so freeing never waits
      for the device; at most
      ``prefetch + readers`` batches per loader are alive besides those the consumer holds, and
      reuse can never overwrite a batch the consumer still holds.
      :class:`slidestream.GpuUnavailableError` at construction without a usable GPU
      (:func:`slidestream.cuda_available` False).
    * ``transform``: applied to the tensor, on the caller's thread for device batches (its GPU
      work on the caller's current stream), on the producer thread for CPU ones (e.g. ``lambda x:
      x.permute(0, 3, 1, 2).float().div_(255)``); its result is yielded instead.

    Raises ImportError without PyTorch; otherwise as :class:`slidestream.PatchBatches`.
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
        pin_memory: bool = False,
    ) -> None:
        torch = _torch()
        if not isinstance(pin_memory, bool):
            raise InvalidArgumentError(f"pin_memory must be True or False, got {pin_memory!r}")
        if pin_memory and device is not None and device != "cpu":
            raise InvalidArgumentError("pin_memory=True applies to host batches; device batches are in device memory already")
        if pin_memory and not torch.cuda.is_available():
            raise InvalidArgumentError("pin_memory=True needs CUDA (torch.cuda.is_available() is False)")
        #: Host batches are read into page-locked memory (see the class docs).
        self.pin_memory = pin_memory
        super().__init__(
            slides, sampler, size, batch_size=batch_size, num_batches=num_batches, shuffle=shuffle, seed=seed,
            drop_last=drop_last, transform=transform, device=device, prefetch=prefetch, readers=readers, background=background,
            timeout=timeout, storage_options=storage_options, rank=rank, world_size=world_size, mpp=mpp,
            magnification=magnification, fallback_mpp=fallback_mpp, fallback_magnification=fallback_magnification,
        )

    def _destination(self) -> Optional[Callable[[int], Tuple[Any, np.ndarray]]]:
        """With ``pin_memory``: per host batch, a page-locked uint8 tensor (n, h, w, 3) and its numpy view."""
        if not self.pin_memory:
            return None
        torch = _torch()
        w, h = self.size

        def pinned(n: int) -> Tuple[Any, np.ndarray]:
            t = torch.empty((n, h, w, 3), dtype=torch.uint8, pin_memory=True)
            return t, t.numpy()

        return pinned

    def _convert(self, batch: Any) -> Any:
        """The read batch as a tensor (``torch.from_numpy`` / ``torch.from_dlpack``, no copy)."""
        torch = _torch()
        if isinstance(batch, torch.Tensor):
            return batch
        if isinstance(batch, np.ndarray):
            return torch.from_numpy(batch)
        return torch.from_dlpack(batch)


def _make_patch_dataset() -> type:
    # The class derives from torch.utils.data.Dataset, so it can only be made once torch is
    # imported; the methods live in _TorchPatches.
    _torch()
    from torch.utils.data import Dataset

    return type(
        "PatchDataset",
        (_TorchPatches, Dataset),
        {"__module__": __name__, "__qualname__": "PatchDataset", "__doc__": _TorchPatches.__doc__},
    )


_MAKE_LOCK = threading.Lock()


def __getattr__(name: str) -> Any:
    if name == "PatchDataset":
        with _MAKE_LOCK:  # one class per process, even when threads race to make it
            cls = globals().get("PatchDataset")
            if cls is None:
                cls = _make_patch_dataset()
                # Cache it so pickling finds the very same class (pickle checks identity).
                globals()["PatchDataset"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(list(globals()) + ["PatchDataset"])


if TYPE_CHECKING:  # what type checkers see; at run time the class comes from __getattr__
    PatchDataset = _TorchPatches
