//! The generated DICOM inputs of `scripts/vendor_slides/dicom.py` / `dicom_bad.py` (in
//! `$SLIDESTREAM_VENDOR_SLIDES`): every bad input of `bad-dicom/cases.json` gives its typed
//! error kind (at open, or at reading level 0 for `stage: read`) and never panics; the cases
//! OpenSlide 4.0.1 opens (`error: null`) open with its levels; and every generated DICOM
//! folder slide opens the same by its folder as by the file its reference names.
//!
//! The expected kinds are slidestream's (`Error::kind_name`); OpenSlide's own error text is
//! in `cases.json` for each. A `read` case is one OpenSlide opens and fails to read; we may
//! find the damage earlier (at open: e.g. scanning the fragments once), so only the kind of
//! the first error of open-then-read is compared. Until a `dicom` driver is registered (`supported_vendors`), every
//! case must be refused as `unsupported`, the rule for formats OpenSlide reads and we do not.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use common::{supported_vendors, vendor_slides};
use serde_json::Value;
use slidestream::{Error, Slide};

/// The generated slides' root and the cases of `bad-dicom/cases.json`; `None` (with a
/// message) when either is absent.
fn cases() -> Option<(PathBuf, Vec<Value>)> {
    let vd = vendor_slides()?;
    let p = vd.join("bad-dicom").join("cases.json");
    let Ok(text) = std::fs::read_to_string(&p) else {
        eprintln!("SKIP: {} not found (run scripts/make_vendor_slides.py)", p.display());
        return None;
    };
    let v: Value = serde_json::from_str(&text).unwrap();
    Some((vd, v.as_array().expect("cases.json is a list").clone()))
}

/// What happens to a case: open (and read level 0 whole for `read`): the level dimensions,
/// or the error.
fn outcome(path: &std::path::Path, stage: &str) -> Result<Vec<(u64, u64)>, Error> {
    let slide = Slide::open(path)?;
    if stage == "read" {
        let (w, h) = slide.level_dimensions()[0];
        slide.read_region((0, 0), 0, (w, h))?;
    }
    Ok(slide.level_dimensions())
}

#[test]
fn bad_dicom_inputs_give_their_error_kind() {
    let Some((vd, cases)) = cases() else { return };
    let driver = supported_vendors().contains(&"dicom");
    assert!(cases.len() >= 10, "only {} cases", cases.len());
    for c in &cases {
        let name = c["case"].as_str().unwrap();
        let path = vd.join(c["open"].as_str().unwrap());
        let stage = c["stage"].as_str().unwrap();
        let res = catch_unwind(AssertUnwindSafe(|| outcome(&path, stage))).unwrap_or_else(|_| panic!("{name}: panicked"));
        if !driver {
            let err = res.err().unwrap_or_else(|| panic!("{name}: opened without a dicom driver"));
            assert_eq!(err.kind_name(), "unsupported", "{name}: {err}");
            continue;
        }
        match (c["error"].as_str(), res) {
            (Some(kind), Err(err)) => {
                assert_eq!(err.kind_name(), kind, "{name}: {err} (OpenSlide: {})", c["openslide"]);
                let file = if path.is_dir() { path.clone() } else { path.parent().unwrap().to_path_buf() };
                assert!(err.to_string().contains(&file.display().to_string()), "{name}: error names neither the file nor its folder: {err}");
            }
            (Some(kind), Ok(_)) => panic!("{name}: {stage} succeeded; expected a {kind} error (OpenSlide: {})", c["openslide"]),
            (None, Ok(dims)) => {
                let want: Vec<(u64, u64)> =
                    c["level_dimensions"].as_array().unwrap().iter().map(|d| (d[0].as_u64().unwrap(), d[1].as_u64().unwrap())).collect();
                assert_eq!(dims, want, "{name}: levels differ from OpenSlide's");
            }
            (None, Err(err)) => panic!("{name}: OpenSlide opens it, we fail: {err}"),
        }
    }
}

/// The generated DICOM folder slides: the vendor-slides folder and, for each reference folder
/// of `reference-multifile/` whose slide OpenSlide detects as `dicom`, the folder and its
/// `regions.json`; `None` (with a SKIP line) when there are none.
fn dicom_references() -> Option<(PathBuf, Vec<(PathBuf, Value)>)> {
    let vd = vendor_slides()?;
    let Ok(entries) = std::fs::read_dir(vd.join("reference-multifile")) else {
        eprintln!("SKIP: no reference-multifile/ in {}", vd.display());
        return None;
    };
    let mut refs = Vec::new();
    for e in entries {
        let dir = e.unwrap().path();
        let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("regions.json")).unwrap()).unwrap();
        if r["detect_format"].as_str() == Some("dicom") {
            refs.push((dir, r));
        }
    }
    Some((vd, refs))
}

#[test]
fn dicom_folders_open_as_their_file() {
    let Some((vd, refs)) = dicom_references() else { return };
    let driver = supported_vendors().contains(&"dicom");
    let mut n = 0;
    for (_dir, r) in refs {
        let folder = vd.join(r["file"].as_str().unwrap());
        let file = vd.join(r["open"].as_str().unwrap());
        let by_folder = catch_unwind(|| Slide::open(&folder)).unwrap_or_else(|_| panic!("{}: panicked", folder.display()));
        if !driver {
            let err = by_folder.expect_err("a DICOM folder opened without a dicom driver");
            assert_eq!(err.kind_name(), "unsupported", "{}: {err}", folder.display());
            n += 1;
            continue;
        }
        let a = by_folder.unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
        let b = Slide::open(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert_eq!(a.properties(), b.properties(), "{}", folder.display());
        assert_eq!(a.level_dimensions(), b.level_dimensions(), "{}", folder.display());
        assert_eq!(a.index().path(), file, "{}: the folder resolves to another file", folder.display());
        n += 1;
    }
    assert!(n >= 10, "only {n} DICOM folder slides");
}

/// OpenSlide opens a DICOM slide through any file of its series (verified on the generated
/// folders: every file gives the same properties): so must we, with OpenSlide's properties of
/// the reference (`properties.json`) whichever file is opened. The files OpenSlide refuses
/// (`regions.json["refused_files"]`: a text file, another SOP class) are refused as
/// `unsupported`.
#[test]
fn any_file_of_a_dicom_folder_opens_the_slide() {
    let Some((vd, refs)) = dicom_references() else { return };
    let driver = supported_vendors().contains(&"dicom");
    let mut n = 0;
    for (dir, r) in refs {
        let want: std::collections::BTreeMap<String, String> = serde_json::from_str(&std::fs::read_to_string(dir.join("properties.json")).unwrap()).unwrap();
        let refused: Vec<PathBuf> =
            r.get("refused_files").and_then(Value::as_array).map(|a| a.iter().map(|f| vd.join(f.as_str().unwrap())).collect()).unwrap_or_default();
        let mut files: Vec<PathBuf> = std::fs::read_dir(vd.join(r["file"].as_str().unwrap())).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            let res = catch_unwind(|| Slide::open(&f)).unwrap_or_else(|_| panic!("{}: panicked", f.display()));
            if !driver || refused.contains(&f) {
                let err = res.expect_err("a DICOM file opened without a dicom driver");
                assert_eq!(err.kind_name(), "unsupported", "{}: {err}", f.display());
            } else {
                let s = res.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                let got = s.properties();
                let diff: Vec<String> = want
                    .keys()
                    .chain(got.keys())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .filter(|k| got.get(*k) != want.get(*k))
                    .map(|k| format!("{k}: ours {:?}, OpenSlide {:?}", got.get(k), want.get(k)))
                    .collect();
                assert!(diff.is_empty(), "{}: properties differ from OpenSlide's: {diff:#?}", f.display());
            }
            n += 1;
        }
    }
    assert!(n >= 25, "only {n} DICOM files opened");
}

/// GPU path (feature `cuda`): device reads of every level of every generated DICOM folder
/// slide (JPEG RGB / YBR_FULL_422, JPEG 2000, native; sparse with a missing tile;
/// concatenations) equal the CPU path within 2 (nvJPEG vs libjpeg-turbo rounding), RGBA and
/// an RGB batch. Skips without a usable CUDA device.
#[cfg(feature = "cuda")]
#[test]
fn generated_dicom_device_reads_equal_the_cpu() {
    use slidestream::gpu::{self, DeviceOptions};
    let Some((vd, mut refs)) = dicom_references() else { return };
    if !gpu::available() {
        eprintln!("SKIP: no usable CUDA device");
        return;
    }
    refs.sort_by(|a, b| a.0.cmp(&b.0));
    let before = gpu::stats(0);
    let max_diff = |a: &[u8], b: &[u8]| a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0);
    for (_dir, r) in refs {
        let name = r["file"].as_str().unwrap();
        let slide = Slide::open(vd.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut worst = 0;
        for level in 0..slide.level_count() {
            let (w, h) = slide.level_dimensions()[level];
            let ds = slide.level_downsamples()[level];
            let l0 = |x: i64, y: i64| ((x as f64 * ds) as i64, (y as f64 * ds) as i64);
            let rects = [(0, 0, w, h), (100, 70, 200, 150), (w as i64 - 60, h as i64 - 50, 100, 90), (-20, -30, 90, 80)];
            for (x, y, rw, rh) in rects {
                let loc = l0(x, y);
                let cpu = slide.read_region(loc, level, (rw, rh)).unwrap_or_else(|e| panic!("{name} L{level}: {e}"));
                let opts = DeviceOptions { device: 0, channels: 4, background: [255, 255, 255] };
                let dev = slide.read_region_device(loc, level, (rw, rh), &opts).unwrap_or_else(|e| panic!("{name} L{level} device: {e}"));
                worst = worst.max(max_diff(&dev.to_host().unwrap(), &cpu.data));
            }
            let locs = [l0(0, 0), l0(w as i64 / 2, h as i64 / 3), l0(-10, -10)];
            let bg = [10, 20, 30];
            let mut cpu = vec![0u8; locs.len() * 64 * 64 * 3];
            slide.read_regions_rgb_into(&locs, level, (64, 64), bg, &mut cpu).unwrap();
            let opts = DeviceOptions { device: 0, channels: 3, background: bg };
            let dev = slide.read_regions_device(&locs, level, (64, 64), &opts).unwrap().into_result().unwrap();
            worst = worst.max(max_diff(&dev.to_host().unwrap(), &cpu));
        }
        eprintln!("{name}: GPU vs CPU max abs diff {worst}");
        assert!(worst <= 2, "{name}: GPU vs CPU max abs diff {worst}");
    }
    let after = gpu::stats(0);
    eprintln!(
        "nvJPEG decodes {} (hardware {}, device bitstream {}, hybrid {}); CPU fallback reason: {}",
        gpu_decoded(&after) - gpu_decoded(&before),
        after.decoded_hardware - before.decoded_hardware,
        after.decoded_device_bitstream - before.decoded_device_bitstream,
        after.decoded_hybrid - before.decoded_hybrid,
        after.cpu_fallback_reason
    );
}

/// Tiles decoded on the GPU by any of its decoders (nvJPEG's backends, and the SM decoder when
/// `SLIDESTREAM_GPU_SM_DECODER` turns it on).
#[cfg(feature = "cuda")]
fn gpu_decoded(s: &slidestream::gpu::GpuStats) -> u64 {
    s.decoded_hardware + s.decoded_device_bitstream + s.decoded_hybrid + s.decoded_sm
}
