//! Coordinates: level-0 locations, level sizes, and the level-0 → level-k mapping.
//!
//! As in OpenSlide: a region's `location` is given in level-0 pixels (it may be negative or
//! beyond the image), its `size` in pixels of the requested level. The region's origin in
//! level k is `floor(location / downsample_k)` per axis.

/// Origin in level-k pixels of a region whose level-0 location is `x0` (`floor(x0 / ds)`).
pub fn level_origin(x0: i64, downsample: f64) -> i64 {
    if downsample == 1.0 {
        x0
    } else {
        (x0 as f64 / downsample).floor() as i64
    }
}

/// A half-open rectangle `[x, x + w) × [y, y + h)` in pixels of one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Left edge (may be negative).
    pub x: i64,
    /// Top edge (may be negative).
    pub y: i64,
    /// Width.
    pub w: u64,
    /// Height.
    pub h: u64,
}

impl Rect {
    /// Intersection with `[0, width) × [0, height)`, or `None` when empty.
    pub fn clip(&self, width: u64, height: u64) -> Option<Rect> {
        let x0 = self.x.max(0);
        let y0 = self.y.max(0);
        let x1 = self.x.saturating_add(self.w as i64).min(width as i64);
        let y1 = self.y.saturating_add(self.h as i64).min(height as i64);
        (x1 > x0 && y1 > y0).then(|| Rect { x: x0, y: y0, w: (x1 - x0) as u64, h: (y1 - y0) as u64 })
    }
}

/// The tiles of a `tile_w × tile_h` grid that a clipped rectangle touches, as inclusive column
/// and row ranges.
pub fn tile_span(r: &Rect, tile_w: u32, tile_h: u32) -> (std::ops::RangeInclusive<u64>, std::ops::RangeInclusive<u64>) {
    let c0 = r.x as u64 / tile_w as u64;
    let c1 = (r.x as u64 + r.w - 1) / tile_w as u64;
    let r0 = r.y as u64 / tile_h as u64;
    let r1 = (r.y as u64 + r.h - 1) / tile_h as u64;
    (c0..=c1, r0..=r1)
}

/// The best level for a downsample factor, by OpenSlide's rule
/// (`openslide_get_best_level_for_downsample`): the largest-downsample level whose downsample
/// does not exceed `downsample` (with a small tolerance for rounding), else level 0.
pub fn best_level_for_downsample(downsamples: &[f64], downsample: f64) -> usize {
    if downsamples.is_empty() || downsample < downsamples[0] {
        return 0;
    }
    for (i, &d) in downsamples.iter().enumerate().skip(1) {
        if downsample < d * (1.0 - 1e-6) {
            return i - 1;
        }
    }
    downsamples.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_floors_negative_and_fractional() {
        assert_eq!(level_origin(-1, 2.0), -1);
        assert_eq!(level_origin(7, 2.0), 3);
        assert_eq!(level_origin(100, 4.016129032258064), 24);
        assert_eq!(level_origin(-5, 1.0), -5);
    }

    #[test]
    fn clip_and_span() {
        let r = Rect { x: -10, y: 230, w: 260, h: 20 }.clip(2220, 2967).unwrap();
        assert_eq!(r, Rect { x: 0, y: 230, w: 250, h: 20 });
        let (c, rr) = tile_span(&r, 240, 240);
        assert_eq!((c, rr), (0..=1, 0..=1));
        assert!(Rect { x: 3000, y: 0, w: 5, h: 5 }.clip(2220, 2967).is_none());
        assert!(Rect { x: 0, y: 0, w: 0, h: 5 }.clip(2220, 2967).is_none());
    }

    #[test]
    fn best_level() {
        let d = [1.0, 4.0, 16.0];
        assert_eq!(best_level_for_downsample(&d, 0.5), 0);
        assert_eq!(best_level_for_downsample(&d, 3.9), 0);
        assert_eq!(best_level_for_downsample(&d, 4.0), 1);
        assert_eq!(best_level_for_downsample(&d, 100.0), 2);
    }
}
