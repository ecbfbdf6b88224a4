//! Open-time readahead blocks of a remote object, and the on-disk index cache that keeps them.
//!
//! While a slide opens, its driver reads the header, the IFDs and tag arrays (or a DICOM
//! header, ...) in many small reads. Served from aligned blocks, fetched one GET per run of
//! missing blocks, an open costs a few requests. The blocks an open read are exactly what a
//! reopen needs, so the index cache stores them (with the object's length and ETag) in one
//! file per URL: `<dir>/<sha256(url)>.ssidx`. An entry is used only when its URL, block size
//! and checksum match; anything else (a truncated or foreign file) is a miss and is rewritten.
//!
//! An entry is opened as a slide file is (`io::posix::FileSource::open`'s rules): with
//! `O_NONBLOCK` so a FIFO or a device never blocks the open, with `O_NOFOLLOW` so a symbolic
//! link (to `/dev/zero`, or out of the folder) is never followed, and only a regular file is
//! read, after its size (`fstat(2)` of the opened descriptor) is checked against the largest
//! entry an open can write ([`max_entry_bytes`]). Anything else is a rejected entry: a miss,
//! counted (`index_cache_rejected` in the remote counters), never a hang or a large read.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Most bytes the blocks of one open may hold; reads beyond go straight to the object.
const MAX_BLOCK_BYTES: u64 = crate::limits::LIMITS.remote_block_bytes;
const MAGIC: &[u8; 8] = b"SSIDX01\n";
/// Longest ETag an entry keeps (bytes): an ETag is one HTTP header value, and servers refuse
/// header lines much longer than this (nginx's `large_client_header_buffers`, 8 KiB); an
/// object with a longer one is not cached.
const MAX_ETAG_BYTES: usize = crate::limits::LIMITS.etag_bytes;
/// The smallest block size ([`Blocks::new`]).
const MIN_BLOCK: u64 = 4096;

/// The largest entry [`store`] writes for `url` with blocks of `block` bytes, in bytes: the
/// header (magic, URL, an ETag of at most [`MAX_ETAG_BYTES`], length, block size, count), one
/// 12-byte record per block — at most `MAX_BLOCK_BYTES / block + 1` blocks, since the blocks
/// of one open hold at most [`MAX_BLOCK_BYTES`] ([`Blocks::missing`]) and only the object's
/// last block is short — their bytes, and the 32-byte SHA-256. About 128 MiB with the
/// default 256 KiB blocks; any larger file is not an entry and is not read.
pub(crate) fn max_entry_bytes(url: &str, block: u64) -> u64 {
    let block = block.max(MIN_BLOCK);
    let header = MAGIC.len() as u64 + 4 + url.len() as u64 + 4 + MAX_ETAG_BYTES as u64 + 8 + 8 + 4;
    header + (MAX_BLOCK_BYTES / block + 1) * 12 + MAX_BLOCK_BYTES + 32
}

/// Aligned blocks of one object, by block index.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    block: u64,
    map: BTreeMap<u64, Vec<u8>>,
    bytes: u64,
}

impl Blocks {
    /// No blocks yet; `block` bytes each (at least [`MIN_BLOCK`], 4 KiB).
    pub(crate) fn new(block: u64) -> Blocks {
        Blocks { block: block.max(MIN_BLOCK), map: BTreeMap::new(), bytes: 0 }
    }

    /// The runs `(offset, len)` of missing blocks that cover `[offset, offset + len)` of an
    /// object of `total` bytes, merged; empty when they would pass the budget (the read then
    /// goes straight to the object).
    pub(crate) fn missing(&self, offset: u64, len: u64, total: u64) -> Vec<(u64, u64)> {
        let (first, last) = (offset / self.block, (offset + len - 1) / self.block);
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut add = 0u64;
        for k in first..=last {
            if self.map.contains_key(&k) {
                continue;
            }
            let start = k * self.block;
            let n = self.block.min(total - start);
            add += n;
            match runs.last_mut() {
                Some((s, l)) if *s + *l == start => *l += n,
                _ => runs.push((start, n)),
            }
        }
        if self.bytes + add > MAX_BLOCK_BYTES {
            return Vec::new();
        }
        runs
    }

    /// Keep the bytes of a run read at `start` (a multiple of the block size), cut into blocks.
    pub(crate) fn insert(&mut self, start: u64, bytes: Vec<u8>) {
        for (i, chunk) in bytes.chunks(self.block as usize).enumerate() {
            let k = start / self.block + i as u64;
            self.bytes += chunk.len() as u64;
            self.map.insert(k, chunk.to_vec());
        }
    }

    /// Copy `[offset, offset + buf.len())` out of the blocks; `false` (nothing meaningful in
    /// `buf`) when a block is missing or short.
    pub(crate) fn copy_out(&self, buf: &mut [u8], offset: u64) -> bool {
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let Some(b) = self.map.get(&(at / self.block)) else { return false };
            let within = (at % self.block) as usize;
            if within >= b.len() {
                return false;
            }
            let n = (b.len() - within).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&b[within..within + n]);
            done += n;
        }
        true
    }
}

/// An index cache entry: the object's length and ETag when it was stored, and the blocks.
pub(crate) struct Entry {
    pub(crate) len: u64,
    pub(crate) etag: String,
    pub(crate) blocks: Blocks,
}

fn file_of(dir: &Path, url: &str) -> std::path::PathBuf {
    let h = Sha256::digest(url.as_bytes());
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{hex}.ssidx"))
}

/// Write the entry of `url` (atomically: a temporary file, created new so that nothing already
/// at its name is followed or written through, renamed over the old entry, whatever that was).
///
/// # Errors
/// The OS error of the write; `InvalidInput` for an ETag longer than [`MAX_ETAG_BYTES`].
pub(crate) fn store(dir: &Path, url: &str, len: u64, etag: &str, blocks: &Blocks) -> std::io::Result<()> {
    if etag.len() > MAX_ETAG_BYTES {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "ETag too long to cache"));
    }
    let mut out = Vec::with_capacity(blocks.bytes as usize + 256);
    out.extend_from_slice(MAGIC);
    for field in [url.as_bytes(), etag.as_bytes()] {
        out.extend_from_slice(&(field.len() as u32).to_le_bytes());
        out.extend_from_slice(field);
    }
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&blocks.block.to_le_bytes());
    out.extend_from_slice(&(blocks.map.len() as u32).to_le_bytes());
    for (k, b) in &blocks.map {
        out.extend_from_slice(&k.to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    }
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    std::fs::create_dir_all(dir)?;
    let path = file_of(dir, url);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&tmp)?;
    f.write_all(&out)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// What the index cache holds for a URL.
pub(crate) enum Lookup {
    /// A valid entry.
    Hit(Entry),
    /// No entry (no file at its name, or the folder cannot be read).
    Absent,
    /// Something is at the entry's name but it is not a usable entry: not a regular file (a
    /// FIFO, a device, a folder), a symbolic link, larger than [`max_entry_bytes`],
    /// truncated, damaged, another URL's or another block size's.
    Rejected,
}

impl Lookup {
    /// The entry, if there is a valid one.
    pub(crate) fn entry(self) -> Option<Entry> {
        match self {
            Lookup::Hit(e) => Some(e),
            _ => None,
        }
    }
}

/// The bytes of the entry file at `path`, opened as the module docs say: `Ok(None)` when
/// there is no file, `Err(())` when what is there is not a regular file of at most `max`
/// bytes.
fn read_entry(path: &Path, max: u64) -> Result<Option<Vec<u8>>, ()> {
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // ELOOP: a symbolic link; anything else that exists but cannot be opened.
        Err(_) => return Err(()),
    };
    let meta = file.metadata().map_err(|_| ())?;
    if !meta.file_type().is_file() || meta.len() > max {
        return Err(());
    }
    // The file may grow after the fstat: never read past `max`.
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut data).map_err(|_| ())?;
    if data.len() as u64 > max {
        return Err(());
    }
    Ok(Some(data))
}

/// The entry of `url` with blocks of `block` bytes: a [`Lookup::Hit`] only for a valid one.
pub(crate) fn load(dir: &Path, url: &str, block: u64) -> Lookup {
    match read_entry(&file_of(dir, url), max_entry_bytes(url, block)) {
        Ok(None) => Lookup::Absent,
        Err(()) => Lookup::Rejected,
        Ok(Some(data)) => parse(&data, url, block).map_or(Lookup::Rejected, Lookup::Hit),
    }
}

/// An entry's bytes, checked (checksum, magic, URL, block size, every block inside the object
/// and the blocks' budget, nothing left over).
fn parse(data: &[u8], url: &str, block: u64) -> Option<Entry> {
    let (body, sum) = data.split_at_checked(data.len().checked_sub(32)?)?;
    if Sha256::digest(body).as_slice() != sum || !body.starts_with(MAGIC) {
        return None;
    }
    let mut r = Reader { data: body, at: MAGIC.len() };
    let u = r.bytes_u32()?;
    let etag = String::from_utf8(r.bytes_u32()?.to_vec()).ok()?;
    let len = r.u64()?;
    let b = r.u64()?;
    if u != url.as_bytes() || b != Blocks::new(block).block {
        return None;
    }
    let mut blocks = Blocks::new(block);
    for _ in 0..r.u32()? {
        let k = r.u64()?;
        let bytes = r.bytes_u32()?;
        if bytes.len() as u64 > blocks.block || k.checked_mul(blocks.block)? >= len {
            return None;
        }
        blocks.bytes += bytes.len() as u64;
        if blocks.bytes > MAX_BLOCK_BYTES {
            return None;
        }
        blocks.map.insert(k, bytes.to_vec());
    }
    (r.at == body.len()).then_some(Entry { len, etag, blocks })
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.data.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes_u32(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_runs_and_copy_out() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let mut b = Blocks::new(4096);
        let runs = b.missing(100, 9000, data.len() as u64);
        assert_eq!(runs, vec![(0, 12288)]);
        for (s, l) in runs {
            b.insert(s, data[s as usize..(s + l) as usize].to_vec());
        }
        let mut out = vec![0u8; 9000];
        assert!(b.copy_out(&mut out, 100));
        assert_eq!(out, data[100..9100]);
        // The last block is short (20000 = 4·4096 + 3616) and a missing block is not copied.
        assert_eq!(b.missing(19_000, 1000, data.len() as u64), vec![(16384, 3616)]);
        assert!(!b.copy_out(&mut out[..10], 19_000));
    }

    #[test]
    fn index_cache_round_trip_and_damage() {
        let dir = std::env::temp_dir().join(format!("ssidx-test-{}", std::process::id()));
        let mut b = Blocks::new(4096);
        b.insert(8192, vec![7u8; 5000]);
        store(&dir, "s3://b/k", 20_000, "\"e1\"", &b).unwrap();
        let e = load(&dir, "s3://b/k", 4096).entry().expect("entry");
        assert_eq!((e.len, e.etag.as_str()), (20_000, "\"e1\""));
        let mut out = [0u8; 5000];
        assert!(e.blocks.copy_out(&mut out, 8192));
        assert!(out.iter().all(|&x| x == 7));
        assert!(matches!(load(&dir, "s3://b/other", 4096), Lookup::Absent));
        assert!(matches!(load(&dir, "s3://b/k", 8192), Lookup::Rejected), "another block size is a miss");
        // One flipped byte: the checksum fails, the entry is a miss.
        let f = file_of(&dir, "s3://b/k");
        let mut raw = std::fs::read(&f).unwrap();
        raw[20] ^= 1;
        std::fs::write(&f, &raw).unwrap();
        assert!(matches!(load(&dir, "s3://b/k", 4096), Lookup::Rejected));
        std::fs::write(&f, &raw[..10]).unwrap();
        assert!(matches!(load(&dir, "s3://b/k", 4096), Lookup::Rejected));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `load` on another thread, bounded: a hang is a failure, not a stuck test run.
    fn load_within(dir: &Path, url: &str, block: u64) -> Lookup {
        let (tx, rx) = std::sync::mpsc::channel();
        let (dir, url) = (dir.to_path_buf(), url.to_string());
        std::thread::spawn(move || {
            let _ = tx.send(load(&dir, &url, block));
        });
        rx.recv_timeout(std::time::Duration::from_secs(30)).expect("load hung on the entry (30 s)")
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ssidx-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_fifo_at_the_entry_is_rejected_not_waited_on() {
        let dir = scratch("fifo");
        let f = file_of(&dir, "s3://b/k");
        let c = std::ffi::CString::new(f.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        assert!(matches!(load_within(&dir, "s3://b/k", 4096), Lookup::Rejected));
        // The next store replaces the FIFO with a real entry.
        store(&dir, "s3://b/k", 100, "\"e\"", &Blocks::new(4096)).unwrap();
        assert!(matches!(load_within(&dir, "s3://b/k", 4096), Lookup::Hit(_)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn symlinks_are_not_followed() {
        let dir = scratch("link");
        let f = file_of(&dir, "s3://b/k");
        // To /dev/zero (an endless read), and to a valid entry outside the folder.
        std::os::unix::fs::symlink("/dev/zero", &f).unwrap();
        assert!(matches!(load_within(&dir, "s3://b/k", 4096), Lookup::Rejected));
        let outside = scratch("link-outside");
        store(&outside, "s3://b/k", 100, "\"e\"", &Blocks::new(4096)).unwrap();
        assert!(matches!(load_within(&outside, "s3://b/k", 4096), Lookup::Hit(_)));
        std::fs::remove_file(&f).unwrap();
        std::os::unix::fs::symlink(file_of(&outside, "s3://b/k"), &f).unwrap();
        assert!(matches!(load_within(&dir, "s3://b/k", 4096), Lookup::Rejected));
        // A folder at the entry's name is not an entry either.
        std::fs::remove_file(&f).unwrap();
        std::fs::create_dir(&f).unwrap();
        assert!(matches!(load_within(&dir, "s3://b/k", 4096), Lookup::Rejected));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&outside);
    }

    #[test]
    fn an_oversized_or_truncated_entry_is_rejected_before_reading() {
        let dir = scratch("size");
        let f = file_of(&dir, "s3://b/k");
        // A sparse file one byte over the largest entry: refused from its size alone (reading
        // it would take the whole size in memory first).
        let max = max_entry_bytes("s3://b/k", 4096);
        assert!(max < (200 << 20), "{max}");
        std::fs::File::create(&f).unwrap().set_len(max + 1).unwrap();
        assert!(matches!(load_within(&dir, "s3://b/k", 4096), Lookup::Rejected));
        // A full budget of blocks fits the bound.
        let mut b = Blocks::new(1 << 20);
        for k in 0..MAX_BLOCK_BYTES >> 20 {
            b.insert(k << 20, vec![1u8; 1 << 20]);
        }
        store(&dir, "s3://b/k", MAX_BLOCK_BYTES, "\"e\"", &b).unwrap();
        assert!(std::fs::metadata(&f).unwrap().len() <= max_entry_bytes("s3://b/k", 1 << 20));
        assert!(matches!(load_within(&dir, "s3://b/k", 1 << 20), Lookup::Hit(_)));
        // Truncated: a miss.
        let raw = std::fs::read(&f).unwrap();
        std::fs::write(&f, &raw[..raw.len() / 2]).unwrap();
        assert!(matches!(load_within(&dir, "s3://b/k", 1 << 20), Lookup::Rejected));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
