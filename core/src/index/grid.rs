//! Where an image's tiles are: byte ranges ([`TileLoc`]) arranged as a [`Grid`].
//!
//! Three arrangements cover the formats slide readers meet (OpenSlide's `grid.c` has the same
//! three): a dense regular grid (TIFF tiles and strips; a missing tile reads as background), a
//! sparse grid (only some cells stored: DICOM `TILED_SPARSE`, NDPI/OME gaps), and tiles at
//! arbitrary positions with their own sizes, possibly overlapping (Ventana overlaps, MIRAX,
//! DICOM sparse frames with positions). Readers query the grid through its methods
//! ([`Grid::tile`], [`Grid::tiles_in_rect`]) and never match on its variants.

use std::collections::{BTreeMap, HashMap};

use crate::geometry::Rect;

/// Index of a source file in the slide's list of files ([`super::SlideIndex::sources`]).
/// Source 0 is the file the slide was opened by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SourceId(pub u32);

impl SourceId {
    /// The file the slide was opened by.
    pub const PRIMARY: SourceId = SourceId(0);
}

/// Byte range of one stored tile (or strip, or one plane of a planar tile) in a source file.
/// `offset == 0 || length == 0` marks a missing tile, read as transparent background (TIFF
/// writers of sparse files write 0/0; offset 0 is the TIFF header, never tile data).
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

    /// `true` when the tile is absent (offset 0 or length 0).
    pub fn is_missing(&self) -> bool {
        self.offset == 0 || self.length == 0
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

/// A tile at an arbitrary position of a level ([`Grid::positioned`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionedTile {
    /// Left edge in level pixels.
    pub x: i64,
    /// Top edge in level pixels.
    pub y: i64,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The byte ranges, one per sample plane.
    pub locs: Vec<TileLoc>,
}

/// The tiles of one image. Build with [`Grid::regular`], [`Grid::sparse`] or
/// [`Grid::positioned`]; query with the methods.
#[derive(Debug, Clone, PartialEq)]
pub enum Grid {
    /// Every cell of `cols × rows` has an entry (possibly marking a missing tile).
    Regular(RegularGrid),
    /// Only some cells of `cols × rows` are stored; the others read as background.
    Sparse(SparseGrid),
    /// Tiles at arbitrary level positions with their own sizes, possibly overlapping.
    Positioned(PositionedGrid),
}

/// A dense grid (see [`Grid::Regular`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RegularGrid {
    cols: u64,
    rows: u64,
    planes: usize,
    /// Tile-major: the planes of tile `row * cols + col` are `tiles[i * planes .. (i + 1) * planes]`.
    tiles: Vec<TileLoc>,
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

/// Positioned tiles (see [`Grid::Positioned`]) with a bucket index for rectangle queries.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionedGrid {
    tiles: Vec<PositionedTile>,
    /// Bucket edge in pixels (the largest tile edge, at least 1).
    bin: i64,
    /// (bucket column, bucket row) → indices of the tiles overlapping that bucket.
    bins: HashMap<(i64, i64), Vec<u32>>,
}

fn bin_span(lo: i64, len: u64, bin: i64) -> std::ops::RangeInclusive<i64> {
    let hi = lo.saturating_add(len.max(1) as i64 - 1);
    lo.div_euclid(bin)..=hi.div_euclid(bin)
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

    /// Tiles at arbitrary positions. `None` when a tile is empty, has no byte range, the tiles
    /// disagree on the number of planes, or there are more than `u32::MAX` tiles.
    pub fn positioned(tiles: Vec<PositionedTile>) -> Option<Grid> {
        let planes = tiles.first().map_or(1, |t| t.locs.len());
        if tiles.len() > u32::MAX as usize || tiles.iter().any(|t| t.width == 0 || t.height == 0 || t.locs.len() != planes || planes == 0) {
            return None;
        }
        let bin = tiles.iter().map(|t| t.width.max(t.height) as i64).max().unwrap_or(1).max(1);
        let mut bins: HashMap<(i64, i64), Vec<u32>> = HashMap::new();
        for (i, t) in tiles.iter().enumerate() {
            for by in bin_span(t.y, t.height as u64, bin) {
                for bx in bin_span(t.x, t.width as u64, bin) {
                    bins.entry((bx, by)).or_default().push(i as u32);
                }
            }
        }
        Some(Grid::Positioned(PositionedGrid { tiles, bin, bins }))
    }

    /// (columns, rows) of a regular or sparse grid; (number of tiles, 1) for positioned tiles.
    pub fn dims(&self) -> (u64, u64) {
        match self {
            Grid::Regular(g) => (g.cols, g.rows),
            Grid::Sparse(g) => (g.cols, g.rows),
            Grid::Positioned(g) => (g.tiles.len() as u64, 1),
        }
    }

    /// Byte ranges per tile (sample planes stored separately: 1 unless PlanarConfiguration 2).
    pub fn planes(&self) -> usize {
        match self {
            Grid::Regular(g) => g.planes,
            Grid::Sparse(g) => g.planes,
            Grid::Positioned(g) => g.tiles.first().map_or(1, |t| t.locs.len()),
        }
    }

    /// `true` for tiles at arbitrary positions (not addressable by column and row alone).
    pub fn is_positioned(&self) -> bool {
        matches!(self, Grid::Positioned(_))
    }

    /// The stored ranges of cell (`col`, `row`), one per plane, possibly marking a missing
    /// tile; empty when the cell is outside the grid or not stored (sparse). For positioned
    /// grids `col` is the tile's index and `row` must be 0.
    pub fn locs(&self, col: u64, row: u64) -> &[TileLoc] {
        match self {
            Grid::Regular(g) if col < g.cols && row < g.rows => {
                let i = (row * g.cols + col) as usize * g.planes;
                &g.tiles[i..i + g.planes]
            }
            Grid::Sparse(g) => g.tiles.get(&(row, col)).map_or(&[], Vec::as_slice),
            Grid::Positioned(g) if row == 0 => g.tiles.get(col as usize).map_or(&[], |t| t.locs.as_slice()),
            _ => &[],
        }
    }

    /// Every stored range in the order the format stores them (TIFF: plane after plane,
    /// each plane row-major), missing markers included. Used by quickhash.
    pub fn chunks(&self) -> Box<dyn Iterator<Item = TileLoc> + '_> {
        match self {
            Grid::Regular(g) => {
                let n = (g.cols * g.rows) as usize;
                Box::new((0..g.planes).flat_map(move |p| (0..n).map(move |i| g.tiles[i * g.planes + p])))
            }
            Grid::Sparse(g) => Box::new((0..g.planes).flat_map(move |p| g.tiles.values().map(move |v| v[p]))),
            Grid::Positioned(g) => Box::new(g.tiles.iter().flat_map(|t| t.locs.iter().copied())),
        }
    }

    /// Positioned tile `i` of the list (`None` for other grids or past the end).
    pub(crate) fn positioned_in_list(&self, i: u64) -> Option<&PositionedTile> {
        match self {
            Grid::Positioned(g) => g.tiles.get(i as usize),
            _ => None,
        }
    }

    /// Positioned tiles overlapping `rect` (level pixels), in their list order (later tiles
    /// are painted over earlier ones). Empty for other grids.
    pub(crate) fn positioned_in(&self, rect: &Rect) -> Vec<(u64, &PositionedTile)> {
        let Grid::Positioned(g) = self else { return Vec::new() };
        let mut ids: Vec<u32> = Vec::new();
        for by in bin_span(rect.y, rect.h, g.bin) {
            for bx in bin_span(rect.x, rect.w, g.bin) {
                if let Some(v) = g.bins.get(&(bx, by)) {
                    ids.extend_from_slice(v);
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        let hits = |t: &PositionedTile| {
            t.x < rect.x.saturating_add(rect.w as i64)
                && rect.x < t.x.saturating_add(t.width as i64)
                && t.y < rect.y.saturating_add(rect.h as i64)
                && rect.y < t.y.saturating_add(t.height as i64)
        };
        ids.into_iter().map(|i| (i as u64, &g.tiles[i as usize])).filter(|(_, t)| hits(t)).collect()
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

    #[test]
    fn positioned_tiles_are_found_by_rectangle_including_overlaps_and_negative_positions() {
        let t = |x: i64, y: i64, w: u32, o: u64| PositionedTile { x, y, width: w, height: w, locs: vec![loc(o)] };
        let g = Grid::positioned(vec![t(0, 0, 100, 1), t(90, 0, 100, 2), t(-50, 300, 60, 3), t(1000, 1000, 10, 4)]).unwrap();
        let ids = |r: Rect| g.positioned_in(&r).into_iter().map(|(i, _)| i).collect::<Vec<_>>();
        assert_eq!(ids(Rect { x: 95, y: 10, w: 1, h: 1 }), vec![0, 1]);
        assert_eq!(ids(Rect { x: 100, y: 0, w: 5, h: 5 }), vec![1]);
        assert_eq!(ids(Rect { x: -60, y: 290, w: 20, h: 20 }), vec![2]);
        assert_eq!(ids(Rect { x: 0, y: 0, w: 2000, h: 2000 }), vec![0, 1, 2, 3]);
        assert!(ids(Rect { x: 500, y: 500, w: 10, h: 10 }).is_empty());
        assert_eq!(g.locs(3, 0), &[loc(4)]);
        assert!(Grid::positioned(vec![t(0, 0, 0, 1)]).is_none());
    }
}
