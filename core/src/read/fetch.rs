//! The CPU fetch: tiles needed → cache lookup → tile location ([`locate_tile`]) → read plan →
//! positional reads ([`ReadPlan::read_into`]) → parallel decode → cache insert. Returns decoded
//! tiles; assembling them into an output is [`super::assemble`].

use std::sync::Arc;

use crate::cache::{TileCache, TileKey};
use crate::codec::reduce::decode_chunk_reduced;
use crate::codec::stack::decode_ndpi_stack;
use crate::codec::{decode_chunk, decode_chunk_part_with, DecodedTile, PartRect};
use crate::error::{Error, Location, Result};
use crate::index::{ImageIndex, TileStream};
use crate::io::multi::address;
use crate::io::plan::{plan_reads, pool_threads, PlanOptions, Want};
use crate::io::ByteSource;
use crate::read::locate::{locate_tile, tile_location};
use crate::read::partial::ScanMemory;

/// Where decoded tiles may be cached: the cache and the key prefix (slide id, level).
#[derive(Clone, Copy)]
pub(crate) struct CacheSlot<'a> {
    /// The host tile cache.
    pub cache: &'a TileCache,
    /// Slide id of the keys.
    pub slide: u64,
    /// Level of the keys.
    pub level: u32,
    /// What earlier decodes learnt of the slide's tiles' scans.
    pub scans: &'a ScanMemory,
}

/// Inputs shared by one fetch: one image (level or associated image) of one slide.
pub(crate) struct Batch<'a> {
    /// The slide's bytes.
    pub src: &'a dyn ByteSource,
    /// The image whose tiles are fetched.
    pub image: &'a ImageIndex,
    /// Location of the image (file + level or associated name), for errors.
    pub at: &'a Location,
    /// Read coalescing.
    pub plan: &'a PlanOptions,
    /// Cache to look up and fill (`None`: associated images are not cached).
    pub cache: Option<CacheSlot<'a>>,
    /// Pool for parallel decodes (`None` = rayon's global pool); reads go to the I/O pool
    /// ([`crate::io::pool`]).
    pub pool: Option<&'a rayon::ThreadPool>,
    /// Working-set budget of one call in bytes (the waves of [`super::waves`]).
    pub working_bytes: u64,
    /// Decode every tile reduced by this factor over this background
    /// ([`decode_chunk_reduced`]; thumbnails) instead of at full size; such tiles bypass the
    /// cache.
    pub reduce: Option<(u32, [u8; 3])>,
}

/// Decode the tiles at `coords` (column, row; **each listed once**) of one image. Returns one
/// entry per coordinate: `None` for a missing tile, else the decoded tile.
///
/// `parts`, when given (one entry per coordinate), asks for only a sub-rectangle of a tile that
/// is not cached: such tiles are decoded partially ([`crate::codec::decode_chunk_part`]) and
/// not cached; whole tiles are cached. With a cache slot, each decode's outcome is remembered
/// ([`ScanMemory`]): a tile that failed fails again at once, and a part of a tile whose scan
/// was read cleanly is cropped the cheap way. [`decode_tiles`] with every tile located first
/// and the outcomes joined into one result.
///
/// # Errors
/// Tile location errors as [`locate_tile`] documents (before anything is read); an I/O error
/// naming the first tile of the first failed request; else, on a corrupt tile, the first error
/// (naming file, level and tile); tiles that did decode are still cached.
pub(crate) fn fetch_tiles(b: &Batch<'_>, coords: &[(u64, u64)], parts: Option<&[Option<PartRect>]>) -> Result<Vec<Option<Arc<DecodedTile>>>> {
    fetch_tiles_with(b, coords, parts, None)
}

/// A consumer of decoded tiles: called with (index into the call's `coords`, tile) by the
/// thread that decoded the tile (or found it cached), right after; from several threads at
/// once. Lets a batch place each tile into its patches while its pixels are still in the
/// core's cache, instead of in a pass of its own after the whole wave.
pub(crate) type OnTile<'a> = &'a (dyn Fn(usize, &DecodedTile) + Sync);

/// [`fetch_tiles`], handing every present tile to `on_tile` as soon as it is decoded or found
/// in the cache (missing and failed tiles are not handed over). Errors as [`fetch_tiles`];
/// tiles decoded before an error have been handed over.
pub(crate) fn fetch_tiles_with(
    b: &Batch<'_>,
    coords: &[(u64, u64)],
    parts: Option<&[Option<PartRect>]>,
    on_tile: Option<OnTile<'_>>,
) -> Result<Vec<Option<Arc<DecodedTile>>>> {
    for &(col, row) in coords {
        locate_tile(b.image, b.src, col, row, b.at)?;
    }
    let mut read = (0, 0);
    let outcomes = decode_tiles_counted(b, coords, parts, on_tile, &mut read);
    if let Some(e) = outcomes.iter().find_map(|o| o.as_ref().err().filter(|e| matches!(e, Error::Io { .. } | Error::Interrupted))) {
        return Err(e.clone());
    }
    outcomes.into_iter().collect()
}

/// The read layer's tile decoding, for every back end that decodes on the CPU (the CPU read
/// path through [`fetch_tiles`], the GPU engine for the tiles nvJPEG does not take): the tiles
/// at `coords` (each listed once) of one image, each with its own outcome: `Ok(None)` for a
/// missing tile, `Ok(Some(tile))`, or the tile's error. On the way: the host tile cache
/// (looked up first; whole tiles inserted), one coalesced read plan ([`ReadPlan::read_into`]),
/// the partial-decode rule for `parts` (as [`fetch_tiles`] documents), the slide's memory of
/// tile outcomes ([`ScanMemory`]), NDPI column stacks ([`decode_ndpi_stack`]) and the parallel
/// decode in `b.pool` with the calling thread taking part.
///
/// Errors per tile: its location error ([`locate_tile`]; the tile is not read), an I/O error of
/// the request that carried it (naming the tile), its decode error (naming file, level, tile).
///
/// [`ReadPlan::read_into`]: crate::io::plan::ReadPlan::read_into
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // called by the GPU engine's CPU workers
pub(crate) fn decode_tiles(b: &Batch<'_>, coords: &[(u64, u64)], parts: Option<&[Option<PartRect>]>) -> DecodedTiles {
    let mut read = (0, 0);
    let tiles = decode_tiles_counted(b, coords, parts, None, &mut read);
    DecodedTiles { tiles, read_bytes: read.0, read_requests: read.1 }
}

/// What [`decode_tiles`] returns (the read counts serve the GPU engine's statistics).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) struct DecodedTiles {
    /// One outcome per coordinate.
    pub tiles: Vec<Result<Option<Arc<DecodedTile>>>>,
    /// Bytes the call's read plan read (0 when every tile was cached, missing or failed to
    /// locate).
    pub read_bytes: u64,
    /// Requests of that plan.
    pub read_requests: u64,
}

fn decode_tiles_counted(
    b: &Batch<'_>,
    coords: &[(u64, u64)],
    parts: Option<&[Option<PartRect>]>,
    on_tile: Option<OnTile<'_>>,
    read: &mut (u64, u64),
) -> Vec<Result<Option<Arc<DecodedTile>>>> {
    let img = b.image;
    let planes = img.planes();
    let mut out: Vec<Result<Option<Arc<DecodedTile>>>> = (0..coords.len()).map(|_| Ok(None)).collect();
    let mut misses: Vec<usize> = Vec::new();
    let mut wants: Vec<Want> = Vec::new();
    let mut hits: Vec<(usize, Arc<DecodedTile>)> = Vec::new();
    for (i, &(col, row)) in coords.iter().enumerate() {
        match locate_tile(img, b.src, col, row, b.at) {
            Ok(Some(_)) => {}
            Ok(None) => continue, // missing → background
            Err(e) => {
                out[i] = Err(e);
                continue;
            }
        }
        if let Some(slot) = b.cache.filter(|_| b.reduce.is_none()) {
            if let Some(t) = slot.cache.get(&TileKey { slide: slot.slide, level: slot.level, col, row }) {
                if on_tile.is_some() {
                    hits.push((i, t.clone()));
                }
                out[i] = Ok(Some(t));
                continue;
            }
        }
        for (p, l) in img.tile_locs(col, row).enumerate() {
            wants.push(Want { id: misses.len() * planes + p, offset: address(l), len: l.length });
        }
        misses.push(i);
    }
    // Cached tiles go to `on_tile` in parallel with the decodes below (as units of their own),
    // or here when nothing is to be decoded.
    let hand_over = |(i, t): &(usize, Arc<DecodedTile>)| {
        if let Some(f) = on_tile {
            f(*i, t);
        }
    };
    if misses.is_empty() {
        if pool_threads(b.pool) > 1 && hits.len() > 1 {
            shared_decode(b.pool, &hits, hand_over);
        } else {
            hits.iter().for_each(hand_over);
        }
        return out;
    }
    let plan = plan_reads(&wants, b.plan);
    let mut buf = vec![0u8; plan.read_bytes() as usize];
    let mut results = plan.read_into(b.src, &mut buf);
    *read = (plan.read_bytes(), plan.requests.len() as u64);
    // A failed request fails the tiles it carried: the first gets the error itself, the
    // others a copy (`Error::io_shared`); those tiles are not decoded.
    let mut unread = vec![false; misses.len()];
    for (k, r) in results.iter_mut().enumerate() {
        if r.is_err() {
            let e = std::mem::replace(r, Err(std::io::Error::other("reported per tile"))).expect_err("checked");
            let mut tiles: Vec<usize> = plan.requests[k].members.iter().map(|&(id, _, _)| id / planes).filter(|&m| !unread[m]).collect();
            tiles.sort_unstable();
            tiles.dedup();
            let at = |m: usize| tile_location(b.at, b.src, img, coords[misses[m]].0, coords[misses[m]].1);
            for &m in tiles.iter().skip(1) {
                unread[m] = true;
                out[misses[m]] = Err(Error::io_shared(&at(m), &e));
            }
            if let Some(&m) = tiles.first() {
                unread[m] = true;
                out[misses[m]] = Err(Error::io(&at(m), e));
            }
        }
    }
    if unread.iter().all(|&u| u) {
        return out;
    }
    // Where each (miss, plane) lies in `buf`.
    let mut slices: Vec<&[u8]> = vec![&[]; misses.len() * planes];
    for (id, bytes) in plan.slices(&buf, &results) {
        slices[id] = bytes.unwrap_or(&[]);
    }
    let decode_one = |(m, &i): (usize, &usize)| -> Result<Arc<DecodedTile>> {
        let (col, row) = coords[i];
        let tat = tile_location(b.at, b.src, img, col, row);
        let chunks = &slices[m * planes..(m + 1) * planes];
        let g = img.chunk_geometry(col, row);
        let (vw, vh) = (g.valid_width, g.valid_height);
        let memory = b.cache.filter(|_| b.reduce.is_none()).map(|s| (s.scans, (s.level, col, row)));
        let known = memory.and_then(|(m, k)| m.get(k));
        if let Some(Some(e)) = known {
            return Err(e);
        }
        let r = match (b.reduce, parts.and_then(|p| p[i])) {
            (Some((factor, bg)), _) => decode_chunk_reduced(&img.codec, chunks, g, factor, bg, &tat),
            (None, Some(want)) => decode_chunk_part_with(&img.codec, chunks, g, want, &tat, known.is_some()),
            (None, None) => decode_chunk(&img.codec, chunks, g, &tat),
        }
        .map_err(|e| e.with_tile(col, row));
        if let (Some((m, k)), None) = (memory, known) {
            match &r {
                Ok(_) => m.put(k, None),
                Err(e @ (Error::Format { .. } | Error::Limits { .. })) => m.put(k, Some(e.clone())),
                Err(_) => {}
            }
        }
        let t = r?;
        let whole = b.reduce.is_none() && t.x == 0 && t.y == 0 && t.width == vw && t.height == vh;
        let t = Arc::new(t);
        if let (Some(slot), true) = (b.cache, whole) {
            slot.cache.insert(TileKey { slide: slot.slide, level: slot.level, col, row }, t.clone());
        }
        Ok(t)
    };
    // Units of work: single tiles, or stacks of NDPI tiles decoded as one JPEG (`stack_units`).
    // A stack with a tile whose read failed is decoded tile by tile (a stack is consecutive
    // rows only).
    let units: Vec<Vec<usize>> = stack_units(b, coords, &misses, parts)
        .into_iter()
        .flat_map(|u| if u.iter().any(|&m| unread[m]) { u.into_iter().filter(|&m| !unread[m]).map(|m| vec![m]).collect() } else { vec![u] })
        .collect();
    // Costliest units first (the read layer's decode cost model), so the workers' last units
    // are the cheap ones and they finish together; cached tiles handed to `on_tile` last.
    let mut units: Vec<Unit> = units.into_iter().map(Unit::Decode).chain((0..hits.len()).map(Unit::Hit)).collect();
    let unit_cost = |u: &Unit| -> f64 {
        match u {
            Unit::Hit(_) => 0.0,
            Unit::Decode(u) => u
                .iter()
                .map(|&m| {
                    let (col, row) = coords[misses[m]];
                    crate::read::partial::decode_cost(parts.and_then(|p| p[misses[m]]), img.valid_tile_size(col, row))
                })
                .sum(),
        }
    };
    units.sort_by(|a, b| unit_cost(b).total_cmp(&unit_cost(a)));
    let decode_stack = |unit: &Vec<usize>| -> Vec<(usize, Result<Arc<DecodedTile>>)> {
        if unit.len() > 1 {
            let (col, row) = coords[misses[unit[0]]];
            let g = img.chunk_geometry(col, row);
            let runs: Vec<&[u8]> = unit.iter().map(|&m| slices[m * planes]).collect();
            let wants: Vec<PartRect> = unit.iter().filter_map(|&m| parts.and_then(|p| p[misses[m]])).collect();
            if let Ok(tiles) = decode_ndpi_stack(&img.codec, &runs, g, &wants, b.at) {
                return unit.iter().zip(tiles).map(|(&m, t)| (m, Ok(Arc::new(t)))).collect();
            }
            // A damaged run (or parts that do not stack): tile by tile, to name the tile.
        }
        unit.iter().map(|&m| (m, decode_one((m, &misses[m])))).collect()
    };
    let decode_unit = |unit: &Unit| -> Vec<(usize, Result<Arc<DecodedTile>>)> {
        match unit {
            Unit::Hit(k) => {
                hand_over(&hits[*k]);
                Vec::new()
            }
            Unit::Decode(u) => {
                let done = decode_stack(u);
                if let Some(f) = on_tile {
                    for (m, r) in &done {
                        if let Ok(t) = r {
                            f(misses[*m], t);
                        }
                    }
                }
                done
            }
        }
    };
    // Parallelism only pays with more than one unit of work and more than one worker.
    let done: Vec<Vec<(usize, Result<Arc<DecodedTile>>)>> = if pool_threads(b.pool) > 1 && units.len() > 1 {
        shared_decode(b.pool, &units, decode_unit)
    } else {
        units.iter().map(decode_unit).collect()
    };
    for (m, r) in done.into_iter().flatten() {
        out[misses[m]] = r.map(Some);
    }
    out
}

/// One unit of [`decode_tiles_counted`]'s parallel work.
enum Unit {
    /// Misses (indices into its `misses`) decoded together: one tile, or an NDPI stack.
    Decode(Vec<usize>),
    /// A cached tile (index into its `hits`) handed to the `on_tile` consumer.
    Hit(usize),
}

/// Run `f` over `units` on the calling thread and helper tasks of `pool` (rayon's global
/// pool for `None`; as many helpers as the pool has threads beyond the calls decoding at the
/// moment, this one included) together, each taking the next unit until none is left;
/// results in no particular order. The caller decodes instead of sleeping while the
/// pool works (a call of a few tiles, one patch, ends as soon as its tiles are done, without
/// waiting for a pool thread to wake for each), and a pool busy with other callers' work
/// never holds a caller up: its helpers then start late, or find nothing left.
fn shared_decode<U: Sync, R: Send>(pool: Option<&rayon::ThreadPool>, units: &[U], f: impl Fn(&U) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let next = AtomicUsize::new(0);
    let sink: std::sync::Mutex<Vec<R>> = std::sync::Mutex::new(Vec::with_capacity(units.len()));
    let work = || {
        let mut mine = Vec::new();
        loop {
            let k = next.fetch_add(1, Relaxed);
            let Some(u) = units.get(k) else { break };
            mine.push(f(u));
        }
        if !mine.is_empty() {
            sink.lock().unwrap_or_else(|p| p.into_inner()).extend(mine);
        }
    };
    // The pool's threads are shared among the calls decoding at this moment: a caller alone
    // gets them all as helpers, as many callers as threads decode each on their own thread
    // (no handing over at all, the fastest way when every core has a caller).
    let active = Active::enter();
    let helpers = pool_threads(pool).saturating_sub(active.count).min(units.len() - 1);
    let work = &work;
    match pool {
        Some(p) => p.in_place_scope(|s| {
            (0..helpers).for_each(|_| s.spawn(move |_| work()));
            work();
        }),
        None => rayon::in_place_scope(|s| {
            (0..helpers).for_each(|_| s.spawn(move |_| work()));
            work();
        }),
    }
    sink.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// Calls of [`shared_decode`] running in this process.
static ACTIVE_DECODES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One running [`shared_decode`]: counted in [`ACTIVE_DECODES`] while alive.
struct Active {
    /// Running calls, this one included, when it started.
    count: usize,
}

impl Active {
    fn enter() -> Active {
        Active { count: ACTIVE_DECODES.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE_DECODES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Group the misses (indices into `misses`) into units of work. NDPI levels at full scale whose
/// tiles are 8 pixels high (no vertical chroma upsampling across tile edges): the partial
/// decodes of tiles in consecutive rows of one column that need the same columns, the first
/// down to its bottom and the next from their top, become one stack of at most
/// [`MAX_STACK`] tiles, decoded as one JPEG ([`decode_ndpi_stack`]); every other miss is a unit
/// of its own.
fn stack_units(b: &Batch<'_>, coords: &[(u64, u64)], misses: &[usize], parts: Option<&[Option<PartRect>]>) -> Vec<Vec<usize>> {
    let img = b.image;
    let stackable = matches!(img.codec.stream, TileStream::NdpiRestartRun { scale_denom: 1, .. }) && img.tile_height == 8 && b.reduce.is_none();
    let Some(parts) = parts.filter(|_| stackable && misses.len() > 1) else {
        return (0..misses.len()).map(|m| vec![m]).collect();
    };
    let mut order: Vec<usize> = (0..misses.len()).collect();
    order.sort_by_key(|&m| (coords[misses[m]].0, coords[misses[m]].1));
    let mut units: Vec<Vec<usize>> = Vec::new();
    for m in order {
        let (col, row) = coords[misses[m]];
        let joins = |unit: &Vec<usize>| -> bool {
            let last = *unit.last().expect("non-empty");
            let (lc, lr) = coords[misses[last]];
            match (parts[misses[last]], parts[misses[m]]) {
                (Some(a), Some(w)) => {
                    unit.len() < MAX_STACK && lc == col && lr + 1 == row && a.x == w.x && a.w == w.w && a.y + a.h == img.tile_height && w.y == 0
                }
                _ => false,
            }
        };
        match units.last_mut() {
            Some(u) if joins(u) => u.push(m),
            _ => units.push(vec![m]),
        }
    }
    units
}

/// Most NDPI tiles decoded as one stack.
const MAX_STACK: usize = 256;

/// Deduplicate `coords` for [`fetch_tiles`]: the unique coordinates in order of first use, and
/// for every entry of `coords` the index of its unique coordinate.
pub(crate) fn dedup_coords(coords: &[(u64, u64)]) -> (Vec<(u64, u64)>, Vec<usize>) {
    let mut first: std::collections::HashMap<(u64, u64), usize> = std::collections::HashMap::with_capacity(coords.len());
    let mut unique = Vec::with_capacity(coords.len());
    let which = coords
        .iter()
        .map(|&c| {
            *first.entry(c).or_insert_with(|| {
                unique.push(c);
                unique.len() - 1
            })
        })
        .collect();
    (unique, which)
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
