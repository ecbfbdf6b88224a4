//! POSIX reads of one chunk: the read planner's coalesced requests `pread` into the slot's
//! pinned host buffer by the read layer's one plan-to-bytes loop ([`ReadPlan::read_into`],
//! in the process's I/O pool when there are several).
//!
//! [`ReadPlan::read_into`]: crate::io::plan::ReadPlan::read_into

use std::sync::atomic::Ordering::Relaxed;

use crate::error::{Error, Location};
use crate::gpu::cuda::decode::GpuResult;
use crate::gpu::cuda::engine::Engine;
use crate::gpu::cuda::lanes::Slot;
use crate::gpu::cuda::queue::Miss;
use crate::gpu::cuda::sys::Res;
use crate::gpu::cuda::trace;
use crate::io::plan::{plan_reads, Want};
use crate::slide::Slide;

/// A chunk read into a slot's pinned buffer: bytes used, where each tile lies (`(offset, len)`
/// in the buffer, `None` when its read failed) and the tiles whose read failed.
pub(crate) struct PinnedChunk {
    pub(crate) total: usize,
    pub(crate) place: Vec<Option<(usize, usize)>>,
    pub(crate) failed: Vec<(Miss, GpuResult)>,
}

impl Engine {
    /// Read `chunk` with coalesced `pread`s into `slot.pinned`.
    pub(crate) fn read_chunk_posix(&self, slot: &mut Slot, slide: &Slide, at: &Location, chunk: &[Miss]) -> Res<PinnedChunk> {
        let mut failed = Vec::new();
        let wants: Vec<Want> = chunk.iter().enumerate().map(|(i, m)| Want { id: i, offset: m.offset, len: m.len }).collect();
        let plan = plan_reads(&wants, &slide.config().plan);
        let total = plan.read_bytes() as usize;
        slot.pinned.ensure(total)?;
        let buf = slot.pinned.as_mut_slice(total);
        let results = self.counters.trace.time(trace::READ, || plan.read_into(slide.source(), buf));
        self.counters.posix_bytes.fetch_add(plan.read_bytes(), Relaxed);
        self.counters.posix_requests.fetch_add(plan.requests.len() as u64, Relaxed);
        // Where each tile lies in the pinned buffer.
        let mut place: Vec<Option<(usize, usize)>> = vec![None; chunk.len()];
        for sp in plan.spans() {
            match &results[sp.request] {
                Ok(()) => place[sp.id] = Some((sp.start, sp.len)),
                Err(e) => {
                    let m = chunk[sp.id];
                    failed.push((m, Err(Some(Error::io_shared(&at.clone().with_tile(m.col, m.row), e)))));
                }
            }
        }
        Ok(PinnedChunk { total, place, failed })
    }
}
