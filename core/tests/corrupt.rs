//! The regression corpus: every file under `core/tests/corrupt/<kind>/` (kind = panic, oom,
//! hang, wrong-pixels; origins in `corrupt/README.md`) is opened, and every level's regions, a
//! batch of RGB patches and every associated image are read with a small private cache and a
//! 512-byte read-request limit. Each result must be `Ok` or a typed error naming the file:
//! never a panic, never a hang (a watchdog fails the test after 60 s), no file may take more
//! than a few seconds, and no region read may read more bytes than the file holds. Files under
//! `wrong-pixels/` damage the pixels of their only level: reading it whole must fail rather than
//! return garbage. `*.planner` files are inputs of the `planner` fuzz target, checked with its
//! invariants. Files named `*.mirax_ini`, `*.mirax_index`, `*.dicom_header`, `*.vendor_xml`
//! are inputs of those fuzz targets, replayed as the targets run them
//! ([`slidestream::fuzzing::run`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slidestream::io::plan::{decode_fuzz_input, plan_reads, PlanOptions};
use slidestream::{Config, Error, Slide, SlideOptions, TileCache};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corrupt")
}

/// Regular files under `dir`, recursively, except the README and generator scripts.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else if !matches!(p.extension().and_then(|e| e.to_str()), Some("md" | "py")) {
            out.push(p);
        }
    }
}

/// A typed error (not a usage error: the calls below are all valid) that names the file.
fn check_err(e: &Error, path: &Path, what: &str) {
    assert!(
        matches!(e, Error::Format { .. } | Error::Unsupported { .. } | Error::Limits { .. } | Error::Io { .. }),
        "{}: {what}: unexpected {} error: {e}",
        path.display(),
        e.kind_name()
    );
    assert!(e.to_string().contains(&path.display().to_string()), "{}: {what}: error does not name the file: {e}", path.display());
}

/// Up to `n` evenly spread origins of a `win`-wide window over `len` pixels, plus one partly
/// outside the image on each side.
fn origins(len: u64, win: u64, n: u64) -> Vec<i64> {
    let span = len.saturating_sub(win);
    let mut v: Vec<i64> = (0..n).map(|k| (span * k / (n - 1).max(1)) as i64).collect();
    v.push(-(win as i64) / 2);
    v.push(len as i64 - win as i64 / 2);
    v.dedup();
    v
}

/// `*.planner` files are inputs of the `planner` fuzz target (same decoding): every wanted
/// range is served exactly once by a request containing it, requests are sorted and disjoint,
/// and a request exceeds the size limit only for one range or ranges that overlap.
fn check_planner_input(data: &[u8]) -> String {
    let Some((opts, wants)) = decode_fuzz_input(data) else { return "planner input: too short".into() };
    let plan = plan_reads(&wants, &opts);
    if let Err(e) = plan.check(&wants, &opts) {
        panic!("planner contract broken: {e}: {plan:?}");
    }
    format!("planner input: {} ranges, {} requests", wants.len(), plan.requests.len())
}

/// Fuzz targets whose saved inputs (`*.<target>`) are replayed through
/// [`slidestream::fuzzing::run`] (bundles of files, XML spliced into a TIFF: not slides by
/// themselves).
const FUZZ_TARGETS: [&str; 4] = ["mirax_ini", "mirax_index", "dicom_header", "vendor_xml"];

/// Exercise one file; returns a one-line summary.
fn exercise(path: &Path) -> String {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if ext == "planner" {
        return check_planner_input(&std::fs::read(path).unwrap());
    }
    if FUZZ_TARGETS.contains(&ext) {
        // Open and read as the target does: pixels of the requested size or a typed error.
        return match slidestream::fuzzing::run(ext, &std::fs::read(path).unwrap()) {
            Ok(summary) => format!("{ext} input: {summary}"),
            Err(e) => {
                assert!(
                    matches!(e, Error::Format { .. } | Error::Unsupported { .. } | Error::Limits { .. } | Error::Io { .. }),
                    "{}: unexpected {} error: {e}",
                    path.display(),
                    e.kind_name()
                );
                format!("{ext} input: open: {} error", e.kind_name())
            }
        };
    }
    // A small request limit, so files whose tile ranges overlap would show duplicated reads.
    let plan = PlanOptions { max_request_bytes: 512, ..PlanOptions::default() };
    let config = Config { max_region_bytes: 64 << 20, plan, ..Config::default() };
    let opts = SlideOptions { cache: Some(Arc::new(TileCache::new(2 << 20))), config: Some(config), ..Default::default() };
    let slide = match Slide::open_with(path, opts) {
        Ok(s) => s,
        Err(e) => {
            check_err(&e, path, "open");
            return format!("open: {} error", e.kind_name());
        }
    };
    let file_len = std::fs::metadata(path).unwrap().len();
    let (mut ok, mut failed) = (0usize, 0usize);
    let mut tally = |r: slidestream::Result<()>, what: &str| match r {
        Ok(()) => ok += 1,
        Err(e) => {
            check_err(&e, path, what);
            failed += 1;
        }
    };
    for (level, (w, h)) in slide.level_dimensions().into_iter().enumerate() {
        let ds = slide.level_downsamples()[level];
        let (ww, wh) = (w.clamp(1, 256), h.clamp(1, 256));
        let mut locs = Vec::new();
        for y in origins(h, wh, 4) {
            for x in origins(w, ww, 4) {
                locs.push(((x as f64 * ds) as i64, (y as f64 * ds) as i64));
            }
        }
        for &loc in &locs {
            let before = slide.io_counters().bytes;
            let r = slide.read_region(loc, level, (ww, wh)).map(|r| assert_eq!(r.data.len() as u64, ww * wh * 4));
            // Requests are disjoint: one read never reads more than the file.
            let read = slide.io_counters().bytes - before;
            assert!(read <= file_len, "{}: level {level} region at {loc:?} read {read} bytes of a {file_len}-byte file", path.display());
            tally(r, &format!("level {level} region at {loc:?}"));
        }
        let mut rgb = vec![0u8; locs.len() * (ww * wh * 3) as usize];
        tally(slide.read_regions_rgb_into(&locs, level, (ww, wh), [255, 255, 255], &mut rgb), &format!("level {level} batch"));
        if w * h <= 1 << 20 {
            tally(slide.read_region((0, 0), level, (w, h)).map(|_| ()), &format!("level {level} whole"));
        }
    }
    for name in slide.associated_images().keys() {
        tally(slide.read_associated(name).map(|_| ()), &format!("associated {name}"));
    }
    let st = slide.cache_stats();
    assert!(st.resident_bytes <= st.capacity_bytes, "{}: cache over budget: {st:?}", path.display());
    format!("opened ({} levels): {ok} reads ok, {failed} typed errors", slide.level_count())
}

/// For `wrong-pixels/` files: reading the whole of level 0 must fail.
fn check_wrong_pixels(path: &Path) {
    let Ok(slide) = Slide::open_with(path, SlideOptions { cache: Some(Arc::new(TileCache::new(1 << 20))), ..Default::default() }) else {
        return;
    };
    let (w, h) = slide.dimensions();
    match slide.read_region((0, 0), 0, (w, h)) {
        Ok(_) => panic!("{}: damaged pixels read without an error", path.display()),
        Err(e) => check_err(&e, path, "whole level 0"),
    }
}

#[test]
fn every_corrupt_file_gives_pixels_or_a_typed_error() {
    let mut files = Vec::new();
    files_under(&corpus_dir(), &mut files);
    assert!(files.len() >= 10, "corpus too small: {files:?}");
    for kind in ["panic", "oom", "hang", "wrong-pixels"] {
        assert!(corpus_dir().join(kind).is_dir(), "missing corrupt/{kind}/");
    }
    // A watchdog: a hang fails the test with the file's name instead of blocking CI.
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let current = Arc::new(std::sync::Mutex::new(PathBuf::new()));
    let worker_current = current.clone();
    let worker_files = files.clone();
    std::thread::spawn(move || {
        let mut report = Vec::new();
        for path in &worker_files {
            *worker_current.lock().unwrap() = path.clone();
            let start = Instant::now();
            let p = path.clone();
            let r = std::panic::catch_unwind(move || {
                let summary = exercise(&p);
                if p.parent().and_then(|d| d.file_name()) == Some("wrong-pixels".as_ref()) {
                    check_wrong_pixels(&p);
                }
                summary
            });
            let took = start.elapsed();
            match r {
                Ok(summary) => report.push(format!("{:>7.3} s  {}: {summary}", took.as_secs_f64(), path.display())),
                Err(_) => {
                    let _ = tx.send(Err(format!("{}: panicked", path.display())));
                    return;
                }
            }
            if took > Duration::from_secs(10) {
                let _ = tx.send(Err(format!("{}: took {took:?}", path.display())));
                return;
            }
        }
        eprintln!("{}", report.join("\n"));
        let _ = tx.send(Ok(()));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(())) => {}
        Ok(Err(m)) => panic!("{m}"),
        Err(_) => panic!("{}: no result after 60 s (hang)", current.lock().unwrap().display()),
    }
}
