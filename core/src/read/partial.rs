//! The partial-decode rule and the CPU decode cost model.
//!
//! A batch that needs only part of an uncached tile may decode only that part (JPEG: iMCU
//! columns outside it and rows above and below it get no inverse DCT, but the whole scan is
//! entropy-decoded, so a damaged tile fails as its whole decode does;
//! [`crate::codec::decode_chunk_part`]);
//! such a partial tile is not cached, since a random patch rarely reuses it. The codec declines
//! the crop for multi-scan (progressive) JPEG streams, where a part costs a whole decode
//! (every scan is entropy-decoded first): those tiles are decoded whole, and cached.

use std::sync::Mutex;

use crate::codec::PartRect;
use crate::error::Error;
use crate::read::batch_plan::TilePart;

/// What earlier decodes of a slide learnt about its tiles' JPEG scans, keyed by (level, column,
/// row): `None` = read to its end without error, `Some(e)` = the decode fails with `e`. A part
/// of a tile whose scan is known good may use TurboJPEG's crop, which leaves the rows below
/// unread (the pixels equal the whole decode's when the whole scan decodes cleanly); a known
/// failure is returned again without decoding; an unknown tile's part reads the whole scan
/// ([`crate::codec::decode_chunk_part`]). At most [`ScanMemory::ENTRIES`] tiles (least
/// recently used dropped first); empty until the first decode.
pub(crate) struct ScanMemory(Mutex<ScanOutcomes>);

/// Outcome (`None` = decoded cleanly) by (level, column, row).
type ScanOutcomes = lru::LruCache<(u32, u64, u64), Option<Box<Error>>>;

impl std::fmt::Debug for ScanMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map(|m| m.len()).unwrap_or(0);
        write!(f, "ScanMemory({n} tiles)")
    }
}

impl ScanMemory {
    /// Tiles remembered (about 60 bytes each, plus an error's text).
    pub const ENTRIES: usize = 16_384;

    /// An empty memory (nothing allocated).
    pub fn new() -> Self {
        ScanMemory(Mutex::new(lru::LruCache::unbounded()))
    }

    /// The outcome remembered for `key`, if any.
    pub fn get(&self, key: (u32, u64, u64)) -> Option<Option<Error>> {
        self.0.lock().ok()?.get(&key).map(|o| o.as_deref().cloned())
    }

    /// Remember `outcome` for `key`.
    pub fn put(&self, key: (u32, u64, u64), outcome: Option<Error>) {
        if let Ok(mut m) = self.0.lock() {
            m.put(key, outcome.map(Box::new));
            if m.len() > Self::ENTRIES {
                m.pop_lru();
            }
        }
    }
}

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
/// libjpeg-turbo entropy-decodes every row of the tile (the rows below a part too,
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
    fn scan_memory_is_bounded_and_keeps_outcomes() {
        let m = ScanMemory::new();
        assert!(m.get((0, 1, 2)).is_none());
        m.put((0, 1, 2), None);
        let e = Error::Usage("x".into());
        m.put((0, 3, 4), Some(e.clone()));
        assert!(matches!(m.get((0, 1, 2)), Some(None)));
        assert_eq!(m.get((0, 3, 4)).map(|o| o.map(|e| e.to_string())), Some(Some(e.to_string())));
        for i in 0..ScanMemory::ENTRIES as u64 + 10 {
            m.put((1, i, 0), None);
        }
        assert_eq!(m.0.lock().unwrap().len(), ScanMemory::ENTRIES);
        assert!(m.get((0, 1, 2)).is_none(), "least recently used dropped");
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
