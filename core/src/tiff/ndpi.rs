//! Hamamatsu NDPI's TIFF quirks, as OpenSlide 4.0.1's `openslide-decode-tifflike.c` reads them.
//!
//! NDPI is classic TIFF (version 42, 4-byte value offsets) that keeps files past 4 GiB readable:
//! * the header's first-IFD offset and each IFD's next-IFD offset are 8 bytes;
//! * a classic file is NDPI when its header offset read as 8 bytes points at a directory (read
//!   with the NDPI rules) that holds tag 65420 with a non-zero count; otherwise the offset is
//!   the usual 4 bytes and the file is plain TIFF;
//! * a 32-bit out-of-line value offset gets high bits implied by its directory's offset: the
//!   largest value with those low 32 bits that lies below the directory (OpenSlide's
//!   heuristic), except that an offset equal to the same tag's offset in IFD 0 is kept (values
//!   shared with the first directory);
//! * strip offsets (values, not value locations) follow the same rule
//!   ([`TiffFile::fix_offset_ndpi`]); drivers apply it.

use std::collections::HashSet;

use super::{Data, TiffFile};
use crate::error::Location;
use crate::io::ByteSource;

/// NDPI's format-flag tag.
pub(crate) const NDPI_FORMAT_FLAG: u16 = 65420;

/// OpenSlide's `fix_offset_ndpi`: re-add the high bits implied by `diroff` to a 32-bit offset.
pub(crate) fn fix_offset(diroff: u64, offset: u64) -> u64 {
    let result = (diroff & !(u32::MAX as u64)) | (offset & u32::MAX as u64);
    if result >= diroff {
        // Below the directory; wrapping keeps the original value (as OpenSlide's MIN).
        result.wrapping_sub(1 << 32).min(result)
    } else {
        result
    }
}

impl TiffFile {
    /// Try reading the first directory in NDPI mode at the 64-bit header offset `off64`. On
    /// success (tag 65420 present), switch the file to NDPI, keep the directory and return the
    /// next offset; otherwise leave everything as it was.
    pub(super) fn try_ndpi(&mut self, src: &dyn ByteSource, at: &Location, off64: u64, seen: &mut HashSet<u64>, budget: &mut u64) -> Option<u64> {
        if off64 == 0 || off64 >= self.file_len {
            return None;
        }
        self.ndpi = true;
        let mut trial_budget = *budget;
        match self.read_ifd(src, at, off64, &mut trial_budget) {
            Ok((ifd, next)) if ifd.get(NDPI_FORMAT_FLAG).is_some_and(|e| e.count > 0) => {
                *budget = trial_budget;
                seen.insert(off64);
                self.ifds.push(ifd);
                Some(next)
            }
            _ => {
                self.ndpi = false;
                None
            }
        }
    }

    /// Where the out-of-line value of `tag`, stored as the 32-bit `raw`, lies in an NDPI
    /// directory at `diroff` (module rules).
    pub(super) fn ndpi_value_offset(&self, diroff: u64, tag: u16, raw: u64) -> u64 {
        match self.ifds.first().and_then(|f| f.get(tag)) {
            Some(e) if e.data == Data::At(raw) => raw,
            _ => fix_offset(diroff, raw),
        }
    }

    /// A strip or tile offset value of IFD `index` with NDPI's implied high bits (unchanged for
    /// files that are not NDPI), as OpenSlide's `_openslide_tifflike_uint_fix_offset_ndpi`.
    pub fn fix_offset_ndpi(&self, index: usize, offset: u64) -> u64 {
        match (self.ndpi, self.ifds.get(index)) {
            (true, Some(ifd)) => fix_offset(ifd.offset, offset),
            _ => offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fix_offset;
    use crate::error::Location;
    use crate::io::ByteSource;
    use crate::tiff::TiffFile;

    /// A large source of zeros except a few byte strings at given offsets (no memory for the
    /// rest).
    #[derive(Debug)]
    struct Sparse(u64, Vec<(u64, Vec<u8>)>);

    impl ByteSource for Sparse {
        fn len(&self) -> u64 {
            self.0
        }
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            if offset + buf.len() as u64 > self.0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.fill(0);
            for (at, bytes) in &self.1 {
                for (i, b) in bytes.iter().enumerate() {
                    let p = at + i as u64;
                    if p >= offset && p < offset + buf.len() as u64 {
                        buf[(p - offset) as usize] = *b;
                    }
                }
            }
            Ok(())
        }
    }

    /// An NDPI directory: entries (tag, type, count, 4-byte value), then the 8-byte next offset.
    fn ifd(entries: &[(u16, u16, u32, u32)], next: u64) -> Vec<u8> {
        let mut v = (entries.len() as u16).to_le_bytes().to_vec();
        for &(tag, typ, count, value) in entries {
            v.extend_from_slice(&tag.to_le_bytes());
            v.extend_from_slice(&typ.to_le_bytes());
            v.extend_from_slice(&count.to_le_bytes());
            v.extend_from_slice(&value.to_le_bytes());
        }
        v.extend_from_slice(&next.to_le_bytes());
        v
    }

    #[test]
    fn directories_and_values_past_4_gib_are_found() {
        const G4: u64 = 1 << 32;
        // IFD 0 at 100; IFD 1 at 8 GiB + 1 MB, whose ASCII value (Software, 8 bytes) lies 800
        // bytes before it, its offset written with its low 32 bits only, as NDPI writes it.
        let ifd1_at = 2 * G4 + 1_000_000;
        let value_at = ifd1_at - 800;
        let mut head = b"II*\0".to_vec();
        head.extend_from_slice(&100u64.to_le_bytes());
        let ifd0 = ifd(&[(256, 4, 1, 16), (65420, 4, 1, 1)], ifd1_at);
        let ifd1 = ifd(&[(256, 4, 1, 32), (305, 2, 8, value_at as u32), (65420, 4, 1, 1)], 0);
        let src = Sparse(3 * G4, vec![(0, head), (100, ifd0), (ifd1_at, ifd1), (value_at, b"NDP.scn\0".to_vec())]);
        let at = Location::file("big.ndpi");
        let tf = TiffFile::parse(&src, &at).unwrap();
        assert!(tf.ndpi);
        assert_eq!(tf.ifds.len(), 2);
        assert_eq!(tf.ifds[1].offset, ifd1_at);
        assert_eq!(tf.reader(&src, &at, 1).ascii(305).unwrap().as_deref(), Some("NDP.scn"));
        assert_eq!(tf.reader(&src, &at, 1).uint(256).unwrap(), Some(32));
        // A strip offset value of IFD 1 gets the same high bits.
        assert_eq!(tf.fix_offset_ndpi(1, (value_at as u32) as u64), value_at);
        assert_eq!(tf.fix_offset_ndpi(0, 50), 50);
    }

    #[test]
    fn a_classic_tiff_is_not_ndpi() {
        // IFD at 8 (the 8-byte reading of the header offset is garbage): plain TIFF.
        let mut v = b"II*\0".to_vec();
        v.extend_from_slice(&8u32.to_le_bytes());
        v.extend_from_slice(&ifd(&[(256, 4, 1, 16)], 0)[..2 + 12]);
        v.extend_from_slice(&0u32.to_le_bytes());
        let src = crate::io::MemSource::new(v);
        let tf = TiffFile::parse(&src, &Location::file("x.tif")).unwrap();
        assert!(!tf.ndpi);
        assert_eq!(tf.ifds.len(), 1);
    }

    #[test]
    fn implied_high_bits_keep_offsets_below_their_directory() {
        // Small files: no high bits.
        assert_eq!(fix_offset(1000, 200), 200);
        // A value past 4 GiB whose directory lies further on.
        assert_eq!(fix_offset((5 << 32) + 100, 50), (5 << 32) + 50);
        // Low bits above the directory's: the previous 4 GiB block.
        assert_eq!(fix_offset((5 << 32) + 100, 500), (4 << 32) + 500);
        // Nothing below: kept as is (OpenSlide's wrap guard).
        assert_eq!(fix_offset(100, 500), 500);
    }
}
