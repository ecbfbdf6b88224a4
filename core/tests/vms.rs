//! Hamamatsu VMS and VMU (`format::hamamatsu::vms`, `vmu`) against OpenSlide 4.0.1.
//!
//! * the slides `scripts/vendor_slides/vms.py` writes (run at test time into cargo's target
//!   tmp dir with the repository's `.venv/bin/python`, or `$SLIDESTREAM_PYTHON`; skipped with
//!   a message when it cannot run, and a failure under `scripts/test-all.sh`) open as
//!   `hamamatsu` with OpenSlide's levels, downsamples, properties (every one, both ways),
//!   associated images and regions (regions across image-file boundaries, past the edges, on
//!   DCT-scaled and map levels): 0 difference;
//! * a slide opens by its folder and by a key file of any name (detection by content);
//! * damaged slides (a missing or truncated image file, a JPEG without restart markers, absurd
//!   grid sizes, a key file without the group, a VMS key file under the VMU group, file names
//!   leading out of the folder, duplicate or out-of-grid ImageFile keys) are typed errors naming
//!   the file; a bogus optimisation file changes nothing;
//! * damaged VMU slides (NGR files truncated, with a bad magic, a zero or non-dividing column
//!   width, a huge width or height, a pixel offset past the end; key files with other
//!   `BitsPerPixel` / `PixelOrder`) are typed errors naming the file, never a panic.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{decode_png, max_abs_diff};
use serde_json::Value;
use slidestream::{Error, Slide};

/// The generated slides' folder (made once per test process), `None` when the generator
/// cannot run here.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = std::env::var_os("SLIDESTREAM_PYTHON").map(PathBuf::from).unwrap_or_else(|| root.join(".venv/bin/python"));
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vms");
        let _ = std::fs::remove_dir_all(&dir);
        match Command::new(&python).args(["-m", "vendor_slides.vms"]).arg(&dir).current_dir(root.join("scripts")).output() {
            Ok(o) if o.status.success() => Some(dir),
            Ok(o) if std::env::var_os("SLIDESTREAM_VENDOR_SLIDES").is_some() => {
                panic!("vms.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr))
            }
            Ok(o) => {
                eprintln!("SKIP: vms.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("SKIP: cannot run {} ({e}); VMS tests skipped", python.display());
                None
            }
        }
    })
    .as_deref()
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn generated_slides_match_openslide() {
    let Some(dir) = fixtures() else { return };
    let mut regions_compared = 0;
    for name in ["vms-2x2", "vms-3x1-444", "vmu-320x200"] {
        let refdir = dir.join("reference-multifile").join(name);
        let doc = json(&refdir.join("regions.json"));
        let theirs = json(&refdir.join("properties.json"));
        let slide = Slide::open(dir.join(doc["open"].as_str().unwrap())).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(slide.vendor(), "hamamatsu");
        let dims: Vec<(u64, u64)> = doc["level_dimensions"].as_array().unwrap().iter().map(|d| (d[0].as_u64().unwrap(), d[1].as_u64().unwrap())).collect();
        assert_eq!(slide.level_dimensions(), dims, "{name}");
        for (a, b) in slide.level_downsamples().iter().zip(doc["level_downsamples"].as_array().unwrap()) {
            assert_eq!(*a, b.as_f64().unwrap(), "{name}: downsample");
        }
        let ours = slide.properties();
        let theirs = theirs.as_object().unwrap();
        for (k, v) in theirs {
            assert_eq!(ours.get(k).map(String::as_str), v.as_str(), "{name}: property {k}");
        }
        for k in ours.keys() {
            assert!(theirs.contains_key(k), "{name}: property {k} = {:?} not in OpenSlide's", ours[k]);
        }
        for r in doc["regions"].as_array().unwrap() {
            let level = r["level"].as_u64().unwrap() as usize;
            let loc = (r["location"][0].as_i64().unwrap(), r["location"][1].as_i64().unwrap());
            let size = (r["size"][0].as_u64().unwrap(), r["size"][1].as_u64().unwrap());
            let (_, _, want) = decode_png(&refdir.join(r["png"].as_str().unwrap()));
            let got = slide.read_region(loc, level, size).unwrap_or_else(|e| panic!("{name} {}: {e}", r["name"]));
            assert_eq!(max_abs_diff(&got.data, &want), 0, "{name} region {}", r["name"]);
            regions_compared += 1;
        }
        let assoc = doc["associated_images"].as_object().unwrap();
        assert_eq!(slide.associated_images().len(), assoc.len(), "{name}");
        for (an, a) in assoc {
            let (w, h, want) = decode_png(&refdir.join(a["png"].as_str().unwrap()));
            let got = slide.read_associated(an).unwrap();
            assert_eq!((got.width, got.height), (w as u64, h as u64));
            assert_eq!(max_abs_diff(&got.data, &want), 0, "{name} associated {an}");
        }
    }
    assert_eq!(regions_compared, 19);
}

/// A copy of slide `name` in a fresh folder `case` (under cargo's tmp dir), for damaging.
fn copy_slide(name: &str, case: &str) -> Option<PathBuf> {
    let src = fixtures()?.join(name);
    let dst = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vms-cases").join(case);
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    Some(dst)
}

/// Replace `from` with `to` in the key file `slide.vms` of folder `d`.
fn edit_key_file(d: &Path, from: &str, to: &str) {
    let p = d.join("slide.vms");
    let s = std::fs::read_to_string(&p).unwrap();
    assert!(s.contains(from), "{from:?} not in the key file");
    std::fs::write(&p, s.replace(from, to)).unwrap();
}

fn open_err(d: &Path) -> Error {
    match Slide::open(d.join("slide.vms")) {
        Ok(_) => panic!("{}: opened", d.display()),
        Err(e) => e,
    }
}

#[test]
fn opens_by_folder_and_by_content() {
    let Some(dir) = fixtures() else { return };
    let slide = Slide::open(dir.join("vms-2x2")).unwrap();
    assert_eq!(slide.index().path(), dir.join("vms-2x2/slide.vms"));
    // Any name: detection reads the key file, never the extension.
    let d = copy_slide("vms-2x2", "renamed").unwrap();
    std::fs::rename(d.join("slide.vms"), d.join("key.txt")).unwrap();
    let s = Slide::open(d.join("key.txt")).unwrap();
    assert_eq!(s.vendor(), "hamamatsu");
    assert_eq!(s.properties()["openslide.quickhash-1"], slide.properties()["openslide.quickhash-1"]);
}

#[test]
fn a_bogus_optimisation_file_changes_nothing() {
    let Some(dir) = fixtures() else { return };
    let good = Slide::open(dir.join("vms-2x2/slide.vms")).unwrap();
    let want = good.read_region((0, 0), 0, (448, 220)).unwrap();
    for (case, bytes) in [
        ("opt-offsets", (0..54u64).flat_map(|k| (k * 7919 + 3).to_le_bytes().into_iter().chain([0u8; 32])).collect::<Vec<u8>>()),
        ("opt-negative", [(-5i64).to_le_bytes().to_vec(), vec![0xFF; 32], i64::MAX.to_le_bytes().to_vec()].concat()),
        ("opt-empty", Vec::new()),
    ] {
        let d = copy_slide("vms-2x2", case).unwrap();
        std::fs::write(d.join("slide.opt"), bytes).unwrap();
        let s = Slide::open(d.join("slide.vms")).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(s.read_region((0, 0), 0, (448, 220)).unwrap().data, want.data, "{case}");
    }
    let d = copy_slide("vms-2x2", "opt-missing").unwrap();
    std::fs::remove_file(d.join("slide.opt")).unwrap();
    assert_eq!(Slide::open(d.join("slide.vms")).unwrap().read_region((0, 0), 0, (448, 220)).unwrap().data, want.data);
}

#[test]
fn damaged_image_files_are_typed_errors_naming_the_file() {
    if fixtures().is_none() {
        return;
    }
    let d = copy_slide("vms-2x2", "missing-image").unwrap();
    std::fs::remove_file(d.join("slide_1_1.jpg")).unwrap();
    let e = open_err(&d);
    assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("slide_1_1.jpg"), "{e}");

    let d = copy_slide("vms-2x2", "missing-map").unwrap();
    std::fs::remove_file(d.join("slide_map.jpg")).unwrap();
    let e = open_err(&d);
    assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("slide_map.jpg"), "{e}");

    for (case, keep) in [("truncated-data", 1500usize), ("truncated-header", 100), ("empty", 0)] {
        let d = copy_slide("vms-2x2", case).unwrap();
        let p = d.join("slide_1_0.jpg");
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..keep]).unwrap();
        let e = open_err(&d);
        assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("slide_1_0.jpg"), "{case}: {e}");
    }

    // A JPEG without restart markers (the macro image) as an image file.
    let d = copy_slide("vms-2x2", "no-restart").unwrap();
    std::fs::copy(d.join("slide_macro.jpg"), d.join("slide_0_1.jpg")).unwrap();
    let e = open_err(&d);
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("No restart markers"), "{e}");

    // Image files with other tile sizes than image file 0 (the map's 56x8 tiles).
    let d = copy_slide("vms-2x2", "tile-size").unwrap();
    std::fs::copy(d.join("slide_map.jpg"), d.join("slide_1_1.jpg")).unwrap();
    let e = open_err(&d);
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("Tile size not consistent"), "{e}");

    // A tile's restart marker damaged: the file holds one interval fewer than its tiles.
    let d = copy_slide("vms-2x2", "lost-marker").unwrap();
    let p = d.join("slide_1_0.jpg");
    let mut bytes = std::fs::read(&p).unwrap();
    let at = bytes.windows(2).rposition(|w| w[0] == 0xFF && (0xD0..=0xD7).contains(&w[1])).unwrap();
    bytes[at + 1] = 0x00;
    std::fs::write(&p, bytes).unwrap();
    let e = open_err(&d);
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("slide_1_0.jpg"), "{e}");
}

#[test]
fn hostile_key_files_are_typed_errors() {
    if fixtures().is_none() {
        return;
    }
    let cases: &[(&str, &str, &str, &str)] = &[
        ("huge-grid", "NoJpegColumns=2", "NoJpegColumns=2000000000", "limits"),
        ("big-grid", "NoJpegColumns=2", "NoJpegColumns=60", "format"),
        ("zero-cols", "NoJpegColumns=2", "NoJpegColumns=0", "unsupported"),
        ("text-cols", "NoJpegColumns=2", "NoJpegColumns=two", "unsupported"),
        ("no-group", "[Virtual Microscope Specimen]", "[Something Else]", "unsupported"),
        ("vmu", "[Virtual Microscope Specimen]", "[Uncompressed Virtual Microscope Specimen]", "format"),
        ("no-map", "MapFile=slide_map.jpg", "MapFile=", "format"),
        ("escape", "ImageFile(1,1)=slide_1_1.jpg", "ImageFile(1,1)=../vms-2x2/slide_1_1.jpg", "format"),
        ("absolute", "ImageFile(1,1)=slide_1_1.jpg", "ImageFile(1,1)=/etc/passwd", "format"),
        ("out-of-grid", "ImageFile(1,1)=", "ImageFile(2,1)=", "format"),
        ("negative", "ImageFile(1,1)=", "ImageFile(-1,1)=", "format"),
        ("duplicate", "ImageFile(1,1)=", "ImageFile(1,0,0)=x\r\nImageFile(0,0)=", "format"),
        ("four-dims", "ImageFile(1,1)=", "ImageFile(0,1,1,1)=", "format"),
        ("not-ini", "[Virtual Microscope Specimen]", "[Virtual Microscope Specimen]\r\njunk line", "unsupported"),
    ];
    for &(case, from, to, kind) in cases {
        let d = copy_slide("vms-2x2", case).unwrap();
        edit_key_file(&d, from, to);
        let e = open_err(&d);
        assert_eq!(e.kind_name(), kind, "{case}: {e}");
        assert!(e.to_string().contains(&d.display().to_string()), "{case}: error does not name the folder: {e}");
    }
    // A key file over 64 KiB is not one (OpenSlide's limit).
    let d = copy_slide("vms-2x2", "too-big").unwrap();
    edit_key_file(&d, "SourceLens=20", &format!("SourceLens=20\r\nPad={}", "x".repeat(70_000)));
    assert_eq!(open_err(&d).kind_name(), "unsupported");
}

/// Slide `vmu-320x200` with its NGR image file's header field at `at` set to `v` (or the file
/// cut to `keep` bytes), opened: the error.
fn vmu_err(case: &str, edit: impl FnOnce(&mut Vec<u8>)) -> Error {
    let d = copy_slide("vmu-320x200", case).unwrap();
    let p = d.join("slide.ngr");
    let mut bytes = std::fs::read(&p).unwrap();
    edit(&mut bytes);
    std::fs::write(&p, bytes).unwrap();
    match Slide::open(d.join("slide.vmu")) {
        Ok(_) => panic!("{case}: opened"),
        Err(e) => e,
    }
}

#[test]
fn hostile_vmu_files_are_typed_errors_naming_the_file() {
    if fixtures().is_none() {
        return;
    }
    let put = |at: usize, v: i32| move |b: &mut Vec<u8>| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    type Case = (&'static str, Box<dyn FnOnce(&mut Vec<u8>)>, &'static str, &'static str);
    let cases: Vec<Case> = vec![
        ("bad-magic", Box::new(|b: &mut Vec<u8>| b[0] = b'X'), "format", "Bad magic"),
        ("truncated-data", Box::new(|b: &mut Vec<u8>| b.truncate(b.len() - 1)), "format", "too short"),
        ("truncated-header", Box::new(|b: &mut Vec<u8>| b.truncate(20)), "format", "header"),
        ("empty", Box::new(|b: &mut Vec<u8>| b.clear()), "format", "header"),
        ("column-width-0", Box::new(put(12, 0)), "format", "column width 0"),
        ("column-width-negative", Box::new(put(12, -64)), "format", "column width -64"),
        ("column-width-not-dividing", Box::new(put(12, 48)), "format", "not multiple of column width"),
        (
            "column-width-huge",
            Box::new(|b: &mut Vec<u8>| {
                b[4..8].copy_from_slice(&(1i32 << 30).to_le_bytes());
                b[12..16].copy_from_slice(&(1i32 << 30).to_le_bytes());
            }),
            "limits",
            "column width",
        ),
        ("width-huge", Box::new(put(4, 64 << 24)), "format", "too short"),
        ("height-huge", Box::new(put(8, i32::MAX)), "format", "too short"),
        ("width-negative", Box::new(put(4, -320)), "format", "width -320"),
        ("height-zero", Box::new(put(8, 0)), "format", "height 0"),
        ("offset-past-eof", Box::new(put(24, i32::MAX)), "format", "too short"),
        ("offset-zero", Box::new(put(24, 0)), "format", "data offset 0"),
    ];
    for (case, edit, kind, text) in cases {
        let e = vmu_err(case, edit);
        assert_eq!(e.kind_name(), kind, "{case}: {e}");
        assert!(e.to_string().contains("slide.ngr") && e.to_string().contains(text), "{case}: {e}");
    }
    // The map file: a missing one is an Io error naming it, a damaged one a Format error.
    let d = copy_slide("vmu-320x200", "missing-map").unwrap();
    std::fs::remove_file(d.join("slide_map.ngr")).unwrap();
    let e = Slide::open(d.join("slide.vmu")).err().unwrap();
    assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("slide_map.ngr"), "{e}");
    let d = copy_slide("vmu-320x200", "short-map").unwrap();
    let bytes = std::fs::read(d.join("slide_map.ngr")).unwrap();
    std::fs::write(d.join("slide_map.ngr"), &bytes[..1000]).unwrap();
    let e = Slide::open(d.join("slide.vmu")).err().unwrap();
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("slide_map.ngr"), "{e}");
    // Key files OpenSlide 4.0.1 cannot read (it crashes on them): typed errors naming the key file.
    for (case, from, to) in [
        ("bpp-48", "BitsPerPixel=36", "BitsPerPixel=48"),
        ("no-bpp", "BitsPerPixel=36", "Other=36"),
        ("bgr", "PixelOrder=RGB", "PixelOrder=BGR"),
        ("no-map", "MapFile=slide_map.ngr", "MapFile="),
        ("no-image", "ImageFile=slide.ngr", "ImageFile(1)=slide.ngr"),
        ("image-grid", "ImageFile=slide.ngr", "ImageFile(1,0)=slide.ngr"),
        ("escape", "ImageFile=slide.ngr", "ImageFile=../vmu-320x200/slide.ngr"),
    ] {
        let d = copy_slide("vmu-320x200", case).unwrap();
        let p = d.join("slide.vmu");
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(s.contains(from), "{case}");
        std::fs::write(&p, s.replace(from, to)).unwrap();
        let e = Slide::open(&p).err().unwrap_or_else(|| panic!("{case}: opened"));
        assert_eq!(e.kind_name(), "format", "{case}: {e}");
        assert!(e.to_string().contains("slide.vmu"), "{case}: {e}");
    }
    // Opens by its folder; reads of the last (partial) row band and columns past the edge.
    let s = Slide::open(fixtures().unwrap().join("vmu-320x200")).unwrap();
    assert_eq!(s.level_dimensions(), vec![(320, 200), (64, 50)]);
    let r = s.read_region((256, 192), 0, (100, 20)).unwrap();
    assert_eq!((r.width, r.height), (100, 20));
}
