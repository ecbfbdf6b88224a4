"""Known pixels that OpenSlide cannot be asked about (levels it does not expose, native
16-bit and per-channel samples): written as raw arrays under ``OUT_DIR/known/<file>/`` with a
``known.json`` index, and compared by ``core/tests/channels.rs`` and
``py/tests/test_channels.py`` with what slidestream reads.

Each entry of ``known.json``: ``kind`` (``"rgba"``: what ``read_region`` must return;
``"channels"``: what ``read_region_channels`` must return), ``level``, ``location`` (level-0
pixels), ``size`` (pixels of the level), ``channels`` (indices, or null for all), ``dtype``
(``"u8"`` or ``"u16"``), ``shape`` ((h, w, c)), ``bin`` (raw little-endian samples, row-major)
and, for the file, ``channel_names``.
"""

from __future__ import annotations

import json
import pathlib
from typing import List, Optional, Sequence

import numpy as np


class Known:
    """Collects the known regions of one generated file."""

    def __init__(self, out_dir: pathlib.Path, name: str, channel_names: Sequence[str]):
        self.dir = out_dir / "known" / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.doc = {"file": name, "channel_names": list(channel_names), "entries": []}

    def add(self, kind: str, level: int, location, size, pixels: np.ndarray, channels: Optional[List[int]] = None) -> None:
        """``pixels``: (h, w, c) array, uint8 or uint16, exactly what slidestream must return."""
        assert pixels.ndim == 3 and pixels.shape[:2] == (size[1], size[0]), pixels.shape
        dtype = {np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16"}[pixels.dtype]
        n = len(self.doc["entries"])
        fname = f"k{n}.bin"
        (self.dir / fname).write_bytes(np.ascontiguousarray(pixels).astype(pixels.dtype.newbyteorder("<")).tobytes())
        self.doc["entries"].append(
            {"kind": kind, "level": level, "location": list(location), "size": list(size), "channels": channels, "dtype": dtype, "shape": list(pixels.shape), "bin": fname}
        )

    def write(self) -> None:
        (self.dir / "known.json").write_text(json.dumps(self.doc, indent=1))


def crop(img: np.ndarray, x: int, y: int, w: int, h: int) -> np.ndarray:
    """``img[y:y+h, x:x+w]`` padded with 0 where it leaves the image ((h, w, c) arrays)."""
    out = np.zeros((h, w, img.shape[2]), img.dtype)
    H, W = img.shape[:2]
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, W), min(y + h, H)
    if x1 > x0 and y1 > y0:
        out[y0 - y : y1 - y, x0 - x : x1 - x] = img[y0:y1, x0:x1]
    return out


def rgba(img: np.ndarray) -> np.ndarray:
    """RGB or grey (h, w, 3|1) uint8 to opaque RGBA."""
    if img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    return np.concatenate([img, np.full(img.shape[:2] + (1,), 255, np.uint8)], axis=2)


def rgba_region(img: np.ndarray, x: int, y: int, w: int, h: int) -> np.ndarray:
    """``read_region``'s result over an RGB/grey level: opaque inside, (0, 0, 0, 0) outside."""
    inside = crop(np.ones(img.shape[:2] + (1,), np.uint8), x, y, w, h)
    return rgba(crop(img, x, y, w, h)) * inside
