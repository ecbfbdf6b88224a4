//! The partial-decode rule and the CPU decode cost model.
//!
//! A batch that needs only part of an uncached tile may decode only that part (JPEG: iMCU
//! columns outside it and rows above and below it get no inverse DCT, but the whole scan is
//! entropy-decoded, so a damaged tile fails as its whole decode does;
//! [`crate::codec::decode_chunk_part`]);
//! such a partial tile is not cached, since a random patch rarely reuses it. The codec declines
//! the crop for multi-scan (progressive) JPEG streams, where a part costs a whole decode
//! (every scan is entropy-decoded first): those tiles are decoded whole, and cached.

use crate::codec::PartRect;
use crate::read::batch_plan::TilePart;

/// The part to decode of a tile whose valid (inside-the-image) size is `valid` (width, height)
/// when the batch needs only `part` of it: `Some` when `part`'s area is at most
/// `max_fraction` (`partial_decode_max_fraction`, 0..=1) of the valid area, `None` (decode the
/// whole tile, and cache it) otherwise or when `max_fraction` is 0.
pub fn partial_part(max_fraction: f64, valid: (u32, u32), (x0, y0, x1, y1): TilePart) -> Option<PartRect> {
    let area = (x1 - x0) * (y1 - y0);
    (max_fraction > 0.0 && (area as f64) <= max_fraction * (valid.0 as f64 * valid.1 as f64))
        .then(|| PartRect { x: x0 as u32, y: y0 as u32, w: (x1 - x0) as u32, h: (y1 - y0) as u32 })
}

/// Estimated CPU (libjpeg-turbo) cost of decoding `part` of a tile of valid size `valid`, as a
/// fraction of a whole-tile decode (1.0 for `None`, the whole tile).
///
/// libjpeg-turbo entropy-decodes every row of the tile (issue 13: the rows below a part too,
/// so that damage anywhere fails the part as it fails the whole tile) and runs the inverse DCT
/// only inside the part. From the split measured on CMU-1's 240² tiles (GPU engine,
/// docs/gpu.md: 0.05 fixed, 0.5 entropy decoding, 0.45 inverse DCT and colour conversion):
/// cost ≈ 0.55 + 0.45 × part area / tile area. The GPU engine orders its work queue by it
/// ([`cost_rank`]).
pub fn decode_cost(part: Option<PartRect>, valid: (u32, u32)) -> f64 {
    match part {
        None => 1.0,
        Some(p) => {
            let (vw, vh) = (valid.0 as f64, valid.1 as f64);
            0.55 + 0.45 * (p.w as f64 * p.h as f64) / (vw * vh)
        }
    }
}

/// [`decode_cost`] in nine buckets, 0 (cheapest) ..= 8 (a whole tile): `floor(8 × cost)`.
pub fn cost_rank(cost: f64) -> u8 {
    (cost * 8.0).floor().clamp(0.0, 8.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_rule() {
        assert_eq!(partial_part(0.5, (240, 240), (0, 0, 120, 240)), Some(PartRect { x: 0, y: 0, w: 120, h: 240 }));
        assert_eq!(partial_part(0.5, (240, 240), (0, 0, 121, 240)), None);
        assert_eq!(partial_part(0.0, (240, 240), (0, 0, 1, 1)), None, "0 disables");
        assert_eq!(partial_part(1.0, (240, 240), (0, 0, 240, 240)), Some(PartRect { x: 0, y: 0, w: 240, h: 240 }));
        // Edge tiles compare with their valid area.
        assert_eq!(partial_part(0.5, (100, 240), (50, 0, 100, 240)), Some(PartRect { x: 50, y: 0, w: 50, h: 240 }));
    }

    #[test]
    fn cost_model() {
        assert_eq!(decode_cost(None, (240, 240)), 1.0);
        let whole = PartRect { x: 0, y: 0, w: 240, h: 240 };
        assert!((decode_cost(Some(whole), (240, 240)) - 1.0).abs() < 1e-12);
        // Top-left quarter: 0.55 + 0.45 × 0.25.
        let q = PartRect { x: 0, y: 0, w: 120, h: 120 };
        assert!((decode_cost(Some(q), (240, 240)) - 0.6625).abs() < 1e-12);
        // The same area at the bottom costs the same (every row is entropy-decoded).
        let bottom = PartRect { x: 0, y: 120, w: 120, h: 120 };
        assert_eq!(decode_cost(Some(bottom), (240, 240)), decode_cost(Some(q), (240, 240)));
        assert_eq!(cost_rank(decode_cost(Some(q), (240, 240))), 5);
        assert_eq!(cost_rank(1.0), 8);
        assert_eq!(cost_rank(0.0), 0);
        assert_eq!(cost_rank(7.0), 8);
    }
}
