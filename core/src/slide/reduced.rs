//! Whole levels reduced while they are read: the bounded-memory source of thumbnails
//! ([`Slide::read_level_reduced`]).

use crate::error::{Error, Location, Result};
use crate::geometry::Rect;
use crate::read::assemble::{blit_piece, blit_rgb, fill_rgb};
use crate::read::PlacedPiece;
use crate::read::waves::fetch_waves;
use crate::read::{batch_bytes, locate};

use super::{alloc_pixels, Slide};

/// An RGB image: `u8`, row-major, shape (height, width, 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rgb {
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
    /// `width × height × 3` bytes.
    pub data: Vec<u8>,
}

impl Slide {
    /// Read all of `level` reduced by an integer factor, composited over `background`: RGB `u8`
    /// of shape (ceil(level height / f), ceil(level width / f), 3), where each pixel is the mean
    /// of the f × f block of level pixels it covers (fewer at the right and bottom edges), each
    /// composited over `background` first (`c·a/255 + bg·(1 − a/255)`); missing tiles read as
    /// `background`. Returns the image and the factor f used: the largest power of two that is
    /// at most `max_factor` (≥ 1) and divides the level's tile width and height, so reduced
    /// tiles tile the output exactly.
    ///
    /// This is the bounded-memory path of thumbnails: JPEG tiles are decoded at 1/2, 1/4 or 1/8
    /// scale by libjpeg-turbo's DCT scaling (whose pixels are block means computed from the DCT
    /// coefficients, so they can differ from a full decode's block mean by a few levels), the
    /// rest of the factor is a box average; tiles are read in waves within `read_working_bytes`
    /// and never cached. Memory: the output plus one wave.
    ///
    /// A positioned level (Ventana BIF) places each piece of a reduced tile at its position
    /// divided by f, rounded down (both edges, so pieces still tile the output): exact when
    /// the positions are multiples of f, within a pixel of the level's own layout otherwise.
    ///
    /// # Errors
    /// [`Error::Usage`] for a level that does not exist or `max_factor` 0; [`Error::Limits`]
    /// when the output exceeds `max_region_bytes` or one tile needs more than the working set;
    /// tile errors as [`read_region`](Self::read_region); [`Error::Interrupted`] between waves.
    pub fn read_level_reduced(&self, level: usize, max_factor: u32, background: [u8; 3]) -> Result<(Rgb, u32)> {
        if max_factor == 0 {
            return Err(Error::Usage("max_factor must be at least 1".into()));
        }
        let (img, _, at) = locate::level(&self.index, level)?;
        let mut f = 1u32;
        while f * 2 <= max_factor && img.tile_width % (f * 2) == 0 && img.tile_height % (f * 2) == 0 {
            f *= 2;
        }
        let (ow, oh) = (img.width.div_ceil(f as u64), img.height.div_ceil(f as u64));
        let bytes = batch_bytes(1, (ow, oh), 3, self.config.max_region_bytes, &Location::file(self.index.path()))?;
        let mut data = alloc_pixels(bytes);
        fill_rgb(&mut data, background);
        let mut batch = self.level_batch(img, &at, level);
        batch.cache = None;
        batch.reduce = Some((f, background));
        let coords: Vec<(u64, u64)> = (0..img.tiles_down()).flat_map(|r| (0..img.tiles_across()).map(move |c| (c, r))).collect();
        let rect = Rect { x: 0, y: 0, w: ow, h: oh };
        let (rtw, rth) = ((img.tile_width / f) as u64, (img.tile_height / f) as u64);
        // A positioned level: the pieces of each stored tile, reduced.
        let mut pieces: std::collections::HashMap<(u64, u64), Vec<PlacedPiece>> = std::collections::HashMap::new();
        let fi = f as i64;
        for q in img.grid.pieces() {
            let (x0, y0) = (q.x.div_euclid(fi), q.y.div_euclid(fi));
            let (x1, y1) = ((q.x + q.width as i64).div_euclid(fi).min(ow as i64), (q.y + q.height as i64).div_euclid(fi).min(oh as i64));
            let (sx, sy) = ((q.src_x / f) as u64, (q.src_y / f) as u64);
            if x1 > x0 && y1 > y0 && x0 >= 0 && y0 >= 0 {
                pieces.entry((q.col, q.row)).or_default().push(PlacedPiece { tile: 0, x: x0, y: y0, src_x: sx, src_y: sy, w: (x1 - x0) as u64, h: (y1 - y0) as u64 });
            }
        }
        fetch_waves(&batch, &coords, None, |wave, tiles| {
            for (&i, t) in wave.iter().zip(tiles) {
                if let Some(t) = t {
                    let (col, row) = coords[i];
                    if !img.grid.is_positioned() {
                        blit_rgb(t, col * rtw, row * rth, &rect, background, &mut data);
                        continue;
                    }
                    for q in pieces.get(&(col, row)).into_iter().flatten() {
                        // Clip to the reduced tile (rounding may reach one pixel past it).
                        let w = q.w.min((t.x as u64 + t.width as u64).saturating_sub(q.src_x));
                        let h = q.h.min((t.y as u64 + t.height as u64).saturating_sub(q.src_y));
                        if w > 0 && h > 0 && q.src_x >= t.x as u64 && q.src_y >= t.y as u64 {
                            blit_piece(t, &PlacedPiece { w, h, ..*q }, &rect, Some(background), &mut data);
                        }
                    }
                }
            }
            Ok(())
        })?;
        Ok((Rgb { width: ow, height: oh, data }, f))
    }
}
