//! GPU path (feature `cuda`) on DICOM WSI: device reads of the CMU DICOM folder (a slide of 12
//! files, JFIF 4:2:2 frames labelled RGB and decoded without colour transform, 500×500 frames:
//! not a multiple of the MCU) and of `camelyon-jpeg-ybr.dcm` (YBR_FULL_422) equal the CPU path;
//! their JPEG frames are decoded by nvJPEG.
//!
//! Without a usable CUDA device every test prints why it is skipped and returns; the lent H200
//! runs them (`cargo test --release --features cuda --test gpu_dicom`).
#![cfg(feature = "cuda")]

mod common;

use common::tiffwriter::Rng;
use common::{gpu_present, max_abs_diff, testdata};
use slidestream::gpu::{self, DeviceOptions};
use slidestream::Slide;

/// Largest difference allowed between GPU and CPU pixels (as `gpu.rs`).
const TOLERANCE: u8 = 2;

const RGBA: DeviceOptions = DeviceOptions { device: 0, channels: 4, background: [255, 255, 255] };
const RGB: DeviceOptions = DeviceOptions { device: 0, channels: 3, background: [255, 255, 255] };

fn slides() -> Vec<(String, Slide)> {
    let Some(td) = testdata() else { return Vec::new() };
    ["CMU-1-Small-Region-dicom", "camelyon-jpeg-ybr.dcm"]
        .iter()
        .map(|n| (n.to_string(), Slide::open(td.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"))))
        .collect()
}

/// Max abs difference of one region read on the GPU (RGBA) and on the CPU.
fn compare(slide: &Slide, loc: (i64, i64), level: usize, size: (u64, u64)) -> u8 {
    let cpu = slide.read_region(loc, level, size).unwrap_or_else(|e| panic!("CPU {loc:?} L{level}: {e}"));
    let dev = slide.read_region_device(loc, level, size, &RGBA).unwrap_or_else(|e| panic!("GPU {loc:?} L{level}: {e}"));
    assert_eq!(dev.shape(), &[size.1 as usize, size.0 as usize, 4]);
    max_abs_diff(&dev.to_host().expect("download"), &cpu.data)
}

#[test]
fn dicom_regions_read_the_same_on_the_gpu() {
    if !gpu_present("dicom_regions_read_the_same_on_the_gpu") {
        return;
    }
    let before = gpu::stats(0);
    for (name, slide) in slides() {
        let mut rng = Rng::new(16);
        let mut worst = 0;
        let mut n = 0;
        for level in 0..slide.level_count() {
            let (w, h) = slide.level_dimensions()[level];
            let ds = slide.level_downsamples()[level];
            let l0 = |v: i64| (v as f64 * ds) as i64;
            let mut rects =
                vec![(0i64, 0i64, 300u64, 200u64), (w as i64 / 3, h as i64 / 3, 517, 259), (w as i64 - 100, h as i64 - 50, 300, 300), (-37, -11, 128, 128)];
            // Across frame edges (500, 1000, ... on level 0 of the CMU slide).
            rects.push((450, 480, 120, 90));
            for _ in 0..8 {
                rects.push((rng.range(-100, w as i64), rng.range(-100, h as i64), rng.range(1, 400) as u64, rng.range(1, 400) as u64));
            }
            for (x, y, rw, rh) in rects {
                worst = worst.max(compare(&slide, (l0(x), l0(y)), level, (rw, rh)));
                n += 1;
            }
        }
        eprintln!("{name}: {n} regions, GPU vs CPU max abs diff {worst}");
        assert!(worst <= TOLERANCE, "{name}: max abs diff {worst}");
    }
    let after = gpu::stats(0);
    let nv = gpu_decoded;
    assert!(nv(&after) > nv(&before), "no DICOM frame was decoded by nvJPEG (CPU reason: {})", after.cpu_fallback_reason);
}

#[test]
fn random_level0_patches_in_a_device_batch_equal_the_cpu() {
    if !gpu_present("random_level0_patches_in_a_device_batch_equal_the_cpu") {
        return;
    }
    for (name, slide) in slides() {
        let (w, h) = slide.dimensions();
        let mut rng = Rng::new(256);
        let locs: Vec<(i64, i64)> = (0..64).map(|_| (rng.range(0, w as i64 - 256), rng.range(0, h as i64 - 256))).collect();
        let mut cpu = vec![0u8; locs.len() * 256 * 256 * 3];
        slide.read_regions_rgb_into(&locs, 0, (256, 256), RGB.background, &mut cpu).expect("CPU batch");
        let dev = slide.read_regions_device(&locs, 0, (256, 256), &RGB).expect("GPU batch").into_result().expect("patches");
        assert_eq!(dev.shape(), &[locs.len(), 256, 256, 3]);
        let d = max_abs_diff(&dev.to_host().expect("download"), &cpu);
        eprintln!("{name}: 64 random 256x256 level-0 patches, GPU vs CPU max abs diff {d}");
        assert!(d <= TOLERANCE, "{name}: max abs diff {d}");
    }
}

/// Tiles decoded on the GPU by any of its decoders (nvJPEG's backends, and the SM decoder when
/// `SLIDESTREAM_GPU_SM_DECODER` turns it on).
fn gpu_decoded(s: &slidestream::gpu::GpuStats) -> u64 {
    s.decoded_hardware + s.decoded_device_bitstream + s.decoded_hybrid + s.decoded_sm
}
