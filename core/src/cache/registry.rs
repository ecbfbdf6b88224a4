//! Registry of the caches that hold tiles keyed by slide id, so that closing a slide purges its
//! tiles everywhere without [`crate::Slide`] knowing which caches exist.
//!
//! Two kinds of entries:
//! * a cache object ([`register_cache`]): held weakly, so registering never keeps a cache alive;
//!   entries whose cache was dropped are pruned on the next registration or purge. The host
//!   [`TileCache`] a slide uses is registered when the slide opens.
//! * a process-lifetime hook function ([`register_hook`]): the GPU path registers the purge of
//!   its device caches (and of its per-slide file handles) when its first engine starts.
//!
//! `Slide::drop` calls [`purge_slide`]. Hooks run outside the registry's lock, so a hook may
//! register further caches.

use std::sync::{Arc, Mutex, Weak};

use super::{CacheWeight, TileCache};

/// Something that can drop every entry belonging to one open slide.
pub trait PurgeSlide: Send + Sync {
    /// Remove everything keyed by `slide` (a process-unique slide id).
    fn purge_slide(&self, slide: u64);
}

impl<V: CacheWeight + Send + Sync> PurgeSlide for TileCache<V> {
    fn purge_slide(&self, slide: u64) {
        TileCache::purge_slide(self, slide);
    }
}

enum Entry {
    Cache(Weak<dyn PurgeSlide>),
    Hook(fn(u64)),
}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn entries() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    // No user code runs under the lock, so a poisoned lock is still consistent.
    ENTRIES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Register `cache` (held weakly; registering the same cache twice keeps one entry).
pub fn register_cache<C: PurgeSlide + 'static>(cache: &Arc<C>) {
    let cache: Arc<dyn PurgeSlide> = cache.clone();
    let weak = Arc::downgrade(&cache);
    let mut g = entries();
    g.retain(|e| match e {
        Entry::Cache(w) => w.strong_count() > 0,
        Entry::Hook(_) => true,
    });
    let known = g.iter().any(|e| matches!(e, Entry::Cache(w) if Weak::ptr_eq(w, &weak)));
    if !known {
        g.push(Entry::Cache(weak));
    }
}

/// Register a process-lifetime purge hook (registering the same function twice keeps one entry).
pub fn register_hook(hook: fn(u64)) {
    let mut g = entries();
    if !g.iter().any(|e| matches!(e, Entry::Hook(h) if *h as usize == hook as usize)) {
        g.push(Entry::Hook(hook));
    }
}

/// Purge the tiles of `slide` from every registered cache and run every hook. Called when a
/// slide is dropped.
pub fn purge_slide(slide: u64) {
    let mut caches: Vec<Arc<dyn PurgeSlide>> = Vec::new();
    let mut hooks: Vec<fn(u64)> = Vec::new();
    {
        let mut g = entries();
        g.retain(|e| match e {
            Entry::Cache(w) => w.strong_count() > 0,
            Entry::Hook(_) => true,
        });
        for e in g.iter() {
            match e {
                Entry::Cache(w) => caches.extend(w.upgrade()),
                Entry::Hook(h) => hooks.push(*h),
            }
        }
    }
    for c in caches {
        c.purge_slide(slide);
    }
    for h in hooks {
        h(slide);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::TileKey;
    use crate::codec::DecodedTile;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn tile() -> Arc<DecodedTile> {
        Arc::new(DecodedTile { x: 0, y: 0, width: 1, height: 1, opaque: true, rgba: vec![0; 4] })
    }

    static HOOK_SEEN: AtomicU64 = AtomicU64::new(0);
    fn hook(slide: u64) {
        if slide >= 1 << 60 {
            HOOK_SEEN.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn purge_reaches_registered_caches_and_hooks_only() {
        // Slide ids far above those real slides get, so parallel tests are not disturbed.
        let (a, b) = (1u64 << 60, (1u64 << 60) + 1);
        let registered = Arc::new(TileCache::<DecodedTile>::new(1 << 20));
        let unregistered = Arc::new(TileCache::<DecodedTile>::new(1 << 20));
        for c in [&registered, &unregistered] {
            c.insert(TileKey { slide: a, level: 0, col: 0, row: 0 }, tile());
            c.insert(TileKey { slide: b, level: 0, col: 0, row: 0 }, tile());
        }
        register_cache(&registered);
        register_cache(&registered);
        register_hook(hook);
        register_hook(hook);
        purge_slide(a);
        assert_eq!(registered.stats().entries, 1, "slide a purged, slide b kept");
        assert!(registered.get(&TileKey { slide: b, level: 0, col: 0, row: 0 }).is_some());
        assert_eq!(unregistered.stats().entries, 2, "an unregistered cache is untouched");
        assert_eq!(HOOK_SEEN.load(Ordering::SeqCst), 1, "the hook ran once (registered once)");
        // A dropped cache is pruned, not kept alive.
        let as_dyn: Arc<dyn PurgeSlide> = registered.clone();
        let weak = Arc::downgrade(&as_dyn);
        drop((as_dyn, registered));
        purge_slide(b);
        assert!(weak.upgrade().is_none());
        assert!(!entries().iter().any(|e| matches!(e, Entry::Cache(w) if Weak::ptr_eq(w, &weak))));
    }
}
