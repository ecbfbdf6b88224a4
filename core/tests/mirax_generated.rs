//! Bad MIRAX slides (`scripts/vendor_slides/mirax_bad.py`, under `bad-mirax/` of the
//! generated vendor slides): each is a small valid slide with one thing broken that OpenSlide
//! 4.0.1 refuses (the generator checks it does). `cases.json` names the file, the error kind
//! slidestream must give and whether the error comes at open or at the first read of level 0;
//! the error must name the slide (its `.mrxs` or a file of its folder), never panic, and a
//! slide that opened must stay usable (the same read fails the same way again).
//!
//! Also: the generated MIRAX slides read on the device (`read_region_device`,
//! `read_regions_device`) equal their CPU reads, every level (skipped without a usable GPU).
//!
//! Skipped with a message when the generated slides are absent (run
//! `scripts/make_vendor_slides.py`).

mod common;

use std::path::Path;

use common::{max_abs_diff, vendor_slides};
use serde_json::Value;
use slidestream::gpu::{self, DeviceOptions};
use slidestream::{Error, Slide};

fn cases() -> Option<(std::path::PathBuf, Vec<Value>)> {
    let root = vendor_slides()?.join("bad-mirax");
    let Ok(text) = std::fs::read_to_string(root.join("cases.json")) else {
        eprintln!("SKIP: {} not found (run scripts/make_vendor_slides.py); bad MIRAX tests skipped", root.join("cases.json").display());
        return None;
    };
    let doc: Value = serde_json::from_str(&text).expect("cases.json");
    Some((root, doc["cases"].as_array().expect("cases").clone()))
}

fn open_no_panic(path: &Path) -> slidestream::Result<Slide> {
    let p = path.to_path_buf();
    std::panic::catch_unwind(move || Slide::open(&p)).unwrap_or_else(|_| panic!("{}: Slide::open panicked", path.display()))
}

fn read_level0(slide: &Slide) -> slidestream::Result<()> {
    let (w, h) = slide.level_dimensions()[0];
    slide.read_region((0, 0), 0, (w, h)).map(|_| ())
}

/// `None` when `e` is the case's error, else what differs.
fn check_error(e: &Error, case: &Value, what: &str) -> Option<String> {
    let kind = case["kind"].as_str().unwrap();
    let name = case["name"].as_str().unwrap();
    if e.kind_name() != kind {
        return Some(format!("{what}: a {} error, expected {kind}: {e}", e.kind_name()));
    }
    (!e.to_string().contains(name)).then(|| format!("{what}: the error does not name the slide: {e}"))
}

#[test]
fn bad_mirax_slides_give_their_typed_errors() {
    let Some((root, cases)) = cases() else { return };
    assert!(cases.len() >= 15, "only {} bad MIRAX cases", cases.len());
    let mut wrong = Vec::new();
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let at = case["at"].as_str().unwrap();
        let what = format!("bad-mirax/{file} ({})", case["what"].as_str().unwrap());
        let path = root.join(file);
        match (open_no_panic(&path), at) {
            (Err(e), "open") => wrong.extend(check_error(&e, case, &what)),
            (Ok(_), "open") => wrong.push(format!("{what}: opened; expected a {} error at open", case["kind"])),
            (Err(e), _) => wrong.push(format!("{what}: expected to open and fail at the level-0 read; open failed: {e}")),
            (Ok(slide), _) => {
                assert_eq!(slide.vendor(), "mirax", "{what}");
                let p = std::panic::AssertUnwindSafe(&slide);
                let first = std::panic::catch_unwind(|| read_level0(&p)).unwrap_or_else(|_| panic!("{what}: read panicked"));
                match first {
                    Ok(()) => wrong.push(format!("{what}: level 0 reads; expected a {} error", case["kind"])),
                    Err(e) => {
                        wrong.extend(check_error(&e, case, &what));
                        // Still usable: the same read fails the same way.
                        let again = read_level0(&slide).expect_err(&what);
                        assert_eq!(again.kind_name(), e.kind_name(), "{what}: second read: {again}");
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{} of {} bad MIRAX cases differ:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}

#[test]
fn a_mirax_folder_without_slidedat_is_not_detected() {
    let Some((root, cases)) = cases() else { return };
    for case in cases.iter().filter(|c| c["name"] == "missing-slidedat") {
        let path = root.join(case["file"].as_str().unwrap());
        let d = Slide::detect(&path).unwrap_or_else(|e| panic!("{}: detect: {e}", path.display()));
        assert_eq!(d.chosen(), None, "{}", path.display());
    }
}

/// The generated MIRAX slides (`mirax-*.mrxs` beside their folders).
fn mirax_slides() -> Vec<std::path::PathBuf> {
    let Some(vd) = vendor_slides() else { return Vec::new() };
    let mut v: Vec<_> =
        std::fs::read_dir(&vd).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "mrxs")).collect();
    v.sort();
    v
}

#[test]
fn mirax_device_reads_equal_cpu_reads() {
    if !gpu::available() {
        eprintln!("SKIP: no usable CUDA device (or built without `cuda`): MIRAX device reads not compared");
        return;
    }
    let slides = mirax_slides();
    if slides.is_empty() {
        eprintln!("SKIP: no generated MIRAX slides (run scripts/make_vendor_slides.py)");
        return;
    }
    for path in slides {
        let slide = Slide::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let what = path.file_name().unwrap().to_string_lossy().into_owned();
        for level in 0..slide.level_count() {
            let (w, h) = slide.level_dimensions()[level];
            let ds = slide.level_downsamples()[level];
            let l0 = |x: i64, y: i64| ((x as f64 * ds) as i64, (y as f64 * ds) as i64);
            // The whole level and a margin past every edge, then a batch of 256x256 patches
            // across it (past the edges too).
            let (rw, rh) = (w + 24, h + 24);
            let loc = l0(-12, -12);
            let cpu = slide.read_region(loc, level, (rw, rh)).unwrap();
            let opts = DeviceOptions { device: 0, channels: 4, background: [255, 255, 255] };
            let dev = slide.read_region_device(loc, level, (rw, rh), &opts).unwrap_or_else(|e| panic!("{what}: device: {e}"));
            assert_eq!(max_abs_diff(&dev.to_host().unwrap(), &cpu.data), 0, "{what} level {level}: device RGBA of the whole level");
            let locs: Vec<(i64, i64)> = (0..8).map(|i| l0(i * (w as i64) / 7 - 128, (7 - i) * (h as i64) / 7 - 128)).collect();
            let bg = [10, 20, 30];
            let mut cpu = vec![0u8; locs.len() * 256 * 256 * 3];
            slide.read_regions_rgb_into(&locs, level, (256, 256), bg, &mut cpu).unwrap();
            let opts = DeviceOptions { device: 0, channels: 3, background: bg };
            let dev = slide.read_regions_device(&locs, level, (256, 256), &opts).unwrap().into_result().unwrap();
            assert_eq!(max_abs_diff(&dev.to_host().unwrap(), &cpu), 0, "{what} level {level}: device RGB batch");
        }
        eprintln!("{what}: device reads equal the CPU's on {} levels; last CPU fallback: {}", slide.level_count(), gpu::stats(0).cpu_fallback_reason);
    }
}
