//! The work items of one call and its work queue: the call's sources ([`Src`]), its unique
//! tiles ([`Need`]), each tile's outcome on a decoder ([`GpuResult`]), and the tiles to decode
//! ([`Miss`]), sorted (costliest CPU decodes first, then by offset) and shared by the decoders.
//! GPU lanes take chunks from the front, CPU workers runs from the back, until the ends meet
//! (every tile is taken once). A lower layer of the engine (CONTRIBUTING.md): the I/O
//! functions and the decoders take these types, never the engine's.

use std::sync::{Arc, Mutex};

use super::memory::DevTile;
use crate::cache::TileKey;
use crate::codec::PartRect;
use crate::error::{Error, Location};
use crate::index::ImageIndex;
use crate::slide::Slide;

/// Result of one tile on the GPU: the tile, `Err(None)` = hand it to the CPU decoder,
/// `Err(Some(e))` = it failed.
pub(crate) type GpuResult = std::result::Result<Arc<DevTile>, Option<Error>>;

/// One (slide, level) of a call: the image its tiles come from.
pub(crate) struct Src<'a> {
    pub(crate) slide: &'a Slide,
    pub(crate) level: usize,
    pub(crate) img: &'a ImageIndex,
    pub(crate) downsample: f64,
    pub(crate) at: Location,
}

impl Src<'_> {
    /// The tile cache key of tile (col, row).
    pub(crate) fn key(&self, col: u64, row: u64) -> TileKey {
        TileKey { slide: self.slide.id(), level: self.level as u32, col, row }
    }
}

/// One unique tile of a batch.
pub(crate) struct Need {
    /// Index into the call's sources.
    pub(crate) src: u32,
    pub(crate) col: u64,
    pub(crate) row: u64,
    /// Union of the parts the call's patches need, `(x0, y0, x1, y1)` in tile pixels,
    /// half-open.
    pub(crate) part: (u64, u64, u64, u64),
    pub(crate) tile: Option<Arc<DevTile>>,
    pub(crate) err: Option<Error>,
}

/// A tile waiting for a decoder.
#[derive(Clone, Copy)]
pub(crate) struct Miss {
    /// Index into the batch's `needs`.
    pub(crate) need: usize,
    /// Index into the call's sources (its (slide, level) pairs, [`Src`]).
    pub(crate) src: u32,
    pub(crate) col: u64,
    pub(crate) row: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// Decode only this part on a CPU worker (small parts, as the CPU path's
    /// `partial_decode_max_fraction`); the GPU lanes always decode whole tiles.
    pub(crate) part: Option<PartRect>,
    /// Estimated cost of the CPU worker's decode relative to a whole tile, in eighths (8 =
    /// whole): the queue puts the costliest first, for the GPU lanes, so the CPU workers take
    /// the parts they decode fastest.
    pub(crate) rank: u8,
}

/// The sorted tiles of one call (costliest CPU decodes first), shared by its decoders: GPU lanes
/// take chunks from the front, CPU workers runs from the back, until the ends meet (every tile
/// is taken once).
pub(crate) struct WorkQueue<'a> {
    misses: &'a [Miss],
    /// Next tile of the front, one past the last of the back.
    ends: Mutex<(usize, usize)>,
}

impl<'a> WorkQueue<'a> {
    pub(crate) fn new(misses: &'a [Miss]) -> WorkQueue<'a> {
        WorkQueue { misses, ends: Mutex::new((0, misses.len())) }
    }

    /// Up to `n` tiles from the front (empty when none are left).
    #[cfg(test)]
    pub(crate) fn front(&self, n: usize) -> &'a [Miss] {
        self.front_guided(n, n, 1)
    }

    /// Up to `max` tiles from the front, fewer as the queue runs low: `left / share`, at least
    /// `min` (guided scheduling: a lane keeps two chunks in flight, so big chunks taken near the
    /// end would keep it busy after the CPU workers ran out of tiles).
    pub(crate) fn front_guided(&self, max: usize, min: usize, share: usize) -> &'a [Miss] {
        let mut g = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = *g;
        let k = ((b - a) / share.max(1)).clamp(min.clamp(1, max.max(1)), max.max(1)).min(b - a);
        g.0 = a + k;
        &self.misses[a..a + k]
    }

    /// Up to `n` tiles from the back (empty when none are left).
    pub(crate) fn back(&self, n: usize) -> &'a [Miss] {
        let mut g = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = *g;
        let k = n.min(b - a);
        g.1 = b - k;
        &self.misses[b - k..b]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::cuda::decode::cpu_worker::CPU_RUN_TILES;
    use crate::gpu::cuda::scheduler::CHUNK_TILES;

    fn misses(n: usize) -> Vec<Miss> {
        (0..n).map(|i| Miss { need: i, src: 0, col: i as u64, row: 0, offset: 100 * i as u64, len: 10, part: None, rank: 8 }).collect()
    }

    #[test]
    fn work_queue_hands_out_every_tile_once_from_both_ends() {
        let m = misses(1000);
        let q = WorkQueue::new(&m);
        let mut taken = Vec::new();
        let (mut fronts, mut backs) = (0, 0);
        // Alternate one GPU-sized take and three CPU-sized takes until empty.
        loop {
            let f = q.front(256);
            fronts += f.len();
            taken.extend(f.iter().map(|m| m.need));
            let mut b_all = 0;
            for _ in 0..3 {
                let b = q.back(CPU_RUN_TILES);
                b_all += b.len();
                taken.extend(b.iter().map(|m| m.need));
            }
            backs += b_all;
            if f.is_empty() && b_all == 0 {
                break;
            }
        }
        taken.sort_unstable();
        assert_eq!(taken, (0..1000).collect::<Vec<_>>());
        assert!(fronts > 0 && backs > 0, "{fronts} {backs}");
        // The front took whole chunks in order, the back from the end.
        assert!(q.front(1).is_empty() && q.back(1).is_empty());
    }

    #[test]
    fn guided_chunks_shrink_as_the_queue_runs_low() {
        let m = misses(1000);
        let q = WorkQueue::new(&m);
        // 1000 left / 8 = 125; then 875 / 8 = 109; ... down to the minimum, then what is left.
        assert_eq!(q.front_guided(256, 64, 8).len(), 125);
        assert_eq!(q.front_guided(256, 64, 8).len(), 109);
        let mut sizes = Vec::new();
        loop {
            let c = q.front_guided(256, 64, 8);
            if c.is_empty() {
                break;
            }
            sizes.push(c.len());
        }
        assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 1000 - 125 - 109);
        assert!(sizes[..sizes.len() - 1].iter().all(|&s| s >= 64), "{sizes:?}");
        // A large queue gives full chunks; min > max is clamped to max.
        let m = misses(10_000);
        let q = WorkQueue::new(&m);
        assert_eq!(q.front_guided(256, 64, 8).len(), 256);
        assert_eq!(q.front_guided(16, 64, 8).len(), 16);
    }

    #[test]
    fn work_queue_shared_by_threads_loses_nothing() {
        let m = misses(5000);
        let q = WorkQueue::new(&m);
        let got: Vec<Vec<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|t| {
                    let q = &q;
                    s.spawn(move || {
                        let mut v = Vec::new();
                        loop {
                            let r = if t % 2 == 0 { q.front(CHUNK_TILES) } else { q.back(CPU_RUN_TILES) };
                            if r.is_empty() {
                                return v;
                            }
                            // A run is contiguous in the offset order.
                            assert!(r.windows(2).all(|w| w[1].need == w[0].need + 1));
                            v.extend(r.iter().map(|m| m.need));
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<usize> = got.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..5000).collect::<Vec<_>>());
    }
}
