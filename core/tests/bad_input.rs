//! Damaged, hostile and unsupported input: every failure is a typed [`Error`] naming the file
//! (and the level and tile where one is concerned), never a panic, never garbage pixels; the
//! slide stays usable after a failed read. Also the CLI's error reporting.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::testdata;
use common::tiffwriter::{cut_tiles, tag, Chunk, Ifd, Rng, TempPath, Tiff, Value, Variant};
use slidestream::{Error, Slide};

fn kind(e: &Error) -> &'static str {
    e.kind_name()
}

/// Open, turning a panic into a test failure with a clear message.
fn open_no_panic(path: &Path) -> slidestream::Result<Slide> {
    let p = path.to_path_buf();
    std::panic::catch_unwind(move || Slide::open(&p)).unwrap_or_else(|_| panic!("{}: Slide::open panicked", path.display()))
}

fn expect_err<T: std::fmt::Debug>(r: slidestream::Result<T>, what: &str) -> Error {
    match r {
        Ok(v) => panic!("{what}: expected an error, got Ok({v:?})"),
        Err(e) => e,
    }
}

/// RGB test pixels.
fn px(x: u64, y: u64) -> [u8; 3] {
    [(x * 5 % 256) as u8, (y * 3 % 256) as u8, ((x + y) % 200) as u8]
}

fn raster(w: u64, h: u64) -> Vec<u8> {
    let mut v = Vec::new();
    for y in 0..h {
        for x in 0..w {
            v.extend_from_slice(&px(x, y));
        }
    }
    v
}

/// A 64x32 level 0 of two 32x32 tiles with `compression`: tile (1, 0) = `bad`; tile (0, 0)
/// holds valid data for uncompressed (RGB) and JPEG (YCbCr) files only, so other codecs' tests
/// read tile (1, 0) alone.
fn two_tiles(variant: Variant, compression: u16, bad: Chunk) -> TempPath {
    let tiles = cut_tiles(&raster(64, 32), 64, 32, 3, 32, 32, &[0, 0, 0]);
    let good = match compression {
        7 => jpeg(&tiles[0], 32, 32),
        _ => tiles[0].clone(),
    };
    let chunks = vec![Chunk::Data(good), bad];
    let mut ifd = Ifd::tiled(64, 32, 32, 32, chunks).compression(compression);
    if compression == 7 {
        ifd.photometric = 6;
    }
    if compression == 50001 {
        ifd = ifd.color(4, 2);
    }
    // A valid, tiny, uncompressed level 1: the lowest level is read at open (for
    // openslide.quickhash-1), so the bad tile must not be there.
    let l1 = Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(raster(16, 16))]).tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1]));
    let f = TempPath::new("bad.tif");
    Tiff::new(variant, vec![ifd, l1]).write(f.path());
    f
}

fn jpeg(rgb: &[u8], w: usize, h: usize) -> Vec<u8> {
    let img = turbojpeg::Image { pixels: rgb, width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
    turbojpeg::compress(img, 90, turbojpeg::Subsamp::Sub2x2).unwrap().to_vec()
}

/// The error of reading `region` must be `want_kind`, naming level 0 and `tile`; afterwards the
/// slide still reads a region with no tiles and re-reading fails again.
fn assert_tile_error(slide: &Slide, loc: (i64, i64), size: (u64, u64), tile: (u64, u64), want_kinds: &[&str], what: &str) -> Error {
    let e = expect_err(slide.read_region(loc, 0, size), what);
    assert!(want_kinds.contains(&kind(&e)), "{what}: {} error ({e})", kind(&e));
    let msg = e.to_string();
    assert!(msg.contains("level 0"), "{what}: message does not name the level: {msg}");
    assert!(msg.contains(&format!("tile ({}, {})", tile.0, tile.1)), "{what}: message does not name the tile: {msg}");
    assert!(msg.contains(&slide.index().path().display().to_string()), "{what}: message does not name the file: {msg}");
    let r = slide.read_region((-50, -50), 0, (10, 10)).unwrap_or_else(|e| panic!("{what}: slide unusable after error: {e}"));
    assert_eq!(r.data, vec![0u8; 400]);
    let again = expect_err(slide.read_region(loc, 0, size), &format!("{what} (second read)"));
    assert_eq!(kind(&again), kind(&e), "{what}: second read");
    e
}

// ---------------------------------------------------------------------------------------------
// Real damaged files
// ---------------------------------------------------------------------------------------------

#[test]
fn unreadable_svs_fails_on_the_corrupt_tile_and_stays_usable() {
    let Some(td) = testdata() else { return };
    let slide = Slide::open(td.join("unreadable.svs")).expect("unreadable.svs opens");
    assert_eq!(slide.dimensions(), (16, 16));
    let e = assert_tile_error(&slide, (0, 0), (16, 16), (0, 0), &["format"], "unreadable.svs");
    assert!(e.to_string().contains("JPEG"), "{e}");
    // Regions partly outside still touch the tile.
    assert_tile_error(&slide, (-8, -8), (12, 12), (0, 0), &["format"], "unreadable.svs partly outside");
    // The good twin reads fine.
    let good = Slide::open(td.join("small_aperio.svs")).unwrap();
    good.read_region((0, 0), 0, (16, 16)).unwrap();
}

#[test]
fn not_a_tiff_is_unsupported() {
    let Some(td) = testdata() else { return };
    let e = expect_err(open_no_panic(&td.join("broken.svs")), "broken.svs");
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("broken.svs"), "{e}");
}

#[test]
fn unknown_compression_is_unsupported_and_named() {
    let Some(td) = testdata() else { return };
    let e = expect_err(open_no_panic(&td.join("unopenable.tiff")), "unopenable.tiff");
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("Compression 52479"), "{e}");
}

#[test]
fn first_ifd_offset_past_eof_is_a_format_error() {
    let Some(td) = testdata() else { return };
    let e = expect_err(open_no_panic(&td.join("seek_too_large.tif")), "seek_too_large.tif");
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(e.to_string().contains("seek_too_large.tif"), "{e}");
}

#[test]
fn zero_height_image_is_a_typed_error() {
    let Some(td) = testdata() else { return };
    let e = expect_err(open_no_panic(&td.join("zero_gi.tif")), "zero_gi.tif");
    assert!(matches!(e, Error::Unsupported { .. } | Error::Format { .. }), "{e}");
}

#[test]
fn ndpi_is_detected_by_the_hamamatsu_driver() {
    // NDPI bad inputs are in ndpi_bad_input.rs.
    let Some(td) = testdata() else { return };
    let report = Slide::detect(td.join("test3-DAPI-2-387.ndpi")).unwrap();
    assert_eq!(report.chosen(), Some("hamamatsu"));
    // Only the non-TIFF drivers OpenSlide tries first (mirax, dicom) come before it.
    let (last, before) = report.verdicts.split_last().unwrap();
    assert_eq!(last.0, "hamamatsu");
    assert!(before.iter().all(|(n, v)| ["mirax", "dicom"].contains(n) && v.is_err()), "{report}");
}

#[test]
fn empty_missing_and_directory_paths() {
    let f = TempPath::new("empty.svs");
    std::fs::write(f.path(), b"").unwrap();
    let e = expect_err(open_no_panic(f.path()), "empty file");
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let f = TempPath::new("header-only.tif");
    std::fs::write(f.path(), b"II*\0\0\0\0\0").unwrap();
    let e = expect_err(open_no_panic(f.path()), "header without IFD");
    assert!(matches!(e, Error::Format { .. } | Error::Unsupported { .. }), "{e}");
    let missing = std::env::temp_dir().join("slidestream-test-no-such-file.svs");
    let e = expect_err(open_no_panic(&missing), "missing file");
    assert!(matches!(e, Error::Io { .. }) && e.to_string().contains("no-such-file"), "{e}");
    // A folder opens only when a driver of a format of several files finds a slide in it.
    let dir = TempPath::new("empty-folder");
    std::fs::create_dir_all(dir.path()).unwrap();
    let e = expect_err(open_no_panic(dir.path()), "directory");
    assert!(matches!(e, Error::Unsupported { .. }) && e.to_string().contains("folder"), "{e}");
    std::fs::remove_dir(dir.path()).unwrap();
}

/// Every tile of every level either reads or fails with a Format error naming level and tile;
/// tiles wholly inside the file must read. Returns (tiles read, tiles failed).
fn check_tiles_against_cut(slide: &Slide, len: u64, what: &str) -> (usize, usize) {
    let (mut ok, mut bad) = (0, 0);
    for (level, l) in slide.index().levels.iter().enumerate() {
        let img = &l.image;
        let ds = l.downsample;
        for row in 0..img.tiles_down() {
            for col in 0..img.tiles_across() {
                let loc = img.tile_locs(col, row).next().unwrap();
                let (x, y) = (col * img.tile_width as u64, row * img.tile_height as u64);
                // Level-0 location whose level-k origin is (x, y).
                let loc0 = ((x as f64 * ds).ceil() as i64, (y as f64 * ds).ceil() as i64);
                let size = img.valid_tile_size(col, row);
                let r = slide.read_region(loc0, level, (size.0 as u64, size.1 as u64));
                if loc.offset + loc.length <= len {
                    r.unwrap_or_else(|e| panic!("{what}: level {level} tile ({col}, {row}) lies before the cut: {e}"));
                    ok += 1;
                } else {
                    let e = expect_err(r, &format!("{what}: level {level} tile ({col}, {row}) past the cut"));
                    assert!(matches!(e, Error::Format { .. }), "{what}: {e}");
                    let m = e.to_string();
                    assert!(m.contains(&format!("level {level}: tile ({col}, {row})")), "{what}: {m}");
                    bad += 1;
                }
            }
        }
    }
    (ok, bad)
}

#[test]
fn truncated_real_slide() {
    let Some(td) = testdata() else { return };
    let full = std::fs::read(td.join("CMU-1-Small-Region.svs")).unwrap();
    for frac in [0.5, 0.9, 0.999] {
        let n = (full.len() as f64 * frac) as usize;
        let f = TempPath::new("truncated.svs");
        std::fs::write(f.path(), &full[..n]).unwrap();
        let what = format!("CMU-1-Small-Region.svs cut to {n} bytes");
        match open_no_panic(f.path()) {
            Err(e) => {
                assert!(matches!(e, Error::Format { .. } | Error::Limits { .. } | Error::Unsupported { .. }), "{what}: {e}");
                assert!(e.to_string().contains(&f.path().display().to_string()), "{what}: {e}");
            }
            Ok(slide) => {
                check_tiles_against_cut(&slide, n as u64, &what);
            }
        }
    }
}

#[test]
fn truncated_pyramid_reads_tiles_before_the_cut() {
    // IFDs first, then the data, smallest level first (IFDs 1 and 2 flagged as reduced images;
    // levels are ordered by width): cutting the file in the middle of level 0's data keeps the
    // structure (and the lowest level, hashed at open) intact.
    let mut ifds = Vec::new();
    for (i, w) in [64u64, 128, 256].into_iter().enumerate() {
        let img = raster(w, w);
        let tiles = cut_tiles(&img, w as usize, w as usize, 3, 64, 64, &[0, 0, 0]);
        let mut ifd = Ifd::tiled(w as u32, w as u32, 64, 64, tiles.into_iter().map(Chunk::Data).collect());
        if i > 0 {
            ifd = ifd.tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1]));
        }
        ifds.push(ifd);
    }
    let mut tiff = Tiff::new(Variant::Classic, ifds);
    tiff.ifds_first = true;
    let bytes = tiff.to_bytes();
    let f = TempPath::new("cut-pyramid.tif");
    let tile = 64 * 64 * 3;
    // Cut 100 bytes into level 0's 7th tile: level-0 tiles 0..6 survive, 6..16 are cut.
    let cut = bytes.len() - (16 - 6) * tile + 100;
    std::fs::write(f.path(), &bytes[..cut]).unwrap();
    let slide = open_no_panic(f.path()).expect("structure is intact");
    assert_eq!(slide.level_dimensions(), vec![(256, 256), (128, 128), (64, 64)]);
    let (ok, bad) = check_tiles_against_cut(&slide, cut as u64, "truncated pyramid");
    assert_eq!((ok, bad), (6 + 4 + 1, 10));
    // Tiles before the cut hold the right pixels.
    let r = slide.read_region((0, 0), 0, (256, 64)).unwrap();
    for (i, p) in r.data.chunks_exact(4).enumerate() {
        let (x, y) = (i as u64 % 256, i as u64 / 256);
        assert_eq!(p, [px(x, y)[0], px(x, y)[1], px(x, y)[2], 255], "({x}, {y})");
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile structure
// ---------------------------------------------------------------------------------------------

#[test]
fn looping_ifd_chain_is_a_format_error() {
    for variant in [Variant::Classic, Variant::ClassicBigEndian, Variant::BigTiff] {
        for (n, to) in [(1usize, 0usize), (3, 0), (3, 1), (3, 2)] {
            let ifds = (0..n).map(|_| Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(vec![7u8; 16 * 16 * 3])])).collect();
            let mut t = Tiff::new(variant, ifds);
            t.loop_to = Some(to);
            let f = TempPath::new("loop.tif");
            t.write(f.path());
            let e = expect_err(open_no_panic(f.path()), "loop");
            assert!(matches!(e, Error::Format { .. }), "{variant:?} {n}->{to}: {e}");
            assert!(e.to_string().contains("loops"), "{variant:?} {n}->{to}: {e}");
            let report = Slide::detect(f.path()).unwrap();
            assert!(report.chosen().is_none());
        }
    }
}

#[test]
fn tile_data_past_end_of_file() {
    for variant in [Variant::Classic, Variant::BigTiff] {
        let f = two_tiles(variant, 1, Chunk::Raw { offset: 8, byte_count: 1 << 20 });
        let slide = open_no_panic(f.path()).unwrap();
        let e = assert_tile_error(&slide, (0, 0), (64, 32), (1, 0), &["format"], "byte count past EOF");
        assert!(e.to_string().contains("past the end"), "{e}");
        // The good tile still reads, exactly.
        let r = slide.read_region((0, 0), 0, (32, 32)).unwrap();
        assert_eq!(&r.data[..4], &[px(0, 0)[0], px(0, 0)[1], px(0, 0)[2], 255]);
        // No bytes read for the impossible tile.
        let before = slide.io_counters();
        let _ = slide.read_region((40, 0), 0, (8, 8));
        assert_eq!(slide.io_counters(), before);
    }
    // An offset near 2^64: offset + count overflows.
    let f = two_tiles(Variant::BigTiff, 1, Chunk::Raw { offset: u64::MAX - 10, byte_count: 3072 });
    let slide = open_no_panic(f.path()).unwrap();
    assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["format"], "offset near 2^64");
    // A 2 GiB tile: refused before allocating.
    let f = two_tiles(Variant::BigTiff, 1, Chunk::Raw { offset: 16, byte_count: 2 << 30 });
    let slide = open_no_panic(f.path()).unwrap();
    assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["limits"], "2 GiB tile");
}

#[test]
fn jpeg_tile_without_soi() {
    let mut bad = jpeg(&vec![128u8; 32 * 32 * 3], 32, 32);
    bad[0] = 0x11;
    bad[1] = 0x00;
    let f = two_tiles(Variant::Classic, 7, Chunk::Data(bad));
    let slide = open_no_panic(f.path()).unwrap();
    let e = assert_tile_error(&slide, (0, 0), (64, 32), (1, 0), &["format"], "JPEG without SOI");
    assert!(e.to_string().contains("0x11 0x00"), "{e}");
    // Tile (0, 0) decodes.
    slide.read_region((0, 0), 0, (32, 32)).unwrap();
}

#[test]
fn truncated_jpeg_tile_is_an_error_not_grey_pixels() {
    let full = jpeg(&raster(32, 32), 32, 32);
    let cut = full[..full.len() * 2 / 3].to_vec();
    let f = two_tiles(Variant::Classic, 7, Chunk::Data(cut));
    let slide = open_no_panic(f.path()).unwrap();
    assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["format"], "truncated JPEG");
}

#[test]
fn truncated_jpeg2000_tile_is_an_error() {
    let Some(td) = testdata() else { return };
    let path = td.join("tcga-cr-7395-01a-01-ts1.svs");
    let slide = Slide::open(&path).unwrap();
    let img = &slide.index().levels[0].image;
    // The largest tile of level 0 (RGB-coded JPEG 2000, 33005).
    let (i, loc) = img.grid.chunks().enumerate().max_by_key(|(_, t)| t.length).unwrap();
    let (col, row) = (i as u64 % img.tiles_across(), i as u64 / img.tiles_across());
    let data = std::fs::read(&path).unwrap();
    let tile = &data[loc.offset as usize..(loc.offset + loc.length) as usize];
    let whole = slide.read_region((col as i64 * 256, row as i64 * 256), 0, (256, 256)).unwrap();
    for frac in [0.5, 0.9] {
        let cut = tile[..(tile.len() as f64 * frac) as usize].to_vec();
        let ifd = Ifd::tiled(512, 256, 256, 256, vec![Chunk::Data(tile.to_vec()), Chunk::Data(cut)]).compression(33005);
        let f = TempPath::new("j2k-cut.tif");
        Tiff::new(Variant::Classic, vec![ifd]).write(f.path());
        let s = open_no_panic(f.path()).unwrap();
        // The intact copy decodes exactly as in the original slide.
        assert_eq!(s.read_region((0, 0), 0, (256, 256)).unwrap().data, whole.data);
        assert_tile_error(&s, (256, 0), (256, 256), (1, 0), &["format"], &format!("J2K tile cut to {frac}"));
    }
}

const CODECS: [(u16, &str); 6] = [(7, "jpeg"), (8, "deflate"), (5, "lzw"), (50000, "zstd"), (33003, "jpeg2000"), (50001, "webp")];

#[test]
fn zeroed_tiles_are_typed_errors() {
    for (c, name) in CODECS {
        for variant in [Variant::Classic, Variant::BigTiff] {
            let f = two_tiles(variant, c, Chunk::Data(vec![0u8; 32 * 32 * 3]));
            let slide = open_no_panic(f.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["format", "limits"], &format!("zeroed {name} tile"));
        }
    }
}

#[test]
fn garbage_tiles_are_typed_errors() {
    let mut rng = Rng::new(7);
    for (c, name) in CODECS {
        for len in [1usize, 3, 17, 100, 3000] {
            let mut data = rng.bytes(len);
            // Plausible starts, so decoders get past their first check.
            match c {
                7 if len >= 2 => data[..2].copy_from_slice(&[0xFF, 0xD8]),
                8 if len >= 2 => data[..2].copy_from_slice(&[0x78, 0x9C]),
                50000 if len >= 4 => data[..4].copy_from_slice(&[0x28, 0xB5, 0x2F, 0xFD]),
                33003 if len >= 4 => data[..4].copy_from_slice(&[0xFF, 0x4F, 0xFF, 0x51]),
                50001 if len >= 16 => data[..16].copy_from_slice(b"RIFF\0\0\0\0WEBPVP8 "),
                _ => {}
            }
            if c == 33003 && len >= 100 {
                // A valid SIZ for the 32x32 tile, then garbage.
                data = j2k_header(32, 32, 3, &data);
            }
            let f = two_tiles(Variant::Classic, c, Chunk::Data(data));
            let slide = open_no_panic(f.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let what = format!("{len} bytes of garbage as {name}");
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slide.read_region((32, 0), 0, (32, 32))))
                .unwrap_or_else(|_| panic!("{what}: read_region panicked"));
            drop(r);
            assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["format", "limits"], &what);
        }
    }
}

/// A J2K codestream header (SOC + SIZ) claiming `w × h`, `comps` 8-bit components, then `tail`.
fn j2k_header(w: u32, h: u32, comps: u16, tail: &[u8]) -> Vec<u8> {
    let mut v = vec![0xFF, 0x4F, 0xFF, 0x51];
    let lsiz = 38 + 3 * comps;
    v.extend_from_slice(&lsiz.to_be_bytes());
    v.extend_from_slice(&0u16.to_be_bytes()); // Rsiz
    for x in [w, h, 0, 0, w, h, 0, 0] {
        v.extend_from_slice(&x.to_be_bytes()); // Xsiz Ysiz XOsiz YOsiz XTsiz YTsiz XTOsiz YTOsiz
    }
    v.extend_from_slice(&comps.to_be_bytes());
    for _ in 0..comps {
        v.extend_from_slice(&[7, 1, 1]);
    }
    v.extend_from_slice(tail);
    v
}

/// A JPEG whose SOF claims `w × h` (the scan is for 32x32).
fn jpeg_claiming(w: u16, h: u16) -> Vec<u8> {
    let mut s = jpeg(&raster(32, 32), 32, 32);
    let mut i = 2;
    while s[i + 1] != 0xC0 {
        i += 2 + u16::from_be_bytes([s[i + 2], s[i + 3]]) as usize;
    }
    s[i + 5..i + 7].copy_from_slice(&h.to_be_bytes());
    s[i + 7..i + 9].copy_from_slice(&w.to_be_bytes());
    s
}

/// A lossless WebP whose header claims `w × h`.
fn webp_claiming(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::new();
    image_webp::WebPEncoder::new(&mut out).encode(&[1, 2, 3, 255], 1, 1, image_webp::ColorType::Rgba8).unwrap();
    assert_eq!(&out[12..16], b"VP8L");
    let bits = (w - 1) | ((h - 1) << 14) | (1 << 28);
    out[21..25].copy_from_slice(&bits.to_le_bytes());
    out
}

#[test]
fn header_claims_are_refused_fast() {
    let t0 = Instant::now();
    let tile = || vec![Chunk::Data(vec![1u8; 16 * 16 * 3])];
    let base = || Ifd::tiled(16, 16, 16, 16, tile());
    let structural: Vec<(&str, Variant, Ifd)> = vec![
        (
            "2^31-1 square image of 16x16 tiles",
            Variant::Classic,
            base().tag(tag::IMAGE_WIDTH, Value::Long(vec![(1 << 31) - 1])).tag(tag::IMAGE_LENGTH, Value::Long(vec![(1 << 31) - 1])),
        ),
        ("image wider than 2^31-1", Variant::BigTiff, base().tag(tag::IMAGE_WIDTH, Value::Long8(vec![1 << 40]))),
        ("tile of 2^20 pixels", Variant::Classic, base().tag(tag::TILE_WIDTH, Value::Long(vec![1 << 20]))),
        ("2^32-1 tile offsets", Variant::Classic, base().tag(tag::TILE_OFFSETS, Value::Claim { field_type: 4, count: u32::MAX as u64, offset: 8 })),
        ("2^60 tile byte counts", Variant::BigTiff, base().tag(tag::TILE_BYTE_COUNTS, Value::Claim { field_type: 16, count: 1 << 60, offset: 16 })),
        (
            "2^62 LONG8 values (count x size overflows)",
            Variant::BigTiff,
            base().tag(tag::TILE_OFFSETS, Value::Claim { field_type: 16, count: 1 << 62, offset: 16 }),
        ),
        ("zero tile width", Variant::Classic, base().tag(tag::TILE_WIDTH, Value::Long(vec![0]))),
        ("zero-sized image", Variant::Classic, base().tag(tag::IMAGE_WIDTH, Value::Long(vec![0]))),
        ("no tile offsets", Variant::Classic, base().tag(tag::TILE_OFFSETS, Value::Claim { field_type: 4, count: 0, offset: 0 })),
    ];
    for (what, variant, ifd) in structural {
        let f = TempPath::new("claims.tif");
        Tiff::new(variant, vec![ifd]).write(f.path());
        let start = Instant::now();
        let e = expect_err(open_no_panic(f.path()), what);
        assert!(matches!(e, Error::Limits { .. } | Error::Format { .. }), "{what}: {} ({e})", kind(&e));
        assert!(start.elapsed() < Duration::from_secs(2), "{what}: took {:?}", start.elapsed());
    }
    // An IFD claiming 65535 entries in a small classic file, and 2^64-1 in a BigTIFF.
    for (variant, bytes) in [
        (Variant::Classic, [&b"II*\0"[..], &8u32.to_le_bytes(), &[0xFF, 0xFF], &[0u8; 20]].concat()),
        (Variant::BigTiff, [&b"II+\0"[..], &8u16.to_le_bytes(), &0u16.to_le_bytes(), &16u64.to_le_bytes(), &u64::MAX.to_le_bytes()].concat()),
    ] {
        let f = TempPath::new("entries.tif");
        std::fs::write(f.path(), bytes).unwrap();
        let e = expect_err(open_no_panic(f.path()), "huge entry count");
        assert!(matches!(e, Error::Limits { .. } | Error::Format { .. }), "{variant:?}: {e}");
    }
    // Tile streams claiming huge images: refused from their headers.
    let streams: Vec<(&str, u16, Vec<u8>)> = vec![
        ("JPEG SOF of 65000x65000", 7, jpeg_claiming(65000, 65000)),
        ("J2K SIZ of 2^31x2^31", 33003, j2k_header(1 << 31, 1 << 31, 3, &[0xFF, 0xD9])),
        ("WebP of 16384x16384", 50001, webp_claiming(16384, 16384)),
    ];
    for (what, c, data) in streams {
        let f = two_tiles(Variant::Classic, c, Chunk::Data(data));
        let slide = open_no_panic(f.path()).unwrap();
        let start = Instant::now();
        assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["limits", "format"], what);
        assert!(start.elapsed() < Duration::from_secs(2), "{what}: took {:?}", start.elapsed());
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
}

/// `decode_chunk` documents: Limits when a stream claims dimensions larger than the tile,
/// Format when the decoded size does not cover the tile's valid region.
#[test]
fn tile_streams_of_the_wrong_size_follow_the_documented_error_kinds() {
    let cases: Vec<(&str, u16, Vec<u8>, &str)> = vec![
        ("JPEG of 64x64 in a 32x32 tile", 7, jpeg(&raster(64, 64), 64, 64), "limits"),
        ("WebP of 64x64 in a 32x32 tile", 50001, webp_claiming(64, 64), "limits"),
        ("J2K of 64x64 in a 32x32 tile", 33003, j2k_header(64, 64, 3, &[0xFF, 0xD9]), "limits"),
        ("JPEG of 16x16 in a 32x32 tile", 7, jpeg(&raster(16, 16), 16, 16), "format"),
        ("WebP of 16x16 in a 32x32 tile", 50001, webp_claiming(16, 16), "format"),
        ("J2K of 16x16 in a 32x32 tile", 33003, j2k_header(16, 16, 3, &[0xFF, 0xD9]), "format"),
    ];
    let mut wrong = Vec::new();
    for (what, c, data, want) in cases {
        let f = two_tiles(Variant::Classic, c, Chunk::Data(data));
        let slide = open_no_panic(f.path()).unwrap();
        let e = assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["limits", "format"], what);
        if kind(&e) != want {
            wrong.push(format!("{what}: {} error, documented {want} ({e})", kind(&e)));
        }
    }
    assert!(wrong.is_empty(), "error kinds differ from decode_chunk's documentation:\n{}", wrong.join("\n"));
}

#[test]
fn bigtiff_byte_counts_whose_sum_overflows() {
    // The lowest level's byte counts are summed for openslide.quickhash-1 at open; a hostile
    // BigTIFF can make that sum overflow. Opening must give a typed error (or succeed and fail
    // on the tile), never panic or try to allocate 2^64 bytes.
    let ifd = Ifd::tiled(32, 16, 16, 16, vec![Chunk::Raw { offset: 16, byte_count: u64::MAX - 100 }, Chunk::Raw { offset: 16, byte_count: 200 }]);
    let f = TempPath::new("overflow.tif");
    Tiff::new(Variant::BigTiff, vec![ifd]).write(f.path());
    let p = f.path().to_path_buf();
    let r = std::panic::catch_unwind(move || Slide::open(&p).map(|s| s.read_region((0, 0), 0, (32, 16)).map(|_| ())));
    match r {
        Err(_) => panic!("Slide::open panicked on byte counts whose sum overflows u64"),
        Ok(Err(e)) | Ok(Ok(Err(e))) => assert!(matches!(e, Error::Format { .. } | Error::Limits { .. }), "{e}"),
        Ok(Ok(Ok(()))) => panic!("tiles with impossible byte counts read without error"),
    }
}

// ---------------------------------------------------------------------------------------------
// Limits before allocation (robustness issue): values not covered above
// ---------------------------------------------------------------------------------------------

/// A file of `core/tests/corrupt/` (the regression corpus).
fn corrupt_file(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corrupt").join(rel)
}

/// Open must fail with `want` within `secs` seconds.
fn assert_open_refused(path: &Path, want: &str, secs: u64, what: &str) -> Error {
    let start = Instant::now();
    let e = expect_err(open_no_panic(path), what);
    assert_eq!(kind(&e), want, "{what}: {e}");
    assert!(start.elapsed() < Duration::from_secs(secs), "{what}: took {:?}", start.elapsed());
    e
}

/// A classic TIFF whose IFD 0 is one 16x16 uncompressed grey tile and whose chain goes on
/// with `extra` directories of no entries (6 bytes each): the smallest chain a file can hold.
fn long_chain(extra: usize) -> Vec<u8> {
    let ifds = vec![Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(vec![7u8; 256])]).color(1, 1)];
    let mut t = Tiff::new(Variant::Classic, ifds).to_bytes();
    // Find IFD 0's next-IFD field (the last 4 bytes of its directory) and chain the empty ones.
    let ifd0 = u32::from_le_bytes(t[4..8].try_into().unwrap()) as usize;
    let n = u16::from_le_bytes(t[ifd0..ifd0 + 2].try_into().unwrap()) as usize;
    let mut next_at = ifd0 + 2 + 12 * n;
    for _ in 0..extra {
        let here = t.len() as u32;
        t[next_at..next_at + 4].copy_from_slice(&here.to_le_bytes());
        t.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        next_at = t.len() - 4;
    }
    t
}

#[test]
fn ifd_chains_longer_than_4096_open_and_the_chain_limit_is_libtiffs() {
    // 5000 directories after level 0 (OpenSlide 4.0.1 reads such chains): open, one level.
    let f = TempPath::new("5001-ifds.tif");
    std::fs::write(f.path(), long_chain(5000)).unwrap();
    let s = open_no_panic(f.path()).unwrap_or_else(|e| panic!("5001 IFDs: {e}"));
    assert_eq!(s.level_count(), 1);
    assert_eq!(s.read_region((0, 0), 0, (1, 1)).unwrap().data, vec![7, 7, 7, 255]);
    // One past the limit (libtiff's 2^20) is a typed Limits error naming it.
    let n = slidestream::tiff::MAX_IFDS;
    assert_eq!(n, 1 << 20);
    std::fs::write(f.path(), long_chain(n)).unwrap();
    let e = expect_err(open_no_panic(f.path()), "2^20 + 1 IFDs");
    assert_eq!(kind(&e), "limits", "{e}");
    assert!(e.to_string().contains(&format!("more than {n} IFDs")), "{e}");
}

/// Structures that overlap or share one value: each IFD, tag and image is valid on its own, but
/// together they multiply a small file into gigabytes (see corrupt/README.md).
#[test]
fn overlapping_ifds_and_shared_tag_values_are_refused_fast() {
    let e = assert_open_refused(&corrupt_file("oom/overlapping-ifds.tif"), "limits", 2, "4096 overlapping IFDs");
    assert!(e.to_string().contains("file size"), "{e}");
    assert_open_refused(&corrupt_file("oom/shared-tile-arrays.svs"), "limits", 2, "1024 levels sharing tile arrays");
    // 64 levels whose JPEGTables all point at the same 4 KB of an 8 KB file.
    let ifds = (0..64u32)
        .map(|k| {
            let w = 64 * 64 - k;
            Ifd::tiled(w, 16, 4096, 16, vec![Chunk::Raw { offset: 8, byte_count: 8192 }])
                .compression(7)
                .tag(tag::JPEG_TABLES, Value::Claim { field_type: 7, count: 4096, offset: 8 })
                .tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![(k > 0) as u32]))
        })
        .collect();
    let mut t = Tiff::new(Variant::Classic, ifds);
    t.ifds_first = true;
    let mut bytes = t.to_bytes();
    bytes.extend_from_slice(&[0u8; 8192]);
    let f = TempPath::new("shared-tables.tif");
    std::fs::write(f.path(), bytes).unwrap();
    assert_open_refused(f.path(), "limits", 2, "64 levels sharing one JPEGTables value");
}

#[test]
fn tag_value_past_end_of_file_is_a_format_error() {
    let ifd = Ifd::tiled(32, 32, 32, 32, vec![Chunk::Data(vec![0u8; 100])])
        .compression(7)
        .tag(tag::JPEG_TABLES, Value::Claim { field_type: 7, count: 64, offset: 1 << 30 });
    let f = TempPath::new("tables-past-eof.tif");
    Tiff::new(Variant::Classic, vec![ifd]).write(f.path());
    let e = assert_open_refused(f.path(), "format", 2, "JPEGTables past EOF");
    assert!(e.to_string().contains("tag 347") && e.to_string().contains("past the end"), "{e}");
}

/// A JPEG 2000 codestream header (SOC + SIZ) of `w × h` in `tw × th` J2K tiles, `comps` 8-bit
/// components.
fn j2k_tiled_header(w: u32, h: u32, tw: u32, th: u32, comps: u16) -> Vec<u8> {
    let mut v = j2k_header(w, h, comps, &[0xFF, 0xD9]);
    v[24..28].copy_from_slice(&tw.to_be_bytes()); // XTsiz
    v[28..32].copy_from_slice(&th.to_be_bytes()); // YTsiz
    v
}

#[test]
fn jpeg2000_siz_is_checked_before_openjpeg_allocates() {
    // Components other than SamplesPerPixel (16384 would cost OpenJPEG gigabytes).
    for comps in [1u16, 4, 16384] {
        let f = two_tiles(Variant::Classic, 33003, Chunk::Data(j2k_tiled_header(32, 32, 32, 32, comps)));
        let slide = open_no_panic(f.path()).unwrap();
        let e = assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["format"], &format!("J2K with {comps} components"));
        assert!(e.to_string().contains(&format!("{comps} components")), "{e}");
    }
    // 1024 J2K tiles of 1x1 pixels are within the limit (and fail on the missing data);
    // the corpus file declares 65025.
    let f = two_tiles(Variant::Classic, 33003, Chunk::Data(j2k_tiled_header(32, 32, 1, 1, 3)));
    let slide = open_no_panic(f.path()).unwrap();
    assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["format"], "1024 J2K tiles");
    let f = two_tiles(Variant::Classic, 33003, Chunk::Data(j2k_tiled_header(32, 32, 0, 1, 3)));
    let slide = open_no_panic(f.path()).unwrap();
    assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["format"], "J2K tiles of width 0");
    // A 32x32 image placed near 2^32 with 1x1 tiles from origin 0: about 2^64 tiles.
    let mut far = j2k_tiled_header(32, 32, 1, 1, 3);
    for (at, v) in [(8, u32::MAX - 15), (12, u32::MAX - 15), (16, u32::MAX - 47), (20, u32::MAX - 47)] {
        far[at..at + 4].copy_from_slice(&v.to_be_bytes()); // Xsiz Ysiz XOsiz YOsiz
    }
    let f = two_tiles(Variant::Classic, 33003, Chunk::Data(far));
    let slide = open_no_panic(f.path()).unwrap();
    assert_tile_error(&slide, (32, 0), (32, 32), (1, 0), &["limits"], "~2^64 J2K tiles");
    let slide = open_no_panic(&corrupt_file("oom/j2k-siz-65025-tiles.tif")).unwrap();
    let start = Instant::now();
    let e = expect_err(slide.read_region((0, 0), 0, (255, 255)), "65025 J2K tiles");
    assert_eq!(kind(&e), "limits", "{e}");
    assert!(e.to_string().contains("65025 tiles"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(1), "took {:?}", start.elapsed());
}

#[test]
fn decompression_bombs_stop_at_the_tile_size() {
    // 64 MiB of zeros in a few KB: decoding a 32x32 RGB tile must produce its 3 KB and stop.
    let zeros = vec![0u8; 64 << 20];
    let deflate = {
        use std::io::Write;
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&zeros).unwrap();
        e.finish().unwrap()
    };
    let zstd = zstd::encode_all(&zeros[..], 3).unwrap();
    let lzw = weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8).encode(&zeros[..4 << 20]).unwrap();
    for (c, name, data) in [(8u16, "deflate", deflate), (50000, "zstd", zstd), (5, "lzw", lzw)] {
        assert!(data.len() < 1 << 20, "{name}: {} bytes", data.len());
        let f = two_tiles(Variant::Classic, c, Chunk::Data(data));
        let slide = open_no_panic(f.path()).unwrap();
        let start = Instant::now();
        let r = slide.read_region((32, 0), 0, (32, 32)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(r.data.chunks_exact(4).all(|p| p == [0, 0, 0, 255]), "{name}: pixels");
        assert!(start.elapsed() < Duration::from_secs(2), "{name}: took {:?}", start.elapsed());
    }
}

#[test]
fn region_requests_over_the_limit_fail_fast() {
    let Some(td) = testdata() else { return };
    let path = td.join("CMU-1-Small-Region.svs");
    let t0 = Instant::now();
    // Default limit (4 GiB of RGBA output): refused before anything is allocated or read.
    let slide = Slide::open(&path).unwrap();
    assert_eq!(slide.config().max_region_bytes, 4 << 30);
    let before = slide.io_counters();
    for size in [(32768u64, 32769u64), (1 << 20, 1 << 20), (1 << 32, 1 << 32), (u64::MAX, 2), (2, u64::MAX), (u64::MAX, u64::MAX)] {
        let e = expect_err(slide.read_region((0, 0), 0, size), &format!("read_region {size:?}"));
        assert!(matches!(e, Error::Limits { .. }) && e.to_string().contains("max_region_bytes"), "{size:?}: {e}");
        // A batch's limit is on its RGB output (`read::batch_bytes`): 32768 × 32769 × 3 fits
        // 4 GiB, so that one fails on the empty buffer instead.
        let e = expect_err(slide.read_regions_rgb_into(&[(0, 0)], 0, size, [0; 3], &mut []), &format!("batch {size:?}"));
        let rgb_over = size.0.checked_mul(size.1).and_then(|v| v.checked_mul(3)).is_none_or(|b| b > 4 << 30);
        if rgb_over {
            assert!(matches!(e, Error::Limits { .. }), "batch {size:?}: {e}");
        } else {
            assert!(matches!(e, Error::Usage(_)), "batch {size:?}: {e}");
        }
        let e = expect_err(slide.read_region_into((0, 0), 0, size, &mut []), &format!("read_region_into {size:?}"));
        assert!(matches!(e, Error::Limits { .. }), "read_region_into {size:?}: {e}");
    }
    // Exactly at the limit is allowed (checked on a small configured limit to stay cheap).
    let config = slidestream::Config { max_region_bytes: 256 * 256 * 4, ..slidestream::Config::default() };
    let opts = slidestream::SlideOptions { config: Some(config), cache: None, ..Default::default() };
    let small = Slide::open_with(&path, opts).unwrap();
    small.read_region((0, 0), 0, (256, 256)).unwrap();
    // A batch's limit is on its whole output, n × h × w × 3 bytes (`read::batch_bytes`, the rule
    // of every batch entry point): 2 × 256 × 170 × 3 = 261120 fits 262144.
    let mut out = vec![0u8; 256 * 170 * 3 * 2];
    small.read_regions_rgb_into(&[(0, 0), (500, 500)], 0, (256, 170), [0; 3], &mut out).unwrap();
    for size in [(257u64, 256u64), (256, 257), (1 << 16, 2)] {
        assert!(matches!(small.read_region((0, 0), 0, size), Err(Error::Limits { .. })), "{size:?}");
    }
    for (n, size) in [(2usize, (256u64, 256u64)), (1, (296, 296)), (1, (1 << 16, 2)), (6, (128, 128))] {
        let mut out = vec![0u8; n * (size.0 * size.1 * 3) as usize];
        let e = expect_err(small.read_regions_rgb_into(&vec![(0, 0); n], 0, size, [0; 3], &mut out), "batch over a small limit");
        assert!(matches!(e, Error::Limits { .. }) && e.to_string().contains("max_region_bytes"), "{n} x {size:?}: {e}");
    }
    // Associated images obey the same limit: the 574x768 thumbnail is larger than 256².
    assert!(matches!(small.read_associated("thumbnail"), Err(Error::Limits { .. })));
    assert_eq!(slide.io_counters(), before, "refused requests read nothing");
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
}

// ---------------------------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------------------------

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_slidestream")).args(args).env("RUST_BACKTRACE", "0").output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn assert_cli_error(args: &[&str], path: &Path) {
    let (code, _, err) = cli(args);
    assert_eq!(code, 1, "{args:?}: exit code (stderr: {err})");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: stderr must be one line: {err:?}");
    assert!(lines[0].starts_with("error: "), "{args:?}: {err}");
    assert!(lines[0].contains(&path.display().to_string()), "{args:?}: error does not name the file: {err}");
    for bad in ["panicked", "RUST_BACKTRACE", "internal error"] {
        assert!(!err.contains(bad), "{args:?}: {err}");
    }
}

#[test]
fn cli_reports_errors_on_one_line() {
    let Some(td) = testdata() else { return };
    for name in ["broken.svs", "unopenable.tiff", "seek_too_large.tif", "zero_gi.tif"] {
        let p = td.join(name);
        assert_cli_error(&["info", p.to_str().unwrap()], &p);
    }
    let p = td.join("unreadable.svs");
    let png = TempPath::new("cli-bad.png");
    assert_cli_error(&["region", p.to_str().unwrap(), "--location", "0,0", "--size", "16,16", "-o", png.path().to_str().unwrap()], &p);
    let missing = td.join("no-such-file.svs");
    assert_cli_error(&["info", missing.to_str().unwrap()], &missing);
    // A generated file with a looping IFD chain.
    let mut t = Tiff::new(Variant::Classic, vec![Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(vec![0u8; 768])])]);
    t.loop_to = Some(0);
    let f = TempPath::new("cli-loop.tif");
    t.write(f.path());
    assert_cli_error(&["info", "--json", f.path().to_str().unwrap()], f.path());
    // Zero-sized benchmark patches: a usage error, not an internal error (found by a fresh-eyes
    // walkthrough: `bench --size 0` indexed an empty sample).
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/CMU-1-Small-Region.svs");
    let (code, out, err) = cli(&["bench", sample, "--size", "0"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.starts_with("error: bench needs --size") && err.lines().count() == 1, "{err}");
}

#[test]
fn cli_info_json() {
    let Some(td) = testdata() else { return };
    let p = td.join("CMU-1-Small-Region.svs");
    let (code, out, err) = cli(&["info", "--json", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    for k in ["vendor", "level_count", "level_dimensions", "level_downsamples", "level_tile_sizes", "properties", "associated_images"] {
        assert!(v.get(k).is_some(), "missing key {k}");
    }
    assert_eq!(v["vendor"], "aperio");
    assert_eq!(v["level_count"], 1);
    assert_eq!(v["level_dimensions"], serde_json::json!([[2220, 2967]]));
    assert_eq!(v["level_tile_sizes"], serde_json::json!([[240, 240]]));
    assert_eq!(v["level_downsamples"], serde_json::json!([1.0]));
    assert_eq!(v["properties"]["openslide.mpp-x"], "0.499");
    assert_eq!(v["associated_images"]["thumbnail"], serde_json::json!([574, 768]));
    assert_eq!(v["associated_images"].as_object().unwrap().len(), 3);
}

#[test]
fn cli_region_and_associated_write_pngs() {
    let Some(td) = testdata() else { return };
    let p = td.join("CMU-1-Small-Region.svs");
    let slide = Slide::open(&p).unwrap();
    let png = TempPath::new("region.png");
    let (code, _, err) = cli(&["region", p.to_str().unwrap(), "--location", "-10,1000", "--size", "300,200", "-o", png.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (w, h, data) = common::decode_png(png.path());
    assert_eq!((w, h), (300, 200));
    assert_eq!(data, slide.read_region((-10, 1000), 0, (300, 200)).unwrap().data);
    let png = TempPath::new("thumb.png");
    let (code, _, err) = cli(&["associated", p.to_str().unwrap(), "thumbnail", "-o", png.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (w, h, data) = common::decode_png(png.path());
    assert_eq!((w, h), (574, 768));
    assert_eq!(data, slide.read_associated("thumbnail").unwrap().data);
    // Unknown associated image: a usage error on one line naming the file.
    assert_cli_error(&["associated", p.to_str().unwrap(), "nope", "-o", png.path().to_str().unwrap()], &p);
}

#[test]
fn cli_tiles_prints_throughput() {
    let Some(td) = testdata() else { return };
    let p = td.join("CMU-1-Small-Region.svs");
    let (code, out, err) = cli(&["--threads", "2", "tiles", p.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("level 0: 130 tiles (130 decoded, 0 missing)"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("throughput: ") && l.contains("tiles/s") && l.contains("MP/s")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("io: ") && l.contains("bytes in")), "{out}");
    let (code, out, err) = cli(&["tiles", "--json", td.join("sparse.tiff").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["decoded_tiles"], 0, "sparse.tiff has only missing tiles");
    assert_eq!(v["bytes_read"], 0);
    assert_eq!(v["requests"], 0);
    // No rate for nothing decoded (it used to print millions of tiles/s for 0 tiles).
    assert!(v["tiles_per_s"].is_null() && v["megapixels_per_s"].is_null(), "{v}");
    assert_eq!(v["missing_tiles"], v["tiles"]);
    let (code, out, err) = cli(&["tiles", td.join("sparse.tiff").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().any(|l| l.starts_with("throughput: none: no tile of level 0 is stored")), "{out}");
}

#[test]
fn cli_non_slide_error_is_one_short_line_with_the_likeliest_reason() {
    let Some(td) = testdata() else { return };
    // Not TIFF at all: says so, not nine drivers' reasons.
    let broken = td.join("broken.svs");
    let (code, _, err) = cli(&["info", broken.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a TIFF, DICOM or MIRAX (.mrxs) slide file") && err.contains("info --why"), "{err}");
    // Short: the nine drivers' reasons took ~650 characters besides the path.
    let without_path = err.len() - broken.to_str().unwrap().len();
    assert!(!err.contains("aperio:") && !err.contains("dicom:") && without_path < 250, "{err}");
    // A TIFF no driver takes: the general TIFF driver's reason.
    let (code, _, err) = cli(&["info", td.join("zero_gi.tif").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("a TIFF file no slide format takes: IFD 0 is not tiled"), "{err}");
    assert!(!err.contains("Dual-personality"), "{err}");
}

#[test]
fn cli_info_why_lists_every_driver() {
    let Some(td) = testdata() else { return };
    let p = td.join("broken.svs");
    let (code, out, err) = cli(&["info", "--why", p.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(out.lines().any(|l| l.starts_with("aperio: declined: ")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("generic-tiff: declined: ")), "{out}");
    assert!(out.contains("not a TIFF"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: ") && err.contains("broken.svs"), "{err}");
    let (code, out, _) = cli(&["info", "--why", td.join("boxes.tiff").to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("aperio: declined: ") && out.contains("generic-tiff: accepted"), "{out}");
}

#[test]
fn cli_thumbnail_fits_the_bound_and_keeps_the_colours() {
    let Some(td) = testdata() else { return };
    let p = td.join("CMU-1-Small-Region.svs");
    let png = TempPath::new("thumbnail.png");
    let (code, _, err) = cli(&["thumbnail", p.to_str().unwrap(), "--size", "256", "-o", png.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (w, h, data) = common::decode_png(png.path());
    // 2220 x 2967 in 256 x 256: downsample 2967 / 256, width round(2220 / that) = 192.
    assert_eq!((w, h), (192, 256));
    // Its mean colour is the slide's (a resize keeps means to within rounding and ringing).
    let slide = Slide::open(&p).unwrap();
    let full = slide.read_region((0, 0), 0, slide.dimensions()).unwrap();
    let mean = |d: &[u8], c: usize| d.chunks(4).map(|px| px[c] as f64).sum::<f64>() / (d.len() / 4) as f64;
    for c in 0..3 {
        assert!((mean(&data, c) - mean(&full.data, c)).abs() < 2.0, "channel {c}: {} vs {}", mean(&data, c), mean(&full.data, c));
    }
    let png = TempPath::new("thumbnail2.png");
    let (code, _, err) = cli(&["thumbnail", p.to_str().unwrap(), "--size", "300,100", "-o", png.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (w, h, _) = common::decode_png(png.path());
    assert_eq!((w, h), (75, 100));
    assert_cli_error(&["thumbnail", p.to_str().unwrap(), "--size", "0", "-o", png.path().to_str().unwrap()], std::path::Path::new("--size"));
}
