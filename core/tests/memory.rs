//! Memory bounds of CPU reads (issue 13, F1 / F6 / F7), measured with a counting global
//! allocator: the peak bytes a call allocates beyond what was live before it must stay within
//! its output + the tile cache's budget + the working set (`read_working_bytes`) + a small
//! slack for bookkeeping. Before waves, every row below held all decoded tiles of the call at
//! once (1×1 patches of 64 zstd tiles: 64 × 7 MiB; a 16384² tile: 1.8 GB).
//!
//! The tests share the allocator's counters, so they take a lock and run one at a time.

mod common;
mod measure;

use measure::*;
use slidestream::Slide;

#[test]
fn one_pixel_patches_of_many_large_zstd_tiles_stay_within_the_working_set() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // 64 tiles of 1024²: 3 MiB of samples and 4 MiB of RGBA each, from ~100-byte frames.
    let f = zstd_slide("zstd-wave-bomb.tif", 8, 8, 1024);
    let working = 16 * MIB as u64;
    let slide = open(f.path(), 2 * MIB, working);
    let locs: Vec<(i64, i64)> = (0..64).map(|k| ((k % 8) * 1024 + 5, (k / 8) * 1024 + 7)).collect();
    let (out, peak) = peak_of(|| slide.read_regions_rgb(&locs, 0, (1, 1), [0, 0, 0]).unwrap());
    assert_eq!(out, (0..64).flat_map(|k| [k as u8 + 1; 3]).collect::<Vec<_>>());
    assert!(peak <= 2 * MIB + working as usize + SLACK, "read_regions of 64 1×1 patches peaked at {} MiB", peak / MIB);
    // A one-pixel-high row across all eight tiles of a tile row.
    let (row, peak) = peak_of(|| slide.read_region((0, 3000), 0, (8192, 1)).unwrap());
    assert_eq!(row.data[4 * 5000], 8 * 2 + 4 + 1, "tile (4, 2)");
    assert!(peak <= 8192 * 4 + 2 * MIB + working as usize + SLACK, "a 8192×1 region peaked at {} MiB", peak / MIB);
    // Every tile, as `slidestream tiles` decodes them.
    let coords: Vec<(u64, u64)> = (0..64).map(|k| (k % 8, k / 8)).collect();
    let (n, peak) = peak_of(|| slide.read_tiles(0, &coords).unwrap());
    assert_eq!(n, 64);
    assert!(peak <= 2 * MIB + working as usize + SLACK, "read_tiles peaked at {} MiB", peak / MIB);
}

#[test]
fn a_tile_too_large_for_the_working_set_is_a_limits_error_before_it_is_decoded() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // One 16384² zstd tile (768 MiB of samples, 1 GiB of RGBA) in a ~25 KB frame.
    let f = zstd_slide("zstd-16384.tif", 1, 1, 16384);
    let slide = open(f.path(), 2 * MIB, 192 * MIB as u64);
    let (e, peak) = peak_of(|| slide.read_region((10, 10), 0, (1, 1)).unwrap_err());
    assert_eq!(e.kind_name(), "limits", "{e}");
    let text = e.to_string();
    assert!(text.contains("tile (0, 0)") && text.contains("SLIDESTREAM_READ_WORKING_BYTES"), "{text}");
    assert!(peak < MIB, "refusing took {peak} bytes");
    assert_eq!(slide.io_counters().bytes, 0, "nothing was read");
    // The batch and thumbnail entry points refuse it the same way.
    assert_eq!(slide.read_regions_rgb(&[(0, 0)], 0, (1, 1), [0; 3]).unwrap_err().kind_name(), "limits");
    assert_eq!(slide.read_level_reduced(0, 64, [0; 3]).unwrap_err().kind_name(), "limits");
}

#[test]
fn a_large_region_peaks_at_its_output_plus_one_wave() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let f = raw_slide("raw-2048.tif");
    let working = 2 * MIB as u64;
    let slide = open(f.path(), 2 * MIB, working);
    let (img, peak) = peak_of(|| slide.read_region((0, 0), 0, (2048, 2048)).unwrap());
    let output = 2048 * 2048 * 4;
    for k in 0..64usize {
        let (x, y) = ((k % 8) * 256 + 100, (k / 8) * 256 + 50);
        assert_eq!(img.data[(y * 2048 + x) * 4..][..4], [k as u8 + 1, k as u8 + 1, k as u8 + 1, 255], "tile {k}");
    }
    // Before waves: the output and all 64 decoded tiles (16 MiB) at once.
    assert!(peak <= output + 2 * MIB + working as usize + SLACK, "a 16 MiB region peaked at {} MiB", peak / MIB);
}

#[test]
fn a_reduced_level_peaks_at_its_output_plus_one_wave_and_averages_blocks() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let f = raw_slide("raw-2048-reduced.tif");
    let working = 2 * MIB as u64;
    let slide = open(f.path(), 2 * MIB, working);
    let ((img, factor), peak) = peak_of(|| slide.read_level_reduced(0, 8, [0; 3]).unwrap());
    assert_eq!((factor, img.width, img.height), (8, 256, 256));
    for k in 0..64usize {
        let (x, y) = ((k % 8) * 32 + 3, (k / 8) * 32 + 30);
        assert_eq!(img.data[(y * 256 + x) * 3..][..3], [k as u8 + 1; 3], "tile {k}");
    }
    assert!(peak <= 256 * 256 * 3 + working as usize + SLACK, "reduced level peaked at {} MiB", peak / MIB);
    // The factor is the largest power of two ≤ max_factor dividing the tile size (256).
    assert_eq!(slide.read_level_reduced(0, 1000, [0; 3]).unwrap().1, 256);
    assert_eq!(slide.read_level_reduced(0, 3, [0; 3]).unwrap().1, 2);
    assert_eq!(slide.read_level_reduced(0, 0, [0; 3]).unwrap_err().kind_name(), "usage");
}

#[test]
fn a_reduced_jpeg_level_is_close_to_the_box_average_of_the_full_decode() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(td) = common::testdata() else { return };
    let slide = Slide::open(td.join("CMU-1-Small-Region.svs")).unwrap();
    let (w, h) = slide.dimensions();
    let full = slide.read_region((0, 0), 0, (w, h)).unwrap();
    for max in [2u32, 8, 16] {
        let (img, f) = slide.read_level_reduced(0, max, [255; 3]).unwrap();
        assert_eq!(f, max, "240² tiles divide by {max}");
        let (ow, oh) = (w.div_ceil(f as u64) as usize, h.div_ceil(f as u64) as usize);
        assert_eq!((img.width as usize, img.height as usize), (ow, oh));
        let (mut total, mut worst) = (0u64, 0u8);
        for oy in 0..oh {
            for ox in 0..ow {
                for c in 0..3 {
                    let (mut sum, mut n) = (0u32, 0u32);
                    for y in oy * f as usize..((oy + 1) * f as usize).min(h as usize) {
                        for x in ox * f as usize..((ox + 1) * f as usize).min(w as usize) {
                            sum += full.data[(y * w as usize + x) * 4 + c] as u32;
                            n += 1;
                        }
                    }
                    let want = ((sum + n / 2) / n) as u8;
                    let d = img.data[(oy * ow + ox) * 3 + c].abs_diff(want);
                    total += d as u64;
                    worst = worst.max(d);
                }
            }
        }
        let mean = total as f64 / (ow * oh * 3) as f64;
        // DCT-domain scaling is the block mean up to rounding and chroma handling.
        assert!(mean < 1.5 && worst <= 24, "factor {f}: mean abs diff {mean:.2}, max {worst}");
    }
}
