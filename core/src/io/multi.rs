//! The files of one slide as one positional byte source.
//!
//! Most slides are one file; a DICOM WSI slide is a folder of instances (often one per level)
//! and a MIRAX slide keeps its tiles in several `Data*.dat` files. The index names a tile's
//! bytes by (source, offset) ([`crate::index::TileLoc`]); the read paths (CPU batches, the GPU
//! engine's POSIX path, quickhash) plan and read *addresses* in one space in which source `k`
//! occupies `[k·2^44, k·2^44 + len_k)` ([`address`]). So the planner, the coalescing, the I/O
//! pool and the byte counters work unchanged for slides of several files: [`SourceSet`]
//! routes each read to its file, and [`crate::io::plan`] never merges two ranges of different
//! sources into one request (a request never crosses a 2^44 boundary).
//!
//! A source file may be at most 2^44 bytes (16 TiB; `format::finish` refuses longer ones
//! with `Limits`). The extra files are opened at the first read that needs them, and must be
//! the files the open examined ([`FileIdentity`]: same device, inode and size, and same
//! modification time or same content sample — a file only touched still reads), else the read
//! fails with an `Io` error of kind `StaleNetworkFileHandle` (Python: `OSError` with `ESTALE`)
//! naming the file ("changed since the slide was opened"), never with bytes of another file.

use std::io;
use std::path::PathBuf;
use std::sync::OnceLock;

use super::posix::FileSource;
use super::ByteSource;
use crate::index::{FileIdentity, SourceFile, SourceId, TileLoc};

/// log2 of the address-space stride between two sources: source `k` starts at `k << SOURCE_SHIFT`.
pub const SOURCE_SHIFT: u32 = 44;
/// Largest length of one source file, in bytes (2^44).
pub const MAX_SOURCE_LEN: u64 = 1 << SOURCE_SHIFT;

/// The address of `loc`'s first byte in a [`SourceSet`]'s address space. `loc.offset` must be
/// below [`MAX_SOURCE_LEN`] (checked at open for every range the index holds).
pub fn address(loc: TileLoc) -> u64 {
    ((loc.source.0 as u64) << SOURCE_SHIFT) | (loc.offset & (MAX_SOURCE_LEN - 1))
}

/// The source and offset of address `addr` (inverse of [`address`]).
pub fn split(addr: u64) -> (SourceId, u64) {
    (SourceId((addr >> SOURCE_SHIFT) as u32), addr & (MAX_SOURCE_LEN - 1))
}

/// How a slide's extra files are opened when they are not local files (a remote slide's other
/// objects: [`crate::io::remote`]): path → source. The source must hold the bytes the open
/// examined (a remote object: the version whose ETag the open recorded).
pub type Opener = std::sync::Arc<dyn Fn(&std::path::Path) -> io::Result<Box<dyn ByteSource>> + Send + Sync>;

/// A member file opened, or why it could not be: kind, OS error code, message.
type OpenOutcome = Result<Box<dyn ByteSource>, (io::ErrorKind, Option<i32>, String)>;

/// An extra file of a slide, opened on first use.
struct Extra {
    path: PathBuf,
    len: u64,
    identity: Option<FileIdentity>,
    /// The opened file, or why it could not be opened: kind, OS error code, message.
    file: OnceLock<OpenOutcome>,
}

impl std::fmt::Debug for Extra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extra").field("path", &self.path).field("len", &self.len).finish()
    }
}

/// The slide's files: the source it was opened from (source 0) and the extra files its format
/// names ([`crate::index::SlideIndex::sources`]), read through one address space (module
/// docs). [`ByteSource::len`] is the primary's length; [`ByteSource::source_len`] gives each
/// file's.
pub struct SourceSet {
    primary: Box<dyn ByteSource>,
    extras: OnceLock<Vec<Extra>>,
    opener: OnceLock<Opener>,
}

impl std::fmt::Debug for SourceSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceSet").field("primary", &self.primary).field("extras", &self.extras.get()).field("opener", &self.opener.get().is_some()).finish()
    }
}

impl SourceSet {
    /// A set holding only `primary` (source 0); [`SourceSet::attach`] adds the others once the
    /// format driver has named them.
    pub fn new(primary: Box<dyn ByteSource>) -> SourceSet {
        SourceSet { primary, extras: OnceLock::new(), opener: OnceLock::new() }
    }

    /// Add sources 1.. (`sources[1..]` of the slide's index: path, length and identity
    /// recorded at open), opened at first use by `opener` (`None`: as local files). Called
    /// once; later calls are ignored.
    pub fn attach(&self, sources: &[SourceFile], opener: Option<Opener>) {
        if let Some(o) = opener {
            let _ = self.opener.set(o);
        }
        let extras = sources
            .iter()
            .skip(1)
            .map(|s| Extra { path: s.path.clone(), len: s.len, identity: s.identity, file: OnceLock::new() })
            .collect();
        let _ = self.extras.set(extras);
    }

    /// [`SourceSet::attach`], with the last `opened.len()` of `sources` served by sources a
    /// format driver built itself (views over the slide's own bytes, such as the SQLite blobs
    /// of a Sakura slide: [`crate::format::VirtualSource`]) instead of files opened by path.
    pub fn attach_opened(&self, sources: &[SourceFile], opener: Option<Opener>, opened: Vec<std::sync::Arc<dyn ByteSource>>) {
        self.attach(sources, opener);
        if let Some(extras) = self.extras.get() {
            let first = extras.len().saturating_sub(opened.len());
            for (e, src) in extras[first..].iter().zip(opened) {
                let _ = e.file.set(Ok(Box::new(src)));
            }
        }
    }

    /// Number of sources (1 + the attached extras).
    pub fn count(&self) -> usize {
        1 + self.extras.get().map_or(0, Vec::len)
    }

    /// The primary source (the file the slide was opened by).
    pub fn primary(&self) -> &dyn ByteSource {
        &*self.primary
    }

    fn extra(&self, k: usize) -> io::Result<&Extra> {
        self.extras
            .get()
            .and_then(|v| v.get(k - 1))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no source file {k} in this slide")))
    }
}

fn open_checked(e: &Extra, opener: Option<&Opener>) -> Result<Box<dyn ByteSource>, (io::ErrorKind, Option<i32>, String)> {
    let fail = |err: io::Error| (err.kind(), err.raw_os_error(), format!("{}: {err}", e.path.display()));
    if let Some(open) = opener {
        let s = open(&e.path).map_err(fail)?;
        if s.len() != e.len {
            return Err((io::ErrorKind::StaleNetworkFileHandle, None, format!("{} changed since the slide was opened ({} → {} bytes)", e.path.display(), e.len, s.len())));
        }
        return Ok(s);
    }
    let f = FileSource::open(&e.path).map_err(fail)?;
    if let Some(want) = e.identity {
        let now = f.metadata().map(|m| FileIdentity::of(&m)).map_err(fail)?;
        let stale = |what: String| (io::ErrorKind::StaleNetworkFileHandle, None, format!("{} changed since the slide was opened ({what})", e.path.display()));
        if !want.same_object(&now) {
            return Err(stale(if want.size != now.size {
                format!("{} → {} bytes", want.size, now.size)
            } else {
                "replaced by another file".into()
            }));
        }
        // Only touched (same bytes, new mtime) is still the same file; other bytes are not.
        if want.mtime_ns != now.mtime_ns && want.sample.is_some() && f.identity().map_err(fail)?.sample != want.sample {
            return Err(stale("its bytes differ".into()));
        }
    }
    Ok(Box::new(f))
}

impl ByteSource for SourceSet {
    fn len(&self) -> u64 {
        self.primary.len()
    }

    fn source_len(&self, id: SourceId) -> Option<u64> {
        match id.0 {
            0 => Some(self.primary.len()),
            k => self.extras.get()?.get(k as usize - 1).map(|e| e.len),
        }
    }

    fn source_path(&self, id: SourceId) -> Option<&std::path::Path> {
        match id.0 {
            0 => None,
            k => self.extras.get()?.get(k as usize - 1).map(|e| e.path.as_path()),
        }
    }

    fn read_exact_at(&self, buf: &mut [u8], addr: u64) -> io::Result<()> {
        let (source, offset) = split(addr);
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > MAX_SOURCE_LEN) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "read crosses the end of a source file's address range"));
        }
        match source.0 {
            0 => self.primary.read_exact_at(buf, offset),
            k => {
                let e = self.extra(k as usize)?;
                match e.file.get_or_init(|| open_checked(e, self.opener.get())) {
                    // Errors keep their OS code (Python: FileNotFoundError ...); the tile's
                    // error location names the file (`read::locate::tile_location`).
                    Ok(f) => f.read_exact_at(buf, offset),
                    Err((_, Some(code), _)) => Err(io::Error::from_raw_os_error(*code)),
                    Err((kind, None, msg)) => Err(io::Error::new(*kind, msg.clone())),
                }
            }
        }
    }

    /// The file's cached bytes (sources opened already; an extra file not yet opened gives 0 and
    /// is opened, checked, by the blocking read).
    fn read_cached_at(&self, buf: &mut [u8], addr: u64) -> usize {
        let (source, offset) = split(addr);
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > MAX_SOURCE_LEN) {
            return 0;
        }
        match source.0 {
            0 => self.primary.read_cached_at(buf, offset),
            k => match self.extra(k as usize).ok().and_then(|e| e.file.get()) {
                Some(Ok(f)) => f.read_cached_at(buf, offset),
                _ => 0,
            },
        }
    }

    /// The primary's descriptor, when the slide is that one file (cuFile reads addresses as
    /// file offsets, which holds only for source 0); `None` for a slide of several files.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        if self.count() > 1 {
            return None;
        }
        self.primary.raw_fd()
    }

    /// The primary's batched reads, when every part lies in source 0 (a remote slide is one
    /// object); `None` otherwise.
    fn read_many(&self, parts: &mut [(&mut [u8], u64)]) -> Option<Vec<io::Result<()>>> {
        if parts.iter().any(|(b, a)| a.checked_add(b.len() as u64).is_none_or(|end| end > MAX_SOURCE_LEN)) {
            return None;
        }
        self.primary.read_many(parts)
    }

    fn is_remote(&self) -> bool {
        self.primary.is_remote()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemSource;

    #[test]
    fn addresses_route_to_their_file() {
        let dir = std::env::temp_dir().join(format!("ss-multi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("extra.bin");
        std::fs::write(&p, b"0123456789").unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        let set = SourceSet::new(Box::new(MemSource::new(b"primary".to_vec())));
        let sources = [
            SourceFile { path: "p".into(), len: 7, identity: None },
            SourceFile { path: p.clone(), len: 10, identity: Some(FileIdentity::of(&meta)) },
        ];
        set.attach(&sources, None);
        assert_eq!(set.count(), 2);
        assert_eq!(set.source_len(SourceId(1)), Some(10));
        assert_eq!(set.source_len(SourceId(2)), None);
        assert!(set.raw_fd().is_none(), "several files: no single descriptor");
        let mut b = [0u8; 3];
        set.read_exact_at(&mut b, address(TileLoc { source: SourceId(1), offset: 4, length: 3 })).unwrap();
        assert_eq!(&b, b"456");
        set.read_exact_at(&mut b, 2).unwrap();
        assert_eq!(&b, b"ima");
        assert_eq!(split(address(TileLoc { source: SourceId(3), offset: 99, length: 1 })), (SourceId(3), 99));
        // No such source; a read past a file's end; a read crossing the stride.
        assert!(set.read_exact_at(&mut b, 2 << SOURCE_SHIFT).is_err());
        assert_eq!(set.read_exact_at(&mut b, (1 << SOURCE_SHIFT) + 9).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert!(set.read_exact_at(&mut b, MAX_SOURCE_LEN - 1).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_changed_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("ss-multi-chg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("extra.bin");
        std::fs::write(&p, b"0123456789").unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        let set = SourceSet::new(Box::new(MemSource::new(b"primary".to_vec())));
        set.attach(
            &[
                SourceFile { path: "p".into(), len: 7, identity: None },
                SourceFile { path: p.clone(), len: 10, identity: Some(FileIdentity::of(&meta)) },
            ],
            None,
        );
        std::fs::write(&p, b"0123456789abc").unwrap();
        let mut b = [0u8; 3];
        let e = set.read_exact_at(&mut b, 1 << SOURCE_SHIFT).unwrap_err();
        assert!(e.to_string().contains("changed since the slide was opened"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
