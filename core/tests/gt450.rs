//! Aperio GT450-style layouts: level 0's tiles stored bottom row first (the offsets array in
//! TIFF order, the data in the file from the last tile row to the first) and a large ICC profile
//! in every IFD. Neither may cost anything: patch reads coalesce into as few read requests as
//! the same tiles stored top to bottom (the read planner sorts by file offset), and
//! opening reads none of the profiles, which are read once, on request.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::tiffwriter::{Chunk, Ifd, Tiff, Value, Variant};
use slidestream::cache::TileCache;
use slidestream::io::{ByteSource, MemSource};
use slidestream::{Slide, SlideOptions};

const ICC_TAG: u16 = 34675;

/// Counts read calls and bytes through it.
#[derive(Debug)]
struct Counting {
    inner: MemSource,
    calls: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl ByteSource for Counting {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.read_exact_at(buf, offset)
    }
}

/// A level of `w`×`h` in 64² uncompressed RGB tiles of a position-dependent pattern.
fn level(w: u32, h: u32, icc: &[u8], bottom_to_top: bool) -> Ifd {
    let (tw, th) = (64u32, 64u32);
    let (cols, rows) = (w.div_ceil(tw), h.div_ceil(th));
    let mut chunks = Vec::new();
    for r in 0..rows {
        for c in 0..cols {
            let t: Vec<u8> = (0..tw * th).flat_map(|i| [(c * 40 + i % tw) as u8, (r * 30 + i / tw) as u8, (w / 64) as u8]).collect();
            chunks.push(Chunk::Data(t));
        }
    }
    let ifd = Ifd::tiled(w, h, tw, th, chunks).tag(ICC_TAG, Value::Undefined(icc.to_vec()));
    if !bottom_to_top {
        return ifd;
    }
    let order = (0..rows).rev().flat_map(|r| (0..cols).map(move |c| (r * cols + c) as usize)).collect();
    ifd.write_order(order)
}

fn open(bottom_to_top: bool, icc: &[u8]) -> (Slide, Arc<AtomicU64>, Arc<AtomicU64>) {
    // Reduced levels carry NewSubfileType 1 (the reduced-image bit), as a pyramid needs.
    let reduced = |ifd: Ifd| ifd.tag(254, Value::Long(vec![1]));
    let ifds = vec![level(1024, 768, icc, bottom_to_top), reduced(level(512, 384, icc, false)), reduced(level(256, 192, icc, false))];
    let bytes = Tiff::new(Variant::BigTiff, ifds).to_bytes();
    let (calls, read) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let src = Counting { inner: MemSource::new(bytes), calls: calls.clone(), bytes: read.clone() };
    let slide =
        Slide::from_source("gt450-like.tif", Box::new(src), SlideOptions { cache: Some(Arc::new(TileCache::new(0))), ..SlideOptions::default() }).unwrap();
    (slide, calls, read)
}

#[test]
fn bottom_to_top_level_0_reads_with_as_few_requests_as_top_to_bottom() {
    let icc = vec![7u8; 1 << 20];
    let locations: Vec<(i64, i64)> = (0..40).map(|k| ((k * 97 % 900) as i64, (k * 61 % 640) as i64)).collect();
    let mut results = Vec::new();
    for bottom_to_top in [false, true] {
        let (slide, calls, _) = open(bottom_to_top, &icc);
        assert_eq!(slide.level_count(), 3);
        let before = calls.load(Ordering::Relaxed);
        let batch = slide.read_regions_rgb(&locations, 0, (100, 90), [255; 3]).unwrap();
        let region = slide.read_region((0, 0), 0, (1024, 768)).unwrap();
        results.push((batch, region.data, calls.load(Ordering::Relaxed) - before));
    }
    let (top, bottom) = (&results[0], &results[1]);
    assert!(top.0 == bottom.0 && top.1 == bottom.1, "the two layouts give different pixels");
    // The planner coalesces by file offset, so the order tiles are stored in changes only where
    // the size limit splits a long run (a request more or less); per-tile reads would be ~150.
    assert!(bottom.2 <= top.2 + top.2 / 4 + 1, "read requests: bottom-to-top {} vs top-to-bottom {}", bottom.2, top.2);
    // Whole tile rows coalesce: the full-level read is a handful of requests, not one per tile.
    assert!(top.2 < 16 * 12 / 4, "{} requests for 40 patches and a 16 x 12-tile region", top.2);
}

#[test]
fn icc_profiles_on_every_ifd_are_not_read_at_open_and_read_once_when_asked() {
    let icc: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let (slide, _, read) = open(true, &icc);
    let at_open = read.load(Ordering::Relaxed);
    assert!(at_open < icc.len() as u64 / 4, "open read {at_open} bytes of three {}-byte profiles", icc.len());
    assert_eq!(slide.properties()["openslide.icc-size"], icc.len().to_string());
    let got = slide.icc_profile().unwrap().expect("profile");
    assert!(got[..] == icc[..]);
    let after = read.load(Ordering::Relaxed);
    assert_eq!(after - at_open, icc.len() as u64, "one profile read, once");
    slide.icc_profile().unwrap();
    slide.read_region((500, 400), 1, (64, 64)).unwrap();
    slide.read_region((500, 400), 2, (64, 64)).unwrap();
    assert!(read.load(Ordering::Relaxed) - after < icc.len() as u64 / 4, "reads of other levels read a profile");
}
