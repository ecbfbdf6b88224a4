//! The batch driver's decoding step (engine layer): one call's misses split between the GPU
//! lanes, the CPU decode workers and the CPU fallback by the rules of `scheduler.rs`, decoded,
//! and the CPU-decoded tiles uploaded.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::decode::cpu_worker::{cpu_decode, cpu_worker, CpuSlot};
use super::decode::slot::Slot;
use super::decode::sm::{sm_accepts, sm_part, split_launches, SmFlight, SmJpeg, SmKernels, SmTile};
use super::decode::{ChunkOut, Declined};
use super::engine::Engine;
use super::io::posix::plans_by_source;
use super::lanes::Lane;
use super::memory::{DevTile, StreamAlloc};
use super::pool::Pooled;
use super::queue::GpuResult;
use super::queue::{Miss, WorkQueue};
use super::queue::{Need, Src};
use super::scheduler::{decoders_wanted, lane_chunk, lane_route, order_misses, sm_takes_call, to_gpu, Route};
use super::sys::{cuda, Res};
use super::trace::{self, Finished};
use crate::codec::jpeg_sm::SmPrepared;
use crate::error::{GpuError, Result};
use crate::index::Compression;

/// Most tiles one SM wave takes (`Engine::sm_decode`): a call of more is decoded in waves
/// that alternate between the lane's two slots, so one wave's host work overlaps the
/// previous wave's kernels.
pub(crate) const SM_WAVE_TILES: usize = 4096;

/// Move a finished launch's outcomes into `out`.
fn push_chunk(out: &mut Vec<(Miss, GpuResult)>, (done, settled): ChunkOut) {
    out.extend(done.into_iter().map(|(m, t)| (m, Ok(t))));
    out.extend(settled);
}

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
        // SLIDESTREAM_GPU_SM_DECODER: the SM decoder takes a call of enough tiles first
        // (`scheduler::sm_takes_call`: its rate grows with the batch, and a small call waits for
        // its slowest tile); the tiles it declines go on to the lanes. (Asked only once the
        // lanes are ready: `gpu` is empty before.)
        let (gpu, sm_done) = match if sm_takes_call(gpu.len()) { self.sm_decoder()? } else { None } {
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

    /// The SM decoder's share of a call: `misses` in waves of up to [`SM_WAVE_TILES`]
    /// tiles, the waves alternating between the lane's two slots so that the host work of one
    /// wave (coalesced `pread`s into the slot's pinned buffer; each tile framed straight into
    /// its place in the slot's arena and checked, on the rayon pool, routed by
    /// `scheduler::lane_route` with the SM decoder's check `sm_accepts`) overlaps the kernels of
    /// the wave before. Every launch is finished and both streams synchronised before
    /// returning, so the tiles are complete. Returns the misses it declined (for the lanes and
    /// CPU workers) and the outcomes of the rest: decoded tiles, errors, and `Err(None)` for
    /// tiles whose segments failed (to the CPU).
    pub(crate) fn sm_decode(&self, k: &SmKernels, lane: &mut Lane, srcs: &[Src<'_>], misses: Vec<Miss>) -> Result<SmShare> {
        let env = self.nv_env()?;
        let sm = SmJpeg { kernels: k, env: &env };
        if self.io.files.cufile.is_some() {
            self.counters.note_cufile_skip(
                "SLIDESTREAM_GPU_SM_DECODER: the SM decoder's tiles are read with POSIX into pinned host memory, where it frames and checks them".into(),
            );
        }
        let (mut out, mut declined) = (Vec::new(), Vec::new());
        // Cuts the waves are not aligned to: a call of 1.2 waves decodes as two of 0.6.
        let waves = misses.len().div_ceil(SM_WAVE_TILES).max(1);
        let per_wave = misses.len().div_ceil(waves).max(1);
        let mut flying: [Vec<SmFlight>; 2] = [Vec::new(), Vec::new()];
        let r = (|| -> Result<()> {
            for (w, wave) in misses.chunks(per_wave).enumerate() {
                let si = w % 2;
                for f in std::mem::take(&mut flying[si]) {
                    push_chunk(&mut out, sm.finish(&mut lane.slots[si], srcs, f)?);
                }
                let t0 = std::time::Instant::now();
                let (tiles, settled, cpu) = self.sm_stage(&mut lane.slots[si], srcs, wave)?;
                out.extend(settled);
                declined.extend(cpu);
                let launches = split_launches(tiles);
                let last = launches.len().saturating_sub(1);
                for (i, launch) in launches.into_iter().enumerate() {
                    let f = sm.submit(&mut lane.slots[si], launch)?;
                    if i < last {
                        // A wave cut by the scratch bound: each launch's descriptors and
                        // statuses use the slot's pinned buffer, so one at a time.
                        push_chunk(&mut out, sm.finish(&mut lane.slots[si], srcs, f)?);
                    } else {
                        flying[si].push(f);
                    }
                }
                self.counters.trace.since(trace::SM_HOST, t0);
            }
            let t0 = std::time::Instant::now();
            for si in [0, 1] {
                for f in std::mem::take(&mut flying[si]) {
                    push_chunk(&mut out, sm.finish(&mut lane.slots[si], srcs, f)?);
                }
            }
            // The convert launches and the blocks' copies are on the slots' streams.
            lane.slots[0].stream.sync()?;
            lane.slots[1].stream.sync()?;
            self.counters.trace.since(trace::SM_WAIT, t0);
            Ok(())
        })();
        if r.is_err() {
            // A launch left in flight by a failure: wait for it before its slot's buffers
            // can be written again (errors here add nothing to the first).
            for (si, f) in flying.iter().enumerate() {
                if !f.is_empty() {
                    let _ = lane.slots[si].stream.sync();
                }
            }
        }
        r?;
        Ok((declined, out))
    }

    /// Host work of one SM wave on `slot`: `wave`'s tiles read into the slot's pinned buffer,
    /// each framed into its own place in the slot's arena (at most its stored length plus the
    /// level's framing prefix and 32 bytes, as the lanes' arena; a longer framing goes to the
    /// lanes) and checked by `sm_accepts`, in parallel on the rayon pool. Returns the accepted
    /// tiles (in arena order), the settled ones (read or framing errors) and the declined ones.
    #[allow(clippy::type_complexity)]
    fn sm_stage(&self, slot: &mut Slot, srcs: &[Src<'_>], wave: &[Miss]) -> Result<(Vec<SmTile>, Vec<(Miss, GpuResult)>, Vec<Miss>)> {
        let read = super::io::posix::read_chunk(&mut slot.pinned, &self.counters, srcs, wave)?;
        let prefix = |m: &Miss| crate::codec::stream::prefix_len(&srcs[m.src as usize].img.codec) + 32;
        let bounds: Vec<usize> = wave.iter().zip(&read.place).map(|(m, p)| p.map_or(0, |(_, len)| len + prefix(m))).collect();
        let arena_len: usize = bounds.iter().sum();
        slot.arena.ensure(arena_len)?;
        // Each tile's place in the arena, split off so the rayon tasks write disjoint slices.
        let mut parts: Vec<(usize, &mut [u8])> = Vec::with_capacity(wave.len());
        let mut rest = slot.arena.as_mut_slice(arena_len);
        let mut at = 0usize;
        for &b in &bounds {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(b);
            parts.push((at, part));
            rest = tail;
            at += b;
        }
        let buf: &[u8] = slot.pinned.as_mut_slice(read.total);
        use rayon::prelude::*;
        let routed: Vec<(Miss, usize, usize, Route<SmPrepared>)> = wave
            .par_iter()
            .zip(&read.place)
            .zip(parts)
            .filter_map(|((m, place), (at, part))| Some((m, (*place)?, at, part)))
            .map_init(Vec::new, |tmp, (m, (off, len), at, part)| {
                let src = &srcs[m.src as usize];
                let r = super::chunk::frame_tile(src, m, &buf[off..off + len], tmp);
                let mut framed = 0;
                let route = lane_route(src.img.codec.jpeg_scale(), r, || {
                    if tmp.len() > part.len() {
                        return Err(Declined::Elsewhere(format!("SM decoder: a framed tile of {} bytes from {len} stored", tmp.len())));
                    }
                    framed = tmp.len();
                    part[..framed].copy_from_slice(tmp);
                    sm_accepts(src, m, &part[..framed])
                });
                (*m, at, framed, route)
            })
            .collect();
        // Rayon work run on this thread while it waited may have left another context current.
        self.make_current()?;
        let (mut tiles, mut settled, mut declined) = (Vec::with_capacity(routed.len()), read.failed, Vec::new());
        for (m, at, len, route) in routed {
            match route {
                Route::Decoder(p) => tiles.push(SmTile { miss: m, at, len, prepared: p, part: sm_part(&srcs[m.src as usize], &m) }),
                Route::Cpu(_) => declined.push(m),
                Route::Failed(e) => settled.push((m, Err(Some(e)))),
            }
        }
        Ok((tiles, settled, declined))
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
