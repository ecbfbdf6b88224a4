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

use std::collections::{BTreeMap, HashSet};

use crate::error::{Error, Location, Result};
use crate::io::ByteSource;

/// Most IFDs followed in one chain (a slide has tens; more means a damaged or hostile file).
pub const MAX_IFDS: usize = 4096;
/// Most bytes one tag value may occupy (also bounded by the file size).
pub const MAX_TAG_BYTES: u64 = 512 << 20;
/// Most entries in one IFD.
pub const MAX_IFD_ENTRIES: u64 = 65_535;

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

/// Well-known tag numbers (TIFF 6.0 unless noted).
#[allow(missing_docs)]
pub mod tags {
    pub const NEW_SUBFILE_TYPE: u16 = 254;
    pub const IMAGE_WIDTH: u16 = 256;
    pub const IMAGE_LENGTH: u16 = 257;
    pub const BITS_PER_SAMPLE: u16 = 258;
    pub const COMPRESSION: u16 = 259;
    pub const PHOTOMETRIC: u16 = 262;
    pub const FILL_ORDER: u16 = 266;
    pub const DOCUMENT_NAME: u16 = 269;
    pub const IMAGE_DESCRIPTION: u16 = 270;
    pub const MAKE: u16 = 271;
    pub const MODEL: u16 = 272;
    pub const STRIP_OFFSETS: u16 = 273;
    pub const ORIENTATION: u16 = 274;
    pub const SAMPLES_PER_PIXEL: u16 = 277;
    pub const ROWS_PER_STRIP: u16 = 278;
    pub const STRIP_BYTE_COUNTS: u16 = 279;
    pub const X_RESOLUTION: u16 = 282;
    pub const Y_RESOLUTION: u16 = 283;
    pub const PLANAR_CONFIGURATION: u16 = 284;
    pub const X_POSITION: u16 = 286;
    pub const Y_POSITION: u16 = 287;
    pub const RESOLUTION_UNIT: u16 = 296;
    pub const SOFTWARE: u16 = 305;
    pub const DATE_TIME: u16 = 306;
    pub const ARTIST: u16 = 315;
    pub const HOST_COMPUTER: u16 = 316;
    pub const PREDICTOR: u16 = 317;
    pub const TILE_WIDTH: u16 = 322;
    pub const TILE_LENGTH: u16 = 323;
    pub const TILE_OFFSETS: u16 = 324;
    pub const TILE_BYTE_COUNTS: u16 = 325;
    pub const SUB_IFDS: u16 = 330;
    pub const EXTRA_SAMPLES: u16 = 338;
    pub const SAMPLE_FORMAT: u16 = 339;
    pub const JPEG_TABLES: u16 = 347;
    pub const YCBCR_SUBSAMPLING: u16 = 530;
    pub const REFERENCE_BLACK_WHITE: u16 = 532;
    pub const COPYRIGHT: u16 = 33432;
    /// ICC profile (TIFF/EP, "InterColorProfile").
    pub const ICC_PROFILE: u16 = 34675;
    /// Number of z-planes / depth (SGI), refused when > 1.
    pub const IMAGE_DEPTH: u16 = 32997;
}

/// Byte order of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// "II"
    Little,
    /// "MM"
    Big,
}

/// Where an entry's value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Data {
    /// Value stored in the entry itself (up to 4 bytes, 8 in BigTIFF), in file byte order.
    Inline([u8; 8]),
    /// Value stored at this file offset.
    At(u64),
}

/// One IFD entry: tag, field type, count and the value's location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Tag number.
    pub tag: u16,
    /// TIFF field type (1 BYTE ... 18 IFD8).
    pub field_type: u16,
    /// Number of values.
    pub count: u64,
    data: Data,
}

/// Size in bytes of one value of a TIFF field type, or `None` for an unknown type.
pub fn type_size(field_type: u16) -> Option<u64> {
    Some(match field_type {
        1 | 2 | 6 | 7 => 1,
        3 | 8 => 2,
        4 | 9 | 11 | 13 => 4,
        5 | 10 | 12 | 16 | 17 | 18 => 8,
        _ => return None,
    })
}

/// One image file directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Ifd {
    /// File offset of the directory.
    pub offset: u64,
    /// Entries by tag number.
    pub entries: BTreeMap<u16, Entry>,
}

impl Ifd {
    /// The entry for `tag`, if present.
    pub fn get(&self, tag: u16) -> Option<&Entry> {
        self.entries.get(&tag)
    }
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
}

fn read_at(src: &dyn ByteSource, at: &Location, offset: u64, len: u64) -> Result<Vec<u8>> {
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
        let mut tf = TiffFile { byte_order, bigtiff: false, ifds: Vec::new(), file_len };
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
        let (count_size, entry_size, next_size) = if self.bigtiff { (8, 20, 8) } else { (2, 12, 4) };
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
                let off = if self.bigtiff { self.u64_from(value) } else { self.u32_from(value) as u64 };
                // Only bytes inside the file can be read (the rest fails when read).
                charge(budget, at, total.min(self.file_len.saturating_sub(off)))?;
                Data::At(off)
            };
            entries.insert(tag, Entry { tag, field_type, count, data });
        }
        let nb = &body[(n * entry_size) as usize..];
        let next = if self.bigtiff { self.u64_from(nb) } else { self.u32_from(nb) as u64 };
        Ok((Ifd { offset, entries }, next))
    }

    fn u16_from(&self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        match self.byte_order {
            ByteOrder::Little => u16::from_le_bytes(a),
            ByteOrder::Big => u16::from_be_bytes(a),
        }
    }
    fn u32_from(&self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self.byte_order {
            ByteOrder::Little => u32::from_le_bytes(a),
            ByteOrder::Big => u32::from_be_bytes(a),
        }
    }
    fn u64_from(&self, b: &[u8]) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        match self.byte_order {
            ByteOrder::Little => u64::from_le_bytes(a),
            ByteOrder::Big => u64::from_be_bytes(a),
        }
    }

    /// The raw bytes of an entry's value (file byte order), exactly `count × type size` bytes.
    ///
    /// # Errors
    /// [`Error::Format`] when the value lies outside the file; [`Error::Limits`] when it is
    /// larger than [`MAX_TAG_BYTES`].
    pub fn raw(&self, src: &dyn ByteSource, at: &Location, e: &Entry) -> Result<Vec<u8>> {
        let tsize = type_size(e.field_type).unwrap_or(1);
        let total = e.count.saturating_mul(tsize);
        if total > MAX_TAG_BYTES.min(self.file_len) {
            return Err(Error::limits(
                at,
                format!("tag {} value of {total} bytes exceeds the file size or {MAX_TAG_BYTES} bytes", e.tag),
            ));
        }
        match e.data {
            Data::Inline(b) => Ok(b[..total as usize].to_vec()),
            Data::At(off) => read_at(src, at, off, total).map_err(|err| match err {
                Error::Format { at, message, codec } => Error::Format { at, message: format!("tag {}: {message}", e.tag), codec },
                other => other,
            }),
        }
    }

    /// An entry's values as unsigned integers (BYTE, SHORT, LONG, LONG8, IFD, IFD8 types).
    ///
    /// # Errors
    /// As [`raw`](Self::raw), plus [`Error::Format`] for a non-integer field type.
    pub fn uints(&self, src: &dyn ByteSource, at: &Location, e: &Entry) -> Result<Vec<u64>> {
        let raw = self.raw(src, at, e)?;
        Ok(match e.field_type {
            1 | 7 => raw.iter().map(|&b| b as u64).collect(),
            3 => raw.chunks_exact(2).map(|c| self.u16_from(c) as u64).collect(),
            4 | 13 => raw.chunks_exact(4).map(|c| self.u32_from(c) as u64).collect(),
            16 | 18 => raw.chunks_exact(8).map(|c| self.u64_from(c)).collect(),
            t => {
                return Err(Error::format(at, format!("tag {}: field type {t} where an unsigned integer is required", e.tag)))
            }
        })
    }

    /// An entry's values as `f64` (integers, RATIONAL, SRATIONAL, FLOAT, DOUBLE).
    ///
    /// # Errors
    /// As [`raw`](Self::raw), plus [`Error::Format`] for ASCII.
    pub fn floats(&self, src: &dyn ByteSource, at: &Location, e: &Entry) -> Result<Vec<f64>> {
        let raw = self.raw(src, at, e)?;
        Ok(match e.field_type {
            5 => raw
                .chunks_exact(8)
                .map(|c| self.u32_from(&c[..4]) as f64 / self.u32_from(&c[4..]) as f64)
                .collect(),
            10 => raw
                .chunks_exact(8)
                .map(|c| self.u32_from(&c[..4]) as i32 as f64 / self.u32_from(&c[4..]) as i32 as f64)
                .collect(),
            11 => raw.chunks_exact(4).map(|c| f32::from_bits(self.u32_from(c)) as f64).collect(),
            12 => raw.chunks_exact(8).map(|c| f64::from_bits(self.u64_from(c))).collect(),
            6 => raw.iter().map(|&b| b as i8 as f64).collect(),
            8 => raw.chunks_exact(2).map(|c| self.u16_from(c) as i16 as f64).collect(),
            9 => raw.chunks_exact(4).map(|c| self.u32_from(c) as i32 as f64).collect(),
            17 => raw.chunks_exact(8).map(|c| self.u64_from(c) as i64 as f64).collect(),
            2 => return Err(Error::format(at, format!("tag {}: ASCII where a number is required", e.tag))),
            _ => self.uints(src, at, e)?.into_iter().map(|v| v as f64).collect(),
        })
    }

    /// An ASCII entry as a string: up to the first NUL, invalid UTF-8 replaced (U+FFFD).
    ///
    /// # Errors
    /// As [`raw`](Self::raw).
    pub fn ascii(&self, src: &dyn ByteSource, at: &Location, e: &Entry) -> Result<String> {
        let raw = self.raw(src, at, e)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
    }

    /// A reader for the tags of IFD `index`.
    pub fn reader<'a>(&'a self, src: &'a dyn ByteSource, at: &'a Location, index: usize) -> IfdReader<'a> {
        IfdReader { tf: self, src, at, ifd: &self.ifds[index] }
    }
}

/// Convenience accessors for the tags of one IFD.
#[derive(Clone, Copy)]
pub struct IfdReader<'a> {
    tf: &'a TiffFile,
    src: &'a dyn ByteSource,
    at: &'a Location,
    /// The directory read.
    pub ifd: &'a Ifd,
}

impl IfdReader<'_> {
    /// `true` when `tag` is present.
    pub fn has(&self, tag: u16) -> bool {
        self.ifd.get(tag).is_some()
    }
    /// First value of an unsigned-integer tag.
    pub fn uint(&self, tag: u16) -> Result<Option<u64>> {
        match self.ifd.get(tag) {
            None => Ok(None),
            Some(e) if e.count == 0 => Ok(None),
            Some(e) => Ok(self.tf.uints(self.src, self.at, e)?.first().copied()),
        }
    }
    /// All values of an unsigned-integer tag.
    pub fn uints(&self, tag: u16) -> Result<Option<Vec<u64>>> {
        self.ifd.get(tag).map(|e| self.tf.uints(self.src, self.at, e)).transpose()
    }
    /// First value of a numeric tag as `f64`.
    pub fn float(&self, tag: u16) -> Result<Option<f64>> {
        match self.ifd.get(tag) {
            None => Ok(None),
            Some(e) if e.count == 0 => Ok(None),
            Some(e) => Ok(self.tf.floats(self.src, self.at, e)?.first().copied()),
        }
    }
    /// An ASCII tag.
    pub fn ascii(&self, tag: u16) -> Result<Option<String>> {
        self.ifd.get(tag).map(|e| self.tf.ascii(self.src, self.at, e)).transpose()
    }
    /// The raw bytes of a tag (exactly `count × type size` bytes).
    pub fn raw(&self, tag: u16) -> Result<Option<Vec<u8>>> {
        self.ifd.get(tag).map(|e| self.tf.raw(self.src, self.at, e)).transpose()
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
