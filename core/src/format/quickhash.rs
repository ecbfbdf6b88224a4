//! `openslide.quickhash-1`, computed as OpenSlide 4.0.1 does for TIFF-based formats
//! (`openslide-decode-tifflike.c`, `openslide-hash.c`):
//!
//! SHA-256 over (1) the raw compressed bytes of every tile/strip of the lowest-resolution level,
//! in chunk order, then (2) for each of the string tags ImageDescription, Make, Model, Software,
//! DateTime, Artist, HostComputer, Copyright, DocumentName of the property directory (IFD 0):
//! the property name `tiff.<Tag>` and its value (empty when absent), each followed by a NUL.
//! When the lowest level holds more than 5 MiB of compressed data, no hash is produced (OpenSlide
//! disables the hash to keep open fast) and the property is omitted.

use sha2::{Digest, Sha256};

use crate::error::{Error, Location, Result};
use crate::index::SlideIndex;
use crate::io::ByteSource;
use crate::tiff::{tags, TiffFile};

/// Lowest-level data above this many bytes disables the hash (OpenSlide's `5 << 20`).
const MAX_HASHED_BYTES: u64 = 5 << 20;

pub(crate) fn add_quickhash(tf: &TiffFile, src: &dyn ByteSource, at: &Location, idx: &mut SlideIndex) -> Result<()> {
    let Some(lowest) = idx.levels.last() else { return Ok(()) };
    let img = &lowest.image;
    let total = img.total_bytes();
    if total > MAX_HASHED_BYTES {
        return Ok(());
    }
    let mut h = Sha256::new();
    let mut buf = Vec::new();
    for t in &img.tiles {
        if t.byte_count == 0 {
            continue;
        }
        if t.offset.checked_add(t.byte_count).is_none_or(|e| e > src.len()) {
            return Err(Error::format(
                at,
                format!("quickhash: chunk at offset {} (+{} bytes) lies past the end of the file", t.offset, t.byte_count),
            ));
        }
        buf.resize(t.byte_count as usize, 0);
        src.read_exact_at(&mut buf, t.offset).map_err(|e| {
            Error::format(at, format!("quickhash: chunk at offset {} (+{} bytes) unreadable: {e}", t.offset, t.byte_count))
        })?;
        h.update(&buf);
    }
    let r = tf.reader(src, at, 0);
    for (tag, name) in [
        (tags::IMAGE_DESCRIPTION, "ImageDescription"),
        (tags::MAKE, "Make"),
        (tags::MODEL, "Model"),
        (tags::SOFTWARE, "Software"),
        (tags::DATE_TIME, "DateTime"),
        (tags::ARTIST, "Artist"),
        (tags::HOST_COMPUTER, "HostComputer"),
        (tags::COPYRIGHT, "Copyright"),
        (tags::DOCUMENT_NAME, "DocumentName"),
    ] {
        h.update(format!("tiff.{name}").as_bytes());
        h.update([0u8]);
        let value = match r.ifd.get(tag) {
            Some(e) if e.field_type == 2 => r.ascii(tag)?.unwrap_or_default(),
            _ => String::new(),
        };
        h.update(value.as_bytes());
        h.update([0u8]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    idx.properties.insert("openslide.quickhash-1".into(), hex);
    Ok(())
}
