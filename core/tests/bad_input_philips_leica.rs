//! Damaged Philips and Leica files: broken or inconsistent XML, XML that disagrees with the
//! IFDs, bad base64 associated images, missing attributes, truncation. Each gives a typed
//! error (or, where OpenSlide carries on, the same outcome), never a panic.

mod common;

use common::tiffwriter::{tag, Chunk, Ifd, TempPath, Tiff, Value, Variant};
use slidestream::{Error, Slide};

const SOFTWARE: u16 = 305;

fn raster(w: u32, h: u32) -> Vec<u8> {
    (0..w * h).flat_map(|i| [(i % 251) as u8, (i / 7 % 253) as u8, 90]).collect()
}

fn tile_chunks(w: u32, h: u32, t: u32) -> Vec<Chunk> {
    (0..w.div_ceil(t) * h.div_ceil(t)).map(|_| Chunk::Data(raster(t, t))).collect()
}

fn open(path: &std::path::Path) -> slidestream::Result<Slide> {
    let p = path.to_path_buf();
    std::panic::catch_unwind(move || Slide::open(&p)).unwrap_or_else(|_| panic!("Slide::open panicked"))
}

fn err_kind(r: slidestream::Result<Slide>, what: &str) -> &'static str {
    match r {
        Ok(s) => panic!("{what}: opened as {}", s.vendor()),
        Err(e) => {
            eprintln!("{what}: {e}");
            e.kind_name()
        }
    }
}

fn philips_xml(spacings: usize, wsi: usize, macro_data: Option<&str>) -> String {
    let reps: String = (0..spacings)
        .map(|i| {
            let s = 0.00025 * (1 << i) as f64;
            format!("<DataObject ObjectType=\"PixelDataRepresentation\"><Attribute Name=\"DICOM_PIXEL_SPACING\">\"{s}\" \"{s}\"</Attribute></DataObject>")
        })
        .collect();
    let images: String = (0..wsi)
        .map(|_| format!("<DataObject ObjectType=\"DPScannedImage\"><Attribute Name=\"PIM_DP_IMAGE_TYPE\">WSI</Attribute><Attribute Name=\"PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE\"><Array>{reps}</Array></Attribute></DataObject>"))
        .collect();
    let mac = macro_data
        .map(|d| format!("<DataObject ObjectType=\"DPScannedImage\"><Attribute Name=\"PIM_DP_IMAGE_TYPE\">MACROIMAGE</Attribute><Attribute Name=\"PIM_DP_IMAGE_DATA\">{d}</Attribute></DataObject>"))
        .unwrap_or_default();
    format!("<?xml version=\"1.0\"?><DataObject ObjectType=\"DPUfsImport\"><Attribute Name=\"PIM_DP_SCANNED_IMAGES\"><Array>{mac}{images}</Array></Attribute></DataObject>")
}

/// A Philips-layout TIFF: a 64x64 level 0 and a 32x32 level 1 (32 px uncompressed tiles).
fn philips(xml: &str, reduced_flag: bool) -> TempPath {
    let mut l0 = Ifd::tiled(64, 64, 32, 32, tile_chunks(64, 64, 32)).tag(SOFTWARE, Value::Ascii("Philips DP v1.0".into()));
    l0.description = Some(xml.to_string());
    let mut l1 = Ifd::tiled(32, 32, 32, 32, tile_chunks(32, 32, 32));
    if reduced_flag {
        l1 = l1.tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1]));
    }
    let f = TempPath::new("philips.tiff");
    Tiff::new(Variant::Classic, vec![l0, l1]).write(f.path());
    f
}

#[test]
fn philips_reference_layout_opens() {
    let f = philips(&philips_xml(2, 1, None), true);
    let s = open(f.path()).unwrap();
    assert_eq!(s.vendor(), "philips");
    assert_eq!(s.level_dimensions(), vec![(64, 64), (32, 32)]);
}

#[test]
fn philips_xml_levels_disagreeing_with_the_ifds_is_a_format_error() {
    assert_eq!(err_kind(open(philips(&philips_xml(1, 1, None), true).path()), "1 spacing, 2 IFDs"), "format");
    assert_eq!(err_kind(open(philips(&philips_xml(3, 1, None), true).path()), "3 spacings, 2 IFDs"), "format");
}

#[test]
fn philips_without_exactly_one_wsi_image_is_a_format_error() {
    assert_eq!(err_kind(open(philips(&philips_xml(2, 0, None), true).path()), "no WSI"), "format");
    assert_eq!(err_kind(open(philips(&philips_xml(2, 2, None), true).path()), "two WSI"), "format");
}

#[test]
fn philips_reduced_level_without_the_subfile_flag_is_a_format_error() {
    assert_eq!(err_kind(open(philips(&philips_xml(2, 1, None), false).path()), "no NewSubfileType"), "format");
}

#[test]
fn philips_unparsable_pixel_spacing_is_a_format_error() {
    let xml = philips_xml(2, 1, None).replace("\"0.0005\" \"0.0005\"", "\"zero\" \"0.0005\"");
    assert_eq!(err_kind(open(philips(&xml, true).path()), "bad spacing"), "format");
}

#[test]
fn philips_bad_base64_associated_image_is_left_out_as_openslide_does() {
    for data in ["!!!not base64!!!", "AAAA", "/9j/&#1000000000000000;", ""] {
        let f = philips(&philips_xml(2, 1, Some(data)), true);
        let s = open(f.path()).unwrap_or_else(|e| panic!("{data:?}: {e}"));
        assert!(s.associated_images().is_empty(), "{data:?}");
    }
}

#[test]
fn philips_broken_xml_is_not_philips() {
    // OpenSlide's detection parses the XML; a document that does not parse falls through to
    // the generic TIFF driver, as there.
    let xml = philips_xml(2, 1, None);
    let f = philips(&xml[..xml.len() - 20], true);
    let s = open(f.path()).unwrap();
    assert_eq!(s.vendor(), "generic-tiff");
}

#[test]
fn philips_truncated_file_gives_typed_errors() {
    let f = philips(&philips_xml(2, 1, None), true);
    let bytes = std::fs::read(f.path()).unwrap();
    for cut in [bytes.len() / 2, bytes.len() - 10, 200, 16] {
        let t = TempPath::new("philips-cut.tiff");
        std::fs::write(t.path(), &bytes[..cut]).unwrap();
        match open(t.path()) {
            Ok(s) => {
                // Reading may fail on the missing tiles, with a typed error.
                if let Err(e) = s.read_region((0, 0), 0, (64, 64)) {
                    assert!(matches!(e, Error::Format { .. } | Error::Io { .. }), "cut {cut}: {e}");
                }
            }
            Err(e) => assert!(matches!(e, Error::Format { .. } | Error::Unsupported { .. } | Error::Limits { .. }), "cut {cut}: {e}"),
        }
    }
}

const NS: &str = "http://www.leica-microsystems.com/scn/2010/10/01";

/// Leica XML: collection 64x64 px at 1000 nm/px; a main image of dimensions (ifd, w, h) at
/// `offset_nm`, and (when `macro_ifd`) a macro.
fn leica_xml(dims: &[(i64, u32, u32)], offset_nm: (i64, i64), macro_ifd: Option<usize>, dim_attrs: &str) -> String {
    let d: String = dims.iter().map(|(i, w, h)| format!("<dimension sizeX=\"{w}\" sizeY=\"{h}\" ifd=\"{i}\" {dim_attrs}/>")).collect();
    let bf = "<scanSettings><objectiveSettings><objective>20</objective></objectiveSettings><illuminationSettings><illuminationSource>brightfield</illuminationSource></illuminationSettings></scanSettings>";
    let mac = macro_ifd
        .map(|i| format!("<image><pixels><dimension sizeX=\"32\" sizeY=\"32\" ifd=\"{i}\"/></pixels><view sizeX=\"64000\" sizeY=\"64000\" offsetX=\"0\" offsetY=\"0\"/>{bf}</image>"))
        .unwrap_or_default();
    let (mw, mh) = (dims.first().map_or(0, |d| d.1) as i64 * 1000, dims.first().map_or(0, |d| d.2) as i64 * 1000);
    format!(
        "<?xml version=\"1.0\"?><scn xmlns=\"{NS}\"><collection sizeX=\"64000\" sizeY=\"64000\">{mac}<image><pixels>{d}</pixels><view sizeX=\"{mw}\" sizeY=\"{mh}\" offsetX=\"{}\" offsetY=\"{}\"/>{bf}</image></collection></scn>",
        offset_nm.0, offset_nm.1
    )
}

/// IFD 0: 32x32 (XML holder, also the macro), IFD 1: 32x32 main level 0, IFD 2: 16x16.
fn leica(xml: &str) -> TempPath {
    let mut i0 = Ifd::tiled(32, 32, 16, 16, tile_chunks(32, 32, 16));
    i0.description = Some(xml.to_string());
    let i1 = Ifd::tiled(32, 32, 16, 16, tile_chunks(32, 32, 16));
    let i2 = Ifd::tiled(16, 16, 16, 16, tile_chunks(16, 16, 16));
    let f = TempPath::new("leica.scn");
    Tiff::new(Variant::BigTiff, vec![i0, i1, i2]).write(f.path());
    f
}

#[test]
fn leica_reference_layout_opens_with_bounds() {
    let s = open(leica(&leica_xml(&[(1, 32, 32), (2, 16, 16)], (32000, 32000), Some(0), "")).path()).unwrap();
    assert_eq!(s.vendor(), "leica");
    assert_eq!(s.level_dimensions(), vec![(64, 64), (32, 32)]);
    let p = s.properties();
    assert_eq!((p["openslide.bounds-x"].as_str(), p["openslide.bounds-y"].as_str()), ("32", "32"));
    let px = s.read_region((0, 0), 0, (64, 64)).unwrap();
    assert_eq!(px.data[3], 0, "outside the main image is transparent");
    assert_eq!(px.data[(48 * 64 + 48) * 4 + 3], 255, "inside is opaque");
}

#[test]
fn leica_missing_dimension_attributes_are_format_errors() {
    for (what, xml) in [
        ("no ifd", leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "").replace("ifd=\"1\"", "")),
        ("no sizeY", leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "").replacen("sizeY=\"32\" ifd=\"1\"", "ifd=\"1\"", 1)),
        (
            "bad sizeX",
            leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "").replacen("sizeX=\"32\" sizeY=\"32\" ifd=\"1\"", "sizeX=\"3x2\" sizeY=\"32\" ifd=\"1\"", 1),
        ),
        ("zero sizeX", leica_xml(&[(1, 0, 32)], (0, 0), Some(0), "")),
        ("no view", leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "").replacen("<view", "<notview", 2)),
        ("no collection size", leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "").replace("<collection sizeX=\"64000\"", "<collection")),
    ] {
        assert_eq!(err_kind(open(leica(&xml).path()), what), "format", "{what}");
    }
}

#[test]
fn leica_xml_naming_missing_ifds_or_no_main_image_is_a_format_error() {
    assert_eq!(err_kind(open(leica(&leica_xml(&[(7, 32, 32)], (0, 0), Some(0), "")).path()), "IFD 7"), "format");
    assert_eq!(err_kind(open(leica(&leica_xml(&[(-1, 32, 32)], (0, 0), Some(0), "")).path()), "IFD -1"), "format");
    let fluo = leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "").replacen("<illuminationSource>brightfield", "<illuminationSource>fluorescence", 2);
    assert_eq!(err_kind(open(leica(&fluo).path()), "no brightfield main image"), "format");
    // New-style quickhash (a non-brightfield image) needs a macro.
    let xml = leica_xml(&[(1, 32, 32)], (0, 0), None, "")
        .replace("</collection>", "<image><pixels/><view sizeX=\"1\" sizeY=\"1\" offsetX=\"0\" offsetY=\"0\"/></image></collection>");
    assert_eq!(err_kind(open(leica(&xml).path()), "no macro for the quickhash"), "format");
}

#[test]
fn leica_main_image_without_dimensions_is_a_format_error() {
    let xml = leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "z=\"2\"");
    assert_eq!(err_kind(open(leica(&xml).path()), "only z-plane 2"), "format");
}

#[test]
fn leica_other_z_planes_are_skipped() {
    let xml = leica_xml(&[(1, 32, 32), (2, 16, 16)], (0, 0), Some(0), "").replacen("ifd=\"2\" ", "ifd=\"2\" z=\"1\"", 1);
    let s = open(leica(&xml).path()).unwrap();
    assert_eq!(s.level_count(), 1);
}

#[test]
fn leica_main_image_off_the_tile_grid_is_placed_at_its_offset() {
    // One main image 5 px right of the level's tile grid: read as positioned tiles.
    let s = open(leica(&leica_xml(&[(1, 32, 32), (2, 16, 16)], (5000, 0), Some(0), "")).path()).unwrap();
    assert_eq!(s.vendor(), "leica");
    let px = s.read_region((0, 0), 0, (64, 32)).unwrap();
    let tile = raster(16, 16);
    for y in 0..32usize {
        assert_eq!(px.data[(y * 64 + 4) * 4 + 3], 0, "left of the main image is transparent");
        for x in 0..32usize {
            let got = &px.data[(y * 64 + 5 + x) * 4..][..4];
            let want = &tile[((y % 16) * 16 + x % 16) * 3..][..3];
            assert_eq!((&got[..3], got[3]), (want, 255), "pixel ({x}, {y}) of the main image");
        }
    }
}

#[test]
fn leica_broken_xml_is_not_leica() {
    let xml = leica_xml(&[(1, 32, 32)], (0, 0), Some(0), "");
    let s = open(leica(&xml[..xml.len() - 8]).path()).unwrap();
    assert_eq!(s.vendor(), "generic-tiff");
}
