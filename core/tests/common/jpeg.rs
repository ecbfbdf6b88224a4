//! JPEG helpers for the tests: stream surgery (segments, tables-only / abbreviated streams,
//! Aperio-style RGB-coded tiles), compression and libjpeg-turbo's reference decode, and TIFF
//! files with JPEG tiles ([`jpeg_tiff`], [`ycbcr_jpeg_tiff`]).
#![allow(dead_code)]

use super::tiffwriter::{cut_tiles, tag, Chunk, Ifd, TempPath, Tiff, Value, Variant};

/// (marker, start, end) of each segment before SOS, then the SOS-to-end tail start.
pub fn segments(s: &[u8]) -> (Vec<(u8, usize, usize)>, usize) {
    assert_eq!(&s[..2], &[0xFF, 0xD8]);
    let mut i = 2;
    let mut segs = Vec::new();
    loop {
        assert_eq!(s[i], 0xFF, "marker expected at {i}");
        let m = s[i + 1];
        if m == 0xDA {
            return (segs, i);
        }
        let len = u16::from_be_bytes([s[i + 2], s[i + 3]]) as usize;
        segs.push((m, i, i + 2 + len));
        i += 2 + len;
    }
}

/// Drop every APPn marker (JFIF, Adobe) and renumber the components 0, 1, 2 in SOF and
/// SOS, as Aperio writes its RGB-coded tiles.
pub fn aperio_style(s: &[u8]) -> Vec<u8> {
    let (segs, sos) = segments(s);
    let mut out = vec![0xFF, 0xD8];
    let mut ids = Vec::new();
    for (m, a, b) in segs {
        if (0xE0..=0xEF).contains(&m) {
            continue;
        }
        let mut seg = s[a..b].to_vec();
        if m == 0xC0 || m == 0xC1 {
            let n = seg[9] as usize;
            for c in 0..n {
                ids.push(seg[10 + c * 3]);
                seg[10 + c * 3] = c as u8;
            }
        }
        out.extend_from_slice(&seg);
    }
    let mut tail = s[sos..].to_vec();
    let n = tail[4] as usize;
    for c in 0..n {
        let id = tail[5 + c * 2];
        tail[5 + c * 2] = ids.iter().position(|&x| x == id).expect("SOS id in SOF") as u8;
    }
    out.extend_from_slice(&tail);
    out
}

/// Split a complete stream into a tables-only stream (SOI, DQT, DHT, EOI) and the
/// abbreviated image stream (everything else, without DQT and DHT).
pub fn split_tables(s: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (segs, sos) = segments(s);
    let mut tables = vec![0xFF, 0xD8];
    let mut image = vec![0xFF, 0xD8];
    for (m, a, b) in segs {
        if m == 0xDB || m == 0xC4 {
            tables.extend_from_slice(&s[a..b]);
        } else {
            image.extend_from_slice(&s[a..b]);
        }
    }
    tables.extend_from_slice(&[0xFF, 0xD9]);
    image.extend_from_slice(&s[sos..]);
    (tables, image)
}

/// Compress RGB pixels.
pub fn compress(rgb: &[u8], w: usize, h: usize, quality: i32, subsamp: turbojpeg::Subsamp, rgb_coded: bool) -> Vec<u8> {
    let mut c = turbojpeg::Compressor::new().unwrap();
    c.set_quality(quality).unwrap();
    c.set_subsamp(subsamp).unwrap();
    if rgb_coded {
        c.set_colorspace(turbojpeg::Colorspace::RGB).unwrap();
    }
    let img = turbojpeg::Image { pixels: rgb, width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
    c.compress_to_vec(img).unwrap()
}

/// libjpeg-turbo's own decode of a complete stream, RGBA rows of `w * 4` bytes.
pub fn decode(s: &[u8]) -> (usize, usize, Vec<u8>) {
    let img = turbojpeg::decompress(s, turbojpeg::PixelFormat::RGBA).unwrap();
    let mut out = Vec::with_capacity(img.width * img.height * 4);
    for row in img.pixels.chunks(img.pitch).take(img.height) {
        out.extend_from_slice(&row[..img.width * 4]);
    }
    (img.width, img.height, out)
}

/// Assemble per-tile RGBA decodes (each `tw × th`) into the `w × h` image.
pub fn assemble(tiles: &[Vec<u8>], w: usize, h: usize, tw: usize, th: usize) -> Vec<u8> {
    let across = w.div_ceil(tw);
    let mut out = vec![0u8; w * h * 4];
    for y in 0..h {
        for x in 0..w {
            let t = &tiles[(y / th) * across + x / tw];
            let s = ((y % th) * tw + x % tw) * 4;
            out[(y * w + x) * 4..(y * w + x) * 4 + 4].copy_from_slice(&t[s..s + 4]);
        }
    }
    out
}

/// A one-level tiled TIFF (classic, little-endian) of `t × t` JPEG tiles (Compression 7) with
/// the given PhotometricInterpretation and optional JPEGTables.
pub fn jpeg_tiff(tiles: Vec<Vec<u8>>, w: u32, h: u32, t: u32, photometric: u16, tables: Option<Vec<u8>>) -> TempPath {
    let mut ifd = Ifd::tiled(w, h, t, t, tiles.into_iter().map(Chunk::Data).collect()).compression(7);
    ifd.photometric = photometric;
    ifd.jpeg_tables = tables;
    let file = TempPath::new("jpeg.tif");
    Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
    file
}

/// A deterministic hash of (seed, a, b, c) to 32 bits (splitmix64 finaliser).
fn hash(seed: u64, a: u64, b: u64, c: u64) -> u32 {
    let mut z = seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ c.wrapping_mul(0x1656_67B1_9E37_79F9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as u32
}

/// Pseudo-random but smooth RGB at (x, y): per channel, random values on a 16-pixel lattice
/// interpolated bilinearly, plus ±2 of per-pixel noise. Defined everywhere, so tile padding
/// continues the image.
pub fn smooth_noise(x: u64, y: u64, seed: u64) -> [u8; 3] {
    const CELL: u64 = 16;
    let (cx, cy, fx, fy) = (x / CELL, y / CELL, x % CELL, y % CELL);
    std::array::from_fn(|c| {
        let v = |i: u64, j: u64| u64::from(hash(seed, cx + i, cy + j, c as u64) & 0xFF);
        let top = v(0, 0) * (CELL - fx) + v(1, 0) * fx;
        let bottom = v(0, 1) * (CELL - fx) + v(1, 1) * fx;
        let mean = (top * (CELL - fy) + bottom * fy) / (CELL * CELL);
        let jitter = i64::from(hash(seed ^ 0x5A5A, x, y, c as u64) % 5) - 2;
        (mean as i64 + jitter).clamp(0, 255) as u8
    })
}

/// YCbCrSubSampling (tag 530) values for a TurboJPEG subsampling.
pub fn ycbcr_subsampling_tag(subsamp: turbojpeg::Subsamp) -> (u16, u16) {
    match subsamp {
        turbojpeg::Subsamp::None => (1, 1),
        turbojpeg::Subsamp::Sub2x1 => (2, 1),
        turbojpeg::Subsamp::Sub2x2 => (2, 2),
        turbojpeg::Subsamp::Sub1x2 => (1, 2),
        other => panic!("no YCbCr subsampling tag for {other:?}"),
    }
}

/// A tiled YCbCr JPEG TIFF as libtiff writes it ("new-style" JPEG, TIFF Technical Note 2):
/// PhotometricInterpretation 6, Compression 7, YCbCrSubSampling (530) matching the streams,
/// JPEGTables (347) holding the shared quantisation and Huffman tables (SOI, DQT, DHT, EOI),
/// and each tile an abbreviated stream (SOI, SOF, SOS, scan, EOI: no tables, no APPn markers).
///
/// The image is [`smooth_noise`] with `seed`, `width × height` pixels in `tile × tile` tiles
/// (edge tiles padded with the continued image), quality 90, subsampling `subsamp`.
///
/// Returns the file and the expected RGBA (`width × height × 4` bytes) of level 0: libjpeg-turbo's
/// decode of each tile's complete stream, assembled and cropped to the image.
pub fn ycbcr_jpeg_tiff(width: u32, height: u32, tile: u32, subsamp: turbojpeg::Subsamp, seed: u64) -> (TempPath, Vec<u8>) {
    let (w, h, t) = (width as usize, height as usize, tile as usize);
    let (gw, gh) = (w.div_ceil(t) * t, h.div_ceil(t) * t);
    let mut grid = Vec::with_capacity(gw * gh * 3);
    for y in 0..gh as u64 {
        for x in 0..gw as u64 {
            grid.extend_from_slice(&smooth_noise(x, y, seed));
        }
    }
    let mut tables: Option<Vec<u8>> = None;
    let mut chunks = Vec::new();
    let mut decoded = Vec::new();
    for rgb in cut_tiles(&grid, gw, gh, 3, t, t, &[0, 0, 0]) {
        let full = compress(&rgb, t, t, 90, subsamp, false);
        decoded.push(decode(&full).2);
        let (tb, image) = split_tables(&full);
        // Same quality and subsampling: every tile uses the same tables.
        assert_eq!(tables.get_or_insert_with(|| tb.clone()), &tb, "tiles with different tables");
        // libtiff writes no JFIF marker into the tiles.
        let (segs, sos) = segments(&image);
        let mut abbreviated = vec![0xFF, 0xD8];
        for (m, a, b) in segs {
            assert!(m != 0xDB && m != 0xC4, "tables left in the tile");
            if !(0xE0..=0xEF).contains(&m) {
                abbreviated.extend_from_slice(&image[a..b]);
            }
        }
        abbreviated.extend_from_slice(&image[sos..]);
        chunks.push(Chunk::Data(abbreviated));
    }
    let (sh, sv) = ycbcr_subsampling_tag(subsamp);
    let mut ifd = Ifd::tiled(width, height, tile, tile, chunks).compression(7).tag(tag::YCBCR_SUBSAMPLING, Value::Short(vec![sh, sv]));
    ifd.photometric = 6;
    ifd.jpeg_tables = tables;
    let file = TempPath::new(&format!("ycbcr-{sh}{sv}-{width}x{height}.tif"));
    Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
    let grid_rgba = assemble(&decoded, gw, gh, t, t);
    let expected = (0..h).flat_map(|y| grid_rgba[y * gw * 4..(y * gw + w) * 4].to_vec()).collect();
    (file, expected)
}

/// A copy of `src` with the bytes of tile (`col`, `row`) of level 0 overwritten by `f` (a
/// damaged tile for the error-path tests).
pub fn corrupt_copy(src: &std::path::Path, col: u64, row: u64, f: impl Fn(&mut [u8])) -> TempPath {
    let slide = slidestream::Slide::open(src).expect("open");
    let loc = slide.index().levels[0].image.tile_locs(col, row).next().expect("tile");
    let mut bytes = std::fs::read(src).expect("read");
    f(&mut bytes[loc.offset as usize..(loc.offset + loc.length) as usize]);
    let out = TempPath::new("corrupt.tif");
    std::fs::write(out.path(), bytes).expect("write");
    out
}
