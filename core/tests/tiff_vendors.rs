//! Trestle, Huron and ARGOS (`format::trestle`, `huron`, `argos`) against OpenSlide 4.0.1.
//!
//! * the slides `scripts/vendor_slides/{trestle,huron,argos}.py` write (run at test time into
//!   cargo's target tmp dir with the repository's `.venv/bin/python`, or `$SLIDESTREAM_PYTHON`;
//!   skipped with a message when they cannot run, and a failure under `scripts/test-all.sh`)
//!   open with OpenSlide's vendor, levels, downsamples, properties (every one, both ways),
//!   associated images and regions (overlapping Trestle tiles, ARGOS missing tiles, edges):
//!   0 difference (both decode with libjpeg-turbo);
//! * damaged slides are typed errors naming the file, never a panic: a truncated file, a tile
//!   offset past the end (at read, naming the tile), an absurd image width, Trestle overlaps
//!   as large as the tile, ARGOS focal-plane indices missing, not integers or past the planes
//!   in the file; a missing or unreadable Trestle `.Full` file only drops the macro image; ARGOS
//!   XML that does not parse or a Make that is not Huron's leave the file to generic-tiff, as
//!   in OpenSlide.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{decode_png, max_abs_diff};
use serde_json::Value;
use slidestream::error::Location;
use slidestream::tiff::{TiffFile, ValueRange};
use slidestream::{Error, MemSource, Slide};

const MODULES: [&str; 3] = ["trestle", "huron", "argos"];
const SLIDES: [(&str, &str); 4] = [("trestle-overlaps.tif", "trestle"), ("trestle-plain.tif", "trestle"), ("huron.tif", "huron"), ("argos.avs", "argos")];

/// The generated slides' folder (made once per test process), `None` when the generators
/// cannot run here.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = std::env::var_os("SLIDESTREAM_PYTHON").map(PathBuf::from).unwrap_or_else(|| root.join(".venv/bin/python"));
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tiff-vendors");
        let _ = std::fs::remove_dir_all(&dir);
        for m in MODULES {
            match Command::new(&python).args(["-m", &format!("vendor_slides.{m}")]).arg(&dir).current_dir(root.join("scripts")).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) if std::env::var_os("SLIDESTREAM_VENDOR_SLIDES").is_some() => {
                    panic!("{m}.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr))
                }
                Ok(o) => {
                    eprintln!("SKIP: {m}.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr));
                    return None;
                }
                Err(e) => {
                    eprintln!("SKIP: cannot run {} ({e}); Trestle/Huron/ARGOS tests skipped", python.display());
                    return None;
                }
            }
        }
        Some(dir)
    })
    .as_deref()
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn generated_slides_match_openslide() {
    let Some(dir) = fixtures() else { return };
    let mut regions = 0;
    for (name, vendor) in SLIDES {
        let refdir = dir.join("reference").join(name);
        let doc = json(&refdir.join("regions.json"));
        let theirs = json(&refdir.join("properties.json"));
        let slide = Slide::open(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(slide.vendor(), vendor, "{name}");
        assert_eq!(doc["detect_format"].as_str(), Some(vendor), "{name}: OpenSlide's vendor");
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
            regions += 1;
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
    assert_eq!(regions, 20);
}

/// A copy of generated file `name` (and its `.Full` file, if any) in a fresh folder `case`.
fn copy_slide(name: &str, case: &str) -> Option<PathBuf> {
    let src = fixtures()?;
    let dst = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tiff-vendor-cases").join(case);
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::copy(src.join(name), dst.join(name)).unwrap();
    let full = Path::new(name).with_extension("Full");
    if src.join(&full).exists() {
        std::fs::copy(src.join(&full), dst.join(&full)).unwrap();
    }
    Some(dst.join(name))
}

/// Replace `from` by `to` (same length) in file `p`.
fn patch(p: &Path, from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let mut b = std::fs::read(p).unwrap();
    let i = b.windows(from.len()).position(|w| w == from).unwrap_or_else(|| panic!("{:?} not in {}", String::from_utf8_lossy(from), p.display()));
    b[i..i + from.len()].copy_from_slice(to);
    std::fs::write(p, b).unwrap();
}

/// Replace every `from` by `to` (same length) in file `p`.
fn patch_all(p: &Path, from: &[u8], to: &[u8]) {
    let mut b = std::fs::read(p).unwrap();
    let mut i = 0;
    while let Some(k) = b[i..].windows(from.len()).position(|w| w == from) {
        b[i + k..i + k + from.len()].copy_from_slice(to);
        i += k + from.len();
    }
    std::fs::write(p, b).unwrap();
}

fn open_err(p: &Path) -> Error {
    match Slide::open(p) {
        Ok(s) => panic!("{}: opened as {}", p.display(), s.vendor()),
        Err(e) => e,
    }
}

#[test]
fn damaged_files_are_typed_errors_naming_the_file() {
    if fixtures().is_none() {
        return;
    }
    for (name, _) in SLIDES {
        // Truncated: the directories (written last) are cut off.
        let p = copy_slide(name, &format!("truncated-{name}")).unwrap();
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() * 3 / 5]).unwrap();
        let e = open_err(&p);
        assert!(matches!(e, Error::Format { .. } | Error::Unsupported { .. }) && e.to_string().contains(&p.display().to_string()), "{name}: {e}");

        // The first tile of level 0 (ARGOS: of the focal plane read, IFD 2) past the end of the
        // file: opens, the read names the tile.
        let p = copy_slide(name, &format!("offset-{name}")).unwrap();
        let mut b = std::fs::read(&p).unwrap();
        let at = Location::file(&p);
        let tf = TiffFile::parse(&MemSource::new(b.clone()), &at).unwrap();
        let level0 = if name.ends_with(".avs") { 2 } else { 0 };
        let e = tf.ifds[level0].get(324).unwrap();
        let ValueRange::At { offset, .. } = tf.value_range(&at, e).unwrap() else { panic!("{name}: inline offsets") };
        let past = b.len() as u64 + 1000;
        let o = offset as usize;
        if e.field_type == 16 {
            b[o..o + 8].copy_from_slice(&past.to_le_bytes());
        } else {
            b[o..o + 4].copy_from_slice(&(past as u32).to_le_bytes());
        }
        std::fs::write(&p, b).unwrap();
        let s = Slide::open(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
        let e = s.read_region((0, 0), 0, (16, 16)).unwrap_err();
        assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("tile (0, 0)"), "{name}: {e}");
        assert!(s.read_region((-50, -50), 0, (10, 10)).is_ok(), "{name}: usable after the error");

        // An absurd width (2^31 + 5, past the limit) in every IFD as wide as level 0.
        let p = copy_slide(name, &format!("width-{name}")).unwrap();
        let b = std::fs::read(&p).unwrap();
        let tf = TiffFile::parse(&MemSource::new(b.clone()), &Location::file(&p)).unwrap();
        let w = tf.reader(&MemSource::new(b.clone()), &Location::file(&p), 0).uint(256).unwrap().unwrap() as u32;
        let big = tf.ifds[0].get(256).unwrap().field_type == 4 && name.ends_with(".avs");
        let entry = |v: u32| -> Vec<u8> {
            let mut e = vec![0x00, 0x01, 0x04, 0x00];
            e.extend(if big { 1u64.to_le_bytes().to_vec() } else { 1u32.to_le_bytes().to_vec() });
            e.extend(v.to_le_bytes());
            e
        };
        patch_all(&p, &entry(w), &entry((1u32 << 31) + 5));
        let e = open_err(&p);
        assert!(matches!(e, Error::Limits { .. } | Error::Format { .. }) && e.to_string().contains(&p.display().to_string()), "{name}: {e}");
    }
}

#[test]
fn trestle_companion_and_overlap_errors() {
    let Some(dir) = fixtures() else { return };
    let good = Slide::open(dir.join("trestle-overlaps.tif")).unwrap();
    // No .Full file, or one that is not a JPEG: no macro image, no error (as OpenSlide).
    let p = copy_slide("trestle-overlaps.tif", "no-full").unwrap();
    std::fs::remove_file(p.with_extension("Full")).unwrap();
    let s = Slide::open(&p).unwrap();
    assert!(s.associated_images().is_empty());
    assert_eq!(s.properties()["openslide.quickhash-1"], good.properties()["openslide.quickhash-1"]);
    let p = copy_slide("trestle-overlaps.tif", "bad-full").unwrap();
    std::fs::write(p.with_extension("Full"), b"not a JPEG").unwrap();
    assert!(Slide::open(&p).unwrap().associated_images().is_empty());
    // A .Full file replaced after open: reading the macro is an error naming it.
    let p = copy_slide("trestle-overlaps.tif", "full-replaced").unwrap();
    let s = Slide::open(&p).unwrap();
    std::fs::write(p.with_extension("Full"), b"short").unwrap();
    let e = s.read_associated("macro").unwrap_err();
    assert!(e.to_string().contains("trestle-overlaps.Full"), "{e}");
    // Overlaps as large as the tile.
    let p = copy_slide("trestle-overlaps.tif", "overlap-too-large").unwrap();
    patch(&p, b"OverlapsXY= 16 12", b"OverlapsXY=200 12");
    let e = open_err(&p);
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("overlaps 200x12"), "{e}");
}

#[test]
fn argos_plane_and_detection_errors() {
    if fixtures().is_none() {
        return;
    }
    for (case, from, to, want) in [
        ("no-minz", &b"<MinZ>-1</MinZ>"[..], &b"<MinX>-1</MinX>"[..], "Couldn't read focal plane indices"),
        ("bad-maxz", b"<MaxZ>1</MaxZ>", b"<MaxZ>x</MaxZ>", "Couldn't parse focal plane indices: -1, x"),
        ("plane-past-end", b"<MaxZ>1</MaxZ>", b"<MaxZ>9</MaxZ>", "No pyramid levels found"),
        ("planes-reversed", b"<MinZ>-1</MinZ>", b"<MinZ>+5</MinZ>", "No pyramid levels found"),
    ] {
        let p = copy_slide("argos.avs", case).unwrap();
        patch(&p, from, to);
        let e = open_err(&p);
        assert!(matches!(e, Error::Format { .. }) && e.to_string().contains(want) && e.to_string().contains(&p.display().to_string()), "{case}: {e}");
    }
    // Broken XML or a foreign Make: not these vendors; generic-tiff reads the file, as in OpenSlide.
    let p = copy_slide("argos.avs", "broken-xml").unwrap();
    patch(&p, b"</Argos.Scan.Metadata>", b"</Argos.Scan.Metadatb>");
    assert_eq!(Slide::open(&p).unwrap().vendor(), "generic-tiff");
    let p = copy_slide("huron.tif", "not-huron").unwrap();
    patch(&p, b"Huron Digital", b"Huxon Digital");
    assert_eq!(Slide::open(&p).unwrap().vendor(), "generic-tiff");
}
