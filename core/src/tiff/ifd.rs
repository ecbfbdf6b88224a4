//! IFD entries and typed access to their values.

use std::collections::BTreeMap;

use super::{read_at, TiffFile, MAX_TAG_BYTES};
use crate::error::{Error, Location, Result};
use crate::io::ByteSource;

/// Where an entry's value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Data {
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
    pub(crate) data: Data,
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

/// Where an entry's value is: in the entry itself or at a byte range of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueRange {
    /// Stored inline in the entry (at most 8 bytes), in file byte order.
    Inline(Vec<u8>),
    /// `len` bytes at file offset `offset` (not checked against the file).
    At {
        /// File offset.
        offset: u64,
        /// Length in bytes (`count × type size`).
        len: u64,
    },
}

/// A Format error naming `tag` unless `[offset, offset + len)` lies inside `src`.
pub(crate) fn check_inside(src: &dyn ByteSource, at: &Location, tag: u16, offset: u64, len: u64) -> Result<()> {
    if offset.checked_add(len).is_none_or(|end| end > src.len()) {
        return Err(Error::format(
            at,
            format!("tag {tag}: structure at offset {offset} (+{len} bytes) lies past the end of the file ({} bytes)", src.len()),
        ));
    }
    Ok(())
}

impl TiffFile {
    /// Where the value of `e` is, without reading it.
    ///
    /// # Errors
    /// [`Error::Limits`] when the value is larger than [`MAX_TAG_BYTES`] or the file.
    pub fn value_range(&self, at: &Location, e: &Entry) -> Result<ValueRange> {
        let total = self.value_len(at, e)?;
        Ok(match e.data {
            Data::Inline(b) => ValueRange::Inline(b[..total as usize].to_vec()),
            Data::At(offset) => ValueRange::At { offset, len: total },
        })
    }

    fn value_len(&self, at: &Location, e: &Entry) -> Result<u64> {
        let tsize = type_size(e.field_type).unwrap_or(1);
        let total = e.count.saturating_mul(tsize);
        if total > MAX_TAG_BYTES.min(self.file_len) {
            return Err(Error::limits(
                at,
                format!("tag {} value of {total} bytes exceeds the file size or {MAX_TAG_BYTES} bytes", e.tag),
            ));
        }
        Ok(total)
    }

    /// The raw bytes of an entry's value (file byte order), exactly `count × type size` bytes.
    ///
    /// # Errors
    /// [`Error::Format`] when the value lies outside the file; [`Error::Limits`] when it is
    /// larger than [`MAX_TAG_BYTES`].
    pub fn raw(&self, src: &dyn ByteSource, at: &Location, e: &Entry) -> Result<Vec<u8>> {
        match self.value_range(at, e)? {
            ValueRange::Inline(b) => Ok(b),
            ValueRange::At { offset, len } => {
                check_inside(src, at, e.tag, offset, len)?;
                read_at(src, at, offset, len)
            }
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

