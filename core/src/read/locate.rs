//! Request validation and tile location: one function, and so one error kind, per failure, for
//! every read path (CPU regions, batches, tiles, associated images; the GPU engine).
//!
//! | failure | kind | function |
//! |---|---|---|
//! | a level that does not exist | [`Error::Usage`] | [`level`] |
//! | a tile outside the level's tile grid (asked for by column, row) | [`Error::Usage`] | [`locate_tile`] |
//! | one region's RGBA output over `max_region_bytes` (or overflowing) | [`Error::Limits`] | [`region_bytes`] |
//! | a batch's output (n × h × w × channels) over `max_region_bytes` (or overflowing) | [`Error::Limits`] | [`batch_bytes`] |
//! | a compressed tile over [`MAX_TILE_BYTES`] | [`Error::Limits`] | [`locate_tile`] |
//! | a tile whose bytes lie past the end of its file, or in a source the slide does not have | [`Error::Format`] | [`locate_tile`] |
//! | a missing tile (offset 0 or length 0; a cell a sparse grid does not store) | none: background | [`locate_tile`] |
//!
//! A corrupt tile (bytes that do not decode) is [`Error::Format`] from the codec.

use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{ImageIndex, SlideIndex, TileLoc};
use crate::io::ByteSource;

/// Largest compressed tile accepted, in bytes (a 16384² RGBA tile stored raw is 1 GiB). A tile
/// claiming more is refused before any allocation.
pub const MAX_TILE_BYTES: u64 = crate::limits::LIMITS.tile_bytes;

/// Level `level` of `index`: its image, downsample and the [`Location`] naming file and level
/// (for errors).
///
/// # Errors
/// [`Error::Usage`] when the level does not exist.
pub fn level(index: &SlideIndex, level: usize) -> Result<(&ImageIndex, f64, Location)> {
    let l = index.levels.get(level).ok_or_else(|| {
        Error::Usage(format!("{}: level {level} does not exist (level count {})", index.path().display(), index.levels.len()))
    })?;
    Ok((&l.image, l.downsample, Location::file(index.path()).with_image(ImageRef::Level(level))))
}

/// Bytes of one RGBA region of `size` (width, height) pixels: `w × h × 4`.
///
/// # Errors
/// [`Error::Limits`] (at `at`, message naming `max_region_bytes`) when that exceeds
/// `max_region_bytes`, overflows, or does not fit in `usize`.
pub fn region_bytes(size: (u64, u64), max_region_bytes: u64, at: &Location) -> Result<usize> {
    let bytes = size.0.checked_mul(size.1).and_then(|n| n.checked_mul(4));
    match bytes {
        Some(b) if b <= max_region_bytes && usize::try_from(b).is_ok() => Ok(b as usize),
        _ => Err(Error::limits(at, format!("region of {}x{} pixels exceeds max_region_bytes ({max_region_bytes} bytes)", size.0, size.1))),
    }
}

/// Bytes of the output of a batch of `n` patches of `size` (width, height) pixels with
/// `channels` bytes per pixel: `n × h × w × channels`.
///
/// One rule for every batch entry point (CPU RGB, GPU RGB or RGBA, Python): the output of one
/// call may not exceed `max_region_bytes`, the setting documented as "largest output of one
/// read". The CPU path used to allow 4× that (as a `Usage` error) and the GPU path and Python
/// 1× (as `Limits`); 1× is kept because it is the documented meaning of the setting, what two
/// of the three paths did, and it bounds what one call allocates whatever the channel count.
///
/// # Errors
/// [`Error::Limits`] (at `at`, message naming `max_region_bytes`) when that exceeds
/// `max_region_bytes`, overflows, or does not fit in `usize`.
pub fn batch_bytes(n: usize, size: (u64, u64), channels: u8, max_region_bytes: u64, at: &Location) -> Result<usize> {
    let bytes = (n as u64).checked_mul(size.0).and_then(|v| v.checked_mul(size.1)).and_then(|v| v.checked_mul(channels as u64));
    match bytes {
        Some(b) if b <= max_region_bytes && usize::try_from(b).is_ok() => Ok(b as usize),
        _ => Err(Error::limits(
            at,
            format!("{n} patches of {}x{}x{channels} exceed max_region_bytes ({max_region_bytes} bytes)", size.0, size.1),
        )),
    }
}

/// Where tile (`col`, `row`) of `img` lies in the slide's files (`src`, whose
/// [`ByteSource::source_len`] gives each file's length): `Ok(None)` for a missing tile (not
/// stored, or any plane at offset 0 or of length 0; read as background, [`ImageIndex::tile`]),
/// else the byte range of its first plane, every plane having been checked (planar-separate
/// images have one range per sample). Reads use [`crate::io::multi::address`] of the ranges.
/// `at` names file and level; errors name the tile too.
///
/// # Errors
/// [`Error::Usage`] for a tile outside the grid; [`Error::Limits`] for a plane over
/// [`MAX_TILE_BYTES`] (checked first: such a claim is refused whatever the file length);
/// [`Error::Format`] for a plane past the end of its file (or whose end overflows) or in a
/// source file the slide does not have.
pub fn locate_tile(img: &ImageIndex, src: &dyn ByteSource, col: u64, row: u64, at: &Location) -> Result<Option<TileLoc>> {
    if col >= img.tiles_across() || row >= img.tiles_down() {
        return Err(Error::Usage(format!("{at}: tile ({col}, {row}) outside the {}x{} tile grid", img.tiles_across(), img.tiles_down())));
    }
    let Some(tile) = img.tile(col, row) else { return Ok(None) };
    for &l in tile.locs {
        check_range(l, src, &tile_location(at, src, img, col, row), col, row)?;
    }
    Ok(tile.locs.first().copied())
}

/// The location of tile (`col`, `row`) of `img` for errors: `at` narrowed to the tile, naming
/// the file that holds the tile's bytes when that is not the file the slide was opened by (a
/// DICOM level in its own instance, a MIRAX data file; [`ByteSource::source_path`]).
pub fn tile_location(at: &Location, src: &dyn ByteSource, img: &ImageIndex, col: u64, row: u64) -> Location {
    let mut l = at.clone().with_tile(col, row);
    if let Some(p) = img.tile_locs(col, row).next().and_then(|t| src.source_path(t.source)) {
        l.path = p.to_path_buf();
    }
    l
}

/// The checks of one stored byte range (see [`locate_tile`]).
fn check_range(l: TileLoc, src: &dyn ByteSource, at: &Location, col: u64, row: u64) -> Result<()> {
    if l.length > MAX_TILE_BYTES {
        return Err(Error::limits(&at.clone().with_tile(col, row), format!("compressed tile of {} bytes (limit {MAX_TILE_BYTES})", l.length)));
    }
    let Some(file_len) = src.source_len(l.source) else {
        return Err(Error::format(&at.clone().with_tile(col, row), format!("tile data in source file {}, which the slide does not have", l.source.0)));
    };
    if l.end().is_none_or(|e| e > file_len) {
        // `at` names the file holding the tile ([`tile_location`]).
        return Err(Error::format(
            &at.clone().with_tile(col, row),
            format!("tile data at offset {} (+{} bytes) lies past the end of the file ({file_len} bytes)", l.offset, l.length),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::SourceId;
    use crate::io::MemSource;
    use crate::read::test_image;

    fn file(len: usize) -> MemSource {
        MemSource::new(vec![0u8; len])
    }

    fn loc(offset: u64, length: u64) -> TileLoc {
        TileLoc::primary(offset, length)
    }

    #[test]
    fn each_failure_has_one_kind() {
        let at = Location::file("x.tif");
        // A 20 × 10 image of two 10 × 10 tiles.
        let img = test_image(20, 10, 10, 10, 1, vec![loc(100, 10), loc(0, 0)]);
        assert_eq!(locate_tile(&img, &file(1000), 0, 0, &at).unwrap(), Some(loc(100, 10)));
        assert_eq!(locate_tile(&img, &file(1000), 1, 0, &at).unwrap(), None, "missing = background");
        assert_eq!(locate_tile(&img, &file(1000), 2, 0, &at).unwrap_err().kind_name(), "usage");
        assert_eq!(locate_tile(&img, &file(1000), 0, 1, &at).unwrap_err().kind_name(), "usage");
        let e = locate_tile(&img, &file(105), 0, 0, &at).unwrap_err();
        assert_eq!(e.kind_name(), "format");
        assert!(e.to_string().contains("tile (0, 0)") && e.to_string().contains("past the end"), "{e}");
        // Over-large: Limits even when it also lies past the end of the file.
        let big = test_image(20, 10, 10, 10, 1, vec![loc(16, MAX_TILE_BYTES + 1), loc(u64::MAX - 1, 5)]);
        assert_eq!(locate_tile(&big, &file(1000), 0, 0, &at).unwrap_err().kind_name(), "limits");
        assert_eq!(locate_tile(&big, &file(1000), 1, 0, &at).unwrap_err().kind_name(), "format", "offset + length overflows");
        // A source file the slide does not have.
        let other = test_image(20, 10, 10, 10, 1, vec![TileLoc { source: SourceId(1), offset: 10, length: 5 }, loc(20, 5)]);
        assert_eq!(locate_tile(&other, &file(1000), 0, 0, &at).unwrap_err().kind_name(), "format");
        assert_eq!(locate_tile(&other, &file(1000), 1, 0, &at).unwrap(), Some(loc(20, 5)));
    }

    #[test]
    fn every_plane_is_checked() {
        let at = Location::file("x.tif");
        // Planar-separate RGB (TIFF order: plane after plane): tile 1's blue plane lies past the end.
        let img = test_image(20, 10, 10, 10, 3, vec![loc(10, 5), loc(20, 5), loc(30, 5), loc(40, 5), loc(50, 5), loc(900, 500)]);
        assert_eq!(locate_tile(&img, &file(1000), 0, 0, &at).unwrap(), Some(loc(10, 5)));
        assert_eq!(locate_tile(&img, &file(1000), 1, 0, &at).unwrap_err().kind_name(), "format");
        let img = test_image(20, 10, 10, 10, 3, vec![loc(10, 5), loc(20, 5), loc(30, 5), loc(0, 0), loc(50, 5), loc(60, 5)]);
        assert_eq!(locate_tile(&img, &file(1000), 0, 0, &at).unwrap(), Some(loc(10, 5)));
        assert_eq!(locate_tile(&img, &file(1000), 1, 0, &at).unwrap(), None, "one missing plane = missing tile");
    }

    #[test]
    fn output_sizes() {
        let at = Location::file("x.tif");
        assert_eq!(region_bytes((10, 10), 400, &at).unwrap(), 400);
        assert_eq!(region_bytes((10, 11), 400, &at).unwrap_err().kind_name(), "limits");
        assert_eq!(region_bytes((u64::MAX, 2), u64::MAX, &at).unwrap_err().kind_name(), "limits");
        assert_eq!(batch_bytes(2, (10, 10), 3, 600, &at).unwrap(), 600);
        let e = batch_bytes(3, (10, 10), 3, 600, &at).unwrap_err();
        assert!(e.kind_name() == "limits" && e.to_string().contains("max_region_bytes"), "{e}");
        assert_eq!(batch_bytes(usize::MAX, (u64::MAX, 2), 4, u64::MAX, &at).unwrap_err().kind_name(), "limits");
        assert_eq!(batch_bytes(0, (u64::MAX, u64::MAX), 3, 0, &at).unwrap(), 0);
    }
}
