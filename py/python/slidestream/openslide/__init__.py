"""slidestream's OpenSlide drop-in: the namespace of openslide-python 1.4.7's ``openslide``.

``import slidestream.openslide as openslide`` gives ``OpenSlide``, ``ImageSlide``,
``AbstractSlide``, ``open_slide``, ``OpenSlideCache``, ``OpenSlideError``,
``OpenSlideUnsupportedFormatError``, ``OpenSlideVersionError``, the ``PROPERTY_NAME_*``
constants, ``__version__``, ``__library_version__`` and the submodules ``openslide.deepzoom``
(``DeepZoomGenerator``) and ``openslide.lowlevel`` (the function-level API). These are the
objects of :mod:`slidestream._compat` (also reachable as ``slidestream.OpenSlide``, ...); their
semantics, and where they differ from openslide-python, are documented there and in
``docs/python.md``.

Code that says ``import openslide`` and cannot be edited (openslide-python's own test suite,
third-party libraries) gets this module by putting the repository's ``py/openslide-shim``
folder first on ``PYTHONPATH``: its ``openslide`` package makes ``import openslide`` (and
``openslide.deepzoom``, ``openslide.lowlevel``) these same module objects.
"""

from __future__ import annotations

from .._compat import (
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
    ImageSlide,
    OpenSlide,
    OpenSlideCache,
    OpenSlideError,
    OpenSlideUnsupportedFormatError,
    OpenSlideVersionError,
    open_slide,
)
from . import lowlevel

#: The openslide-python API version this module implements (``openslide.__version__``).
#: slidestream's own version is ``slidestream.__version__``.
__version__ = lowlevel.OPENSLIDE_PYTHON_VERSION
#: The OpenSlide library version whose output (pixels, properties, handle semantics)
#: slidestream reproduces (``openslide.__library_version__``: ``"4.0.1"``). No libopenslide
#: is loaded.
__library_version__ = lowlevel.get_version()

__all__ = [
    "AbstractSlide",
    "ImageSlide",
    "OpenSlide",
    "OpenSlideCache",
    "OpenSlideError",
    "OpenSlideUnsupportedFormatError",
    "OpenSlideVersionError",
    "open_slide",
    "lowlevel",
    "PROPERTY_NAME_BACKGROUND_COLOR",
    "PROPERTY_NAME_BARCODE",
    "PROPERTY_NAME_BOUNDS_HEIGHT",
    "PROPERTY_NAME_BOUNDS_WIDTH",
    "PROPERTY_NAME_BOUNDS_X",
    "PROPERTY_NAME_BOUNDS_Y",
    "PROPERTY_NAME_COMMENT",
    "PROPERTY_NAME_MPP_X",
    "PROPERTY_NAME_MPP_Y",
    "PROPERTY_NAME_OBJECTIVE_POWER",
    "PROPERTY_NAME_QUICKHASH1",
    "PROPERTY_NAME_VENDOR",
    "__version__",
    "__library_version__",
]
