//! The SM JPEG decoder (issue 32): baseline JPEG tiles entropy-decoded one segment per thread and
//! inverse-DCT'd one block per thread on the GPU's multiprocessors, with the arithmetic of
//! `codec/jpeg_sm.h` (the same C the host tests check against libjpeg-turbo).
//!
//! [`SmJpeg`] is the engine's decoder (a [`TileDecoder`], routed by the batch driver when
//! `SLIDESTREAM_GPU_SM_DECODER` turns it on); [`probe`] is the step-2 experiment: how
//! many tiles a second each stage decodes over a batch of real tiles, in segment order and
//! sorted by size, and whether the device's samples equal libjpeg-turbo's.

use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use super::slot::Slot;
use super::{Bits, ChunkOut, Declined, NvEnv, TileDecoder};
use crate::codec::jpeg_sm::{prepare, SmError, SmPrepared, SmStatus, SmjSegment, SmjTables, SmjTile};
use crate::error::GpuError;
use crate::gpu::cuda::context::{device_arch, Context, Stream};
use crate::gpu::cuda::kernels::{arg, launch, ConvDesc, Module};
use crate::gpu::cuda::memory::{as_bytes, DevTile, StreamAlloc};
use crate::gpu::cuda::queue::{Miss, Src};
use crate::gpu::cuda::sys::{cu, cuda, Res};
use crate::index::Photometric;

/// The kernels' source: the decoding functions, then the kernels.
const SOURCE: &str = concat!(include_str!("../../../codec/jpeg_sm.h"), "\n", include_str!("../kernels/jpeg_sm.cu"));

/// One measured variant of a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageTime {
    /// What ran: stage, order, threads per block.
    pub variant: String,
    /// Median seconds of the timed rounds (launch to stream synchronised).
    pub median_s: f64,
    /// Fastest round.
    pub min_s: f64,
}

/// What [`probe`] measured over one batch of tiles.
#[derive(Debug, Clone, Default)]
pub struct SmProbe {
    /// Streams given.
    pub streams: usize,
    /// Streams the SM decoder took (the rest were declined by `prepare`).
    pub tiles: usize,
    /// Why streams were declined (first few).
    pub declined: Vec<String>,
    /// Entropy-coded segments (tiles, or restart intervals).
    pub segments: usize,
    /// Distinct table sets.
    pub table_sets: usize,
    /// Compressed bytes of the tiles taken.
    pub compressed_bytes: u64,
    /// 8 × 8 blocks of all components.
    pub blocks: u64,
    /// Host seconds to prepare every stream (on the rayon pool), and the pool's threads.
    pub prepare_s: f64,
    /// Threads of the pool that prepared them.
    pub prepare_threads: usize,
    /// Seconds to compile and load the kernels.
    pub compile_s: f64,
    /// Entropy decoding, per variant.
    pub huffman: Vec<StageTime>,
    /// IDCT, per variant.
    pub idct: Vec<StageTime>,
    /// Segments whose status was not OK, by status.
    pub failed: Vec<(String, usize)>,
    /// Tiles compared with libjpeg-turbo, tiles that differ, largest sample difference.
    pub compared: usize,
    /// Tiles whose samples differ.
    pub differing: usize,
    /// Largest absolute sample difference.
    pub max_diff: u8,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Run the SM decoder's two stages over `streams` (complete JPEG streams, tables spliced) on
/// device `device`: every stream prepared on the host, packed and uploaded once, then each
/// stage timed `rounds` times (after one untimed launch) for each variant: entropy decoding
/// in segment order, sorted by compressed size (largest first) and, when every tile shares one
/// table set, sorted with the tables in shared memory; 32/64/128 threads a block;
/// the IDCT at 64 and 128. With `verify`, the device's planes are downloaded and compared with
/// libjpeg-turbo's raw planes (`codec::jpeg::decode_planes`, three-component streams) tile by
/// tile.
///
/// # Errors
/// [`GpuError`] from CUDA or NVRTC, or when nothing was left to decode.
pub fn probe(device: usize, streams: &[Vec<u8>], rounds: usize, verify: bool) -> Result<SmProbe, GpuError> {
    let mut r = SmProbe { streams: streams.len(), ..Default::default() };
    let t = Instant::now();
    let prepared: Vec<Result<SmPrepared, SmError>> = streams.par_iter().map(|s| prepare(s)).collect();
    r.prepare_s = t.elapsed().as_secs_f64();
    r.prepare_threads = rayon::current_num_threads();

    // Pack: streams back to back, one table set per distinct DHT/DQT bytes, coefficient
    // (and sample) offsets per tile.
    let mut data: Vec<u8> = Vec::new();
    let mut tiles: Vec<SmjTile> = Vec::new();
    let mut segs: Vec<SmjSegment> = Vec::new();
    let mut tables: Vec<SmjTables> = Vec::new();
    let mut keys: std::collections::HashMap<Vec<u8>, i32> = Default::default();
    let mut which: Vec<usize> = Vec::new();
    let mut coef_total = 0u64;
    for (i, p) in prepared.iter().enumerate() {
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                if r.declined.len() < 8 {
                    r.declined.push(e.to_string());
                }
                continue;
            }
        };
        let set = *keys.entry(p.table_key.clone()).or_insert_with(|| {
            tables.push(*p.tables);
            tables.len() as i32 - 1
        });
        let base = data.len() as u64;
        data.extend_from_slice(&streams[i]);
        let mut t = p.tile;
        t.tables = set;
        t.coef = coef_total; // offsets for now: device addresses once allocated
        coef_total += t.coefficients().next_multiple_of(64);
        for g in &p.segments {
            segs.push(SmjSegment { data: base + g.data, tile: tiles.len() as i32, ..*g });
        }
        tiles.push(t);
        which.push(i);
        r.compressed_bytes += streams[i].len() as u64;
    }
    r.tiles = tiles.len();
    r.segments = segs.len();
    r.table_sets = tables.len();
    r.blocks = coef_total / 64;
    if tiles.is_empty() {
        return Err(GpuError::Call("SM probe: no stream the SM decoder takes".into()));
    }

    let ctx = Context::process_wide(device)?;
    ctx.make_current()?;
    let t = Instant::now();
    let module = Module::compile(SOURCE, device_arch(device)?)?;
    let (huffman, idct) = (module.function("sm_huffman")?, module.function("sm_idct")?);
    r.compile_s = t.elapsed().as_secs_f64();
    let stream = Stream::new()?;
    let s = stream.raw();

    let d_data = StreamAlloc::upload(&data, s)?;
    let d_coef = StreamAlloc::new(coef_total as usize * 2, s)?;
    let d_pix = StreamAlloc::new(coef_total as usize, s)?;
    for t in &mut tiles {
        let off = t.coef;
        t.coef = d_coef.ptr() + off * 2;
        t.pix = d_pix.ptr() + off;
    }
    for g in &mut segs {
        g.data += d_data.ptr();
    }
    let d_tiles = StreamAlloc::upload(as_bytes(&tiles), s)?;
    let d_segs = StreamAlloc::upload(as_bytes(&segs), s)?;
    let d_tabs = StreamAlloc::upload(as_bytes(&tables), s)?;
    let d_status = StreamAlloc::new(segs.len() * 4, s)?;
    let mut by_size: Vec<i32> = (0..segs.len() as i32).collect();
    by_size.sort_by_key(|&k| std::cmp::Reverse(segs[k as usize].len));
    let d_order = StreamAlloc::upload(as_bytes(&by_size), s)?;
    stream.sync()?;

    let n = segs.len() as c_int;
    let run_huffman = |order: u64, block: u32, shared_set: c_int, spread: c_int| -> Res<f64> {
        let (mut p_segs, mut p_order, mut p_n, mut p_tiles, mut p_tabs, mut p_status, mut p_shared, mut p_spread) =
            (d_segs.ptr(), order, n, d_tiles.ptr(), d_tabs.ptr(), d_status.ptr(), shared_set, spread);
        let mut params = [
            arg(&mut p_segs),
            arg(&mut p_order),
            arg(&mut p_n),
            arg(&mut p_tiles),
            arg(&mut p_tabs),
            arg(&mut p_status),
            arg(&mut p_shared),
            arg(&mut p_spread),
        ];
        let t = Instant::now();
        launch(huffman, ((n as u32 * spread as u32).div_ceil(block), 1, 1), (block, 1, 1), s, &mut params, "sm_huffman")?;
        stream.sync()?;
        Ok(t.elapsed().as_secs_f64())
    };
    // Tables in shared memory when every tile uses the same set (a level's JPEGTables).
    let shared = if tables.len() == 1 { 0 } else { -1 };
    let mut variants = vec![("segment order", 0u64, -1, 1), ("sorted by size", d_order.ptr(), -1, 1)];
    if shared == 0 {
        variants.push(("sorted, tables in shared memory", d_order.ptr(), 0, 1));
    }
    // One segment per 4, 8 or 32 threads (only the first decodes): fewer segments' branches
    // diverging in one warp, more warps in flight.
    for spread in [4, 8, 32] {
        variants.push(("segment order, spread", 0u64, shared, spread));
    }
    for (name, order, shared_set, spread) in variants {
        for block in [32u32, 64, 128] {
            run_huffman(order, block, shared_set, spread)?;
            let mut v: Vec<f64> = (0..rounds.max(1)).map(|_| run_huffman(order, block, shared_set, spread)).collect::<Res<_>>()?;
            let min_s = v.iter().copied().fold(f64::INFINITY, f64::min);
            let what = if spread > 1 {
                format!("huffman, one segment per {spread} threads, {block} threads/block")
            } else {
                format!("huffman, {name}, {block} threads/block")
            };
            r.huffman.push(StageTime { variant: what, median_s: median(&mut v), min_s });
        }
    }
    let max_blocks = tiles.iter().map(|t| (0..t.ncomp as usize).map(|c| t.bw[c] as u32 * t.bh[c] as u32).sum::<u32>()).max().unwrap_or(1);
    let run_idct = |block: u32| -> Res<f64> {
        let (mut p_tiles, mut p_tabs) = (d_tiles.ptr(), d_tabs.ptr());
        let mut params = [arg(&mut p_tiles), arg(&mut p_tabs)];
        let t = Instant::now();
        launch(idct, (max_blocks.div_ceil(block), tiles.len() as u32, 1), (block, 1, 1), s, &mut params, "sm_idct")?;
        stream.sync()?;
        Ok(t.elapsed().as_secs_f64())
    };
    for block in [64u32, 128] {
        run_idct(block)?;
        let mut v: Vec<f64> = (0..rounds.max(1)).map(|_| run_idct(block)).collect::<Res<_>>()?;
        let min_s = v.iter().copied().fold(f64::INFINITY, f64::min);
        r.idct.push(StageTime { variant: format!("idct, {block} threads/block"), median_s: median(&mut v), min_s });
    }

    let mut status = vec![0i32; segs.len()];
    // SAFETY: `status` holds segs.len() i32s; the stream was synchronised above.
    cu(unsafe { cuda()?.cuMemcpyDtoH(status.as_mut_ptr() as *mut std::ffi::c_void, d_status.ptr(), status.len() * 4) }, "cuMemcpyDtoH")?;
    let mut failed: std::collections::BTreeMap<String, usize> = Default::default();
    let mut tile_ok = vec![true; tiles.len()];
    for (g, &st) in segs.iter().zip(&status) {
        if st != 0 {
            *failed.entry(format!("{:?}", SmStatus::from_code(st))).or_default() += 1;
            tile_ok[g.tile as usize] = false;
        }
    }
    r.failed = failed.into_iter().collect();

    if verify {
        let mut pix = vec![0u8; coef_total as usize];
        // SAFETY: `pix` holds coef_total bytes, the allocation's size.
        cu(unsafe { cuda()?.cuMemcpyDtoH(pix.as_mut_ptr() as *mut std::ffi::c_void, d_pix.ptr(), pix.len()) }, "cuMemcpyDtoH")?;
        let base = d_pix.ptr();
        let results: Vec<Option<u8>> = tiles
            .par_iter()
            .enumerate()
            .map(|(k, t)| {
                if !tile_ok[k] || t.ncomp != 3 {
                    return None;
                }
                let want = crate::codec::jpeg::decode_planes(&streams[which[k]]).ok()?;
                let mut worst = 0u8;
                for c in 0..3 {
                    let (w, h) = t.component_size(c);
                    let pitch = t.bw[c] as usize * 8;
                    let start = (t.pix - base + t.plane[c]) as usize;
                    for y in 0..h {
                        let row = &pix[start + y * pitch..start + y * pitch + w];
                        for (a, b) in row.iter().zip(&want.0[c][y * w..(y + 1) * w]) {
                            worst = worst.max(a.abs_diff(*b));
                        }
                    }
                }
                Some(worst)
            })
            .collect();
        for d in results.into_iter().flatten() {
            r.compared += 1;
            if d > 0 {
                r.differing += 1;
            }
            r.max_diff = r.max_diff.max(d);
        }
    }
    drop((d_data, d_coef, d_pix, d_tiles, d_segs, d_tabs, d_status, d_order));
    stream.sync()?;
    drop(module);
    Ok(r)
}

/// The SM decoder's kernels (`sm_huffman`, `sm_idct`), compiled once per engine from
/// `codec/jpeg_sm.h` + `kernels/jpeg_sm.cu`.
pub(crate) struct SmKernels {
    _module: Module,
    huffman: *mut std::ffi::c_void,
    idct: *mut std::ffi::c_void,
}

// A module and its functions may be used from any thread of the context.
unsafe impl Send for SmKernels {}
unsafe impl Sync for SmKernels {}

impl SmKernels {
    /// Compile and load the kernels for `device` (its context current).
    pub(crate) fn compile(device: usize) -> Res<SmKernels> {
        let module = Module::compile(SOURCE, device_arch(device)?)?;
        let (huffman, idct) = (module.function("sm_huffman")?, module.function("sm_idct")?);
        Ok(SmKernels { _module: module, huffman, idct })
    }
}

/// Threads given to one entropy-coded segment by `sm_huffman` (only the first decodes): at 13k
/// tiles of 240² one segment per 4 threads decoded 509k tiles/s against 369k for one per
/// thread, and at 40k tiles 761k against 775k (lent H100, docs/gpu.md).
const SPREAD: c_int = 4;
/// Threads a block of `sm_huffman` and `sm_idct`.
const BLOCK: u32 = 64;
/// Most tiles one launch takes (`sm_idct`'s grid has one row of blocks per tile: the grid's
/// y extent is at most 65,535).
pub(crate) const MAX_SM_TILES: usize = 65_535;

/// The SM decoder as a [`TileDecoder`] on a lane's [`Slot`]: a batch of complete JPEG streams
/// (host memory) packed into the slot's pinned arena (so the tiles' bytes must live elsewhere)
/// and uploaded in one copy, entropy-decoded (`sm_huffman`), inverse-DCT'd (`sm_idct`), the
/// segments' statuses read back (the stream is synchronised once), then the `convert` kernel
/// (libjpeg-turbo's upsampling and colour conversion, shared with nvJPEG) writes the RGBA tiles
/// of every tile whose segments all decoded; a tile with a failed segment is handed to the CPU
/// (`Err(None)`), whose outcome (its error, or libjpeg-turbo's pixels) it then gets.
pub(crate) struct SmJpeg<'a> {
    pub(crate) kernels: &'a SmKernels,
    pub(crate) env: &'a NvEnv<'a>,
}

/// Subsampling factors `(h, v)` the `convert` kernel upsamples chroma by, for a tile whose
/// luma has sampling factors `(h0, v0)` and whose two chroma components are 1 × 1; `None` for
/// anything else.
fn convert_subsampling(t: &SmjTile) -> Option<(c_int, c_int)> {
    if t.ncomp != 3 || t.h[1] != 1 || t.v[1] != 1 || t.h[2] != 1 || t.v[2] != 1 {
        return None;
    }
    matches!((t.h[0], t.v[0]), (1, 1) | (2, 1) | (2, 2) | (1, 2)).then_some((t.h[0], t.v[0]))
}

impl TileDecoder for SmJpeg<'_> {
    type Accepted = SmPrepared;
    type Workspace = Slot;

    /// [`prepare`] takes the stream (baseline, Huffman, 8-bit, tables it can derive; a stream
    /// libjpeg-turbo would reject goes to the CPU for that outcome), and the `convert` kernel
    /// takes its geometry: 3 components, chroma 1 × 1 and luma 1–2 × 1–2, at least the tile's
    /// valid size and at most `Limits::gpu_tile_edge`, coded as the level's photometric
    /// interpretation says (R, G, B or Y, Cb, Cr).
    fn accepts(&self, src: &Src<'_>, m: &Miss, tile: &[u8]) -> std::result::Result<SmPrepared, Declined> {
        let at = || crate::read::locate::tile_location(&src.at, src.slide.source(), src.img, m.col, m.row);
        let p = prepare(tile).map_err(|e| Declined::Elsewhere(format!("{}: SM decoder: {e}", at())))?;
        let (vw, vh) = src.img.valid_tile_size(m.col, m.row);
        let t = &p.tile;
        let edge = super::nvjpeg::MAX_GPU_TILE_EDGE as i32;
        let ycc = src.img.codec.photometric == Photometric::YCbCr;
        if convert_subsampling(t).is_none() || (t.width as u32) < vw || (t.height as u32) < vh || t.width > edge || t.height > edge || p.rgb_coded == ycc {
            return Err(Declined::Elsewhere(format!(
                "{}: SM decoder: {} components, sampling {:?}x{:?}, {}x{} for a {vw}x{vh} tile, {} coded",
                at(),
                t.ncomp,
                &t.h[..t.ncomp.clamp(0, 4) as usize],
                &t.v[..t.ncomp.clamp(0, 4) as usize],
                t.width,
                t.height,
                if p.rgb_coded { "RGB" } else { "YCbCr" }
            )));
        }
        Ok(p)
    }

    fn decode(&self, slot: &mut Slot, srcs: &[Src<'_>], tiles: Vec<(Miss, Bits, SmPrepared)>) -> Res<ChunkOut> {
        let mut done = Vec::new();
        let mut settled = Vec::new();
        let mut rest = tiles;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(MAX_SM_TILES));
            let (d, s) = self.decode_launch(slot, srcs, rest)?;
            done.extend(d);
            settled.extend(s);
            rest = tail;
        }
        Ok((done, settled))
    }
}

/// One launch's inputs, laid out for a single upload: the tiles' streams back to back, then
/// (each part 256-aligned) the tile descriptors, the segment descriptors and the distinct
/// table sets (tiles with equal DHT/DQT bytes share one). Built with device offsets
/// ([`Packed::new`]), turned into device addresses once the allocations exist
/// ([`Packed::place`]), and written into the host staging buffer ([`Packed::write`]).
struct Packed {
    /// Byte offset of each tile's stream in the upload.
    data_at: Vec<usize>,
    tiles_at: usize,
    segs_at: usize,
    tabs_at: usize,
    /// Bytes of the upload.
    total: usize,
    /// Coefficients of every tile (each tile's share rounded up to 64).
    coef_total: u64,
    /// Tile descriptors: `coef` / `pix` offsets (in coefficients) until placed.
    descs: Vec<SmjTile>,
    /// Segment descriptors: `data` an offset into the upload until placed.
    segs: Vec<SmjSegment>,
    tables: Vec<SmjTables>,
}

impl Packed {
    fn new(tiles: &[(Miss, Bits, SmPrepared)]) -> Packed {
        let mut sets: std::collections::HashMap<&[u8], i32> = Default::default();
        let (mut tables, mut descs, mut segs, mut data_at) = (Vec::new(), Vec::with_capacity(tiles.len()), Vec::new(), Vec::with_capacity(tiles.len()));
        let (mut data_len, mut coef_total) = (0usize, 0u64);
        for (k, (_, bits, p)) in tiles.iter().enumerate() {
            let set = *sets.entry(p.table_key.as_slice()).or_insert_with(|| {
                tables.push(*p.tables);
                tables.len() as i32 - 1
            });
            let mut t = p.tile;
            t.tables = set;
            t.coef = coef_total;
            t.pix = coef_total;
            coef_total += t.coefficients().next_multiple_of(64);
            descs.push(t);
            for g in &p.segments {
                segs.push(SmjSegment { data: data_len as u64 + g.data, tile: k as i32, ..*g });
            }
            data_at.push(data_len);
            data_len += bits.len;
        }
        let tiles_at = data_len.next_multiple_of(256);
        let segs_at = (tiles_at + descs.len() * size_of::<SmjTile>()).next_multiple_of(256);
        let tabs_at = (segs_at + segs.len() * size_of::<SmjSegment>()).next_multiple_of(256);
        let total = tabs_at + tables.len() * size_of::<SmjTables>();
        Packed { data_at, tiles_at, segs_at, tabs_at, total, coef_total, descs, segs, tables }
    }

    /// Turn offsets into device addresses: the upload at `inputs`, coefficients (2 bytes each)
    /// at `coef`, IDCT samples (1 byte each) at `pix`.
    fn place(&mut self, inputs: u64, coef: u64, pix: u64) {
        for t in &mut self.descs {
            (t.coef, t.pix) = (coef + t.coef * 2, pix + t.pix);
        }
        for g in &mut self.segs {
            g.data += inputs;
        }
    }

    /// Write the upload into `host` (at least [`Packed::total`] bytes): the streams of `tiles`
    /// (host memory alive for the call), then the descriptors and table sets.
    fn write(&self, tiles: &[(Miss, Bits, SmPrepared)], host: &mut [u8]) {
        for ((_, bits, _), &at) in tiles.iter().zip(&self.data_at) {
            // SAFETY: `Bits` of this decoder are host memory alive for the call, outside the
            // slot's arena (TileDecoder; this decoder's documented contract).
            host[at..at + bits.len].copy_from_slice(unsafe { std::slice::from_raw_parts(bits.ptr, bits.len) });
        }
        host[self.tiles_at..self.tiles_at + self.descs.len() * size_of::<SmjTile>()].copy_from_slice(as_bytes(&self.descs));
        host[self.segs_at..self.segs_at + self.segs.len() * size_of::<SmjSegment>()].copy_from_slice(as_bytes(&self.segs));
        host[self.tabs_at..self.total].copy_from_slice(as_bytes(&self.tables));
    }
}

impl SmJpeg<'_> {
    /// One launch of each kernel over at most [`MAX_SM_TILES`] tiles.
    fn decode_launch(&self, slot: &mut Slot, srcs: &[Src<'_>], tiles: Vec<(Miss, Bits, SmPrepared)>) -> Res<ChunkOut> {
        let n = tiles.len();
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let stream = slot.stream.raw();
        let mut pk = Packed::new(&tiles);
        let (total, segs_n) = (pk.total, pk.segs.len());
        let inputs = StreamAlloc::new(total, stream)?;
        let coef = StreamAlloc::new(pk.coef_total as usize * 2, stream)?;
        let pix = StreamAlloc::new(pk.coef_total as usize, stream)?;
        let status = StreamAlloc::new(segs_n * 4, stream)?;
        pk.place(inputs.ptr(), coef.ptr(), pix.ptr());
        slot.arena.ensure(total)?;
        pk.write(&tiles, slot.arena.as_mut_slice(total));
        let Packed { descs, segs, tiles_at, segs_at, tabs_at, .. } = pk;
        let cuda = cuda()?;
        // SAFETY: `total` bytes of the pinned arena into the allocation of `total` bytes; the
        // arena is not written again before the stream is synchronised below.
        cu(unsafe { cuda.cuMemcpyHtoDAsync(inputs.ptr(), slot.arena.ptr() as *const std::ffi::c_void, total, stream) }, "cuMemcpyHtoDAsync")?;
        let (d_tiles, d_segs, d_tabs) = (inputs.ptr() + tiles_at as u64, inputs.ptr() + segs_at as u64, inputs.ptr() + tabs_at as u64);
        let (mut p_segs, mut p_order, mut p_n, mut p_tiles, mut p_tabs, mut p_status, mut p_shared, mut p_spread) =
            (d_segs, 0u64, segs_n as c_int, d_tiles, d_tabs, status.ptr(), -1 as c_int, SPREAD);
        launch(
            self.kernels.huffman,
            ((segs_n as u32 * SPREAD as u32).div_ceil(BLOCK), 1, 1),
            (BLOCK, 1, 1),
            stream,
            &mut [
                arg(&mut p_segs),
                arg(&mut p_order),
                arg(&mut p_n),
                arg(&mut p_tiles),
                arg(&mut p_tabs),
                arg(&mut p_status),
                arg(&mut p_shared),
                arg(&mut p_spread),
            ],
            "cuLaunchKernel(sm_huffman)",
        )?;
        let max_blocks = descs.iter().map(|t| (0..t.ncomp as usize).map(|c| t.bw[c] as u32 * t.bh[c] as u32).sum::<u32>()).max().unwrap_or(1);
        let (mut q_tiles, mut q_tabs) = (d_tiles, d_tabs);
        launch(
            self.kernels.idct,
            (max_blocks.div_ceil(BLOCK), n as u32, 1),
            (BLOCK, 1, 1),
            stream,
            &mut [arg(&mut q_tiles), arg(&mut q_tabs)],
            "cuLaunchKernel(sm_idct)",
        )?;
        let mut st = vec![0i32; segs_n];
        // SAFETY: `segs_n` i32s on both sides; read after the synchronisation below.
        cu(unsafe { cuda.cuMemcpyDtoHAsync(st.as_mut_ptr() as *mut std::ffi::c_void, status.ptr(), segs_n * 4, stream) }, "cuMemcpyDtoHAsync")?;
        slot.stream.sync()?;
        let mut ok = vec![true; n];
        for (g, &s) in segs.iter().zip(&st) {
            if s != 0 {
                ok[g.tile as usize] = false;
            }
        }
        // Convert the tiles that decoded into RGBA tiles carved from one block.
        let mut settled = Vec::new();
        let mut conv = Vec::new();
        let mut good = Vec::new();
        for (k, (m, _, _)) in tiles.iter().enumerate() {
            let t = &descs[k];
            let Some(sub) = convert_subsampling(t).filter(|_| ok[k]) else {
                self.env.counters.note_cpu(format!(
                    "SM decoder: tile ({}, {}) of {}: {:?}",
                    m.col,
                    m.row,
                    srcs[m.src as usize].at,
                    segs.iter().zip(&st).find(|(g, s)| g.tile == k as i32 && **s != 0).map(|(_, s)| SmStatus::from_code(*s))
                ));
                settled.push((*m, Err(None)));
                continue;
            };
            let img = srcs[m.src as usize].img;
            let (vw, vh) = img.valid_tile_size(m.col, m.row);
            let mut planes = [0u64; 3];
            let (mut pitch, mut pw, mut ph) = ([0 as c_int; 3], [0 as c_int; 3], [0 as c_int; 3]);
            for c in 0..3 {
                planes[c] = t.pix + t.plane[c];
                pitch[c] = t.bw[c] * 8;
                let (w, h) = t.component_size(c);
                (pw[c], ph[c]) = (w as c_int, h as c_int);
            }
            conv.push(ConvDesc {
                planes,
                pitch,
                pw,
                ph,
                sub_h: sub.0,
                sub_v: sub.1,
                kind: (img.codec.photometric == Photometric::YCbCr) as c_int,
                w: vw as c_int,
                h: vh as c_int,
                pad: 0,
                out: 0,
            });
            good.push(*m);
        }
        let mut done = Vec::with_capacity(good.len());
        if !conv.is_empty() {
            let sizes: Vec<usize> = conv.iter().map(|d| (d.w as usize * d.h as usize * 4).max(4).next_multiple_of(256)).collect();
            let (p, block) = self.env.home.alloc(sizes.iter().sum::<usize>().max(256), stream)?;
            let mut off = 0u64;
            for ((m, d), size) in good.iter().zip(conv.iter_mut()).zip(&sizes) {
                d.out = p + off;
                done.push((*m, Arc::new(DevTile::whole(d.out, d.w as u32, d.h as u32, block.clone()))));
                off += *size as u64;
            }
            let (mw, mh) = conv.iter().fold((1, 1), |(a, b), d| (a.max(d.w), b.max(d.h)));
            let d_conv = StreamAlloc::upload(as_bytes(&conv), stream)?;
            let mut a = d_conv.ptr();
            launch(
                self.env.kernels.convert,
                ((mw as u32).div_ceil(32), (mh as u32).div_ceil(8), conv.len() as u32),
                (32, 8, 1),
                stream,
                &mut [arg(&mut a)],
                "cuLaunchKernel(convert)",
            )?;
            self.env.counters.sm.fetch_add(conv.len() as u64, Relaxed);
        }
        // Freed stream-ordered after their last use (the convert kernel reads `pix`).
        drop((inputs, coef, pix, status));
        Ok((done, settled))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(w: usize, h: usize, sub: turbojpeg::Subsamp, quality: i32) -> Vec<u8> {
        let px: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect();
        let img = turbojpeg::Image { pixels: px.as_slice(), width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
        turbojpeg::compress(img, quality, sub).expect("compress").to_vec()
    }

    fn miss(k: u64) -> Miss {
        Miss { need: k as usize, src: 0, col: k, row: 0, offset: 0, len: 0, part: None, rank: 8 }
    }

    #[test]
    fn a_launch_packs_streams_descriptors_and_shared_tables_for_one_upload() {
        let streams =
            [stream(240, 240, turbojpeg::Subsamp::Sub2x2, 80), stream(100, 37, turbojpeg::Subsamp::None, 80), stream(64, 64, turbojpeg::Subsamp::Sub2x1, 50)];
        let tiles: Vec<(Miss, Bits, SmPrepared)> =
            streams.iter().enumerate().map(|(k, s)| (miss(k as u64), Bits { ptr: s.as_ptr(), len: s.len() }, prepare(s).expect("prepare"))).collect();
        let mut pk = Packed::new(&tiles);
        // Equal DHT/DQT bytes share one table set: quality 80 twice, 50 once.
        assert_eq!(pk.tables.len(), 2);
        assert_eq!((pk.descs[0].tables, pk.descs[1].tables, pk.descs[2].tables), (0, 0, 1));
        assert!(pk.tiles_at >= streams.iter().map(Vec::len).sum::<usize>());
        for at in [pk.tiles_at, pk.segs_at, pk.tabs_at] {
            assert_eq!(at % 256, 0);
        }
        assert_eq!(pk.total, pk.tabs_at + 2 * size_of::<SmjTables>());
        let (inputs, coef, pix) = (1 << 40, 1 << 41, 1 << 42);
        let offsets: Vec<u64> = pk.descs.iter().map(|t| t.coef).collect();
        pk.place(inputs, coef, pix);
        let mut next = 0u64;
        for (k, t) in pk.descs.iter().enumerate() {
            assert_eq!(offsets[k], next);
            assert_eq!((t.coef, t.pix), (coef + 2 * next, pix + next));
            next += t.coefficients().next_multiple_of(64);
        }
        assert_eq!(next, pk.coef_total);
        let mut host = vec![0u8; pk.total];
        pk.write(&tiles, &mut host);
        for (k, s) in streams.iter().enumerate() {
            assert_eq!(&host[pk.data_at[k]..pk.data_at[k] + s.len()], s.as_slice());
            // Every segment of tile k points at its bytes of the upload.
            for g in pk.segs.iter().filter(|g| g.tile == k as i32) {
                let at = (g.data - inputs) as usize;
                assert!(at >= pk.data_at[k] && at + g.len as usize <= pk.data_at[k] + s.len());
            }
        }
        assert_eq!(pk.segs.len(), tiles.iter().map(|t| t.2.segments.len()).sum::<usize>());
        assert_eq!(&host[pk.tiles_at..pk.tiles_at + 3 * size_of::<SmjTile>()], as_bytes(&pk.descs));
        assert_eq!(&host[pk.tabs_at..pk.total], as_bytes(&pk.tables));
    }

    #[test]
    fn convert_takes_the_subsamplings_its_kernel_upsamples() {
        let mut t = prepare(&stream(64, 64, turbojpeg::Subsamp::Sub2x2, 80)).expect("prepare").tile;
        assert_eq!(convert_subsampling(&t), Some((2, 2)));
        (t.h[0], t.v[0]) = (4, 1); // 4:1:1
        assert_eq!(convert_subsampling(&t), None);
        (t.h[0], t.v[0], t.h[1]) = (2, 1, 2);
        assert_eq!(convert_subsampling(&t), None);
        let g = prepare(&stream(64, 64, turbojpeg::Subsamp::Gray, 80)).expect("prepare").tile;
        assert_eq!(convert_subsampling(&g), None);
        for (sub, want) in [(turbojpeg::Subsamp::None, (1, 1)), (turbojpeg::Subsamp::Sub2x1, (2, 1)), (turbojpeg::Subsamp::Sub1x2, (1, 2))] {
            assert_eq!(convert_subsampling(&prepare(&stream(48, 40, sub, 90)).expect("prepare").tile), Some(want));
        }
    }
}
