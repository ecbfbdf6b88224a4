//! Subblocks to levels: which subblocks are shown, where, at which level, and how each level
//! (per channel) becomes a positioned grid of stored tiles of their own sizes.
//!
//! Rules of OpenSlide's zeiss driver (`read_dim_entry`, `read_scenes_set_prop`,
//! `create_levels`) and its format page:
//! * a subblock's downsample is its `X` size over its `X` stored size, rounded to the nearest
//!   integer; its position is (`X` start, `Y` start) less the smallest of all subblocks, so
//!   the top-left subblock sits at (0, 0), and at level k it is that position over the
//!   downsample (floored here; OpenSlide places it at the fractional position);
//! * subblocks are painted in directory order, a later entry on top: OpenSlide 4.0.1 paints
//!   them so whatever their `M` (its format page calls `M` the z-index and says higher ones
//!   should be drawn later; the generated slides list them against their `M` order and
//!   OpenSlide 4.0.1 shows directory order); `S` is the scene, which must lie in `0 .. SizeS`;
//! * each scene reports its level-0 bounding box (`openslide.region[i].*`), and only the
//!   downsamples every scene reaches become levels (the common maximum), each
//!   `SizeX / downsample` by `SizeY / downsample` (integer division).
//!
//! Beyond OpenSlide (which refuses these files): the `C` dimension gives channels (see
//! [`Plan`]); subblocks of any other dimension (`Z`, `T`, `V`, `B`, `H`, `R`, `I`, ...) are
//! shown only at that dimension's smallest start (the first plane); the level-0 size is at
//! least the level-0 subblocks' bounding box (microscopy files state the size of one
//! subblock in `SizeX`/`SizeY`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::segments::DirectoryEntry;
use crate::error::{Error, Location, Result};
use crate::format::{Bounds, MAX_TILE_EDGE};
use crate::index::{Alpha, CodecInfo, Compression, Grid, ImageIndex, Photometric, PositionedTile, SampleBits, TileLoc, TileStream};

/// One subblock as placed.
#[derive(Debug, Clone)]
pub struct Sub {
    /// Level-0 position, relative to the top-left subblock.
    pub x: i64,
    /// Level-0 position, relative to the top-left subblock.
    pub y: i64,
    /// Stored width in pixels.
    pub w: u32,
    /// Stored height in pixels.
    pub h: u32,
    /// Downsample (≥ 1).
    pub ds: i64,
    /// Scene (`S`).
    pub scene: i64,
    /// Channel (`C`).
    pub channel: i64,
    /// Mosaic index (`M`; not the paint order, see the module documentation).
    pub m: i64,
    /// Directory index.
    pub index: usize,
    /// Pixel data.
    pub loc: TileLoc,
    /// The codec of its pixel type and compression.
    pub codec: Arc<CodecInfo>,
}

/// The codec of a CZI pixel type and compression (per subblock).
///
/// # Errors
/// `Unsupported` for pixel types other than Gray8, Gray16, Bgr24, Bgr48 and compressions
/// other than uncompressed, JPEG XR, zstd0 and zstd1, naming them (OpenSlide's names).
pub fn codec(pixel_type: i32, compression: i32, at: &Location) -> Result<CodecInfo> {
    let (spp, bits, photometric) = match pixel_type {
        0 => (1, SampleBits::U8, Photometric::MinIsBlack),
        1 => (1, SampleBits::U16 { big_endian: false }, Photometric::MinIsBlack),
        3 => (3, SampleBits::U8, Photometric::Bgr),
        4 => (3, SampleBits::U16 { big_endian: false }, Photometric::Bgr),
        p => {
            let name = ["Gray8", "Gray16", "Gray32Float", "Bgr24", "Bgr48", "5", "6", "7", "Bgr96Float", "Bgra32", "Gray64ComplexFloat", "Bgr192ComplexFloat", "Gray32", "Gray64"]
                .get(p as usize)
                .map_or_else(|| p.to_string(), |s| s.to_string());
            return Err(Error::unsupported(at, format!("CZI pixel type {name}")));
        }
    };
    let c = match compression {
        0 => Compression::None,
        4 => Compression::JpegXr,
        5 => Compression::Zstd,
        6 => Compression::CziZstd1,
        1 => return Err(Error::unsupported(at, "CZI JPEG compression")),
        2 => return Err(Error::unsupported(at, "CZI LZW compression")),
        c => return Err(Error::unsupported(at, format!("CZI compression {c}"))),
    };
    Ok(CodecInfo {
        compression: c,
        compression_tag: 0,
        photometric,
        samples_per_pixel: spp,
        sample_bits: bits,
        alpha: Alpha::None,
        predictor: 1,
        planar_separate: false,
        stream: TileStream::Plain,
        ycbcr_subsampling: (1, 1),
    })
}

/// The subblocks to show: with `X` and `Y`, at the first plane of every dimension other than
/// `X`, `Y`, `C`, `S`, `M`, positioned relative to the top-left one. `data[i]` is subblock
/// `i`'s pixel data.
///
/// # Errors
/// `Format` for a subblock without `X`/`Y` or with a size or stored size under 1; `Limits`
/// for a stored edge over [`MAX_TILE_EDGE`]; [`codec`]'s errors.
pub fn place(entries: &[DirectoryEntry], data: &[TileLoc], at: &Location) -> Result<Vec<Sub>> {
    let mut codecs: BTreeMap<(i32, i32), Arc<CodecInfo>> = BTreeMap::new();
    let mut first: BTreeMap<&str, i32> = BTreeMap::new();
    for e in entries {
        for d in &e.dims {
            if !matches!(d.name.as_str(), "X" | "Y" | "C" | "S" | "M") {
                let v = first.entry(d.name.as_str()).or_insert(d.start);
                *v = (*v).min(d.start);
            }
        }
    }
    let mut subs = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if e.dims.iter().any(|d| first.get(d.name.as_str()).is_some_and(|&f| d.start != f)) {
            continue;
        }
        let (Some(x), Some(y)) = (e.dim("X"), e.dim("Y")) else {
            return Err(Error::format(at, format!("subblock {i} has no X or Y dimension")));
        };
        if x.size < 1 || y.size < 1 || x.stored_size < 1 || y.stored_size < 1 {
            return Err(Error::format(at, format!("subblock {i} of size {}x{} stored as {}x{}", x.size, y.size, x.stored_size, y.stored_size)));
        }
        let (w, h) = (x.stored_size as u32, y.stored_size as u32);
        if w as u64 > MAX_TILE_EDGE || h as u64 > MAX_TILE_EDGE {
            return Err(Error::limits(at, format!("subblock {i} of {w}x{h} pixels exceeds {MAX_TILE_EDGE} per edge")));
        }
        // OpenSlide's DIV_ROUND_CLOSEST of two positive numbers.
        let ds = ((x.size as i64 + x.stored_size as i64 / 2) / x.stored_size as i64).max(1);
        let start = |n: &str| e.dim(n).map_or(0, |d| d.start as i64);
        let codec = match codecs.get(&(e.pixel_type, e.compression)) {
            Some(c) => c.clone(),
            None => {
                let c = Arc::new(codec(e.pixel_type, e.compression, at)?);
                codecs.insert((e.pixel_type, e.compression), c.clone());
                c
            }
        };
        subs.push(Sub { x: x.start as i64, y: y.start as i64, w, h, ds, scene: start("S"), channel: start("C"), m: start("M"), index: i, loc: data[i], codec });
    }
    let (ox, oy) = subs.iter().fold((i64::MAX, i64::MAX), |(a, b), s| (a.min(s.x), b.min(s.y)));
    for s in &mut subs {
        s.x -= ox;
        s.y -= oy;
    }
    Ok(subs)
}

/// Levels, channels and scenes of the shown subblocks.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The level downsamples, increasing (the first is 1).
    pub downsamples: Vec<i64>,
    /// Level-0 (width, height).
    pub size: (u64, u64),
    /// The channels (`C` values), increasing; channel images per level follow this order.
    pub channels: Vec<i64>,
    /// Per scene, its level-0 bounding box.
    pub regions: Vec<Bounds>,
    /// Per level, per channel, the image.
    pub images: Vec<Vec<ImageIndex>>,
}

/// Build the levels. `xml_size`: `SizeX`/`SizeY`; `scenes`: `SizeS` (1 when absent).
///
/// # Errors
/// `Format` for a scene out of range or without subblocks, no level-0 subblocks, or a level
/// whose subblocks mix pixel types or compressions (one codec per level and channel).
pub fn plan(subs: &[Sub], xml_size: Option<(i64, i64)>, scenes: i64, at: &Location) -> Result<Plan> {
    if subs.is_empty() {
        return Err(Error::format(at, "no subblocks in the file"));
    }
    if !(1..=1_000_000).contains(&scenes) {
        return Err(Error::format(at, format!("SizeS of {scenes} scenes")));
    }
    let n = scenes as usize;
    let mut bbox = vec![(i64::MAX, i64::MAX, i64::MIN, i64::MIN); n];
    let mut max_ds = vec![0i64; n];
    for s in subs {
        if s.scene < 0 || s.scene >= scenes {
            return Err(Error::format(at, format!("subblock {} specifies out-of-range scene {}", s.index, s.scene)));
        }
        let k = s.scene as usize;
        max_ds[k] = max_ds[k].max(s.ds);
        if s.ds == 1 {
            let b = &mut bbox[k];
            *b = (b.0.min(s.x), b.1.min(s.y), b.2.max(s.x + s.w as i64), b.3.max(s.y + s.h as i64));
        }
    }
    if let Some(k) = max_ds.iter().position(|&d| d == 0) {
        return Err(Error::format(at, format!("no subblocks for scene {k}")));
    }
    let common = *max_ds.iter().min().expect("a scene");
    let regions: Vec<Bounds> = bbox
        .iter()
        .map(|b| if b.0 <= b.2 { Bounds { x: b.0, y: b.1, width: (b.2 - b.0) as u64, height: (b.3 - b.1) as u64 } } else { Bounds { x: 0, y: 0, width: 0, height: 0 } })
        .collect();
    let mut channels: Vec<i64> = subs.iter().map(|s| s.channel).collect();
    channels.sort_unstable();
    channels.dedup();
    // Downsamples every channel has, up to the common maximum.
    let mut downsamples: Vec<i64> = subs.iter().filter(|s| s.ds <= common).map(|s| s.ds).collect();
    downsamples.sort_unstable();
    downsamples.dedup();
    downsamples.retain(|&d| channels.iter().all(|&c| subs.iter().any(|s| s.ds == d && s.channel == c)));
    if downsamples.first() != Some(&1) {
        return Err(Error::format(at, "no full-resolution subblocks (of every channel)"));
    }
    let (bw, bh) = subs.iter().filter(|s| s.ds == 1).fold((0i64, 0i64), |(w, h), s| (w.max(s.x + s.w as i64), h.max(s.y + s.h as i64)));
    let (xw, xh) = xml_size.unwrap_or((0, 0));
    let size = (xw.max(bw) as u64, xh.max(bh) as u64);
    let mut images = Vec::new();
    for &ds in &downsamples {
        let mut per_channel = Vec::new();
        for &c in &channels {
            let mut tiles: Vec<&Sub> = subs.iter().filter(|s| s.ds == ds && s.channel == c).collect();
            tiles.sort_by_key(|s| s.index);
            per_channel.push(level_image(&tiles, (size.0 / ds as u64, size.1 / ds as u64), ds, at)?);
        }
        images.push(per_channel);
    }
    Ok(Plan { downsamples, size, channels, regions, images })
}

/// One level's image of `tiles` (paint order) at `ds`.
fn level_image(tiles: &[&Sub], size: (u64, u64), ds: i64, at: &Location) -> Result<ImageIndex> {
    let codec = tiles[0].codec.clone();
    if let Some(t) = tiles.iter().find(|t| t.codec != codec) {
        return Err(Error::unsupported(
            at,
            format!("subblocks at downsample {ds} of both {} and {} ({:?} samples) in one level", codec.compression.name(), t.codec.compression.name(), t.codec.sample_bits),
        ));
    }
    let tw = tiles.iter().map(|t| t.w).max().unwrap_or(1);
    let th = tiles.iter().map(|t| t.h).max().unwrap_or(1);
    let stored = Grid::regular(tiles.len() as u64, 1, 1, tiles.iter().map(|t| t.loc).collect()).ok_or_else(|| Error::format(at, "subblock grid"))?;
    let placements: Vec<PositionedTile> = tiles
        .iter()
        .enumerate()
        .map(|(i, t)| PositionedTile { x: t.x.div_euclid(ds), y: t.y.div_euclid(ds), width: t.w, height: t.h, col: i as u64, row: 0, src_x: 0, src_y: 0 })
        .collect();
    let sizes = tiles.iter().map(|t| (t.w, t.h)).collect();
    let grid = Grid::positioned_sized(stored, (tw, th), sizes, &placements).ok_or_else(|| Error::limits(at, format!("subblock placement at downsample {ds}")))?;
    Ok(ImageIndex { width: size.0, height: size.1, tile_width: tw, tile_height: th, tiled: true, codec, grid })
}
