//! Generated fixtures with known pixels: every test writes a TIFF with
//! `common::tiffwriter`, opens it with slidestream and checks pixel values exactly (or, for
//! lossy JPEG, against both the source and libjpeg-turbo's own decode of the same stream).

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use common::jpeg::{self, assemble, jpeg_tiff};
use common::tiffwriter::{cut_tiles, predict_horizontal, tag, to_planes, Chunk, Ifd, Rng, TempPath, Tiff, Value, Variant};
use slidestream::{Config, Error, Slide, SlideOptions, TileCache};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Open with a private, cold cache and default settings (independent of SLIDESTREAM_* variables).
fn open_private(path: &std::path::Path, cache_bytes: usize) -> Slide {
    Slide::open_with(path, SlideOptions { cache: Some(Arc::new(TileCache::new(cache_bytes))), config: Some(Config::default()), ..Default::default() })
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn open(path: &std::path::Path) -> Slide {
    open_private(path, 64 << 20)
}

/// Pixel value of the synthetic pyramid at (level, x, y). Never magenta (R < 251).
fn px(level: usize, x: u64, y: u64) -> [u8; 3] {
    let l = level as u64;
    [((x * 3 + l * 17) % 251) as u8, ((y * 5 + l * 29) % 241) as u8, (((x ^ y) + l * 70) % 256) as u8]
}

const MAGENTA: [u8; 3] = [255, 0, 255];

/// Interleaved RGB of a whole `w × h` image from a pixel function.
fn raster(w: u64, h: u64, f: impl Fn(u64, u64) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    for y in 0..h {
        for x in 0..w {
            out.extend_from_slice(&f(x, y));
        }
    }
    out
}

/// OpenSlide's downsample: mean of the two axis ratios.
fn downsample(l0: (u64, u64), lk: (u64, u64)) -> f64 {
    (l0.0 as f64 / lk.0 as f64 + l0.1 as f64 / lk.1 as f64) / 2.0
}

/// The expected RGBA of a region: origin floor(location / downsample), pixels outside the level
/// transparent black, inside `f(x, y)` as RGBA.
fn expected_region(dims: (u64, u64), ds: f64, loc: (i64, i64), size: (u64, u64), f: &dyn Fn(u64, u64) -> [u8; 4]) -> Vec<u8> {
    let o = |v: i64| if ds == 1.0 { v } else { (v as f64 / ds).floor() as i64 };
    let (ox, oy) = (o(loc.0), o(loc.1));
    let mut out = Vec::with_capacity((size.0 * size.1 * 4) as usize);
    for j in 0..size.1 as i64 {
        for i in 0..size.0 as i64 {
            let (x, y) = (ox + i, oy + j);
            if x >= 0 && y >= 0 && (x as u64) < dims.0 && (y as u64) < dims.1 {
                out.extend_from_slice(&f(x as u64, y as u64));
            } else {
                out.extend_from_slice(&[0, 0, 0, 0]);
            }
        }
    }
    out
}

fn rgba(p: [u8; 3]) -> [u8; 4] {
    [p[0], p[1], p[2], 255]
}

/// Position of the first differing pixel, for messages.
fn first_diff(got: &[u8], want: &[u8], width: u64) -> String {
    assert_eq!(got.len(), want.len(), "buffer sizes differ");
    match got.chunks_exact(4).zip(want.chunks_exact(4)).position(|(a, b)| a != b) {
        None => "identical".into(),
        Some(i) => {
            let (x, y) = (i as u64 % width.max(1), i as u64 / width.max(1));
            format!("first difference at ({x}, {y}): got {:?}, want {:?}", &got[i * 4..i * 4 + 4], &want[i * 4..i * 4 + 4])
        }
    }
}

fn assert_no_magenta(data: &[u8], what: &str) {
    assert!(!data.chunks_exact(4).any(|p| p[..3] == MAGENTA && p[3] == 255), "{what}: tile padding (magenta) leaked into the output");
}

/// Compress one chunk with a lossless TIFF codec.
fn encode(compression: u16, raw: &[u8]) -> Vec<u8> {
    match compression {
        1 => raw.to_vec(),
        5 => weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8).encode(raw).unwrap(),
        8 | 32946 => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        }
        50000 => zstd::bulk::compress(raw, 3).unwrap(),
        c => panic!("no encoder for compression {c}"),
    }
}

struct Level {
    dims: (u64, u64),
    tile: (u32, u32),
}

/// A region read: (level, level-0 location, size in pixels of the level).
type Read = (usize, (i64, i64), (u64, u64));

const PYRAMID: [Level; 3] = [
    Level { dims: (200, 150), tile: (64, 64) },
    Level { dims: (100, 75), tile: (64, 64) },
    // Non-integer downsample: (200/37 + 150/28) / 2 = 5.38127...
    Level { dims: (37, 28), tile: (16, 16) },
];

/// The three-level RGB pyramid of [`px`], tiles padded with magenta, with `compression`.
fn pyramid(variant: Variant, compression: u16) -> TempPath {
    let mut ifds = Vec::new();
    for (l, lv) in PYRAMID.iter().enumerate() {
        let (w, h) = lv.dims;
        let img = raster(w, h, |x, y| px(l, x, y).to_vec());
        let tiles = cut_tiles(&img, w as usize, h as usize, 3, lv.tile.0 as usize, lv.tile.1 as usize, &MAGENTA);
        let chunks = tiles.iter().map(|t| Chunk::Data(encode(compression, t))).collect();
        let mut ifd = Ifd::tiled(w as u32, h as u32, lv.tile.0, lv.tile.1, chunks).compression(compression);
        if l > 0 {
            ifd = ifd.tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1]));
        }
        ifds.push(ifd);
    }
    let p = TempPath::new(&format!("pyramid-{variant:?}-{compression}.tif"));
    Tiff::new(variant, ifds).write(p.path());
    p
}

/// Check one region of the pyramid against [`px`].
fn check_pyramid_region(slide: &Slide, level: usize, loc: (i64, i64), size: (u64, u64)) {
    let ds = downsample(PYRAMID[0].dims, PYRAMID[level].dims);
    let want = expected_region(PYRAMID[level].dims, ds, loc, size, &|x, y| rgba(px(level, x, y)));
    let got = slide.read_region(loc, level, size).unwrap_or_else(|e| panic!("level {level} {loc:?} {size:?}: {e}"));
    assert_eq!((got.width, got.height), size);
    assert!(got.data == want, "level {level} {loc:?} {size:?}: {}", first_diff(&got.data, &want, size.0));
    assert_no_magenta(&got.data, &format!("level {level} {loc:?} {size:?}"));
}

// ---------------------------------------------------------------------------------------------
// Geometry and region semantics on uncompressed tiles
// ---------------------------------------------------------------------------------------------

#[test]
fn uncompressed_pyramid_reads_exact_pixels_in_every_tiff_flavour() {
    for variant in [Variant::Classic, Variant::ClassicBigEndian, Variant::BigTiff] {
        let file = pyramid(variant, 1);
        let slide = open(file.path());
        assert_eq!(slide.vendor(), "generic-tiff");
        assert_eq!(slide.level_count(), 3);
        assert_eq!(slide.level_dimensions(), PYRAMID.iter().map(|l| l.dims).collect::<Vec<_>>());
        assert_eq!(slide.level_tile_sizes(), PYRAMID.iter().map(|l| l.tile).collect::<Vec<_>>());
        let ds = slide.level_downsamples();
        assert_eq!(ds[0], 1.0);
        assert_eq!(ds[1], 2.0);
        assert!((ds[2] - (200.0 / 37.0 + 150.0 / 28.0) / 2.0).abs() < 1e-12, "{ds:?}");

        let fixed: &[Read] = &[
            (0, (0, 0), (64, 64)),     // exactly tile (0, 0)
            (0, (64, 64), (64, 64)),   // exactly tile (1, 1)
            (0, (10, 20), (100, 90)),  // unaligned, crosses 2x2 tiles
            (0, (63, 63), (2, 2)),     // the corner of four tiles
            (0, (0, 0), (200, 150)),   // whole level, edge tiles
            (0, (190, 140), (40, 30)), // edge tile corner, partly outside
            (0, (-30, -10), (50, 40)), // partly outside, negative
            (0, (-1, -1), (1, 1)),     // wholly outside, just
            (0, (200, 0), (5, 5)),     // wholly outside, right
            (0, (-5000, 7), (10, 3)),  // far outside
            (1, (0, 0), (100, 75)),    // whole level 1
            (1, (31, 51), (20, 20)),   // odd location: origin (15, 25)
            (1, (-3, -3), (10, 10)),   // origin floor(-1.5) = -2
            (1, (120, 100), (50, 50)), // crosses the level-1 edge tiles
            (2, (0, 0), (37, 28)),     // whole non-integer level
            (2, (100, 100), (20, 10)), // origin floor(100 / 5.381) = 18
            (2, (-7, -7), (5, 5)),     // origin floor(-1.3) = -2
            (2, (190, 140), (10, 10)), // origin (35, 26): 2x2 pixels inside
        ];
        for &(level, loc, size) in fixed {
            check_pyramid_region(&slide, level, loc, size);
        }
        // The non-integer origins above, spelled out.
        let r = slide.read_region((100, 100), 2, (1, 1)).unwrap();
        assert_eq!(r.data, rgba(px(2, 18, 18)).to_vec());
        let r = slide.read_region((-7, -7), 2, (3, 3)).unwrap();
        assert_eq!(&r.data[(2 * 3 + 2) * 4..], &rgba(px(2, 0, 0))[..], "level-2 origin of -7 must be -2");

        let mut rng = Rng::new(0x5EED + variant as u64);
        for _ in 0..150 {
            let level = rng.range(0, 3) as usize;
            let loc = (rng.range(-300, 500), rng.range(-300, 400));
            let size = (rng.range(1, 120) as u64, rng.range(1, 120) as u64);
            check_pyramid_region(&slide, level, loc, size);
        }
    }
}

#[test]
fn empty_and_outside_regions() {
    let file = pyramid(Variant::Classic, 1);
    let slide = open(file.path());
    for size in [(0, 10), (10, 0), (0, 0), (u64::MAX, 0), (0, u64::MAX)] {
        for level in 0..3 {
            let r = slide.read_region((5, 5), level, size).unwrap();
            assert_eq!((r.width, r.height), size);
            assert!(r.data.is_empty());
        }
    }
    let before = slide.io_counters();
    for (loc, level) in [((-100, -100), 0), ((1000, 0), 0), ((0, 1000), 1), ((-1000, -1000), 2)] {
        let r = slide.read_region(loc, level, (10, 10)).unwrap();
        assert_eq!(r.data, vec![0u8; 400], "{loc:?} level {level}");
    }
    assert_eq!(slide.io_counters(), before, "regions outside the image must not read the file");
    // A level that does not exist is the caller's mistake.
    match slide.read_region((0, 0), 3, (1, 1)) {
        Err(Error::Usage(m)) => assert!(m.contains("level 3"), "{m}"),
        other => panic!("expected Usage, got {other:?}"),
    }
}

#[test]
fn edge_tile_padding_never_appears() {
    // 70x50 with 64x64 tiles: tile (1, 0) holds 6 valid columns, the rest is magenta padding.
    for compression in [1u16, 8] {
        let (w, h) = (70u64, 50u64);
        let img = raster(w, h, |x, y| px(0, x, y).to_vec());
        let tiles = cut_tiles(&img, 70, 50, 3, 64, 64, &MAGENTA);
        let chunks = tiles.iter().map(|t| Chunk::Data(encode(compression, t))).collect();
        let file = TempPath::new("padding.tif");
        Tiff::new(Variant::Classic, vec![Ifd::tiled(70, 50, 64, 64, chunks).compression(compression)]).write(file.path());
        let slide = open(file.path());
        for (loc, size) in [((0, 0), (70, 50)), ((60, 40), (64, 64)), ((-10, -10), (100, 100)), ((69, 49), (1, 1)), ((69, 0), (100, 3))] {
            let got = slide.read_region(loc, 0, size).unwrap();
            let want = expected_region((w, h), 1.0, loc, size, &|x, y| rgba(px(0, x, y)));
            assert!(got.data == want, "{loc:?} {size:?}: {}", first_diff(&got.data, &want, size.0));
            assert_no_magenta(&got.data, "padding test");
        }
    }
}

#[test]
fn tile_larger_than_image() {
    let img = raster(16, 16, |x, y| px(0, x, y).to_vec());
    let tiles = cut_tiles(&img, 16, 16, 3, 64, 64, &MAGENTA);
    assert_eq!(tiles.len(), 1);
    let file = TempPath::new("bigtile.tif");
    Tiff::new(Variant::Classic, vec![Ifd::tiled(16, 16, 64, 64, vec![Chunk::Data(tiles[0].clone())])]).write(file.path());
    let slide = open(file.path());
    assert_eq!(slide.dimensions(), (16, 16));
    assert_eq!(slide.level_tile_sizes(), vec![(64, 64)]);
    for (loc, size) in [((0, 0), (16, 16)), ((-8, -8), (32, 32)), ((8, 8), (64, 64)), ((15, 0), (1, 16)), ((16, 16), (8, 8))] {
        let got = slide.read_region(loc, 0, size).unwrap();
        let want = expected_region((16, 16), 1.0, loc, size, &|x, y| rgba(px(0, x, y)));
        assert!(got.data == want, "{loc:?} {size:?}: {}", first_diff(&got.data, &want, size.0));
        assert_no_magenta(&got.data, "tile larger than image");
    }
}

// ---------------------------------------------------------------------------------------------
// Missing tiles
// ---------------------------------------------------------------------------------------------

#[test]
fn missing_tiles_are_transparent_and_never_read() {
    // Level 0: 128x128, 32x32 tiles (4x4). Missing: (1, 0) as offset 0 / count 0, (2, 1) as
    // offset 0 with a non-zero count, (3, 3) as a valid offset with count 0.
    // Level 1: 64x64, every tile missing.
    let img = raster(128, 128, |x, y| px(0, x, y).to_vec());
    let tiles = cut_tiles(&img, 128, 128, 3, 32, 32, &MAGENTA);
    let missing: BTreeSet<(u64, u64)> = [(1, 0), (2, 1), (3, 3)].into();
    let chunks: Vec<Chunk> = tiles
        .iter()
        .enumerate()
        .map(|(i, t)| match (i % 4, i / 4) {
            (1, 0) => Chunk::Missing,
            (2, 1) => Chunk::Raw { offset: 0, byte_count: 3072 },
            (3, 3) => Chunk::Raw { offset: 8, byte_count: 0 },
            _ => Chunk::Data(t.clone()),
        })
        .collect();
    let l1 = Ifd::tiled(64, 64, 32, 32, vec![Chunk::Missing; 4]).tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1]));
    let file = TempPath::new("missing.tif");
    Tiff::new(Variant::Classic, vec![Ifd::tiled(128, 128, 32, 32, chunks), l1]).write(file.path());
    let slide = open(file.path());
    assert_eq!(slide.io_counters().bytes, 0, "counters start at zero after open");

    let f = |x: u64, y: u64| {
        if missing.contains(&(x / 32, y / 32)) {
            [0, 0, 0, 0]
        } else {
            rgba(px(0, x, y))
        }
    };
    // Regions touching only missing tiles read nothing.
    for (loc, size) in [((32, 0), (32, 32)), ((64, 32), (32, 32)), ((96, 96), (32, 32)), ((40, 5), (10, 10))] {
        let before = slide.io_counters();
        let got = slide.read_region(loc, 0, size).unwrap();
        assert_eq!(got.data, vec![0u8; (size.0 * size.1 * 4) as usize], "{loc:?}");
        assert_eq!(slide.io_counters(), before, "{loc:?}: a missing tile was read");
    }
    // A whole level of missing tiles: zero bytes, zero requests.
    let before = slide.io_counters();
    let got = slide.read_region((0, 0), 1, (64, 64)).unwrap();
    assert_eq!(got.data, vec![0u8; 64 * 64 * 4]);
    assert_eq!(slide.io_counters(), before);
    assert_eq!(slide.read_tiles(1, &[(0, 0), (1, 0), (0, 1), (1, 1)]).unwrap(), 0);
    assert_eq!(slide.io_counters(), before);

    // The whole level 0: exactly the 13 present tiles' bytes are read.
    let got = slide.read_region((0, 0), 0, (128, 128)).unwrap();
    let want = expected_region((128, 128), 1.0, (0, 0), (128, 128), &f);
    assert!(got.data == want, "{}", first_diff(&got.data, &want, 128));
    let io = slide.io_counters();
    assert_eq!(io.bytes - before.bytes, 13 * 32 * 32 * 3);
}

// ---------------------------------------------------------------------------------------------
// JPEG
// ---------------------------------------------------------------------------------------------

fn diff_stats(a: &[u8], b: &[u8]) -> (u8, f64) {
    assert_eq!(a.len(), b.len());
    let mut max = 0u8;
    let mut sum = 0u64;
    for (x, y) in a.iter().zip(b) {
        let d = x.abs_diff(*y);
        max = max.max(d);
        sum += d as u64;
    }
    (max, sum as f64 / a.len() as f64)
}

/// A smooth gradient defined everywhere (so padding continues it).
fn smooth(x: u64, y: u64) -> [u8; 3] {
    [(40 + x * 3 / 2).min(255) as u8, (30 + y * 2).min(255) as u8, (200u64.saturating_sub((x + y) / 2)) as u8]
}

/// 8x8-aligned blocks of saturated colours (tile 0 of the RGB-coded test).
fn blocks(x: u64, y: u64) -> [u8; 3] {
    const C: [[u8; 3]; 6] = [[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [0, 255, 255], [255, 0, 255]];
    C[((x / 8 + y / 8 * 3) % 6) as usize]
}

#[test]
fn rgb_coded_jpeg_without_adobe_marker_is_not_ycbcr_converted() {
    // 128x64, two 64x64 tiles: saturated 8x8 blocks, then a smooth gradient. RGB-coded JPEG
    // (no colour transform), then made Aperio-like: no JFIF/Adobe marker, component ids 0,1,2.
    let (w, h, t) = (128usize, 64usize, 64usize);
    let f = |x: u64, y: u64| if x < 64 { blocks(x, y) } else { smooth(x, y) };
    let src = raster(w as u64, h as u64, |x, y| f(x, y).to_vec());
    let tiles_rgb = cut_tiles(&src, w, h, 3, t, t, &[0, 0, 0]);
    let streams: Vec<Vec<u8>> = tiles_rgb.iter().map(|p| jpeg::aperio_style(&jpeg::compress(p, t, t, 98, turbojpeg::Subsamp::None, true))).collect();
    for s in &streams {
        let (segs, _) = jpeg::segments(s);
        assert!(segs.iter().all(|&(m, _, _)| !(0xE0..=0xEF).contains(&m)), "APPn markers left");
    }
    // What a decoder that guesses from the (absent) markers makes of it: YCbCr.
    let ycc_guess = assemble(&streams.iter().map(|s| jpeg::decode(s).2).collect::<Vec<_>>(), w, h, t, t);
    let file = jpeg_tiff(streams, w as u32, h as u32, t as u32, 2, None);
    let slide = open(file.path());
    let got = slide.read_region((0, 0), 0, (w as u64, h as u64)).unwrap();
    let want = expected_region((w as u64, h as u64), 1.0, (0, 0), (w as u64, h as u64), &|x, y| rgba(f(x, y)));
    let (max, _) = diff_stats(&got.data, &want);
    assert!(max <= 4, "RGB-coded JPEG decodes {max} away from the source");
    // The blocks half: a YCbCr interpretation is far from the source, and far from ours.
    let half = |v: &[u8]| -> Vec<u8> { v.chunks(w * 4).flat_map(|r| r[..64 * 4].to_vec()).collect() };
    let (gmax, gmean) = diff_stats(&half(&ycc_guess), &half(&want));
    assert!(gmax >= 100 && gmean >= 30.0, "test is meaningless: YCbCr guess only {gmax}/{gmean:.1} off");
    let (omax, omean) = diff_stats(&half(&got.data), &half(&ycc_guess));
    assert!(omax >= 100 && omean >= 30.0, "decoded like YCbCr ({omax}/{omean:.1} from the YCbCr guess)");
}

#[test]
fn ycbcr_jpeg_with_chroma_subsampling() {
    // 100x80 image, 64x64 tiles (partial edge tiles), YCbCr JPEG, three subsamplings.
    let (w, h, t) = (100usize, 80usize, 64usize);
    let (gw, gh) = (128usize, 128usize); // the full tile grid: padding continues the gradient
    let grid = raster(gw as u64, gh as u64, |x, y| smooth(x, y).to_vec());
    let tiles_rgb = cut_tiles(&grid, gw, gh, 3, t, t, &[0, 0, 0]);
    for (ss, code) in [(turbojpeg::Subsamp::None, (1u16, 1u16)), (turbojpeg::Subsamp::Sub2x1, (2, 1)), (turbojpeg::Subsamp::Sub2x2, (2, 2))] {
        let streams: Vec<Vec<u8>> = tiles_rgb.iter().map(|p| jpeg::compress(p, t, t, 95, ss, false)).collect();
        let reference = assemble(&streams.iter().map(|s| jpeg::decode(s).2).collect::<Vec<_>>(), gw, gh, t, t);
        let mut ifd = Ifd::tiled(w as u32, h as u32, t as u32, t as u32, streams.into_iter().map(Chunk::Data).collect()).compression(7);
        ifd.photometric = 6;
        ifd = ifd.tag(tag::YCBCR_SUBSAMPLING, Value::Short(vec![code.0, code.1]));
        let file = TempPath::new("ycbcr.tif");
        Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
        let slide = open(file.path());
        let got = slide.read_region((0, 0), 0, (w as u64, h as u64)).unwrap();
        // Bit-exact with libjpeg-turbo's decode of the same streams (cropped to the image)...
        let want = expected_region((w as u64, h as u64), 1.0, (0, 0), (w as u64, h as u64), &|x, y| {
            let i = (y as usize * gw + x as usize) * 4;
            [reference[i], reference[i + 1], reference[i + 2], reference[i + 3]]
        });
        assert!(got.data == want, "{ss:?}: {}", first_diff(&got.data, &want, w as u64));
        // ...and close to the source.
        let src = expected_region((w as u64, h as u64), 1.0, (0, 0), (w as u64, h as u64), &|x, y| rgba(smooth(x, y)));
        let (max, _) = diff_stats(&got.data, &src);
        assert!(max <= 8, "{ss:?}: {max} away from the source");
    }
}

#[test]
fn ycbcr_jpeg_tiff_with_tables_matches_libjpeg_turbo_exactly() {
    // libtiff-style YCbCr JPEG TIFFs (JPEGTables + abbreviated tiles, YCbCrSubSampling): the
    // whole level 0 must equal libjpeg-turbo's decode of each tile's complete stream.
    for ss in [turbojpeg::Subsamp::None, turbojpeg::Subsamp::Sub2x1, turbojpeg::Subsamp::Sub2x2] {
        let (w, h) = (301u32, 203u32);
        let (file, want) = jpeg::ycbcr_jpeg_tiff(w, h, 128, ss, 7);
        let slide = Slide::open(file.path()).unwrap_or_else(|e| panic!("{ss:?}: {e}"));
        let got = slide.read_region((0, 0), 0, (w as u64, h as u64)).unwrap();
        let max = common::max_abs_diff(&got.data, &want);
        assert!(max == 0, "{ss:?}: max diff {max}, {}", first_diff(&got.data, &want, w as u64));
    }
}

#[test]
fn abbreviated_jpeg_with_jpeg_tables_matches_full_stream() {
    let (w, h, t) = (96usize, 64usize, 32usize);
    let src = raster(w as u64, h as u64, |x, y| {
        let b = if (x / 8 + y / 8) % 3 == 0 { blocks(x, y) } else { smooth(x, y) };
        b.to_vec()
    });
    let tiles_rgb = cut_tiles(&src, w, h, 3, t, t, &[0, 0, 0]);
    for (photometric, rgb_coded, ss) in [(6u16, false, turbojpeg::Subsamp::Sub2x2), (6, false, turbojpeg::Subsamp::None), (2, true, turbojpeg::Subsamp::None)] {
        let full: Vec<Vec<u8>> = tiles_rgb.iter().map(|p| jpeg::compress(p, t, t, 90, ss, rgb_coded)).collect();
        let reference = assemble(&full.iter().map(|s| jpeg::decode(s).2).collect::<Vec<_>>(), w, h, t, t);
        let mut tables = None;
        let mut abbreviated = Vec::new();
        for s in &full {
            let (tb, img) = jpeg::split_tables(s);
            // Same quality and subsampling: every tile uses the same tables.
            assert_eq!(tables.get_or_insert_with(|| tb.clone()), &tb);
            let img = if rgb_coded { jpeg::aperio_style(&img) } else { img };
            let (segs, _) = jpeg::segments(&img);
            assert!(segs.iter().all(|&(m, _, _)| m != 0xDB && m != 0xC4), "tables left in the tile");
            abbreviated.push(img);
        }
        let file = jpeg_tiff(abbreviated, w as u32, h as u32, t as u32, photometric, tables);
        let slide = open(file.path());
        let got = slide.read_region((0, 0), 0, (w as u64, h as u64)).unwrap();
        assert!(got.data == reference, "photometric {photometric} {ss:?}: {}", first_diff(&got.data, &reference, w as u64));
        let got = slide.read_region((20, 10), 0, (50, 40)).unwrap();
        let want = expected_region((w as u64, h as u64), 1.0, (20, 10), (50, 40), &|x, y| {
            let i = (y as usize * w + x as usize) * 4;
            [reference[i], reference[i + 1], reference[i + 2], reference[i + 3]]
        });
        assert!(got.data == want, "photometric {photometric} {ss:?} sub-region: {}", first_diff(&got.data, &want, 50));
    }
}

/// Image (width, height), tile edge and padded grid (width, height) of the partial-decoding tests:
/// 160×128 in 64² tiles, so the right column of tiles is an edge tile.
const PART_TILES: (usize, usize, usize, usize, usize) = (160, 128, 64, 192, 128);

/// (Photometric, RGB-coded, subsampling) of the partial-decoding tests: YCbCr 4:2:0, 4:2:2,
/// 4:4:4 and Aperio-style RGB.
const PART_CODINGS: [(u16, bool, turbojpeg::Subsamp); 4] =
    [(6, false, turbojpeg::Subsamp::Sub2x2), (6, false, turbojpeg::Subsamp::Sub2x1), (6, false, turbojpeg::Subsamp::None), (2, true, turbojpeg::Subsamp::None)];

/// The RGB tiles of the padded grid: blocks with sharp edges mixed with a smooth gradient
/// (`mul` varies the gradient between tests).
fn part_test_tiles(mul: u64) -> Vec<Vec<u8>> {
    let (_, _, t, gw, gh) = PART_TILES;
    let f = |x: u64, y: u64| if (x / 16 + y / 16) % 4 == 0 { blocks(x, y) } else { smooth(x * mul % 200, y) };
    let grid = raster(gw as u64, gh as u64, |x, y| f(x, y).to_vec());
    cut_tiles(&grid, gw, gh, 3, t, t, &[0, 0, 0])
}

#[test]
fn partial_jpeg_decoding_matches_whole_tile_decoding() {
    // Small regions of an uncached JPEG tile are decoded partially (iMCU columns, skipped rows).
    // Whatever part is decoded, the pixels must be those of the whole-tile decode: compare
    // random regions, with partial decoding forced (fraction 1) and the cache off, against
    // libjpeg-turbo's decode of each complete tile.
    let (w, h, t, gw, gh) = PART_TILES;
    let tiles_rgb = part_test_tiles(2);
    let mut failures = Vec::new();
    for (photometric, rgb_coded, ss) in PART_CODINGS {
        let streams: Vec<Vec<u8>> = tiles_rgb.iter().map(|p| jpeg::compress(p, t, t, 85, ss, rgb_coded)).collect();
        let reference = assemble(&streams.iter().map(|s| jpeg::decode(s).2).collect::<Vec<_>>(), gw, gh, t, t);
        let file = jpeg_tiff(streams, w as u32, h as u32, t as u32, photometric, None);
        let config = Config { partial_decode_max_fraction: 1.0, ..Config::default() };
        let slide =
            Slide::open_with(file.path(), SlideOptions { cache: Some(Arc::new(TileCache::new(0))), config: Some(config), ..Default::default() }).unwrap();
        let reff = |x: u64, y: u64| {
            let i = (y as usize * gw + x as usize) * 4;
            [reference[i], reference[i + 1], reference[i + 2], reference[i + 3]]
        };
        let mut rng = Rng::new(99);
        #[allow(clippy::type_complexity)]
        let mut regions: Vec<((i64, i64), (u64, u64))> =
            vec![((0, 0), (160, 128)), ((5, 7), (1, 1)), ((17, 33), (15, 2)), ((63, 63), (2, 2)), ((130, 100), (30, 28))];
        for _ in 0..300 {
            regions.push(((rng.range(-8, 160), rng.range(-8, 128)), (rng.range(1, 48) as u64, rng.range(1, 48) as u64)));
        }
        for (loc, size) in regions {
            let got = slide.read_region(loc, 0, size).unwrap();
            let want = expected_region((w as u64, h as u64), 1.0, loc, size, &reff);
            if got.data != want {
                let d = common::max_abs_diff(&got.data, &want);
                failures.push(format!("{ss:?} photometric {photometric}: region {loc:?} {size:?}: max diff {d}, {}", first_diff(&got.data, &want, size.0)));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} partially decoded regions differ from the whole-tile decode, e.g.\n{}",
        failures.len(),
        failures.iter().take(6).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn decoding_into_a_caller_buffer_places_the_same_pixels_as_decode_chunk() {
    // `decode_jpeg_into` (the GPU engine's CPU workers decode this way, straight into pinned
    // memory): for whole tiles, edge tiles and random parts, the pixels it reports (offset,
    // pitch, x, y, width, height) must equal `decode_chunk`'s whole-tile decode.
    use slidestream::codec::{decode_chunk, decode_jpeg_into, ChunkGeometry, PartRect};
    use slidestream::error::Location;
    let (w, h, t, _, _) = PART_TILES;
    let tiles_rgb = part_test_tiles(3);
    let at = Location::default();
    let mut checked = 0;
    for (photometric, rgb_coded, ss) in PART_CODINGS {
        let streams: Vec<Vec<u8>> = tiles_rgb.iter().map(|p| jpeg::compress(p, t, t, 85, ss, rgb_coded)).collect();
        let file = jpeg_tiff(streams.clone(), w as u32, h as u32, t as u32, photometric, None);
        let slide = open(file.path());
        let img = &slide.index().levels[0].image;
        let mut rng = Rng::new(7);
        for (i, stream) in streams.iter().enumerate() {
            let (col, row) = ((i % img.tiles_across() as usize) as u64, (i / img.tiles_across() as usize) as u64);
            let (vw, vh) = img.valid_tile_size(col, row);
            let g = ChunkGeometry { tile_width: t as u32, tile_height: t as u32, valid_width: vw, valid_height: vh };
            let whole = decode_chunk(&img.codec, &[stream], g, &at).unwrap();
            let mut wants = vec![None];
            for _ in 0..40 {
                let (x, y) = (rng.range(0, vw as i64 - 1) as u32, rng.range(0, vh as i64 - 1) as u32);
                let (pw, ph) = (rng.range(1, (vw - x) as i64) as u32, rng.range(1, (vh - y) as i64) as u32);
                wants.push(Some(PartRect { x, y, w: pw, h: ph }));
            }
            for want in wants {
                let mut dst = vec![0xA5u8; t * t * 4];
                let p = decode_jpeg_into(&img.codec, stream, g, want, &at, &mut dst).unwrap();
                let expect = want.map_or((0, 0, vw, vh), |r| (r.x, r.y, r.w, r.h));
                assert_eq!((p.x, p.y, p.width, p.height), expect, "{ss:?}: placed part");
                assert!(p.pitch >= p.width && p.used <= dst.len() && p.offset + ((p.height - 1) as usize * p.pitch as usize + p.width as usize) * 4 <= p.used);
                for y in 0..p.height as usize {
                    let got = &dst[p.offset + y * p.pitch as usize * 4..][..p.width as usize * 4];
                    let row = (p.y as usize + y) * vw as usize + p.x as usize;
                    let exp = &whole.rgba[row * 4..(row + p.width as usize) * 4];
                    assert!(got == exp, "{ss:?} photometric {photometric}: tile ({col}, {row}) part {want:?}, row {y} differs");
                }
                checked += 1;
            }
        }
        // Too small a buffer is a typed error, not a write past its end.
        let g = ChunkGeometry { tile_width: t as u32, tile_height: t as u32, valid_width: t as u32, valid_height: t as u32 };
        let mut small = vec![0u8; t * t * 4 - 1];
        assert!(matches!(decode_jpeg_into(&img.codec, &streams[0], g, None, &at, &mut small), Err(Error::Limits { .. })));
        // Empty parts and parts outside the valid region are usage errors (TurboJPEG would read
        // a zero-sized crop as "to the edge" and write past the buffer).
        let big = vec![0u8; t * t * 4];
        for bad in [
            PartRect { x: 0, y: 8, w: 16, h: 0 },
            PartRect { x: 0, y: 0, w: 0, h: 0 },
            PartRect { x: 60, y: 0, w: 8, h: 8 },
            PartRect { x: 0, y: 0, w: u32::MAX, h: 4 },
        ] {
            assert!(matches!(decode_jpeg_into(&img.codec, &streams[0], g, Some(bad), &at, &mut big.clone()), Err(Error::Usage(_))), "{bad:?}");
            assert!(matches!(slidestream::codec::decode_chunk_part(&img.codec, &[&streams[0]], g, bad, &at), Err(Error::Usage(_))), "{bad:?}");
        }
        // A crop TurboJPEG would widen to the image edge is refused by the JPEG layer too.
        let mut spliced = Vec::new();
        slidestream::codec::jpeg::splice(
            img.codec.jpeg_tables(),
            &streams[0],
            if rgb_coded { slidestream::codec::jpeg::JpegColor::Rgb } else { slidestream::codec::jpeg::JpegColor::YCbCr },
            &mut spliced,
        )
        .unwrap();
        let mut tiny = vec![0u8; 16];
        let zero = slidestream::codec::jpeg::Crop { x: 0, y: 8, width: 16, height: 0 };
        assert!(slidestream::codec::jpeg::decode_rgba_into(&spliced, &mut tiny, |_| Ok(Some(zero))).is_err());
        assert!(slidestream::codec::jpeg::decode_rgba(&spliced, Some(zero), &mut Vec::new(), |_| Ok(())).is_err());
        // A corrupt stream is a format error.
        assert!(matches!(decode_jpeg_into(&img.codec, &streams[0][..40], g, None, &at, &mut vec![0u8; t * t * 4]), Err(Error::Format { .. })));
    }
    assert!(checked > 500);
}

#[test]
fn region_pixels_do_not_depend_on_cache_state() {
    // Default settings: a small region of an uncached tile is decoded partially; once the whole
    // tile is cached the same region comes from the cache. Both reads must agree.
    let (w, h, t) = (128usize, 128usize, 64usize);
    let f = |x: u64, y: u64| if (x / 16 + y / 16) % 4 == 0 { blocks(x, y) } else { smooth(x * 2 % 200, y) };
    let img = raster(w as u64, h as u64, |x, y| f(x, y).to_vec());
    let streams: Vec<Vec<u8>> =
        cut_tiles(&img, w, h, 3, t, t, &[0, 0, 0]).iter().map(|p| jpeg::compress(p, t, t, 85, turbojpeg::Subsamp::Sub2x2, false)).collect();
    let file = jpeg_tiff(streams, w as u32, h as u32, t as u32, 6, None);
    let slide = open(file.path());
    let regions = [((17i64, 33i64), (15u64, 2u64)), ((32, 33), (9, 25)), ((90, 70), (20, 20)), ((1, 1), (8, 8))];
    let first: Vec<Vec<u8>> = regions.iter().map(|&(loc, size)| slide.read_region(loc, 0, size).unwrap().data).collect();
    slide.read_region((0, 0), 0, (w as u64, h as u64)).unwrap(); // caches every tile whole
    let mut differ = Vec::new();
    for (&(loc, size), before) in regions.iter().zip(&first) {
        let after = slide.read_region(loc, 0, size).unwrap().data;
        if after != *before {
            differ.push(format!("{loc:?} {size:?}: max diff {}, {}", common::max_abs_diff(&after, before), first_diff(before, &after, size.0)));
        }
    }
    assert!(differ.is_empty(), "the same region read before and after its tiles were cached differs:\n{}", differ.join("\n"));
}

#[test]
fn greyscale_jpeg_with_tables() {
    let (w, h, t) = (80usize, 48usize, 32usize);
    let grey: Vec<u8> = (0..w * h).map(|i| smooth((i % w) as u64, (i / w) as u64)[0]).collect();
    let tiles = cut_tiles(&grey, w, h, 1, t, t, &[255]);
    let mut tables = None;
    let mut chunks = Vec::new();
    let mut decoded = Vec::new();
    for tile in &tiles {
        let img = turbojpeg::Image { pixels: &tile[..], width: t, pitch: t, height: t, format: turbojpeg::PixelFormat::GRAY };
        let full = turbojpeg::compress(img, 92, turbojpeg::Subsamp::Gray).unwrap().to_vec();
        decoded.push(jpeg::decode(&full).2);
        let (tb, abbreviated) = jpeg::split_tables(&full);
        assert_eq!(tables.get_or_insert_with(|| tb.clone()), &tb);
        chunks.push(Chunk::Data(abbreviated));
    }
    let mut ifd = Ifd::tiled(w as u32, h as u32, t as u32, t as u32, chunks).compression(7).color(1, 1);
    ifd.jpeg_tables = tables;
    let file = TempPath::new("grey-jpeg.tif");
    Tiff::new(Variant::ClassicBigEndian, vec![ifd]).write(file.path());
    let slide = open(file.path());
    let got = slide.read_region((0, 0), 0, (w as u64, h as u64)).unwrap();
    let want = assemble(&decoded, w, h, t, t);
    assert!(got.data == want, "{}", first_diff(&got.data, &want, w as u64));
    assert!(got.data.chunks_exact(4).all(|p| p[0] == p[1] && p[1] == p[2] && p[3] == 255));
    let src: Vec<u8> = grey.iter().flat_map(|&v| [v, v, v, 255]).collect();
    assert!(diff_stats(&got.data, &src).0 <= 6);
}

// ---------------------------------------------------------------------------------------------
// Lossless codecs
// ---------------------------------------------------------------------------------------------

/// Sample values of a `spp`-sample image: varied, with every byte value appearing.
fn sample(x: u64, y: u64, s: u64) -> u8 {
    ((x * 7 + y * 13 + s * 61 + (x * y) % 11) % 256) as u8
}

#[test]
fn lossless_codecs_predictor_planar_and_alpha_are_bit_exact() {
    let (w, h, t) = (70usize, 45usize, 32usize);
    // (samples per pixel, photometric, extra samples)
    let colors: [(u16, u16, Option<u16>); 4] = [(1, 1, None), (2, 1, Some(2)), (3, 2, None), (4, 2, Some(2))];
    let mut checked = 0;
    for compression in [1u16, 5, 8, 32946, 50000] {
        for predictor in [1u16, 2] {
            for planar in [1u16, 2] {
                for &(spp, photometric, extra) in &colors {
                    let n = spp as usize;
                    let img: Vec<u8> = raster(w as u64, h as u64, |x, y| (0..spp as u64).map(|s| sample(x, y, s)).collect());
                    let pad = vec![0xA5u8; n];
                    let tiles = cut_tiles(&img, w, h, n, t, t, &pad);
                    let mut chunks = Vec::new();
                    if planar == 2 {
                        // All tiles of plane 0, then plane 1, ...
                        let planes: Vec<Vec<Vec<u8>>> = tiles.iter().map(|tile| to_planes(tile, n)).collect();
                        for p in 0..n {
                            for tp in &planes {
                                let mut raw = tp[p].clone();
                                if predictor == 2 {
                                    predict_horizontal(&mut raw, t, 1);
                                }
                                chunks.push(Chunk::Data(encode(compression, &raw)));
                            }
                        }
                    } else {
                        for tile in &tiles {
                            let mut raw = tile.clone();
                            if predictor == 2 {
                                predict_horizontal(&mut raw, t * n, n);
                            }
                            chunks.push(Chunk::Data(encode(compression, &raw)));
                        }
                    }
                    let mut ifd = Ifd::tiled(w as u32, h as u32, t as u32, t as u32, chunks).compression(compression).color(spp, photometric);
                    ifd.planar = planar;
                    ifd.predictor = Some(predictor);
                    ifd.extra_samples = extra.map(|e| vec![e]);
                    let file = TempPath::new("lossless.tif");
                    Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
                    let what = format!("compression {compression} predictor {predictor} planar {planar} spp {spp}");
                    let slide = Slide::open(file.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let f = |x: u64, y: u64| -> [u8; 4] {
                        let s = |i| sample(x, y, i);
                        match spp {
                            1 => [s(0), s(0), s(0), 255],
                            2 => [s(0), s(0), s(0), s(1)],
                            3 => [s(0), s(1), s(2), 255],
                            _ => [s(0), s(1), s(2), s(3)],
                        }
                    };
                    for (loc, size) in [((0, 0), (70, 45)), ((30, 20), (40, 25)), ((-5, 40), (20, 20))] {
                        let got = slide.read_region(loc, 0, size).unwrap_or_else(|e| panic!("{what}: {e}"));
                        let want = expected_region((w as u64, h as u64), 1.0, loc, size, &f);
                        assert!(got.data == want, "{what} {loc:?}: {}", first_diff(&got.data, &want, size.0));
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 80);
}

#[test]
fn associated_and_unspecified_extra_samples() {
    // One 4x1 RGBA tile (tile 16x16): associated alpha is un-premultiplied; ExtraSamples 0
    // (unspecified) of RGB + 1 is associated alpha too (libtiff's rule, so OpenSlide's).
    let px4: [[u8; 4]; 4] = [[10, 20, 30, 255], [64, 32, 0, 128], [99, 99, 99, 0], [50, 100, 200, 200]];
    let mut tile = vec![0u8; 16 * 16 * 4];
    for (i, p) in px4.iter().enumerate() {
        tile[i * 4..i * 4 + 4].copy_from_slice(p);
    }
    let cases: [(u16, [[u8; 4]; 4]); 2] = [
        // OpenSlide 4.0.1 + openslide-python 1.4.7 (checked on this tile, deflate-coded):
        // 255 * c / a truncated (64*255/128 = 127.5 -> 127, 50*255/200 = 63.75 -> 63), and a
        // pixel of alpha 0 keeps its stored colour.
        (1, [[10, 20, 30, 255], [127, 63, 0, 128], [99, 99, 99, 0], [63, 127, 255, 200]]),
        (0, [[10, 20, 30, 255], [127, 63, 0, 128], [99, 99, 99, 0], [63, 127, 255, 200]]),
    ];
    for (extra, want) in cases {
        let mut ifd = Ifd::tiled(4, 1, 16, 16, vec![Chunk::Data(tile.clone())]).color(4, 2);
        ifd.extra_samples = Some(vec![extra]);
        let file = TempPath::new("alpha.tif");
        Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
        let got = open(file.path()).read_region((0, 0), 0, (4, 1)).unwrap();
        assert_eq!(got.data, want.concat(), "ExtraSamples {extra}");
    }
    // Grey + one sample: unspecified (0) or no ExtraSamples tag is not alpha (OpenSlide 4.0.1:
    // (10, 10, 10, 255), (64, 64, 64, 255), ...).
    let mut tile = vec![0u8; 16 * 16 * 2];
    tile[..8].copy_from_slice(&[10, 255, 64, 128, 99, 0, 50, 200]);
    for extra in [Some(0u16), None] {
        let mut ifd = Ifd::tiled(4, 1, 16, 16, vec![Chunk::Data(tile.clone())]).color(2, 1);
        ifd.extra_samples = extra.map(|e| vec![e]);
        let file = TempPath::new("grey-extra.tif");
        Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
        let got = open(file.path()).read_region((0, 0), 0, (4, 1)).unwrap();
        assert_eq!(got.data, [10, 10, 10, 255, 64, 64, 64, 255, 99, 99, 99, 255, 50, 50, 50, 255], "grey, ExtraSamples {extra:?}");
    }
}

#[test]
fn webp_lossless_tiles_are_bit_exact() {
    let (w, h, t) = (80usize, 40usize, 32usize);
    let img: Vec<u8> = raster(w as u64, h as u64, |x, y| (0..4).map(|s| sample(x, y, s)).collect());
    let tiles = cut_tiles(&img, w, h, 4, t, t, &[255, 0, 255, 255]);
    let chunks = tiles
        .iter()
        .map(|tile| {
            let mut out = Vec::new();
            image_webp::WebPEncoder::new(&mut out).encode(tile, t as u32, t as u32, image_webp::ColorType::Rgba8).unwrap();
            Chunk::Data(out)
        })
        .collect();
    let mut ifd = Ifd::tiled(w as u32, h as u32, t as u32, t as u32, chunks).compression(50001).color(4, 2);
    ifd.extra_samples = Some(vec![2]);
    let file = TempPath::new("webp.tif");
    Tiff::new(Variant::BigTiff, vec![ifd]).write(file.path());
    let slide = open(file.path());
    let got = slide.read_region((-3, -3), 0, (90, 50)).unwrap();
    let want = expected_region((w as u64, h as u64), 1.0, (-3, -3), (90, 50), &|x, y| [sample(x, y, 0), sample(x, y, 1), sample(x, y, 2), sample(x, y, 3)]);
    assert!(got.data == want, "{}", first_diff(&got.data, &want, 90));
}

// ---------------------------------------------------------------------------------------------
// Strips (through an Aperio-style file: its thumbnail and label are stripped)
// ---------------------------------------------------------------------------------------------

#[test]
fn aperio_style_file_with_stripped_associated_images() {
    let level_img = raster(100, 60, |x, y| px(0, x, y).to_vec());
    let tiles = cut_tiles(&level_img, 100, 60, 3, 64, 64, &MAGENTA);
    let mut l0 = Ifd::tiled(100, 60, 64, 64, tiles.into_iter().map(Chunk::Data).collect());
    l0.description = Some("Aperio Image Library vTEST\r\n100x60 (64x64) RAW|AppMag = 20|MPP = 0.4990".into());
    // Thumbnail: 25x15, 4 rows per strip (last strip 3 rows), uncompressed.
    let thumb = raster(25, 15, |x, y| px(1, x, y).to_vec());
    let strips: Vec<Chunk> = thumb.chunks(25 * 3 * 4).map(|s| Chunk::Data(s.to_vec())).collect();
    assert_eq!(strips.len(), 4);
    let mut t = Ifd::stripped(25, 15, 4, strips);
    t.description = Some("Aperio Image Library vTEST\n100x60 -> 25x15".into());
    // Label: 30x20 grey, LZW + predictor, 7 rows per strip.
    let label: Vec<u8> = (0..30 * 20).map(|i| sample(i % 30, i / 30, 0)).collect();
    let lstrips: Vec<Chunk> = label
        .chunks(30 * 7)
        .map(|s| {
            let mut raw = s.to_vec();
            predict_horizontal(&mut raw, 30, 1);
            Chunk::Data(encode(5, &raw))
        })
        .collect();
    let mut lab = Ifd::stripped(30, 20, 7, lstrips).compression(5).color(1, 1);
    lab.predictor = Some(2);
    lab.description = Some("Aperio Image Library vTEST\nlabel 30x20".into());
    lab = lab.tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1])); // label (macro would be 9)
    let file = TempPath::new("aperio.svs");
    Tiff::new(Variant::Classic, vec![l0, t, lab]).write(file.path());
    let slide = open(file.path());
    assert_eq!(slide.vendor(), "aperio");
    assert_eq!(slide.mpp(), Some((0.499, 0.499)));
    assert_eq!(slide.properties().get("openslide.objective-power").map(String::as_str), Some("20"));
    let assoc = slide.associated_images();
    assert_eq!(assoc.get("thumbnail"), Some(&(25, 15)));
    assert_eq!(assoc.get("label"), Some(&(30, 20)));
    let got = slide.read_associated("thumbnail").unwrap();
    let want = expected_region((25, 15), 1.0, (0, 0), (25, 15), &|x, y| rgba(px(1, x, y)));
    assert!(got.data == want, "thumbnail: {}", first_diff(&got.data, &want, 25));
    let got = slide.read_associated("label").unwrap();
    let want = expected_region((30, 20), 1.0, (0, 0), (30, 20), &|x, y| {
        let v = sample(x, y, 0);
        [v, v, v, 255]
    });
    assert!(got.data == want, "label: {}", first_diff(&got.data, &want, 30));
    let got = slide.read_region((0, 0), 0, (100, 60)).unwrap();
    let want = expected_region((100, 60), 1.0, (0, 0), (100, 60), &|x, y| rgba(px(0, x, y)));
    assert!(got.data == want, "level 0: {}", first_diff(&got.data, &want, 100));
    match slide.read_associated("macro") {
        Err(Error::Usage(m)) => assert!(m.contains("macro"), "{m}"),
        other => panic!("expected Usage, got {other:?}"),
    }
}

#[test]
fn generic_tiff_levels_are_ifd0_and_reduced_images() {
    // IFD 2 is tiled but not flagged as a reduced image (NewSubfileType 0): not a level.
    let mk = |l: usize, w: u64, h: u64, flag: Option<u32>| {
        let img = raster(w, h, |x, y| px(l, x, y).to_vec());
        let tiles = cut_tiles(&img, w as usize, h as usize, 3, 32, 32, &MAGENTA);
        let ifd = Ifd::tiled(w as u32, h as u32, 32, 32, tiles.into_iter().map(Chunk::Data).collect());
        match flag {
            Some(f) => ifd.tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![f])),
            None => ifd,
        }
    };
    let file = TempPath::new("levels.tif");
    Tiff::new(Variant::Classic, vec![mk(0, 200, 150, None), mk(1, 100, 75, Some(1)), mk(9, 50, 50, Some(0)), mk(2, 37, 28, Some(1))]).write(file.path());
    let slide = open(file.path());
    assert_eq!(slide.level_dimensions(), vec![(200, 150), (100, 75), (37, 28)]);
    for (level, l) in PYRAMID.iter().enumerate() {
        check_pyramid_region(&slide, level, (0, 0), l.dims);
    }
    // A "reduced" image as large as level 0: downsamples must increase.
    let file = TempPath::new("levels-flat.tif");
    Tiff::new(Variant::Classic, vec![mk(0, 100, 75, None), mk(1, 100, 75, Some(1))]).write(file.path());
    match Slide::open(file.path()) {
        Err(e @ Error::Format { .. }) => assert!(e.to_string().contains("downsample"), "{e}"),
        other => panic!("expected Format, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Unsupported features
// ---------------------------------------------------------------------------------------------

#[test]
fn unsupported_features_are_named() {
    let tile = || vec![Chunk::Data(vec![0u8; 16 * 16 * 6])];
    let base = || Ifd::tiled(16, 16, 16, 16, tile());
    // 16-bit samples are read since OME-TIFF/16-bit support (core/tests/channels.rs); 12 is not.
    let mut bps12 = base();
    bps12.bits_per_sample = 12;
    let cases: Vec<(&str, Ifd)> = vec![
        ("BitsPerSample 12", bps12),
        ("SampleFormat 3", base().tag(tag::SAMPLE_FORMAT, Value::Short(vec![3, 3, 3]))),
        ("SampleFormat 5", base().tag(tag::SAMPLE_FORMAT, Value::Short(vec![5, 5, 5]))),
        // CMYK (InkSet 1, four samples) is read; other separated images are not. 332 = InkSet.
        ("Photometric 5 (separated) with InkSet 2", base().color(4, 5).tag(332, Value::Short(vec![2]))),
        ("Photometric 5 (separated, CMYK) with SamplesPerPixel 3", base().color(3, 5)),
        // ImageDepth (32997) > 1 is read only as one slice of tiles (TileDepth 32998 equal).
        ("ImageDepth 3 with TileDepth 1", base().tag(32997, Value::Long(vec![3]))),
        ("ImageDepth 3 with TileDepth 2", base().tag(32997, Value::Long(vec![3])).tag(32998, Value::Long(vec![2]))),
        ("Compression 6", base().compression(6)),
    ];
    for (feature, ifd) in cases {
        let file = TempPath::new("unsupported.tif");
        Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
        match Slide::open(file.path()) {
            Err(e @ Error::Unsupported { .. }) => {
                assert!(e.to_string().contains(feature), "{feature}: message {e}");
                assert!(e.to_string().contains("level 0"), "{feature}: message {e}");
            }
            Err(e) => panic!("{feature}: expected Unsupported, got {} ({e})", e.kind_name()),
            Ok(_) => panic!("{feature}: opened"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Read plan, I/O accounting and the cache
// ---------------------------------------------------------------------------------------------

#[test]
fn read_plan_reads_each_tile_once_in_one_request_per_row() {
    // 1536x1536 grey, uncompressed 256x256 tiles (64 KiB each), 6x6, written row-major back to
    // back: the tiles of one row of a region are contiguous; rows are separated by the tiles
    // outside the region (>= 64 KiB, more than the 8 KiB coalescing gap).
    let (n, t) = (1536u64, 256usize);
    let img: Vec<u8> = (0..n * n).map(|i| sample(i % n, i / n, 0)).collect();
    let tiles = cut_tiles(&img, n as usize, n as usize, 1, t, t, &[0]);
    let tile_bytes = (t * t) as u64;
    let ifd = Ifd::tiled(n as u32, n as u32, t as u32, t as u32, tiles.into_iter().map(Chunk::Data).collect()).color(1, 1);
    let file = TempPath::new("plan.tif");
    Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
    let f = |x: u64, y: u64| {
        let v = sample(x, y, 0);
        [v, v, v, 255]
    };
    for (loc, tiles_needed, rows) in [((256i64, 256i64), 16u64, 4u64), ((300, 300), 25, 5)] {
        let slide = open_private(file.path(), 64 << 20);
        let c0 = slide.cache_stats();
        let got = slide.read_region(loc, 0, (1024, 1024)).unwrap();
        let want = expected_region((n, n), 1.0, loc, (1024, 1024), &f);
        assert!(got.data == want, "{loc:?}: {}", first_diff(&got.data, &want, 1024));
        let io = slide.io_counters();
        assert_eq!(io.bytes, tiles_needed * tile_bytes, "{loc:?}: bytes read");
        assert!(io.requests <= rows, "{loc:?}: {} requests for {rows} tile rows", io.requests);
        let c1 = slide.cache_stats();
        assert_eq!(c1.insertions - c0.insertions, tiles_needed, "{loc:?}: every needed tile decoded once");
        // Again: all from the cache.
        let again = slide.read_region(loc, 0, (1024, 1024)).unwrap();
        assert!(again.data == want);
        assert_eq!(slide.io_counters(), io, "{loc:?}: second read touched the file");
        let c2 = slide.cache_stats();
        assert_eq!(c2.hits - c1.hits, tiles_needed, "{loc:?}: cache hits");
        assert_eq!(c2.insertions, c1.insertions);
    }
}

#[test]
fn cache_entries_belong_to_one_open_slide() {
    let file = pyramid(Variant::Classic, 8);
    let cache = Arc::new(TileCache::new(64 << 20));
    let opts = || SlideOptions { cache: Some(cache.clone()), config: Some(Config::default()), ..Default::default() };
    let a = Slide::open_with(file.path(), opts()).unwrap();
    let b = Slide::open_with(file.path(), opts()).unwrap();
    a.read_region((0, 0), 0, (200, 150)).unwrap(); // 12 tiles
    assert_eq!(cache.stats().entries, 12);
    // Another open of the same file does not see a's tiles: it reads them itself.
    b.read_region((0, 0), 0, (64, 64)).unwrap();
    assert!(b.io_counters().bytes > 0);
    assert_eq!(cache.stats().entries, 13);
    drop(a);
    assert_eq!(cache.stats().entries, 1, "closing a slide purges its tiles");
    // read_tiles outside the grid is the caller's mistake; inside, it decodes.
    assert!(matches!(b.read_tiles(0, &[(4, 0)]), Err(Error::Usage(_))));
    assert_eq!(b.read_tiles(0, &[(3, 2), (3, 2), (0, 0)]).unwrap(), 3);
}

#[test]
fn tiles_sharing_bytes_are_read_once() {
    // Every tile of a 4x4 grid points at the same 32x32 tile (as sparse writers do for blank
    // tiles): one request, one tile's bytes, every tile decoded right.
    let tile: Vec<u8> = raster(32, 32, |x, y| px(0, x, y).to_vec());
    let n = tile.len() as u64;
    let mut chunks = vec![Chunk::Data(tile)];
    // Classic TIFF: the chunk data starts right after the 8-byte header.
    chunks.extend((1..16).map(|_| Chunk::Raw { offset: 8, byte_count: n }));
    let file = TempPath::new("shared.tif");
    Tiff::new(Variant::Classic, vec![Ifd::tiled(128, 128, 32, 32, chunks)]).write(file.path());
    let slide = open(file.path());
    let got = slide.read_region((0, 0), 0, (128, 128)).unwrap();
    let want = expected_region((128, 128), 1.0, (0, 0), (128, 128), &|x, y| rgba(px(0, x % 32, y % 32)));
    assert!(got.data == want, "{}", first_diff(&got.data, &want, 128));
    assert_eq!(slide.io_counters().bytes, n);
    assert_eq!(slide.io_counters().requests, 1);
}

#[test]
fn read_region_into_matches_read_region() {
    let file = pyramid(Variant::Classic, 8);
    let slide = open(file.path());
    for (level, loc, size) in [(0usize, (10i64, 20i64), (100u64, 90u64)), (1, (-20, 30), (70, 50)), (2, (150, 100), (30, 30))] {
        let a = slide.read_region(loc, level, size).unwrap();
        let mut buf = vec![0xEEu8; (size.0 * size.1 * 4) as usize];
        slide.read_region_into(loc, level, size, &mut buf).unwrap();
        assert_eq!(buf, a.data, "level {level} {loc:?}");
        check_pyramid_region(&slide, level, loc, size);
    }
    for len in [0usize, 10 * 10 * 4 - 1, 10 * 10 * 4 + 4] {
        let mut buf = vec![0u8; len];
        match slide.read_region_into((0, 0), 0, (10, 10), &mut buf) {
            Err(Error::Usage(m)) => assert!(m.contains(&len.to_string()), "{m}"),
            other => panic!("buffer of {len}: expected Usage, got {other:?}"),
        }
    }
}

#[test]
fn region_size_limit() {
    let file = pyramid(Variant::Classic, 1);
    let config = Config { max_region_bytes: 100 * 100 * 4, ..Config::default() };
    let slide = Slide::open_with(file.path(), SlideOptions { cache: None, config: Some(config), ..Default::default() }).unwrap();
    assert!(slide.read_region((0, 0), 0, (100, 100)).is_ok());
    match slide.read_region((0, 0), 0, (101, 100)) {
        Err(e @ Error::Limits { .. }) => assert!(e.to_string().contains("max_region_bytes"), "{e}"),
        other => panic!("expected Limits, got {other:?}"),
    }
    assert!(matches!(slide.read_region((0, 0), 0, (u64::MAX, u64::MAX)), Err(Error::Limits { .. })));
}

#[test]
fn concurrent_reads_match_single_threaded() {
    let file = pyramid(Variant::BigTiff, 8);
    // A small cache (about 20 tiles of 64x64) so threads also race on eviction and re-decoding.
    let slide = open_private(file.path(), 20 * 64 * 64 * 4);
    let mut rng = Rng::new(42);
    let reads: Vec<Read> = (0..8 * 200)
        .map(|_| {
            let level = rng.range(0, 3) as usize;
            (level, (rng.range(-100, 250), rng.range(-100, 200)), (rng.range(1, 90) as u64, rng.range(1, 90) as u64))
        })
        .collect();
    let single: Vec<Vec<u8>> = reads.iter().map(|&(l, loc, size)| slide.read_region(loc, l, size).unwrap().data).collect();
    // Single-threaded results are themselves right.
    for (&(l, loc, size), data) in reads.iter().zip(&single).step_by(37) {
        let ds = downsample(PYRAMID[0].dims, PYRAMID[l].dims);
        assert!(*data == expected_region(PYRAMID[l].dims, ds, loc, size, &|x, y| rgba(px(l, x, y))));
    }
    slide.cache().clear();
    std::thread::scope(|s| {
        for th in 0..8 {
            let (slide, reads, single) = (&slide, &reads, &single);
            s.spawn(move || {
                // Each thread walks all reads from its own starting point.
                for k in 0..200 {
                    let i = (th * 200 + k * 7) % reads.len();
                    let (l, loc, size) = reads[i];
                    let got = slide.read_region(loc, l, size).unwrap();
                    assert!(got.data == single[i], "thread {th} read {i}: differs from single-threaded");
                }
            });
        }
    });
    let st = slide.cache_stats();
    assert!(st.resident_bytes <= st.capacity_bytes);
}
