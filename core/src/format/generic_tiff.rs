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
//!
//! **Stripped pyramids** (not read by OpenSlide 4.0.1, which refuses a TIFF whose IFD 0 is not
//! tiled): when IFD 0 is stored in strips (StripOffsets, no TileWidth; TIFF 6.0 section 3),
//! has a non-zero size, no tiled IFD of the main chain is wider (else IFD 0 is a vendor file's
//! stripped associated image, e.g. a Ventana BIF's label) and the file is not NDPI, the file is
//! taken too. Each strip is a tile of `ImageWidth ×
//! RowsPerStrip` pixels ([`super::tiff_strips`]). Levels: IFD 0 and its SubIFDs (tag 330, TIFF
//! Technical Note 1) when it has any, else IFD 0 and every main-chain IFD, tiled or stripped,
//! whose NewSubfileType has the reduced-image bit (TIFF 6.0 section 8), ordered by decreasing
//! width as above. Properties, mpp and quickhash are taken as for tiled files. Files whose IFD
//! 0 is tiled keep OpenSlide's rules exactly (untiled IFDs are never levels).

use std::collections::BTreeMap;

use super::tiff_common::{icc_ref, is_stripped, is_tiled, levels_from_ifds, quickhash_input, tiff_properties};
use super::{FormatDriver, Probe, SlideLayout};
use crate::error::{Error, Location, Result};
use crate::io::ByteSource;
use crate::tiff::{tags, TiffFile};

/// The generic tiled-TIFF driver (tried last); also takes stripped pyramids (module docs).
pub struct GenericTiff;

/// Why the file is not one this driver takes, or `None`: IFD 0 must be tiled, or a stripped
/// pyramid's level 0: stored in strips, of non-zero size, not in a file of a vendor recognised
/// without a driver (NDPI: [`super::known`]), and with no wider tiled IFD in the main chain
/// (a vendor file whose IFD 0 is a stripped associated image, such as a Ventana BIF's label,
/// whose driver declined it). The message keeps "is not tiled" (the detection report's usual
/// answer).
fn not_an_image(probe: &Probe<'_>, tf: &TiffFile) -> Option<String> {
    let (src, at) = (probe.src, probe.at);
    if is_tiled(tf, 0) {
        return None;
    }
    if !is_stripped(tf, 0) {
        return Some("IFD 0 is not tiled".into());
    }
    if let Some(v) = super::known::vendor(probe) {
        return Some(format!("IFD 0 is not tiled (a {v} file)"));
    }
    let width = |i: usize| tf.reader(src, at, i).uint(tags::IMAGE_WIDTH);
    let r = tf.reader(src, at, 0);
    let (w, h) = match (width(0), r.uint(tags::IMAGE_LENGTH)) {
        (Ok(Some(w)), Ok(Some(h))) if w > 0 && h > 0 => (w, h),
        (Ok(w), Ok(h)) => {
            return Some(format!("IFD 0 is not tiled (its strips hold an image of {}x{} pixels)", w.unwrap_or(0), h.unwrap_or(0)))
        }
        _ => return Some("IFD 0 is not tiled (unreadable strip image size)".into()),
    };
    let wider_tiled = (1..tf.ifds.len()).find(|&i| is_tiled(tf, i) && width(i).ok().flatten().is_some_and(|wi| wi > w));
    wider_tiled.map(|i| format!("IFD 0 is not tiled (a stripped {w}x{h} image before the wider tiled IFD {i})"))
}

/// The level IFDs of a file whose IFD 0 is stored in strips (module docs), in `flat` (the
/// file with its SubIFDs appended, [`TiffFile::with_sub_ifds`]), unordered.
fn stripped_level_ifds(tf: &TiffFile, src: &dyn ByteSource, at: &Location) -> Result<(TiffFile, Vec<usize>)> {
    let subs = tf.sub_ifds(src, at)?;
    let (flat, children) = tf.with_sub_ifds(&subs);
    if !children[0].is_empty() {
        let ifds = std::iter::once(0).chain(children[0].iter().copied()).collect();
        return Ok((flat, ifds));
    }
    let mut ifds = vec![0];
    for i in 1..tf.ifds.len() {
        let reduced = tf.reader(src, at, i).uint(tags::NEW_SUBFILE_TYPE)?.unwrap_or(0) & 1 == 1;
        if reduced && (is_tiled(tf, i) || is_stripped(tf, i)) {
            ifds.push(i);
        }
    }
    Ok((flat, ifds))
}

impl FormatDriver for GenericTiff {
    fn name(&self) -> &'static str {
        "generic-tiff"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        match not_an_image(probe, tf) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let main = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        if let Some(why) = not_an_image(probe, main) {
            return Err(Error::unsupported(at, why));
        }
        let (flat, mut level_ifds);
        let tf = if is_tiled(main, 0) {
            level_ifds = Vec::new();
            for i in 0..main.ifds.len() {
                let reduced = main.reader(src, at, i).uint(tags::NEW_SUBFILE_TYPE)?.unwrap_or(0) & 1 == 1;
                if is_tiled(main, i) && (i == 0 || reduced) {
                    level_ifds.push(i);
                }
            }
            main
        } else {
            (flat, level_ifds) = stripped_level_ifds(main, src, at)?;
            &flat
        };
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
            quickhash: Some(quickhash_input(main, src, at, 0)?),
            ..SlideLayout::default()
        })
    }
}
