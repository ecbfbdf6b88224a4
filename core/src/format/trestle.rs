//! Trestle / MedScan TIFF (`.tif`, vendor `trestle`): a tiled TIFF pyramid whose tiles may
//! overlap their neighbours, with `key=value` metadata in IFD 0's ImageDescription and an
//! optional macro image in a JPEG file beside the slide.
//!
//! Format facts, from OpenSlide's Trestle format page (openslide.org/formats/trestle) and
//! checked against OpenSlide 4.0.1 on generated files (`scripts/vendor_slides/trestle.py`):
//! * detection: IFD 0's Software starts with `MedScan`, IFD 0 has an ImageDescription, and
//!   every IFD is tiled;
//! * levels: every IFD, in file order (IFD 0 full resolution);
//! * ImageDescription: `;`-separated entries, each `key=value` (split at the first `=`, both
//!   sides stripped of ASCII whitespace; entries without `=` are skipped), reported as
//!   `trestle.<key>`; `openslide.comment` is the whole description;
//! * `trestle.OverlapsXY`: space-separated integers, read in pairs (x, y): the overlap in
//!   pixels between neighbouring tiles of level 0, 1, ... (missing pairs: 0; a token that is
//!   not a decimal integer counts as 0). Tile (col, row) of a level with overlaps (ox, oy) is
//!   painted at (col × (tile width − ox), row × (tile height − oy)), later tiles (row-major)
//!   over earlier ones; the level is `(tiles across − 1) × ox` narrower (and likewise
//!   shorter) than its TIFF image, except along an axis where the image is narrower than one
//!   tile. When any level has an overlap, no level reports tile-size properties;
//! * `openslide.background-color` from `trestle.Background Color` (hexadecimal, optional `0x`,
//!   the low 24 bits as RRGGBB); `openslide.objective-power` from `trestle.Objective Power`
//!   when it is an integer; `openslide.mpp-x/-y` copy `tiff.XResolution` / `tiff.YResolution`
//!   (the scanner stores µm per pixel there, not pixels per unit);
//! * associated image `macro`: the JPEG file named like the slide with its extension replaced
//!   by `.Full`, when it exists and its header reads (otherwise no macro, no error);
//! * quickhash: OpenSlide's TIFF rule (the last IFD's tiles, IFD 0's ASCII tags).
//!
//! Overlapping levels are [`crate::index::PositionedGrid`]s (the stored TIFF tiles, placed
//! with their overlaps resolved once at open); levels without overlap are plain tile grids.
//! An overlap as large as the tile (or negative once read as OpenSlide's 32-bit integer) is a
//! `Format` error naming the level, where OpenSlide would compute a nonsensical level.

use std::collections::BTreeMap;

use super::tiff_common::{image_from_ifd, is_tiled, quickhash_input, tiff_properties};
use super::{g_strstrip, parse_double, parse_int64, FormatDriver, LayoutLevel, Probe, SlideLayout};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Grid, ImageIndex, PositionedTile, SourceId, TileLoc};
use crate::tiff::tags;

/// The Trestle driver (vendor name `trestle`).
pub struct Trestle;

/// Most tiles a level with overlaps may place (each becomes one placement): bounds the index
/// a hostile file can make.
const MAX_PLACEMENTS: u64 = crate::limits::LIMITS.placements;

/// The `trestle.<key>` properties of a description, in order (later duplicates win when
/// inserted into a map).
fn description_fields(desc: &str) -> Vec<(String, String)> {
    desc.split(';').filter_map(|e| e.split_once('=')).map(|(k, v)| (g_strstrip(k).to_string(), g_strstrip(v).to_string())).collect()
}

/// The (x, y) overlap pairs of a `trestle.OverlapsXY` value: tokens split on single spaces,
/// each a decimal integer or 0, taken in pairs (a trailing odd token is dropped), each value
/// cut to 32 bits as OpenSlide stores it.
fn overlaps(value: &str) -> Vec<(i64, i64)> {
    let vals: Vec<i64> = value.split(' ').map(|t| parse_uint64(t, 10).unwrap_or(0) as i32 as i64).collect();
    vals.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// An unsigned integer in `radix` as OpenSlide's `_openslide_parse_uint64` reads it (GLib's
/// `g_ascii_strtoull`): the whole string, leading whitespace and a `+` allowed, `0x` allowed
/// in base 16; `None` when empty, not a number to its end or over `u64`.
fn parse_uint64(s: &str, radix: u32) -> Option<u64> {
    let t = s.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
    let t = t.strip_prefix('+').unwrap_or(t);
    let t = if radix == 16 { t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t) } else { t };
    if t.is_empty() || !t.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(t, radix).ok()
}

/// The macro image: `<name without extension>.Full` beside the slide, `None` when there is no
/// such file or it cannot be read as a JPEG (OpenSlide ignores it then too).
fn macro_image(probe: &Probe<'_>, source: SourceId) -> Option<(std::path::PathBuf, ImageIndex)> {
    let files = probe.files?;
    let path = files.path();
    let name = path.file_name()?.to_str()?;
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let full = super::member_path(files, &dir, "macro", &format!("{stem}.Full"), probe.at).ok()?;
    let src = files.open(&full).ok()?;
    let at = Location::file(&full).with_image(ImageRef::Associated("macro".into()));
    let img = super::hamamatsu::whole_jpeg_image(src.as_ref(), &at, source, 0, src.len()).ok()?;
    Some((full, img))
}

/// Level `k` of IFD `ifd` with overlaps (`ox`, `oy`): the stored tiles placed at their
/// advance, later over earlier.
fn overlapped(stored: ImageIndex, k: usize, (ox, oy): (i64, i64), at: &Location) -> Result<ImageIndex> {
    let (tw, th) = (stored.tile_width as i64, stored.tile_height as i64);
    if !(0..tw).contains(&ox) || !(0..th).contains(&oy) {
        return Err(Error::format(at, format!("Trestle level {k}: overlaps {ox}x{oy} for tiles of {tw}x{th} pixels")));
    }
    let (across, down) = (stored.tiles_across(), stored.tiles_down());
    if across.saturating_mul(down) > MAX_PLACEMENTS {
        return Err(Error::limits(at, format!("Trestle level {k}: {across}x{down} overlapping tiles (limit {MAX_PLACEMENTS})")));
    }
    let width = if stored.width >= tw as u64 { stored.width - (across - 1) * ox as u64 } else { stored.width };
    let height = if stored.height >= th as u64 { stored.height - (down - 1) * oy as u64 } else { stored.height };
    let mut placements = Vec::with_capacity((across * down) as usize);
    for row in 0..down {
        for col in 0..across {
            let (x, y) = (col as i64 * (tw - ox), row as i64 * (th - oy));
            placements.push(PositionedTile { x, y, width: tw as u32, height: th as u32, col, row, src_x: 0, src_y: 0 });
        }
    }
    let grid = Grid::positioned(stored.grid.clone(), (stored.width, stored.height), (tw as u32, th as u32), &placements)
        .ok_or_else(|| Error::format(at, format!("Trestle level {k}: tile placements do not fit the tile grid")))?;
    Ok(ImageIndex { width, height, tiled: false, grid, ..stored })
}

impl FormatDriver for Trestle {
    fn name(&self) -> &'static str {
        "trestle"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        let r = tf.reader(probe.src, probe.at, 0);
        let software = r.ascii(tags::SOFTWARE).map_err(|e| format!("cannot read Software: {e}"))?.ok_or("IFD 0 has no Software tag")?;
        if !software.starts_with("MedScan") {
            return Err("Software of IFD 0 does not start with \"MedScan\"".into());
        }
        if !r.has(tags::IMAGE_DESCRIPTION) {
            return Err("IFD 0 has no ImageDescription".into());
        }
        if let Some(i) = (0..tf.ifds.len()).find(|&i| !is_tiled(tf, i)) {
            return Err(format!("IFD {i} is not tiled"));
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let mut properties = BTreeMap::new();
        tiff_properties(tf, src, at, 0, &mut properties)?;
        let desc = properties.get("tiff.ImageDescription").cloned().ok_or_else(|| Error::format(at, "IFD 0 has no ImageDescription"))?;
        for (k, v) in description_fields(&desc) {
            properties.insert(format!("trestle.{k}"), v);
        }
        let pairs = properties.get("trestle.OverlapsXY").map(|v| overlaps(v)).unwrap_or_default();
        let mut levels = Vec::with_capacity(tf.ifds.len());
        let mut lowest_chunks = Vec::new();
        for i in 0..tf.ifds.len() {
            if !is_tiled(tf, i) {
                return Err(Error::format(at, format!("TIFF level {i} is not tiled")));
            }
            let lat = at.clone().with_image(ImageRef::Level(i));
            let stored = image_from_ifd(tf, src, at, i, ImageRef::Level(i))?;
            lowest_chunks = stored.grid.chunks().collect::<Vec<TileLoc>>();
            let image = match pairs.get(i).copied() {
                Some(o) if o != (0, 0) => overlapped(stored, i, o, &lat)?,
                _ => stored,
            };
            levels.push(LayoutLevel { image, origin: format!("IFD {i}") });
        }
        // Any overlap: no level reports a tile size (OpenSlide clears the hints).
        let tile_hints = pairs.iter().take(levels.len()).any(|&o| o != (0, 0)).then(|| vec![None; levels.len()]);
        let mut associated = BTreeMap::new();
        let mut extra_sources = Vec::new();
        if let Some((path, img)) = macro_image(probe, SourceId(1)) {
            associated.insert("macro".to_string(), img);
            extra_sources.push(path);
        }
        let mpp = match (properties.get("tiff.XResolution").and_then(|v| parse_double(v)), properties.get("tiff.YResolution").and_then(|v| parse_double(v))) {
            (Some(x), Some(y)) => Some((x, y)),
            _ => None,
        };
        let objective_power = properties.get("trestle.Objective Power").and_then(|v| parse_int64(v)).map(|v| v as f64);
        let background_color = properties.get("trestle.Background Color").and_then(|v| parse_uint64(v, 16)).map(|bg| [(bg >> 16) as u8, (bg >> 8) as u8, bg as u8]);
        Ok(SlideLayout {
            extra_sources,
            levels,
            associated,
            properties,
            mpp,
            objective_power,
            comment: Some(desc),
            background_color,
            quickhash: Some(quickhash_input(tf, src, at, 0)?),
            quickhash_chunks: Some(lowest_chunks),
            tile_hints,
            ..SlideLayout::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{description_fields, overlaps, parse_uint64};

    #[test]
    fn description_and_overlaps_parse_as_openslide() {
        let f = description_fields("Background Color=F0E0D0; Odd Key = v ;NoEq;OverlapsXY= 16 12 8 6");
        assert_eq!(f[1], ("Odd Key".into(), "v".into()));
        assert_eq!(f.len(), 3);
        assert_eq!(overlaps("16 12 8 6"), vec![(16, 12), (8, 6)]);
        assert_eq!(overlaps("16  12"), vec![(16, 0)]);
        assert_eq!(overlaps("16 x12 8"), vec![(16, 0)]);
        assert_eq!(overlaps(""), vec![]);
        assert_eq!(parse_uint64("0x1234567", 16), Some(0x1234567));
        assert_eq!(parse_uint64("zz", 16), None);
        assert_eq!(parse_uint64("", 16), None);
    }
}
