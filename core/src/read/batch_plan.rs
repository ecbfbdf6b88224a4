//! The batch plan: from patch requests to the unique tiles they need, the part of each tile the
//! batch needs, and each patch's tile grid. Pure (no I/O, no decoding), shared by the CPU path
//! ([`crate::Slide::read_region_into`], [`crate::Slide::read_regions_rgb_into`]) and the GPU
//! engine.
//!
//! Coordinates (DESIGN "Decisions"): a patch's `location` is in level-0 pixels, its `size` in
//! pixels of its level; its origin in the level is `floor(location / downsample)`
//! ([`level_origin`]). Tiles are keyed by [`TileKey`] (slide, level, column, row), so one plan
//! may hold patches of several levels or slides: each patch names its own [`LevelGeom`].

use std::collections::HashMap;
use std::ops::Range;

pub use crate::cache::TileKey;
use crate::geometry::{level_origin, tile_span, Rect};
use crate::index::ImageIndex;

/// The level a patch is read from: which slide and level (for the tile keys) and its geometry.
#[derive(Debug, Clone, Copy)]
pub struct LevelGeom<'a> {
    /// Process-unique id of the open slide.
    pub slide: u64,
    /// Pyramid level.
    pub level: u32,
    /// The level's image: size, tile size, tile grid.
    pub image: &'a ImageIndex,
    /// Downsample of the level relative to level 0.
    pub downsample: f64,
}

/// A half-open rectangle inside one tile, in pixels relative to the tile's top-left corner:
/// `(x0, y0, x1, y1)`, within the tile's valid (inside-the-image) area. As
/// [`ImageIndex::part_of_tile`] returns.
pub type TilePart = (u64, u64, u64, u64);

/// One tile the batch needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileNeed {
    /// Which tile.
    pub key: TileKey,
    /// The union (bounding box) of the parts the batch's patches need of it.
    pub part: TilePart,
}

/// One patch of the plan: its rectangle in its level and its tile grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchGrid {
    /// The patch in pixels of its level: origin `floor(location / downsample)` (may be negative
    /// or beyond the image), `w × h` = the requested size.
    pub rect: Rect,
    /// Column and row of the grid's top-left tile (0 when the patch misses the image).
    pub col0: u64,
    /// See `col0`.
    pub row0: u64,
    /// Grid width and height in tiles (0 × 0 when the patch lies wholly outside the image).
    pub cols: u64,
    /// See `cols`.
    pub rows: u64,
    /// The grid's entries in [`BatchPlan::grid`], row-major (`cols × rows` of them). Empty for
    /// a patch of a positioned level, whose tiles are placed by [`pieces`](Self::pieces).
    pub cells: Range<usize>,
    /// The patch's entries in [`BatchPlan::pieces`] (positioned levels only; empty otherwise).
    pub pieces: Range<usize>,
}

/// A part of one stored tile placed into a patch of a positioned level
/// ([`crate::index::PositionedGrid`]): the pixels `src_x .. src_x + w`, `src_y .. src_y + h` of
/// the tile go to level position (`x`, `y`). The pieces of a level are disjoint, so a patch's
/// pieces may be placed in any order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedPiece {
    /// Index into [`BatchPlan::tiles`].
    pub tile: usize,
    /// Left edge in level pixels.
    pub x: i64,
    /// Top edge in level pixels.
    pub y: i64,
    /// Left edge in the stored tile's pixels.
    pub src_x: u64,
    /// Top edge in the stored tile's pixels.
    pub src_y: u64,
    /// Width in pixels.
    pub w: u64,
    /// Height in pixels.
    pub h: u64,
}

impl PatchGrid {
    /// Where the top-left pixel of tile (`col`, `row`) (of a `tile_w × tile_h` grid) lands in
    /// the patch, in patch pixels (negative when the tile starts above or left of the patch).
    pub fn tile_offset(&self, col: u64, row: u64, tile_w: u32, tile_h: u32) -> (i64, i64) {
        ((col * tile_w as u64) as i64 - self.rect.x, (row * tile_h as u64) as i64 - self.rect.y)
    }
}

/// A batch plan (see the module documentation). Build with [`BatchPlan::push`], or
/// [`BatchPlan::build`] for one level.
#[derive(Debug, Clone, Default)]
pub struct BatchPlan {
    /// The unique tiles, in order of first use.
    pub tiles: Vec<TileNeed>,
    /// The patches, in request order.
    pub patches: Vec<PatchGrid>,
    /// Every patch's grid cells, concatenated: indices into [`tiles`](Self::tiles).
    pub grid: Vec<usize>,
    /// Every patch's pieces (positioned levels), concatenated.
    pub pieces: Vec<PlacedPiece>,
    index: HashMap<TileKey, usize>,
}

impl BatchPlan {
    /// An empty plan.
    pub fn new() -> Self {
        BatchPlan::default()
    }

    /// The plan of `locations` (level-0 pixels), each `size` pixels of one level.
    pub fn build(geom: &LevelGeom<'_>, locations: &[(i64, i64)], size: (u64, u64)) -> Self {
        let mut p = BatchPlan { patches: Vec::with_capacity(locations.len()), ..Default::default() };
        for &loc in locations {
            p.push(geom, loc, size);
        }
        p
    }

    /// The patch rectangle in its level for a level-0 `location` and a level `size`.
    pub fn patch_rect(geom: &LevelGeom<'_>, location: (i64, i64), size: (u64, u64)) -> Rect {
        Rect { x: level_origin(location.0, geom.downsample), y: level_origin(location.1, geom.downsample), w: size.0, h: size.1 }
    }

    /// Add one patch (level-0 `location`, `size` in pixels of `geom`'s level); returns its index.
    pub fn push(&mut self, geom: &LevelGeom<'_>, location: (i64, i64), size: (u64, u64)) -> usize {
        self.push_rect(geom, BatchPlan::patch_rect(geom, location, size))
    }

    /// Add one patch given as a rectangle of `geom`'s level; returns its index.
    pub fn push_rect(&mut self, geom: &LevelGeom<'_>, rect: Rect) -> usize {
        let img = geom.image;
        let start = self.grid.len();
        let pstart = self.pieces.len();
        let mut pg = PatchGrid { rect, col0: 0, row0: 0, cols: 0, rows: 0, cells: start..start, pieces: pstart..pstart };
        if img.grid.is_positioned() {
            for q in img.grid.pieces_in(&rect) {
                let x0 = q.x.max(rect.x);
                let y0 = q.y.max(rect.y);
                let x1 = (q.x + q.width as i64).min(rect.x + rect.w as i64);
                let y1 = (q.y + q.height as i64).min(rect.y + rect.h as i64);
                let (sx, sy) = (q.src_x as u64 + (x0 - q.x) as u64, q.src_y as u64 + (y0 - q.y) as u64);
                let (w, h) = ((x1 - x0) as u64, (y1 - y0) as u64);
                let k = self.need(TileKey { slide: geom.slide, level: geom.level, col: q.col, row: q.row }, (sx, sy, sx + w, sy + h));
                self.pieces.push(PlacedPiece { tile: k, x: x0, y: y0, src_x: sx, src_y: sy, w, h });
            }
            pg.pieces = pstart..self.pieces.len();
            self.patches.push(pg);
            return self.patches.len() - 1;
        }
        if let Some(clip) = rect.clip(img.width, img.height) {
            let (cols, rows) = tile_span(&clip, img.tile_width, img.tile_height);
            pg.col0 = *cols.start();
            pg.row0 = *rows.start();
            pg.cols = cols.end() - cols.start() + 1;
            pg.rows = rows.end() - rows.start() + 1;
            for row in rows {
                for col in cols.clone() {
                    let part = img.part_of_tile(&clip, col, row);
                    let k = self.need(TileKey { slide: geom.slide, level: geom.level, col, row }, part);
                    self.grid.push(k);
                }
            }
        }
        pg.cells = start..self.grid.len();
        self.patches.push(pg);
        self.patches.len() - 1
    }

    /// The index in [`tiles`](Self::tiles) of tile `key`, added if new, its part widened to
    /// include `part`.
    fn need(&mut self, key: TileKey, part: TilePart) -> usize {
        match self.index.get(&key) {
            Some(&k) => {
                let u = &mut self.tiles[k].part;
                *u = (u.0.min(part.0), u.1.min(part.1), u.2.max(part.2), u.3.max(part.3));
                k
            }
            None => {
                self.index.insert(key, self.tiles.len());
                self.tiles.push(TileNeed { key, part });
                self.tiles.len() - 1
            }
        }
    }

    /// The pieces of patch `p` (positioned levels; empty otherwise).
    pub fn patch_pieces(&self, p: usize) -> &[PlacedPiece] {
        &self.pieces[self.patches[p].pieces.clone()]
    }

    /// `true` when some patch of the plan reads a positioned level (placed by pieces, not by
    /// a tile grid).
    pub fn has_pieces(&self) -> bool {
        !self.pieces.is_empty()
    }

    /// The cells of patch `p`: (index into [`tiles`](Self::tiles), the tile's key), row-major.
    pub fn patch_tiles(&self, p: usize) -> impl Iterator<Item = (usize, TileKey)> + '_ {
        self.grid[self.patches[p].cells.clone()].iter().map(move |&k| (k, self.tiles[k].key))
    }

    /// (column, row) of every unique tile, in [`tiles`](Self::tiles) order.
    pub fn coords(&self) -> Vec<(u64, u64)> {
        self.tiles.iter().map(|t| (t.key.col, t.key.row)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::TileLoc;
    use crate::read::test_image;

    /// A 1000 × 700 level of 256 × 256 tiles (4 × 3 grid; the last column is 232 wide, the last
    /// row 188 high).
    fn image() -> ImageIndex {
        test_image(1000, 700, 256, 256, 1, vec![TileLoc::primary(8, 1); 12])
    }

    fn key(col: u64, row: u64) -> TileKey {
        TileKey { slide: 7, level: 1, col, row }
    }

    #[test]
    fn one_patch_spanning_four_tiles() {
        let img = image();
        let g = LevelGeom { slide: 7, level: 1, image: &img, downsample: 2.0 };
        // Level-0 (500, 401) at downsample 2 → level origin (250, 200); 20 × 100 pixels.
        let p = BatchPlan::build(&g, &[(500, 401)], (20, 100));
        assert_eq!(p.patches[0].rect, Rect { x: 250, y: 200, w: 20, h: 100 });
        assert_eq!((p.patches[0].col0, p.patches[0].row0, p.patches[0].cols, p.patches[0].rows), (0, 0, 2, 2));
        let keys: Vec<TileKey> = p.patch_tiles(0).map(|(_, k)| k).collect();
        assert_eq!(keys, vec![key(0, 0), key(1, 0), key(0, 1), key(1, 1)]);
        // Parts: x 250..256 of column 0, 0..14 of column 1; y 200..256 of row 0, 0..44 of row 1.
        let parts: Vec<TilePart> = p.tiles.iter().map(|t| t.part).collect();
        assert_eq!(parts, vec![(250, 200, 256, 256), (0, 200, 14, 256), (250, 0, 256, 44), (0, 0, 14, 44)]);
        assert_eq!(p.patches[0].tile_offset(1, 1, 256, 256), (6, 56));
        assert_eq!(p.patches[0].tile_offset(0, 0, 256, 256), (-250, -200));
    }

    #[test]
    fn shared_tiles_are_planned_once_with_the_union_of_parts() {
        let img = image();
        let g = LevelGeom { slide: 7, level: 1, image: &img, downsample: 1.0 };
        let p = BatchPlan::build(&g, &[(10, 10), (100, 20), (10, 10)], (50, 50));
        assert_eq!(p.tiles, vec![TileNeed { key: key(0, 0), part: (10, 10, 150, 70) }]);
        assert_eq!(p.grid, vec![0, 0, 0]);
        assert_eq!(p.patches.len(), 3);
        assert_eq!(p.coords(), vec![(0, 0)]);
    }

    #[test]
    fn edges_and_outside() {
        let img = image();
        let g = LevelGeom { slide: 7, level: 1, image: &img, downsample: 1.0 };
        let mut p = BatchPlan::new();
        // Wholly outside: an empty grid, no tiles.
        assert_eq!(p.push(&g, (-500, -500), (100, 100)), 0);
        assert_eq!(p.push(&g, (1000, 0), (10, 10)), 1);
        assert!(p.tiles.is_empty() && p.grid.is_empty());
        assert_eq!((p.patches[0].cols, p.patches[0].rows), (0, 0));
        // Over the bottom-right corner: only the valid part of the last tile (232 × 188).
        p.push(&g, (900, 600), (500, 500));
        assert_eq!(p.tiles, vec![TileNeed { key: key(3, 2), part: (132, 88, 232, 188) }]);
        // Partly left of the image: clipped at 0, offset negative in the patch frame.
        let k = p.push(&g, (-20, 0), (40, 10));
        assert_eq!(p.patch_tiles(k).map(|(_, key)| key).collect::<Vec<_>>(), vec![key(0, 0)]);
        assert_eq!(p.patches[k].tile_offset(0, 0, 256, 256), (20, 0));
        assert_eq!(p.tiles[1].part, (0, 0, 20, 10));
    }

    #[test]
    fn positioned_levels_plan_pieces_clipped_to_the_patch() {
        use crate::index::{Grid, PositionedTile};
        // Stored 2 × 1 tiles of 10 × 10; tile 1 placed at (8, 0) over tile 0 at (0, 0).
        let mut img = test_image(20, 10, 10, 10, 1, vec![TileLoc::primary(8, 1), TileLoc::primary(9, 1)]);
        let place = |x, col| PositionedTile { x, y: 0, width: 10, height: 10, col, row: 0, src_x: 0, src_y: 0 };
        img.grid = Grid::positioned(img.grid.clone(), (20, 10), (10, 10), &[place(0, 0), place(8, 1)]).unwrap();
        let g = LevelGeom { slide: 7, level: 1, image: &img, downsample: 1.0 };
        let p = BatchPlan::build(&g, &[(5, 2)], (6, 3));
        assert!(p.has_pieces() && p.patches[0].cells.is_empty());
        let mut got: Vec<(u64, i64, u64, u64)> = p.patch_pieces(0).iter().map(|q| (p.tiles[q.tile].key.col, q.x, q.src_x, q.w)).collect();
        got.sort();
        // Columns 5..8 from tile 0 (its pixels 5..8), 8..11 from tile 1 (its pixels 0..3).
        assert_eq!(got, vec![(0, 5, 5, 3), (1, 8, 0, 3)]);
        assert_eq!(p.tiles.iter().map(|t| t.part).collect::<Vec<_>>().len(), 2);
        assert!(p.tiles.iter().any(|t| t.key.col == 1 && t.part == (0, 2, 3, 5)));
    }

    #[test]
    fn keys_separate_slides_and_levels() {
        let img = image();
        let a = LevelGeom { slide: 1, level: 0, image: &img, downsample: 1.0 };
        let b = LevelGeom { slide: 2, level: 0, image: &img, downsample: 1.0 };
        let c = LevelGeom { slide: 1, level: 1, image: &img, downsample: 1.0 };
        let mut p = BatchPlan::new();
        for g in [&a, &b, &c, &a] {
            p.push(g, (0, 0), (10, 10));
        }
        assert_eq!(p.tiles.len(), 3);
        assert_eq!(p.grid, vec![0, 1, 2, 0]);
    }
}
