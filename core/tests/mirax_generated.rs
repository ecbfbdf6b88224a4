//! Bad MIRAX slides (`scripts/vendor_slides/mirax_bad.py`, under `bad-mirax/` of the
//! generated vendor slides): each is a small valid slide with one thing broken that OpenSlide
//! 4.0.1 refuses (the generator checks it does). `cases.json` names the file, the error kind
//! slidestream must give and whether the error comes at open or at the first read of level 0;
//! the error must name the slide (its `.mrxs` or a file of its folder), never panic, and a
//! slide that opened must stay usable (the same read fails the same way again).
//!
//! Skipped with a message when the generated slides are absent (run
//! `scripts/make_vendor_slides.py`).

mod common;

use std::path::Path;

use common::vendor_slides;
use serde_json::Value;
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
