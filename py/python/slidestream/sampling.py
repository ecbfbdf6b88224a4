"""Tissue masks and patch samplers for training and whole-slide inference.

* :func:`tissue_mask` — a boolean mask of where the slide has tissue, computed on its thumbnail
  (at most ``max_size`` pixels a side): Otsu's threshold (Otsu 1979, "A threshold selection
  method from gray-level histograms") on the HSV saturation ``(max − min) / max`` of each RGB
  pixel (``method="saturation"``, the default: stained tissue is coloured, glass and
  background are grey or white), or on darkness ``255 − grey`` (``method="grey"``, for
  unstained or greyscale slides). Pixels above the threshold are tissue.
* :class:`RandomPatchSampler` — random patches from the tissue of many slides, seeded:
  ``weighting="slide"`` picks a slide uniformly, then a position uniformly over its tissue;
  ``weighting="area"`` is uniform over the tissue area of all slides together.
* :class:`GridSampler` — every patch of a regular grid over one or more slides (``stride`` in
  level pixels, default the patch size), in row-major order, with its grid coordinates so that
  predictions can be stitched.
* :func:`preview` / :func:`plot_preview` — the thumbnail with the mask and the sampled or grid
  patches drawn on it (a PIL image; a matplotlib axes).

**Slides.** Every function and sampler here takes a path (``str``, ``bytes``,
``os.PathLike``, or a URL as :class:`~slidestream.Slide` opens it), a :class:`Slide`, or a
list of either; paths are opened on first read.

**Masks.** Wherever a mask is taken (``mask=``, ``masks=``) it may be

* a :class:`TissueMask` (from :func:`tissue_mask`, :meth:`TissueMask.from_array` or
  :func:`slidestream.annotations.rasterize`), or a :class:`slidestream.annotations.LabelMask`
  (its labelled pixels);
* a 2-d numpy array (or anything ``numpy.asarray`` turns into one: a PIL image in mode
  ``"1"``/``"L"``, a CPU tensor) of dtype bool or uint8 — nonzero is tissue — at any scale:
  the array covers the whole slide, so its downsample is ``slide width / array width``, and
  its height must agree with the slide's aspect ratio to within one mask pixel (a thumbnail
  of the slide, a mask exported at a level, a label map at the slide's own size all do);
* a callable ``f(slide) -> mask`` of either kind above, called once per slide.

Anything else — a float array, a 3-d array, an array of another aspect ratio or wider than
the slide, one mask for two slides, a list of the wrong length — is an
:class:`~slidestream.InvalidArgumentError` saying why: a mask is never ignored.

**min_tissue.** Both samplers keep a patch when at least ``min_tissue`` of its footprint is
tissue on the mask; the default for both is :data:`DEFAULT_MIN_TISSUE` (0.5). With
``min_tissue=0`` and no mask given, :class:`GridSampler` keeps every patch and reads no mask;
with a mask given it still measures each patch's tissue (:attr:`GridSampler.tissue`).

Patches are ``(slide_index, level, x, y)`` with ``x, y`` the top-left corner in **level-0
pixels** — the rows :func:`slidestream.read_patches` and :class:`slidestream.PatchBatches`
take. Patch sizes are in pixels of ``level`` (an int is a square). The tissue fraction of a
patch is measured on the mask, whose pixels cover ``downsample`` level-0 pixels each: it is
exact to the mask's resolution. Invalid arguments raise
:class:`~slidestream.InvalidArgumentError` (a ValueError) or TypeError.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

import numpy as np

from ._args import check_int, check_positive_size, normalize_size
from ._errors import InvalidArgumentError
from ._slide import Slide
from ._typing import PathLike

__all__ = [
    "DEFAULT_MIN_TISSUE",
    "TissueMask",
    "tissue_mask",
    "otsu_threshold",
    "RandomPatchSampler",
    "GridSampler",
    "preview",
    "plot_preview",
]

#: The default ``min_tissue`` of both samplers: a patch is kept when at least half of its
#: footprint is tissue on the mask.
DEFAULT_MIN_TISSUE = 0.5

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


def _check_min_tissue(min_tissue: Any) -> float:
    if isinstance(min_tissue, (bool, np.bool_)) or not isinstance(min_tissue, (int, float, np.integer, np.floating)):
        raise TypeError(f"min_tissue must be a number in [0, 1], got {type(min_tissue).__name__}")
    v = float(min_tissue)
    if not 0.0 <= v <= 1.0:
        raise InvalidArgumentError(f"min_tissue must be in [0, 1], not {min_tissue!r}")
    return v


def _patch_level0(slide: Slide, level: int, size: Tuple[int, int]) -> Tuple[float, float]:
    d = float(slide.level_downsamples[level])
    return size[0] * d, size[1] * d


def _resolutions(slides: List[Slide], level: int, mpp: Any, magnification: Any, fallback_mpp: Any, fallback_magnification: Any) -> Optional[list]:
    """Per-slide :class:`~slidestream.resolution.Resolution` for ``mpp=`` / ``magnification=``,
    or None when reading by ``level`` (then the fallbacks must not be given)."""
    if mpp is None and magnification is None:
        if fallback_mpp is not None or fallback_magnification is not None:
            raise InvalidArgumentError("fallback_mpp= / fallback_magnification= apply only with mpp= or magnification=")
        return None
    if level != 0:
        raise InvalidArgumentError("give a level or mpp= / magnification=, not both (the resolution chooses each slide's level)")
    from .resolution import _resolve_all

    return _resolve_all(slides, mpp=mpp, magnification=magnification, fallback_mpp=fallback_mpp, fallback_magnification=fallback_magnification)


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


class RandomPatchSampler:
    """Random patches from the tissue of ``slides`` (see the module docs).

    ``slides``: a path, a :class:`Slide` or a list of either. ``size`` (width, height) in
    pixels of ``level``, or an int for a square; ``min_tissue`` in [0, 1] (default
    :data:`DEFAULT_MIN_TISSUE`); ``masks``: one mask per slide (a list), one callable
    applied to each slide, or (one slide) one mask — any form the module docs list; default
    :func:`tissue_mask` of each slide. ``seed`` (an int >= 0) makes the sequence
    reproducible. Iterating yields ``(slide_index, level, x, y)`` forever; :meth:`sample`
    returns ``n`` of them as an int64 array (n, 4). Each candidate is centred on a random point
    of a random tissue pixel of the mask, then kept when at least ``min_tissue`` of its
    footprint is tissue. A slide without tissue is never chosen; InvalidArgumentError when no
    slide has any, when ``max_tries`` candidates in a row miss ``min_tissue``, or for a mask
    that cannot be used.

    Physical resolution: ``mpp=`` (µm per pixel) or ``magnification=`` instead of ``level``
    (with ``fallback_mpp=`` / ``fallback_magnification=`` for slides without the property):
    ``size`` is then in pixels at that resolution, each slide's rows carry the level
    :mod:`slidestream.resolution` chooses for it (:attr:`resolutions`), and the footprint is
    the level pixels read for it; read them with
    ``read_patches(slides, rows, size, mpp=...)`` (the same resolution).

    ``progress``: a progress bar over the slides' tissue masks (several slides; see
    :mod:`slidestream.progress` for the default).

    Several processes (``torch.distributed`` ranks): :meth:`split` gives rank ``r`` its own
    stream, ``SeedSequence(seed, spawn_key=(r, epoch))``, over the same slides and masks;
    :class:`slidestream.PatchBatches` calls it per epoch when ``world_size > 1``. Give the
    same ``seed`` on every rank to make the run reproducible (with ``seed=None`` each process
    draws its own entropy, :attr:`seed`: the ranks' streams still differ, but cannot be
    replayed unless that seed is recorded)."""

    def __init__(
        self,
        slides: Any,
        size: Any,
        *,
        level: int = 0,
        min_tissue: float = DEFAULT_MIN_TISSUE,
        weighting: str = "slide",
        masks: Any = None,
        seed: Optional[int] = None,
        max_tries: int = 1000,
        mpp: Optional[float] = None,
        magnification: Optional[float] = None,
        fallback_mpp: Optional[float] = None,
        fallback_magnification: Optional[float] = None,
        progress: Optional[bool] = None,
    ) -> None:
        #: The slides, in the order of the rows' slide indices.
        self.slides: List[Slide] = _as_slide_list(slides)[0]
        self.size = normalize_size(size)
        self.level = check_int(level, "level", min_value=0)
        #: Per slide, the :class:`slidestream.resolution.Resolution` read for ``mpp=`` /
        #: ``magnification=``; None when reading by level.
        self.resolutions = _resolutions(self.slides, self.level, mpp, magnification, fallback_mpp, fallback_magnification)
        if self.resolutions is None:
            for s in self.slides:
                _check_level_in(s, self.level)
        self._levels = [r.level for r in self.resolutions] if self.resolutions else [self.level] * len(self.slides)
        self._footprints = [_footprint(s, self.level, self.size, r) for s, r in zip(self.slides, self.resolutions or [None] * len(self.slides))]
        self.min_tissue = _check_min_tissue(min_tissue)
        if weighting not in ("slide", "area"):
            raise InvalidArgumentError(f"weighting must be 'slide' or 'area', not {weighting!r}")
        self.weighting = weighting
        given = _masks_for(masks, self.slides, "masks")
        #: One :class:`TissueMask` per slide.
        if given is None:
            from .progress import bar

            given = [_tissue_mask_one(s, 1024, "saturation") for s in bar(self.slides, desc="tissue masks", unit="slide", enable=progress if len(self.slides) > 1 else False)]
        self.masks: List[TissueMask] = given
        self.max_tries = check_int(max_tries, "max_tries", min_value=1)
        if seed is not None:
            seed = check_int(seed, "seed", min_value=0, allow_bool=False)
        #: The root seed (the one given, or the entropy drawn for ``seed=None``), int.
        self.seed: int = int(np.random.SeedSequence(seed).entropy)  # type: ignore[arg-type]
        #: The (rank, world_size, epoch) of a sampler made by :meth:`split`; None for the root.
        self.split_of: Optional[Tuple[int, int, int]] = None
        self._rng = np.random.default_rng(self.seed)
        self._cells = [np.flatnonzero(m.mask) for m in self.masks]
        area = np.array([c.size * m.downsample**2 for c, m in zip(self._cells, self.masks)], dtype=np.float64)
        if not area.any():
            names = ", ".join(_slide_name(s) for s in self.slides[:3]) + (", ..." if len(self.slides) > 3 else "")
            raise InvalidArgumentError(f"no slide has tissue in its mask ({names}); check the masks or pass masks=")
        has = (area > 0).astype(np.float64)
        self._p = (area if weighting == "area" else has) / (area if weighting == "area" else has).sum()

    def split(self, rank: int, world_size: int, *, epoch: int = 0) -> "RandomPatchSampler":
        """A sampler over the same slides, masks and settings drawing rank ``rank``'s patches of
        epoch ``epoch``: its generator is ``numpy.random.default_rng(SeedSequence(self.seed,
        spawn_key=(rank, epoch)))`` (independent of this sampler's own stream, which it leaves
        untouched; the same call gives the same stream, on any process). Splitting a split
        sampler derives from the same root seed. ``world_size`` only checks ``rank``.

        Raises InvalidArgumentError when ``world_size < 1``, ``rank`` is outside
        ``[0, world_size)`` or ``epoch < 0``; TypeError for non-integers."""
        world_size = check_int(world_size, "world_size", min_value=1, allow_bool=False)
        rank = check_int(rank, "rank", min_value=0, allow_bool=False)
        if rank >= world_size:
            raise InvalidArgumentError(f"rank must be in [0, world_size) = [0, {world_size}), not {rank}")
        epoch = check_int(epoch, "epoch", min_value=0, allow_bool=False)
        out = copy.copy(self)  # shares the masks and tissue cells (read only), not the generator
        out.split_of = (rank, world_size, epoch)
        out._rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(rank, epoch)))
        return out

    def _candidates(self, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """``k`` candidate rows (int64 (k, 4)), each a patch centred on a random point of a
        random tissue pixel of a slide drawn by the weights, and whether each meets
        ``min_tissue`` (bool (k,)); drawn with array operations, one slide at a time."""
        slide_of = self._rng.choice(len(self.slides), size=k, p=self._p)
        rows = np.zeros((k, 4), dtype=np.int64)
        ok = np.zeros(k, dtype=bool)
        rows[:, 0] = slide_of
        rows[:, 1] = np.asarray(self._levels, np.int64)[slide_of]
        for i in np.unique(slide_of):
            sel = np.flatnonzero(slide_of == i)
            m, cells = self.masks[int(i)], self._cells[int(i)]
            cell = cells[self._rng.integers(cells.size, size=sel.size)]
            cy, cx = np.divmod(cell, m.mask.shape[1])
            pw, ph = self._footprints[int(i)]
            px = (cx + self._rng.random(sel.size)) * m.downsample - pw / 2
            py = (cy + self._rng.random(sel.size)) * m.downsample - ph / 2
            w0, h0 = self.slides[int(i)].dimensions
            x = np.clip(np.floor(px), 0, max(0.0, w0 - pw)).astype(np.int64)
            y = np.clip(np.floor(py), 0, max(0.0, h0 - ph)).astype(np.int64)
            rows[sel, 2], rows[sel, 3] = x, y
            ok[sel] = m._fractions(np.stack([x, y], axis=1).astype(np.float64), pw, ph) >= self.min_tissue
        return rows, ok

    def sample(self, n: int) -> np.ndarray:
        """``n`` patches as int64 (n, 4) rows (slide_index, level, x, y), in the order drawn
        (candidates below ``min_tissue`` are skipped). InvalidArgumentError when ``max_tries``
        candidates in a row miss ``min_tissue``."""
        n = check_int(n, "n", min_value=0)
        out = np.empty((n, 4), dtype=np.int64)
        filled, misses = 0, 0
        while filled < n:
            need = n - filled
            rows, ok = self._candidates(max(16, 2 * need))
            hit = np.flatnonzero(ok)
            if hit.size == 0:
                misses += ok.size
            else:
                misses += int(hit[0])
            if misses >= self.max_tries:
                raise InvalidArgumentError(
                    f"{self.max_tries} candidate patches in a row had less than {self.min_tissue:.0%} tissue; "
                    "lower min_tissue or the patch size"
                )
            take = hit[:need]
            out[filled : filled + take.size] = rows[take]
            filled += take.size
            if take.size:
                # Candidates after the last one taken are dropped; those after the last hit
                # (all of them misses) count towards the next run of misses.
                misses = int(ok.size - 1 - hit[-1]) if take.size == hit.size else 0
        return out

    def __iter__(self) -> Iterator[Tuple[int, int, int, int]]:
        while True:
            for row in self.sample(256):
                yield tuple(int(v) for v in row)  # type: ignore[misc]

    def __repr__(self) -> str:
        n = len(self.slides)
        which = _slide_name(self.slides[0]) if n == 1 else f"{n} slides"
        split = "" if self.split_of is None else f", split_of={self.split_of}"
        return (
            f"RandomPatchSampler({which}, size={self.size}, level={self.level}, min_tissue={self.min_tissue:g}, "
            f"weighting={self.weighting!r}, seed={self.seed}{split})"
        )


class GridSampler:
    """The patches of a grid over ``slide`` — a path, a :class:`Slide`, or a list of either
    (one grid per slide, rows concatenated in the list's order, slide indices
    ``slide_index + position``): top-left corners every ``stride`` pixels of ``level``
    (default: the patch size, i.e. no overlap; ``stride < size`` overlaps; or give
    ``overlap`` = size − stride instead, in pixels of ``level``), from the level's origin until
    a patch reaches the level's right / bottom edge (so every pixel of the level is covered; the
    last column and row may extend past the edge, read as background), kept when at least
    ``min_tissue`` (default :data:`DEFAULT_MIN_TISSUE`) of the footprint is tissue on
    ``mask`` (any form the module docs list; one per slide, a list, or a callable; default
    :func:`tissue_mask`). ``min_tissue=0`` without a mask keeps every patch and reads no mask;
    with a mask it keeps every patch and measures their tissue.

    ``mpp=`` / ``magnification=`` (with ``fallback_mpp=`` / ``fallback_magnification=``) lay
    the grid at a physical resolution instead of a level: ``size`` and ``stride`` in pixels at
    that resolution over the whole slide, rows at the level :mod:`slidestream.resolution`
    chooses (:attr:`resolutions`), read with ``read_patches(..., mpp=...)``.

    ``progress``: a progress bar over the slides (several slides; :mod:`slidestream.progress`).

    :attr:`patches` is the int64 array (n, 4) of rows (slide_index, level, x, y), row-major
    per slide; :attr:`grid` the (column, row) of each patch in its slide's grid, for stitching
    predictions into a (rows, cols) map of :attr:`shape` (one slide) or ``shapes[i]``;
    :attr:`tissue` the float64 (n,) tissue share of each kept patch (None when no mask was
    read). Iterating yields the rows. Raises InvalidArgumentError for a level that does not
    exist, a bad stride/overlap, or a mask that cannot be used; TypeError for arguments of the
    wrong type."""

    def __init__(
        self,
        slide: Any,
        size: Any,
        *,
        level: int = 0,
        stride: Any = None,
        overlap: Any = None,
        min_tissue: float = DEFAULT_MIN_TISSUE,
        mask: Any = None,
        slide_index: int = 0,
        mpp: Optional[float] = None,
        magnification: Optional[float] = None,
        fallback_mpp: Optional[float] = None,
        fallback_magnification: Optional[float] = None,
        progress: Optional[bool] = None,
    ) -> None:
        slides, _single = _as_slide_list(slide, "slide")
        size = normalize_size(size)
        level = check_int(level, "level", min_value=0)
        #: Per slide, the resolution read for ``mpp=`` / ``magnification=`` (None: by level).
        self.resolutions = _resolutions(slides, level, mpp, magnification, fallback_mpp, fallback_magnification)
        if self.resolutions is None:
            for s in slides:
                _check_level_in(s, level)
        if overlap is not None:
            if stride is not None:
                raise InvalidArgumentError("give stride or overlap, not both")
            if isinstance(overlap, (int, np.integer)) and not isinstance(overlap, (bool, np.bool_)):
                overlap = (overlap, overlap)
            ox, oy = (check_int(v, "overlap", min_value=0) for v in overlap)
            if ox >= size[0] or oy >= size[1]:
                raise InvalidArgumentError(f"overlap {(ox, oy)} must be smaller than the patch size {size}")
            stride = (size[0] - ox, size[1] - oy)
        if stride is None:
            stride = size
        stride = normalize_size(stride) if isinstance(stride, (int, np.integer)) else check_positive_size(stride, "stride")
        self.min_tissue = _check_min_tissue(min_tissue)
        first = check_int(slide_index, "slide_index", min_value=0)
        masks = _masks_for(mask, slides, "mask")
        self.slides: List[Slide] = slides
        self.size, self.level, self.stride = size, level, stride
        self.shapes: List[Tuple[int, int]] = []
        parts, grids, tissue = [], [], []
        from .progress import bar

        for k, s in enumerate(bar(slides, desc="grid", unit="slide", enable=progress if len(slides) > 1 else False)):
            res = self.resolutions[k] if self.resolutions else None
            if res is None:
                lw, lh = s.level_dimensions[level]
                d = float(s.level_downsamples[level])
                row_level = level
            else:
                # The grid is laid in output pixels: the slide at the target downsample.
                d = res.downsample
                lw, lh = (math.ceil(v / d) for v in s.dimensions)
                row_level = res.level
            fw, fh = _footprint(s, level, size, res)
            cols = max(1, -(-(lw - size[0]) // stride[0]) + 1) if lw > size[0] else 1
            rows = max(1, -(-(lh - size[1]) // stride[1]) + 1) if lh > size[1] else 1
            mesh_x, mesh_y = np.meshgrid(np.arange(cols, dtype=np.int64), np.arange(rows, dtype=np.int64))
            gx, gy = mesh_x.ravel(), mesh_y.ravel()
            # Level-0 corners of the level-pixel grid (the inverse of floor(x / downsample)).
            x0 = np.ceil(gx * stride[0] * d).astype(np.int64)
            y0 = np.ceil(gy * stride[1] * d).astype(np.int64)
            keep = np.ones(gx.size, dtype=bool)
            frac = None
            if self.min_tissue > 0 or masks is not None:
                m = masks[k] if masks is not None else _tissue_mask_one(s, 1024, "saturation")
                frac = m._fractions(np.stack([x0, y0], axis=1).astype(np.float64), fw, fh)
                keep = frac >= self.min_tissue
            self.shapes.append((rows, cols))
            grids.append(np.stack([gx[keep], gy[keep]], axis=1))
            n = int(keep.sum())
            parts.append(np.stack([np.full(n, first + k), np.full(n, row_level), x0[keep], y0[keep]], axis=1).astype(np.int64))
            if frac is not None:
                tissue.append(frac[keep])
        self.patches: np.ndarray = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self.grid: np.ndarray = np.concatenate(grids) if len(grids) > 1 else grids[0]
        self.tissue: Optional[np.ndarray] = (np.concatenate(tissue) if len(tissue) > 1 else tissue[0]) if tissue else None

    @property
    def shape(self) -> Tuple[int, int]:
        """(rows, cols) of the grid of a one-slide sampler. InvalidArgumentError for several
        slides: use :attr:`shapes`."""
        if len(self.shapes) != 1:
            raise InvalidArgumentError(f"a grid over {len(self.shapes)} slides has one shape per slide: use .shapes")
        return self.shapes[0]

    def __len__(self) -> int:
        return len(self.patches)

    def __iter__(self) -> Iterator[Tuple[int, int, int, int]]:
        for row in self.patches:
            yield tuple(int(v) for v in row)  # type: ignore[misc]

    def __repr__(self) -> str:
        n = len(self.slides)
        which = _slide_name(self.slides[0]) if n == 1 else f"{n} slides"
        total = sum(r * c for r, c in self.shapes)
        grid = f"grid {self.shapes[0][0]}x{self.shapes[0][1]}" if n == 1 else f"{n} grids"
        return (
            f"GridSampler({which}, size={self.size}, level={self.level}, stride={self.stride}, "
            f"min_tissue={self.min_tissue:g}: {len(self)} of {total} patches, {grid})"
        )


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
    if isinstance(patches, GridSampler):
        size = patches.size if size is None else size
        rows = patches.patches
        if len(patches.slides) == 1 and rows.shape[0]:
            slide_index = int(rows[0, 0])  # a one-slide grid: its own slide index
        if patches.resolutions and len(patches.slides) == 1:
            res = patches.resolutions[0]
    elif isinstance(patches, RandomPatchSampler):
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
