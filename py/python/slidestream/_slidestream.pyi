"""Type stubs of the compiled extension ``slidestream._slidestream`` (py/src/).

Coordinates follow OpenSlide: a ``location`` is (x, y) in level-0 pixels, x to the right and
y down from the top-left corner of the slide; a ``size`` is (width, height) in pixels of the
level being read. Arrays are C-contiguous numpy ``uint8``, row-major (height first), and own
the decoded buffer.

Device reads (``device="cuda"``, ``"cuda:N"``, an int ``N``, a ``torch.device``) return a
:class:`DeviceArray` in GPU memory instead; ``device=None`` / ``"cpu"`` keep the numpy result.
"""

from typing import Any, Dict, List, Literal, Optional, Protocol, Sequence, Tuple, Union, final, overload

import numpy as np
import numpy.typing as npt
from typing_extensions import Self, disjoint_base

__all__ = [
    "Slide",
    "DeviceArray",
    "core_version",
    "detect_vendor",
    "format_verdicts",
    "cuda_available",
    "gpu_probe",
    "gpu_stats",
    "gpu_reset_stats",
    "gpu_clear_cache",
    "_parse_device",
    "_config_get",
    "_config_set",
    "_config_table",
    "_read_patches",
    "_resize_patches",
    "_resize_patches_device",
    "_Prefetcher",
    "_prefetch_threads",
    "_test_hooks",
]

# One spelling of these arguments for the stub and the Python modules (slidestream._typing).
from ._typing import Background as _Background
from ._typing import PathLike as _Path
from ._typing import Size as _Size

class _TorchDeviceLike(Protocol):
    """Anything with ``type`` and ``index`` attributes, such as ``torch.device``."""

    @property
    def type(self) -> str: ...
    @property
    def index(self) -> Optional[int]: ...

#: A CUDA device: ``"cuda"`` (torch's current device when torch is imported and its CUDA state
#: initialised, else device 0; likewise a ``torch.device("cuda")`` without an index),
#: ``"cuda:N"``, an int ``N >= 0`` or a ``torch.device`` of type ``cuda``. (``"cpu"`` / a CPU
#: ``torch.device`` select the CPU path.)
_Device = Union[str, int, _TorchDeviceLike]

@final
class DeviceArray:
    """An array of ``uint8`` in GPU memory, made by ``Slide.read_region(..., device=...)``
    (shape (height, width, 4), RGBA) and ``Slide.read_regions(..., device=...)`` (shape
    (n, height, width, 3), RGB). C-contiguous, row-major. The memory is freed when the last
    reference goes away: this object, or a tensor imported from it (DLPack tensors and
    ``__cuda_array_interface__`` consumers keep it alive after this object is deleted).

    The data are complete when the read returns, so consumers on any CUDA stream may use them
    without synchronising. Zero-copy exchange: ``torch.from_dlpack(a)``,
    ``cupy.from_dlpack(a)``, ``cupy.asarray(a)``, ``numba.cuda.as_cuda_array(a)``. Host
    copies: ``a.cpu()``, ``a.numpy()``, ``numpy.asarray(a)``. Not picklable.
    """

    @property
    def shape(self) -> Tuple[int, ...]:
        """Shape, outermost first: (height, width, 4) or (n, height, width, 3)."""

    @property
    def dtype(self) -> np.dtype[np.uint8]:
        """Always ``numpy.dtype('uint8')``."""

    @property
    def ndim(self) -> int:
        """Number of dimensions (3 for a region, 4 for a batch)."""

    @property
    def nbytes(self) -> int:
        """Size in bytes (product of the shape)."""

    @property
    def device(self) -> int:
        """CUDA device ordinal holding the data."""

    def __len__(self) -> int:
        """Length of the first dimension."""

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """CUDA Array Interface version 3: ``shape``, ``typestr`` ``'|u1'``, ``data``
        (device pointer, False = writable; 0 for an empty array), ``strides`` None
        (C-contiguous), ``version`` 3 and ``stream`` None: no synchronisation is needed
        because the data are complete when the read returns."""

    def __dlpack_device__(self) -> Tuple[int, int]:
        """``(2, device)``: kDLCUDA and the device ordinal."""

    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """A DLPack capsule (``"dltensor"``, unversioned ``DLManagedTensor``, which the array
        API standard allows for any ``max_version``) sharing the device memory, no copy.

        ``stream``: the consumer's stream; ignored, since the data are complete (nothing to
        wait for). ``dl_device``: None or this device; ``(1, 0)`` (CPU) exports a host copy
        unless ``copy`` is False (then BufferError). ``copy=True`` on the device raises
        BufferError. Raises GpuError when a host copy fails."""

    def cpu(self) -> npt.NDArray[np.uint8]:
        """A host copy: new numpy uint8 array of the same shape (GIL released during the
        copy). Raises GpuError if the copy fails (GpuForkError in a process forked after the
        array was made)."""

    def numpy(self) -> npt.NDArray[np.uint8]:
        """Same as :meth:`cpu`."""

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> npt.NDArray[Any]:
        """``numpy.asarray(a)``: always a host copy (as :meth:`cpu`), cast to ``dtype`` when
        given; ``copy=False`` raises ValueError."""

@disjoint_base
class Slide:
    """An open whole-slide image (Aperio SVS, pyramidal tiled TIFF/BigTIFF).

    Coordinates follow OpenSlide: ``location`` is (x, y) in level-0 pixels, ``size`` is
    (width, height) in pixels of the requested level. Pixels are ``uint8``, row-major.
    Thread-safe: share one ``Slide`` between threads; reads release the GIL.
    """

    def __new__(
        cls,
        path: _Path,
        *,
        cache_bytes: Optional[int] = None,
        lazy: bool = False,
        storage_options: Optional[Dict[str, Union[str, bool, int]]] = None,
    ) -> Self:
        """Open a slide. ``path``: str, bytes or os.PathLike, or a URL (``s3://``, ``gs://``,
        ``az://``, ``http(s)://``) with ``storage_options`` for its store (an unknown key,
        options with a local path, a URL over 8192 bytes, an object key over 1024 bytes or a
        URL with control characters or whitespace: InvalidArgumentError). ``cache_bytes``: capacity in
        bytes of a private tile cache for this slide (default: the process-wide cache,
        ``SLIDESTREAM_CACHE_BYTES``, 256 MiB). ``lazy=True`` defers opening to the first use.

        Raises FileNotFoundError / PermissionError / OSError, UnsupportedFormatError,
        CorruptDataError, LimitsExceededError; TypeError for a bad path type or a non-int
        ``cache_bytes``, InvalidArgumentError (a ValueError) for a negative one."""

    @property
    def path_bytes(self) -> bytes:
        """The file path as bytes (exact, also for non-UTF-8 names)."""

    @property
    def storage_options(self) -> Dict[str, str]:
        """The storage options the slide was opened with (a new dict; empty for a local path)."""

    @property
    def cache_bytes(self) -> Optional[int]:
        """Capacity in bytes of this slide's private tile cache, or None (process-wide cache)."""

    @property
    def path(self) -> str:
        """The file path as str: ``os.fsdecode`` of the name (non-UTF-8 bytes as surrogate
        escapes, as ``os.listdir`` gives them; ``os.fsencode(path)`` is the exact name)."""

    @property
    def closed(self) -> bool:
        """True after ``close()``."""

    @property
    def vendor(self) -> str:
        """Format driver that opened the slide: ``"aperio"``, ``"ome-tiff"`` or ``"generic-tiff"``
        (the ``openslide.vendor`` property)."""

    @property
    def level_count(self) -> int:
        """Number of pyramid levels (>= 1)."""

    @property
    def dimensions(self) -> Tuple[int, int]:
        """(width, height) of level 0, in pixels."""

    @property
    def level_dimensions(self) -> Tuple[Tuple[int, int], ...]:
        """((width, height), ...) in pixels of every level, level 0 first."""

    @property
    def level_downsamples(self) -> Tuple[float, ...]:
        """Downsample of every level relative to level 0 (level 0: 1.0; level k: the mean of
        the width and height ratios), level 0 first."""

    @property
    def level_tile_sizes(self) -> Tuple[Tuple[int, int], ...]:
        """((tile_width, tile_height), ...) in pixels of every level, level 0 first."""

    def _properties(self) -> Dict[str, str]:
        """Properties as a new dict str → str (``openslide.*``, ``tiff.*``, vendor keys)."""

    def _associated_sizes(self) -> Dict[str, Tuple[int, int]]:
        """Associated image name → (width, height) in pixels."""

    @property
    def channel_names(self) -> List[str]:
        """Names of the channels ``read_region_channels`` indexes, in order: the OME-XML channel
        names for OME-TIFF multichannel slides (``"C<i>"`` when unnamed), else the stored
        samples of level 0: ``["gray"]`` (+ ``"alpha"``) or ``["R", "G", "B"]`` (+ ``"A"``)."""

    @property
    def channel_colors(self) -> List[Optional[Tuple[int, int, int]]]:
        """Display colour of each channel of ``channel_names``, in the same order: an (r, g, b) tuple
        of ints 0-255 from the format's metadata (QPTIFF ``Color``, OME-XML ``Channel/@Color``, CZI
        ``Channel/Color``; the R, G, B samples of a CZI BGR channel get the primaries), or None where
        the file gives none. For a slide's stored samples ``R``, ``G``, ``B`` are the primaries and
        ``gray``, ``alpha``, ``A`` None."""

    def read_region_channels(
        self, location: Tuple[int, int], level: int, size: Tuple[int, int], channels: Optional[Sequence[int]] = None
    ) -> Union[npt.NDArray[np.uint8], npt.NDArray[np.uint16]]:
        """Read a region's channels at their stored depth: array of shape (height, width, c),
        channel-last, dtype uint8 for 8-bit images and uint16 for 16-bit ones (not scaled, not
        converted to RGBA); 0 outside the image and on missing tiles. CPU only, not cached.

        ``location``: (x, y) in level-0 pixels; ``level``: level index; ``size``: (width,
        height) in pixels of that level (as ``read_region``). ``channels``: None for all, or
        indices into ``channel_names`` in the order wanted (repeats allowed). OME-TIFF
        multichannel slides: one channel per OME-XML channel plane; other slides: the level's
        stored samples. JPEG / JPEG 2000 / WebP levels give their decoded 8-bit channels.
        Raises InvalidArgumentError (a ValueError) for a level or channel that does not exist,
        LimitsExceededError past ``max_region_bytes``, CorruptDataError for a corrupt tile."""

    def read_associated(self, name: str) -> npt.NDArray[np.uint8]:
        """A whole associated image (``thumbnail``, ``label``, ``macro``): uint8 array of shape
        (height, width, 4), RGBA, non-premultiplied. Raises InvalidArgumentError for an
        unknown name, CorruptDataError when it cannot be decoded."""

    def read_level_reduced(
        self, level: int, max_factor: int, *, background: Optional[Union[int, Tuple[int, int, int]]] = None
    ) -> Tuple[npt.NDArray[np.uint8], int]:
        """All of ``level`` reduced by f, the largest power of two <= ``max_factor`` dividing
        the level's tile width and height: (uint8 array (ceil(h / f), ceil(w / f), 3), RGB, f).
        Each pixel is the mean of the f x f level pixels it covers, composited over
        ``background`` (white by default); JPEG tiles decode at 1/2..1/8 scale. Tiles are read
        in waves within the working set and not cached (bounded-memory thumbnails).
        InvalidArgumentError for a bad level or max_factor < 1; LimitsExceededError when the
        output exceeds max_region_bytes or one tile exceeds the working set."""

    @property
    def color_profile(self) -> Optional[bytes]:
        """The slide's ICC profile (raw bytes), or None."""

    def associated_color_profile(self, name: str) -> Optional[bytes]:
        """The ICC profile (raw bytes) of associated image ``name``, or None when it has none
        (DICOM associated images carry their own). InvalidArgumentError for an unknown name."""

    @property
    def mpp(self) -> Optional[Tuple[float, float]]:
        """(mpp_x, mpp_y): micrometres per level-0 pixel, or None when unknown."""

    @overload
    def read_region(  # type: ignore[overload-overlap]
        self,
        location: Tuple[int, int],
        level: int,
        size: _Size,
        *,
        device: Optional[Literal["cpu"]] = None,
    ) -> npt.NDArray[np.uint8]: ...
    @overload
    def read_region(
        self, location: Tuple[int, int], level: int, size: _Size, *, device: _Device
    ) -> DeviceArray:
        """Read a region: uint8 array of shape (height, width, 4), RGBA, non-premultiplied;
        (0, 0, 0, 0) outside the image and on missing tiles.

        ``location``: (x, y) in level-0 pixels (may be negative or past the image);
        ``level``: 0 .. level_count - 1 (InvalidArgumentError otherwise, negative levels
        included; TypeError for a non-int); ``size``: (width, height) >= 0 in pixels of that
        level. The level-k origin is the level pixel ``floor(location / downsample)``. The GIL
        is released during the read; the array owns the buffer and supports ``__dlpack__``.
        ``location`` and ``size`` may be any pair (tuple, list, 1-d array) of ints (numpy ints
        too), ``size`` also one int ``n`` for ``(n, n)``; a non-int is a TypeError, a value outside 64 bits or a negative size an
        InvalidArgumentError (a ValueError), never an OverflowError.
        Raises InvalidArgumentError (bad level, closed slide, negative size),
        LimitsExceededError (output above ``SLIDESTREAM_MAX_REGION_BYTES``),
        CorruptDataError (a tile cannot be decoded).

        ``device``: None or ``"cpu"`` → numpy array (above). A CUDA device (``"cuda"``,
        ``"cuda:N"``, int ``N``, ``torch.device``) → :class:`DeviceArray` (height, width, 4)
        in that GPU's memory with the same pixels (JPEG decoded by nvJPEG). Also raises
        GpuUnavailableError (no usable GPU), GpuForkError (forked after CUDA was
        initialised), GpuError (a CUDA call failed), ValueError / TypeError (bad device)."""

    @overload
    def read_regions(  # type: ignore[overload-overlap]
        self,
        locations: Union[Sequence[Sequence[int]], npt.NDArray[np.integer[Any]]],
        level: int,
        size: _Size,
        *,
        background: Optional[_Background] = None,
        device: Optional[Literal["cpu"]] = None,
    ) -> npt.NDArray[np.uint8]: ...
    @overload
    def read_regions(
        self,
        locations: Union[Sequence[Sequence[int]], npt.NDArray[np.integer[Any]]],
        level: int,
        size: _Size,
        *,
        background: Optional[_Background] = None,
        device: _Device,
    ) -> DeviceArray:
        """Read many patches of one level: uint8 array of shape (n, height, width, 3), RGB.

        ``locations``: n (x, y) level-0 pixel pairs: a sequence of pairs (tuples, lists, numpy
        rows) or an integer array of shape (n, 2) of any integer dtype and byte order; values
        outside 64 bits raise InvalidArgumentError, other objects (a dict, a float array)
        TypeError, other shapes ValueError. ``level``: as :meth:`read_region`. ``size``: (width, height) of every patch in
        pixels of ``level``.
        ``background``: int 0..255 or (r, g, b), default 255 (white): used outside the image
        and on missing tiles; partly transparent pixels are composited over it. Tiles shared
        by patches are decoded once; the work runs on threads with the GIL released.

        ``device``: None or ``"cpu"`` → numpy array (above). A CUDA device → one
        :class:`DeviceArray` (n, height, width, 3) with the same pixels, the tiles of all
        patches decoded in nvJPEG batches and assembled on the GPU. A patch that cannot be
        read raises its error (CorruptDataError, ...) as on the CPU; GPU errors as
        :meth:`read_region`."""

    def get_best_level_for_downsample(self, downsample: float) -> int:
        """The level to read for a wanted downsample (OpenSlide's rule: the level with the
        largest downsample not above ``downsample``; 0 if it is below every level). TypeError
        for a downsample that is not a number."""

    def cache_stats(self) -> Dict[str, int]:
        """Tile cache counters: hits, misses, evictions, insertions, entries, resident_bytes,
        capacity_bytes (bytes are of decoded RGBA tiles)."""

    def io_stats(self) -> Dict[str, Any]:
        """I/O counters since open in this process: ``requests`` (int), ``bytes`` (int) and
        ``path`` (str, ``"posix"``: positional reads) of this slide's CPU reads. Once this
        process has made a device read, also ``"gpu"``: the process-wide counters of the
        device it read on (as :func:`gpu_stats`, plus ``"device"``, the ordinal). ``"remote"``
        (absent for a local slide: use ``io_stats().get("remote")``): for a URL a dict of ``url``, ``requests`` (HTTP requests
        slidestream issued since open, the open's included; object_store's retries of a
        request are not counted), ``bytes`` (bytes received), ``failed`` (requests
        that failed after their retries), ``open_requests`` / ``open_bytes`` (what the open
        cost), ``index_cache`` (``"off"``, ``"miss"`` or ``"hit"``), ``index_cache_rejected``
        (index cache entries found at open that were not usable: not a regular file, a
        symbolic link, too large, damaged) and ``etag``. Never
        initialises CUDA."""

    def close(self) -> None:
        """Close the file. Later reads raise InvalidArgumentError; closing twice is harmless."""

    def __enter__(self) -> Self:
        """Return the slide itself."""

    def __exit__(self, *_args: object) -> Literal[False]:
        """Close the slide; exceptions propagate (returns False)."""

def _resize_patches(patches: npt.NDArray[np.uint8], size: Union[int, Tuple[int, int]]) -> npt.NDArray[np.uint8]:
    """uint8 RGB patches (n, h, w, 3) resized to (n, size[1], size[0], 3) by a Lanczos-3
    convolution (Pillow's LANCZOS), in parallel with the GIL released; ValueError for another
    shape or a zero size."""
def _resize_patches_device(
    groups: List[Tuple[DeviceArray, npt.NDArray[np.int64]]], n: int, size: Union[int, Tuple[int, int]]
) -> DeviceArray:
    """Device batches resized on their GPU (called by ``slidestream.read_patches`` with ``mpp=`` /
    ``magnification=`` and a device): ``groups`` is a list of (DeviceArray (m, h, w, 3) uint8,
    int64 array of the m output indices of its patches), whose indices together cover 0..n
    exactly once; returns one DeviceArray (n, size[1], size[0], 3) with the CPU path's resize
    (the same integer Lanczos-3 taps as ``_resize_patches``: equal pixels). The GIL is
    released. InvalidArgumentError for bad shapes, indices or sizes, GpuUnavailableError
    without a usable GPU."""
def _read_patches(
    slides: Sequence[Slide],
    requests: npt.NDArray[np.int64],
    size: Tuple[int, int],
    background: Optional[Union[int, Tuple[int, int, int]]] = None,
    device: Any = None,
) -> Union[npt.NDArray[np.uint8], DeviceArray]:
    """Batch across slides (called by ``slidestream.read_patches``): requests int64
    (n, 4) rows of (slide index, level, x, y) → uint8 (n, h, w, 3) RGB, numpy on the CPU
    (``device`` None or "cpu") or a DeviceArray on ``device``."""

def core_version() -> str:
    """Version of the Rust core (also ``slidestream.__version__``)."""

def detect_vendor(path: _Path) -> Optional[str]:
    """The vendor of the file's slide format, as ``openslide.OpenSlide.detect_format``:
    ``"aperio"``, ``"generic-tiff"`` or ``"hamamatsu"`` (NDPI) (the driver that would open it),
    ``"dicom"`` (a whole-slide format slidestream recognises but cannot read yet), or None
    when the file is not a slide format slidestream knows or cannot be opened. Detection only:
    a detected file may still fail to open. TypeError for a bad path type."""

def format_verdicts(path: _Path) -> Dict[str, str]:
    """Why each format driver accepted or declined the file at ``path``, in the order they
    are tried: driver name → ``"accepted"`` or the reason it declined (detection stops at the
    first driver that accepts). What the "no format driver recognises this file" error
    summarises in one line; the CLI's ``slidestream info --why``. Raises TypeError for a bad
    path type, FileNotFoundError / PermissionError / OSError when the file cannot be read."""

def _config_get(name: str) -> str:
    """The value of setting ``name`` (e.g. ``"SLIDESTREAM_CACHE_BYTES"``) in effect
    (override > environment > default), as text. ConfigError for a bad value in the
    environment, InvalidArgumentError for an unknown name."""

def _config_set(name: str, value: Optional[str]) -> None:
    """Set (a str) or remove (None) the process-wide override of setting ``name``; validated
    first (ConfigError for a bad value; InvalidArgumentError for an unknown name or a
    per-process setting already in use; nothing changed)."""

def _config_table() -> List[Dict[str, Any]]:
    """The settings table, in order: dicts with ``name``, ``default``, ``unit``, ``accepted``,
    ``doc`` (str) and ``per_process`` (bool)."""

def cuda_available() -> bool:
    """True when a usable CUDA device is present (libcuda loads, ``cuInit`` succeeds, at least
    one device). Never raises. False in a process forked after CUDA was initialised (CUDA
    cannot be used there)."""

def gpu_probe() -> Dict[str, Any]:
    """Probe the GPU stack (initialises CUDA): ``driver_version`` (int, 13000 = 13.0),
    ``devices`` (list of ``{"name": str, "compute_capability": (major, minor)}``),
    ``nvjpeg_version`` ((major, minor, patch) or None), ``hardware_engines`` (hardware JPEG
    engines of device 0; 0 without), ``hardware_reason`` (str or None: why the hardware JPEG
    backend is unavailable). Raises GpuUnavailableError when CUDA cannot be loaded or
    initialised, GpuForkError in a process forked after CUDA was initialised."""

def gpu_stats(device: Optional[_Device] = None) -> Dict[str, Any]:
    """Process-wide counters of the GPU path of ``device`` (default 0), all slides: I/O path
    and bytes / requests per path, read amplification, tiles per decoder, CPU fallbacks,
    nvJPEG backend and the device tile cache (keys in docs/python.md). Never initialises
    CUDA: an unused device reports zeros. ValueError for ``"cpu"`` or a bad device."""

def gpu_reset_stats(device: Optional[_Device] = None) -> None:
    """Zero the GPU counters of ``device`` (default 0); the device tile cache keeps its
    tiles."""

def gpu_clear_cache(device: Optional[_Device] = None) -> None:
    """Drop every tile of the device tile cache of ``device`` (default 0); counters are kept.
    No-op when the device was not used."""

def _parse_device(device: Optional[_Device] = None) -> Optional[int]:
    """``device=`` argument parsed as the reads parse it: None for the CPU path, else the CUDA
    ordinal. ValueError / TypeError for a bad device."""

@final
class _Prefetcher:
    """Read-ahead of patch batches on slidestream's own threads, which never take the GIL
    (used by :class:`slidestream.PatchBatches`). ``_Prefetcher(slides, size, background=None,
    device=None, readers=1)``: open slides, (width, height), RGB background, ``device`` as
    ``read_patches``'s, 1 to 16 reads at once (ValueError otherwise)."""

    def __new__(
        cls, slides: Sequence[Slide], size: Tuple[int, int], background: Optional[_Background] = None,
        device: Optional[_Device] = None, readers: int = 1,
    ) -> Self: ...
    def submit(self, rows: npt.NDArray[np.int64], out: Optional[npt.NDArray[np.uint8]] = None) -> int:
        """Queue one batch of int64 (n, 4) rows ``(slide_index, level, x, y)`` (checked as
        ``read_patches`` checks them); ``out`` (host prefetchers only): a C-contiguous,
        writeable uint8 (n, h, w, 3) array the batch is read into, which ``take`` returns
        (ValueError otherwise); returns the batches submitted and not yet taken."""
    def pending(self) -> int:
        """Batches submitted and not yet taken."""
    def take(self, timeout: Optional[float] = None) -> Optional[Union[npt.NDArray[np.uint8], DeviceArray]]:
        """The oldest batch not taken yet (uint8 (n, h, w, 3) numpy array or DeviceArray), its
        read's error raised here; waits with the GIL released (Ctrl-C answered); None when
        ``timeout`` seconds pass first. RuntimeError when nothing was submitted or closed."""
    def close(self, wait: bool = True) -> None:
        """Stop; batches not taken are dropped; with ``wait``, wait for reads in progress."""

def _prefetch_threads() -> int:
    """Read-ahead threads of :class:`_Prefetcher` alive in this process."""

#: True when the extension was built with the ``test-hooks`` feature (scripts/test-all.sh), whose
#: test-only functions (``_test_cpu_dlpack``, ``_test_cpu_dlpack_releases``; py/src/dlpack.rs)
#: are not part of the API and not in this stub.
_test_hooks: bool
