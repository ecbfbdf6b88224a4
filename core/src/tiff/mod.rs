//! TIFF and BigTIFF structure: header, IFD chain, tag values.
//!
//! Reads only structure (IFDs and tag values such as the tile offset and byte-count arrays),
//! never pixel data. Follows the TIFF 6.0 specification (Adobe, 1992) and the BigTIFF design
//! (version 43, 8-byte offsets; libtiff's `tiffiop.h`). Little- and big-endian files are read.
//!
//! Why not the `tiff` crate's `Decoder` here: in tiff 0.11 `Decoder::new` interprets IFD 0 as an
//! image before the caller can raise its limits (`with_limits` applies afterwards), so IFD 0's
//! tile-offset arrays are bounded by the default 1 MiB per-tag limit (a 100k×100k BigTIFF level
//! with 256² tiles needs 1.2 MB), and it rejects IFDs slide readers must still index (zero-sized
//! or photometric-less directories of associated images). Tile indexing is slidestream's own
//! job; pixel decoding uses well-kept codec crates (see `codec`).
//!
//! Every value that sizes an allocation is checked first: entry counts against the file size
//! and [`MAX_TAG_BYTES`], the IFD chain against [`MAX_IFDS`] and against loops, and all
//! directories plus out-of-line tag values of the chain against twice the file size (they are
//! disjoint in a valid file; overlapping IFDs or tags sharing one large value would otherwise
//! turn a small file into gigabytes of entries, tag reads and tile index).
//!
//! Hamamatsu NDPI is classic TIFF whose offsets may pass 4 GiB: [`TiffFile::parse`] reads it as
//! OpenSlide 4.0.1's `openslide-decode-tifflike.c` does (see `ndpi.rs`): the header's first-IFD
//! offset and every next-IFD offset are 8 bytes, and the high 32 bits of out-of-line value
//! offsets (and of strip offsets, [`TiffFile::fix_offset_ndpi`]) are implied by the directory's
//! own offset.
//!
//! Files: this one (header, IFD chain, budgets), [`tags`] (tag numbers), `ifd.rs` (entries,
//! where a value is, typed value access), `ndpi.rs` (the NDPI offset rules).

mod ifd;
mod ndpi;
mod subifd;
pub mod tags;

use std::collections::{BTreeMap, HashSet};

#[cfg_attr(not(feature = "unstable"), allow(unused_imports))] // used by the fuzz targets and tests
pub use ifd::{type_size, Entry, Ifd, IfdReader, ValueRange};
pub(crate) use ifd::check_inside;
use ifd::Data;
#[cfg_attr(not(feature = "unstable"), allow(unused_imports))] // returned by `TiffFile::sub_ifds`
pub use subifd::SubIfds;

use crate::error::{Error, Location, Result};
use crate::io::ByteSource;

/// Most IFDs followed in one chain: libtiff's own limit (`TIFF_MAX_DIR_COUNT`, 2^20), so every
/// chain OpenSlide reads is read (a slide has tens of IFDs, but valid files with thousands of
/// small ones exist). What really bounds a hostile chain is the structure budget: each
/// directory's bytes are charged to it, so a chain of `n` IFDs needs a file of at least
/// `3n` bytes (`8n` for BigTIFF); this cap bounds the memory of the parsed chain (tens of
/// bytes per IFD) on top.
pub const MAX_IFDS: usize = crate::limits::LIMITS.ifds;
/// Most bytes one tag value may occupy (also bounded by the file size).
pub const MAX_TAG_BYTES: u64 = crate::limits::LIMITS.tag_bytes;
/// Most entries in one IFD.
pub const MAX_IFD_ENTRIES: u64 = crate::limits::LIMITS.ifd_entries;

/// The directories and out-of-line tag values of one IFD chain may occupy at most this many
/// times the file size (they are disjoint in a valid file).
const STRUCTURE_BUDGET_FACTOR: u64 = 2;

fn charge(budget: &mut u64, at: &Location, bytes: u64) -> Result<()> {
    match budget.checked_sub(bytes) {
        Some(left) => {
            *budget = left;
            Ok(())
        }
        None => Err(Error::limits(
            at,
            format!(
                "IFD directories and tag values claim more than {STRUCTURE_BUDGET_FACTOR}x the file size \
                 (overlapping or shared structures)"
            ),
        )),
    }
}

/// Byte order of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// "II"
    Little,
    /// "MM"
    Big,
}

/// A parsed TIFF/BigTIFF file structure: the main IFD chain.
#[derive(Debug, Clone)]
pub struct TiffFile {
    /// Byte order.
    pub byte_order: ByteOrder,
    /// `true` for BigTIFF (version 43).
    pub bigtiff: bool,
    /// The IFDs of the main chain, in file order (IFD 0 first).
    pub ifds: Vec<Ifd>,
    /// File length in bytes.
    pub file_len: u64,
    /// `true` for Hamamatsu NDPI (classic TIFF with 64-bit IFD offsets and implied high offset
    /// bits; detected as OpenSlide does, see `ndpi.rs`).
    pub ndpi: bool,
}

pub(crate) fn read_at(src: &dyn ByteSource, at: &Location, offset: u64, len: u64) -> Result<Vec<u8>> {
    let end = offset.checked_add(len);
    if end.is_none_or(|e| e > src.len()) {
        return Err(Error::format(
            at,
            format!(
                "structure at offset {offset} (+{len} bytes) lies past the end of the file ({} bytes)",
                src.len()
            ),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    src.read_exact_at(&mut buf, offset).map_err(|e| Error::io(at, e))?;
    Ok(buf)
}

impl TiffFile {
    /// `true` when `head` (the file's first bytes) starts with a TIFF or BigTIFF signature.
    pub fn sniff(head: &[u8]) -> bool {
        matches!(head.get(..4), Some(b"II*\0") | Some(b"MM\0*") | Some(b"II+\0") | Some(b"MM\0+"))
    }

    /// Parse the header and the main IFD chain.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when the file is not TIFF; [`Error::Format`] for a bad header,
    /// an IFD outside the file or a looping chain; [`Error::Limits`] for more than
    /// [`MAX_IFDS`] directories or [`MAX_IFD_ENTRIES`] entries, or directories and tag values
    /// that together claim more than twice the file size.
    pub fn parse(src: &dyn ByteSource, at: &Location) -> Result<TiffFile> {
        let file_len = src.len();
        if file_len < 8 {
            return Err(Error::unsupported(at, "not a TIFF file (shorter than a TIFF header)"));
        }
        let head = read_at(src, at, 0, file_len.min(16))?;
        let byte_order = match &head[..2] {
            b"II" => ByteOrder::Little,
            b"MM" => ByteOrder::Big,
            _ => return Err(Error::unsupported(at, "not a TIFF file (no II/MM byte-order mark)")),
        };
        let mut tf = TiffFile { byte_order, bigtiff: false, ifds: Vec::new(), file_len, ndpi: false };
        let version = tf.u16_from(&head[2..4]);
        let first = match version {
            42 => tf.u32_from(&head[4..8]) as u64,
            43 => {
                if head.len() < 16 {
                    return Err(Error::format(at, "BigTIFF header truncated"));
                }
                if tf.u16_from(&head[4..6]) != 8 || tf.u16_from(&head[6..8]) != 0 {
                    return Err(Error::format(at, "BigTIFF header with an offset size other than 8"));
                }
                tf.bigtiff = true;
                tf.u64_from(&head[8..16])
            }
            v => return Err(Error::unsupported(at, format!("not a TIFF file (version {v})"))),
        };
        let mut seen = HashSet::new();
        let mut next = first;
        // Directories and out-of-line tag values of a valid file occupy disjoint bytes, so
        // together they fit in the file; IFDs that overlap (each distinct, so no loop) or tags
        // sharing one huge value would otherwise multiply the file into gigabytes of entries,
        // tag reads and tile index. Twice the file size leaves room for writers that share a
        // value between directories.
        let mut budget = file_len.saturating_mul(STRUCTURE_BUDGET_FACTOR);
        if version == 42 && head.len() >= 12 {
            next = tf.try_ndpi(src, at, tf.u64_from(&head[4..12]), &mut seen, &mut budget).unwrap_or(first);
        }
        while next != 0 {
            if !seen.insert(next) {
                return Err(Error::format(at, format!("IFD chain loops back to offset {next}")));
            }
            if tf.ifds.len() >= MAX_IFDS {
                return Err(Error::limits(at, format!("more than {MAX_IFDS} IFDs in the chain")));
            }
            let (ifd, n) = tf.read_ifd(src, at, next, &mut budget)?;
            tf.ifds.push(ifd);
            next = n;
        }
        if tf.ifds.is_empty() {
            return Err(Error::format(at, "TIFF file without any IFD"));
        }
        Ok(tf)
    }

    /// Read the IFD at `offset`, charging its directory bytes and the in-file bytes of its
    /// out-of-line values to `budget` (see [`STRUCTURE_BUDGET_FACTOR`]).
    fn read_ifd(&self, src: &dyn ByteSource, at: &Location, offset: u64, budget: &mut u64) -> Result<(Ifd, u64)> {
        let (count_size, entry_size) = if self.bigtiff { (8, 20) } else { (2, 12) };
        let next_size = if self.bigtiff || self.ndpi { 8 } else { 4 };
        if offset >= self.file_len {
            return Err(Error::format(
                at,
                format!("IFD offset {offset} lies past the end of the file ({} bytes)", self.file_len),
            ));
        }
        let cbuf = read_at(src, at, offset, count_size)?;
        let n = if self.bigtiff { self.u64_from(&cbuf) } else { self.u16_from(&cbuf) as u64 };
        if n > MAX_IFD_ENTRIES {
            return Err(Error::limits(at, format!("IFD at {offset} claims {n} entries")));
        }
        charge(budget, at, count_size + n * entry_size + next_size)?;
        let body = read_at(src, at, offset + count_size, n * entry_size + next_size)?;
        let mut entries = BTreeMap::new();
        for i in 0..n as usize {
            let e = &body[i * entry_size as usize..(i + 1) * entry_size as usize];
            let tag = self.u16_from(&e[0..2]);
            let field_type = self.u16_from(&e[2..4]);
            let (count, value) = if self.bigtiff {
                (self.u64_from(&e[4..12]), &e[12..20])
            } else {
                (self.u32_from(&e[4..8]) as u64, &e[8..12])
            };
            let Some(tsize) = type_size(field_type) else {
                continue; // unknown field types are skipped (TIFF 6.0, section 2)
            };
            let Some(total) = count.checked_mul(tsize) else {
                return Err(Error::format(at, format!("tag {tag}: value count {count} overflows")));
            };
            let inline_cap = if self.bigtiff { 8 } else { 4 };
            let data = if total <= inline_cap {
                let mut b = [0u8; 8];
                b[..value.len()].copy_from_slice(value);
                Data::Inline(b)
            } else {
                let raw = if self.bigtiff { self.u64_from(value) } else { self.u32_from(value) as u64 };
                let off = if self.ndpi { self.ndpi_value_offset(offset, tag, raw) } else { raw };
                // Only bytes inside the file can be read (the rest fails when read).
                charge(budget, at, total.min(self.file_len.saturating_sub(off)))?;
                Data::At(off)
            };
            entries.insert(tag, Entry { tag, field_type, count, data });
        }
        let nb = &body[(n * entry_size) as usize..];
        let next = if next_size == 8 { self.u64_from(nb) } else { self.u32_from(nb) as u64 };
        Ok((Ifd { offset, entries }, next))
    }

    pub(crate) fn u16_from(&self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        match self.byte_order {
            ByteOrder::Little => u16::from_le_bytes(a),
            ByteOrder::Big => u16::from_be_bytes(a),
        }
    }
    pub(crate) fn u32_from(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self.byte_order {
            ByteOrder::Little => u32::from_le_bytes(a),
            ByteOrder::Big => u32::from_be_bytes(a),
        }
    }
    pub(crate) fn u64_from(&self, b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        match self.byte_order {
            ByteOrder::Little => u64::from_le_bytes(a),
            ByteOrder::Big => u64::from_be_bytes(a),
        }
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemSource;

    fn le_tiff_with_loop() -> Vec<u8> {
        // header -> IFD at 8 with one entry, next -> 8 again
        let mut v = b"II*\0".to_vec();
        v.extend_from_slice(&8u32.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&256u16.to_le_bytes());
        v.extend_from_slice(&3u16.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&[16, 0, 0, 0]);
        v.extend_from_slice(&8u32.to_le_bytes());
        v
    }

    #[test]
    fn looping_chain_is_a_format_error() {
        let src = MemSource::new(le_tiff_with_loop());
        let err = TiffFile::parse(&src, &Location::file("loop.tif")).unwrap_err();
        assert!(matches!(err, Error::Format { .. }), "{err}");
        assert!(err.to_string().contains("loops"), "{err}");
    }

    #[test]
    fn huge_entry_count_is_refused_before_allocation() {
        let mut v = b"II+\0".to_vec();
        v.extend_from_slice(&8u16.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        v.extend_from_slice(&16u64.to_le_bytes());
        v.extend_from_slice(&u64::MAX.to_le_bytes());
        let err = TiffFile::parse(&MemSource::new(v), &Location::file("x.tif")).unwrap_err();
        assert!(matches!(err, Error::Limits { .. }), "{err}");
    }

    #[test]
    fn big_endian_inline_short() {
        let mut v = b"MM\0*".to_vec();
        v.extend_from_slice(&8u32.to_be_bytes());
        v.extend_from_slice(&1u16.to_be_bytes());
        v.extend_from_slice(&256u16.to_be_bytes());
        v.extend_from_slice(&3u16.to_be_bytes());
        v.extend_from_slice(&1u32.to_be_bytes());
        v.extend_from_slice(&[0x01, 0x02, 0, 0]);
        v.extend_from_slice(&0u32.to_be_bytes());
        let src = MemSource::new(v);
        let at = Location::file("be.tif");
        let tf = TiffFile::parse(&src, &at).unwrap();
        assert_eq!(tf.reader(&src, &at, 0).uint(256).unwrap(), Some(0x0102));
    }
}
