//! The device tile cache of one engine: decoded tiles (byte LRU, `SLIDESTREAM_DEVICE_CACHE_BYTES`,
//! shared by the slides of the process) and the count of device bytes held by tile blocks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::engine::Engine;
use super::memory::{BlockHome, DevBlock, DevTile};
use super::sys::CUdeviceptr;
use crate::cache::{TileCache, TileKey};

/// Cached tiles and the bytes held by live tile blocks (cached tiles and tiles of calls in
/// flight).
pub(crate) struct DeviceCache {
    pub(crate) tiles: TileCache<DevTile>,
    pub(crate) held: Arc<AtomicU64>,
}

impl DeviceCache {
    pub(crate) fn new(capacity_bytes: usize) -> DeviceCache {
        DeviceCache { tiles: TileCache::new(capacity_bytes), held: Arc::new(AtomicU64::new(0)) }
    }

    /// The tiles of a chunk share one allocation, freed when its last tile goes, so the device
    /// memory held by decoded tiles can exceed the sum the cache counts. Keep it within the
    /// cache budget plus what the calls in flight hold: evict least-recently-used tiles while
    /// the blocks' bytes exceed the budget (each eviction brings a block closer to free).
    pub(crate) fn bound_held_bytes(&self, in_flight: u64) {
        let cap = self.tiles.capacity_bytes() as u64;
        while self.held.load(Relaxed) > cap.saturating_add(in_flight) && self.tiles.evict_lru() {}
    }
}

impl Engine {
    /// Where this engine's tile blocks live (for decoders that allocate them).
    pub(crate) fn block_home(&self) -> BlockHome<'_> {
        BlockHome { ctx: self.ctx.raw(), free_stream: self.free_stream.raw(), held: &self.cache.held }
    }

    /// Own `ptr` (`bytes` from `cuMemAllocAsync` in this engine's context) as a tile block,
    /// freed on the engine's free stream with its last tile.
    pub(crate) fn block(&self, ptr: CUdeviceptr, bytes: usize) -> Arc<DevBlock> {
        self.block_home().block(ptr, bytes)
    }

    /// Give a decoded tile to the cache unless it is partial.
    pub(crate) fn cache_tile(&self, key: TileKey, t: &Arc<DevTile>) {
        if !t.partial {
            self.counters.trace.time(super::trace::CACHE, || self.cache.tiles.insert(key, t.clone()));
        }
    }
}
