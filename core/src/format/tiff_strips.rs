//! Stripped (untiled) TIFF images as a grid one chunk wide: each strip is a tile of
//! `ImageWidth × RowsPerStrip` pixels (the last one shorter), so the tile index, read planner,
//! caches, partial-decode rules and decoders apply unchanged.
//!
//! Format facts, from the TIFF 6.0 specification (Adobe, 1992):
//! * Section 3 ("Bilevel Images", fields StripOffsets, RowsPerStrip, StripByteCounts) and
//!   Section 8 ("Baseline Field Reference"): an image is stored in strips of RowsPerStrip rows;
//!   RowsPerStrip defaults to 2^32 − 1 ("effectively infinity": one strip for the whole image),
//!   so a value larger than ImageLength means one strip;
//!   `StripsPerImage = floor((ImageLength + RowsPerStrip − 1) / RowsPerStrip)`; the last strip
//!   holds only the rows left (it is not padded to RowsPerStrip rows, unlike tiles: Section 15);
//! * Section 8, PlanarConfiguration and StripOffsets: with PlanarConfiguration 2 there are
//!   `SamplesPerPixel × StripsPerImage` strips, every strip of the first sample plane first;
//! * Section 8, NewSubfileType: bit 0 set marks a reduced-resolution version of another image
//!   (the generic-tiff driver's main-chain pyramid levels); SubIFDs (tag 330) are Adobe's TIFF
//!   Technical Note 1 (the OME-TIFF specification's "sub-resolutions").
//!
//! RowsPerStrip 0 is a `Format` error (no strip can hold a row); strip counts that do not match
//! `StripsPerImage` (fewer offsets or byte counts) are `Format` errors at open; offsets past the
//! end of the file are `Format` errors when the strip is read (`read::locate_tile`); a strip
//! whose decoded size is larger than the read working set (`SLIDESTREAM_READ_WORKING_BYTES`) is
//! a `Limits` error naming it as tile (0, strip) before anything is read (`read::waves`).
//!
//! Uncompressed strips larger than [`BAND_RGBA_BYTES`] decoded are indexed as bands of fewer
//! rows ([`uncompressed_bands`]): an uncompressed strip's rows are at fixed byte offsets, so a
//! band is a plain byte range and a read touches only the rows it needs. Compressed strips
//! (deflate, LZW, zstd, JPEG, ...) are decoded whole.

use crate::index::TileLoc;

/// Decoded (RGBA) bytes above which an uncompressed strip is indexed as several bands: 8 MiB,
/// well under the default read working set (192 MiB), so one band never fills a wave.
pub(crate) const BAND_RGBA_BYTES: u64 = 8 << 20;

/// The band height (rows) to index an uncompressed stripped image in, and the band byte ranges
/// in TIFF order (plane after plane, top to bottom), when its strips are larger than
/// [`BAND_RGBA_BYTES`] decoded; `None` to keep whole strips (small strips; or strips whose byte
/// counts do not cover their rows, or whose offsets would overflow, which are then read whole so
/// the decoder reports them).
///
/// * `width`, `height`: the image in pixels; `rps`: RowsPerStrip (1..=height);
/// * `row_bytes`: stored bytes of one row of one strip (`width × samples per plane × bytes per
///   sample`);
/// * `planes`: 1, or SamplesPerPixel for PlanarConfiguration 2;
/// * `strips`: the strip ranges in TIFF order (`planes × ceil(height / rps)` entries).
///
/// The band height divides `rps`, so no band straddles two strips; it is the largest divisor of
/// `rps` whose band fits [`BAND_RGBA_BYTES`] (at least 1 row). Missing strips (offset or length
/// 0) give missing bands.
pub(crate) fn uncompressed_bands(width: u64, height: u64, rps: u64, row_bytes: u64, planes: u64, strips: &[TileLoc]) -> Option<(u64, Vec<TileLoc>)> {
    let rgba_row = width.checked_mul(4)?;
    if rps.checked_mul(rgba_row)? <= BAND_RGBA_BYTES || rps <= 1 || row_bytes == 0 {
        return None;
    }
    let strips_down = height.div_ceil(rps);
    if strips.len() as u64 != strips_down.checked_mul(planes)? {
        return None;
    }
    // Every stored strip must hold its rows; else keep it whole (the decoder names the shortage).
    for (k, s) in strips.iter().enumerate() {
        let rows = rps.min(height - (k as u64 % strips_down) * rps);
        if !s.is_missing() && (s.length < rows.checked_mul(row_bytes)? || s.offset.checked_add(s.length).is_none()) {
            return None;
        }
    }
    let mut band = (BAND_RGBA_BYTES / rgba_row).clamp(1, rps);
    while rps % band != 0 {
        band -= 1;
    }
    let bands_down = height.div_ceil(band);
    let per_strip = rps / band;
    let mut out = Vec::with_capacity((bands_down * planes) as usize);
    for p in 0..planes {
        for j in 0..bands_down {
            let s = strips[(p * strips_down + j / per_strip) as usize];
            if s.is_missing() {
                out.push(TileLoc { length: 0, ..s });
                continue;
            }
            let first_row = (j % per_strip) * band;
            let rows = band.min(height - j * band);
            out.push(TileLoc { offset: s.offset + first_row * row_bytes, length: rows * row_bytes, ..s });
        }
    }
    Some((band, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_strips_are_kept_whole() {
        let strips = vec![TileLoc::primary(100, 3 * 10 * 4)];
        assert_eq!(uncompressed_bands(10, 4, 4, 30, 1, &strips), None);
    }

    #[test]
    fn large_strips_are_split_into_bands_dividing_rows_per_strip() {
        // 1 Mi pixels wide, 4 MiB RGBA per row: two rows per band (8 MiB).
        let w = 1 << 20;
        let row = 3 * w;
        // 2 strips of 6 rows (height 11: the last holds 5), one plane.
        let strips = vec![TileLoc::primary(1000, 6 * row), TileLoc::primary(1000 + 6 * row, 5 * row)];
        let (band, locs) = uncompressed_bands(w, 11, 6, row, 1, &strips).unwrap();
        assert_eq!(band, 2);
        assert_eq!(locs.len(), 6);
        assert_eq!(locs[1], TileLoc::primary(1000 + 2 * row, 2 * row));
        assert_eq!(locs[3], TileLoc::primary(1000 + 6 * row, 2 * row));
        // The last band holds the one row left.
        assert_eq!(locs[5], TileLoc::primary(1000 + 10 * row, row));
        // RowsPerStrip 5 (prime, > 2 rows per band): bands of one row.
        let strips = vec![TileLoc::primary(10, 5 * row)];
        let (band, locs) = uncompressed_bands(w, 5, 5, row, 1, &strips).unwrap();
        assert_eq!((band, locs.len()), (1, 5));
    }

    #[test]
    fn short_strips_missing_strips_and_planes() {
        let w = 1 << 20;
        let row = w;
        // A strip shorter than its rows: kept whole.
        let strips = vec![TileLoc::primary(10, 4 * row - 1)];
        assert_eq!(uncompressed_bands(w, 4, 4, row, 1, &strips), None);
        // A missing strip gives missing bands; plane 1 follows plane 0.
        let strips = vec![TileLoc::primary(0, 0), TileLoc::primary(10, 4 * row)];
        let (band, locs) = uncompressed_bands(w, 4, 4, row, 2, &strips).unwrap();
        assert_eq!(band, 2);
        assert!(locs[0].is_missing() && locs[1].is_missing());
        assert_eq!(locs[3], TileLoc::primary(10 + 2 * row, 2 * row));
        // A count that does not match the strips: None.
        assert_eq!(uncompressed_bands(w, 4, 4, row, 3, &strips), None);
    }
}
