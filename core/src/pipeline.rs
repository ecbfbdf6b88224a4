//! The batch pipeline: tiles needed → cache lookup → read plan → positional reads → parallel
//! decode → cache insert. Region assembly (cropping tiles into the output) lives in
//! [`crate::slide`]; this module returns decoded tiles.

use std::sync::Arc;

use rayon::prelude::*;

use crate::cache::{TileCache, TileKey};
use crate::codec::{decode_chunk, decode_chunk_part, ChunkGeometry, DecodedTile, PartRect};
use crate::error::{Error, Location, Result};
use crate::index::{ImageIndex, SourceId};
use crate::io::plan::{plan_reads, PlanOptions, Want};
use crate::io::ByteSource;

/// Largest compressed chunk accepted, in bytes (a 16384² RGBA tile stored raw is 1 GiB).
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// Where decoded tiles may be cached: the cache and the key prefix (slide id, level).
#[derive(Clone, Copy)]
pub(crate) struct CacheSlot<'a> {
    pub cache: &'a TileCache,
    pub slide: u64,
    pub level: u32,
}

/// Inputs shared by one batch.
pub(crate) struct Batch<'a> {
    pub src: &'a dyn ByteSource,
    pub image: &'a ImageIndex,
    /// Location of the image (file + level or associated name), for errors.
    pub at: &'a Location,
    pub plan: &'a PlanOptions,
    pub cache: Option<CacheSlot<'a>>,
    /// Pool for parallel work (`None` = rayon's global pool).
    pub pool: Option<&'a rayon::ThreadPool>,
}

/// Worker threads of `pool` (or of rayon's global pool).
pub(crate) fn pool_threads(pool: Option<&rayon::ThreadPool>) -> usize {
    pool.map_or_else(rayon::current_num_threads, |p| p.current_num_threads())
}

/// Run `f` (which uses rayon parallel iterators) in `pool`, or in the global pool.
pub(crate) fn in_pool<T: Send>(pool: Option<&rayon::ThreadPool>, f: impl FnOnce() -> T + Send) -> T {
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}

/// Read every request of `plan` into its own buffer: in parallel when the pool has more than
/// one worker and there is more than one request (positional reads on one descriptor are
/// independent), else on the caller's thread. `at` names the location for an I/O error.
pub(crate) fn read_requests(
    src: &dyn ByteSource,
    plan: &crate::io::plan::ReadPlan,
    pool: Option<&rayon::ThreadPool>,
    at: impl Fn(&crate::io::plan::Request) -> Location + Sync,
) -> Result<Vec<Vec<u8>>> {
    let read_one = |r: &crate::io::plan::Request| {
        let mut buf = vec![0u8; r.len as usize];
        src.read_exact_at(&mut buf, r.offset).map(|_| buf).map_err(|e| Error::io(&at(r), e))
    };
    // Parallelism only pays with more than one unit of work and more than one worker: a
    // single small read or decode, or a one-thread pool, runs faster on the caller's thread
    // than handed to the pool (no wake-up, no context switch).
    if pool_threads(pool) > 1 && plan.requests.len() > 1 {
        in_pool(pool, || plan.requests.par_iter().map(read_one).collect())
    } else {
        plan.requests.iter().map(read_one).collect()
    }
}

/// Decode the tiles at `coords` (column, row) of one image. Returns one entry per coordinate:
/// `None` for a missing tile (offset 0 or byte count 0), else the decoded tile. Every tile is
/// read and decoded at most once per call even if listed twice.
///
/// `parts`, when given (one entry per coordinate), asks for only a sub-rectangle of a tile that
/// is not cached: such tiles are decoded partially ([`decode_chunk_part`]) and not cached,
/// since a random patch rarely reuses them; whole tiles are cached.
///
/// On a corrupt tile, the first error (naming file, level and tile) is returned; tiles that did
/// decode are still cached.
pub(crate) fn fetch_tiles(
    b: &Batch<'_>,
    coords: &[(u64, u64)],
    parts: Option<&[Option<PartRect>]>,
) -> Result<Vec<Option<Arc<DecodedTile>>>> {
    let img = b.image;
    let planes = img.planes();
    let mut out: Vec<Option<Arc<DecodedTile>>> = vec![None; coords.len()];
    // Deduplicate: first index of each coordinate.
    let mut first: std::collections::HashMap<(u64, u64), usize> = std::collections::HashMap::with_capacity(coords.len());
    let mut misses: Vec<usize> = Vec::new();
    let mut wants: Vec<Want> = Vec::new();
    for (i, &(col, row)) in coords.iter().enumerate() {
        if col >= img.tiles_across() || row >= img.tiles_down() {
            return Err(Error::Usage(format!("{}: tile ({col}, {row}) outside the {}x{} tile grid", b.at, img.tiles_across(), img.tiles_down())));
        }
        if first.contains_key(&(col, row)) {
            continue;
        }
        first.insert((col, row), i);
        let Some(tile) = img.tile(col, row) else {
            continue; // missing → background
        };
        let locs = tile.locs;
        if let Some(slot) = b.cache {
            if let Some(t) = slot.cache.get(&TileKey { slide: slot.slide, level: slot.level, col, row }) {
                out[i] = Some(t);
                continue;
            }
        }
        let tile_at = || b.at.clone().with_tile(col, row);
        for (p, l) in locs.iter().enumerate() {
            if l.length > MAX_CHUNK_BYTES {
                return Err(Error::limits(&tile_at(), format!("compressed tile of {} bytes", l.length)));
            }
            if l.source != SourceId::PRIMARY {
                return Err(Error::unsupported(&tile_at(), "tile data in a second source file"));
            }
            if l.end().is_none_or(|e| e > b.src.len()) {
                return Err(Error::format(
                    &tile_at(),
                    format!("tile data at offset {} (+{} bytes) lies past the end of the file ({} bytes)", l.offset, l.length, b.src.len()),
                ));
            }
            wants.push(Want { id: misses.len() * planes + p, offset: l.offset, len: l.length });
        }
        misses.push(i);
    }
    if !misses.is_empty() {
        let plan = plan_reads(&wants, b.plan);
        let buffers = read_requests(b.src, &plan, b.pool, |r| {
            let (id, _, _) = r.members[0];
            let (col, row) = coords[misses[id / planes]];
            b.at.clone().with_tile(col, row)
        })?;
        let parallel = pool_threads(b.pool) > 1;
        // Where each (miss, plane) lives: (request, offset in request, len).
        let mut slices = vec![(0usize, 0u64, 0u64); misses.len() * planes];
        for (ri, r) in plan.requests.iter().enumerate() {
            for &(id, off, len) in &r.members {
                slices[id] = (ri, off, len);
            }
        }
        let decode_one = |(m, &i): (usize, &usize)| -> Result<Arc<DecodedTile>> {
                let (col, row) = coords[i];
                let chunks: Vec<&[u8]> = (0..planes)
                    .map(|p| {
                        let (ri, off, len) = slices[m * planes + p];
                        &buffers[ri][off as usize..(off + len) as usize]
                    })
                    .collect();
                let (vw, vh) = img.valid_tile_size(col, row);
                let g = ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: vw, valid_height: vh };
                let t = match parts.and_then(|p| p[i]) {
                    Some(want) => decode_chunk_part(&img.codec, &chunks, g, want, b.at),
                    None => decode_chunk(&img.codec, &chunks, g, b.at),
                }
                .map_err(|e| e.with_tile(col, row))?;
                let whole = t.x == 0 && t.y == 0 && t.width == vw && t.height == vh;
                let t = Arc::new(t);
                if let (Some(slot), true) = (b.cache, whole) {
                    slot.cache.insert(TileKey { slide: slot.slide, level: slot.level, col, row }, t.clone());
                }
                Ok(t)
        };
        let decoded: Vec<Result<Arc<DecodedTile>>> = if parallel && misses.len() > 1 {
            in_pool(b.pool, || misses.par_iter().enumerate().map(decode_one).collect())
        } else {
            misses.iter().enumerate().map(decode_one).collect()
        };
        let mut first_err = None;
        for (&i, r) in misses.iter().zip(decoded) {
            match r {
                Ok(t) => out[i] = Some(t),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
    }
    // Fill duplicates from their first occurrence.
    for (i, c) in coords.iter().enumerate() {
        let f = first[c];
        if f != i {
            out[i] = out[f].clone();
        }
    }
    Ok(out)
}
