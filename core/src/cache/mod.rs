//! Tile caches: a byte-bounded LRU of decoded tiles, shared by every slide of the process.
//!
//! [`TileCache`] is generic over the cached value: host tiles (`Arc<DecodedTile>`, the default)
//! and, with the `cuda` feature, device tiles of the GPU path use the same policy. Entries are
//! `Arc<V>` keyed by [`TileKey`] (slide id, level, column, row); the cache
//! evicts least-recently-used tiles until the resident bytes fit the capacity. A tile larger than
//! the whole capacity is not cached. Hits, misses, evictions and resident bytes are counted
//! (OpenSlide's `openslide-cache.c` plays the same role, also byte-bounded and shared).
//!
//! [`registry`] lists the caches (and the GPU path's purge hook) to purge when a slide closes.

pub mod registry;

use std::sync::{Arc, Mutex, OnceLock};

use crate::codec::DecodedTile;

/// Identifies one decoded tile of one open slide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TileKey {
    /// Process-unique id of the open slide (two opens of one file get different ids).
    pub slide: u64,
    /// Pyramid level.
    pub level: u32,
    /// Tile column.
    pub col: u64,
    /// Tile row.
    pub row: u64,
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the tile.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Tiles evicted to make room.
    pub evictions: u64,
    /// Tiles inserted.
    pub insertions: u64,
    /// Tiles resident now.
    pub entries: u64,
    /// Bytes resident now (decoded pixels plus per-entry overhead).
    pub resident_bytes: u64,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
}

/// What a cache entry weighs, in bytes, for the byte budget.
pub trait CacheWeight {
    /// Bytes held by the entry (pixels plus bookkeeping).
    fn byte_size(&self) -> usize;
}

impl CacheWeight for DecodedTile {
    fn byte_size(&self) -> usize {
        DecodedTile::byte_size(self)
    }
}

struct Inner<V> {
    lru: lru::LruCache<TileKey, Arc<V>>,
    resident: usize,
    stats: CacheStats,
}

/// A byte-bounded LRU cache of decoded tiles (`V` = [`DecodedTile`] for host tiles); `Send +
/// Sync`, one mutex, tiny critical sections. Values are shared (`Arc`): an evicted tile stays
/// alive while a reader still holds it.
pub struct TileCache<V = DecodedTile> {
    capacity_bytes: usize,
    inner: Mutex<Inner<V>>,
}

impl<V: CacheWeight> std::fmt::Debug for TileCache<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TileCache").field("stats", &self.stats()).finish()
    }
}

impl TileCache<DecodedTile> {
    /// The process-wide cache, sized by `SLIDESTREAM_CACHE_BYTES` (default 256 MiB) on first use
    /// (the setting is then fixed for the process: `config::set` of another value is refused).
    ///
    /// # Errors
    /// [`crate::Error::Config`] when the setting's value is not accepted (the cache is then not
    /// made; a later call with a valid value makes it).
    pub fn global() -> crate::Result<Arc<TileCache>> {
        static GLOBAL: OnceLock<Arc<TileCache>> = OnceLock::new();
        if let Some(c) = GLOBAL.get() {
            return Ok(c.clone());
        }
        let bytes = crate::config::consume(&["SLIDESTREAM_CACHE_BYTES"])?.cache_bytes;
        Ok(GLOBAL.get_or_init(|| Arc::new(TileCache::new(usize::try_from(bytes).unwrap_or(usize::MAX)))).clone())
    }
}

impl<V: CacheWeight> TileCache<V> {
    /// A cache holding at most `capacity_bytes` bytes of decoded tiles (0 disables caching).
    pub fn new(capacity_bytes: usize) -> Self {
        TileCache {
            capacity_bytes,
            inner: Mutex::new(Inner {
                lru: lru::LruCache::unbounded(),
                resident: 0,
                stats: CacheStats { capacity_bytes: capacity_bytes as u64, ..Default::default() },
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<V>> {
        // A panic while holding the lock cannot leave the LRU inconsistent (no user code runs
        // under it), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Look a tile up, marking it most recently used.
    pub fn get(&self, key: &TileKey) -> Option<Arc<V>> {
        let mut g = self.lock();
        let hit = g.lru.get(key).cloned();
        if hit.is_some() {
            g.stats.hits += 1;
        } else {
            g.stats.misses += 1;
        }
        hit
    }

    /// Whether a tile is cached, without marking it used or counting a hit or miss.
    pub fn contains(&self, key: &TileKey) -> bool {
        self.lock().lru.contains(key)
    }

    /// Insert a tile, evicting least-recently-used tiles until it fits.
    pub fn insert(&self, key: TileKey, tile: Arc<V>) {
        let size = tile.byte_size();
        if size > self.capacity_bytes {
            return;
        }
        let mut g = self.lock();
        if let Some(old) = g.lru.put(key, tile) {
            g.resident -= old.byte_size();
        } else {
            g.stats.insertions += 1;
        }
        g.resident += size;
        while g.resident > self.capacity_bytes {
            match g.lru.pop_lru() {
                Some((_, t)) => {
                    g.resident -= t.byte_size();
                    g.stats.evictions += 1;
                }
                None => break,
            }
        }
    }

    /// Evict the least-recently-used tile (counted as an eviction); `false` when empty.
    pub fn evict_lru(&self) -> bool {
        let mut g = self.lock();
        match g.lru.pop_lru() {
            Some((_, t)) => {
                g.resident -= t.byte_size();
                g.stats.evictions += 1;
                true
            }
            None => false,
        }
    }

    /// Remove every tile of one slide (used when a slide is closed).
    pub fn purge_slide(&self, slide: u64) {
        let mut g = self.lock();
        let keys: Vec<TileKey> = g.lru.iter().filter(|(k, _)| k.slide == slide).map(|(k, _)| *k).collect();
        for k in keys {
            if let Some(t) = g.lru.pop(&k) {
                g.resident -= t.byte_size();
            }
        }
    }

    /// Remove everything (counters are kept).
    pub fn clear(&self) {
        let mut g = self.lock();
        g.lru.clear();
        g.resident = 0;
    }

    /// Zero the hit / miss / eviction / insertion counters (resident tiles stay).
    pub fn reset_counters(&self) {
        let mut g = self.lock();
        g.stats = CacheStats { capacity_bytes: self.capacity_bytes as u64, ..Default::default() };
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let g = self.lock();
        CacheStats { entries: g.lru.len() as u64, resident_bytes: g.resident as u64, ..g.stats }
    }

    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    fn tile(bytes: usize) -> Arc<DecodedTile> {
        Arc::new(DecodedTile { x: 0, y: 0, width: 1, height: 1, opaque: true, rgba: vec![0; bytes] })
    }
    fn key(col: u64) -> TileKey {
        TileKey { slide: 1, level: 0, col, row: 0 }
    }

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let per = tile(1000).byte_size();
        let c = TileCache::new(per * 3);
        for i in 0..3 {
            c.insert(key(i), tile(1000));
        }
        assert!(c.get(&key(0)).is_some()); // 0 becomes most recent
        c.insert(key(3), tile(1000)); // evicts 1
        assert!(c.get(&key(1)).is_none());
        assert!(c.get(&key(0)).is_some());
        let s = c.stats();
        assert_eq!(s.evictions, 1);
        assert_eq!(s.entries, 3);
        assert!(s.resident_bytes <= s.capacity_bytes);
        assert_eq!((s.hits, s.misses), (2, 1));
    }

    #[test]
    fn contains_counts_nothing_and_keeps_the_order() {
        let per = tile(1000).byte_size();
        let c = TileCache::new(per * 2);
        c.insert(key(0), tile(1000));
        c.insert(key(1), tile(1000));
        assert!(c.contains(&key(0)) && !c.contains(&key(2)));
        assert_eq!((c.stats().hits, c.stats().misses), (0, 0));
        // Not marked used: key 0 is still the least recently used.
        c.insert(key(2), tile(1000));
        assert!(!c.contains(&key(0)) && c.contains(&key(1)));
    }

    #[test]
    fn evict_lru_takes_the_oldest_and_counts() {
        let c = TileCache::new(1 << 20);
        c.insert(key(0), tile(10));
        c.insert(key(1), tile(10));
        assert!(c.get(&key(0)).is_some()); // 1 is now least recently used
        assert!(c.evict_lru());
        assert!(c.get(&key(1)).is_none());
        assert!(c.get(&key(0)).is_some());
        assert!(c.evict_lru());
        assert!(!c.evict_lru());
        let s = c.stats();
        assert_eq!((s.entries, s.resident_bytes, s.evictions), (0, 0, 2));
    }

    #[test]
    fn oversized_tiles_are_not_cached() {
        let c = TileCache::new(10);
        c.insert(key(0), tile(1000));
        assert_eq!(c.stats().entries, 0);
    }

    #[test]
    fn purge_removes_one_slide() {
        let c = TileCache::new(1 << 20);
        c.insert(key(0), tile(10));
        c.insert(TileKey { slide: 2, ..key(0) }, tile(10));
        c.purge_slide(1);
        let s = c.stats();
        assert_eq!(s.entries, 1);
        assert_eq!(s.resident_bytes as usize, tile(10).byte_size());
    }
}
