//! GPU path on several devices (issue 18, feature `cuda`): one engine per device, each with its
//! own context. Reads on every visible device equal the CPU path and report their device; two
//! threads read on two devices at once (skipped with fewer than two); an ordinal past the
//! device count is a typed error and the other devices keep reading; a read leaves the calling
//! thread's current CUDA context as it found it (the CUDA runtime, torch, takes that context's
//! device as its current device).
//!
//! Skipped, with the reason printed, without a usable CUDA device (the pattern of gpu.rs); the
//! lent H200 and a two-GPU host run them (`cargo test --release --features cuda --test
//! gpu_multi`). Counters are process-wide and tests run concurrently: only increases are
//! asserted.
#![cfg(feature = "cuda")]

mod common;

use std::ptr::null_mut;

use common::{gpu_present, max_abs_diff, testdata};
use cudarc::driver::sys as cu;
use slidestream::error::GpuError;
use slidestream::gpu::{self, DeviceOptions};
use slidestream::{Error, PatchRequest, ReadOptions, Slide};

/// Largest difference allowed between GPU and CPU pixels (as gpu.rs).
const TOLERANCE: u8 = 2;

fn rgba(device: usize) -> DeviceOptions {
    DeviceOptions { device, channels: 4, background: [255, 255, 255] }
}

fn rgb(device: usize) -> DeviceOptions {
    DeviceOptions { device, channels: 3, background: [255, 255, 255] }
}

/// The test slides of several codecs (JPEG tiles for nvJPEG, JPEG 2000 and deflate for the CPU
/// decoders and the upload); None without ../shared/testdata.
fn open_slides() -> Option<Vec<Slide>> {
    let dir = testdata()?;
    let names = ["CMU-1-Small-Region.svs", "tcga-cr-7395-01a-01-ts1.svs", "boxes.tiff", "quad-tile.jpg.tiff"];
    Some(names.iter().map(|n| Slide::open(dir.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"))).collect())
}

/// Seeded patch requests over `slides` (some past the edges, every level).
fn requests(slides: &[Slide], n: usize, seed: u64) -> Vec<PatchRequest<'_>> {
    let mut rng = common::tiffwriter::Rng::new(seed);
    (0..n)
        .map(|_| {
            let slide = &slides[rng.range(0, slides.len() as i64) as usize];
            let level = rng.range(0, slide.level_count() as i64) as usize;
            let (w, h) = slide.dimensions();
            PatchRequest { slide, level, location: (rng.range(-100, w as i64), rng.range(-100, h as i64)) }
        })
        .collect()
}

/// CPU pixels of each request, RGB (n, 64, 48, 3) as one buffer.
fn cpu_rgb(reqs: &[PatchRequest<'_>], opts: &ReadOptions) -> Vec<u8> {
    slidestream::read_patches(reqs, opts).expect("CPU batch")
}

fn opts() -> ReadOptions {
    ReadOptions { size: (64, 48), background: [255, 255, 255] }
}

fn device_count() -> usize {
    gpu::device_count().expect("device count")
}

/// A batch on `device` equal to the CPU batch; the batch and its array report `device`.
fn check_batch_on(device: usize, slides: &[Slide], seed: u64) {
    let reqs = requests(slides, 96, seed);
    let want = cpu_rgb(&reqs, &opts());
    let batch = gpu::read_patches_device(&reqs, &opts(), device).unwrap_or_else(|e| panic!("device {device}: {e}"));
    assert_eq!(batch.device(), device);
    let arr = batch.into_result().expect("every patch read");
    assert_eq!(arr.device(), device);
    assert_eq!(arr.shape(), &[96, 48, 64, 3]);
    let d = max_abs_diff(&arr.to_host().expect("download"), &want);
    assert!(d <= TOLERANCE, "device {device}: max abs diff {d}");
}

#[test]
fn every_visible_device_reads_like_the_cpu_and_reports_its_device() {
    if !gpu_present("every_visible_device_reads_like_the_cpu_and_reports_its_device") {
        return;
    }
    let Some(slides) = open_slides() else {
        eprintln!("skipped: ../shared/testdata not found");
        return;
    };
    let n = device_count();
    for device in 0..n {
        let before = gpu::stats(device);
        check_batch_on(device, &slides, 11 + device as u64);
        // One region, RGBA, of one slide.
        let s = &slides[0];
        let cpu = s.read_region((100, 200), 0, (300, 200)).expect("CPU region");
        let dev = s.read_region_device((100, 200), 0, (300, 200), &rgba(device)).expect("device region");
        assert_eq!(dev.device(), device);
        assert!(max_abs_diff(&dev.to_host().expect("download"), &cpu.data) <= TOLERANCE, "device {device}");
        let batch = s.read_regions_device(&[(0, 0), (500, 700)], 0, (128, 128), &rgb(device)).expect("device regions");
        assert_eq!((batch.device(), batch.array.device()), (device, device));
        let after = gpu::stats(device);
        let looked_up = |s: &gpu::GpuStats| s.cache.hits + s.cache.misses;
        assert!(looked_up(&after) > looked_up(&before), "device {device}: its own counters count its reads");
    }
    eprintln!("{n} device(s) read like the CPU");
}

#[test]
fn two_threads_read_on_two_devices_at_once() {
    if !gpu_present("two_threads_read_on_two_devices_at_once") {
        return;
    }
    let n = device_count();
    if n < 2 {
        eprintln!("two_threads_read_on_two_devices_at_once: skipped: {n} CUDA device(s), needs 2");
        return;
    }
    let Some(slides) = open_slides() else {
        eprintln!("skipped: ../shared/testdata not found");
        return;
    };
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2usize)
            .map(|device| {
                let (slides, barrier) = (&slides, &barrier);
                s.spawn(move || {
                    barrier.wait(); // both engines start and read at the same time
                    for round in 0..8u64 {
                        check_batch_on(device, slides, 100 * device as u64 + round);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a device thread panicked");
        }
    });
}

#[test]
fn an_ordinal_past_the_device_count_is_a_typed_error_and_device_0_keeps_reading() {
    if !gpu_present("an_ordinal_past_the_device_count_is_a_typed_error_and_device_0_keeps_reading") {
        return;
    }
    let Some(slides) = open_slides() else {
        eprintln!("skipped: ../shared/testdata not found");
        return;
    };
    let n = device_count();
    for bad in [n, n + 7] {
        for attempt in 0..2 {
            let err = slides[0].read_region_device((0, 0), 0, (64, 64), &rgba(bad)).expect_err("a device that does not exist");
            assert!(matches!(err, Error::Gpu(GpuError::Unavailable(_))), "device {bad}, attempt {attempt}: {err:?}");
            assert!(err.to_string().contains(&bad.to_string()), "the message names the ordinal: {err}");
            let reqs = requests(&slides, 4, 1);
            assert!(matches!(gpu::read_patches_device(&reqs, &opts(), bad), Err(Error::Gpu(GpuError::Unavailable(_)))));
            assert!(matches!(gpu::start(bad), Err(Error::Gpu(GpuError::Unavailable(_)))));
        }
        let idle = gpu::stats(bad);
        assert_eq!((idle.gpu_lanes, idle.cache.hits + idle.cache.misses), (0, 0), "no engine for a device that does not exist");
        check_batch_on(0, &slides, 5 + bad as u64);
    }
}

/// The calling thread's current CUDA context (raw), through the driver API.
fn current_context() -> cu::CUcontext {
    let mut c = null_mut();
    // SAFETY: out-pointer to a local; libcuda is loaded (the probe passed).
    let rc = unsafe { cu::cuCtxGetCurrent(&mut c) };
    assert_eq!(rc, cu::CUresult::CUDA_SUCCESS, "cuCtxGetCurrent");
    c
}

fn set_current(c: cu::CUcontext) {
    // SAFETY: null or a retained primary context.
    let rc = unsafe { cu::cuCtxSetCurrent(c) };
    assert_eq!(rc, cu::CUresult::CUDA_SUCCESS, "cuCtxSetCurrent");
}

#[test]
fn a_read_leaves_the_callers_current_context_alone() {
    if !gpu_present("a_read_leaves_the_callers_current_context_alone") {
        return;
    }
    let Some(slides) = open_slides() else {
        eprintln!("skipped: ../shared/testdata not found");
        return;
    };
    // A thread with no current context: reads, downloads and frees on device 0 leave it so.
    std::thread::spawn(|| {
        set_current(null_mut());
        let slides = open_slides().expect("slides");
        let arr = slides[0].read_region_device((0, 0), 0, (256, 256), &rgba(0)).expect("read");
        assert!(current_context().is_null(), "a read made device 0's context current on the caller's thread");
        arr.to_host().expect("download");
        assert!(current_context().is_null(), "a download changed the caller's context");
        drop(arr);
        assert!(current_context().is_null(), "freeing an array changed the caller's context");
    })
    .join()
    .expect("thread");
    // With two devices: a thread working on device 1 reads on device 0 and stays on device 1.
    if device_count() >= 2 {
        let mut dev1 = 0;
        let mut ctx1 = null_mut();
        // SAFETY: out-pointers to locals; retained here and released below.
        unsafe {
            assert_eq!(cu::cuDeviceGet(&mut dev1, 1), cu::CUresult::CUDA_SUCCESS);
            assert_eq!(cu::cuDevicePrimaryCtxRetain(&mut ctx1, dev1), cu::CUresult::CUDA_SUCCESS);
        }
        set_current(ctx1);
        check_batch_on(0, &slides, 77);
        assert_eq!(current_context(), ctx1, "a read on device 0 moved a device-1 thread to device 0");
        set_current(null_mut());
        // SAFETY: retained above.
        unsafe { cu::cuDevicePrimaryCtxRelease_v2(dev1) };
    }
}
