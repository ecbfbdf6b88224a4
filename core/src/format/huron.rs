//! Huron Digital Pathology TissueScope TIFF (`.tif`, vendor `huron`): a tiled pyramid laid
//! out as Aperio's, with newline-separated `key = value` metadata in IFD 0's ImageDescription.
//!
//! Format facts, from OpenSlide's Huron format page (openslide.org/formats/huron) and checked
//! against OpenSlide 4.0.1 on generated files (`scripts/vendor_slides/huron.py`):
//! * detection: IFD 0 is tiled and its Make (the page's "ImageMake", tag 271) starts with
//!   `Huron`;
//! * levels: the tiled IFDs, in file order; associated images (stripped IFDs): IFD 1 is the
//!   `thumbnail`; another stripped IFD is the `label` when its NewSubfileType is 1 and the
//!   `macro` when it is 9;
//! * properties: IFD 0's description split on `\n`; every line holding `=` becomes
//!   `huron.<key>` (split at the first `=`, both sides stripped of ASCII whitespace, so `\r`
//!   of CRLF lines goes too; the first line counts like any other; later duplicates win; an
//!   empty key gives `huron.`). OpenSlide 4.0.1 reports neither `tiff.ImageDescription` nor
//!   `openslide.comment` for these slides (the description still enters the quickhash);
//! * `openslide.mpp-x/-y` from IFD 0's X/YResolution (centimeter or inch units); no
//!   objective power;
//! * quickhash: OpenSlide's TIFF rule (the last level's tiles, IFD 0's ASCII tags).
//!
//! Known difference: a tile with a zero byte count reads as background here (slidestream's
//! rule for missing tiles); OpenSlide 4.0.1 fails the read ("Cannot read raw tile").

use std::collections::BTreeMap;

use super::tiff_common::{image_from_ifd, is_tiled, levels_from_ifds, quickhash_input, resolution_mpp, split_aperio_style, tiff_properties};
use super::{g_strstrip, FormatDriver, Probe, SlideLayout};
use crate::error::{Error, ImageRef, Result};
use crate::tiff::tags;

/// The Huron driver (vendor name `huron`).
pub struct Huron;

/// The `huron.<key>` fields of a description: lines split on `\n`, each holding `=`.
fn description_fields(desc: &str) -> Vec<(String, String)> {
    desc.split('\n').filter_map(|l| l.split_once('=')).map(|(k, v)| (g_strstrip(k).to_string(), g_strstrip(v).to_string())).collect()
}

impl FormatDriver for Huron {
    fn name(&self) -> &'static str {
        "huron"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        if !is_tiled(tf, 0) {
            return Err("IFD 0 is not tiled".into());
        }
        let make = tf.reader(probe.src, probe.at, 0).ascii(tags::MAKE).map_err(|e| format!("cannot read Make: {e}"))?.ok_or("IFD 0 has no Make tag")?;
        if !make.starts_with("Huron") {
            return Err("Make of IFD 0 does not start with \"Huron\"".into());
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let (level_ifds, assoc_ifds) = split_aperio_style(tf, src, at)?;
        let mut associated = BTreeMap::new();
        for (n, i) in assoc_ifds {
            associated.insert(n.clone(), image_from_ifd(tf, src, at, i, ImageRef::Associated(n))?);
        }
        if level_ifds.is_empty() {
            return Err(Error::format(at, "no tiled IFD"));
        }
        let levels = levels_from_ifds(tf, src, at, &level_ifds)?;
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        let desc = properties.remove("tiff.ImageDescription").unwrap_or_default();
        for (k, v) in description_fields(&desc) {
            properties.insert(format!("huron.{k}"), v);
        }
        Ok(SlideLayout {
            levels,
            associated,
            properties,
            mpp: resolution_mpp(tf, src, at, 0)?,
            quickhash: Some(quickhash_input(tf, src, at, 0)?),
            ..SlideLayout::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::description_fields;

    #[test]
    fn description_lines_become_fields() {
        let f = description_fields("A = 1\r\n = empty key\nno equals\nB=2=3");
        assert_eq!(f, vec![("A".into(), "1".into()), ("".into(), "empty key".into()), ("B".into(), "2=3".into())]);
    }
}
