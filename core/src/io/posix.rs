//! POSIX positional reads (`pread`) from a file.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
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

/// What a non-regular file is, in words (for the error that refuses it).
fn file_kind(t: std::fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

impl FileSource {
    /// Open `path` read-only and record its length.
    ///
    /// The file is opened with `O_NONBLOCK` (and `O_NOCTTY`), so a FIFO or a device never
    /// blocks the open; the type is then taken from `fstat(2)` of the opened descriptor (no
    /// race with a rename between a `stat` and the open) and anything but a regular file is
    /// refused. `O_NONBLOCK` is cleared again before the descriptor is used.
    ///
    /// # Errors
    /// The OS error from `open(2)`, `fstat(2)` or `fcntl(2)`; `EISDIR` for a directory;
    /// [`io::ErrorKind::InvalidInput`] ("not a regular file: a FIFO (named pipe)", ...) for
    /// a FIFO, device or socket.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
        let meta = file.metadata()?;
        let t = meta.file_type();
        if t.is_dir() {
            // EISDIR, so callers (and Python) see IsADirectoryError.
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        if !t.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a regular file: {}; slides are read from regular files", file_kind(t)),
            ));
        }
        clear_nonblock(&file)?;
        Ok(FileSource { file, len: meta.len(), path: path.to_path_buf() })
    }

    /// `fstat(2)` of the open file (its identity: device, inode, size, mtime).
    ///
    /// # Errors
    /// The OS error from `fstat(2)`.
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// The file's identity from `fstat(2)` of the open descriptor, with its content sample:
    /// the first 8 bytes of SHA-256 over its first and last
    /// [`FileIdentity::SAMPLE_BYTES`](crate::index::FileIdentity::SAMPLE_BYTES) bytes (two
    /// positional reads of at most 4 KiB).
    ///
    /// # Errors
    /// The OS error from `fstat(2)` or the reads.
    pub fn identity(&self) -> io::Result<crate::index::FileIdentity> {
        use sha2::Digest;
        let mut id = crate::index::FileIdentity::of(&self.file.metadata()?);
        let n = crate::index::FileIdentity::SAMPLE_BYTES.min(id.size);
        let mut buf = vec![0u8; n as usize];
        let mut h = sha2::Sha256::new();
        for at in [0, id.size - n] {
            self.file.read_exact_at(&mut buf, at)?;
            h.update(&buf);
        }
        let d = h.finalize();
        id.sample = Some(u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]));
        Ok(id)
    }

    /// The path this source was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The error of a positional read that met the end of the file inside the length recorded
    /// at open: the file was truncated while open. Same kind (`UnexpectedEof`), with words that
    /// say so instead of "failed to fill whole buffer".
    fn shrunk(&self, e: io::Error, offset: u64, n: usize) -> io::Error {
        if e.kind() != io::ErrorKind::UnexpectedEof {
            return e;
        }
        let now = self.file.metadata().map(|m| format!("{} bytes", m.len())).unwrap_or_else(|_| "of unknown size".into());
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "file shorter than its tile table (truncated?): bytes {offset}..{} wanted, the file is now {now} (it was {} bytes when opened)",
                offset + n as u64,
                self.len
            ),
        )
    }
}

/// Clear `O_NONBLOCK` on `file` (set only so that the open could not block).
fn clear_nonblock(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl ByteSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= self.len => self.file.read_exact_at(buf, offset).map_err(|e| self.shrunk(e, offset, buf.len())),
            _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file")),
        }
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.file.as_raw_fd())
    }
    /// `preadv2(2)` with `RWF_NOWAIT`: the page cache's bytes, never a wait for the device
    /// (`EAGAIN` or a short read where the pages are not cached; `EOPNOTSUPP` on file systems
    /// without it: 0 bytes then).
    fn read_cached_at(&self, buf: &mut [u8], offset: u64) -> usize {
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > self.len) {
            return 0;
        }
        let mut done = 0usize;
        while done < buf.len() {
            let rest = &mut buf[done..];
            let iov = libc::iovec { iov_base: rest.as_mut_ptr().cast(), iov_len: rest.len() };
            // SAFETY: one iovec over `rest`, writable for its length; the descriptor is ours
            // and open; the offset fits i64 (it is inside the file).
            let n = unsafe { libc::preadv2(self.file.as_raw_fd(), &iov, 1, (offset + done as u64) as libc::off_t, libc::RWF_NOWAIT) };
            if n <= 0 {
                break;
            }
            done += n as usize;
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_inside_the_length_at_open_that_meets_eof_says_the_file_shrank() {
        let dir = std::env::temp_dir().join(format!("slidestream-posix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("shrinks.bin");
        std::fs::write(&p, vec![7u8; 4096]).unwrap();
        let src = FileSource::open(&p).unwrap();
        let mut buf = [0u8; 16];
        src.read_exact_at(&mut buf, 4000).unwrap();
        std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(1000).unwrap();
        let e = src.read_exact_at(&mut buf, 4000).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let m = e.to_string();
        assert!(m.contains("truncated?") && m.contains("4000..4016") && m.contains("now 1000 bytes") && m.contains("4096 bytes when opened"), "{m}");
        // Past the length recorded at open: unchanged.
        assert_eq!(src.read_exact_at(&mut buf, 4090).unwrap_err().to_string(), "read past end of file");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn regular_files_are_opened_blocking() {
        let src = FileSource::open(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src/io/posix.rs"))).unwrap();
        // SAFETY: F_GETFL on the source's own descriptor.
        let flags = unsafe { libc::fcntl(src.raw_fd().unwrap(), libc::F_GETFL) };
        assert!(flags >= 0 && flags & libc::O_NONBLOCK == 0, "flags {flags:#x}");
    }

    #[test]
    fn devices_are_refused_without_reading() {
        for (dev, kind) in [("/dev/zero", "character device"), ("/dev/urandom", "character device"), ("/dev/null", "character device")] {
            if !Path::new(dev).exists() {
                continue;
            }
            let e = FileSource::open(Path::new(dev)).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{dev}");
            assert!(e.to_string().contains(kind), "{dev}: {e}");
        }
    }
}
