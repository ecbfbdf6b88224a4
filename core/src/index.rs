//! The tile index: plain, immutable data describing every level and associated image of a
//! slide, built once at open from TIFF structure only (no pixel data is read).
//!
//! `SlideIndex`, `ImageIndex` and `CodecInfo` are `Send + Sync` and cheap to share (`Arc`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Compression of a TIFF image's tiles or strips (TIFF tag 259).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// 1: uncompressed.
    None,
    /// 7: JPEG ("new-style", TIFF Technical Note 2), possibly abbreviated with JPEGTables.
    Jpeg,
    /// 8 (Adobe deflate) and 32946 (old deflate): zlib streams.
    Deflate,
    /// 5: LZW as in TIFF 6.0 (MSB-first codes, early change).
    Lzw,
    /// 50000: Zstandard (libtiff's code).
    Zstd,
    /// 50001: WebP (libtiff's code).
    WebP,
    /// 33003 (Aperio JPEG 2000, YCbCr-coded) or 33005 (Aperio JPEG 2000, RGB-coded),
    /// per OpenSlide's aperio driver. `ycbcr` is true for 33003.
    Jpeg2000 {
        /// `true` when the codestream holds YCbCr that needs converting to RGB.
        ycbcr: bool,
    },
}

impl Compression {
    /// The TIFF tag value(s) this compression is written with, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Jpeg => "jpeg",
            Compression::Deflate => "deflate",
            Compression::Lzw => "lzw",
            Compression::Zstd => "zstd",
            Compression::WebP => "webp",
            Compression::Jpeg2000 { ycbcr: true } => "jpeg2000-ycbcr",
            Compression::Jpeg2000 { ycbcr: false } => "jpeg2000-rgb",
        }
    }
}

/// Photometric interpretation (TIFF tag 262) of the decoded samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Photometric {
    /// 1: greyscale, 0 = black.
    MinIsBlack,
    /// 2: RGB. For JPEG this means the JPEG stream is RGB-coded: no YCbCr transform.
    Rgb,
    /// 6: YCbCr; only with JPEG compression, whose decoder converts to RGB.
    YCbCr,
}

/// Meaning of an extra (fourth or second) sample (TIFF tag 338).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpha {
    /// No alpha sample.
    None,
    /// Associated (premultiplied) alpha: un-premultiplied on decode.
    Associated,
    /// Unassociated alpha: kept as is.
    Unassociated,
    /// An extra sample of unspecified meaning: ignored (alpha 255).
    Ignored,
}

/// How to decode one image's tiles or strips.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecInfo {
    /// The compression.
    pub compression: Compression,
    /// The TIFF compression tag value as written.
    pub compression_tag: u16,
    /// Photometric interpretation; decides the JPEG colour transform.
    pub photometric: Photometric,
    /// Samples per pixel (1..=4), all 8-bit unsigned.
    pub samples_per_pixel: u16,
    /// What the extra sample is, if any.
    pub alpha: Alpha,
    /// Predictor (1 = none, 2 = horizontal differencing).
    pub predictor: u16,
    /// `true` for PlanarConfiguration 2 (one chunk per sample plane).
    pub planar_separate: bool,
    /// JPEGTables (tag 347), exactly `count` raw bytes, when present.
    pub jpeg_tables: Option<Arc<[u8]>>,
    /// YCbCrSubSampling (tag 530) as written (horizontal, vertical); informational: for JPEG the
    /// SOF sampling factors are authoritative.
    pub ycbcr_subsampling: (u16, u16),
}

/// Byte range of one compressed tile or strip in the file. `offset == 0 || byte_count == 0`
/// marks a missing tile, read as transparent background.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TileLoc {
    /// File offset in bytes.
    pub offset: u64,
    /// Compressed length in bytes.
    pub byte_count: u64,
}

impl TileLoc {
    /// `true` when the tile is absent from the file (offset 0 or byte count 0).
    pub fn is_missing(&self) -> bool {
        self.offset == 0 || self.byte_count == 0
    }
}

/// One image (pyramid level or associated image) as a grid of chunks.
///
/// Strip-organised images are described as a grid one chunk wide: `tile_width = width`,
/// `tile_height = RowsPerStrip`.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageIndex {
    /// Index of the IFD in the file's main chain.
    pub ifd_index: usize,
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
    /// Tile (chunk) width in pixels.
    pub tile_width: u32,
    /// Tile (chunk) height in pixels.
    pub tile_height: u32,
    /// Tiles across = ceil(width / tile_width).
    pub tiles_across: u64,
    /// Tiles down = ceil(height / tile_height).
    pub tiles_down: u64,
    /// `true` when stored as tiles, `false` when stored as strips.
    pub tiled: bool,
    /// How to decode the chunks.
    pub codec: Arc<CodecInfo>,
    /// Chunk byte ranges, row-major, `planes × tiles_down × tiles_across` entries
    /// (planes = samples per pixel for planar-separate images, else 1).
    pub tiles: Vec<TileLoc>,
}

impl ImageIndex {
    /// Number of sample planes stored separately (1 unless PlanarConfiguration = 2).
    pub fn planes(&self) -> usize {
        if self.codec.planar_separate {
            self.codec.samples_per_pixel as usize
        } else {
            1
        }
    }

    /// The byte ranges of the chunk at (`col`, `row`), one per plane.
    pub fn tile_locs(&self, col: u64, row: u64) -> impl Iterator<Item = TileLoc> + '_ {
        let per_plane = self.tiles_across * self.tiles_down;
        let idx = row * self.tiles_across + col;
        (0..self.planes() as u64).map(move |p| self.tiles[(p * per_plane + idx) as usize])
    }

    /// The part of tile (`col`, `row`) that lies inside the image: (width, height) in pixels.
    pub fn valid_tile_size(&self, col: u64, row: u64) -> (u32, u32) {
        let w = (self.width - col * self.tile_width as u64).min(self.tile_width as u64);
        let h = (self.height - row * self.tile_height as u64).min(self.tile_height as u64);
        (w as u32, h as u32)
    }

    /// The part of tile (`col`, `row`) covered by `clip` (a rectangle inside the image, level
    /// pixels), as `(x0, y0, x1, y1)` in pixels relative to the tile's top-left corner,
    /// half-open. The tile must intersect `clip`.
    pub fn part_of_tile(&self, clip: &crate::geometry::Rect, col: u64, row: u64) -> (u64, u64, u64, u64) {
        let (tx, ty) = (col * self.tile_width as u64, row * self.tile_height as u64);
        let (vw, vh) = self.valid_tile_size(col, row);
        let x0 = (clip.x as u64).max(tx) - tx;
        let y0 = (clip.y as u64).max(ty) - ty;
        let x1 = (clip.x as u64 + clip.w).min(tx + vw as u64) - tx;
        let y1 = (clip.y as u64 + clip.h).min(ty + vh as u64) - ty;
        (x0, y0, x1, y1)
    }

    /// Sum of the compressed byte counts of all chunks (saturating: hostile counts cannot
    /// overflow).
    pub fn total_bytes(&self) -> u64 {
        self.tiles.iter().fold(0u64, |a, t| a.saturating_add(t.byte_count))
    }
}

/// One pyramid level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelIndex {
    /// Geometry, tile grid and codec.
    pub image: ImageIndex,
    /// Downsample relative to level 0: the mean of the per-axis ratios
    /// `(w0 / wk + h0 / hk) / 2`, OpenSlide's rule.
    pub downsample: f64,
}

/// Everything known about a slide after open: levels, associated images, properties, ICC.
#[derive(Debug, Clone)]
pub struct SlideIndex {
    /// The file.
    pub path: PathBuf,
    /// File length in bytes.
    pub file_len: u64,
    /// Format driver that opened it (`aperio`, `generic-tiff`); also `openslide.vendor`.
    pub vendor: &'static str,
    /// Pyramid levels, level 0 (full resolution) first, strictly decreasing in size.
    pub levels: Vec<LevelIndex>,
    /// Associated images by name (`thumbnail`, `label`, `macro`).
    pub associated: BTreeMap<String, ImageIndex>,
    /// Properties with OpenSlide's names (`openslide.*`, `tiff.*`, vendor keys).
    pub properties: BTreeMap<String, String>,
    /// ICC profile bytes of level 0, when present.
    pub icc_profile: Option<Arc<[u8]>>,
    /// ICC profiles of associated images, when present.
    pub associated_icc: BTreeMap<String, Arc<[u8]>>,
}

impl SlideIndex {
    /// Level-0 dimensions (width, height) in pixels.
    pub fn dimensions(&self) -> (u64, u64) {
        (self.levels[0].image.width, self.levels[0].image.height)
    }
}
