//! CPU decoding beside the GPU: CPU decode workers that take runs from the back of a call's
//! work queue (libjpeg-turbo straight into pinned memory, uploaded one run per copy), and the
//! fallback that decodes what nvJPEG cannot take in the slide's pool.

use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::GpuResult;
use crate::codec::{decode_jpeg_into, ChunkGeometry, DecodedTile};
use crate::error::{Error, Result};
use crate::gpu::cuda::context::{Context, Stream};
use crate::gpu::cuda::counters::Counters;
use crate::gpu::cuda::io::posix::plans_by_source;
use crate::gpu::cuda::memory::{BlockHome, DevBlock, DevTile, PinnedBuffer};
use crate::gpu::cuda::pool::{Pool, Pooled, Wait};
use crate::gpu::cuda::queue::Src;
use crate::gpu::cuda::queue::{Miss, WorkQueue};
use crate::gpu::cuda::sys::{cu, cuda, Res};
use crate::read::fetch::decode_tiles;
use crate::read::sources::group_by_source;

/// Tiles a CPU decode worker takes from the work queue at a time (decoded, then uploaded in one
/// copy while it decodes the next run).
pub(crate) const CPU_RUN_TILES: usize = 8;
/// Pinned bytes of one CPU worker's run buffer (fewer tiles per run when tiles are large).
pub(crate) const CPU_RUN_BYTES: usize = 8 << 20;
/// Cap of the default number of CPU decode workers (cores − lanes; measured up to 12 on the
/// H200's 16 cores).
const DEFAULT_MAX_CPU_WORKERS: usize = 32;

/// A CPU decode worker's device resources: a stream for its uploads and two pinned buffers
/// (one filled while the other's copy runs). Freed when dropped.
pub(crate) struct CpuSlot {
    pub(crate) bufs: [PinnedBuffer; 2],
    pub(crate) stream: Stream,
}

impl CpuSlot {
    /// A stream and two empty pinned buffers.
    pub(crate) fn new() -> Res<CpuSlot> {
        Ok(CpuSlot { bufs: [PinnedBuffer::new(), PinnedBuffer::new()], stream: Stream::new()? })
    }
}

/// The engine's CPU decode workers.
pub(crate) struct CpuWorkers {
    pub(crate) pool: Pool<CpuSlot>,
    /// Workers that join the GPU lanes on large batches (`SLIDESTREAM_GPU_CPU_WORKERS`).
    pub(crate) workers: usize,
    /// Order of the work queue: by estimated CPU cost, then offset (`true`, default), or by
    /// offset only (`SLIDESTREAM_GPU_SPLIT=offset`).
    pub(crate) split_by_cost: bool,
}

impl CpuWorkers {
    /// `workers` (default: one per core the `lanes` leave, each lane's thread preparing chunks
    /// and waiting on nvJPEG; at most `DEFAULT_MAX_CPU_WORKERS`, since each holds a stream and
    /// two pinned buffers for the process; at most 256 when set).
    pub(crate) fn new(workers: Option<usize>, lanes: usize, split_by_cost: bool) -> CpuWorkers {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = workers.map_or(cores.saturating_sub(lanes).min(DEFAULT_MAX_CPU_WORKERS), |v| v.min(256));
        CpuWorkers { pool: Pool::default(), workers, split_by_cost }
    }
}

impl CpuWorkers {
    /// Up to `n` CPU workers' resources, made as needed (never more than `workers` exist);
    /// fewer when concurrent calls hold them. A worker that cannot start is noted in
    /// `counters` (`gpu_stats()["cpu_reason"]`).
    pub(crate) fn take(&self, n: usize, counters: &Counters) -> Vec<Pooled<'_, CpuSlot>> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match self.pool.take(self.workers, Wait::No, CpuSlot::new) {
                Some(Ok(cs)) => out.push(cs),
                Some(Err(e)) => {
                    counters.note_cpu(format!("CPU decode worker not started: {e}"));
                    break;
                }
                None => break,
            }
        }
        out
    }
}

/// A CPU decode worker: takes runs of up to [`CPU_RUN_TILES`] tiles from the back of `q`
/// (the tiles it decodes fastest when the queue is ordered by cost), reads them with
/// coalesced `pread`s, decodes each with libjpeg-turbo straight into a pinned buffer
/// ([`decode_jpeg_into`]: the CPU path's decoder, so the pixels are those of
/// [`Slide::read_region`]; only the tile's needed part when `Miss::part` is set) and
/// uploads the run in one copy into one device block (allocated in `home`), while it decodes
/// the next run into its other buffer. Runs on its own thread with `ctx` made current; counts
/// into `counters`.
pub(crate) fn cpu_worker(
    ctx: &Context,
    counters: &Counters,
    home: BlockHome<'_>,
    cs: &mut CpuSlot,
    srcs: &[Src<'_>],
    q: &WorkQueue<'_>,
) -> Result<Vec<(Miss, GpuResult)>> {
    let cuda = cuda()?;
    ctx.make_current()?;
    // Room for one decoded tile of the largest tile size of the call's sources (a whole one
    // is the most `decode_jpeg_into` writes).
    let tile_room = srcs.iter().map(|s| (s.img.tile_width as usize * s.img.tile_height as usize * 4).next_multiple_of(256)).max().unwrap_or(256);
    let run_tiles = (CPU_RUN_BYTES / tile_room).clamp(1, CPU_RUN_TILES);
    let mut out = Vec::new();
    let mut pending: Vec<(Miss, Arc<DevTile>)> = Vec::new();
    // Every block of this call, released only after the final synchronisation (an error
    // must not free a block, or reuse a pinned buffer, while a copy into it still runs).
    let mut keep: Vec<Arc<DevBlock>> = Vec::new();
    let mut raw: Vec<u8> = Vec::new();
    let mut runs = || -> Result<()> {
        let mut k = 0usize;
        loop {
            let run = q.back(run_tiles);
            if run.is_empty() {
                return Ok(());
            }
            // Read: the run's tiles into `raw`, one plan per slide, one request per coalesced
            // span.
            let plans = plans_by_source(srcs, run);
            raw.resize(plans.iter().map(|(_, p)| p.read_bytes() as usize).sum(), 0);
            let mut src: Vec<std::result::Result<std::ops::Range<usize>, Error>> = (0..run.len()).map(|_| Err(Error::Usage(String::new()))).collect();
            let mut base = 0usize;
            for (si, plan) in &plans {
                let s = &srcs[*si as usize];
                let part = &mut raw[base..base + plan.read_bytes() as usize];
                // The read layer's plan-to-bytes loop, on this worker's thread.
                let results = plan.read_into_serial(s.slide.source(), part);
                for sp in plan.spans() {
                    src[sp.id] = match &results[sp.request] {
                        Ok(()) => Ok(base + sp.start..base + sp.start + sp.len),
                        Err(e) => Err(Error::io_shared(&crate::read::locate::tile_location(&s.at, s.slide.source(), s.img, run[sp.id].col, run[sp.id].row), e)),
                    };
                }
                base += plan.read_bytes() as usize;
                counters.posix_bytes.fetch_add(plan.read_bytes(), Relaxed);
                counters.posix_requests.fetch_add(plan.requests.len() as u64, Relaxed);
            }
            // Decode into the pinned buffer of copy k; copy k - 2 (the previous one from this
            // buffer) finished at the synchronisation before copy k - 1 was issued. `k`
            // advances only when a copy is issued: a run whose every tile failed issues none,
            // and the next run reuses the same buffer.
            let buf = &mut cs.bufs[k % 2];
            buf.ensure(run.len() * tile_room)?;
            let host = buf.as_mut_slice(run.len() * tile_room);
            let mut placed = Vec::with_capacity(run.len());
            let mut used = 0usize;
            for (m, r) in run.iter().zip(src) {
                let range = match r {
                    Ok(range) => range,
                    Err(e) => {
                        out.push((*m, Err(Some(e))));
                        continue;
                    }
                };
                let Src { img, at, slide, level, .. } = &srcs[m.src as usize];
                // The slide's memory of tile outcomes (the CPU path's rule): a tile known
                // to fail fails again at once; every decode here reads the whole scan, so
                // its outcome is remembered.
                if let Some(Some(e)) = slide.scan_outcome(*level, m.col, m.row) {
                    out.push((*m, Err(Some(e))));
                    continue;
                }
                let tat = crate::read::locate::tile_location(at, slide.source(), img, m.col, m.row);
                let (vw, vh) = img.valid_tile_size(m.col, m.row);
                let g = ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: vw, valid_height: vh };
                let r = decode_jpeg_into(&img.codec, &raw[range], g, m.part, &tat, &mut host[used..used + tile_room]).map_err(|e| e.with_tile(m.col, m.row));
                slide.note_scan(*level, m.col, m.row, r.as_ref().map(|_| ()));
                match r {
                    Ok(p) => {
                        let whole = (p.x, p.y, p.width, p.height) == (0, 0, vw, vh);
                        placed.push((*m, used, p, whole));
                        used += p.used.max(4).next_multiple_of(256);
                    }
                    Err(e) => out.push((*m, Err(Some(e)))),
                }
            }
            if placed.is_empty() {
                continue;
            }
            let (p, block) = home.alloc(used, cs.stream.raw())?;
            keep.push(block.clone());
            // The worker's stream: the previous run's copy is complete after this.
            cs.stream.sync()?;
            out.extend(pending.drain(..).map(|(m, t)| (m, Ok(t))));
            // SAFETY: `used` bytes of the pinned buffer into the block of `used` bytes; the
            // buffer is not written again before the stream is synchronised (next-but-one run).
            cu(unsafe { cuda.cuMemcpyHtoDAsync(p, buf.ptr() as *const c_void, used, cs.stream.raw()) }, "cuMemcpyHtoDAsync")?;
            k += 1;
            counters.cpu.fetch_add(placed.len() as u64, Relaxed);
            for (m, off, pl, whole) in placed {
                if !whole {
                    counters.cpu_partial.fetch_add(1, Relaxed);
                }
                let ptr = p + (off + pl.offset) as u64;
                pending
                    .push((m, Arc::new(DevTile { ptr, x: pl.x, y: pl.y, w: pl.width, h: pl.height, pitch: pl.pitch, partial: !whole, _block: block.clone() })));
            }
        }
    };
    let r = runs();
    // The worker's stream, on every exit: its copies finish before the blocks can be freed
    // and before the slot (and its pinned buffers) returns to the pool.
    let synced = cs.stream.sync();
    drop(keep);
    r?;
    synced?;
    out.extend(pending.drain(..).map(|(m, t)| (m, Ok(t))));
    Ok(out)
}

/// Read and decode `misses` (tiles of any of the call's sources `srcs`) on the CPU, whole,
/// one result per tile: per source, the read layer's tile decoding
/// ([`crate::read::fetch::decode_tiles`]: the CPU path's host tile cache, read plan,
/// memory of tile outcomes and parallel decode in the slide's pool), so these tiles follow
/// every rule of the CPU path and land in its cache.
pub(crate) fn cpu_decode(counters: &Counters, srcs: &[Src<'_>], misses: &[Miss]) -> Vec<(Miss, std::result::Result<Arc<DecodedTile>, Error>)> {
    let mut out = Vec::with_capacity(misses.len());
    for (si, ids) in group_by_source(misses, |m| m.src) {
        let s = &srcs[si as usize];
        let batch = s.slide.level_batch(s.img, &s.at, s.level);
        let coords: Vec<(u64, u64)> = ids.iter().map(|&i| (misses[i].col, misses[i].row)).collect();
        let got = decode_tiles(&batch, &coords, None);
        counters.posix_bytes.fetch_add(got.read_bytes, Relaxed);
        counters.posix_requests.fetch_add(got.read_requests, Relaxed);
        for (&i, r) in ids.iter().zip(got.tiles) {
            let m = misses[i];
            out.push((
                m,
                r.and_then(|t| {
                    // Misses were located: a missing tile here is a caller bug, reported as the
                    // read layer would report a tile past the end of the file.
                    t.ok_or_else(|| {
                        Error::format(
                            &crate::read::locate::tile_location(&s.at, s.slide.source(), s.img, m.col, m.row),
                            "tile plane lies past the end of the file or is missing",
                        )
                    })
                }),
            ));
        }
    }
    out
}
