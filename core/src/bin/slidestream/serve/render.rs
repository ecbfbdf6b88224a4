//! Pixels of the server's answers: IIIF images, Deep Zoom tiles, thumbnails, associated
//! images and tissue masks, encoded as JPEG (libjpeg-turbo) or PNG. Blocking: the server calls
//! these on its blocking pool, at most `--max-requests` at once.

use image::ImageEncoder;
use slidestream::deepzoom::DeepZoom;
use slidestream::{resize_rgb_patches, Slide};

use super::http::HttpError;
use super::iiif::{Format, ImageRequest, Quality};

/// One image ready to encode: `channels` = 1 (grey) or 3 (RGB) or 4 (RGBA), rows top to bottom.
pub(crate) struct Pixels {
    pub width: u64,
    pub height: u64,
    pub channels: u8,
    pub data: Vec<u8>,
}

/// `px` encoded as `format`; JPEG at `jpeg_quality` (an RGBA image is written as PNG only).
pub(crate) fn encode(px: &Pixels, format: Format, jpeg_quality: u8) -> Result<Vec<u8>, HttpError> {
    let err = |e: &dyn std::fmt::Display| HttpError::new(500, format!("encoding the image: {e}"));
    let (w, h) = (u32::try_from(px.width).map_err(|e| err(&e))?, u32::try_from(px.height).map_err(|e| err(&e))?);
    match format {
        Format::Jpg => {
            let pf = match px.channels {
                1 => turbojpeg::PixelFormat::GRAY,
                3 => turbojpeg::PixelFormat::RGB,
                _ => turbojpeg::PixelFormat::RGBA,
            };
            if w > 65535 || h > 65535 {
                return Err(HttpError::new(413, format!("a {w} x {h} JPEG is over 65535 pixels a side")));
            }
            let img =
                turbojpeg::Image { pixels: px.data.as_slice(), width: w as usize, pitch: w as usize * px.channels as usize, height: h as usize, format: pf };
            let sub = if px.channels == 1 { turbojpeg::Subsamp::Gray } else { turbojpeg::Subsamp::Sub2x2 };
            turbojpeg::compress(img, jpeg_quality as i32, sub).map(|b| b.to_vec()).map_err(|e| err(&e))
        }
        Format::Png => {
            let ct = match px.channels {
                1 => image::ExtendedColorType::L8,
                3 => image::ExtendedColorType::Rgb8,
                _ => image::ExtendedColorType::Rgba8,
            };
            let mut out = Vec::new();
            image::codecs::png::PngEncoder::new_with_quality(&mut out, image::codecs::png::CompressionType::Fast, image::codecs::png::FilterType::Adaptive)
                .write_image(&px.data, w, h, ct)
                .map_err(|e| err(&e))?;
            Ok(out)
        }
    }
}

/// The IIIF image `req` of `slide`: the region read from the level best suited to the
/// reduction, composited over white, resized (Lanczos-3) to the requested size, mirrored,
/// rotated and converted to the quality. `max_read_area` bounds the level pixels read (`413`).
pub(crate) fn iiif_image(slide: &Slide, name: &str, req: &ImageRequest, max_read_area: u64) -> Result<Pixels, HttpError> {
    let (x, y, rw, rh) = req.region;
    let (ow, oh) = req.size;
    let scale = (rw as f64 / ow as f64).min(rh as f64 / oh as f64).max(1.0);
    let level = slide.best_level_for_downsample(scale);
    let ds = slide.level_downsamples()[level];
    let (lw, lh) = slide.level_dimensions()[level];
    let lx = (x as f64 / ds).floor() as u64;
    let ly = (y as f64 / ds).floor() as u64;
    let sw = (((x + rw) as f64 / ds).ceil() as u64).min(lw).saturating_sub(lx).max(1);
    let sh = (((y + rh) as f64 / ds).ceil() as u64).min(lh).saturating_sub(ly).max(1);
    let (rgb, sw, sh) = if sw.saturating_mul(sh) <= max_read_area {
        (slide.read_regions_rgb(&[(x as i64, y as i64)], level, (sw, sh), [255, 255, 255]).map_err(|e| HttpError::from_read(name, &e))?, sw, sh)
    } else if (x, y) == (0, 0) && (x + rw, y + rh) == slide.dimensions() {
        // The whole image at a size no level is near (a slide with few levels): the level
        // reduced while it is read, in bounded memory (`read_level_reduced`), to at least
        // twice the output, then resized as any other read.
        let mut f = reduced_factor(slide, level, (ow, oh));
        let (tw, th) = slide.level_tile_sizes()[level];
        // Reduced further (down to the output's own size) when twice the output is more than
        // the bound allows: with power-of-two steps some factor lands within 4 x the output.
        while lw.div_ceil(f as u64).saturating_mul(lh.div_ceil(f as u64)) > max_read_area
            && lw / (2 * f as u64) >= ow
            && lh / (2 * f as u64) >= oh
            && tw % (2 * f) == 0
            && th % (2 * f) == 0
        {
            f *= 2;
        }
        let (fw, fh) = (lw.div_ceil(f as u64), lh.div_ceil(f as u64));
        if fw.saturating_mul(fh) > max_read_area {
            return Err(HttpError::new(
                413,
                format!("{name}: the whole image needs {fw} x {fh} pixels of level {level} reduced by {f}, more than this server reads for one request"),
            ));
        }
        let (r, _) = slide.read_level_reduced(level, f, [255, 255, 255]).map_err(|e| HttpError::from_read(name, &e))?;
        (r.data, r.width, r.height)
    } else {
        return Err(HttpError::new(413, format!("{name}: the region needs {sw} x {sh} pixels of level {level}, more than this server reads for one request")));
    };
    let mut data = if (sw, sh) == (ow, oh) {
        rgb
    } else {
        let mut out = vec![0u8; (ow * oh * 3) as usize];
        resize_rgb_patches(&rgb, 1, (sw as u32, sh as u32), (ow as u32, oh as u32), &mut out).map_err(|e| HttpError::from_read(name, &e))?;
        out
    };
    let (mut w, mut h) = (ow, oh);
    if req.mirror {
        mirror(&mut data, w as usize, h as usize);
    }
    for _ in 0..req.rotation / 90 {
        data = rotate90(&data, w as usize, h as usize);
        std::mem::swap(&mut w, &mut h);
    }
    let (channels, data) = match req.quality {
        Quality::Color => (3, data),
        Quality::Gray => (1, data.chunks_exact(3).map(luma).collect()),
        Quality::Bitonal => (1, data.chunks_exact(3).map(|p| if luma(p) > 127 { 255 } else { 0 }).collect()),
    };
    Ok(Pixels { width: w, height: h, channels, data })
}

/// The factor [`Slide::read_level_reduced`] will use on `level` for an output of `out`
/// pixels: the largest power of two that keeps the result at least twice the output and
/// divides the level's tile size (as that function chooses).
pub(crate) fn reduced_factor(slide: &Slide, level: usize, out: (u64, u64)) -> u32 {
    let (lw, lh) = slide.level_dimensions()[level];
    let (tw, th) = slide.level_tile_sizes()[level];
    let want = (lw / (2 * out.0.max(1))).min(lh / (2 * out.1.max(1))).max(1);
    let mut f = 1u32;
    while (2 * f as u64) <= want && tw % (2 * f) == 0 && th % (2 * f) == 0 && f < (1 << 20) {
        f *= 2;
    }
    f
}

/// Whether a IIIF tile of `TILE × scale` level-0 pixels (clipped to the image) can be served:
/// the pixels it needs from the best level for `scale` are within `max_read_area`. `info.json`
/// offers only these scale factors.
pub(crate) fn tile_scale_served(slide: &Slide, scale: u64, tile: u64, max_read_area: u64) -> bool {
    let (w, h) = slide.dimensions();
    let level = slide.best_level_for_downsample(scale as f64);
    let ds = slide.level_downsamples()[level];
    let span = |full: u64| ((tile.saturating_mul(scale)).min(full) as f64 / ds).ceil() as u64 + 1;
    span(w).saturating_mul(span(h)) <= max_read_area
}

fn luma(p: &[u8]) -> u8 {
    ((299 * p[0] as u32 + 587 * p[1] as u32 + 114 * p[2] as u32 + 500) / 1000) as u8
}

fn mirror(rgb: &mut [u8], w: usize, h: usize) {
    for row in rgb.chunks_exact_mut(w * 3).take(h) {
        for x in 0..w / 2 {
            for c in 0..3 {
                row.swap(x * 3 + c, (w - 1 - x) * 3 + c);
            }
        }
    }
}

/// `rgb` (w × h) turned 90° clockwise: h × w.
fn rotate90(rgb: &[u8], w: usize, h: usize) -> Vec<u8> {
    let mut out = vec![0u8; rgb.len()];
    for y in 0..h {
        for x in 0..w {
            // (x, y) goes to (h - 1 - y, x) in the h-wide output.
            let d = (x * h + (h - 1 - y)) * 3;
            out[d..d + 3].copy_from_slice(&rgb[(y * w + x) * 3..(y * w + x) * 3 + 3]);
        }
    }
    out
}

/// Deep Zoom tile (`col`, `row`) of `level`, as `DeepZoomGenerator.get_tile` renders it; a
/// tile whose read would exceed `max_read_area` level pixels is cut from the level reduced
/// while read ([`DeepZoom::render_bounded`]).
pub(crate) fn dz_tile(slide: &Slide, name: &str, dz: &DeepZoom, level: usize, col: u64, row: u64, max_read_area: u64) -> Result<Pixels, HttpError> {
    let tile = dz.tile(level, col, row).map_err(|e| HttpError::new(404, format!("{name}: {e}")))?;
    let rgb = dz.render_bounded(slide, &tile, max_read_area).map_err(|e| HttpError::from_read(name, &e))?;
    Ok(Pixels { width: rgb.width, height: rgb.height, channels: 3, data: rgb.data })
}

/// The whole slide fitted in `size` × `size`, over white.
pub(crate) fn thumbnail(slide: &Slide, name: &str, size: u64) -> Result<Pixels, HttpError> {
    let rgb = slide.thumbnail_rgb((size, size), [255, 255, 255]).map_err(|e| HttpError::from_read(name, &e))?;
    Ok(Pixels { width: rgb.width, height: rgb.height, channels: 3, data: rgb.data })
}

/// Colour of tissue in the mask overlay (RGBA).
const TISSUE: [u8; 4] = [0, 160, 255, 110];

/// The tissue mask of the `size` thumbnail as an RGBA overlay: [`TISSUE`] where the pixel's
/// saturation `(max - min) * 255 / max` is above the Otsu threshold of all of them, transparent
/// elsewhere — `slidestream.tissue_mask(method="saturation")`'s rule.
pub(crate) fn tissue(slide: &Slide, name: &str, size: u64) -> Result<Pixels, HttpError> {
    let th = thumbnail(slide, name, size)?;
    let measure: Vec<u8> = th
        .data
        .chunks_exact(3)
        .map(|p| {
            let (mx, mn) = (p.iter().max().copied().unwrap_or(0) as u32, p.iter().min().copied().unwrap_or(0) as u32);
            ((mx - mn) * 255).checked_div(mx).unwrap_or(0) as u8
        })
        .collect();
    let t = otsu(&measure);
    let data = measure.iter().flat_map(|&m| if m as i32 > t { TISSUE } else { [0, 0, 0, 0] }).collect();
    Ok(Pixels { width: th.width, height: th.height, channels: 4, data })
}

/// Otsu's threshold of `values`: the `t` maximising `(mean_all * w0 - m0 * total)² / (w0 * w1)`
/// over the 256-bin histogram (first maximum), 255 when every value is equal — the same
/// arithmetic as `slidestream.otsu_threshold`, so the two masks agree.
pub(crate) fn otsu(values: &[u8]) -> i32 {
    let mut hist = [0f64; 256];
    for &v in values {
        hist[v as usize] += 1.0;
    }
    let total = values.len() as f64;
    let mean_all: f64 = hist.iter().enumerate().map(|(i, &c)| i as f64 * c).sum();
    let (mut w0, mut m0, mut best, mut best_t) = (0.0, 0.0, f64::NEG_INFINITY, -1);
    for (t, &c) in hist.iter().enumerate() {
        w0 += c;
        m0 += t as f64 * c;
        let w1 = total - w0;
        let between = if w0 == 0.0 || w1 == 0.0 { -1.0 } else { (mean_all * w0 - m0 * total).powi(2) / (w0 * w1) };
        if between > best {
            best = between;
            best_t = t as i32;
        }
    }
    if best < 0.0 {
        255
    } else {
        best_t
    }
}

/// An associated image as RGBA.
pub(crate) fn associated(slide: &Slide, name: &str, which: &str) -> Result<Pixels, HttpError> {
    if !slide.associated_images().contains_key(which) {
        return Err(HttpError::new(404, format!("{name} has no associated image {which:?}")));
    }
    let r = slide.read_associated(which).map_err(|e| HttpError::from_read(name, &e))?;
    Ok(Pixels { width: r.width, height: r.height, channels: 4, data: r.data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_and_mirroring_move_pixels() {
        // 2 x 1: red, green.
        let rgb = vec![255, 0, 0, 0, 255, 0];
        let r = rotate90(&rgb, 2, 1);
        assert_eq!(r, rgb, "a 2x1 row turned clockwise is a 1x2 column, red on top");
        let mut m = rgb.clone();
        mirror(&mut m, 2, 1);
        assert_eq!(m, vec![0, 255, 0, 255, 0, 0]);
        // 1 x 2 column (red over green) turned clockwise: green left, red right.
        assert_eq!(rotate90(&rgb, 1, 2), vec![0, 255, 0, 255, 0, 0]);
    }

    #[test]
    fn otsu_splits_two_populations() {
        let mut v = vec![10u8; 100];
        v.extend(vec![200u8; 50]);
        let t = otsu(&v);
        assert!((10..200).contains(&t), "{t}");
        assert_eq!(otsu(&[7; 20]), 255);
    }
}
