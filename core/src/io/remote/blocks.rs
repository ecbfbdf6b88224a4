//! Open-time readahead blocks of a remote object, and the on-disk index cache that keeps them.
//!
//! While a slide opens, its driver reads the header, the IFDs and tag arrays (or a DICOM
//! header, ...) in many small reads. Served from aligned blocks, fetched one GET per run of
//! missing blocks, an open costs a few requests. The blocks an open read are exactly what a
//! reopen needs, so the index cache stores them (with the object's length and ETag) in one
//! file per URL: `<dir>/<sha256(url)>.ssidx`. An entry is used only when its URL, block size
//! and checksum match; anything else (a truncated or foreign file) is a miss and is rewritten.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Most bytes the blocks of one open may hold; reads beyond go straight to the object.
const MAX_BLOCK_BYTES: u64 = 128 << 20;
const MAGIC: &[u8; 8] = b"SSIDX01\n";

/// Aligned blocks of one object, by block index.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    block: u64,
    map: BTreeMap<u64, Vec<u8>>,
    bytes: u64,
}

impl Blocks {
    /// No blocks yet; `block` bytes each (at least 4 KiB).
    pub(crate) fn new(block: u64) -> Blocks {
        Blocks { block: block.max(4096), map: BTreeMap::new(), bytes: 0 }
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

/// Write the entry of `url` (atomically: a temporary file renamed over the old one).
pub(crate) fn store(dir: &Path, url: &str, len: u64, etag: &str, blocks: &Blocks) -> std::io::Result<()> {
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
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&out)?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The entry of `url` with blocks of `block` bytes, if a valid one is there.
pub(crate) fn load(dir: &Path, url: &str, block: u64) -> Option<Entry> {
    let data = std::fs::read(file_of(dir, url)).ok()?;
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
        let e = load(&dir, "s3://b/k", 4096).expect("entry");
        assert_eq!((e.len, e.etag.as_str()), (20_000, "\"e1\""));
        let mut out = [0u8; 5000];
        assert!(e.blocks.copy_out(&mut out, 8192));
        assert!(out.iter().all(|&x| x == 7));
        assert!(load(&dir, "s3://b/other", 4096).is_none());
        assert!(load(&dir, "s3://b/k", 8192).is_none(), "another block size is a miss");
        // One flipped byte: the checksum fails, the entry is a miss.
        let f = file_of(&dir, "s3://b/k");
        let mut raw = std::fs::read(&f).unwrap();
        raw[20] ^= 1;
        std::fs::write(&f, &raw).unwrap();
        assert!(load(&dir, "s3://b/k", 4096).is_none());
        std::fs::write(&f, &raw[..10]).unwrap();
        assert!(load(&dir, "s3://b/k", 4096).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
