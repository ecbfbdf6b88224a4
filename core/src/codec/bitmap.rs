//! Whole-image tile codecs of MIRAX slides: PNG (the `png` crate) and 24-bit BMP (a small
//! reader of the one layout 3DHISTECH writes).
//!
//! Both decode to opaque RGB samples of exactly `width × height` pixels: OpenSlide paints MIRAX
//! images as cairo `RGB24` surfaces, so any alpha in a PNG is ignored (opaque), and an image
//! whose size is not the level's DIGITIZER size is an error, as OpenSlide's `_openslide_png_read`
//! and BMP decoder require the expected dimensions.
//!
//! BMP rules (OpenSlide 4.0.1's built-in BMP decoder, `openslide-decode-bmp.c`, as the issue-16
//! research notes record them; the layout is Microsoft's BITMAPFILEHEADER + BITMAPINFOHEADER):
//! `BM` signature, a 40-byte BITMAPINFOHEADER (no other header versions), 1 plane, 24 bits per
//! pixel, BI_RGB (no compression), no palette, positive height (bottom-up rows), BGR samples,
//! rows padded to a multiple of 4 bytes, image-size field 0 or exactly the padded size.

use crate::error::CodecError;

/// Largest PNG or BMP image edge accepted, in pixels (as [`crate::format::MAX_TILE_EDGE`]).
const MAX_EDGE: u32 = crate::limits::LIMITS.tile_edge as u32;

/// Decode a PNG stream to RGB samples (3 per pixel, rows `width × 3` bytes), converting grey,
/// palette and 16-bit images to 8-bit RGB (16-bit samples keep their high byte) and dropping
/// alpha. Returns (width, height, samples); `check` sees (width, height) before any pixel
/// buffer is allocated.
///
/// # Errors
/// [`CodecError::Data`] for a damaged stream; whatever `check` returns.
pub fn decode_png(data: &[u8], check: impl FnOnce(u32, u32) -> Result<(), CodecError>) -> Result<(u32, u32, Vec<u8>), CodecError> {
    let err = |e: png::DecodingError| CodecError::Data(format!("PNG: {e}"));
    let mut dec = png::Decoder::new(std::io::Cursor::new(data));
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec.read_info().map_err(err)?;
    let (w, h) = (reader.info().width, reader.info().height);
    if w > MAX_EDGE || h > MAX_EDGE {
        return Err(CodecError::Data(format!("PNG of {w}x{h} pixels exceeds {MAX_EDGE} per edge")));
    }
    check(w, h)?;
    let size = reader.output_buffer_size().ok_or_else(|| CodecError::Data("PNG output size overflows".into()))?;
    let mut buf = vec![0u8; size];
    let frame = reader.next_frame(&mut buf).map_err(err)?;
    let n = frame.color_type.samples();
    let stride = frame.line_size;
    let mut rgb = Vec::with_capacity(w as usize * h as usize * 3);
    for row in buf.chunks(stride).take(h as usize) {
        for px in row[..w as usize * n].chunks_exact(n) {
            match n {
                1 | 2 => rgb.extend_from_slice(&[px[0], px[0], px[0]]),
                _ => rgb.extend_from_slice(&px[..3]),
            }
        }
    }
    if rgb.len() != w as usize * h as usize * 3 {
        return Err(CodecError::Data("PNG: short image data".into()));
    }
    Ok((w, h, rgb))
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Decode a 24-bit BMP (rules in the module docs) to RGB samples (3 per pixel, top row first).
/// Returns (width, height, samples); `check` sees (width, height) before the pixel buffer is
/// allocated.
///
/// # Errors
/// [`CodecError::Data`] naming the rule a file breaks, or data shorter than the rows need;
/// whatever `check` returns.
pub fn decode_bmp24(data: &[u8], check: impl FnOnce(u32, u32) -> Result<(), CodecError>) -> Result<(u32, u32, Vec<u8>), CodecError> {
    let bad = |m: String| CodecError::Data(format!("BMP: {m}"));
    if data.len() < 54 || &data[..2] != b"BM" {
        return Err(bad("no BM header".into()));
    }
    let off_bits = le_u32(data, 10) as usize;
    let header_size = le_u32(data, 14);
    if header_size != 40 {
        return Err(bad(format!("header of {header_size} bytes (only the 40-byte BITMAPINFOHEADER is read)")));
    }
    let width = le_u32(data, 18) as i32;
    let height = le_u32(data, 22) as i32;
    let (planes, bpp, compression, image_size, colors) = (le_u16(data, 26), le_u16(data, 28), le_u32(data, 30), le_u32(data, 34), le_u32(data, 46));
    if planes != 1 || bpp != 24 {
        return Err(bad(format!("{planes} planes of {bpp} bits per pixel (only 1 plane of 24 bits is read)")));
    }
    if compression != 0 {
        return Err(bad(format!("compression {compression} (only BI_RGB is read)")));
    }
    if colors != 0 {
        return Err(bad(format!("a palette of {colors} colours in a 24-bit image")));
    }
    if width <= 0 || height <= 0 {
        return Err(bad(format!("{width}x{height} pixels (top-down or empty images are not read)")));
    }
    let (w, h) = (width as u32, height as u32);
    if w > MAX_EDGE || h > MAX_EDGE {
        return Err(bad(format!("{w}x{h} pixels exceeds {MAX_EDGE} per edge")));
    }
    check(w, h)?;
    let stride = (w as usize * 3).div_ceil(4) * 4;
    let need = stride * h as usize;
    if image_size != 0 && image_size as usize != need {
        return Err(bad(format!("image size field {image_size}, the rows take {need} bytes")));
    }
    if off_bits < 54 || off_bits.checked_add(need).is_none_or(|e| e > data.len()) {
        return Err(bad(format!("pixel data at {off_bits} (+{need} bytes) lies outside the {} bytes read", data.len())));
    }
    let pixels = &data[off_bits..off_bits + need];
    let mut rgb = Vec::with_capacity(w as usize * h as usize * 3);
    for row in pixels.chunks_exact(stride).rev() {
        for px in row[..w as usize * 3].chunks_exact(3) {
            rgb.extend_from_slice(&[px[2], px[1], px[0]]);
        }
    }
    Ok((w, h, rgb))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BMP24 of `w × h` whose pixel (x, y) is (x, y, x + y) as RGB.
    pub(crate) fn bmp(w: u32, h: u32) -> Vec<u8> {
        let stride = (w as usize * 3).div_ceil(4) * 4;
        let mut v = Vec::new();
        v.extend_from_slice(b"BM");
        v.extend_from_slice(&((54 + stride * h as usize) as u32).to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(&54u32.to_le_bytes());
        v.extend_from_slice(&40u32.to_le_bytes());
        v.extend_from_slice(&(w as i32).to_le_bytes());
        v.extend_from_slice(&(h as i32).to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&24u16.to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(&((stride * h as usize) as u32).to_le_bytes());
        v.extend_from_slice(&[0; 16]);
        for y in (0..h).rev() {
            let mut row: Vec<u8> = (0..w).flat_map(|x| [(x + y) as u8, y as u8, x as u8]).collect();
            row.resize(stride, 0);
            v.extend_from_slice(&row);
        }
        v
    }

    #[test]
    fn bmp24_rows_are_bottom_up_bgr_and_padded() {
        let (w, h, rgb) = decode_bmp24(&bmp(5, 3), |_, _| Ok(())).unwrap();
        assert_eq!((w, h), (5, 3));
        let px = |x: usize, y: usize| &rgb[(y * 5 + x) * 3..(y * 5 + x) * 3 + 3];
        assert_eq!(px(0, 0), &[0, 0, 0]);
        assert_eq!(px(4, 2), &[4, 2, 6]);
        assert_eq!(px(1, 2), &[1, 2, 3]);
    }

    #[test]
    fn bad_bmps_are_refused_with_the_rule() {
        let ok = bmp(5, 3);
        let with = |at: usize, bytes: &[u8]| {
            let mut v = ok.clone();
            v[at..at + bytes.len()].copy_from_slice(bytes);
            decode_bmp24(&v, |_, _| Ok(())).unwrap_err().to_string()
        };
        assert!(with(0, b"XX").contains("BM"));
        assert!(with(14, &108u32.to_le_bytes()).contains("BITMAPINFOHEADER"));
        assert!(with(28, &32u16.to_le_bytes()).contains("24 bits"));
        assert!(with(30, &1u32.to_le_bytes()).contains("BI_RGB"));
        assert!(with(46, &2u32.to_le_bytes()).contains("palette"));
        assert!(with(22, &(-3i32).to_le_bytes()).contains("top-down"));
        assert!(with(34, &7u32.to_le_bytes()).contains("image size"));
        assert!(with(18, &100_000u32.to_le_bytes()).contains("exceeds"));
        assert!(decode_bmp24(&ok[..ok.len() - 1], |_, _| Ok(())).unwrap_err().to_string().contains("outside"));
        assert!(decode_bmp24(&ok[..20], |_, _| Ok(())).is_err());
        let size = decode_bmp24(&ok, |w, _| if w == 5 { Err(CodecError::Data("size".into())) } else { Ok(()) });
        assert!(size.unwrap_err().to_string().contains("size"), "the size check runs before decoding");
    }

    #[test]
    fn png_decodes_to_rgb_and_refuses_damage() {
        let mut enc_out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut enc_out, 3, 2);
            enc.set_color(png::ColorType::Rgba);
            enc.set_depth(png::BitDepth::Eight);
            let mut wr = enc.write_header().unwrap();
            let data: Vec<u8> = (0..6u8).flat_map(|i| [i, i * 2, i * 3, 7]).collect();
            wr.write_image_data(&data).unwrap();
        }
        let (w, h, rgb) = decode_png(&enc_out, |_, _| Ok(())).unwrap();
        assert_eq!((w, h), (3, 2));
        assert_eq!(&rgb[15..18], &[5, 10, 15], "alpha dropped");
        assert!(decode_png(&enc_out[..enc_out.len() / 2], |_, _| Ok(())).is_err());
        assert!(decode_png(b"not a png", |_, _| Ok(())).is_err());
    }
}
