//! A [`ByteSource`] wrapper that counts requests and bytes.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use super::ByteSource;

/// Counters of one byte source: number of read requests and bytes returned.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IoCounters {
    /// Read requests issued (one per `read_exact_at` call, or per range read whole from the page
    /// cache by `read_cached_at`).
    pub requests: u64,
    /// Bytes requested and read.
    pub bytes: u64,
}

/// Wraps a source and counts every request and byte that goes through it (relaxed atomics, so
/// counting costs next to nothing on the read path).
#[derive(Debug)]
pub struct MetricsSource<S> {
    inner: S,
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl<S: ByteSource> MetricsSource<S> {
    /// Wrap `inner` with zeroed counters.
    pub fn new(inner: S) -> Self {
        MetricsSource { inner, requests: AtomicU64::new(0), bytes: AtomicU64::new(0) }
    }

    /// The counters so far.
    pub fn counters(&self) -> IoCounters {
        IoCounters {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    /// Zero the counters.
    pub fn reset(&self) {
        self.requests.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
    }

    /// The wrapped source.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: ByteSource> ByteSource for MetricsSource<S> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn source_len(&self, id: crate::index::SourceId) -> Option<u64> {
        self.inner.source_len(id)
    }
    fn source_path(&self, id: crate::index::SourceId) -> Option<&std::path::Path> {
        self.inner.source_path(id)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.read_exact_at(buf, offset)
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.raw_fd()
    }
    /// Counted as one request when it reads the whole range; the bytes of a partial cached
    /// read are counted, and its request when the blocking read of the rest follows.
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> usize {
        let n = self.inner.read_cached_at(buf, offset);
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if n == buf.len() && n > 0 {
            self.requests.fetch_add(1, Ordering::Relaxed);
        }
        n
    }
    fn read_many(&self, parts: &mut [(&mut [u8], u64)]) -> Option<Vec<io::Result<()>>> {
        let r = self.inner.read_many(parts)?;
        self.requests.fetch_add(parts.len() as u64, Ordering::Relaxed);
        self.bytes.fetch_add(parts.iter().map(|(b, _)| b.len() as u64).sum(), Ordering::Relaxed);
        Some(r)
    }
    fn is_remote(&self) -> bool {
        self.inner.is_remote()
    }
}
