//! Deep Zoom geometry and tiles of a slide, as OpenSlide's Python `DeepZoomGenerator` defines
//! them (openslide-python 1.4, `openslide/deepzoom.py`; slidestream's
//! `slidestream.deepzoom.DeepZoomGenerator` follows the same rules, and the tests check the two
//! agree tile for tile).
//!
//! Deep Zoom (the `.dzi` format of Seadragon / OpenSeadragon) halves the image, rounding up,
//! until it is 1 × 1 pixel; level 0 is that 1 × 1 image and the last level is the slide at full
//! resolution. Each level is cut into `tile_size` squares, each grown by `overlap` pixels on
//! every side that has a neighbour. A tile is read from the slide level best suited to its
//! Deep Zoom downsample ([`Slide::best_level_for_downsample`]), composited over the slide's
//! background colour (`openslide.background-color`, white when absent) and, when that level is
//! larger than the tile, reduced as Pillow's `Image.thumbnail(size, LANCZOS)` reduces it (aspect
//! kept; a box reduction first when the factor is 4 or more, `reducing_gap=2`).

use crate::error::{Error, Result};
use crate::slide::{resize_rgb_box, Rgb, Slide};

/// Deep Zoom levels and tiles of one slide. Built by [`DeepZoom::new`]; cheap to keep.
#[derive(Debug, Clone)]
pub struct DeepZoom {
    tile_size: u32,
    overlap: u32,
    l0_offset: (i64, i64),
    /// Size of every slide level, limited to the bounds when asked (level pixels).
    l_dimensions: Vec<(u64, u64)>,
    /// Size of every Deep Zoom level, smallest first.
    z_dimensions: Vec<(u64, u64)>,
    /// Columns and rows of tiles of every Deep Zoom level.
    t_dimensions: Vec<(u64, u64)>,
    slide_from_dz_level: Vec<usize>,
    /// Slide-level pixels per Deep Zoom pixel of every Deep Zoom level.
    l_z_downsamples: Vec<f64>,
    l_downsamples: Vec<f64>,
    background: [u8; 3],
}

/// Where one Deep Zoom tile comes from: the `read_region` arguments and the tile's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DzTile {
    /// Top-left corner of the read, level-0 pixels (overlap included).
    pub location: (i64, i64),
    /// Slide level read.
    pub level: usize,
    /// Size of the read, pixels of `level`.
    pub size: (u64, u64),
    /// Size of the tile, Deep Zoom pixels (overlap included): what the read is reduced to
    /// (aspect kept, so the result may be a pixel smaller on one side; see [`DeepZoom::render`]).
    pub z_size: (u64, u64),
}

impl DeepZoom {
    /// Deep Zoom geometry of `slide` with tiles of `tile_size` pixels (without overlap) and
    /// `overlap` pixels on each inner edge. `limit_bounds`: cover only the non-empty region the
    /// `openslide.bounds-{x,y,width,height}` properties give (the whole slide when absent).
    ///
    /// # Errors
    /// [`Error::Usage`] when `tile_size` is 0 or a bounds property is not an integer.
    pub fn new(slide: &Slide, tile_size: u32, overlap: u32, limit_bounds: bool) -> Result<DeepZoom> {
        if tile_size == 0 {
            return Err(Error::Usage("deep zoom: tile_size must be 1 or more".into()));
        }
        let props = slide.properties();
        let prop = |name: &str, default: i64| -> Result<i64> {
            match props.get(name) {
                None => Ok(default),
                Some(v) => v.trim().parse::<i64>().map_err(|_| Error::Usage(format!("deep zoom: property {name} = {v:?} is not an integer"))),
            }
        };
        let dims = slide.level_dimensions();
        let (w0, h0) = dims[0];
        let (l0_offset, l_dimensions) = if limit_bounds {
            let off = (prop("openslide.bounds-x", 0)?, prop("openslide.bounds-y", 0)?);
            let bw = prop("openslide.bounds-width", w0 as i64)? as f64 / w0 as f64;
            let bh = prop("openslide.bounds-height", h0 as i64)? as f64 / h0 as f64;
            (off, dims.iter().map(|&(w, h)| ((w as f64 * bw).ceil().max(0.0) as u64, (h as f64 * bh).ceil().max(0.0) as u64)).collect())
        } else {
            ((0, 0), dims.clone())
        };
        let mut z = vec![l_dimensions[0]];
        while let Some(&(w, h)) = z.last().filter(|&&(w, h)| w > 1 || h > 1) {
            z.push((w.div_ceil(2).max(1), h.div_ceil(2).max(1)));
        }
        z.reverse();
        let t = z.iter().map(|&(w, h)| (w.div_ceil(tile_size as u64), h.div_ceil(tile_size as u64))).collect();
        let n = z.len();
        let l_downsamples = slide.level_downsamples();
        let mut slide_from_dz_level = Vec::with_capacity(n);
        let mut l_z_downsamples = Vec::with_capacity(n);
        for k in 0..n {
            let d = 2f64.powi((n - 1 - k) as i32);
            let level = slide.best_level_for_downsample(d);
            slide_from_dz_level.push(level);
            l_z_downsamples.push(d / l_downsamples[level]);
        }
        let background = props.get("openslide.background-color").and_then(|s| parse_hex_rgb(s)).unwrap_or([255, 255, 255]);
        Ok(DeepZoom {
            tile_size,
            overlap,
            l0_offset,
            l_dimensions,
            z_dimensions: z,
            t_dimensions: t,
            slide_from_dz_level,
            l_z_downsamples,
            l_downsamples,
            background,
        })
    }

    /// Number of Deep Zoom levels.
    pub fn level_count(&self) -> usize {
        self.z_dimensions.len()
    }

    /// (columns, rows) of tiles of every Deep Zoom level, smallest level first.
    pub fn level_tiles(&self) -> &[(u64, u64)] {
        &self.t_dimensions
    }

    /// (width, height) in pixels of every Deep Zoom level, smallest first.
    pub fn level_dimensions(&self) -> &[(u64, u64)] {
        &self.z_dimensions
    }

    /// Tile edge without overlap, pixels.
    pub fn tile_size(&self) -> u32 {
        self.tile_size
    }

    /// Overlap, pixels.
    pub fn overlap(&self) -> u32 {
        self.overlap
    }

    /// Background colour tiles are composited over (R, G, B).
    pub fn background(&self) -> [u8; 3] {
        self.background
    }

    /// Where tile (`col`, `row`) of Deep Zoom level `level` is read from, and its size.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the level or address when it does not exist.
    pub fn tile(&self, level: usize, col: u64, row: u64) -> Result<DzTile> {
        let Some(&(cols, rows)) = self.t_dimensions.get(level) else {
            return Err(Error::Usage(format!("deep zoom: level {level} does not exist ({} levels)", self.level_count())));
        };
        if col >= cols || row >= rows {
            return Err(Error::Usage(format!("deep zoom: tile ({col}, {row}) does not exist at level {level} ({cols} x {rows} tiles)")));
        }
        let slide_level = self.slide_from_dz_level[level];
        let l_z_ds = self.l_z_downsamples[level];
        let l_ds = self.l_downsamples[slide_level];
        let z_dims = self.z_dimensions[level];
        let l_dims = self.l_dimensions[slide_level];
        let (ts, ov) = (self.tile_size as u64, self.overlap as u64);
        let axis = |t: u64, count: u64, z_dim: u64, l_dim: u64, offset: i64| -> (i64, u64, u64) {
            let before = if t != 0 { ov } else { 0 };
            let after = if t != count - 1 { ov } else { 0 };
            let zs = ts.min(z_dim - ts * t) + before + after;
            // Python: l_z_ds * (tile_size * t - before); the integer is never negative.
            let l_loc = l_z_ds * (ts * t - before) as f64;
            let l0 = (l_ds * l_loc + offset as f64) as i64;
            let size = (l_z_ds * zs as f64).ceil().min(l_dim as f64 - l_loc.ceil()).max(0.0) as u64;
            (l0, size, zs)
        };
        let (x, w, zw) = axis(col, cols, z_dims.0, l_dims.0, self.l0_offset.0);
        let (y, h, zh) = axis(row, rows, z_dims.1, l_dims.1, self.l0_offset.1);
        Ok(DzTile { location: (x, y), level: slide_level, size: (w, h), z_size: (zw, zh) })
    }

    /// The Deep Zoom descriptor (`.dzi` XML) for tiles in image `format` (`jpeg` or `png`).
    pub fn dzi(&self, format: &str) -> String {
        let (w, h) = self.z_dimensions.last().copied().unwrap_or((1, 1));
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Image xmlns=\"http://schemas.microsoft.com/deepzoom/2008\" Format=\"{format}\" Overlap=\"{}\" TileSize=\"{}\"><Size Height=\"{h}\" Width=\"{w}\" /></Image>",
            self.overlap, self.tile_size
        )
    }

    /// Read and render `tile` of `slide`: RGB `u8`, composited over [`DeepZoom::background`],
    /// reduced to fit [`DzTile::z_size`] as Pillow's `thumbnail(z_size, LANCZOS)` does (aspect
    /// kept, so one side can be a pixel short; a read already within `z_size` is kept as it is).
    ///
    /// # Errors
    /// The slide's read errors; [`Error::Usage`] for an empty tile.
    pub fn render(&self, slide: &Slide, tile: &DzTile) -> Result<Rgb> {
        if tile.size.0 == 0 || tile.size.1 == 0 {
            return Err(Error::Usage(format!("deep zoom: tile at {:?} of level {} is empty", tile.location, tile.level)));
        }
        let region = slide.read_region(tile.location, tile.level, tile.size)?;
        let rgb = composite(&region.data, self.background);
        let (w, h) = (region.width, region.height);
        let Some((tw, th)) = pil_thumbnail_size((w, h), tile.z_size) else {
            return Ok(Rgb { width: w, height: h, data: rgb });
        };
        pil_resize((w as u32, h as u32), rgb, (tw as u32, th as u32))
    }
}

impl DeepZoom {
    /// [`DeepZoom::render`] with the level pixels read bounded by `max_read_pixels`: a tile
    /// whose read is larger (the coarse tiles of a slide with few levels, which cover most of a
    /// large level) is cut from the level read reduced by a power of two
    /// ([`Slide::read_level_reduced`]: JPEG tiles decoded at 1/2..1/8 scale, box means, in
    /// bounded memory), still at least twice the tile where the bound allows, then finished as
    /// `render` finishes. Such tiles can differ from `render`'s by a few levels.
    ///
    /// # Errors
    /// As [`DeepZoom::render`]; [`Error::Limits`] when even the reduced level exceeds
    /// `max_read_pixels`.
    pub fn render_bounded(&self, slide: &Slide, tile: &DzTile, max_read_pixels: u64) -> Result<Rgb> {
        if tile.size.0.saturating_mul(tile.size.1) <= max_read_pixels {
            return self.render(slide, tile);
        }
        let out = pil_thumbnail_size(tile.size, tile.z_size).unwrap_or(tile.size);
        let (lw, lh) = slide.level_dimensions()[tile.level];
        let (tw, th) = slide.level_tile_sizes()[tile.level];
        let reduced = |f: u64| lw.div_ceil(f).saturating_mul(lh.div_ceil(f));
        let ok = |f: u64, k: u64| {
            tile.size.0 / (2 * f) >= k * out.0 && tile.size.1 / (2 * f) >= k * out.1 && (tw as u64) % (2 * f) == 0 && (th as u64) % (2 * f) == 0
        };
        let mut f = 1u64;
        // At least twice the tile while that is possible, then down to the tile's own size
        // while the reduced level is still over the bound.
        while ok(f, 2) {
            f *= 2;
        }
        while reduced(f) > max_read_pixels && ok(f, 1) {
            f *= 2;
        }
        if reduced(f) > max_read_pixels {
            return Err(Error::limits(
                &crate::error::Location::file(""),
                format!("deep zoom: level {} reduced by {f} is {} pixels, more than the bound of {max_read_pixels}", tile.level, reduced(f)),
            ));
        }
        let (level_rgb, f) = slide.read_level_reduced(tile.level, f as u32, self.background)?;
        let f = f as u64;
        let ds = slide.level_downsamples()[tile.level];
        // The tile's rectangle in the reduced level's pixels, clipped to it.
        let x0 = ((tile.location.0.max(0) as f64 / ds) as u64 / f).min(level_rgb.width - 1);
        let y0 = ((tile.location.1.max(0) as f64 / ds) as u64 / f).min(level_rgb.height - 1);
        let cw = tile.size.0.div_ceil(f).clamp(1, level_rgb.width - x0);
        let ch = tile.size.1.div_ceil(f).clamp(1, level_rgb.height - y0);
        let mut crop = Vec::with_capacity((cw * ch * 3) as usize);
        for y in y0..y0 + ch {
            let start = ((y * level_rgb.width + x0) * 3) as usize;
            crop.extend_from_slice(&level_rgb.data[start..start + (cw * 3) as usize]);
        }
        let Some((ow, oh)) = pil_thumbnail_size((cw, ch), tile.z_size) else {
            return Ok(Rgb { width: cw, height: ch, data: crop });
        };
        pil_resize((cw as u32, ch as u32), crop, (ow as u32, oh as u32))
    }
}

/// `#rrggbb` / `rrggbb` as R, G, B; None for anything else.
fn parse_hex_rgb(s: &str) -> Option<[u8; 3]> {
    let s = s.trim().trim_start_matches('#');
    if s.len() != 6 || !s.is_ascii() {
        return None;
    }
    let v = u32::from_str_radix(s, 16).ok()?;
    Some([(v >> 16) as u8, (v >> 8) as u8, v as u8])
}

/// RGBA `data` pasted over `bg` with its alpha as mask, as Pillow's `Image.paste(im, None, im)`
/// blends (`Paste.c`: `dst * (255 - a) + src * a`, divided by 255 as `(v + 128 + ((v + 128) >> 8)) >> 8`).
pub(crate) fn composite(rgba: &[u8], bg: [u8; 3]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rgba.len() / 4 * 3);
    for p in rgba.chunks_exact(4) {
        let a = p[3] as i32;
        for c in 0..3 {
            let (src, dst) = (p[c] as i32, bg[c] as i32);
            let v = match a {
                255 => src,
                0 => dst,
                _ => {
                    let t = dst * (255 - a) + src * a + 128;
                    (t + (t >> 8)) >> 8
                }
            };
            out.push(v.clamp(0, 255) as u8);
        }
    }
    out
}

/// The size Pillow's `Image.thumbnail(size)` gives a `from` image (aspect kept, each side the
/// nearer of floor/ceil that keeps the aspect best, at least 1), or None when it already fits.
pub(crate) fn pil_thumbnail_size(from: (u64, u64), size: (u64, u64)) -> Option<(u64, u64)> {
    let (w, h) = (from.0 as f64, from.1 as f64);
    let (mut x, mut y) = size;
    if x >= from.0 && y >= from.1 {
        return None;
    }
    let aspect = w / h;
    let pick = |n: f64, key: &dyn Fn(f64) -> f64| -> u64 {
        let (lo, hi) = (n.floor(), n.ceil());
        // Python's min() keeps the first of equal keys: floor.
        let best = if key(hi) < key(lo) { hi } else { lo };
        (best as u64).max(1)
    };
    if x as f64 / y as f64 >= aspect {
        x = pick(y as f64 * aspect, &|n| (aspect - n / y as f64).abs());
    } else {
        y = pick(x as f64 / aspect, &|n| if n == 0.0 { 0.0 } else { (aspect - x as f64 / n).abs() });
    }
    Some((x, y))
}

/// `rgb` (`from` pixels) resized to `to` as Pillow's `Image.resize(to, LANCZOS,
/// reducing_gap=2.0)` (what `thumbnail` calls): a box reduction by the integer factor
/// `source / target / 2` when it is 2 or more, then Lanczos-3 over the remaining box.
pub(crate) fn pil_resize(from: (u32, u32), rgb: Vec<u8>, to: (u32, u32)) -> Result<Rgb> {
    let fx = ((from.0 as f64 / to.0 as f64 / 2.0) as u32).max(1);
    let fy = ((from.1 as f64 / to.1 as f64 / 2.0) as u32).max(1);
    let (src, size, crop) = if fx > 1 || fy > 1 {
        let (reduced, rw, rh) = box_reduce(&rgb, from, (fx, fy));
        (reduced, (rw, rh), (0.0, 0.0, from.0 as f64 / fx as f64, from.1 as f64 / fy as f64))
    } else {
        (rgb, from, (0.0, 0.0, from.0 as f64, from.1 as f64))
    };
    let data = resize_rgb_box(&src, size, crop, to)?;
    Ok(Rgb { width: to.0 as u64, height: to.1 as u64, data })
}

/// Mean of each `f.0 × f.1` block (fewer pixels at the right and bottom edges), rounded to
/// nearest: Pillow's `Image.reduce`. Returns the pixels and the reduced size.
fn box_reduce(rgb: &[u8], from: (u32, u32), f: (u32, u32)) -> (Vec<u8>, u32, u32) {
    let (w, h) = (from.0 as usize, from.1 as usize);
    let (fx, fy) = (f.0 as usize, f.1 as usize);
    let (rw, rh) = (w.div_ceil(fx), h.div_ceil(fy));
    let mut out = Vec::with_capacity(rw * rh * 3);
    for by in 0..rh {
        let (y0, y1) = (by * fy, ((by + 1) * fy).min(h));
        for bx in 0..rw {
            let (x0, x1) = (bx * fx, ((bx + 1) * fx).min(w));
            let n = ((y1 - y0) * (x1 - x0)) as u32;
            let mut sum = [0u32; 3];
            for y in y0..y1 {
                for p in rgb[(y * w + x0) * 3..(y * w + x1) * 3].chunks_exact(3) {
                    sum[0] += p[0] as u32;
                    sum[1] += p[1] as u32;
                    sum[2] += p[2] as u32;
                }
            }
            out.extend(sum.map(|s| ((s + n / 2) / n) as u8));
        }
    }
    (out, rw as u32, rh as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbnail_sizes_follow_pillow() {
        assert_eq!(pil_thumbnail_size((100, 50), (200, 200)), None);
        assert_eq!(pil_thumbnail_size((512, 512), (256, 256)), Some((256, 256)));
        // 511 x 255 into 256 x 128: the height is fitted, 256 / aspect = 127.75; 128 keeps the
        // aspect better (|2.0039 - 256 / 128| = 0.0039 against 0.0118 for 127).
        assert_eq!(pil_thumbnail_size((511, 255), (256, 128)).map(|s| s.1), Some(128));
        assert_eq!(pil_thumbnail_size((1000, 10), (100, 100)), Some((100, 1)));
        assert_eq!(pil_thumbnail_size((10, 1000), (100, 100)), Some((1, 100)));
    }

    #[test]
    fn composite_blends_like_pillow() {
        let px = composite(&[10, 20, 30, 255, 10, 20, 30, 0, 200, 100, 0, 128], [255, 255, 255]);
        assert_eq!(&px[..3], &[10, 20, 30]);
        assert_eq!(&px[3..6], &[255, 255, 255]);
        // 255 * 127 + 200 * 128 + 128 = 58113 -> (58113 + 227) >> 8 = 227.
        assert_eq!(px[6], 227);
    }

    #[test]
    fn box_reduce_averages_blocks_and_edges() {
        // 3 x 1 image reduced by 2: (0 + 10) / 2 = 5, the edge pixel alone = 100.
        let (out, w, h) = box_reduce(&[0, 0, 0, 10, 10, 10, 100, 100, 100], (3, 1), (2, 1));
        assert_eq!((w, h), (2, 1));
        assert_eq!(out, vec![5, 5, 5, 100, 100, 100]);
    }

    #[test]
    fn hex_colours() {
        assert_eq!(parse_hex_rgb("FFFFFF"), Some([255, 255, 255]));
        assert_eq!(parse_hex_rgb("#102030"), Some([16, 32, 48]));
        assert_eq!(parse_hex_rgb("12345"), None);
        assert_eq!(parse_hex_rgb("zzzzzz"), None);
    }
}
