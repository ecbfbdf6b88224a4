//! Stripped (untiled) TIFF pyramids: generic TIFF and OME-TIFF whose images are stored in strips
//! (`format::tiff_strips`). OpenSlide 4.0.1 refuses these files, so the oracle is tifffile's
//! decode (Pillow's libtiff for LZW and JPEG, which tifffile cannot handle without
//! imagecodecs).
//!
//! * every level of every pyramid written by `scripts/vendor_slides/stripped.py` (run at test
//!   time into a temporary folder with the repository's `.venv/bin/python`, or
//!   `$SLIDESTREAM_PYTHON`; skipped with a message when neither has tifffile) equals the
//!   oracle's pixels: uncompressed, deflate (with predictor, planar 2), LZW, JPEG; RGB and grey;
//!   reduced levels as NewSubfileType pages and as SubIFDs;
//! * a strip larger than the read working set is a `Limits` error naming the file, level, strip
//!   (as tile (0, strip)) and `SLIDESTREAM_READ_WORKING_BYTES`, before anything is read;
//! * hostile strip headers (RowsPerStrip 0 or above the height, count mismatches, offsets past
//!   the end, huge byte counts, absurd strip sizes) are typed errors or correct reads, never a
//!   panic or an unbounded allocation.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use common::tiffwriter::{cut_strips, tag, Chunk, Ifd, TempPath, Tiff, Value, Variant};
use serde_json::Value as Json;
use slidestream::config::Config;
use slidestream::{Slide, SlideOptions, TileCache};

/// The generated pyramids' folder (made once per test process), or `None` when no Python with
/// tifffile is available.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = std::env::var_os("SLIDESTREAM_PYTHON").map(PathBuf::from).unwrap_or_else(|| root.join(".venv/bin/python"));
        // Under the target directory (cargo's scratch space for integration tests): replaced on
        // every run, nothing left in /tmp.
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stripped-tiff");
        let _ = std::fs::remove_dir_all(&dir);
        match Command::new(&python).arg(root.join("scripts/vendor_slides/stripped.py")).arg(&dir).output() {
            Ok(o) if o.status.success() => Some(dir),
            // Under scripts/test-all.sh (CI) the fixtures must be made: a failure fails the tests.
            Ok(o) if std::env::var_os("SLIDESTREAM_VENDOR_SLIDES").is_some() => {
                panic!("stripped.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr))
            }
            Ok(o) => {
                eprintln!("SKIP: stripped.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("SKIP: cannot run {} ({e}); stripped TIFF tests skipped", python.display());
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

/// The oracle's samples (grey or RGB) as opaque RGBA.
fn oracle_rgba(path: &Path, samples: usize) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    raw.chunks_exact(samples).flat_map(|p| if samples == 1 { [p[0], p[0], p[0], 255] } else { [p[0], p[1], p[2], 255] }).collect()
}

fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0)
}

/// The (w × h) window at (x, y) of an RGBA image `width` pixels wide.
fn window(rgba: &[u8], width: usize, (x, y, w, h): (usize, usize, usize, usize)) -> Vec<u8> {
    (y..y + h).flat_map(|r| rgba[(r * width + x) * 4..(r * width + x + w) * 4].to_vec()).collect()
}

fn open_with_working(path: &Path, working: u64) -> slidestream::Result<Slide> {
    let config = Config { read_working_bytes: working, ..Config::default() };
    Slide::open_with(path, SlideOptions { cache: Some(Arc::new(TileCache::new(4 << 20))), config: Some(config), ..SlideOptions::default() })
}

#[test]
fn every_level_of_every_stripped_pyramid_equals_the_oracle() {
    let Some(dir) = fixtures() else { return };
    let cases = cases(dir);
    assert!(cases.len() >= 9);
    for c in &cases {
        let file = c["file"].as_str().unwrap();
        let path = dir.join(file);
        let slide = Slide::open(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(slide.vendor(), c["driver"].as_str().unwrap(), "{file}");
        let levels = c["levels"].as_array().unwrap();
        assert_eq!(slide.level_count(), levels.len(), "{file}");
        // Strips are not tiles: no tile-size properties.
        assert!(!slide.properties().contains_key("openslide.level[0].tile-width"), "{file}");
        let tol = c["tolerance"].as_u64().unwrap() as u8;
        let downsamples = slide.level_downsamples();
        for (k, l) in levels.iter().enumerate() {
            let (w, h, s) = (l["width"].as_u64().unwrap(), l["height"].as_u64().unwrap(), l["samples"].as_u64().unwrap() as usize);
            assert_eq!(slide.level_dimensions()[k], (w, h), "{file} level {k}");
            let want = oracle_rgba(&dir.join(format!("{file}.L{k}.raw")), s);
            let got = slide.read_region((0, 0), k, (w, h)).unwrap_or_else(|e| panic!("{file} level {k}: {e}"));
            let d = max_diff(&got.data, &want);
            assert!(d <= tol, "{file} level {k}: max abs diff {d} > {tol}");
            // Small regions across strip boundaries (partial decodes, cached strips).
            for &(x, y, rw, rh) in &[(3usize, 5usize, 17usize, 29usize), (w as usize / 2, h as usize / 3, 40, 21), (w as usize - 9, h as usize - 11, 9, 11)] {
                let (rw, rh) = (rw.min(w as usize - x), rh.min(h as usize - y));
                let ds = downsamples[k];
                let loc = ((x as f64 * ds).ceil() as i64, (y as f64 * ds).ceil() as i64);
                let part = slide.read_region(loc, k, (rw as u64, rh as u64)).unwrap();
                let d = max_diff(&part.data, &window(&want, w as usize, (x, y, rw, rh)));
                assert!(d <= tol, "{file} level {k} region ({x}, {y}) {rw}x{rh}: max abs diff {d}");
            }
        }
    }
}

#[test]
fn a_large_uncompressed_strip_is_indexed_in_row_bands() {
    let Some(dir) = fixtures() else { return };
    let slide = Slide::open(dir.join("generic-none-grey-one-strip.tif")).unwrap();
    // One strip of 3000 x 800 (9.6 MB as RGBA): bands of 400 rows (the largest divisor of 800
    // within 8 MiB of RGBA).
    assert_eq!(slide.level_tile_sizes()[0], (3000, 400));
    // A 1-row read at the bottom reads only the second band's bytes.
    slide.read_region((0, 799), 0, (5, 1)).unwrap();
    assert!(slide.io_counters().bytes <= 400 * 3000 + 64 * 1024, "{:?}", slide.io_counters());
}

#[test]
fn a_strip_larger_than_the_working_set_is_a_limits_error_naming_it() {
    let Some(dir) = fixtures() else { return };
    for file in ["generic-deflate-rgb-planar-subifds.tif", "pillow-jpeg-rgb-pages.tif", "ome-deflate-rgb-subifds.ome.tif"] {
        // Strips of 301 x 10..32 RGB pixels hold 30-300 KiB while decoding: over 16 KiB. The
        // region covers whole strips (so no JPEG strip is decoded in part).
        let slide = open_with_working(&dir.join(file), 16 << 10).unwrap();
        let e = slide.read_region((0, 32), 0, (301, 32)).unwrap_err();
        assert_eq!(e.kind_name(), "limits", "{file}: {e}");
        let text = e.to_string();
        assert!(text.contains(file) && text.contains("level 0") && text.contains("tile (0, "), "{text}");
        assert!(text.contains("SLIDESTREAM_READ_WORKING_BYTES"), "{text}");
        assert_eq!(slide.io_counters().bytes, 0, "{file}: nothing read");
        // A budget that holds one strip reads it.
        let slide = open_with_working(&dir.join(file), 1 << 20).unwrap();
        slide.read_region((0, 40), 0, (301, 50)).unwrap();
    }
}

/// Open and read all of level 0, never panicking; the error's kind, or "ok".
fn outcome(path: &Path) -> (String, String) {
    let p = path.to_path_buf();
    let r = std::panic::catch_unwind(move || -> slidestream::Result<()> {
        let slide = open_with_working(&p, 64 << 20)?;
        let (w, h) = slide.level_dimensions()[0];
        slide.read_region((0, 0), 0, (w.min(4096), h.min(4096)))?;
        Ok(())
    })
    .unwrap_or_else(|_| panic!("{}: panicked", path.display()));
    match r {
        Ok(()) => ("ok".into(), String::new()),
        Err(e) => (e.kind_name().to_string(), e.to_string()),
    }
}

fn rgb(w: usize, h: usize) -> Vec<u8> {
    (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect()
}

#[test]
fn hostile_strip_headers_are_typed_errors_never_panics() {
    let (w, h) = (20u32, 13u32);
    let px = rgb(w as usize, h as usize);
    let strips = |rps: usize| cut_strips(&px, w as usize, 3, rps).into_iter().map(Chunk::Data).collect::<Vec<_>>();
    let cases: Vec<(&str, Ifd, &str)> = vec![
        ("rows-per-strip-0", Ifd::stripped(w, h, 4, strips(4)).tag(tag::ROWS_PER_STRIP, Value::Long(vec![0])), "format"),
        // RowsPerStrip 2: 7 strips needed, 4 offsets and byte counts given.
        ("too-few-strips", Ifd::stripped(w, h, 4, strips(4)).tag(tag::ROWS_PER_STRIP, Value::Long(vec![2])), "format"),
        // Offsets and byte counts of different lengths.
        ("count-mismatch", Ifd::stripped(w, h, 4, strips(4)).tag(tag::STRIP_BYTE_COUNTS, Value::Long(vec![240, 240])), "format"),
        ("offset-past-eof", Ifd::stripped(w, h, 13, vec![Chunk::Raw { offset: 1 << 30, byte_count: 780 }]), "format"),
        ("byte-count-huge", Ifd::stripped(w, h, 13, vec![Chunk::Raw { offset: 8, byte_count: 1 << 40 }]), "limits"),
        // An uncompressed strip shorter than its rows.
        ("strip-short", Ifd::stripped(w, h, 13, vec![Chunk::Data(px[..500].to_vec())]), "format"),
        // 2^31 - 1 pixels wide, one strip of 1000 rows claimed in 16 bytes: the working set refuses it.
        ("absurd-strip", Ifd::stripped(u32::MAX >> 1, 1000, 1000, vec![Chunk::Data(vec![0; 16])]), "limits"),
        ("absurd-deflate-strip", Ifd::stripped(200_000, 60_000, 60_000, vec![Chunk::Data(vec![0x78, 0x9c, 3, 0])]).compression(8), "limits"),
    ];
    for (name, ifd, want) in cases {
        let f = TempPath::new(&format!("{name}.tif"));
        Tiff::new(Variant::BigTiff, vec![ifd]).write(f.path());
        let (kind, text) = outcome(f.path());
        assert_eq!(kind, want, "{name}: {text}");
        assert!(text.contains(&*f.path().to_string_lossy()), "{name}: the error names the file: {text}");
    }
}

#[test]
fn rows_per_strip_above_the_height_or_absent_is_one_strip() {
    let (w, h) = (20u32, 13u32);
    let px = rgb(w as usize, h as usize);
    let want: Vec<u8> = px.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect();
    let strips = |rps: usize| cut_strips(&px, w as usize, 3, rps).into_iter().map(Chunk::Data).collect::<Vec<_>>();
    for rps in [13u32, 14, 1000, u32::MAX] {
        let f = TempPath::new("rps.tif");
        Tiff::new(Variant::BigTiff, vec![Ifd::stripped(w, h, rps, vec![Chunk::Data(px.clone())])]).write(f.path());
        let slide = Slide::open(f.path()).unwrap_or_else(|e| panic!("RowsPerStrip {rps}: {e}"));
        assert_eq!(slide.vendor(), "generic-tiff");
        assert_eq!(slide.read_region((0, 0), 0, (w as u64, h as u64)).unwrap().data, want, "RowsPerStrip {rps}");
    }
    // A stripped IFD 0 of no rows is not taken (as before: "IFD 0 is not tiled").
    let f = TempPath::new("zero.tif");
    Tiff::new(Variant::Classic, vec![Ifd::stripped(w, h, 4, vec![Chunk::Data(vec![1])]).tag(tag::IMAGE_LENGTH, Value::Long(vec![0]))]).write(f.path());
    let e = Slide::open(f.path()).unwrap_err();
    assert!(e.to_string().contains("IFD 0 is not tiled"), "{e}");
    // Nor is a stripped IFD 0 before a wider tiled IFD (a vendor file's associated image, such
    // as a Ventana BIF's label, whose driver declined the file).
    let f = TempPath::new("label-first.tif");
    let tile = Chunk::Data(rgb(16, 16));
    let ifds = vec![Ifd::stripped(w, h, 4, strips(4)), Ifd::tiled(64, 16, 16, 16, vec![tile.clone(), tile.clone(), tile.clone(), tile])];
    Tiff::new(Variant::Classic, ifds).write(f.path());
    let e = Slide::open(f.path()).unwrap_err();
    assert_eq!(e.kind_name(), "unsupported", "{e}");
    assert!(e.to_string().contains("IFD 0 is not tiled"), "{e}");
}
