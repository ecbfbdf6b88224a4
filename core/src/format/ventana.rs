//! Roche / Ventana BIF and Ventana TIFF.
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-ventana.c` (and `openslide-grid.c` for the
//! tile map it builds); the generated slides of `scripts/vendor_slides/ventana.py`, checked
//! against OpenSlide, exercise them:
//! * detection: IFD 0 has an XMLPacket (tag 700) that contains "iScan" and parses as XML whose
//!   root is `iScan` or `Metadata` with an `iScan` child;
//! * properties: every non-empty attribute of that element as `ventana.<name>`;
//!   `openslide.objective-power` from `ventana.Magnification` (an integer), `openslide.mpp-x/-y`
//!   from `ventana.ScanRes`; `tiff.*`, `openslide.comment` and the quickhash strings from the
//!   level-0 IFD, the quickhash tiles from the lowest level's;
//! * levels: IFDs whose ImageDescription contains `level=`, parsed as space-separated
//!   `key=value` pairs: `level` must count up from 0 in file order, `mag` must decrease;
//!   downsample = mag0 / mag; every level tiled with level 0's tile size; sorted by width;
//! * associated images: ImageDescription exactly `Label Image` or `Label_Image` → `macro`,
//!   `Thumbnail` → `thumbnail`;
//! * BIF (the level-0 IFD has an XMLPacket, `EncodeInfo`): each `SlideStitchInfo/ImageInfo`
//!   with `AOIScanned` ≠ 0 pairs with the same-index element under `AoiOrigin` and is an area
//!   of `NumCols × NumRows` tiles from grid column `OriginX / Width` and row `OriginY / Height`
//!   (Width × Height = the TIFF tile size). The tile advance is the tile size minus the
//!   `Confidence`-weighted mean of `OverlapX` over RIGHT joints (`OverlapY` over UP joints) of
//!   all areas. An area's top-left lies at (`Pos-X`, top − `Pos-Y` − its height), top being the
//!   largest `Pos-Y` + height (at least 0), height = (rows − 1) × advance + tile height. At
//!   downsample d, tile (col, row) of an area sits at ((Pos-X + (col − first col) × advance) / d,
//!   likewise y) and shows the (tile / d)-sized sub-tile (col mod d, row mod d) of stored tile
//!   (col / d, row / d) of that level's IFD (d truncated to an integer there). Tiles are painted
//!   bottom-right first, the first painted winning (cairo SATURATE over opaque pixels): the
//!   placements are listed in row-major order, later covering earlier ([`Grid::positioned`]).
//!   A level's size is the bounding box of its tiles (ceil); it has no tile-size properties;
//!   `openslide.region[i].*` are each area's grid origin × advance and its extent.
//! * Ventana TIFF (no level-0 XMLPacket): levels are plain tiled images.
//!
//! Differences, documented in `docs/formats.md`: positions are rounded to whole pixels where
//! OpenSlide resamples at a sub-pixel offset (a fractional advance: whole pixels whenever the
//! overlaps average to an integer that the downsamples divide); pixels at negative level
//! coordinates are dropped, as OpenSlide's `read_region` never shows them; an area that does
//! not fit its IFD's tile grid is refused at open (OpenSlide fails when reading it); a slide
//! with no weighted joint in one direction (advance 0 / 0) or an advance of 0 or less is
//! refused.

use std::collections::BTreeMap;

use super::tiff_common::{image_from_ifd, is_tiled, quickhash_input, tiff_properties};
use super::{parse_double, Bounds, FormatDriver, LayoutLevel, Probe, SlideLayout};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Grid, ImageIndex, PositionedTile};
use crate::tiff::{tags, TiffFile};
use crate::io::ByteSource;

/// TIFF tag 700, XMLPacket (XMP).
const XML_PACKET: u16 = 700;

/// The Ventana driver.
pub struct Ventana;

impl FormatDriver for Ventana {
    fn name(&self) -> &'static str {
        "ventana"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        let xml = xml_packet(tf, probe.src, probe.at, 0).map_err(|e| e.message())?.ok_or("IFD 0 has no XMLPacket")?;
        if !xml.contains("iScan") {
            return Err("iScan not in the XMLPacket of IFD 0".into());
        }
        let doc = parse_xml(&xml).map_err(|e| format!("XMLPacket of IFD 0: {e}"))?;
        iscan(&doc).map(|_| ())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let xml = xml_packet(tf, src, at, 0)?.ok_or_else(|| Error::format(at, "IFD 0 has no XMLPacket"))?;
        let doc = parse_xml(&xml).map_err(|e| Error::format(at, format!("XMLPacket of IFD 0: {e}")))?;
        let el = iscan(&doc).map_err(|e| Error::format(at, e))?;
        let mut properties = BTreeMap::new();
        for a in el.attributes().filter(|a| a.namespace().is_none() && !a.value().is_empty()) {
            properties.insert(format!("ventana.{}", a.name()), a.value().to_string());
        }
        let objective_power = properties.get("ventana.Magnification").and_then(|v| parse_int(v)).map(|m| m as f64);
        let mpp = properties.get("ventana.ScanRes").and_then(|v| parse_double(v)).map(|m| (m, m));

        // Walk the IFDs: levels (in file order) and associated images.
        struct Found {
            ifd: usize,
            downsample: f64,
        }
        let mut found: Vec<Found> = Vec::new();
        let mut associated = BTreeMap::new();
        let mut bif: Option<Bif> = None;
        let (mut prev_mag, mut mag0) = (f64::INFINITY, 0.0);
        for i in 0..tf.ifds.len() {
            let Some(desc) = tf.reader(src, at, i).ascii(tags::IMAGE_DESCRIPTION)? else { continue };
            if desc.contains("level=") {
                let (level, mag) = level_info(&desc).map_err(|e| Error::format(at, format!("IFD {i}: {e}")))?;
                if level != found.len() as i64 {
                    return Err(Error::format(at, format!("IFD {i}: unexpected level {level} (expected {})", found.len())));
                }
                if mag >= prev_mag {
                    return Err(Error::format(at, format!("IFD {i}: magnification {mag} of level {level} does not decrease")));
                }
                prev_mag = mag;
                if level == 0 {
                    mag0 = mag;
                }
                if !is_tiled(tf, i) {
                    return Err(Error::format(at, format!("IFD {i} (level {level}) is not tiled")));
                }
                let tile = tile_size(tf, src, at, i)?;
                if level == 0 {
                    if let Some(x) = xml_packet(tf, src, at, i)? {
                        bif = Some(Bif::parse(&x, tile).map_err(|e| Error::format(at, format!("EncodeInfo of IFD {i}: {e}")))?);
                    }
                } else if tile != tile_size(tf, src, at, found[0].ifd)? {
                    return Err(Error::format(at, format!("IFD {i}: tile size {tile:?} differs from level 0's")));
                }
                found.push(Found { ifd: i, downsample: mag0 / mag });
            } else if desc == "Label Image" || desc == "Label_Image" || desc == "Thumbnail" {
                let name = if desc == "Thumbnail" { "thumbnail" } else { "macro" };
                associated.insert(name.to_string(), image_from_ifd(tf, src, at, i, ImageRef::Associated(name.into()))?);
            }
        }
        if found.is_empty() {
            return Err(Error::format(at, "no pyramid levels (no IFD with \"level=\" in its ImageDescription)"));
        }
        let level0_ifd = found[0].ifd;
        // Sort by the IFD's width, largest first (stable).
        let mut widths = Vec::with_capacity(found.len());
        for f in &found {
            widths.push(tf.reader(src, at, f.ifd).uint(tags::IMAGE_WIDTH)?.unwrap_or(0));
        }
        let mut order: Vec<usize> = (0..found.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(widths[k]));
        let mut levels = Vec::with_capacity(found.len());
        let mut downsamples = Vec::with_capacity(found.len());
        for (k, &j) in order.iter().enumerate() {
            let f = &found[j];
            let lat = at.clone().with_image(ImageRef::Level(k));
            let mut image = image_from_ifd(tf, src, at, f.ifd, ImageRef::Level(k))?;
            if let Some(b) = &bif {
                image = b.level(image, f.downsample, &lat)?;
            }
            levels.push(LayoutLevel { image, origin: format!("IFD {}", f.ifd) });
            downsamples.push(f.downsample);
        }
        let regions = bif.as_ref().map(Bif::regions).unwrap_or_default();
        tiff_properties(tf, src, at, level0_ifd, &mut properties)?;
        let comment = properties.get("tiff.ImageDescription").cloned();
        Ok(SlideLayout {
            levels,
            downsamples,
            associated,
            properties,
            mpp,
            objective_power,
            comment,
            regions,
            quickhash: Some(quickhash_input(tf, src, at, level0_ifd)?),
            ..SlideLayout::default()
        })
    }
}

/// The XMLPacket of IFD `i` as text (up to its first NUL), if present.
fn xml_packet(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<Option<String>> {
    let Some(raw) = tf.reader(src, at, i).raw(XML_PACKET)? else { return Ok(None) };
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    Ok(Some(String::from_utf8_lossy(&raw[..end]).into_owned()))
}

fn parse_xml(xml: &str) -> std::result::Result<roxmltree::Document<'_>, String> {
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    roxmltree::Document::parse_with_options(xml, opts).map_err(|e| format!("broken XML ({e})"))
}

/// The `iScan` element: the root, or a child of a `Metadata` root.
fn iscan<'a>(doc: &'a roxmltree::Document<'a>) -> std::result::Result<roxmltree::Node<'a, 'a>, String> {
    let root = doc.root_element();
    match root.tag_name().name() {
        "iScan" => Ok(root),
        "Metadata" => root.children().find(|n| n.is_element() && n.tag_name().name() == "iScan").ok_or_else(|| "no iScan element under Metadata".into()),
        other => Err(format!("root element {other:?} is neither iScan nor Metadata")),
    }
}

/// A whole-string decimal integer, as `g_ascii_strtoll` with a check that it consumed the
/// string (leading whitespace and a sign allowed).
fn parse_int(s: &str) -> Option<i64> {
    let t = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.strip_prefix('+').unwrap_or(t).parse().ok()
}

/// (level, magnification) from a level's ImageDescription (`key=value` pairs split on ' ').
fn level_info(desc: &str) -> std::result::Result<(i64, f64), String> {
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    for pair in desc.split(' ') {
        if let Some((k, v)) = pair.split_once('=') {
            fields.insert(k, v);
        }
    }
    let (Some(level), Some(mag)) = (fields.get("level"), fields.get("mag")) else { return Err("missing level or mag field".into()) };
    let level = parse_int(level).filter(|_| !level.starts_with(|c: char| c.is_ascii_whitespace())).ok_or_else(|| format!("invalid level number {level:?}"))?;
    let mag = parse_double(mag).ok_or_else(|| format!("invalid magnification {mag:?}"))?;
    Ok((level, mag))
}

fn tile_size(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<(u64, u64)> {
    let r = tf.reader(src, at, i);
    Ok((r.uint(tags::TILE_WIDTH)?.unwrap_or(0), r.uint(tags::TILE_LENGTH)?.unwrap_or(0)))
}

/// One scanned area of a BIF.
#[derive(Debug)]
struct Area {
    /// Level-0 top-left corner (after the Pos-Y conversion).
    x: i64,
    y: i64,
    start_col: i64,
    start_row: i64,
    across: i64,
    down: i64,
}

/// What a BIF's EncodeInfo says about level-0 tiles.
#[derive(Debug)]
struct Bif {
    areas: Vec<Area>,
    advance: (f64, f64),
    tile: (u64, u64),
}

/// The element children of `n` named `name`.
fn children<'a, 'i>(n: roxmltree::Node<'a, 'i>, name: &'static str) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    n.children().filter(move |c| c.is_element() && c.tag_name().name() == name)
}

/// Most placements accepted per level: a hostile EncodeInfo cannot make the index large.
const MAX_PLACEMENTS: i64 = crate::limits::LIMITS.placements as i64;

impl Bif {
    fn parse(xml: &str, tile: (u64, u64)) -> std::result::Result<Bif, String> {
        let doc = parse_xml(xml)?;
        let root = doc.root_element();
        if root.tag_name().name() != "EncodeInfo" {
            return Err("missing or inconsistent region metadata (root is not EncodeInfo)".into());
        }
        let infos: Vec<_> = children(root, "SlideStitchInfo").flat_map(|s| children(s, "ImageInfo")).collect();
        let origins: Vec<_> = children(root, "AoiOrigin").flat_map(|o| o.children().filter(|c| c.is_element())).collect();
        if infos.is_empty() || infos.len() != origins.len() {
            return Err(format!("missing or inconsistent region metadata ({} ImageInfo, {} AoiOrigin entries)", infos.len(), origins.len()));
        }
        let int = |n: roxmltree::Node<'_, '_>, a: &str| -> std::result::Result<i64, String> {
            let v = n.attribute(a).ok_or_else(|| format!("{} has no {a} attribute", n.tag_name().name()))?;
            parse_int(v).ok_or_else(|| format!("{} attribute {a} = {v:?} is not an integer", n.tag_name().name()))
        };
        let dbl = |n: roxmltree::Node<'_, '_>, a: &str| -> std::result::Result<f64, String> {
            let v = n.attribute(a).ok_or_else(|| format!("{} has no {a} attribute", n.tag_name().name()))?;
            parse_double(v).ok_or_else(|| format!("{} attribute {a} = {v:?} is not a number", n.tag_name().name()))
        };
        let (tw, th) = (tile.0 as i64, tile.1 as i64);
        let (mut areas, mut pos_y) = (Vec::new(), Vec::new());
        let (mut sum_x, mut sum_y, mut weight_x, mut weight_y) = (0.0f64, 0.0f64, 0i64, 0i64);
        for (info, origin) in infos.into_iter().zip(origins) {
            if int(info, "AOIScanned")? == 0 {
                continue;
            }
            let (ox, oy) = (int(origin, "OriginX")?, int(origin, "OriginY")?);
            let (w, h) = (int(info, "Width")?, int(info, "Height")?);
            if (w, h) != (tw, th) {
                return Err(format!("tile size mismatch: the TIFF has {tw}x{th}, ImageInfo says {w}x{h}"));
            }
            if ox < 0 || oy < 0 || ox % tw != 0 || oy % th != 0 {
                return Err(format!("area origin ({ox}, {oy}) is not a non-negative multiple of the tile size"));
            }
            let (across, down) = (int(info, "NumCols")?, int(info, "NumRows")?);
            if across < 1 || down < 1 || across.saturating_mul(down) > MAX_PLACEMENTS {
                return Err(format!("area of {across}x{down} tiles"));
            }
            let (px, py) = (dbl(info, "Pos-X")?, dbl(info, "Pos-Y")?);
            if !(px.abs() < 1e15 && py.abs() < 1e15) {
                return Err(format!("area position ({px}, {py})"));
            }
            let count = across * down;
            // Joints: tile numbers from 1, rows counted from the bottom, every other row right to left.
            let coords = |n: i64| -> std::result::Result<(i64, i64), String> {
                if n < 1 || n > count {
                    return Err(format!("tile number out of bounds: {n}"));
                }
                let (mut col, row) = ((n - 1) % across, (n - 1) / across);
                if row % 2 == 1 {
                    col = across - col - 1;
                }
                Ok((col, down - row - 1))
            };
            let joints: Vec<_> = children(info, "TileJointInfo").collect();
            if joints.is_empty() {
                return Err("an area has no TileJointInfo".into());
            }
            for j in joints {
                let (c1, r1) = coords(int(j, "Tile1")?)?;
                let (c2, r2) = coords(int(j, "Tile2")?)?;
                let dir = j.attribute("Direction").unwrap_or("");
                let ok = match dir {
                    "RIGHT" => c2 == c1 + 1 && r2 == r1,
                    "UP" => c2 == c1 && r2 == r1 - 1,
                    _ => return Err(format!("bad direction attribute {dir:?}")),
                };
                if !ok {
                    return Err(format!("unexpected tile join: {dir}, ({c1}, {r1}), ({c2}, {r2})"));
                }
                let (ovx, ovy, conf) = (dbl(j, "OverlapX")?, dbl(j, "OverlapY")?, int(j, "Confidence")?);
                if dir == "UP" {
                    sum_y += conf as f64 * -ovy;
                    weight_y = weight_y.saturating_add(conf);
                } else {
                    sum_x += conf as f64 * -ovx;
                    weight_x = weight_x.saturating_add(conf);
                }
            }
            areas.push(Area { x: px as i64, y: 0, start_col: ox / tw, start_row: oy / th, across, down });
            pos_y.push(py as i64);
        }
        if areas.is_empty() {
            return Err("no scanned area".into());
        }
        if weight_x == 0 || weight_y == 0 {
            return Err("no weighted RIGHT or UP joint: the tile advance is undefined".into());
        }
        let advance = (tw as f64 + sum_x / weight_x as f64, th as f64 + sum_y / weight_y as f64);
        if !(advance.0 > 0.0 && advance.1 > 0.0 && advance.0.is_finite() && advance.1.is_finite()) {
            return Err(format!("overlaps larger than the tiles: tile advance {advance:?}"));
        }
        // Pos-Y is the distance from an area's bottom up from a line below every area.
        let heights: Vec<i64> = areas.iter().map(|a| ((a.down - 1) as f64 * advance.1 + th as f64) as i64).collect();
        let top = areas.iter().zip(&pos_y).zip(&heights).map(|((_, &py), &h)| py.saturating_add(h)).fold(0, i64::max);
        for ((a, &py), &h) in areas.iter_mut().zip(&pos_y).zip(&heights) {
            a.y = top - py - h;
        }
        Ok(Bif { areas, advance, tile })
    }

    /// `openslide.region[i].*`: each area's grid origin × advance and its extent.
    fn regions(&self) -> Vec<Bounds> {
        let (ax, ay) = self.advance;
        self.areas
            .iter()
            .map(|a| Bounds {
                x: (ax * a.start_col as f64) as i64,
                y: (ay * a.start_row as f64) as i64,
                width: (ax * (a.across - 1) as f64 + self.tile.0 as f64).ceil() as u64,
                height: (ay * (a.down - 1) as f64 + self.tile.1 as f64).ceil() as u64,
            })
            .collect()
    }

    /// The level of `stored` (its IFD read as a regular image) at `downsample`: positioned
    /// sub-tiles and OpenSlide's level size.
    fn level(&self, stored: ImageIndex, downsample: f64, at: &Location) -> Result<ImageIndex> {
        let (tw, th) = (stored.tile_width as f64, stored.tile_height as f64);
        let (ax, ay) = (self.advance.0 / downsample, self.advance.1 / downsample);
        let (sw, sh) = (tw / downsample, th / downsample);
        // Sub-tiles per stored tile, truncated as OpenSlide does; the surface drawn is the
        // whole tile when 1, else ceil(tile / spt).
        let spt = (downsample as i64).max(1);
        let (cw, ch) = if spt > 1 { ((tw / spt as f64).ceil() as u32, (th / spt as f64).ceil() as u32) } else { (stored.tile_width, stored.tile_height) };
        // Every area inside the level's stored grid, and not too many tiles in all, before any
        // work per tile.
        let (cols, rows) = stored.grid.dims();
        let mut total = 0i64;
        for a in &self.areas {
            let (last_col, last_row) = ((a.start_col + a.across - 1) / spt, (a.start_row + a.down - 1) / spt);
            if last_col as u64 >= cols || last_row as u64 >= rows {
                return Err(Error::format(at, format!("EncodeInfo area of tiles ({}, {}) .. ({}, {}) lies outside the level's {cols}x{rows} tile grid", a.start_col, a.start_row, a.start_col + a.across - 1, a.start_row + a.down - 1)));
            }
            total = total.saturating_add(a.across * a.down);
        }
        if total > MAX_PLACEMENTS {
            return Err(Error::limits(at, format!("EncodeInfo areas of {total} tiles in all (limit {MAX_PLACEMENTS})")));
        }
        // (row, col) → position; a later area replaces an earlier one's tile (a hash map in OpenSlide).
        let mut at_cell: BTreeMap<(i64, i64), (f64, f64)> = BTreeMap::new();
        let (mut left, mut top, mut right, mut bottom) = (f64::INFINITY, f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY);
        for a in &self.areas {
            let off = ((a.x as f64 - a.start_col as f64 * self.advance.0) / downsample, (a.y as f64 - a.start_row as f64 * self.advance.1) / downsample);
            for row in a.start_row..a.start_row + a.down {
                for col in a.start_col..a.start_col + a.across {
                    let (x, y) = (col as f64 * ax + off.0, row as f64 * ay + off.1);
                    left = left.min(x);
                    top = top.min(y);
                    right = right.max(x + sw);
                    bottom = bottom.max(y + sh);
                    at_cell.insert((row, col), (x, y));
                }
            }
        }
        let width = (left + (right - left)).ceil();
        let height = (top + (bottom - top)).ceil();
        if !(width >= 1.0 && height >= 1.0 && width <= super::MAX_IMAGE_EDGE as f64 && height <= super::MAX_IMAGE_EDGE as f64) {
            return Err(Error::format(at, format!("level of {width}x{height} pixels from the EncodeInfo")));
        }
        let mut placements = Vec::with_capacity(at_cell.len());
        for (&(row, col), &(x, y)) in &at_cell {
            let (scol, srow) = ((col / spt) as u64, (row / spt) as u64);
            let src_x = ((col % spt) as f64 * (tw / spt as f64)) as u32;
            let src_y = ((row % spt) as f64 * (th / spt as f64)) as u32;
            let (mut px, mut py) = ((x + 0.5).floor() as i64, (y + 0.5).floor() as i64);
            let (mut w, mut h) = (cw.min(stored.tile_width - src_x) as i64, ch.min(stored.tile_height - src_y) as i64);
            let (mut sx, mut sy) = (src_x as i64, src_y as i64);
            // OpenSlide's read_region never shows negative level coordinates.
            if px < 0 {
                (sx, w, px) = (sx - px, w + px, 0);
            }
            if py < 0 {
                (sy, h, py) = (sy - py, h + py, 0);
            }
            if w > 0 && h > 0 {
                placements.push(PositionedTile { x: px, y: py, width: w as u32, height: h as u32, col: scol, row: srow, src_x: sx as u32, src_y: sy as u32 });
            }
        }
        let tile = (stored.tile_width, stored.tile_height);
        let grid = Grid::positioned(stored.grid, (stored.width, stored.height), tile, &placements)
            .ok_or_else(|| Error::format(at, "EncodeInfo placements do not fit the tile grid"))?;
        Ok(ImageIndex { width: width as u64, height: height as u64, tiled: false, grid, ..stored })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = r#"<EncodeInfo><AoiOrigin><A OriginX="0" OriginY="0"/></AoiOrigin><SlideStitchInfo>
        <ImageInfo AOIScanned="1" Width="64" Height="64" NumRows="1" NumCols="2" Pos-X="0" Pos-Y="0">
        <TileJointInfo Direction="RIGHT" Tile1="1" Tile2="2" OverlapX="OX" OverlapY="0" Confidence="10"/>
        <TileJointInfo Direction="UP" Tile1="1" Tile2="1" OverlapX="0" OverlapY="4" Confidence="10"/>
        </ImageInfo></SlideStitchInfo></EncodeInfo>"#;

    #[test]
    fn encode_info_errors_are_named() {
        let bif = |s: &str| Bif::parse(s, (64, 64));
        // UP from tile 1 to itself is not a join.
        assert!(bif(&INFO.replace("OX", "8")).unwrap_err().contains("unexpected tile join"));
        let ok = INFO.replace("OX", "8").replace(r#"<TileJointInfo Direction="UP" Tile1="1" Tile2="1" OverlapX="0" OverlapY="4" Confidence="10"/>"#, "");
        assert!(bif(&ok).unwrap_err().contains("advance is undefined"), "no UP joint");
        let two_rows = INFO.replace("OX", "8").replace(r#"NumRows="1""#, r#"NumRows="2""#).replace(r#"Tile1="1" Tile2="1""#, r#"Tile1="1" Tile2="4""#);
        let b = bif(&two_rows).unwrap();
        assert_eq!(b.advance, (56.0, 60.0));
        assert_eq!(b.areas[0].y, 0);
        assert!(bif(&two_rows.replace(r#"OverlapX="8""#, r#"OverlapX="64""#)).unwrap_err().contains("larger than the tiles"));
        assert!(bif(&two_rows.replace(r#"Width="64""#, r#"Width="32""#)).unwrap_err().contains("tile size mismatch"));
        assert!(bif(&two_rows.replace(r#"Tile2="2""#, r#"Tile2="9""#)).unwrap_err().contains("out of bounds"));
        assert!(bif(&two_rows.replace("RIGHT", "LEFT")).unwrap_err().contains("bad direction"));
        assert!(bif(&two_rows.replace(r#"OriginX="0""#, r#"OriginX="10""#)).unwrap_err().contains("origin"));
        assert!(bif(&two_rows.replace("<A ", "<A/><B ")).unwrap_err().contains("inconsistent"));
        assert!(bif(&two_rows.replace("</EncodeInfo>", "")).unwrap_err().contains("broken XML"));
        assert!(bif(&two_rows.replace(r#"NumCols="2""#, r#"NumCols="x""#)).unwrap_err().contains("not an integer"));
    }

    #[test]
    fn level_descriptions_and_integers_parse_as_openslide() {
        assert_eq!(level_info("level=2 mag=10 quality=90").unwrap(), (2, 10.0));
        assert_eq!(level_info("mag=2,5 level=3").unwrap(), (3, 2.5));
        assert!(level_info("level=1").is_err());
        assert!(level_info("level=x mag=1").is_err());
        assert_eq!(parse_int("40"), Some(40));
        assert_eq!(parse_int(" -3"), Some(-3));
        assert_eq!(parse_int("40.0"), None);
        assert_eq!(parse_int(""), None);
    }
}
