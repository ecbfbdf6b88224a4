//! Memory of many reads at once and of very long batches, measured with the counting
//! allocator of `measure`:
//! * `SLIDESTREAM_READ_PROCESS_BYTES` bounds the waves of concurrent calls together (each call
//!   alone is bounded by its working set: 32 threads reached 1.3 GiB with the default 192 MiB);
//! * a batch of hundreds of thousands of patches is planned in runs
//!   (`slidestream::slide::PLAN_PATCHES`), so its plan does not grow with its length (10⁷
//!   one-pixel patches peaked at 2.1 GB for a 30 MB output).
//!
//! The process-wide bound is read once per process, so this file is its own test binary and
//! sets it before any read.

mod common;
mod measure;

use std::sync::Arc;

use measure::*;
use slidestream::{read_patches, PatchRequest, ReadOptions};

/// The process-wide bound these tests run under.
const PROCESS: usize = 16 * MIB;

fn bound_the_process() {
    slidestream::config::set("SLIDESTREAM_READ_PROCESS_BYTES", Some(&PROCESS.to_string())).unwrap();
}

#[test]
fn concurrent_calls_hold_the_process_bound_together() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    bound_the_process();
    // 64 zstd tiles of 512² (about 2.5 MiB charged each); every call wants an 8 MiB working set.
    let f = zstd_slide("process-bound.tif", 8, 8, 512);
    let working = 8 * MIB as u64;
    let slide = Arc::new(open(f.path(), 2 * MIB, working));
    let threads = 16;
    let (sums, peak) = peak_of(|| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let slide = slide.clone();
                std::thread::spawn(move || {
                    // Each thread its own order of the 64 tiles.
                    let locs: Vec<(i64, i64)> = (0..64).map(|k| (k * 7 + t) % 64).map(|k| ((k % 8) * 512 + 5, (k / 8) * 512 + 7)).collect();
                    let out = slide.read_regions_rgb(&locs, 0, (1, 1), [0, 0, 0]).unwrap();
                    out.iter().map(|&b| b as u64).sum::<u64>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<u64>>()
    });
    let want: u64 = (1..=64u64).sum::<u64>() * 3;
    assert!(sums.iter().all(|&s| s == want), "every call read every tile: {sums:?}");
    eprintln!("{threads} concurrent calls: peak {} MiB", peak / MIB);
    // Without the bound: up to one working set per thread (16 × 8 MiB).
    let bound = PROCESS + 2 * MIB + SLACK;
    assert!(peak <= bound, "{threads} concurrent calls peaked at {} MiB (bound {} MiB)", peak / MIB, bound / MIB);
}

#[test]
fn a_long_batch_of_one_pixel_patches_plans_in_runs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    bound_the_process();
    let f = raw_slide("plan-runs.tif");
    let working = 2 * MIB as u64;
    let slide = open(f.path(), 2 * MIB, working);
    let n = 400_000usize;
    let requests: Vec<PatchRequest<'_>> =
        (0..n as i64).map(|k| PatchRequest { slide: &slide, level: 0, location: ((k * 37) % 2048, (k * 101) % 2048) }).collect();
    let opts = ReadOptions { size: (1, 1), background: [0, 0, 0] };
    let (out, peak) = peak_of(|| read_patches(&requests, &opts).unwrap());
    assert_eq!(out.len(), 3 * n);
    for k in [0usize, 1, 65_535, 65_536, 65_537, 399_999] {
        let (x, y) = ((k as i64 * 37) % 2048, (k as i64 * 101) % 2048);
        let tile = (y / 256) * 8 + x / 256;
        assert_eq!(out[3 * k], tile as u8 + 1, "patch {k} at ({x}, {y})");
    }
    // About 200 bytes a patch were planned at once before: 80 MB here.
    let bound = 3 * n + 2 * MIB + working as usize + 16 * MIB + SLACK;
    assert!(peak <= bound, "{n} one-pixel patches peaked at {} MiB (bound {} MiB)", peak / MIB, bound / MIB);
}
