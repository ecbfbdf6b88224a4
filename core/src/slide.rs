//! [`Slide`]: an open whole-slide image. Opening and metadata are in `slide/open.rs`.

mod channels;
mod open;
pub(crate) mod patches;
mod reduced;
mod region;
mod resize;
mod thumbnail;
pub mod resize_taps;

pub use channels::ChannelRegion;
pub use patches::{read_patches, read_patches_into, PatchRequest, ReadOptions};
pub use reduced::Rgb;
pub use resize::{resize_rgb_box, resize_rgb_patches};

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use crate::cache::{CacheStats, TileCache};
use crate::config::Config;
use crate::error::{ImageRef, Location, Result};
use crate::geometry::Rect;
use crate::index::{ImageIndex, SlideIndex};
use crate::io::metrics::{IoCounters, MetricsSource};
use crate::io::multi::SourceSet;
use crate::read::assemble::blit_tile;
use crate::read::fetch::Batch;
use crate::read::waves::fetch_waves;

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
    /// Storage options of a remote slide (a URL given to [`Slide::open_with`]): the store's
    /// endpoint, region, credentials, `anonymous` ([`crate::io::remote::StorageOptions`] with
    /// feature `remote`). Empty for local paths: options given with a local path are a
    /// [`crate::Error::Usage`] error, never ignored.
    pub storage: std::collections::BTreeMap<String, String>,
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
    src: Arc<MetricsSource<SourceSet>>,
    /// What the open read (structure, tag values), before `src`'s counters were zeroed.
    open_io: IoCounters,
    id: u64,
    cache: Arc<TileCache>,
    config: Config,
    pool: Option<Arc<rayon::ThreadPool>>,
    /// The pyramid's ICC profile once read ([`Slide::icc_profile`]).
    icc: OnceLock<Option<Arc<[u8]>>>,
    /// Outcomes of earlier tile decodes (a failure is returned again; a clean scan lets later
    /// parts of the tile skip reading the rows below them).
    scans: crate::read::partial::ScanMemory,
    /// The remote object a URL slide reads (the same source as `src`'s primary), for its
    /// request counters; with what its open cost.
    #[cfg(feature = "remote")]
    remote: Option<RemoteParts>,
}

/// A remote slide's objects: the one it was opened by, all of them (with the listing), and
/// what the open cost.
#[cfg(feature = "remote")]
#[derive(Debug)]
pub(crate) struct RemoteParts {
    pub(crate) primary: Arc<crate::io::remote::RemoteSource>,
    pub(crate) files: Arc<crate::io::remote::files::RemoteFiles>,
    pub(crate) at_open: crate::io::remote::RemoteStats,
}

impl Drop for Slide {
    /// Purge this slide's tiles from every registered cache (the host cache it was opened with
    /// and, on the GPU path, the device caches): [`crate::cache::registry`].
    fn drop(&mut self) {
        crate::cache::registry::purge_slide(self.id);
    }
}

impl Slide {
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
    pub(crate) fn source(&self) -> &MetricsSource<SourceSet> {
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
    /// `max_region_bytes` or when one tile needs more than the working set
    /// (`read_working_bytes`); decoding errors as [`read_region`](Self::read_region). Tiles are
    /// read in waves within the working set, as every CPU read is.
    pub fn read_associated(&self, name: &str) -> Result<Rgba> {
        let img = self.associated_image(name)?;
        let at = Location::file(self.index.path()).with_image(ImageRef::Associated(name.to_string()));
        let bytes = self.region_bytes((img.width, img.height))?;
        let mut data = vec![0u8; bytes];
        let coords: Vec<(u64, u64)> = (0..img.tiles_down()).flat_map(|r| (0..img.tiles_across()).map(move |c| (c, r))).collect();
        let batch = Batch { src: &*self.src, image: img, at: &at, plan: &self.config.plan, cache: None, pool: self.pool.as_deref(), working_bytes: self.config.read_working_bytes, reduce: None };
        let rect = Rect { x: 0, y: 0, w: img.width, h: img.height };
        fetch_waves(&batch, &coords, None, |wave, tiles| {
            for (&i, tile) in wave.iter().zip(tiles) {
                if let Some(t) = tile {
                    let (col, row) = coords[i];
                    blit_tile(t, col * img.tile_width as u64, row * img.tile_height as u64, &rect, &mut data);
                }
            }
            Ok(())
        })?;
        Ok(Rgba { width: img.width, height: img.height, data })
    }
}
