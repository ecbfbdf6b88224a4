"""A cohort pipeline on Dask: for every slide of a folder, its thumbnail, tissue mask and the
coordinates of its tissue patches, then per-patch colour statistics, all written to one Zarr
store. Runs on any dask scheduler; with ``--workers N`` on a ``distributed.LocalCluster`` of N
processes (slidestream's decode threads per worker set by :class:`SlidestreamWorkers`).
Files of the folder that are not slides (``slidestream.detect_vendor`` is None) are skipped and
listed; a slide that fails to open or read is reported and the others go on.

    python docs/examples/dask_cohort.py SLIDE_DIR OUT.zarr --workers 4 [--patch 256 --level 0]

Zarr layout (zarr v3):
  slides/{i}/thumbnail    uint8 (h, w, 3)   RGB thumbnail, at most --thumbnail px a side
  slides/{i}/tissue_mask  bool  (h', w')    Otsu on saturation (slidestream.sampling.tissue_mask);
                                            attrs: downsample (level-0 px per mask px), threshold
  slides/{i}/patches      int64 (k, 4)      (slide_index, level, x, y), x, y level-0 px, tissue ≥ --min-tissue
  slides/{i} attrs        path, dimensions, level_count, mpp (or error, for a slide that failed)
  patch_stats/rows        int64 (n, 4)      every slide's patch rows, concatenated in slide order
  patch_stats/values      float32 (n, 4)    per patch: mean R, G, B, non-white share
                                            (attrs: columns); written by the workers, chunk by chunk

Needs: dask[array,distributed], zarr>=3 (no pandas: per-patch values stay a dask array).
"""

from __future__ import annotations

import argparse
import functools
import glob
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

import slidestream.dask as ssd
from slidestream import progress
from slidestream.sampling import GridSampler, tissue_mask


def slide_summary(index: int, slide: Any, *, out: str, patch: int, level: int, min_tissue: float, thumbnail: int) -> Dict[str, Any]:
    """One slide's part (runs in a worker): thumbnail, tissue mask and tissue patch rows,
    written to ``out``'s group ``slides/{index}`` (made beforehand by the client). Returns the
    rows and a few numbers for the client."""
    import zarr

    thumb = slide.get_thumbnail((thumbnail, thumbnail))
    mask = tissue_mask(slide, max_size=thumbnail)
    grid = GridSampler(slide, patch, level=min(level, slide.level_count - 1), min_tissue=min_tissue, mask=mask, slide_index=index)
    g = zarr.open_group(out, mode="r+", path=f"slides/{index}")
    g.create_array("thumbnail", data=thumb, overwrite=True)
    m = g.create_array("tissue_mask", data=mask.mask, overwrite=True)
    m.attrs.update({"downsample": mask.downsample, "threshold": mask.threshold, "method": mask.method})
    g.create_array("patches", data=grid.patches if len(grid.patches) else np.zeros((0, 4), np.int64), overwrite=True)
    mpp = slide.mpp
    g.attrs.update({"dimensions": list(slide.dimensions), "level_count": slide.level_count, "mpp": list(mpp) if mpp else None})
    return {"index": index, "patches": grid.patches, "tissue_fraction": float(mask.mask.mean())}


COLUMNS = ["mean_r", "mean_g", "mean_b", "tissue"]


def patch_stats(batch: np.ndarray) -> np.ndarray:
    """Per-patch values of one block of patches (uint8 (k, h, w, 3)) as float32 (k, 4): mean
    R, G, B and the share of non-white pixels (darkest channel below 220, on every 4th pixel of
    every 4th row). Integer sums, no float copy of the block: ~0.1 ms a 256² patch, so the
    pipeline's time is the slides' (reading and decoding), not numpy's."""
    k, h, w, _ = batch.shape
    out = np.empty((k, len(COLUMNS)), np.float32)
    out[:, :3] = batch.sum(axis=1, dtype=np.uint32).sum(axis=1) / (h * w)
    sub = batch[:, ::4, ::4]
    out[:, 3] = (np.minimum(np.minimum(sub[..., 0], sub[..., 1]), sub[..., 2]) < 220).mean(axis=(1, 2))
    return out


def run(paths: Sequence[str], out: str, *, patch: int = 256, level: int = 0, min_tissue: float = 0.5, thumbnail: int = 1024,
        task_tiles: int = 256) -> Dict[str, Any]:
    """The whole pipeline on the active dask scheduler (a distributed client if one is
    active). Returns timings (s) and counts."""
    import zarr

    root = zarr.open_group(out, mode="w")
    slides = root.create_group("slides")
    for i, p in enumerate(paths):
        slides.create_group(str(i)).attrs["path"] = os.fspath(p)
    t0 = time.perf_counter()
    part = functools.partial(slide_summary, out=out, patch=patch, level=level, min_tissue=min_tissue, thumbnail=thumbnail)
    # A slide that fails (a damaged file) is reported, not fatal: the others go on.
    with progress.dask_bar():  # dask's progress bar on a local scheduler (slidestream.progress)
        results = ssd.map_slides(paths, part, with_index=True, errors="return").compute()
    failed = [{"index": r.index, "path": os.fspath(r.path), "error": f"{type(r.error).__name__}: {r.error}"} for r in results if isinstance(r, ssd.SlideFailure)]
    summaries: List[Dict[str, Any]] = [r for r in results if not isinstance(r, ssd.SlideFailure)]
    for f in failed:
        slides[str(f["index"])].attrs["error"] = f["error"]
    t1 = time.perf_counter()
    rows = np.concatenate([s["patches"] for s in summaries]) if summaries else np.zeros((0, 4), np.int64)
    stats = root.create_group("patch_stats")
    stats.create_array("rows", data=rows, overwrite=True)
    patches = ssd.read_patches(paths, rows, patch, task_tiles=task_tiles)  # tasks sized by tiles
    values = patches.map_blocks(patch_stats, dtype=np.float32, drop_axis=[2, 3], chunks=(patches.chunks[0], (len(COLUMNS),)))
    chunk = min(1 << 16, max(1, rows.shape[0]))  # Zarr wants regular chunks: the tile-sized blocks are merged (small: 16 B a patch)
    target = stats.create_array("values", shape=(rows.shape[0], len(COLUMNS)), chunks=(chunk, len(COLUMNS)), dtype="f4", overwrite=True)
    target.attrs["columns"] = COLUMNS
    if rows.shape[0]:
        with progress.dask_bar():
            values.rechunk((chunk, len(COLUMNS))).to_zarr(target)
    t2 = time.perf_counter()
    return {"slides": len(paths), "failed": failed, "patches": int(rows.shape[0]), "summary_s": t1 - t0, "patches_s": t2 - t1, "total_s": time.perf_counter() - t0}


def find_slides(folder_or_glob: str) -> Tuple[List[str], List[str]]:
    """(slides, skipped): the entries of a folder (or the matches of a glob), sorted, split by
    :func:`slidestream.detect_vendor` into slides slidestream can open and everything else
    (reference files, notes, subfolders that are not DICOM series)."""
    import slidestream

    found = sorted(glob.glob(os.path.join(folder_or_glob, "*")) if os.path.isdir(folder_or_glob) else glob.glob(folder_or_glob))
    slides = [p for p in found if slidestream.detect_vendor(p) is not None]
    return slides, [p for p in found if p not in set(slides)]


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("slides", help="a folder of slides (every file in it) or a glob")
    ap.add_argument("out", help="Zarr store to write (replaced)")
    ap.add_argument("--workers", type=int, default=0, help="LocalCluster worker processes (0: dask's threaded scheduler)")
    ap.add_argument("--threads", type=int, default=1, help="threads per worker")
    ap.add_argument("--patch", type=int, default=256)
    ap.add_argument("--level", type=int, default=0)
    ap.add_argument("--min-tissue", type=float, default=0.5)
    ap.add_argument("--thumbnail", type=int, default=1024)
    a = ap.parse_args(argv)
    paths, skipped = find_slides(a.slides)
    for p in skipped:
        print(f"skipped (not a slide): {p}")
    if not paths:
        raise SystemExit(f"no slides in {a.slides}")
    kw = dict(patch=a.patch, level=a.level, min_tissue=a.min_tissue, thumbnail=a.thumbnail)
    if a.workers:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=a.workers, threads_per_worker=a.threads, processes=True) as cluster, Client(cluster) as client:
            ssd.setup_workers(client)
            result = run(paths, a.out, **kw)
    else:
        result = run(paths, a.out, **kw)
    for f in result["failed"]:
        print(f"failed: {f['path']}: {f['error']}")
    print(result)


if __name__ == "__main__":
    main()
