//! Aperio SVS (Leica Biosystems).
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-aperio.c` and Aperio's published
//! description format:
//! * detection: a TIFF whose IFD 0 is tiled and whose ImageDescription starts with "Aperio";
//! * pyramid levels: the tiled IFDs, in file order (largest first);
//! * associated images: IFD 1 is the thumbnail when it is not tiled; other untiled IFDs are the
//!   label or macro when the second line of their ImageDescription starts with "label " or
//!   "macro ";
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
                let desc = tf.reader(src, at, i).ascii(tags::IMAGE_DESCRIPTION)?.unwrap_or_default();
                let second = desc.split('\n').nth(1).unwrap_or("");
                if second.starts_with("label ") {
                    Some("label")
                } else if second.starts_with("macro ") {
                    Some("macro")
                } else {
                    None
                }
            };
            if let Some(n) = name {
                assoc_ifds.push((n.to_string(), i));
            }
        }
        let levels = build_levels(tf, src, at, &level_ifds)?;
        for w in levels.windows(2) {
            if w[1].image.width >= w[0].image.width && w[1].image.height >= w[0].image.height {
                return Err(Error::format(at, "Aperio levels do not decrease in size"));
            }
        }
        let slide_icc = icc_of(tf, src, at, level_ifds[0])?;
        let mut associated = BTreeMap::new();
        let mut associated_icc = BTreeMap::new();
        for (name, i) in assoc_ifds {
            let img = image_from_ifd(tf, src, at, i, ImageRef::Associated(name.clone()))?;
            // An associated image without its own profile shares the slide's, as OpenSlide
            // reports (`openslide.associated.thumbnail.icc-size` of the TCGA reference slide).
            if let Some(icc) = icc_of(tf, src, at, i)?.or_else(|| slide_icc.clone()) {
                associated_icc.insert(name.clone(), icc);
            }
            associated.insert(name, img);
        }
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        let desc = properties.get("tiff.ImageDescription").cloned().unwrap_or_default();
        properties.insert("openslide.comment".into(), desc.clone());
        for part in desc.split('|').skip(1) {
            if let Some((k, v)) = part.split_once('=') {
                properties.insert(format!("aperio.{}", k.trim()), v.trim().to_string());
            }
        }
        if let Some(mpp) = properties.get("aperio.MPP").and_then(|v| v.parse::<f64>().ok()) {
            let s = super::format_double(mpp);
            properties.insert("openslide.mpp-x".into(), s.clone());
            properties.insert("openslide.mpp-y".into(), s);
        }
        if let Some(mag) = properties.get("aperio.AppMag").and_then(|v| v.parse::<f64>().ok()) {
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
