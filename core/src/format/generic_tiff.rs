//! Generic pyramidal tiled TIFF / BigTIFF.
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-generic-tiff.c`:
//! * detection: any TIFF or BigTIFF whose IFD 0 is tiled;
//! * pyramid levels: OpenSlide walks the main IFD chain (libtiff's `TIFFReadDirectory`) and
//!   keeps a directory when it is tiled and either is IFD 0 or has a NewSubfileType tag with
//!   the reduced-image bit (1) set; a tiled IFD without the tag, or with the bit clear, is
//!   skipped even when it has the shape of a pyramid level (so a pyramid written without
//!   NewSubfileType opens as one level), and so is every untiled IFD. Levels are then ordered
//!   by decreasing width (a stable sort: file order breaks ties); here the downsamples must
//!   also increase. Chains of up to 2^20 IFDs are read ([`crate::tiff::MAX_IFDS`]);
//! * pixels: what libtiff's RGBA interface (OpenSlide's reader for every tile that is not
//!   3-sample RGB/YCbCr JPEG) gives: CMYK converted as libtiff does, signed 8-bit samples read
//!   as their bytes, grey + alpha JPEG decoded without colour transform (see
//!   [`crate::codec::jpeg_raw`]), ImageDepth = TileDepth read as one slice;
//! * properties: `tiff.*` from IFD 0, `openslide.comment` = ImageDescription, and
//!   `openslide.mpp-x/-y` from X/YResolution when ResolutionUnit is inch or centimeter.

use std::collections::BTreeMap;

use super::tiff_common::{icc_ref, is_tiled, levels_from_ifds, quickhash_input, tiff_properties};
use super::{FormatDriver, Probe, SlideLayout};
use crate::error::{Error, Result};
use crate::tiff::tags;

/// The generic tiled-TIFF driver (tried last).
pub struct GenericTiff;

impl FormatDriver for GenericTiff {
    fn name(&self) -> &'static str {
        "generic-tiff"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        if !is_tiled(tf, 0) {
            return Err("IFD 0 is not tiled".into());
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let mut level_ifds = Vec::new();
        for i in 0..tf.ifds.len() {
            let reduced = tf.reader(src, at, i).uint(tags::NEW_SUBFILE_TYPE)?.unwrap_or(0) & 1 == 1;
            if is_tiled(tf, i) && (i == 0 || reduced) {
                level_ifds.push(i);
            }
        }
        // Order by decreasing width (stable: file order breaks ties).
        let mut widths = Vec::with_capacity(level_ifds.len());
        for &i in &level_ifds {
            widths.push(tf.reader(src, at, i).uint(tags::IMAGE_WIDTH)?.unwrap_or(0));
        }
        let mut order: Vec<usize> = (0..level_ifds.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(widths[k]));
        level_ifds = order.into_iter().map(|k| level_ifds[k]).collect();
        let levels = levels_from_ifds(tf, src, at, &level_ifds)?;
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, level_ifds[0], &mut properties)?;
        let comment = properties.get("tiff.ImageDescription").cloned();
        let r = tf.reader(src, at, level_ifds[0]);
        // mpp only when both resolutions are present and non-zero and the unit is inch (also the
        // default) or centimeter (OpenSlide 4.0.1).
        let unit_um = match r.uint(tags::RESOLUTION_UNIT)?.unwrap_or(2) {
            2 => Some(25_400.0),
            3 => Some(10_000.0),
            _ => None,
        };
        let mut mpp = None;
        if let (Some(um), Some(xr), Some(yr)) = (unit_um, r.float(tags::X_RESOLUTION)?, r.float(tags::Y_RESOLUTION)?) {
            if xr != 0.0 && yr != 0.0 && xr.is_finite() && yr.is_finite() {
                mpp = Some((um / xr, um / yr));
            }
        }
        Ok(SlideLayout {
            icc: icc_ref(tf, src, at, level_ifds[0])?,
            levels,
            properties,
            mpp,
            comment,
            quickhash: Some(quickhash_input(tf, src, at, 0)?),
            ..SlideLayout::default()
        })
    }
}
