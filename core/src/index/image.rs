//! One image of a slide (a pyramid level or an associated image): geometry, tile size, where
//! its tiles are ([`Grid`]) and how they are coded ([`CodecInfo`]).

use std::sync::Arc;

use super::{CodecInfo, Grid, TileLoc, TileRef};
use crate::geometry::{tile_span, Rect};

/// One image (pyramid level or associated image) as a grid of tiles.
///
/// Strip-organised images are described as a grid one tile wide: `tile_width = width`,
/// `tile_height = RowsPerStrip`. Built by format drivers, checked by `format::finish`.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageIndex {
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
    /// Nominal tile width in pixels (the grid pitch of regular and sparse grids).
    pub tile_width: u32,
    /// Nominal tile height in pixels.
    pub tile_height: u32,
    /// `true` when the format stores tiles (reported as `openslide.level[i].tile-width/-height`),
    /// `false` for strips.
    pub tiled: bool,
    /// How to decode the tiles.
    pub codec: Arc<CodecInfo>,
    /// Where the tiles are.
    pub grid: Grid,
}

impl ImageIndex {
    /// Columns of the tile grid (`ceil(width / tile_width)` for TIFF; the number of tiles for a
    /// positioned grid).
    pub fn tiles_across(&self) -> u64 {
        self.grid.dims().0
    }

    /// Rows of the tile grid (1 for a positioned grid).
    pub fn tiles_down(&self) -> u64 {
        self.grid.dims().1
    }

    /// Number of sample planes stored separately (1 unless PlanarConfiguration = 2).
    pub fn planes(&self) -> usize {
        self.grid.planes()
    }

    /// The stored byte ranges of tile (`col`, `row`), one per plane, missing markers included;
    /// nothing when the cell is outside the grid or not stored.
    pub fn tile_locs(&self, col: u64, row: u64) -> impl Iterator<Item = TileLoc> + '_ {
        self.grid.locs(col, row).iter().copied()
    }

    /// Tile (`col`, `row`) when it is stored: `None` when outside the grid, not stored in a
    /// sparse grid, or marked missing (any plane at offset 0 or of length 0), all of which
    /// read as background.
    pub fn tile(&self, col: u64, row: u64) -> Option<TileRef<'_>> {
        let locs = self.grid.locs(col, row);
        if locs.is_empty() || locs.iter().any(TileLoc::is_missing) {
            return None;
        }
        let (x, y) = self.tile_origin(col, row);
        Some(TileRef { col, row, x: x as i64, y: y as i64, width: self.tile_width, height: self.tile_height, locs })
    }

    /// The stored tiles that intersect `rect` (level pixels), row-major; for a positioned
    /// grid, the stored tiles whose pieces intersect it (each once, row-major).
    pub fn tiles_in_rect(&self, rect: &Rect) -> Vec<TileRef<'_>> {
        if self.grid.is_positioned() {
            let mut cells: Vec<(u64, u64)> = self.grid.pieces_in(rect).into_iter().map(|q| (q.row, q.col)).collect();
            cells.sort_unstable();
            cells.dedup();
            return cells.into_iter().filter_map(|(r, c)| self.tile(c, r)).collect();
        }
        let Some(clip) = rect.clip(self.width, self.height) else { return Vec::new() };
        let (cols, rows) = tile_span(&clip, self.tile_width, self.tile_height);
        rows.flat_map(|r| cols.clone().map(move |c| (c, r))).filter_map(|(c, r)| self.tile(c, r)).collect()
    }

    /// Level-pixel position of the top-left corner of grid cell (`col`, `row`).
    pub fn tile_origin(&self, col: u64, row: u64) -> (u64, u64) {
        (col * self.tile_width as u64, row * self.tile_height as u64)
    }

    /// The part of tile (`col`, `row`) that lies inside the image (for a positioned grid, the
    /// stored image): (width, height) in pixels.
    pub fn valid_tile_size(&self, col: u64, row: u64) -> (u32, u32) {
        if let Some(s) = self.grid.tile_size_of(col, row) {
            return s;
        }
        let (iw, ih) = self.grid.stored_size().unwrap_or((self.width, self.height));
        let w = iw.saturating_sub(col * self.tile_width as u64).min(self.tile_width as u64);
        let h = ih.saturating_sub(row * self.tile_height as u64).min(self.tile_height as u64);
        (w as u32, h as u32)
    }

    /// How to decode tile (`col`, `row`): the nominal tile size and the valid part
    /// ([`valid_tile_size`](Self::valid_tile_size)); for stored tiles of their own sizes
    /// ([`Grid::positioned_sized`]) both are the tile's own size.
    pub fn chunk_geometry(&self, col: u64, row: u64) -> crate::codec::ChunkGeometry {
        let (vw, vh) = self.valid_tile_size(col, row);
        match self.grid.tile_size_of(col, row) {
            Some((w, h)) => crate::codec::ChunkGeometry { tile_width: w, tile_height: h, valid_width: w, valid_height: h },
            None => crate::codec::ChunkGeometry { tile_width: self.tile_width, tile_height: self.tile_height, valid_width: vw, valid_height: vh },
        }
    }

    /// The part of tile (`col`, `row`) covered by `clip` (a rectangle inside the image, level
    /// pixels), as `(x0, y0, x1, y1)` in pixels relative to the tile's top-left corner,
    /// half-open. The tile must intersect `clip`.
    pub fn part_of_tile(&self, clip: &Rect, col: u64, row: u64) -> (u64, u64, u64, u64) {
        let (tx, ty) = self.tile_origin(col, row);
        let (vw, vh) = self.valid_tile_size(col, row);
        let x0 = (clip.x as u64).max(tx) - tx;
        let y0 = (clip.y as u64).max(ty) - ty;
        let x1 = (clip.x as u64 + clip.w).min(tx + vw as u64) - tx;
        let y1 = (clip.y as u64 + clip.h).min(ty + vh as u64) - ty;
        (x0, y0, x1, y1)
    }

    /// Sum of the compressed lengths of all stored ranges (saturating: hostile counts cannot
    /// overflow).
    pub fn total_bytes(&self) -> u64 {
        self.grid.chunks().fold(0u64, |a, t| a.saturating_add(t.length))
    }
}

/// One pyramid level.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    /// Geometry, tile grid and codec.
    pub image: ImageIndex,
    /// Downsample relative to level 0: the mean of the per-axis ratios
    /// `(w0 / wk + h0 / hk) / 2`, OpenSlide's rule (computed by `format::finish`).
    pub downsample: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::PositionedTile;

    fn image(grid: Grid) -> ImageIndex {
        let codec = CodecInfo::uncompressed_rgb();
        ImageIndex { width: 100, height: 50, tile_width: 40, tile_height: 40, tiled: true, codec: Arc::new(codec), grid }
    }

    #[test]
    fn missing_tiles_are_not_returned_and_rectangles_are_clipped_to_the_image() {
        // 3x2 grid; (1, 0) has offset 0, (2, 1) length 0: both missing.
        let locs = [(8, 5), (0, 5), (20, 5), (30, 5), (40, 5), (50, 0)].map(|(o, l)| TileLoc::primary(o, l)).to_vec();
        let img = image(Grid::regular(3, 2, 1, locs).unwrap());
        assert!(img.tile(1, 0).is_none() && img.tile(2, 1).is_none() && img.tile(3, 0).is_none());
        let t = img.tile(2, 0).unwrap();
        assert_eq!((t.x, t.y, t.width, t.height, t.locs), (80, 0, 40, 40, &[TileLoc::primary(20, 5)][..]));
        assert_eq!(img.tile_locs(1, 0).collect::<Vec<_>>(), vec![TileLoc::primary(0, 5)]);
        let hits = |r: Rect| img.tiles_in_rect(&r).iter().map(|t| (t.col, t.row)).collect::<Vec<_>>();
        assert_eq!(hits(Rect { x: -10, y: -10, w: 1000, h: 1000 }), vec![(0, 0), (2, 0), (0, 1), (1, 1)]);
        assert_eq!(hits(Rect { x: 39, y: 39, w: 2, h: 2 }), vec![(0, 0), (0, 1), (1, 1)]);
        assert!(hits(Rect { x: 100, y: 0, w: 5, h: 5 }).is_empty());
        assert_eq!(img.total_bytes(), 25);
    }

    #[test]
    fn positioned_levels_report_stored_tiles_and_their_valid_size() {
        // A stored image of 70 × 50 in 40 × 40 tiles (2 × 2), one piece of tile (1, 1) at (-5, 7).
        let stored = Grid::regular(2, 2, 1, (1..=4).map(|o| TileLoc::primary(o * 8, 9)).collect()).unwrap();
        let t = PositionedTile { x: -5, y: 7, width: 30, height: 10, col: 1, row: 1, src_x: 0, src_y: 0 };
        let img = image(Grid::positioned(stored, (70, 50), (40, 40), &[t]).unwrap());
        assert_eq!(img.valid_tile_size(1, 1), (30, 10));
        assert_eq!(img.tiles_across(), 2);
        let hits = img.tiles_in_rect(&Rect { x: 0, y: 0, w: 1, h: 8 });
        assert_eq!(hits.iter().map(|t| (t.col, t.row)).collect::<Vec<_>>(), vec![(1, 1)]);
        assert!(img.tiles_in_rect(&Rect { x: 25, y: 0, w: 5, h: 5 }).is_empty());
    }
}
