//! Slides in object storage and over HTTP: a [`ByteSource`] of ranged GETs.
//!
//! [`RemoteSource`] reads one object (an S3 / GCS / Azure blob or an HTTP resource, see
//! [`store`]) through Apache Arrow's `object_store` on this process's tokio runtime
//! ([`runtime`]). What makes it fit a slide reader:
//!
//! - **One HEAD at open** gives the length and the ETag; every later GET sends
//!   `If-Match: <etag>` and checks the ETag and the length of what came back, so an object
//!   replaced while the slide is open is a typed error (`ESTALE`, "changed since the slide
//!   was opened"), never bytes of two versions mixed. (A server that sends no ETag gets no
//!   such check; the length is still checked.)
//! - **Open-time readahead** ([`blocks`]): while the format driver parses the header, IFDs and
//!   tag arrays, small reads are served from aligned blocks
//!   (`SLIDESTREAM_REMOTE_READAHEAD_BYTES`, 256 KiB), fetched as one GET per run of missing
//!   blocks, so an open costs a few requests instead of one per structure read. The blocks
//!   are dropped when the open ends ([`RemoteSource::end_open`]); tile reads never go through
//!   them (they would read whole blocks for one tile).
//! - **An index cache** (`SLIDESTREAM_REMOTE_INDEX_CACHE`): the blocks an open read, with the
//!   object's length and ETag, kept on disk keyed by URL; a reopen replays them and sends no
//!   request at all (the first tile read's `If-Match` then checks the object is unchanged).
//! - **Batched reads** ([`ByteSource::read_many`]): the read planner's coalesced requests of a
//!   batch are issued concurrently (`SLIDESTREAM_REMOTE_CONCURRENCY` in flight), each attempt
//!   bounded by `SLIDESTREAM_REMOTE_TIMEOUT_MS`, 5xx / connection errors / timeouts retried
//!   `SLIDESTREAM_REMOTE_RETRIES` times with exponential backoff (object_store's
//!   `RetryConfig`).
//!
//! Errors become `std::io::Error`s whose kind tells the cause (`NotFound` for 404,
//! `PermissionDenied` for 401/403, `TimedOut`, `UnexpectedEof` for a short response,
//! `StaleNetworkFileHandle` for a changed object) and whose message names the URL; the read
//! layer adds the level and tile.

pub(crate) mod blocks;
pub mod files;
pub(crate) mod runtime;
pub mod store;

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::stream::{self, StreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::ByteSource;
use crate::error::{Error, Location, Result};
pub use store::{is_url, NetOptions, StorageOptions};

/// Request counters of a remote source.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RemoteStats {
    /// HTTP requests sent (GETs and HEADs; a retried request counts once: object_store does
    /// not report its retries).
    pub requests: u64,
    /// Bytes received in response bodies.
    pub bytes: u64,
    /// Requests that failed after their retries.
    pub failed: u64,
    /// Index cache entries found but not used at open because they were not valid entries
    /// (not a regular file, a symbolic link, too large, truncated, damaged, another URL's):
    /// each was a miss and is rewritten ([`blocks`]).
    pub index_cache_rejected: u64,
}

/// What became of the index cache at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexCacheUse {
    /// `SLIDESTREAM_REMOTE_INDEX_CACHE=off`, or the object has no ETag to key it by.
    Off,
    /// No usable entry: the open read the object and wrote one.
    Miss,
    /// The open was served from the entry: no request.
    Hit,
}

impl IndexCacheUse {
    /// `"off"`, `"miss"` or `"hit"`.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexCacheUse::Off => "off",
            IndexCacheUse::Miss => "miss",
            IndexCacheUse::Hit => "hit",
        }
    }
}

/// The settings of one remote source (from the `SLIDESTREAM_REMOTE_*` settings at open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Retries and per-attempt timeout.
    pub net: NetOptions,
    /// Requests in flight at once in one [`ByteSource::read_many`] call.
    pub concurrency: usize,
    /// Block size of the open-time readahead, in bytes.
    pub readahead_bytes: u64,
    /// Folder of the index cache (`None` = off).
    pub index_cache: Option<std::path::PathBuf>,
}

/// One object read by ranged GETs (module docs).
pub struct RemoteSource {
    url: String,
    opts: StorageOptions,
    settings: RemoteOptions,
    /// The store, per process (see [`runtime`]): rebuilt after `fork`.
    store: Mutex<(u32, Arc<dyn ObjectStore>)>,
    path: ObjectPath,
    len: u64,
    etag: Option<String>,
    open_phase: AtomicBool,
    blocks: Mutex<blocks::Blocks>,
    cache_use: IndexCacheUse,
    /// 1 when the open found an index cache entry it could not use ([`RemoteStats`]).
    cache_rejected: u64,
    requests: AtomicU64,
    bytes: AtomicU64,
    failed: AtomicU64,
}

/// What an open learnt of the object before any tile read: its length and ETag, the readahead
/// blocks (from the index cache or empty), whether the index cache was used, the requests sent.
struct Known {
    len: u64,
    etag: Option<String>,
    blocks: blocks::Blocks,
    cache_use: IndexCacheUse,
    cache_rejected: u64,
    requests: u64,
}

impl std::fmt::Debug for RemoteSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSource").field("url", &self.url).field("len", &self.len).field("etag", &self.etag).finish()
    }
}

impl RemoteSource {
    /// Open `url`: a HEAD for its length and ETag (none when the index cache holds the
    /// object: see the module docs), then the source is in its open phase (readahead blocks)
    /// until [`end_open`](Self::end_open).
    ///
    /// # Errors
    /// [`Error::Usage`] for a bad URL or storage option ([`store::build`]); [`Error::Io`] naming
    /// the URL when the HEAD fails (`NotFound`, `PermissionDenied`, `TimedOut`, ...).
    pub fn open(url: &str, opts: &StorageOptions, settings: RemoteOptions) -> Result<RemoteSource> {
        let at = Location::file(url);
        let (store, path) = store::build(url, opts, settings.net)?;
        let rt = runtime::runtime(&at)?;
        let lookup = settings.index_cache.as_deref().map_or(blocks::Lookup::Absent, |dir| blocks::load(dir, url, settings.readahead_bytes));
        let cache_rejected = u64::from(matches!(lookup, blocks::Lookup::Rejected));
        let (len, etag, blocks, cache_use, requests) = match lookup.entry() {
            Some(entry) => (entry.len, Some(entry.etag), entry.blocks, IndexCacheUse::Hit, 0),
            None => {
                let meta = runtime::wait(&rt, store.head(&path)).map_err(|_| Error::Interrupted)?.map_err(|e| Error::io(&at, to_io(e)))?;
                let cache_use = if settings.index_cache.is_some() && meta.e_tag.is_some() { IndexCacheUse::Miss } else { IndexCacheUse::Off };
                (meta.size, meta.e_tag, blocks::Blocks::new(settings.readahead_bytes), cache_use, 1)
            }
        };
        Ok(Self::assemble(url, opts, settings, (store, path), Known { len, etag, blocks, cache_use, cache_rejected, requests }))
    }

    /// A source for an object whose length and ETag a LIST already gave (no HEAD), in its
    /// open phase as [`open`](Self::open) leaves it.
    ///
    /// # Errors
    /// As [`store::build`].
    pub(crate) fn from_listing(url: &str, opts: &StorageOptions, settings: RemoteOptions, len: u64, etag: Option<String>) -> Result<RemoteSource> {
        let (store, path) = store::build(url, opts, settings.net)?;
        let lookup = settings.index_cache.as_deref().map_or(blocks::Lookup::Absent, |dir| blocks::load(dir, url, settings.readahead_bytes));
        let cache_rejected = u64::from(matches!(lookup, blocks::Lookup::Rejected));
        let cached = lookup.entry().filter(|e| etag.as_deref() == Some(e.etag.as_str()) && e.len == len);
        let cache_use = match (&cached, &settings.index_cache, &etag) {
            (Some(_), _, _) => IndexCacheUse::Hit,
            (None, Some(_), Some(_)) => IndexCacheUse::Miss,
            _ => IndexCacheUse::Off,
        };
        let blocks = cached.map_or_else(|| blocks::Blocks::new(settings.readahead_bytes), |e| e.blocks);
        Ok(Self::assemble(url, opts, settings, (store, path), Known { len, etag, blocks, cache_use, cache_rejected, requests: 0 }))
    }

    /// The source in its open phase, from what `open` / `from_listing` learnt of the object.
    fn assemble(url: &str, opts: &StorageOptions, settings: RemoteOptions, (store, path): (Arc<dyn ObjectStore>, ObjectPath), k: Known) -> RemoteSource {
        RemoteSource {
            url: url.to_string(),
            opts: opts.clone(),
            store: Mutex::new((std::process::id(), store)),
            path,
            len: k.len,
            etag: k.etag,
            open_phase: AtomicBool::new(true),
            blocks: Mutex::new(k.blocks),
            cache_use: k.cache_use,
            cache_rejected: k.cache_rejected,
            requests: AtomicU64::new(k.requests),
            bytes: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            settings,
        }
    }

    /// The URL the source reads.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object's ETag (as the server sent it, quotes included), if it has one.
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Requests and bytes so far.
    pub fn stats(&self) -> RemoteStats {
        RemoteStats {
            requests: self.requests.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            index_cache_rejected: self.cache_rejected,
        }
    }

    /// What the index cache did at open.
    pub fn index_cache_use(&self) -> IndexCacheUse {
        self.cache_use
    }

    /// End the open phase: write the index cache entry (on a miss; a failed write is only
    /// skipped — the cache is an optimisation) and drop the readahead blocks.
    pub fn end_open(&self) {
        if !self.open_phase.swap(false, Ordering::AcqRel) {
            return;
        }
        let blocks = std::mem::replace(&mut *self.blocks.lock().unwrap_or_else(|e| e.into_inner()), blocks::Blocks::new(self.settings.readahead_bytes));
        if let (IndexCacheUse::Miss, Some(dir), Some(etag)) = (self.cache_use, &self.settings.index_cache, &self.etag) {
            let _ = blocks::store(dir, &self.url, self.len, etag, &blocks);
        }
    }

    fn store(&self) -> Arc<dyn ObjectStore> {
        let pid = std::process::id();
        let mut slot = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if slot.0 != pid {
            // After fork: the parent's client and its pooled connections are not usable here.
            if let Ok((s, _)) = store::build(&self.url, &self.opts, self.settings.net) {
                let old = std::mem::replace(&mut slot.1, s);
                std::mem::forget(old);
                slot.0 = pid;
            }
        }
        slot.1.clone()
    }

    /// One ranged GET of `buf.len()` bytes at `offset`, checked (length, ETag).
    async fn get_into(&self, store: &dyn ObjectStore, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        let opts = GetOptions { if_match: self.etag.clone(), range: Some(GetRange::Bounded(offset..end)), ..Default::default() };
        self.requests.fetch_add(1, Ordering::Relaxed);
        let got = async {
            let r = store.get_opts(&self.path, opts).await?;
            let tag = r.meta.e_tag.clone();
            let range = r.range.clone();
            let bytes = r.bytes().await?;
            Ok::<_, object_store::Error>((tag, range, bytes))
        }
        .await;
        let (tag, range, bytes) = got.map_err(|e| {
            self.failed.fetch_add(1, Ordering::Relaxed);
            to_io(e)
        })?;
        self.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if let (Some(want), Some(tag)) = (&self.etag, &tag) {
            if want != tag {
                self.failed.fetch_add(1, Ordering::Relaxed);
                return Err(changed(want, tag));
            }
        }
        if range != (offset..end) || bytes.len() != buf.len() {
            self.failed.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the server sent {} bytes (range {}..{}) for bytes {offset}..{end}", bytes.len(), range.start, range.end),
            ));
        }
        buf.copy_from_slice(&bytes);
        Ok(())
    }

    fn check_range(&self, len: usize, offset: u64) -> io::Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("bytes {offset}+{len} past the end of the object ({} bytes)", self.len))),
        }
    }

    /// Wait for `f` on the runtime, interruptibly ([`runtime::wait`]); an interruption is the
    /// io error that [`Error::io`] turns back into [`Error::Interrupted`].
    fn block_on<T>(&self, f: impl std::future::Future<Output = io::Result<T>>) -> io::Result<T> {
        let rt = runtime::runtime(&Location::file(&self.url)).map_err(|e| io::Error::other(e.to_string()))?;
        runtime::wait(&rt, f).map_err(|_| crate::interrupt::io_error())?
    }
}

impl ByteSource for RemoteSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_range(buf.len(), offset)?;
        if buf.is_empty() {
            return Ok(());
        }
        let store = self.store();
        if self.open_phase.load(Ordering::Acquire) {
            let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
            let runs = blocks.missing(offset, buf.len() as u64, self.len);
            for (start, len) in runs {
                let mut b = vec![0u8; len as usize];
                self.block_on(self.get_into(&*store, &mut b, start))?;
                blocks.insert(start, b);
            }
            if blocks.copy_out(buf, offset) {
                return Ok(());
            }
            // Past the blocks' budget: read directly below.
        }
        self.block_on(self.get_into(&*store, buf, offset))
    }

    fn read_many(&self, parts: &mut [(&mut [u8], u64)]) -> Option<Vec<io::Result<()>>> {
        let store = self.store();
        let jobs = parts.iter_mut().map(|(buf, off)| {
            let store = &*store;
            async move {
                self.check_range(buf.len(), *off)?;
                if buf.is_empty() {
                    return Ok(());
                }
                self.get_into(store, buf, *off).await
            }
        });
        let results: io::Result<Vec<io::Result<()>>> = self.block_on(async {
            // `buffered` keeps the order of the results; up to `concurrency` in flight.
            Ok(stream::iter(jobs).buffered(self.settings.concurrency.max(1)).collect::<Vec<_>>().await)
        });
        Some(match results {
            Ok(v) => v,
            Err(e) if crate::interrupt::is_io(&e) => parts.iter().map(|_| Err(crate::interrupt::io_error())).collect(),
            Err(e) => parts.iter().map(|_| Err(io::Error::new(e.kind(), e.to_string()))).collect(),
        })
    }

    fn is_remote(&self) -> bool {
        true
    }
}

fn changed(want: &str, got: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::StaleNetworkFileHandle,
        format!("the object changed since the slide was opened (ETag {want} → {got}); reopen the slide"),
    )
}

/// An `object_store` error as an `io::Error` whose kind tells the cause (the error's
/// [`Location`] names the URL).
pub(crate) fn to_io(e: object_store::Error) -> io::Error {
    use object_store::Error as E;
    let kind = match &e {
        E::NotFound { .. } => io::ErrorKind::NotFound,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        E::Precondition { .. } => io::ErrorKind::StaleNetworkFileHandle,
        _ => http_kind(&e).unwrap_or(io::ErrorKind::Other),
    };
    let text = match kind {
        io::ErrorKind::StaleNetworkFileHandle => "the object changed since the slide was opened (If-Match failed); reopen the slide".to_string(),
        io::ErrorKind::NotFound => format!("no such object ({e})"),
        io::ErrorKind::PermissionDenied => format!("access denied ({e})"),
        io::ErrorKind::TimedOut => format!("timed out after the retries ({e})"),
        _ => e.to_string(),
    };
    io::Error::new(kind, text)
}

/// The kind of the HTTP failure under an `object_store` error (`object_store::client::HttpError`
/// in its source chain), if there is one.
fn http_kind(e: &object_store::Error) -> Option<io::ErrorKind> {
    use object_store::client::HttpErrorKind as K;
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(h) = s.downcast_ref::<object_store::client::HttpError>() {
            return Some(match h.kind() {
                K::Timeout => io::ErrorKind::TimedOut,
                K::Connect => io::ErrorKind::ConnectionRefused,
                K::Interrupted | K::Request => io::ErrorKind::ConnectionReset,
                _ => io::ErrorKind::Other,
            });
        }
        src = s.source();
    }
    None
}

#[cfg(test)]
mod tests;
