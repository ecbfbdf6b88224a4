//! Hamamatsu NDPI (this file) and VMS ([`vms`]): one driver, `hamamatsu`; a TIFF is NDPI, a
//! key file is VMS (OpenSlide tries its `hamamatsu-vms-vmu` format, then `hamamatsu-ndpi`).
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-hamamatsu.c` (NDPI part) and
//! `openslide-decode-tifflike.c` (NDPI's TIFF quirks, read by [`crate::tiff`]):
//! * detection: a TIFF whose IFD 0 holds tag 65420 (NDPI's format flag) with a non-zero count;
//! * every IFD needs ImageWidth, ImageLength, RowsPerStrip (= ImageLength: one strip),
//!   StripOffsets (NDPI high bits implied), StripByteCounts and a floating-point SourceLens
//!   (65421). An IFD with SourceLens > 0 is a pyramid level when its FocalPlane (65424, signed)
//!   is 0; levels must come in decreasing width. SourceLens = -1 marks the macro image (a JPEG
//!   at the strip offset); other IFDs (the map, SourceLens -2) are not exposed;
//! * a level is one JPEG with 3 components. With a restart interval (DRI), its tiles are the
//!   restart intervals: tile size = MCU width × interval by MCU height (8×8 MCUs for a
//!   one-component scan), the interval must divide the MCUs per row, and the tile grid is
//!   `floor(width / tile width) × floor(height / tile height)` (pixels beyond read as
//!   transparent, as OpenSlide paints nothing there). Without DRI the whole strip is one tile.
//!   The SOF size must equal the TIFF size unless either exceeds 65,500 (libjpeg's limit), when
//!   the TIFF size is used;
//! * each tile's data starts at its MCU start: tag 65426 (offsets from the strip start, used
//!   when it has exactly one value per tile; the first tile always starts after the header).
//!   Without a usable tag the strip is scanned once for restart markers at open (OpenSlide scans
//!   in a background thread): the cost is one read of the strip, and strips over
//!   [`MAX_SCANNED_STRIP_BYTES`] are refused (`Limits`) rather than read whole at open;
//! * levels OpenSlide synthesises: for every stored level, levels at 1/2, 1/4 and 1/8 (JPEG DCT
//!   scaling of its tiles) when the tile size divides; levels are keyed by width (a later one
//!   replaces an earlier one of the same width) and sorted by decreasing width;
//! * properties: `tiff.*` from IFD 0; `openslide.mpp-x/-y` = 10000 / X/YResolution when
//!   ResolutionUnit is centimeter; `hamamatsu.SourceLens` and `openslide.objective-power` from
//!   SourceLens; `hamamatsu.X/YOffsetFromSlideCentre` (65422/65423, signed),
//!   `hamamatsu.Reference` (65427) and `hamamatsu.KEY` for each `KEY=VALUE` line (CRLF-separated,
//!   both non-empty) of tag 65449;
//! * quickhash: the strips of the narrowest level's IFD (raw StripOffsets, as OpenSlide hashes
//!   them) and the `tiff.*` strings of IFD 0.

pub mod vms;
mod vms_key;
pub mod vmu;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::tiff_common::{quickhash_input, tiff_properties};
use super::{format_double, FormatDriver, LayoutLevel, Probe, SlideLayout, MAX_IMAGE_EDGE, MAX_TILE_EDGE};
use crate::codec::stream::{patch_sof_size, scan_header};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Grid, ImageIndex, Photometric, SampleBits, SourceId, TileLoc, TileStream};
use crate::io::ByteSource;
use crate::tiff::{read_at, tags, IfdReader, TiffFile};

/// NDPI tags (OpenSlide's names).
const NDPI_FORMAT_FLAG: u16 = 65420;
const NDPI_SOURCELENS: u16 = 65421;
const NDPI_XOFFSET: u16 = 65422;
const NDPI_YOFFSET: u16 = 65423;
const NDPI_FOCAL_PLANE: u16 = 65424;
const NDPI_MCU_STARTS: u16 = 65426;
const NDPI_REFERENCE: u16 = 65427;
const NDPI_PROPERTY_MAP: u16 = 65449;

/// libjpeg's `JPEG_MAX_DIMENSION`: larger SOF sizes cannot be trusted (or decoded).
const JPEG_MAX_DIMENSION: u64 = crate::limits::LIMITS.jpeg_dimension;
/// Most bytes of a level's JPEG header (markers up to SOS) read at open.
const MAX_HEADER_BYTES: u64 = crate::limits::LIMITS.jpeg_header_bytes;
/// Largest strip scanned for restart markers at open when its MCU starts are missing.
pub const MAX_SCANNED_STRIP_BYTES: u64 = crate::limits::LIMITS.restart_scan_bytes;

/// The Hamamatsu NDPI driver.
pub struct Hamamatsu;

impl FormatDriver for Hamamatsu {
    fn name(&self) -> &'static str {
        "hamamatsu"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        if let Err(e) = probe.tiff {
            // Not TIFF: a VMS/VMU key file, or the TIFF parser's reason (the usual answer).
            return vms::key_file(probe.src)?.map(|_| ()).ok_or_else(|| e.message());
        }
        let tf = probe.tiff.map_err(|e| e.message())?;
        match tf.ifds[0].get(NDPI_FORMAT_FLAG) {
            Some(e) if e.count > 0 => Ok(()),
            _ => Err(format!("IFD 0 has no NDPI tag {NDPI_FORMAT_FLAG}")),
        }
    }

    fn resolve_dir(&self, dir: &Path) -> Result<Option<PathBuf>> {
        vms::resolve_dir(dir)
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        if probe.tiff.is_err() {
            let (bytes, kf) = vms::key_file(src).map_err(|m| Error::format(at, m))?.ok_or_else(|| Error::format(at, "not a VMS/VMU key file"))?;
            return vms::open(probe, bytes, &kf);
        }
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let mut stored: Vec<StoredLevel> = Vec::new();
        let mut min_width = u64::MAX;
        let mut min_width_dir = 0usize;
        let mut associated = BTreeMap::new();
        for dir in 0..tf.ifds.len() {
            let dat = at.clone().with_image(ImageRef::Level(stored.len()));
            let r = tf.reader(src, &dat, dir);
            let need = |tag: u16, name: &str| r.uint(tag)?.ok_or_else(|| Error::format(&dat, format!("IFD {dir}: no {name}")));
            let width = need(tags::IMAGE_WIDTH, "ImageWidth")?;
            let height = need(tags::IMAGE_LENGTH, "ImageLength")?;
            let rps = need(tags::ROWS_PER_STRIP, "RowsPerStrip")?;
            let start = tf.fix_offset_ndpi(dir, need(tags::STRIP_OFFSETS, "StripOffsets")?);
            let num_bytes = need(tags::STRIP_BYTE_COUNTS, "StripByteCounts")?;
            let lens = float_tag(&r, NDPI_SOURCELENS)?.ok_or_else(|| Error::format(&dat, format!("IFD {dir}: no floating-point SourceLens (tag {NDPI_SOURCELENS})")))?;
            if height != rps {
                return Err(Error::format(&dat, format!("IFD {dir}: unexpected RowsPerStrip {rps} (height {height})")));
            }
            if start.checked_add(num_bytes).is_none_or(|e| e > src.len()) {
                return Err(Error::format(&dat, format!("IFD {dir}: strip at {start} (+{num_bytes} bytes) lies past the end of the file ({} bytes)", src.len())));
            }
            if lens > 0.0 {
                let focal = sint_tag(&r, NDPI_FOCAL_PLANE)?.ok_or_else(|| Error::format(&dat, format!("IFD {dir}: no signed FocalPlane (tag {NDPI_FOCAL_PLANE})")))?;
                if focal != 0 {
                    continue;
                }
                if width >= min_width {
                    return Err(Error::format(&dat, format!("IFD {dir}: unexpected directory layout (levels not in decreasing width)")));
                }
                min_width = width;
                min_width_dir = dir;
                stored.push(stored_level(tf, src, &dat, dir, width, height, start, num_bytes)?);
            } else if lens == -1.0 {
                let mat = at.clone().with_image(ImageRef::Associated("macro".into()));
                associated.insert("macro".to_string(), whole_jpeg_image(src, &mat, SourceId::PRIMARY, start, num_bytes)?);
            }
        }
        if stored.is_empty() {
            return Err(Error::format(at, "couldn't find any pyramid levels"));
        }
        let levels = synthesise_levels(&stored);
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        let (mpp, objective_power) = ndpi_properties(tf, src, at, &mut properties)?;
        let quickhash = quickhash_input(tf, src, at, 0)?;
        let r = tf.reader(src, at, min_width_dir);
        let offs = r.uints(tags::STRIP_OFFSETS)?.unwrap_or_default();
        let counts = r.uints(tags::STRIP_BYTE_COUNTS)?.unwrap_or_default();
        if offs.len() != counts.len() {
            return Err(Error::format(at, format!("IFD {min_width_dir}: {} strip offsets and {} byte counts", offs.len(), counts.len())));
        }
        Ok(SlideLayout {
            comment: properties.get("tiff.ImageDescription").cloned(),
            levels,
            associated,
            properties,
            mpp,
            objective_power,
            quickhash: Some(quickhash),
            // OpenSlide hashes the narrowest stored IFD's strips (not a synthesised level's).
            quickhash_chunks: Some(offs.iter().zip(&counts).map(|(&o, &n)| TileLoc::primary(o, n)).collect()),
            ..SlideLayout::default()
        })
    }
}

/// A stored pyramid level: its full-scale image and the facts needed to derive scaled ones.
struct StoredLevel {
    dir: usize,
    image: ImageIndex,
    /// Tile grid actually covered by restart intervals (OpenSlide's floor division).
    tiles: (u64, u64),
    /// Full-scale tile size.
    tile: (u32, u32),
    /// SOI ... SOS with the SOF set to the tile size.
    header: Arc<[u8]>,
    /// Tile byte ranges, row-major over `tiles`.
    locs: Vec<TileLoc>,
}

/// A floating-point tag (FLOAT, DOUBLE, RATIONAL, SRATIONAL), as OpenSlide's
/// `_openslide_tifflike_get_float`: other types have no float value.
fn float_tag(r: &IfdReader<'_>, tag: u16) -> Result<Option<f64>> {
    match r.ifd.get(tag) {
        Some(e) if matches!(e.field_type, 5 | 10 | 11 | 12) => r.float(tag),
        _ => Ok(None),
    }
}

/// A signed-integer tag (SBYTE, SSHORT, SLONG, SLONG8), as `_openslide_tifflike_get_sint`.
fn sint_tag(r: &IfdReader<'_>, tag: u16) -> Result<Option<i64>> {
    match r.ifd.get(tag) {
        Some(e) if matches!(e.field_type, 6 | 8 | 9 | 17) => Ok(r.float(tag)?.map(|v| v as i64)),
        _ => Ok(None),
    }
}

/// A tag's bytes as a string up to the first NUL (OpenSlide's `get_buffer`: ASCII, BYTE and
/// UNDEFINED values).
fn buffer_tag(r: &IfdReader<'_>, tag: u16) -> Result<Option<String>> {
    match r.ifd.get(tag) {
        Some(e) if e.count > 0 && matches!(e.field_type, 1 | 2 | 7) => {
            let raw = r.raw(tag)?.unwrap_or_default();
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            Ok(Some(String::from_utf8_lossy(&raw[..end]).into_owned()))
        }
        _ => Ok(None),
    }
}

/// mpp (x, y) in µm and objective power, when known.
type Optics = (Option<(f64, f64)>, Option<f64>);

/// The `hamamatsu.*` properties of IFD 0, mpp and objective power (OpenSlide's `ndpi_set_props`).
fn ndpi_properties(tf: &TiffFile, src: &dyn ByteSource, at: &Location, p: &mut BTreeMap<String, String>) -> Result<Optics> {
    let r = tf.reader(src, at, 0);
    let unit = r.uint(tags::RESOLUTION_UNIT)?.unwrap_or(2);
    let res = |tag| -> Result<Option<f64>> { Ok(if unit == 3 { float_tag(&r, tag)?.map(|v| 10_000.0 / v) } else { None }) };
    let mpp = match (res(tags::X_RESOLUTION)?, res(tags::Y_RESOLUTION)?) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    let lens = float_tag(&r, NDPI_SOURCELENS)?;
    if let Some(l) = lens {
        p.insert("hamamatsu.SourceLens".into(), format_double(l));
    }
    for (tag, name) in [(NDPI_XOFFSET, "hamamatsu.XOffsetFromSlideCentre"), (NDPI_YOFFSET, "hamamatsu.YOffsetFromSlideCentre")] {
        if let Some(v) = sint_tag(&r, tag)? {
            p.insert(name.into(), v.to_string());
        }
    }
    if let Some(v) = buffer_tag(&r, NDPI_REFERENCE)? {
        p.insert("hamamatsu.Reference".into(), v);
    }
    if let Some(map) = buffer_tag(&r, NDPI_PROPERTY_MAP)? {
        for record in map.split("\r\n") {
            if let Some((k, v)) = record.split_once('=') {
                if !k.is_empty() && !v.is_empty() {
                    p.insert(format!("hamamatsu.{k}"), v.to_string());
                }
            }
        }
    }
    Ok((mpp, lens))
}

/// The level stored in IFD `dir`: its JPEG header, tile size and every tile's byte range.
#[allow(clippy::too_many_arguments)]
fn stored_level(tf: &TiffFile, src: &dyn ByteSource, at: &Location, dir: usize, width: u64, height: u64, start: u64, num_bytes: u64) -> Result<StoredLevel> {
    if width == 0 || height == 0 || width > MAX_IMAGE_EDGE || height > MAX_IMAGE_EDGE {
        return Err(Error::limits(at, format!("IFD {dir}: level of {width}x{height} pixels")));
    }
    let head = read_at(src, at, start, num_bytes.min(MAX_HEADER_BYTES))?;
    let l = scan_header(&head).map_err(|m| Error::format(at, format!("IFD {dir}: can't validate JPEG: {m}")))?;
    if l.components != 3 {
        return Err(Error::format(at, format!("IFD {dir}: JPEG color components != 3 ({})", l.components)));
    }
    let dims_valid = width <= JPEG_MAX_DIMENSION && height <= JPEG_MAX_DIMENSION;
    let (jw, jh) = if dims_valid { (l.width as u64, l.height as u64) } else { (width, height) };
    let (tw, th) = if l.restart_interval == 0 {
        (width, height) // not tiled: the whole strip is one tile
    } else {
        let (mw, mh) = l.mcu_size();
        let mcus_per_row = jw.div_ceil(mw as u64);
        let ri = l.restart_interval as u64;
        if ri > mcus_per_row {
            return Err(Error::format(at, format!("IFD {dir}: restart interval {ri} greater than the {mcus_per_row} MCUs per row")));
        }
        if mcus_per_row % ri != 0 {
            return Err(Error::format(at, format!("IFD {dir}: inconsistent restart marker spacing within row ({mcus_per_row} MCUs, interval {ri})")));
        }
        (mw as u64 * ri, mh as u64)
    };
    if l.restart_interval != 0 && (width, height) != (jw, jh) {
        return Err(Error::format(at, format!("IFD {dir}: JPEG dimension mismatch: expected {width}x{height}, found {jw}x{jh}")));
    }
    if l.restart_interval == 0 && dims_valid && (width, height) != (l.width as u64, l.height as u64) {
        return Err(Error::format(at, format!("IFD {dir}: JPEG dimension mismatch: expected {width}x{height}, found {}x{}", l.width, l.height)));
    }
    if tw > MAX_TILE_EDGE || th > MAX_TILE_EDGE {
        return Err(Error::limits(at, format!("IFD {dir}: tile (restart interval) of {tw}x{th} pixels exceeds {MAX_TILE_EDGE} per edge")));
    }
    let tiles = (width / tw, height / th);
    let count = tiles.0 * tiles.1;
    if count == 0 {
        return Err(Error::format(at, format!("IFD {dir}: no whole {tw}x{th} tile in a {width}x{height} level")));
    }
    if count > num_bytes {
        return Err(Error::limits(at, format!("IFD {dir}: {count} tiles cannot fit in a strip of {num_bytes} bytes")));
    }
    let data_start = start + l.header_len as u64;
    let end = start + num_bytes;
    let starts = mcu_starts(tf, src, at, dir, count, start, data_start, end)?;
    let mut locs: Vec<TileLoc> = (0..count as usize)
        .map(|k| {
            let next = starts.get(k + 1).copied().unwrap_or(end);
            TileLoc::primary(starts[k], next - starts[k])
        })
        .collect();
    if tiles.0 * tw < width || tiles.1 * th < height {
        // The strip holds restart intervals beyond the grid (a partial last MCU row or column):
        // OpenSlide's last tile runs to the end of the strip, and its decoder stops after one
        // interval. A decoder that reads to EOI would meet the extra intervals, so the last
        // tile ends at its own restart marker.
        let last = locs.last_mut().expect("count > 0");
        if last.length > MAX_SCANNED_STRIP_BYTES {
            return Err(Error::limits(at, format!("IFD {dir}: last tile of {} bytes to scan for its restart marker", last.length)));
        }
        let bytes = read_at(src, at, last.offset, last.length)?;
        if let Some(i) = bytes.windows(2).position(|w| w[0] == 0xFF && (0xD0..=0xD7).contains(&w[1])) {
            last.length = i as u64 + 2;
        }
    }
    let mut header = head[..l.header_len].to_vec();
    patch_sof_size(&mut header, l.sof_pos, tw as u32, th as u32).map_err(|m| Error::format(at, format!("IFD {dir}: {m}")))?;
    let header: Arc<[u8]> = Arc::from(header);
    let tile = (tw as u32, th as u32);
    let image = level_image(tf, src, at, dir, (width, height), tile, tiles, &header, &locs, 1)?;
    Ok(StoredLevel { dir, image, tiles, tile, header, locs })
}

/// Where each tile's data starts: from tag 65426 when it has one value per tile, else by
/// scanning the strip for restart markers (see the module docs). Starts must increase and lie
/// inside the strip's data.
#[allow(clippy::too_many_arguments)]
fn mcu_starts(tf: &TiffFile, src: &dyn ByteSource, at: &Location, dir: usize, count: u64, start: u64, data_start: u64, end: u64) -> Result<Vec<u64>> {
    let r = tf.reader(src, at, dir);
    let tagged = match r.ifd.get(NDPI_MCU_STARTS) {
        Some(e) if count > 1 && e.count == count => Some(r.uints(NDPI_MCU_STARTS)?.unwrap_or_default()),
        _ => None,
    };
    let mut starts = match tagged {
        Some(v) => v.into_iter().map(|o| start.saturating_add(o)).collect::<Vec<_>>(),
        None if count == 1 => vec![data_start],
        None => scan_restart_markers(src, at, dir, count, data_start, end)?,
    };
    // The first tile starts after the header whatever the tag says (OpenSlide).
    starts[0] = data_start;
    for k in 1..starts.len() {
        if starts[k] <= starts[k - 1] || starts[k] >= end {
            return Err(Error::format(
                at,
                format!("IFD {dir}: MCU start {k} at {} is outside the strip ({data_start}..{end}) or not after the previous one", starts[k]),
            ));
        }
    }
    Ok(starts)
}

/// Find the first `count - 1` restart markers of the strip's data (`data_start..end`): tile
/// `k + 1` starts just after the `k`-th. Reads the strip once, in 4 MiB pieces.
fn scan_restart_markers(src: &dyn ByteSource, at: &Location, dir: usize, count: u64, data_start: u64, end: u64) -> Result<Vec<u64>> {
    let len = end - data_start;
    if len > MAX_SCANNED_STRIP_BYTES {
        return Err(Error::limits(
            at,
            format!("IFD {dir}: no usable MCU starts (tag {NDPI_MCU_STARTS}) and a strip of {len} bytes to scan for restart markers (at most {MAX_SCANNED_STRIP_BYTES})"),
        ));
    }
    let mut starts = Vec::with_capacity(count as usize);
    starts.push(data_start);
    const PIECE: u64 = 4 << 20;
    let mut pos = data_start;
    let mut last_ff = false;
    while pos < end && (starts.len() as u64) < count {
        let n = PIECE.min(end - pos);
        let buf = read_at(src, at, pos, n)?;
        for (i, &b) in buf.iter().enumerate() {
            if last_ff && (0xD0..=0xD7).contains(&b) {
                starts.push(pos + i as u64 + 1);
                if starts.len() as u64 == count {
                    break;
                }
            }
            last_ff = b == 0xFF;
        }
        pos += n;
    }
    if (starts.len() as u64) < count {
        return Err(Error::format(at, format!("IFD {dir}: {} restart intervals found, {count} tiles expected", starts.len())));
    }
    Ok(starts)
}

/// The [`ImageIndex`] of a level of `size` pixels in `tile`-sized tiles, of which `tiles`
/// (cols, rows) hold the `locs` (row-major); the other cells of the `ceil` grid are missing.
#[allow(clippy::too_many_arguments)]
fn level_image(tf: &TiffFile, src: &dyn ByteSource, at: &Location, dir: usize, size: (u64, u64), tile: (u32, u32), tiles: (u64, u64), header: &Arc<[u8]>, locs: &[TileLoc], scale: u8) -> Result<ImageIndex> {
    let r = tf.reader(src, at, dir);
    let photometric = if r.uint(tags::PHOTOMETRIC)? == Some(2) { Photometric::Rgb } else { Photometric::YCbCr };
    let ycbcr_subsampling = match r.uints(tags::YCBCR_SUBSAMPLING)? {
        Some(v) if v.len() >= 2 => (v[0] as u16, v[1] as u16),
        _ => (2, 2),
    };
    let (cols, rows) = (size.0.div_ceil(tile.0 as u64), size.1.div_ceil(tile.1 as u64));
    let mut cells = Vec::with_capacity((cols * rows) as usize);
    for row in 0..rows {
        for col in 0..cols {
            cells.push(if col < tiles.0 && row < tiles.1 { locs[(row * tiles.0 + col) as usize] } else { TileLoc::primary(0, 0) });
        }
    }
    let grid = Grid::regular(cols, rows, 1, cells).ok_or_else(|| Error::format(at, "tile grid does not match the tile count"))?;
    Ok(ImageIndex {
        width: size.0,
        height: size.1,
        tile_width: tile.0,
        tile_height: tile.1,
        tiled: true,
        codec: Arc::new(CodecInfo {
            compression: Compression::Jpeg,
            compression_tag: 7,
            photometric,
            samples_per_pixel: 3,
            sample_bits: SampleBits::U8,
            alpha: Alpha::None,
            predictor: 1,
            planar_separate: false,
            stream: TileStream::NdpiRestartRun { header: header.clone(), scale_denom: scale },
            ycbcr_subsampling,
        }),
        grid,
    })
}

/// The levels as OpenSlide synthesises them: each stored level and its 1/2, 1/4, 1/8 DCT-scaled
/// versions (when the tile size divides), keyed by width (later wins), widest first.
fn synthesise_levels(stored: &[StoredLevel]) -> Vec<LayoutLevel> {
    let mut by_width: BTreeMap<u64, LayoutLevel> = BTreeMap::new();
    for s in stored {
        by_width.insert(s.image.width, LayoutLevel { image: s.image.clone(), origin: format!("IFD {}", s.dir) });
        for d in [2u32, 4, 8] {
            if s.tile.0 % d != 0 || s.tile.1 % d != 0 {
                continue;
            }
            let size = (s.image.width / d as u64, s.image.height / d as u64);
            let tile = (s.tile.0 / d, s.tile.1 / d);
            if size.0 == 0 || size.1 == 0 {
                continue;
            }
            let mut image = s.image.clone();
            let (cols, rows) = (size.0.div_ceil(tile.0 as u64), size.1.div_ceil(tile.1 as u64));
            let mut cells = Vec::with_capacity((cols * rows) as usize);
            for row in 0..rows {
                for col in 0..cols {
                    cells.push(if col < s.tiles.0 && row < s.tiles.1 { s.locs[(row * s.tiles.0 + col) as usize] } else { TileLoc::primary(0, 0) });
                }
            }
            let Some(grid) = Grid::regular(cols, rows, 1, cells) else { continue };
            let mut codec = (*image.codec).clone();
            codec.stream = TileStream::NdpiRestartRun { header: s.header.clone(), scale_denom: d as u8 };
            image = ImageIndex { width: size.0, height: size.1, tile_width: tile.0, tile_height: tile.1, codec: Arc::new(codec), grid, ..image };
            by_width.insert(size.0, LayoutLevel { image, origin: format!("IFD {} at 1/{d}", s.dir) });
        }
    }
    by_width.into_values().rev().collect()
}

/// A whole JPEG stored at `start` of `src` (source `source`; the macro image of NDPI and VMS,
/// Trestle's `.Full` file): one tile, the stream decoded as stored (an NDPI run with an empty header is the stored bytes verbatim,
/// ending in EOI).
pub(crate) fn whole_jpeg_image(src: &dyn ByteSource, at: &Location, source: SourceId, start: u64, num_bytes: u64) -> Result<ImageIndex> {
    let head = read_at(src, at, start, num_bytes.min(MAX_HEADER_BYTES))?;
    let l = scan_header(&head).map_err(|m| Error::format(at, format!("macro image: {m}")))?;
    let (w, h) = (l.width as u64, l.height as u64);
    if w == 0 || h == 0 {
        return Err(Error::format(at, format!("macro image of {w}x{h} pixels")));
    }
    if w > MAX_TILE_EDGE || h > MAX_TILE_EDGE {
        return Err(Error::limits(at, format!("macro image of {w}x{h} pixels exceeds {MAX_TILE_EDGE} per edge")));
    }
    let grid = Grid::regular(1, 1, 1, vec![TileLoc { source, offset: start, length: num_bytes }]).ok_or_else(|| Error::format(at, "macro grid"))?;
    Ok(ImageIndex {
        width: w,
        height: h,
        tile_width: w as u32,
        tile_height: h as u32,
        tiled: false,
        codec: Arc::new(CodecInfo {
            compression: Compression::Jpeg,
            compression_tag: 7,
            photometric: if l.components == 1 { Photometric::MinIsBlack } else { Photometric::YCbCr },
            samples_per_pixel: if l.components == 1 { 1 } else { 3 },
            sample_bits: SampleBits::U8,
            alpha: Alpha::None,
            predictor: 1,
            planar_separate: false,
            stream: TileStream::NdpiRestartRun { header: Arc::from(Vec::new()), scale_denom: 1 },
            ycbcr_subsampling: (2, 2),
        }),
        grid,
    })
}
