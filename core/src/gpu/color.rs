//! CPU reference for turning a JPEG's planar components (as nvJPEG's `NVJPEG_OUTPUT_UNCHANGED`
//! or libjpeg's raw-data output gives them: Y, Cb, Cr planes, chroma subsampled) into the RGBA
//! that libjpeg-turbo's normal decode produces, bit for bit.
//!
//! Reproduces libjpeg-turbo 3.1.0 (the copy vendored by `turbojpeg-sys` 1.2.0, `src/jdsample.c`,
//! `src/jdcolor.c`, `src/jdmainct.c`, `src/jdmaster.c`) with TurboJPEG's defaults: fancy
//! upsampling on (`TJPARAM_FASTUPSAMPLE` = 0), 8×8 IDCT (no scaling). The SIMD versions that
//! libjpeg-turbo runs instead (`jsimd_h2v1_fancy_upsample`, `jsimd_h2v2_fancy_upsample`,
//! `jsimd_ycc_rgb_convert`) give the same bytes as the C functions named below; the tests check
//! the whole chain against `tj3Decompress8`.
//!
//! Every function is written as a per-output-pixel gather with integer arithmetic and clamped
//! neighbour indices, so it ports line by line to one CUDA thread per pixel.
//!
//! # Merged upsampling is not in play
//!
//! `jdmaster.c`, `use_merged_upsample()` returns FALSE whenever `do_fancy_upsampling` is set,
//! so the merged upsample + colour convert of `jdmerge.c` (box-filter chroma) is only used with
//! `TJPARAM_FASTUPSAMPLE`. With the defaults, each chroma component is upsampled separately
//! (`jdsample.c`, `sep_upsample`) and then converted (`jdcolor.c`, `ycc_rgb_convert`).
//!
//! # Upsampling (`jdsample.c`, `jinit_upsampler`)
//!
//! Notation for one component plane `P` of `pw × ph` samples (libjpeg's `downsampled_width`
//! and `downsampled_height`, `ceil(image_size × samp_factor / max_samp_factor)`), full-resolution
//! pixel `(x, y)`, ratios `sub_h = max_h_samp / h_samp`, `sub_v = max_v_samp / v_samp`:
//!
//! ```text
//! clampx(i) = min(max(i, 0), pw - 1)        clampy(j) = min(max(j, 0), ph - 1)
//! i = clampx(x >> 1),  ni = clampx(x odd ? i + 1 : i - 1)   // nearer / further column
//! r = clampy(y >> 1),  nr = clampy(y odd ? r + 1 : r - 1)   // nearer / further row
//! ```
//!
//! * `1 × 1` (`fullsize_upsample`): `P[y][x]`.
//! * `2 × 1`, `pw > 2` (`h2v1_fancy_upsample`):
//!   `(3·P[y][i] + P[y][ni] + (x odd ? 2 : 1)) >> 2`.
//! * `1 × 2` (`h1v2_fancy_upsample`, used for any width):
//!   `(3·P[r][x] + P[nr][x] + (y odd ? 2 : 1)) >> 2`.
//! * `2 × 2`, `pw > 2` (`h2v2_fancy_upsample`): with column sums
//!   `S(c) = 3·P[r][c] + P[nr][c]`, `(3·S(i) + S(ni) + (x odd ? 7 : 8)) >> 4`.
//! * `2 × 1` or `2 × 2` with `pw <= 2` (`h2v1_upsample`, `h2v2_upsample`: libjpeg only takes
//!   the fancy path when `downsampled_width > 2`), and every other ratio (4:1:1, 4:4:1, …;
//!   `int_upsample`): box replication, `P[y / sub_v][x / sub_h]`.
//!
//! Edges: the C code special-cases the first and last column (`outptr = invalue` for the outer
//! half-pixels, `(3·S + S + 8) >> 4` and `(4·S + 7) >> 4` in `h2v2`), which is exactly the general
//! formula with the neighbour index clamped. Vertically, `jdmainct.c` supplies context rows:
//! above the first row it repeats row 0 (`make_funny_pointers`), below the last real row
//! (`ph - 1`) it repeats that row (`set_bottom_pointers`), discarding the IDCT's padding rows,
//! which is again the clamped index. Columns beyond `pw - 1` are never read. Outputs past the
//! image (e.g. the 18th column of a 17-pixel-wide 4:2:0 image) are simply not produced.
//!
//! # Colour conversion (`jdcolor.c`, `build_ycc_rgb_table` + `ycc_rgb_convert`)
//!
//! 16-bit fixed point, `FIX(v) = round(v · 65536)`, `ONE_HALF = 1 << 15`, `cb' = cb − 128`,
//! `cr' = cr − 128`, arithmetic right shift, result clamped to 0‥255 (`range_limit`):
//!
//! ```text
//! R = Y + ((91881 · cr' + 32768) >> 16)                      // FIX(1.40200) = 91881
//! G = Y + ((−22554 · cb' + −46802 · cr' + 32768) >> 16)      // FIX(0.34414), FIX(0.71414)
//! B = Y + ((116130 · cb' + 32768) >> 16)                     // FIX(1.77200) = 116130
//! ```
//!
//! RGB-coded streams (Adobe transform 0) get no conversion (`rgb_rgb_convert`), but their
//! components are upsampled the same way when subsampled.

/// `FIX(1.40200)`: Cr → R.
const FIX_1_40200: i32 = 91881;
/// `FIX(1.77200)`: Cb → B.
const FIX_1_77200: i32 = 116130;
/// `FIX(0.71414)`: Cr → G (negated in use).
const FIX_0_71414: i32 = 46802;
/// `FIX(0.34414)`: Cb → G (negated in use).
const FIX_0_34414: i32 = 22554;
/// `SCALEBITS` of `jdcolor.c`.
const SCALEBITS: u32 = 16;
/// `ONE_HALF`: rounding constant of the fixed-point products.
const ONE_HALF: i32 = 1 << (SCALEBITS - 1);

/// libjpeg-turbo's YCbCr → RGB conversion of one pixel (`jdcolor.c`, `build_ycc_rgb_table`
/// and `ycc_rgb_convert`), bit-exact. See the [module documentation](self) for the formulas.
#[inline]
pub fn ycc_to_rgb(y: u8, cb: u8, cr: u8) -> (u8, u8, u8) {
    let (y, cb, cr) = (i32::from(y), i32::from(cb) - 128, i32::from(cr) - 128);
    let r = y + ((FIX_1_40200 * cr + ONE_HALF) >> SCALEBITS);
    let g = y + ((-FIX_0_34414 * cb - FIX_0_71414 * cr + ONE_HALF) >> SCALEBITS);
    let b = y + ((FIX_1_77200 * cb + ONE_HALF) >> SCALEBITS);
    (r.clamp(0, 255) as u8, g.clamp(0, 255) as u8, b.clamp(0, 255) as u8)
}

/// The upsampled value at full-resolution pixel `(x, y)` of a component plane, bit-exact with
/// libjpeg-turbo's default ("fancy") upsampling.
///
/// `plane` holds `ph` rows of `pw` samples, rows `pitch` bytes apart; `pw × ph` are libjpeg's
/// `downsampled_width × downsampled_height` of the component (= nvJPEG's
/// `nvjpegGetImageInfo` widths/heights). `sub_h`, `sub_v` are the subsampling ratios
/// (`max_samp_factor / samp_factor`: 1 = full resolution, 2 = half). Ratios 1 and 2 are
/// interpolated as libjpeg does; any other ratio is box-replicated (libjpeg's `int_upsample`).
/// Integer operations on at most four clamped neighbours, no loops: one CUDA thread per pixel.
/// See the [module documentation](self) for the formulas and edge handling.
///
/// # Panics
/// When `pw` or `ph` is 0, or `plane` is shorter than `pitch × (ph − 1) + pw`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn chroma_at(plane: &[u8], pitch: usize, pw: usize, ph: usize, sub_h: u32, sub_v: u32, x: usize, y: usize) -> u8 {
    let at = |col: usize, row: usize| i32::from(plane[row * pitch + col]);
    let fancy_h = sub_h == 2 && pw > 2; // jdsample.c: fancy h2v1/h2v2 only when downsampled_width > 2
    match (sub_h, sub_v) {
        (1, 1) => plane[y.min(ph - 1) * pitch + x.min(pw - 1)],
        (2, 1) if fancy_h => {
            // h2v1_fancy_upsample
            let (i, row) = ((x >> 1).min(pw - 1), y.min(ph - 1));
            let ni = if x & 1 == 1 { (i + 1).min(pw - 1) } else { i.saturating_sub(1) };
            let bias = if x & 1 == 1 { 2 } else { 1 };
            ((3 * at(i, row) + at(ni, row) + bias) >> 2) as u8
        }
        (1, 2) => {
            // h1v2_fancy_upsample (no width condition)
            let (col, r) = (x.min(pw - 1), (y >> 1).min(ph - 1));
            let nr = if y & 1 == 1 { (r + 1).min(ph - 1) } else { r.saturating_sub(1) };
            let bias = if y & 1 == 1 { 2 } else { 1 };
            ((3 * at(col, r) + at(col, nr) + bias) >> 2) as u8
        }
        (2, 2) if fancy_h => {
            // h2v2_fancy_upsample: vertical 3:1 column sums, then horizontal 3:1 of the sums
            let (i, r) = ((x >> 1).min(pw - 1), (y >> 1).min(ph - 1));
            let ni = if x & 1 == 1 { (i + 1).min(pw - 1) } else { i.saturating_sub(1) };
            let nr = if y & 1 == 1 { (r + 1).min(ph - 1) } else { r.saturating_sub(1) };
            let this = 3 * at(i, r) + at(i, nr);
            let next = 3 * at(ni, r) + at(ni, nr);
            let bias = if x & 1 == 1 { 7 } else { 8 };
            ((3 * this + next + bias) >> 4) as u8
        }
        _ => {
            // h2v1_upsample / h2v2_upsample / int_upsample: box filter
            let (sh, sv) = (sub_h.max(1) as usize, sub_v.max(1) as usize);
            plane[(y / sv).min(ph - 1) * pitch + (x / sh).min(pw - 1)]
        }
    }
}

/// Convert a JPEG's three component planes to RGBA (alpha 255), bit-exact with libjpeg-turbo's
/// decode of the same stream: each component is upsampled with [`chroma_at`] and, when `ycbcr`,
/// converted with [`ycc_to_rgb`]; otherwise (RGB-coded JPEG, components R, G, B) copied.
///
/// `planes[c]` holds `dims[c].1` rows of `dims[c].0` samples, `pitches[c]` bytes apart;
/// `sub[c]` is its `(sub_h, sub_v)` ratio (`max_samp_factor / samp_factor`, e.g. `(1, 1)` for
/// Y and `(2, 2)` for Cb and Cr of a 4:2:0 stream; for a TurboJPEG subsampling code the chroma
/// ratio is [`mcu_size`](crate::codec::jpeg::mcu_size) / 8, for nvJPEG it follows from
/// `nvjpegChromaSubsampling_t`). The ratios cannot be derived from the sizes: a 1-pixel-wide
/// 4:2:0 image and a 4:4:0 one have the same plane sizes but are upsampled differently
/// (box vs. `h1v2_fancy_upsample`). The result is `width × height` pixels, rows `4 × width`
/// bytes.
///
/// # Panics
/// When a plane is empty in one dimension or shorter than its pitch and dims require.
pub fn planar_to_rgba(
    planes: [&[u8]; 3],
    pitches: [usize; 3],
    dims: [(usize, usize); 3],
    sub: [(u32, u32); 3],
    width: usize,
    height: usize,
    ycbcr: bool,
) -> Vec<u8> {
    let mut out = vec![0u8; width * height * 4];
    if width == 0 {
        return out;
    }
    for (y, row) in out.chunks_exact_mut(width * 4).enumerate() {
        for (x, px) in row.chunks_exact_mut(4).enumerate() {
            let v: [u8; 3] = std::array::from_fn(|c| chroma_at(planes[c], pitches[c], dims[c].0, dims[c].1, sub[c].0, sub[c].1, x, y));
            let (r, g, b) = if ycbcr { ycc_to_rgb(v[0], v[1], v[2]) } else { (v[0], v[1], v[2]) };
            px.copy_from_slice(&[r, g, b, 255]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::jpeg::{decode_planes, mcu_size, read_header, splice, JpegColor};

    /// `FIX(x)` of `jdcolor.c`.
    fn fix(x: f64) -> i32 {
        (x * f64::from(1u32 << SCALEBITS) + 0.5) as i32
    }

    #[test]
    fn fixed_point_constants_are_libjpegs() {
        assert_eq!(FIX_1_40200, fix(1.40200));
        assert_eq!(FIX_1_77200, fix(1.77200));
        assert_eq!(FIX_0_71414, fix(0.71414));
        assert_eq!(FIX_0_34414, fix(0.34414));
    }

    #[test]
    fn ycc_table_matches_known_libjpeg_values() {
        // Neutral grey stays grey; pure-chroma extremes clamp as libjpeg does.
        assert_eq!(ycc_to_rgb(128, 128, 128), (128, 128, 128));
        assert_eq!(ycc_to_rgb(76, 85, 255), (254, 0, 0));
        assert_eq!(ycc_to_rgb(0, 255, 255), (178, 0, 225));
    }

    /// Deterministic xorshift generator for test images.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    #[derive(Debug, Clone, Copy)]
    enum Content {
        /// Independent random bytes per sample: the worst case for chroma interpolation.
        Noise,
        /// Smooth gradient in all three channels.
        Gradient,
    }

    fn image(content: Content, w: usize, h: usize, seed: u64) -> Vec<u8> {
        let mut rng = Rng(seed.max(1));
        let mut out = Vec::with_capacity(w * h * 3);
        for y in 0..h {
            for x in 0..w {
                match content {
                    Content::Noise => out.extend((0..3).map(|_| (rng.next() >> 56) as u8)),
                    Content::Gradient => out.extend_from_slice(&[
                        (x * 255 / w.max(2).saturating_sub(1).max(1)).min(255) as u8,
                        (y * 255 / h.max(2).saturating_sub(1).max(1)).min(255) as u8,
                        (255 - ((x + y) * 255 / (w + h)).min(255)) as u8,
                    ]),
                }
            }
        }
        out
    }

    fn compress(rgb: &[u8], w: usize, h: usize, subsamp: turbojpeg::Subsamp, rgb_coded: bool) -> Vec<u8> {
        let mut c = turbojpeg::Compressor::new().expect("compressor");
        c.set_quality(90).expect("quality");
        c.set_subsamp(subsamp).expect("subsamp");
        if rgb_coded {
            c.set_colorspace(turbojpeg::Colorspace::RGB).expect("colorspace");
        }
        let img = turbojpeg::Image { pixels: rgb, width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
        c.compress_to_vec(img).expect("compress")
    }

    /// libjpeg-turbo's own RGBA decode, rows `4 × width` bytes.
    fn reference(stream: &[u8]) -> Vec<u8> {
        let img = turbojpeg::decompress(stream, turbojpeg::PixelFormat::RGBA).expect("decompress");
        img.pixels.chunks(img.pitch).take(img.height).flat_map(|row| row[..img.width * 4].to_vec()).collect()
    }

    /// `planar_to_rgba(decode_planes(stream))`.
    fn ours(stream: &[u8], w: usize, h: usize, ycbcr: bool) -> Vec<u8> {
        let (planes, dims) = decode_planes(stream).expect("decode_planes");
        assert_eq!(planes.len(), 3);
        for (p, d) in planes.iter().zip(&dims) {
            assert_eq!(p.len(), d.0 * d.1);
        }
        let (mw, mh) = mcu_size(read_header(stream).expect("header").subsamp).expect("known subsampling");
        let chroma = (mw / 8, mh / 8);
        let sub = [(1, 1), chroma, chroma];
        planar_to_rgba([&planes[0], &planes[1], &planes[2]], [dims[0].0, dims[1].0, dims[2].0], [dims[0], dims[1], dims[2]], sub, w, h, ycbcr)
    }

    /// (max abs diff, first differing pixel).
    fn compare(got: &[u8], want: &[u8], w: usize) -> (u8, Option<(usize, usize)>) {
        assert_eq!(got.len(), want.len());
        let max = got.iter().zip(want).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0);
        let first = got.chunks_exact(4).zip(want.chunks_exact(4)).position(|(a, b)| a != b).map(|i| (i % w, i / w));
        (max, first)
    }

    const SIZES: [(usize, usize); 16] =
        [(256, 256), (240, 240), (255, 253), (17, 9), (16, 16), (1, 1), (2, 2), (3, 3), (4, 5), (5, 4), (6, 1), (1, 6), (33, 31), (7, 130), (130, 7), (64, 17)];

    /// The expected libjpeg downsampled size of a chroma component.
    fn chroma_dims(ss: turbojpeg::Subsamp, w: usize, h: usize) -> (usize, usize) {
        match ss {
            turbojpeg::Subsamp::Sub2x1 => (w.div_ceil(2), h),
            turbojpeg::Subsamp::Sub2x2 => (w.div_ceil(2), h.div_ceil(2)),
            turbojpeg::Subsamp::Sub1x2 => (w, h.div_ceil(2)),
            _ => (w, h),
        }
    }

    #[test]
    fn planar_ycbcr_matches_libjpeg_turbo_exactly() {
        use turbojpeg::Subsamp;
        let mut report = Vec::new();
        let mut worst = 0u8;
        let mut cases = 0;
        for ss in [Subsamp::None, Subsamp::Sub2x1, Subsamp::Sub2x2, Subsamp::Sub1x2] {
            for &(w, h) in &SIZES {
                for content in [Content::Noise, Content::Gradient] {
                    let stream = compress(&image(content, w, h, (w * 1000 + h) as u64), w, h, ss, false);
                    let (_, dims) = decode_planes(&stream).expect("decode_planes");
                    let cd = chroma_dims(ss, w, h);
                    assert_eq!(dims, vec![(w, h), cd, cd], "{ss:?} {w}x{h}: plane sizes");
                    let (max, first) = compare(&ours(&stream, w, h, true), &reference(&stream), w);
                    worst = worst.max(max);
                    cases += 1;
                    if max != 0 {
                        report.push(format!("{ss:?} {w}x{h} {content:?}: max diff {max}, first at {first:?}"));
                    }
                }
            }
        }
        eprintln!("{cases} YCbCr streams, max abs diff {worst}");
        assert!(report.is_empty(), "planar → RGBA differs from libjpeg-turbo:\n{}", report.join("\n"));
    }

    /// Compress with the raw TurboJPEG API: any TJSAMP code (the crate's `Subsamp` lacks 4:1:1
    /// and 4:4:1), optionally progressive.
    fn compress_raw(rgb: &[u8], w: usize, h: usize, tjsamp: i32, progressive: bool) -> Vec<u8> {
        use turbojpeg::raw;
        // SAFETY: test-only FFI; the handle is destroyed and the buffer freed below, `rgb` holds
        // w × h RGB pixels.
        unsafe {
            let handle = raw::tj3Init(raw::TJINIT_TJINIT_COMPRESS as _);
            assert!(!handle.is_null());
            assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_QUALITY as _, 90), 0);
            assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_SUBSAMP as _, tjsamp), 0);
            assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_PROGRESSIVE as _, i32::from(progressive)), 0);
            let mut buf: *mut u8 = std::ptr::null_mut();
            let mut size = 0;
            let rc = raw::tj3Compress8(handle, rgb.as_ptr(), w as _, (w * 3) as _, h as _, raw::TJPF_TJPF_RGB as _, &mut buf, &mut size);
            assert_eq!(rc, 0, "tj3Compress8 failed");
            let out = std::slice::from_raw_parts(buf, size as usize).to_vec();
            raw::tj3Free(buf.cast());
            raw::tj3Destroy(handle);
            out
        }
    }

    #[test]
    fn other_subsamplings_and_progressive_match_libjpeg_turbo_exactly() {
        // 4:1:1 and 4:4:1 (ratio 4: libjpeg's box `int_upsample`), and progressive streams of
        // the four common subsamplings (same upsampling after a different entropy decoder).
        use turbojpeg::raw;
        let mut cases = vec![(raw::TJSAMP_TJSAMP_411, false), (raw::TJSAMP_TJSAMP_441, false)];
        for ss in [raw::TJSAMP_TJSAMP_444, raw::TJSAMP_TJSAMP_422, raw::TJSAMP_TJSAMP_420, raw::TJSAMP_TJSAMP_440] {
            cases.push((ss, true));
        }
        let mut report = Vec::new();
        let mut worst = 0u8;
        for (ss, progressive) in cases {
            for &(w, h) in &SIZES {
                let stream = compress_raw(&image(Content::Noise, w, h, (w * 31 + h) as u64), w, h, ss, progressive);
                let (max, first) = compare(&ours(&stream, w, h, true), &reference(&stream), w);
                worst = worst.max(max);
                if max != 0 {
                    report.push(format!("TJSAMP {ss} progressive {progressive} {w}x{h}: max diff {max}, first at {first:?}"));
                }
            }
        }
        eprintln!("4:1:1, 4:4:1 and progressive streams: max abs diff {worst}");
        assert!(report.is_empty(), "planar → RGBA differs from libjpeg-turbo:\n{}", report.join("\n"));
    }

    /// Drop the APPn markers and number the components 0, 1, 2 (as Aperio writes RGB-coded
    /// tiles), so that only the Adobe marker written by `splice` says "RGB".
    fn aperio_style(s: &[u8]) -> Vec<u8> {
        let mut out = vec![0xFF, 0xD8];
        let mut ids = Vec::new();
        let mut i = 2;
        while s[i + 1] != 0xDA {
            let (m, len) = (s[i + 1], usize::from(u16::from_be_bytes([s[i + 2], s[i + 3]])));
            let mut seg = s[i..i + 2 + len].to_vec();
            if m == 0xC0 || m == 0xC1 {
                for c in 0..usize::from(seg[9]) {
                    ids.push(seg[10 + c * 3]);
                    seg[10 + c * 3] = c as u8;
                }
            }
            if !(0xE0..=0xEF).contains(&m) {
                out.extend_from_slice(&seg);
            }
            i += 2 + len;
        }
        let mut tail = s[i..].to_vec();
        for c in 0..usize::from(tail[4]) {
            let id = tail[5 + c * 2];
            tail[5 + c * 2] = ids.iter().position(|&x| x == id).expect("SOS id in SOF") as u8;
        }
        out.extend_from_slice(&tail);
        out
    }

    #[test]
    fn planar_rgb_coded_is_a_plain_copy() {
        let mut report = Vec::new();
        let mut worst = 0u8;
        for &(w, h) in &SIZES {
            for content in [Content::Noise, Content::Gradient] {
                let coded = compress(&image(content, w, h, (w * 7 + h) as u64), w, h, turbojpeg::Subsamp::None, true);
                // libjpeg's own RGB stream (Adobe transform 0, ids 'R','G','B'), and the Aperio
                // form made RGB again by `splice` (our tile path).
                let mut spliced = Vec::new();
                splice(None, &aperio_style(&coded), JpegColor::Rgb, &mut spliced).expect("splice");
                for stream in [&coded, &spliced] {
                    let want = reference(stream);
                    let (max, first) = compare(&ours(stream, w, h, false), &want, w);
                    worst = worst.max(max);
                    if max != 0 {
                        report.push(format!("{w}x{h} {content:?}: max diff {max}, first at {first:?}"));
                    }
                    if w * h > 64 {
                        // The test means something: converting as YCbCr would be far off.
                        let (wrong, _) = compare(&ours(stream, w, h, true), &want, w);
                        assert!(wrong > 50, "{w}x{h} {content:?}: YCbCr conversion only {wrong} off");
                    }
                }
            }
        }
        eprintln!("RGB-coded streams: max abs diff {worst}");
        assert!(report.is_empty(), "RGB-coded planes differ from libjpeg-turbo:\n{}", report.join("\n"));
    }

    #[test]
    fn decode_planes_rejects_greyscale() {
        let grey = vec![100u8; 16 * 16];
        let img = turbojpeg::Image { pixels: &grey[..], width: 16, pitch: 16, height: 16, format: turbojpeg::PixelFormat::GRAY };
        let stream = turbojpeg::compress(img, 90, turbojpeg::Subsamp::Gray).expect("compress");
        assert!(decode_planes(&stream).is_err());
        assert!(decode_planes(&[0xFF, 0xD8, 0xFF, 0xD9]).is_err());
    }

    #[test]
    fn chroma_at_edges_replicate() {
        // 3×2 plane, 2×2 subsampling: corners of the 6×4 output equal the corner samples'
        // weighting with clamped neighbours; the outermost half-pixels of the first row use
        // only row 0 (context row above = row 0).
        let p = [10u8, 50, 90, 30, 70, 110];
        let v = |x, y| chroma_at(&p, 3, 3, 2, 2, 2, x, y);
        assert_eq!(v(0, 0), ((3 * 4 * 10 + 4 * 10 + 8) >> 4) as u8);
        assert_eq!(v(5, 3), ((3 * 4 * 110 + 4 * 110 + 7) >> 4) as u8);
        // pw <= 2: box filter.
        let q = [10u8, 200, 30, 40];
        assert_eq!(chroma_at(&q, 2, 2, 2, 2, 2, 1, 1), 10);
        assert_eq!(chroma_at(&q, 2, 2, 2, 2, 1, 2, 0), 200);
    }
}
