"""Tissue masks and patch samplers for training and whole-slide inference (issue 14, item 3).

* :func:`tissue_mask` — a boolean mask of where the slide has tissue, computed on its thumbnail
  (at most ``max_size`` pixels a side): Otsu's threshold (Otsu 1979, "A threshold selection
  method from gray-level histograms") on the HSV saturation ``(max − min) / max`` of each RGB
  pixel (``method="saturation"``, the default: stained tissue is coloured, glass and
  background are grey or white), or on darkness ``255 − grey`` (``method="grey"``, for
  unstained or greyscale slides). Pixels above the threshold are tissue.
* :class:`RandomPatchSampler` — random patches from the tissue of many slides, seeded:
  ``weighting="slide"`` picks a slide uniformly, then a position uniformly over its tissue;
  ``weighting="area"`` is uniform over the tissue area of all slides together. A patch is kept
  when at least ``min_tissue`` of its footprint is tissue in the mask.
* :class:`GridSampler` — every patch of a regular grid over one slide (``stride`` in level
  pixels, default the patch size), filtered by ``min_tissue``, in row-major order, with its
  coordinates so that predictions can be stitched.

Patches are ``(slide_index, level, x, y)`` with ``x, y`` the top-left corner in **level-0
pixels** — the rows :func:`slidestream.read_patches` takes. Patch sizes are in pixels of
``level``. The tissue fraction of a patch is measured on the mask, whose pixels cover
``downsample`` level-0 pixels each: it is exact to the mask's resolution.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ._batch import check_int, check_positive_size, normalize_size
from ._slide import Slide

__all__ = ["TissueMask", "tissue_mask", "otsu_threshold", "RandomPatchSampler", "GridSampler"]


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


@dataclass(frozen=True)
class TissueMask:
    """Where a slide has tissue: ``mask`` bool (h, w), each pixel covering ``downsample`` ×
    ``downsample`` level-0 pixels (``mask[j, i]`` ↔ level-0 x in ``[i·d, (i+1)·d)``, y in
    ``[j·d, (j+1)·d)``); one downsample for both axes, the width's (a thumbnail keeps the aspect
    ratio, so the height's differs by less than one mask pixel over the slide); ``threshold``
    the Otsu threshold used, ``method`` its measure."""

    mask: np.ndarray
    downsample: float
    threshold: int
    method: str

    def fraction(self, x: float, y: float, width: float, height: float) -> float:
        """Share of tissue in the level-0 rectangle (x, y, width, height), measured on the mask
        (partly covered mask pixels count by their covered share; outside the slide counts as
        no tissue)."""
        return float(self._fractions(np.array([[x, y]], dtype=np.float64), width, height)[0])

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


def tissue_mask(slide: Slide, *, max_size: int = 1024, method: str = "saturation") -> TissueMask:
    """The tissue mask of ``slide`` from its thumbnail (at most ``max_size`` pixels a side,
    composited over white): see the module docs for the two methods. Raises ValueError for an
    unknown method or a ``max_size`` below 8."""
    max_size = check_int(max_size, "max_size", min_value=8)
    if method not in ("saturation", "grey"):
        raise ValueError(f"method must be 'saturation' or 'grey', not {method!r}")
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


def _patch_level0(slide: Slide, level: int, size: Tuple[int, int]) -> Tuple[float, float]:
    d = float(slide.level_downsamples[level])
    return size[0] * d, size[1] * d


class RandomPatchSampler:
    """Random patches from the tissue of ``slides`` (see the module docs).

    ``size`` (width, height) in pixels of ``level``; ``min_tissue`` in [0, 1]; ``masks``
    (one :class:`TissueMask` per slide) default to :func:`tissue_mask`; ``seed`` (an int >= 0) makes the
    sequence reproducible. Iterating yields ``(slide_index, level, x, y)`` forever;
    :meth:`sample` returns ``n`` of them as an int64 array (n, 4). A slide without tissue is
    never chosen; ValueError when no slide has any, or when ``max_tries`` candidates in a row
    miss ``min_tissue``.

    Several processes (``torch.distributed`` ranks): :meth:`split` gives rank ``r`` its own
    stream, ``SeedSequence(seed, spawn_key=(r, epoch))``, over the same slides and masks;
    :class:`slidestream.PatchBatches` calls it per epoch when ``world_size > 1``. Give the
    same ``seed`` on every rank to make the run reproducible (with ``seed=None`` each process
    draws its own entropy, :attr:`seed`: the ranks' streams still differ, but cannot be
    replayed unless that seed is recorded)."""

    def __init__(
        self,
        slides: Sequence[Slide],
        size: Tuple[int, int],
        *,
        level: int = 0,
        min_tissue: float = 0.5,
        weighting: str = "slide",
        masks: Optional[Sequence[TissueMask]] = None,
        seed: Optional[int] = None,
        max_tries: int = 1000,
    ) -> None:
        self.slides = list(slides)
        self.size = normalize_size(size)
        self.level = check_int(level, "level", min_value=0)
        for s in self.slides:
            if self.level >= s.level_count:
                raise ValueError(f"level {self.level} does not exist in {s.path!r} (level count {s.level_count})")
        if not 0.0 <= float(min_tissue) <= 1.0:
            raise ValueError(f"min_tissue must be in [0, 1], not {min_tissue!r}")
        self.min_tissue = float(min_tissue)
        if weighting not in ("slide", "area"):
            raise ValueError(f"weighting must be 'slide' or 'area', not {weighting!r}")
        self.masks: List[TissueMask] = list(masks) if masks is not None else [tissue_mask(s) for s in self.slides]
        if len(self.masks) != len(self.slides):
            raise ValueError(f"{len(self.masks)} masks for {len(self.slides)} slides")
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
            raise ValueError("no slide has tissue in its mask")
        has = (area > 0).astype(np.float64)
        self._p = (area if weighting == "area" else has) / (area if weighting == "area" else has).sum()

    def split(self, rank: int, world_size: int, *, epoch: int = 0) -> "RandomPatchSampler":
        """A sampler over the same slides, masks and settings drawing rank ``rank``'s patches of
        epoch ``epoch``: its generator is ``numpy.random.default_rng(SeedSequence(self.seed,
        spawn_key=(rank, epoch)))`` (independent of this sampler's own stream, which it leaves
        untouched; the same call gives the same stream, on any process). Splitting a split
        sampler derives from the same root seed. ``world_size`` only checks ``rank``.

        Raises ValueError when ``world_size < 1``, ``rank`` is outside ``[0, world_size)`` or
        ``epoch < 0``; TypeError for non-integers."""
        world_size = check_int(world_size, "world_size", min_value=1, allow_bool=False)
        rank = check_int(rank, "rank", min_value=0, allow_bool=False)
        if rank >= world_size:
            raise ValueError(f"rank must be in [0, world_size) = [0, {world_size}), not {rank}")
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
        rows[:, 1] = self.level
        for i in np.unique(slide_of):
            sel = np.flatnonzero(slide_of == i)
            m, cells = self.masks[int(i)], self._cells[int(i)]
            cell = cells[self._rng.integers(cells.size, size=sel.size)]
            cy, cx = np.divmod(cell, m.mask.shape[1])
            pw, ph = _patch_level0(self.slides[int(i)], self.level, self.size)
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
        (candidates below ``min_tissue`` are skipped). ValueError when ``max_tries`` candidates
        in a row miss ``min_tissue``."""
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
                raise ValueError(f"{self.max_tries} candidate patches in a row had less than {self.min_tissue:.0%} tissue; lower min_tissue or the patch size")
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


class GridSampler:
    """The patches of a grid over ``slide`` (index ``slide_index`` in the rows it returns):
    top-left corners every ``stride`` pixels of ``level`` (default: the patch size, i.e. no
    overlap; ``stride < size`` overlaps; or give ``overlap`` = size − stride instead, in pixels
    of ``level``), from the level's origin until a patch reaches the level's right / bottom
    edge (so every pixel of the level is covered; the last column and row may extend past the
    edge, read as background), kept when at least ``min_tissue`` of the footprint is tissue (``mask`` defaults
    to :func:`tissue_mask`; ``min_tissue=0`` keeps every patch and reads no mask).

    :attr:`patches` is the int64 array (n, 4) of rows (slide_index, level, x, y), row-major;
    :attr:`grid` the (column, row) of each patch in the grid, for stitching predictions into a
    (rows, cols) map of :attr:`shape`. Iterating yields the rows."""

    def __init__(
        self,
        slide: Slide,
        size: Tuple[int, int],
        *,
        level: int = 0,
        stride: Optional[Tuple[int, int]] = None,
        overlap: Optional[Any] = None,
        min_tissue: float = 0.0,
        mask: Optional[TissueMask] = None,
        slide_index: int = 0,
    ) -> None:
        size = normalize_size(size)
        level = check_int(level, "level", min_value=0)
        if level >= slide.level_count:
            raise ValueError(f"level {level} does not exist (level count {slide.level_count})")
        if overlap is not None:
            if stride is not None:
                raise ValueError("give stride or overlap, not both")
            if isinstance(overlap, (int, np.integer)) and not isinstance(overlap, (bool, np.bool_)):
                overlap = (overlap, overlap)
            ox, oy = (check_int(v, "overlap", min_value=0) for v in overlap)
            if ox >= size[0] or oy >= size[1]:
                raise ValueError(f"overlap {(ox, oy)} must be smaller than the patch size {size}")
            stride = (size[0] - ox, size[1] - oy)
        stride = normalize_size(stride if stride is not None else size) if isinstance(stride, (int, np.integer)) else check_positive_size(stride if stride is not None else size, "stride")
        if not 0.0 <= float(min_tissue) <= 1.0:
            raise ValueError(f"min_tissue must be in [0, 1], not {min_tissue!r}")
        lw, lh = slide.level_dimensions[level]
        d = float(slide.level_downsamples[level])
        cols = max(1, -(-(lw - size[0]) // stride[0]) + 1) if lw > size[0] else 1
        rows = max(1, -(-(lh - size[1]) // stride[1]) + 1) if lh > size[1] else 1
        mesh_x, mesh_y = np.meshgrid(np.arange(cols, dtype=np.int64), np.arange(rows, dtype=np.int64))
        gx, gy = mesh_x.ravel(), mesh_y.ravel()
        # Level-0 corners of the level-pixel grid (the inverse of floor(x / downsample)).
        x0 = np.ceil(gx * stride[0] * d).astype(np.int64)
        y0 = np.ceil(gy * stride[1] * d).astype(np.int64)
        keep = np.ones(gx.size, dtype=bool)
        if min_tissue > 0:
            m = mask if mask is not None else tissue_mask(slide)
            keep = m._fractions(np.stack([x0, y0], axis=1).astype(np.float64), size[0] * d, size[1] * d) >= float(min_tissue)
        self.shape = (rows, cols)
        self.grid = np.stack([gx[keep], gy[keep]], axis=1)
        n = int(keep.sum())
        self.patches = np.stack([np.full(n, check_int(slide_index, "slide_index", min_value=0)), np.full(n, level), x0[keep], y0[keep]], axis=1).astype(np.int64)

    def __len__(self) -> int:
        return len(self.patches)

    def __iter__(self) -> Iterator[Tuple[int, int, int, int]]:
        for row in self.patches:
            yield tuple(int(v) for v in row)  # type: ignore[misc]
