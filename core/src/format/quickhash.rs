//! `openslide.quickhash-1`, computed as OpenSlide 4.0.1 does for TIFF-based formats
//! (`openslide-decode-tifflike.c`, `openslide-hash.c`) from a driver's [`QuickhashInput`]:
//!
//! SHA-256 over (1) the stored bytes of every tile/strip of the lowest-resolution level, in
//! storage order (TIFF chunk order), then (2) each (name, value) string pair, each followed by
//! a NUL (for TIFF: `tiff.<Tag>` and its value for nine ASCII tags of IFD 0). When the lowest
//! level holds more than 5 MiB of compressed data, no hash is produced (OpenSlide disables the
//! hash to keep open fast) and the property is omitted.
//!
//! Non-TIFF drivers add bytes hashed first ([`QuickhashInput::prefix`]: DICOM hashes the
//! SeriesInstanceUID and a NUL; MIRAX the bytes of `Slidedat.ini`) and may lift the cap
//! ([`QuickhashInput::uncapped`], MIRAX); bytes hashed last ([`QuickhashInput::suffix`]) follow
//! the strings (ARGOS: its metadata XML).

use sha2::{Digest, Sha256};

use super::QuickhashInput;
use crate::error::{Error, Location, Result};
use crate::index::{ImageIndex, TileLoc};
use crate::io::ByteSource;

/// Lowest-level data above this many bytes disables the hash (OpenSlide's `5 << 20`).
const MAX_HASHED_BYTES: u64 = crate::limits::LIMITS.quickhash_bytes;

/// The hex digest, or `None` when the lowest level is too large to hash. `chunks`, when
/// given, replaces the lowest level's stored chunks (`SlideLayout::quickhash_chunks`).
///
/// # Errors
/// `Format` when a hashed chunk lies past the end of the file or cannot be read;
/// chunks of any source file are read through `src` (a [`crate::io::multi::SourceSet`]).
pub(crate) fn quickhash(
    input: &QuickhashInput,
    lowest: &ImageIndex,
    chunks: Option<&[TileLoc]>,
    src: &dyn ByteSource,
    at: &Location,
) -> Result<Option<String>> {
    let mut h = Sha256::new();
    h.update(&input.prefix);
    if input.lowest_level_tiles {
        let list: Box<dyn Iterator<Item = TileLoc> + '_> = match chunks {
            Some(c) => Box::new(c.iter().copied()),
            None => lowest.grid.chunks(),
        };
        let total = match chunks {
            Some(c) => c.iter().fold(0u64, |a, t| a.saturating_add(t.length)),
            None => lowest.total_bytes(),
        };
        if total > MAX_HASHED_BYTES && !input.uncapped {
            return Ok(None);
        }
        let mut buf = Vec::new();
        for t in list {
            if t.length == 0 {
                continue;
            }
            if t.end().is_none_or(|e| src.source_len(t.source).is_none_or(|len| e > len)) {
                return Err(Error::format(
                    at,
                    format!("quickhash: chunk at offset {} (+{} bytes) lies past the end of the file", t.offset, t.length),
                ));
            }
            buf.resize(t.length as usize, 0);
            src.read_exact_at(&mut buf, crate::io::multi::address(t)).map_err(|e| {
                if crate::interrupt::is_io(&e) {
                    return Error::Interrupted;
                }
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
    h.update(&input.suffix);
    Ok(Some(h.finalize().iter().map(|b| format!("{b:02x}")).collect()))
}
