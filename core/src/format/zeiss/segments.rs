//! The ZISRAW segment structure of a CZI file: file header, subblock directory, subblock
//! headers, metadata and attachment directory. Every read is bounded by the file's length
//! and by the limits below; nothing is sized from an unchecked header value.
//!
//! Layout facts (little-endian throughout) from OpenSlide's zeiss driver structures
//! (`openslide-vendor-zeiss.c`), czifile's segment classes and OpenSlide's CZI ImHex pattern
//! (`misc/imhex/zeiss-czi.hexpat`):
//! * every segment starts with a 32-byte header: a 16-byte id (`ZISRAWFILE`, `ZISRAWDIRECTORY`,
//!   `ZISRAWSUBBLOCK`, `ZISRAWMETADATA`, `ZISRAWATTDIR`, `ZISRAWATTACH`, NUL-padded), the
//!   allocated and the used size (i64);
//! * file header (at 0): major, minor, two reserved i32, primary file GUID, file GUID, file part
//!   (i32), subblock directory position, metadata position (i64), update-pending (i32),
//!   attachment directory position (i64);
//! * subblock directory: entry count (i32), 124 reserved bytes, then the entries: schema `DV`,
//!   pixel type (i32), file position (i64), file part (i32), compression (i32), pyramid type
//!   (u8), 5 reserved bytes, dimension count (i32), then per dimension 20 bytes: a 4-byte name,
//!   start (i32), size (i32), start coordinate (f32), stored size (i32);
//! * subblock segment: metadata size (i32), attachment size (i32), data size (i64), its own
//!   directory entry, padding to 256 bytes after the segment header (more when the entry is
//!   longer), then the metadata, the data and the attachments (czifile's data offset rule);
//! * metadata segment: XML size (i32), attachment size (i32), 248 reserved bytes, the XML;
//! * attachment directory: entry count (i32), 252 reserved bytes, then 128-byte entries: schema
//!   `A1`, 10 reserved bytes, file position (i64), file part (i32), content GUID (16), content
//!   file type (8 bytes, e.g. `JPG`, `CZI`), name (80 bytes, e.g. `Label`); the attachment
//!   segment holds its data size (i32) and its entry, its data starting 256 bytes after the
//!   segment header.

use crate::error::{Error, Location, Result};
use crate::io::ByteSource;
use crate::tiff::read_at;

/// Most subblocks a file may list (a whole-slide scan at 40× has tens of thousands).
pub const MAX_SUBBLOCKS: u64 = crate::limits::LIMITS.czi_subblocks;
/// Most dimensions one directory entry may have (CZI defines about a dozen).
pub const MAX_DIMENSIONS: u64 = crate::limits::LIMITS.czi_dimensions;
/// Largest metadata XML read, in bytes.
pub const MAX_XML_BYTES: u64 = crate::limits::LIMITS.xml_bytes as u64;
/// Most attachments a file may list.
pub const MAX_ATTACHMENTS: u64 = crate::limits::LIMITS.czi_attachments;

/// Segment header length in bytes.
pub const SEGMENT_HEADER: u64 = 32;

fn i32_at(b: &[u8], o: usize) -> i32 {
    i32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}

fn i64_at(b: &[u8], o: usize) -> i64 {
    i64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

/// The file header (`ZISRAWFILE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHeader {
    /// Primary file GUID (hashed first by quickhash, as OpenSlide).
    pub primary_guid: [u8; 16],
    /// File GUID.
    pub file_guid: [u8; 16],
    /// File part (0 for a single-file CZI; other parts of a multi-file CZI are not read).
    pub file_part: i32,
    /// Subblock directory position, relative to the CZI's start.
    pub directory: u64,
    /// Metadata segment position (0: none).
    pub metadata: u64,
    /// Attachment directory position (0: none).
    pub attachments: u64,
}

/// One dimension of a directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimension {
    /// Name (`X`, `Y`, `C`, `S`, `M`, `Z`, `T`, `V`, `B`, ...), NUL padding removed.
    pub name: String,
    /// Start (pixels for `X`/`Y`, an index otherwise).
    pub start: i32,
    /// Size in level-0 pixels (`X`/`Y`) or count.
    pub size: i32,
    /// Size as stored (`X`/`Y`: the subblock's pixels; smaller for pyramid subblocks).
    pub stored_size: i32,
}

/// One subblock directory entry (schema `DV`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryEntry {
    /// CZI pixel type (0 Gray8, 1 Gray16, 3 Bgr24, 4 Bgr48, ...).
    pub pixel_type: i32,
    /// Subblock segment position, relative to the CZI's start.
    pub file_pos: u64,
    /// Compression (0 none, 1 JPEG, 2 LZW, 4 JPEG XR, 5 zstd0, 6 zstd1).
    pub compression: i32,
    /// Pyramid type (0 none, 1 single, 2 multiple subblocks).
    pub pyramid_type: u8,
    /// Dimensions in stored order.
    pub dims: Vec<Dimension>,
}

impl DirectoryEntry {
    /// Length of the entry in bytes (32 + 20 per dimension).
    pub fn byte_len(&self) -> u64 {
        32 + 20 * self.dims.len() as u64
    }

    /// The dimension named `name`.
    pub fn dim(&self, name: &str) -> Option<&Dimension> {
        self.dims.iter().find(|d| d.name == name)
    }
}

/// Check the segment id at `offset` (relative to the file) and return its header.
fn segment(src: &dyn ByteSource, at: &Location, offset: u64, sid: &str) -> Result<(i64, i64)> {
    let h = read_at(src, at, offset, SEGMENT_HEADER)?;
    let name = &h[..16];
    let end = name.iter().position(|&b| b == 0).unwrap_or(16);
    if &name[..end] != sid.as_bytes() {
        return Err(Error::format(at, format!("no {sid} segment at offset {offset} (found {:?})", String::from_utf8_lossy(&name[..end]))));
    }
    Ok((i64_at(&h, 16), i64_at(&h, 24)))
}

/// A position read from the file made absolute: `base + rel`, refused when negative or past
/// the end of the file.
fn position(src: &dyn ByteSource, at: &Location, base: u64, rel: i64, what: &str) -> Result<u64> {
    u64::try_from(rel)
        .ok()
        .and_then(|r| base.checked_add(r))
        .filter(|&p| p < src.len())
        .ok_or_else(|| Error::format(at, format!("{what} position {rel} lies outside the file ({} bytes)", src.len())))
}

/// Read the file header of the CZI starting at `base` (0, or an embedded CZI's offset).
///
/// # Errors
/// `Format` when the header is missing or truncated.
pub fn file_header(src: &dyn ByteSource, at: &Location, base: u64) -> Result<FileHeader> {
    segment(src, at, base, "ZISRAWFILE")?;
    let b = read_at(src, at, base + SEGMENT_HEADER, 80).map_err(|_| Error::format(at, "the CZI file header is truncated"))?;
    let opt = |rel: i64, what: &str| if rel == 0 { Ok(0) } else { position(src, at, base, rel, what).map(|p| p - base) };
    Ok(FileHeader {
        primary_guid: b[16..32].try_into().expect("16 bytes"),
        file_guid: b[32..48].try_into().expect("16 bytes"),
        file_part: i32_at(&b, 48),
        directory: position(src, at, base, i64_at(&b, 52), "subblock directory")? - base,
        metadata: opt(i64_at(&b, 60), "metadata")?,
        attachments: opt(i64_at(&b, 72), "attachment directory")?,
    })
}

/// Read the subblock directory of the CZI at `base`.
///
/// # Errors
/// `Format` for a missing or truncated directory or a bad entry; `Limits` for more than
/// [`MAX_SUBBLOCKS`] entries or [`MAX_DIMENSIONS`] dimensions.
pub fn directory(src: &dyn ByteSource, at: &Location, base: u64, hdr: &FileHeader) -> Result<Vec<DirectoryEntry>> {
    let pos = base + hdr.directory;
    segment(src, at, pos, "ZISRAWDIRECTORY")?;
    let head = read_at(src, at, pos + SEGMENT_HEADER, 128)?;
    let count = i32_at(&head, 0);
    let count = u64::try_from(count).map_err(|_| Error::format(at, format!("subblock directory of {count} entries")))?;
    if count > MAX_SUBBLOCKS {
        return Err(Error::limits(at, format!("subblock directory of {count} entries (at most {MAX_SUBBLOCKS})")));
    }
    let start = pos + SEGMENT_HEADER + 128;
    let avail = src.len().saturating_sub(start);
    // Each entry is at least 32 bytes: a count the file cannot hold is refused before reading.
    if count * 32 > avail {
        return Err(Error::format(at, format!("subblock directory of {count} entries at offset {start} runs past the end of the file")));
    }
    // Read in pieces, entry by entry, so a hostile count costs at most the file's bytes.
    let mut entries = Vec::with_capacity(count.min(1 << 16) as usize);
    let mut off = start;
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_at = off;
    let need = |off: u64, len: u64, buf: &mut Vec<u8>, buf_at: &mut u64| -> Result<()> {
        if off >= *buf_at && off + len <= *buf_at + buf.len() as u64 {
            return Ok(());
        }
        let chunk = len.max(1 << 20).min(src.len().saturating_sub(off));
        if chunk < len {
            return Err(Error::format(at, format!("subblock directory entry at offset {off} runs past the end of the file")));
        }
        *buf = read_at(src, at, off, chunk)?;
        *buf_at = off;
        Ok(())
    };
    for i in 0..count {
        need(off, 32, &mut buf, &mut buf_at)?;
        let e = &buf[(off - buf_at) as usize..];
        if &e[..2] != b"DV" {
            return Err(Error::format(at, format!("subblock directory entry {i} at offset {off} has schema {:?}, not DV", String::from_utf8_lossy(&e[..2]))));
        }
        let ndim = i32_at(e, 28);
        let ndim = u64::try_from(ndim).ok().filter(|&n| n <= MAX_DIMENSIONS).ok_or_else(|| Error::limits(at, format!("subblock directory entry {i} has {ndim} dimensions (0 to {MAX_DIMENSIONS})")))?;
        let (pixel_type, rel, compression, pyramid_type) = (i32_at(e, 2), i64_at(e, 6), i32_at(e, 18), e[22]);
        let file_pos = position(src, at, base, rel, &format!("subblock {i}"))? - base;
        need(off, 32 + 20 * ndim, &mut buf, &mut buf_at)?;
        let e = &buf[(off - buf_at) as usize..];
        let dims = (0..ndim as usize)
            .map(|k| {
                let d = &e[32 + 20 * k..52 + 20 * k];
                let end = d[..4].iter().position(|&b| b == 0).unwrap_or(4);
                Dimension { name: String::from_utf8_lossy(&d[..end]).into_owned(), start: i32_at(d, 4), size: i32_at(d, 8), stored_size: i32_at(d, 16) }
            })
            .collect();
        let entry = DirectoryEntry { pixel_type, file_pos, compression, pyramid_type, dims };
        off += entry.byte_len();
        entries.push(entry);
    }
    Ok(entries)
}

/// Where a subblock's pixel data are: (absolute offset, length in bytes), from its segment
/// header (`entry_len`: its directory entry's length).
///
/// # Errors
/// `Format` when the segment is missing, its sizes are negative, or the data lie past the end
/// of the file.
pub fn subblock_data(src: &dyn ByteSource, at: &Location, base: u64, file_pos: u64, entry_len: u64) -> Result<(u64, u64)> {
    let pos = base + file_pos;
    segment(src, at, pos, "ZISRAWSUBBLOCK")?;
    let h = read_at(src, at, pos + SEGMENT_HEADER, 16)?;
    let (meta, data) = (i32_at(&h, 0), i64_at(&h, 8));
    let (Ok(meta), Ok(data)) = (u64::try_from(meta), u64::try_from(data)) else {
        return Err(Error::format(at, format!("subblock at offset {pos} has metadata size {meta} and data size {data}")));
    };
    let offset = pos + SEGMENT_HEADER + 256u64.max(16 + entry_len) + meta;
    if offset.checked_add(data).is_none_or(|e| e > src.len()) {
        return Err(Error::format(at, format!("subblock at offset {pos}: its {data} data bytes at offset {offset} lie past the end of the file ({} bytes)", src.len())));
    }
    Ok((offset, data))
}

/// The metadata XML of the CZI at `base` (up to its first NUL byte, as OpenSlide reads it
/// as a C string); `None` when the file has no metadata segment.
///
/// # Errors
/// `Format` for a missing segment or XML past the end of the file; `Limits` over
/// [`MAX_XML_BYTES`].
pub fn metadata_xml(src: &dyn ByteSource, at: &Location, base: u64, hdr: &FileHeader) -> Result<Option<Vec<u8>>> {
    if hdr.metadata == 0 {
        return Ok(None);
    }
    let pos = base + hdr.metadata;
    segment(src, at, pos, "ZISRAWMETADATA")?;
    let h = read_at(src, at, pos + SEGMENT_HEADER, 8)?;
    let size = i32_at(&h, 0);
    let size = u64::try_from(size).map_err(|_| Error::format(at, format!("metadata XML of {size} bytes")))?;
    if size > MAX_XML_BYTES {
        return Err(Error::limits(at, format!("metadata XML of {size} bytes (at most {MAX_XML_BYTES})")));
    }
    let mut xml = read_at(src, at, pos + SEGMENT_HEADER + 256, size).map_err(|_| Error::format(at, format!("metadata XML of {size} bytes at offset {} runs past the end of the file", pos + SEGMENT_HEADER + 256)))?;
    if let Some(n) = xml.iter().position(|&b| b == 0) {
        xml.truncate(n);
    }
    Ok(Some(xml))
}

/// One attachment: its name, content type and data range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Name (`Label`, `SlidePreview`, `Thumbnail`, ...).
    pub name: String,
    /// Content file type (`JPG`, `CZI`, ...).
    pub file_type: String,
    /// Absolute offset of the data (the attachment segment's position + 288).
    pub offset: u64,
    /// Data size in bytes (as the segment states, clipped to the file).
    pub length: u64,
}

/// The attachments of the CZI at `base` (empty without an attachment directory).
///
/// # Errors
/// `Format` for a missing or truncated directory or an entry whose segment lies outside the
/// file; `Limits` over [`MAX_ATTACHMENTS`].
pub fn attachments(src: &dyn ByteSource, at: &Location, base: u64, hdr: &FileHeader) -> Result<Vec<Attachment>> {
    if hdr.attachments == 0 {
        return Ok(Vec::new());
    }
    let pos = base + hdr.attachments;
    segment(src, at, pos, "ZISRAWATTDIR")?;
    let h = read_at(src, at, pos + SEGMENT_HEADER, 4)?;
    let count = i32_at(&h, 0);
    let count = u64::try_from(count).ok().filter(|&c| c <= MAX_ATTACHMENTS).ok_or_else(|| Error::limits(at, format!("attachment directory of {count} entries (0 to {MAX_ATTACHMENTS})")))?;
    let table = read_at(src, at, pos + SEGMENT_HEADER + 256, count * 128)
        .map_err(|_| Error::format(at, format!("attachment directory of {count} entries at offset {pos} runs past the end of the file")))?;
    let mut out = Vec::new();
    for (i, e) in table.chunks_exact(128).enumerate() {
        if &e[..2] != b"A1" {
            return Err(Error::format(at, format!("attachment entry {i} has schema {:?}, not A1", String::from_utf8_lossy(&e[..2]))));
        }
        let text = |b: &[u8]| {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        };
        let seg = position(src, at, base, i64_at(e, 12), &format!("attachment {i}"))?;
        segment(src, at, seg, "ZISRAWATTACH")?;
        let size = i32_at(&read_at(src, at, seg + SEGMENT_HEADER, 4)?, 0);
        let offset = seg + SEGMENT_HEADER + 256;
        let length = u64::try_from(size).unwrap_or(0).min(src.len().saturating_sub(offset));
        out.push(Attachment { name: text(&e[48..128]), file_type: text(&e[40..48]), offset, length });
    }
    Ok(out)
}
