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
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np

from ._args import check_int, check_positive_size, normalize_size
from ._errors import InvalidArgumentError
from ._masks import (  # noqa: F401 - MaskLike, SlideLike: the aliases' public home
    MaskLike,
    SlideLike,
    TissueMask,
    _as_slide_list,
    _check_level_in,
    _footprint,
    _masks_for,
    _slide_name,
    _tissue_mask_one,
    otsu_threshold,
    tissue_mask,
)
from ._preview import plot_preview, preview
from ._slide import Slide

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


def _check_min_tissue(min_tissue: Any) -> float:
    if isinstance(min_tissue, (bool, np.bool_)) or not isinstance(min_tissue, (int, float, np.integer, np.floating)):
        raise TypeError(f"min_tissue must be a number in [0, 1], got {type(min_tissue).__name__}")
    v = float(min_tissue)
    if not 0.0 <= v <= 1.0:
        raise InvalidArgumentError(f"min_tissue must be in [0, 1], not {min_tissue!r}")
    return v


def _target_text(mpp: Any, magnification: Any, level: int) -> str:
    """How a sampler's repr names what it reads: ``mpp=…`` / ``magnification=…`` or ``level=…``."""
    if mpp is not None:
        return f"mpp={mpp:g}"
    if magnification is not None:
        return f"magnification={magnification:g}"
    return f"level={level}"


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
        self._target = _target_text(mpp, magnification, self.level)
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
            f"RandomPatchSampler({which}, size={self.size}, {self._target}, min_tissue={self.min_tissue:g}, "
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
        self._target = _target_text(mpp, magnification, level)
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
        #: The slide index of the first slide's rows (``slide_index``; slide ``k`` of
        #: :attr:`slides` has rows of index ``slide_index + k``).
        self.slide_index = first
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
            f"GridSampler({which}, size={self.size}, {self._target}, stride={self.stride}, "
            f"min_tissue={self.min_tissue:g}: {len(self)} of {total} patches, {grid})"
        )
