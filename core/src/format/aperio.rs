//! Aperio SVS (Leica Biosystems).
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-aperio.c` and Aperio's published
//! description format:
//! * detection: a TIFF whose IFD 0 is tiled and whose ImageDescription starts with "Aperio";
//! * pyramid levels: the tiled IFDs, in file order (largest first);
//! * associated images (4.0.1 rules): IFD 1 is the thumbnail when it is not tiled; another
//!   untiled IFD is the label when its NewSubfileType is 1 and the macro when it is 9;
//! * properties: ImageDescription split on '|'; every part after the first that holds
//!   "key = value" becomes `aperio.key` (later duplicates win); `openslide.mpp-x/-y` from
//!   `aperio.MPP`, `openslide.objective-power` from `aperio.AppMag`;
//! * JPEG tiles are RGB-coded when Photometric = RGB (component ids 0,1,2, no Adobe marker);
//!   compression 33003 is JPEG 2000 holding YCbCr, 33005 JPEG 2000 holding RGB;
//! * ICC: the profile of IFD 0 is the slide's and also that of associated images lacking one.

use std::collections::BTreeMap;

use super::{add_standard_properties, build_levels, icc_of, image_from_ifd, is_tiled, tiff_properties, FormatDriver, Probe};
use crate::error::{Error, ImageRef, Result};
use crate::index::SlideIndex;
use crate::tiff::tags;

/// The Aperio SVS driver.
pub struct Aperio;

impl FormatDriver for Aperio {
    fn name(&self) -> &'static str {
        "aperio"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        let desc = tf
            .reader(probe.src, probe.at, 0)
            .ascii(tags::IMAGE_DESCRIPTION)
            .map_err(|e| format!("cannot read ImageDescription: {e}"))?
            .ok_or("IFD 0 has no ImageDescription")?;
        if !desc.starts_with("Aperio") {
            return Err("ImageDescription of IFD 0 does not start with \"Aperio\"".into());
        }
        if !is_tiled(tf, 0) {
            return Err("IFD 0 is not tiled".into());
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideIndex> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let mut level_ifds = Vec::new();
        let mut assoc_ifds = Vec::new();
        for i in 0..tf.ifds.len() {
            if is_tiled(tf, i) {
                level_ifds.push(i);
                continue;
            }
            let name = if i == 1 {
                Some("thumbnail")
            } else {
                match tf.reader(src, at, i).uint(tags::NEW_SUBFILE_TYPE)? {
                    Some(1) => Some("label"),
                    Some(9) => Some("macro"),
                    _ => None,
                }
            };
            if let Some(n) = name {
                assoc_ifds.push((n.to_string(), i));
            }
        }
        if level_ifds.is_empty() {
            return Err(Error::format(at, "no tiled IFD"));
        }
        let levels = build_levels(tf, src, at, &level_ifds)?;
        let slide_icc = icc_of(tf, src, at, level_ifds[0])?;
        let mut associated = BTreeMap::new();
        let mut associated_icc = BTreeMap::new();
        for (name, i) in assoc_ifds {
            let img = image_from_ifd(tf, src, at, i, ImageRef::Associated(name.clone()))?;
            // OpenSlide 4.0.1 gives the thumbnail the slide's profile when its description names
            // the same "ICC Profile" as level 0's; label and macro never get one.
            if name == "thumbnail" {
                let icc_name = |ifd: usize| -> Result<Option<String>> {
                    let d = tf.reader(src, at, ifd).ascii(tags::IMAGE_DESCRIPTION)?.unwrap_or_default();
                    Ok(aperio_fields(&d).into_iter().rev().find(|(k, _)| k == "ICC Profile").map(|(_, v)| v))
                };
                if let (Some(icc), Some(a), Some(b)) = (&slide_icc, icc_name(level_ifds[0])?, icc_name(i)?) {
                    if a == b {
                        associated_icc.insert(name.clone(), icc.clone());
                    }
                }
            }
            associated.insert(name, img);
        }
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        let desc = properties.get("tiff.ImageDescription").cloned().unwrap_or_default();
        properties.insert("openslide.comment".into(), desc.clone());
        for (k, v) in aperio_fields(&desc) {
            properties.insert(format!("aperio.{k}"), v);
        }
        if let Some(mpp) = properties.get("aperio.MPP").and_then(|v| super::parse_double(v)) {
            let s = super::format_double(mpp);
            properties.insert("openslide.mpp-x".into(), s.clone());
            properties.insert("openslide.mpp-y".into(), s);
        }
        if let Some(mag) = properties.get("aperio.AppMag").and_then(|v| super::parse_double(v)) {
            properties.insert("openslide.objective-power".into(), super::format_double(mag));
        }
        let mut idx = SlideIndex {
            path: at.path.clone(),
            file_len: src.len(),
            vendor: "aperio",
            icc_profile: slide_icc,
            levels,
            associated,
            properties,
            associated_icc,
        };
        add_standard_properties(&mut idx);
        super::quickhash::add_quickhash(tf, src, at, &mut idx)?;
        Ok(idx)
    }
}

/// The `key = value` fields of an Aperio ImageDescription: the parts after the first `|`, split
/// at the first `=`, both sides trimmed of ASCII whitespace; parts without `=` are skipped.
fn aperio_fields(desc: &str) -> Vec<(String, String)> {
    desc.split('|')
        .skip(1)
        .filter_map(|part| part.split_once('='))
        .map(|(k, v)| (k.trim_matches(|c: char| c.is_ascii_whitespace()).to_string(), v.trim_matches(|c: char| c.is_ascii_whitespace()).to_string()))
        .collect()
}
