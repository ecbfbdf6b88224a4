//! GPU path (feature `cuda`): device reads against the CPU path on every test slide and on
//! generated RGB-coded / YCbCr 4:4:4 / 4:2:2 / 4:2:0 / 4:4:0 JPEG pyramids, a corrupt tile in a
//! batch, 16 and 64 concurrent host threads, the device tile cache, and the compat mode in effect.
//!
//! Without a usable CUDA device (CI, most machines) every test prints why it is skipped and
//! returns; the lent H200 runs them (`cargo test --release --features cuda --test gpu`, once per
//! `SLIDESTREAM_COMPAT_MODE=on|off|auto`; results in docs/gpu.md). Counters are process-wide and
//! tests run concurrently, so only increases are asserted.
#![cfg(feature = "cuda")]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::jpeg::{corrupt_copy, ycbcr_jpeg_tiff};
use common::tiffwriter::Rng;
use common::{gpu_present, max_abs_diff, testdata};
use slidestream::gpu::{self, DeviceOptions};
use slidestream::Slide;

/// Largest difference allowed between GPU and CPU pixels (issue 4; measured 0 so far).
const TOLERANCE: u8 = 2;

/// Held by the long cross-slide tests and by the partial-decode test: the long tests keep every
/// CPU decode worker busy for seconds, and the partial-decode test needs the workers to take
/// part in its batches.
static CPU_WORKERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cpu_workers_lock() -> std::sync::MutexGuard<'static, ()> {
    CPU_WORKERS.lock().unwrap_or_else(|p| p.into_inner())
}

const RGBA: DeviceOptions = DeviceOptions { device: 0, channels: 4, background: [255, 255, 255] };
const RGB: DeviceOptions = DeviceOptions { device: 0, channels: 3, background: [255, 255, 255] };

/// Max abs difference of one region read on the GPU (RGBA and RGB) and on the CPU.
fn compare(slide: &Slide, loc: (i64, i64), level: usize, size: (u64, u64)) -> u8 {
    let cpu = slide.read_region(loc, level, size).unwrap_or_else(|e| panic!("CPU {loc:?} L{level}: {e}"));
    let dev = slide.read_region_device(loc, level, size, &RGBA).unwrap_or_else(|e| panic!("GPU {loc:?} L{level}: {e}"));
    assert_eq!(dev.shape(), &[size.1 as usize, size.0 as usize, 4]);
    let d4 = max_abs_diff(&dev.to_host().expect("download"), &cpu.data);
    let mut cpu3 = vec![0u8; (size.0 * size.1 * 3) as usize];
    slide.read_regions_rgb_into(&[loc], level, size, RGB.background, &mut cpu3).expect("CPU RGB");
    let dev3 = slide.read_regions_device(&[loc], level, size, &RGB).expect("GPU RGB").into_result().expect("patch");
    assert_eq!(dev3.shape(), &[1, size.1 as usize, size.0 as usize, 3]);
    d4.max(max_abs_diff(&dev3.to_host().expect("download"), &cpu3))
}

/// Fixed regions (origin, interior, across the bottom-right edge, negative, outside) plus seeded
/// random ones on every level.
/// (level-0 location, level, size) of one region.
type Region = ((i64, i64), usize, (u64, u64));

fn regions(slide: &Slide, seed: u64, random: usize) -> Vec<Region> {
    let mut out = Vec::new();
    let mut rng = Rng::new(seed);
    for level in 0..slide.level_count() {
        let (w, h) = slide.level_dimensions()[level];
        let ds = slide.level_downsamples()[level];
        let l0 = |v: i64| (v as f64 * ds) as i64;
        for (x, y, rw, rh) in [
            (0i64, 0i64, 300u64, 200u64),
            (w as i64 / 3, h as i64 / 3, 517, 259),
            (w as i64 - 100, h as i64 - 50, 300, 300),
            (-37, -11, 128, 128),
            (w as i64 + 10, 0, 64, 64),
        ] {
            out.push(((l0(x), l0(y)), level, (rw, rh)));
        }
        for _ in 0..random {
            let (rw, rh) = (rng.range(1, 400) as u64, rng.range(1, 400) as u64);
            let (x, y) = (rng.range(-200, w as i64 + 50), rng.range(-200, h as i64 + 50));
            out.push(((l0(x), l0(y)), level, (rw, rh)));
        }
    }
    out
}

fn slides_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("testdata")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && !matches!(p.extension().and_then(|e| e.to_str()), Some("md" | "json")))
        .collect();
    v.sort();
    v
}

#[test]
fn every_test_slide_reads_the_same_on_the_gpu() {
    if !gpu_present("every_test_slide_reads_the_same_on_the_gpu") {
        return;
    }
    let Some(dir) = testdata() else {
        eprintln!("skipped: ../shared/testdata not found");
        return;
    };
    let before = gpu::stats(0);
    let mut checked = 0;
    for path in slides_in(&dir) {
        let Ok(slide) = Slide::open(&path) else { continue };
        let mut worst = 0u8;
        let mut n = 0;
        for (loc, level, size) in regions(&slide, 7, 8) {
            // Files with corrupt tiles (unreadable.svs) must fail the same way on both paths.
            let cpu = slide.read_region(loc, level, size);
            let dev = slide.read_region_device(loc, level, size, &RGBA);
            match (&cpu, &dev) {
                (Err(c), Err(g)) => {
                    assert_eq!(c.kind_name(), g.kind_name(), "{}: CPU {c} / GPU {g}", path.display());
                    continue;
                }
                (Ok(_), Ok(_)) => {}
                _ => panic!("{}: {loc:?} L{level} {size:?}: CPU {:?} vs GPU {:?}", path.display(), cpu.err(), dev.err()),
            }
            worst = worst.max(compare(&slide, loc, level, size));
            n += 1;
        }
        eprintln!("{}: {n} regions, GPU vs CPU max abs diff {worst}", path.file_name().unwrap_or_default().to_string_lossy());
        assert!(worst <= TOLERANCE, "{}: max abs diff {worst}", path.display());
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} slides opened");
    let after = gpu::stats(0);
    assert!(gpu_decoded(&after) > gpu_decoded(&before), "no tile was decoded on the GPU");
    assert!(after.decoded_cpu > before.decoded_cpu, "non-JPEG slides must decode on the CPU and upload");
}

#[test]
fn generated_jpeg_pyramids_match_the_cpu_for_every_subsampling() {
    if !gpu_present("generated_jpeg_pyramids_match_the_cpu_for_every_subsampling") {
        return;
    }
    use turbojpeg::Subsamp;
    for (name, sub) in [("4:4:4", Subsamp::None), ("4:2:2", Subsamp::Sub2x1), ("4:2:0", Subsamp::Sub2x2), ("4:4:0", Subsamp::Sub1x2)] {
        let (file, expected) = ycbcr_jpeg_tiff(517, 389, 128, sub, 11);
        let slide = Slide::open(file.path()).expect("open fixture");
        let before = gpu::stats(0);
        let dev = slide.read_region_device((0, 0), 0, (517, 389), &RGBA).expect("GPU read").to_host().expect("download");
        let d_expected = max_abs_diff(&dev, &expected);
        let mut worst = d_expected;
        for (loc, level, size) in regions(&slide, 3, 12) {
            worst = worst.max(compare(&slide, loc, level, size));
        }
        let after = gpu::stats(0);
        eprintln!("YCbCr {name}: GPU vs libjpeg-turbo {d_expected}, GPU vs CPU path max abs diff {worst}");
        assert!(worst <= TOLERANCE, "{name}: max abs diff {worst}");
        assert!(gpu_decoded(&after) > gpu_decoded(&before), "{name}: the GPU decoded nothing");
    }
}

#[test]
fn a_corrupt_tile_fails_only_the_patches_that_need_it() {
    if !gpu_present("a_corrupt_tile_fails_only_the_patches_that_need_it") {
        return;
    }
    let (file, _) = ycbcr_jpeg_tiff(1024, 768, 128, turbojpeg::Subsamp::Sub2x2, 5);
    let bad_start = corrupt_copy(file.path(), 2, 1, |t| {
        t[0] = 0x11;
        t[1] = 0x00;
    });
    let zeroed = corrupt_copy(file.path(), 2, 1, |t| t.fill(0));
    for bad in [&bad_start, &zeroed] {
        let slide = Slide::open(bad.path()).expect("open");
        // Patch 1 covers tile (2, 1) (x 256..384, y 128..256); the others avoid it.
        let locs = [(0i64, 0i64), (260, 130), (512, 512), (700, 300), (-50, -50)];
        let batch = slide.read_regions_device(&locs, 0, (100, 100), &RGB).expect("batch call");
        for (i, e) in batch.errors.iter().enumerate() {
            if i == 1 {
                let e = e.as_ref().expect("patch over the corrupt tile must fail");
                assert!(e.to_string().contains("tile (2, 1)"), "{e}");
                assert_eq!(e.kind_name(), "format", "{e}");
            } else {
                assert!(e.is_none(), "patch {i}: {e:?}");
            }
        }
        let host = batch.array.to_host().expect("download");
        let patch = 100 * 100 * 3;
        for (i, &loc) in locs.iter().enumerate().filter(|&(i, _)| i != 1) {
            let mut cpu = vec![0u8; patch];
            slide.read_regions_rgb_into(&[loc], 0, (100, 100), RGB.background, &mut cpu).expect("CPU");
            assert!(max_abs_diff(&host[i * patch..(i + 1) * patch], &cpu) <= TOLERANCE, "patch {i}");
        }
        // The single-region API reports the error; the next batch on the same context works.
        let err = slide.read_region_device((260, 130), 0, (100, 100), &RGBA).expect_err("corrupt tile");
        assert!(err.to_string().contains("tile (2, 1)"), "{err}");
        assert!(compare(&slide, (0, 0), 0, (1024, 100)) <= TOLERANCE);
    }
}

/// A slide read from memory under the name of a same-sized file on disk is read from memory:
/// the GPU path never reopens a slide by its name (cuFile registers the slide's own file
/// descriptor; a memory slide has none and goes through POSIX).
#[test]
fn a_memory_slide_named_like_a_file_is_read_from_memory() {
    if !gpu_present("a_memory_slide_named_like_a_file_is_read_from_memory") {
        return;
    }
    let (file, _) = ycbcr_jpeg_tiff(1024, 768, 128, turbojpeg::Subsamp::Sub2x2, 7);
    let zeroed = corrupt_copy(file.path(), 2, 1, |t| t.fill(0));
    let bytes = std::fs::read(zeroed.path()).expect("read");
    assert_eq!(bytes.len() as u64, std::fs::metadata(file.path()).expect("stat").len());
    let mem = Slide::from_source(file.path(), Box::new(slidestream::io::MemSource::new(bytes)), Default::default()).expect("open");
    let batch = mem.read_regions_device(&[(260, 130), (0, 0)], 0, (100, 100), &RGB).expect("batch call");
    let e = batch.errors[0].as_ref().expect("the zeroed tile of the memory bytes must fail, not be read from the file of that name");
    assert!(e.to_string().contains("tile (2, 1)"), "{e}");
    assert!(batch.errors[1].is_none());
    assert!(compare(&mem, (0, 0), 0, (200, 100)) <= TOLERANCE);
}

/// `cuda_available()` (Python) calls `gpu::available()`, which used to leak a CUDA stream per
/// call: a thousand calls must all succeed, and reads still work after them (the stream count
/// itself is checked by the unit test `probing_repeatedly_leaks_no_stream`).
#[test]
fn available_a_hundred_times() {
    if !gpu_present("available_a_hundred_times") {
        return;
    }
    // 100 calls: they used to create and destroy an nvJPEG hardware handle each (1000 outran a 240 s timeout on
    // the H200); since issue 18 `available()` only counts devices (no context, no handle). The library's unit
    // test checks the stream count over 100 probes.
    for i in 0..100 {
        assert!(gpu::available(), "call {i}");
    }
    let Some(dir) = testdata() else { return };
    let slide = Slide::open(dir.join("CMU-1-Small-Region.svs")).expect("open");
    assert!(compare(&slide, (0, 0), 0, (256, 256)) <= TOLERANCE);
}

fn threads_read_the_same(threads: usize, per_thread: usize) {
    let Some(dir) = testdata() else {
        eprintln!("skipped: ../shared/testdata not found");
        return;
    };
    let (fixture, _) = ycbcr_jpeg_tiff(1500, 1100, 256, turbojpeg::Subsamp::Sub2x2, 9);
    let slides: Vec<Arc<Slide>> = [dir.join("CMU-1-Small-Region.svs"), fixture.path().to_path_buf(), dir.join("boxes.tiff")]
        .iter()
        .map(|p| Arc::new(Slide::open(p).expect("open")))
        .collect();
    // Work list and the CPU's answers, computed up front on one thread.
    let mut rng = Rng::new(threads as u64);
    let mut work = Vec::new();
    for t in 0..threads {
        for _ in 0..per_thread {
            let s = (rng.next_u64() % slides.len() as u64) as usize;
            let (w, h) = slides[s].dimensions();
            let loc = (rng.range(-100, w as i64), rng.range(-100, h as i64));
            let size = (rng.range(1, 300) as u64, rng.range(1, 300) as u64);
            let cpu = slides[s].read_region(loc, 0, size).expect("CPU").data;
            work.push((t, s, loc, size, cpu));
        }
    }
    let work = Arc::new(work);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (work, slides) = (work.clone(), slides.clone());
            std::thread::spawn(move || {
                let mut worst = 0u8;
                for (_, s, loc, size, cpu) in work.iter().filter(|w| w.0 == t) {
                    let dev = slides[*s].read_region_device(*loc, 0, *size, &RGBA).unwrap_or_else(|e| panic!("thread {t}: {e}"));
                    worst = worst.max(max_abs_diff(&dev.to_host().expect("download"), cpu));
                }
                worst
            })
        })
        .collect();
    let worst = handles.into_iter().map(|h| h.join().expect("thread panicked")).max().unwrap_or(0);
    eprintln!("{threads} threads x {per_thread} regions: GPU vs CPU max abs diff {worst}");
    assert!(worst <= TOLERANCE);
    let st = gpu::stats(0);
    assert!(st.cache.resident_bytes <= st.cache.capacity_bytes, "{:?}", st.cache);
    // Every read has returned: the blocks still held are the cached tiles' (bounded after each
    // read; other tests may still be reading, hence only a loose check).
    eprintln!("device memory held by tiles: {} bytes (cache {} of {})", st.device_tile_bytes, st.cache.resident_bytes, st.cache.capacity_bytes);
}

#[test]
fn sixteen_host_threads_read_correctly() {
    if gpu_present("sixteen_host_threads_read_correctly") {
        threads_read_the_same(16, 40);
    }
}

#[test]
fn sixty_four_host_threads_read_correctly() {
    if gpu_present("sixty_four_host_threads_read_correctly") {
        threads_read_the_same(64, 10);
    }
}

#[test]
fn device_cache_serves_repeated_reads_within_its_budget() {
    if !gpu_present("device_cache_serves_repeated_reads_within_its_budget") {
        return;
    }
    let Some(dir) = testdata() else { return };
    let slide = Slide::open(dir.join("CMU-1-Small-Region.svs")).expect("open");
    let first = slide.read_region_device((500, 500), 0, (600, 600), &RGBA).expect("read").to_host().expect("download");
    let before = gpu::stats(0).cache;
    let again = slide.read_region_device((500, 500), 0, (600, 600), &RGBA).expect("read").to_host().expect("download");
    let after = gpu::stats(0).cache;
    assert_eq!(first, again);
    assert!(after.hits >= before.hits + 9, "{before:?} -> {after:?}"); // 600² over 240² tiles: 3x3 or more
    assert!(after.resident_bytes <= after.capacity_bytes);
    // Closing the slide drops its tiles from the device cache. Other tests share the cache
    // and insert or evict concurrently, so count what left other than by eviction, from one
    // consistent snapshot each: insertions − evictions − entries grows only by purges (no test
    // here clears the device cache).
    let purged = |c: &slidestream::CacheStats| c.insertions - c.evictions - c.entries;
    let before_drop = gpu::stats(0).cache;
    drop(slide);
    let after_drop = gpu::stats(0).cache;
    assert!(purged(&after_drop) >= purged(&before_drop) + 9, "{before_drop:?} -> {after_drop:?}");
}

#[test]
fn the_compat_mode_in_effect_is_reported() {
    if !gpu_present("the_compat_mode_in_effect_is_reported") {
        return;
    }
    let Some(dir) = testdata() else { return };
    let slide = Slide::open(dir.join("CMU-1-Small-Region.svs")).expect("open");
    // A slide held in memory has no file for cuFile: it must still read (POSIX path).
    let bytes = std::fs::read(dir.join("CMU-1-Small-Region.svs")).expect("read");
    let mem = Slide::from_source("in-memory.svs", Box::new(slidestream::io::MemSource::new(bytes)), Default::default()).expect("open");
    assert!(compare(&mem, (100, 100), 0, (500, 500)) <= TOLERANCE);
    // With the SM decoder on, every tile it takes is read with POSIX (it parses tiles on the
    // host), and the stats say so instead.
    let sm = gpu::stats(0).sm_decoder == "on";
    if matches!(gpu::stats(0).io_path.as_str(), "cufile" | "cufile-compat") {
        // The memory slide has no file descriptor: it was not offered to cuFile, and said so.
        let reason = gpu::stats(0).cufile_skip_reason;
        let why = if sm { "SM decoder's tiles are read with POSIX" } else { "no single file descriptor" };
        assert!(reason.contains(why), "{reason}");
    }
    let before = gpu::stats(0);
    assert!(compare(&slide, (1000, 1000), 0, (700, 700)) <= TOLERANCE);
    let st = gpu::stats(0);
    let asked = std::env::var("SLIDESTREAM_COMPAT_MODE").ok().and_then(|v| gpu::CompatMode::parse(&v)).unwrap_or_default();
    eprintln!(
        "compat mode {}: io path {} ({}); nvJPEG {}; read amplification {:.3}",
        st.compat_mode,
        st.io_path,
        st.io_reason,
        st.nvjpeg_backend,
        st.read_amplification()
    );
    assert_eq!(st.compat_mode, asked.as_str());
    let nvfs = Path::new("/proc/driver/nvidia-fs").exists() || Path::new("/sys/module/nvidia_fs").exists();
    match asked {
        gpu::CompatMode::On => assert_eq!(st.io_path, "posix"),
        gpu::CompatMode::Off => {
            assert!(st.io_path == "cufile" || st.io_path == "cufile-compat", "{}", st.io_path);
            // Bytes went through cuFile, or cuFile refused the file and said why (the lent H200
            // VM: cuFile cannot read its virtio disk's volume attributes; docs/gpu.md).
            let through = st.cufile_gds_bytes + st.cufile_compat_bytes > before.cufile_gds_bytes + before.cufile_compat_bytes;
            let refused = st.cufile_handle_failures > 0 && st.cufile_handle_error.contains("cuFileHandleRegister");
            eprintln!(
                "cuFile: {} bytes through cuFile; refusals {} ({})",
                st.cufile_gds_bytes + st.cufile_compat_bytes,
                st.cufile_handle_failures,
                st.cufile_handle_error
            );
            assert!(through || refused || sm, "no byte went through cuFile and no refusal was reported");
        }
        gpu::CompatMode::Auto => assert_eq!(st.io_path, if nvfs { "cufile" } else { "posix" }),
    }
    if st.io_path != "posix" {
        assert!(st.io_reason.is_empty() == (st.io_path == "cufile"), "{}", st.io_reason);
    }
}

#[test]
fn outside_and_empty_requests_on_the_device() {
    if !gpu_present("outside_and_empty_requests_on_the_device") {
        return;
    }
    let Some(dir) = testdata() else { return };
    let slide = Slide::open(dir.join("CMU-1-Small-Region.svs")).expect("open");
    let out = slide.read_region_device((-5000, -5000), 0, (64, 32), &RGBA).expect("read").to_host().expect("download");
    assert!(out.iter().all(|&v| v == 0));
    let out = slide
        .read_regions_device(&[(-5000, -5000)], 0, (64, 32), &DeviceOptions { background: [1, 2, 3], ..RGB })
        .expect("read")
        .into_result()
        .expect("patch")
        .to_host()
        .expect("download");
    assert!(out.chunks(3).all(|p| p == [1, 2, 3]));
    let empty = slide.read_regions_device(&[], 0, (64, 32), &RGB).expect("empty batch").into_result().expect("no patches");
    assert_eq!(empty.shape(), &[0, 32, 64, 3]);
    assert!(slide.read_region_device((0, 0), 9, (10, 10), &RGBA).is_err());
    assert!(slide.read_regions_device(&[(0, 0)], 0, (10, 10), &DeviceOptions { channels: 2, ..RGB }).is_err());
    assert!(slide.read_region_device((0, 0), 0, (1 << 20, 1 << 20), &RGBA).is_err(), "limits");
}

/// A batch of the level-0 tiles of a slide (more than `MIN_CPU_SHARE_TILES` misses, and over
/// 512 on the generated one and on `SLIDESTREAM_TEST_BIG_SLIDE` if set): the GPU lanes and,
/// where `SLIDESTREAM_GPU_CPU_WORKERS` allows, the CPU decode workers share it; every patch
/// equals the CPU path's. With a device cache budget smaller than the batch
/// (`SLIDESTREAM_DEVICE_CACHE_BYTES`, as `benches/gpu_check.sh` runs this test alone), the
/// device memory held by decoded tiles after the read must be within the budget.
#[test]
fn a_large_batch_uses_every_decoder_and_stays_within_the_cache_budget() {
    if !gpu_present("a_large_batch_uses_every_decoder_and_stays_within_the_cache_budget") {
        return;
    }
    let Some(dir) = testdata() else { return };
    let (fixture, _) = ycbcr_jpeg_tiff(6000, 5040, 240, turbojpeg::Subsamp::Sub2x2, 11);
    let mut paths = vec![dir.join("CMU-1-Small-Region.svs"), fixture.path().to_path_buf()];
    paths.extend(std::env::var_os("SLIDESTREAM_TEST_BIG_SLIDE").map(PathBuf::from));
    for path in paths {
        // A fresh open: no tile of it is cached yet.
        let slide = Slide::open(&path).expect("open");
        let (w, h) = slide.dimensions();
        let t = 240i64;
        let locs: Vec<(i64, i64)> = (0..h as i64).step_by(t as usize).flat_map(|y| (0..w as i64).step_by(t as usize).map(move |x| (x, y))).take(2048).collect();
        let before = gpu::stats(0);
        let batch = slide.read_regions_device(&locs, 0, (t as u64, t as u64), &RGB).expect("read");
        assert!(batch.errors.iter().all(Option::is_none));
        let dev = batch.array.to_host().expect("download");
        drop(batch);
        let after = gpu::stats(0);
        let mut cpu = vec![0u8; locs.len() * (t * t * 3) as usize];
        slide.read_regions_rgb_into(&locs, 0, (t as u64, t as u64), RGB.background, &mut cpu).expect("CPU");
        let diff = max_abs_diff(&dev, &cpu);
        let (hw_n, hy_n, cpu_n) = (
            after.decoded_hardware + after.decoded_device_bitstream - before.decoded_hardware - before.decoded_device_bitstream,
            after.decoded_hybrid + after.decoded_sm - before.decoded_hybrid - before.decoded_sm,
            after.decoded_cpu - before.decoded_cpu,
        );
        eprintln!(
            "{}: {} tiles in one batch: GPU vs CPU max abs diff {diff}; decoded (all tests) by nvJPEG hardware {hw_n}, hybrid or SM {hy_n}, CPU {cpu_n} ({} lanes, {} CPU workers); device memory held by tiles {} bytes, cache {} of {} bytes, {} evictions",
            path.file_name().unwrap_or_default().to_string_lossy(),
            locs.len(),
            after.gpu_lanes,
            after.cpu_workers,
            after.device_tile_bytes,
            after.cache.resident_bytes,
            after.cache.capacity_bytes,
            after.cache.evictions
        );
        assert!(diff <= TOLERANCE);
        assert!(hw_n + hy_n + cpu_n >= locs.len() as u64, "{} tiles decoded for {} patches", hw_n + hy_n + cpu_n, locs.len());
        if std::env::var_os("SLIDESTREAM_DEVICE_CACHE_BYTES").is_some() {
            // Run alone with a small budget: nothing else holds tiles once the read returned.
            assert!(after.device_tile_bytes <= after.cache.capacity_bytes, "{} bytes held, budget {}", after.device_tile_bytes, after.cache.capacity_bytes);
            assert!(after.cache.evictions > before.cache.evictions || ((locs.len() * 240 * 240 * 4) as u64) < after.cache.capacity_bytes);
        }
    }
}

/// Small random patches over uncached tiles (more than `MIN_CPU_SHARE_TILES` misses, each
/// needing a small part of its tile): the CPU decode workers decode only those parts; every
/// patch equals the CPU path's, on Aperio RGB-coded 4:4:4 tiles and on YCbCr 4:2:2 / 4:2:0 ones
/// (where a crop's edge columns differ from a whole-tile decode unless widened), edge tiles
/// included. Partial tiles must never enter the device cache: a following batch of whole tiles
/// (with the cache serving whatever it holds) must still equal the CPU path.
#[test]
fn small_patches_decode_partially_on_cpu_workers_and_stay_out_of_the_cache() {
    if !gpu_present("small_patches_decode_partially_on_cpu_workers_and_stay_out_of_the_cache") {
        return;
    }
    let Some(dir) = testdata() else { return };
    let _workers = cpu_workers_lock();
    let (f422, _) = ycbcr_jpeg_tiff(3000, 2400, 240, turbojpeg::Subsamp::Sub2x1, 5);
    let (f420, _) = ycbcr_jpeg_tiff(3000, 2400, 240, turbojpeg::Subsamp::Sub2x2, 6);
    let mut rng = Rng::new(2026);
    for path in [dir.join("CMU-1-Small-Region.svs"), f422.path().to_path_buf(), f420.path().to_path_buf()] {
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let s = 40u64;
        // Concurrent tests may hold every CPU worker for a while (a call then runs without
        // them): retry on a fresh open (cold tiles) until the workers took part.
        let mut partial = 0;
        let mut workers = 0;
        // With SLIDESTREAM_GPU_SM_DECODER=on the SM decoder takes the call's tiles first (whole
        // tiles): no partial decode is expected then, only equal pixels.
        let mut sm = 0;
        for _attempt in 0..8 {
            let slide = Slide::open(&path).expect("open");
            let (w, h) = slide.dimensions();
            let locs: Vec<(i64, i64)> = (0..90).map(|_| (rng.range(-20, w as i64 - 10), rng.range(-20, h as i64 - 10))).collect();
            let before = gpu::stats(0);
            let batch = slide.read_regions_device(&locs, 0, (s, s), &RGB).expect("read");
            assert!(batch.errors.iter().all(Option::is_none));
            let dev = batch.array.to_host().expect("download");
            drop(batch);
            let after = gpu::stats(0);
            let mut cpu = vec![0u8; locs.len() * (s * s * 3) as usize];
            slide.read_regions_rgb_into(&locs, 0, (s, s), RGB.background, &mut cpu).expect("CPU");
            let diff = max_abs_diff(&dev, &cpu);
            partial = after.decoded_cpu_partial - before.decoded_cpu_partial;
            workers = after.cpu_workers;
            sm = after.decoded_sm - before.decoded_sm;
            eprintln!(
                "{name}: {} small patches: GPU vs CPU max abs diff {diff}; partial CPU-worker decodes (all tests) {partial}, {workers} CPU workers",
                locs.len()
            );
            assert!(diff <= TOLERANCE, "{name}: small patches differ by {diff}");
            if partial > 0 || workers == 0 || sm > 0 {
                break;
            }
        }
        if workers > 0 && sm == 0 {
            assert!(partial > 0, "{name}: the CPU workers decoded no tile partially in 8 batches");
        }
        let slide = Slide::open(&path).expect("open");
        let (w, h) = slide.dimensions();
        let locs: Vec<(i64, i64)> = (0..90).map(|_| (rng.range(-20, w as i64 - 10), rng.range(-20, h as i64 - 10))).collect();
        slide.read_regions_device(&locs, 0, (s, s), &RGB).expect("read").into_result().expect("patches");
        // Whole tiles next: any partial tile left in the cache would show as missing pixels.
        let t = 240i64;
        let whole: Vec<(i64, i64)> = (0..h as i64).step_by(t as usize).flat_map(|y| (0..w as i64).step_by(t as usize).map(move |x| (x, y))).collect();
        let dev = slide.read_regions_device(&whole, 0, (t as u64, t as u64), &RGB).expect("read").into_result().expect("patches").to_host().expect("download");
        let mut cpu = vec![0u8; whole.len() * (t * t * 3) as usize];
        slide.read_regions_rgb_into(&whole, 0, (t as u64, t as u64), RGB.background, &mut cpu).expect("CPU");
        let diff = max_abs_diff(&dev, &cpu);
        assert!(diff <= TOLERANCE, "{name}: whole tiles after partial decodes differ by {diff}");
    }
}

/// The slides of the cross-slide tests: every test slide that opens (JPEG of several scanners,
/// LZW, deflate, JPEG 2000, planar...) plus generated YCbCr JPEG pyramids of two tile sizes and
/// subsamplings, so one batch mixes images whose tiles differ in size and codec.
fn cross_slide_set() -> (Vec<Slide>, Vec<common::tiffwriter::TempPath>) {
    let (a, _) = ycbcr_jpeg_tiff(3000, 2200, 240, turbojpeg::Subsamp::Sub2x2, 21);
    let (b, _) = ycbcr_jpeg_tiff(2100, 1700, 256, turbojpeg::Subsamp::Sub2x1, 22);
    let mut paths = vec![a.path().to_path_buf(), b.path().to_path_buf()];
    if let Some(dir) = testdata() {
        paths.extend(slides_in(&dir));
    }
    let slides: Vec<Slide> = paths.iter().filter_map(|p| Slide::open(p).ok()).collect();
    (slides, vec![a, b])
}

/// `n` seeded requests over every slide and level of `slides`: level-0 locations in and around
/// each level (edges and outside included).
fn cross_slide_requests(slides: &[Slide], n: usize, seed: u64) -> Vec<slidestream::PatchRequest<'_>> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let slide = &slides[rng.range(0, slides.len() as i64) as usize];
            let level = rng.range(0, slide.level_count() as i64) as usize;
            let (w, h) = slide.level_dimensions()[level];
            let ds = slide.level_downsamples()[level];
            let (x, y) = (rng.range(-60, w as i64 + 20), rng.range(-60, h as i64 + 20));
            slidestream::PatchRequest { slide, level, location: ((x as f64 * ds) as i64, (y as f64 * ds) as i64) }
        })
        .collect()
}

/// The CPU result of each patch of a cross-slide batch: the batch (`read_patches`) when it
/// succeeds, else each patch alone (`read_regions_rgb_into`), `None` where that fails (a slide
/// with corrupt tiles, `unreadable.svs`).
fn cpu_patches(requests: &[slidestream::PatchRequest<'_>], opts: &slidestream::ReadOptions) -> Vec<Option<Vec<u8>>> {
    let per = (opts.size.0 * opts.size.1 * 3) as usize;
    match slidestream::read_patches(requests, opts) {
        Ok(all) => all.chunks(per.max(1)).map(|c| Some(c.to_vec())).collect(),
        Err(_) => requests
            .iter()
            .map(|r| {
                let mut one = vec![0u8; per];
                r.slide.read_regions_rgb_into(&[r.location], r.level, opts.size, opts.background, &mut one).ok().map(|()| one)
            })
            .collect(),
    }
}

/// Max abs difference of a device batch against [`cpu_patches`]; a patch must fail on both
/// paths or on neither.
fn compare_batch(batch: &gpu::DeviceBatch, cpu: &[Option<Vec<u8>>], per: usize, what: &str) -> u8 {
    let dev = batch.array.to_host().expect("download");
    let mut worst = 0u8;
    for (k, (err, c)) in batch.errors.iter().zip(cpu).enumerate() {
        match (err, c) {
            (None, Some(c)) => worst = worst.max(max_abs_diff(&dev[k * per..(k + 1) * per], c)),
            (Some(_), None) => {}
            (e, c) => panic!("{what}: patch {k}: device error {e:?}, CPU {}", if c.is_some() { "ok" } else { "failed" }),
        }
    }
    worst
}

/// Issue 14: one device batch across many slides and levels equals the CPU batch
/// (`read_patches`) patch for patch, for a small batch (GPU lanes only) and a large one (CPU
/// decode workers join), and its patches equal per-slide `read_regions_device` calls.
#[test]
fn cross_slide_device_batches_equal_the_cpu_batch() {
    if !gpu_present("cross_slide_device_batches_equal_the_cpu_batch") {
        return;
    }
    let _workers = cpu_workers_lock();
    let (slides, _keep) = cross_slide_set();
    assert!(slides.len() >= 3, "only {} slides opened", slides.len());
    for (n, size, seed) in [(40usize, (96u64, 80u64), 1u64), (1500, (128, 128), 2)] {
        gpu::clear_device_cache(0);
        let requests = cross_slide_requests(&slides, n, seed);
        let opts = slidestream::ReadOptions { size, background: [250, 10, 120] };
        let cpu = cpu_patches(&requests, &opts);
        let batch = slidestream::read_patches_device(&requests, &opts, 0).expect("device batch");
        assert_eq!(batch.array.shape(), &[n, size.1 as usize, size.0 as usize, 3]);
        // Slides with a corrupt tile fail the same patches on both paths: compare the others.
        let per = (size.0 * size.1 * 3) as usize;
        let worst = compare_batch(&batch, &cpu, per, &format!("batch of {n}"));
        let dev = batch.array.to_host().expect("download");
        eprintln!(
            "{n} patches over {} slides: device vs CPU batch max abs diff {worst}, {} failed patches",
            slides.len(),
            batch.errors.iter().filter(|e| e.is_some()).count()
        );
        assert!(worst <= TOLERANCE, "max abs diff {worst}");
        // The same patches per slide and level, one read_regions_device call each.
        for (k, r) in requests.iter().enumerate().step_by(7).filter(|(k, _)| batch.errors[*k].is_none()) {
            let dopts = DeviceOptions { device: 0, channels: 3, background: opts.background };
            let one = r.slide.read_regions_device(&[r.location], r.level, size, &dopts).expect("per-slide").into_result().expect("patch");
            assert_eq!(one.to_host().expect("download"), dev[k * per..(k + 1) * per], "patch {k}");
        }
    }
}

/// Issue 14 (torchvision #9606: nvJPEG's hardware batch decoder reported not to wait for the
/// caller's stream on H100-class GPUs): many consecutive device batches reuse the lanes'
/// bitstream, scratch and output memory; every batch must equal the CPU path, and batches kept
/// alive must not change while later batches decode (checksums taken at once and at the end).
#[test]
fn reused_device_buffers_never_corrupt_a_later_or_earlier_batch() {
    if !gpu_present("reused_device_buffers_never_corrupt_a_later_or_earlier_batch") {
        return;
    }
    let _workers = cpu_workers_lock();
    let (slides, _keep) = cross_slide_set();
    let opts = slidestream::ReadOptions { size: (256, 256), background: [255, 255, 255] };
    let checksum = |b: &[u8]| b.iter().enumerate().fold(0u64, |h, (i, &v)| h.wrapping_mul(1_000_003).wrapping_add(v as u64 ^ i as u64));
    let mut kept = Vec::new();
    for round in 0..48u64 {
        if round % 4 == 0 {
            // Cold device cache: the batch decodes again through nvJPEG.
            gpu::clear_device_cache(0);
        }
        let requests = cross_slide_requests(&slides, 256, 100 + round);
        let cpu = cpu_patches(&requests, &opts);
        let batch = slidestream::read_patches_device(&requests, &opts, 0).expect("device batch");
        let d = compare_batch(&batch, &cpu, 256 * 256 * 3, &format!("round {round}"));
        assert!(d <= TOLERANCE, "round {round}: max abs diff {d}");
        let dev = batch.array.to_host().expect("download");
        if round % 3 == 0 {
            kept.push((round, checksum(&dev), batch.array));
        }
    }
    for (round, sum, array) in &kept {
        assert_eq!(checksum(&array.to_host().expect("download")), *sum, "batch of round {round} changed after later batches");
    }
    eprintln!("48 batches of 256 patches over {} slides equal the CPU path; {} kept batches unchanged", slides.len(), kept.len());
}

/// NDPI (issue 15): restart-interval tiles framed behind their level's header go through nvJPEG
/// on the host-bitstream path; the DCT-scaled levels OpenSlide synthesises go to the CPU
/// workers. Device reads must equal CPU reads within [`TOLERANCE`] on every level of the real
/// NDPI and of every generated one (`scripts/make_vendor_slides.py`, when present).
#[test]
fn ndpi_tiles_decode_on_nvjpeg_and_match_the_cpu() {
    if !gpu_present("ndpi_tiles_decode_on_nvjpeg_and_match_the_cpu") {
        return;
    }
    let mut paths: Vec<PathBuf> = testdata().map(|d| d.join("test3-DAPI-2-387.ndpi")).into_iter().filter(|p| p.exists()).collect();
    if let Some(vd) = common::vendor_slides() {
        paths.extend(slides_in(&vd).into_iter().filter(|p| p.extension().and_then(|e| e.to_str()) == Some("ndpi")));
    }
    assert!(!paths.is_empty(), "no NDPI test slide");
    let nvjpeg = gpu_decoded;
    let start = gpu::stats(0);
    for path in paths {
        let slide = Slide::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(slide.vendor(), "hamamatsu");
        let before = gpu::stats(0);
        let mut worst = 0u8;
        // Whole tiles of level 0 (the batch nvJPEG takes), then regions on every level (small
        // parts go to the CPU workers' partial decodes, DCT-scaled levels to the CPU workers).
        let (w, h) = slide.dimensions();
        let (tw, th) = slide.level_tile_sizes()[0];
        let (tw, th) = (tw as u64, th as u64);
        worst = worst.max(compare(&slide, (0, 0), 0, ((2 * tw).min(w), (64 * th).min(h))));
        for (loc, level, size) in regions(&slide, 15, 6) {
            worst = worst.max(compare(&slide, loc, level, size));
        }
        let after = gpu::stats(0);
        eprintln!("{}: GPU vs CPU max abs diff {worst}; {} tiles by nvJPEG", path.display(), nvjpeg(&after) - nvjpeg(&before));
        assert!(worst <= TOLERANCE, "{}: max abs diff {worst}", path.display());
    }
    // NDPI tiles go to nvJPEG on the POSIX host-bitstream path; read through cuFile they go to
    // the CPU workers (the device splice kernel knows JPEGTables only: docs/gpu.md), so the
    // count is checked on the POSIX path only (other tests running at the same time decode
    // through nvJPEG too, so a rise under cuFile would prove nothing).
    let end = gpu::stats(0);
    if end.io_path == "posix" {
        assert!(nvjpeg(&end) > nvjpeg(&start), "no NDPI tile was decoded by nvJPEG");
    } else {
        eprintln!("I/O path {}: NDPI tiles decode on the CPU workers; nvJPEG count not checked", end.io_path);
    }
}

/// Tiles decoded on the GPU by any of its decoders (nvJPEG's backends, and the SM decoder when
/// `SLIDESTREAM_GPU_SM_DECODER` turns it on).
fn gpu_decoded(s: &slidestream::gpu::GpuStats) -> u64 {
    s.decoded_hardware + s.decoded_device_bitstream + s.decoded_hybrid + s.decoded_sm
}
