//! The integer filter taps of [`resize_rgb_patches`](super::resize_rgb_patches), for back ends
//! that run the same convolution elsewhere (the GPU engine's `resize_h` / `resize_v` kernels).
//!
//! `fast_image_resize`'s 8-bit convolution (the `Convolution(Lanczos3)` algorithm, which follows
//! Pillow-SIMD) is, per axis and output pixel `o` of `out` from an input of `inp` pixels:
//! - `scale = inp / out`, `filter_scale = max(scale, 1)` (the support widens when reducing:
//!   antialiasing), `radius = 3 · filter_scale`, `center = (o + 0.5) · scale`;
//! - the window `floor(center − radius) .. ceil(center + radius)` clamped to `0 .. inp`, weights
//!   `lanczos3((x + 0.5 − center) / filter_scale)` (`lanczos3(t) = sinc(t) · sinc(t / 3)` on
//!   `−3 ≤ t < 3`), leading and trailing zero weights dropped, normalised to sum 1 (`f64`);
//! - the weights become `i16` with `precision` fractional bits, the largest precision below 22
//!   for which twice the greatest weight, rounded, stays below 2¹⁵; each weight is
//!   `round(w · 2^precision)` (half away from zero);
//! - a sample is `clamp((2^(precision−1) + Σ in[start + k] · tap[k]) >> precision, 0, 255)` in
//!   `i32` (arithmetic shift).
//!
//! (`fast_image_resize` 5.5's `convolution::precompute_coefficients` and `Normalizer16`; its
//! native and SIMD kernels compute the same integers.) [`apply_rgb`] runs these taps on the CPU:
//! the unit tests check that it reproduces `resize_rgb_patches` exactly, which is what makes a
//! device resize with these taps equal to the CPU path.

/// One axis's taps: output pixel `o` reads input pixels `starts[o] .. starts[o] + sizes[o]`
/// with weights `values[o · window ..][.. sizes[o]]` (the rest of each window is 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taps {
    /// First input pixel of each output pixel.
    pub starts: Vec<i32>,
    /// Number of input pixels of each output pixel (≤ `window`).
    pub sizes: Vec<i32>,
    /// Weights, `window` per output pixel, fixed point with `precision` fractional bits.
    pub values: Vec<i16>,
    /// Weights per output pixel (the widest window).
    pub window: usize,
    /// Fractional bits of `values`.
    pub precision: u32,
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let x = x * std::f64::consts::PI;
        x.sin() / x
    }
}

fn lanczos3(x: f64) -> f64 {
    if (-3.0..3.0).contains(&x) {
        sinc(x) * sinc(x / 3.0)
    } else {
        0.0
    }
}

/// The Lanczos-3 taps taking `inp` pixels to `out` pixels along one axis (see the module docs).
/// `inp` and `out` must be non-zero (the callers check).
pub fn lanczos3_taps(inp: u32, out: u32) -> Taps {
    let scale = inp as f64 / out as f64;
    let filter_scale = scale.max(1.0);
    let radius = 3.0 * filter_scale;
    let window = radius.ceil() as usize * 2 + 1;
    let recip = 1.0 / filter_scale;
    let mut weights = vec![0f64; window * out as usize];
    let (mut starts, mut sizes) = (Vec::with_capacity(out as usize), Vec::with_capacity(out as usize));
    for o in 0..out as usize {
        let in_center = (o as f64 + 0.5) * scale;
        let lo = (in_center - radius).floor().max(0.0) as u32;
        let hi = (in_center + radius).ceil().min(inp as f64) as u32;
        let center = in_center - 0.5;
        let row = &mut weights[o * window..(o + 1) * window];
        let (mut start, mut n, mut sum) = (lo, 0usize, 0.0);
        for x in lo..hi {
            let w = lanczos3((x as f64 - center) * recip);
            if x == start && w == 0.0 {
                start += 1;
            } else {
                row[n] = w;
                n += 1;
                sum += w;
            }
        }
        while n > 0 && row[n - 1] == 0.0 {
            n -= 1;
        }
        if sum != 0.0 {
            row.iter_mut().for_each(|w| *w /= sum);
        }
        starts.push(start as i32);
        sizes.push(n as i32);
    }
    let max = weights.iter().copied().fold(0.0f64, f64::max);
    let mut precision = 0u32;
    for p in 0..22u32 {
        precision = p;
        if (max * (1i64 << (p + 1)) as f64).round() as i64 >= 1 << 15 {
            break;
        }
    }
    let unit = (1i64 << precision) as f64;
    let values = weights
        .chunks(window)
        .zip(&sizes)
        .flat_map(|(w, &n)| (0..window).map(move |k| if (k as i32) < n { (w[k] * unit).round() as i16 } else { 0 }))
        .collect();
    Taps { starts, sizes, values, window, precision }
}

/// One output sample from `get(k)`, the `k`-th input sample of output pixel `o`'s window.
#[inline]
pub fn sample(t: &Taps, o: usize, get: impl Fn(usize) -> u8) -> u8 {
    let taps = &t.values[o * t.window..][..t.sizes[o] as usize];
    let mut acc = 1i32 << (t.precision - 1);
    for (k, &w) in taps.iter().enumerate() {
        acc += get(k) as i32 * w as i32;
    }
    (acc >> t.precision).clamp(0, 255) as u8
}

/// The convolution of `n` RGB patches of `from` to `to` (width, height) with these taps, on
/// the CPU: the horizontal pass into an 8-bit intermediate of `to.0 × from.1`, then the vertical
/// (a pass is skipped when its axis keeps its size). The reference for back ends that run
/// the same taps; equal to [`resize_rgb_patches`](super::resize_rgb_patches) (unit tests).
pub fn apply_rgb(src: &[u8], n: usize, from: (u32, u32), to: (u32, u32)) -> Vec<u8> {
    let (sw, sh, tw, th) = (from.0 as usize, from.1 as usize, to.0 as usize, to.1 as usize);
    let mut mid = src.to_vec();
    if tw != sw {
        let t = lanczos3_taps(from.0, to.0);
        mid = vec![0u8; n * sh * tw * 3];
        for (p, row) in mid.chunks_mut(tw * 3).enumerate() {
            let s = &src[p * sw * 3..][..sw * 3];
            for (o, px) in row.chunks_mut(3).enumerate() {
                for (c, v) in px.iter_mut().enumerate() {
                    *v = sample(&t, o, |k| s[(t.starts[o] as usize + k) * 3 + c]);
                }
            }
        }
    }
    if th == sh {
        return mid;
    }
    let t = lanczos3_taps(from.1, to.1);
    let mut out = vec![0u8; n * th * tw * 3];
    for (p, patch) in out.chunks_mut(th * tw * 3).enumerate() {
        let m = &mid[p * sh * tw * 3..][..sh * tw * 3];
        for (o, row) in patch.chunks_mut(tw * 3).enumerate() {
            for (i, v) in row.iter_mut().enumerate() {
                *v = sample(&t, o, |k| m[(t.starts[o] as usize + k) * tw * 3 + i]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pattern with edges, gradients and noise (so every tap matters).
    fn pattern(n: usize, (w, h): (u32, u32)) -> Vec<u8> {
        let mut s = 0x2545_f491_u32;
        (0..n * w as usize * h as usize * 3)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let px = i / 3 % w as usize;
                if (px / 7) % 2 == 0 { (s >> 24) as u8 } else { (px * 255 / w as usize) as u8 }
            })
            .collect()
    }

    #[test]
    fn the_taps_reproduce_fast_image_resize_exactly() {
        for (from, to) in [((512, 512), (256, 256)), ((301, 257), (224, 224)), ((100, 80), (37, 80)), ((64, 48), (64, 20)), ((50, 50), (120, 90)), ((256, 256), (255, 255))] {
            let n = 3;
            let src = pattern(n, from);
            let mut want = vec![0u8; n * to.0 as usize * to.1 as usize * 3];
            super::super::resize_rgb_patches(&src, n, from, to, &mut want).unwrap();
            let got = apply_rgb(&src, n, from, to);
            let diff = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            assert_eq!(diff, 0, "{from:?} -> {to:?}: {diff} samples differ");
        }
    }

    #[test]
    fn taps_are_normalised_and_inside_the_input() {
        for (inp, out) in [(512, 256), (7, 3), (3, 7), (1000, 1)] {
            let t = lanczos3_taps(inp, out);
            for o in 0..out as usize {
                assert!(t.starts[o] >= 0 && t.starts[o] + t.sizes[o] <= inp as i32);
                let sum: i32 = t.values[o * t.window..][..t.window].iter().map(|&v| v as i32).sum();
                assert!((sum - (1 << t.precision)).abs() <= t.sizes[o], "{inp}->{out} o={o}: {sum}");
            }
        }
    }
}
