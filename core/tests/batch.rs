//! `read_regions_rgb_into` equals stacked `read_region` calls composited over the background.

mod common;

use common::{composite, testdata};
use slidestream::Slide;

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

#[test]
fn batch_equals_stacked_single_reads() {
    let Some(td) = testdata() else { return };
    for (file, size) in
        [("CMU-1-Small-Region.svs", (256u64, 200u64)), ("boxes.tiff", (64, 48)), ("sparse.tiff", (300, 300)), ("tcga-cr-7395-01a-01-ts1.svs", (256, 256))]
    {
        let slide = Slide::open(td.join(file)).unwrap();
        for level in 0..slide.level_count() {
            let (w, h) = slide.dimensions();
            let mut seed = 7 + level as u64;
            // Random locations, some partly or wholly outside, some repeated (shared tiles).
            let mut locs: Vec<(i64, i64)> = (0..40).map(|_| ((lcg(&mut seed) % (w + 600)) as i64 - 300, (lcg(&mut seed) % (h + 600)) as i64 - 300)).collect();
            locs.push(locs[0]);
            locs.push((-10_000, -10_000));
            let bg = [255, 128, 0];
            let n = locs.len();
            let mut out = vec![7u8; n * (size.0 * size.1 * 3) as usize];
            slide.read_regions_rgb_into(&locs, level, size, bg, &mut out).unwrap();
            for (k, &loc) in locs.iter().enumerate() {
                let single = slide.read_region(loc, level, size).unwrap();
                let expect = composite(&single.data, bg);
                let got = &out[k * expect.len()..(k + 1) * expect.len()];
                assert!(got == &expect[..], "{file} level {level} patch {k} at {loc:?} differs");
            }
            // The far-away patch is all background.
            let last = &out[(n - 1) * (size.0 * size.1 * 3) as usize..];
            assert!(last.chunks_exact(3).all(|p| p == bg));
        }
    }
}

#[test]
fn batch_rejects_wrong_buffer() {
    let Some(td) = testdata() else { return };
    let slide = Slide::open(td.join("boxes.tiff")).unwrap();
    let mut out = vec![0u8; 10];
    let err = slide.read_regions_rgb_into(&[(0, 0)], 0, (4, 4), [0; 3], &mut out).unwrap_err();
    assert!(matches!(err, slidestream::Error::Usage(_)), "{err}");
    let err = slide.read_regions_rgb_into(&[(0, 0)], 9, (4, 4), [0; 3], &mut [0u8; 48]).unwrap_err();
    assert!(matches!(err, slidestream::Error::Usage(_)), "{err}");
}

#[test]
fn a_batch_wholly_outside_the_image_is_background() {
    // Regression: with waves, a group of patches needing no tile got no first wave and kept
    // the buffer's old bytes.
    let Some(td) = testdata() else { return };
    let slide = Slide::open(td.join("CMU-1-Small-Region.svs")).unwrap();
    let bg = [255, 128, 0];
    let mut out = vec![7u8; 2 * 8 * 8 * 3];
    slide.read_regions_rgb_into(&[(-10_000, -10_000), (100_000, 5)], 0, (8, 8), bg, &mut out).unwrap();
    assert!(out.chunks_exact(3).all(|p| p == bg));
    let r = slide.read_region((-50_000, 0), 0, (4, 4)).unwrap();
    assert!(r.data.iter().all(|&b| b == 0));
}
