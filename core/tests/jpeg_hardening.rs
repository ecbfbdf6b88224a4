//! Issue 13, JPEG decode path: limits on progressive (multi-scan) streams (F2) and partial
//! decodes that give the whole-tile decode's outcome on damaged tiles (F9).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::jpeg::jpeg_tiff;
use slidestream::codec::jpeg_scans::{MAX_COEF_BYTES, MAX_SCANS};
use slidestream::error::CodecError;
use slidestream::{Config, Error, Slide, SlideOptions, TileCache};

fn corrupt(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corrupt").join(rel)
}

/// Open with a private cold cache and default settings (partial decoding on, threshold 0.5).
fn open_private(path: &Path) -> Slide {
    let opts = SlideOptions { cache: Some(Arc::new(TileCache::new(64 << 20))), config: Some(Config::default()), ..Default::default() };
    Slide::open_with(path, opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// F2: progressive streams
// ---------------------------------------------------------------------------------------------

#[test]
fn progressive_bombs_are_limits_errors() {
    // 2688 scans (T.81's most for three components) in a 256² tile: decoded before the fix.
    // A 16384² greyscale tile of 64 scans: 512 MiB of coefficients (a 2.8 MB variant of 2647
    // scans took minutes and 1.6 GB before the fix).
    let cases: [(&str, CodecError); 2] = [
        ("hang/jpeg-progressive-2688-scans.tif", CodecError::TooManyScans { limit: MAX_SCANS }),
        ("oom/jpeg-progressive-16384x16384.tif", CodecError::DecoderMemory { bytes: 512 << 20, limit: MAX_COEF_BYTES }),
    ];
    for (rel, want) in cases {
        let slide = open_private(&corrupt(rel));
        for (loc, size) in [((0, 0), (1, 1)), ((0, 0), (200, 200))] {
            let e = slide.read_region(loc, 0, size).map(|_| ()).unwrap_err();
            assert!(matches!(e, Error::Limits { .. }), "{rel} {size:?}: {e}");
            assert_eq!(e.codec_error(), Some(&want), "{rel}: {e}");
            assert!(e.to_string().contains("tile (0, 0)"), "{e}");
        }
        let mut rgb = vec![0u8; 2 * 16 * 16 * 3];
        let e = slide.read_regions_rgb_into(&[(0, 0), (100, 100)], 0, (16, 16), [0; 3], &mut rgb).unwrap_err();
        assert_eq!(e.codec_error(), Some(&want), "{rel} batch: {e}");
    }
}

/// A progressive JPEG of `rgb` (libjpeg-turbo's default progression: 10 scans).
fn progressive(rgb: &[u8], w: usize, h: usize) -> Vec<u8> {
    let mut c = turbojpeg::Compressor::new().unwrap();
    c.set_quality(85).unwrap();
    c.set_subsamp(turbojpeg::Subsamp::Sub2x2).unwrap();
    c.set_progressive(true).unwrap();
    c.compress_to_vec(turbojpeg::Image { pixels: rgb, width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB }).unwrap()
}

#[test]
fn a_progressive_tile_read_in_part_is_decoded_whole_and_cached() {
    // Partial decoding saves nothing on a multi-scan stream (every scan is read before the
    // first row), so a small read decodes the tile whole and caches it; later reads of the
    // tile are cache hits. The pixels equal a whole-tile read's.
    let t = 64usize;
    let tiles: Vec<Vec<u8>> = (0..4u64)
        .map(|k| {
            let rgb: Vec<u8> = (0..t * t).flat_map(|i| common::jpeg::smooth_noise((i % t) as u64, (i / t) as u64, k)).collect();
            progressive(&rgb, t, t)
        })
        .collect();
    let file = jpeg_tiff(tiles, 128, 128, t as u32, 6, None);
    let slide = open_private(file.path());
    let small = slide.read_region((70, 5), 0, (8, 8)).unwrap().data;
    let st = slide.cache_stats();
    assert_eq!(st.entries, 1, "the tile of a small read is cached whole: {st:?}");
    // Served from the cache now: no more bytes read.
    let before = slide.io_counters().bytes;
    assert_eq!(slide.read_region((70, 5), 0, (8, 8)).unwrap().data, small);
    assert_eq!(slide.io_counters().bytes, before);
    let whole = open_private(file.path()).read_region((0, 0), 0, (128, 128)).unwrap().data;
    for y in 0..8 {
        let row = (5 + y) * 128 + 70;
        assert_eq!(&small[y * 32..(y + 1) * 32], &whole[row * 4..(row + 8) * 4], "row {y}");
    }
}

// ---------------------------------------------------------------------------------------------
// F9: partial decodes of damaged tiles
// ---------------------------------------------------------------------------------------------

use common::tiffwriter::Rng;
use slidestream::codec::{decode_chunk, decode_chunk_part, decode_jpeg_into, ChunkGeometry, DecodedTile, PartRect};
use slidestream::error::Location;
use slidestream::index::CodecInfo;

/// One JPEG tile to check: its codec (tables, colour), geometry and bytes.
struct Case {
    name: String,
    codec: CodecInfo,
    g: ChunkGeometry,
    bytes: Vec<u8>,
}

/// Every tile of level 0 of `path`, with its bytes as stored.
fn tiles_of(path: &Path) -> Vec<Case> {
    let slide = open_private(path);
    let file = std::fs::read(path).unwrap();
    let img = &slide.index().levels[0].image;
    let mut out = Vec::new();
    for row in 0..img.tiles_down() {
        for col in 0..img.tiles_across() {
            let l = img.tile_locs(col, row).next().unwrap();
            let (vw, vh) = img.valid_tile_size(col, row);
            let g = ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: vw, valid_height: vh };
            let bytes = file[l.offset as usize..(l.offset + l.length) as usize].to_vec();
            out.push(Case { name: format!("{} tile ({col}, {row})", path.display()), codec: (*img.codec).clone(), g, bytes });
        }
    }
    out
}

/// `n` entropy-coded bytes of a JPEG tile replaced by other values, never creating or touching
/// a 0xFF (the marker structure stays intact; only Huffman-coded data is wrong), as
/// `make_hostile.py`'s `damage_scan` does.
fn damage_scan(tile: &[u8], rng: &mut Rng, n: usize) -> Vec<u8> {
    let (_, sos) = common::jpeg::segments(tile);
    let scan = sos + 2 + u16::from_be_bytes([tile[sos + 2], tile[sos + 3]]) as usize;
    let mut t = tile.to_vec();
    let mut done = 0;
    while done < n {
        let i = rng.range(scan as i64 + 1, t.len() as i64 - 3) as usize;
        let v = rng.range(0, 255) as u8;
        if t[i - 1] != 0xFF && t[i] != 0xFF && v != t[i] {
            t[i] = v;
            done += 1;
        }
    }
    t
}

/// Pixels `p` of the decode `t` (which covers at least `p`), RGBA rows.
fn crop(t: &DecodedTile, p: PartRect) -> Vec<u8> {
    let mut out = Vec::with_capacity((p.w * p.h * 4) as usize);
    for y in p.y..p.y + p.h {
        let row = ((y - t.y) * t.width + (p.x - t.x)) as usize * 4;
        out.extend_from_slice(&t.rgba[row..row + p.w as usize * 4]);
    }
    out
}

/// A random part of a `vw × vh` region: 32 × 32 (clipped) half of the time, else any size.
fn random_part(rng: &mut Rng, vw: u32, vh: u32) -> PartRect {
    let (x, y) = (rng.range(0, vw as i64) as u32, rng.range(0, vh as i64) as u32);
    if rng.next_u64() % 2 == 0 {
        PartRect { x, y, w: 32.min(vw - x), h: 32.min(vh - y) }
    } else {
        PartRect { x, y, w: rng.range(1, (vw - x) as i64 + 1) as u32, h: rng.range(1, (vh - y) as i64 + 1) as u32 }
    }
}

/// Tallies of [`check_parts`].
#[derive(Default, Debug)]
struct Tally {
    parts: usize,
    whole_failed: usize,
    wrong: Vec<String>,
}

/// Every part of `case` through both partial decoders must give the whole-tile decode's
/// outcome: its pixels, or an error of its kind.
fn check_parts(case: &Case, parts: usize, rng: &mut Rng, tally: &mut Tally) {
    let at = Location::file("f9.tif");
    let g = case.g;
    let whole = decode_chunk(&case.codec, &[&case.bytes], g, &at);
    let mut dst = vec![0u8; (g.tile_width * g.tile_height * 4) as usize];
    for _ in 0..parts {
        let p = random_part(rng, g.valid_width, g.valid_height);
        let got = decode_chunk_part(&case.codec, &[&case.bytes], g, p, &at).map(|t| crop(&t, p));
        let into = decode_jpeg_into(&case.codec, &case.bytes, g, Some(p), &at, &mut dst).map(|pl| {
            let mut out = Vec::new();
            for y in 0..p.h as usize {
                let o = pl.offset + ((p.y - pl.y) as usize + y) * pl.pitch as usize * 4 + (p.x - pl.x) as usize * 4;
                out.extend_from_slice(&dst[o..o + p.w as usize * 4]);
            }
            out
        });
        tally.parts += 1;
        tally.whole_failed += usize::from(whole.is_err());
        for (how, r) in [("decode_chunk_part", got), ("decode_jpeg_into", into)] {
            let same = match (&whole, &r) {
                (Ok(w), Ok(px)) => crop(w, p) == *px,
                (Err(a), Err(b)) => a.kind_name() == b.kind_name(),
                _ => false,
            };
            if !same {
                let say = |r: Result<(), String>| r.map_or_else(|e| format!("error {e}"), |_| "pixels".to_string());
                tally.wrong.push(format!(
                    "{}: {how} {p:?}: whole gives {}, part gives {}",
                    case.name,
                    say(whole.as_ref().map(|_| ()).map_err(|e| e.to_string())),
                    say(r.as_ref().map(|_| ()).map_err(|e| e.to_string())),
                ));
            }
        }
    }
}

/// Parts per tile: `SLIDESTREAM_F9_PARTS` (total, spread over the tiles) or `default`.
fn parts_per_tile(tiles: usize, default: usize) -> usize {
    let total = std::env::var("SLIDESTREAM_F9_PARTS").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    total.div_ceil(tiles).max(1)
}

#[test]
fn parts_of_damaged_tiles_give_the_whole_tiles_outcome() {
    // The corpus files (four CMU-1 tiles with three damaged scan bytes each; a CMU-1 tile whose
    // SOF says 4×1 for a 1×1 component), then every CMU-1 tile damaged the same way in memory.
    let mut cases = tiles_of(&corrupt("wrong-pixels/jpeg-scan-bytes-damaged.tif"));
    cases.extend(tiles_of(&corrupt("wrong-pixels/jpeg-sof-component-4x1.tif")));
    if let Some(td) = common::testdata() {
        let mut rng = Rng::new(9);
        for (k, mut c) in tiles_of(&td.join("CMU-1-Small-Region.svs")).into_iter().enumerate() {
            if k % 4 != 3 {
                c.bytes = damage_scan(&c.bytes, &mut rng, 1 + k % 4);
                c.name += " (damaged)";
            }
            cases.push(c);
        }
    }
    // Synthetic tiles in the other codings (greyscale, 4:2:0, 4:2:2, 4:4:0, 4:1:1; 2 × 2 tiles
    // of 64², an edge row of 40 px), one in two damaged.
    use common::tiffwriter::{Chunk, Ifd, TempPath, Tiff, Variant};
    use turbojpeg::Subsamp;
    let mut files = Vec::new();
    let mut rng = Rng::new(21);
    for (k, ss) in [Subsamp::Gray, Subsamp::Sub2x2, Subsamp::Sub2x1, Subsamp::Sub1x2, Subsamp::Sub4x1].into_iter().enumerate() {
        let streams: Vec<Vec<u8>> = (0..4u64)
            .map(|i| {
                let rgb: Vec<u8> = (0..64 * 64).flat_map(|p| common::jpeg::smooth_noise(p % 64, p / 64, 10 * k as u64 + i)).collect();
                let s = common::jpeg::compress(&rgb, 64, 64, 85, ss, false);
                if i % 2 == 1 {
                    damage_scan(&s, &mut rng, 2)
                } else {
                    s
                }
            })
            .collect();
        let (spp, photometric) = if ss == Subsamp::Gray { (1, 1) } else { (3, 6) };
        let ifd = Ifd::tiled(128, 104, 64, 64, streams.into_iter().map(Chunk::Data).collect()).compression(7).color(spp, photometric);
        let file = TempPath::new("f9.tif");
        Tiff::new(Variant::Classic, vec![ifd]).write(file.path());
        cases.extend(tiles_of(file.path()));
        files.push(file);
    }
    let per_tile = parts_per_tile(cases.len(), 2000);
    let mut rng = Rng::new(13);
    let mut tally = Tally::default();
    for c in &cases {
        check_parts(c, per_tile, &mut rng, &mut tally);
    }
    eprintln!(
        "{} tiles, {} parts ({} of tiles whose whole decode fails), {} part decodes differing from the whole decode's outcome",
        cases.len(),
        tally.parts,
        tally.whole_failed,
        tally.wrong.len()
    );
    assert!(tally.whole_failed > 0 && tally.whole_failed < tally.parts, "both outcomes are exercised: {tally:?}");
    assert!(
        tally.wrong.is_empty(),
        "{} of {} parts differ:\n{}",
        tally.wrong.len(),
        2 * tally.parts,
        tally.wrong.iter().take(8).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn repeated_region_reads_of_damaged_tiles_keep_the_whole_tiles_outcome() {
    // Through the slide: the first part of a tile reads its whole scan; the outcome is
    // remembered, so later parts of a cleanly decoding tile take TurboJPEG's crop and parts of
    // a failing tile fail at once. Every read must give the whole tile's outcome. Tile (1, 0)
    // of the corpus file decodes without error despite its damage; the other three fail.
    let path = corrupt("wrong-pixels/jpeg-scan-bytes-damaged.tif");
    let reference = open_private(&path);
    let whole: Vec<Result<Vec<u8>, String>> =
        (0..4).map(|k| reference.read_region(((k % 2) * 240, (k / 2) * 240), 0, (240, 240)).map(|r| r.data).map_err(|e| e.kind_name().to_string())).collect();
    assert_eq!(whole.iter().filter(|w| w.is_ok()).count(), 1, "one tile decodes");
    let slide = open_private(&path);
    let mut rng = Rng::new(5);
    for i in 0..400 {
        let k = (i % 4) as usize;
        let (w, h) = (rng.range(1, 120) as u64, rng.range(1, 120) as u64);
        let (x, y) = (rng.range(0, 240 - w as i64), rng.range(0, 240 - h as i64));
        let r = slide.read_region(((k as i64 % 2) * 240 + x, (k as i64 / 2) * 240 + y), 0, (w, h));
        match (&whole[k], r) {
            (Ok(px), Ok(got)) => {
                for row in 0..h as usize {
                    let o = ((y as usize + row) * 240 + x as usize) * 4;
                    assert_eq!(&got.data[row * w as usize * 4..(row + 1) * w as usize * 4], &px[o..o + w as usize * 4], "tile {k} read {i}");
                }
            }
            (Err(kind), Err(e)) => assert_eq!(kind, e.kind_name(), "tile {k} read {i}: {e}"),
            (w, r) => panic!("tile {k} read {i}: whole {:?}, part {:?}", w.as_ref().map(|_| "pixels"), r.map(|_| "pixels")),
        }
    }
    assert_eq!(slide.cache_stats().entries, 0, "all parts were partial decodes");
}
