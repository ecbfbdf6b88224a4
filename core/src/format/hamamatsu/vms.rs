//! Hamamatsu VMS: a key file (`.vms`, INI-like text) naming a grid of JPEG image files, each
//! one JPEG with restart markers whose restart intervals are the tiles (as an NDPI level).
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-hamamatsu.c` (VMS part) and
//! openslide.org/formats/hamamatsu/; the slides of `scripts/vendor_slides/vms.py`, checked
//! against OpenSlide, exercise them:
//! * detection by content: not TIFF, at most [`super::vms_key::MAX_KEY_FILE_BYTES`], parses as a GLib key file
//!   ([`KeyFile`]), with a `[Virtual Microscope Specimen]` group whose `NoJpegColumns` and
//!   `NoJpegRows` are integers ≥ 1, or an `[Uncompressed Virtual Microscope Specimen]` (VMU)
//!   group. VMU slides (raw 36-bit NGR files) open through [`super::vmu`].
//! * files, relative to the key file's folder (every one must lie inside it: no `..`, no
//!   absolute path, no link leading out — a slidestream rule): `MapFile` (required, non-empty),
//!   `ImageFile` keys: `ImageFile` is column 0, row 0; `ImageFile(x,y)` column x, row y;
//!   `ImageFile(z)` and `ImageFile(z,x,y)` name focal layer z, and layers other than 0 are
//!   skipped; the numbers parse as C `strtoll` (leading digits, else 0). Every grid cell needs
//!   exactly one file; `MacroImage` (optional) is the associated image `macro` (a whole JPEG).
//!   File names are read as `g_key_file_get_string` reads them (escapes `\s \n \t \r \\`).
//! * each image file (and the map file) is one JPEG from byte 0: 3 components, a restart
//!   interval (DRI) that divides the MCUs per row (MCU: 8×8 for a one-component scan, else the
//!   largest sampling factors × 8); its tiles are `MCU width × interval` by `MCU height`,
//!   `floor(width / tile width) × floor(height / tile height)` of them. Every image file has
//!   image file 0's tile size, and its tile columns (rows) unless it is in the last grid column
//!   (row). OpenSlide reads a tile from the restart interval's data up to the next tile's start
//!   (the last tile: up to the end of the file).
//! * levels: the image grid (size: the sum of the widths of row 0's files by the sum of the
//!   heights of column 0's files; tile `(c, r)` is tile `(c mod A, r mod D)` of file
//!   `(c / A, r / D)`, `A × D` being file 0's tiles), the map file (one file) as a further
//!   level, and for each the levels at 1/2, 1/4 and 1/8 (JPEG DCT scaling) when the tile size
//!   divides; keyed by width (a later one replaces an earlier one), widest first. Pixels of a
//!   level outside its tiles read as transparent.
//! * properties: `hamamatsu.KEY` for every key of the group (raw values); `openslide.comment`
//!   from image file 0's first COM segment (up to a NUL); `openslide.objective-power` from
//!   `SourceLens`; `openslide.mpp-x/-y` = `PhysicalWidth/Height` (integer nm, > 0) / (1000 ×
//!   level-0 width/height).
//! * quickhash: SHA-256 of the key file's bytes, then of the whole map file.
//!
//! Differences from OpenSlide, by design: OpenSlide finds restart markers lazily (a background
//! thread) and takes the `OptimisationFile`'s row starts (the first 8 bytes, little-endian, of
//! 40-byte records) on trust when a restart marker precedes them. slidestream scans each image
//! file once at open (files over [`MAX_SCANNED_FILE_BYTES`] are refused as `Limits`); that
//! scan finds every tile start, which the hints (row starts only) could not spare, so the
//! optimisation file is never read: a bogus one cannot misplace tiles. Image files whose JPEG
//! headers differ beyond their SOF size and COM segments (different tables) are refused as
//! `Unsupported` (a level has one header). `mpp` is set only when both physical sizes are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::mirax::ini::{parse_int, KeyFile};
use super::vms_key::{image_key, int_or_zero, string, GROUP_VMS};
pub(super) use super::vms_key::{key_file, resolve_dir};
use super::super::{member_path, parse_double, LayoutLevel, Probe, QuickhashInput, SiblingFiles, SlideLayout, MAX_TILE_EDGE};
use crate::codec::stream::{patch_sof_size, scan_header, JpegLayout};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Grid, ImageIndex, Photometric, SampleBits, SourceId, TileLoc, TileStream};
use crate::io::ByteSource;
use crate::tiff::read_at;

/// Most image files in a grid (`NoJpegColumns × NoJpegRows`): each is opened at open.
pub const MAX_IMAGE_FILES: u64 = crate::limits::LIMITS.vms_image_files;
/// Largest image file scanned for restart markers at open.
pub const MAX_SCANNED_FILE_BYTES: u64 = crate::limits::LIMITS.restart_scan_bytes;
/// Most bytes of a JPEG header (markers up to SOS) read at open.
const MAX_HEADER_BYTES: u64 = crate::limits::LIMITS.jpeg_header_bytes;
/// Piece size of the map file's quickhash chunks (the hash reads a chunk at a time).
const HASH_CHUNK: u64 = 4 << 20;

/// One JPEG file of the slide, as validated at open.
struct Jpeg {
    path: PathBuf,
    source: SourceId,
    width: u64,
    height: u64,
    tile: (u32, u32),
    tiles: (u64, u64),
    /// SOI ... SOS without COM segments, the SOF set to the tile size.
    header: Vec<u8>,
    layout: JpegLayout,
    /// The first COM segment's text (up to a NUL).
    comment: Option<String>,
    /// Byte range of every tile, row-major over `tiles`.
    locs: Vec<TileLoc>,
    /// File length in bytes.
    len: u64,
}

/// Open the VMS slide whose key file `probe.src` holds (`bytes`, parsed as `kf`).
pub(super) fn open(probe: &Probe<'_>, bytes: Vec<u8>, kf: &KeyFile) -> Result<SlideLayout> {
    let at = probe.at;
    if !kf.has_group(GROUP_VMS) {
        return super::vmu::open(probe, bytes, kf);
    }
    let files = probe.files.ok_or_else(|| Error::unsupported(at, "a Hamamatsu VMS slide read from memory (its image files beside the key file are needed)"))?;
    let dir = match files.path().parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (cols, rows) = (int_or_zero(kf, "NoJpegColumns"), int_or_zero(kf, "NoJpegRows"));
    if cols < 1 || rows < 1 {
        return Err(Error::format(at, "File missing columns or rows"));
    }
    let (cols, rows) = (cols as u64, rows as u64);
    if cols * rows > MAX_IMAGE_FILES {
        return Err(Error::limits(at, format!("a grid of {cols}x{rows} image files (NoJpegColumns x NoJpegRows; at most {MAX_IMAGE_FILES} files)")));
    }
    let entry = |key: &str| format!("[{GROUP_VMS}] {key}");
    let map_name = string(kf, "MapFile").filter(|m| !m.is_empty()).ok_or_else(|| Error::format(at, "Can't read map file (no MapFile key)"))?;
    let map_path = member_path(files, &dir, &entry("MapFile"), &map_name, at)?;
    let mut names: Vec<Option<PathBuf>> = vec![None; (cols * rows) as usize];
    for (group, key, _) in kf.entries() {
        let Some(suffix) = key.strip_prefix("ImageFile").filter(|_| group == GROUP_VMS) else {
            continue;
        };
        let (layer, col, row) = image_key(suffix).map_err(|n| Error::format(at, format!("Unknown number of image dimensions: {n} ({key})")))?;
        if layer != 0 {
            continue;
        }
        if col < 0 || row < 0 || col as u64 >= cols || row as u64 >= rows {
            return Err(Error::format(at, format!("Invalid row or column in Hamamatsu file ({col},{row}): {key}")));
        }
        let i = (row as u64 * cols + col as u64) as usize;
        if names[i].is_some() {
            return Err(Error::format(at, format!("Duplicate image for ({col},{row}): {key}")));
        }
        let name = string(kf, key).ok_or_else(|| Error::format(at, format!("{key} is not a valid key-file string")))?;
        names[i] = Some(member_path(files, &dir, &entry(key), &name, at)?);
    }
    let mut paths = Vec::with_capacity(names.len() + 2);
    for (i, n) in names.into_iter().enumerate() {
        let n = n.ok_or_else(|| Error::format(at, format!("Can't read image filename {i} (no ImageFile for column {}, row {})", i as u64 % cols, i as u64 / cols)))?;
        paths.push(n);
    }
    paths.push(map_path);
    let macro_path = match string(kf, "MacroImage").filter(|m| !m.is_empty()) {
        Some(m) => Some(member_path(files, &dir, &entry("MacroImage"), &m, at)?),
        None => None,
    };

    // Every JPEG: header, tile geometry, tile byte ranges.
    let n = paths.len() - 1;
    let mut jpegs = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        jpegs.push(read_jpeg(files, p, SourceId(i as u32 + 1), i == 0)?);
    }
    let (images, map) = jpegs.split_at(n);
    let base = grid_level(images, cols, rows)?;
    let map_level = grid_level(map, 1, 1)?;
    let levels = synthesise(&[(base, "image files"), (map_level, "map file")]);

    let mut associated = BTreeMap::new();
    let mut extra_sources = paths.clone();
    if let Some(mp) = macro_path {
        let src = files.open(&mp)?;
        let mat = Location::file(&mp).with_image(ImageRef::Associated("macro".into()));
        let source = SourceId(extra_sources.len() as u32 + 1);
        associated.insert("macro".to_string(), super::whole_jpeg_image(src.as_ref(), &mat, source, 0, src.len())?);
        extra_sources.push(mp);
    }

    let mut properties = BTreeMap::new();
    for (group, key, value) in kf.entries() {
        if group == GROUP_VMS && !key.is_empty() {
            properties.insert(format!("hamamatsu.{key}"), value.to_string());
        }
    }
    let (w0, h0) = (levels[0].image.width, levels[0].image.height);
    let mpp_of = |key: &str, px: u64| kf.value(GROUP_VMS, key).and_then(parse_int).filter(|&nm| nm > 0).map(|nm| nm as f64 / (1000.0 * px as f64));
    let mpp = match (mpp_of("PhysicalWidth", w0), mpp_of("PhysicalHeight", h0)) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    let objective_power = kf.value(GROUP_VMS, "SourceLens").and_then(parse_double);
    let map_j = &jpegs[n];
    let map_len = map_j.len;
    let chunks = (0..map_len.div_ceil(HASH_CHUNK)).map(|k| TileLoc { source: map_j.source, offset: k * HASH_CHUNK, length: HASH_CHUNK.min(map_len - k * HASH_CHUNK) }).collect();
    Ok(SlideLayout {
        extra_sources,
        comment: jpegs[0].comment.clone(),
        levels,
        associated,
        properties,
        mpp,
        objective_power,
        quickhash: Some(QuickhashInput { prefix: bytes, lowest_level_tiles: true, strings: Vec::new(), uncapped: true, suffix: Vec::new() }),
        quickhash_chunks: Some(chunks),
        ..SlideLayout::default()
    })
}

/// Validate the JPEG at `path` (see the module docs) and find its tiles.
fn read_jpeg(files: &dyn SiblingFiles, path: &Path, source: SourceId, want_comment: bool) -> Result<Jpeg> {
    let at = Location::file(path);
    let src = files.open(path)?;
    let len = src.len();
    let head = read_at(src.as_ref(), &at, 0, len.min(MAX_HEADER_BYTES))?;
    let bad = |m: String| Error::format(&at, format!("Can't validate JPEG: {m}"));
    let l = scan_header(&head).map_err(bad)?;
    if l.components != 3 {
        return Err(bad(format!("JPEG color components != 3 ({})", l.components)));
    }
    if l.restart_interval == 0 {
        return Err(bad("No restart markers".into()));
    }
    let (width, height) = (l.width as u64, l.height as u64);
    if width == 0 || height == 0 {
        return Err(bad(format!("JPEG size {width}x{height}")));
    }
    let (mw, mh) = l.mcu_size();
    let mcus_per_row = width.div_ceil(mw as u64);
    let ri = l.restart_interval as u64;
    if ri > mcus_per_row {
        return Err(bad(format!("Restart interval {ri} greater than the {mcus_per_row} MCUs per row")));
    }
    if mcus_per_row % ri != 0 {
        return Err(bad(format!("Inconsistent restart marker spacing within row ({mcus_per_row} MCUs, interval {ri})")));
    }
    let (tw, th) = (mw as u64 * ri, mh as u64);
    if tw > MAX_TILE_EDGE || th > MAX_TILE_EDGE {
        return Err(Error::limits(&at, format!("tile (restart interval) of {tw}x{th} pixels exceeds {MAX_TILE_EDGE} per edge")));
    }
    let tiles = (width / tw, height / th);
    let count = tiles.0 * tiles.1;
    if count > len {
        return Err(Error::format(&at, format!("{count} tiles cannot fit in a file of {len} bytes")));
    }
    // Segments up to SOS, without COM (which only an image file's comment reads).
    let mut header = head[..2].to_vec();
    let mut comment = None;
    let mut i = 2;
    while i < l.header_len {
        if head[i + 1] == 0xFF || head[i + 1] == 0xD8 {
            let step = if head[i + 1] == 0xFF { 1 } else { 2 };
            header.extend_from_slice(&head[i..i + step]);
            i += step;
            continue;
        }
        let end = i + 2 + u16::from_be_bytes([head[i + 2], head[i + 3]]) as usize;
        if head[i + 1] == 0xFE {
            if want_comment && comment.is_none() {
                let body = &head[i + 4..end];
                let text = &body[..body.iter().position(|&b| b == 0).unwrap_or(body.len())];
                comment = Some(String::from_utf8_lossy(text).into_owned());
            }
        } else {
            header.extend_from_slice(&head[i..end]);
        }
        i = end;
    }
    let hl = scan_header(&header).map_err(bad)?;
    patch_sof_size(&mut header, hl.sof_pos, tw as u32, th as u32).map_err(bad)?;
    let locs = if count == 0 { Vec::new() } else { tile_locs(src.as_ref(), &at, source, count, l.header_len as u64, len)? };
    Ok(Jpeg { path: path.to_path_buf(), source, width, height, tile: (tw as u32, th as u32), tiles, header, layout: l, comment, locs, len })
}

/// Every tile's byte range: tile 0 starts at `data_start`, tile `k + 1` just after the `k`-th
/// restart marker; a tile ends just after the marker that ends it (the last one: at the
/// `count`-th marker, when there is one, else at the end of the file). One read of the file,
/// in 4 MiB pieces.
fn tile_locs(src: &dyn ByteSource, at: &Location, source: SourceId, count: u64, data_start: u64, end: u64) -> Result<Vec<TileLoc>> {
    if end - data_start > MAX_SCANNED_FILE_BYTES {
        return Err(Error::limits(at, format!("an image file of {} bytes to scan for restart markers (at most {MAX_SCANNED_FILE_BYTES})", end - data_start)));
    }
    let mut starts = Vec::with_capacity(count as usize + 1);
    starts.push(data_start);
    const PIECE: u64 = 4 << 20;
    let (mut pos, mut last_ff) = (data_start, false);
    'scan: while pos < end {
        let n = PIECE.min(end - pos);
        let buf = read_at(src, at, pos, n)?;
        for (i, &b) in buf.iter().enumerate() {
            if last_ff && (0xD0..=0xD7).contains(&b) {
                starts.push(pos + i as u64 + 1);
                if starts.len() as u64 > count {
                    break 'scan;
                }
            }
            last_ff = b == 0xFF;
        }
        pos += n;
    }
    if (starts.len() as u64) < count {
        return Err(Error::format(at, format!("{} restart intervals found, {count} tiles expected (truncated or damaged JPEG)", starts.len())));
    }
    if starts.len() as u64 == count {
        starts.push(end);
    }
    Ok(starts.windows(2).map(|w| TileLoc { source, offset: w[0], length: w[1] - w[0] }).collect())
}

/// A stored level of `cols × rows` JPEG files (row-major), as OpenSlide assembles it.
struct Stored {
    image: ImageIndex,
    /// Tile columns and rows holding tiles.
    tiles: (u64, u64),
    tile: (u32, u32),
    header: Arc<[u8]>,
    /// Row-major over `tiles`.
    locs: Vec<TileLoc>,
}

fn grid_level(jpegs: &[Jpeg], cols: u64, rows: u64) -> Result<Stored> {
    let j0 = &jpegs[0];
    let at = Location::file(&j0.path);
    for (i, j) in jpegs.iter().enumerate().skip(1) {
        let (c, r) = (i as u64 % cols, i as u64 / cols);
        let jat = Location::file(&j.path);
        if j.tile != j0.tile {
            return Err(Error::format(&jat, format!("Tile size not consistent: expected {}x{}, found {}x{}", j0.tile.0, j0.tile.1, j.tile.0, j.tile.1)));
        }
        if c != cols - 1 && j.tiles.0 != j0.tiles.0 || c == cols - 1 && j.tiles.0 > j0.tiles.0 {
            return Err(Error::format(&jat, format!("Tiles across not consistent: expected {}, found {}", j0.tiles.0, j.tiles.0)));
        }
        if r != rows - 1 && j.tiles.1 != j0.tiles.1 || r == rows - 1 && j.tiles.1 > j0.tiles.1 {
            return Err(Error::format(&jat, format!("Tiles down not consistent: expected {}, found {}", j0.tiles.1, j.tiles.1)));
        }
        if j.header != j0.header {
            return Err(Error::unsupported(&jat, format!("image files with different JPEG headers (tables) than {}", j0.path.display())));
        }
    }
    let width: u64 = jpegs[..cols as usize].iter().map(|j| j.width).sum();
    let height: u64 = (0..rows).map(|r| jpegs[(r * cols) as usize].height).sum();
    let ta: u64 = jpegs[..cols as usize].iter().map(|j| j.tiles.0).sum();
    let td: u64 = (0..rows).map(|r| jpegs[(r * cols) as usize].tiles.1).sum();
    if width > super::super::MAX_IMAGE_EDGE || height > super::super::MAX_IMAGE_EDGE {
        return Err(Error::limits(&at, format!("level of {width}x{height} pixels")));
    }
    let mut locs = Vec::with_capacity((ta * td) as usize);
    for row in 0..td {
        for col in 0..ta {
            let j = &jpegs[((row / j0.tiles.1) * cols + col / j0.tiles.0) as usize];
            let (lc, lr) = (col % j0.tiles.0, row % j0.tiles.1);
            if lc >= j.tiles.0 || lr >= j.tiles.1 {
                return Err(Error::format(&Location::file(&j.path), format!("no tile ({lc}, {lr}) in a file of {}x{} tiles", j.tiles.0, j.tiles.1)));
            }
            locs.push(j.locs[(lr * j.tiles.0 + lc) as usize]);
        }
    }
    let header: Arc<[u8]> = Arc::from(j0.header.clone());
    let image = level_image(&j0.layout, (width, height), j0.tile, (ta, td), &locs, &header, 1, &at)?;
    Ok(Stored { image, tiles: (ta, td), tile: j0.tile, header, locs })
}

/// The [`ImageIndex`] of a level of `size` pixels in `tile`-sized tiles decoded at
/// 1/`scale`, of which `tiles` (cols, rows) hold the `locs`; other cells are missing.
#[allow(clippy::too_many_arguments)]
fn level_image(l: &JpegLayout, size: (u64, u64), tile: (u32, u32), tiles: (u64, u64), locs: &[TileLoc], header: &Arc<[u8]>, scale: u8, at: &Location) -> Result<ImageIndex> {
    let (cols, rows) = (size.0.div_ceil(tile.0 as u64), size.1.div_ceil(tile.1 as u64));
    let mut cells = Vec::with_capacity((cols * rows) as usize);
    for row in 0..rows {
        for col in 0..cols {
            cells.push(if col < tiles.0 && row < tiles.1 { locs[(row * tiles.0 + col) as usize] } else { TileLoc::default() });
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
            photometric: Photometric::YCbCr,
            samples_per_pixel: 3,
            sample_bits: SampleBits::U8,
            alpha: Alpha::None,
            predictor: 1,
            planar_separate: false,
            stream: TileStream::NdpiRestartRun { header: header.clone(), scale_denom: scale },
            ycbcr_subsampling: (l.max_sampling.0 as u16, l.max_sampling.1 as u16),
        }),
        grid,
    })
}

/// Each stored level and its 1/2, 1/4, 1/8 DCT-scaled versions (when the tile size divides),
/// keyed by width (later wins), widest first (OpenSlide's `create_scaled_jpeg_levels`).
fn synthesise(stored: &[(Stored, &str)]) -> Vec<LayoutLevel> {
    let mut by_width: BTreeMap<u64, LayoutLevel> = BTreeMap::new();
    for (s, what) in stored {
        by_width.insert(s.image.width, LayoutLevel { image: s.image.clone(), origin: what.to_string() });
        for d in [2u32, 4, 8] {
            let (tw, th) = (s.tile.0 / d, s.tile.1 / d);
            let size = (s.image.width / d as u64, s.image.height / d as u64);
            if s.tile.0 % d != 0 || s.tile.1 % d != 0 || size.0 == 0 || size.1 == 0 {
                continue;
            }
            let mut codec = (*s.image.codec).clone();
            codec.stream = TileStream::NdpiRestartRun { header: s.header.clone(), scale_denom: d as u8 };
            let (cols, rows) = (size.0.div_ceil(tw as u64), size.1.div_ceil(th as u64));
            let mut cells = Vec::with_capacity((cols * rows) as usize);
            for row in 0..rows {
                for col in 0..cols {
                    cells.push(if col < s.tiles.0 && row < s.tiles.1 { s.locs[(row * s.tiles.0 + col) as usize] } else { TileLoc::default() });
                }
            }
            let Some(grid) = Grid::regular(cols, rows, 1, cells) else {
                continue;
            };
            let image = ImageIndex { width: size.0, height: size.1, tile_width: tw, tile_height: th, codec: Arc::new(codec), grid, ..s.image.clone() };
            by_width.insert(size.0, LayoutLevel { image, origin: format!("{what} at 1/{d}") });
        }
    }
    by_width.into_values().rev().collect()
}
