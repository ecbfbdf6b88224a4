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

use super::slot::Slot;
use super::{Bits, ChunkOut, Declined, NvEnv, TileDecoder};
use crate::codec::jpeg_sm::{prepare_with, SmPrepared, SmStatus, SmjSegment, SmjTile, TableMemo, SM_WARM_BYTES};
use crate::codec::PartRect;
use crate::gpu::cuda::context::device_arch;
use crate::gpu::cuda::kernels::{arg, launch, ConvDesc, Module};
use crate::gpu::cuda::memory::{as_bytes, DevTile, StreamAlloc};
use crate::gpu::cuda::queue::{Miss, Src};
use crate::gpu::cuda::sys::{cu, cuda, CUstream, Res};
use crate::index::Photometric;

mod packed;
use packed::{back_to_back, Packed};
#[cfg(feature = "unstable")]
mod probe;
#[cfg(feature = "unstable")]
pub use probe::{probe, SmProbe, StageTime};

/// The kernels' source: the decoding functions (serial, then the warp decoder and its
/// synchronising passes), then the kernels.
const SOURCE: &str = concat!(
    include_str!("../../../codec/jpeg_sm.h"),
    "\n",
    include_str!("../../../codec/jpeg_sm_warp.h"),
    "\n",
    include_str!("../../../codec/jpeg_sm_warp_sync.h"),
    "\n",
    include_str!("../kernels/jpeg_sm.cu")
);

/// The SM decoder's kernels (`sm_huffman`, `sm_huffman_warp`, `sm_idct`), compiled once per
/// engine from [`SOURCE`].
pub(crate) struct SmKernels {
    _module: Module,
    huffman: *mut std::ffi::c_void,
    huffman_warp: *mut std::ffi::c_void,
    idct: *mut std::ffi::c_void,
}

// A module and its functions may be used from any thread of the context.
unsafe impl Send for SmKernels {}
unsafe impl Sync for SmKernels {}

impl SmKernels {
    /// Compile and load the kernels for `device` (its context current).
    pub(crate) fn compile(device: usize) -> Res<SmKernels> {
        let module = Module::compile(SOURCE, device_arch(device)?)?;
        let (huffman, huffman_warp, idct) = (module.function("sm_huffman")?, module.function("sm_huffman_warp")?, module.function("sm_idct")?);
        Ok(SmKernels { _module: module, huffman, huffman_warp, idct })
    }

    /// Enqueue `sm_huffman` on `stream` over `n` of the `a.segs` segments: those the `order`
    /// array names (device `int`s; 0 = the first `n` as given), `spread` threads a segment
    /// (only the first decodes), `block` threads a block, the tables of set `shared_set` in
    /// shared memory (-1: read from global memory).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn huffman(&self, a: &SmArgs, order: u64, n: usize, shared_set: c_int, spread: c_int, block: u32, stream: CUstream) -> Res<()> {
        let (mut p_segs, mut p_order, mut p_n, mut p_tiles, mut p_tabs, mut p_status, mut p_shared, mut p_spread) =
            (a.segs, order, n as c_int, a.tiles, a.tabs, a.status, shared_set, spread);
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
        launch(self.huffman, ((n as u32 * spread as u32).div_ceil(block), 1, 1), (block, 1, 1), stream, &mut params, "cuLaunchKernel(sm_huffman)")
    }

    /// Enqueue `sm_huffman_warp` on `stream` over the `n` segments the `order` array names
    /// (device `int`s; 0 = the first `n` as given): one warp a segment, [`WARPS_PER_BLOCK`] a
    /// block; each lane's first start found by a warm-up of `warm` bytes (the engine:
    /// [`SM_WARM_BYTES`]; 0: none), the periodic shortcut on if `periodic` (`smj_ss_warm` and
    /// `smj_ss_sync` in `codec/jpeg_sm_warp_sync.h`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn huffman_warp(&self, a: &SmArgs, order: u64, n: usize, warm: c_int, periodic: bool, stream: CUstream) -> Res<()> {
        let (mut p_segs, mut p_order, mut p_n, mut p_tiles, mut p_tabs, mut p_status) = (a.segs, order, n as c_int, a.tiles, a.tabs, a.status);
        let (mut p_warm, mut p_periodic) = (warm, c_int::from(periodic));
        let mut params = [
            arg(&mut p_segs),
            arg(&mut p_order),
            arg(&mut p_n),
            arg(&mut p_tiles),
            arg(&mut p_tabs),
            arg(&mut p_status),
            arg(&mut p_warm),
            arg(&mut p_periodic),
        ];
        launch(
            self.huffman_warp,
            ((n as u32).div_ceil(WARPS_PER_BLOCK), 1, 1),
            (32 * WARPS_PER_BLOCK, 1, 1),
            stream,
            &mut params,
            "cuLaunchKernel(sm_huffman_warp)",
        )
    }

    /// Enqueue `sm_idct` on `stream`: one thread per 8 × 8 block, `block` threads a block, one
    /// row of blocks per tile (at most [`MAX_SM_TILES`] tiles); the IDCT runs for the blocks
    /// of each tile's window (`a.wins`, [`idct_window`](crate::codec::jpeg_sm::idct_window)).
    pub(crate) fn idct(&self, a: &SmArgs, block: u32, stream: CUstream) -> Res<()> {
        let (mut p_tiles, mut p_tabs, mut p_wins) = (a.tiles, a.tabs, a.wins);
        launch(
            self.idct,
            (a.max_blocks.div_ceil(block), a.ntiles as u32, 1),
            (block, 1, 1),
            stream,
            &mut [arg(&mut p_tiles), arg(&mut p_tabs), arg(&mut p_wins)],
            "cuLaunchKernel(sm_idct)",
        )
    }
}

/// Device addresses and counts of one launch's descriptors (both kernels' arguments).
pub(crate) struct SmArgs {
    pub(crate) segs: u64,
    pub(crate) nsegs: usize,
    pub(crate) tiles: u64,
    pub(crate) ntiles: usize,
    pub(crate) tabs: u64,
    /// One `int` per segment: its `SMJ_*` status.
    pub(crate) status: u64,
    /// The most 8 × 8 blocks (all components) one tile has.
    pub(crate) max_blocks: u32,
    /// Segment indices (device `int`s): first the `n_thread` segments for `sm_huffman`, then
    /// the `n_warp` ones for `sm_huffman_warp` ([`warp_decodes`]).
    pub(crate) order: u64,
    pub(crate) n_thread: usize,
    pub(crate) n_warp: usize,
    /// Each tile's IDCT window (4 device `int`s a tile: MCU columns and rows, ends exclusive).
    pub(crate) wins: u64,
}

/// Threads given to one entropy-coded segment by `sm_huffman` (only the first decodes): at 13k
/// tiles of 240² one segment per 4 threads decoded 509k tiles/s against 369k for one per
/// thread, and at 40k tiles 761k against 775k (lent H100, docs/gpu.md).
const SPREAD: c_int = 4;
/// Threads a block of `sm_huffman` and `sm_idct`.
const BLOCK: u32 = 64;
/// Warps a block of `sm_huffman_warp` (`SMJ_SS_WARPS` in `kernels/jpeg_sm.cu`).
const WARPS_PER_BLOCK: u32 = 4;
/// Segments of at least this many bytes are decoded by a warp each (`sm_huffman_warp`, the
/// self-synchronising decoder of `codec/jpeg_sm.h`), shorter ones by one thread each
/// (`sm_huffman`): one thread decodes a 240² tile's scan (~13k symbols) in milliseconds, and
/// a batch waits for its slowest tile; a short segment (one restart interval of an NDPI level)
/// leaves a warp's lanes too little to synchronise on.
pub(crate) const WARP_SEGMENT_BYTES: i32 = 2048;

/// Whether a segment of `len` bytes is decoded by a warp ([`WARP_SEGMENT_BYTES`]).
pub(crate) fn warp_decodes(len: i32) -> bool {
    len >= WARP_SEGMENT_BYTES
}
/// Most tiles one launch takes (`sm_idct`'s grid has one row of blocks per tile: the grid's
/// y extent is at most 65,535).
pub(crate) const MAX_SM_TILES: usize = 65_535;
/// Most device scratch one launch allocates for coefficients (2 bytes each) and IDCT samples (1
/// byte each): 4 GiB, about 8,000 RGB-coded 240² tiles (518 KB each) or 16,000 4:2:0 ones; a
/// call with more is decoded in several launches, so a large batch cannot take the device's
/// memory from a model beside it.
pub(crate) const MAX_SM_SCRATCH_BYTES: u64 = 4 << 30;

/// How many of `tiles` (each its coefficient count) the next launch takes: at least one, at
/// most [`MAX_SM_TILES`], and no more than fit [`MAX_SM_SCRATCH_BYTES`] of scratch.
fn launch_len(coefficients: impl Iterator<Item = u64>) -> usize {
    let mut bytes = 0u64;
    let mut n = 0usize;
    for c in coefficients.take(MAX_SM_TILES) {
        bytes += c.next_multiple_of(64) * 3;
        if n > 0 && bytes > MAX_SM_SCRATCH_BYTES {
            break;
        }
        n += 1;
    }
    n
}

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

thread_local! {
    /// Each thread's table sets (a level's tiles share theirs): [`prepare_with`] derives a set
    /// once per thread, not once per tile (0.7 µs a tile instead of 13, `sm_prepare_rate`).
    static MEMO: std::cell::RefCell<TableMemo> = std::cell::RefCell::default();
}

/// The SM decoder's check of one framed tile `tile` (tile `m` of `src`), callable from any
/// thread: [`prepare_with`] takes the stream (baseline, Huffman, 8-bit, tables it can derive; a
/// stream libjpeg-turbo would reject goes to the CPU for that outcome), and the `convert`
/// kernel takes its geometry: 3 components, chroma 1 × 1 and luma 1–2 × 1–2, at least the
/// tile's valid size and at most `MAX_GPU_TILE_EDGE`, coded as the level's photometric
/// interpretation says (R, G, B or Y, Cb, Cr). Declined tiles carry the reason.
pub(crate) fn sm_accepts(src: &Src<'_>, m: &Miss, tile: &[u8]) -> std::result::Result<SmPrepared, Declined> {
    let at = || crate::read::locate::tile_location(&src.at, src.slide.source(), src.img, m.col, m.row);
    let p = MEMO.with_borrow_mut(|memo| prepare_with(tile, memo)).map_err(|e| Declined::Elsewhere(format!("{}: SM decoder: {e}", at())))?;
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

impl TileDecoder for SmJpeg<'_> {
    type Accepted = SmPrepared;
    type Workspace = Slot;

    /// [`sm_accepts`].
    fn accepts(&self, src: &Src<'_>, m: &Miss, tile: &[u8]) -> std::result::Result<SmPrepared, Declined> {
        sm_accepts(src, m, tile)
    }

    /// The streams copied back to back into the slot's arena, then [`SmJpeg::submit`] and
    /// [`SmJpeg::finish`] per launch ([`launch_len`]). The batch driver frames its tiles into
    /// the arena itself and overlaps the launches of two slots instead (`drive.rs`).
    fn decode(&self, slot: &mut Slot, srcs: &[Src<'_>], tiles: Vec<(Miss, Bits, SmPrepared)>) -> Res<ChunkOut> {
        let (at, data_len) = back_to_back(tiles.iter().map(|(_, b, _)| b.len));
        slot.arena.ensure(data_len)?;
        let arena = slot.arena.as_mut_slice(data_len);
        for ((_, b, _), &a) in tiles.iter().zip(&at) {
            // SAFETY: `Bits` of this decoder are host memory alive for the call, outside the
            // slot's arena (TileDecoder; this decoder's documented contract).
            arena[a..a + b.len].copy_from_slice(unsafe { std::slice::from_raw_parts(b.ptr, b.len) });
        }
        let placed = tiles
            .into_iter()
            .zip(at)
            .map(|((m, b, p), a)| SmTile { miss: m, at: a, len: b.len, prepared: p, part: sm_part(&srcs[m.src as usize], &m) })
            .collect();
        let (mut done, mut settled) = (Vec::new(), Vec::new());
        for launch in split_launches(placed) {
            let f = self.submit(slot, launch)?;
            let (d, s) = self.finish(slot, srcs, f)?;
            done.extend(d);
            settled.extend(s);
        }
        Ok((done, settled))
    }
}

/// The part of a tile of valid size `vw × vh` the SM decoder decodes (IDCT window and
/// conversion alike): the part its call needs (`Miss::part`, the CPU path's rule for partial
/// decodes) when it is not empty and lies inside the valid tile and is not all of it; `None`
/// (the whole tile, cached) otherwise.
pub(crate) fn decoded_part(part: Option<PartRect>, vw: u32, vh: u32) -> Option<PartRect> {
    part.filter(|p| {
        p.w > 0
            && p.h > 0
            && u64::from(p.x) + u64::from(p.w) <= u64::from(vw)
            && u64::from(p.y) + u64::from(p.h) <= u64::from(vh)
            && *p != PartRect { x: 0, y: 0, w: vw, h: vh }
    })
}

/// The part of tile `m` (of `src`) the SM decoder decodes: [`decoded_part`].
pub(crate) fn sm_part(src: &Src<'_>, m: &Miss) -> Option<PartRect> {
    let (vw, vh) = src.img.valid_tile_size(m.col, m.row);
    decoded_part(m.part, vw, vh)
}

/// One accepted tile of a launch: its stream is `len` bytes at `at` in the slot's arena; only
/// `part` of it is inverse-DCT'd and converted ([`sm_part`]; `None`: the whole tile).
pub(crate) struct SmTile {
    pub(crate) miss: Miss,
    pub(crate) at: usize,
    pub(crate) len: usize,
    pub(crate) prepared: SmPrepared,
    pub(crate) part: Option<PartRect>,
}

/// `tiles` (in arena order) cut into launches by [`launch_len`]: each at most
/// [`MAX_SM_TILES`] tiles and [`MAX_SM_SCRATCH_BYTES`] of scratch.
pub(crate) fn split_launches(mut tiles: Vec<SmTile>) -> Vec<Vec<SmTile>> {
    let mut out = Vec::new();
    while !tiles.is_empty() {
        let tail = tiles.split_off(launch_len(tiles.iter().map(|t| t.prepared.tile.coefficients())));
        out.push(std::mem::replace(&mut tiles, tail));
    }
    out
}

/// A launch enqueued on a slot's stream by [`SmJpeg::submit`]: what [`SmJpeg::finish`] needs
/// to read its statuses and convert its tiles. Its device buffers are freed (stream-ordered)
/// when it is finished or dropped.
pub(crate) struct SmFlight {
    misses: Vec<Miss>,
    /// Each tile's decoded part (the window its IDCT ran over), as submitted.
    parts: Vec<Option<PartRect>>,
    descs: Vec<SmjTile>,
    segs: Vec<SmjSegment>,
    /// Where the segments' statuses land in the slot's pinned buffer.
    status_at: usize,
    _buffers: [StreamAlloc; 5],
}

impl SmJpeg<'_> {
    /// Enqueue one launch on `slot`'s stream without waiting: `tiles` (at most
    /// [`MAX_SM_TILES`], their streams in the slot's arena; see [`split_launches`]) uploaded
    /// (the streams' span of the arena, and the descriptors staged in the slot's pinned
    /// buffer), entropy-decoded, inverse-DCT'd, and the segments' statuses copied back into the
    /// pinned buffer. Until [`SmJpeg::finish`] the slot's arena and pinned buffer must not be
    /// written (the copies may be pending).
    pub(crate) fn submit(&self, slot: &mut Slot, tiles: Vec<SmTile>) -> Res<SmFlight> {
        let stream = slot.stream.raw();
        let base = tiles.iter().map(|t| t.at).min().unwrap_or(0);
        let end = tiles.iter().map(|t| t.at + t.len).max().unwrap_or(0);
        let items: Vec<(usize, &SmPrepared, Option<PartRect>)> = tiles.iter().map(|t| (t.at - base, &t.prepared, t.part)).collect();
        let mut pk = Packed::new(&items);
        let (total, segs_n) = (pk.total, pk.segs.len());
        let status_at = total.next_multiple_of(256);
        let data = StreamAlloc::new(end - base, stream)?;
        let descs = StreamAlloc::new(total, stream)?;
        let coef = StreamAlloc::new(pk.coef_total as usize * 2, stream)?;
        let pix = StreamAlloc::new(pk.coef_total as usize, stream)?;
        let status = StreamAlloc::new(segs_n * 4, stream)?;
        let args = pk.place(data.ptr(), descs.ptr(), coef.ptr(), pix.ptr(), status.ptr());
        slot.pinned.ensure(status_at + segs_n * 4)?;
        pk.write(slot.pinned.as_mut_slice(total));
        let cuda = cuda()?;
        // SAFETY: `end - base` bytes of the slot's pinned arena (made by the caller, left
        // unwritten until `finish` synchronises the stream) into an allocation of that size.
        cu(unsafe { cuda.cuMemcpyHtoDAsync(data.ptr(), slot.arena.ptr().add(base) as *const std::ffi::c_void, end - base, stream) }, "cuMemcpyHtoDAsync")?;
        // SAFETY: `total` descriptor bytes of the slot's pinned buffer (made above, left
        // unwritten until `finish`) into an allocation of `total`.
        cu(unsafe { cuda.cuMemcpyHtoDAsync(descs.ptr(), slot.pinned.ptr() as *const std::ffi::c_void, total, stream) }, "cuMemcpyHtoDAsync")?;
        if args.n_thread > 0 {
            self.kernels.huffman(&args, args.order, args.n_thread, -1, SPREAD, BLOCK, stream)?;
        }
        if args.n_warp > 0 {
            self.kernels.huffman_warp(&args, args.order + 4 * args.n_thread as u64, args.n_warp, SM_WARM_BYTES, true, stream)?;
        }
        self.kernels.idct(&args, BLOCK, stream)?;
        // SAFETY: `segs_n` i32s into the pinned buffer (made above), read after `finish`
        // synchronises the stream.
        cu(
            unsafe { cuda.cuMemcpyDtoHAsync(slot.pinned.ptr().add(status_at) as *mut std::ffi::c_void, status.ptr(), segs_n * 4, stream) },
            "cuMemcpyDtoHAsync",
        )?;
        let Packed { descs: d, segs, .. } = pk;
        Ok(SmFlight {
            misses: tiles.iter().map(|t| t.miss).collect(),
            parts: tiles.iter().map(|t| t.part).collect(),
            descs: d,
            segs,
            status_at,
            _buffers: [data, descs, coef, pix, status],
        })
    }

    /// Wait for launch `f` on `slot`'s stream, read its statuses, and enqueue the `convert`
    /// kernel for every tile whose segments all decoded (RGBA tiles carved from one block,
    /// complete once the stream is synchronised again); a tile with a failed segment is handed
    /// to the CPU (`Err(None)`), the reason noted.
    pub(crate) fn finish(&self, slot: &mut Slot, srcs: &[Src<'_>], f: SmFlight) -> Res<ChunkOut> {
        let stream = slot.stream.raw();
        slot.stream.sync()?;
        let SmFlight { misses, parts, descs, segs, status_at, _buffers } = f;
        let raw = &slot.pinned.as_mut_slice(status_at + segs.len() * 4)[status_at..];
        let st: Vec<i32> = raw.chunks_exact(4).map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect();
        let mut ok = vec![true; misses.len()];
        for (g, &s) in segs.iter().zip(&st) {
            if s != 0 {
                ok[g.tile as usize] = false;
            }
        }
        // Convert the tiles that decoded into RGBA tiles carved from one block.
        let mut settled = Vec::new();
        let mut conv = Vec::new();
        let mut good = Vec::new();
        for (k, m) in misses.iter().enumerate() {
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
            let r = parts[k].unwrap_or(PartRect { x: 0, y: 0, w: vw, h: vh });
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
                w: r.w as c_int,
                h: r.h as c_int,
                x0: r.x as c_int,
                y0: r.y as c_int,
                out: 0,
            });
            good.push((*m, parts[k].is_some()));
        }
        let mut done = Vec::with_capacity(good.len());
        if !conv.is_empty() {
            let sizes: Vec<usize> = conv.iter().map(|d| (d.w as usize * d.h as usize * 4).max(4).next_multiple_of(256)).collect();
            let (p, block) = self.env.home.alloc(sizes.iter().sum::<usize>().max(256), stream)?;
            let mut off = 0u64;
            for ((&(m, partial), d), size) in good.iter().zip(conv.iter_mut()).zip(&sizes) {
                d.out = p + off;
                let (x, y, w, h) = (d.x0 as u32, d.y0 as u32, d.w as u32, d.h as u32);
                // A part is not cached (`DevTile::partial`), as the CPU workers' parts.
                done.push((m, Arc::new(DevTile { ptr: d.out, x, y, w, h, pitch: w, partial, _block: block.clone() })));
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
            // `sm` first, `sm_partial` after (read in the other order by `stats`): a snapshot
            // never counts more partial tiles than SM tiles.
            self.env.counters.sm.fetch_add(conv.len() as u64, Relaxed);
            self.env.counters.sm_partial.fetch_add(good.iter().filter(|g| g.1).count() as u64, Relaxed);
        }
        // The launch's buffers are freed stream-ordered after their last use (the convert
        // kernel reads `pix`).
        drop(_buffers);
        Ok((done, settled))
    }
}

#[cfg(test)]
mod tests;
