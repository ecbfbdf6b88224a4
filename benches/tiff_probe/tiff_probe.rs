//! Probe behind the "TIFF structure" departure in docs/architecture.md: can the `tiff` crate
//! (0.11) read this project's IFD structure, and at what cost against `core/src/tiff`?
//!
//! Not built by default (the crate does not depend on `tiff`). To run it:
//!   python3 benches/tiff_probe/make_bigtiff.py /tmp/tiffprobe/big100k.tif 100000
//!   python3 benches/tiff_probe/make_bigtiff.py /tmp/tiffprobe/big200k.tif 200000
//!   # add `tiff.workspace = true` to core/Cargo.toml [dev-dependencies], then
//!   cp benches/tiff_probe/tiff_probe.rs core/tests/
//!   cargo test --release -p slidestream --test tiff_probe -- --nocapture --test-threads 1
use std::fs::File;
use std::io::BufReader;
use std::time::Instant;

use slidestream::io::posix::FileSource;
use slidestream::tiff::{tags, TiffFile};
use slidestream::Location;
use tiff::decoder::{Decoder, Limits};
use tiff::tags::Tag;

fn crate_probe(path: &str, limits: Option<Limits>) -> (String, f64) {
    let t = Instant::now();
    let mut out = String::new();
    let r = (|| -> tiff::TiffResult<()> {
        let mut d = Decoder::new(BufReader::new(File::open(path)?))?;
        if let Some(l) = limits.clone() {
            d = d.with_limits(l);
        }
        let mut i = 0;
        loop {
            if i > 0 {
                match d.seek_to_image(i) {
                    Ok(()) => {}
                    Err(e) => {
                        out += &format!(" ifd{i}:ERR({e})");
                        if !d.more_images() { break; }
                        i += 1;
                        continue;
                    }
                }
            } else if limits.is_some() {
                // re-read IFD 0 under the raised limits
                if let Err(e) = d.seek_to_image(0) { out += &format!(" ifd0(relimited):ERR({e})"); }
            }
            let offs = d.find_tag_unsigned_vec::<u64>(Tag::TileOffsets).map(|v| v.map(|v| v.len()));
            let strips = d.find_tag_unsigned_vec::<u64>(Tag::StripOffsets).map(|v| v.map(|v| v.len()));
            out += &format!(" ifd{i}:{:?}/{:?}", offs.map_err(|e| e.to_string()), strips.map_err(|e| e.to_string()));
            if !d.more_images() { break; }
            i += 1;
        }
        Ok(())
    })();
    if let Err(e) = r { out += &format!(" ERR({e})"); }
    (out, t.elapsed().as_secs_f64() * 1e3)
}

fn ours(path: &str) -> (String, f64) {
    let t = Instant::now();
    let at = Location::file(path);
    let src = FileSource::open(std::path::Path::new(path)).unwrap();
    let out = match TiffFile::parse(&src, &at) {
        Ok(tf) => {
            let mut s = String::new();
            for (i, _) in tf.ifds.iter().enumerate() {
                let r = tf.reader(&src, &at, i);
                let o = r.uints(tags::TILE_OFFSETS).map(|v| v.map(|v| v.len()));
                let so = r.uints(tags::STRIP_OFFSETS).map(|v| v.map(|v| v.len()));
                s += &format!(" ifd{i}:{:?}/{:?}", o.map_err(|e| e.kind_name()), so.map_err(|e| e.kind_name()));
            }
            s
        }
        Err(e) => format!(" ERR({e})"),
    };
    (out, t.elapsed().as_secs_f64() * 1e3)
}

fn arrays_tiff(path: &str, with_tags: bool) -> (String, f64) {
    let t = Instant::now();
    let r = (|| -> tiff::TiffResult<String> {
        let mut d = Decoder::new(BufReader::new(File::open(path)?))?;
        if !with_tags { return Ok("new only".into()); }
        let o = d.get_tag_u64_vec(Tag::TileOffsets)?;
        let b = d.get_tag_u64_vec(Tag::TileByteCounts)?;
        Ok(format!("{} + {}", o.len(), b.len()))
    })();
    (format!("{r:?}"), t.elapsed().as_secs_f64() * 1e3)
}

fn arrays_ours(path: &str) -> (String, f64) {
    let t = Instant::now();
    let at = Location::file(path);
    let src = FileSource::open(std::path::Path::new(path)).unwrap();
    let tf = TiffFile::parse(&src, &at).unwrap();
    let r = tf.reader(&src, &at, 0);
    let o = r.uints(tags::TILE_OFFSETS).unwrap().unwrap();
    let b = r.uints(tags::TILE_BYTE_COUNTS).unwrap().unwrap();
    (format!("{} + {}", o.len(), b.len()), t.elapsed().as_secs_f64() * 1e3)
}

#[test]
fn arrays() {
    for f in ["/tmp/tiffprobe/big100k.tif", "/tmp/tiffprobe/big200k.tif", "/work/shared/testdata/tcga-cr-7395-01a-01-ts1.svs", "/work/shared/testdata/CMU-1-Small-Region.svs"] {
        let med = |g: &dyn Fn() -> (String, f64)| { let mut v: Vec<(String, f64)> = (0..21).map(|_| g()).collect(); v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap()); v.swap_remove(10) };
        let (a, ta) = med(&|| arrays_tiff(f, false));
        let (b, tb) = med(&|| arrays_tiff(f, true));
        let (c, tc) = med(&|| arrays_ours(f));
        println!("ARRAYS {f}: tiff Decoder::new {ta:.3} ms ({a}); tiff new+TileOffsets+TileByteCounts {tb:.3} ms ({b}); ours parse+both arrays {tc:.3} ms ({c})");
    }
}

#[test]
fn probe() {
    let mut files: Vec<String> = std::fs::read_dir("/work/shared/testdata").unwrap().filter_map(|e| e.ok()).map(|e| e.path().to_string_lossy().into_owned()).filter(|p| p.ends_with(".svs") || p.ends_with(".tif") || p.ends_with(".tiff") || p.ends_with(".ndpi")).collect();
    files.sort();
    files.push("/tmp/tiffprobe/big100k.tif".into());
    files.push("/tmp/tiffprobe/big200k.tif".into());
    for f in &files {
        let best = |g: &dyn Fn() -> (String, f64)| { let mut r = g(); for _ in 0..4 { let x = g(); if x.1 < r.1 { r = x; } } r };
        let (a, ta) = best(&|| crate_probe(f, None));
        let (b, tb) = best(&|| crate_probe(f, Some(Limits::unlimited())));
        let (c, tc) = best(&|| ours(f));
        println!("FILE {f}\n  tiff default   {ta:8.3} ms{a}\n  tiff unlimited {tb:8.3} ms{b}\n  ours           {tc:8.3} ms{c}");
    }
}
