//! Driver conformance battery: every file of `../shared/testdata` goes through every public
//! read entry point (open, detect, properties, level geometry, the tile index, `read_region`
//! at corners, edges and outside, `read_region_into`, `read_regions_rgb_into`, `read_tiles`,
//! associated images, ICC) and the results must agree with each other, with the index and
//! with OpenSlide's reference (`reference/<name>/regions.json` and `structure.json`, where
//! `reference.rs` does not already compare). With a usable GPU, device reads must equal the
//! CPU's; without one that part is skipped with a message.
//!
//! Organised per driver: a new driver adds one entry to [`DRIVERS`] naming its files (and a
//! file it cannot open yet goes in [`REFUSED`]); every file of the test data must be listed in
//! exactly one place, so a new sample cannot go untested.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::{max_abs_diff, testdata, vendor_slides};
use serde_json::Value;
use slidestream::gpu::{self, DeviceOptions};
use slidestream::index::BlobRef;
use slidestream::{Error, Slide};

/// What reading a file's pyramid gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// Every tile decodes.
    Ok,
    /// Every stored tile is corrupt: reads touching one fail with a `Format` error naming it.
    CorruptTiles,
}

/// One driver and the test files it must open.
struct DriverCases {
    driver: &'static str,
    files: &'static [(&'static str, Reads)],
}

/// The drivers and their files.
static DRIVERS: &[DriverCases] = &[
    DriverCases {
        driver: "aperio",
        files: &[
            ("CMU-1-Small-Region.svs", Reads::Ok),
            ("small_aperio.svs", Reads::Ok),
            ("tcga-cr-7395-01a-01-ts1.svs", Reads::Ok),
            ("unreadable.svs", Reads::CorruptTiles),
        ],
    },
    DriverCases {
        driver: "generic-tiff",
        files: &[
            ("boxes.tiff", Reads::Ok),
            ("cog.tiff", Reads::Ok),
            ("quad-tile.jpg.tiff", Reads::Ok),
            ("sparse.tiff", Reads::Ok),
            ("tiff_tiled_planar_lzw.tiff", Reads::Ok),
            ("tiff_tiled_ycbcr_jpeg_2x2_sampling.tif", Reads::Ok),
            ("tiled-jpeg-rgb-u8.tif", Reads::Ok),
            ("tiled-rgb-u8.tif", Reads::Ok),
            ("usda_naip_256_webp_z3.tif", Reads::Ok),
            ("yb10kx5k.zstd.tiff", Reads::Ok),
        ],
    },
    DriverCases { driver: "hamamatsu", files: &[("test3-DAPI-2-387.ndpi", Reads::Ok)] },
    // A folder entry is opened by its folder (the driver picks the file: Slide::open(dir)).
    DriverCases { driver: "dicom", files: &[("CMU-1-Small-Region-dicom", Reads::Ok), ("camelyon-jpeg-ybr.dcm", Reads::Ok)] },
];

/// The slides `scripts/make_vendor_slides.py` generates (in [`vendor_slides`]), per driver.
static GENERATED: &[DriverCases] = &[
    DriverCases {
        driver: "mirax",
        files: &[
            ("mirax-simple.mrxs", Reads::Ok),
            ("mirax-overlap.mrxs", Reads::Ok),
            ("mirax-divisions.mrxs", Reads::Ok),
            ("mirax-divisions4.mrxs", Reads::Ok),
            ("mirax-sparse.mrxs", Reads::Ok),
            ("mirax-png.mrxs", Reads::Ok),
            ("mirax-bmp.mrxs", Reads::Ok),
        ],
    },
    DriverCases {
        driver: "ome-tiff",
        files: &[
            ("ome-brightfield.ome.tif", Reads::Ok),
            ("ome-mainchain.ome.tif", Reads::Ok),
            ("ome-fluo-u8.ome.tif", Reads::Ok),
            ("ome-fluo-u16.ome.tif", Reads::Ok),
        ],
    },
    DriverCases {
        driver: "generic-tiff",
        files: &[
            ("generic-subifd.tif", Reads::Ok),
            ("generic-rgb16.tif", Reads::Ok),
            ("generic-gray16.tif", Reads::Ok),
            ("generic-bogus-depth.tif", Reads::Ok),
            ("generic-cmyk.tif", Reads::Ok),
            ("generic-grey-alpha-jpeg.tif", Reads::Ok),
            ("generic-many-ifds.tif", Reads::Ok),
            ("generic-no-subfiletype.tif", Reads::Ok),
            ("generic-rgba-jpeg.tif", Reads::Ok),
            ("generic-signed8.tif", Reads::Ok),
        ],
    },
    DriverCases { driver: "ventana", files: &[("ventana-bif-overlaps.bif", Reads::Ok), ("ventana-tiff.tif", Reads::Ok)] },
    DriverCases { driver: "trestle", files: &[("trestle-overlaps.tif", Reads::Ok), ("trestle-plain.tif", Reads::Ok)] },
    DriverCases { driver: "huron", files: &[("huron.tif", Reads::Ok)] },
    DriverCases { driver: "argos", files: &[("argos.avs", Reads::Ok)] },
    DriverCases { driver: "sakura", files: &[("sakura.svslide", Reads::Ok)] },
    DriverCases {
        driver: "zeiss",
        files: &[
            ("czi-bgr24-raw.czi", Reads::Ok),
            ("czi-bgr24-zstd0.czi", Reads::Ok),
            ("czi-bgr24-zstd1.czi", Reads::Ok),
            ("czi-bgr48-zstd1-hilo.czi", Reads::Ok),
        ],
    },
    DriverCases { driver: "leica", files: &[("leica-scn.tiff", Reads::Ok), ("leica-two-areas.tiff", Reads::Ok), ("leica-scn-2010-03.tiff", Reads::Ok)] },
    DriverCases { driver: "philips", files: &[("philips-sparse.tiff", Reads::Ok), ("philips-xml.tiff", Reads::Ok), ("philips-depth.tiff", Reads::Ok)] },
    DriverCases {
        driver: "hamamatsu",
        files: &[
            ("ndpi-420-ri7.ndpi", Reads::Ok),
            ("ndpi-420-wide.ndpi", Reads::Ok),
            ("ndpi-422-ri5.ndpi", Reads::Ok),
            ("ndpi-444-nomcu.ndpi", Reads::Ok),
            // VMS: a folder of files, opened by its folder (the driver picks the key file).
            ("vms-2x2", Reads::Ok),
            ("vms-3x1-444", Reads::Ok),
            ("vmu-320x200", Reads::Ok),
        ],
    },
    // Folder slides: opened by their folder (the driver picks the file, as for DRIVERS).
    DriverCases {
        driver: "dicom",
        files: &[
            ("dicom-associated", Reads::Ok),
            ("dicom-concat", Reads::Ok),
            ("dicom-j2k-ict", Reads::Ok),
            ("dicom-j2k-rct", Reads::Ok),
            ("dicom-j2k-rgb", Reads::Ok),
            ("dicom-native", Reads::Ok),
            ("dicom-navigation", Reads::Ok),
            ("dicom-offsets-bot", Reads::Ok),
            ("dicom-offsets-eot", Reads::Ok),
            ("dicom-offsets-none", Reads::Ok),
            ("dicom-props", Reads::Ok),
            ("dicom-sparse", Reads::Ok),
            ("dicom-sparse-overwrite", Reads::Ok),
            ("dicom-ybr-icc", Reads::Ok),
        ],
    },
];

/// Files (or folders: their first file) no driver opens, and the error kind open gives.
static REFUSED: &[(&str, &str)] =
    &[("broken.svs", "unsupported"), ("seek_too_large.tif", "format"), ("unopenable.tiff", "unsupported"), ("zero_gi.tif", "unsupported")];

/// Entries of the test-data folder that are not slides.
const NOT_SLIDES: &[&str] = &["MANIFEST.md", "manifest.json", "reference", "reference-multifile"];

#[test]
fn every_test_file_is_listed_exactly_once() {
    let Some(td) = testdata() else { return };
    let mut listed: Vec<&str> = DRIVERS.iter().flat_map(|d| d.files.iter().map(|f| f.0)).chain(REFUSED.iter().map(|r| r.0)).collect();
    let n = listed.len();
    listed.sort_unstable();
    listed.dedup();
    assert_eq!(listed.len(), n, "a file is listed twice");
    let present: BTreeSet<String> = std::fs::read_dir(&td).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    let unlisted: Vec<&String> = present.iter().filter(|f| !NOT_SLIDES.contains(&f.as_str()) && !listed.contains(&f.as_str())).collect();
    assert!(unlisted.is_empty(), "test files in no driver's list: {unlisted:?}");
    let missing: Vec<&&str> = listed.iter().filter(|f| !present.contains(**f)).collect();
    assert!(missing.is_empty(), "listed but absent: {missing:?}");
}

#[test]
fn every_generated_slide_is_listed_exactly_once() {
    let Some(vd) = vendor_slides() else { return };
    let mut listed: Vec<&str> = GENERATED.iter().flat_map(|d| d.files.iter().map(|f| f.0)).collect();
    let n = listed.len();
    listed.sort_unstable();
    listed.dedup();
    assert_eq!(listed.len(), n, "a generated file is listed twice");
    let present: BTreeSet<String> = std::fs::read_dir(&vd)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| !["MANIFEST.md", "reference", "reference-multifile", "known", "bad-mirax", "bad-dicom"].contains(&f.as_str()))
        // A MIRAX slide is `X.mrxs` plus its folder `X/`: the folder is part of the listed file;
        // a Trestle slide's macro image `X.Full` is part of `X.tif`.
        .filter(|f| !(vd.join(f).is_dir() && vd.join(format!("{f}.mrxs")).is_file()))
        .filter(|f| !f.ends_with(".Full"))
        .collect();
    let unlisted: Vec<&String> = present.iter().filter(|f| !listed.contains(&f.as_str())).collect();
    assert!(unlisted.is_empty(), "generated slides in no driver's list: {unlisted:?}");
    let missing: Vec<&&str> = listed.iter().filter(|f| !present.contains(**f)).collect();
    assert!(missing.is_empty(), "listed but not generated: {missing:?}");
}

#[test]
fn refused_files_give_their_typed_error_naming_the_file() {
    let Some(td) = testdata() else { return };
    for (name, kind) in REFUSED {
        let mut path = td.join(name);
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()).collect();
            files.sort();
            path = files.remove(0);
        }
        let e = Slide::open(&path).expect_err(name);
        assert_eq!(e.kind_name(), *kind, "{name}: {e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{name}: error does not name the file: {e}");
        Slide::detect(&path).unwrap_or_else(|e| panic!("{name}: detect: {e}"));
    }
}

#[test]
fn every_driver_conforms_on_its_files() {
    let Some(td) = testdata() else { return };
    let gpu_ok = gpu::available();
    if !gpu_ok {
        eprintln!("SKIP: no usable CUDA device (or built without `cuda`): device reads not compared");
    }
    let generated = vendor_slides().map(|vd| (vd, GENERATED));
    for (root, cases) in std::iter::once((td, DRIVERS)).chain(generated) {
        for d in cases {
            if !common::supported_vendors().contains(&d.driver) {
                eprintln!("SKIP: {}: no such driver registered yet (format::registry::DRIVERS)", d.driver);
                continue;
            }
            for &(file, reads) in d.files {
                let given = root.join(file);
                let slide = Slide::open(&given).unwrap_or_else(|e| panic!("{file}: {e}"));
                // A folder opens as the file its driver picks (source 0), inside the folder.
                let path = slide.index().path().to_path_buf();
                assert!(path == given || (given.is_dir() && path.parent() == Some(given.as_path())), "{file}: opened {}", path.display());
                let mut refdir = root.join("reference").join(file);
                if !refdir.exists() {
                    refdir = root.join("reference-multifile").join(file);
                }
                let what = format!("{} {file}", d.driver);
                check_detection(&slide, &path, d.driver, &what);
                check_properties(&slide, &what);
                check_index(&slide, reads, &what);
                check_errors(&slide, &what);
                check_icc(&slide, &path, &what);
                check_reference(&slide, &refdir, d.driver, &what);
                for level in 0..slide.level_count() {
                    check_regions(&slide, level, reads, &what);
                    if gpu_ok && reads == Reads::Ok {
                        check_device(&slide, level, &what);
                    }
                }
                check_associated(&slide, &what);
            }
        }
    }
}

fn check_detection(slide: &Slide, path: &Path, driver: &str, what: &str) {
    assert_eq!(slide.vendor(), driver, "{what}");
    assert_eq!(Slide::detect(path).unwrap().chosen(), Some(driver), "{what}");
    assert_eq!(slide.index().path(), path, "{what}");
    assert_eq!(slide.index().file_len(), std::fs::metadata(path).unwrap().len(), "{what}");
    let id = slide.index().sources[0].identity.expect("a local file has an identity");
    assert_eq!(id.size, slide.index().file_len(), "{what}");
}

/// The `openslide.*` properties say what the other entry points say.
fn check_properties(slide: &Slide, what: &str) {
    let p = slide.properties();
    let get = |k: &str| p.get(k).unwrap_or_else(|| panic!("{what}: no {k}"));
    assert_eq!(get("openslide.vendor"), slide.vendor(), "{what}");
    assert_eq!(get("openslide.level-count").parse::<usize>().unwrap(), slide.level_count(), "{what}");
    let dims = slide.level_dimensions();
    let ds = slide.level_downsamples();
    for (k, &(w, h)) in dims.iter().enumerate() {
        assert_eq!(get(&format!("openslide.level[{k}].width")).parse::<u64>().unwrap(), w, "{what}");
        assert_eq!(get(&format!("openslide.level[{k}].height")).parse::<u64>().unwrap(), h, "{what}");
        assert_eq!(get(&format!("openslide.level[{k}].downsample")).parse::<f64>().unwrap(), ds[k], "{what}: level {k}");
        if let Some(tw) = p.get(&format!("openslide.level[{k}].tile-width")) {
            assert_eq!(tw.parse::<u32>().unwrap(), slide.level_tile_sizes()[k].0, "{what}");
        }
    }
    for (name, (w, h)) in slide.associated_images() {
        assert_eq!(get(&format!("openslide.associated.{name}.width")).parse::<u64>().unwrap(), w, "{what}");
        assert_eq!(get(&format!("openslide.associated.{name}.height")).parse::<u64>().unwrap(), h, "{what}");
    }
    let n_assoc = p.keys().filter(|k| k.starts_with("openslide.associated.") && k.ends_with(".width")).count();
    assert_eq!(n_assoc, slide.associated_images().len(), "{what}");
    match (p.get("openslide.mpp-x"), slide.mpp()) {
        (Some(x), Some((mx, _))) => assert_eq!(x.parse::<f64>().unwrap(), mx, "{what}"),
        (None, None) => {}
        (a, b) => panic!("{what}: mpp property {a:?} vs {b:?}"),
    }
}

/// Geometry and the tile index agree with each other and with `read_tiles`.
fn check_index(slide: &Slide, reads: Reads, what: &str) {
    let idx = slide.index();
    let ds = slide.level_downsamples();
    assert_eq!(ds[0], 1.0, "{what}");
    let (w0, h0) = slide.dimensions();
    for (k, l) in idx.levels.iter().enumerate() {
        let img = &l.image;
        if k > 0 {
            let prev = &idx.levels[k - 1].image;
            assert!(img.width <= prev.width && img.height <= prev.height && ds[k] > ds[k - 1], "{what}: level {k} order");
        }
        // Ventana's downsamples are magnification ratios and Sakura's the power of two its
        // tile table names (reference.rs compares both with OpenSlide's); every other
        // driver's the mean of the per-axis ratios.
        if !matches!(slide.vendor(), "ventana" | "sakura") {
            let mean = (w0 as f64 / img.width as f64 + h0 as f64 / img.height as f64) / 2.0;
            assert_eq!(ds[k], mean, "{what}: level {k} downsample");
        }
        // A positioned level's stored tiles cover its stored image, not the level.
        let (sw, sh) = img.grid.stored_size().unwrap_or((img.width, img.height));
        assert_eq!(img.tiles_across(), sw.div_ceil(img.tile_width as u64), "{what}");
        assert_eq!(img.tiles_down(), sh.div_ceil(img.tile_height as u64), "{what}");
        let coords: Vec<(u64, u64)> = (0..img.tiles_down()).flat_map(|r| (0..img.tiles_across()).map(move |c| (c, r))).collect();
        let stored: Vec<(u64, u64)> = coords.iter().copied().filter(|&(c, r)| img.tile(c, r).is_some()).collect();
        let whole = slidestream::geometry::Rect { x: 0, y: 0, w: img.width, h: img.height };
        let in_rect: Vec<(u64, u64)> = img.tiles_in_rect(&whole).iter().map(|t| (t.col, t.row)).collect();
        if img.grid.is_positioned() {
            // Only the stored tiles some piece of the level shows.
            assert!(!in_rect.is_empty() && in_rect.iter().all(|c| stored.contains(c)), "{what}: level {k}: tiles_in_rect(whole level) vs tile()");
        } else {
            assert_eq!(in_rect, stored, "{what}: level {k}: tiles_in_rect(whole level) vs tile()");
        }
        for t in img.tiles_in_rect(&whole).iter().take(64) {
            assert_eq!((t.x as u64, t.y as u64), img.tile_origin(t.col, t.row), "{what}");
            assert_eq!(t.locs.len(), img.planes(), "{what}");
            // Each range inside the file it names (slides of several files: MIRAX data files).
            let len = |l: &slidestream::index::TileLoc| idx.sources.get(l.source.0 as usize).map(|s| s.len);
            assert!(t.locs.iter().all(|l| !l.is_missing() && l.end().is_some_and(|e| len(l).is_some_and(|n| e <= n))), "{what}: tile byte range");
        }
        // The first tiles through read_tiles: every stored one decodes (or, for corrupt files,
        // the call fails with a format error).
        let first: Vec<(u64, u64)> = coords.iter().copied().take(16).collect();
        let want = first.iter().filter(|&&(c, r)| img.tile(c, r).is_some()).count();
        match (slide.read_tiles(k, &first), reads) {
            (Ok(n), Reads::Ok) => assert_eq!(n, want, "{what}: level {k} read_tiles"),
            (Err(e), Reads::CorruptTiles) => assert!(matches!(e, Error::Format { .. }), "{what}: {e}"),
            (r, _) => panic!("{what}: level {k} read_tiles: {r:?}"),
        }
        let e = slide.read_tiles(k, &[(img.tiles_across(), 0)]).unwrap_err();
        assert!(matches!(e, Error::Usage(_)), "{what}: tile outside the grid: {e}");
    }
}

/// Bad arguments give the documented error kinds; the slide stays usable.
fn check_errors(slide: &Slide, what: &str) {
    let n = slide.level_count();
    assert!(matches!(slide.read_region((0, 0), n, (1, 1)), Err(Error::Usage(_))), "{what}: missing level");
    assert!(matches!(slide.read_region((0, 0), 0, (1 << 20, 1 << 20)), Err(Error::Limits { .. })), "{what}: huge region");
    let mut small = vec![0u8; 3];
    assert!(matches!(slide.read_region_into((0, 0), 0, (1, 1), &mut small), Err(Error::Usage(_))), "{what}: short buffer");
    assert!(matches!(slide.read_associated("no-such-image"), Err(Error::Usage(_))), "{what}");
    assert!(matches!(slide.associated_icc_profile("no-such-image"), Err(Error::Usage(_))), "{what}");
    assert!(slide.read_region((-10, -10), 0, (4, 4)).is_ok_and(|r| r.data.iter().all(|&b| b == 0)), "{what}: usable after errors");
}

/// The ICC profile read on request is the tag's bytes, of the advertised size, and an ICC
/// profile (signature `acsp` at byte 36, ICC.1:2010 section 7.2.9).
fn check_icc(slide: &Slide, path: &Path, what: &str) {
    let icc = slide.icc_profile().unwrap_or_else(|e| panic!("{what}: ICC: {e}"));
    let size = slide.properties().get("openslide.icc-size").map(|s| s.parse::<usize>().unwrap());
    assert_eq!(icc.as_ref().map(|b| b.len()), size, "{what}: icc-size vs profile");
    if let (Some(icc), Some(BlobRef::Range(r))) = (&icc, &slide.index().icc) {
        let file = std::fs::read(path).unwrap();
        assert!(icc[..] == file[r.offset as usize..(r.offset + r.length) as usize], "{what}: profile is not the tag's bytes");
        assert_eq!(&icc[36..40], b"acsp", "{what}: not an ICC profile");
    }
    for name in slide.associated_images().keys() {
        let a = slide.associated_icc_profile(name).unwrap();
        let size = slide.properties().get(&format!("openslide.associated.{name}.icc-size")).map(|s| s.parse::<usize>().unwrap());
        assert_eq!(a.map(|b| b.len()), size, "{what}: {name} icc-size");
    }
}

/// What OpenSlide's reference says that `reference.rs` does not compare: the driver it
/// detects, and per level the TIFF directory's chunk count and zero byte counts.
fn check_reference(slide: &Slide, dir: &Path, driver: &str, what: &str) {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok().map(|s| serde_json::from_str::<Value>(&s).unwrap());
    if let Some(r) = read("regions.json") {
        // OpenSlide 4.0.1 has no OME-TIFF driver: it opens those as generic-tiff (reference.rs).
        let openslide_driver = if driver == "ome-tiff" { "generic-tiff" } else { driver };
        assert_eq!(r["detect_format"].as_str(), Some(openslide_driver), "{what}: OpenSlide's detected format");
    }
    // NDPI tiles are restart intervals of one strip and most levels are synthesised: the
    // TIFF chunk counts say nothing about them (reference.rs compares geometry and pixels).
    if driver == "hamamatsu" {
        return;
    }
    let Some(s) = read("structure.json") else { return };
    let pages = s["pages"].as_array().unwrap();
    let images = slide.index().levels.iter().map(|l| (&l.image, true)).chain(slide.index().associated.values().map(|a| (a, false)));
    for (img, level) in images {
        let page = pages
            .iter()
            .find(|p| p["width"].as_u64() == Some(img.width) && p["height"].as_u64() == Some(img.height) && p["tiled"].as_bool() == Some(img.tiled))
            .unwrap_or_else(|| panic!("{what}: no IFD of {}x{} in structure.json", img.width, img.height));
        assert_eq!(img.grid.chunks().count() as u64, page["n_chunks"].as_u64().unwrap(), "{what}: {} chunks", page["name"]);
        let zero = img.grid.chunks().filter(|c| c.length == 0).count() as u64;
        assert_eq!(zero, page["zero_bytecounts"].as_u64().unwrap(), "{what}: {} zero byte counts", page["name"]);
        if level && std::ptr::eq(img, &slide.index().levels[0].image) {
            assert_eq!(page["icc"].as_bool() == Some(true), slide.index().icc.is_some(), "{what}: level 0 ICC");
        }
    }
}

/// Level-0 location whose level-`level` origin is exactly (x, y) (level pixels).
fn loc0(slide: &Slide, level: usize, x: i64, y: i64) -> (i64, i64) {
    let ds = slide.level_downsamples()[level];
    ((x as f64 * ds).ceil() as i64, (y as f64 * ds).ceil() as i64)
}

/// `read_region` in level pixels.
fn region(slide: &Slide, level: usize, x: i64, y: i64, w: u64, h: u64) -> slidestream::Result<Vec<u8>> {
    slide.read_region(loc0(slide, level, x, y), level, (w, h)).map(|r| r.data)
}

/// Composite RGBA over `bg` as `read_regions_rgb_into` documents.
fn over(rgba: &[u8], bg: [u8; 3]) -> Vec<u8> {
    rgba.chunks_exact(4)
        .flat_map(|p| {
            let a = p[3] as u32;
            let c = |i: usize| match a {
                255 => p[i],
                0 => bg[i],
                _ => ((p[i] as u32 * a + bg[i] as u32 * (255 - a) + 127) / 255) as u8,
            };
            [c(0), c(1), c(2)]
        })
        .collect()
}

/// A region across tile boundaries, its quadrants, a batch, corners, edges and outside.
fn check_regions(slide: &Slide, level: usize, reads: Reads, what: &str) {
    let what = &format!("{what} level {level}");
    let (w, h) = slide.level_dimensions()[level];
    let (tw, th) = slide.level_tile_sizes()[level];
    let (rw, rh) = (w.min(96), h.min(80));
    // Straddle the first tile corner when the level has more than one tile.
    let x = (tw as u64).saturating_sub(13).min(w - rw) as i64;
    let y = (th as u64).saturating_sub(11).min(h - rh) as i64;
    let outside = region(slide, level, -(rw as i64) - 5, h as i64 + 3, rw, rh).unwrap();
    assert!(outside.iter().all(|&b| b == 0), "{what}: outside pixels are not transparent");
    let whole = match (region(slide, level, x, y, rw, rh), reads) {
        (Ok(r), Reads::Ok) => r,
        (Err(e), Reads::CorruptTiles) => {
            assert!(matches!(e, Error::Format { .. }) && e.to_string().contains(": tile ("), "{what}: {e}");
            return;
        }
        (r, _) => panic!("{what}: read_region: {:?}", r.map(|v| v.len())),
    };
    let mut into = vec![7u8; whole.len()];
    slide.read_region_into(loc0(slide, level, x, y), level, (rw, rh), &mut into).unwrap();
    assert!(into == whole, "{what}: read_region_into differs from read_region");
    // Quadrants read separately and assembled give the same pixels.
    let (hw, hh) = (rw / 2, rh / 2);
    let mut assembled = vec![0u8; whole.len()];
    for (qx, qy, qw, qh) in [(0, 0, hw, hh), (hw, 0, rw - hw, hh), (0, hh, hw, rh - hh), (hw, hh, rw - hw, rh - hh)] {
        if qw == 0 || qh == 0 {
            continue;
        }
        let q = region(slide, level, x + qx as i64, y + qy as i64, qw, qh).unwrap();
        for row in 0..qh {
            let d = (((qy + row) * rw + qx) * 4) as usize;
            assembled[d..d + qw as usize * 4].copy_from_slice(&q[(row * qw * 4) as usize..((row + 1) * qw * 4) as usize]);
        }
    }
    assert!(assembled == whole, "{what}: quadrants differ from the whole region");
    // A batch of the same region, one across the bottom-right edge and one outside equals the
    // RGBA regions composited over the background.
    let bg = [250, 128, 3];
    let locs = [(x, y), (w as i64 - hw as i64, h as i64 - hh as i64), (w as i64 + 10, -(rh as i64) - 10)];
    let mut batch = vec![0u8; locs.len() * (rw * rh * 3) as usize];
    let l0: Vec<(i64, i64)> = locs.iter().map(|&(a, b)| loc0(slide, level, a, b)).collect();
    slide.read_regions_rgb_into(&l0, level, (rw, rh), bg, &mut batch).unwrap();
    for (i, &(a, b)) in locs.iter().enumerate() {
        let rgba = region(slide, level, a, b, rw, rh).unwrap();
        let n = (rw * rh * 3) as usize;
        assert!(batch[i * n..(i + 1) * n] == over(&rgba, bg)[..], "{what}: batch patch {i} differs from its region");
    }
    // Across the bottom-right corner: pixels past the edge are transparent, the inside part
    // equals the inside-only read. Positioned levels may place tiles past the level's edge,
    // which OpenSlide paints there (MIRAX: a stored image reaching past the level size), so
    // only the tiles' absence is transparent there.
    let edge = region(slide, level, w as i64 - hw as i64, h as i64 - hh as i64, rw, rh).unwrap();
    let inside = region(slide, level, w as i64 - hw as i64, h as i64 - hh as i64, hw.max(1), hh.max(1)).unwrap();
    let img = &slide.index().levels[level].image;
    let (ex, ey) = (w as i64 - hw as i64, h as i64 - hh as i64);
    let painted = |col: u64, row: u64| {
        let r = slidestream::geometry::Rect { x: ex + col as i64, y: ey + row as i64, w: 1, h: 1 };
        img.grid.is_positioned() && !img.tiles_in_rect(&r).is_empty()
    };
    for row in 0..rh {
        for col in 0..rw {
            let p = &edge[((row * rw + col) * 4) as usize..][..4];
            if col >= hw || row >= hh {
                if !painted(col, row) {
                    assert_eq!(p, [0, 0, 0, 0], "{what}: pixel ({col}, {row}) past the corner");
                }
            } else {
                assert_eq!(p, &inside[((row * hw + col) * 4) as usize..][..4], "{what}: corner pixel ({col}, {row})");
            }
        }
    }
    // The four corner pixels equal 1x1 reads; the top-left equals the whole-level read's.
    for (cx, cy) in [(0, 0), (w as i64 - 1, 0), (0, h as i64 - 1), (w as i64 - 1, h as i64 - 1)] {
        let one = region(slide, level, cx, cy, 1, 1).unwrap();
        let four = region(slide, level, cx - 1, cy - 1, 3, 3).unwrap();
        assert_eq!(one[..], four[16..20], "{what}: corner ({cx}, {cy})");
    }
}

/// Device reads (RGBA and RGB batch) equal the CPU's, exactly.
fn check_device(slide: &Slide, level: usize, what: &str) {
    let (w, h) = slide.level_dimensions()[level];
    let (rw, rh) = (w.min(96), h.min(80));
    let locs = [loc0(slide, level, 0, 0), loc0(slide, level, w as i64 - 40, h as i64 - 30), loc0(slide, level, -50, -50)];
    for &loc in &locs {
        let cpu = slide.read_region(loc, level, (rw, rh)).unwrap();
        let opts = DeviceOptions { device: 0, channels: 4, background: [255, 255, 255] };
        let dev = slide.read_region_device(loc, level, (rw, rh), &opts).unwrap_or_else(|e| panic!("{what}: device: {e}"));
        assert_eq!(max_abs_diff(&dev.to_host().unwrap(), &cpu.data), 0, "{what} level {level} {loc:?}: device RGBA");
    }
    let bg = [10, 20, 30];
    let mut cpu = vec![0u8; locs.len() * (rw * rh * 3) as usize];
    slide.read_regions_rgb_into(&locs, level, (rw, rh), bg, &mut cpu).unwrap();
    let opts = DeviceOptions { device: 0, channels: 3, background: bg };
    let dev = slide.read_regions_device(&locs, level, (rw, rh), &opts).unwrap().into_result().unwrap();
    assert_eq!(max_abs_diff(&dev.to_host().unwrap(), &cpu), 0, "{what} level {level}: device RGB batch");
}

/// Associated images read whole at their advertised size (or fail with a format error).
fn check_associated(slide: &Slide, what: &str) {
    for (name, (w, h)) in slide.associated_images() {
        match slide.read_associated(&name) {
            Ok(img) => {
                assert_eq!((img.width, img.height, img.data.len() as u64), (w, h, w * h * 4), "{what}: {name}");
                assert!(img.data.chunks_exact(4).any(|p| p[3] != 0), "{what}: {name} is fully transparent");
            }
            Err(e) => assert!(matches!(e, Error::Format { .. }), "{what}: {name}: {e}"),
        }
    }
}
