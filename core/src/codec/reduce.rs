//! Reduced decoding for thumbnails and overviews: a tile decoded at 1/`factor` of its size,
//! composited over a background, without ever holding the tile at full size when it is JPEG.
//!
//! JPEG tiles use libjpeg-turbo's DCT scaling for the largest power of two ≤ 8 dividing
//! `factor` ([`super::jpeg::decode_rgba_scaled`]); the rest of the factor, and every other
//! codec, is an area (box) average of the decoded pixels. Each output pixel is the mean of the
//! `factor × factor` block of tile pixels it covers (fewer at the tile's valid edge), each
//! composited over the background first (`c·a/255 + bg·(1 − a/255)`), as Pillow's `reduce`
//! averages an image that OpenSlide's `get_thumbnail` has already pasted on the background.

use crate::error::{Error, Location, Result};
use crate::index::CodecInfo;

use super::{check_dims, decode_chunk, jpeg, with_spliced_jpeg, ChunkGeometry, DecodedTile};

/// The part of `factor` done by JPEG DCT scaling for a tile whose valid region is `valid`
/// (width, height): the largest of 8, 4, 2, 1 dividing `factor` and both valid sides. A scaled
/// pixel averages whole s × s blocks, so an edge tile whose valid region ends inside a block
/// (where the stored tile holds padding) is decoded at a scale that keeps blocks inside it.
pub fn jpeg_scale(factor: u32, valid: (u32, u32)) -> u32 {
    [8, 4, 2, 1].into_iter().find(|s| factor % s == 0 && valid.0 % s == 0 && valid.1 % s == 0).unwrap_or(1)
}

/// Decode one chunk reduced by `factor` (≥ 1) and composited over `background`: an opaque
/// [`DecodedTile`] of `ceil(valid_width / factor) × ceil(valid_height / factor)` pixels at
/// (0, 0), in reduced-tile coordinates.
///
/// # Errors
/// As [`decode_chunk`]; [`Error::Usage`] for `factor` 0.
pub fn decode_chunk_reduced(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, factor: u32, background: [u8; 3], at: &Location) -> Result<DecodedTile> {
    if factor == 0 {
        return Err(Error::Usage("reduction factor 0".into()));
    }
    let s = jpeg_scale(factor, (g.valid_width, g.valid_height));
    let (px, width, scale, vw, vh) = if super::table::decodes_reduced(codec) && s > 1 {
        let mut px = Vec::new();
        let (_, w, _) = with_spliced_jpeg(codec, planes[0], |stream| jpeg::decode_rgba_scaled(stream, s, &mut px, |h| check_dims(h.width, h.height, g)))
            .map_err(|e| Error::decode(at, e))?;
        (px, w, s, g.valid_width.div_ceil(s), g.valid_height.div_ceil(s))
    } else {
        let t = decode_chunk(codec, planes, g, at)?;
        (t.rgba, t.width, 1, t.width, t.height)
    };
    let k = factor / scale;
    let (ow, oh) = (vw.div_ceil(k), vh.div_ceil(k));
    let mut out = vec![0u8; ow as usize * oh as usize * 4];
    let bg = background.map(u32::from);
    for oy in 0..oh {
        let (y0, y1) = (oy * k, ((oy + 1) * k).min(vh));
        for ox in 0..ow {
            let (x0, x1) = (ox * k, ((ox + 1) * k).min(vw));
            let mut sum = [0u32; 3];
            for y in y0..y1 {
                let row = &px[(y as usize * width as usize + x0 as usize) * 4..(y as usize * width as usize + x1 as usize) * 4];
                for p in row.chunks_exact(4) {
                    let a = p[3] as u32;
                    for c in 0..3 {
                        sum[c] += if a == 255 { p[c] as u32 } else { (p[c] as u32 * a + bg[c] * (255 - a) + 127) / 255 };
                    }
                }
            }
            let n = (y1 - y0) * (x1 - x0);
            let d = (oy as usize * ow as usize + ox as usize) * 4;
            for c in 0..3 {
                out[d + c] = ((sum[c] + n / 2) / n) as u8;
            }
            out[d + 3] = 255;
        }
    }
    Ok(DecodedTile { x: 0, y: 0, width: ow, height: oh, opaque: true, rgba: out })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Alpha;

    fn raw_rgba_codec() -> CodecInfo {
        CodecInfo { samples_per_pixel: 4, alpha: Alpha::Unassociated, ..CodecInfo::uncompressed_rgb() }
    }

    #[test]
    fn box_average_over_the_background_with_partial_edge_blocks() {
        // A 5 × 3 valid region of a 6 × 4 RGBA tile: pixel value 10·x + y, alpha 255 except
        // (4, 0) with alpha 0 (shows the background).
        let mut data = vec![0u8; 6 * 4 * 4];
        for y in 0..4u32 {
            for x in 0..6u32 {
                let i = ((y * 6 + x) * 4) as usize;
                let v = (10 * x + y) as u8;
                data[i..i + 4].copy_from_slice(&[v, v, v, if (x, y) == (4, 0) { 0 } else { 255 }]);
            }
        }
        let g = ChunkGeometry { tile_width: 6, tile_height: 4, valid_width: 5, valid_height: 3 };
        let t = decode_chunk_reduced(&raw_rgba_codec(), &[&data], g, 2, [200, 200, 200], &Location::file("t")).unwrap();
        assert_eq!((t.width, t.height), (3, 2));
        let px = |x: usize, y: usize| t.rgba[(y * 3 + x) * 4];
        // Block (0,0): pixels (0..2, 0..2) = 0,1,10,11 → mean 5.5 → 6.
        assert_eq!(px(0, 0), 6);
        // Block (2,0): column 4 only (valid width 5), rows 0..2: background 200 and 41 → 120.5 → 121.
        assert_eq!(px(2, 0), 121);
        // Block (1,1): row 2 only, columns 2..4: 22, 32 → 27.
        assert_eq!(px(1, 1), 27);
        assert!(t.rgba.chunks_exact(4).all(|p| p[3] == 255));
        assert_eq!(jpeg_scale(16, (240, 240)), 8);
        assert_eq!(jpeg_scale(12, (240, 240)), 4);
        assert_eq!(jpeg_scale(3, (240, 240)), 1);
        assert_eq!(jpeg_scale(16, (240, 87)), 1, "odd valid height: full decode");
        assert_eq!(jpeg_scale(16, (60, 84)), 4);
    }
}
