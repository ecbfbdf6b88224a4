//! The CPU read entry points of [`Slide`]: thin wrappers over the read layer
//! ([`crate::read`]): plan ([`BatchPlan`]), validate ([`crate::read::locate`]), fetch, assemble.

use std::sync::Arc;

use crate::codec::{DecodedTile, PartRect};
use crate::error::{Error, Location, Result};
use crate::index::ImageIndex;
use crate::read::assemble::{assemble_rgba, place_rgba};
use crate::read::batch_plan::{BatchPlan, LevelGeom, TileNeed};
use crate::read::fetch::{dedup_coords, Batch, CacheSlot};
use crate::read::waves::fetch_waves;
use crate::read::{batch_bytes, locate, partial_part, region_bytes};

use super::patches::{read_patches_into, PatchRequest, ReadOptions};
use super::{alloc_pixels, Rgba, Slide};

impl Slide {
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
    /// exceeds `max_region_bytes`, a tile claims more than [`crate::read::MAX_TILE_BYTES`], or
    /// one tile would need more than `read_working_bytes` to decode (before anything is read);
    /// [`Error::Format`] / [`Error::Io`] naming level and tile when a tile cannot be read or
    /// decoded; [`Error::Interrupted`] when the process's interrupt check ([`crate::interrupt`]) fires
    /// between two waves of tiles. The slide stays usable after any error. (The kinds are
    /// those of [`crate::read::locate`].)
    ///
    /// Memory: the output plus one wave of tiles (at most `read_working_bytes`, default
    /// 192 MiB), plus what the shared tile cache holds (its own budget).
    pub fn read_region(&self, location: (i64, i64), level: usize, size: (u64, u64)) -> Result<Rgba> {
        let bytes = self.region_bytes(size)?;
        let mut data = alloc_pixels(bytes);
        self.read_region_filled(location, level, size, &mut data, true)?;
        Ok(Rgba { width: size.0, height: size.1, data })
    }

    /// RGBA bytes of a region of `size`, checked against `max_region_bytes`
    /// ([`crate::read::region_bytes`]).
    pub(super) fn region_bytes(&self, size: (u64, u64)) -> Result<usize> {
        region_bytes(size, self.config.max_region_bytes, &Location::file(self.index.path()))
    }

    /// Like [`read_region`](Self::read_region) but fills the caller's buffer `out`
    /// (exactly `width × height × 4` bytes, row-major RGBA). Every byte of `out` is written.
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region), plus [`Error::Usage`] when `out` has the wrong length.
    pub fn read_region_into(&self, location: (i64, i64), level: usize, size: (u64, u64), out: &mut [u8]) -> Result<()> {
        self.read_region_filled(location, level, size, out, false)
    }

    /// [`read_region_into`](Self::read_region_into); `zeroed`: `out` is known to hold zeros
    /// already ([`alloc_pixels`]), so the first wave places its tiles without zeroing it again.
    fn read_region_filled(&self, location: (i64, i64), level: usize, size: (u64, u64), out: &mut [u8], zeroed: bool) -> Result<()> {
        let bytes = self.region_bytes(size)?;
        if out.len() != bytes {
            return Err(Error::Usage(format!("output buffer holds {} bytes, region needs {bytes}", out.len())));
        }
        let (img, ds, at) = locate::level(&self.index, level)?;
        let geom = LevelGeom { slide: self.id, level: level as u32, image: img, downsample: ds };
        let plan = BatchPlan::build(&geom, &[location], size);
        if plan.tiles.is_empty() {
            if !zeroed {
                out.fill(0);
            }
            return Ok(());
        }
        let batch = self.level_batch(img, &at, level);
        let tile_size = (img.tile_width, img.tile_height);
        // Tiles arrive in waves: the first zeroes the output, every wave places its tiles.
        let mut wave_tiles: Vec<Option<Arc<DecodedTile>>> = vec![None; plan.tiles.len()];
        let mut first = true;
        self.fetch_planned(&batch, img, &plan.tiles, |wave, tiles| {
            set_wave(&mut wave_tiles, wave, tiles);
            if std::mem::take(&mut first) && !zeroed {
                assemble_rgba(&plan, 0, tile_size, &wave_tiles, out);
            } else {
                place_rgba(&plan, 0, tile_size, &wave_tiles, out);
            }
            clear_wave(&mut wave_tiles, wave);
            Ok(())
        })
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
    /// The one-slide form of [`super::patches::read_patches_into`]: tiles shared by several
    /// patches are read and decoded once, in file order, in waves that hold at most
    /// `read_working_bytes` ([`crate::config::Config`]); each tile is placed into the patches
    /// that use it by the thread that decoded it, so the call's memory is its output plus one
    /// wave (plus what the shared tile cache holds).
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region), except that the limit applies to the whole output
    /// (`n × height × width × 3` bytes ≤ `max_region_bytes`, [`Error::Limits`]: the rule of
    /// every batch entry point, [`crate::read::batch_bytes`]); [`Error::Usage`] when `out` has
    /// the wrong length.
    pub fn read_regions_rgb_into(&self, locations: &[(i64, i64)], level: usize, size: (u64, u64), background: [u8; 3], out: &mut [u8]) -> Result<()> {
        let total = batch_bytes(locations.len(), size, 3, self.config.max_region_bytes, &Location::file(self.index.path()))?;
        if total != out.len() {
            return Err(Error::Usage(format!(
                "output buffer holds {} bytes, {} patches of {}x{} RGB need {total}",
                out.len(),
                locations.len(),
                size.0,
                size.1,
            )));
        }
        if total == 0 {
            // Still a typed error for a level the slide does not have.
            locate::level(&self.index, level)?;
            return Ok(());
        }
        let requests: Vec<PatchRequest<'_>> = locations.iter().map(|&location| PatchRequest { slide: self, level, location }).collect();
        read_patches_into(&requests, &ReadOptions { size, background }, out)
    }

    /// [`read_regions_rgb_into`](Self::read_regions_rgb_into) into a new buffer of
    /// `n × height × width × 3` bytes (patch after patch, row-major RGB), allocated only once
    /// the batch limit has been checked.
    ///
    /// # Errors
    /// As [`read_regions_rgb_into`](Self::read_regions_rgb_into).
    pub fn read_regions_rgb(&self, locations: &[(i64, i64)], level: usize, size: (u64, u64), background: [u8; 3]) -> Result<Vec<u8>> {
        let total = batch_bytes(locations.len(), size, 3, self.config.max_region_bytes, &Location::file(self.index.path()))?;
        let mut out = alloc_pixels(total);
        self.read_regions_rgb_into(locations, level, size, background, &mut out)?;
        Ok(out)
    }

    /// Decode the tiles at `coords` (column, row) of `level` through the pipeline (cache, read
    /// plan, parallel decode), returning how many were decoded or found cached (missing tiles
    /// excluded). A tile listed twice is read and decoded once. Used by `slidestream tiles` and
    /// benchmarks.
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region); [`Error::Usage`] for a tile outside the grid.
    pub fn read_tiles(&self, level: usize, coords: &[(u64, u64)]) -> Result<usize> {
        let (img, _, at) = locate::level(&self.index, level)?;
        let batch = self.level_batch(img, &at, level);
        let (unique, which) = dedup_coords(coords);
        let mut present = vec![false; unique.len()];
        fetch_waves(&batch, &unique, None, |wave, tiles| {
            for (&i, t) in wave.iter().zip(tiles) {
                present[i] = t.is_some();
            }
            Ok(())
        })?;
        Ok(which.iter().filter(|&&k| present[k]).count())
    }

    /// Fetch the planned tiles of one level wave by wave ([`fetch_waves`]), each decoded
    /// partially where the batch needs a small part of it (`partial_decode_max_fraction`);
    /// `place` gets each wave as (indices into `needs`, tiles).
    fn fetch_planned(
        &self,
        batch: &Batch<'_>,
        img: &ImageIndex,
        needs: &[TileNeed],
        place: impl FnMut(&[usize], &[Option<Arc<DecodedTile>>]) -> Result<()>,
    ) -> Result<()> {
        let coords: Vec<(u64, u64)> = needs.iter().map(|t| (t.key.col, t.key.row)).collect();
        let parts: Vec<Option<PartRect>> = needs.iter().map(|t| self.part_if_small(img, (t.key.col, t.key.row), t.part)).collect();
        fetch_waves(batch, &coords, Some(&parts), place)
    }

    /// Whether the host tile cache holds tile (`col`, `row`) of `level` (whole), without
    /// counting a cache hit: the GPU engine decodes such a tile on the CPU path, which takes
    /// it from the cache.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn host_cached(&self, level: usize, col: u64, row: u64) -> bool {
        self.cache.contains(&crate::cache::TileKey { slide: self.id, level: level as u32, col, row })
    }

    /// The outcome remembered for tile (`col`, `row`) of `level` ([`ScanMemory`]): `None`
    /// unknown, `Some(None)` its scan decoded cleanly, `Some(Some(e))` it fails with `e`.
    ///
    /// [`ScanMemory`]: crate::read::partial::ScanMemory
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn scan_outcome(&self, level: usize, col: u64, row: u64) -> Option<Option<Error>> {
        self.scans.get((level as u32, col, row))
    }

    /// Remember how a whole-scan decode of tile (`col`, `row`) of `level` ended, as the CPU
    /// fetch does: success, or a `Format` / `Limits` error (other errors are not the tile's).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn note_scan(&self, level: usize, col: u64, row: u64, outcome: std::result::Result<(), &Error>) {
        match outcome {
            Ok(()) => self.scans.put((level as u32, col, row), None),
            Err(e @ (Error::Format { .. } | Error::Limits { .. })) => self.scans.put((level as u32, col, row), Some(e.clone())),
            Err(_) => {}
        }
    }

    /// A fetch over one level, cached in this slide's tile cache.
    pub(crate) fn level_batch<'a>(&'a self, img: &'a ImageIndex, at: &'a Location, level: usize) -> Batch<'a> {
        Batch {
            src: &*self.src,
            image: img,
            at,
            plan: &self.config.plan,
            cache: Some(CacheSlot { cache: &self.cache, slide: self.id, level: level as u32, scans: &self.scans }),
            pool: self.pool.as_deref(),
            working_bytes: self.config.read_working_bytes,
            reduce: None,
        }
    }

    /// The part `part` of tile `coord` when it is small enough to decode partially under
    /// `partial_decode_max_fraction` ([`crate::read::partial_part`]).
    pub(crate) fn part_if_small(&self, img: &ImageIndex, coord: (u64, u64), part: (u64, u64, u64, u64)) -> Option<PartRect> {
        partial_part(self.config.partial_decode_max_fraction, img.valid_tile_size(coord.0, coord.1), part)
    }
}

/// Put a wave's tiles (indices `wave` into the plan's tiles) into the plan-sized `slots`.
fn set_wave(slots: &mut [Option<Arc<DecodedTile>>], wave: &[usize], tiles: &[Option<Arc<DecodedTile>>]) {
    for (&i, t) in wave.iter().zip(tiles) {
        slots[i] = t.clone();
    }
}

/// Drop a wave's tiles from `slots` once placed, so the next wave's memory replaces them.
fn clear_wave(slots: &mut [Option<Arc<DecodedTile>>], wave: &[usize]) {
    for &i in wave {
        slots[i] = None;
    }
}
