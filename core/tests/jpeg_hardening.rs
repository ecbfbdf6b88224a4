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
