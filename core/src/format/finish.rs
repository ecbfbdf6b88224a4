//! The core's half of opening a slide: check a driver's [`SlideLayout`], fill the standard
//! `openslide.*` properties and quickhash, and build the immutable [`SlideIndex`] (OpenSlide's
//! `openslide.c` does the same after a vendor's `open`).
//!
//! Checks, each a typed error naming the file (and level or associated image):
//! * at least one level; every image 1..=[`MAX_IMAGE_EDGE`] pixels per edge, tiles
//!   1..=[`MAX_TILE_EDGE`] (an untiled image's strips, as wide as the image, up to its
//!   height: the read working set bounds them); a regular or sparse grid has `ceil(width / tile_width)` ×
//!   `ceil(height / tile_height)` cells and one byte range per sample plane;
//! * levels decrease in size (no level wider or taller than the one before) and their
//!   downsamples (mean of the per-axis ratios, OpenSlide's rule) strictly increase;
//! * every byte range names a source file the slide has; ICC ranges lie inside their file.
//!   Tile ranges past the end of their file are kept: reading such a tile fails with a
//!   `Format` error naming it, so a truncated slide still reads the tiles before the cut
//!   (OpenSlide opens such files too);
//! * a positioned grid's stored grid has `ceil(stored width / tile_width)` ×
//!   `ceil(stored height / tile_height)` cells (its pieces were checked against it when built);
//! * a driver-given downsample ([`SlideLayout::downsamples`]) is finite and at least 1;
//! * `openslide.*` properties are the core's: a layout that sets one is refused.
//!
//! Properties filled (names and formats as `openslide.c`): `openslide.vendor`,
//! `level-count`, `level[i].width/height/downsample`, `level[i].tile-width/-height` for tiled
//! levels, `mpp-x/-y`, `objective-power`, `comment`, `background-color` (`RRGGBB`),
//! `bounds-x/-y/-width/-height`, `barcode`, `region[i].x/-y/-width/-height`, `associated.NAME.width/height/icc-size`, `icc-size` (the
//! profile's length, without reading it) and `quickhash-1`.

use std::collections::BTreeMap;

use super::{format_double, quickhash::quickhash, SlideLayout, MAX_IMAGE_EDGE, MAX_TILE_EDGE};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{BlobRef, FileIdentity, ImageIndex, Level, SlideIndex, SourceFile, TileLoc};
use crate::io::ByteSource;

/// The slide's source files: the one opened (`primary_len` bytes, named by `at`, of file
/// identity `identity`) and the `extra` files its layout names (`SlideLayout::extra_sources`),
/// examined now through `files` (length and identity, which later reads check:
/// [`crate::io::multi`]; `None`: as local files).
///
/// # Errors
/// `Io` when an extra file cannot be examined or is not a regular file; `Limits` for a file
/// over [`crate::io::multi::MAX_SOURCE_LEN`] bytes.
pub fn source_files(
    extra: &[std::path::PathBuf],
    primary_len: u64,
    at: &Location,
    identity: Option<FileIdentity>,
    files: Option<&dyn super::SiblingFiles>,
) -> Result<Vec<SourceFile>> {
    let mut sources = vec![SourceFile { path: at.path.clone(), len: primary_len, identity }];
    let local = super::LocalFiles { path: at.path.clone() };
    let files: &dyn super::SiblingFiles = files.unwrap_or(&local);
    for p in extra {
        let (len, identity) = files.examine(p)?;
        sources.push(SourceFile { path: p.clone(), len, identity });
    }
    if let Some(s) = sources.iter().find(|s| s.len > crate::io::multi::MAX_SOURCE_LEN) {
        return Err(Error::limits(&Location::file(&s.path), format!("file of {} bytes (limit 2^44)", s.len)));
    }
    Ok(sources)
}

/// Check `layout` (from driver `vendor`, opened from `src` named by `at`; `sources` from
/// [`source_files`], with `src` serving all of them, [`crate::io::multi::SourceSet`]) and build
/// the [`SlideIndex`]. Reads only the chunks quickhash covers.
///
/// # Errors
/// `Format` for a layout that breaks a rule above; `Limits` for oversized images or tiles.
pub fn finish(vendor: &'static str, layout: SlideLayout, src: &dyn ByteSource, at: &Location, sources: Vec<SourceFile>) -> Result<SlideIndex> {
    if let Some(k) = layout.properties.keys().find(|k| k.starts_with("openslide.")) {
        return Err(Error::format(at, format!("driver {vendor} set the core's property {k}")));
    }
    if sources.len() != layout.extra_sources.len() + layout.virtual_sources.len() + 1 {
        return Err(Error::format(
            at,
            format!("{} source files for a layout naming {} extra files and {} virtual sources", sources.len(), layout.extra_sources.len(), layout.virtual_sources.len()),
        ));
    }
    if layout.levels.is_empty() {
        return Err(Error::format(at, "no pyramid levels"));
    }
    let d = &layout.downsamples;
    if d.len() > layout.levels.len() || d.first().is_some_and(|&v| v != 1.0) {
        return Err(Error::format(at, format!("{} level downsamples for {} levels (level 0 must have 1)", d.len(), layout.levels.len())));
    }
    let mut levels: Vec<Level> = Vec::with_capacity(layout.levels.len());
    for (k, l) in layout.levels.into_iter().enumerate() {
        let lat = at.clone().with_image(ImageRef::Level(k));
        check_image(&l.image, &lat, &sources)?;
        let downsample = match (layout.downsamples.get(k), levels.first()) {
            (Some(&d), _) if d.is_finite() && d >= 1.0 => d,
            (Some(&d), _) => return Err(Error::format(&lat, format!("downsample {d}"))),
            (None, None) => 1.0,
            (None, Some(l0)) => (l0.image.height as f64 / l.image.height as f64 + l0.image.width as f64 / l.image.width as f64) / 2.0,
        };
        if let Some(prev) = levels.last() {
            if l.image.width > prev.image.width || l.image.height > prev.image.height {
                return Err(Error::format(
                    at,
                    format!(
                        "level {k} ({}) of {}x{} is larger than level {}'s {}x{}",
                        l.origin,
                        l.image.width,
                        l.image.height,
                        k - 1,
                        prev.image.width,
                        prev.image.height
                    ),
                ));
            }
            // OpenSlide (openslide.c) refuses pyramids whose downsamples do not increase.
            if downsample <= prev.downsample {
                return Err(Error::format(
                    at,
                    format!("level {k} ({}) has downsample {downsample} not above level {}'s {}", l.origin, k - 1, prev.downsample),
                ));
            }
        }
        levels.push(Level { image: l.image, downsample });
    }
    for (name, img) in &layout.associated {
        check_image(img, &at.clone().with_image(ImageRef::Associated(name.clone())), &sources)?;
    }
    for blob in layout.icc.iter().chain(layout.associated_icc.values()) {
        check_blob(blob, at, &sources)?;
    }
    if let Some(name) = layout.associated_icc.keys().find(|n| !layout.associated.contains_key(*n)) {
        return Err(Error::format(at, format!("ICC profile for associated image '{name}', which does not exist")));
    }
    let mut p = layout.properties;
    standard_properties(&mut p, vendor, &levels, &layout.associated, layout.tile_hints.as_deref());
    if let Some(c) = layout.comment {
        p.insert("openslide.comment".into(), c);
    }
    if let Some((x, y)) = layout.mpp {
        p.insert("openslide.mpp-x".into(), format_double(x));
        p.insert("openslide.mpp-y".into(), format_double(y));
    }
    if let Some(m) = layout.objective_power {
        p.insert("openslide.objective-power".into(), format_double(m));
    }
    if let Some([r, g, b]) = layout.background_color {
        p.insert("openslide.background-color".into(), format!("{r:02X}{g:02X}{b:02X}"));
    }
    if let Some(b) = layout.bounds {
        p.insert("openslide.bounds-x".into(), b.x.to_string());
        p.insert("openslide.bounds-y".into(), b.y.to_string());
        p.insert("openslide.bounds-width".into(), b.width.to_string());
        p.insert("openslide.bounds-height".into(), b.height.to_string());
    }
    if let Some(b) = &layout.barcode {
        p.insert("openslide.barcode".into(), b.clone());
    }
    for (i, b) in layout.regions.iter().enumerate() {
        p.insert(format!("openslide.region[{i}].x"), b.x.to_string());
        p.insert(format!("openslide.region[{i}].y"), b.y.to_string());
        p.insert(format!("openslide.region[{i}].width"), b.width.to_string());
        p.insert(format!("openslide.region[{i}].height"), b.height.to_string());
    }
    for (name, icc) in &layout.associated_icc {
        p.insert(format!("openslide.associated.{name}.icc-size"), icc.len().to_string());
    }
    if let Some(icc) = &layout.icc {
        p.insert("openslide.icc-size".into(), icc.len().to_string());
    }
    if let Some(ch) = &layout.channels {
        if ch.levels.len() != levels.len() || ch.levels.iter().any(|c| c.len() != ch.names.len()) || ch.names.is_empty() || !(ch.colors.is_empty() || ch.colors.len() == ch.names.len()) {
            return Err(Error::format(at, "channel planes do not cover every level and channel"));
        }
        for (k, (planes, l)) in ch.levels.iter().zip(&levels).enumerate() {
            for (c, img) in planes.iter().enumerate() {
                let cat = at.clone().with_image(ImageRef::Level(k));
                check_image(img, &cat, &sources)?;
                if (img.width, img.height) != (l.image.width, l.image.height) || ch.sample(c) >= img.codec.samples_per_pixel as usize || (ch.samples.is_empty() && img.codec.samples_per_pixel != 1) {
                    return Err(Error::format(
                        &cat,
                        format!("channel {c} plane is {}x{} with {} samples, level is {}x{}", img.width, img.height, img.codec.samples_per_pixel, l.image.width, l.image.height),
                    ));
                }
            }
        }
    }
    if let Some(q) = &layout.quickhash {
        let lowest = &levels.last().expect("at least one level").image;
        if let Some(hex) = quickhash(q, lowest, layout.quickhash_chunks.as_deref(), src, at)? {
            p.insert("openslide.quickhash-1".into(), hex);
        }
    }
    Ok(SlideIndex {
        sources,
        vendor,
        levels,
        associated: layout.associated,
        properties: p,
        icc: layout.icc,
        associated_icc: layout.associated_icc,
        channels: layout.channels,
    })
}

/// The level and associated-image geometry properties.
fn standard_properties(p: &mut BTreeMap<String, String>, vendor: &str, levels: &[Level], associated: &BTreeMap<String, ImageIndex>, hints: Option<&[Option<(u32, u32)>]>) {
    p.insert("openslide.vendor".into(), vendor.into());
    p.insert("openslide.level-count".into(), levels.len().to_string());
    for (i, l) in levels.iter().enumerate() {
        p.insert(format!("openslide.level[{i}].width"), l.image.width.to_string());
        p.insert(format!("openslide.level[{i}].height"), l.image.height.to_string());
        p.insert(format!("openslide.level[{i}].downsample"), format_double(l.downsample));
        let hint = match hints {
            Some(h) => h.get(i).copied().flatten(),
            None => l.image.tiled.then_some((l.image.tile_width, l.image.tile_height)),
        };
        if let Some((w, h)) = hint {
            p.insert(format!("openslide.level[{i}].tile-width"), w.to_string());
            p.insert(format!("openslide.level[{i}].tile-height"), h.to_string());
        }
    }
    for (name, a) in associated {
        p.insert(format!("openslide.associated.{name}.width"), a.width.to_string());
        p.insert(format!("openslide.associated.{name}.height"), a.height.to_string());
    }
}

/// Geometry, grid shape and source ids of one image (see the module docs).
fn check_image(img: &ImageIndex, at: &Location, sources: &[SourceFile]) -> Result<()> {
    let (w, h, tw, th) = (img.width, img.height, img.tile_width as u64, img.tile_height as u64);
    if w == 0 || h == 0 {
        return Err(Error::format(at, format!("image of size {w}x{h}")));
    }
    if w > MAX_IMAGE_EDGE || h > MAX_IMAGE_EDGE {
        return Err(Error::limits(at, format!("image of size {w}x{h} exceeds {MAX_IMAGE_EDGE} pixels per edge")));
    }
    if tw == 0 || th == 0 {
        return Err(Error::format(at, format!("tile size {tw}x{th}")));
    }
    // Strips (untiled, one chunk as wide as the image: `tiff_strips`) may be wider or taller
    // than a tile; the read working set bounds their decode.
    let strip = !img.tiled && tw == w && th <= h;
    if !strip && (tw > MAX_TILE_EDGE || th > MAX_TILE_EDGE) {
        return Err(Error::limits(at, format!("tile size {tw}x{th} exceeds {MAX_TILE_EDGE} pixels per edge")));
    }
    // A positioned grid's stored tiles cover the stored image, not the level.
    let (sw, sh) = img.grid.stored_size().unwrap_or((w, h));
    if sw == 0 || sh == 0 || sw > MAX_IMAGE_EDGE || sh > MAX_IMAGE_EDGE {
        return Err(Error::format(at, format!("stored image of size {sw}x{sh}")));
    }
    let want = (sw.div_ceil(tw), sh.div_ceil(th));
    if img.grid.dims() != want {
        return Err(Error::format(at, format!("tile grid of {:?} cells for {sw}x{sh} pixels in {tw}x{th} tiles", img.grid.dims())));
    }
    let planes = if img.codec.planar_separate { img.codec.samples_per_pixel as usize } else { 1 };
    if img.grid.planes() != planes {
        return Err(Error::format(at, format!("{} byte ranges per tile for {planes} sample planes", img.grid.planes())));
    }
    if let Some(t) = img.grid.chunks().find(|t| t.source.0 as usize >= sources.len()) {
        return Err(Error::format(at, format!("tile data in source file {} of {}", t.source.0, sources.len())));
    }
    Ok(())
}

/// A referenced byte string lies inside its source file.
fn check_blob(blob: &BlobRef, at: &Location, sources: &[SourceFile]) -> Result<()> {
    let BlobRef::Range(r @ TileLoc { source, .. }) = blob else { return Ok(()) };
    let Some(s) = sources.get(source.0 as usize) else {
        return Err(Error::format(at, format!("ICC profile in source file {} of {}", source.0, sources.len())));
    };
    if r.end().is_none_or(|e| e > s.len) {
        return Err(Error::format(
            at,
            format!("ICC profile at offset {} (+{} bytes) lies past the end of {} ({} bytes)", r.offset, r.length, s.path.display(), s.len),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
