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

/// Decode a codestream into interleaved 8-bit samples (`components` per pixel, row-major).
/// Returns (width, height, components, samples).
///
/// # Errors
/// OpenJPEG's message, or a message for non-8-bit or mismatched components.
pub fn decode(stream: &[u8]) -> Result<(u32, u32, usize, Vec<u8>), String> {
    let img = jpeg2k::Image::from_bytes(stream).map_err(|e| format!("JPEG 2000 decode failed: {e}"))?;
    let comps = img.components();
    if comps.is_empty() {
        return Err("JPEG 2000 image without components".into());
    }
    let (w, h) = (comps[0].width(), comps[0].height());
    let n = comps.len();
    let mut out = vec![0u8; w as usize * h as usize * n];
    for (ci, c) in comps.iter().enumerate() {
        if c.width() != w || c.height() != h {
            return Err("JPEG 2000 components of different sizes (subsampled components are not read)".into());
        }
        if c.precision() != 8 || c.is_signed() {
            return Err(format!("JPEG 2000 component of {} bits", c.precision()));
        }
        for (i, &v) in c.data().iter().enumerate() {
            out[i * n + ci] = v.clamp(0, 255) as u8;
        }
    }
    Ok((w, h, n, out))
}

/// Convert interleaved YCbCr (ITU-R BT.601 full range, as JFIF) to RGB in place, with rounding
/// and clamping.
pub fn ycbcr_to_rgb(samples: &mut [u8], components: usize) {
    for px in samples.chunks_exact_mut(components) {
        let y = px[0] as f32;
        let cb = px[1] as f32 - 128.0;
        let cr = px[2] as f32 - 128.0;
        let r = y + 1.402 * cr;
        let g = y - 0.344_136 * cb - 0.714_136 * cr;
        let b = y + 1.772 * cb;
        px[0] = r.round().clamp(0.0, 255.0) as u8;
        px[1] = g.round().clamp(0.0, 255.0) as u8;
        px[2] = b.round().clamp(0.0, 255.0) as u8;
    }
}
