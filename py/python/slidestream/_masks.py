"""Slides and masks as the samplers take them (a leaf below :mod:`slidestream.sampling`):
the slide arguments (a path, a :class:`~slidestream.Slide` or a list of either), the tissue
mask (:class:`TissueMask`, :func:`tissue_mask`), the converter every mask form goes through
(:func:`_as_mask`, so no caller can ignore a mask) and the patch footprint geometry. The
public names are documented and re-exported by :mod:`slidestream.sampling`."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple, Union

import numpy as np

from ._args import check_int, normalize_size
from ._errors import InvalidArgumentError
from ._slide import Slide
from ._typing import PathLike

#: What a slide argument may be: a path, a URL, or an open :class:`Slide`.
SlideLike = Union[PathLike, Slide]
#: What a mask argument may be (see the module docs).
MaskLike = Union["TissueMask", np.ndarray, Callable[[Slide], Any]]


def _open_one(obj: Any, what: str) -> Slide:
    if isinstance(obj, Slide):
        return obj
    if isinstance(obj, (str, bytes, os.PathLike)):
        return Slide(obj, lazy=True)
    raise TypeError(f"{what} must be a path (str, bytes, os.PathLike), a URL or a slidestream.Slide, got {type(obj).__name__}")


def _as_slide_list(slides: Any, what: str = "slides") -> Tuple[List[Slide], bool]:
    """(slides, single): one slide-like or a list / tuple of them, opened lazily. Raises
    InvalidArgumentError for an empty list, TypeError for anything else."""
    if isinstance(slides, (str, bytes, os.PathLike, Slide)):
        return [_open_one(slides, what)], True
    if isinstance(slides, np.ndarray) or not hasattr(slides, "__iter__"):
        raise TypeError(f"{what} must be a path, a slidestream.Slide or a list of them, got {type(slides).__name__}")
    out = [_open_one(x, f"{what}[{i}]") for i, x in enumerate(slides)]
    if not out:
        raise InvalidArgumentError(f"no slides given ({what} is empty)")
    return out, False


def _slide_name(slide: Slide) -> str:
    try:
        return os.path.basename(os.fsdecode(bytes(slide.path_bytes))) or os.fsdecode(bytes(slide.path_bytes))
    except Exception:  # pragma: no cover - a slide always has a path
        return "?"


def otsu_threshold(values: np.ndarray) -> int:
    """Otsu's threshold of uint8 ``values``: the t maximising the between-class variance of
    ``values <= t`` and ``values > t`` (256-bin histogram). Returns 255 when all values are
    equal (nothing is above it)."""
    hist = np.bincount(np.asarray(values, dtype=np.uint8).ravel(), minlength=256).astype(np.float64)
    total = hist.sum()
    if total == 0:
        return 255
    levels = np.arange(256, dtype=np.float64)
    w0 = np.cumsum(hist)
    w1 = total - w0
    m0 = np.cumsum(hist * levels)
    mean_all = m0[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mean_all * w0 - m0 * total) ** 2 / (w0 * w1)
    between[(w0 == 0) | (w1 == 0)] = -1
    t = int(np.argmax(between))
    return 255 if between[t] < 0 else t


def _mask_array(value: Any, what: str) -> np.ndarray:
    """``value`` as a 2-d bool array (nonzero = tissue), or InvalidArgumentError saying why not."""
    try:
        a = np.asarray(value)
    except Exception as e:  # e.g. a CUDA tensor
        raise InvalidArgumentError(f"{what}: cannot be read as a numpy array ({e}); give a CPU bool/uint8 array") from None
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    if a.ndim != 2:
        raise InvalidArgumentError(f"{what}: a mask must be a 2-d (height, width) array, got shape {a.shape}")
    if a.dtype != np.bool_ and a.dtype != np.uint8:
        hint = " (threshold it first, e.g. probabilities > 0.5)" if a.dtype.kind == "f" else ""
        raise InvalidArgumentError(f"{what}: a mask must be bool or uint8 (nonzero = tissue), got dtype {a.dtype}{hint}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise InvalidArgumentError(f"{what}: the mask is empty (shape {a.shape})")
    return a if a.dtype == np.bool_ else a != 0


@dataclass(frozen=True, repr=False)
class TissueMask:
    """Where a slide has tissue: ``mask`` bool (h, w), each pixel covering ``downsample`` ×
    ``downsample`` level-0 pixels (``mask[j, i]`` ↔ level-0 x in ``[i·d, (i+1)·d)``, y in
    ``[j·d, (j+1)·d)``); one downsample for both axes, the width's (a thumbnail keeps the aspect
    ratio, so the height's differs by less than one mask pixel over the slide); ``threshold``
    the Otsu threshold used (-1 for a mask made from an array), ``method`` its measure
    (``"saturation"``, ``"grey"``, or ``"array"`` for :meth:`from_array`).

    Constructing one checks the fields: ``mask`` becomes a 2-d bool array (uint8: nonzero is
    tissue), ``downsample`` must be a positive finite number; InvalidArgumentError otherwise."""

    mask: np.ndarray
    downsample: float
    threshold: int
    method: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "mask", _mask_array(self.mask, "TissueMask.mask"))
        d = self.downsample
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, float, np.integer, np.floating)) or not math.isfinite(float(d)) or float(d) <= 0:
            raise InvalidArgumentError(f"TissueMask.downsample must be a positive finite number, got {d!r}")
        object.__setattr__(self, "downsample", float(d))

    @classmethod
    def from_array(cls, array: Any, slide: Any) -> "TissueMask":
        """A mask of ``slide`` (a path or :class:`Slide`) from a 2-d bool / uint8 array
        covering the whole slide at any scale (nonzero = tissue): downsample = slide width /
        array width. Raises InvalidArgumentError when the array is not 2-d bool/uint8, is wider
        or taller than the slide, or its height disagrees with the slide's aspect ratio by more
        than one mask pixel."""
        return _as_mask(np.asarray(array) if not isinstance(array, np.ndarray) else array, _open_one(slide, "slide"), "array")

    @property
    def tissue_fraction(self) -> float:
        """Share of mask pixels that are tissue, in [0, 1]."""
        return float(self.mask.mean())

    def fraction(self, x: float, y: float, width: float, height: float) -> float:
        """Share of tissue in the level-0 rectangle (x, y, width, height), measured on the mask
        (partly covered mask pixels count by their covered share; outside the slide counts as
        no tissue)."""
        return float(self._fractions(np.array([[x, y]], dtype=np.float64), width, height)[0])

    def fractions(self, patches: Any, size: Any, slide: Any = None) -> np.ndarray:
        """Tissue share (float64 (n,), in [0, 1]) of each row ``(slide_index, level, x, y)`` of
        ``patches`` of ``size`` pixels of its level — the rows the samplers return. The level's
        downsample comes from ``slide`` (a path or :class:`Slide`); without it every row must
        be at level 0."""
        rows = np.asarray(patches, dtype=np.int64).reshape(-1, 4)
        w, h = normalize_size(size)
        levels = np.unique(rows[:, 1])
        if slide is None and levels.size and (levels != 0).any():
            raise InvalidArgumentError("fractions: rows at levels other than 0 need the slide (for the levels' downsamples)")
        out = np.empty(rows.shape[0], dtype=np.float64)
        s = _open_one(slide, "slide") if slide is not None else None
        for lv in levels:
            sel = rows[:, 1] == lv
            d = float(s.level_downsamples[int(lv)]) if s is not None else 1.0
            out[sel] = self._fractions(rows[sel, 2:].astype(np.float64), w * d, h * d)
        return out

    def _integral(self) -> np.ndarray:
        cached = self.__dict__.get("_sat")
        if cached is None:
            cached = np.zeros((self.mask.shape[0] + 1, self.mask.shape[1] + 1), dtype=np.float64)
            cached[1:, 1:] = np.cumsum(np.cumsum(self.mask, axis=0), axis=1)
            object.__setattr__(self, "_sat", cached)
        return cached

    def _fractions(self, xy: np.ndarray, width: float, height: float) -> np.ndarray:
        """Tissue shares of many level-0 rectangles of one size (top-left corners ``xy``)."""
        sat = self._integral()
        h, w = self.mask.shape

        def area(px: np.ndarray, py: np.ndarray) -> np.ndarray:
            # Tissue in mask coordinates [0, px) × [0, py), fractional edges interpolated.
            px = np.clip(px, 0, w)
            py = np.clip(py, 0, h)
            ix, iy = np.floor(px).astype(np.int64), np.floor(py).astype(np.int64)
            fx, fy = px - ix, py - iy
            ix1, iy1 = np.minimum(ix + 1, w), np.minimum(iy + 1, h)
            a = sat[iy, ix]
            bx = sat[iy, ix1] - a
            by = sat[iy1, ix] - a
            bxy = sat[iy1, ix1] - sat[iy1, ix] - sat[iy, ix1] + a
            return a + fx * bx + fy * by + fx * fy * bxy

        d = self.downsample
        x0, y0 = xy[:, 0] / d, xy[:, 1] / d
        x1, y1 = x0 + width / d, y0 + height / d
        tissue = area(x1, y1) - area(x0, y1) - area(x1, y0) + area(x0, y0)
        return tissue / ((width / d) * (height / d))

    def __repr__(self) -> str:
        h, w = self.mask.shape
        t = "" if self.threshold < 0 else f", threshold={self.threshold}"
        return f"TissueMask({w}x{h}, downsample={self.downsample:.4g}, tissue={self.tissue_fraction:.1%}, method={self.method!r}{t})"


def _as_mask(mask: Any, slide: Slide, what: str, _depth: int = 0) -> TissueMask:
    """A :class:`TissueMask` for ``slide`` from any accepted mask form (module docs), or
    InvalidArgumentError / TypeError saying why it cannot be used."""
    w0, h0 = slide.dimensions
    # A slidestream.annotations.LabelMask (which imports this module, not the reverse): its
    # labelled pixels.
    if type(mask).__name__ == "LabelMask" and callable(getattr(mask, "mask", None)) and hasattr(mask, "classes"):
        mask = mask.mask()
    if isinstance(mask, TissueMask):
        h, w = mask.mask.shape
        covers = w * mask.downsample
        # Thumbnail masks cover the slide to within a mask pixel; more means another slide.
        if abs(covers - w0) > mask.downsample + 1 or abs(h * mask.downsample - h0) > 2 * mask.downsample + 1:
            raise InvalidArgumentError(
                f"{what}: the TissueMask covers {covers:.0f} x {h * mask.downsample:.0f} level-0 pixels "
                f"but {_slide_name(slide)} is {w0} x {h0} (a mask of another slide?)"
            )
        return mask
    if callable(mask) and not hasattr(mask, "__array__"):
        if _depth:
            raise InvalidArgumentError(f"{what}: the mask callable returned another callable")
        try:
            out = mask(slide)
        except InvalidArgumentError:
            raise
        except Exception as e:
            raise InvalidArgumentError(f"{what}: the mask callable failed on {_slide_name(slide)}: {type(e).__name__}: {e}") from e
        return _as_mask(out, slide, f"{what} (returned by the callable)", _depth + 1)
    if isinstance(mask, (str, bytes, dict, set, list, tuple)) or mask is None:
        raise TypeError(f"{what} must be a TissueMask, a 2-d bool/uint8 array or a callable slide -> mask, got {type(mask).__name__}")
    a = _mask_array(mask, what)
    h, w = a.shape
    if w > w0 or h > h0:
        raise InvalidArgumentError(f"{what}: the mask ({w} x {h}) is larger than {_slide_name(slide)} ({w0} x {h0}); a mask covers the whole slide at its level-0 size or less")
    d = w0 / w
    want_h = h0 / d
    if abs(want_h - h) > 1.0:
        raise InvalidArgumentError(
            f"{what}: a mask {w} px wide covers {_slide_name(slide)} ({w0} x {h0}) at downsample {d:.4g}, "
            f"so it must be {want_h:.1f} px tall (±1), got {h}: it does not have the slide's aspect ratio"
        )
    return TissueMask(mask=a, downsample=d, threshold=-1, method="array")


def _masks_for(masks: Any, slides: List[Slide], what: str) -> Optional[List[TissueMask]]:
    """One TissueMask per slide from ``masks``: None; a list/tuple of per-slide masks (its
    length must match); or one mask (only for one slide) or one callable (applied to each)."""
    if masks is None:
        return None
    if isinstance(masks, (list, tuple)):
        if len(masks) != len(slides):
            raise InvalidArgumentError(f"{what}: {len(masks)} masks for {len(slides)} slides (give one per slide, or one callable)")
        return [_as_mask(m, s, f"{what}[{i}]") for i, (m, s) in enumerate(zip(masks, slides))]
    if callable(masks) and not isinstance(masks, TissueMask) and not hasattr(masks, "__array__"):
        return [_as_mask(masks, s, f"{what} (slide {i})") for i, s in enumerate(slides)]
    if len(slides) != 1:
        raise InvalidArgumentError(f"{what}: one mask for {len(slides)} slides; give a list of one mask per slide, or a callable")
    return [_as_mask(masks, slides[0], what)]


def _tissue_mask_one(slide: Slide, max_size: int, method: str) -> TissueMask:
    rgb = slide.get_thumbnail((max_size, max_size), background=255).astype(np.int16)
    if method == "saturation":
        mx = rgb.max(axis=-1)
        mn = rgb.min(axis=-1)
        measure = np.where(mx > 0, (mx - mn) * 255 // np.maximum(mx, 1), 0).astype(np.uint8)
    else:
        grey = (rgb[..., 0] * 299 + rgb[..., 1] * 587 + rgb[..., 2] * 114) // 1000
        measure = (255 - grey).astype(np.uint8)
    t = otsu_threshold(measure)
    w0 = slide.dimensions[0]
    return TissueMask(mask=measure > t, downsample=w0 / rgb.shape[1], threshold=t, method=method)


def tissue_mask(slide: Any, *, max_size: int = 1024, method: str = "saturation", progress: Any = None) -> Any:
    """The tissue mask of ``slide`` (a path, a :class:`Slide`, or a list of either) from its
    thumbnail (at most ``max_size`` pixels a side, composited over white): see the module docs
    for the two methods. Returns a :class:`TissueMask`, or a list of them for a list of slides
    (with a progress bar when ``progress`` allows it: :func:`slidestream.progress.bar`).

    Raises InvalidArgumentError for an unknown method, a ``max_size`` below 8 or an empty
    list, TypeError for an argument that is not a slide, and the slide's own open/read
    errors."""
    max_size = check_int(max_size, "max_size", min_value=8)
    if method not in ("saturation", "grey"):
        raise InvalidArgumentError(f"method must be 'saturation' or 'grey', not {method!r}")
    slides, single = _as_slide_list(slide, "slide")
    if single:
        return _tissue_mask_one(slides[0], max_size, method)
    from .progress import bar

    return [_tissue_mask_one(s, max_size, method) for s in bar(slides, desc="tissue masks", unit="slide", enable=progress)]


def _patch_level0(slide: Slide, level: int, size: Tuple[int, int]) -> Tuple[float, float]:
    d = float(slide.level_downsamples[level])
    return size[0] * d, size[1] * d


def _footprint(slide: Slide, level: int, size: Tuple[int, int], res: Any) -> Tuple[float, float]:
    """Level-0 width and height a patch of ``size`` covers: ``size`` pixels of ``level``, or,
    at a resolution, the level pixels read for it (:meth:`Resolution.read_size`)."""
    if res is None:
        return _patch_level0(slide, level, size)
    rw, rh = res.read_size(size)
    d = float(slide.level_downsamples[res.level])
    return rw * d, rh * d


def _check_level_in(slide: Slide, level: int) -> None:
    if level >= slide.level_count:
        raise InvalidArgumentError(f"level {level} does not exist in {_slide_name(slide)} (level count {slide.level_count})")
