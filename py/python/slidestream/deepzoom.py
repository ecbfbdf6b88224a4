"""Deep Zoom tile generator with openslide-python's ``openslide.deepzoom`` API.

``DeepZoomGenerator(osr, tile_size=254, overlap=1, limit_bounds=False)`` serves the tiles of a
Deep Zoom image pyramid (as used by OpenSeadragon): level ``level_count - 1`` is the slide at
full resolution and each level below halves the previous one (rounding up) down to 1x1.
Tiles are ``tile_size`` pixels plus ``overlap`` pixels on every side that has a neighbour.

``osr`` may be a :class:`slidestream.OpenSlide` (or any object with openslide-python's slide
interface, such as ``slidestream.ImageSlide``) or a numpy-first :class:`slidestream.Slide`.
Tiles are PIL ``RGB`` images composited over the slide's background colour; Pillow is
imported when the first tile is made.

The geometry (level sizes, tile counts, tile coordinates and sizes, DZI) equals
openslide-python's. Tile pixels equal OpenSlide's when the slide level read is aligned (level 0,
or a level-0 tile origin that is a multiple of the level downsample); on unaligned reads
OpenSlide resamples the level bilinearly at the sub-pixel offset while slidestream starts at
the level pixel ``floor(location / downsample)``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Tuple, Union
from xml.etree.ElementTree import Element, SubElement, tostring

import numpy as np

from ._compat import (
    PROPERTY_NAME_BACKGROUND_COLOR,
    PROPERTY_NAME_BOUNDS_HEIGHT,
    PROPERTY_NAME_BOUNDS_WIDTH,
    PROPERTY_NAME_BOUNDS_X,
    PROPERTY_NAME_BOUNDS_Y,
    AbstractSlide,
    OpenSlide,
    _pil_image,
    _rgba_image,
)
from ._slidestream import Slide as _CoreSlide

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["DeepZoomGenerator"]

_DZI_NAMESPACE = "http://schemas.microsoft.com/deepzoom/2008"


def _check_int_param(value: Any, name: str, min_value: int) -> int:
    """A Deep Zoom ``tile_size`` / ``overlap``: an int (numpy ints too, not bools) of at least
    ``min_value``. Raises :class:`TypeError` for a non-int, :class:`ValueError` below the
    minimum."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if v < min_value:
        raise ValueError(f"{name} must be {'positive' if min_value == 1 else 'non-negative'}, got {v}")
    return v


class DeepZoomGenerator:
    """Generates Deep Zoom tiles and metadata for a slide.

    ``osr``: a :class:`slidestream.OpenSlide` / ``ImageSlide`` (or another object with the
    openslide-python slide interface) or a :class:`slidestream.Slide`. ``tile_size``: tile edge
    in pixels, without overlap. ``overlap``: pixels added to each interior tile edge.
    ``limit_bounds``: render only the non-empty slide region given by the
    ``openslide.bounds-*`` properties (aperio and generic-tiff slides define none, so the whole
    slide is used).

    Raises :class:`TypeError` for a non-int ``tile_size`` / ``overlap`` or a non-bool
    ``limit_bounds``, :class:`ValueError` for ``tile_size < 1`` or ``overlap < 0``.
    """

    BOUNDS_OFFSET_PROPS = (PROPERTY_NAME_BOUNDS_X, PROPERTY_NAME_BOUNDS_Y)
    BOUNDS_SIZE_PROPS = (PROPERTY_NAME_BOUNDS_WIDTH, PROPERTY_NAME_BOUNDS_HEIGHT)

    def __init__(
        self,
        osr: Union[AbstractSlide, _CoreSlide, Any],
        tile_size: int = 254,
        overlap: int = 1,
        limit_bounds: bool = False,
    ) -> None:
        # Checked before anything is derived from them (a tile size <= 0 would give zero or
        # negative tile counts, a non-int one fractional tiles).
        tile_size = _check_int_param(tile_size, "tile_size", 1)
        overlap = _check_int_param(overlap, "overlap", 0)
        if not isinstance(limit_bounds, (bool, np.bool_)):
            raise TypeError(f"limit_bounds must be a bool, got {type(limit_bounds).__name__}")
        limit_bounds = bool(limit_bounds)
        self._osr: Any = osr
        # Read slidestream slides as numpy arrays (no per-read PIL / ICC round trip).
        self._core: Optional[_CoreSlide] = (
            osr.slide if isinstance(osr, OpenSlide) else osr if isinstance(osr, _CoreSlide) else None
        )
        # The drop-in's reads keep its handle semantics (closed handle, latched errors).
        self._read_rgba: Any = (
            osr._read_rgba if isinstance(osr, OpenSlide) else osr.read_region if self._core is not None else None
        )
        self._tile_size = tile_size
        self._overlap = overlap
        self._limit_bounds = limit_bounds

        props = osr.properties if hasattr(osr, "properties") else osr._properties()
        slide_dims: Tuple[Tuple[int, int], ...] = tuple((int(w), int(h)) for w, h in osr.level_dimensions)
        w0, h0 = slide_dims[0]
        if limit_bounds:
            # Bounds give the level-0 offset and size of the non-empty region; scale every
            # level by the same fraction, rounding up.
            self._l0_offset = tuple(int(props.get(p, 0)) for p in self.BOUNDS_OFFSET_PROPS)
            scale = tuple(int(props.get(p, d)) / d for p, d in zip(self.BOUNDS_SIZE_PROPS, (w0, h0)))
            self._l_dimensions = tuple(
                (int(math.ceil(w * scale[0])), int(math.ceil(h * scale[1]))) for w, h in slide_dims
            )
        else:
            self._l0_offset = (0, 0)
            self._l_dimensions = slide_dims
        self._l0_dimensions = self._l_dimensions[0]

        # Deep Zoom levels: halve (rounding up) until 1x1, then list smallest first.
        z = [self._l0_dimensions]
        while z[-1][0] > 1 or z[-1][1] > 1:
            w, h = z[-1]
            z.append((max(1, (w + 1) // 2), max(1, (h + 1) // 2)))
        self._z_dimensions = tuple(reversed(z))
        self._t_dimensions = tuple(
            (int(math.ceil(w / tile_size)), int(math.ceil(h / tile_size))) for w, h in self._z_dimensions
        )
        n = len(self._z_dimensions)

        # Deep Zoom level k shows the slide at downsample 2**(n-1-k); read the slide level
        # best suited to it and scale by what remains.
        downsamples = tuple(float(d) for d in osr.level_downsamples)
        l0_z_downsamples = tuple(2 ** (n - 1 - k) for k in range(n))
        self._slide_from_dz_level = tuple(int(osr.get_best_level_for_downsample(d)) for d in l0_z_downsamples)
        self._l_downsamples = downsamples
        self._l_z_downsamples = tuple(
            l0_z_downsamples[k] / downsamples[self._slide_from_dz_level[k]] for k in range(n)
        )
        self._bg_color = "#" + str(props.get(PROPERTY_NAME_BACKGROUND_COLOR, "ffffff"))
        if self._core is not None:
            icc = self._core.color_profile
            self._icc: Optional[bytes] = None if icc is None else bytes(icc)
        else:
            profile = getattr(osr, "color_profile", None)
            self._icc = None if profile is None else bytes(profile.tobytes())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._osr!r}, tile_size={self._tile_size!r}, "
            f"overlap={self._overlap!r}, limit_bounds={self._limit_bounds!r})"
        )

    @property
    def level_count(self) -> int:
        """Number of Deep Zoom levels."""
        return len(self._z_dimensions)

    @property
    def level_tiles(self) -> Tuple[Tuple[int, int], ...]:
        """((columns, rows), ...) of tiles in every Deep Zoom level, smallest level first."""
        return self._t_dimensions

    @property
    def level_dimensions(self) -> Tuple[Tuple[int, int], ...]:
        """((width, height), ...) in pixels of every Deep Zoom level, smallest first."""
        return self._z_dimensions

    @property
    def tile_count(self) -> int:
        """Total number of tiles over all levels."""
        return sum(c * r for c, r in self._t_dimensions)

    def _tile_info(
        self, dz_level: int, t_location: Tuple[int, int]
    ) -> Tuple[Tuple[Tuple[int, int], int, Tuple[int, int]], Tuple[int, int]]:
        if isinstance(dz_level, (bool, np.bool_)) or not isinstance(dz_level, (int, np.integer)):
            raise TypeError(f"level must be an int, got {type(dz_level).__name__}")
        if dz_level < 0 or dz_level >= self.level_count:
            raise ValueError("Invalid level")
        dz_level = int(dz_level)
        cols_rows = self._t_dimensions[dz_level]
        if isinstance(t_location, (str, bytes)) or not hasattr(t_location, "__len__"):
            raise TypeError(f"address must be a (column, row) pair of ints, got {type(t_location).__name__}")
        if len(t_location) != 2:
            raise ValueError("Invalid address")
        for t in t_location:
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                raise TypeError(f"address must be a (column, row) pair of ints, got {type(t).__name__}")
        t_location = (int(t_location[0]), int(t_location[1]))
        for t, t_lim in zip(t_location, cols_rows):
            if t < 0 or t >= t_lim:
                raise ValueError("Invalid address")

        slide_level = self._slide_from_dz_level[dz_level]
        l_z_ds = self._l_z_downsamples[dz_level]
        l_ds = self._l_downsamples[slide_level]
        z_dims = self._z_dimensions[dz_level]
        l_dims = self._l_dimensions[slide_level]

        l0_location = []
        l_size = []
        z_size = []
        for axis in range(2):
            t = t_location[axis]
            before = self._overlap if t != 0 else 0
            after = self._overlap if t != cols_rows[axis] - 1 else 0
            zs = min(self._tile_size, z_dims[axis] - self._tile_size * t) + before + after
            # Top-left of the tile (overlap included) in Deep Zoom, slide-level and level-0 pixels.
            l_loc = l_z_ds * (self._tile_size * t - before)
            l0_location.append(int(l_ds * l_loc + self._l0_offset[axis]))
            l_size.append(int(min(math.ceil(l_z_ds * zs), l_dims[axis] - math.ceil(l_loc))))
            z_size.append(zs)
        return (
            ((l0_location[0], l0_location[1]), slide_level, (l_size[0], l_size[1])),
            (z_size[0], z_size[1]),
        )

    def get_tile_coordinates(
        self, level: int, address: Tuple[int, int]
    ) -> Tuple[Tuple[int, int], int, Tuple[int, int]]:
        """The ``read_region`` arguments for a tile: ((x, y) level-0 location, slide level,
        (width, height) in pixels of that slide level). ``level``: Deep Zoom level;
        ``address``: (column, row) of the tile."""
        return self._tile_info(level, address)[0]

    def get_tile_dimensions(self, level: int, address: Tuple[int, int]) -> Tuple[int, int]:
        """(width, height) in pixels of a tile, overlap included."""
        return self._tile_info(level, address)[1]

    def get_tile(self, level: int, address: Tuple[int, int]) -> "Image.Image":
        """The tile as a PIL ``RGB`` image of :meth:`get_tile_dimensions` pixels (or, when a
        slide level is scaled down, Lanczos-reduced to fit them), composited over the
        background colour. ``info["icc_profile"]`` is set when the slide has a profile."""
        pil = _pil_image()
        (location, slide_level, size), z_size = self._tile_info(level, address)
        if self._read_rgba is not None:
            region = _rgba_image(self._read_rgba(location, slide_level, size))
        else:
            region = self._osr.read_region(location, slide_level, size)
        tile = pil.new("RGB", region.size, self._bg_color)
        tile.paste(region, None, region)
        if tile.size != z_size:
            tile.thumbnail(z_size, pil.Resampling.LANCZOS)
        if self._icc is not None:
            tile.info["icc_profile"] = self._icc
        return tile

    def get_dzi(self, format: str) -> str:
        """The Deep Zoom descriptor (``.dzi`` XML) for tiles of image ``format``
        (``"jpeg"`` or ``"png"``)."""
        image = Element(
            "Image",
            TileSize=str(self._tile_size),
            Overlap=str(self._overlap),
            Format=format,
            xmlns=_DZI_NAMESPACE,
        )
        w, h = self._l0_dimensions
        SubElement(image, "Size", Width=str(w), Height=str(h))
        return tostring(image, encoding="unicode")
