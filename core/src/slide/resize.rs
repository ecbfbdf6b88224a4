//! Reduction of a batch of RGB patches to a smaller size: what reading at a physical
//! resolution (`mpp=` / `magnification=` in the Python API) does after reading the coarsest level
//! at or below the target.
//!
//! The filter is a separable Lanczos-3 convolution whose support widens with the reduction
//! factor (antialiased), computed by the `fast_image_resize` crate (SIMD), which implements
//! Pillow's convolution resampling, run as Pillow runs it (horizontal pass, then vertical, through
//! an 8-bit intermediate): results equal `PIL.Image.resize(..., LANCZOS)` within two grey levels
//! (checked in `py/tests/test_resolution.py`). Patches are reduced in parallel on the decode
//! pool (`SLIDESTREAM_DECODE_THREADS`).

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use rayon::prelude::*;

use crate::error::{Error, Result};

/// Resize `n` RGB patches, `src` = `n × from.1 × from.0 × 3` bytes (patch-major, rows top to
/// bottom, interleaved R, G, B `u8`), into `out` = `n × to.1 × to.0 × 3` bytes, each patch
/// independently (its edges clamp; no pixel of a neighbour is used). `from` and `to` are
/// (width, height) in pixels. Equal sizes copy.
///
/// # Errors
/// [`Error::Usage`] when a size is zero or a buffer has the wrong length.
pub fn resize_rgb_patches(src: &[u8], n: usize, from: (u32, u32), to: (u32, u32), out: &mut [u8]) -> Result<()> {
    let bytes = |(w, h): (u32, u32)| (w as usize).checked_mul(h as usize).and_then(|p| p.checked_mul(3));
    let (Some(sp), Some(dp)) = (bytes(from), bytes(to)) else {
        return Err(Error::Usage(format!("resize: patch sizes {from:?} -> {to:?} overflow")));
    };
    if sp == 0 || dp == 0 {
        return Err(Error::Usage(format!("resize: patch sizes must be non-zero, got {from:?} -> {to:?}")));
    }
    if Some(src.len()) != n.checked_mul(sp) || Some(out.len()) != n.checked_mul(dp) {
        return Err(Error::Usage(format!(
            "resize: {n} patches of {from:?} -> {to:?} need {} and {} bytes, got {} and {}",
            n.saturating_mul(sp),
            n.saturating_mul(dp),
            src.len(),
            out.len()
        )));
    }
    if from == to {
        out.copy_from_slice(src);
        return Ok(());
    }
    let opts = ResizeOptions::new().resize_alg(ResizeAlg::Convolution(FilterType::Lanczos3));
    // Two passes, horizontal then vertical through an 8-bit intermediate, as Pillow runs them
    // (the crate alone would run the vertical pass first for 8-bit pixels: the intermediate
    // rounding and clipping then differ from Pillow's by up to tens of grey levels on noise).
    let mid = (to.0 as usize) * (from.1 as usize) * 3;
    let init = || (Resizer::new(), vec![0u8; mid]);
    src.par_chunks(sp).zip(out.par_chunks_mut(dp)).try_for_each_init(init, |(resizer, tmp), (s, d)| {
        let err = |e: &dyn std::fmt::Display| Error::Usage(format!("resize: {e}"));
        // U8x3 has no alignment requirement and the lengths were checked above.
        let s = ImageRef::new(from.0, from.1, s, PixelType::U8x3).map_err(|e| err(&e))?;
        if from.0 == to.0 || from.1 == to.1 {
            let mut d = Image::from_slice_u8(to.0, to.1, d, PixelType::U8x3).map_err(|e| err(&e))?;
            return resizer.resize(&s, &mut d, &opts).map_err(|e| err(&e));
        }
        let mut t = Image::from_slice_u8(to.0, from.1, tmp, PixelType::U8x3).map_err(|e| err(&e))?;
        resizer.resize(&s, &mut t, &opts).map_err(|e| err(&e))?;
        let mut d = Image::from_slice_u8(to.0, to.1, d, PixelType::U8x3).map_err(|e| err(&e))?;
        resizer.resize(&t, &mut d, &opts).map_err(|e| err(&e))
    })
}

/// Resize one RGB image `src` (`from` = (width, height), interleaved R, G, B `u8`) to `to`,
/// sampling the source rectangle `crop` = (left, top, right, bottom) in source pixels (may be
/// fractional, as Pillow's `Image.resize(size, LANCZOS, box=...)`), with the same Lanczos-3
/// convolution and pass order as [`resize_rgb_patches`]. Returns `to.0 × to.1 × 3` bytes.
///
/// # Errors
/// [`Error::Usage`] when a size is zero, `src` has the wrong length or `crop` is empty or
/// leaves the image.
pub fn resize_rgb_box(src: &[u8], from: (u32, u32), crop: (f64, f64, f64, f64), to: (u32, u32)) -> Result<Vec<u8>> {
    let (l, t, r, b) = crop;
    let n = (from.0 as usize).checked_mul(from.1 as usize).and_then(|p| p.checked_mul(3));
    if from.0 == 0 || from.1 == 0 || to.0 == 0 || to.1 == 0 || n != Some(src.len()) {
        return Err(Error::Usage(format!("resize: {from:?} -> {to:?} with {} source bytes", src.len())));
    }
    if !(l >= 0.0 && t >= 0.0 && r > l && b > t && r <= from.0 as f64 && b <= from.1 as f64) {
        return Err(Error::Usage(format!("resize: box {crop:?} outside the {from:?} image")));
    }
    let err = |e: &dyn std::fmt::Display| Error::Usage(format!("resize: {e}"));
    let s = ImageRef::new(from.0, from.1, src, PixelType::U8x3).map_err(|e| err(&e))?;
    let mut resizer = Resizer::new();
    let alg = ResizeAlg::Convolution(FilterType::Lanczos3);
    // Horizontal pass over the box's columns (all source rows), then the vertical pass over
    // its rows: Pillow's order and its 8-bit intermediate.
    let mut mid = Image::new(to.0, from.1, PixelType::U8x3);
    let h_opts = ResizeOptions::new().resize_alg(alg).crop(l, 0.0, r - l, from.1 as f64);
    resizer.resize(&s, &mut mid, &h_opts).map_err(|e| err(&e))?;
    let mut out = Image::new(to.0, to.1, PixelType::U8x3);
    let v_opts = ResizeOptions::new().resize_alg(alg).crop(0.0, t, to.0 as f64, b - t);
    resizer.resize(&mid, &mut out, &v_opts).map_err(|e| err(&e))?;
    Ok(out.into_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_patch_stays_flat_and_patches_do_not_bleed_into_each_other() {
        let (from, to) = ((64u32, 48u32), (32u32, 24u32));
        let mut src = vec![0u8; 2 * 64 * 48 * 3];
        src[..64 * 48 * 3].chunks_mut(3).for_each(|p| p.copy_from_slice(&[200, 100, 50]));
        src[64 * 48 * 3..].chunks_mut(3).for_each(|p| p.copy_from_slice(&[10, 20, 30]));
        let mut out = vec![7u8; 2 * 32 * 24 * 3];
        resize_rgb_patches(&src, 2, from, to, &mut out).unwrap();
        assert!(out[..32 * 24 * 3].chunks(3).all(|p| p == [200, 100, 50]));
        assert!(out[32 * 24 * 3..].chunks(3).all(|p| p == [10, 20, 30]));
    }

    #[test]
    fn a_two_times_reduction_of_a_checkerboard_is_its_mean() {
        // 1-pixel checkerboard of 0 and 255: every output pixel of a 2x reduction is ~127.5
        // away from the edges (Lanczos weights sum to 1 and the pattern is symmetric).
        let (w, h) = (40u32, 40u32);
        let src: Vec<u8> = (0..w * h).flat_map(|i| { let v = if (i % w + i / w) % 2 == 0 { 0 } else { 255 }; [v, v, v] }).collect();
        let mut out = vec![0u8; 20 * 20 * 3];
        resize_rgb_patches(&src, 1, (w, h), (20, 20), &mut out).unwrap();
        for y in 4..16 {
            for x in 4..16 {
                let v = out[(y * 20 + x) * 3];
                assert!((126..=129).contains(&v), "({x}, {y}): {v}");
            }
        }
    }

    #[test]
    fn bad_sizes_are_usage_errors() {
        let mut out = vec![0u8; 12];
        assert!(matches!(resize_rgb_patches(&[0; 12], 1, (2, 2), (0, 2), &mut out), Err(Error::Usage(_))));
        assert!(matches!(resize_rgb_patches(&[0; 11], 1, (2, 2), (2, 2), &mut out), Err(Error::Usage(_))));
        assert!(matches!(resize_rgb_patches(&[0; 12], 2, (2, 2), (1, 1), &mut out), Err(Error::Usage(_))));
        assert!(matches!(resize_rgb_patches(&[0; 12], 1, (u32::MAX, u32::MAX), (1, 1), &mut out), Err(Error::Usage(_))));
        let mut same = vec![0u8; 12];
        resize_rgb_patches(&[9; 12], 1, (2, 2), (2, 2), &mut same).unwrap();
        assert_eq!(same, [9; 12]);
    }
}
