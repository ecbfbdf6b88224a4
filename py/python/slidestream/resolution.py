"""Reading at a physical resolution (µm per pixel) or an objective magnification instead of
a pyramid level.

A target resolution becomes, for each slide, a **target downsample** ``D`` (level-0 pixels
per output pixel):

* ``mpp=t`` (µm per output pixel): ``D = t / mpp_x``, with ``mpp_x`` the slide's level-0 µm
  per pixel along x (``openslide.mpp-x``, :attr:`slidestream.Slide.mpp`); slides whose pixels
  are not square are resampled with the x spacing on both axes (as MONAI's and TIAToolbox's
  readers do);
* ``magnification=m``: ``D = P / m``, with ``P`` the objective power of level 0
  (``openslide.objective-power``).

The level read is the **coarsest level whose downsample is at most** ``D`` (to within 0.1 %),
so pixels are only ever reduced, never invented; its pixels are then reduced by
``scale = D / level downsample`` (≥ 1) to the requested size. A target finer than level 0
(``D < 1``) is an :class:`~slidestream.InvalidArgumentError`, as is a slide without the
property needed (no mpp, no objective power) unless a fallback is given (``fallback_mpp=``,
``fallback_magnification=``: the level-0 value to assume).

**Filter.** Each patch is reduced by a separable Lanczos-3 convolution that is antialiased when
reducing (its support widens with the scale): Pillow's ``LANCZOS`` resampling, computed natively
(SIMD, the patches of a batch in parallel on the decode threads, the GIL released); results
equal ``PIL.Image.resize(..., Image.Resampling.LANCZOS)`` within two grey levels. Pillow is
not needed. A patch read at scale 1 is returned as read. A patch of ``size`` output pixels covers ``round(size · scale)`` level
pixels from its level-0 location (the footprint differs from ``size · D`` level-0 pixels by
less than one level pixel). See :func:`slidestream.read_patches` and the samplers'
``mpp=`` / ``magnification=``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from ._errors import InvalidArgumentError
from ._slidestream import _resize_patches

__all__ = ["Resolution", "resolve", "resize_patches"]

#: Levels whose downsample is within this share above the target still count as "at or
#: below" it (downsamples computed from rounded level sizes are not exact).
_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Resolution:
    """How one slide is read at a target resolution: ``level`` (the level read), ``scale``
    (≥ 1: level pixels per output pixel), ``downsample`` (level-0 pixels per output pixel,
    ``D``), ``mpp`` (µm per output pixel, None when the slide's mpp is unknown and no fallback
    was given)."""

    level: int
    scale: float
    downsample: float
    mpp: Optional[float]

    def read_size(self, size: Tuple[int, int]) -> Tuple[int, int]:
        """The (width, height) in pixels of :attr:`level` read for an output ``size``."""
        if self.scale == 1.0:
            return size
        return max(1, round(size[0] * self.scale)), max(1, round(size[1] * self.scale))


def _positive(value: Any, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a positive number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise InvalidArgumentError(f"{name} must be a positive finite number, got {value!r}")
    return v


def resolve(
    slide: Any,
    *,
    mpp: Optional[float] = None,
    magnification: Optional[float] = None,
    fallback_mpp: Optional[float] = None,
    fallback_magnification: Optional[float] = None,
) -> Resolution:
    """The :class:`Resolution` (level, scale) that reads ``slide`` (a :class:`Slide`, or a path
    or URL, opened lazily) at ``mpp`` µm per pixel or at objective ``magnification`` (exactly
    one of them; see the module docs). Raises InvalidArgumentError when both or neither are
    given, when the slide lacks the property needed and no fallback is given, or when the
    target is finer than level 0; TypeError for non-numbers or a ``slide`` that is neither a
    slide nor a path."""
    if (mpp is None) == (magnification is None):
        raise InvalidArgumentError("give exactly one of mpp= and magnification=")
    if isinstance(slide, (str, bytes, os.PathLike)):
        from ._slide import Slide

        slide = Slide(slide, lazy=True)
    elif not hasattr(slide, "level_downsamples"):
        raise TypeError(f"slide must be a slidestream.Slide or a path, got {type(slide).__name__}")
    name = getattr(slide, "path", "slide")
    if mpp is not None:
        target = _positive(mpp, "mpp")
        base = slide.mpp[0] if slide.mpp else None
        if base is None:
            if fallback_mpp is None:
                raise InvalidArgumentError(
                    f"{name!r} has no mpp (openslide.mpp-x): give fallback_mpp= (the level-0 µm per pixel to assume) or read by level"
                )
            base = _positive(fallback_mpp, "fallback_mpp")
        d = target / float(base)
        out_mpp: Optional[float] = target
    else:
        target = _positive(magnification, "magnification")
        power = slide.properties.get("openslide.objective-power")
        try:
            p = float(power) if power not in (None, "") else None
        except ValueError:
            p = None
        if p is None or not math.isfinite(p) or p <= 0:
            if fallback_magnification is None:
                raise InvalidArgumentError(
                    f"{name!r} has no objective power (openslide.objective-power): give fallback_magnification= "
                    "(the level-0 magnification to assume) or read by mpp= or level"
                )
            p = _positive(fallback_magnification, "fallback_magnification")
        d = p / target
        out_mpp = slide.mpp[0] * d if slide.mpp else None
    if d < 1.0 - _TOLERANCE:
        raise InvalidArgumentError(
            f"{name!r}: the target is finer than level 0 (downsample {d:.4g} < 1); slidestream reduces pixels, it does not invent them"
        )
    downsamples = [float(v) for v in slide.level_downsamples]
    level = max((k for k, dk in enumerate(downsamples) if dk <= d * (1 + _TOLERANCE)), key=lambda k: downsamples[k], default=0)
    scale = d / downsamples[level]
    if abs(scale - 1.0) <= _TOLERANCE:
        scale = 1.0
    return Resolution(level=level, scale=max(1.0, scale), downsample=max(d, downsamples[level]), mpp=out_mpp)


def resize_patches(patches: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    """Reduce uint8 RGB patches (n, h, w, 3) to (n, size[1], size[0], 3) with the module's filter
    (Lanczos-3 convolution, antialiased; see the module docs). Returns ``patches`` itself when
    it already has that size. ValueError for another shape."""
    n, h, w = patches.shape[:3]
    tw, th = size
    if (w, h) == (tw, th):
        return patches
    return _resize_patches(patches, (tw, th))


def _resolve_all(slides: Sequence[Any], **target: Any) -> list:
    """:func:`resolve` for each slide (same arguments)."""
    return [resolve(s, **target) for s in slides]
