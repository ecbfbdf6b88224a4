//! [`Slide`]: an open whole-slide image.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::cache::{CacheStats, TileCache};
use crate::codec::{DecodedTile, PartRect};
use crate::config::Config;
use crate::error::{Error, ImageRef, Location, Result};
use crate::format::{self, DetectionReport, Probe};
use crate::geometry::{best_level_for_downsample, level_origin, tile_span, Rect};
use crate::index::{ImageIndex, SlideIndex};
use crate::io::metrics::{IoCounters, MetricsSource};
use crate::io::posix::FileSource;
use crate::io::ByteSource;

use crate::pipeline::{fetch_tiles, Batch, CacheSlot};
use crate::tiff::TiffFile;

/// Options for opening a slide. The defaults use the process-wide tile cache and the settings
/// from the environment ([`Config::from_env`]).
#[derive(Debug, Clone, Default)]
pub struct SlideOptions {
    /// Tile cache to use; `None` = the process-wide cache ([`TileCache::global`]).
    pub cache: Option<Arc<TileCache>>,
    /// Settings; `None` = [`Config::from_env`].
    pub config: Option<Config>,
    /// Thread pool for parallel reads and decodes; `None` = rayon's global pool. Work that
    /// needs no parallelism (one tile, cache hits) always runs on the calling thread. Bindings
    /// pass a per-process pool so a process forked after open gets fresh threads.
    pub pool: Option<Arc<rayon::ThreadPool>>,
}

/// An RGBA image: `u8`, row-major, shape (height, width, 4), non-premultiplied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgba {
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
    /// `width × height × 4` bytes.
    pub data: Vec<u8>,
}

static NEXT_SLIDE_ID: AtomicU64 = AtomicU64::new(1);

/// A zeroed pixel buffer of `bytes` bytes for region output (one place to change the
/// allocation strategy; pre-faulting with `MADV_POPULATE_WRITE` and transparent huge pages were
/// both measured on a 1024-patch batch and gave nothing or lost).
pub fn alloc_pixels(bytes: usize) -> Vec<u8> {
    vec![0u8; bytes]
}

/// An open slide: its immutable [`SlideIndex`], a positional byte source and a tile cache.
///
/// `Slide` is `Send + Sync`: share one between threads (all reads are positional `pread`s;
/// nothing is locked but the cache's short critical sections). The file is closed when the
/// `Slide` is dropped; its tiles are then purged from the cache.
#[derive(Debug)]
pub struct Slide {
    index: Arc<SlideIndex>,
    src: Arc<MetricsSource<Box<dyn ByteSource>>>,
    id: u64,
    cache: Arc<TileCache>,
    config: Config,
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl Drop for Slide {
    fn drop(&mut self) {
        self.cache.purge_slide(self.id);
        crate::gpu::purge_slide(self.id);
    }
}

fn open_source(path: &Path) -> Result<FileSource> {
    FileSource::open(path).map_err(|e| Error::io(&Location::file(path), e))
}

impl Slide {
    /// Open a slide with default options.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened; [`Error::Unsupported`] when no driver
    /// recognises it (the message carries the detection report) or it uses an unsupported
    /// feature; [`Error::Format`] / [`Error::Limits`] for damaged structure.
    pub fn open(path: impl AsRef<Path>) -> Result<Slide> {
        Slide::open_with(path, SlideOptions::default())
    }

    /// Open a slide with explicit options. Errors as [`Slide::open`].
    pub fn open_with(path: impl AsRef<Path>, opts: SlideOptions) -> Result<Slide> {
        let path = path.as_ref();
        Slide::from_source(path, Box::new(open_source(path)?), opts)
    }

    /// Open a slide from any [`ByteSource`] (memory, a remote object store, a fuzzer's
    /// input). `name` is used in error messages and as the slide's path. Errors as
    /// [`Slide::open`] (except opening the file).
    pub fn from_source(name: impl AsRef<Path>, source: Box<dyn ByteSource>, opts: SlideOptions) -> Result<Slide> {
        let path = name.as_ref();
        let src = Arc::new(MetricsSource::new(source));
        let at = Location::file(path);
        // Every setting is checked at open, so a bad `SLIDESTREAM_*` value fails here, once,
        // with an error naming it (docs/settings.md), whichever path reads it later.
        crate::config::settings()?;
        let tiff = TiffFile::parse(&*src, &at);
        let probe = Probe { src: &*src, at: &at, tiff: tiff.as_ref() };
        let (report, driver) = format::detect(&probe);
        let Some(driver) = driver else {
            // A file that parses as TIFF but no driver takes, or a file that is not TIFF at all.
            return Err(match tiff {
                Err(e @ (Error::Format { .. } | Error::Limits { .. } | Error::Io { .. })) => e,
                _ => Error::unsupported(&at, format!("no format driver recognises this file ({})", report_line(&report))),
            });
        };
        let index = driver.open(&probe)?;
        if index.levels.is_empty() {
            return Err(Error::format(&at, "no pyramid levels"));
        }
        src.reset();
        Ok(Slide {
            index: Arc::new(index),
            src,
            id: NEXT_SLIDE_ID.fetch_add(1, Ordering::Relaxed),
            cache: match opts.cache {
                Some(c) => c,
                None => TileCache::global()?,
            },
            config: match opts.config {
                Some(c) => c,
                None => Config::from_env()?,
            },
            pool: opts.pool,
        })
    }

    /// Run format detection only and say why each driver accepted or declined.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened.
    pub fn detect(path: impl AsRef<Path>) -> Result<DetectionReport> {
        let path = path.as_ref();
        let src = open_source(path)?;
        let at = Location::file(path);
        let tiff = TiffFile::parse(&src, &at);
        let probe = Probe { src: &src, at: &at, tiff: tiff.as_ref() };
        Ok(format::detect(&probe).0)
    }

    /// The tile index (levels, tiles, codecs, properties).
    pub fn index(&self) -> &SlideIndex {
        &self.index
    }

    /// Vendor / driver name (`openslide.vendor`).
    pub fn vendor(&self) -> &'static str {
        self.index.vendor
    }

    /// Number of pyramid levels.
    pub fn level_count(&self) -> usize {
        self.index.levels.len()
    }

    /// Level-0 (width, height) in pixels.
    pub fn dimensions(&self) -> (u64, u64) {
        self.index.dimensions()
    }

    /// (width, height) in pixels of every level, level 0 first.
    pub fn level_dimensions(&self) -> Vec<(u64, u64)> {
        self.index.levels.iter().map(|l| (l.image.width, l.image.height)).collect()
    }

    /// Downsample of every level relative to level 0 (OpenSlide's mean-of-axes rule).
    pub fn level_downsamples(&self) -> Vec<f64> {
        self.index.levels.iter().map(|l| l.downsample).collect()
    }

    /// (tile width, tile height) in pixels of every level.
    pub fn level_tile_sizes(&self) -> Vec<(u32, u32)> {
        self.index.levels.iter().map(|l| (l.image.tile_width, l.image.tile_height)).collect()
    }

    /// Properties with OpenSlide's names.
    pub fn properties(&self) -> &BTreeMap<String, String> {
        &self.index.properties
    }

    /// Names and (width, height) of the associated images.
    pub fn associated_images(&self) -> BTreeMap<String, (u64, u64)> {
        self.index.associated.iter().map(|(k, v)| (k.clone(), (v.width, v.height))).collect()
    }

    /// ICC profile of the pyramid, if any.
    pub fn icc_profile(&self) -> Option<&[u8]> {
        self.index.icc_profile.as_deref()
    }

    /// Microns per pixel (x, y) at level 0, from `openslide.mpp-x/-y`.
    pub fn mpp(&self) -> Option<(f64, f64)> {
        let p = &self.index.properties;
        Some((p.get("openslide.mpp-x")?.parse().ok()?, p.get("openslide.mpp-y")?.parse().ok()?))
    }

    /// The level to read for a wanted downsample (OpenSlide's rule).
    pub fn best_level_for_downsample(&self, downsample: f64) -> usize {
        best_level_for_downsample(&self.level_downsamples(), downsample)
    }

    /// Bytes and requests read from the file since open (structure reads at open excluded).
    pub fn io_counters(&self) -> IoCounters {
        self.src.counters()
    }

    /// Counters of the tile cache this slide uses (shared with other slides).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The tile cache this slide uses.
    pub fn cache(&self) -> &Arc<TileCache> {
        &self.cache
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn level_at(&self, level: usize) -> Result<(&ImageIndex, Location)> {
        let l = self.index.levels.get(level).ok_or_else(|| {
            Error::Usage(format!("{}: level {level} does not exist (level count {})", self.index.path.display(), self.level_count()))
        })?;
        Ok((&l.image, Location::file(&self.index.path).with_image(ImageRef::Level(level))))
    }

    /// Read a region as RGBA.
    ///
    /// * `location`: (x, y) of the top-left pixel in **level-0** coordinates; may be negative.
    /// * `level`: pyramid level to read from.
    /// * `size`: (width, height) in pixels **of that level**.
    ///
    /// Returns RGBA `u8`, shape (height, width, 4), non-premultiplied; pixels outside the image
    /// and in missing tiles are (0, 0, 0, 0): OpenSlide's `read_region` semantics.
    ///
    /// # Errors
    /// [`Error::Usage`] for a level that does not exist; [`Error::Limits`] when the output
    /// exceeds `max_region_bytes`; [`Error::Format`] / [`Error::Io`] naming level and tile when
    /// a tile cannot be read or decoded. The slide stays usable after any error.
    pub fn read_region(&self, location: (i64, i64), level: usize, size: (u64, u64)) -> Result<Rgba> {
        let bytes = self.region_bytes(size)?;
        let mut data = alloc_pixels(bytes);
        self.read_region_into(location, level, size, &mut data)?;
        Ok(Rgba { width: size.0, height: size.1, data })
    }

    fn region_bytes(&self, size: (u64, u64)) -> Result<usize> {
        let bytes = size.0.checked_mul(size.1).and_then(|n| n.checked_mul(4));
        match bytes {
            Some(b) if b <= self.config.max_region_bytes && usize::try_from(b).is_ok() => Ok(b as usize),
            _ => Err(Error::limits(
                &Location::file(&self.index.path),
                format!("region of {}x{} pixels exceeds max_region_bytes ({} bytes)", size.0, size.1, self.config.max_region_bytes),
            )),
        }
    }

    /// Like [`read_region`](Self::read_region) but fills the caller's buffer `out`
    /// (exactly `width × height × 4` bytes, row-major RGBA). Every byte of `out` is written.
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region), plus [`Error::Usage`] when `out` has the wrong length.
    pub fn read_region_into(&self, location: (i64, i64), level: usize, size: (u64, u64), out: &mut [u8]) -> Result<()> {
        let bytes = self.region_bytes(size)?;
        if out.len() != bytes {
            return Err(Error::Usage(format!("output buffer holds {} bytes, region needs {bytes}", out.len())));
        }
        let (img, at) = self.level_at(level)?;
        let ds = self.index.levels[level].downsample;
        let rect = Rect { x: level_origin(location.0, ds), y: level_origin(location.1, ds), w: size.0, h: size.1 };
        out.fill(0);
        let Some(clip) = rect.clip(img.width, img.height) else { return Ok(()) };
        let (cols, rows) = tile_span(&clip, img.tile_width, img.tile_height);
        let coords: Vec<(u64, u64)> = rows.flat_map(|r| cols.clone().map(move |c| (c, r))).collect();
        let batch = self.level_batch(img, &at, level);
        // The part of each tile the region needs; small parts are decoded partially.
        let parts: Vec<Option<PartRect>> =
            coords.iter().map(|&(c, r)| self.part_if_small(img, (c, r), img.part_of_tile(&clip, c, r))).collect();
        let tiles = fetch_tiles(&batch, &coords, Some(&parts))?;
        for (&(col, row), tile) in coords.iter().zip(&tiles) {
            if let Some(t) = tile {
                blit_tile(t, col * img.tile_width as u64, row * img.tile_height as u64, &rect, out);
            }
        }
        Ok(())
    }

    /// Read many same-sized patches of one level in one call, as RGB for ML pipelines.
    ///
    /// * `locations`: top-left corners in **level-0** pixels (may be negative).
    /// * `size`: (width, height) of every patch in pixels of `level`.
    /// * `background`: RGB written where a patch lies outside the image or on a missing tile;
    ///   partly transparent pixels are composited over it (`c·a/255 + bg·(1 − a/255)`, rounded).
    /// * `out`: `n × height × width × 3` bytes, row-major (n, height, width, 3), filled
    ///   completely.
    ///
    /// Tiles shared by several patches are read and decoded once; patches are processed in
    /// groups that need at most 512 distinct tiles (bounding memory), each group decoding its
    /// tiles and assembling its patches in parallel.
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region); [`Error::Usage`] when `out` has the wrong length.
    pub fn read_regions_rgb_into(
        &self,
        locations: &[(i64, i64)],
        level: usize,
        size: (u64, u64),
        background: [u8; 3],
        out: &mut [u8],
    ) -> Result<()> {
        let patch_rgba = self.region_bytes(size)?;
        let patch_bytes = patch_rgba / 4 * 3;
        let total = patch_bytes.checked_mul(locations.len()).filter(|&t| t as u64 <= self.config.max_region_bytes.saturating_mul(4));
        if total != Some(out.len()) {
            return Err(Error::Usage(format!(
                "output buffer holds {} bytes, {} patches of {}x{} RGB need {}",
                out.len(),
                locations.len(),
                size.0,
                size.1,
                total.map_or("too many".to_string(), |t| t.to_string())
            )));
        }
        let (img, at) = self.level_at(level)?;
        let ds = self.index.levels[level].downsample;
        let rects: Vec<Rect> = locations
            .iter()
            .map(|&(x, y)| Rect { x: level_origin(x, ds), y: level_origin(y, ds), w: size.0, h: size.1 })
            .collect();
        let batch = self.level_batch(img, &at, level);
        const MAX_GROUP_TILES: usize = 512;
        let mut start = 0;
        while start < rects.len() {
            // Grow the group until it needs MAX_GROUP_TILES distinct tiles; record, per tile, the
            // union of the parts its patches need.
            let mut need: std::collections::HashMap<(u64, u64), (u64, u64, u64, u64)> = std::collections::HashMap::new();
            let mut end = start;
            while end < rects.len() && (need.len() < MAX_GROUP_TILES || end == start) {
                if let Some(clip) = rects[end].clip(img.width, img.height) {
                    let (cols, rows) = tile_span(&clip, img.tile_width, img.tile_height);
                    for row in rows {
                        for col in cols.clone() {
                            let (x0, y0, x1, y1) = img.part_of_tile(&clip, col, row);
                            need.entry((col, row))
                                .and_modify(|u| *u = (u.0.min(x0), u.1.min(y0), u.2.max(x1), u.3.max(y1)))
                                .or_insert((x0, y0, x1, y1));
                        }
                    }
                }
                end += 1;
            }
            let coords: Vec<(u64, u64)> = need.keys().copied().collect();
            let parts: Vec<Option<PartRect>> = coords.iter().map(|c| self.part_if_small(img, *c, need[c])).collect();
            let tiles = fetch_tiles(&batch, &coords, Some(&parts))?;
            let by_coord: std::collections::HashMap<(u64, u64), &Arc<DecodedTile>> =
                coords.iter().zip(&tiles).filter_map(|(c, t)| t.as_ref().map(|t| (*c, t))).collect();
            let assemble = |(k, dst): (usize, &mut [u8])| {
                let rect = rects[start + k];
                if background[0] == background[1] && background[1] == background[2] {
                    dst.fill(background[0]);
                } else {
                    for px in dst.chunks_exact_mut(3) {
                        px.copy_from_slice(&background);
                    }
                }
                if let Some(clip) = rect.clip(img.width, img.height) {
                    let (cols, rows) = tile_span(&clip, img.tile_width, img.tile_height);
                    for row in rows {
                        for col in cols.clone() {
                            if let Some(t) = by_coord.get(&(col, row)) {
                                let (tx, ty) = (col * img.tile_width as u64 + t.x as u64, row * img.tile_height as u64 + t.y as u64);
                                blit_rgb(t, tx, ty, &rect, background, dst);
                            }
                        }
                    }
                }
            };
            let group_out = &mut out[start * patch_bytes..end * patch_bytes];
            if crate::pipeline::pool_threads(batch.pool) > 1 && end - start > 1 {
                use rayon::prelude::*;
                crate::pipeline::in_pool(batch.pool, || group_out.par_chunks_mut(patch_bytes).enumerate().for_each(assemble));
            } else {
                group_out.chunks_mut(patch_bytes).enumerate().for_each(assemble);
            }
            start = end;
        }
        Ok(())
    }

    /// Process-unique id of this open slide (the key of its tiles in the caches).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The byte source (for the GPU path's reads).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn source(&self) -> &MetricsSource<Box<dyn ByteSource>> {
        &self.src
    }

    /// The decode pool, if the slide was given one.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool.as_deref()
    }

    /// Level geometry for the GPU path: the level's image index and downsample.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn level_image(&self, level: usize) -> Result<(&ImageIndex, f64, Location)> {
        let (img, at) = self.level_at(level)?;
        Ok((img, self.index.levels[level].downsample, at))
    }

    /// A pipeline batch over one level, cached in this slide's tile cache.
    fn level_batch<'a>(&'a self, img: &'a ImageIndex, at: &'a Location, level: usize) -> Batch<'a> {
        Batch {
            src: &*self.src,
            image: img,
            at,
            plan: &self.config.plan,
            cache: Some(CacheSlot { cache: &self.cache, slide: self.id, level: level as u32 }),
            pool: self.pool.as_deref(),
        }
    }

    /// The part of tile `coord` given by `(x0, y0, x1, y1)` (tile pixels) when it is small
    /// enough to decode partially under `partial_decode_max_fraction`.
    pub(crate) fn part_if_small(&self, img: &ImageIndex, coord: (u64, u64), (x0, y0, x1, y1): (u64, u64, u64, u64)) -> Option<PartRect> {
        let frac = self.config.partial_decode_max_fraction;
        let (vw, vh) = img.valid_tile_size(coord.0, coord.1);
        let area = (x1 - x0) * (y1 - y0);
        (frac > 0.0 && (area as f64) <= frac * (vw as f64 * vh as f64))
            .then(|| PartRect { x: x0 as u32, y: y0 as u32, w: (x1 - x0) as u32, h: (y1 - y0) as u32 })
    }

    /// Decode the tiles at `coords` (column, row) of `level` through the pipeline (cache, read
    /// plan, parallel decode), returning how many were decoded or found cached (missing tiles
    /// excluded). Used by `slidestream tiles` and benchmarks.
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region).
    pub fn read_tiles(&self, level: usize, coords: &[(u64, u64)]) -> Result<usize> {
        let (img, at) = self.level_at(level)?;
        let batch = self.level_batch(img, &at, level);
        Ok(fetch_tiles(&batch, coords, None)?.iter().filter(|t| t.is_some()).count())
    }

    /// Read a whole associated image (`thumbnail`, `label`, `macro`) as RGBA, shape
    /// (height, width, 4). Not cached.
    ///
    /// # Errors
    /// [`Error::Usage`] for an unknown name; [`Error::Limits`] when larger than
    /// `max_region_bytes`; decoding errors as [`read_region`](Self::read_region).
    pub fn read_associated(&self, name: &str) -> Result<Rgba> {
        let img = self.index.associated.get(name).ok_or_else(|| {
            Error::Usage(format!(
                "{}: no associated image '{name}' (have: {})",
                self.index.path.display(),
                self.index.associated.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        let at = Location::file(&self.index.path).with_image(ImageRef::Associated(name.to_string()));
        let bytes = self.region_bytes((img.width, img.height))?;
        let mut data = vec![0u8; bytes];
        let coords: Vec<(u64, u64)> = (0..img.tiles_down).flat_map(|r| (0..img.tiles_across).map(move |c| (c, r))).collect();
        let batch = Batch { src: &*self.src, image: img, at: &at, plan: &self.config.plan, cache: None, pool: self.pool.as_deref() };
        let rect = Rect { x: 0, y: 0, w: img.width, h: img.height };
        for chunk in coords.chunks(64) {
            let tiles = fetch_tiles(&batch, chunk, None)?;
            for (&(col, row), tile) in chunk.iter().zip(&tiles) {
                if let Some(t) = tile {
                    blit_tile(t, col * img.tile_width as u64, row * img.tile_height as u64, &rect, &mut data);
                }
            }
        }
        Ok(Rgba { width: img.width, height: img.height, data })
    }
}

fn report_line(r: &DetectionReport) -> String {
    r.verdicts
        .iter()
        .map(|(n, v)| match v {
            Ok(()) => format!("{n}: accepted"),
            Err(w) => format!("{n}: {w}"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Composite the part of decoded tile `t` (placed at level position `tx`, `ty`) that falls in
/// `rect` over `background` into an RGB patch `out` (`rect.w × rect.h × 3`).
fn blit_rgb(t: &DecodedTile, tx: u64, ty: u64, rect: &Rect, background: [u8; 3], out: &mut [u8]) {
    let (tw, th) = (t.width as i64, t.height as i64);
    let x0 = (tx as i64).max(rect.x);
    let y0 = (ty as i64).max(rect.y);
    let x1 = (tx as i64 + tw).min(rect.x + rect.w as i64);
    let y1 = (ty as i64 + th).min(rect.y + rect.h as i64);
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    let n = (x1 - x0) as usize;
    for y in y0..y1 {
        let s = ((y - ty as i64) as usize * tw as usize + (x0 - tx as i64) as usize) * 4;
        let d = ((y - rect.y) as usize * rect.w as usize + (x0 - rect.x) as usize) * 3;
        let src = &t.rgba[s..s + n * 4];
        let dst = &mut out[d..d + n * 3];
        if t.opaque {
            rgba_to_rgb(src, dst);
            continue;
        }
        for (p, q) in src.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
            match p[3] {
                255 => q.copy_from_slice(&p[..3]),
                0 => {}
                a => {
                    let a = a as u32;
                    for c in 0..3 {
                        q[c] = ((p[c] as u32 * a + background[c] as u32 * (255 - a) + 127) / 255) as u8;
                    }
                }
            }
        }
    }
}

/// Drop the alpha byte: `src` RGBA → `dst` RGB, same pixel count. Each pixel is moved as one
/// 4-byte load and store (the stray alpha byte lands where the next pixel's red goes and is
/// overwritten by it); only the last pixel is copied as 3 bytes.
fn rgba_to_rgb(src: &[u8], dst: &mut [u8]) {
    let n = dst.len() / 3;
    if n == 0 {
        return;
    }
    for i in 0..n - 1 {
        let px: [u8; 4] = src[4 * i..4 * i + 4].try_into().expect("4 bytes");
        dst[3 * i..3 * i + 4].copy_from_slice(&px);
    }
    dst[3 * (n - 1)..3 * n].copy_from_slice(&src[4 * (n - 1)..4 * (n - 1) + 3]);
}

/// Copy a decoded tile (whole or part) whose tile origin is level position (`tx`, `ty`).
fn blit_tile(t: &DecodedTile, tx: u64, ty: u64, rect: &Rect, out: &mut [u8]) {
    blit(t.width as u64, t.height as u64, &t.rgba, tx + t.x as u64, ty + t.y as u64, rect, out);
}

/// Copy the part of a decoded tile (`tw × th` RGBA at level position `(tx, ty)`) that falls in
/// `rect` into `out` (RGBA, `rect.w × rect.h`).
fn blit(tw: u64, th: u64, tile: &[u8], tx: u64, ty: u64, rect: &Rect, out: &mut [u8]) {
    let x0 = (tx as i64).max(rect.x);
    let y0 = (ty as i64).max(rect.y);
    let x1 = ((tx + tw) as i64).min(rect.x + rect.w as i64);
    let y1 = ((ty + th) as i64).min(rect.y + rect.h as i64);
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    let n = (x1 - x0) as usize * 4;
    for y in y0..y1 {
        let s = ((y - ty as i64) as usize * tw as usize + (x0 - tx as i64) as usize) * 4;
        let d = ((y - rect.y) as usize * rect.w as usize + (x0 - rect.x) as usize) * 4;
        out[d..d + n].copy_from_slice(&tile[s..s + n]);
    }
}


#[cfg(test)]
mod tests {
    use super::rgba_to_rgb;

    #[test]
    fn rgba_to_rgb_drops_alpha_exactly() {
        for n in 0..9usize {
            let src: Vec<u8> = (0..n * 4).map(|i| i as u8).collect();
            let mut dst = vec![0xAAu8; n * 3];
            rgba_to_rgb(&src, &mut dst);
            let expect: Vec<u8> = src.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
            assert_eq!(dst, expect, "n = {n}");
        }
    }
}
