//! Tests of [`super`] (the CPU fetch), in a file of their own to keep `fetch.rs` short.

use super::*;
use crate::index::TileLoc;
use crate::io::metrics::MetricsSource;
use crate::io::MemSource;
use crate::read::test_image;

/// A 4 × 4 uncompressed RGB tile whose every pixel is `v`.
fn tile_bytes(v: u8) -> Vec<u8> {
    vec![v; 4 * 4 * 3]
}

/// Memory whose reads touching `[bad, bad + 1)` fail.
#[derive(Debug)]
struct FailsAt(MemSource, u64);

impl ByteSource for FailsAt {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if offset <= self.1 && self.1 < offset + buf.len() as u64 {
            return Err(std::io::Error::other("device error"));
        }
        self.0.read_exact_at(buf, offset)
    }
}

#[test]
fn decode_tiles_gives_every_tile_its_own_outcome() {
    // (0, 0) at 100, (1, 0) at 200 on a failing sector, (0, 1) missing, (1, 1) past the end.
    let mut file = vec![0u8; 300];
    file[100..148].copy_from_slice(&tile_bytes(10));
    file[200..248].copy_from_slice(&tile_bytes(20));
    let img = test_image(8, 8, 4, 4, 1, vec![TileLoc::primary(100, 48), TileLoc::primary(200, 48), TileLoc::primary(0, 0), TileLoc::primary(290, 48)]);
    let src = FailsAt(MemSource::new(file), 210);
    let cache = TileCache::new(1 << 20);
    let at = Location::file("t.tif");
    let plan = PlanOptions { max_gap_bytes: 0, max_request_bytes: 1 << 20 };
    let scans = ScanMemory::new();
    let b = Batch { src: &src, image: &img, at: &at, plan: &plan, cache: Some(CacheSlot { cache: &cache, slide: 1, level: 0, scans: &scans }), pool: None, working_bytes: 1 << 30, reduce: None };
    let got = decode_tiles(&b, &[(0, 0), (1, 0), (0, 1), (1, 1)], None).tiles;
    assert_eq!(got[0].as_ref().unwrap().as_ref().map(|t| t.rgba[0]), Some(10));
    let e = got[1].as_ref().unwrap_err();
    assert_eq!(e.kind_name(), "io");
    assert!(e.to_string().contains("tile (1, 0)") && e.to_string().contains("device error"), "{e}");
    assert!(got[2].as_ref().unwrap().is_none(), "missing tile = background");
    assert_eq!(got[3].as_ref().unwrap_err().kind_name(), "format");
    // The tile that decoded is cached; fetch_tiles joins the outcomes into the I/O error.
    assert_eq!(cache.stats().entries, 1);
    assert_eq!(fetch_tiles(&b, &[(0, 0), (1, 0)], None).unwrap_err().kind_name(), "io");
}

#[test]
fn shared_decode_runs_every_unit_once_from_any_number_of_callers() {
    let units: Vec<u32> = (0..97).collect();
    for threads in [1, 2, 4] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let runs = std::sync::atomic::AtomicUsize::new(0);
        let f = |&u: &u32| {
            runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            u * 3
        };
        // One caller, then three at once (the helpers shrink as callers add up).
        let mut got = shared_decode(Some(&pool), &units, f);
        got.sort_unstable();
        assert_eq!(got, units.iter().map(|u| u * 3).collect::<Vec<_>>(), "{threads} threads");
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..3).map(|_| s.spawn(|| shared_decode(Some(&pool), &units, f).len())).collect();
            assert!(hs.into_iter().all(|h| h.join().unwrap() == units.len()));
        });
        assert_eq!(runs.load(std::sync::atomic::Ordering::Relaxed), 4 * units.len());
        assert_eq!(shared_decode(None, &units[..1], f), vec![0]);
    }
}

#[test]
fn fetch_reads_once_caches_whole_tiles_and_locates_before_reading() {
    // An 8 × 8 image of four 4 × 4 tiles: (0, 0) at 100, (1, 0) at 148, (0, 1) missing,
    // (1, 1) past the end of the 300-byte file.
    let mut file = vec![0u8; 300];
    file[100..148].copy_from_slice(&tile_bytes(10));
    file[148..196].copy_from_slice(&tile_bytes(20));
    let img = test_image(8, 8, 4, 4, 1, vec![TileLoc::primary(100, 48), TileLoc::primary(148, 48), TileLoc::primary(0, 0), TileLoc::primary(290, 48)]);
    let src = MetricsSource::new(MemSource::new(file));
    let cache = TileCache::new(1 << 20);
    let at = Location::file("t.tif");
    let plan = PlanOptions::default();
    let scans = ScanMemory::new();
    let b = Batch { src: &src, image: &img, at: &at, plan: &plan, cache: Some(CacheSlot { cache: &cache, slide: 1, level: 0, scans: &scans }), pool: None, working_bytes: 1 << 30, reduce: None };
    let got = fetch_tiles(&b, &[(1, 0), (0, 1), (0, 0)], None).unwrap();
    assert_eq!(got[0].as_ref().map(|t| t.rgba[0]), Some(20));
    assert!(got[1].is_none(), "missing tile = background");
    assert_eq!(got[2].as_ref().map(|t| (t.width, t.height, t.rgba[..4].to_vec())), Some((4, 4, vec![10, 10, 10, 255])));
    // Two adjacent tiles: one coalesced request.
    assert_eq!((src.counters().requests, src.counters().bytes), (1, 96));
    assert_eq!(cache.stats().entries, 2);
    // Cached now: no further reads.
    fetch_tiles(&b, &[(0, 0), (1, 0)], None).unwrap();
    assert_eq!(src.counters().requests, 1);
    // The bad tile fails before anything is read, with the read layer's kind.
    let e = fetch_tiles(&b, &[(1, 1)], None).unwrap_err();
    assert_eq!(e.kind_name(), "format");
    assert!(e.to_string().contains("tile (1, 1)"), "{e}");
    assert_eq!(src.counters().requests, 1);
    assert_eq!(fetch_tiles(&b, &[(2, 0)], None).unwrap_err().kind_name(), "usage");
    // Unique coordinates for fetch_tiles.
    assert_eq!(dedup_coords(&[(1, 0), (0, 0), (1, 0)]), (vec![(1, 0), (0, 0)], vec![0, 1, 0]));
}
