//! The checks and the properties of `finish`, on hand-made layouts.

use std::sync::Arc;

use super::*;
use crate::format::{Bounds, LayoutLevel, QuickhashInput};
use crate::index::{CodecInfo, Grid, PositionedTile, SourceId};
use crate::io::MemSource;

fn codec() -> Arc<CodecInfo> {
    Arc::new(CodecInfo::uncompressed_rgb())
}

fn image(w: u64, h: u64, t: u32) -> ImageIndex {
    let (c, r) = (w.div_ceil(t as u64), h.div_ceil(t as u64));
    let tiles = (0..c * r).map(|i| TileLoc::primary(8 + i, 1)).collect();
    ImageIndex { width: w, height: h, tile_width: t, tile_height: t, tiled: true, codec: codec(), grid: Grid::regular(c, r, 1, tiles).unwrap() }
}

fn layout(sizes: &[(u64, u64)]) -> SlideLayout {
    SlideLayout {
        levels: sizes.iter().enumerate().map(|(k, &(w, h))| LayoutLevel { image: image(w, h, 16), origin: format!("IFD {k}") }).collect(),
        ..SlideLayout::default()
    }
}

fn run(l: SlideLayout) -> Result<SlideIndex> {
    let at = Location::file("t.tif");
    let sources = super::source_files(&l.extra_sources, 4096, &at, None, None)?;
    finish("test", l, &MemSource::new(vec![7u8; 4096]), &at, sources)
}

#[test]
fn standard_properties_are_filled_from_the_layout() {
    let mut l = layout(&[(100, 60), (50, 30), (25, 15)]);
    l.mpp = Some((0.25, 0.5));
    l.objective_power = Some(20.0);
    l.comment = Some("hello".into());
    l.background_color = Some([255, 10, 0xAB]);
    l.bounds = Some(Bounds { x: 3, y: -4, width: 90, height: 50 });
    l.icc = Some(BlobRef::Range(TileLoc::primary(100, 3000)));
    l.associated.insert("label".into(), image(20, 10, 20));
    l.associated_icc.insert("label".into(), BlobRef::Bytes(Arc::from(vec![1u8, 2, 3])));
    l.properties.insert("tiff.Make".into(), "x".into());
    l.quickhash = Some(QuickhashInput { lowest_level_tiles: true, strings: vec![("a".into(), "b".into())], ..Default::default() });
    let idx = run(l).unwrap();
    let p = |k: &str| idx.properties.get(k).map(String::as_str);
    assert_eq!(p("openslide.vendor"), Some("test"));
    assert_eq!(p("openslide.level-count"), Some("3"));
    assert_eq!(p("openslide.level[2].width"), Some("25"));
    assert_eq!(p("openslide.level[1].downsample"), Some("2"));
    assert_eq!(p("openslide.level[0].tile-width"), Some("16"));
    assert_eq!(p("openslide.mpp-x"), Some("0.25"));
    assert_eq!(p("openslide.mpp-y"), Some("0.5"));
    assert_eq!(p("openslide.objective-power"), Some("20"));
    assert_eq!(p("openslide.comment"), Some("hello"));
    assert_eq!(p("openslide.background-color"), Some("FF0AAB"));
    assert_eq!(p("openslide.bounds-y"), Some("-4"));
    assert_eq!(p("openslide.bounds-height"), Some("50"));
    assert_eq!(p("openslide.icc-size"), Some("3000"));
    assert_eq!(p("openslide.associated.label.width"), Some("20"));
    assert_eq!(p("openslide.associated.label.icc-size"), Some("3"));
    assert_eq!(p("tiff.Make"), Some("x"));
    // SHA-256 of the lowest level's two 1-byte chunks (25x15 in 16x16 tiles; all 7) then "a\0b\0".
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update([7u8; 2]);
    h.update(b"a\0b\0");
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(p("openslide.quickhash-1"), Some(hex.as_str()));
    assert_eq!(idx.levels[2].downsample, 4.0);
    assert_eq!(idx.sources.len(), 1);
    assert_eq!(idx.path(), std::path::Path::new("t.tif"));
}

fn refused(l: SlideLayout, kind: &str, words: &str) {
    let e = run(l).unwrap_err();
    assert_eq!(e.kind_name(), kind, "{e}");
    assert!(e.to_string().contains(words), "{e}");
    assert!(e.to_string().contains("t.tif"), "{e}");
}

#[test]
fn bad_layouts_are_refused_with_typed_errors() {
    refused(layout(&[]), "format", "no pyramid levels");
    refused(layout(&[(100, 100), (100, 100)]), "format", "not above");
    refused(layout(&[(100, 100), (20, 120)]), "format", "larger than level 0");
    let mut l = layout(&[(100, 100)]);
    l.properties.insert("openslide.mpp-x".into(), "1".into());
    refused(l, "format", "openslide.mpp-x");
    let mut l = layout(&[(100, 100)]);
    l.levels[0].image.tile_width = 32;
    refused(l, "format", "tile grid");
    let mut l = layout(&[(100, 100)]);
    l.levels[0].image.tile_width = 20_000;
    refused(l, "limits", "tile size");
    let mut l = layout(&[(64, 64)]);
    l.levels[0].image.grid = Grid::regular(4, 4, 1, (0..16).map(|i| TileLoc { source: SourceId(1), offset: i, length: 1 }).collect()).unwrap();
    refused(l, "format", "source file 1");
    let mut l = layout(&[(64, 64)]);
    l.icc = Some(BlobRef::Range(TileLoc::primary(4000, 200)));
    refused(l, "format", "past the end");
    let mut l = layout(&[(64, 64)]);
    l.associated_icc.insert("macro".into(), BlobRef::Bytes(Arc::from(vec![1u8])));
    refused(l, "format", "macro");
    let mut l = layout(&[(64, 64)]);
    let stored = Grid::regular(1, 1, 1, vec![TileLoc::primary(8, 1)]).unwrap();
    let t = PositionedTile { x: 0, y: 0, width: 64, height: 64, col: 0, row: 0, src_x: 0, src_y: 0 };
    l.levels[0].image.grid = Grid::positioned(stored, (64, 64), (64, 64), &[t]).unwrap();
    (l.levels[0].image.tile_width, l.levels[0].image.tile_height) = (64, 64);
    assert!(run(l.clone()).is_ok(), "positioned grids are read");
    l.levels[0].image.grid = Grid::positioned(Grid::regular(1, 1, 1, vec![TileLoc::primary(8, 1)]).unwrap(), (200, 64), (64, 64), &[t]).unwrap();
    refused(l, "format", "tile grid");
    let mut l = layout(&[(64, 64), (32, 32)]);
    l.downsamples = vec![1.0, f64::NAN];
    refused(l, "format", "downsample");
}

#[test]
fn tiles_past_the_end_of_the_file_are_kept_for_a_read_time_error() {
    let mut l = layout(&[(32, 16)]);
    l.levels[0].image.grid = Grid::regular(2, 1, 1, vec![TileLoc::primary(8, 10), TileLoc::primary(4000, 1 << 20)]).unwrap();
    let idx = run(l).unwrap();
    assert_eq!(idx.levels[0].image.tile(1, 0).unwrap().locs, &[TileLoc::primary(4000, 1 << 20)]);
}

#[test]
fn driver_downsamples_barcode_and_regions_are_reported_and_checked() {
    let mut l = layout(&[(101, 61), (50, 30)]);
    l.downsamples = vec![1.0, 2.0];
    l.barcode = Some("B-1".into());
    l.regions = vec![Bounds { x: 1, y: 2, width: 3, height: 4 }, Bounds { x: 5, y: 6, width: 7, height: 8 }];
    let idx = run(l).unwrap();
    let p = |k: &str| idx.properties.get(k).map(String::as_str);
    assert_eq!(p("openslide.level[1].downsample"), Some("2"));
    assert_eq!(idx.levels[1].downsample, 2.0);
    assert_eq!(p("openslide.barcode"), Some("B-1"));
    assert_eq!(p("openslide.region[1].x"), Some("5"));
    assert_eq!(p("openslide.region[0].height"), Some("4"));
    for bad in [vec![1.0, 2.0, 4.0], vec![2.0, 4.0], vec![1.0, f64::NAN], vec![1.0, 1.0]] {
        let mut l = layout(&[(100, 60), (50, 30)]);
        l.downsamples = bad.clone();
        assert!(matches!(run(l), Err(Error::Format { .. })), "{bad:?}");
    }
}

#[test]
fn quickhash_chunks_replace_the_lowest_levels() {
    let base = run(layout(&[(32, 32)])).unwrap();
    let mut l = layout(&[(32, 32)]);
    l.quickhash = Some(QuickhashInput { lowest_level_tiles: true, strings: vec![], ..Default::default() });
    let a = run(l.clone()).unwrap().properties["openslide.quickhash-1"].clone();
    l.quickhash_chunks = Some(vec![TileLoc::primary(8, 1), TileLoc::primary(9, 1), TileLoc::primary(10, 1)]);
    let b = run(l).unwrap().properties["openslide.quickhash-1"].clone();
    assert_ne!(a, b, "three chunks hash differently from the level's four");
    assert!(!base.properties.contains_key("openslide.quickhash-1"));
}
