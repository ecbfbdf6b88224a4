//! POSIX positional reads (`pread`) from a file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::ByteSource;

/// A file read with positional reads (`pread(2)` through [`FileExt::read_exact_at`]).
///
/// The handle is never seeked, so one `FileSource` serves any number of threads, and a process
/// forked after opening keeps working (the descriptor's offset is never used).
/// The file is closed when the last reference is dropped.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
    path: PathBuf,
}

impl FileSource {
    /// Open `path` read-only and record its length.
    ///
    /// # Errors
    /// The OS error from `open(2)` or `fstat(2)`.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            // EISDIR, so callers (and Python) see IsADirectoryError.
            return Err(io::Error::from_raw_os_error(21));
        }
        Ok(FileSource { file, len: meta.len(), path: path.to_path_buf() })
    }

    /// `fstat(2)` of the open file (its identity: device, inode, size, mtime).
    ///
    /// # Errors
    /// The OS error from `fstat(2)`.
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// The path this source was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl ByteSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= self.len => self.file.read_exact_at(buf, offset),
            _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file")),
        }
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.file.as_raw_fd())
    }
}
