"""Shared parts of the OpenSlide drop-in (:mod:`slidestream._compat`, :mod:`slidestream.openslide`):
exception classes, property names, argument checks with openslide-python's exception types,
Pillow helpers, :class:`OpenSlideCache` and :class:`AbstractSlide`.

openslide-python passes arguments to libopenslide through ctypes, so a bad argument (a wrong
type, a negative cache capacity, a closed slide handle) raises :class:`ctypes.ArgumentError`.
The drop-in raises classes that are :class:`ctypes.ArgumentError` *and* the exception
slidestream's native API raises for the same mistake (:class:`TypeError`, or
:class:`~slidestream.InvalidArgumentError`, a ValueError), so ``except ArgumentError`` and
``except (TypeError, ValueError)`` both work.
"""

from __future__ import annotations

import ctypes
import operator
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from io import BytesIO
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Optional, Tuple, TypeVar, Union

import numpy as np

from ._args import check_int, check_pair
from ._errors import InvalidArgumentError, SlideError, UnsupportedFormatError
from ._slide import _check_thumbnail_size

if TYPE_CHECKING:  # Pillow is optional and imported lazily at run time.
    from PIL import Image, ImageCms

Filename = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
_T = TypeVar("_T", bound="AbstractSlide")

#: Every slidestream error; ``except OpenSlideError`` works as with openslide-python.
OpenSlideError = SlideError
#: The file is not a slide slidestream reads (also raised for a missing file).
OpenSlideUnsupportedFormatError = UnsupportedFormatError

PROPERTY_NAME_COMMENT = "openslide.comment"
PROPERTY_NAME_VENDOR = "openslide.vendor"
PROPERTY_NAME_QUICKHASH1 = "openslide.quickhash-1"
PROPERTY_NAME_BACKGROUND_COLOR = "openslide.background-color"
PROPERTY_NAME_OBJECTIVE_POWER = "openslide.objective-power"
PROPERTY_NAME_MPP_X = "openslide.mpp-x"
PROPERTY_NAME_MPP_Y = "openslide.mpp-y"
PROPERTY_NAME_BOUNDS_X = "openslide.bounds-x"
PROPERTY_NAME_BOUNDS_Y = "openslide.bounds-y"
PROPERTY_NAME_BOUNDS_WIDTH = "openslide.bounds-width"
PROPERTY_NAME_BOUNDS_HEIGHT = "openslide.bounds-height"
PROPERTY_NAME_BARCODE = "openslide.barcode"


class OpenSlideVersionError(OpenSlideError):
    """The requested functionality needs a newer OpenSlide (openslide-python's
    ``OpenSlideVersionError``; ``minimum_version`` names the version). The drop-in implements
    all of OpenSlide 4.0's API, so slidestream never raises it; it exists so that
    ``except OpenSlideVersionError`` clauses of openslide-python code work."""

    def __init__(self, minimum_version: str) -> None:
        super().__init__(f"OpenSlide >= {minimum_version} required")
        self.minimum_version = minimum_version


class _ArgumentTypeError(ctypes.ArgumentError, TypeError):
    """An argument of the wrong type: :class:`ctypes.ArgumentError` (as openslide-python's
    ctypes layer) and :class:`TypeError` (as slidestream's native API)."""


class _ArgumentValueError(ctypes.ArgumentError, InvalidArgumentError):
    """An argument with a bad value, or a closed slide: :class:`ctypes.ArgumentError` (as
    openslide-python) and :class:`~slidestream.InvalidArgumentError` (a ValueError)."""


class _SlideNotFoundError(UnsupportedFormatError, FileNotFoundError):
    """The slide file does not exist. openslide-python reports this as
    ``OpenSlideUnsupportedFormatError``; it is also a :class:`FileNotFoundError`
    (``errno``, ``filename`` set)."""


class _SlideIOError(SlideError, OSError):
    """Reading the slide file failed (e.g. a truncated file): an :data:`OpenSlideError`, as
    OpenSlide reports it, and an :class:`OSError` (``errno`` set), as slidestream's native API
    raises it."""


def _closed_error() -> _ArgumentValueError:
    """The error of an operation on a closed :class:`~slidestream.OpenSlide` (openslide-python:
    ``ArgumentError: argument 1: ValueError: Passing closed slide object``)."""
    return _ArgumentValueError("argument 1: ValueError: Passing closed slide object")


def _check_filename(filename: Any) -> Filename:
    """``filename`` as openslide-python accepts it (``str``, ``bytes``, ``os.PathLike``);
    anything else (None, an int) raises :class:`_ArgumentTypeError`."""
    if isinstance(filename, (str, bytes, os.PathLike)):
        return filename
    raise _ArgumentTypeError(
        f"argument 1: TypeError: expected str, bytes or os.PathLike object, not {type(filename).__name__}"
    )


def _pil_image() -> Any:
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the OpenSlide-compatible API returns Pillow images; install Pillow "
            "(pip install slidestream[pil]) or use slidestream.Slide for numpy arrays"
        ) from e
    return Image


def _rgba_image(arr: np.ndarray) -> "Image.Image":
    """numpy uint8 (height, width, 4) → PIL ``RGBA`` image."""
    pil = _pil_image()
    h, w = arr.shape[:2]
    if w == 0 or h == 0:
        return pil.new("RGBA", (w, h))
    return pil.fromarray(np.ascontiguousarray(arr))


def _as_ctypes_type_error(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, its :class:`TypeError` re-raised as :class:`_ArgumentTypeError`."""
    try:
        return fn(*args)
    except TypeError as e:
        if isinstance(e, ctypes.ArgumentError):
            raise
        raise _ArgumentTypeError(str(e)) from None


def _check_size(size: Any) -> Tuple[int, int]:
    """A region ``size`` (width, height): a pair of ints (numpy ints too). Floats, str and
    None raise :class:`_ArgumentTypeError` (a TypeError), as openslide-python's ctypes
    arguments; a negative width or height raises
    :class:`~slidestream.InvalidArgumentError` (an OpenSlideError), as openslide-python."""
    a, b = _as_ctypes_type_error(check_pair, size, "size", "(width, height)")
    w = _as_ctypes_type_error(check_int, a, "size width")
    h = _as_ctypes_type_error(check_int, b, "size height")
    if w < 0 or h < 0:
        raise InvalidArgumentError(f"negative width ({w}) or negative height ({h}) not allowed")
    return w, h


def _check_location(location: Any) -> Tuple[int, int]:
    """A ``location`` (x, y): a pair of 64-bit ints (exceptions as :func:`_check_size`)."""
    a, b = _as_ctypes_type_error(check_pair, location, "location", "(x, y)")
    return _as_ctypes_type_error(check_int, a, "location x"), _as_ctypes_type_error(check_int, b, "location y")


def _check_level(level: Any) -> int:
    """A ``level`` as openslide-python passes it (a C int): any int (numpy ints and bools
    too); other types raise :class:`_ArgumentTypeError`. The range is not checked: any int
    that is not a level (negative, ``level_count`` or more, however large) reads as a
    transparent region, as OpenSlide does for a level that does not exist (ctypes would wrap
    a level past 32 bits; slidestream does not)."""
    try:
        return operator.index(level)
    except TypeError:
        raise _ArgumentTypeError(f"level must be an int, got {type(level).__name__}") from None


class _CacheHandle:
    """Stands for libopenslide's cache handle: ``OpenSlideCache._openslide_cache`` and what
    ``lowlevel.cache_create`` returns (openslide-python's ``lowlevel._OpenSlideCache``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity


class OpenSlideCache:
    """Accepted for compatibility with ``openslide.OpenSlideCache(capacity)`` (bytes).

    ``capacity`` must be an int ≥ 0: another type raises :class:`_ArgumentTypeError` (a
    ``ctypes.ArgumentError`` and a TypeError), a negative one :class:`_ArgumentValueError` (a
    ``ctypes.ArgumentError`` and a ValueError), as openslide-python's.

    slidestream keeps decoded tiles in one process-wide cache (``SLIDESTREAM_CACHE_BYTES``)
    or a per-slide cache (``slidestream.Slide(path, cache_bytes=...)``); a cache object passed
    to :meth:`OpenSlide.set_cache` is recorded but does not change that.
    """

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int):
            raise _ArgumentTypeError(f"argument 1: TypeError: capacity must be an int, got {type(capacity).__name__}")
        if capacity < 0:
            raise _ArgumentValueError(f"argument 1: ValueError: capacity must be non-negative, got {capacity}")
        self._capacity = capacity
        self._openslide_cache = _CacheHandle(capacity)

    @property
    def capacity(self) -> int:
        """The capacity given, in bytes."""
        return self._capacity

    def __repr__(self) -> str:
        return f"OpenSlideCache({self._capacity!r})"


class AbstractSlide(ABC):
    """Common interface of :class:`OpenSlide` and :class:`ImageSlide` (as openslide-python's
    ``AbstractSlide``)."""

    def __init__(self) -> None:
        self._profile: Optional["ImageCms.ImageCmsProfile"] = None

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> Literal[False]:
        self.close()
        return False

    @classmethod
    @abstractmethod
    def detect_format(cls, filename: Filename) -> Optional[str]:
        """A string describing the file's format (vendor), or None if unrecognised."""

    @abstractmethod
    def close(self) -> None:
        """Close the slide."""

    @property
    @abstractmethod
    def level_count(self) -> int:
        """Number of levels."""

    @property
    @abstractmethod
    def level_dimensions(self) -> Tuple[Tuple[int, int], ...]:
        """((width, height), ...) in pixels of every level, level 0 first."""

    @property
    def dimensions(self) -> Tuple[int, int]:
        """(width, height) of level 0 in pixels."""
        return self.level_dimensions[0]

    @property
    @abstractmethod
    def level_downsamples(self) -> Tuple[float, ...]:
        """Downsample factor of every level relative to level 0."""

    @property
    @abstractmethod
    def properties(self) -> Mapping[str, str]:
        """Metadata: str → str."""

    @property
    @abstractmethod
    def associated_images(self) -> Mapping[str, "Image.Image"]:
        """Associated images: name → PIL ``RGBA`` image (decoded on lookup)."""

    def _icc_bytes(self) -> Optional[bytes]:
        return None

    @property
    def color_profile(self) -> Optional["ImageCms.ImageCmsProfile"]:
        """The slide's ICC colour profile as a Pillow ``ImageCmsProfile``, or None."""
        icc = self._icc_bytes()
        if icc is None:
            return None
        if self._profile is None:
            from PIL import ImageCms

            self._profile = ImageCms.ImageCmsProfile(BytesIO(icc))
        return self._profile

    @abstractmethod
    def get_best_level_for_downsample(self, downsample: float) -> int:
        """The level to read for a wanted downsample (the level with the largest downsample
        not above it)."""

    @abstractmethod
    def read_region(self, location: Tuple[int, int], level: int, size: Tuple[int, int]) -> "Image.Image":
        """PIL ``RGBA`` image of ``size`` = (width, height) pixels of ``level``, starting at
        ``location`` = (x, y) in level-0 pixels. Pixels outside the image are transparent."""

    def set_cache(self, cache: Any) -> None:
        """Accepted for compatibility; slidestream's tile cache is not replaced."""

    def get_thumbnail(self, size: Tuple[int, int]) -> "Image.Image":
        """PIL ``RGB`` image fitting in ``size`` = (max_width, max_height), aspect ratio kept:
        the best level for the downsample is read whole, composited over the background colour
        (``openslide.background-color``, white when absent) and reduced with Lanczos.

        Raises :class:`TypeError` when ``size`` is not a pair of ints and
        :class:`~slidestream.InvalidArgumentError` (a ValueError) when the width or height is
        not positive."""
        # Checked first, whatever reads the thumbnail below.
        size = _check_thumbnail_size(size)
        pil = _pil_image()
        w0, h0 = self.dimensions
        downsample = max(w0 / size[0], h0 / size[1])
        level = self.get_best_level_for_downsample(downsample)
        region = self.read_region((0, 0), level, self.level_dimensions[level])
        background = "#" + self.properties.get(PROPERTY_NAME_BACKGROUND_COLOR, "ffffff")
        thumb = pil.new("RGB", region.size, background)
        thumb.paste(region, None, region)
        thumb.thumbnail(size, pil.Resampling.LANCZOS)
        icc = self._icc_bytes()
        if icc is not None:
            thumb.info["icc_profile"] = icc
        return thumb
