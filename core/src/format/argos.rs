//! ARGOS AVS (`.avs`, vendor `argos`): a tiled BigTIFF holding one pyramid per focal plane,
//! with metadata XML in tag 65000 of IFD 0.
//!
//! Format facts, from OpenSlide's ARGOS format page (openslide.org/formats/argos, which links
//! the vendor's "ARGOS AVS File Format" document) and checked against OpenSlide 4.0.1 on
//! generated files (`scripts/vendor_slides/argos.py`):
//! * detection: IFD 0 is tiled and tag 65000 of IFD 0 holds XML (text up to the first NUL;
//!   the scanners omit the NUL TIFF requires) whose root element is `Argos.Scan.Metadata`;
//!   XML that does not parse is not ARGOS (OpenSlide then tries the next format);
//! * pyramids: the tiled IFDs in file order are the pyramid of the lowest focal plane, then of
//!   each higher one; a tiled IFD at least as wide as the one before starts the next plane.
//!   The plane read is number `(MaxZ − MinZ) / 2` (integer division, counting from 0), from
//!   the XML's `MinZ` and `MaxZ` (both required integers); its IFDs are the levels;
//! * missing tiles: a zero TileOffset and TileByteCount (read as transparent);
//! * associated images: the second-to-last IFD is the `thumbnail` and the last the `macro`,
//!   when not tiled;
//! * properties: `argos.<path>` for every element of the XML without attributes whose only
//!   child is one text node (`<path>`: the element names from below the root joined by `.`);
//!   `openslide.objective-power` from `argos.ObjectiveMagnification` (an integer),
//!   `openslide.barcode` from `argos.Barcode`; `tiff.*`, `openslide.comment` and
//!   `openslide.mpp-x/-y` (centimeter or inch units) from the chosen plane's level-0 IFD;
//! * quickhash: the chosen plane's smallest level's tiles, the ASCII tags of its level-0 IFD,
//!   then the XML text and a NUL.
//!
//! Errors: `MinZ` / `MaxZ` missing or not integers, or a plane number past the planes in the
//! file ("No pyramid levels found") are `Format` errors naming the file, as in OpenSlide.

use std::collections::BTreeMap;

use roxmltree::Node;

use super::tiff_common::{image_from_ifd, is_tiled, levels_from_ifds, quickhash_input, resolution_mpp, tiff_properties};
use super::{parse_int64, FormatDriver, Probe, SlideLayout};
use crate::error::{Error, ImageRef, Location, Result};
use crate::io::ByteSource;
use crate::tiff::{tags, TiffFile};

/// The ARGOS driver (vendor name `argos`).
pub struct Argos;

/// The TIFF tag holding the metadata XML.
const METADATA_TAG: u16 = 65000;
/// The XML's root element.
const ROOT: &str = "Argos.Scan.Metadata";

/// Tag 65000 of IFD 0 as text (up to the first NUL), `None` when absent.
fn metadata(tf: &TiffFile, src: &dyn ByteSource, at: &Location) -> Result<Option<String>> {
    let Some(raw) = tf.reader(src, at, 0).raw(METADATA_TAG)? else { return Ok(None) };
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    Ok(Some(String::from_utf8_lossy(&raw[..end]).into_owned()))
}

/// Add `prefix.<name>` for every simple element below `node` (recursively), as OpenSlide's
/// ARGOS driver walks libxml2's tree: an element without attributes whose only child is text.
fn add_properties(node: Node<'_, '_>, prefix: &str, out: &mut BTreeMap<String, String>) {
    for child in node.children().filter(|c| c.is_element()) {
        let key = format!("{prefix}.{}", child.tag_name().name());
        add_properties(child, &key, out);
        let mut kids = child.children();
        if let (Some(only), None) = (kids.next(), kids.next()) {
            if child.attributes().len() == 0 && only.is_text() {
                out.insert(key, only.text().unwrap_or_default().to_string());
            }
        }
    }
}

impl FormatDriver for Argos {
    fn name(&self) -> &'static str {
        "argos"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        if !is_tiled(tf, 0) {
            return Err("IFD 0 is not tiled".into());
        }
        let xml = metadata(tf, probe.src, probe.at).map_err(|e| format!("cannot read tag 65000: {}", e.message()))?.ok_or("IFD 0 has no tag 65000")?;
        if !xml.contains(ROOT) {
            return Err(format!("{ROOT} not in the metadata of tag 65000"));
        }
        let doc = roxmltree::Document::parse(&xml).map_err(|e| format!("tag 65000: XML does not parse: {e}"))?;
        if doc.root_element().tag_name().name() != ROOT {
            return Err(format!("tag 65000: XML root element not {ROOT}"));
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let xml = metadata(tf, src, at)?.ok_or_else(|| Error::format(at, "IFD 0 has no tag 65000"))?;
        let doc = super::xml::parse(&xml, at, "ARGOS metadata (tag 65000)")?;
        let mut properties = BTreeMap::new();
        add_properties(doc.root_element(), "argos", &mut properties);
        let z = |k: &str| properties.get(k).map(|v| (v.clone(), parse_int64(v)));
        let (skip, minmax) = match (z("argos.MinZ"), z("argos.MaxZ")) {
            (Some((_, Some(lo))), Some((_, Some(hi)))) => (hi.checked_sub(lo).map(|d| d / 2), (lo, hi)),
            (Some((lo, _)), Some((hi, _))) => return Err(Error::format(at, format!("Parsing metadata XML: Couldn't parse focal plane indices: {lo}, {hi}"))),
            _ => return Err(Error::format(at, "Parsing metadata XML: Couldn't read focal plane indices")),
        };
        let mut skip = skip.ok_or_else(|| Error::format(at, format!("focal plane indices {} and {} overflow", minmax.0, minmax.1)))?;
        let n = tf.ifds.len();
        let mut level_ifds = Vec::new();
        let mut associated = BTreeMap::new();
        let mut prev_width = u64::MAX;
        for i in 0..n {
            if is_tiled(tf, i) {
                if skip < 0 {
                    continue;
                }
                let width = tf.reader(src, at, i).uint(tags::IMAGE_WIDTH)?.ok_or_else(|| Error::format(at, format!("IFD {i}: Can't read image width")))?;
                if width >= prev_width {
                    skip -= 1;
                }
                prev_width = width;
                if skip == 0 {
                    level_ifds.push(i);
                }
            } else {
                let name = match n - i {
                    2 => "thumbnail",
                    1 => "macro",
                    _ => continue,
                };
                associated.insert(name.to_string(), image_from_ifd(tf, src, at, i, ImageRef::Associated(name.into()))?);
            }
        }
        let Some(&base) = level_ifds.first() else {
            return Err(Error::format(at, format!("No pyramid levels found (focal plane {} of MinZ {} to MaxZ {})", (minmax.1 - minmax.0) / 2, minmax.0, minmax.1)));
        };
        let levels = levels_from_ifds(tf, src, at, &level_ifds)?;
        let objective_power = properties.get("argos.ObjectiveMagnification").and_then(|v| parse_int64(v)).map(|v| v as f64);
        let barcode = properties.get("argos.Barcode").cloned();
        tiff_properties(tf, src, at, base, &mut properties)?;
        let comment = properties.get("tiff.ImageDescription").cloned();
        let mut quickhash = quickhash_input(tf, src, at, base)?;
        quickhash.suffix = xml.clone().into_bytes();
        quickhash.suffix.push(0);
        Ok(SlideLayout {
            levels,
            associated,
            properties,
            mpp: resolution_mpp(tf, src, at, base)?,
            objective_power,
            barcode,
            comment,
            quickhash: Some(quickhash),
            ..SlideLayout::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::add_properties;
    use std::collections::BTreeMap;

    #[test]
    fn simple_elements_become_properties() {
        let xml = r#"<Argos.Scan.Metadata><A>1</A><B x="1">2</B><C><D>3</D></C><E/><F>a<G>b</G></F><H><!--c-->4</H></Argos.Scan.Metadata>"#;
        let doc = roxmltree::Document::parse(xml).unwrap();
        let mut p = BTreeMap::new();
        add_properties(doc.root_element(), "argos", &mut p);
        let keys: Vec<&str> = p.keys().map(String::as_str).collect();
        assert_eq!(keys, ["argos.A", "argos.C.D", "argos.F.G"]);
    }
}
