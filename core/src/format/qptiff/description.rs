//! The XML ImageDescription of one QPTIFF page (`PerkinElmer-QPI-ImageDescription`), as the
//! driver reads it: the page's `ImageType` and every field, flattened to dotted paths.
//!
//! Format facts (public sources, no code taken): Akoya/PerkinElmer write, in every page's
//! ImageDescription (TIFF tag 270), an XML document whose root element is
//! `PerkinElmer-QPI-ImageDescription` (tifffile's `is_qpi` and QPI series, 2026.3.3; Bio-Formats'
//! "PerkinElmer Vectra QPTIFF" format page and the PerkinElmer "PKI Image Format" document it
//! links). Its child elements include `DescriptionVersion`, `AcquisitionSoftware`, `ImageType`
//! (`FullResolution`, `Thumbnail`, `ReducedResolution`, `Overview`, `Label`), `Identifier`,
//! `SlideID`, `Barcode`, `ComputerName`, `IsUnmixedComponent`, `ExposureTime`, `SignalUnits`,
//! `Name` (the channel's name, e.g. a fluorophore), `Biomarker` (PhenoCycler / Fusion files:
//! the marker), `Color` (the channel's display colour as `R,G,B`, decimal 0-255), `Objective`
//! (e.g. `20x`), `ExcitationFilter` / `EmissionFilter` (nested: name, bands...), `ScanProfile`
//! and `ValidationCode`. Real files declare `encoding="utf-16"` while the tag holds 8-bit
//! text; the declaration is not used to decode it (the TIFF ASCII bytes are read as UTF-8).

use crate::error::{Error, Location, Result};

/// The root element of a QPTIFF page description.
pub(crate) const ROOT: &str = "PerkinElmer-QPI-ImageDescription";
/// Largest description parsed, in bytes (real ones are a few KiB; `ScanProfile` may be larger).
const MAX_XML_BYTES: usize = crate::limits::LIMITS.xml_bytes;
/// Most fields taken from one description (nested elements included).
const MAX_FIELDS: usize = crate::limits::LIMITS.xml_fields;
/// Deepest element nesting flattened (deeper elements are taken as their text content).
const MAX_DEPTH: usize = crate::limits::LIMITS.xml_depth;

/// What the driver takes from one page's description.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PageDescription {
    /// `ImageType`, trimmed (`FullResolution`, `Thumbnail`, `ReducedResolution`, `Overview`,
    /// `Label`, or what the file says); `None` when absent.
    pub image_type: Option<String>,
    /// Every field in document order as (dotted path, trimmed text): a leaf element's path is
    /// its ancestors' names below the root joined by `.` (`ExcitationFilter.Name`); an element
    /// repeated among its siblings gets `[k]` (`ExposureTimeArray.Value[2]`).
    pub fields: Vec<(String, String)>,
}

impl PageDescription {
    /// The text of field `path`, if present.
    pub fn get(&self, path: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == path).map(|(_, v)| v.as_str())
    }

    /// The channel name: `Biomarker` (or `Biomarker.Name`) when non-empty, else `Name` when
    /// non-empty; `None` otherwise.
    pub fn channel_name(&self) -> Option<String> {
        ["Biomarker", "Biomarker.Name", "Name"].iter().find_map(|k| self.get(k).filter(|v| !v.is_empty()).map(String::from))
    }

    /// The display colour from `Color` (`R,G,B`, each a decimal 0-255), `None` when absent or
    /// malformed.
    pub fn color(&self) -> Option<[u8; 3]> {
        let parts: Vec<&str> = self.get("Color")?.split(',').map(str::trim).collect();
        match parts.as_slice() {
            [r, g, b] => Some([r.parse().ok()?, g.parse().ok()?, b.parse().ok()?]),
            _ => None,
        }
    }
}

/// Whether `text` looks like a QPTIFF description (its root element's start tag is there).
pub(crate) fn is_qpi(text: &str) -> bool {
    text.trim_start().starts_with('<') && text.contains(&format!("<{ROOT}"))
}

/// Parse one page's description.
///
/// `page` names the page in messages (`IFD 3`).
///
/// # Errors
/// `Format` at `at` when the XML does not parse or its root element is not
/// `PerkinElmer-QPI-ImageDescription`; `Limits` for a description over 16 MiB or with more than
/// 4096 fields.
pub(crate) fn parse(text: &str, page: &str, at: &Location) -> Result<PageDescription> {
    if text.len() > MAX_XML_BYTES {
        return Err(Error::limits(at, format!("QPTIFF ImageDescription of {page}: {} bytes (at most {MAX_XML_BYTES})", text.len())));
    }
    let doc =
        roxmltree::Document::parse(text).map_err(|e| Error::format(at, format!("QPTIFF ImageDescription of {page}: XML does not parse: {e}")))?;
    let root = doc.root_element();
    if root.tag_name().name() != ROOT {
        return Err(Error::format(at, format!("QPTIFF ImageDescription of {page}: root element {:?}, not {ROOT}", root.tag_name().name())));
    }
    let mut fields = Vec::new();
    flatten(root, "", 0, &mut fields, page, at)?;
    let image_type = fields.iter().find(|(k, _)| k == "ImageType").map(|(_, v)| v.clone());
    Ok(PageDescription { image_type, fields })
}

fn flatten(node: roxmltree::Node<'_, '_>, prefix: &str, depth: usize, out: &mut Vec<(String, String)>, page: &str, at: &Location) -> Result<()> {
    let kids: Vec<_> = node.children().filter(|c| c.is_element()).collect();
    if out.len() + kids.len() > MAX_FIELDS {
        return Err(Error::limits(at, format!("QPTIFF ImageDescription of {page} with more than {MAX_FIELDS} fields")));
    }
    // (siblings of that name, seen so far) per element name.
    let mut names: std::collections::HashMap<&str, (usize, usize)> = std::collections::HashMap::new();
    for c in &kids {
        names.entry(c.tag_name().name()).or_default().0 += 1;
    }
    for c in &kids {
        let name = c.tag_name().name();
        let (total, seen) = names.get_mut(name).expect("counted");
        let key = if *total > 1 { format!("{prefix}{name}[{seen}]") } else { format!("{prefix}{name}") };
        *seen += 1;
        if c.children().any(|g| g.is_element()) && depth + 1 < MAX_DEPTH {
            flatten(*c, &format!("{key}."), depth + 1, out, page, at)?;
        } else {
            if out.len() >= MAX_FIELDS {
                return Err(Error::limits(at, format!("QPTIFF ImageDescription of {page} with more than {MAX_FIELDS} fields")));
            }
            let text: String = c.descendants().filter(|d| d.is_text()).filter_map(|d| d.text()).collect();
            out.push((key, text.trim().to_string()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Location {
        Location::file("t.qptiff")
    }

    #[test]
    fn fields_are_flattened_with_repeats_indexed() {
        let xml = "<?xml version=\"1.0\" encoding=\"utf-16\"?>\r\n<PerkinElmer-QPI-ImageDescription>\r\n  <ImageType> FullResolution </ImageType>\
                   <Name>Opal 520</Name><Biomarker>CD8</Biomarker><Color>0,255, 12</Color>\
                   <ExcitationFilter><Name>FITC</Name><Bands><Band><Cuton>460</Cuton></Band><Band><Cuton>490</Cuton></Band></Bands></ExcitationFilter>\
                   <Barcode /></PerkinElmer-QPI-ImageDescription>";
        let d = parse(xml, "IFD 0", &at()).unwrap();
        assert_eq!(d.image_type.as_deref(), Some("FullResolution"));
        assert_eq!(d.get("ExcitationFilter.Name"), Some("FITC"));
        assert_eq!(d.get("ExcitationFilter.Bands.Band[1].Cuton"), Some("490"));
        assert_eq!(d.get("Barcode"), Some(""));
        assert_eq!(d.channel_name().as_deref(), Some("CD8"));
        assert_eq!(d.color(), Some([0, 255, 12]));
        assert!(is_qpi(xml));
    }

    #[test]
    fn names_fall_back_and_bad_colours_are_none() {
        let d = parse(
            "<PerkinElmer-QPI-ImageDescription><Name>DAPI</Name><Biomarker/><Color>1,2</Color></PerkinElmer-QPI-ImageDescription>",
            "IFD 0",
            &at(),
        )
        .unwrap();
        assert_eq!(d.channel_name().as_deref(), Some("DAPI"));
        assert_eq!(d.color(), None);
        assert_eq!(d.image_type, None);
        let d = parse("<PerkinElmer-QPI-ImageDescription><Color>1,2,256</Color></PerkinElmer-QPI-ImageDescription>", "IFD 0", &at()).unwrap();
        assert_eq!((d.channel_name(), d.color()), (None, None));
    }

    #[test]
    fn broken_or_foreign_xml_is_a_format_error() {
        for xml in ["<PerkinElmer-QPI-ImageDescription><Name>x</PerkinElmer-QPI-ImageDescription>", "<OME/>", "not xml"] {
            let e = parse(xml, "IFD 0", &at()).unwrap_err();
            assert!(matches!(e, Error::Format { .. }), "{xml}: {e}");
        }
        let many: String = (0..5000).map(|i| format!("<F{i}>1</F{i}>")).collect();
        let e = parse(&format!("<{ROOT}>{many}</{ROOT}>"), "IFD 0", &at()).unwrap_err();
        assert!(matches!(e, Error::Limits { .. }), "{e}");
    }
}
