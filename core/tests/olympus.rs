//! Olympus / Evident VSI + ETS (`format::olympus`). OpenSlide 4.0.1 has no VSI driver: the
//! oracle here is an independent decode of each ETS tile table (`decode_ets` in
//! `scripts/vendor_slides/vsi.py`: Pillow for JPEG, numpy for raw tiles); py/tests/test_olympus.py
//! compares the same slides and the real JPEG 2000 file with slideio.
//!
//! * the slides of `scripts/vendor_slides/vsi.py` (run at test time into cargo's target tmp
//!   folder with `.venv/bin/python` or `$SLIDESTREAM_PYTHON`; skipped with a message when it
//!   cannot run, a failure under `scripts/test-all.sh`): brightfield JPEG (3 levels, missing
//!   tiles), brightfield raw, 2-channel uint16 fluorescence with 2 Z planes (raw) and 2-channel
//!   uint16 lossless JPEG 2000 fluorescence (when imagecodecs is installed) open as `olympus`
//!   with their levels, properties and thumbnail; every level equals the oracle (raw: 0
//!   difference; JPEG: at most 2), missing tiles transparent;
//! * the real files of `../shared/formats3`: the JPEG 2000 fluorescence VSI opens with its 2
//!   uint16 channels; the VSI without its ETS files is an `Io` error of kind `NotFound`
//!   naming the missing file;
//! * bad input (truncated `.vsi` and `.ets`, tile offsets past the end, a loop in the record
//!   tree, absurd image sizes, unknown compression, a non-zero tile-grid origin) gives typed
//!   errors naming the file, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value as Json;
use slidestream::{Error, Samples, Slide};

/// The generated slides' folder (made once per test process), or `None` when the generator
/// cannot run.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = std::env::var_os("SLIDESTREAM_PYTHON").map(PathBuf::from).unwrap_or_else(|| root.join(".venv/bin/python"));
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vsi");
        let _ = std::fs::remove_dir_all(&dir);
        match Command::new(&python).arg(root.join("scripts/vendor_slides/vsi.py")).arg(&dir).output() {
            Ok(o) if o.status.success() => Some(dir),
            Ok(o) if std::env::var_os("SLIDESTREAM_VENDOR_SLIDES").is_some() => {
                panic!("vsi.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr))
            }
            Ok(o) => {
                eprintln!("SKIP: vsi.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("SKIP: cannot run {} ({e}); VSI tests skipped", python.display());
                None
            }
        }
    })
    .as_deref()
}

fn cases(dir: &Path) -> (Vec<Json>, Json) {
    let doc: Json = serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    (doc["cases"].as_array().unwrap().clone(), doc)
}

fn formats3() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/formats3");
    if d.join("vsi-ets-test-jpg2k.vsi").is_file() {
        Some(d)
    } else {
        eprintln!("SKIP: ../shared/formats3 not present");
        None
    }
}

fn oracle(path: &Path, wide: bool) -> Vec<u16> {
    let raw = std::fs::read(path).unwrap();
    if wide {
        raw.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect()
    } else {
        raw.into_iter().map(u16::from).collect()
    }
}

fn samples(s: &Samples) -> Vec<u16> {
    match s {
        Samples::U8(v) => v.iter().map(|&x| x as u16).collect(),
        Samples::U16(v) => v.clone(),
    }
}

#[test]
fn every_generated_vsi_opens_with_its_levels_and_properties() {
    let Some(dir) = fixtures() else { return };
    let (cases, doc) = cases(dir);
    assert!(cases.len() >= 3, "the JPEG 2000 slide needs imagecodecs; the others are always written");
    for c in &cases {
        let file = c["file"].as_str().unwrap();
        let slide = Slide::open(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(slide.vendor(), "olympus", "{file}");
        let dims: Vec<(u64, u64)> = c["level_sizes"].as_array().unwrap().iter().map(|l| (l[0].as_u64().unwrap(), l[1].as_u64().unwrap())).collect();
        assert_eq!(slide.level_dimensions(), dims, "{file}");
        let p = slide.properties();
        for key in ["openslide.mpp-x", "openslide.mpp-y"] {
            assert!((p[key].parse::<f64>().unwrap() - doc["mpp"].as_f64().unwrap()).abs() < 1e-9, "{file} {key}");
        }
        assert_eq!(p["openslide.objective-power"], "20", "{file}");
        assert_eq!(p["openslide.background-color"], c["background"].as_str().unwrap(), "{file}");
        assert_eq!(p["openslide.level[0].tile-width"], "64", "{file}");
        assert_eq!(p["olympus.stack-name"], "20x");
        assert_eq!(p["olympus.stack-count"], "2");
        assert_eq!(p["olympus.stack[0].type"], "overview");
        assert_eq!(p["olympus.product-name"], "slidestream test writer");
        assert_eq!(p["olympus.ets.file"], c["ets"].as_str().unwrap());
        assert!(p.contains_key("openslide.quickhash-1"), "{file}");
        let names: Vec<&str> = c["channels"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        if names.is_empty() {
            assert_eq!(slide.channel_names(), ["R", "G", "B"], "{file}");
        } else {
            assert_eq!(slide.channel_names(), names, "{file}");
            assert_eq!(p["olympus.channel-count"], "2");
            assert_eq!(p["olympus.z-count"], if file.contains("j2k") { "1" } else { "2" });
        }
        // The VSI's own TIFF preview.
        let t = slide.read_associated("thumbnail").unwrap();
        assert_eq!((t.width, t.height), (60, 40), "{file}");
        if file == "brightfield-jpeg.vsi" {
            let want = std::fs::read(dir.join("brightfield-jpeg.thumbnail.raw")).unwrap();
            let got: Vec<u8> = t.data.chunks_exact(4).flat_map(|p| p[..3].to_vec()).collect();
            assert_eq!(got, want);
        }
    }
}

#[test]
fn every_level_equals_the_ets_oracle_and_missing_tiles_are_transparent() {
    let Some(dir) = fixtures() else { return };
    for c in &cases(dir).0 {
        let file = c["file"].as_str().unwrap();
        let slide = Slide::open(dir.join(file)).unwrap();
        let wide = c["dtype"] == "uint16";
        let tol = c["tolerance"].as_u64().unwrap() as u16;
        let n = c["channels"].as_array().unwrap().len().max(1);
        let rgb = c["channels"].as_array().unwrap().is_empty();
        let n = if rgb { 3 } else { n };
        for (k, l) in c["level_sizes"].as_array().unwrap().iter().enumerate() {
            let (w, h) = (l[0].as_u64().unwrap() as usize, l[1].as_u64().unwrap() as usize);
            let want = oracle(&dir.join(format!("{file}.L{k}.raw")), wide);
            let mask = std::fs::read(dir.join(format!("{file}.L{k}.mask"))).unwrap();
            assert_eq!(want.len(), w * h * n);
            let got = slide.read_region((0, 0), k, (w as u64, h as u64)).unwrap_or_else(|e| panic!("{file} level {k}: {e}"));
            let mut worst = 0;
            for (i, px) in got.data.chunks_exact(4).enumerate() {
                if mask[i] == 0 {
                    assert_eq!(px[3], 0, "{file} level {k} pixel {i}: a missing tile is transparent");
                    continue;
                }
                assert_eq!(px[3], 255);
                for ch in 0..3 {
                    let v = if rgb {
                        want[i * 3 + ch]
                    } else if wide {
                        want[i * n] >> 8
                    } else {
                        want[i * n]
                    };
                    worst = worst.max((px[ch] as u16).abs_diff(v));
                }
            }
            assert!(worst <= tol, "{file} level {k}: read_region max abs diff {worst} > {tol}");
            if !rgb {
                let ch = slide.read_region_channels((0, 0), k, (w as u64, h as u64), None).unwrap();
                assert_eq!(matches!(ch.data, Samples::U16(_)), wide, "{file}");
                assert_eq!(samples(&ch.data), want, "{file} level {k}: stored samples");
            }
        }
        if file == "brightfield-jpeg.vsi" {
            assert_eq!(slide.properties()["olympus.ets.compression"], "jpeg");
        }
    }
}

#[test]
fn the_real_jpeg2000_fluorescence_vsi_opens_with_its_channels() {
    let Some(d) = formats3() else { return };
    let slide = Slide::open(d.join("vsi-ets-test-jpg2k.vsi")).unwrap();
    assert_eq!(slide.vendor(), "olympus");
    assert_eq!(slide.level_dimensions(), vec![(1645, 1682)]);
    assert_eq!(slide.channel_names(), ["C405", "C488"]);
    let p = slide.properties();
    assert_eq!(p["openslide.objective-power"], "60");
    assert!((p["openslide.mpp-x"].parse::<f64>().unwrap() - 0.108333).abs() < 1e-6, "{}", p["openslide.mpp-x"]);
    assert_eq!(p["olympus.ets.compression"], "jpeg2000");
    assert_eq!(p["olympus.ets.pixel-type"], "uint16");
    assert_eq!(p["olympus.z-count"], "11");
    assert_eq!(p["olympus.t-count"], "1");
    assert_eq!(p["olympus.stack-name"], "001 C405, C488");
    assert_eq!(p["olympus.product-name"], "OLYMPUS cellSens Dimension");
    assert!(slide.associated_images().contains_key("thumbnail"));
    let ch = slide.read_region_channels((0, 0), 0, (1645, 1682), None).unwrap();
    let Samples::U16(v) = &ch.data else { panic!("16-bit samples expected") };
    // Plane z = 0 of this file is blank (slideio reads zeros too); the generated
    // fluo-j2k-u16.vsi checks 16-bit JPEG 2000 values.
    assert!(v.iter().all(|&x| x == 0));
    // read_region shows channel 0's high byte.
    let rgba = slide.read_region((0, 0), 0, (1645, 1682)).unwrap();
    for (i, px) in rgba.data.chunks_exact(4).enumerate().step_by(997) {
        assert_eq!(px[0] as u16, v[i * 2] >> 8, "pixel {i}");
    }
}

fn assert_not_found_naming(e: &Error, name: &str) {
    match e {
        Error::Io { source, .. } => assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{e}"),
        other => panic!("an Io error expected: {other}"),
    }
    assert!(e.to_string().contains(name), "the error names the missing file: {e}");
}

#[test]
fn a_missing_ets_file_is_a_not_found_error_naming_it() {
    if let Some(d) = formats3() {
        let e = Slide::open(d.join("Image_Mouse13_PB_H7-no-ets.vsi")).unwrap_err();
        assert_not_found_naming(&e, "_Image_Mouse13_PB_H7-no-ets_/stack10001/frame_t.ets");
        assert_eq!(Slide::detect_vendor(d.join("Image_Mouse13_PB_H7-no-ets.vsi")).unwrap(), Some("olympus"));
    }
    if let Some(dir) = fixtures() {
        let e = Slide::open(dir.join("bad/no-ets.vsi")).unwrap_err();
        assert_not_found_naming(&e, "_no-ets_/stack10001/frame_t.ets");
    }
}

/// A copy of generated slide `name` (its `.vsi` and ETS folder) in a fresh folder; returns
/// the `.vsi` and ETS paths.
fn copy_slide(dir: &Path, name: &str, tag: &str) -> (PathBuf, PathBuf) {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("vsi-{tag}"));
    let _ = std::fs::remove_dir_all(&out);
    let ets_rel = format!("_{name}_/stack10001/frame_t.ets");
    std::fs::create_dir_all(out.join(format!("_{name}_/stack10001"))).unwrap();
    std::fs::copy(dir.join(format!("{name}.vsi")), out.join(format!("{name}.vsi"))).unwrap();
    std::fs::copy(dir.join(&ets_rel), out.join(&ets_rel)).unwrap();
    (out.join(format!("{name}.vsi")), out.join(ets_rel))
}

/// Open and read all of level 0 and the associated images; the error's kind and text, or "ok".
fn outcome(path: &Path) -> (String, String) {
    let p = path.to_path_buf();
    let r = std::panic::catch_unwind(move || -> slidestream::Result<()> {
        let slide = Slide::open(&p)?;
        let (w, h) = slide.level_dimensions()[0];
        slide.read_region((0, 0), 0, (w.min(4096), h.min(4096)))?;
        for name in slide.associated_images().keys() {
            slide.read_associated(name)?;
        }
        Ok(())
    })
    .unwrap_or_else(|_| panic!("{}: panicked", path.display()));
    match r {
        Ok(()) => ("ok".into(), String::new()),
        Err(e) => (e.kind_name().to_string(), e.to_string()),
    }
}

/// The position of the last field header of `kind` and `tag` in a `.vsi` (the generated
/// slides' second stack is the pyramid).
fn field_at(bytes: &[u8], kind: u32, tag: i32) -> usize {
    let pat: Vec<u8> = kind.to_le_bytes().into_iter().chain(tag.to_le_bytes()).collect();
    bytes.windows(8).rposition(|w| w == pat).unwrap_or_else(|| panic!("no field {tag}"))
}

#[test]
fn damaged_vsi_and_ets_files_are_typed_errors_naming_the_file() {
    let Some(dir) = fixtures() else { return };
    let name = "brightfield-raw";
    // Truncated .vsi: inside the record tree and inside the TIFF preview.
    let vsi = std::fs::read(dir.join(format!("{name}.vsi"))).unwrap();
    for cut in [20, 200, vsi.len() / 2, vsi.len() - 40] {
        let (v, _) = copy_slide(dir, name, &format!("cut-vsi-{cut}"));
        std::fs::write(&v, &vsi[..cut]).unwrap();
        let (kind, text) = outcome(&v);
        assert!(["format", "unsupported"].contains(&kind.as_str()), "cut at {cut}: {kind}: {text}");
        assert!(text.contains(&*v.to_string_lossy()), "cut at {cut}: {text}");
    }
    // Truncated .ets: its headers or its tile table (at the end of the file) cut.
    let ets = std::fs::read(dir.join(format!("_{name}_/stack10001/frame_t.ets"))).unwrap();
    for cut in [30, 100, ets.len() - 10] {
        let (v, e) = copy_slide(dir, name, &format!("cut-ets-{cut}"));
        std::fs::write(&e, &ets[..cut]).unwrap();
        let (kind, text) = outcome(&v);
        assert_eq!(kind, "format", "cut at {cut}: {text}");
        assert!(text.contains("frame_t.ets"), "cut at {cut}: {text}");
    }
    // A tile offset past the end of the ETS file: the open succeeds, reading it fails.
    let (v, e) = copy_slide(dir, name, "offset");
    let mut b = ets.clone();
    let table = u64::from_le_bytes(b[32..40].try_into().unwrap()) as usize;
    b[table + 4 + 16..table + 4 + 24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    std::fs::write(&e, &b).unwrap();
    let slide = Slide::open(&v).unwrap();
    let err = slide.read_region((0, 0), 0, (10, 10)).unwrap_err();
    assert_eq!(err.kind_name(), "format", "{err}");
    assert!(err.to_string().contains("frame_t.ets") && err.to_string().contains("tile (0, 0)"), "{err}");
    // A loop in the record tree: the first field of the root volume names itself as next.
    let (v, _) = copy_slide(dir, name, "loop");
    let mut b = vsi.clone();
    b[32 + 8..32 + 12].copy_from_slice(&24u32.to_le_bytes());
    std::fs::write(&v, &b).unwrap();
    let (kind, text) = outcome(&v);
    assert!(kind == "format" && text.contains("loop"), "{kind}: {text}");
    // Absurd image size (2053: x, y, width, height) and tile coordinates.
    let (v, _) = copy_slide(dir, name, "absurd");
    let mut b = vsi.clone();
    let at = field_at(&b, 259, 2053) + 16;
    b[at + 8..at + 12].copy_from_slice(&(-5i32).to_le_bytes());
    std::fs::write(&v, &b).unwrap();
    let (kind, text) = outcome(&v);
    assert!(kind == "format" && text.contains("-5x220"), "{kind}: {text}");
    let (v, e) = copy_slide(dir, name, "absurd-tile");
    let mut b = ets.clone();
    b[table + 4..table + 8].copy_from_slice(&(1i32 << 30).to_le_bytes());
    std::fs::write(&e, &b).unwrap();
    let (kind, text) = outcome(&v);
    assert!(kind == "format" && text.contains("lies outside"), "{kind}: {text}");
    // Absurd ETS header values: tile size, dimension count, tile-table count.
    for (off, value, want) in [(64 + 28, u32::MAX, "limits"), (12, 1000, "format"), (40, u32::MAX, "format")] {
        let (v, e) = copy_slide(dir, name, &format!("ets-{off}"));
        let mut b = ets.clone();
        b[off..off + 4].copy_from_slice(&value.to_le_bytes());
        std::fs::write(&e, &b).unwrap();
        let (kind, text) = outcome(&v);
        assert_eq!(kind, want, "ETS offset {off}: {text}");
        assert!(text.contains("frame_t.ets"), "{text}");
    }
    // Unknown compression, and a tile-grid origin other than 0: unsupported.
    for (bad, words) in [("bad/jpeg-lossless.vsi", "compression 5"), ("bad/origin.vsi", "origin")] {
        let (kind, text) = outcome(&dir.join(bad));
        assert_eq!(kind, "unsupported", "{bad}: {text}");
        assert!(text.contains(words), "{bad}: {text}");
    }
}
