//! Tiles at arbitrary positions of a level, possibly overlapping (Ventana BIF's stitched
//! tiles; MIRAX and DICOM sparse frames would be the same): [`PositionedGrid`].
//!
//! The stored tiles stay a regular grid (the TIFF's), read and cached by column and row like
//! any other; what differs is where their pixels go. A driver lists **placements**
//! ([`PositionedTile`]: a rectangle of one stored tile put at a level position), in paint
//! order, a later placement covering an earlier one where they overlap. The grid resolves the
//! overlaps once, at open, into disjoint [`Piece`]s: every level pixel comes from at most one
//! piece, so readers place pieces in any order (tile waves, parallel patches, RGB over a
//! background) and get the same pixels. The part of a placement outside its stored tile's
//! valid area (past the stored image's edge: transparent, as OpenSlide clips it) is dropped
//! first, so what lies below shows through there.

use std::collections::HashMap;

use super::grid::RegularGrid;
use crate::geometry::Rect;

/// A placement: the `width × height` pixels at (`src_x`, `src_y`) of stored tile (`col`,
/// `row`), put with their top-left corner at level position (`x`, `y`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PositionedTile {
    /// Left edge in level pixels (may be negative).
    pub x: i64,
    /// Top edge in level pixels (may be negative).
    pub y: i64,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Column of the stored tile.
    pub col: u64,
    /// Row of the stored tile.
    pub row: u64,
    /// Left edge of the rectangle in the stored tile's pixels.
    pub src_x: u32,
    /// Top edge of the rectangle in the stored tile's pixels.
    pub src_y: u32,
}

/// One visible, disjoint part of a placement (same fields, meaning and units as
/// [`PositionedTile`]).
pub type Piece = PositionedTile;

/// Stored tiles (a regular grid over a stored image) and the disjoint pieces of them that make
/// up the level, with a bucket index for rectangle queries. Build with
/// [`super::Grid::positioned`].
#[derive(Debug, Clone, PartialEq)]
pub struct PositionedGrid {
    pub(super) stored: RegularGrid,
    /// The stored image's width and height in pixels (the valid area of its tiles).
    pub(super) stored_size: (u64, u64),
    /// The stored tile's nominal width and height in pixels.
    pub(super) tile_size: (u32, u32),
    /// Each stored tile's own (width, height) in pixels, row-major, when the stored tiles
    /// differ in size (Zeiss CZI subblocks): a tile's valid area, and the size its stream
    /// decodes to. `None`: the valid area follows from `stored_size`.
    pub(super) sizes: Option<Vec<(u32, u32)>>,
    pieces: Vec<Piece>,
    /// Bucket edge in pixels (the largest piece edge, at least 1).
    bin: i64,
    bins: HashMap<(i64, i64), Vec<u32>>,
}

fn bin_span(lo: i64, len: u64, bin: i64) -> std::ops::RangeInclusive<i64> {
    let hi = lo.saturating_add(len.max(1) as i64 - 1);
    lo.div_euclid(bin)..=hi.div_euclid(bin)
}

/// Half-open rectangle (x0, y0, x1, y1) in level pixels.
type R = (i64, i64, i64, i64);

fn overlap(a: R, b: R) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// `a` minus `b` as up to four disjoint rectangles.
fn subtract(a: R, b: R, out: &mut Vec<R>) {
    if !overlap(a, b) {
        out.push(a);
        return;
    }
    let (y0, y1) = (a.1.max(b.1), a.3.min(b.3));
    if a.1 < b.1 {
        out.push((a.0, a.1, a.2, b.1));
    }
    if b.3 < a.3 {
        out.push((a.0, b.3, a.2, a.3));
    }
    if a.0 < b.0 {
        out.push((a.0, y0, b.0, y1));
    }
    if b.2 < a.2 {
        out.push((b.2, y0, a.2, y1));
    }
}

impl PositionedGrid {
    /// Resolve `placements` (paint order: later over earlier) over `stored` (tiles of
    /// `tile_size` over an image of `stored_size`) into disjoint pieces. `None` when a
    /// placement names a tile outside the grid or a rectangle reaching past its tile, or when
    /// there are more than `u32::MAX` pieces.
    pub(super) fn build(stored: RegularGrid, stored_size: (u64, u64), tile_size: (u32, u32), placements: &[PositionedTile], sizes: Option<Vec<(u32, u32)>>) -> Option<Self> {
        if let Some(v) = &sizes {
            if v.len() as u64 != stored.cols.checked_mul(stored.rows)? || v.iter().any(|&(w, h)| w > tile_size.0 || h > tile_size.1) {
                return None;
            }
        }
        let (tw, th) = (tile_size.0 as u64, tile_size.1 as u64);
        let bin = placements.iter().map(|p| p.width.max(p.height) as i64).max().unwrap_or(1).max(1);
        let mut pieces: Vec<Piece> = Vec::new();
        let mut bins: HashMap<(i64, i64), Vec<u32>> = HashMap::new();
        let mut parts: Vec<R> = Vec::new();
        let mut next: Vec<R> = Vec::new();
        for p in placements.iter().rev() {
            if p.col >= stored.cols || p.row >= stored.rows || p.src_x as u64 + p.width as u64 > tw || p.src_y as u64 + p.height as u64 > th {
                return None;
            }
            // The valid part of the stored tile (pixels past the stored image are transparent).
            let (vw, vh) = match &sizes {
                Some(v) => {
                    let (w, h) = v[(p.row * stored.cols + p.col) as usize];
                    (w as u64, h as u64)
                }
                None => (stored_size.0.saturating_sub(p.col * tw).min(tw), stored_size.1.saturating_sub(p.row * th).min(th)),
            };
            let w = (p.width as u64).min(vw.saturating_sub(p.src_x as u64)) as i64;
            let h = (p.height as u64).min(vh.saturating_sub(p.src_y as u64)) as i64;
            if w <= 0 || h <= 0 {
                continue;
            }
            parts.clear();
            parts.push((p.x, p.y, p.x.checked_add(w)?, p.y.checked_add(h)?));
            // Subtract every piece already taken (they are above this placement).
            let mut seen: Vec<u32> = Vec::new();
            for by in bin_span(p.y, h as u64, bin) {
                for bx in bin_span(p.x, w as u64, bin) {
                    seen.extend(bins.get(&(bx, by)).into_iter().flatten());
                }
            }
            seen.sort_unstable();
            seen.dedup();
            for &i in &seen {
                let q = &pieces[i as usize];
                let b = (q.x, q.y, q.x + q.width as i64, q.y + q.height as i64);
                next.clear();
                for &a in &parts {
                    subtract(a, b, &mut next);
                }
                std::mem::swap(&mut parts, &mut next);
                if parts.is_empty() {
                    break;
                }
            }
            for &(x0, y0, x1, y1) in &parts {
                let piece = Piece {
                    x: x0,
                    y: y0,
                    width: (x1 - x0) as u32,
                    height: (y1 - y0) as u32,
                    col: p.col,
                    row: p.row,
                    src_x: p.src_x + (x0 - p.x) as u32,
                    src_y: p.src_y + (y0 - p.y) as u32,
                };
                let id = u32::try_from(pieces.len()).ok()?;
                for by in bin_span(piece.y, piece.height as u64, bin) {
                    for bx in bin_span(piece.x, piece.width as u64, bin) {
                        bins.entry((bx, by)).or_default().push(id);
                    }
                }
                pieces.push(piece);
            }
        }
        Some(PositionedGrid { stored, stored_size, tile_size, sizes, pieces, bin, bins })
    }

    /// Stored tile (`col`, `row`)'s own (width, height) when the grid was built with per-tile
    /// sizes; `None` otherwise or outside the grid.
    pub(crate) fn tile_size_of(&self, col: u64, row: u64) -> Option<(u32, u32)> {
        let v = self.sizes.as_ref()?;
        (col < self.stored.cols && row < self.stored.rows).then(|| v[(row * self.stored.cols + col) as usize])
    }

    /// The pieces overlapping `rect` (level pixels), disjoint, in no particular order.
    pub(crate) fn pieces_in(&self, rect: &Rect) -> Vec<&Piece> {
        let mut ids: Vec<u32> = Vec::new();
        for by in bin_span(rect.y, rect.h, self.bin) {
            for bx in bin_span(rect.x, rect.w, self.bin) {
                if let Some(v) = self.bins.get(&(bx, by)) {
                    ids.extend_from_slice(v);
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        let r = (rect.x, rect.y, rect.x.saturating_add(rect.w as i64), rect.y.saturating_add(rect.h as i64));
        ids.into_iter()
            .map(|i| &self.pieces[i as usize])
            .filter(|q| overlap(r, (q.x, q.y, q.x + q.width as i64, q.y + q.height as i64)))
            .collect()
    }

    /// Every piece.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The bounding box of the pieces as (x0, y0, x1, y1) in level pixels, `None` when there
    /// are none.
    pub fn bounds(&self) -> Option<(i64, i64, i64, i64)> {
        self.pieces.iter().fold(None, |acc, q| {
            let b = (q.x, q.y, q.x + q.width as i64, q.y + q.height as i64);
            Some(match acc {
                None => b,
                Some(a) => (a.0.min(b.0), a.1.min(b.1), a.2.max(b.2), a.3.max(b.3)),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Grid, TileLoc};
    use super::*;

    fn place(x: i64, y: i64, w: u32, col: u64) -> PositionedTile {
        PositionedTile { x, y, width: w, height: w, col, row: 0, src_x: 0, src_y: 0 }
    }

    /// Which placement (by stored column) shows at level pixel (x, y).
    fn owner(g: &Grid, x: i64, y: i64) -> Option<(u64, u32, u32)> {
        let hits = g.pieces_in(&Rect { x, y, w: 1, h: 1 });
        assert!(hits.len() <= 1, "pieces overlap at ({x}, {y})");
        hits.first().map(|q| (q.col, q.src_x + (x - q.x) as u32, q.src_y + (y - q.y) as u32))
    }

    #[test]
    fn later_placements_cover_earlier_ones_and_pieces_are_disjoint() {
        let stored = Grid::regular(4, 1, 1, (1..=4).map(|o| TileLoc::primary(o * 100, 10)).collect()).unwrap();
        // Tile 0 at (0, 0), tile 1 at (6, 2) over it, tile 2 far away, tile 3 at (-2, -2)
        // under tile 0 (it comes first).
        let g = Grid::positioned(stored, (40, 10), (10, 10), &[place(-2, -2, 10, 3), place(0, 0, 10, 0), place(6, 2, 10, 1), place(100, 100, 10, 2)]).unwrap();
        assert_eq!(owner(&g, 5, 5), Some((0, 5, 5)));
        assert_eq!(owner(&g, 7, 3), Some((1, 1, 1)), "the later placement wins");
        assert_eq!(owner(&g, 7, 1), Some((0, 7, 1)));
        assert_eq!(owner(&g, -1, -1), Some((3, 1, 1)));
        assert_eq!(owner(&g, 3, 7), Some((0, 3, 7)), "the earlier placement only shows where uncovered");
        assert_eq!(owner(&g, 103, 104), Some((2, 3, 4)));
        assert_eq!(owner(&g, 50, 50), None);
        for y in -3..20 {
            for x in -3..20 {
                owner(&g, x, y);
            }
        }
        let area: u64 = g.pieces().iter().map(|q| q.width as u64 * q.height as u64).sum();
        assert_eq!(area, 10 * 10 + (10 * 10 + 10 * 10 - 4 * 8) + (10 * 10 - 8 * 8), "union of the placements");
        assert_eq!(g.positioned_bounds(), Some((-2, -2, 110, 110)));
    }

    #[test]
    fn pixels_past_the_stored_image_are_dropped_and_bad_placements_refused() {
        // A 15-pixel-wide stored image of two 10-wide tiles: tile 1 has 5 valid columns.
        let stored = || Grid::regular(2, 1, 1, vec![TileLoc::primary(8, 1), TileLoc::primary(9, 1)]).unwrap();
        let g = Grid::positioned(stored(), (15, 10), (10, 10), &[place(0, 0, 10, 0), place(3, 0, 10, 1)]).unwrap();
        assert_eq!(owner(&g, 7, 0), Some((1, 4, 0)));
        assert_eq!(owner(&g, 9, 0), Some((0, 9, 0)), "tile 1's clipped columns let tile 0 show");
        assert!(Grid::positioned(stored(), (15, 10), (10, 10), &[place(0, 0, 10, 2)]).is_none(), "no stored tile 2");
        assert!(Grid::positioned(stored(), (15, 10), (10, 10), &[PositionedTile { src_x: 5, ..place(0, 0, 10, 0) }]).is_none());
    }

    #[test]
    fn a_large_stitched_grid_resolves_to_one_piece_per_tile_interior() {
        // 300 × 200 tiles of 64 px advancing by 60 × 58: every tile keeps its advance-sized
        // top-left part, the last column and row their whole width / height.
        let (cols, rows) = (300u64, 200u64);
        let stored = Grid::regular(cols, rows, 1, vec![TileLoc::primary(8, 1); (cols * rows) as usize]).unwrap();
        let placements: Vec<PositionedTile> = (0..rows)
            .flat_map(|r| (0..cols).map(move |c| PositionedTile { x: c as i64 * 60, y: r as i64 * 58, width: 64, height: 64, col: c, row: r, src_x: 0, src_y: 0 }))
            .collect();
        let g = Grid::positioned(stored, (cols * 64, rows * 64), (64, 64), &placements).unwrap();
        assert_eq!(g.pieces().len() as u64, cols * rows, "one rectangle per tile");
        let area: u64 = g.pieces().iter().map(|q| q.width as u64 * q.height as u64).sum();
        assert_eq!(area, ((cols - 1) * 60 + 64) * ((rows - 1) * 58 + 64));
        assert_eq!(owner(&g, 61, 59), Some((1, 1, 1)));
    }
}
