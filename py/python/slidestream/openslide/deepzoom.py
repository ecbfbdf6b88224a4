"""``openslide.deepzoom`` of slidestream's OpenSlide drop-in: :class:`DeepZoomGenerator`
(:mod:`slidestream.deepzoom`, openslide-python's geometry, DZI and tiles)."""

from __future__ import annotations

from ..deepzoom import DeepZoomGenerator

__all__ = ["DeepZoomGenerator"]
