//! POSIX reads of one chunk: per slide of the chunk, the read planner's coalesced requests
//! `pread` into the slot's pinned host buffer by the read layer's one plan-to-bytes loop
//! ([`ReadPlan::read_into`], in the process's I/O pool when there are several).
//!
//! [`ReadPlan::read_into`]: crate::io::plan::ReadPlan::read_into

use std::sync::atomic::Ordering::Relaxed;

use crate::error::Error;
use crate::gpu::cuda::counters::Counters;
use crate::gpu::cuda::memory::PinnedBuffer;
use crate::gpu::cuda::queue::GpuResult;
use crate::gpu::cuda::queue::Miss;
use crate::gpu::cuda::queue::Src;
use crate::gpu::cuda::sys::Res;
use crate::gpu::cuda::trace;
use crate::io::plan::{plan_reads, ReadPlan, Want};
use crate::read::sources::group_by_source;

/// A chunk read into a slot's pinned buffer: bytes used, where each tile lies (`(offset, len)`
/// in the buffer, `None` when its read failed) and the tiles whose read failed.
pub(crate) struct PinnedChunk {
    pub(crate) total: usize,
    pub(crate) place: Vec<Option<(usize, usize)>>,
    pub(crate) failed: Vec<(Miss, GpuResult)>,
}

/// Read `chunk` (tiles of any of the call's sources `srcs`) with coalesced `pread`s into
/// `pinned` (a lane slot's buffer, grown as needed): one read plan per source, the plans'
/// bytes back to back; bytes and requests counted in `counters`.
pub(crate) fn read_chunk(pinned: &mut PinnedBuffer, counters: &Counters, srcs: &[Src<'_>], chunk: &[Miss]) -> Res<PinnedChunk> {
    let mut failed = Vec::new();
    let plans = plans_by_source(srcs, chunk);
    let total: usize = plans.iter().map(|(_, p)| p.read_bytes() as usize).sum();
    pinned.ensure(total)?;
    let mut rest = pinned.as_mut_slice(total);
    let mut place: Vec<Option<(usize, usize)>> = vec![None; chunk.len()];
    let mut base = 0usize;
    for (si, plan) in &plans {
        let s = &srcs[*si as usize];
        let (buf, tail) = rest.split_at_mut(plan.read_bytes() as usize);
        rest = tail;
        let results = counters.trace.time(trace::READ, || plan.read_into(s.slide.source(), buf));
        counters.posix_bytes.fetch_add(plan.read_bytes(), Relaxed);
        counters.posix_requests.fetch_add(plan.requests.len() as u64, Relaxed);
        // Where each tile lies in the pinned buffer.
        for sp in plan.spans() {
            match &results[sp.request] {
                Ok(()) => place[sp.id] = Some((base + sp.start, sp.len)),
                Err(e) => {
                    let m = chunk[sp.id];
                    failed.push((m, Err(Some(Error::io_shared(&crate::read::locate::tile_location(&s.at, s.slide.source(), s.img, m.col, m.row), e)))));
                }
            }
        }
        base += plan.read_bytes() as usize;
    }
    Ok(PinnedChunk { total, place, failed })
}

/// One read plan per source of `chunk`'s tiles (ids: indices into `chunk`), by the source's
/// coalescing settings, in source order (the read layer's grouping,
/// [`crate::read::sources::group_by_source`]).
pub(crate) fn plans_by_source(srcs: &[Src<'_>], chunk: &[Miss]) -> Vec<(u32, ReadPlan)> {
    group_by_source(chunk, |m| m.src)
        .into_iter()
        .map(|(si, ids)| {
            let wants: Vec<Want> = ids.into_iter().map(|i| Want { id: i, offset: chunk[i].offset, len: chunk[i].len }).collect();
            (si, plan_reads(&wants, &srcs[si as usize].slide.config().plan))
        })
        .collect()
}
