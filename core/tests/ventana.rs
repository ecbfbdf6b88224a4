//! Ventana BIF built from scratch (uncompressed tiles of one solid colour each): the stitched
//! pixels follow OpenSlide's rule (where tiles overlap, the one with the larger row, then the
//! larger column, shows), and damaged files — broken XML, EncodeInfo that disagrees with the
//! tile grid, overlaps larger than the tiles, truncation — give typed errors, never a panic.

mod common;

use common::tiffwriter::{Chunk, Ifd, TempPath, Tiff, Value, Variant};
use slidestream::Slide;

const T: u32 = 16; // tile edge
const XMP: u16 = 700;

const ISCAN: &str = r#"<?xml version="1.0"?><iScan Magnification="20" ScanRes="0.5" ScannerModel="test" Empty="" />"#;

/// EncodeInfo of one area of 2 × 2 tiles of T pixels at the grid origin; overlaps `ox`, `oy`.
fn encode_info(ox: i64, oy: i64) -> String {
    // Tiles numbered from 1 from the bottom-left, the second row (from the bottom) right to
    // left: bottom row 1, 2 (left to right), top row 4, 3.
    let j = |d: &str, a: u32, b: u32, x: i64, y: i64| {
        format!(r#"<TileJointInfo Direction="{d}" Tile1="{a}" Tile2="{b}" OverlapX="{x}" OverlapY="{y}" Confidence="5"/>"#)
    };
    format!(
        r#"<EncodeInfo><AoiOrigin><AOI0 OriginX="0" OriginY="0"/></AoiOrigin><SlideStitchInfo><ImageInfo AOIScanned="1" Width="{T}" Height="{T}" NumRows="2" NumCols="2" Pos-X="0" Pos-Y="0">{}{}{}{}</ImageInfo></SlideStitchInfo></EncodeInfo>"#,
        j("RIGHT", 1, 2, ox, 0),
        j("RIGHT", 4, 3, ox, 0),
        j("UP", 1, 4, 0, oy),
        j("UP", 2, 3, 0, oy)
    )
}

/// The solid colour of level-0 tile (col, row).
fn colour(col: u32, row: u32) -> [u8; 3] {
    [40 + 100 * col as u8, 40 + 100 * row as u8, 200]
}

fn solid(w: u32, h: u32, c: [u8; 3]) -> Vec<u8> {
    c.iter().copied().cycle().take((w * h * 3) as usize).collect()
}

/// A BIF: IFD 0 a label strip with the iScan XMP, IFD 1 level 0 (2 × 2 tiles of solid colours)
/// with `encode`, IFD 2 level 1 (one tile holding the four 8 × 8 sub-tiles).
fn bif(encode: &str, iscan: &str) -> Vec<u8> {
    let mut label = Ifd::stripped(8, 8, 8, vec![Chunk::Data(solid(8, 8, [1, 2, 3]))]).tag(XMP, Value::Byte(iscan.as_bytes().to_vec()));
    label.description = Some("Label_Image".into());
    let tiles = (0..2).flat_map(|r| (0..2).map(move |c| Chunk::Data(solid(T, T, colour(c, r))))).collect();
    let mut l0 = Ifd::tiled(2 * T, 2 * T, T, T, tiles).tag(XMP, Value::Byte(encode.as_bytes().to_vec()));
    l0.description = Some("level=0 mag=20 quality=90".into());
    let mut sub = vec![0u8; (T * T * 3) as usize];
    for y in 0..T {
        for x in 0..T {
            let c = colour(x / (T / 2), y / (T / 2));
            sub[((y * T + x) * 3) as usize..][..3].copy_from_slice(&c);
        }
    }
    let mut l1 = Ifd::tiled(T, T, T, T, vec![Chunk::Data(sub)]);
    l1.description = Some("level=1 mag=10 quality=90".into());
    Tiff::new(Variant::Classic, vec![label, l0, l1]).to_bytes()
}

fn write(bytes: &[u8], name: &str) -> TempPath {
    let p = TempPath::new(name);
    std::fs::write(p.path(), bytes).unwrap();
    p
}

/// The expected pixel of level-0 point (x, y) with advance (ax, ay): the covering tile of the
/// largest (row, col), OpenSlide's paint order; `None` outside every tile.
fn expected(x: i64, y: i64, ax: i64, ay: i64) -> Option<[u8; 3]> {
    let mut best = None;
    for row in 0..2 {
        for col in 0..2 {
            let (tx, ty) = (col * ax, row * ay);
            if (tx..tx + T as i64).contains(&x) && (ty..ty + T as i64).contains(&y) {
                best = Some(colour(col as u32, row as u32));
            }
        }
    }
    best
}

#[test]
fn a_bif_stitches_overlapping_tiles_as_openslide_does() {
    let p = write(&bif(&encode_info(4, 2), ISCAN), "ok.bif");
    let s = Slide::open(p.path()).unwrap();
    assert_eq!(s.vendor(), "ventana");
    let (ax, ay) = (T as i64 - 4, T as i64 - 2);
    assert_eq!(s.level_dimensions(), vec![((ax + T as i64) as u64, (ay + T as i64) as u64), (14, 15)]);
    assert_eq!(s.level_downsamples(), vec![1.0, 2.0]);
    let p_ = s.properties();
    assert_eq!(p_.get("openslide.objective-power").map(String::as_str), Some("20"));
    assert_eq!(p_.get("openslide.mpp-x").map(String::as_str), Some("0.5"));
    assert_eq!(p_.get("ventana.ScannerModel").map(String::as_str), Some("test"));
    assert!(!p_.contains_key("ventana.Empty"), "empty attributes are skipped");
    assert!(!p_.contains_key("openslide.level[0].tile-width"), "stitched levels have no tile size");
    assert_eq!(p_.get("openslide.region[0].width").map(String::as_str), Some("28"));
    assert_eq!(p_.get("openslide.comment").map(String::as_str), Some("level=0 mag=20 quality=90"));
    assert_eq!(s.associated_images().keys().collect::<Vec<_>>(), vec!["macro"]);
    for level in 0..2usize {
        let d = 1i64 << level;
        let (w, h) = s.level_dimensions()[level];
        let r = s.read_region((-2 * d, -2 * d), level, (w + 4, h + 4)).unwrap();
        for y in 0..h as i64 + 4 {
            for x in 0..w as i64 + 4 {
                let (lx, ly) = (x - 2, y - 2);
                // Level 1 shows the level-0 layout halved (advances 6 and 7, sub-tiles of 8).
                let want = expected(lx * d, ly * d, ax, ay).filter(|_| lx >= 0 && ly >= 0);
                let got = &r.data[((y * (w as i64 + 4) + x) * 4) as usize..][..4];
                match want {
                    Some(c) => assert_eq!(got, [c[0], c[1], c[2], 255], "level {level} pixel ({lx}, {ly})"),
                    None => assert_eq!(got, [0, 0, 0, 0], "level {level} pixel ({lx}, {ly}) outside the tiles"),
                }
            }
        }
        // The reduced read (thumbnails) places the reduced pieces: every seam of level 0 is
        // even, so the 2 × 2 block means are the tiles' colours (level 1's row seam at 7 is not).
        let (red, f) = s.read_level_reduced(level, 2, [9, 9, 9]).unwrap();
        assert_eq!(f, 2);
        for y in (0..red.height as i64).filter(|_| level == 0) {
            for x in 0..red.width as i64 {
                let want = expected(2 * x * d, 2 * y * d, ax, ay).unwrap_or([9, 9, 9]);
                assert_eq!(red.data[((y * red.width as i64 + x) * 3) as usize..][..3], want, "level {level} reduced ({x}, {y})");
            }
        }
        // RGB batches over a background and per-patch reads agree.
        let locs = [(0, 0), (5 * d, 3 * d), (20 * d, 20 * d)];
        let rgb = s.read_regions_rgb(&locs, level, (9, 7), [9, 9, 9]).unwrap();
        for (i, &l) in locs.iter().enumerate() {
            let one = s.read_region(l, level, (9, 7)).unwrap();
            let over: Vec<u8> = one.data.chunks_exact(4).flat_map(|p| if p[3] == 0 { [9, 9, 9] } else { [p[0], p[1], p[2]] }).collect();
            assert_eq!(rgb[i * 9 * 7 * 3..(i + 1) * 9 * 7 * 3], over[..], "level {level} patch {i}");
        }
    }
}

#[test]
fn a_ventana_tiff_without_encode_info_is_a_plain_pyramid() {
    let mut label = Ifd::stripped(8, 8, 8, vec![Chunk::Data(solid(8, 8, [1, 2, 3]))]).tag(XMP, Value::Byte(ISCAN.as_bytes().to_vec()));
    label.description = Some("Thumbnail".into());
    let mut l0 = Ifd::tiled(2 * T, 2 * T, T, T, (0..4).map(|i| Chunk::Data(solid(T, T, colour(i % 2, i / 2)))).collect());
    l0.description = Some("level=0 mag=40".into());
    let mut l1 = Ifd::tiled(T + 3, T, T, T, (0..2).map(|_| Chunk::Data(solid(T, T, [7, 7, 7]))).collect());
    l1.description = Some("level=1 mag=10".into());
    let p = write(&Tiff::new(Variant::Classic, vec![label, l0, l1]).to_bytes(), "plain.tif");
    let s = Slide::open(p.path()).unwrap();
    assert_eq!(s.vendor(), "ventana");
    assert_eq!(s.level_dimensions(), vec![(32, 32), (19, 16)]);
    assert_eq!(s.level_downsamples(), vec![1.0, 4.0], "downsample = magnification ratio, not size ratio");
    assert_eq!(s.properties().get("openslide.level[0].tile-width").map(String::as_str), Some("16"));
    let r = s.read_region((16, 0), 0, (1, 1)).unwrap();
    assert_eq!(r.data[..3], colour(1, 0));
}

#[test]
fn damaged_bif_files_give_typed_errors() {
    let good = encode_info(4, 2);
    let cases: Vec<(String, &str, &str, &str)> = vec![
        (good.replace("</EncodeInfo>", ""), ISCAN, "format", "broken XML"),
        (good.replace(r#"Width="16""#, r#"Width="32""#), ISCAN, "format", "tile size mismatch"),
        (good.replace(r#"OriginX="0""#, r#"OriginX="16""#), ISCAN, "format", "tile grid"),
        (good.replace(r#"OriginY="0""#, r#"OriginY="16""#), ISCAN, "format", "tile grid"),
        (encode_info(16, 2), ISCAN, "format", "larger than the tiles"),
        (encode_info(4, 40), ISCAN, "format", "larger than the tiles"),
        (good.replace(r#"Confidence="5""#, r#"Confidence="0""#), ISCAN, "format", "advance is undefined"),
        (good.replace(r#"Tile1="4""#, r#"Tile1="9""#), ISCAN, "format", "out of bounds"),
        (good.replace(r#"Tile2="2""#, r#"Tile2="3""#), ISCAN, "format", "unexpected tile join"),
        (good.replace(r#"Pos-X="0""#, ""), ISCAN, "format", "Pos-X"),
        (good.replace("AOI0", "X/><Y"), ISCAN, "format", "inconsistent"),
        // A broken iScan packet: not detected as Ventana, and nothing else takes the file.
        (good.clone(), "<iScan Magnification=", "unsupported", "ventana: XMLPacket of IFD 0: broken XML"),
    ];
    for (encode, iscan, kind, words) in cases {
        let p = write(&bif(&encode, iscan), "bad.bif");
        let e = Slide::open(p.path()).expect_err(words);
        assert_eq!(e.kind_name(), kind, "{words}: {e}");
        assert!(e.to_string().contains(words), "{words}: {e}");
        assert!(e.to_string().contains(&p.path().display().to_string()), "{e}");
    }
}

#[test]
fn truncated_bif_files_never_panic() {
    let bytes = bif(&encode_info(4, 2), ISCAN);
    for cut in (8..bytes.len()).step_by(37).chain([bytes.len() - 1]) {
        let p = write(&bytes[..cut], "cut.bif");
        let r = std::panic::catch_unwind(|| {
            if let Ok(s) = Slide::open(p.path()) {
                for level in 0..s.level_count() {
                    let (w, h) = s.level_dimensions()[level];
                    if let Err(e) = s.read_region((0, 0), level, (w, h)) {
                        assert!(["format", "io"].contains(&e.kind_name()), "cut {cut}: {e}");
                    }
                }
            }
        });
        assert!(r.is_ok(), "cut at {cut} panicked");
    }
}
