//! 64 threads × random reads on one `Slide` with a small private cache (so tiles are evicted
//! and re-decoded under contention): every result equals the single-threaded one, nothing
//! deadlocks (a watchdog fails the test after 120 s), and the cache's resident bytes, sampled
//! by the threads after every read, never exceed its capacity.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::testdata;
use common::tiffwriter::Rng;
use slidestream::{Slide, SlideOptions, TileCache};

const THREADS: usize = 64;

#[derive(Clone, Copy, Debug)]
enum Op {
    Region {
        level: usize,
        loc: (i64, i64),
        size: (u64, u64),
    },
    /// `read_regions_rgb_into` of several patches, compared with the single-threaded batch.
    Batch {
        level: usize,
        locs: [(i64, i64); 3],
        size: (u64, u64),
    },
}

fn run(slide: &Slide, op: Op) -> Vec<u8> {
    match op {
        Op::Region { level, loc, size } => slide.read_region(loc, level, size).unwrap_or_else(|e| panic!("{op:?}: {e}")).data,
        Op::Batch { level, locs, size } => {
            let mut out = vec![0u8; 3 * (size.0 * size.1 * 3) as usize];
            slide.read_regions_rgb_into(&locs, level, size, [255, 255, 255], &mut out).unwrap_or_else(|e| panic!("{op:?}: {e}"));
            out
        }
    }
}

fn random_ops(slide: &Slide, rng: &mut Rng, n: usize) -> Vec<Op> {
    let dims = slide.dimensions();
    let (w0, h0) = (dims.0 as i64, dims.1 as i64);
    (0..n)
        .map(|i| {
            let level = rng.range(0, slide.level_count() as i64) as usize;
            let size = (rng.range(1, 300) as u64, rng.range(1, 300) as u64);
            let mut loc = || (rng.range(-200, w0 + 50), rng.range(-200, h0 + 50));
            if i % 6 == 5 {
                Op::Batch { level, locs: [loc(), loc(), loc()], size: (size.0 / 2 + 1, size.1 / 2 + 1) }
            } else {
                Op::Region { level, loc: loc(), size }
            }
        })
        .collect()
}

fn check_slide(name: &str, cache_bytes: usize, reads_per_thread: usize) {
    let Some(td) = testdata() else { return };
    let cache = Arc::new(TileCache::new(cache_bytes));
    let slide = Slide::open_with(td.join(name), SlideOptions { cache: Some(cache.clone()), ..Default::default() }).unwrap();
    let mut rng = Rng::new(0x5eed ^ cache_bytes as u64);
    let ops = random_ops(&slide, &mut rng, THREADS * reads_per_thread / 4);
    let single: Vec<Vec<u8>> = ops.iter().map(|&op| run(&slide, op)).collect();
    cache.clear();
    let before = cache.stats();
    let slide = Arc::new(slide);
    let (ops, single) = (Arc::new(ops), Arc::new(single));
    let max_resident = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = std::sync::mpsc::channel::<std::thread::Result<()>>();
    for th in 0..THREADS {
        let (slide, ops, single, max_resident, done, tx) = (slide.clone(), ops.clone(), single.clone(), max_resident.clone(), done.clone(), tx.clone());
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut rng = Rng::new(th as u64 + 1);
                for _ in 0..reads_per_thread {
                    let i = rng.range(0, ops.len() as i64) as usize;
                    let got = run(&slide, ops[i]);
                    assert!(got == single[i], "thread {th}: {:?} differs from the single-threaded result", ops[i]);
                    let st = slide.cache_stats();
                    assert!(st.resident_bytes <= st.capacity_bytes, "thread {th}: cache over budget: {st:?}");
                    max_resident.fetch_max(st.resident_bytes, Ordering::Relaxed);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }));
            let _ = tx.send(r);
        });
    }
    drop(tx);
    for _ in 0..THREADS {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(())) => {}
            Ok(Err(p)) => std::panic::resume_unwind(p),
            Err(_) => panic!("{name}: deadlock or hang: {} of {} reads done after 120 s", done.load(Ordering::Relaxed), THREADS * reads_per_thread),
        }
    }
    let st = cache.stats();
    assert_eq!(done.load(Ordering::Relaxed), THREADS * reads_per_thread);
    assert!(st.resident_bytes <= st.capacity_bytes, "{st:?}");
    assert!(st.evictions > before.evictions, "{name}: the cache never evicted ({st:?}): make it smaller");
    eprintln!(
        "{name}: {} reads on {THREADS} threads, cache {} KiB: peak resident {} KiB, {} evictions, {} hits, {} misses",
        THREADS * reads_per_thread,
        cache_bytes >> 10,
        max_resident.load(Ordering::Relaxed) >> 10,
        st.evictions - before.evictions,
        st.hits - before.hits,
        st.misses - before.misses
    );
}

/// JPEG tiles of 240² (one level), partial decoding and the cache racing.
#[test]
fn sixty_four_threads_on_an_aperio_jpeg_slide() {
    check_slide("CMU-1-Small-Region.svs", 1 << 20, 24);
}

/// JPEG 2000 tiles (256², four levels).
#[test]
fn sixty_four_threads_on_a_jpeg2000_pyramid() {
    check_slide("tcga-cr-7395-01a-01-ts1.svs", 2 << 20, 8);
}
