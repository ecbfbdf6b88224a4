//! OME-TIFF (Open Microscopy Environment): a TIFF whose IFD 0 ImageDescription is OME-XML.
//!
//! OpenSlide 4.0.1 has no OME-TIFF driver: its generic-tiff driver opens a tiled OME-TIFF as
//! one level (IFD 0 only: it walks the main IFD chain, never SubIFDs) and reads it through
//! libtiff's RGBA interface, so a multichannel file reads as channel 0 in grey. This driver
//! keeps OpenSlide's level 0 (same pixels, same `tiff.*` properties, comment and quickhash)
//! and adds what the OME-TIFF specification (docs.openmicroscopy.org, "OME-TIFF
//! specification", 2016-06 schema) stores:
//! * detection: IFD 0 is tiled or stored in strips and its ImageDescription parses as XML
//!   whose root element is `OME` (any namespace). Stripped planes and levels (StripOffsets,
//!   RowsPerStrip: TIFF 6.0 section 3; the OME-TIFF specification allows either layout) are
//!   read as grids one strip wide ([`super::tiff_strips`]); OpenSlide 4.0.1 refuses such files
//!   (its generic-tiff driver needs a tiled IFD 0);
//! * image 0's `Pixels` (SizeX/Y/C/Z/T, DimensionOrder, Type, PhysicalSizeX/Y and their
//!   units) and `Channel`s (Name, SamplesPerPixel); `TiffData` (IFD, FirstC/Z/T, PlaneCount)
//!   map planes to main-chain IFDs in DimensionOrder;
//! * pyramid levels: the IFD of plane (C 0, Z 0, T 0) and its SubIFDs (tag 330) in order (the
//!   specification's sub-resolutions); OpenSlide reports level 0 only. A file whose plane 0 is
//!   IFD 0 without SubIFDs gets generic-tiff's levels (main-chain reduced IFDs), exactly as
//!   OpenSlide; its channel planes are then read only when that gives one level;
//! * channels: with several single-sample channels (fluorescence), one IFD per channel plane
//!   at Z 0, T 0, each with the same SubIFD levels ([`crate::index::ChannelPlanes`]);
//!   `read_region` returns channel 0 as grey, exactly OpenSlide's pixels (16-bit samples keep
//!   their high byte); `read_region_channels` returns the stored samples;
//! * `openslide.mpp-x/-y` from PhysicalSizeX/Y (µm, nm, mm, cm or m), else from the TIFF
//!   resolution tags as generic-tiff; properties `ome-tiff.*`: the Pixels attributes, the
//!   channel count and each channel's name (`ome-tiff.channel[i].name`).
//!
//! Not read: images after the first (`Image` 1...; OME-TIFF files of several images expose the
//! first), planes in other files (`TiffData/UUID` naming another file: refused), Z and T beyond
//! 0, SubIFDs of SubIFDs.

use std::collections::BTreeMap;

use super::tiff_common::{icc_ref, image_from_ifd, is_stripped, is_tiled, quickhash_input, tiff_properties};
use super::generic_tiff::GenericTiff;
use super::{format_double, FormatDriver, LayoutLevel, Probe, SlideLayout};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{ChannelPlanes, ImageIndex};
use crate::tiff::{tags, TiffFile};

/// The OME-TIFF driver.
pub struct OmeTiff;

/// Largest OME-XML parsed (the description is also bounded by the TIFF tag limit).
const MAX_XML_BYTES: usize = crate::limits::LIMITS.xml_bytes;
/// Most planes (C × Z × T) an OME-XML may declare.
const MAX_PLANES: u64 = crate::limits::LIMITS.ome_planes;

/// An OME-XML `Channel/@Color` as (R, G, B): the OME schema's `Color` type, a signed 32-bit
/// integer holding R, G, B and alpha from the most significant byte down (so opaque white is
/// -1); `None` for text that is not such an integer. Alpha is dropped.
fn ome_color(text: &str) -> Option<[u8; 3]> {
    let v = text.trim().parse::<i64>().ok().filter(|v| (i32::MIN as i64..=u32::MAX as i64).contains(v))? as u32;
    Some([(v >> 24) as u8, (v >> 16) as u8, (v >> 8) as u8])
}

/// What the driver takes from image 0's `Pixels` element.
#[derive(Debug, Clone, PartialEq)]
struct Pixels {
    attrs: BTreeMap<String, String>,
    size: [u64; 5], // X, Y, C, Z, T
    order: [usize; 3], // positions of C, Z, T in DimensionOrder's last three letters
    /// (name, samples per pixel) of each Channel element.
    channels: Vec<(Option<String>, u64)>,
    /// The display colour of each Channel element (`Color`, see [`ome_color`]).
    colors: Vec<Option<[u8; 3]>>,
    /// (first plane, IFD, plane count) of each TiffData element.
    tiff_data: Vec<(u64, u64, Option<u64>)>,
    mpp: Option<(f64, f64)>,
}

fn to_um(v: f64, unit: Option<&str>) -> Option<f64> {
    let f = match unit.unwrap_or("µm") {
        "µm" | "um" | "\u{3bc}m" => 1.0,
        "nm" => 1e-3,
        "mm" => 1e3,
        "cm" => 1e4,
        "m" => 1e6,
        _ => return None,
    };
    (v.is_finite() && v > 0.0).then_some(v * f)
}

fn parse_pixels(xml: &str, at: &Location) -> Result<Pixels> {
    if xml.len() > MAX_XML_BYTES {
        return Err(Error::limits(at, format!("OME-XML of {} bytes", xml.len())));
    }
    let doc = roxmltree::Document::parse(xml).map_err(|e| Error::format(at, format!("OME-XML: {e}")))?;
    let root = doc.root_element();
    if root.tag_name().name() != "OME" {
        return Err(Error::format(at, "OME-XML root element is not OME"));
    }
    let image = root
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == "Image")
        .ok_or_else(|| Error::format(at, "OME-XML without an Image"))?;
    let px = image
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == "Pixels")
        .ok_or_else(|| Error::format(at, "OME-XML Image without Pixels"))?;
    let attrs: BTreeMap<String, String> = px.attributes().map(|a| (a.name().to_string(), a.value().to_string())).collect();
    let num = |k: &str, default: Option<u64>| -> Result<u64> {
        match attrs.get(k) {
            Some(v) => v.trim().parse::<u64>().map_err(|_| Error::format(at, format!("OME-XML Pixels {k}={v:?}"))),
            None => default.ok_or_else(|| Error::format(at, format!("OME-XML Pixels without {k}"))),
        }
    };
    let size = [num("SizeX", None)?, num("SizeY", None)?, num("SizeC", Some(1))?, num("SizeZ", Some(1))?, num("SizeT", Some(1))?];
    if size.contains(&0) {
        return Err(Error::format(at, format!("OME-XML Pixels of size {size:?}")));
    }
    let dim = attrs.get("DimensionOrder").map(String::as_str).unwrap_or("XYCZT");
    let tail: Vec<char> = dim.chars().collect();
    let order = match tail.as_slice() {
        ['X', 'Y', a, b, c] => {
            let pos = |ch: char| [*a, *b, *c].iter().position(|&x| x == ch);
            match (pos('C'), pos('Z'), pos('T')) {
                (Some(c), Some(z), Some(t)) => [c, z, t],
                _ => return Err(Error::format(at, format!("OME-XML DimensionOrder {dim:?}"))),
            }
        }
        _ => return Err(Error::format(at, format!("OME-XML DimensionOrder {dim:?}"))),
    };
    let mut channels = Vec::new();
    let mut colors = Vec::new();
    let mut tiff_data = Vec::new();
    let mut spp_total = 0u64;
    for n in px.children().filter(|n| n.is_element()) {
        match n.tag_name().name() {
            "Channel" => {
                let spp = match n.attribute("SamplesPerPixel") {
                    Some(v) => v.trim().parse::<u64>().map_err(|_| Error::format(at, format!("OME-XML Channel SamplesPerPixel={v:?}")))?,
                    None => 1,
                };
                if spp == 0 || spp > 4 {
                    return Err(Error::format(at, format!("OME-XML Channel SamplesPerPixel={spp}")));
                }
                spp_total += spp;
                channels.push((n.attribute("Name").map(String::from), spp));
                colors.push(n.attribute("Color").and_then(ome_color));
            }
            "TiffData" => {
                if let Some(u) = n.children().find(|c| c.is_element() && c.tag_name().name() == "UUID") {
                    if u.attribute("FileName").is_some() {
                        return Err(Error::unsupported(at, "OME-TIFF planes in other files (TiffData/UUID FileName)"));
                    }
                }
                let get = |k: &str| -> Result<Option<u64>> {
                    n.attribute(k)
                        .map(|v| v.trim().parse::<u64>().map_err(|_| Error::format(at, format!("OME-XML TiffData {k}={v:?}"))))
                        .transpose()
                };
                let (fc, fz, ft) = (get("FirstC")?.unwrap_or(0), get("FirstZ")?.unwrap_or(0), get("FirstT")?.unwrap_or(0));
                tiff_data.push(([fc, fz, ft], get("IFD")?.unwrap_or(0), get("PlaneCount")?));
            }
            _ => {}
        }
    }
    if channels.is_empty() {
        channels = (0..size[2]).map(|_| (None, 1)).collect();
        spp_total = size[2];
    }
    if spp_total != size[2] {
        return Err(Error::format(at, format!("OME-XML declares SizeC={} but its Channels hold {spp_total} samples", size[2])));
    }
    let mpp = match (attrs.get("PhysicalSizeX"), attrs.get("PhysicalSizeY")) {
        (Some(x), Some(y)) => match (x.trim().parse::<f64>(), y.trim().parse::<f64>()) {
            (Ok(x), Ok(y)) => to_um(x, attrs.get("PhysicalSizeXUnit").map(String::as_str)).zip(to_um(y, attrs.get("PhysicalSizeYUnit").map(String::as_str))),
            _ => None,
        },
        _ => None,
    };
    let mut p = Pixels { attrs, size, order, channels, colors, tiff_data: Vec::new(), mpp };
    for (first, ifd, count) in tiff_data {
        let start = p.plane_index(first[0], first[1], first[2]).ok_or_else(|| Error::format(at, format!("OME-XML TiffData First {first:?} outside the planes")))?;
        p.tiff_data.push((start, ifd, count));
    }
    if p.planes() > MAX_PLANES {
        return Err(Error::limits(at, format!("OME-XML declares {} planes", p.planes())));
    }
    Ok(p)
}

impl Pixels {
    /// Planes along C: channels stored interleaved (SamplesPerPixel > 1) take one plane.
    fn c_planes(&self) -> u64 {
        self.channels.len() as u64
    }
    fn planes(&self) -> u64 {
        self.c_planes().saturating_mul(self.size[3]).saturating_mul(self.size[4])
    }
    /// Index of plane (c, z, t) in DimensionOrder (the first of C, Z, T varies fastest).
    fn plane_index(&self, c: u64, z: u64, t: u64) -> Option<u64> {
        let dims = [self.c_planes(), self.size[3], self.size[4]];
        let coord = [c, z, t];
        if coord.iter().zip(dims).any(|(&v, d)| v >= d) {
            return None;
        }
        let mut by_pos = [(0u64, 0u64); 3];
        for k in 0..3 {
            by_pos[self.order[k]] = (coord[k], dims[k]);
        }
        Some(by_pos[0].0 + by_pos[0].1 * (by_pos[1].0 + by_pos[1].1 * by_pos[2].0))
    }
    /// The main-chain IFD holding plane `plane` (OME-TIFF TiffData rules: IFD i + j holds the
    /// j-th plane from FirstC/Z/T; a lone TiffData without PlaneCount covers every plane from
    /// its first; no TiffData means plane i in IFD i).
    fn ifd_of(&self, plane: u64) -> Option<u64> {
        if self.tiff_data.is_empty() {
            return Some(plane);
        }
        let lone = self.tiff_data.len() == 1;
        self.tiff_data.iter().rev().find_map(|&(start, ifd, count)| {
            let count = count.unwrap_or(if lone { self.planes() - start } else { 1 });
            (plane >= start && plane < start + count).then(|| ifd + (plane - start))
        })
    }
}

fn description(probe: &Probe<'_>, tf: &TiffFile) -> std::result::Result<String, String> {
    tf.reader(probe.src, probe.at, 0)
        .ascii(tags::IMAGE_DESCRIPTION)
        .map_err(|e| format!("cannot read ImageDescription: {e}"))?
        .ok_or_else(|| "IFD 0 has no ImageDescription".to_string())
}

impl FormatDriver for OmeTiff {
    fn name(&self) -> &'static str {
        "ome-tiff"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        if !is_tiled(tf, 0) && !is_stripped(tf, 0) {
            return Err("IFD 0 is not tiled".into());
        }
        let desc = description(probe, tf)?;
        let head = desc.trim_start();
        if !(head.starts_with('<') && desc.contains("<OME")) {
            return Err("ImageDescription of IFD 0 is not OME-XML".into());
        }
        // Broken XML is still OME-TIFF (open reports it) when the root tag says so.
        match roxmltree::Document::parse(&desc) {
            Ok(d) if d.root_element().tag_name().name() != "OME" => Err("ImageDescription's root element is not OME".into()),
            _ => Ok(()),
        }
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let desc = description(probe, tf).map_err(|m| Error::format(at, m))?;
        let px = parse_pixels(&desc, at)?;
        let subs = tf.sub_ifds(src, at)?;
        let (flat, children) = tf.with_sub_ifds(&subs);
        let main = tf.ifds.len() as u64;
        // The IFDs of each channel plane at Z 0, T 0.
        let mut plane_ifds = Vec::with_capacity(px.channels.len());
        for c in 0..px.c_planes() {
            let plane = px.plane_index(c, 0, 0).expect("c < c_planes");
            let ifd = px.ifd_of(plane).filter(|&i| i < main).ok_or_else(|| {
                Error::format(at, format!("OME-XML channel {c} (plane {plane}) has no IFD in the file ({main} IFDs)"))
            })?;
            plane_ifds.push(ifd as usize);
        }
        let first = plane_ifds[0];
        if !is_tiled(tf, first) && !is_stripped(tf, first) {
            return Err(Error::unsupported(at, format!("OME-TIFF plane 0 (IFD {first}) is neither tiled nor stripped")));
        }
        // Without SubIFDs (older writers put reduced levels in the main chain), the levels are
        // exactly generic-tiff's, as OpenSlide reads the file.
        let main_chain = first == 0 && children[0].is_empty();
        let (levels, quickhash_tiles) = if main_chain {
            (GenericTiff.open(probe)?.levels, None)
        } else {
            let level_ifds: Vec<usize> = std::iter::once(first).chain(children[first].iter().copied()).collect();
            let mut levels = Vec::with_capacity(level_ifds.len());
            for (k, &i) in level_ifds.iter().enumerate() {
                let image = image_from_ifd(&flat, src, at, i, ImageRef::Level(k))?;
                let origin = if k == 0 { format!("IFD {i}") } else { format!("SubIFD {} of IFD {first}", k - 1) };
                levels.push(LayoutLevel { image, origin });
            }
            // OpenSlide's quickhash covers its only level, IFD 0.
            let l0 = levels[0].image.clone();
            (levels, Some(l0))
        };
        check_plane(&levels[0].image, &px, 0, at)?;
        // Channel planes need every level of every channel: SubIFD pyramids, or one level.
        let channels = if px.channels.len() > 1 && (!main_chain || levels.len() == 1) {
            let mut per_level: Vec<Vec<ImageIndex>> = vec![Vec::new(); levels.len()];
            for (c, &ifd) in plane_ifds.iter().enumerate() {
                if children[ifd].len() != children[first].len() {
                    return Err(Error::format(
                        at,
                        format!("OME-TIFF channel {c} (IFD {ifd}) has {} SubIFD levels, channel 0 has {}", children[ifd].len(), children[first].len()),
                    ));
                }
                for (k, i) in std::iter::once(ifd).chain(children[ifd].iter().copied()).enumerate() {
                    let img = image_from_ifd(&flat, src, at, i, ImageRef::Level(k))?;
                    if k == 0 {
                        check_plane(&img, &px, c, at)?;
                    }
                    per_level[k].push(img);
                }
            }
            let names = px.channels.iter().enumerate().map(|(c, (n, _))| n.clone().unwrap_or_else(|| format!("C{c}"))).collect();
            Some(ChannelPlanes { names, levels: per_level, samples: Vec::new(), colors: px.colors.clone() })
        } else {
            None
        };
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        for (k, v) in &px.attrs {
            if k != "ID" {
                properties.insert(format!("ome-tiff.{k}"), v.clone());
            }
        }
        properties.insert("ome-tiff.channel-count".into(), px.channels.len().to_string());
        for (c, (name, spp)) in px.channels.iter().enumerate() {
            if let Some(n) = name {
                properties.insert(format!("ome-tiff.channel[{c}].name"), n.clone());
            }
            properties.insert(format!("ome-tiff.channel[{c}].samples-per-pixel"), spp.to_string());
        }
        let mpp = px.mpp.or(resolution_mpp(tf, src, at)?);
        if let Some((x, y)) = px.mpp {
            properties.insert("ome-tiff.mpp-x".into(), format_double(x));
            properties.insert("ome-tiff.mpp-y".into(), format_double(y));
        }
        Ok(SlideLayout {
            icc: icc_ref(tf, src, at, 0)?,
            quickhash_chunks: quickhash_tiles.map(|img| img.grid.chunks().collect()),
            levels,
            properties,
            mpp,
            comment: Some(desc),
            quickhash: Some(quickhash_input(tf, src, at, 0)?),
            channels,
            ..SlideLayout::default()
        })
    }
}

/// The plane of channel `c` must have the Pixels size and the channel's samples per pixel.
fn check_plane(img: &ImageIndex, px: &Pixels, c: usize, at: &Location) -> Result<()> {
    let spp = px.channels[c].1;
    if (img.width, img.height) != (px.size[0], px.size[1]) || img.codec.samples_per_pixel as u64 != spp {
        return Err(Error::format(
            at,
            format!(
                "OME-XML channel {c} is {}x{} with {spp} samples per pixel, its IFD is {}x{} with {}",
                px.size[0], px.size[1], img.width, img.height, img.codec.samples_per_pixel
            ),
        ));
    }
    Ok(())
}

/// mpp from IFD 0's X/YResolution as the generic-tiff driver (inch or centimeter units).
fn resolution_mpp(tf: &TiffFile, src: &dyn crate::io::ByteSource, at: &Location) -> Result<Option<(f64, f64)>> {
    let r = tf.reader(src, at, 0);
    let um = match r.uint(tags::RESOLUTION_UNIT)?.unwrap_or(2) {
        2 => 25_400.0,
        3 => 10_000.0,
        _ => return Ok(None),
    };
    Ok(match (r.float(tags::X_RESOLUTION)?, r.float(tags::Y_RESOLUTION)?) {
        (Some(x), Some(y)) if x != 0.0 && y != 0.0 && x.is_finite() && y.is_finite() => Some((um / x, um / y)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ome_colors_are_signed_rgba_integers() {
        assert_eq!(ome_color("-1"), Some([255, 255, 255]));
        assert_eq!(ome_color("65535"), Some([0, 0, 255]));
        assert_eq!(ome_color(" -16776961 "), Some([255, 0, 0]));
        assert_eq!(ome_color("16711935"), Some([0, 255, 0]));
        assert_eq!(ome_color("4294967295"), Some([255, 255, 255]));
        for bad in ["", "red", "#FF0000", "4294967296", "-2147483649", "1.5"] {
            assert_eq!(ome_color(bad), None, "{bad:?}");
        }
    }

    fn pixels(order: &str, c: u32, z: u32, t: u32, inner: &str) -> Result<Pixels> {
        let xml = format!(
            "<OME xmlns=\"http://www.openmicroscopy.org/Schemas/OME/2016-06\"><Image ID=\"Image:0\"><Pixels ID=\"Pixels:0\" \
             DimensionOrder=\"{order}\" Type=\"uint16\" SizeX=\"8\" SizeY=\"8\" SizeC=\"{c}\" SizeZ=\"{z}\" SizeT=\"{t}\" \
             PhysicalSizeX=\"250\" PhysicalSizeXUnit=\"nm\" PhysicalSizeY=\"0.5\">{inner}</Pixels></Image></OME>"
        );
        parse_pixels(&xml, &Location::file("t.ome.tif"))
    }

    #[test]
    fn planes_follow_dimension_order_and_tiff_data() {
        // XYCZT, no TiffData: plane i in IFD i, C fastest.
        let p = pixels("XYCZT", 3, 2, 1, "").unwrap();
        assert_eq!((p.plane_index(2, 0, 0), p.plane_index(0, 1, 0)), (Some(2), Some(3)));
        assert_eq!(p.ifd_of(4), Some(4));
        // XYZCT: Z fastest, so channel c at Z 0 is plane 2c.
        let p = pixels("XYZCT", 3, 2, 1, "").unwrap();
        assert_eq!(p.plane_index(1, 0, 0), Some(2));
        assert_eq!(p.plane_index(3, 0, 0), None);
        // One TiffData per channel, IFDs in reverse order.
        let td = "<TiffData IFD=\"2\" FirstC=\"0\" PlaneCount=\"1\"/><TiffData IFD=\"1\" FirstC=\"1\" PlaneCount=\"1\"/><TiffData IFD=\"0\" FirstC=\"2\" PlaneCount=\"1\"/>";
        let p = pixels("XYCZT", 3, 1, 1, td).unwrap();
        assert_eq!((p.ifd_of(0), p.ifd_of(1), p.ifd_of(2)), (Some(2), Some(1), Some(0)));
        // A lone TiffData without PlaneCount covers every plane from its IFD.
        let p = pixels("XYCZT", 2, 1, 1, "<TiffData IFD=\"3\"/>").unwrap();
        assert_eq!(p.ifd_of(1), Some(4));
        // PhysicalSize units: nm converted to µm; no unit is µm.
        assert_eq!(p.mpp, Some((0.25, 0.5)));
    }

    #[test]
    fn inconsistent_pixels_are_format_errors() {
        for (order, inner) in [
            ("XYQZT", ""),
            ("XYCZT", "<Channel SamplesPerPixel=\"3\"/>"),                 // SizeC 2, 3 samples
            ("XYCZT", "<Channel SamplesPerPixel=\"0\"/><Channel/>"),     // zero samples
            ("XYCZT", "<TiffData FirstC=\"5\"/>"),                        // outside the planes
            ("XYCZT", "<TiffData IFD=\"x\"/>"),                           // not a number
        ] {
            let e = pixels(order, 2, 1, 1, inner).unwrap_err();
            assert!(matches!(e, Error::Format { .. }), "{order} {inner}: {e}");
        }
        let e = pixels("XYCZT", 1, 1, 1, "<TiffData><UUID FileName=\"other.ome.tif\">urn:uuid:x</UUID></TiffData>").unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        let e = pixels("XYCZT", 1, 1_000_000, 1_000_000, "").unwrap_err();
        assert!(matches!(e, Error::Limits { .. }), "{e}");
        let e = parse_pixels("<OME><Image/></OME>", &Location::file("t")).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e}");
        let e = parse_pixels("<NotOME/>", &Location::file("t")).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e}");
    }
}
