//! JPEG 2000 tiles (Aperio 33003 / 33005) with OpenJPEG through the `jpeg2k` crate.
//!
//! Aperio stores raw J2K codestreams per tile. 33005 holds RGB components; 33003 holds YCbCr
//! components that need converting to RGB (OpenSlide's `openslide-decode-jp2k.c` does the same
//! after decoding). Before OpenJPEG allocates anything, the SIZ marker is parsed here and its
//! image size checked against the tile size.

/// Image size and component count from a J2K codestream's SIZ marker (ISO/IEC 15444-1 A.5.1).
///
/// # Errors
/// A message when the stream does not start with SOC + SIZ.
pub fn siz(stream: &[u8]) -> Result<(u32, u32, u16), String> {
    let be32 = |o: usize| u32::from_be_bytes([stream[o], stream[o + 1], stream[o + 2], stream[o + 3]]);
    if stream.len() < 42 || stream[..4] != [0xFF, 0x4F, 0xFF, 0x51] {
        return Err("not a JPEG 2000 codestream (no SOC/SIZ marker)".into());
    }
    let (xsiz, ysiz, xo, yo) = (be32(8), be32(12), be32(16), be32(20));
    let csiz = u16::from_be_bytes([stream[40], stream[41]]);
    if xsiz <= xo || ysiz <= yo {
        return Err(format!("JPEG 2000 SIZ with empty image ({xsiz}x{ysiz} at {xo},{yo})"));
    }
    Ok((xsiz - xo, ysiz - yo, csiz))
}

/// Most tiles a codestream may declare. OpenJPEG allocates coding parameters for every tile
/// and component from SIZ alone (about 4 KB + 1 KB per component each; the J2K limit of 65535
/// tiles costs ~0.5 GB from a 50-byte header). Aperio writes one J2K tile per TIFF tile.
pub(crate) const MAX_TILES: u64 = crate::limits::LIMITS.j2k_tiles;

/// The number of tiles the SIZ marker of a codestream declares (call after [`siz`] succeeded).
///
/// # Errors
/// A message for a zero tile size or a tile origin past the image origin.
pub(crate) fn tile_count(stream: &[u8]) -> Result<u64, String> {
    let be32 = |o: usize| u32::from_be_bytes([stream[o], stream[o + 1], stream[o + 2], stream[o + 3]]) as u64;
    let (xsiz, ysiz, xo, yo) = (be32(8), be32(12), be32(16), be32(20));
    let (xt, yt, xto, yto) = (be32(24), be32(28), be32(32), be32(36));
    if xt == 0 || yt == 0 || xto > xo || yto > yo {
        return Err(format!("JPEG 2000 SIZ with tiles of {xt}x{yt} at {xto},{yto}"));
    }
    Ok((xsiz - xto).div_ceil(xt).saturating_mul((ysiz - yto).div_ceil(yt)))
}

/// Decode a codestream into interleaved 8-bit samples (`components` per pixel, row-major).
/// Returns (width, height, components, samples).
///
/// # Errors
/// OpenJPEG's message, or a message for non-8-bit or mismatched components.
pub fn decode(stream: &[u8]) -> Result<(u32, u32, usize, Vec<u8>), String> {
    match decode_samples(stream, false)? {
        (w, h, n, super::Samples::U8(v)) => Ok((w, h, n, v)),
        _ => Err("JPEG 2000 component of more than 8 bits".into()),
    }
}

/// Decode a codestream into interleaved samples (`components` per pixel, row-major): 8-bit
/// components as [`super::Samples::U8`]; with `wide`, components of 9 to 16 bits (unsigned) as
/// [`super::Samples::U16`] holding the decoded values unscaled (as a 16-bit TIFF holds them;
/// the Olympus ETS files store 16-bit fluorescence so). Returns (width, height, components,
/// samples).
///
/// # Errors
/// OpenJPEG's message, or a message for signed, deeper than accepted, or mismatched
/// components.
pub fn decode_samples(stream: &[u8], wide: bool) -> Result<(u32, u32, usize, super::Samples), String> {
    let img = jpeg2k::Image::from_bytes(stream).map_err(|e| format!("JPEG 2000 decode failed: {e}"))?;
    let comps = img.components();
    if comps.is_empty() {
        return Err("JPEG 2000 image without components".into());
    }
    let (w, h) = (comps[0].width(), comps[0].height());
    let n = comps.len();
    let bits = comps[0].precision();
    let max_bits = if wide { 16 } else { 8 };
    for c in comps {
        if c.width() != w || c.height() != h {
            return Err("JPEG 2000 components of different sizes (subsampled components are not read)".into());
        }
        if c.precision() != bits || c.precision() > max_bits || c.precision() == 0 || c.is_signed() {
            return Err(format!("JPEG 2000 component of {} bits{}", c.precision(), if c.is_signed() { ", signed" } else { "" }));
        }
    }
    let len = w as usize * h as usize * n;
    if bits <= 8 && !wide {
        let mut out = vec![0u8; len];
        for (ci, c) in comps.iter().enumerate() {
            for (i, &v) in c.data().iter().enumerate() {
                out[i * n + ci] = v.clamp(0, 255) as u8;
            }
        }
        return Ok((w, h, n, super::Samples::U8(out)));
    }
    let max = ((1u32 << bits) - 1) as i32;
    let mut out = vec![0u16; len];
    for (ci, c) in comps.iter().enumerate() {
        for (i, &v) in c.data().iter().enumerate() {
            out[i * n + ci] = v.clamp(0, max) as u16;
        }
    }
    Ok((w, h, n, super::Samples::U16(out)))
}

/// Convert interleaved YCbCr (ITU-R BT.601 full range) to RGB in place, with OpenSlide's
/// integer tables (`make-tables.c`, `openslide-decode-jp2k.c`) so 33003 tiles match it bit for
/// bit: R = Y + round(1.402 (Cr−128)), B = Y + round(1.772 (Cb−128)),
/// G = Y + ((round(65536 (0.5 − 0.34414 (Cb−128))) + round(65536 (−0.71414 (Cr−128)))) >> 16),
/// each clamped to 0..=255.
pub fn ycbcr_to_rgb(samples: &mut [u8], components: usize) {
    static TABLES: std::sync::OnceLock<[[i32; 256]; 4]> = std::sync::OnceLock::new();
    let t = TABLES.get_or_init(|| {
        let mut t = [[0i32; 256]; 4];
        for (i, c) in (0..256).map(|i| (i, i as f64 - 128.0)) {
            t[0][i] = (1.402 * c).round() as i32; // R from Cr
            t[1][i] = (1.772 * c).round() as i32; // B from Cb
            t[2][i] = (65536.0 * (0.5 - 0.34414 * c)).round() as i32; // G from Cb
            t[3][i] = (65536.0 * (-0.71414 * c)).round() as i32; // G from Cr
        }
        t
    });
    for px in samples.chunks_exact_mut(components) {
        let (y, cb, cr) = (px[0] as i32, px[1] as usize, px[2] as usize);
        px[0] = (y + t[0][cr]).clamp(0, 255) as u8;
        px[1] = (y + ((t[2][cb] + t[3][cr]) >> 16)).clamp(0, 255) as u8;
        px[2] = (y + t[1][cb]).clamp(0, 255) as u8;
    }
}
