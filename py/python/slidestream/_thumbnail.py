"""Thumbnails of large levels in bounded memory (used by :meth:`Slide.get_thumbnail` and the
OpenSlide drop-in's ``get_thumbnail``).

A level of at most :data:`WHOLE_LEVEL_BYTES` of RGBA is read whole and reduced by Pillow, so
the result equals OpenSlide's. A larger level is reduced while it is read
(``Slide.read_level_reduced``: JPEG tiles decoded at 1/2..1/8 scale, box averages, tiles in
waves within the working set) to at least twice the thumbnail's size, then finished with
Pillow's Lanczos as openslide-python's ``get_thumbnail`` does: memory is the reduced image
plus one wave, whatever the level's size.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import numpy as np

#: Levels up to this many bytes of RGBA are read whole (exactly OpenSlide's thumbnail).
WHOLE_LEVEL_BYTES = 64 << 20


def pil_thumbnail_size(width: int, height: int, size: Tuple[int, int]) -> Optional[Tuple[int, int]]:
    """The size Pillow's ``Image.thumbnail(size)`` gives a ``width`` x ``height`` image (aspect
    kept, each side rounded to the nearer of floor/ceil that keeps the aspect best, at least 1),
    or None when the image already fits (Pillow leaves it unchanged)."""
    x, y = int(size[0]), int(size[1])
    if x >= width and y >= height:
        return None
    aspect = width / height

    def round_aspect(number: float, key: Any) -> int:
        return max(min(math.floor(number), math.ceil(number), key=key), 1)

    if x / y >= aspect:
        x = round_aspect(y * aspect, key=lambda n: abs(aspect - n / y))
    else:
        y = round_aspect(x / aspect, key=lambda n: 0 if n == 0 else abs(aspect - x / n))
    return x, y


def is_large(level_size: Tuple[int, int]) -> bool:
    """True when a level is too large to read whole for a thumbnail."""
    return int(level_size[0]) * int(level_size[1]) * 4 > WHOLE_LEVEL_BYTES


def reduced_level(core: Any, level: int, level_size: Tuple[int, int], final: Tuple[int, int], background: Any) -> np.ndarray:
    """``level`` reduced while read to no less than twice ``final`` = (w, h) (Pillow's
    ``reducing_gap`` of 2 keeps its Lanczos step exact enough): uint8 (h', w', 3), RGB over
    ``background``."""
    lw, lh = int(level_size[0]), int(level_size[1])
    factor = max(1, min(lw // (2 * max(1, final[0])), lh // (2 * max(1, final[1]))))
    arr, _ = core.read_level_reduced(level, factor, background=background)
    return arr
