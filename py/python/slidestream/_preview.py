"""Pictures of what a sampler sees: :func:`preview` and :func:`plot_preview` (documented and
re-exported by :mod:`slidestream.sampling`). Samplers are recognised by what they hold (a
grid's ``grid`` and ``patches``, a random sampler's ``sample`` and ``masks``), so this module
does not import the samplers."""

from __future__ import annotations

import copy
from typing import Any, Optional, Tuple

import numpy as np

from ._args import check_int, normalize_size
from ._errors import InvalidArgumentError
from ._masks import _as_mask, _check_level_in, _footprint, _open_one, _slide_name, _tissue_mask_one

def _pil() -> Any:
    try:
        from PIL import Image, ImageDraw
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("slidestream.sampling.preview needs Pillow (`pip install pillow`)") from e
    return Image, ImageDraw


def preview(
    slide: Any,
    *,
    mask: Any = None,
    patches: Any = None,
    size: Any = None,
    slide_index: int = 0,
    n: int = 200,
    max_size: int = 1024,
    mask_color: Tuple[int, int, int] = (0, 200, 80),
    mask_alpha: float = 0.35,
    patch_color: Tuple[int, int, int] = (20, 60, 255),
) -> Any:
    """A picture of what a sampler sees: the slide's thumbnail (at most ``max_size`` pixels a
    side) with the tissue ``mask`` tinted over it and the ``patches`` outlined. Returns a PIL
    ``RGB`` image (Pillow needed: ImportError without it); in a notebook it displays itself.

    * ``slide``: a path or :class:`Slide`.
    * ``mask``: any mask form of the module docs, or ``True`` for :func:`tissue_mask`; tinted
      ``mask_color`` at opacity ``mask_alpha`` (0–1). None: no tint.
    * ``patches``: rows ``(slide_index, level, x, y)`` (an array (n, 4) — only the rows of
      ``slide_index`` are drawn), a :class:`GridSampler` (its patches and size; for a
      one-slide grid, its slide index), or a :class:`RandomPatchSampler` (``n`` patches drawn from a copy of it, its
      own stream untouched; its size and the mask of slide ``slide_index``). Outlined in
      ``patch_color``, each rectangle the patch's level-0 footprint scaled to the thumbnail.
    * ``size``: the patches' (width, height) in pixels of their level (an int: a square);
      required for plain rows, taken from a sampler otherwise.

    Raises InvalidArgumentError for a mask that cannot be used, rows without a ``size``, or a
    level the slide does not have; TypeError for arguments of the wrong type."""
    Image, ImageDraw = _pil()
    s = _open_one(slide, "slide")
    max_size = check_int(max_size, "max_size", min_value=8)
    if not 0.0 <= float(mask_alpha) <= 1.0:
        raise InvalidArgumentError(f"mask_alpha must be in [0, 1], not {mask_alpha!r}")
    rows: Optional[np.ndarray] = None
    res = None  # the sampler's resolution of this slide, for its patches' footprints
    if hasattr(patches, "grid") and hasattr(patches, "patches") and hasattr(patches, "shapes"):  # a GridSampler
        size = patches.size if size is None else size
        rows = patches.patches
        first = int(getattr(patches, "slide_index", 0))
        if len(patches.slides) == 1:
            slide_index = first  # a one-slide grid: its own slide index
        if patches.resolutions and 0 <= slide_index - first < len(patches.resolutions):
            res = patches.resolutions[slide_index - first]  # that slide's footprint at the resolution
    elif callable(getattr(patches, "sample", None)) and hasattr(patches, "masks"):  # a RandomPatchSampler
        size = patches.size if size is None else size
        if mask is None:
            mask = patches.masks[slide_index] if slide_index < len(patches.masks) else None
        if patches.resolutions and slide_index < len(patches.resolutions):
            res = patches.resolutions[slide_index]
        drawn = copy.copy(patches)
        drawn._rng = np.random.default_rng(np.random.SeedSequence(patches.seed, spawn_key=(2**31 - 1,)))
        rows = drawn.sample(check_int(n, "n", min_value=0))
    elif patches is not None:
        rows = np.asarray(patches, dtype=np.int64)
        if rows.size == 0:
            rows = rows.reshape(0, 4)
        if rows.ndim != 2 or rows.shape[1] != 4:
            raise InvalidArgumentError(f"patches must be rows (slide_index, level, x, y) of shape (n, 4), got shape {rows.shape}")
        if size is None:
            raise InvalidArgumentError("preview needs size= (the patches' width and height in pixels of their level) for plain rows")
    thumb = s.get_thumbnail((max_size, max_size), background=255)
    th, tw = thumb.shape[:2]
    w0, h0 = s.dimensions
    sx, sy = tw / w0, th / h0
    img = Image.fromarray(np.ascontiguousarray(thumb[..., :3]), "RGB")
    if mask is not None and mask is not False:
        m = _tissue_mask_one(s, 1024, "saturation") if mask is True else _as_mask(mask, s, "mask")
        # The mask resampled to the thumbnail's grid (nearest), then blended in.
        ys = np.minimum(((np.arange(th) + 0.5) / sy / m.downsample).astype(np.int64), m.mask.shape[0] - 1)
        xs = np.minimum(((np.arange(tw) + 0.5) / sx / m.downsample).astype(np.int64), m.mask.shape[1] - 1)
        on = m.mask[ys[:, None], xs[None, :]]
        base = np.asarray(img, dtype=np.float32)
        tint = np.array(mask_color, dtype=np.float32)
        base[on] = base[on] * (1 - float(mask_alpha)) + tint * float(mask_alpha)
        img = Image.fromarray(np.clip(base + 0.5, 0, 255).astype(np.uint8), "RGB")
    if rows is not None and rows.shape[0]:
        pw, ph = normalize_size(size)
        draw = ImageDraw.Draw(img)
        for _, lv, x, y in rows[rows[:, 0] == slide_index]:
            _check_level_in(s, int(lv))
            fw, fh = _footprint(s, int(lv), (pw, ph), res)
            x0, y0 = x * sx, y * sy
            draw.rectangle([x0, y0, x0 + max(1.0, fw * sx) - 1, y0 + max(1.0, fh * sy) - 1], outline=tuple(patch_color))
    return img


def plot_preview(slide: Any, *, ax: Any = None, title: Optional[str] = None, **kwargs: Any) -> Any:
    """:func:`preview` drawn with matplotlib on ``ax`` (a new figure's axes when None), axes
    off, ``title`` (default the slide's file name) above; returns the axes. ``kwargs`` go to
    :func:`preview`. ImportError without matplotlib or Pillow."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("plot_preview needs matplotlib (`pip install matplotlib`)") from e
    img = preview(slide, **kwargs)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 8 * img.height / max(1, img.width)))
    ax.imshow(np.asarray(img))
    ax.set_axis_off()
    ax.set_title(title if title is not None else _slide_name(_open_one(slide, "slide")))
    return ax
