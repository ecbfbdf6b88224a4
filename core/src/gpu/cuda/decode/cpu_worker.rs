//! CPU decoding beside the GPU: CPU decode workers that take runs from the back of a call's
//! work queue (libjpeg-turbo straight into pinned memory, uploaded one run per copy), and the
//! fallback that decodes what nvJPEG cannot take in the slide's pool.

use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::{Bits, ChunkOut, Declined, GpuResult, TileDecoder};
use crate::codec::{decode_jpeg_into, ChunkGeometry, DecodedTile};
use crate::error::{Error, Result};
use crate::gpu::cuda::context::{Context, Stream};
use crate::gpu::cuda::counters::Counters;
use crate::gpu::cuda::io::posix::plans_by_source;
use crate::gpu::cuda::memory::{BlockHome, DevTile, PinnedBuffer};
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
    /// Copies issued from the buffers (the next run decodes into `bufs[next % 2]`).
    pub(crate) next: usize,
}

impl CpuSlot {
    /// A stream and two empty pinned buffers.
    pub(crate) fn new() -> Res<CpuSlot> {
        Ok(CpuSlot { bufs: [PinnedBuffer::new(), PinnedBuffer::new()], stream: Stream::new()?, next: 0 })
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
    ctx.make_current()?;
    let dec = CpuJpeg { counters, home };
    let run_tiles = (CPU_RUN_BYTES / tile_room(srcs)).clamp(1, CPU_RUN_TILES);
    let mut out = Vec::new();
    // Tiles whose copy is enqueued on the worker's stream: complete at its next
    // synchronisation (each holds its block, so no block is freed while a copy into it runs).
    let mut pending: Vec<(Miss, Arc<DevTile>)> = Vec::new();
    let mut raw: Vec<u8> = Vec::new();
    let mut runs = || -> Result<()> {
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
            let mut tiles = Vec::with_capacity(run.len());
            for (m, r) in run.iter().zip(src) {
                match r.map(|range| (dec.accepts(&srcs[m.src as usize], m, &raw[range.clone()]), range)) {
                    Ok((Ok(()), range)) => tiles.push((*m, Bits { ptr: raw[range.start..].as_ptr(), len: range.len() }, ())),
                    Ok((Err(Declined::Failed(e)), _)) | Err(e) => out.push((*m, Err(Some(e)))),
                    Ok((Err(Declined::Elsewhere(_)), _)) => out.push((*m, Err(None))),
                }
            }
            let (done, settled) = dec.decode(cs, srcs, tiles)?;
            out.extend(settled);
            if !done.is_empty() {
                // `decode` synchronised the worker's stream before its copy: the earlier runs'
                // tiles are complete.
                out.extend(pending.drain(..).map(|(m, t)| (m, Ok(t))));
                pending = done;
            }
        }
    };
    let r = runs();
    // The worker's stream, on every exit: its copies finish before the blocks can be freed
    // and before the slot (and its pinned buffers) returns to the pool.
    let synced = cs.stream.sync();
    r?;
    synced?;
    out.extend(pending.drain(..).map(|(m, t)| (m, Ok(t))));
    Ok(out)
}

/// Bytes of room for one decoded tile of the largest tile size of the call's sources (a whole
/// RGBA tile is the most `decode_jpeg_into` writes), 256-aligned.
fn tile_room(srcs: &[Src<'_>]) -> usize {
    srcs.iter().map(|s| (s.img.tile_width as usize * s.img.tile_height as usize * 4).next_multiple_of(256)).max().unwrap_or(256)
}

/// libjpeg-turbo on a CPU decode worker as a [`TileDecoder`]: the CPU path's decoder
/// ([`decode_jpeg_into`]: the pixels of [`Slide::read_region`]; only the tile's needed part
/// when `Miss::part` is set), straight into one of the worker's pinned buffers, then one copy
/// of the run into one device block (allocated in `home`) on the worker's stream. Counts into
/// `counters`.
pub(crate) struct CpuJpeg<'a> {
    pub(crate) counters: &'a Counters,
    pub(crate) home: BlockHome<'a>,
}

impl TileDecoder for CpuJpeg<'_> {
    type Accepted = ();
    type Workspace = CpuSlot;

    /// Every tile of a level the CPU path reads, except one the slide remembers as failed (the
    /// CPU path's memory of tile outcomes): that one fails again at once with its error.
    fn accepts(&self, src: &Src<'_>, m: &Miss, _tile: &[u8]) -> std::result::Result<(), Declined> {
        match src.slide.scan_outcome(src.level, m.col, m.row) {
            Some(Some(e)) => Err(Declined::Failed(e)),
            _ => Ok(()),
        }
    }

    /// The stored tiles (`Bits` in host memory, alive for the call) decoded into the pinned
    /// buffer of copy k (copy k − 2, the previous one from that buffer, finished at the
    /// synchronisation before copy k − 1 was issued); the worker's stream is synchronised
    /// before this run's copy is issued, so tiles of earlier calls on `cs` are complete when
    /// this returns tiles. A run whose every tile fails issues no copy (and the next run
    /// reuses the same buffer).
    fn decode(&self, cs: &mut CpuSlot, srcs: &[Src<'_>], tiles: Vec<(Miss, Bits, ())>) -> Res<ChunkOut> {
        let cuda = cuda()?;
        let room = tile_room(srcs);
        let buf = &mut cs.bufs[cs.next % 2];
        buf.ensure(tiles.len() * room)?;
        let host = buf.as_mut_slice(tiles.len() * room);
        let mut placed = Vec::with_capacity(tiles.len());
        let mut settled = Vec::new();
        let mut used = 0usize;
        for (m, bits, ()) in tiles {
            let Src { img, at, slide, level, .. } = &srcs[m.src as usize];
            // SAFETY: `Bits` of this decoder are host memory alive for the call (TileDecoder).
            let data = unsafe { std::slice::from_raw_parts(bits.ptr, bits.len) };
            let tat = crate::read::locate::tile_location(at, slide.source(), img, m.col, m.row);
            let (vw, vh) = img.valid_tile_size(m.col, m.row);
            let g = ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: vw, valid_height: vh };
            let r = decode_jpeg_into(&img.codec, data, g, m.part, &tat, &mut host[used..used + room]).map_err(|e| e.with_tile(m.col, m.row));
            // Every decode here reads the whole scan, so its outcome is remembered.
            slide.note_scan(*level, m.col, m.row, r.as_ref().map(|_| ()));
            match r {
                Ok(p) => {
                    let whole = (p.x, p.y, p.width, p.height) == (0, 0, vw, vh);
                    placed.push((m, used, p, whole));
                    used += p.used.max(4).next_multiple_of(256);
                }
                Err(e) => settled.push((m, Err(Some(e)))),
            }
        }
        if placed.is_empty() {
            return Ok((Vec::new(), settled));
        }
        let (p, block) = self.home.alloc(used, cs.stream.raw())?;
        // The worker's stream: the previous run's copy is complete after this.
        cs.stream.sync()?;
        // SAFETY: `used` bytes of the pinned buffer into the block of `used` bytes; the
        // buffer is not written again before the stream is synchronised (next-but-one run).
        cu(unsafe { cuda.cuMemcpyHtoDAsync(p, buf.ptr() as *const c_void, used, cs.stream.raw()) }, "cuMemcpyHtoDAsync")?;
        cs.next += 1;
        self.counters.cpu.fetch_add(placed.len() as u64, Relaxed);
        let mut done = Vec::with_capacity(placed.len());
        for (m, off, pl, whole) in placed {
            if !whole {
                self.counters.cpu_partial.fetch_add(1, Relaxed);
            }
            let ptr = p + (off + pl.offset) as u64;
            done.push((m, Arc::new(DevTile { ptr, x: pl.x, y: pl.y, w: pl.width, h: pl.height, pitch: pl.pitch, partial: !whole, _block: block.clone() })));
        }
        Ok((done, settled))
    }
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
