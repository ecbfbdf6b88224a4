//! POSIX reads of one chunk: the read planner's coalesced requests `pread` into the slot's
//! pinned host buffer (in the slide's pool when there are several).

use std::sync::atomic::Ordering::Relaxed;

use crate::error::{Error, Location};
use crate::gpu::cuda::decode::GpuResult;
use crate::gpu::cuda::engine::Engine;
use crate::gpu::cuda::lanes::Slot;
use crate::gpu::cuda::queue::Miss;
use crate::gpu::cuda::sys::Res;
use crate::gpu::cuda::trace;
use crate::io::plan::{plan_reads, Request, Want};
use crate::io::ByteSource;
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
        use rayon::prelude::*;
        let mut failed = Vec::new();
        let wants: Vec<Want> = chunk.iter().enumerate().map(|(i, m)| Want { id: i, offset: m.offset, len: m.len }).collect();
        let plan = plan_reads(&wants, &slide.config().plan);
        let total: usize = plan.requests.iter().map(|r| r.len as usize).sum();
        slot.pinned.ensure(total)?;
        let buf = slot.pinned.as_mut_slice(total);
        let mut parts: Vec<&mut [u8]> = Vec::with_capacity(plan.requests.len());
        let mut rest = buf;
        for r in &plan.requests {
            let (a, b) = rest.split_at_mut(r.len as usize);
            parts.push(a);
            rest = b;
        }
        let src = slide.source();
        let read = |(p, r): (&mut &mut [u8], &Request)| src.read_exact_at(p, r.offset);
        let results: Vec<std::io::Result<()>> = self.counters.trace.time(trace::READ, || {
            if plan.requests.len() > 1 && crate::pipeline::pool_threads(slide.pool()) > 1 {
                crate::pipeline::in_pool(slide.pool(), || parts.par_iter_mut().zip(plan.requests.par_iter()).map(read).collect())
            } else {
                parts.iter_mut().zip(plan.requests.iter()).map(read).collect()
            }
        });
        self.counters.posix_bytes.fetch_add(plan.read_bytes(), Relaxed);
        self.counters.posix_requests.fetch_add(plan.requests.len() as u64, Relaxed);
        // Where each tile lies in the pinned buffer.
        let mut place: Vec<Option<(usize, usize)>> = vec![None; chunk.len()];
        let mut base = 0usize;
        for (r, res) in plan.requests.iter().zip(&results) {
            for &(id, off, len) in &r.members {
                match res {
                    Ok(()) => place[id] = Some((base + off as usize, len as usize)),
                    Err(e) => {
                        let m = chunk[id];
                        failed.push((m, Err(Some(Error::io(&at.clone().with_tile(m.col, m.row), std::io::Error::new(e.kind(), e.to_string()))))));
                    }
                }
            }
            base += r.len as usize;
        }
        Ok(PinnedChunk { total, place, failed })
    }
}
