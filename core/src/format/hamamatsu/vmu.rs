//! Hamamatsu VMU: a key file (`.vmu`, INI-like text, group `[Uncompressed Virtual Microscope
//! Specimen]`) naming one NGR image file and an NGR map file, raw 16-bit RGB in columns.
//!
//! Facts follow openslide.org/formats/hamamatsu/ and OpenSlide 4.0.1's behaviour, checked on
//! the slides of `scripts/vendor_slides/vmu.py` (`core/tests/vmu.rs`: 0 difference):
//! * the key file as VMS ([`super::vms`]) reads it, in the VMU group: `MapFile` (required),
//!   `ImageFile` (one file: column 0, row 0; layers other than 0 skipped), `MacroImage`
//!   (optional JPEG, associated image `macro`); `BitsPerPixel` must be 36 and `PixelOrder`
//!   `RGB` (OpenSlide 4.0.1 crashes on other values; slidestream refuses them as `Format`).
//! * an NGR file: `GN` at byte 0; little-endian 32-bit signed width (byte 4), height (8),
//!   column width (12) and pixel-data offset (24), each > 0; the width a multiple of the column
//!   width. The pixels are `width / column width` columns one after the other, each `height`
//!   rows of `column width` pixels of three 16-bit little-endian samples (R, G, B).
//! * `read_region` shows bits 4..12 of each sample (`(v >> 4) & 0xFF`), as OpenSlide.
//! * levels: the image file, then the map file (as OpenSlide lists them).
//! * properties: `hamamatsu.KEY` for every key of the group; `openslide.objective-power` from
//!   `SourceLens`; `openslide.mpp-x/-y` = `PhysicalWidth/Height` (nm) / (1000 × level-0
//!   width/height). Quickhash: the key file's bytes, then the whole map file.
//!
//! Tiles are row bands of one column ([`BAND_ROWS`] rows, OpenSlide's tile height),
//! uncompressed; the index is built from the headers alone (the pixel data is not read at open),
//! and a file too short for its header's pixels is a `Format` error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::mirax::ini::{parse_int, KeyFile};
use super::super::{member_path, parse_double, LayoutLevel, Probe, QuickhashInput, SiblingFiles, SlideLayout, MAX_IMAGE_EDGE, MAX_TILE_EDGE};
use super::vms_key::{image_key, string_in, GROUP_VMU};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Grid, ImageIndex, Photometric, SampleBits, SourceId, TileLoc, TileStream};
use crate::tiff::read_at;

/// Rows of a tile (a band of one column): OpenSlide's NGR tile height.
pub const BAND_ROWS: u64 = 64;
/// Bytes of an NGR header read at open.
const HEADER_BYTES: u64 = 28;
/// Bytes of a pixel (three 16-bit samples).
const PIXEL_BYTES: u64 = 6;
/// Piece size of the map file's quickhash chunks.
const HASH_CHUNK: u64 = 4 << 20;

/// Open the VMU slide whose key file `probe.src` holds (`bytes`, parsed as `kf`).
pub(super) fn open(probe: &Probe<'_>, bytes: Vec<u8>, kf: &KeyFile) -> Result<SlideLayout> {
    let at = probe.at;
    let files = probe.files.ok_or_else(|| Error::unsupported(at, "a Hamamatsu VMU slide read from memory (its image files beside the key file are needed)"))?;
    let dir = match files.path().parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let entry = |key: &str| format!("[{GROUP_VMU}] {key}");
    let map_name = string_in(kf, GROUP_VMU, "MapFile").filter(|m| !m.is_empty()).ok_or_else(|| Error::format(at, "Can't read map file (no MapFile key)"))?;
    let map_path = member_path(files, &dir, &entry("MapFile"), &map_name, at)?;
    let mut image: Option<PathBuf> = None;
    for (group, key, _) in kf.entries() {
        let Some(suffix) = key.strip_prefix("ImageFile").filter(|_| group == GROUP_VMU) else {
            continue;
        };
        let (layer, col, row) = image_key(suffix).map_err(|n| Error::format(at, format!("Unknown number of image dimensions: {n} ({key})")))?;
        if layer != 0 {
            continue;
        }
        if col != 0 || row != 0 {
            return Err(Error::format(at, format!("Invalid row or column in Hamamatsu file ({col},{row}): {key}")));
        }
        if image.is_some() {
            return Err(Error::format(at, format!("Duplicate image for (0,0): {key}")));
        }
        let name = string_in(kf, GROUP_VMU, key).ok_or_else(|| Error::format(at, format!("{key} is not a valid key-file string")))?;
        image = Some(member_path(files, &dir, &entry(key), &name, at)?);
    }
    let image = image.ok_or_else(|| Error::format(at, "Can't read image filename 0 (no ImageFile)"))?;
    let macro_path = match string_in(kf, GROUP_VMU, "MacroImage").filter(|m| !m.is_empty()) {
        Some(m) => Some(member_path(files, &dir, &entry("MacroImage"), &m, at)?),
        None => None,
    };
    let bpp = kf.value(GROUP_VMU, "BitsPerPixel").and_then(parse_int).unwrap_or(0);
    if bpp != 36 {
        return Err(Error::format(at, format!("BitsPerPixel must be 36 (found {bpp})")));
    }
    if string_in(kf, GROUP_VMU, "PixelOrder").as_deref() != Some("RGB") {
        return Err(Error::format(at, "PixelOrder must be RGB"));
    }

    let mut levels = Vec::with_capacity(2);
    let mut map_len = 0;
    for (i, (p, what)) in [(&image, "image file"), (&map_path, "map file")].into_iter().enumerate() {
        let (img, len) = read_ngr(files, p, SourceId(i as u32 + 1))?;
        map_len = len;
        levels.push(LayoutLevel { image: img, origin: what.to_string() });
    }
    let mut extra_sources = vec![image, map_path];
    let mut associated = BTreeMap::new();
    if let Some(mp) = macro_path {
        let src = files.open(&mp)?;
        let mat = Location::file(&mp).with_image(ImageRef::Associated("macro".into()));
        let source = SourceId(extra_sources.len() as u32 + 1);
        associated.insert("macro".to_string(), super::whole_jpeg_image(src.as_ref(), &mat, source, 0, src.len())?);
        extra_sources.push(mp);
    }

    let mut properties = BTreeMap::new();
    for (group, key, value) in kf.entries() {
        if group == GROUP_VMU && !key.is_empty() {
            properties.insert(format!("hamamatsu.{key}"), value.to_string());
        }
    }
    let (w0, h0) = (levels[0].image.width, levels[0].image.height);
    let mpp_of = |key: &str, px: u64| kf.value(GROUP_VMU, key).and_then(parse_int).filter(|&nm| nm > 0).map(|nm| nm as f64 / (1000.0 * px as f64));
    let mpp = match (mpp_of("PhysicalWidth", w0), mpp_of("PhysicalHeight", h0)) {
        (Some(x), Some(y)) => Some((x, y)),
        _ => None,
    };
    let objective_power = kf.value(GROUP_VMU, "SourceLens").and_then(parse_double);
    let map_source = SourceId(2);
    let chunks = (0..map_len.div_ceil(HASH_CHUNK)).map(|k| TileLoc { source: map_source, offset: k * HASH_CHUNK, length: HASH_CHUNK.min(map_len - k * HASH_CHUNK) }).collect();
    Ok(SlideLayout {
        extra_sources,
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

/// The level of the NGR file at `path` (see the module docs) and the file's length.
fn read_ngr(files: &dyn SiblingFiles, path: &Path, source: SourceId) -> Result<(ImageIndex, u64)> {
    let at = Location::file(path);
    let src = files.open(path)?;
    let len = src.len();
    if len < HEADER_BYTES {
        return Err(Error::format(&at, format!("NGR file of {len} bytes is shorter than its {HEADER_BYTES}-byte header")));
    }
    let head = read_at(src.as_ref(), &at, 0, HEADER_BYTES)?;
    if &head[..2] != b"GN" {
        return Err(Error::format(&at, "Bad magic on NGR file"));
    }
    let field = |o: usize| i32::from_le_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]) as i64;
    let (w, h, cw, start) = (field(4), field(8), field(12), field(24));
    if w <= 0 || h <= 0 || cw <= 0 || start <= 0 {
        return Err(Error::format(&at, format!("Error processing NGR header (width {w}, height {h}, column width {cw}, data offset {start})")));
    }
    let (w, h, cw, start) = (w as u64, h as u64, cw as u64, start as u64);
    if w % cw != 0 {
        return Err(Error::format(&at, format!("Width {w} not multiple of column width {cw}")));
    }
    if w > MAX_IMAGE_EDGE || h > MAX_IMAGE_EDGE {
        return Err(Error::limits(&at, format!("NGR image of {w}x{h} pixels")));
    }
    if cw > MAX_TILE_EDGE {
        return Err(Error::limits(&at, format!("NGR column width of {cw} pixels exceeds {MAX_TILE_EDGE}")));
    }
    // w, h < 2^31 and 6 bytes a pixel: no overflow in u64.
    let data = w * h * PIXEL_BYTES;
    if start > len || data > len - start {
        return Err(Error::format(&at, format!("NGR file of {len} bytes too short for {w}x{h} pixels from byte {start} (truncated?)")));
    }
    let (cols, bands) = (w / cw, h.div_ceil(BAND_ROWS));
    // At most `len / 6` pixels, so at most that many tiles: bounded by the file's size.
    let mut cells = Vec::with_capacity((cols * bands) as usize);
    for band in 0..bands {
        let rows = BAND_ROWS.min(h - band * BAND_ROWS);
        for col in 0..cols {
            cells.push(TileLoc { source, offset: start + (col * h + band * BAND_ROWS) * cw * PIXEL_BYTES, length: rows * cw * PIXEL_BYTES });
        }
    }
    let grid = Grid::regular(cols, bands, 1, cells).ok_or_else(|| Error::format(&at, "tile grid does not match the tile count"))?;
    let image = ImageIndex {
        width: w,
        height: h,
        tile_width: cw as u32,
        tile_height: BAND_ROWS as u32,
        tiled: true,
        codec: Arc::new(CodecInfo {
            compression: Compression::None,
            compression_tag: 1,
            photometric: Photometric::Rgb,
            samples_per_pixel: 3,
            sample_bits: SampleBits::U16Bits4To12,
            alpha: Alpha::None,
            predictor: 1,
            planar_separate: false,
            stream: TileStream::Plain,
            ycbcr_subsampling: (1, 1),
        }),
        grid,
    };
    Ok((image, len))
}
