//! Decode lanes: a lane is two slots (stream + nvJPEG states + buffers) used alternately by one
//! caller, so reading and parsing chunk k + 1 on the host overlaps decoding chunk k on the
//! device. The engine keeps them in a [`Pool`]: exactly `SLIDESTREAM_GPU_WORKERS` for ordinary
//! callers (made and warmed at start; more concurrent callers wait for a free one), plus extra
//! ones for rayon worker threads that must not wait.

use super::context::Stream;
use super::decode::slot::Slot;
use super::engine::Engine;
use super::io::cufile::CuFileHandle;
use super::memory::{DevTile, DeviceBuffer, PinnedBuffer};
use super::pool::{Pool, Pooled, Wait};
use super::queue::GpuResult;
use super::queue::Src;
use super::queue::{Miss, WorkQueue};
use super::sys::Res;
use super::trace;
use crate::error::Result;
use std::sync::Arc;

/// Largest `SLIDESTREAM_GPU_WORKERS`. An engine has exactly that many lanes (independent stream
/// pairs), made and warmed at start (`SLIDESTREAM_GPU_WARMUP`: by default the first before the
/// engine is returned, the others in the background); more concurrent callers wait for a free one (lanes
/// made on demand cost each caller about a second of nvJPEG set-up: measured on the H200 as 16
/// threads reading single regions at 944 patches/s against 2,948 for one thread).
pub(crate) const MAX_LANES: usize = 8;
/// Most lanes including those made for rayon worker threads that found none free (see
/// [`Engine::take_lane`]).
const MAX_OVERFLOW_LANES: usize = 64;

/// Two slots used alternately by one caller at a time.
pub(crate) struct Lane {
    pub(crate) slots: [Slot; 2],
}

/// The engine's lanes.
pub(crate) struct Lanes {
    pub(crate) pool: Pool<Lane>,
    /// Lanes of the engine (`SLIDESTREAM_GPU_WORKERS`, 1..=[`MAX_LANES`]): one per concurrent
    /// device read; one batch spreads over free ones only without CPU workers
    /// (`scheduler::decoders_wanted`).
    pub(crate) workers: usize,
    /// Smallest chunk a lane takes as the queue runs low (`SLIDESTREAM_GPU_MIN_CHUNK`,
    /// 1..=`CHUNK_TILES`; `CHUNK_TILES` = fixed chunks).
    pub(crate) min_chunk: usize,
}

impl Lanes {
    pub(crate) fn new(workers: usize, min_chunk: usize) -> Lanes {
        Lanes { pool: Pool::default(), workers: workers.clamp(1, MAX_LANES), min_chunk: min_chunk.clamp(1, super::scheduler::CHUNK_TILES) }
    }
}

impl Engine {
    /// A new lane (streams and nvJPEG states; buffers grow on first use).
    pub(crate) fn new_lane(&self) -> Res<Lane> {
        let mk = || -> Res<Slot> {
            Ok(Slot {
                scratch: DeviceBuffer::new(),
                staging: DeviceBuffer::new(),
                spliced: DeviceBuffer::new(),
                pinned: PinnedBuffer::new(),
                arena: PinnedBuffer::new(),
                state: None,
                dev_state: None,
                stream: Stream::new()?,
            })
        };
        Ok(Lane { slots: [mk()?, mk()?] })
    }

    /// A lane for a call, waiting for a free one when `SLIDESTREAM_GPU_WORKERS` exist.
    pub(crate) fn take_lane(&self) -> Res<Pooled<'_, Lane>> {
        // A rayon worker thread must not wait: while it waits, rayon may run another job on it,
        // and a job further up its own stack may hold a lane (work stealing inside the parallel
        // reads of a lane's holder), so waiting could deadlock. It gets an extra lane instead
        // (made on demand, so slow the first time), up to `MAX_OVERFLOW_LANES`.
        let limit = if rayon::current_thread_index().is_none() { self.lanes.workers } else { MAX_OVERFLOW_LANES };
        self.lanes.pool.take(limit, Wait::Yes, || self.new_lane()).expect("a waiting take always returns")
    }

    /// A lane if one is free or may still be created, without waiting. While the background
    /// warm-up is still making lanes (`warmup.rs`), only a free one: a lane made here would pay
    /// its nvJPEG set-up inside this read, while the warm-up's joins the pool warm.
    pub(crate) fn try_take_lane(&self) -> Option<Res<Pooled<'_, Lane>>> {
        let limit = if self.warm.lanes_pending() { 0 } else { self.lanes.workers };
        self.lanes.pool.take(limit, Wait::No, || self.new_lane())
    }

    /// Decode JPEG tiles on the GPU: chunks of up to `chunk_tiles` tiles (of any of the call's
    /// sources `srcs`) from the front of `q`, alternating between the lane's two slots. A chunk
    /// is read by cuFile when every slide it touches has a cuFile handle, else by POSIX.
    pub(crate) fn gpu_decode(&self, lane: &mut Lane, srcs: &[Src<'_>], q: &WorkQueue<'_>, chunk_tiles: usize, share: usize) -> Result<Vec<(Miss, GpuResult)>> {
        let handles: Vec<Option<Arc<CuFileHandle>>> = srcs.iter().map(|s| self.io.cufile_handle(s.slide, &self.counters)).collect();
        let mut out = Vec::new();
        let mut pending: [Vec<(Miss, Arc<DevTile>)>; 2] = [Vec::new(), Vec::new()];
        let mut failure = None;
        let mut k = 0usize;
        loop {
            let chunk = q.front_guided(chunk_tiles, self.lanes.min_chunk, share);
            if chunk.is_empty() {
                break;
            }
            let si = k % 2;
            k += 1;
            let slot = &mut lane.slots[si];
            // The slot's previous chunk must be complete before reuse.
            if let Err(e) = self.counters.trace.time(trace::SLOT_WAIT, || slot.stream.sync()) {
                failure = Some(e);
                break;
            }
            out.extend(pending[si].drain(..).map(|(m, t)| (m, Ok(t))));
            let r = self.nv_env().and_then(|env| {
                if chunk.iter().all(|m| handles[m.src as usize].is_some()) {
                    super::chunk::chunk_cufile(&env, slot, &handles, srcs, chunk)
                } else {
                    super::chunk::chunk_posix(&env, slot, srcs, chunk)
                }
            });
            match r {
                Ok((done, settled)) => {
                    pending[si] = done;
                    out.extend(settled);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        for (si, p) in pending.iter_mut().enumerate() {
            if let Err(e) = lane.slots[si].stream.sync() {
                failure.get_or_insert(e);
            }
            out.extend(p.drain(..).map(|(m, t)| (m, Ok(t))));
        }
        match failure {
            Some(e) => Err(e.into()),
            None => Ok(out),
        }
    }
}
