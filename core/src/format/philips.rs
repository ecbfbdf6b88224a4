//! Philips TIFF (IntelliSite / UFS export).
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-philips-tiff.c`:
//! * detection: a TIFF whose IFD 0 Software starts with "Philips" and whose ImageDescription
//!   is XML with root `DataObject`, `ObjectType="DPUfsImport"`;
//! * exactly one scanned image of type `WSI` (a `DataObject` under
//!   `Attribute[@Name='PIM_DP_SCANNED_IMAGES']/Array` with an `Attribute` named
//!   `PIM_DP_IMAGE_TYPE` and an `Attribute` whose text is `WSI`), else an error;
//! * pyramid levels: the tiled IFDs in file order; each after the first must have the
//!   reduced-resolution bit of NewSubfileType; tiles of byte count 0 (or offset 0) are
//!   missing and read transparent (slides of several regions of interest are sparse);
//! * level sizes: the WSI's `PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE` holds one
//!   `DICOM_PIXEL_SPACING` per level (`"row" "column"` in mm, quotes stripped); level `i`'s
//!   downsample is `round((sx_i / sx_0 + sy_i / sy_0) / 2)` and its size level 0's divided by
//!   it, truncated (the TIFF sizes are padded to whole tiles); level 0 keeps its TIFF size.
//!   The tile grid is cut (or extended with missing tiles) to the new size; quickhash still
//!   hashes every tile of the lowest level's IFD;
//! * associated images: an untiled IFD whose ImageDescription starts with "Label" / "Macro";
//!   otherwise the base64 JPEG in the `PIM_DP_IMAGE_DATA` of the first `LABELIMAGE` /
//!   `MACROIMAGE` scanned image. Those bytes stay in the file: the image's one tile is the
//!   byte range of that XML text node inside the ImageDescription value, framed as
//!   [`TileStream::Base64`]; its size comes from the JPEG header, decoded at open. An XML
//!   image that cannot be located or decoded is left out (OpenSlide: non-fatal);
//! * properties: `tiff.*` of IFD 0 without `tiff.ImageDescription` (and no comment); from the
//!   XML, every leaf `Attribute` under the root as `philips.<Name>`, recursing into the first
//!   WSI scanned image (same prefix) and into each `PixelDataRepresentation` as
//!   `philips.PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE[i].<Name>`;
//! * `openslide.mpp-x/-y` = 1000 × the column / row spacing of `philips.DICOM_PIXEL_SPACING`;
//!   `openslide.objective-power` = the first `levels=` entry of
//!   `philips.DICOM_DERIVATION_DESCRIPTION` (dash-separated `key=value` items, stopping at
//!   `sourceFilename`) when it is 1..=200; `openslide.barcode` = base64-decoded
//!   `philips.PIM_DP_UFS_BARCODE`;
//! * quickhash: the lowest level's tiles, then the `tiff.*` strings of IFD 0.
//!
//! ImageDepth / TileDepth tags (Philips DP v1.1 writes the level count in both) are ignored,
//! as OpenSlide reads those files as 2-D images. No `openslide.bounds-*` or background colour
//! (OpenSlide sets none for Philips).

use std::collections::BTreeMap;
use std::sync::Arc;

use roxmltree::Node;

use super::tiff_common::{image_from_ifd, is_tiled, quickhash_input, tiff_properties};
use super::xml::{self, children, content, first_text};
use super::{parse_double, FormatDriver, LayoutLevel, Probe, SlideLayout};
use crate::codec::{base64_text, jpeg};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Grid, ImageIndex, Photometric, SampleBits, TileLoc, TileStream};
use crate::tiff::{tags, TiffFile};

/// The Philips TIFF driver.
pub struct Philips;

const SCANNED_IMAGES: &str = "PIM_DP_SCANNED_IMAGES";
const PIXEL_REPRESENTATIONS: &str = "PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE";

impl FormatDriver for Philips {
    fn name(&self) -> &'static str {
        "philips"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        let r = tf.reader(probe.src, probe.at, 0);
        let software = r.ascii(tags::SOFTWARE).map_err(|e| e.message())?.ok_or("IFD 0 has no Software tag")?;
        if !software.starts_with("Philips") {
            return Err("Software of IFD 0 does not start with \"Philips\"".into());
        }
        let desc = r.ascii(tags::IMAGE_DESCRIPTION).map_err(|e| e.message())?.ok_or("IFD 0 has no ImageDescription")?;
        let doc = roxmltree::Document::parse(&desc).map_err(|e| format!("ImageDescription is not XML: {e}"))?;
        let root = doc.root_element();
        if root.tag_name().name() != "DataObject" {
            return Err("XML root is not DataObject".into());
        }
        if root.attribute("ObjectType") != Some("DPUfsImport") {
            return Err("XML root ObjectType is not \"DPUfsImport\"".into());
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = &without_depth_tags(probe.tiff.map_err(|e| Error::format(at, e.to_string()))?);
        let desc = xml::description(tf, src, at, 0)?.ok_or_else(|| Error::format(at, "IFD 0 has no ImageDescription"))?;
        let doc = xml::parse(&desc.text, at, "ImageDescription")?;
        let root = doc.root_element();
        let wsi: Vec<Node> = scanned_images(root, "WSI").collect();
        if wsi.len() != 1 {
            return Err(Error::format(at, format!("expected one WSI image in the XML, found {}", wsi.len())));
        }
        let wsi = wsi[0];

        let mut level_ifds = Vec::new();
        let mut associated = BTreeMap::new();
        for i in 0..tf.ifds.len() {
            let r = tf.reader(src, at, i);
            if is_tiled(tf, i) {
                if !level_ifds.is_empty() && r.uint(tags::NEW_SUBFILE_TYPE)?.unwrap_or(0) & 1 == 0 {
                    return Err(Error::format(at, format!("IFD {i} is a tiled image after level 0 but not reduced-resolution")));
                }
                level_ifds.push(i);
                continue;
            }
            let d = r.ascii(tags::IMAGE_DESCRIPTION)?.unwrap_or_default();
            for (prefix, name) in [("Label", "label"), ("Macro", "macro")] {
                if d.starts_with(prefix) {
                    associated.insert(name.to_string(), image_from_ifd(tf, src, at, i, ImageRef::Associated(name.into()))?);
                }
            }
        }
        if level_ifds.is_empty() {
            return Err(Error::format(at, "no tiled IFD"));
        }
        let mut levels = Vec::with_capacity(level_ifds.len());
        for (k, &i) in level_ifds.iter().enumerate() {
            levels.push(LayoutLevel { image: image_from_ifd(tf, src, at, i, ImageRef::Level(k))?, origin: format!("IFD {i}") });
        }
        // OpenSlide hashes every tile of the lowest level's IFD, before the sizes are fixed.
        let quickhash_chunks = levels.last().map(|l| l.image.grid.chunks().collect());
        let downsamples = fix_level_sizes(&mut levels, wsi, at)?;

        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        properties.remove("tiff.ImageDescription");
        add_properties(root, "philips", &mut properties);
        let mpp = properties.get("philips.DICOM_PIXEL_SPACING").and_then(|s| pixel_spacing(s)).map(|(w, h)| (1e3 * w, 1e3 * h));
        let objective_power = properties.get("philips.DICOM_DERIVATION_DESCRIPTION").and_then(|d| objective_power(d)).map(f64::from);
        let barcode = properties
            .get("philips.PIM_DP_UFS_BARCODE")
            .and_then(|b| base64_text::decode(b.as_bytes()).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned());

        for (kind, name) in [("LABELIMAGE", "label"), ("MACROIMAGE", "macro")] {
            if associated.contains_key(name) {
                continue;
            }
            if let Some(img) = xml_associated(root, kind, &desc) {
                associated.insert(name.to_string(), img);
            }
        }
        Ok(SlideLayout {
            levels,
            associated,
            properties,
            mpp,
            objective_power,
            barcode,
            downsamples,
            quickhash: Some(quickhash_input(tf, src, at, 0)?),
            quickhash_chunks,
            ..SlideLayout::default()
        })
    }
}

/// `tf` without ImageDepth (32997) and TileDepth (32998): Philips DP v1.1 writes both with the
/// pyramid's level count in every IFD, and OpenSlide (through libtiff) reads such files as the
/// 2-D images they are.
fn without_depth_tags(tf: &TiffFile) -> TiffFile {
    let mut tf = tf.clone();
    for ifd in &mut tf.ifds {
        ifd.entries.remove(&tags::IMAGE_DEPTH);
        ifd.entries.remove(&TILE_DEPTH);
    }
    tf
}

/// TileDepth (SGI), the companion of [`tags::IMAGE_DEPTH`].
const TILE_DEPTH: u16 = 32998;

/// The scanned images (`DataObject`s under `PIM_DP_SCANNED_IMAGES/Array`) of type `kind`,
/// matching OpenSlide's XPath predicate: some `Attribute` named `PIM_DP_IMAGE_TYPE` and some
/// `Attribute` whose text is `kind`.
fn scanned_images<'a, 'i>(root: Node<'a, 'i>, kind: &'a str) -> impl Iterator<Item = Node<'a, 'i>> + 'a {
    children(root, "Attribute")
        .filter(|a| a.attribute("Name") == Some(SCANNED_IMAGES))
        .flat_map(|a| children(a, "Array"))
        .flat_map(|arr| children(arr, "DataObject"))
        .filter(move |d| is_image_of(*d, kind))
}

fn is_image_of(d: Node<'_, '_>, kind: &str) -> bool {
    let attrs = || children(d, "Attribute");
    attrs().any(|a| a.attribute("Name") == Some("PIM_DP_IMAGE_TYPE"))
        && attrs().any(|a| a.children().any(|t| t.is_text() && t.text() == Some(kind)))
}

/// OpenSlide's `add_properties` over the `Attribute` children of `node`.
fn add_properties(node: Node<'_, '_>, prefix: &str, out: &mut BTreeMap<String, String>) {
    for a in children(node, "Attribute") {
        let Some(name) = a.attribute("Name") else { continue };
        if name == SCANNED_IMAGES {
            // Only the first WSI scanned image, with the same prefix.
            let first = children(a, "Array").flat_map(|arr| children(arr, "DataObject")).find(|d| is_image_of(*d, "WSI"));
            if let Some(d) = first {
                add_properties(d, prefix, out);
            }
        } else if name == PIXEL_REPRESENTATIONS {
            let items = children(a, "Array").flat_map(|arr| children(arr, "DataObject"));
            for (i, d) in items.enumerate() {
                add_properties(d, &format!("{prefix}.{name}[{i}]"), out);
            }
        } else if !a.children().any(|c| c.is_element()) {
            out.insert(format!("{prefix}.{name}"), content(a));
        }
    }
}

/// A `DICOM_PIXEL_SPACING` value: two space-separated numbers, quotes stripped; (column,
/// row) spacing in mm, i.e. (x, y). `None` unless exactly two parts parse.
fn pixel_spacing(s: &str) -> Option<(f64, f64)> {
    let parts: Vec<&str> = s.split(' ').collect();
    if parts.len() != 2 {
        return None;
    }
    let num = |p: &str| parse_double(p.replace('"', " ").trim_matches(|c: char| c.is_ascii_whitespace()));
    Some((num(parts[1])?, num(parts[0])?))
}

/// The objective power from a derivation description (see the module docs).
fn objective_power(derivation: &str) -> Option<u32> {
    for item in derivation.split('-') {
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        };
        if k == "sourceFilename" {
            return None;
        }
        if k == "levels" {
            let first = v?.split(',').next()?;
            let n: u64 = first.parse().ok()?;
            return (1..=200).contains(&n).then_some(n as u32);
        }
    }
    None
}

/// Level sizes and downsamples from the XML pixel spacings (see the module docs); returns the
/// downsamples.
fn fix_level_sizes(levels: &mut [LayoutLevel], wsi: Node<'_, '_>, at: &Location) -> Result<Vec<f64>> {
    let spacings: Vec<Node> = children(wsi, "Attribute")
        .filter(|a| a.attribute("Name") == Some(PIXEL_REPRESENTATIONS))
        .flat_map(|a| children(a, "Array"))
        .flat_map(|arr| children(arr, "DataObject"))
        .filter(|d| d.attribute("ObjectType") == Some("PixelDataRepresentation"))
        .flat_map(|d| children(d, "Attribute"))
        .filter(|a| a.attribute("Name") == Some("DICOM_PIXEL_SPACING"))
        .flat_map(|a| a.children().filter(|t| t.is_text()))
        .collect();
    if spacings.len() != levels.len() {
        return Err(Error::format(at, format!("the XML gives {} level pixel spacings for {} tiled IFDs", spacings.len(), levels.len())));
    }
    let (w0, h0) = (levels[0].image.width, levels[0].image.height);
    let mut first = (0.0, 0.0);
    let mut downsamples = Vec::with_capacity(levels.len());
    for (i, t) in spacings.iter().enumerate() {
        let (w, h) = pixel_spacing(t.text().unwrap_or("")).ok_or_else(|| Error::format(at, format!("level {i}: cannot parse pixel spacing")))?;
        if i == 0 {
            first = (w, h);
            downsamples.push(1.0);
            continue;
        }
        let d = ((w / first.0) + (h / first.1)) / 2.0;
        let d = d.round();
        if !(d.is_finite() && d >= 1.0) {
            return Err(Error::format(at, format!("level {i}: pixel spacing gives downsample {d}")));
        }
        let (nw, nh) = ((w0 as f64 / d) as u64, (h0 as f64 / d) as u64);
        if nw == 0 || nh == 0 {
            return Err(Error::format(at, format!("level {i}: downsample {d} leaves a {nw}x{nh} level")));
        }
        levels[i].image = resized(&levels[i].image, nw, nh, &at.clone().with_image(ImageRef::Level(i)))?;
        downsamples.push(d);
    }
    Ok(downsamples)
}

/// `img` with size `w` × `h`: the tile grid cut to the cells the new size covers, or extended
/// with missing tiles.
fn resized(img: &ImageIndex, w: u64, h: u64, at: &Location) -> Result<ImageIndex> {
    let (tw, th) = (img.tile_width as u64, img.tile_height as u64);
    let (cols, rows) = (w.div_ceil(tw), h.div_ceil(th));
    let planes = img.planes();
    let cells = cols.checked_mul(rows).filter(|&n| n <= 1 << 32).ok_or_else(|| Error::limits(at, format!("{cols}x{rows} tiles")))?;
    let mut tiff_order = Vec::with_capacity(cells as usize * planes);
    for p in 0..planes {
        for r in 0..rows {
            for c in 0..cols {
                tiff_order.push(img.grid.locs(c, r).get(p).copied().unwrap_or_default());
            }
        }
    }
    let grid = Grid::regular(cols, rows, planes, tiff_order).ok_or_else(|| Error::format(at, "tile grid"))?;
    Ok(ImageIndex { width: w, height: h, grid, ..img.clone() })
}

/// The label or macro stored as base64 JPEG in the XML, when it can be located and its JPEG
/// header decodes (OpenSlide leaves the image out otherwise).
fn xml_associated(root: Node<'_, '_>, kind: &str, desc: &xml::Description) -> Option<ImageIndex> {
    let image = scanned_images(root, kind).next()?;
    let data = children(image, "Attribute").find(|a| a.attribute("Name") == Some("PIM_DP_IMAGE_DATA"))?;
    let text = first_text(data)?;
    let range = text.range();
    let offset = desc.offset?.checked_add(range.start as u64)?;
    let loc = TileLoc::primary(offset, range.len() as u64);
    // The text node's raw span (character references included) is what the file holds
    // there: `desc.offset` is only set when text positions are file positions.
    let jpeg_bytes = base64_text::decode(&desc.text.as_bytes()[range]).ok()?;
    let hdr = jpeg::read_header(&jpeg_bytes).ok()?;
    // TJSAMP_GRAY (3): one component; otherwise YCbCr-coded colour, as libjpeg assumes for a
    // JFIF stream.
    let (photometric, spp) = if hdr.subsamp == 3 { (Photometric::MinIsBlack, 1) } else { (Photometric::YCbCr, 3) };
    if hdr.width == 0 || hdr.height == 0 || hdr.width as u64 > super::MAX_TILE_EDGE || hdr.height as u64 > super::MAX_TILE_EDGE {
        return None;
    }
    Some(ImageIndex {
        width: hdr.width as u64,
        height: hdr.height as u64,
        tile_width: hdr.width,
        tile_height: hdr.height,
        tiled: false,
        codec: Arc::new(CodecInfo {
            compression: Compression::Jpeg,
            compression_tag: 7,
            photometric,
            samples_per_pixel: spp,
            sample_bits: SampleBits::U8,
            alpha: Alpha::None,
            predictor: 1,
            planar_separate: false,
            stream: TileStream::Base64,
            ycbcr_subsampling: (2, 2),
        }),
        grid: Grid::regular(1, 1, 1, vec![loc])?,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{objective_power, pixel_spacing, resized};
    use crate::error::Location;
    use crate::index::{CodecInfo, Grid, ImageIndex, TileLoc};

    #[test]
    fn resized_grids_are_cut_or_extended_with_missing_tiles() {
        let locs = (1..=6).map(|o| TileLoc::primary(o * 10, 5)).collect();
        let img = ImageIndex { width: 96, height: 64, tile_width: 32, tile_height: 32, tiled: true, codec: Arc::new(CodecInfo::uncompressed_rgb()), grid: Grid::regular(3, 2, 1, locs).unwrap() };
        let at = Location::file("t.tiff");
        let cut = resized(&img, 40, 20, &at).unwrap();
        assert_eq!((cut.width, cut.height, cut.grid.dims()), (40, 20, (2, 1)));
        assert_eq!(cut.grid.chunks().map(|t| t.offset).collect::<Vec<_>>(), vec![10, 20]);
        let grown = resized(&img, 130, 64, &at).unwrap();
        assert_eq!(grown.grid.dims(), (5, 2));
        assert!(grown.tile(3, 0).is_none() && grown.tile(4, 1).is_none());
        assert_eq!(grown.tile(2, 1).unwrap().locs[0].offset, 60);
    }

    #[test]
    fn spacing_and_objective_parse_as_openslide() {
        assert_eq!(pixel_spacing("\"0.00025\" \"0.0005\""), Some((0.0005, 0.00025)));
        assert_eq!(pixel_spacing("\"0.00025\"  \"0.0005\""), None);
        assert_eq!(pixel_spacing("0.1"), None);
        assert_eq!(objective_power("tiff-useBigTIFF=1-levels=40,10002-q80"), Some(40));
        assert_eq!(objective_power("tiff-levels=10003,10002"), None);
        assert_eq!(objective_power("sourceFilename=\"a-levels=20\"-levels=20"), None);
    }
}
