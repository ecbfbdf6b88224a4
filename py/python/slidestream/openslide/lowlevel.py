"""``openslide.lowlevel`` of slidestream's OpenSlide drop-in: openslide-python 1.4.7's
function-level API (one function per libopenslide call), implemented on the drop-in's
:class:`~slidestream.OpenSlide` instead of ctypes.

A handle from :func:`open` wraps a drop-in ``OpenSlide`` and has its semantics: an operation on
a closed handle raises ``ctypes.ArgumentError``; a failed read latches the error
(:func:`get_error` returns it, every later call but :func:`close` raises
:data:`OpenSlideError`). Images are PIL ``RGBA``, not premultiplied (as openslide-python's
``lowlevel``). As libopenslide, a level or associated image that does not exist gives
dimensions ``(-1, -1)`` and downsample ``-1.0``.

Every function has ``available = True`` (openslide-python code tests
``lowlevel.<function>.available`` to find features of newer OpenSlide versions): the drop-in
implements all of OpenSlide 4.0's API. No libopenslide is loaded; ctypes internals of
openslide-python (``_lib``, ``_func``, ``_OpenSlide.from_param``) do not exist here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple, TypeVar

from .._compat import OpenSlide as _DropIn
from .._compat_common import (
    Filename,
    OpenSlideError,
    OpenSlideUnsupportedFormatError,
    OpenSlideCache,
    OpenSlideVersionError,
    _ArgumentValueError,
    _CacheHandle,
    _closed_error,
)

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "OpenSlideError",
    "OpenSlideUnsupportedFormatError",
    "OpenSlideVersionError",
    "Filename",
    "detect_vendor",
    "open",
    "close",
    "get_level_count",
    "get_level_dimensions",
    "get_level_downsample",
    "get_best_level_for_downsample",
    "read_region",
    "get_icc_profile_size",
    "read_icc_profile",
    "get_error",
    "get_property_names",
    "get_property_value",
    "get_associated_image_names",
    "get_associated_image_dimensions",
    "read_associated_image",
    "get_associated_image_icc_profile_size",
    "read_associated_image_icc_profile",
    "get_version",
    "cache_create",
    "set_cache",
    "cache_release",
]

#: The openslide-python version whose API this drop-in implements.
OPENSLIDE_PYTHON_VERSION = "1.4.7"
#: The OpenSlide version whose output and semantics slidestream reproduces.
OPENSLIDE_VERSION = "4.0.1"

_F = TypeVar("_F", bound=Callable[..., Any])


def _available(fn: _F) -> _F:
    """Mark ``fn`` as available (``fn.available = True``), as openslide-python's functions."""
    setattr(fn, "available", True)
    return fn


class _OpenSlide:
    """A slide handle (openslide-python's ``lowlevel._OpenSlide``): wraps a drop-in
    :class:`~slidestream.OpenSlide`."""

    def __init__(self, osr: _DropIn) -> None:
        self._osr = osr


#: A cache handle (openslide-python's ``lowlevel._OpenSlideCache``), also
#: ``OpenSlideCache._openslide_cache``.
_OpenSlideCache = _CacheHandle


def _osr(slide: Any) -> _DropIn:
    if not isinstance(slide, _OpenSlide):
        raise _ArgumentValueError("argument 1: ValueError: Not an OpenSlide reference")
    return slide._osr


@_available
def detect_vendor(filename: Filename) -> Optional[str]:
    """The vendor of the slide format of ``filename``, or None (``OpenSlide.detect_format``)."""
    return _DropIn.detect_format(filename)


@_available
def open(filename: Filename) -> _OpenSlide:  # noqa: A001 - openslide-python's name
    """Open a slide: a handle, or :data:`OpenSlideUnsupportedFormatError` /
    :data:`OpenSlideError` as ``OpenSlide(filename)``."""
    return _OpenSlide(_DropIn(filename))


@_available
def close(slide: _OpenSlide) -> None:
    """Close the handle; any later use raises ``ctypes.ArgumentError``."""
    _osr(slide).close()


@_available
def get_level_count(slide: _OpenSlide) -> int:
    """Number of levels."""
    return _osr(slide).level_count


@_available
def get_level_dimensions(slide: _OpenSlide, level: int) -> Tuple[int, int]:
    """(width, height) of ``level`` in pixels; ``(-1, -1)`` for a level that does not exist."""
    dims = _osr(slide).level_dimensions
    return dims[level] if 0 <= level < len(dims) else (-1, -1)


@_available
def get_level_downsample(slide: _OpenSlide, level: int) -> float:
    """Downsample of ``level`` relative to level 0; ``-1.0`` for a level that does not exist."""
    ds = _osr(slide).level_downsamples
    return ds[level] if 0 <= level < len(ds) else -1.0


@_available
def get_best_level_for_downsample(slide: _OpenSlide, downsample: float) -> int:
    """The level to read for ``downsample`` (OpenSlide's rule)."""
    return _osr(slide).get_best_level_for_downsample(downsample)


@_available
def read_region(slide: _OpenSlide, x: int, y: int, level: int, w: int, h: int) -> "Image.Image":
    """PIL ``RGBA`` image of ``w`` x ``h`` pixels of ``level`` at level-0 ``(x, y)``
    (``OpenSlide.read_region``)."""
    return _osr(slide).read_region((x, y), level, (w, h))


@_available
def get_icc_profile_size(slide: _OpenSlide) -> int:
    """Size in bytes of the slide's ICC profile; 0 when it has none."""
    osr = _osr(slide)
    osr._handle()
    icc = osr._icc_bytes()
    return 0 if icc is None else len(icc)


@_available
def read_icc_profile(slide: _OpenSlide) -> Optional[bytes]:
    """The slide's ICC profile, or None."""
    osr = _osr(slide)
    osr._handle()
    return osr._icc_bytes()


@_available
def get_error(slide: _OpenSlide) -> Optional[str]:
    """The latched error message, or None."""
    osr = _osr(slide)
    if osr._closed:
        raise _closed_error()
    return osr._error


@_available
def get_property_names(slide: _OpenSlide) -> List[str]:
    """Every property name, sorted."""
    return list(_osr(slide).properties)


@_available
def get_property_value(slide: _OpenSlide, name: Any) -> Optional[str]:
    """The value of property ``name`` (``str`` or ``bytes``), or None."""
    try:
        return _osr(slide).properties[name]
    except KeyError:
        return None


@_available
def get_associated_image_names(slide: _OpenSlide) -> List[str]:
    """Names of the associated images."""
    return list(_osr(slide).associated_images)


@_available
def get_associated_image_dimensions(slide: _OpenSlide, name: Any) -> Tuple[int, int]:
    """(width, height) of associated image ``name``; ``(-1, -1)`` when there is none."""
    osr = _osr(slide)
    sizes = dict(osr._handle()._associated_sizes())
    key = name.decode("utf-8") if isinstance(name, bytes) else name
    w, h = sizes.get(key, (-1, -1))
    return int(w), int(h)


@_available
def read_associated_image(slide: _OpenSlide, name: Any) -> "Image.Image":
    """Associated image ``name`` as a PIL ``RGBA`` image (KeyError when there is none)."""
    key = name.decode("utf-8") if isinstance(name, bytes) else name
    return _osr(slide).associated_images[key]


@_available
def get_associated_image_icc_profile_size(slide: _OpenSlide, name: Any) -> int:
    """Size in bytes of associated image ``name``'s ICC profile; 0 when it has none."""
    icc = read_associated_image_icc_profile(slide, name)
    return 0 if icc is None else len(icc)


@_available
def read_associated_image_icc_profile(slide: _OpenSlide, name: Any) -> Optional[bytes]:
    """Associated image ``name``'s ICC profile (the slide's, when the image declares one), or
    None."""
    osr = _osr(slide)
    key = name.decode("utf-8") if isinstance(name, bytes) else name
    if f"openslide.associated.{key}.icc-size" not in osr._property_dict():
        return None
    return osr._icc_bytes()


@_available
def get_version() -> str:
    """The OpenSlide version the drop-in reproduces (:data:`OPENSLIDE_VERSION`)."""
    return OPENSLIDE_VERSION


@_available
def cache_create(capacity: int) -> _OpenSlideCache:
    """A cache handle of ``capacity`` bytes (checked as ``OpenSlideCache(capacity)``)."""
    return OpenSlideCache(capacity)._openslide_cache


@_available
def set_cache(slide: _OpenSlide, cache: _OpenSlideCache) -> None:
    """Accepted; slidestream's tile cache stays as it is."""
    if not isinstance(cache, _OpenSlideCache):
        raise _ArgumentValueError("argument 2: ValueError: Not an OpenSlide cache reference")
    _osr(slide)._handle()


@_available
def cache_release(cache: _OpenSlideCache) -> None:
    """Release a cache handle (nothing to free)."""
