"""Type stubs of the compiled extension ``slidestream._slidestream`` (py/src/lib.rs).

Coordinates follow OpenSlide: a ``location`` is (x, y) in level-0 pixels, x to the right and
y down from the top-left corner of the slide; a ``size`` is (width, height) in pixels of the
level being read. Arrays are C-contiguous numpy ``uint8``, row-major (height first), and own
the decoded buffer.
"""

import os
from typing import Any, Dict, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
from typing_extensions import Self, disjoint_base

__all__ = ["Slide", "core_version"]

_Path = Union[str, bytes, os.PathLike[str], os.PathLike[bytes]]
_Background = Union[int, Tuple[int, int, int]]

@disjoint_base
class Slide:
    """An open whole-slide image (Aperio SVS, pyramidal tiled TIFF/BigTIFF).

    Coordinates follow OpenSlide: ``location`` is (x, y) in level-0 pixels, ``size`` is
    (width, height) in pixels of the requested level. Pixels are ``uint8``, row-major.
    Thread-safe: share one ``Slide`` between threads; reads release the GIL.
    """

    def __new__(cls, path: _Path, *, cache_bytes: Optional[int] = None, lazy: bool = False) -> Self:
        """Open a slide. ``path``: str, bytes or os.PathLike. ``cache_bytes``: capacity in
        bytes of a private tile cache for this slide (default: the process-wide cache,
        ``SLIDESTREAM_CACHE_BYTES``, 256 MiB). ``lazy=True`` defers opening to the first use.

        Raises FileNotFoundError / PermissionError / OSError, UnsupportedFormatError,
        CorruptDataError, LimitsExceededError."""

    @property
    def path_bytes(self) -> bytes:
        """The file path as bytes (exact, also for non-UTF-8 names)."""

    @property
    def cache_bytes(self) -> Optional[int]:
        """Capacity in bytes of this slide's private tile cache, or None (process-wide cache)."""

    @property
    def path(self) -> str:
        """The file path as str (lossy for non-UTF-8 names; see ``path_bytes``)."""

    @property
    def closed(self) -> bool:
        """True after ``close()``."""

    @property
    def vendor(self) -> str:
        """Format driver that opened the slide: ``"aperio"`` or ``"generic-tiff"``
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

    def read_associated(self, name: str) -> npt.NDArray[np.uint8]:
        """A whole associated image (``thumbnail``, ``label``, ``macro``): uint8 array of shape
        (height, width, 4), RGBA, non-premultiplied. Raises InvalidArgumentError for an
        unknown name, CorruptDataError when it cannot be decoded."""

    @property
    def color_profile(self) -> Optional[bytes]:
        """The slide's ICC profile (raw bytes), or None."""

    @property
    def mpp(self) -> Optional[Tuple[float, float]]:
        """(mpp_x, mpp_y): micrometres per level-0 pixel, or None when unknown."""

    def read_region(
        self, location: Tuple[int, int], level: int, size: Tuple[int, int]
    ) -> npt.NDArray[np.uint8]:
        """Read a region: uint8 array of shape (height, width, 4), RGBA, non-premultiplied;
        (0, 0, 0, 0) outside the image and on missing tiles.

        ``location``: (x, y) in level-0 pixels (may be negative or past the image);
        ``level``: 0 .. level_count - 1; ``size``: (width, height) >= 0 in pixels of that
        level. The level-k origin is the level pixel ``floor(location / downsample)``. The GIL
        is released during the read; the array owns the buffer and supports ``__dlpack__``.
        Raises InvalidArgumentError (bad level, closed slide), ValueError (negative size),
        LimitsExceededError (output above ``SLIDESTREAM_MAX_REGION_BYTES``),
        CorruptDataError (a tile cannot be decoded)."""

    def read_regions(
        self,
        locations: Union[Sequence[Tuple[int, int]], npt.NDArray[np.int64]],
        level: int,
        size: Tuple[int, int],
        *,
        background: Optional[_Background] = None,
    ) -> npt.NDArray[np.uint8]:
        """Read many patches of one level: uint8 array of shape (n, height, width, 3), RGB.

        ``locations``: n (x, y) level-0 pixel pairs, a sequence or an int64 array of shape
        (n, 2). ``size``: (width, height) of every patch in pixels of ``level``.
        ``background``: int 0..255 or (r, g, b), default 255 (white): used outside the image
        and on missing tiles; partly transparent pixels are composited over it. Tiles shared
        by patches are decoded once; the work runs on threads with the GIL released."""

    def get_best_level_for_downsample(self, downsample: float) -> int:
        """The level to read for a wanted downsample (OpenSlide's rule: the level with the
        largest downsample not above ``downsample``; 0 if it is below every level)."""

    def cache_stats(self) -> Dict[str, int]:
        """Tile cache counters: hits, misses, evictions, insertions, entries, resident_bytes,
        capacity_bytes (bytes are of decoded RGBA tiles)."""

    def io_stats(self) -> Dict[str, Any]:
        """I/O counters since open in this process: ``requests`` (int), ``bytes`` (int) and
        ``path`` (str, ``"posix"``: positional reads)."""

    def close(self) -> None:
        """Close the file. Later reads raise InvalidArgumentError; closing twice is harmless."""

    def __enter__(self) -> Self:
        """Return the slide itself."""

    def __exit__(self, *_args: object) -> Literal[False]:
        """Close the slide; exceptions propagate (returns False)."""

def core_version() -> str:
    """Version of the Rust core (also ``slidestream.__version__``)."""
