//! Akoya / PerkinElmer QPTIFF (Vectra, Vectra Polaris / PhenoImager, PhenoCycler): a TIFF whose
//! pages each carry an XML ImageDescription with root `PerkinElmer-QPI-ImageDescription`
//! ([`description`] lists its fields and their sources).
//!
//! OpenSlide 4.0.1 has no QPTIFF driver (its generic-tiff driver would read a tiled file's
//! first page only, as one RGB level). Format facts, from public sources only (tifffile
//! 2026.3.3's QPI series and `is_qpi`; Bio-Formats' "PerkinElmer Vectra QPTIFF" page and the
//! "PKI Image Format" document it links; Akoya's scanner brochures):
//! * detection: IFD 0 is tiled or stored in strips and its ImageDescription is XML whose root
//!   element is `PerkinElmer-QPI-ImageDescription` (scanners also write Software
//!   `PerkinElmer-QPI...`, tifffile's test; it is reported as `tiff.Software` but not required,
//!   so files re-saved by other tools still open). Broken XML whose text names the root is still
//!   taken (open reports it as a `Format` error);
//! * pages, in the main IFD chain, classified by their own description's `ImageType`:
//!   `FullResolution` pages are level 0, one page per channel: a single RGB page (brightfield)
//!   or N greyscale pages (fluorescence, 8- or 16-bit); `ReducedResolution` pages are the
//!   reduced levels, consecutive pages of the same size forming one level (one page per channel
//!   again); `Thumbnail`, `Overview` and `Label` are the associated images `thumbnail`, `macro`
//!   and `label` (OpenSlide's names; the first of each). IFD 0 is level 0's first channel even
//!   without an `ImageType`; other pages without a QPI description or with another `ImageType`
//!   are not read. tifffile groups pages by shape and file position instead (full-resolution
//!   pages, thumbnail, reduced levels only when page 0 is tiled, macro, label); for the
//!   scanners' files both give the same levels, and here a stripped file's reduced levels are
//!   read too;
//! * channels (greyscale pages): [`crate::index::ChannelPlanes`], so `read_region_channels`
//!   returns the stored 8- or 16-bit samples and `channel_names` the names (`Biomarker`, else
//!   `Name`, else `C<i>`); `read_region` shows channel 0 as grey (16-bit samples keep their
//!   high byte), as for OME-TIFF. Colours are properties (`qptiff.channel[i].color-rgb`);
//! * `openslide.mpp-x/-y` from IFD 0's X/YResolution (the scanners write pixels per
//!   centimeter, ResolutionUnit 3; inch is read too); `openslide.objective-power` from
//!   `Objective` (`20x`, `20x [20x]`: the leading number); `openslide.barcode` from a non-empty
//!   `Barcode`; `openslide.comment` = IFD 0's description;
//! * properties: `tiff.*` of IFD 0; `qptiff.<field>` for every field of IFD 0's description
//!   (dotted paths for nested elements, [`description::PageDescription::fields`]);
//!   `qptiff.channel-count`; per channel `qptiff.channel[i].name` (the channel name above),
//!   `qptiff.channel[i].color-rgb` (`RRGGBB` from `Color`, when well formed) and
//!   `qptiff.channel[i].<field>` for each field of its level-0 page except `ScanProfile`
//!   (the same on every page).
//!
//! Errors: a reduced level whose page count differs from level 0's channel count, channel pages
//! of different depths, several pages with more than one sample, and broken XML are `Format`
//! (or `Unsupported`) errors naming the IFDs; sizes are checked as for every TIFF
//! ([`super::tiff_common::image_from_ifd`]).

mod description;

use std::collections::BTreeMap;

use super::tiff_common::{icc_ref, image_from_ifd, is_stripped, is_tiled, quickhash_input, tiff_properties};
use super::{format_double, parse_double, FormatDriver, LayoutLevel, Probe, SlideLayout};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{ChannelPlanes, ImageIndex};
use crate::io::ByteSource;
use crate::tiff::{tags, TiffFile};
use description::PageDescription;

/// The QPTIFF driver (vendor name `qptiff`).
pub struct Qptiff;

/// One page of the file with a QPTIFF description.
struct Page {
    ifd: usize,
    desc: PageDescription,
}

/// The description text of IFD `i` when it is a QPTIFF description.
fn qpi_text(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<Option<String>> {
    Ok(super::xml::description(tf, src, at, i)?.map(|d| d.text).filter(|t| description::is_qpi(t)))
}

/// Every main-chain page with a QPTIFF description, parsed, in file order.
fn pages(tf: &TiffFile, src: &dyn ByteSource, at: &Location) -> Result<Vec<Page>> {
    let mut out = Vec::new();
    for i in 0..tf.ifds.len() {
        if let Some(text) = qpi_text(tf, src, at, i)? {
            let desc = description::parse(&text, &format!("IFD {i}"), at)?;
            out.push(Page { ifd: i, desc });
        }
    }
    Ok(out)
}

fn kind(p: &Page) -> Option<String> {
    p.desc.image_type.as_deref().map(str::to_ascii_lowercase)
}

impl FormatDriver for Qptiff {
    fn name(&self) -> &'static str {
        "qptiff"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        if !is_tiled(tf, 0) && !is_stripped(tf, 0) {
            return Err("IFD 0 is not tiled".into());
        }
        match qpi_text(tf, probe.src, probe.at, 0) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err("ImageDescription of IFD 0 has no PerkinElmer-QPI-ImageDescription".into()),
            Err(e) => Err(format!("cannot read ImageDescription: {}", e.message())),
        }
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let pages = pages(tf, src, at)?;
        let Some(first) = pages.first().filter(|p| p.ifd == 0) else {
            return Err(Error::format(at, "IFD 0 has no PerkinElmer-QPI-ImageDescription"));
        };
        if let Some(t) = first.desc.image_type.as_deref().filter(|t| !t.eq_ignore_ascii_case("FullResolution")) {
            return Err(Error::format(at, format!("IFD 0's ImageType is {t:?}, not FullResolution")));
        }
        // Level 0's channel pages, then the reduced levels' page groups (consecutive pages of one size).
        let mut groups: Vec<Vec<(usize, ImageIndex)>> = vec![Vec::new()];
        let mut assoc: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &pages {
            let k = kind(p);
            match k.as_deref() {
                Some("fullresolution") => groups[0].push((p.ifd, image_from_ifd(tf, src, at, p.ifd, ImageRef::Level(0))?)),
                None if p.ifd == 0 => groups[0].push((0, image_from_ifd(tf, src, at, 0, ImageRef::Level(0))?)),
                Some("reducedresolution") => {
                    let r = tf.reader(src, at, p.ifd);
                    let size = (r.uint(tags::IMAGE_WIDTH)?, r.uint(tags::IMAGE_LENGTH)?);
                    let same = groups.len() > 1 && groups.last().is_some_and(|g| (Some(g[0].1.width), Some(g[0].1.height)) == size);
                    if !same {
                        groups.push(Vec::new());
                    }
                    let level = groups.len() - 1;
                    let img = image_from_ifd(tf, src, at, p.ifd, ImageRef::Level(level))?;
                    groups[level].push((p.ifd, img));
                }
                Some(t) => {
                    let name = match t {
                        "thumbnail" => "thumbnail",
                        "overview" => "macro",
                        "label" => "label",
                        _ => continue,
                    };
                    assoc.entry(name).or_insert(p.ifd);
                }
                None => {}
            }
        }
        let n = groups[0].len();
        check_groups(&groups, at)?;
        let grey = groups[0][0].1.codec.samples_per_pixel == 1;
        let levels: Vec<LayoutLevel> = groups
            .iter()
            .map(|g| {
                let (first, last) = (g[0].0, g[g.len() - 1].0);
                let origin = if g.len() == 1 { format!("IFD {first}") } else { format!("IFDs {first}-{last}") };
                LayoutLevel { image: g[0].1.clone(), origin }
            })
            .collect();
        let level0_descs: Vec<&PageDescription> =
            groups[0].iter().map(|(i, _)| &pages.iter().find(|p| p.ifd == *i).expect("a QPI page").desc).collect();
        let names: Vec<String> = level0_descs.iter().enumerate().map(|(c, d)| d.channel_name().unwrap_or_else(|| format!("C{c}"))).collect();
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        for (k, v) in &first.desc.fields {
            properties.insert(format!("qptiff.{k}"), v.clone());
        }
        properties.insert("qptiff.channel-count".into(), n.to_string());
        for (c, d) in level0_descs.iter().enumerate() {
            for (k, v) in d.fields.iter().filter(|(k, _)| k != "ScanProfile" && !k.starts_with("ScanProfile.")) {
                properties.insert(format!("qptiff.channel[{c}].{k}"), v.clone());
            }
            properties.insert(format!("qptiff.channel[{c}].name"), names[c].clone());
            if let Some([r, g, b]) = d.color() {
                properties.insert(format!("qptiff.channel[{c}].color-rgb"), format!("{r:02X}{g:02X}{b:02X}"));
            }
        }
        let mut associated = BTreeMap::new();
        for (name, ifd) in assoc {
            associated.insert(name.to_string(), image_from_ifd(tf, src, at, ifd, ImageRef::Associated(name.to_string()))?);
        }
        let mpp = resolution_mpp(tf, src, at)?;
        let objective_power = first.desc.get("Objective").and_then(objective);
        if let Some(p) = objective_power {
            properties.insert("qptiff.objective-power".into(), format_double(p));
        }
        let colors = level0_descs.iter().map(|d| d.color()).collect();
        let channels = grey.then(|| ChannelPlanes {
            names,
            samples: Vec::new(),
            levels: groups.into_iter().map(|g| g.into_iter().map(|(_, img)| img).collect()).collect(),
            colors,
        });
        Ok(SlideLayout {
            icc: icc_ref(tf, src, at, 0)?,
            levels,
            associated,
            properties,
            mpp,
            objective_power,
            barcode: first.desc.get("Barcode").filter(|b| !b.is_empty()).map(String::from),
            comment: qpi_text(tf, src, at, 0)?,
            quickhash: Some(quickhash_input(tf, src, at, 0)?),
            channels,
            ..SlideLayout::default()
        })
    }
}

/// Every reduced level has level 0's channel count; several channels are greyscale pages; every
/// channel page has level 0's sample depth.
fn check_groups(groups: &[Vec<(usize, ImageIndex)>], at: &Location) -> Result<()> {
    let n = groups[0].len();
    let first = &groups[0][0].1.codec;
    for (k, g) in groups.iter().enumerate().skip(1) {
        if g.len() != n {
            let ifds: Vec<String> = g.iter().map(|(i, _)| i.to_string()).collect();
            return Err(Error::format(
                at,
                format!("QPTIFF reduced level {k} (IFDs {}) has {} pages, level 0 has {n} channels", ifds.join(", "), g.len()),
            ));
        }
    }
    for (k, g) in groups.iter().enumerate() {
        for (i, img) in g {
            if n > 1 && img.codec.samples_per_pixel != 1 {
                return Err(Error::unsupported(
                    at,
                    format!(
                        "QPTIFF level {k} page IFD {i} has {} samples per pixel in a file of {n} channel pages (one sample each is read)",
                        img.codec.samples_per_pixel
                    ),
                ));
            }
            if img.codec.samples_per_pixel != first.samples_per_pixel || img.codec.sample_bits != first.sample_bits {
                return Err(Error::format(
                    at,
                    format!(
                        "QPTIFF level {k} page IFD {i} has {} samples of {:?}, level 0's first page {} of {:?}",
                        img.codec.samples_per_pixel, img.codec.sample_bits, first.samples_per_pixel, first.sample_bits
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The objective power in an `Objective` field (`20x`, `20x [20x]`, `20`): its leading number,
/// when finite and positive.
fn objective(s: &str) -> Option<f64> {
    let num: String = s.trim().chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',').collect();
    parse_double(&num).filter(|v| v.is_finite() && *v > 0.0)
}

/// µm per pixel from IFD 0's X/YResolution: ResolutionUnit 3 (centimeter, what the scanners
/// write) or 2 (inch, also TIFF's default); `None` for other units or missing / zero values.
fn resolution_mpp(tf: &TiffFile, src: &dyn ByteSource, at: &Location) -> Result<Option<(f64, f64)>> {
    let r = tf.reader(src, at, 0);
    let um = match r.uint(tags::RESOLUTION_UNIT)?.unwrap_or(2) {
        2 => 25_400.0,
        3 => 10_000.0,
        _ => return Ok(None),
    };
    Ok(match (r.float(tags::X_RESOLUTION)?, r.float(tags::Y_RESOLUTION)?) {
        (Some(x), Some(y)) if x > 0.0 && y > 0.0 && x.is_finite() && y.is_finite() => Some((um / x, um / y)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::objective;

    #[test]
    fn objective_power_is_the_leading_number() {
        assert_eq!(objective("20x"), Some(20.0));
        assert_eq!(objective(" 40x [40x]"), Some(40.0));
        assert_eq!(objective("10"), Some(10.0));
        assert_eq!(objective("x20"), None);
        assert_eq!(objective("0x"), None);
    }
}
