//! Sakura SVSlide (`format::sakura`) against OpenSlide 4.0.1.
//!
//! * the slide `scripts/vendor_slides/sakura.py` writes (run at test time into cargo's target
//!   tmp dir with the repository's `.venv/bin/python`, or `$SLIDESTREAM_PYTHON`; skipped with a
//!   message when it cannot run, and a failure under `scripts/test-all.sh`) opens with
//!   OpenSlide's vendor, levels, downsamples, properties (every one, both ways, quickhash
//!   included), associated images and regions (a tile lacking a colour, edges, the middle
//!   focal plane): 0 difference (both decode with libjpeg-turbo); opened from memory it reads
//!   the same;
//! * damaged databases are typed errors naming the file, never a panic or a hang: not SQLite
//!   (a truncated database), missing tables and columns, a view posing as the unique table, a
//!   tile blob that is not a JPEG (at read, naming the tile; the slide stays usable), absurd
//!   header dimensions, a short header, malformed tile ids, a downsample that is not a power
//!   of two; a missing tile blob reads as transparent; missing metadata tables drop the
//!   properties and quickhash only, as in OpenSlide.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{decode_png, max_abs_diff};
use serde_json::Value;
use slidestream::{Error, MemSource, Slide, SlideOptions};

const NAME: &str = "sakura.svslide";
const TABLE: &str = "\"SVGigaPixelImage Data\"";

/// The generated slide's folder (made once per test process), `None` when the generator
/// cannot run here.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = std::env::var_os("SLIDESTREAM_PYTHON").map(PathBuf::from).unwrap_or_else(|| root.join(".venv/bin/python"));
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sakura");
        let _ = std::fs::remove_dir_all(&dir);
        match Command::new(&python).args(["-m", "vendor_slides.sakura"]).arg(&dir).current_dir(root.join("scripts")).output() {
            Ok(o) if o.status.success() => Some(dir),
            Ok(o) if std::env::var_os("SLIDESTREAM_VENDOR_SLIDES").is_some() => panic!("sakura.py failed: {}", String::from_utf8_lossy(&o.stderr)),
            Ok(o) => {
                eprintln!("SKIP: sakura.py failed ({}): {}", python.display(), String::from_utf8_lossy(&o.stderr));
                None
            }
            Err(e) => {
                eprintln!("SKIP: cannot run {} ({e}); Sakura tests skipped", python.display());
                None
            }
        }
    })
    .as_deref()
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every region and associated image of the reference equals `slide`'s.
fn same_as_reference(slide: &Slide, refdir: &Path) -> usize {
    let doc = json(&refdir.join("regions.json"));
    let mut n = 0;
    for r in doc["regions"].as_array().unwrap() {
        let level = r["level"].as_u64().unwrap() as usize;
        let loc = (r["location"][0].as_i64().unwrap(), r["location"][1].as_i64().unwrap());
        let size = (r["size"][0].as_u64().unwrap(), r["size"][1].as_u64().unwrap());
        let (_, _, want) = decode_png(&refdir.join(r["png"].as_str().unwrap()));
        let got = slide.read_region(loc, level, size).unwrap_or_else(|e| panic!("{}: {e}", r["name"]));
        assert_eq!(max_abs_diff(&got.data, &want), 0, "region {}", r["name"]);
        n += 1;
    }
    let assoc = doc["associated_images"].as_object().unwrap();
    assert_eq!(slide.associated_images().len(), assoc.len());
    for (an, a) in assoc {
        let (w, h, want) = decode_png(&refdir.join(a["png"].as_str().unwrap()));
        let got = slide.read_associated(an).unwrap();
        assert_eq!((got.width, got.height), (w as u64, h as u64));
        assert_eq!(max_abs_diff(&got.data, &want), 0, "associated {an}");
    }
    n
}

#[test]
fn generated_slide_matches_openslide() {
    let Some(dir) = fixtures() else { return };
    let refdir = dir.join("reference").join(NAME);
    let doc = json(&refdir.join("regions.json"));
    let theirs = json(&refdir.join("properties.json"));
    let slide = Slide::open(dir.join(NAME)).unwrap();
    assert_eq!(slide.vendor(), "sakura");
    assert_eq!(doc["detect_format"].as_str(), Some("sakura"));
    let dims: Vec<(u64, u64)> = doc["level_dimensions"].as_array().unwrap().iter().map(|d| (d[0].as_u64().unwrap(), d[1].as_u64().unwrap())).collect();
    assert_eq!(slide.level_dimensions(), dims);
    let ds: Vec<f64> = doc["level_downsamples"].as_array().unwrap().iter().map(|d| d.as_f64().unwrap()).collect();
    assert_eq!(slide.level_downsamples(), ds);
    let ours = slide.properties();
    let theirs = theirs.as_object().unwrap();
    for (k, v) in theirs {
        assert_eq!(ours.get(k).map(String::as_str), v.as_str(), "property {k}");
    }
    for k in ours.keys() {
        assert!(theirs.contains_key(k), "property {k} = {:?} not in OpenSlide's", ours[k]);
    }
    assert_eq!(same_as_reference(&slide, &refdir), 5);
    // From memory (no descriptor: the database is copied into memory): the same.
    let bytes = std::fs::read(dir.join(NAME)).unwrap();
    let mem = Slide::from_source(NAME, Box::new(MemSource::new(bytes)), SlideOptions::default()).unwrap();
    assert_eq!(mem.properties().get("openslide.quickhash-1"), ours.get("openslide.quickhash-1"));
    assert_eq!(same_as_reference(&mem, &refdir), 5);
}

/// A copy of the generated slide in a fresh folder `case`, changed by the SQL `sql`.
fn case(case: &str, sql: &str) -> Option<PathBuf> {
    let src = fixtures()?;
    let dst = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sakura-cases").join(case);
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&dst).unwrap();
    let p = dst.join(NAME);
    std::fs::copy(src.join(NAME), &p).unwrap();
    if !sql.is_empty() {
        let c = rusqlite::Connection::open(&p).unwrap();
        c.execute_batch(sql).unwrap_or_else(|e| panic!("{case}: {e}"));
    }
    Some(p)
}

fn open_err(p: &Path) -> Error {
    match Slide::open(p) {
        Ok(s) => panic!("{}: opened as {}", p.display(), s.vendor()),
        Err(e) => e,
    }
}

fn names_file(e: &Error, p: &Path) -> bool {
    e.to_string().contains(&p.display().to_string())
}

#[test]
fn damaged_databases_are_typed_errors_naming_the_file() {
    if fixtures().is_none() {
        return;
    }
    // Not detected as Sakura: a truncated database, the configuration table or the data
    // column missing, the magic changed, the unique table a view.
    let header = |w: u32, h: u32, ts: u32| {
        let mut b = Vec::new();
        for v in [ts, w, h, 8, 3] {
            b.extend(v.to_le_bytes());
        }
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    };
    let p = case("truncated", "").unwrap();
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() / 3]).unwrap();
    let e = open_err(&p);
    assert!(matches!(e, Error::Format { .. } | Error::Unsupported { .. }) && names_file(&e, &p), "{e}");
    for (name, sql) in [
        ("no-config", "DROP TABLE DataManagerSQLiteConfigXPO;"),
        ("no-data-column", &format!("ALTER TABLE {TABLE} RENAME COLUMN data TO payload;")),
        ("bad-magic", &format!("UPDATE {TABLE} SET data = 'SVGigaPixelImagX' WHERE id = '++MagicBytes';")),
        ("two-configs", "INSERT INTO DataManagerSQLiteConfigXPO VALUES (2, 'other');"),
        (
            "view",
            "CREATE VIEW loop AS WITH RECURSIVE r(id, data) AS (SELECT '++MagicBytes', 'SVGigaPixelImage' UNION ALL SELECT id, data FROM r) SELECT id, data FROM r;
             UPDATE DataManagerSQLiteConfigXPO SET TableName = 'loop';",
        ),
    ] {
        let p = case(name, sql).unwrap();
        let e = open_err(&p);
        assert!(matches!(e, Error::Unsupported { .. }) && names_file(&e, &p), "{name}: {e}");
    }
    // Detected, refused at open: absurd or short headers, bad tile ids, a bad downsample.
    for (name, sql, limits) in [
        ("huge-width", format!("UPDATE {TABLE} SET data = x'{}' WHERE id = 'Header';", header((1 << 31) + 5, 530, 128)), true),
        ("huge-tile", format!("UPDATE {TABLE} SET data = x'{}' WHERE id = 'Header';", header(700, 530, 100_000)), true),
        ("zero-tile", format!("UPDATE {TABLE} SET data = x'{}' WHERE id = 'Header';", header(700, 530, 0)), false),
        ("short-header", format!("UPDATE {TABLE} SET data = x'8000000001' WHERE id = 'Header';"), false),
        ("no-header", format!("DELETE FROM {TABLE} WHERE id = 'Header';"), false),
        ("bad-tile-id", format!("INSERT INTO {TABLE} VALUES ('T;01|0;1;0;1', 1, x'00');"), false),
        ("bad-colour", format!("INSERT INTO {TABLE} VALUES ('T;0|0;1;3;1', 1, x'00');"), false),
        ("downsample-3", format!("INSERT INTO {TABLE} VALUES ('T;0|0;3;0;0', 1, x'00');"), false),
    ] {
        let p = case(name, &sql).unwrap();
        let e = open_err(&p);
        let kind = if limits { matches!(e, Error::Limits { .. }) } else { matches!(e, Error::Format { .. }) };
        assert!(kind && names_file(&e, &p), "{name}: {e}");
    }
    // A tile blob that is not a JPEG: the read names the tile; the slide stays usable.
    let p = case("not-jpeg", &format!("UPDATE {TABLE} SET data = x'00112233' WHERE id = 'T;0|0;1;2;1';")).unwrap();
    let s = Slide::open(&p).unwrap();
    let e = s.read_region((0, 0), 0, (16, 16)).unwrap_err();
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("tile (0, 0)") && names_file(&e, &p), "{e}");
    assert!(s.read_region((300, 300), 0, (10, 10)).is_ok());
    // An empty blob fails to decode too (as OpenSlide's decode of an empty buffer).
    let p = case("empty-blob", &format!("UPDATE {TABLE} SET data = x'' WHERE id = 'T;128|0;1;0;1';")).unwrap();
    let s = Slide::open(&p).unwrap();
    assert!(matches!(s.read_region((130, 0), 0, (4, 4)).unwrap_err(), Error::Format { .. }));
    // A missing blob: the tile is transparent.
    let p = case("missing", &format!("DELETE FROM {TABLE} WHERE id = 'T;0|0;1;1;1';")).unwrap();
    let s = Slide::open(&p).unwrap();
    let r = s.read_region((0, 0), 0, (8, 8)).unwrap();
    assert!(r.data.chunks_exact(4).all(|p| p[3] == 0));
    // Missing metadata tables: no sakura.* columns, no quickhash, pixels as before.
    let p = case("no-metadata", "DROP TABLE SVSlideDataXPO;").unwrap();
    let s = Slide::open(&p).unwrap();
    let props = s.properties();
    assert!(!props.contains_key("sakura.SlideId") && !props.contains_key("openslide.quickhash-1") && props.contains_key("sakura.VersionBytes"));
    assert!(s.associated_images().is_empty());
    assert_eq!(s.level_count(), 3);
}

/// Device reads (feature `cuda`) equal CPU reads byte for byte: the planar colour JPEGs go to
/// the engine's CPU workers. The slide is `$SLIDESTREAM_SAKURA_SLIDE` or the generated one;
/// skipped without a usable CUDA device.
#[cfg(feature = "cuda")]
#[test]
fn device_reads_equal_cpu_reads() {
    use slidestream::{gpu, PatchRequest, ReadOptions};
    let Some(p) = std::env::var_os("SLIDESTREAM_SAKURA_SLIDE").map(PathBuf::from).or_else(|| fixtures().map(|d| d.join(NAME))) else { return };
    if !common::gpu_present("sakura device_reads_equal_cpu_reads") {
        return;
    }
    let slide = Slide::open(&p).unwrap();
    let mut reqs = Vec::new();
    for level in 0..slide.level_count() {
        for (x, y) in [(-20, -20), (0, 0), (100, 90), (300, 250), (600, 470), (130, 130)] {
            reqs.push(PatchRequest { slide: &slide, level, location: (x, y) });
        }
    }
    let opts = ReadOptions { size: (96, 80), background: [255, 255, 255] };
    let want = slidestream::read_patches(&reqs, &opts).unwrap();
    let arr = gpu::read_patches_device(&reqs, &opts, 0).unwrap().into_result().unwrap();
    assert_eq!(arr.to_host().unwrap(), want, "device pixels differ from the CPU's");
}
