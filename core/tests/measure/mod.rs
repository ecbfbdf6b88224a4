//! Memory measurement for the integration tests: a counting global allocator (the test
//! binary that declares `mod measure;` counts every allocation), the peak of a call, and
//! slides whose tiles decode to known, large sizes. Tests sharing the counters take
//! [`ONE_AT_A_TIME`].
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::tiffwriter::{Chunk, Ifd, TempPath, Tiff, Variant};
use slidestream::{Config, Slide, SlideOptions, TileCache};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new) };
        if !q.is_null() {
            if new >= layout.size() {
                let now = LIVE.fetch_add(new - layout.size(), Ordering::Relaxed) + new - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Run `f`; return its result and the peak bytes allocated during it beyond those live before.
pub fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let r = f();
    (r, PEAK.load(Ordering::SeqCst).saturating_sub(base))
}

pub const MIB: usize = 1 << 20;
/// Allocator bookkeeping, plans, thread-local decoder state, test vectors.
pub const SLACK: usize = 6 * MIB;

/// A zstd frame of `len` copies of `byte` made of RLE blocks (RFC 8878: no content size,
/// 128 KiB window, block type 1 = RLE): a few bytes per 128 KiB of output.
pub fn zstd_rle(byte: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3];
    let mut left = len;
    while left > 0 {
        let n = left.min(128 << 10);
        left -= n;
        let header = u32::from(left == 0) | (1 << 1) | ((n as u32) << 3);
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.push(byte);
    }
    f
}

/// A slide with a private `cache_bytes` cache and a working set of `working` bytes.
pub fn open(path: &std::path::Path, cache_bytes: usize, working: u64) -> Slide {
    let config = Config { read_working_bytes: working, ..Config::default() };
    Slide::open_with(path, SlideOptions { cache: Some(Arc::new(TileCache::new(cache_bytes))), config: Some(config), ..SlideOptions::default() }).unwrap()
}

/// An image of `cols × rows` zstd RGB tiles of `tile`², tile k filled with byte `k + 1`.
pub fn zstd_slide(name: &str, cols: u32, rows: u32, tile: u32) -> TempPath {
    let chunks = (0..cols * rows).map(|k| Chunk::Data(zstd_rle(k as u8 + 1, (tile * tile * 3) as usize))).collect();
    let ifd = Ifd::tiled(cols * tile, rows * tile, tile, tile, chunks).compression(50000);
    let f = TempPath::new(name);
    Tiff::new(Variant::Classic, vec![ifd]).write(f.path());
    f
}

/// 2048² uncompressed RGB in 256² tiles, tile k a constant `k + 1`.
pub fn raw_slide(name: &str) -> TempPath {
    let chunks = (0..64u32).map(|k| Chunk::Data(vec![k as u8 + 1; 256 * 256 * 3])).collect();
    let f = TempPath::new(name);
    Tiff::new(Variant::Classic, vec![Ifd::tiled(2048, 2048, 256, 256, chunks)]).write(f.path());
    f
}
