//! One batch of patches across many slides and levels ([`read_patches`]): the CPU form of the
//! cross-slide batch a training loop draws. One [`BatchPlan`] holds every patch (its
//! tiles keyed by slide, level, column, row); the tiles of all slides are cut into one sequence
//! of waves within the working set, and each wave's tiles are read and decoded for all slides at
//! once (the slides' fetches run side by side on the decode pool). Each tile is placed into
//! every patch that uses it by the thread that decoded it, right away, while its pixels are
//! still in that core's cache; only patches that present tiles do not wholly cover (outside the
//! image, missing tiles) get the background first. A per-slide loop of `read_regions_rgb` calls
//! waits for each slide's few tiles in turn; this keeps every decode thread busy across slides.
//! [`Slide::read_regions_rgb_into`] is this with one slide.

use rayon::prelude::*;

use crate::codec::{DecodedTile, PartRect};
use crate::error::{Error, Location, Result};
use crate::index::ImageIndex;
use crate::read::assemble::{blit_piece_raw, blit_rgb_raw, fill_area_raw, fill_rgb};
use crate::read::batch_plan::{BatchPlan, LevelGeom};
use crate::read::fetch::{fetch_tiles_with, Batch};
use crate::read::sources::Sources;
use crate::read::waves::{charge_tile, pack_waves};
use crate::read::{batch_bytes, in_pool, locate, pool_threads};

use super::{alloc_pixels, Slide};

/// One patch of a cross-slide batch: which slide, which level, and the top-left corner in
/// **level-0** pixels of that slide (may be negative). The patch size is the batch's
/// ([`ReadOptions::size`]): one size per batch.
#[derive(Debug, Clone, Copy)]
pub struct PatchRequest<'a> {
    /// The open slide.
    pub slide: &'a Slide,
    /// Pyramid level of that slide.
    pub level: usize,
    /// (x, y) of the top-left pixel in level-0 coordinates.
    pub location: (i64, i64),
}

/// Options of a cross-slide batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// (width, height) of every patch, in pixels of its level.
    pub size: (u64, u64),
    /// RGB written outside the image and on missing tiles; partly transparent pixels are
    /// composited over it, as [`Slide::read_regions_rgb_into`] does.
    pub background: [u8; 3],
}

/// One (slide, level) of a batch.
struct Group<'a> {
    slide: &'a Slide,
    level: usize,
    image: &'a ImageIndex,
    downsample: f64,
    at: Location,
}

/// Read a batch of patches from any number of slides and levels: RGB `u8`, shape
/// (n, height, width, 3), patch `k` from `requests[k]`, pixels equal to
/// `requests[k].slide.read_regions_rgb(&[location], level, size, background)`.
///
/// Memory: the output plus one wave of tiles, at most the smallest `read_working_bytes` of the
/// slides involved, plus what their tile caches hold.
///
/// # Errors
/// [`Error::Limits`] when the output exceeds the smallest `max_region_bytes` of the slides
/// involved or a tile needs more than the working set (before anything is read); otherwise
/// as [`Slide::read_regions_rgb_into`] for the slide concerned (the first failing tile's
/// error, naming its file, level and tile); [`Error::Interrupted`] between waves.
pub fn read_patches(requests: &[PatchRequest<'_>], opts: &ReadOptions) -> Result<Vec<u8>> {
    let total = output_bytes(requests, opts)?;
    let mut out = alloc_pixels(total);
    read_patches_into(requests, opts, &mut out)?;
    Ok(out)
}

/// The output size of a batch, checked against the smallest `max_region_bytes` involved.
pub(crate) fn output_bytes(requests: &[PatchRequest<'_>], opts: &ReadOptions) -> Result<usize> {
    let Some(first) = requests.first() else { return Ok(0) };
    let limit = requests.iter().map(|r| r.slide.config.max_region_bytes).min().unwrap_or(u64::MAX);
    batch_bytes(requests.len(), opts.size, 3, limit, &Location::file(first.slide.index.path()))
}

/// Patches planned at once. A plan costs about 200 bytes a patch (its tile grid, the tile
/// table, the per-patch bookkeeping), so a call is planned and read in runs of this many
/// patches (~13 MiB of plan) whatever its length; tiles shared by two runs are found in the
/// tile cache by the second.
pub const PLAN_PATCHES: usize = 1 << 16;

/// [`read_patches`] into the caller's buffer of exactly `n × height × width × 3` bytes.
///
/// Memory beyond `out`: one run of at most [`PLAN_PATCHES`] patches' plan and one wave of
/// tiles.
///
/// # Errors
/// As [`read_patches`]; [`Error::Usage`] when `out` has the wrong length.
pub fn read_patches_into(requests: &[PatchRequest<'_>], opts: &ReadOptions, out: &mut [u8]) -> Result<()> {
    let total = output_bytes(requests, opts)?;
    if out.len() != total {
        return Err(Error::Usage(format!("output buffer holds {} bytes, {} patches of {}x{} RGB need {total}", out.len(), requests.len(), opts.size.0, opts.size.1)));
    }
    if total == 0 {
        return Ok(());
    }
    let patch_bytes = total / requests.len();
    for (n, (run, dst)) in requests.chunks(PLAN_PATCHES).zip(out.chunks_mut(PLAN_PATCHES * patch_bytes)).enumerate() {
        if n > 0 {
            crate::interrupt::check()?;
        }
        read_run(run, opts, dst)?;
    }
    Ok(())
}

/// One run of at most [`PLAN_PATCHES`] patches of [`read_patches_into`] (`out` sized for them).
fn read_run(requests: &[PatchRequest<'_>], opts: &ReadOptions, out: &mut [u8]) -> Result<()> {
    let total = out.len();
    // The (slide, level) groups in order of first use, and the one plan of every patch.
    let mut sources: Sources<Group<'_>> = Sources::new();
    let mut patch_group = Vec::with_capacity(requests.len());
    let mut plan = BatchPlan::new();
    for r in requests {
        let key = (r.slide.id, r.level as u32);
        let g = sources.index(key.0, key.1, || {
            let (image, downsample, at) = locate::level(&r.slide.index, r.level)?;
            Ok(Group { slide: r.slide, level: r.level, image, downsample, at })
        })?;
        let grp = &sources.items[g];
        plan.push(&LevelGeom { slide: key.0, level: key.1, image: grp.image, downsample: grp.downsample }, r.location, opts.size);
        patch_group.push(g);
    }
    let groups = &sources.items;
    let mut batches: Vec<Batch<'_>> = groups.iter().map(|g| g.slide.level_batch(g.image, &g.at, g.level)).collect();
    // One budget for the whole batch: the smallest of the slides involved.
    let budget = batches.iter().map(|b| b.working_bytes).min().unwrap_or(u64::MAX);
    for b in &mut batches {
        b.working_bytes = budget;
    }
    // Every tile: its group, coordinates, part and charge (refused before any read if too
    // large), then waves in (group, file offset) order.
    struct Need {
        group: usize,
        coord: (u64, u64),
        part: Option<PartRect>,
    }
    let mut needs = Vec::with_capacity(plan.tiles.len());
    let mut order = Vec::with_capacity(plan.tiles.len());
    let mut missing = vec![false; plan.tiles.len()];
    for (i, t) in plan.tiles.iter().enumerate() {
        let g = sources.get(t.key.slide, t.key.level);
        let grp = &groups[g];
        let coord = (t.key.col, t.key.row);
        let part = grp.slide.part_if_small(grp.image, coord, t.part);
        let charged = charge_tile(&batches[g], coord.0, coord.1, part)?;
        missing[i] = charged.is_none();
        let (offset, charge) = charged.unwrap_or((0, 0));
        needs.push(Need { group: g, coord, part });
        order.push(((g, offset), i, charge));
    }
    let waves = pack_waves(order, budget);
    let pool = requests[0].slide.pool.as_deref();
    let patch_bytes = total / requests.len();
    let tile_sizes: Vec<(u32, u32)> = groups.iter().map(|g| (g.image.tile_width, g.image.tile_height)).collect();
    // Background first where no present tile will cover a pixel (outside the image, missing
    // tiles); every other pixel is written by exactly one tile, as it is decoded.
    let fill = |(p, dst): (usize, &mut [u8])| {
        if !covered(&plan, p, groups[patch_group[p]].image, &missing) {
            fill_rgb(dst, opts.background);
        }
    };
    if pool_threads(pool) > 1 && requests.len() > 1 {
        in_pool(pool, || out.par_chunks_mut(patch_bytes).enumerate().for_each(fill));
    } else {
        out.chunks_mut(patch_bytes).enumerate().for_each(fill);
    }
    let users = TileUsers::build(&plan);
    let sink = SharedOut(out.as_mut_ptr());
    // Place tile `k` of the plan into every patch that uses it.
    let place = |k: usize, t: &DecodedTile| {
        for &(p, piece) in users.of(k) {
            let p = p as usize;
            let rect = plan.patches[p].rect;
            // SAFETY: patch `p` lies inside `out` (`p < n`, `patch_bytes` each), and the pixels
            // this tile or piece covers in it are written by this call only: a regular grid's
            // tiles and a positioned level's pieces are disjoint, each plan tile is decoded
            // once per wave, and the background fill above ended before any wave began.
            unsafe {
                let dst = sink.patch(p, patch_bytes);
                if piece == NO_PIECE {
                    let (tw, th) = tile_sizes[patch_group[p]];
                    let key = plan.tiles[k].key;
                    let (x0, y0) = (key.col * tw as u64, key.row * th as u64);
                    let part = plan.tiles[k].part;
                    if t.x as u64 > part.0 || t.y as u64 > part.1 || ((t.x + t.width) as u64) < part.2 || ((t.y + t.height) as u64) < part.3 {
                        // A decode that returned less than the batch needs of the tile: the
                        // rest is background, never stale memory.
                        fill_area_raw((x0 + part.0) as i64, (y0 + part.1) as i64, part.2 - part.0, part.3 - part.1, &rect, opts.background, dst);
                    }
                    blit_rgb_raw(t, x0 + t.x as u64, y0 + t.y as u64, &rect, opts.background, dst);
                } else {
                    blit_piece_raw(t, &plan.pieces[piece as usize], &rect, Some(opts.background), dst);
                }
            }
        }
    };
    for (n, wave) in waves.iter().enumerate() {
        if n > 0 {
            crate::interrupt::check()?;
        }
        let _held = crate::read::inflight::hold(wave.bytes)?;
        let wave = &wave.tiles;
        // This wave's tiles per group, fetched side by side; each tile placed by the thread
        // that decoded it, while its pixels are still in that core's cache.
        let mut per_group: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
        for &i in wave {
            per_group[needs[i].group].push(i);
        }
        let fetch = |g: usize| -> Result<()> {
            let idx = &per_group[g];
            let coords: Vec<(u64, u64)> = idx.iter().map(|&i| needs[i].coord).collect();
            let parts: Vec<Option<PartRect>> = idx.iter().map(|&i| needs[i].part).collect();
            let on_tile = |j: usize, t: &DecodedTile| place(idx[j], t);
            fetch_tiles_with(&batches[g], &coords, Some(&parts), Some(&on_tile)).map(drop)
        };
        let active: Vec<usize> = (0..groups.len()).filter(|&g| !per_group[g].is_empty()).collect();
        if pool_threads(pool) > 1 && active.len() > 1 {
            in_pool(pool, || active.par_iter().try_for_each(|&g| fetch(g)))?;
        } else {
            active.iter().try_for_each(|&g| fetch(g))?;
        }
    }
    Ok(())
}

/// Whether every pixel of patch `p` of `plan` (a patch of `img`) lies in a present tile or
/// piece: then no background is written first. `missing[k]`: tile `k` of the plan is not
/// stored. A grid patch's cells hold disjoint parts of it (`ImageIndex::part_of_tile`, within
/// each tile's valid area) and a positioned level's pieces are disjoint, so comparing areas is
/// exact.
fn covered(plan: &BatchPlan, p: usize, img: &ImageIndex, missing: &[bool]) -> bool {
    let pg = &plan.patches[p];
    let Some(clip) = pg.rect.clip(img.width, img.height) else { return false };
    let mut area = 0u64;
    for (i, &k) in plan.grid[pg.cells.clone()].iter().enumerate() {
        if missing[k] {
            return false;
        }
        let (col, row) = (pg.col0 + i as u64 % pg.cols.max(1), pg.row0 + i as u64 / pg.cols.max(1));
        let (x0, y0, x1, y1) = img.part_of_tile(&clip, col, row);
        area += x1.saturating_sub(x0) * y1.saturating_sub(y0);
    }
    for q in plan.patch_pieces(p) {
        if missing[q.tile] {
            return false;
        }
        area += q.w * q.h;
    }
    area == pg.rect.w * pg.rect.h
}

/// Marks a [`TileUsers`] entry of a regular-grid cell (not a positioned level's piece).
const NO_PIECE: u32 = u32::MAX;

/// For every tile of a plan, the patches that use it: (patch, piece index or [`NO_PIECE`]),
/// in one flat table.
struct TileUsers {
    start: Vec<usize>,
    entries: Vec<(u32, u32)>,
}

impl TileUsers {
    fn build(plan: &BatchPlan) -> TileUsers {
        let mut count = vec![0usize; plan.tiles.len() + 1];
        for pg in &plan.patches {
            for &k in &plan.grid[pg.cells.clone()] {
                count[k + 1] += 1;
            }
            for q in &plan.pieces[pg.pieces.clone()] {
                count[q.tile + 1] += 1;
            }
        }
        for k in 1..count.len() {
            count[k] += count[k - 1];
        }
        let start = count.clone();
        let mut entries = vec![(0u32, 0u32); *count.last().unwrap_or(&0)];
        for (p, pg) in plan.patches.iter().enumerate() {
            for &k in &plan.grid[pg.cells.clone()] {
                entries[count[k]] = (p as u32, NO_PIECE);
                count[k] += 1;
            }
            for (j, q) in plan.pieces[pg.pieces.clone()].iter().enumerate() {
                entries[count[q.tile]] = (p as u32, (pg.pieces.start + j) as u32);
                count[q.tile] += 1;
            }
        }
        TileUsers { start, entries }
    }

    /// The users of tile `k`.
    fn of(&self, k: usize) -> &[(u32, u32)] {
        &self.entries[self.start[k]..self.start[k + 1]]
    }
}

/// The output of a batch, written through by the decode threads (each to pixels no other
/// thread writes; see the `SAFETY` note where it is used).
struct SharedOut(*mut u8);

// SAFETY: the pointer is only dereferenced under the disjointness rule stated at its use.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The first byte of patch `p` (`patch_bytes` each).
    ///
    /// # Safety
    /// `p` is a patch of the output (`(p + 1) × patch_bytes` ≤ its length).
    unsafe fn patch(&self, p: usize, patch_bytes: usize) -> *mut u8 {
        // SAFETY: in bounds by the caller's promise.
        unsafe { self.0.add(p * patch_bytes) }
    }
}
