//! Where an image's tiles are: byte ranges ([`TileLoc`]) arranged as a [`Grid`].
//!
//! Three arrangements cover the formats slide readers meet (OpenSlide's `grid.c` has the same
//! three): a dense regular grid (TIFF tiles and strips; a missing tile reads as background), a
//! sparse grid (only some cells stored: DICOM `TILED_SPARSE`, NDPI/OME gaps), and stored tiles
//! whose pixels go to arbitrary level positions, possibly overlapping (Ventana BIF's stitched
//! tiles; MIRAX or positioned DICOM frames would fit too): [`PositionedGrid`], whose overlaps
//! are resolved at build time into disjoint pieces. Readers query the grid through its methods
//! ([`super::ImageIndex::tile`], [`super::ImageIndex::tiles_in_rect`], [`Grid::pieces_in`]) and
//! never match on its variants.

use std::collections::BTreeMap;

use crate::geometry::Rect;

pub use super::positioned::{Piece, PositionedGrid, PositionedTile};

/// Index of a source file in the slide's list of files ([`super::SlideIndex::sources`]).
/// Source 0 is the file the slide was opened by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SourceId(pub u32);

impl SourceId {
    /// The file the slide was opened by.
    pub const PRIMARY: SourceId = SourceId(0);
}

/// Byte range of one stored tile (or strip, or one plane of a planar tile) in a source file.
/// `length == 0`, or `offset == 0` in the primary file, marks a missing tile, read as
/// transparent background (TIFF writers of sparse files write 0/0; offset 0 of the primary
/// file is the TIFF header, never tile data). Offset 0 of a further source is data: a MIRAX
/// data file may start with an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TileLoc {
    /// The file holding the bytes.
    pub source: SourceId,
    /// Offset in bytes from the start of the file.
    pub offset: u64,
    /// Length in bytes of the compressed tile.
    pub length: u64,
}

impl TileLoc {
    /// A range in the primary file.
    pub fn primary(offset: u64, length: u64) -> TileLoc {
        TileLoc { source: SourceId::PRIMARY, offset, length }
    }

    /// `true` when the tile is absent (length 0, or offset 0 in the primary file).
    pub fn is_missing(&self) -> bool {
        self.length == 0 || (self.offset == 0 && self.source == SourceId::PRIMARY)
    }

    /// One past the last byte, `None` when `offset + length` overflows.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.length)
    }
}

/// One stored tile as a reader sees it: where it goes in the level and where its bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileRef<'a> {
    /// Grid column (for positioned grids: the tile's index in the grid's list).
    pub col: u64,
    /// Grid row (for positioned grids: 0).
    pub row: u64,
    /// Left edge in level pixels (may be negative for positioned tiles).
    pub x: i64,
    /// Top edge in level pixels.
    pub y: i64,
    /// Width of the stored tile in pixels (regular and sparse grids: the nominal tile width,
    /// including the padding of edge tiles).
    pub width: u32,
    /// Height of the stored tile in pixels.
    pub height: u32,
    /// The byte ranges, one per sample plane (one unless PlanarConfiguration = 2).
    pub locs: &'a [TileLoc],
}

/// The tiles of one image. Build with [`Grid::regular`], [`Grid::sparse`] or
/// [`Grid::positioned`]; query with the methods.
#[derive(Debug, Clone, PartialEq)]
pub enum Grid {
    /// Every cell of `cols × rows` has an entry (possibly marking a missing tile).
    Regular(RegularGrid),
    /// Only some cells of `cols × rows` are stored; the others read as background.
    Sparse(SparseGrid),
    /// Stored tiles (a regular grid) whose pieces are placed at arbitrary level positions,
    /// overlaps resolved at build time ([`PositionedGrid`]).
    Positioned(PositionedGrid),
}

/// A dense grid (see [`Grid::Regular`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RegularGrid {
    pub(super) cols: u64,
    pub(super) rows: u64,
    planes: usize,
    /// Tile-major: the planes of tile `row * cols + col` are `tiles[i * planes .. (i + 1) * planes]`.
    tiles: Vec<TileLoc>,
}

impl RegularGrid {
    /// Every range in TIFF order: plane after plane, each plane row-major.
    pub(super) fn tiff_order(&self) -> Box<dyn Iterator<Item = TileLoc> + '_> {
        let n = (self.cols * self.rows) as usize;
        Box::new((0..self.planes).flat_map(move |p| (0..n).map(move |i| self.tiles[i * self.planes + p])))
    }
}

/// A sparse grid (see [`Grid::Sparse`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SparseGrid {
    cols: u64,
    rows: u64,
    planes: usize,
    /// (row, col) → the tile's planes; ordered row-major.
    tiles: BTreeMap<(u64, u64), Vec<TileLoc>>,
}

impl Grid {
    /// A dense `cols × rows` grid from chunk ranges in TIFF order: plane after plane, each
    /// plane row-major (`planes × rows × cols` entries). `None` when the count does not match.
    pub fn regular(cols: u64, rows: u64, planes: usize, tiff_order: Vec<TileLoc>) -> Option<Grid> {
        let per_plane = cols.checked_mul(rows)?;
        if planes == 0 || per_plane.checked_mul(planes as u64)? != tiff_order.len() as u64 {
            return None;
        }
        let tiles = if planes == 1 {
            tiff_order
        } else {
            let n = per_plane as usize;
            (0..n).flat_map(|i| (0..planes).map(move |p| (i, p))).map(|(i, p)| tiff_order[p * n + i]).collect()
        };
        Some(Grid::Regular(RegularGrid { cols, rows, planes, tiles }))
    }

    /// A sparse `cols × rows` grid: `tiles` maps (col, row) to the tile's planes. `None` when a
    /// cell lies outside the grid or has other than `planes` ranges.
    pub fn sparse(cols: u64, rows: u64, planes: usize, tiles: impl IntoIterator<Item = ((u64, u64), Vec<TileLoc>)>) -> Option<Grid> {
        let mut map = BTreeMap::new();
        for ((c, r), locs) in tiles {
            if c >= cols || r >= rows || locs.len() != planes || planes == 0 {
                return None;
            }
            map.insert((r, c), locs);
        }
        Some(Grid::Sparse(SparseGrid { cols, rows, planes, tiles: map }))
    }

    /// Stored tiles `stored` (a regular grid of `tile_size` (width, height) tiles over a stored
    /// image of `stored_size` (width, height) pixels) placed at arbitrary level positions by
    /// `placements`, in paint order (a later placement covers an earlier one; see
    /// [`PositionedGrid`]). `None` when `stored` is not regular, a placement names a tile
    /// outside it or reaches past its tile, or there are more than `u32::MAX` pieces.
    pub fn positioned(stored: Grid, stored_size: (u64, u64), tile_size: (u32, u32), placements: &[PositionedTile]) -> Option<Grid> {
        let Grid::Regular(stored) = stored else { return None };
        PositionedGrid::build(stored, stored_size, tile_size, placements, None).map(Grid::Positioned)
    }

    /// As [`Grid::positioned`], for stored tiles of different sizes (Zeiss CZI subblocks):
    /// `sizes` gives each stored tile's (width, height) in pixels, row-major, each at most
    /// `tile_size`; that is the tile's valid area and the size its stream decodes to. The
    /// stored image is the whole grid (`cols × tile_width` by `rows × tile_height`). `None`
    /// as [`Grid::positioned`], or when `sizes` does not have one entry per stored tile.
    pub fn positioned_sized(stored: Grid, tile_size: (u32, u32), sizes: Vec<(u32, u32)>, placements: &[PositionedTile]) -> Option<Grid> {
        let Grid::Regular(stored) = stored else { return None };
        let stored_size = (stored.cols.checked_mul(tile_size.0 as u64)?, stored.rows.checked_mul(tile_size.1 as u64)?);
        PositionedGrid::build(stored, stored_size, tile_size, placements, Some(sizes)).map(Grid::Positioned)
    }

    /// Stored tile (`col`, `row`)'s own (width, height) in pixels, for a positioned grid built
    /// with per-tile sizes ([`Grid::positioned_sized`]); `None` for other grids.
    pub fn tile_size_of(&self, col: u64, row: u64) -> Option<(u32, u32)> {
        match self {
            Grid::Positioned(g) => g.tile_size_of(col, row),
            _ => None,
        }
    }

    /// (columns, rows) of the grid; of the stored grid for positioned tiles.
    pub fn dims(&self) -> (u64, u64) {
        match self {
            Grid::Regular(g) => (g.cols, g.rows),
            Grid::Sparse(g) => (g.cols, g.rows),
            Grid::Positioned(g) => (g.stored.cols, g.stored.rows),
        }
    }

    /// Byte ranges per tile (sample planes stored separately: 1 unless PlanarConfiguration 2).
    pub fn planes(&self) -> usize {
        match self {
            Grid::Regular(g) => g.planes,
            Grid::Sparse(g) => g.planes,
            Grid::Positioned(g) => g.stored.planes,
        }
    }

    /// `true` for stored tiles whose pieces lie at arbitrary level positions ([`PositionedGrid`]).
    pub fn is_positioned(&self) -> bool {
        matches!(self, Grid::Positioned(_))
    }

    /// The stored ranges of cell (`col`, `row`), one per plane, possibly marking a missing
    /// tile; empty when the cell is outside the grid or not stored (sparse). For positioned
    /// grids: the cell of the stored grid.
    pub fn locs(&self, col: u64, row: u64) -> &[TileLoc] {
        match self {
            Grid::Positioned(g) => Grid::regular_locs(&g.stored, col, row),
            Grid::Regular(g) => Grid::regular_locs(g, col, row),
            Grid::Sparse(g) => g.tiles.get(&(row, col)).map_or(&[], Vec::as_slice),
        }
    }

    /// Every stored range in the order the format stores them (TIFF: plane after plane,
    /// each plane row-major), missing markers included. Used by quickhash.
    pub fn chunks(&self) -> Box<dyn Iterator<Item = TileLoc> + '_> {
        match self {
            Grid::Regular(g) => g.tiff_order(),
            Grid::Sparse(g) => Box::new((0..g.planes).flat_map(move |p| g.tiles.values().map(move |v| v[p]))),
            Grid::Positioned(g) => g.stored.tiff_order(),
        }
    }

    /// The pieces of a positioned grid overlapping `rect` (level pixels): disjoint, in no
    /// particular order. Empty for other grids.
    pub(crate) fn pieces_in(&self, rect: &Rect) -> Vec<&Piece> {
        match self {
            Grid::Positioned(g) => g.pieces_in(rect),
            _ => Vec::new(),
        }
    }

    /// Every piece of a positioned grid (empty for other grids).
    pub fn pieces(&self) -> &[Piece] {
        match self {
            Grid::Positioned(g) => g.pieces(),
            _ => &[],
        }
    }

    /// The stored image's (width, height) of a positioned grid (the valid area of its stored
    /// tiles), `None` for other grids.
    pub fn stored_size(&self) -> Option<(u64, u64)> {
        match self {
            Grid::Positioned(g) => Some(g.stored_size),
            _ => None,
        }
    }

    /// Bounding box (x0, y0, x1, y1) in level pixels of a positioned grid's pieces; `None`
    /// for other grids or no pieces.
    pub fn positioned_bounds(&self) -> Option<(i64, i64, i64, i64)> {
        match self {
            Grid::Positioned(g) => g.bounds(),
            _ => None,
        }
    }

    fn regular_locs(g: &RegularGrid, col: u64, row: u64) -> &[TileLoc] {
        if col < g.cols && row < g.rows {
            let i = (row * g.cols + col) as usize * g.planes;
            &g.tiles[i..i + g.planes]
        } else {
            &[]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(o: u64) -> TileLoc {
        TileLoc::primary(o, 10)
    }

    #[test]
    fn regular_grid_keeps_planes_of_a_tile_together_and_tiff_order_for_chunks() {
        // 2x1 tiles, 3 planes, TIFF order: plane 0 (t0, t1), plane 1 (t0, t1), plane 2 (t0, t1).
        let g = Grid::regular(2, 1, 3, (1..=6).map(loc).collect()).unwrap();
        assert_eq!(g.locs(0, 0), &[loc(1), loc(3), loc(5)]);
        assert_eq!(g.locs(1, 0), &[loc(2), loc(4), loc(6)]);
        assert!(g.locs(2, 0).is_empty() && g.locs(0, 1).is_empty());
        assert_eq!(g.chunks().map(|l| l.offset).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6]);
        assert!(Grid::regular(2, 1, 3, (1..=5).map(loc).collect()).is_none());
    }

    #[test]
    fn sparse_grid_answers_only_stored_cells() {
        let g = Grid::sparse(4, 4, 1, [((3, 1), vec![loc(7)]), ((0, 0), vec![loc(5)])]).unwrap();
        assert_eq!(g.locs(3, 1), &[loc(7)]);
        assert!(g.locs(1, 3).is_empty());
        assert_eq!(g.chunks().map(|l| l.offset).collect::<Vec<_>>(), vec![5, 7]);
        assert!(Grid::sparse(4, 4, 1, [((4, 0), vec![loc(1)])]).is_none());
    }
}
