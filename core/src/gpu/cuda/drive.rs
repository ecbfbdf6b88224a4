//! The batch driver's decoding step (engine layer): one call's misses split between the GPU
//! lanes, the CPU decode workers and the CPU fallback by the rules of `scheduler.rs`, decoded,
//! and the CPU-decoded tiles uploaded.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::decode::cpu_worker::{cpu_decode, cpu_worker, CpuSlot};
use super::decode::sm::{sm_accepts, SmJpeg, SmKernels};
use super::decode::{Bits, TileDecoder};
use super::engine::Engine;
use super::io::posix::plans_by_source;
use super::lanes::Lane;
use super::memory::{DevTile, StreamAlloc};
use super::pool::Pooled;
use super::queue::GpuResult;
use super::queue::{Miss, WorkQueue};
use super::queue::{Need, Src};
use super::scheduler::{decoders_wanted, lane_chunk, lane_route, order_misses, to_gpu, Route};
use super::sys::{cuda, Res};
use super::trace::{self, Finished};
use crate::codec::jpeg_sm::SmPrepared;
use crate::error::{GpuError, Result};
use crate::index::Compression;

/// The SM decoder's share of a call: the misses it declined, and the outcomes of the rest.
pub(crate) type SmShare = (Vec<Miss>, Vec<(Miss, GpuResult)>);

/// Lanes and CPU workers' resources taken from the engine's pools for one call, given back when
/// dropped (a panic included), so the pools never shrink.
pub(crate) struct Taken<'a> {
    pub(crate) lanes: Vec<Pooled<'a, Lane>>,
    pub(crate) cpu: Vec<Pooled<'a, CpuSlot>>,
}

impl Engine {
    /// Up to `lanes` free lanes (made while fewer than `SLIDESTREAM_GPU_WORKERS` exist, never
    /// waiting) and up to `cpu` CPU workers' resources.
    pub(crate) fn take_free(&self, lanes: usize, cpu: usize) -> Res<Taken<'_>> {
        let mut taken = Taken { lanes: Vec::new(), cpu: Vec::new() };
        while taken.lanes.len() < lanes {
            match self.try_take_lane() {
                Some(Ok(l)) => taken.lanes.push(l),
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        taken.cpu = self.cpu.take(cpu, &self.counters);
        Ok(taken)
    }

    /// Decode `misses` (tiles of any of the call's sources `srcs`) into device tiles
    /// (`needs[m.need].tile`), or record their errors.
    pub(crate) fn decode_misses(&self, lane: &mut Lane, srcs: &[Src<'_>], needs: &mut [Need], mut misses: Vec<Miss>) -> Result<()> {
        self.counters.tile_bytes.fetch_add(misses.iter().map(|m| m.len).sum(), Relaxed);
        order_misses(&mut misses, self.cpu.split_by_cost, self.cpu.workers);
        // Tiles of JPEG levels nvJPEG can take go to the GPU lanes (with CPU workers decoding
        // from the other end of the same queue); the rest to the CPU decoders, among them the
        // 2- and 4-sample JPEG tiles (grey + alpha, CMYK, RGB + alpha) that are decoded without
        // colour transform and converted on the CPU (`codec::jpeg_raw`). Until the
        // background warm-up made nvJPEG and a warmed lane (warm-up `first`), every tile goes to
        // the CPU decoders, so the first reads of a process do not wait for nvJPEG's start.
        let lanes_ready = self.gpu_ready.load(std::sync::atomic::Ordering::Acquire);
        if !lanes_ready {
            self.note_cpu("the GPU lanes were still starting (SLIDESTREAM_GPU_WARMUP=first): tiles decoded on the CPU".into());
        }
        let gpu_src: Vec<bool> = srcs
            .iter()
            .map(|s| {
                let (img, c) = (s.img, &s.img.codec);
                let ok = lanes_ready && crate::codec::table::gpu_decodes(c, img.tile_width, img.tile_height);
                if lanes_ready && !ok && c.compression == Compression::Jpeg {
                    self.note_cpu(format!("{}: JPEG with {} samples (planar {}) goes to the CPU decoder", s.at, c.samples_per_pixel, c.planar_separate));
                }
                ok
            })
            .collect();
        // A tile the host cache holds (whole) goes to the CPU path, which takes it from there.
        let (gpu, cpu): (Vec<Miss>, Vec<Miss>) = misses.into_iter().partition(|m| {
            let s = &srcs[m.src as usize];
            to_gpu(gpu_src[m.src as usize], s.slide.host_cached(s.level, m.col, m.row))
        });
        let ctx = self.ctx.raw();
        // SLIDESTREAM_GPU_SM_DECODER: the SM decoder takes the call's tiles in one launch first
        // (its rate grows with the batch); the tiles it declines go on to the lanes.
        // (Asked only once the lanes are ready: `gpu` is empty before.)
        let (gpu, sm_done) = match if gpu.is_empty() { None } else { self.sm_decoder()? } {
            Some(k) => self.sm_decode(k, lane, srcs, gpu)?,
            None => (gpu, Vec::new()),
        };
        let gpu_done = if gpu.is_empty() { Ok(Vec::new()) } else { self.gpu_decode_parallel(lane, srcs, &gpu) };
        let cpu_done = if cpu.is_empty() { Vec::new() } else { self.counters.trace.time(trace::CPU, || cpu_decode(&self.counters, srcs, &cpu)) };
        // SAFETY: restore this thread's current context (rayon work of the CPU decoders may have
        // run on this thread).
        let _ = unsafe { cuda()?.cuCtxSetCurrent(ctx) };
        let gpu_done = gpu_done?;
        // GPU results: decoded tiles, or tiles handed back to the CPU (bad header, failed batch).
        let mut retry = Vec::new();
        for (m, r) in sm_done.into_iter().chain(gpu_done) {
            match r {
                Ok(t) => self.finish(srcs, needs, m, t),
                Err(None) => retry.push(m),
                Err(Some(err)) => needs[m.need].err = Some(err),
            }
        }
        let mut cpu_done = cpu_done;
        if !retry.is_empty() {
            cpu_done.extend(cpu_decode(&self.counters, srcs, &retry));
        }
        // Upload CPU-decoded tiles.
        let stream = lane.slots[0].stream.raw();
        let mut uploaded = Vec::new();
        for (m, r) in cpu_done {
            match r {
                Ok(t) => {
                    let p = StreamAlloc::upload(&t.rgba, stream)?.into_raw();
                    let block = self.block(p, t.rgba.len().max(1));
                    uploaded.push((m, Arc::new(DevTile::whole(p, t.width, t.height, block))));
                }
                Err(err) => needs[m.need].err = Some(err),
            }
        }
        if !uploaded.is_empty() {
            // The lane's stream: the uploads must land before the tiles are shared.
            lane.slots[0].stream.sync()?;
            self.counters.cpu.fetch_add(uploaded.len() as u64, Relaxed);
            for (m, t) in uploaded {
                self.finish(srcs, needs, m, t);
            }
        }
        Ok(())
    }

    /// The SM decoder's share of a call: `misses` read with coalesced `pread`s into the lane's
    /// first slot, framed and checked on the host in parallel (rayon; each tile routed by
    /// `scheduler::lane_route` with the SM decoder's check, `sm_accepts`), and the accepted ones decoded in one launch per 65,535 tiles on that
    /// slot's stream (synchronised before returning, so the tiles are complete). Returns the
    /// misses it declined (for the lanes and CPU workers) and the outcomes of the rest: decoded
    /// tiles, errors, and `Err(None)` for tiles whose segments failed (to the CPU).
    pub(crate) fn sm_decode(&self, k: &SmKernels, lane: &mut Lane, srcs: &[Src<'_>], misses: Vec<Miss>) -> Result<SmShare> {
        let env = self.nv_env()?;
        let sm = SmJpeg { kernels: k, env: &env };
        let slot = &mut lane.slots[0];
        let read = super::io::posix::read_chunk(&mut slot.pinned, &self.counters, srcs, &misses)?;
        let mut out = read.failed;
        let buf: &[u8] = slot.pinned.as_mut_slice(read.total);
        // Each tile framed into its own buffer and checked, on the rayon pool (the SM decoder
        // packs its inputs into the slot's arena, so they live outside it).
        use rayon::prelude::*;
        let routed: Vec<(Miss, Vec<u8>, Route<SmPrepared>)> = misses
            .par_iter()
            .zip(&read.place)
            .filter_map(|(m, place)| {
                let (off, len) = (*place)?;
                let src = &srcs[m.src as usize];
                let mut framed = Vec::new();
                let r = super::chunk::frame_tile(src, m, &buf[off..off + len], &mut framed);
                let route = lane_route(src.img.codec.jpeg_scale(), r, || sm_accepts(src, m, &framed));
                Some((*m, framed, route))
            })
            .collect();
        // Rayon work run on this thread while it waited may have left another context current.
        self.make_current()?;
        let (mut tiles, mut streams) = (Vec::with_capacity(routed.len()), Vec::with_capacity(routed.len()));
        let mut declined = Vec::new();
        for (m, framed, route) in routed {
            match route {
                Route::Decoder(p) => {
                    tiles.push((m, Bits { ptr: framed.as_ptr(), len: framed.len() }, p));
                    // The stream's heap bytes stay where they are (Bits points at them).
                    streams.push(framed);
                }
                Route::Cpu(_) => declined.push(m),
                Route::Failed(e) => out.push((m, Err(Some(e)))),
            }
        }
        let (done, settled) = sm.decode(slot, srcs, tiles)?;
        // The convert launch and the block's copies are on the slot's stream.
        slot.stream.sync()?;
        out.extend(done.into_iter().map(|(m, t)| (m, Ok(t))));
        out.extend(settled);
        Ok((declined, out))
    }

    /// Decode a set of JPEG tiles with the decoders `scheduler::decoders_wanted` asks for: the
    /// caller's lane (and, only without CPU workers, up to `SLIDESTREAM_GPU_WORKERS` free lanes)
    /// takes chunks of up to `scheduler::CHUNK_TILES` whole tiles from the front of the sorted list (costliest
    /// CPU decodes first; each lane's thread prepares its next chunk on the host while its
    /// previous one decodes), and, on batches of at least `scheduler::MIN_CPU_SHARE_TILES` tiles, up to
    /// `cpu_workers` CPU decoders take runs of up to `CPU_RUN_TILES` (at most
    /// `CPU_RUN_BYTES` of pixels) from the back, until the two ends meet, so each kind
    /// decodes as much as its speed allows (the issue's "CPU decoder threads take a share of a
    /// batch").
    pub(crate) fn gpu_decode_parallel(&self, lane: &mut Lane, srcs: &[Src<'_>], misses: &[Miss]) -> Result<Vec<(Miss, GpuResult)>> {
        let n = misses.len();
        let (want, cpu_want) = decoders_wanted(n, self.lanes.workers, self.cpu.workers);
        // The caller's lane plus free ones; given back when dropped, a panic included.
        let mut taken = self.take_free(want - 1, cpu_want)?;
        let lanes_n = taken.lanes.len() + 1;
        let chunk = lane_chunk(n, lanes_n, !taken.cpu.is_empty());
        // POSIX reads: the whole call's misses hinted in the background, so the device fetches
        // them while the lanes and CPU workers read and decode their first chunks (io::hint).
        // One plan per slide (`ReadPlan::prefetch` skips small plans).
        if n >= crate::io::hint::HINT_MIN_REQUESTS {
            for (si, plan) in plans_by_source(srcs, misses) {
                let s = &srcs[si as usize];
                if self.io.cufile_handle(s.slide, &self.counters).is_none() {
                    plan.prefetch(s.slide.source());
                }
            }
        }
        let q = WorkQueue::new(misses);
        let Taken { lanes: extra, cpu: cpu_slots } = &mut taken;
        // With the trace on: when each decoder ran out of work (the tail the lanes' last chunks
        // leave after the CPU workers finished, or the reverse).
        let t_start = std::time::Instant::now();
        let finished = Finished::default();
        let done_at = |t0, kind| finished.done(t0, kind);
        let done_at = &done_at;
        let results: Vec<Result<Vec<(Miss, GpuResult)>>> = std::thread::scope(|s| {
            let lanes: Vec<_> = extra
                .iter_mut()
                .map(|l| {
                    let q = &q;
                    s.spawn(move || {
                        // SLIDESTREAM_THREAD_NICE: the engine's own threads yield a contended
                        // core to the caller's (raising one's nice value cannot fail).
                        drop(crate::threads::lower_this_thread());
                        self.make_current()?;
                        let r = self.gpu_decode(l, srcs, q, chunk, 2 * lanes_n);
                        done_at(t_start, "lane");
                        r
                    })
                })
                .collect();
            let cpus: Vec<_> = cpu_slots
                .iter_mut()
                .map(|cs| {
                    let q = &q;
                    s.spawn(move || {
                        drop(crate::threads::lower_this_thread());
                        let r = self.counters.trace.time(trace::CPU, || cpu_worker(&self.ctx, &self.counters, self.block_home(), cs, srcs, q));
                        done_at(t_start, "cpu");
                        r
                    })
                })
                .collect();
            let mut out = vec![self.gpu_decode(lane, srcs, &q, chunk, 2 * lanes_n)];
            done_at(t_start, "lane");
            let joined = |h: std::thread::ScopedJoinHandle<'_, Result<Vec<(Miss, GpuResult)>>>| {
                h.join().unwrap_or_else(|_| Err(GpuError::Call("decode worker panicked".into()).into()))
            };
            out.extend(lanes.into_iter().map(joined));
            out.extend(cpus.into_iter().map(joined));
            out
        });
        drop(taken);
        if trace::on() && n >= 256 {
            finished.report(n);
        }
        let mut all = Vec::with_capacity(n);
        for r in results {
            all.extend(r?);
        }
        Ok(all)
    }
}
