//! Akoya / PerkinElmer QPTIFF (`format::qptiff`). OpenSlide 4.0.1 has no QPTIFF driver, so the
//! oracle is tifffile's decode of each page (Pillow's decode of each JPEG tile for the JPEG
//! file, as tifffile needs imagecodecs for JPEG).
//!
//! * every slide written by `scripts/vendor_slides/qptiff.py` (run at test time into cargo's
//!   target tmp folder with the repository's `.venv/bin/python` or `$SLIDESTREAM_PYTHON`;
//!   skipped with a message when neither has tifffile, a failure under `scripts/test-all.sh`):
//!   brightfield RGB (deflate, JPEG) and 4-channel fluorescence (uint8, uint16; tiled and
//!   stripped) opens as `qptiff` with its levels, downsamples, associated images, properties
//!   and channel names; every level equals the oracle (0 difference for lossless pages, at most
//!   4 for JPEG), through `read_region` and `read_region_channels`;
//! * bad input (broken XML, a reduced level with fewer pages than channels, truncated files,
//!   absurd dimensions) gives typed errors naming the file, never a panic.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::tiffwriter::{tag, Chunk, Ifd, TempPath, Tiff, Value, Variant};
use serde_json::Value as Json;
use slidestream::{Samples, Slide};

/// The generated slides' folder (made once per test process), or `None` when no Python with
/// tifffile is available.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = std::env::var_os("SLIDESTREAM_PYTHON").map(PathBuf::from).unwrap_or_else(|| root.join(".venv/bin/python"));
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("qptiff");
        let _ = std::fs::remove_dir_all(&dir);
        match Command::new(&python).arg(root.join("scripts/vendor_slides/qptiff.py")).arg(&dir).output() {
            Ok(o) if o.status.success() => Some(dir),
            Ok(o) if std::env::var_os("SLIDESTREAM_VENDOR_SLIDES").is_some() => {
                panic!("qptiff.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr))
            }
            Ok(o) => {
                eprintln!("SKIP: qptiff.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("SKIP: cannot run {} ({e}); QPTIFF tests skipped", python.display());
                None
            }
        }
    })
    .as_deref()
}

fn cases(dir: &Path) -> Vec<Json> {
    let doc: Json = serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

/// The oracle's samples of a level or associated image: u8 or little-endian u16, channel-last.
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

fn max_diff(a: &[u16], b: &[u16]) -> u16 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0)
}

/// RGB or grey samples (channel-last, `n` per pixel) as opaque RGBA bytes.
fn rgba_of(s: &[u16], n: usize) -> Vec<u16> {
    s.chunks_exact(n).flat_map(|p| if n == 1 { [p[0], p[0], p[0], 255] } else { [p[0], p[1], p[2], 255] }).collect()
}

/// The (w × h) window at (x, y) of an image `width` pixels wide with `n` samples per pixel.
fn window(px: &[u16], width: usize, n: usize, (x, y, w, h): (usize, usize, usize, usize)) -> Vec<u16> {
    (y..y + h).flat_map(|r| px[(r * width + x) * n..(r * width + x + w) * n].to_vec()).collect()
}

#[test]
fn every_qptiff_opens_with_its_levels_associated_images_and_properties() {
    let Some(dir) = fixtures() else { return };
    let cases = cases(dir);
    assert_eq!(cases.len(), 6);
    for c in &cases {
        let file = c["file"].as_str().unwrap();
        let slide = Slide::open(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(slide.vendor(), "qptiff", "{file}");
        let levels = c["levels"].as_array().unwrap();
        assert_eq!(slide.level_count(), levels.len(), "{file}");
        let dims: Vec<(u64, u64)> = levels.iter().map(|l| (l["width"].as_u64().unwrap(), l["height"].as_u64().unwrap())).collect();
        assert_eq!(slide.level_dimensions(), dims, "{file}");
        for (k, &ds) in slide.level_downsamples().iter().enumerate() {
            // OpenSlide's rule: the mean of the per-axis ratios.
            let want = (dims[0].0 as f64 / dims[k].0 as f64 + dims[0].1 as f64 / dims[k].1 as f64) / 2.0;
            assert!((ds - want).abs() < 1e-9, "{file} level {k}: downsample {ds}, want {want}");
        }
        let assoc: BTreeMap<String, (u64, u64)> =
            c["associated"].as_object().unwrap().iter().map(|(n, wh)| (n.clone(), (wh[0].as_u64().unwrap(), wh[1].as_u64().unwrap()))).collect();
        assert_eq!(slide.associated_images(), assoc, "{file}");
        for (name, &(w, h)) in &assoc {
            let got = slide.read_associated(name).unwrap_or_else(|e| panic!("{file} {name}: {e}"));
            assert_eq!((got.width, got.height), (w, h));
            let want = rgba_of(&oracle(&dir.join(format!("{file}.{name}.raw")), false), 3);
            let got: Vec<u16> = got.data.iter().map(|&b| b as u16).collect();
            assert_eq!(max_diff(&got, &want), 0, "{file} {name}");
        }
        let p = slide.properties();
        let mpp = c["mpp"].as_f64().unwrap();
        for key in ["openslide.mpp-x", "openslide.mpp-y"] {
            let v: f64 = p[key].parse().unwrap();
            assert!((v - mpp).abs() < 1e-6, "{file} {key} = {v}, want {mpp}");
        }
        assert_eq!(p["openslide.objective-power"], "20", "{file}");
        assert_eq!(p["openslide.barcode"], "QPBC-42", "{file}");
        assert_eq!(p["qptiff.ImageType"], "FullResolution", "{file}");
        assert_eq!(p["qptiff.SlideID"], "QP-0001", "{file}");
        assert_eq!(p["tiff.Software"], "PerkinElmer-QPI", "{file}");
        assert!(p["openslide.comment"].contains("<PerkinElmer-QPI-ImageDescription>"), "{file}");
        let chans = c["channels"].as_array().unwrap();
        if c["rgb"].as_bool().unwrap() {
            assert_eq!(slide.channel_names(), ["R", "G", "B"], "{file}");
            assert_eq!(p["qptiff.channel-count"], "1", "{file}");
            continue;
        }
        let names: Vec<&str> = chans.iter().map(|ch| ch["name"].as_str().unwrap()).collect();
        assert_eq!(slide.channel_names(), names, "{file}");
        assert_eq!(p["qptiff.channel-count"], names.len().to_string(), "{file}");
        for (i, ch) in chans.iter().enumerate() {
            assert_eq!(p[&format!("qptiff.channel[{i}].name")], names[i]);
            assert_eq!(p[&format!("qptiff.channel[{i}].Color")], ch["color"].as_str().unwrap());
            let rgb: Vec<String> = ch["color"].as_str().unwrap().split(',').map(|v| format!("{:02X}", v.parse::<u8>().unwrap())).collect();
            assert_eq!(p[&format!("qptiff.channel[{i}].color-rgb")], rgb.concat(), "{file} channel {i}");
            assert_eq!(p[&format!("qptiff.channel[{i}].ExcitationFilter.Bands.Band[1].Cuton")], "500");
            assert!(!p.contains_key(&format!("qptiff.channel[{i}].ScanProfile")));
        }
        // Names from Biomarker, else Name: the fixture's fourth channel has an empty Biomarker.
        assert_eq!(names, ["DAPI", "CD8", "PD-L1", "Opal 690"]);
    }
}

#[test]
fn every_level_of_every_qptiff_equals_the_oracle() {
    let Some(dir) = fixtures() else { return };
    for c in &cases(dir) {
        let file = c["file"].as_str().unwrap();
        let slide = Slide::open(dir.join(file)).unwrap();
        let rgb = c["rgb"].as_bool().unwrap();
        let wide = c["dtype"] == "uint16";
        let tol = c["tolerance"].as_u64().unwrap() as u16;
        let n = if rgb { 3 } else { c["channels"].as_array().unwrap().len() };
        let downsamples = slide.level_downsamples();
        for (k, l) in c["levels"].as_array().unwrap().iter().enumerate() {
            let (w, h) = (l["width"].as_u64().unwrap() as usize, l["height"].as_u64().unwrap() as usize);
            let want = oracle(&dir.join(format!("{file}.L{k}.raw")), wide);
            assert_eq!(want.len(), w * h * n);
            // read_region: RGB, or channel 0 as grey (16-bit: its high byte).
            let shown: Vec<u16> = if rgb {
                rgba_of(&want, 3)
            } else {
                let c0: Vec<u16> = want.chunks_exact(n).map(|p| if wide { p[0] >> 8 } else { p[0] }).collect();
                rgba_of(&c0, 1)
            };
            let got = slide.read_region((0, 0), k, (w as u64, h as u64)).unwrap_or_else(|e| panic!("{file} level {k}: {e}"));
            let got: Vec<u16> = got.data.iter().map(|&b| b as u16).collect();
            let d = max_diff(&got, &shown);
            assert!(d <= tol, "{file} level {k}: read_region max abs diff {d} > {tol}");
            // read_region_channels: the stored samples, every channel, whole level and windows.
            let ch = slide.read_region_channels((0, 0), k, (w as u64, h as u64), None).unwrap();
            assert_eq!(matches!(ch.data, Samples::U16(_)), wide, "{file}");
            let d = max_diff(&samples(&ch.data), &want);
            assert!(d <= tol, "{file} level {k}: channels max abs diff {d} > {tol}");
            for &(x, y, rw, rh) in &[(3usize, 5usize, 70usize, 29usize), (w / 2, h / 3, 40, 21), (w - 9, h - 11, 9, 11)] {
                let (rw, rh) = (rw.min(w - x), rh.min(h - y));
                let loc = ((x as f64 * downsamples[k]).ceil() as i64, (y as f64 * downsamples[k]).ceil() as i64);
                let picks: Vec<usize> = (0..n).rev().collect();
                let part = slide.read_region_channels(loc, k, (rw as u64, rh as u64), Some(&picks)).unwrap();
                let win = window(&want, w, n, (x, y, rw, rh));
                let reversed: Vec<u16> = win.chunks_exact(n).flat_map(|p| p.iter().rev().copied().collect::<Vec<_>>()).collect();
                let d = max_diff(&samples(&part.data), &reversed);
                assert!(d <= tol, "{file} level {k} window ({x}, {y}) {rw}x{rh}: max abs diff {d}");
            }
        }
    }
}

/// Open and read all of level 0 and every associated image, never panicking; the error's kind
/// and text, or "ok".
fn outcome(path: &Path) -> (String, String) {
    let p = path.to_path_buf();
    let r = std::panic::catch_unwind(move || -> slidestream::Result<()> {
        let slide = Slide::open(&p)?;
        let (w, h) = slide.level_dimensions()[0];
        slide.read_region((0, 0), 0, (w.min(4096), h.min(4096)))?;
        slide.read_region_channels((0, 0), 0, (w.min(1024), h.min(1024)), None)?;
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

#[test]
fn broken_xml_and_channel_count_mismatch_are_format_errors() {
    let Some(dir) = fixtures() else { return };
    for (file, words) in [("bad-xml.qptiff", "XML does not parse"), ("channel-mismatch.qptiff", "reduced level 1")] {
        let path = dir.join("bad").join(file);
        let (kind, text) = outcome(&path);
        assert_eq!(kind, "format", "{file}: {text}");
        assert!(text.contains(file) && text.contains(words), "{file}: {text}");
        // The detection report names the driver that took it.
        assert_eq!(Slide::detect_vendor(&path).unwrap(), Some("qptiff"), "{file}");
    }
}

#[test]
fn truncated_qptiffs_are_typed_errors_never_panics() {
    let Some(dir) = fixtures() else { return };
    for file in ["fluo-u8-tiled.qptiff", "brightfield-jpeg.qptiff", "fluo-u16-stripped.qptiff"] {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        for cut in [16, bytes.len() / 3, bytes.len() / 2, bytes.len() - 100] {
            let f = TempPath::new(&format!("cut-{cut}-{file}"));
            std::fs::write(f.path(), &bytes[..cut]).unwrap();
            let (kind, text) = outcome(f.path());
            assert!(["format", "unsupported", "limits", "io"].contains(&kind.as_str()), "{file} cut at {cut}: {kind}: {text}");
            assert!(text.contains(&*f.path().to_string_lossy()), "{file} cut at {cut}: the error names the file: {text}");
        }
    }
}

fn qpi(image_type: &str, name: &str) -> String {
    format!("<PerkinElmer-QPI-ImageDescription><ImageType>{image_type}</ImageType><Name>{name}</Name></PerkinElmer-QPI-ImageDescription>")
}

fn grey_page(w: u32, h: u32, t: u32, image_type: &str, name: &str) -> Ifd {
    let tiles = (w.div_ceil(t) * h.div_ceil(t)) as usize;
    let mut ifd = Ifd::tiled(w, h, t, t, (0..tiles).map(|_| Chunk::Data(vec![7; (t * t) as usize])).collect()).color(1, 1);
    ifd.description = Some(qpi(image_type, name));
    ifd
}

#[test]
fn hostile_qptiff_headers_are_typed_errors() {
    let mut absurd = grey_page(16, 16, 16, "FullResolution", "DAPI");
    absurd.width = u32::MAX;
    absurd.chunks = vec![Chunk::Raw { offset: 8, byte_count: 16 }];
    let mut rgb_page = grey_page(32, 32, 16, "FullResolution", "RGB");
    rgb_page = rgb_page.color(3, 2);
    rgb_page.chunks = (0..4).map(|_| Chunk::Data(vec![1; 16 * 16 * 3])).collect();
    let mut thumb_first = grey_page(32, 32, 16, "Thumbnail", "x");
    thumb_first.extra.push((tag::NEW_SUBFILE_TYPE, Value::Long(vec![0])));
    let cases: Vec<(&str, Vec<Ifd>, &str)> = vec![
        // 2^32 - 1 pixels wide: over the 2^31 - 1 edge limit.
        ("absurd-width", vec![absurd], "limits"),
        // A reduced page absurdly large for its level is checked as any page.
        (
            "reduced-absurd",
            vec![grey_page(32, 32, 16, "FullResolution", "A"), {
                let mut p = grey_page(16, 16, 16, "ReducedResolution", "A");
                p.height = u32::MAX;
                p
            }],
            "limits",
        ),
        // Two channel pages, one of them RGB.
        ("rgb-channel", vec![grey_page(32, 32, 16, "FullResolution", "A"), rgb_page], "unsupported"),
        // IFD 0 is not the full-resolution image.
        ("thumbnail-first", vec![thumb_first], "format"),
        // A reduced level of 2 pages for 1 channel.
        (
            "too-many-pages",
            vec![
                grey_page(32, 32, 16, "FullResolution", "A"),
                grey_page(16, 16, 16, "ReducedResolution", "A"),
                grey_page(16, 16, 16, "ReducedResolution", "B"),
            ],
            "format",
        ),
    ];
    for (name, ifds, want) in cases {
        let f = TempPath::new(&format!("{name}.qptiff"));
        Tiff::new(Variant::Classic, ifds).write(f.path());
        let (kind, text) = outcome(f.path());
        assert_eq!(kind, want, "{name}: {text}");
        assert!(text.contains(&*f.path().to_string_lossy()), "{name}: the error names the file: {text}");
    }
    // A well-formed minimal file reads: one grey channel named from its XML.
    let f = TempPath::new("minimal.qptiff");
    Tiff::new(Variant::Classic, vec![grey_page(32, 32, 16, "FullResolution", "DAPI"), grey_page(16, 16, 16, "ReducedResolution", "DAPI")]).write(f.path());
    assert_eq!(outcome(f.path()).0, "ok");
    let s = Slide::open(f.path()).unwrap();
    assert_eq!((s.vendor(), s.level_count(), s.channel_names()), ("qptiff", 2, vec!["DAPI".to_string()]));
}
