//! `openslide.quickhash-1`, computed as OpenSlide 4.0.1 does for TIFF-based formats
//! (`openslide-decode-tifflike.c`, `openslide-hash.c`) from a driver's [`QuickhashInput`]:
//!
//! SHA-256 over (1) the stored bytes of every tile/strip of the lowest-resolution level, in
//! storage order (TIFF chunk order), then (2) each (name, value) string pair, each followed by
//! a NUL (for TIFF: `tiff.<Tag>` and its value for nine ASCII tags of IFD 0). When the lowest
//! level holds more than 5 MiB of compressed data, no hash is produced (OpenSlide disables the
//! hash to keep open fast) and the property is omitted.

use sha2::{Digest, Sha256};

use super::QuickhashInput;
use crate::error::{Error, Location, Result};
use crate::index::{ImageIndex, SourceId};
use crate::io::ByteSource;

/// Lowest-level data above this many bytes disables the hash (OpenSlide's `5 << 20`).
const MAX_HASHED_BYTES: u64 = 5 << 20;

/// The hex digest, or `None` when the lowest level is too large to hash.
///
/// # Errors
/// `Format` when a hashed chunk lies past the end of the file or cannot be read;
/// `Unsupported` for chunks in another source file (not needed by any driver yet).
pub(crate) fn quickhash(input: &QuickhashInput, lowest: &ImageIndex, src: &dyn ByteSource, at: &Location) -> Result<Option<String>> {
    let mut h = Sha256::new();
    if input.lowest_level_tiles {
        let chunks: Vec<_> = match &input.chunks {
            Some(c) => c.clone(),
            None => lowest.grid.chunks().collect(),
        };
        let total = chunks.iter().fold(0u64, |a, t| a.saturating_add(t.length));
        if total > MAX_HASHED_BYTES {
            return Ok(None);
        }
        let mut buf = Vec::new();
        for t in chunks {
            if t.length == 0 {
                continue;
            }
            if t.source != SourceId::PRIMARY {
                return Err(Error::unsupported(at, "quickhash over tiles of several files"));
            }
            if t.end().is_none_or(|e| e > src.len()) {
                return Err(Error::format(
                    at,
                    format!("quickhash: chunk at offset {} (+{} bytes) lies past the end of the file", t.offset, t.length),
                ));
            }
            buf.resize(t.length as usize, 0);
            src.read_exact_at(&mut buf, t.offset).map_err(|e| {
                Error::format(at, format!("quickhash: chunk at offset {} (+{} bytes) unreadable: {e}", t.offset, t.length))
            })?;
            h.update(&buf);
        }
    }
    for (name, value) in &input.strings {
        h.update(name.as_bytes());
        h.update([0u8]);
        h.update(value.as_bytes());
        h.update([0u8]);
    }
    Ok(Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect()))
}
