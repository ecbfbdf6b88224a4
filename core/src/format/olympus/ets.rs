//! The ETS pixel file of one VSI stack (`_<name>_/stack<id>/frame_t*.ets`): its headers and
//! tile table.
//!
//! Layout (public sources, no code taken: Bio-Formats' `CellSensReader.parseETSFile` and
//! `decodeTile`, slideio's `vsistruct.hpp` (`EtsVolumeHeader`, `ETSAdditionalHeader`) and
//! `etsfile.cpp`; checked against `../shared/formats3/_vsi-ets-test-jpg2k_/stack1/frame_t_0.ets`).
//! All numbers are little-endian.
//! * a 64-byte volume header: magic `"SIS\0"`, header size (u32, 64), version (u32), number
//!   of dimensions `n` of a tile coordinate (u32), offset (u64) and size (u32) of the
//!   additional header, 4 unused bytes, offset of the tile table (u64), its entry count (u32),
//!   then 4 unused bytes and the free-chunk table's offset and count (not read);
//! * the additional header: magic `"ETS\0"`, version, pixel type (2 = u8, 4 = u16; 1, 3, 5-10
//!   are other integer and float types), component count (samples per pixel), colour space
//!   (1 grey, 3 RGB, 4 BGR), compression (0 raw, 2 JPEG, 3 JPEG 2000, 5 JPEG lossless, 8 PNG,
//!   9 BMP), quality, tile width, height and depth (u32 each), 17 u32 pixel-info hints, 40
//!   bytes of background colour (Bio-Formats takes the first `components × bytes per sample`
//!   bytes as one pixel of the pixel type), component order (u32), use-pyramid flag (u32);
//! * each tile-table entry: 4 unused bytes, `n` i32 coordinates (column, row, one per extra
//!   dimension of the stack, and last the pyramid level), the tile's offset (u64) and byte
//!   count (u32), 4 unused bytes. Tiles are whole codestreams (raw: `tile width × height ×
//!   components` samples, little-endian), every one of the full tile size, edge tiles
//!   included.

use crate::error::{Error, Location, Result};
use crate::io::ByteSource;
use crate::tiff::read_at;

/// Most coordinates per tile (real files use 4 to 6).
pub const MAX_DIMENSIONS: u32 = crate::limits::LIMITS.ets_dimensions;
/// Most pyramid levels (the level coordinate must be below this).
pub const MAX_LEVELS: i32 = crate::limits::LIMITS.ets_levels;
/// Largest tile table read, in bytes (44 bytes an entry for 6 dimensions: about 6 million
/// tiles).
pub const MAX_TABLE_BYTES: u64 = crate::limits::LIMITS.ets_table_bytes;
/// Bytes of the additional header read (up to and including the use-pyramid flag).
const ADDITIONAL_BYTES: u64 = 156;

/// Compression of an ETS file's tiles (the additional header's field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EtsCompression {
    /// 0: raw samples.
    Raw,
    /// 2: JPEG.
    Jpeg,
    /// 3: JPEG 2000.
    Jpeg2000,
}

impl EtsCompression {
    /// The name used in `olympus.ets.compression`.
    pub fn name(self) -> &'static str {
        match self {
            EtsCompression::Raw => "raw",
            EtsCompression::Jpeg => "jpeg",
            EtsCompression::Jpeg2000 => "jpeg2000",
        }
    }
}

/// One ETS file as the driver uses it.
#[derive(Debug, Clone)]
pub(crate) struct Ets {
    /// Header version.
    pub version: u32,
    /// Coordinates per tile-table entry.
    pub dims: usize,
    /// Bytes per sample: 1 (u8) or 2 (u16).
    pub sample_bytes: u8,
    /// Samples per pixel (1 or 3).
    pub components: u16,
    /// Colour space field (1 grey, 3 RGB, 4 BGR).
    pub colorspace: u32,
    /// Tile compression.
    pub compression: EtsCompression,
    /// Compression quality field.
    pub quality: u32,
    /// Tile width and height in pixels.
    pub tile: (u32, u32),
    /// One pixel of background: `components` samples.
    pub background: Vec<u32>,
    /// The use-pyramid flag: the last coordinate is the pyramid level.
    pub pyramid: bool,
    /// Tile-table entries: `dims` coordinates each, flattened.
    pub coords: Vec<i32>,
    /// Per entry: (offset, byte count).
    pub ranges: Vec<(u64, u64)>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"))
}

/// Read the ETS file `src` (named by `at`).
///
/// # Errors
/// `Format` for a bad magic, header size, dimension count or a table past the end of the
/// file; `Unsupported` for pixel types other than u8 / u16, component counts other than 1 / 3
/// and compressions other than raw, JPEG and JPEG 2000; `Limits` for a tile edge over
/// [`crate::format::MAX_TILE_EDGE`] or a table over [`MAX_TABLE_BYTES`]; `Io` from reads.
pub(crate) fn read(src: &dyn ByteSource, at: &Location) -> Result<Ets> {
    let h = read_at(src, at, 0, 64)?;
    if &h[..4] != b"SIS\0" || u32_at(&h, 4) != 64 {
        return Err(Error::format(at, format!("not an ETS file: magic {:?}, header size {} (\"SIS\" and 64 expected)", String::from_utf8_lossy(&h[..3]), u32_at(&h, 4))));
    }
    let dims = u32_at(&h, 12);
    if !(3..=MAX_DIMENSIONS).contains(&dims) {
        return Err(Error::format(at, format!("ETS tile coordinates of {dims} dimensions (3 to {MAX_DIMENSIONS}: column, row, level and up to 13 more)")));
    }
    let a = read_at(src, at, u64_at(&h, 16), ADDITIONAL_BYTES)?;
    if &a[..4] != b"ETS\0" {
        return Err(Error::format(at, format!("ETS additional header at offset {}: magic {:?} (\"ETS\" expected)", u64_at(&h, 16), String::from_utf8_lossy(&a[..3]))));
    }
    let (pixel_type, components, colorspace, compression) = (u32_at(&a, 8), u32_at(&a, 12), u32_at(&a, 16), u32_at(&a, 20));
    let sample_bytes = match pixel_type {
        2 => 1u8,
        4 => 2,
        t => return Err(Error::unsupported(at, format!("ETS pixel type {t} (8-bit unsigned (2) and 16-bit unsigned (4) are read)"))),
    };
    if components != 1 && components != 3 {
        return Err(Error::unsupported(at, format!("ETS tiles of {components} components (1 or 3 are read)")));
    }
    let compression = match compression {
        0 => EtsCompression::Raw,
        2 => EtsCompression::Jpeg,
        3 => EtsCompression::Jpeg2000,
        c => return Err(Error::unsupported(at, format!("ETS compression {c} (raw (0), JPEG (2) and JPEG 2000 (3) are read; 5 JPEG lossless, 8 PNG, 9 BMP are not)"))),
    };
    if compression == EtsCompression::Jpeg && sample_bytes != 1 {
        return Err(Error::unsupported(at, "ETS JPEG tiles of 16-bit samples"));
    }
    if compression == EtsCompression::Raw && components == 3 && colorspace == 4 {
        return Err(Error::unsupported(at, "ETS raw tiles in BGR order"));
    }
    let tile = (u32_at(&a, 28), u32_at(&a, 32));
    if tile.0 == 0 || tile.1 == 0 {
        return Err(Error::format(at, format!("ETS tile size {}x{}", tile.0, tile.1)));
    }
    let max = crate::format::MAX_TILE_EDGE;
    if tile.0 as u64 > max || tile.1 as u64 > max {
        return Err(Error::limits(at, format!("ETS tiles of {}x{} pixels exceed {max} per edge", tile.0, tile.1)));
    }
    let bg = &a[108..148];
    let background = (0..components as usize)
        .map(|i| if sample_bytes == 1 { bg[i] as u32 } else { u16::from_le_bytes([bg[2 * i], bg[2 * i + 1]]) as u32 })
        .collect();
    let pyramid = u32_at(&a, 152) != 0;
    let (table, count) = (u64_at(&h, 32), u32_at(&h, 40) as u64);
    let entry = 20 + 4 * dims as u64;
    let table_len = count * entry;
    if table.checked_add(table_len).is_none_or(|e| e > src.len()) {
        return Err(Error::format(at, format!("ETS tile table of {count} entries at offset {table} lies past the end of the file ({} bytes)", src.len())));
    }
    if table_len > MAX_TABLE_BYTES {
        return Err(Error::limits(at, format!("ETS tile table of {table_len} bytes (at most {MAX_TABLE_BYTES})")));
    }
    let t = read_at(src, at, table, table_len)?;
    let d = dims as usize;
    let mut coords = Vec::with_capacity(count as usize * d);
    let mut ranges = Vec::with_capacity(count as usize);
    for e in t.chunks_exact(entry as usize) {
        coords.extend((0..d).map(|i| u32_at(e, 4 + 4 * i) as i32));
        ranges.push((u64_at(e, 4 + 4 * d), u32_at(e, 12 + 4 * d) as u64));
    }
    Ok(Ets {
        version: u32_at(&h, 8),
        dims: d,
        sample_bytes,
        components: components as u16,
        colorspace,
        compression,
        quality: u32_at(&a, 24),
        tile,
        background,
        pyramid,
        coords,
        ranges,
    })
}

impl Ets {
    /// Number of tile-table entries.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The coordinates of entry `i`.
    pub fn coord(&self, i: usize) -> &[i32] {
        &self.coords[i * self.dims..(i + 1) * self.dims]
    }

    /// The pyramid level of entry `i` (its last coordinate; 0 when the file has no pyramid,
    /// whose entries of another level are not used, as Bio-Formats reads them).
    pub fn level(&self, i: usize) -> i32 {
        self.coord(i)[self.dims - 1]
    }

    /// Number of pyramid levels: one more than the largest level coordinate when the file
    /// uses a pyramid, else 1.
    ///
    /// # Errors
    /// `Format` for a negative level or one of [`MAX_LEVELS`] or more.
    pub fn level_count(&self, at: &Location) -> Result<usize> {
        if !self.pyramid {
            return Ok(1);
        }
        let mut max = 0;
        for i in 0..self.len() {
            let l = self.level(i);
            if !(0..MAX_LEVELS).contains(&l) {
                return Err(Error::format(at, format!("ETS tile {i} has pyramid level {l} (0 to {} accepted)", MAX_LEVELS - 1)));
            }
            max = max.max(l);
        }
        Ok(max as usize + 1)
    }
}
