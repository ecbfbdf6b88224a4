//! Camera positions and stored images → the tiles of each zoom level, placed as OpenSlide
//! 4.0.1's MIRAX driver places them (`mirax_open`, `get_tile_position`, `insert_tile`,
//! `process_hier_data_pages_from_indexfile` in `openslide-vendor-mirax.c`) and painted in the
//! order of its tilemap grid (`openslide-grid.c`).
//!
//! The scanner's camera takes a photo per *position*; each photo is cut into `d × d` stored
//! images (`CameraImageDivisionsPerSide`). Level `k` concatenates `concat_k = 2^(Σ exponents)`
//! level-0 images per side into one stored image. When a position record exists or level 0
//! has an overlap, each stored image is cut into `tiles_per_image²` sub-tiles (one per camera
//! position it covers) placed at their own positions; otherwise whole images are placed.
//! A tile is registered at tilemap cell (`x / divisor + xi`, `y / divisor + yi`); a later
//! record at the same cell replaces the earlier. OpenSlide paints cells bottom row first and,
//! in a row, right to left, each over what is not yet painted (cairo SATURATE), so of
//! overlapping tiles the one of the larger row, then column, shows: as placements for
//! [`crate::index::Grid::positioned`] (later covers earlier) the cells go in row-major order.
//!
//! Departures (typed errors instead of resampling): a position or sub-tile origin that is not a
//! whole number of level pixels (OpenSlide draws it at a sub-pixel offset) is `Unsupported`.
//! Level coordinates below 0 are cut off, as OpenSlide's `read_region` never shows them.

use std::collections::{BTreeMap, HashSet};

use super::index::HierRecord;
use crate::index::PositionedTile;

/// Most placements accepted per level (a bound on open-time work and memory).
pub const MAX_PLACEMENTS: u64 = crate::limits::LIMITS.placements;

/// One zoom level's section values and the parameters OpenSlide derives from them.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelGeom {
    /// Level-0 images concatenated per side in one stored image (`2^Σ exponents`).
    pub concat: i64,
    /// Stored image width and height in pixels (`DIGITIZER_WIDTH/HEIGHT`).
    pub image: (u32, u32),
    /// Tilemap cells per level-0 image unit divisor.
    pub divisor: i64,
    /// Sub-tiles per stored image per side.
    pub tiles_per_image: i64,
    /// Camera positions per tile per side (levels without sub-tiles).
    pub positions_per_tile: i64,
    /// Tile width and height in pixels (image size / tiles per image; may be fractional).
    pub tile: (f64, f64),
    /// Distance between tilemap cells in pixels.
    pub advance: (f64, f64),
}

/// Most level-0 camera images (`IMAGENUMBER_X × IMAGENUMBER_Y`) accepted: a bound on the loops
/// and tables the camera grid sizes, checked before anything is sized by it (16.7 M images;
/// the largest 3DHISTECH scans hold about a million).
pub const MAX_CAMERA_IMAGES: u64 = crate::limits::LIMITS.placements;

/// The level-0 pixel position of each camera position, row-major over
/// `(images.0 / d) × (images.1 / d)` positions.
#[derive(Debug, Clone, PartialEq)]
pub enum Positions {
    /// Read from the slide's position record (one entry per camera position).
    Listed(Vec<(i64, i64)>),
    /// No position record: a regular lattice of `step` level-0 pixels (the photo size less the
    /// overlap), truncated to integers per position; computed on demand, so the grid costs no
    /// memory.
    Lattice {
        /// Positions across.
        across: i64,
        /// Positions in all.
        count: i64,
        /// Distance between two positions across and down, in level-0 pixels.
        step: (f64, f64),
    },
}

impl Positions {
    /// The position of camera position `i`, `None` outside the grid.
    pub fn get(&self, i: i64) -> Option<(i64, i64)> {
        match self {
            Positions::Listed(v) => usize::try_from(i).ok().and_then(|i| v.get(i)).copied(),
            Positions::Lattice { across, count, step } => {
                ((0..*count).contains(&i) && *across > 0).then(|| (((i % across) as f64 * step.0) as i64, ((i / across) as f64 * step.1) as i64))
            }
        }
    }
}

/// The slide-wide values the placement needs.
#[derive(Debug, Clone, PartialEq)]
pub struct SlideGeom {
    /// `IMAGENUMBER_X`, `IMAGENUMBER_Y` (level-0 images across and down, > 0).
    pub images: (i32, i32),
    /// `CameraImageDivisionsPerSide` (> 0).
    pub divisions: i32,
    /// Level-0 pixel position of each camera position.
    pub positions: Positions,
}

impl SlideGeom {
    /// Camera positions across.
    fn positions_across(&self) -> i64 {
        (self.images.0 / self.divisions) as i64
    }
}

/// Derive a level's parameters as `mirax_open` does. `subtiles`: a position record exists or
/// level 0 has an overlap; `overlap` is this level's `OVERLAP_X/Y`.
pub fn level_geom(concat: i64, divisions: i32, subtiles: bool, image: (u32, u32), overlap: (f64, f64)) -> LevelGeom {
    let d = divisions as i64;
    let positions_per_image = (concat / d).max(1);
    let (divisor, tiles_per_image, positions_per_tile) = if subtiles { (concat.min(d), positions_per_image, 1) } else { (concat, 1, positions_per_image) };
    let tile = (image.0 as f64 / tiles_per_image as f64, image.1 as f64 / tiles_per_image as f64);
    let images_per_position = (d / concat).max(1) as f64;
    let advance = (tile.0 - overlap.0 / images_per_position, tile.1 - overlap.1 / images_per_position);
    LevelGeom { concat, image, divisor, tiles_per_image, positions_per_tile, tile, advance }
}

/// Level-0 width or height (`base_w` of `mirax_open`): the sum over `n` images of the image
/// size, less the overlap for every image that ends a division group except the last,
/// truncated to an integer after each image as the C `int64 += double` does.
pub fn base_size(n: i32, divisions: i32, image: u32, overlap: f64) -> i64 {
    let mut base: i64 = 0;
    for i in 0..n {
        let full = i % divisions != divisions - 1 || i == n - 1;
        base = if full { base + image as i64 } else { (base as f64 + (image as f64 - overlap)) as i64 };
    }
    base
}

/// Camera positions when the slide has no position record: a regular lattice of the photo
/// size less the level-0 overlap (truncated to integers), computed on demand.
pub fn lattice_positions(images: (i32, i32), divisions: i32, image0: (u32, u32), overlap: (f64, f64)) -> Positions {
    let (px, py) = ((images.0 / divisions) as i64, (images.1 / divisions) as i64);
    let step = ((image0.0 as f64 * divisions as f64 - overlap.0), (image0.1 as f64 * divisions as f64 - overlap.1));
    Positions::Lattice { across: px, count: px * py, step }
}

/// One level's tiles: placements in paint order, whether the tile-size hint survives (no tile
/// off its cell's advance), and the level-0 tilemap bounding box (x0, y0, x1, y1).
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    /// Placements, later covering earlier; `col` is the record's index in the level.
    pub placements: Vec<PositionedTile>,
    /// `false` when some tile lies off its cell's nominal position.
    pub hint_ok: bool,
    /// Bounding box of the tiles (their whole tile size), `None` without tiles.
    pub bbox: Option<(f64, f64, f64, f64)>,
}

/// Place the records of zoom level `zoom` (`lg`) as OpenSlide does. `image0` is level 0's
/// stored image size; `active` collects the camera positions with a level-0 image (filled at
/// zoom 0, consulted above).
///
/// # Errors
/// `Err((unsupported, message))`: `unsupported` true for a fractional position; otherwise a
/// record breaking OpenSlide's rules (negative values, outside the image grid, not a multiple
/// of the concat factor), an image outside the position grid, or too many placements.
pub fn place_level(
    slide: &SlideGeom,
    lg: &LevelGeom,
    zoom: usize,
    image0: (u32, u32),
    records: &[HierRecord],
    active: &mut HashSet<i64>,
) -> Result<Placed, (bool, String)> {
    let fmt = |m: String| (false, m);
    let (ix, iy) = slide.images;
    let d = slide.divisions as i64;
    let across = slide.positions_across();
    // (row, col) → (record, level x, level y, source x, source y).
    type Cell = (usize, f64, f64, f64, f64);
    let mut cells: BTreeMap<(i64, i64), Cell> = BTreeMap::new();
    let mut hint_ok = true;
    let mut count: u64 = 0;
    for (r, rec) in records.iter().enumerate() {
        for (v, what) in [(rec.image_index, "image_index"), (rec.offset, "offset"), (rec.length, "length"), (rec.fileno, "fileno")] {
            if v < 0 {
                return Err(fmt(format!("zoom level {zoom} record {r}: {what} < 0 ({v})")));
            }
        }
        let (x, y) = ((rec.image_index % ix) as i64, (rec.image_index / ix) as i64);
        if y >= iy as i64 {
            return Err(fmt(format!("zoom level {zoom} record {r}: y ({y}) outside the {iy} images down")));
        }
        if x % lg.concat != 0 || y % lg.concat != 0 {
            return Err(fmt(format!("zoom level {zoom} record {r}: image ({x}, {y}) not a multiple of the level's concat factor {}", lg.concat)));
        }
        for yi in 0..lg.tiles_per_image {
            let yy = y + yi * d;
            if yy >= iy as i64 {
                break;
            }
            for xi in 0..lg.tiles_per_image {
                let xx = x + xi * d;
                if xx >= ix as i64 {
                    break;
                }
                count += 1;
                if count > MAX_PLACEMENTS {
                    return Err(fmt(format!("zoom level {zoom}: more than {MAX_PLACEMENTS} tiles")));
                }
                let (xp, yp) = (xx / d, yy / d);
                let cp = yp * across + xp;
                let Some((px, py)) = slide.positions.get(cp) else {
                    return Err(fmt(format!("zoom level {zoom}: image ({xx}, {yy}) has no camera position (IMAGENUMBER not a multiple of the divisions?)")));
                };
                if zoom == 0 {
                    if px == 0 && py == 0 && (xp != 0 || yp != 0) {
                        continue; // an inactive position
                    }
                    active.insert(cp);
                } else {
                    let ppt = lg.positions_per_tile;
                    let any = (yp..yp + ppt).any(|ypp| (xp..xp + ppt).any(|xpp| active.contains(&(ypp * across + xpp))));
                    if !any {
                        continue;
                    }
                }
                let pos0 = (px + image0.0 as i64 * (xx - xp * d), py + image0.1 as i64 * (yy - yp * d));
                let pos = (pos0.0 as f64 / lg.concat as f64, pos0.1 as f64 / lg.concat as f64);
                let cell = (x / lg.divisor + xi, y / lg.divisor + yi);
                let off = (pos.0 - cell.0 as f64 * lg.advance.0, pos.1 - cell.1 as f64 * lg.advance.1);
                if off.0 != 0.0 || off.1 != 0.0 {
                    hint_ok = false;
                }
                let src = (lg.tile.0 * xi as f64, lg.tile.1 * yi as f64);
                cells.insert((cell.1, cell.0), (r, pos.0, pos.1, src.0, src.1));
            }
        }
    }
    let mut placements = Vec::with_capacity(cells.len());
    let mut bbox: Option<(f64, f64, f64, f64)> = None;
    let (cw, ch) = (lg.tile.0.ceil() as i64, lg.tile.1.ceil() as i64);
    for &(r, x, y, sx, sy) in cells.values() {
        let b = (x, y, x + lg.tile.0, y + lg.tile.1);
        bbox = Some(bbox.map_or(b, |a| (a.0.min(b.0), a.1.min(b.1), a.2.max(b.2), a.3.max(b.3))));
        if x.fract() != 0.0 || y.fract() != 0.0 || sx.fract() != 0.0 || sy.fract() != 0.0 {
            return Err((true, format!("zoom level {zoom}: a tile at the fractional position ({x}, {y}) (source ({sx}, {sy})); OpenSlide resamples these, slidestream does not")));
        }
        let (mut px, mut py, mut sx, mut sy) = (x as i64, y as i64, sx as i64, sy as i64);
        // The part of the stored image the tile covers (transparent past the image's edge).
        let mut w = cw.min(lg.image.0 as i64 - sx);
        let mut h = ch.min(lg.image.1 as i64 - sy);
        if px < 0 {
            (sx, w, px) = (sx - px, w + px, 0);
        }
        if py < 0 {
            (sy, h, py) = (sy - py, h + py, 0);
        }
        if w > 0 && h > 0 {
            placements.push(PositionedTile { x: px, y: py, width: w as u32, height: h as u32, col: r as u64, row: 0, src_x: sx as u32, src_y: sy as u32 });
        }
    }
    Ok(Placed { placements, hint_ok, bbox })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: i32) -> HierRecord {
        HierRecord { image_index: i, offset: 0, length: 1, fileno: 0 }
    }

    #[test]
    fn level_sizes_and_parameters_follow_openslide() {
        assert_eq!(base_size(4, 1, 64, 4.0), 244, "the oracle's 4 x 64 with overlap 4");
        assert_eq!(base_size(4, 2, 64, 4.0), 252, "only images ending a division group lose the overlap");
        assert_eq!(base_size(3, 1, 64, 0.0), 192);
        let lg = level_geom(4, 2, true, (64, 64), (0.0, 0.0));
        assert_eq!((lg.divisor, lg.tiles_per_image, lg.positions_per_tile, lg.tile), (2, 2, 1, (32.0, 32.0)));
        let lg = level_geom(4, 2, false, (64, 64), (0.0, 0.0));
        assert_eq!((lg.divisor, lg.tiles_per_image, lg.positions_per_tile), (4, 1, 2));
        let lg = level_geom(1, 2, true, (64, 64), (4.0, 4.0));
        assert_eq!(lg.advance, (62.0, 62.0), "the overlap is split over the images of a photo");
        let p = lattice_positions((4, 2), 2, (64, 64), (4.0, 0.0));
        assert_eq!((0..3).map(|i| p.get(i)).collect::<Vec<_>>(), vec![Some((0, 0)), Some((124, 0)), None]);
        assert_eq!(p.get(-1), None);
    }

    #[test]
    fn overlapping_tiles_keep_the_bottom_right_on_top_and_inactive_positions_drop() {
        // 3 x 1 images, position 1 overlapping position 0 by 2 px, position 2 inactive (0, 0).
        let slide = SlideGeom { images: (3, 1), divisions: 1, positions: Positions::Listed(vec![(0, 0), (62, 0), (0, 0)]) };
        let lg = level_geom(1, 1, true, (64, 64), (2.0, 0.0));
        let mut active = HashSet::new();
        let p = place_level(&slide, &lg, 0, (64, 64), &[rec(0), rec(1), rec(2)], &mut active).unwrap();
        assert_eq!(p.placements.len(), 2, "position 2 is inactive");
        assert_eq!((p.placements[1].x, p.placements[1].col), (62, 1), "the right tile comes later (on top)");
        assert!(p.hint_ok, "both tiles sit on their cells (advance 62)");
        assert_ne!(lg.advance, lg.tile, "but the advance is not the tile size: no hint");
        assert_eq!(p.bbox, Some((0.0, 0.0, 126.0, 64.0)));
        assert_eq!(active, HashSet::from([0, 1]));
    }

    #[test]
    fn bad_records_and_fractional_positions_are_refused() {
        let slide = SlideGeom { images: (2, 2), divisions: 1, positions: Positions::Listed(vec![(0, 0), (64, 0), (0, 64), (64, 64)]) };
        let mut active = HashSet::new();
        let l1 = level_geom(2, 1, false, (64, 64), (0.0, 0.0));
        let e = place_level(&slide, &l1, 1, (64, 64), &[rec(1)], &mut active).unwrap_err();
        assert!(!e.0 && e.1.contains("multiple"), "{e:?}");
        let l0 = level_geom(1, 1, false, (64, 64), (0.0, 0.0));
        assert!(place_level(&slide, &l0, 0, (64, 64), &[rec(4)], &mut active).unwrap_err().1.contains("outside"));
        assert!(place_level(&slide, &l0, 0, (64, 64), &[HierRecord { length: -1, ..rec(0) }], &mut active).unwrap_err().1.contains("length < 0"));
        let odd = SlideGeom { positions: Positions::Listed(vec![(0, 0), (63, 0), (0, 64), (63, 64)]), ..slide.clone() };
        place_level(&odd, &l0, 0, (64, 64), &[rec(0), rec(1)], &mut active).unwrap();
        let e = place_level(&odd, &l1, 1, (64, 64), &[rec(0)], &mut active);
        assert!(e.is_ok(), "no sub-tiles: the image is placed at image 0's position");
        let sub = level_geom(2, 1, true, (64, 64), (0.0, 0.0));
        let e = place_level(&odd, &sub, 1, (64, 64), &[rec(0)], &mut active).unwrap_err();
        assert!(e.0 && e.1.contains("fractional"), "{e:?}");
    }
}
