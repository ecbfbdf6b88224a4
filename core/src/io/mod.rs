//! Byte sources and read planning.
//!
//! A [`ByteSource`] is a positional, thread-safe reader (`&self` reads at an offset; no shared
//! cursor), in the spirit of zarrs' storage traits: one required byte-range method plus a length.
//! [`posix::FileSource`] reads a file with `pread` (`FileExt::read_exact_at`);
//! [`MemSource`] serves bytes from memory (tests, fuzzing); [`metrics::MetricsSource`] wraps any
//! source and counts requests and bytes so tests can assert what a read plan did.
//! [`plan`] turns a set of tile byte ranges into few coalesced requests, read in parallel by the
//! process's I/O pool ([`pool`], `SLIDESTREAM_IO_DEPTH` reads in flight) after readahead hints
//! for large plans ([`hint`]). A slide of several files reads them through one
//! [`multi::SourceSet`], whose address space gives each file its own 2^44-byte range.

pub mod hint;
pub mod metrics;
pub mod multi;
pub mod plan;
pub mod pool;
pub mod posix;
#[cfg(feature = "remote")]
pub mod remote;

use std::io;

/// A positional, thread-safe source of bytes (a file, a memory buffer, a remote object).
///
/// Implementations must allow concurrent calls from many threads.
pub trait ByteSource: Send + Sync + std::fmt::Debug {
    /// Total length in bytes.
    fn len(&self) -> u64;

    /// `true` when the source holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Length in bytes of source file `id` of the slide this source serves (see
    /// [`multi::SourceSet`]); `None` when there is no such source. A plain source is one file:
    /// source 0, of [`len`](Self::len) bytes.
    fn source_len(&self, id: crate::index::SourceId) -> Option<u64> {
        (id == crate::index::SourceId::PRIMARY).then(|| self.len())
    }

    /// The path of source file `id` when it is not the file the slide was opened by (a slide
    /// of several files: [`multi::SourceSet`]), for error messages; `None` otherwise.
    fn source_path(&self, id: crate::index::SourceId) -> Option<&std::path::Path> {
        let _ = id;
        None
    }

    /// Fill `buf` with the bytes at `[offset, offset + buf.len())`.
    ///
    /// # Errors
    /// `UnexpectedEof` when the range runs past [`len`](Self::len); any OS error otherwise.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// The open file descriptor whose bytes at offset `k` are this source's bytes at offset
    /// `k`, if there is one (a local file); `None` otherwise (memory, remote objects). The GPU
    /// path registers it with cuFile instead of reopening the slide by name. The descriptor
    /// stays owned by the source.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// Read as much of `[offset, offset + buf.len())` as is in memory now (the page cache of a
    /// local file), from the start of `buf`, without waiting for a device; returns the number of
    /// bytes read (`0..=buf.len()`). `0` when the source cannot tell (the default: memory and
    /// remote sources, whose reads never wait on a local device) or on any error: the blocking
    /// read that follows ([`read_exact_at`](Self::read_exact_at)) reads the rest and reports
    /// real problems. [`plan::ReadPlan::read_into`] reads the cached requests of a plan this way
    /// on the calling thread and hands only the rest to the I/O pool.
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> usize {
        let _ = (buf, offset);
        0
    }

    /// Read several ranges, `(buffer, offset)` each, in one call, the way this source does it
    /// best; `None` when the source has no such way (the caller then reads them itself, in
    /// its I/O pool). A remote object answers `Some`: its ranged GETs go out concurrently
    /// ([`remote::RemoteSource`]). The results are in the order of `parts`.
    fn read_many(&self, parts: &mut [(&mut [u8], u64)]) -> Option<Vec<io::Result<()>>> {
        let _ = parts;
        None
    }

    /// `true` for a source whose requests cross a network (each costs a round trip: a
    /// [`remote::RemoteSource`]). Informational: the open of a URL is what switches the slide's
    /// planner to the remote coalescing settings (`Config::remote_plan`).
    fn is_remote(&self) -> bool {
        false
    }
}

impl<T: ByteSource + ?Sized> ByteSource for std::sync::Arc<T> {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn source_len(&self, id: crate::index::SourceId) -> Option<u64> {
        (**self).source_len(id)
    }
    fn source_path(&self, id: crate::index::SourceId) -> Option<&std::path::Path> {
        (**self).source_path(id)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        (**self).raw_fd()
    }
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> usize {
        (**self).read_cached_at(buf, offset)
    }
    fn read_many(&self, parts: &mut [(&mut [u8], u64)]) -> Option<Vec<io::Result<()>>> {
        (**self).read_many(parts)
    }
    fn is_remote(&self) -> bool {
        (**self).is_remote()
    }
}

impl<T: ByteSource + ?Sized> ByteSource for Box<T> {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn source_len(&self, id: crate::index::SourceId) -> Option<u64> {
        (**self).source_len(id)
    }
    fn source_path(&self, id: crate::index::SourceId) -> Option<&std::path::Path> {
        (**self).source_path(id)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_exact_at(buf, offset)
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        (**self).raw_fd()
    }
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> usize {
        (**self).read_cached_at(buf, offset)
    }
    fn read_many(&self, parts: &mut [(&mut [u8], u64)]) -> Option<Vec<io::Result<()>>> {
        (**self).read_many(parts)
    }
    fn is_remote(&self) -> bool {
        (**self).is_remote()
    }
}

/// Bytes held in memory; used by tests and fuzz targets.
#[derive(Debug, Clone)]
pub struct MemSource {
    data: std::sync::Arc<[u8]>,
}

impl MemSource {
    /// Wrap a byte buffer.
    pub fn new(data: impl Into<std::sync::Arc<[u8]>>) -> Self {
        MemSource { data: data.into() }
    }
}

impl ByteSource for MemSource {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= self.data.len() as u64 => {
                buf.copy_from_slice(&self.data[offset as usize..end as usize]);
                Ok(())
            }
            _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of data")),
        }
    }
}
