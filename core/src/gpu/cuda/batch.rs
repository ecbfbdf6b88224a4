//! One device read (`Slide::read_regions_device`, `read_patches_device`): the patches of any
//! slides and levels planned together, their tiles deduplicated and looked up in the device
//! cache, the misses of every slide decoded through one work queue (scheduler), then every
//! patch assembled by one kernel into one device array.

use std::ffi::c_int;
use std::sync::Arc;

use super::context::SyncOnDrop;
use super::engine::{engine, Engine};
use super::kernels::PatchDesc;
use super::lanes::Lane;
use super::memory::DevTile;
use super::queue::{Miss, Need, Src};
use super::sys::{cu, cuda};
use super::trace;
use crate::error::{Error, GpuError, Result};
use crate::gpu::{DeviceArray, DeviceBatch, DeviceOptions};
use crate::read::sources::Sources;
use crate::read::{cost_rank, decode_cost, locate_tile, BatchPlan, LevelGeom};
use crate::slide::{PatchRequest, Slide};

/// Read `locations` (same-sized patches of one level) into one device array on `opts.device`:
/// the one-slide case of [`read_batch`].
pub(crate) fn read_regions(slide: &Slide, locations: &[(i64, i64)], level: usize, size: (u64, u64), opts: &DeviceOptions) -> Result<DeviceBatch> {
    let requests: Vec<PatchRequest<'_>> = locations.iter().map(|&location| PatchRequest { slide, level, location }).collect();
    read_batch(&requests, size, opts)
}

/// Read a batch of same-sized patches of any slides and levels into one device array
/// (n, height, width, `opts.channels`) on `opts.device`: one engine call (one plan, one work
/// queue for the tiles of every slide, one assembly launch).
pub(crate) fn read_batch(requests: &[PatchRequest<'_>], size: (u64, u64), opts: &DeviceOptions) -> Result<DeviceBatch> {
    let e = engine(opts.device)?;
    if let Some(err) = &e.io.error {
        return Err(GpuError::Unavailable(err.clone()).into());
    }
    // The caller's current context is restored when the read returns (context.rs).
    let _restore = super::context::CurrentGuard::save()?;
    e.make_current()?;
    // Given back to the pool when dropped, a panic included.
    let mut lane = e.take_lane()?;
    e.read_batch(&mut lane, requests, size, opts)
}

impl Engine {
    fn read_batch(&self, lane: &mut Lane, requests: &[PatchRequest<'_>], size: (u64, u64), opts: &DeviceOptions) -> Result<DeviceBatch> {
        let t_entry = std::time::Instant::now();
        let cuda = cuda()?;
        // The (slide, level) sources in order of first use, and one plan of every patch.
        let mut sources: Sources<Src<'_>> = Sources::new();
        let mut plan = BatchPlan::new();
        let mut patch_src: Vec<u32> = Vec::with_capacity(requests.len());
        for r in requests {
            let key = (r.slide.id(), r.level as u32);
            let si = sources.index(key.0, key.1, || {
                let (img, downsample, at) = r.slide.level_image(r.level)?;
                Ok(Src { slide: r.slide, level: r.level, img, downsample, at })
            })? as u32;
            let s = &sources.items[si as usize];
            plan.push(&LevelGeom { slide: key.0, level: key.1, image: s.img, downsample: s.downsample }, r.location, size);
            patch_src.push(si);
        }
        let srcs = sources.items.as_slice();
        let n = requests.len();
        let ch = opts.channels as usize;
        let (w, h) = (size.0 as usize, size.1 as usize);
        let bytes = n * w * h * ch;
        // Output from the engine's pool (reused across calls); freed when the array is dropped
        // (`free_array`: stream-ordered unless its pointer was handed out without a stream).
        // The lane's stream is synchronised before the array is returned, so the allocation is
        // complete for every consumer.
        let mut out = 0;
        if bytes > 0 {
            let stream = lane.slots[0].stream.raw();
            out = self.counters.trace.time(trace::OUTPUT, || self.output_pool.alloc(bytes, stream))?;
        }
        let array = DeviceArray { ptr: out, shape: vec![n, h, w, ch], device: self.device, pid: self.ctx.pid(), free_on: Default::default() };
        if bytes == 0 {
            return Ok(DeviceBatch { array, errors: (0..n).map(|_| None).collect() });
        }
        // On an error return the allocation's stream is synchronised before `array` is freed on
        // the engine's free stream (declared after `array`, so dropped before it).
        let mut sync_on_error = SyncOnDrop { stream: lane.slots[0].stream.raw(), armed: true };
        if plan.has_pieces() {
            // A positioned level (Ventana BIF's stitched tiles, MIRAX camera images) is placed piece by
            // piece, which the assembly kernel does not do: such a batch is read on the CPU
            // path (the same pixels by construction) and uploaded, and the reason recorded.
            self.note_cpu("positioned tiles (overlapping stitched tiles, e.g. Ventana BIF, MIRAX): batch read on the CPU path and uploaded".into());
            let mut host = vec![0u8; bytes];
            if ch == 3 {
                crate::slide::read_patches_into(requests, &crate::slide::ReadOptions { size, background: opts.background }, &mut host)?;
            } else {
                for (r, dst) in requests.iter().zip(host.chunks_mut(w * h * ch)) {
                    r.slide.read_region_into(r.location, r.level, size, dst)?;
                }
            }
            let stream = lane.slots[0].stream.raw();
            // SAFETY: `out` holds `bytes` bytes; the copy reads `host` (alive until the stream is
            // synchronised below).
            cu(unsafe { cuda.cuMemcpyHtoDAsync(out, host.as_ptr() as *const std::ffi::c_void, bytes, stream) }, "cuMemcpyHtoDAsync")?;
            lane.slots[0].stream.sync()?;
            sync_on_error.armed = false;
            return Ok(DeviceBatch { array, errors: (0..n).map(|_| None).collect() });
        }
        // Tiles of every patch, deduplicated (the read layer's batch plan).
        let mut needs: Vec<Need> = plan
            .tiles
            .iter()
            .map(|t| Need { src: sources.get(t.key.slide, t.key.level) as u32, col: t.key.col, row: t.key.row, part: t.part, tile: None, err: None })
            .collect();
        let patches: Vec<PatchDesc> = plan
            .patches
            .iter()
            .zip(&patch_src)
            .map(|(pg, &si)| {
                let img = srcs[si as usize].img;
                PatchDesc {
                    rx: pg.rect.x,
                    ry: pg.rect.y,
                    col0: pg.col0 as i64,
                    row0: pg.row0 as i64,
                    gcols: pg.cols as c_int,
                    grows: pg.rows as c_int,
                    grid: pg.cells.start as c_int,
                    tile_w: img.tile_width as c_int,
                    tile_h: img.tile_height as c_int,
                    pad: 0,
                }
            })
            .collect();
        let grids: Vec<c_int> = plan.grid.iter().map(|&k| k as c_int).collect();
        // Cache lookups, then decode the misses.
        let mut misses: Vec<Miss> = Vec::new();
        for (k, need) in needs.iter_mut().enumerate() {
            let s = &srcs[need.src as usize];
            // Tile location from the read layer: missing = background; over-large: Limits;
            // past the end of the file: Format.
            let l = match locate_tile(s.img, s.slide.source(), need.col, need.row, &s.at) {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) => {
                    need.err = Some(e);
                    continue;
                }
            };
            if let Some(t) = self.cache.tiles.get(&s.key(need.col, need.row)) {
                need.tile = Some(t);
                continue;
            }
            let part = s.slide.part_if_small(s.img, (need.col, need.row), need.part);
            // The CPU decode cost model of the read layer (8 = a whole tile).
            let rank = cost_rank(decode_cost(part, s.img.valid_tile_size(need.col, need.row)));
            misses.push(Miss { need: k, src: need.src, col: need.col, row: need.row, offset: crate::io::multi::address(l), len: l.length, part, rank });
        }
        let n_miss = misses.len();
        let t_all = std::time::Instant::now();
        if !misses.is_empty() {
            self.decode_misses(lane, srcs, &mut needs, misses)?;
        }
        let t_asm = std::time::Instant::now();
        // Per-patch errors.
        let mut errors: Vec<Option<Error>> = (0..n).map(|_| None).collect();
        for (p, pg) in plan.patches.iter().enumerate() {
            if let Some(err) = plan.grid[pg.cells.clone()].iter().find_map(|&k| needs[k].err.as_ref()) {
                errors[p] = Some(err.clone());
            }
        }
        self.assemble(lane, srcs, &needs, &grids, &patches, size, opts, out)?;
        sync_on_error.armed = false;
        drop(needs); // tiles not cached are freed now that the kernels are done
        self.cache.bound_held_bytes(0);
        self.counters.trace.since(trace::ASSEMBLE, t_asm);
        if trace::on() && n_miss >= 256 {
            self.counters.trace.report_call(n, n_miss, t_all, t_entry);
        }
        Ok(DeviceBatch { array, errors })
    }

    /// Give a decoded tile to its need, and to the cache unless it is partial.
    pub(crate) fn finish(&self, srcs: &[Src<'_>], needs: &mut [Need], m: Miss, t: Arc<DevTile>) {
        let nd = &mut needs[m.need];
        self.cache_tile(srcs[m.src as usize].key(nd.col, nd.row), &t);
        nd.tile = Some(t);
    }
}
