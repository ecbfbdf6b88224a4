"""OpenSlide-compatible API (drop-in for openslide-python 1.4).

``from slidestream import OpenSlide, open_slide`` gives classes with the attribute and method
names of ``openslide.OpenSlide`` / ``openslide.open_slide``: ``level_count``, ``dimensions``,
``level_dimensions``, ``level_downsamples``, ``properties``, ``associated_images``,
``color_profile``, ``read_region``, ``get_best_level_for_downsample``, ``get_thumbnail``,
``set_cache``, ``close`` and the context-manager protocol. Images are Pillow images like
openslide-python's (``RGBA`` for regions and associated images, ``RGB`` for thumbnails, with
``info["icc_profile"]`` set when the slide has a colour profile). Pillow is imported only when
one of those methods is called.

Exceptions: :data:`OpenSlideError` is :class:`slidestream.SlideError` and
:data:`OpenSlideUnsupportedFormatError` is :class:`slidestream.UnsupportedFormatError`, so
``except OpenSlideError`` catches every slidestream error. Opening a missing file raises an
error that is both :data:`OpenSlideUnsupportedFormatError` (as openslide-python) and
:class:`FileNotFoundError`.

Known differences from openslide-python: reading a level that does not exist (negative, or
``level_count`` and above) raises :class:`~slidestream.InvalidArgumentError` (OpenSlide returns
a transparent image); slides of vendors slidestream cannot read (DICOM) are detected but
refused with :data:`OpenSlideUnsupportedFormatError`, by :func:`open_slide` too (it never hands a
detected slide to Pillow); regions of
levels > 0 whose location is not a multiple of the level's downsample start at the level pixel
``floor(location / downsample)`` instead of being resampled bilinearly at the sub-pixel offset;
``set_cache`` is accepted and ignored (slidestream's tile cache is process-wide, sized by
``SLIDESTREAM_CACHE_BYTES``).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from io import BytesIO
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Optional, Tuple, TypeVar, Union

import numpy as np

from ._errors import CorruptDataError, InvalidArgumentError, LimitsExceededError, SlideError, UnsupportedFormatError
from . import _thumbnail
from ._batch import check_int, check_pair
from ._slide import Slide, _check_thumbnail_size
from ._slidestream import detect_vendor

if TYPE_CHECKING:  # Pillow is optional and imported lazily at run time.
    from PIL import Image, ImageCms

__all__ = [
    "AbstractSlide",
    "OpenSlide",
    "ImageSlide",
    "OpenSlideCache",
    "OpenSlideError",
    "OpenSlideUnsupportedFormatError",
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


class _SlideNotFoundError(UnsupportedFormatError, FileNotFoundError):
    """The slide file does not exist. openslide-python reports this as
    ``OpenSlideUnsupportedFormatError``; it is also a :class:`FileNotFoundError`
    (``errno``, ``filename`` set)."""


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


def _check_size(size: Any) -> Tuple[int, int]:
    """A region ``size`` (width, height): a pair of ints (numpy ints too; floats and str are a
    TypeError, as openslide-python's ctypes arguments); a negative or out-of-range width or
    height raises :class:`~slidestream.InvalidArgumentError` (an OpenSlideError)."""
    a, b = check_pair(size, "size", "(width, height)")
    w, h = check_int(a, "size width"), check_int(b, "size height")
    if w < 0 or h < 0:
        raise InvalidArgumentError(f"negative width ({w}) or negative height ({h}) not allowed")
    return w, h


def _check_location(location: Any) -> Tuple[int, int]:
    """A ``location`` (x, y): a pair of 64-bit ints (TypeError / InvalidArgumentError as
    :func:`_check_size`)."""
    a, b = check_pair(location, "location", "(x, y)")
    return check_int(a, "location x"), check_int(b, "location y")


class OpenSlideCache:
    """Accepted for compatibility with ``openslide.OpenSlideCache(capacity)``.

    slidestream keeps decoded tiles in one process-wide cache (``SLIDESTREAM_CACHE_BYTES``)
    or a per-slide cache (``slidestream.Slide(path, cache_bytes=...)``); a cache object passed
    to :meth:`OpenSlide.set_cache` is recorded but does not change that.
    """

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool):
            raise TypeError(f"capacity must be an int, got {type(capacity).__name__}")
        if capacity < 0:
            raise ValueError(f"capacity must be non-negative, got {capacity}")
        self.capacity = capacity

    def __repr__(self) -> str:
        return f"OpenSlideCache({self.capacity})"


class _PropertyMap(Mapping[str, str]):
    """Read-only mapping of slide properties (str → str)."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(sorted(values.items()))

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._values!r}>"


class _AssociatedImageMap(Mapping[str, "Image.Image"]):
    """Lazy read-only mapping name → PIL ``RGBA`` image; each lookup decodes the image."""

    def __init__(self, owner: "OpenSlide") -> None:
        self._owner = owner
        self._names = tuple(owner._slide._associated_sizes())

    def __getitem__(self, name: str) -> "Image.Image":
        if name not in self._names:
            raise KeyError(name)
        img = _rgba_image(self._owner._slide.read_associated(name))
        # OpenSlide attaches the slide profile to associated images that declare one.
        icc = self._owner._icc_bytes()
        if icc is not None and f"openslide.associated.{name}.icc-size" in self._owner.properties:
            img.info["icc_profile"] = icc
        return img

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {list(self._names)!r}>"


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


class OpenSlide(AbstractSlide):
    """An open whole-slide image with openslide-python's API (``openslide.OpenSlide``).

    ``OpenSlide(filename)``: ``filename`` is ``str``, ``bytes`` or ``os.PathLike``. Raises
    :data:`OpenSlideUnsupportedFormatError` for files slidestream does not read (and for a
    missing file), :data:`OpenSlideError` subclasses for damaged ones.

    The underlying numpy-first :class:`slidestream.Slide` is available as :attr:`slide`.
    """

    def __init__(self, filename: Filename) -> None:
        super().__init__()
        self._filename = filename
        try:
            self._slide = Slide(filename)
        except FileNotFoundError as e:
            raise _SlideNotFoundError(e.errno, e.strerror, e.filename) from e
        self._props: Optional[_PropertyMap] = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._filename!r})"

    @property
    def slide(self) -> Slide:
        """The underlying :class:`slidestream.Slide` (numpy arrays, batched reads)."""
        return self._slide

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
        arr = _thumbnail.reduced_level(self._slide, level, lsize, final, background)
        thumb = pil.fromarray(arr, "RGB").resize(final, pil.Resampling.LANCZOS, reducing_gap=2.0)
        icc = self._icc_bytes()
        if icc is not None:
            thumb.info["icc_profile"] = icc
        return thumb

    @classmethod
    def detect_format(cls, filename: Filename) -> Optional[str]:
        """The vendor of the file's slide format, or None (:func:`slidestream.detect_vendor`):
        ``aperio``, ``generic-tiff`` or ``hamamatsu`` (NDPI) for the formats slidestream reads,
        ``dicom`` for a whole-slide format it recognises but cannot read yet; None for a
        file that is not a slide format slidestream knows, or cannot be opened.

        As openslide's, this is detection only: a file that is detected but cannot be opened
        (e.g. an unsupported compression) still reports its vendor."""
        return detect_vendor(filename)

    def close(self) -> None:
        """Close the slide; later reads raise :class:`~slidestream.InvalidArgumentError`."""
        self._slide.close()

    @property
    def level_count(self) -> int:
        """Number of levels."""
        return int(self._slide.level_count)

    @property
    def level_dimensions(self) -> Tuple[Tuple[int, int], ...]:
        """((width, height), ...) in pixels of every level, level 0 first."""
        return tuple((int(w), int(h)) for w, h in self._slide.level_dimensions)

    @property
    def level_downsamples(self) -> Tuple[float, ...]:
        """Downsample factor of every level relative to level 0."""
        return tuple(float(d) for d in self._slide.level_downsamples)

    @property
    def properties(self) -> Mapping[str, str]:
        """Metadata (``openslide.*``, ``tiff.*``, ``aperio.*``): str → str."""
        if self._props is None:
            self._props = _PropertyMap(self._slide._properties())
        return self._props

    @property
    def associated_images(self) -> Mapping[str, "Image.Image"]:
        """Lazy mapping name (``thumbnail``, ``label``, ``macro``) → PIL ``RGBA`` image."""
        return _AssociatedImageMap(self)

    def _icc_bytes(self) -> Optional[bytes]:
        icc = self._slide.color_profile
        return None if icc is None else bytes(icc)

    def get_best_level_for_downsample(self, downsample: float) -> int:
        """The level to read for a wanted downsample (OpenSlide's rule)."""
        return int(self._slide.get_best_level_for_downsample(downsample))

    def read_region(self, location: Tuple[int, int], level: int, size: Tuple[int, int]) -> "Image.Image":
        """PIL ``RGBA`` image (non-premultiplied) of ``size`` = (width, height) pixels of
        ``level``, top-left at ``location`` = (x, y) in level-0 pixels. Pixels outside the
        image are transparent (0, 0, 0, 0)."""
        w, h = _check_size(size)
        x, y = _check_location(location)
        img = _rgba_image(self._slide.read_region((x, y), level, (w, h)))
        icc = self._icc_bytes()
        if icc is not None:
            img.info["icc_profile"] = icc
        return img

    def set_cache(self, cache: Any) -> None:
        """Accept an :class:`OpenSlideCache` (slidestream's or openslide-python's) for
        compatibility. slidestream's tile cache stays as it is."""
        if type(cache).__name__ != "OpenSlideCache":
            raise TypeError("Not a cache object")


class ImageSlide(AbstractSlide):
    """A plain image (PNG, JPEG, ...) read with Pillow, with the slide interface: one level,
    no properties, no associated images. ``ImageSlide(file)``: a path or a PIL image (which
    is not closed by :meth:`close`)."""

    def __init__(self, file: Union[Filename, "Image.Image"]) -> None:
        super().__init__()
        pil = _pil_image()
        self._file_arg = file
        self._image: Optional["Image.Image"]
        if isinstance(file, pil.Image):
            self._close = False
            self._image = file
        else:
            self._close = True
            self._image = pil.open(file)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._file_arg!r})"

    @classmethod
    def detect_format(cls, filename: Filename) -> Optional[str]:
        """Pillow's format name (``PNG``, ``JPEG``, ...), or None if Pillow cannot open it."""
        pil = _pil_image()
        try:
            with pil.open(filename) as img:
                return str(img.format) if img.format is not None else None
        except (OSError, ValueError):
            return None

    def _img(self) -> "Image.Image":
        if self._image is None:
            raise ValueError("Cannot read from a closed slide")
        return self._image

    def close(self) -> None:
        """Close the image file (if this slide opened it)."""
        if self._close and self._image is not None:
            self._image.close()
        self._image = None

    @property
    def level_count(self) -> int:
        """Always 1."""
        return 1

    @property
    def level_dimensions(self) -> Tuple[Tuple[int, int], ...]:
        """((width, height),) of the image."""
        w, h = self._img().size
        return ((w, h),)

    @property
    def level_downsamples(self) -> Tuple[float, ...]:
        """(1.0,)."""
        return (1.0,)

    @property
    def properties(self) -> Mapping[str, str]:
        """Empty."""
        return {}

    @property
    def associated_images(self) -> Mapping[str, "Image.Image"]:
        """Empty."""
        return {}

    def _icc_bytes(self) -> Optional[bytes]:
        icc = self._img().info.get("icc_profile")
        return bytes(icc) if icc else None

    def get_best_level_for_downsample(self, downsample: float) -> int:
        """Always 0."""
        return 0

    def read_region(self, location: Tuple[int, int], level: int, size: Tuple[int, int]) -> "Image.Image":
        """PIL ``RGBA`` image of ``size`` pixels at ``location``; transparent outside."""
        pil = _pil_image()
        img = self._img()
        if check_int(level, "level") != 0:
            raise InvalidArgumentError("Invalid level")
        w, h = _check_size(size)
        x, y = _check_location(location)
        out = pil.new("RGBA", (w, h), (0, 0, 0, 0))
        iw, ih = img.size
        l, t = max(x, 0), max(y, 0)
        r, b = min(x + w, iw), min(y + h, ih)
        if r > l and b > t:
            crop = img.crop((l, t, r, b))
            if crop.mode != "RGBA":
                crop = crop.convert("RGBA")
            out.paste(crop, (l - x, t - y))
        icc = self._icc_bytes()
        if icc is not None:
            out.info["icc_profile"] = icc
        return out


def open_slide(filename: Filename) -> Union[OpenSlide, ImageSlide]:
    """Open a whole-slide image with :class:`OpenSlide`, or a plain image with
    :class:`ImageSlide`: openslide-python's rule, with slidestream's detection.

    A file whose slide format is detected (:meth:`OpenSlide.detect_format` is not None) is
    opened as a slide or refused with the error :class:`OpenSlide` raises
    (:data:`OpenSlideUnsupportedFormatError` for a vendor slidestream cannot read, such as
    DICOM; another :data:`OpenSlideError` for a damaged or unsupported file). Only a
    file that is not a slide at all (detection returns None, or the file is missing) is handed
    to Pillow, whose errors (``PIL.UnidentifiedImageError``, ``FileNotFoundError``) propagate
    as with openslide-python."""
    try:
        return OpenSlide(filename)
    except (UnsupportedFormatError, CorruptDataError, LimitsExceededError):
        # Errors about the file's content (a missing file included); settings errors and the
        # like are not a verdict on the file and propagate.
        if detect_vendor(filename) is not None:
            raise
    return ImageSlide(filename)
