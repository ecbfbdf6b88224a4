"""MONAI reader: :class:`SlidestreamWSIReader`, a ``monai.data.wsi_reader.BaseWSIReader`` that
reads with slidestream.

``import slidestream`` never imports MONAI, and neither does ``import slidestream.monai``: MONAI
(and so PyTorch) is imported the first time ``slidestream.monai.SlidestreamWSIReader`` is looked
up, because the class derives from MONAI's ``BaseWSIReader``. Without MONAI that lookup raises
:class:`ImportError` naming the package to install (``pip install monai``).

MONAI's own ``WSIReader(backend=...)`` takes only the names of its built-in backends
(``"cucim"``, ``"openslide"``, ``"tifffile"``). Everywhere else MONAI takes a reader class or
instance, and this one plugs in there::

    from monai.data import PatchWSIDataset
    from slidestream.monai import SlidestreamWSIReader

    data = [{"image": "a.svs", "location": [1000, 2000], "label": 1}]   # location: (row, column)
    ds = PatchWSIDataset(data, patch_size=224, patch_level=0, reader=SlidestreamWSIReader)
    ds[0]["image"]                  # MetaTensor uint8 (3, 224, 224), channel first

    reader = SlidestreamWSIReader(level=1, channel_dim=-1)
    wsi = reader.read("a.svs")      # a slidestream.Slide
    patch, meta = reader.get_data(wsi, location=(1000, 2000), size=(256, 256))  # (256, 256, 3)

    from monai.transforms import LoadImage
    load = LoadImage(reader="slidestream.monai.SlidestreamWSIReader", level=2, image_only=True)

Behaviour mirrors MONAI's ``OpenSlideWSIReader`` (slidestream reads with OpenSlide's
semantics, so metadata and pixels agree with that backend):

* **Coordinate frame** (MONAI's, not slidestream's): ``location = (row, column)``, i.e.
  ``(y, x)``, the top-left corner in **level-0 pixels**; ``size = (height, width)`` in pixels
  of the level read. Sizes from :meth:`get_size` are ``(height, width)`` too.
* **Levels**: exactly one of ``level``, ``mpp`` and ``power`` picks the level (given to
  ``get_data`` or else to the constructor; none means level 0). ``mpp`` / ``power`` pick the
  level whose mpp / objective power is closest and raise :class:`ValueError` when it is further
  than ``atol + rtol * |value|`` (``mpp_rtol`` / ``power_rtol`` default 0.05) from the request
  — MONAI's ``BaseWSIReader.get_valid_level``. Nothing is resampled.
* **Output**: a numpy array of ``dtype`` (default ``uint8``) with the channels at
  ``channel_dim`` (default 0: ``(C, H, W)``); ``mode="RGB"`` (3 channels) or ``"RGBA"``
  (4, alpha 0 outside the slide). In ``"RGB"`` mode pixels outside the slide are
  ``background`` (default 0, black, as MONAI's OpenSlide backend gives). A torch ``dtype`` or
  ``device="cuda"`` makes MONAI turn the patch into a tensor there, as for its own backends.
* **Several slides**: ``get_data([wsi_a, wsi_b, ...], location, size)`` reads the same region of
  each (stacked along the channel axis, MONAI's rule) with one :func:`slidestream.read_patches`
  call: the tiles of every slide are decoded together on slidestream's threads.

Errors: :class:`ValueError` for a level past the last, an mpp / power that no level matches
within the tolerances, a slide without mpp or objective power when asked for one, a location
outside the slide or a non-positive size (MONAI's checks), and a ``mode`` other than ``"RGB"``
or ``"RGBA"``; slidestream's own errors (:class:`~slidestream.InvalidArgumentError`, a
ValueError, for a negative level; :class:`FileNotFoundError`,
:class:`~slidestream.UnsupportedFormatError`, :class:`~slidestream.CorruptDataError`) pass
through.

Picklable (slides reopen lazily in the worker), so ``DataLoader`` worker processes work.
"""

from __future__ import annotations

import importlib
import operator
import os
import threading
import warnings
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

import numpy as np

from ._patches import read_patches
from ._slide import Slide

__all__ = ["SlidestreamWSIReader", "SUPPORTED_SUFFIXES"]

#: File name suffixes slidestream reads (MONAI's ``verify_suffix`` / ``LoadImage`` auto-select).
SUPPORTED_SUFFIXES: List[str] = [
    "svs", "tif", "tiff", "ndpi", "vms", "vmu", "scn", "bif", "mrxs", "svslide", "czi", "vsi",
    "qptiff", "dcm",
]


_MONAI: List[Tuple[Any, Any, Any, Any]] = []  # the names below, once imported


def _monai() -> Tuple[Any, Any, Any, Any]:
    """MONAI's BaseWSIReader, ensure_tuple, ensure_tuple_rep and ConvertUnits, or an ImportError
    that names the package to install."""
    if _MONAI:
        return _MONAI[0]
    try:
        wsi_reader = importlib.import_module("monai.data.wsi_reader")
        utils = importlib.import_module("monai.utils")
        misc = importlib.import_module("monai.utils.misc")
    except ImportError as e:
        raise ImportError(
            "slidestream.monai.SlidestreamWSIReader needs MONAI (`pip install monai`, which brings PyTorch); "
            f"slidestream itself does not depend on it ({e})"
        ) from e
    _MONAI[:] = [(wsi_reader.BaseWSIReader, utils.ensure_tuple, utils.ensure_tuple_rep, misc.ConvertUnits)]
    return _MONAI[0]


def _pair(value: Any, name: str) -> Tuple[int, int]:
    """A (first, second) pair of ints (Python or numpy); TypeError otherwise (as OpenSlide's
    ctypes calls refuse floats)."""
    try:
        a, b = value
        return operator.index(a), operator.index(b)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair of ints, got {value!r}") from None


class _ReaderMethods:
    """Read whole-slide images with slidestream for MONAI (``monai.data.wsi_reader.BaseWSIReader``).

    Args:
        level: the level to read (0 = full resolution) when ``get_data`` names none.
        mpp: micrometres per pixel to read at (a number or ``(mpp_y, mpp_x)``): the level whose
            mpp is within ``mpp_atol + mpp_rtol * mpp`` of it.
        mpp_rtol, mpp_atol: tolerances of ``mpp`` (relative 0.05, absolute 0.0).
        power: objective power to read at: the level whose power is within tolerance.
        power_rtol, power_atol: tolerances of ``power`` (relative 0.05, absolute 0.0).
        channel_dim: axis of the colour channels in the output (0: ``(C, H, W)``; -1:
            ``(H, W, C)``).
        dtype: numpy dtype of the output (default ``np.uint8``; values stay 0..255), or a torch
            dtype (MONAI then returns a tensor).
        device: ``None``, or a torch device to put the patch on (MONAI converts it to a tensor).
        mode: ``"RGB"`` (3 channels) or ``"RGBA"`` (4; straight alpha, 0 outside the slide).
        background: in ``"RGB"`` mode, the value of pixels outside the slide and on missing
            tiles: an int 0..255 or ``(r, g, b)``; default 0 (black, as MONAI's OpenSlide
            backend). Partly transparent pixels are composited over it.
        kwargs: passed to :class:`slidestream.Slide` when a file is read (``cache_bytes``,
            ``storage_options``, ``lazy``).

    Only one of ``level``, ``mpp`` and ``power`` may be given; the arguments of ``get_data``
    override the constructor's. See :mod:`slidestream.monai` for the coordinate frame.
    """

    supported_suffixes: List[str] = list(SUPPORTED_SUFFIXES)
    backend = "slidestream"

    def __init__(
        self,
        level: Optional[int] = None,
        mpp: Any = None,
        mpp_rtol: float = 0.05,
        mpp_atol: float = 0.0,
        power: Optional[float] = None,
        power_rtol: float = 0.05,
        power_atol: float = 0.0,
        channel_dim: int = 0,
        dtype: Any = np.uint8,
        device: Any = None,
        mode: str = "RGB",
        background: Any = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(  # type: ignore[call-arg]
            level=level, mpp=mpp, mpp_rtol=mpp_rtol, mpp_atol=mpp_atol, power=power, power_rtol=power_rtol,
            power_atol=power_atol, channel_dim=channel_dim, dtype=dtype, device=device, mode=mode, **kwargs,
        )
        self.background = background
        self._local = threading.local()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_local", None)  # per-thread scratch of a batched get_data, not picklable
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    # --- what BaseWSIReader asks of a backend -------------------------------------------

    def read(self, data: Any, **kwargs: Any) -> Any:
        """Open slides: a path (``str``, ``os.PathLike``, or a URL slidestream reads) gives one
        :class:`slidestream.Slide`, a sequence of several paths a list of them. ``kwargs``
        override the constructor's extra arguments for :class:`slidestream.Slide`. Raises
        :class:`FileNotFoundError`, :class:`~slidestream.UnsupportedFormatError`, ..."""
        _, ensure_tuple, _, _ = _monai()
        filenames = ensure_tuple(data)
        kwargs_ = dict(self.kwargs)  # type: ignore[attr-defined]
        kwargs_.update(kwargs)
        slides = [Slide(f, **kwargs_) for f in filenames]
        return slides if len(filenames) > 1 else slides[0]

    def get_level_count(self, wsi: Slide) -> int:
        """Number of pyramid levels of ``wsi``."""
        return int(wsi.level_count)

    def get_size(self, wsi: Slide, level: int) -> Tuple[int, int]:
        """``(height, width)`` in pixels of ``level`` (MONAI's order). IndexError for a level
        that does not exist."""
        w, h = wsi.level_dimensions[level]
        return (h, w)

    def get_downsample_ratio(self, wsi: Slide, level: int) -> float:
        """Level-0 pixels per pixel of ``level`` (OpenSlide's ``level_downsamples``)."""
        return float(wsi.level_downsamples[level])

    def get_file_path(self, wsi: Slide) -> str:
        """The slide's absolute path (a URL as given)."""
        path = wsi.path
        return path if "://" in path else str(os.path.abspath(path))

    def get_mpp(self, wsi: Slide, level: int) -> Tuple[float, float]:
        """``(mpp_y, mpp_x)``: micrometres per pixel of ``level`` — the level-0 value times the
        level's downsample. From ``openslide.mpp-y`` / ``openslide.mpp-x``, else from the TIFF
        resolution tags (``tiff.YResolution`` / ``tiff.XResolution`` in ``tiff.ResolutionUnit``,
        micrometres assumed with a warning when the unit is missing), as MONAI's OpenSlide
        backend. ValueError when the slide has neither."""
        _, _, _, ConvertUnits = _monai()
        downsample = self.get_downsample_ratio(wsi, level)
        props = wsi.properties
        if props.get("openslide.mpp-x") and props.get("openslide.mpp-y"):
            return (downsample * float(props["openslide.mpp-y"]), downsample * float(props["openslide.mpp-x"]))
        if props.get("tiff.XResolution") and props.get("tiff.YResolution"):
            unit = props.get("tiff.ResolutionUnit")
            if unit is None:
                warnings.warn("The resolution unit is missing, `micrometer` will be used as default.", stacklevel=2)
                unit = "micrometer"
            to_micron = ConvertUnits(unit, "micrometer")
            return (
                to_micron(downsample / float(props["tiff.YResolution"])),
                to_micron(downsample / float(props["tiff.XResolution"])),
            )
        raise ValueError("`mpp` cannot be obtained for this file. Please use `level` instead.")

    def get_power(self, wsi: Slide, level: int) -> float:
        """Objective power of ``level``: ``openslide.objective-power`` divided by the level's
        downsample. ValueError when the slide does not record it."""
        objective_power = wsi.properties.get("openslide.objective-power")
        if objective_power:
            return float(objective_power) / self.get_downsample_ratio(wsi, level)
        raise ValueError("Objective `power` cannot be obtained for this file. Please use `level` (or `mpp`) instead.")

    def _get_patch(self, wsi: Slide, location: Any, size: Any, level: int, dtype: Any, mode: str) -> np.ndarray:
        """One patch: ``location`` (row, column) in level-0 pixels, ``size`` (height, width) in
        pixels of ``level``; numpy array of ``dtype`` with the channels at ``channel_dim``."""
        pending = getattr(self._local, "pending", None)
        patch = None
        if pending:
            head = pending[0]
            if head[0] is wsi and head[1] == (tuple(location), tuple(size), level, mode):
                patch = pending.pop(0)[2]
        if patch is None:
            patch = self._read(wsi, location, size, level, mode)
        patch = np.asarray(patch, dtype=dtype)
        return np.moveaxis(patch, -1, self.channel_dim)  # type: ignore[attr-defined]

    def _read(self, wsi: Slide, location: Any, size: Any, level: int, mode: str) -> np.ndarray:
        """uint8 (height, width, 3 or 4) for ``mode``."""
        y, x = _pair(location, "location")
        h, w = _pair(size, "size")
        if mode == "RGB":
            return wsi.read_regions([(x, y)], level, (w, h), background=self.background)[0]
        if mode == "RGBA":
            return wsi.read_region((x, y), level, (w, h))
        raise ValueError(f"mode must be 'RGB' or 'RGBA' for the slidestream backend, got {mode!r}")

    # --- batched reads -------------------------------------------------------------------

    def get_data(
        self,
        wsi: Any,
        location: Any = (0, 0),
        size: Any = None,
        level: Optional[int] = None,
        mpp: Any = None,
        power: Optional[float] = None,
        mode: Optional[str] = None,
    ) -> Tuple[np.ndarray, dict]:
        """MONAI's ``BaseWSIReader.get_data``: the patch at ``location`` (row, column; level-0
        pixels) of ``size`` (height, width; pixels of the level chosen by ``level`` / ``mpp`` /
        ``power``, see the class) and its metadata dict (``backend``, ``path``, ``location``,
        ``size``, ``level``, ``spatial_shape``, ``original_channel_dim``, ...). ``size=None``
        reads the whole level (``location`` must then be (0, 0)).

        ``wsi`` may be a list of slides: the same region of each, stacked along the channel
        axis, read with one :func:`slidestream.read_patches` call in ``"RGB"`` mode. Raises
        ValueError as described in :mod:`slidestream.monai`."""
        mode_ = self.mode if mode is None else mode  # type: ignore[attr-defined]
        batch = None
        if isinstance(wsi, (list, tuple)) and len(wsi) > 1 and mode_ == "RGB":
            batch = self._read_batch(list(wsi), location, size, level, mpp, power)
        if batch is None:
            return super().get_data(wsi, location, size, level, mpp, power, mode)  # type: ignore[misc]
        self._local.pending = batch
        try:
            return super().get_data(wsi, location, size, level, mpp, power, mode)  # type: ignore[misc]
        finally:
            self._local.pending = None

    def _read_batch(self, slides: List[Any], location: Any, size: Any, level: Any, mpp: Any, power: Any) -> Optional[list]:
        """The patches MONAI's get_data loop will ask for, read in one cross-slide call, as
        (slide, (location, size, level, mode), patch) in order; None when the loop would fail
        (MONAI then raises its own error) or a slide is not a slidestream Slide."""
        if not all(isinstance(s, Slide) for s in slides):
            return None
        # The same steps as BaseWSIReader.get_data, without reading: the level chosen for the
        # first slide carries over to the next ones, and so does a size taken from it.
        try:
            rows, keys = [], []
            for i, s in enumerate(slides):
                level = self.get_valid_level(s, level, mpp, power)  # type: ignore[attr-defined]
                if location is None:
                    location = (0, 0)
                full = self.get_size(s, 0)
                if location[0] > full[0] or location[1] > full[1]:
                    return None
                if size is None:
                    if location != (0, 0):
                        return None
                    size = self.get_size(s, level)
                elif size[0] <= 0 or size[1] <= 0:
                    return None
                y, x = _pair(location, "location")
                rows.append((i, operator.index(level), x, y))
                keys.append((tuple(location), tuple(size), level, "RGB"))
            h, w = _pair(size, "size")
        except Exception:
            return None
        patches = np.asarray(read_patches(slides, rows, (w, h), background=self.background))
        return [(s, k, patches[j]) for j, (s, k) in enumerate(zip(slides, keys))]

    # --- a whole level at a given mpp (MONAI's WSIReader.get_wsi_at_mpp) -------------------

    def get_wsi_at_mpp(self, wsi: Slide, mpp: Any, atol: float = 0.00, rtol: float = 0.05) -> np.ndarray:
        """The whole slide at ``mpp`` micrometres per pixel (a number or ``(mpp_y, mpp_x)``), as
        MONAI's OpenSlide backend computes it: the level with the closest mpp is returned as is
        when within ``atol + rtol * mpp``; otherwise the closest level at least as fine (or
        level 0) is resized with Pillow's bilinear filter to the requested mpp. numpy uint8 with
        the channels at ``channel_dim``, in ``mode``. Needs Pillow (ImportError otherwise);
        ValueError when the slide has no mpp."""
        _, _, ensure_tuple_rep, _ = _monai()
        try:
            from PIL import Image
        except ImportError as e:
            raise ImportError("get_wsi_at_mpp needs Pillow (`pip install pillow`)") from e
        mpp = ensure_tuple_rep(mpp, 2)
        mpp_list = [self.get_mpp(wsi, lvl) for lvl in range(wsi.level_count)]
        closest = self._find_closest_level("mpp", mpp, mpp_list, 0, 5)  # type: ignore[attr-defined]
        within, bigger = self._compute_mpp_tolerances(closest, mpp_list, mpp, atol, rtol)  # type: ignore[attr-defined]
        if within:
            img = Image.fromarray(np.asarray(wsi.read_region((0, 0), closest, wsi.level_dimensions[closest])))
        else:
            lvl = closest if (bigger or closest == 0) else closest - 1
            w, h = wsi.level_dimensions[lvl]
            target_x, target_y = self._compute_mpp_target_res(lvl, (w, h), mpp_list, mpp)  # type: ignore[attr-defined]
            img = Image.fromarray(np.asarray(wsi.read_region((0, 0), lvl, (w, h))))
            img = img.resize((target_y, target_x), Image.Resampling.BILINEAR)  # MONAI's (row, col) naming
        arr = np.array(img.convert(self.mode))  # type: ignore[attr-defined]
        if arr.ndim < 3:
            arr = arr[..., None]
        return np.moveaxis(arr, -1, self.channel_dim)  # type: ignore[attr-defined]


def _make_reader_class() -> type:
    # The class derives from MONAI's BaseWSIReader, so it can only be made once MONAI is
    # imported; the methods live in _ReaderMethods (first in the MRO, so they implement
    # BaseWSIReader's abstract methods and super() reaches BaseWSIReader).
    base = _monai()[0]
    return type(base)(
        "SlidestreamWSIReader",
        (_ReaderMethods, base),
        {"__module__": __name__, "__qualname__": "SlidestreamWSIReader", "__doc__": _ReaderMethods.__doc__},
    )


_MAKE_LOCK = threading.Lock()


def __getattr__(name: str) -> Any:
    if name == "SlidestreamWSIReader":
        with _MAKE_LOCK:  # one class per process, even when threads race to make it
            cls = globals().get("SlidestreamWSIReader")
            if cls is None:
                cls = _make_reader_class()
                # Cached so pickling finds the very same class (pickle checks identity).
                globals()["SlidestreamWSIReader"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(list(globals()) + ["SlidestreamWSIReader"])


if TYPE_CHECKING:  # what type checkers see; at run time the class comes from __getattr__
    SlidestreamWSIReader = _ReaderMethods

