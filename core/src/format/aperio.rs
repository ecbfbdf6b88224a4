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
//! * ICC (4.0.1): the profile of the first level is the slide's; the thumbnail gets it too
//!   when its ImageDescription names the same "ICC Profile" as level 0's; label and macro
//!   never have one. Profiles are referenced by byte range and read on request.

use std::collections::BTreeMap;

use super::tiff_common::{icc_ref, image_from_ifd, is_tiled, levels_from_ifds, quickhash_input, split_aperio_style, tiff_properties};
use super::{parse_double, FormatDriver, Probe, SlideLayout};
use crate::error::{Error, ImageRef, Result};
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

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let (level_ifds, assoc_ifds) = split_aperio_style(tf, src, at)?;
        if level_ifds.is_empty() {
            return Err(Error::format(at, "no tiled IFD"));
        }
        let levels = levels_from_ifds(tf, src, at, &level_ifds)?;
        let slide_icc = icc_ref(tf, src, at, level_ifds[0])?;
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
        for (k, v) in aperio_fields(&desc) {
            properties.insert(format!("aperio.{k}"), v);
        }
        let mpp = properties.get("aperio.MPP").and_then(|v| parse_double(v)).map(|m| (m, m));
        let objective_power = properties.get("aperio.AppMag").and_then(|v| parse_double(v));
        Ok(SlideLayout {
            levels,
            associated,
            properties,
            mpp,
            objective_power,
            comment: Some(desc),
            icc: slide_icc,
            associated_icc,
            quickhash: Some(quickhash_input(tf, src, at, 0)?),
            ..SlideLayout::default()
        })
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
