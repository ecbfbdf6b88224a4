//! [`Slide`]: an open whole-slide image.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::cache::{CacheStats, TileCache};
use crate::config::Config;
use crate::error::{Error, ImageRef, Location, Result};
use crate::format::{self, DetectionReport, Probe};
use crate::geometry::{best_level_for_downsample, Rect};
use crate::index::{ImageIndex, SlideIndex};
use crate::io::metrics::{IoCounters, MetricsSource};
use crate::io::posix::FileSource;
use crate::io::ByteSource;
use crate::read::assemble::blit_tile;
use crate::read::fetch::{fetch_tiles, Batch};
use crate::tiff::TiffFile;

mod region;

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
    /// What the open read (structure, tag values), before `src`'s counters were zeroed.
    open_io: IoCounters,
    id: u64,
    cache: Arc<TileCache>,
    config: Config,
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl Drop for Slide {
    /// Purge this slide's tiles from every registered cache (the host cache it was opened with
    /// and, on the GPU path, the device caches): [`crate::cache::registry`].
    fn drop(&mut self) {
        crate::cache::registry::purge_slide(self.id);
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
        let open_io = src.counters();
        src.reset();
        let cache = match opts.cache {
            Some(c) => c,
            None => TileCache::global()?,
        };
        crate::cache::registry::register_cache(&cache);
        Ok(Slide {
            index: Arc::new(index),
            src,
            open_io,
            id: NEXT_SLIDE_ID.fetch_add(1, Ordering::Relaxed),
            cache,
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

    /// Bytes and requests read from the file since open (structure reads at open excluded:
    /// see [`Slide::open_io_counters`]).
    pub fn io_counters(&self) -> IoCounters {
        self.src.counters()
    }

    /// Bytes and requests the open itself read (TIFF structure, tag values, what the format
    /// driver read to detect and index the file); not included in [`Slide::io_counters`].
    pub fn open_io_counters(&self) -> IoCounters {
        self.open_io
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
        crate::read::locate::level(&self.index, level)
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
