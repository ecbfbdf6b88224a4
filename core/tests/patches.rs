//! Cross-slide batches (`read_patches`) equal per-patch RGBA reads of the same patches composited
//! over the background, whatever the mix of slides and levels and however the tiles fall into
//! waves.

mod common;

use std::sync::Arc;

use common::{composite, testdata};
use slidestream::{read_patches, read_patches_into, Config, PatchRequest, ReadOptions, Slide, SlideOptions, TileCache};

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

fn open(path: std::path::PathBuf, working: u64) -> Slide {
    let config = Config { read_working_bytes: working, ..Config::default() };
    Slide::open_with(path, SlideOptions { cache: Some(Arc::new(TileCache::new(4 << 20))), config: Some(config), ..SlideOptions::default() }).unwrap()
}

#[test]
fn a_cross_slide_batch_equals_per_slide_reads() {
    let Some(td) = testdata() else { return };
    for working in [192u64 << 20, 24 << 20] {
        let slides: Vec<Slide> = ["CMU-1-Small-Region.svs", "boxes.tiff", "tcga-cr-7395-01a-01-ts1.svs", "sparse.tiff", "yb10kx5k.zstd.tiff"]
            .iter()
            .map(|f| open(td.join(f), working))
            .collect();
        let mut seed = 11;
        let mut reqs = Vec::new();
        for _ in 0..120 {
            let s = &slides[(lcg(&mut seed) % slides.len() as u64) as usize];
            let level = (lcg(&mut seed) % s.level_count() as u64) as usize;
            let (w, h) = s.dimensions();
            let loc = ((lcg(&mut seed) % (w + 400)) as i64 - 200, (lcg(&mut seed) % (h + 400)) as i64 - 200);
            reqs.push(PatchRequest { slide: s, level, location: loc });
        }
        // The same patch twice, and one wholly outside.
        reqs.push(reqs[0]);
        reqs.push(PatchRequest { slide: &slides[1], level: 0, location: (-10_000, -10_000) });
        let opts = ReadOptions { size: (96, 80), background: [255, 128, 0] };
        let got = read_patches(&reqs, &opts).unwrap();
        let patch = 96 * 80 * 3;
        assert_eq!(got.len(), reqs.len() * patch);
        for (k, r) in reqs.iter().enumerate() {
            // The RGBA region path (its own assembly) composited over the background.
            let want = composite(&r.slide.read_region(r.location, r.level, opts.size).unwrap().data, opts.background);
            let g = &got[k * patch..(k + 1) * patch];
            let diff =
                g.iter().zip(&want).enumerate().filter(|(_, (a, b))| a != b).map(|(i, (a, b))| (i / 3 % 96, i / 3 / 96, *a, *b)).take(5).collect::<Vec<_>>();
            assert!(g == &want[..], "{diff:?} patch {k} ({:?} level {} at {:?}), working set {working}", r.slide.index().path(), r.level, r.location);
        }
        let mut again = vec![7u8; got.len()];
        read_patches_into(&reqs, &opts, &mut again).unwrap();
        assert!(again == got);
    }
}

#[test]
fn cross_slide_batch_errors() {
    let Some(td) = testdata() else { return };
    let a = Slide::open(td.join("CMU-1-Small-Region.svs")).unwrap();
    let b = Slide::open(td.join("boxes.tiff")).unwrap();
    let opts = ReadOptions { size: (16, 16), background: [0; 3] };
    assert!(read_patches(&[], &opts).unwrap().is_empty());
    let bad_level = [PatchRequest { slide: &a, level: 0, location: (0, 0) }, PatchRequest { slide: &b, level: 99, location: (0, 0) }];
    assert_eq!(read_patches(&bad_level, &opts).unwrap_err().kind_name(), "usage");
    let ok = [PatchRequest { slide: &a, level: 0, location: (0, 0) }, PatchRequest { slide: &b, level: 0, location: (0, 0) }];
    let mut short = vec![0u8; 10];
    assert_eq!(read_patches_into(&ok, &opts, &mut short).unwrap_err().kind_name(), "usage");
    // The output limit is the smallest of the slides involved.
    let config = Config { max_region_bytes: 1000, ..Config::default() };
    let small = Slide::open_with(td.join("boxes.tiff"), SlideOptions { config: Some(config), ..SlideOptions::default() }).unwrap();
    let mixed = [PatchRequest { slide: &a, level: 0, location: (0, 0) }, PatchRequest { slide: &small, level: 0, location: (0, 0) }];
    assert_eq!(read_patches(&mixed, &opts).unwrap_err().kind_name(), "limits");
    // A corrupt tile fails the batch with the error naming that slide's file.
    let e = read_patches(
        &[
            PatchRequest { slide: &a, level: 0, location: (0, 0) },
            PatchRequest { slide: &Slide::open(td.join("unreadable.svs")).unwrap(), level: 0, location: (0, 0) },
        ],
        &opts,
    );
    if let Err(e) = e {
        assert!(e.to_string().contains("unreadable.svs"), "{e}");
    }
}

/// The device form checks its arguments like the CPU form before it needs a GPU (Limits for an
/// output over `max_region_bytes`, Usage for a missing level), and without a usable GPU (CI, or
/// a build without `cuda`) it is a typed `Gpu` error, never a panic.
#[test]
fn the_device_form_checks_arguments_and_reports_a_missing_gpu() {
    let Some(td) = testdata() else { return };
    let slide = open(td.join("CMU-1-Small-Region.svs"), 192 << 20);
    let big = ReadOptions { size: (40_000, 40_000), background: [255; 3] };
    let reqs = vec![PatchRequest { slide: &slide, level: 0, location: (0, 0) }; 4];
    assert!(matches!(slidestream::read_patches_device(&reqs, &big, 0), Err(slidestream::Error::Limits { .. })));
    let opts = ReadOptions { size: (16, 16), background: [255; 3] };
    let bad_level = [PatchRequest { slide: &slide, level: 9, location: (0, 0) }];
    let r = slidestream::read_patches_device(&bad_level, &opts, 0);
    assert!(matches!(r, Err(slidestream::Error::Usage(_))), "{r:?}");
    let empty = slidestream::read_patches_device(&[], &opts, 0);
    if !slidestream::gpu::available() {
        assert!(matches!(slidestream::read_patches_device(&reqs, &opts, 0), Err(slidestream::Error::Gpu(_))));
        assert!(matches!(empty, Err(slidestream::Error::Gpu(_))), "{empty:?}");
    }
}
