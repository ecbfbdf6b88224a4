//! Read planning: turn the byte ranges of the tiles a read needs into few positional requests.
//!
//! Ranges are sorted by file offset and merged when the hole between two ranges is at most
//! [`PlanOptions::max_gap_bytes`] and the merged request stays within
//! [`PlanOptions::max_request_bytes`]; ranges that overlap the request being built are always
//! merged (requests never overlap, so no byte is read twice). A plan never spans from the
//! smallest to the largest offset regardless of the holes (the mistake cuCIM's loader makes);
//! the bytes read beyond what the tiles need are reported as read amplification. Offsets are
//! addresses of a [`super::multi::SourceSet`] (source `k` at `k·2^44`): a request never joins
//! ranges of two sources, whatever the gap setting.
//!
//! [`ReadPlan::read_into`] is the one loop from a plan to per-range bytes: it reads the requests
//! back to back into a buffer the caller provides (plain memory, or pinned memory on the GPU
//! path), in parallel in the process's I/O pool ([`super::pool`]), and [`ReadPlan::slices`]
//! then yields every wanted
//! range's bytes (or its request's error). [`ReadPlan::spans`] gives the same layout for
//! callers that read the requests themselves (cuFile into device memory).

use std::io;

use rayon::prelude::*;

use super::ByteSource;

/// Knobs of the planner. Defaults: 8 KiB maximum gap, 8 MiB maximum request
/// (`SLIDESTREAM_PLAN_MAX_GAP_BYTES`, `SLIDESTREAM_PLAN_MAX_REQUEST_BYTES`, see `config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanOptions {
    /// Largest hole, in bytes, between two ranges that are still read as one request.
    pub max_gap_bytes: u64,
    /// Largest single request, in bytes. A range longer than this is still read whole, and
    /// ranges overlapping each other are read as one request whatever its size.
    pub max_request_bytes: u64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions { max_gap_bytes: 8 << 10, max_request_bytes: 8 << 20 }
    }
}

/// One byte range wanted by the caller, tagged with the caller's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    /// Caller's identifier for this range (e.g. the index of a tile in its batch).
    pub id: usize,
    /// File offset in bytes.
    pub offset: u64,
    /// Length in bytes (> 0).
    pub len: u64,
}

/// Plans of at most this many bytes read what the page cache holds on the calling thread
/// ([`ByteSource::read_cached_at`]) before handing the rest to the I/O pool
/// ([`ReadPlan::read_into`]); larger plans go to the pool whole, whose threads copy in parallel.
pub const CACHED_INLINE_BYTES: usize = 4 << 20;

/// One positional read covering one or more wanted ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// File offset of the request, in bytes.
    pub offset: u64,
    /// Length of the request, in bytes.
    pub len: u64,
    /// The wanted ranges served by this request, as `(id, offset within the request, len)`.
    pub members: Vec<(usize, u64, u64)>,
}

/// A complete plan: requests in increasing offset order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadPlan {
    /// The requests, sorted by offset, non-overlapping.
    pub requests: Vec<Request>,
    /// Sum of the wanted lengths (bytes the tiles need; duplicates counted once per range).
    pub needed_bytes: u64,
}

impl ReadPlan {
    /// Total bytes the requests read.
    pub fn read_bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.len).sum()
    }

    /// Check the plan's contract for `wants` under `opts`: requests are sorted and disjoint;
    /// every non-empty wanted range is served exactly once, at its offset, by a request that
    /// contains it; a request is no longer than its ranges; and a request exceeds
    /// `max_request_bytes` only where a range overlaps the ranges before it (or is alone).
    /// Used by the tests and the `planner` fuzz target.
    ///
    /// # Errors
    /// A message describing the first violation.
    pub fn check(&self, wants: &[Want], opts: &PlanOptions) -> Result<(), String> {
        let mut seen = vec![0u32; wants.len()];
        let mut prev_end = 0u64;
        for (k, r) in self.requests.iter().enumerate() {
            if k > 0 && r.offset < prev_end {
                return Err(format!("request {k} at {} overlaps or precedes the previous one (ends {prev_end})", r.offset));
            }
            prev_end = r.offset + r.len;
            let mut end = 0u64;
            for (m, &(id, off, len)) in r.members.iter().enumerate() {
                if m > 0 && off >= end && (off + len).max(end) > opts.max_request_bytes {
                    return Err(format!("request {k} exceeds {} bytes without overlapping ranges", opts.max_request_bytes));
                }
                end = end.max(off + len);
                let w = wants.get(id).ok_or_else(|| format!("request {k} serves unknown range {id}"))?;
                if (r.offset + off, len) != (w.offset, w.len) {
                    return Err(format!("request {k} serves range {id} at {}+{len}, wanted {}+{}", r.offset + off, w.offset, w.len));
                }
                seen[id] += 1;
            }
            if end != r.len {
                return Err(format!("request {k} is {} bytes for ranges ending at {end}", r.len));
            }
        }
        match wants.iter().zip(&seen).find(|(w, &n)| n != (w.len > 0) as u32) {
            Some((w, n)) => Err(format!("range {w:?} served {n} times")),
            None => Ok(()),
        }
    }

    /// Read amplification: bytes read / bytes needed (1.0 for an empty plan).
    pub fn amplification(&self) -> f64 {
        if self.needed_bytes == 0 {
            1.0
        } else {
            self.read_bytes() as f64 / self.needed_bytes as f64
        }
    }
}

/// Where one wanted range lies when a plan's requests are read back to back into one buffer
/// (request `k` at the sum of the lengths of requests `0..k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Index of the request serving the range in [`ReadPlan::requests`].
    pub request: usize,
    /// The caller's id of the range ([`Want::id`]).
    pub id: usize,
    /// First byte of the range in the buffer.
    pub start: usize,
    /// Length of the range in bytes.
    pub len: usize,
}

impl ReadPlan {
    /// Start of every request in the back-to-back buffer (see [`Span`]).
    pub fn request_starts(&self) -> Vec<usize> {
        let mut at = 0usize;
        self.requests
            .iter()
            .map(|r| {
                let s = at;
                at += r.len as usize;
                s
            })
            .collect()
    }

    /// Every wanted range with its place in the back-to-back buffer, in plan order.
    pub fn spans(&self) -> impl Iterator<Item = Span> + '_ {
        let mut base = 0usize;
        self.requests.iter().enumerate().flat_map(move |(k, r)| {
            let b = base;
            base += r.len as usize;
            r.members.iter().map(move |&(id, off, len)| Span { request: k, id, start: b + off as usize, len: len as usize })
        })
    }

    /// Read every request from `src` into `buf`, back to back (see [`Span`]); `buf` must hold at
    /// least [`read_bytes`](Self::read_bytes) bytes (the caller owns it: plain or pinned memory).
    /// More than one request: they are read in parallel in the process's I/O pool
    /// ([`super::pool`], `SLIDESTREAM_IO_DEPTH` reads in flight, never behind decodes), except
    /// that a plan of at most [`CACHED_INLINE_BYTES`] first copies what the page cache holds on
    /// the calling thread ([`ByteSource::read_cached_at`]) and pools only the rest; one
    /// request: on the calling thread. No readahead hint here: hinting requests that are read at
    /// once anyway only delays them (docs/benchmarks.md, "Cold-cache reads"); callers
    /// that read a large call in pieces later hint it first ([`ReadPlan::prefetch`]). Returns
    /// one result per request, in plan order; pass them to [`slices`](Self::slices). A `buf`
    /// shorter than [`read_bytes`](Self::read_bytes) (a caller bug) reads nothing: every
    /// request fails with `InvalidInput`.
    pub fn read_into(&self, src: &dyn ByteSource, buf: &mut [u8]) -> Vec<io::Result<()>> {
        if self.requests.len() < 2 {
            return self.read_into_with(src, buf, None);
        }
        let pool = super::pool::io_pool();
        self.read_into_with(src, buf, pool.as_deref())
    }

    /// [`read_into`](Self::read_into) in the given `pool` (one read per task): for tests and
    /// the `cold_read` benchmark, which compare pools.
    pub fn read_into_in(&self, src: &dyn ByteSource, buf: &mut [u8], pool: &rayon::ThreadPool) -> Vec<io::Result<()>> {
        self.read_into_with(src, buf, Some(pool))
    }

    /// [`read_into`](Self::read_into) on the calling thread only (for callers that are already
    /// one of several parallel workers, such as the GPU engine's CPU decode workers).
    pub fn read_into_serial(&self, src: &dyn ByteSource, buf: &mut [u8]) -> Vec<io::Result<()>> {
        self.read_into_with(src, buf, None)
    }

    /// `pool`: `Some(pool)` = one read per task in it (when it has more than one thread and
    /// there is more than one request), `None` = serial.
    fn read_into_with(&self, src: &dyn ByteSource, buf: &mut [u8], pool: Option<&rayon::ThreadPool>) -> Vec<io::Result<()>> {
        let total = self.read_bytes() as usize;
        if buf.len() < total {
            let short = || io::Error::new(io::ErrorKind::InvalidInput, format!("read buffer of {} bytes for a plan of {total}", buf.len()));
            return self.requests.iter().map(|_| Err(short())).collect();
        }
        let mut parts: Vec<&mut [u8]> = Vec::with_capacity(self.requests.len());
        let mut rest = &mut buf[..total];
        for r in &self.requests {
            let (a, b) = rest.split_at_mut(r.len as usize);
            parts.push(a);
            rest = b;
        }
        // A source with its own batched reads (a remote object: concurrent ranged GETs) takes
        // the whole plan at once.
        if self.requests.len() > 1 {
            let mut batch: Vec<(&mut [u8], u64)> = parts.iter_mut().zip(&self.requests).map(|(p, r)| (&mut **p, r.offset)).collect();
            if let Some(results) = src.read_many(&mut batch) {
                return results;
            }
        }
        let read = |(p, r): (&mut &mut [u8], &Request)| src.read_exact_at(p, r.offset);
        match pool {
            Some(pool) if pool.current_num_threads() > 1 && self.requests.len() > 1 => {
                // A small plan: what the page cache holds is copied here, at once, and only
                // the rest goes to the pool (handing a few warm reads to other threads costs
                // more than the copies, and the pool's waking threads take the cores the
                // decodes need).
                let mut rest: Vec<(usize, usize)> = Vec::with_capacity(parts.len());
                if total <= CACHED_INLINE_BYTES {
                    for (k, (p, r)) in parts.iter_mut().zip(&self.requests).enumerate() {
                        let n = src.read_cached_at(p, r.offset);
                        if n < p.len() {
                            rest.push((k, n));
                        }
                    }
                    if rest.is_empty() {
                        return self.requests.iter().map(|_| Ok(())).collect();
                    }
                } else {
                    rest.extend((0..parts.len()).map(|k| (k, 0)));
                }
                // One read a task: reads take unequal times (a cold request waits for the
                // device, a warm one copies from the page cache), so none should queue behind
                // another.
                let mut results: Vec<io::Result<()>> = self.requests.iter().map(|_| Ok(())).collect();
                let mut todo: Vec<(usize, &mut [u8], u64)> = Vec::with_capacity(rest.len());
                let mut rest_it = rest.iter().peekable();
                for (k, p) in parts.iter_mut().enumerate() {
                    if let Some(&&(j, n)) = rest_it.peek().filter(|(j, _)| *j == k) {
                        rest_it.next();
                        todo.push((j, &mut p[n..], self.requests[j].offset + n as u64));
                    }
                }
                let got: Vec<(usize, io::Result<()>)> =
                    pool.install(|| todo.par_iter_mut().with_max_len(1).map(|(k, p, off)| (*k, src.read_exact_at(p, *off))).collect());
                for (k, r) in got {
                    results[k] = r;
                }
                results
            }
            _ => parts.iter_mut().zip(self.requests.iter()).map(read).collect(),
        }
    }

    /// Every wanted range's bytes in `buf` after [`read_into`](Self::read_into) returned
    /// `results`, as `(id, bytes or the error of the request that should have read them)`, in
    /// plan order.
    pub fn slices<'b>(&'b self, buf: &'b [u8], results: &'b [io::Result<()>]) -> impl Iterator<Item = (usize, Result<&'b [u8], &'b io::Error>)> + 'b {
        self.spans().map(move |s| match &results[s.request] {
            Ok(()) => (s.id, Ok(&buf[s.start..s.start + s.len])),
            Err(e) => (s.id, Err(e)),
        })
    }
}

/// Worker threads of `pool` (or of rayon's global pool).
pub fn pool_threads(pool: Option<&rayon::ThreadPool>) -> usize {
    pool.map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
}

/// Run `f` (which uses rayon parallel iterators) in `pool`, or in the global pool.
pub fn in_pool<T: Send>(pool: Option<&rayon::ThreadPool>, f: impl FnOnce() -> T + Send) -> T {
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// Build a plan for `wants` (any order; zero-length ranges are ignored).
///
/// Ranges that overlap or repeat (two tiles sharing bytes) are served by the same request.
pub fn plan_reads(wants: &[Want], opts: &PlanOptions) -> ReadPlan {
    let mut sorted: Vec<Want> = wants.iter().copied().filter(|w| w.len > 0).collect();
    sorted.sort_unstable_by_key(|w| (w.offset, w.len));
    let mut plan = ReadPlan::default();
    type Open = (u64, u64, Vec<(usize, u64, u64)>); // start, end, members
    let mut cur: Option<Open> = None;
    for w in sorted {
        let w_end = w.offset.saturating_add(w.len);
        plan.needed_bytes = plan.needed_bytes.saturating_add(w.len);
        if let Some((start, end, members)) = cur.as_mut() {
            let same_source = w.offset >> super::multi::SOURCE_SHIFT == *start >> super::multi::SOURCE_SHIFT;
            let gap_ok = same_source && w.offset <= end.saturating_add(opts.max_gap_bytes);
            let new_end = (*end).max(w_end);
            // A range that overlaps the open request is always merged, even past the size
            // limit: a separate request would read the shared bytes twice (a file whose tiles
            // each extend the previous one by a byte would be read and held once per tile).
            let size_ok = new_end - *start <= opts.max_request_bytes || w.offset < *end;
            if gap_ok && size_ok {
                *end = new_end;
                members.push((w.id, w.offset - *start, w.len));
                continue;
            }
            let (s, e, m) = cur.take().unwrap_or_default();
            plan.requests.push(Request { offset: s, len: e - s, members: m });
        }
        cur = Some((w.offset, w_end, vec![(w.id, 0, w.len)]));
    }
    if let Some((s, e, m)) = cur {
        plan.requests.push(Request { offset: s, len: e - s, members: m });
    }
    plan
}

/// Decode a fuzzer's bytes into planner options and wanted ranges: byte 0 × 64 is the gap,
/// 1 + byte 1 × 256 the request limit, then 4 bytes per range (u16 LE offset × 16, length
/// byte 2 × 8 + byte 3). Shared by the `planner` fuzz target and the regression test that
/// replays its findings (`core/tests/corrupt.rs`), so both read the same inputs the same way.
/// `None` for fewer than 4 bytes.
#[doc(hidden)]
pub fn decode_fuzz_input(data: &[u8]) -> Option<(PlanOptions, Vec<Want>)> {
    if data.len() < 4 {
        return None;
    }
    let opts = PlanOptions { max_gap_bytes: data[0] as u64 * 64, max_request_bytes: 1 + data[1] as u64 * 256 };
    let wants = data[2..]
        .chunks_exact(4)
        .enumerate()
        .map(|(id, c)| Want { id, offset: u16::from_le_bytes([c[0], c[1]]) as u64 * 16, len: c[2] as u64 * 8 + c[3] as u64 })
        .collect();
    Some((opts, wants))
}

#[cfg(test)]
mod tests;
