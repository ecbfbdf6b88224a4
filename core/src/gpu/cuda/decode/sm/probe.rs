//! The SM decoder's deciding experiment (`gpu::sm_decoder::probe`, feature `unstable`): each
//! stage timed over a batch of real tiles, packed and launched as the engine's decoder does.

use std::ffi::c_int;
use std::time::Instant;

use rayon::prelude::*;

use super::{back_to_back, Packed, SmKernels};
use crate::codec::jpeg_sm::{prepare_with, SmError, SmPrepared, SmStatus, TableMemo, SM_WARM_BYTES};
use crate::error::GpuError;
use crate::gpu::cuda::context::{Context, Stream};
use crate::gpu::cuda::memory::{as_bytes, StreamAlloc};
use crate::gpu::cuda::sys::{cu, cuda, Res};

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
    let prepared: Vec<Result<SmPrepared, SmError>> = streams.par_iter().map_init(TableMemo::default, |memo, s| prepare_with(s, memo)).collect();
    r.prepare_s = t.elapsed().as_secs_f64();
    r.prepare_threads = rayon::current_num_threads();

    // Pack as the engine's decoder does: streams back to back, one table set per distinct
    // DHT/DQT bytes, coefficient (and sample) offsets per tile.
    let mut items: Vec<(&[u8], &SmPrepared)> = Vec::new();
    let mut which: Vec<usize> = Vec::new();
    for (i, p) in prepared.iter().enumerate() {
        match p {
            Ok(p) => {
                items.push((&streams[i], p));
                which.push(i);
                r.compressed_bytes += streams[i].len() as u64;
            }
            Err(e) if r.declined.len() < 8 => r.declined.push(e.to_string()),
            Err(_) => {}
        }
    }
    if items.is_empty() {
        return Err(GpuError::Call("SM probe: no stream the SM decoder takes".into()));
    }
    let data: Vec<u8> = items.iter().flat_map(|(b, _)| b.iter().copied()).collect();
    let (at, _) = back_to_back(items.iter().map(|(b, _)| b.len()));
    let placed: Vec<(usize, &SmPrepared, Option<crate::codec::PartRect>)> =
        at.into_iter().zip(items.iter().map(|(_, p)| *p)).map(|(a, p)| (a, p, None)).collect();
    let mut pk = Packed::new(&placed);
    (r.tiles, r.segments, r.table_sets, r.blocks) = (pk.descs.len(), pk.segs.len(), pk.tables.len(), pk.coef_total / 64);

    let ctx = Context::process_wide(device)?;
    ctx.make_current()?;
    let t = Instant::now();
    let k = SmKernels::compile(device)?;
    r.compile_s = t.elapsed().as_secs_f64();
    let stream = Stream::new()?;
    let s = stream.raw();

    let d_data = StreamAlloc::upload(&data, s)?;
    let d_descs = StreamAlloc::new(pk.total, s)?;
    let d_coef = StreamAlloc::new(pk.coef_total as usize * 2, s)?;
    let d_pix = StreamAlloc::new(pk.coef_total as usize, s)?;
    let d_status = StreamAlloc::new(pk.segs.len() * 4, s)?;
    let args = pk.place(d_data.ptr(), d_descs.ptr(), d_coef.ptr(), d_pix.ptr(), d_status.ptr());
    let mut host = vec![0u8; pk.total];
    pk.write(&mut host);
    // SAFETY: `host` holds pk.total bytes, the allocation's size; it outlives the copy (the
    // stream is synchronised below).
    cu(unsafe { cuda()?.cuMemcpyHtoDAsync(d_descs.ptr(), host.as_ptr() as *const std::ffi::c_void, host.len(), s) }, "cuMemcpyHtoDAsync")?;
    let mut by_size: Vec<i32> = (0..pk.segs.len() as i32).collect();
    by_size.sort_by_key(|&k| std::cmp::Reverse(pk.segs[k as usize].len));
    let d_order = StreamAlloc::upload(as_bytes(&by_size), s)?;
    stream.sync()?;

    let run_huffman = |order: u64, block: u32, shared_set: c_int, spread: c_int| -> Res<f64> {
        let t = Instant::now();
        k.huffman(&args, order, args.nsegs, shared_set, spread, block, s)?;
        stream.sync()?;
        Ok(t.elapsed().as_secs_f64())
    };
    // Tables in shared memory when every tile uses the same set (a level's JPEGTables).
    let shared = if pk.tables.len() == 1 { 0 } else { -1 };
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
    // One warp a segment (the self-synchronising decoder, for the engine's long segments):
    // timed last, so the samples verified below are the ones it decoded.
    // Without warm-ups or the periodic shortcut first, then as the engine runs it (verified).
    let run_warp = |warm: c_int, periodic: bool| -> Res<f64> {
        let t = Instant::now();
        k.huffman_warp(&args, 0, args.nsegs, warm, periodic, s)?;
        stream.sync()?;
        Ok(t.elapsed().as_secs_f64())
    };
    for (warm, periodic, what) in [
        (0, false, "huffman, one warp a segment, no warm-up, no periodic shortcut"),
        (SM_WARM_BYTES, false, "huffman, one warp a segment, warm-ups, no periodic shortcut"),
        (SM_WARM_BYTES, true, "huffman, one warp a segment, warm-ups and periodic shortcut (the engine's; verified)"),
    ] {
        run_warp(warm, periodic)?;
        let mut v: Vec<f64> = (0..rounds.max(1)).map(|_| run_warp(warm, periodic)).collect::<Res<_>>()?;
        let min_s = v.iter().copied().fold(f64::INFINITY, f64::min);
        r.huffman.push(StageTime { variant: what.into(), median_s: median(&mut v), min_s });
    }
    let run_idct = |block: u32| -> Res<f64> {
        let t = Instant::now();
        k.idct(&args, block, s)?;
        stream.sync()?;
        Ok(t.elapsed().as_secs_f64())
    };
    for block in [64u32, 128] {
        run_idct(block)?;
        let mut v: Vec<f64> = (0..rounds.max(1)).map(|_| run_idct(block)).collect::<Res<_>>()?;
        let min_s = v.iter().copied().fold(f64::INFINITY, f64::min);
        r.idct.push(StageTime { variant: format!("idct, {block} threads/block"), median_s: median(&mut v), min_s });
    }

    let (tiles, segs) = (&pk.descs, &pk.segs);
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
        let mut pix = vec![0u8; pk.coef_total as usize];
        // SAFETY: `pix` holds pk.coef_total bytes, the allocation's size.
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
    drop((d_data, d_descs, d_coef, d_pix, d_status, d_order));
    stream.sync()?;
    drop(k);
    Ok(r)
}
