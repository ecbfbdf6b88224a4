//! Decode lanes: a lane is two slots (stream + nvJPEG states + buffers) used alternately by one
//! caller, so reading and parsing chunk k + 1 on the host overlaps decoding chunk k on the
//! device. The engine keeps them in a [`Pool`]: exactly `SLIDESTREAM_GPU_WORKERS` for ordinary
//! callers (made and warmed at start; more concurrent callers wait for a free one), plus extra
//! ones for rayon worker threads that must not wait.

use super::context::Stream;
use super::decode::nvjpeg::{Decoders, State};
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

/// One half of a lane's double buffer. Every resource is freed when the slot drops.
pub(crate) struct Slot {
    /// Planar nvJPEG outputs of the chunk.
    pub(crate) scratch: DeviceBuffer,
    /// cuFile read staging (device).
    pub(crate) staging: DeviceBuffer,
    /// Spliced device bitstreams (cuFile path).
    pub(crate) spliced: DeviceBuffer,
    /// POSIX read staging / device-to-host copies (pinned host).
    pub(crate) pinned: PinnedBuffer,
    /// Spliced host bitstreams of the chunk in flight (pinned: nvJPEG copies them to the
    /// device; measured faster than pageable memory).
    pub(crate) arena: PinnedBuffer,
    /// nvJPEG state of the host-bitstream decoder, made at the slot's first decode
    /// ([`Slot::host_state`]; ~0.2 s each on the H200, so a lane made for its streams alone,
    /// as the first reads of warm-up `first` need it, is cheap).
    pub(crate) state: Option<State>,
    /// nvJPEG state of the device-bitstream decoder (cuFile path), made at its first use.
    pub(crate) dev_state: Option<State>,
    pub(crate) stream: Stream,
}

impl Slot {
    /// The slot's nvJPEG state for `d`'s host-bitstream decoder, made on first use.
    pub(crate) fn host_state(&mut self, d: &Decoders) -> Res<&mut State> {
        if self.state.is_none() {
            self.state = Some(State::new(&d.host, "nvjpegJpegStateCreate")?);
        }
        Ok(self.state.as_mut().expect("made above"))
    }

    /// The slot's nvJPEG state for `d`'s device-bitstream decoder (made on first use), or
    /// `None` without one.
    pub(crate) fn device_state(&mut self, d: &Decoders) -> Res<Option<&mut State>> {
        let Some(h) = &d.device else { return Ok(None) };
        if self.dev_state.is_none() {
            self.dev_state = Some(State::new(h, "nvjpegJpegStateCreate(device)")?);
        }
        Ok(self.dev_state.as_mut())
    }
}

/// Two slots used alternately by one caller at a time.
pub(crate) struct Lane {
    pub(crate) slots: [Slot; 2],
}

/// The engine's lanes.
pub(crate) struct Lanes {
    pub(crate) pool: Pool<Lane>,
    /// Lanes one large batch is spread over (`SLIDESTREAM_GPU_WORKERS`, 1..=[`MAX_LANES`]).
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
            let r = if chunk.iter().all(|m| handles[m.src as usize].is_some()) {
                self.chunk_cufile(slot, &handles, srcs, chunk)
            } else {
                self.chunk_posix(slot, srcs, chunk)
            };
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
