"""OpenSlide-compatible API (drop-in for openslide-python 1.4).

``from slidestream import OpenSlide, open_slide`` (or ``import slidestream.openslide as
openslide``, which also has ``openslide.deepzoom`` and ``openslide.lowlevel``) gives classes
with the attribute and method names of ``openslide.OpenSlide`` / ``openslide.open_slide``:
``level_count``, ``dimensions``, ``level_dimensions``, ``level_downsamples``, ``properties``,
``associated_images``, ``color_profile``, ``read_region``, ``get_best_level_for_downsample``,
``get_thumbnail``, ``set_cache``, ``close`` and the context-manager protocol. Images are Pillow
images like openslide-python's (``RGBA`` for regions and associated images, ``RGB`` for
thumbnails, with ``info["icc_profile"]`` set when the slide has a colour profile). Pillow is
imported only when one of those methods is called.

Handle semantics are openslide-python's (the native :class:`slidestream.Slide` keeps its own:
typed errors, usable after a failed read):

- A read that fails on the slide's data (a corrupt tile or associated image, an I/O error)
  raises an :data:`OpenSlideError` and *latches*: every later operation on the object except
  :meth:`OpenSlide.close` raises :data:`OpenSlideError` with the first error's message.
- After :meth:`OpenSlide.close`, every operation (``close`` included, and lookups in
  ``properties`` / ``associated_images`` mappings taken before) raises an error that is a
  :class:`ctypes.ArgumentError` (and a ValueError), as openslide-python's closed handle.
- ``OpenSlide(None)``, ``OpenSlideCache(-1)``, a float level or coordinate: a
  :class:`ctypes.ArgumentError` (also a TypeError / ValueError).
- ``read_region`` of a level that does not exist returns a transparent image of the size asked
  for (OpenSlide's documented behaviour).

Exceptions: :data:`OpenSlideError` is :class:`slidestream.SlideError` and
:data:`OpenSlideUnsupportedFormatError` is :class:`slidestream.UnsupportedFormatError`, so
``except OpenSlideError`` catches every slidestream error. Opening a missing file raises an
error that is both :data:`OpenSlideUnsupportedFormatError` (as openslide-python) and
:class:`FileNotFoundError`.

Known differences from openslide-python: slides of vendors slidestream cannot read (DICOM, MIRAX) are
detected but refused with :data:`OpenSlideUnsupportedFormatError`, by :func:`open_slide` too
(it never hands a detected slide to Pillow); regions of levels > 0 whose location is not a
multiple of the level's downsample start at the level pixel ``floor(location / downsample)``
instead of being resampled bilinearly at the sub-pixel offset; ``set_cache`` is accepted and
ignored (slidestream's tile cache is process-wide, sized by ``SLIDESTREAM_CACHE_BYTES``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

import numpy as np

from . import _thumbnail
from . import config as _config
from ._compat_common import (
    PROPERTY_NAME_BACKGROUND_COLOR,
    PROPERTY_NAME_BARCODE,
    PROPERTY_NAME_BOUNDS_HEIGHT,
    PROPERTY_NAME_BOUNDS_WIDTH,
    PROPERTY_NAME_BOUNDS_X,
    PROPERTY_NAME_BOUNDS_Y,
    PROPERTY_NAME_COMMENT,
    PROPERTY_NAME_MPP_X,
    PROPERTY_NAME_MPP_Y,
    PROPERTY_NAME_OBJECTIVE_POWER,
    PROPERTY_NAME_QUICKHASH1,
    PROPERTY_NAME_VENDOR,
    AbstractSlide,
    Filename,
    OpenSlideCache,
    OpenSlideError,
    OpenSlideUnsupportedFormatError,
    OpenSlideVersionError,
    _ArgumentTypeError,
    _check_filename,
    _check_level,
    _check_location,
    _check_size,
    _closed_error,
    _pil_image,
    _rgba_image,
    _SlideIOError,
    _SlideNotFoundError,
)
from ._errors import CorruptDataError, LimitsExceededError, UnsupportedFormatError
from ._imageslide import ImageSlide
from ._slide import Slide, _check_thumbnail_size
from ._slidestream import detect_vendor

if TYPE_CHECKING:  # Pillow is optional and imported lazily at run time.
    from PIL import Image

__all__ = [
    "AbstractSlide",
    "OpenSlide",
    "ImageSlide",
    "OpenSlideCache",
    "OpenSlideError",
    "OpenSlideUnsupportedFormatError",
    "OpenSlideVersionError",
    "open_slide",
    "PROPERTY_NAME_COMMENT",
    "PROPERTY_NAME_VENDOR",
    "PROPERTY_NAME_QUICKHASH1",
    "PROPERTY_NAME_BACKGROUND_COLOR",
    "PROPERTY_NAME_OBJECTIVE_POWER",
    "PROPERTY_NAME_MPP_X",
    "PROPERTY_NAME_MPP_Y",
    "PROPERTY_NAME_BOUNDS_X",
    "PROPERTY_NAME_BOUNDS_Y",
    "PROPERTY_NAME_BOUNDS_WIDTH",
    "PROPERTY_NAME_BOUNDS_HEIGHT",
    "PROPERTY_NAME_BARCODE",
]

_R = TypeVar("_R")


class _PropertyMap(Mapping[str, str]):
    """Read-only mapping of slide properties (str → str), names sorted. Every lookup checks the
    slide: closed → ``ctypes.ArgumentError``, latched error → :data:`OpenSlideError`."""

    def __init__(self, owner: "OpenSlide") -> None:
        self._owner = owner

    def __getitem__(self, key: str) -> str:
        if isinstance(key, bytes):
            key = key.decode("utf-8")
        elif not isinstance(key, str):
            raise _ArgumentTypeError(f"argument 2: TypeError: property name must be str or bytes, got {type(key).__name__}")
        return self._owner._property_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._owner._property_dict()))

    def __len__(self) -> int:
        return len(self._owner._property_dict())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {dict(self)!r}>"


class _AssociatedImageMap(Mapping[str, "Image.Image"]):
    """Lazy read-only mapping name → PIL ``RGBA`` image; each lookup decodes the image (a
    failure latches the slide's error, as OpenSlide). Lookups check the slide as
    :class:`_PropertyMap`."""

    def __init__(self, owner: "OpenSlide") -> None:
        self._owner = owner

    def _keys(self) -> List[str]:
        return list(dict(self._owner._handle()._associated_sizes()))

    def __getitem__(self, name: str) -> "Image.Image":
        if name not in self._keys():
            raise KeyError(name)
        owner = self._owner
        img = _rgba_image(owner._latching(lambda s: s.read_associated(name)))
        # openslide-python attaches each associated image's own profile (the slide's bytes
        # object when equal, to share memory); DICOM associated images carry their own.
        if f"openslide.associated.{name}.icc-size" in owner._property_dict():
            profile = owner._latching(lambda s: s.associated_color_profile(name))
            if profile is not None:
                img.info["icc_profile"] = owner._icc if profile == owner._icc else profile
        return img

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {dict(self)!r}>"


class OpenSlide(AbstractSlide):
    """An open whole-slide image with openslide-python's API (``openslide.OpenSlide``).

    ``OpenSlide(filename, *, storage_options=None)``: ``filename`` is ``str``, ``bytes`` or
    ``os.PathLike`` (anything else raises a ``ctypes.ArgumentError``, also a TypeError), or a
    URL of a remote slide (``s3://``, ``gs://``, ``az://``, ``http(s)://``; slidestream's
    addition, with ``storage_options`` as :class:`slidestream.Slide`'s). Raises
    :data:`OpenSlideUnsupportedFormatError` for files slidestream does not read (and for a
    missing file), :data:`OpenSlideError` subclasses for damaged ones.

    Errors latch and a closed slide raises ``ctypes.ArgumentError``, as openslide-python's
    (module docstring). The underlying numpy-first :class:`slidestream.Slide` is available as
    :attr:`slide`; it is not affected by the latch.
    """

    def __init__(self, filename: Filename, *, storage_options: Optional[Dict[str, Any]] = None) -> None:
        super().__init__()
        self._filename = filename
        try:
            self._slide = Slide(_check_filename(filename), storage_options=storage_options)
        except FileNotFoundError as e:
            raise _SlideNotFoundError(e.errno, e.strerror, e.filename) from e
        self._closed = False
        self._error: Optional[str] = None
        self._props: Optional[Dict[str, str]] = None
        # Read once at open, as openslide-python: color_profile works after close.
        icc = self._slide.color_profile
        self._icc: Optional[bytes] = None if icc is None else bytes(icc)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._filename!r})"

    @property
    def slide(self) -> Slide:
        """The underlying :class:`slidestream.Slide` (numpy arrays, batched reads)."""
        return self._slide

    def _handle(self) -> Slide:
        """The native slide, after the checks every libopenslide call makes: closed →
        ``ctypes.ArgumentError``; a latched error → :data:`OpenSlideError`."""
        if self._closed:
            raise _closed_error()
        if self._error is not None:
            raise OpenSlideError(self._error)
        return self._slide

    def _latching(self, read: Callable[[Slide], _R]) -> _R:
        """``read(slide)``; an error of the slide's data (corrupt, unsupported, I/O) is
        latched: raised now (an I/O error as :class:`_SlideIOError`, an OpenSlideError and an
        OSError) and, as :data:`OpenSlideError`, by every later operation but ``close``."""
        slide = self._handle()
        try:
            return read(slide)
        except (CorruptDataError, UnsupportedFormatError) as e:
            self._error = str(e)
            raise
        except OSError as e:
            self._error = str(e)
            err = _SlideIOError(str(e))
            err.errno = e.errno
            raise err from e

    def _property_dict(self) -> Dict[str, str]:
        slide = self._handle()
        if self._props is None:
            self._props = dict(sorted(slide._properties().items()))
        return self._props

    def _read_rgba(self, location: Tuple[int, int], level: int, size: Tuple[int, int]) -> np.ndarray:
        """RGBA uint8 (h, w, 4) of checked arguments; a level that does not exist gives a
        transparent array (bounded by ``SLIDESTREAM_MAX_REGION_BYTES``, as any region)."""
        slide = self._handle()
        w, h = size
        if not 0 <= level < slide.level_count:
            limit = int(_config.get("SLIDESTREAM_MAX_REGION_BYTES"))
            if w * h * 4 > limit:
                raise LimitsExceededError(
                    f"region {w}x{h} RGBA needs {w * h * 4} bytes, over SLIDESTREAM_MAX_REGION_BYTES ({limit})"
                )
            return np.zeros((h, w, 4), np.uint8)
        return self._latching(lambda s: s.read_region(location, level, size))

    def get_thumbnail(self, size: Tuple[int, int]) -> "Image.Image":
        """PIL ``RGB`` image fitting in ``size`` = (max_width, max_height), aspect ratio kept,
        as openslide-python's: the best level for the downsample, composited over the
        background colour (``openslide.background-color``, white when absent), reduced with
        Lanczos. A level of more than 64 MiB of RGBA is reduced while it is read
        (``Slide.read_level_reduced``) instead of read whole, so memory stays bounded; its
        result can differ from OpenSlide's by a few levels."""
        size = _check_thumbnail_size(size)
        w0, h0 = self.dimensions
        downsample = max(w0 / size[0], h0 / size[1])
        level = self.get_best_level_for_downsample(downsample)
        lsize = self.level_dimensions[level]
        final = _thumbnail.pil_thumbnail_size(lsize[0], lsize[1], size)
        if final is None or not _thumbnail.is_large(lsize):
            return super().get_thumbnail(size)
        pil = _pil_image()
        hexa = self.properties.get(PROPERTY_NAME_BACKGROUND_COLOR, "ffffff")
        background = tuple(int(hexa[i : i + 2], 16) for i in (0, 2, 4))
        arr = self._latching(lambda s: _thumbnail.reduced_level(s, level, lsize, final, background))
        thumb = pil.fromarray(arr, "RGB").resize(final, pil.Resampling.LANCZOS, reducing_gap=2.0)
        if self._icc is not None:
            thumb.info["icc_profile"] = self._icc
        return thumb

    @classmethod
    def detect_format(cls, filename: Filename) -> Optional[str]:
        """The vendor of the file's slide format, or None (:func:`slidestream.detect_vendor`):
        the vendors slidestream reads, and vendors it recognises but cannot read yet (e.g.
        ``dicom``); None for a file that is not a slide format slidestream knows, or cannot be
        opened. A ``filename`` that is not ``str`` / ``bytes`` / ``os.PathLike`` raises a
        ``ctypes.ArgumentError`` (also a TypeError).

        As openslide's, this is detection only: a file that is detected but cannot be opened
        (e.g. an unsupported compression) still reports its vendor."""
        return detect_vendor(_check_filename(filename))

    def close(self) -> None:
        """Close the slide; every later operation (``close`` too) raises a
        ``ctypes.ArgumentError`` (also an :class:`~slidestream.InvalidArgumentError`)."""
        if self._closed:
            raise _closed_error()
        self._closed = True
        self._slide.close()

    @property
    def level_count(self) -> int:
        """Number of levels."""
        return int(self._handle().level_count)

    @property
    def level_dimensions(self) -> Tuple[Tuple[int, int], ...]:
        """((width, height), ...) in pixels of every level, level 0 first."""
        return tuple((int(w), int(h)) for w, h in self._handle().level_dimensions)

    @property
    def level_downsamples(self) -> Tuple[float, ...]:
        """Downsample factor of every level relative to level 0."""
        return tuple(float(d) for d in self._handle().level_downsamples)

    @property
    def properties(self) -> Mapping[str, str]:
        """Metadata (``openslide.*``, ``tiff.*``, vendor keys): str → str, names sorted. The
        mapping checks the slide on every lookup (closed, latched error)."""
        return _PropertyMap(self)

    @property
    def associated_images(self) -> Mapping[str, "Image.Image"]:
        """Lazy mapping name (``thumbnail``, ``label``, ``macro``) → PIL ``RGBA`` image."""
        return _AssociatedImageMap(self)

    def _icc_bytes(self) -> Optional[bytes]:
        return self._icc

    def get_best_level_for_downsample(self, downsample: float) -> int:
        """The level to read for a wanted downsample (OpenSlide's rule)."""
        return int(self._handle().get_best_level_for_downsample(downsample))

    def read_region(self, location: Tuple[int, int], level: int, size: Tuple[int, int]) -> "Image.Image":
        """PIL ``RGBA`` image (non-premultiplied) of ``size`` = (width, height) pixels of
        ``level``, top-left at ``location`` = (x, y) in level-0 pixels. Pixels outside the
        image are transparent (0, 0, 0, 0); a ``level`` that does not exist (negative, or
        ``level_count`` and above) gives a transparent image of ``size``, as OpenSlide.

        Raises :class:`~slidestream.InvalidArgumentError` (an OpenSlideError) for a negative
        width or height, a ``ctypes.ArgumentError`` (also a TypeError) for non-int arguments,
        :data:`OpenSlideError` when the read fails (latched, see the class). An empty ``size``
        gives an empty image without consulting the slide, as openslide-python."""
        w, h = _check_size(size)
        x, y = _check_location(location)
        level = _check_level(level)
        if w == 0 or h == 0:
            # openslide-python returns an empty image without asking the handle (so even a
            # closed or latched one).
            img = _pil_image().new("RGBA", (w, h))
        else:
            img = _rgba_image(self._read_rgba((x, y), level, (w, h)))
        if self._icc is not None:
            img.info["icc_profile"] = self._icc
        return img

    def set_cache(self, cache: Any) -> None:
        """Accept an :class:`OpenSlideCache` (slidestream's or openslide-python's) for
        compatibility; anything else raises :class:`TypeError`. slidestream's tile cache stays
        as it is."""
        if not hasattr(cache, "_openslide_cache"):
            raise TypeError("Not a cache object")
        self._handle()


def open_slide(filename: Filename, *, storage_options: Optional[Dict[str, Any]] = None) -> Union[OpenSlide, ImageSlide]:
    """Open a whole-slide image with :class:`OpenSlide`, or a plain image with
    :class:`ImageSlide`: openslide-python's rule, with slidestream's detection.

    A file whose slide format is detected (:meth:`OpenSlide.detect_format` is not None) is
    opened as a slide or refused with the error :class:`OpenSlide` raises
    (:data:`OpenSlideUnsupportedFormatError` for a vendor slidestream cannot read, such as DICOM; another
    :data:`OpenSlideError` for a damaged or unsupported file). Only a file that is not a slide
    at all (detection returns None, or the file is missing) is handed to Pillow, whose errors
    (``PIL.UnidentifiedImageError``, ``FileNotFoundError``) propagate as with
    openslide-python. A URL (with ``storage_options``) is always opened with
    :class:`OpenSlide` (Pillow does not read URLs)."""
    if storage_options is not None or (isinstance(filename, str) and "://" in filename):
        return OpenSlide(filename, storage_options=storage_options)
    try:
        return OpenSlide(filename)
    except (UnsupportedFormatError, CorruptDataError, LimitsExceededError):
        # Errors about the file's content (a missing file included); settings errors and the
        # like are not a verdict on the file and propagate.
        if detect_vendor(filename) is not None:
            raise
    return ImageSlide(filename)
