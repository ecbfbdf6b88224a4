//! OME-TIFF, SubIFDs, 16-bit samples and `read_region_channels`.
//!
//! * Known pixels: `scripts/make_vendor_slides.py` writes, beside OpenSlide's references, the
//!   known arrays of what OpenSlide cannot be asked about (the SubIFD levels OpenSlide 4.0.1
//!   does not read, native 16-bit and per-channel samples) under `known/<file>/`
//!   (`scripts/vendor_slides/known.py`); every entry must be read exactly.
//! * Bad inputs (always run, from `tiffwriter`): SubIFD cycles and offsets outside the file,
//!   broken OME-XML, channel counts disagreeing with the IFDs, unsupported bit depths: typed
//!   errors, never panics.

mod common;

use common::tiffwriter::{Chunk, Ifd, Tiff, Value, Variant};
use common::vendor_slides;
use serde_json::Value as Json;
use slidestream::{Error, MemSource, Samples, Slide, SlideOptions};

fn le_u16(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
}

#[test]
fn generated_slides_read_their_known_pixels() {
    let Some(vd) = vendor_slides() else { return };
    let Ok(dirs) = std::fs::read_dir(vd.join("known")) else { return };
    let mut checked = 0;
    for d in dirs {
        let dir = d.unwrap().path();
        let doc: Json = serde_json::from_str(&std::fs::read_to_string(dir.join("known.json")).unwrap()).unwrap();
        let name = doc["file"].as_str().unwrap();
        let slide = Slide::open(vd.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let names: Vec<String> = doc["channel_names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        assert_eq!(slide.channel_names(), names, "{name}");
        for e in doc["entries"].as_array().unwrap() {
            let level = e["level"].as_u64().unwrap() as usize;
            let loc = (e["location"][0].as_i64().unwrap(), e["location"][1].as_i64().unwrap());
            let size = (e["size"][0].as_u64().unwrap(), e["size"][1].as_u64().unwrap());
            let want = std::fs::read(dir.join(e["bin"].as_str().unwrap())).unwrap();
            let what = format!("{name} {} level {level} at {loc:?} {size:?}", e["kind"]);
            match e["kind"].as_str().unwrap() {
                "rgba" => {
                    let got = slide.read_region(loc, level, size).unwrap_or_else(|err| panic!("{what}: {err}"));
                    assert!(got.data == want, "{what}: RGBA differs from the known pixels");
                }
                _ => {
                    let chans: Option<Vec<usize>> = e["channels"].as_array().map(|a| a.iter().map(|v| v.as_u64().unwrap() as usize).collect());
                    let got = slide.read_region_channels(loc, level, size, chans.as_deref()).unwrap_or_else(|err| panic!("{what}: {err}"));
                    assert_eq!(got.channels() as u64, e["shape"][2].as_u64().unwrap(), "{what}");
                    match (&got.data, e["dtype"].as_str().unwrap()) {
                        (Samples::U8(v), "u8") => assert!(*v == want, "{what}: samples differ"),
                        (Samples::U16(v), "u16") => assert!(*v == le_u16(&want), "{what}: samples differ"),
                        (_, dt) => panic!("{what}: wrong dtype, known {dt}"),
                    }
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} known regions checked");
}

#[test]
fn ome_levels_come_from_subifds_and_generic_tiff_ignores_them() {
    let Some(vd) = vendor_slides() else { return };
    let bf = Slide::open(vd.join("ome-brightfield.ome.tif")).unwrap();
    assert_eq!(bf.vendor(), "ome-tiff");
    assert_eq!(bf.level_dimensions(), vec![(600, 500), (300, 250), (150, 125)]);
    assert_eq!(bf.properties()["ome-tiff.SizeC"], "3");
    let fl = Slide::open(vd.join("ome-fluo-u16.ome.tif")).unwrap();
    assert_eq!(fl.channel_names(), ["DAPI", "GFP", "Cy3", "Cy5"]);
    assert_eq!(fl.properties()["ome-tiff.channel[3].name"], "Cy5");
    assert_eq!(fl.level_count(), 3);
    // As OpenSlide's generic-tiff: the main chain only.
    let sub = Slide::open(vd.join("generic-subifd.tif")).unwrap();
    assert_eq!((sub.vendor(), sub.level_count()), ("generic-tiff", 1));
    let e = fl.read_region_channels((0, 0), 0, (4, 4), Some(&[4])).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "{e}");
    let e = fl.read_region_channels((0, 0), 3, (4, 4), None).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "{e}");
}

const OME_NS: &str = "http://www.openmicroscopy.org/Schemas/OME/2016-06";

fn ome_xml(size_c: u32, ty: &str) -> String {
    let chans: String = (0..size_c).map(|c| format!("<Channel ID=\"Channel:0:{c}\" SamplesPerPixel=\"1\" Name=\"ch{c}\"/>")).collect();
    format!(
        "<?xml version=\"1.0\"?><OME xmlns=\"{OME_NS}\"><Image ID=\"Image:0\"><Pixels ID=\"Pixels:0\" DimensionOrder=\"XYCZT\" \
         Type=\"{ty}\" SizeX=\"16\" SizeY=\"16\" SizeC=\"{size_c}\" SizeZ=\"1\" SizeT=\"1\">{chans}<TiffData IFD=\"0\" PlaneCount=\"{size_c}\"/></Pixels></Image></OME>"
    )
}

/// A 16×16 single-tile greyscale plane (8 or 16 bit), values from `f(x, y)`.
fn grey_plane(bits: u16, desc: Option<String>, f: impl Fn(usize, usize) -> u16, big_endian: bool) -> Ifd {
    let mut px = Vec::new();
    for y in 0..16 {
        for x in 0..16 {
            let v = f(x, y);
            match (bits, big_endian) {
                (8, _) => px.push(v as u8),
                (_, true) => px.extend_from_slice(&v.to_be_bytes()),
                _ => px.extend_from_slice(&v.to_le_bytes()),
            }
        }
    }
    let mut ifd = Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(px)]).color(1, 1);
    ifd.bits_per_sample = bits;
    ifd.description = desc;
    ifd
}

fn open_bytes(bytes: Vec<u8>) -> slidestream::Result<Slide> {
    Slide::from_source("mem.ome.tif", Box::new(MemSource::new(bytes)), SlideOptions::default())
}

/// First IFD offset of a classic little-endian TIFF.
fn first_ifd(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]])
}

#[test]
fn ome_channels_and_16bit_native_samples_from_written_files() {
    let f = |c: u16| move |x: usize, y: usize| (x as u16 * 4000 + y as u16 * 7 + c * 911) | 0x00ff;
    for (variant, be) in [(Variant::Classic, false), (Variant::ClassicBigEndian, true), (Variant::BigTiff, false)] {
        let ifds = (0..2).map(|c| grey_plane(16, (c == 0).then(|| ome_xml(2, "uint16")), f(c), be)).collect();
        let s = open_bytes(Tiff::new(variant, ifds).to_bytes()).unwrap();
        assert_eq!(s.vendor(), "ome-tiff", "{variant:?}");
        assert_eq!(s.channel_names(), ["ch0", "ch1"]);
        let r = s.read_region_channels((-1, 0), 0, (3, 1), Some(&[1, 0])).unwrap();
        let want: Vec<u16> = vec![0, 0, f(1)(0, 0), f(0)(0, 0), f(1)(1, 0), f(0)(1, 0)];
        assert_eq!(r.data, Samples::U16(want), "{variant:?}");
        // read_region: channel 0 in grey, high byte (libtiff's RGBA interface, as OpenSlide).
        let rgba = s.read_region((5, 3), 0, (1, 1)).unwrap();
        let hi = (f(0)(5, 3) >> 8) as u8;
        assert_eq!(rgba.data, vec![hi, hi, hi, 255], "{variant:?}");
    }
    // Big-endian 16-bit generic TIFF.
    let be = Tiff::new(Variant::ClassicBigEndian, vec![grey_plane(16, None, f(0), true)]).to_bytes();
    let s = open_bytes(be).unwrap();
    assert_eq!(s.vendor(), "generic-tiff");
    let r = s.read_region_channels((2, 7), 0, (1, 1), None).unwrap();
    assert_eq!(r.data, Samples::U16(vec![f(0)(2, 7)]));
    assert_eq!(s.read_region((2, 7), 0, (1, 1)).unwrap().data[0], (f(0)(2, 7) >> 8) as u8);
}

fn expect_err(r: slidestream::Result<Slide>, what: &str) -> Error {
    match r {
        Ok(_) => panic!("{what}: opened"),
        Err(e) => e,
    }
}

#[test]
fn subifd_cycles_and_offsets_outside_the_file_are_format_errors() {
    let plane = |sub: Option<u32>| {
        let ifd = grey_plane(8, Some(ome_xml(1, "uint8")), |x, _| x as u16, false);
        match sub {
            Some(o) => ifd.tag(330, Value::Long(vec![o])),
            None => ifd,
        }
    };
    let probe = Tiff::new(Variant::Classic, vec![plane(Some(0))]).to_bytes();
    let ifd0 = first_ifd(&probe);
    let cycle = Tiff::new(Variant::Classic, vec![plane(Some(ifd0))]).to_bytes();
    assert_eq!(first_ifd(&cycle), ifd0);
    let e = expect_err(open_bytes(cycle), "SubIFD cycle");
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("cycle"), "{e}");
    let past = Tiff::new(Variant::Classic, vec![plane(Some(1 << 30))]).to_bytes();
    let e = expect_err(open_bytes(past), "SubIFD past EOF");
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("past the end"), "{e}");
    // A generic TIFF (no OME-XML) never reads SubIFDs, as OpenSlide: the same damage opens.
    let mut g = grey_plane(8, None, |x, _| x as u16, false).tag(330, Value::Long(vec![1 << 30]));
    g.description = None;
    assert_eq!(open_bytes(Tiff::new(Variant::Classic, vec![g]).to_bytes()).unwrap().vendor(), "generic-tiff");
}

#[test]
fn broken_ome_xml_and_disagreeing_channel_counts_are_format_errors() {
    let one = |desc: String| Tiff::new(Variant::Classic, vec![grey_plane(8, Some(desc), |x, _| x as u16, false)]).to_bytes();
    let broken = ome_xml(1, "uint8").replace("</Image>", "");
    let e = expect_err(open_bytes(one(broken)), "broken XML");
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("OME-XML"), "{e}");
    // Three channels declared, one IFD in the file.
    let e = expect_err(open_bytes(one(ome_xml(3, "uint8"))), "SizeC 3, one IFD");
    assert!(matches!(e, Error::Format { .. }) && e.to_string().contains("no IFD"), "{e}");
    // SizeC disagreeing with the Channel elements.
    let e = expect_err(open_bytes(one(ome_xml(2, "uint8").replace("SizeC=\"2\"", "SizeC=\"5\""))), "SizeC 5, 2 channels");
    assert!(matches!(e, Error::Format { .. }), "{e}");
    // Planes of a different size than Pixels says.
    let e = expect_err(open_bytes(one(ome_xml(1, "uint8").replace("SizeX=\"16\"", "SizeX=\"17\""))), "SizeX 17");
    assert!(matches!(e, Error::Format { .. }), "{e}");
}

#[test]
fn unsupported_bit_depths_are_unsupported() {
    for bits in [4u16, 12, 32] {
        let mut ifd = grey_plane(8, None, |x, _| x as u16, false);
        ifd.bits_per_sample = bits;
        let e = expect_err(open_bytes(Tiff::new(Variant::Classic, vec![ifd]).to_bytes()), "bits");
        assert!(matches!(e, Error::Unsupported { .. }) && e.to_string().contains(&format!("BitsPerSample {bits}")), "{e}");
    }
    // 16-bit JPEG and 16-bit grey + alpha.
    let jpeg = grey_plane(16, None, |x, _| x as u16, false).compression(7);
    let e = expect_err(open_bytes(Tiff::new(Variant::Classic, vec![jpeg]).to_bytes()), "16-bit JPEG");
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let mut ga = grey_plane(16, None, |x, _| x as u16, false).color(2, 1);
    ga.extra_samples = Some(vec![2]);
    let e = expect_err(open_bytes(Tiff::new(Variant::Classic, vec![ga]).to_bytes()), "16-bit grey + alpha");
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
}

#[test]
fn channels_of_8bit_slides_are_read_regions_samples() {
    let Some(td) = common::testdata() else { return };
    for (name, level) in [("CMU-1-Small-Region.svs", 0), ("quad-tile.jpg.tiff", 0), ("boxes.tiff", 2), ("tiff_tiled_planar_lzw.tiff", 0)] {
        let s = Slide::open(td.join(name)).unwrap();
        assert_eq!(s.channel_names(), ["R", "G", "B"], "{name}");
        let ds = s.level_downsamples()[level];
        let loc = ((37.0 * ds) as i64, (-5.0 * ds) as i64);
        let rgba = s.read_region(loc, level, (70, 50)).unwrap();
        let ch = s.read_region_channels(loc, level, (70, 50), None).unwrap();
        // Outside the image both are 0; inside, the RGB of read_region (opaque files).
        let want: Vec<u8> = rgba.data.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        assert_eq!(ch.data, Samples::U8(want), "{name}");
    }
}
