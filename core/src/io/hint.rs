//! Readahead hints: `posix_fadvise(POSIX_FADV_WILLNEED)` over the byte ranges a batch is about
//! to read, so the kernel queues every one of them on the device at once (it starts the reads and
//! returns without waiting) and the `pread`s that follow find their pages in the page cache or
//! already in flight. Only for sources with a file descriptor ([`ByteSource::raw_fd`]);
//! memory and remote sources are skipped.

use super::plan::ReadPlan;
use super::ByteSource;

/// Longest range given to one hint. Linux starts at most max(the device's optimal I/O size, the
/// file's readahead window) per `WILLNEED` call (`force_page_cache_ra` in mm/readahead.c; the
/// window is 128 KiB by default), so longer ranges are hinted in pieces of this size.
pub const HINT_PIECE_BYTES: u64 = 128 << 10;

/// Plans of fewer requests than this are not hinted by [`ReadPlan::prefetch`]: a reader of
/// the default depth has that many in flight at once by itself, so the hint would only add a
/// task and a system call per request.
pub const HINT_MIN_REQUESTS: usize = 2 * super::pool::DEFAULT_DEPTH;

/// Ask the kernel to read `ranges` (`(offset, len)` in bytes) of `src` into the page cache now.
/// Returns the number of `posix_fadvise` calls made: 0 when `src` has no descriptor. A hint
/// never fails a read: the calls' errors are ignored (the reads that follow report any real
/// problem).
pub fn will_need(src: &dyn ByteSource, ranges: impl IntoIterator<Item = (u64, u64)>) -> usize {
    match src.raw_fd() {
        Some(fd) => hint_fd(fd, src.len(), ranges),
        None => 0,
    }
}

/// [`will_need`] issued from another thread (one of the I/O pool's, else a new one), so the
/// caller goes on at once: its own reads then overlap the hinted ones instead of waiting behind
/// the hint calls, which block while the device's queue is full. The descriptor is duplicated
/// for the task (closed when it ends), so `src` may be dropped meanwhile. `false` when `src` has
/// no descriptor or the hint could not be started.
pub fn will_need_in_background(src: &dyn ByteSource, ranges: Vec<(u64, u64)>) -> bool {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let Some(raw) = src.raw_fd() else { return false };
    // SAFETY: duplicating a descriptor the source owns and keeps open for this call.
    let dup = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return false;
    }
    // SAFETY: `dup` is a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(dup) };
    let len = src.len();
    let task = move || {
        hint_fd(fd.as_raw_fd(), len, ranges);
    };
    match super::pool::io_pool() {
        Some(p) => {
            p.spawn(task);
            true
        }
        None => std::thread::Builder::new().name("slidestream-hint".into()).spawn(task).is_ok(),
    }
}

/// The hint calls of [`will_need`] on descriptor `fd` of a source of `src_len` bytes.
fn hint_fd(fd: std::os::fd::RawFd, src_len: u64, ranges: impl IntoIterator<Item = (u64, u64)>) -> usize {
    let mut calls = 0;
    for (offset, len) in ranges {
        let end = offset.saturating_add(len).min(src_len);
        let mut at = offset;
        while at < end {
            let n = (end - at).min(HINT_PIECE_BYTES);
            let (Ok(o), Ok(l)) = (libc::off_t::try_from(at), libc::off_t::try_from(n)) else { break };
            // SAFETY: posix_fadvise on the source's own open descriptor with integer arguments;
            // it reads or changes no memory of ours.
            unsafe { libc::posix_fadvise(fd, o, l, libc::POSIX_FADV_WILLNEED) };
            calls += 1;
            at += n;
        }
    }
    calls
}

impl ReadPlan {
    /// [`will_need`] over every request of the plan (the GPU path calls this for a whole call's
    /// misses before its lanes start reading their chunks).
    pub fn will_need(&self, src: &dyn ByteSource) -> usize {
        will_need(src, self.requests.iter().map(|r| (r.offset, r.len)))
    }

    /// For a call that reads this plan in pieces over time (the GPU lanes' chunks, CPU
    /// workers' runs): the whole plan hinted in the background ([`will_need_in_background`])
    /// when it has at least [`HINT_MIN_REQUESTS`] requests and `src` a descriptor, so the device
    /// fetches everything while the first pieces are read and decoded. Returns whether a hint
    /// was started. Measured on the lanes' shape: cold 6.7k → 9.9k patches/s, warm unchanged
    /// (docs/benchmarks.md, "Cold-cache reads").
    pub fn prefetch(&self, src: &dyn ByteSource) -> bool {
        self.requests.len() >= HINT_MIN_REQUESTS && will_need_in_background(src, self.requests.iter().map(|r| (r.offset, r.len)).collect())
    }
}

/// Drop `src`'s pages in `[offset, offset + len)` (`len` 0 = to the end) from the page cache
/// (`POSIX_FADV_DONTNEED`; clean pages that no one maps), so that the next reads go to the
/// device: the `cold_read` benchmark's eviction, also used by tests. `false` when `src` has no
/// descriptor or the call failed.
pub fn dont_need(src: &dyn ByteSource, offset: u64, len: u64) -> bool {
    let Some(fd) = src.raw_fd() else { return false };
    let (Ok(o), Ok(l)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else { return false };
    // SAFETY: as in `will_need`.
    unsafe { libc::posix_fadvise(fd, o, l, libc::POSIX_FADV_DONTNEED) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::plan::{plan_reads, PlanOptions, Want};

    #[test]
    fn hints_are_skipped_without_a_descriptor_and_split_long_ranges() {
        let mem = crate::io::MemSource::new(vec![1u8; 1 << 20]);
        assert_eq!(will_need(&mem, [(0, 4096), (8192, 4096)]), 0);
        assert!(!dont_need(&mem, 0, 0));
        let dir = std::env::temp_dir().join(format!("slidestream-hint-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.bin");
        std::fs::write(&p, vec![3u8; 600 << 10]).unwrap();
        let src = crate::io::posix::FileSource::open(&p).unwrap();
        // One call per range, a long range in pieces, and nothing past the end of the file.
        assert_eq!(will_need(&src, [(0, 4096), (4096, 300 << 10), (1 << 30, 10)]), 1 + 3);
        let plan = plan_reads(&[Want { id: 0, offset: 0, len: 100 }, Want { id: 1, offset: 400 << 10, len: 100 }], &PlanOptions::default());
        assert_eq!(plan.will_need(&src), 2);
        assert_eq!(plan.will_need(&mem), 0);
        assert!(!will_need_in_background(&mem, vec![(0, 100)]));
        assert!(will_need_in_background(&src, vec![(0, 100), (400 << 10, 100)]));
        assert!(!plan.prefetch(&src), "2 requests: too few to hint");
        assert!(dont_need(&src, 0, 0));
        // Hinted or evicted, the bytes read are the file's.
        let mut buf = vec![0u8; plan.read_bytes() as usize];
        assert!(plan.read_into(&src, &mut buf).iter().all(|r| r.is_ok()));
        assert!(buf.iter().all(|&b| b == 3));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
