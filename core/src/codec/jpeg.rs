//! JPEG tiles on the CPU with libjpeg-turbo (TurboJPEG 3 API through `turbojpeg::raw`).
//!
//! TIFF JPEG (Compression 7, TIFF Technical Note 2): tiles may be "abbreviated", holding only
//! the scan while the quantisation and Huffman tables live in the JPEGTables tag (347). We splice
//! the tables into each tile's stream. The colour transform is decided by the TIFF
//! PhotometricInterpretation alone: libjpeg otherwise guesses from markers and component ids
//! (`jdapimin.c`, `default_decompress_parms`) and treats Aperio's RGB-coded tiles (ids 0,1,2,
//! no Adobe marker) as YCbCr, which gives wrong colours without any error. The splice drops
//! any JFIF (APP0) / Adobe (APP14) markers of the tile and writes an Adobe APP14 marker whose
//! transform flag says what the photometric tag says (0 = RGB, 1 = YCbCr); libjpeg honours it.
//! Subsampling comes from the SOF sampling factors.

use std::cell::RefCell;
use std::ffi::CStr;

use turbojpeg::raw;

use super::jpeg_scans::{backstop_mib, check_scans, MAX_SCANS};
use crate::error::CodecError;

/// JPEG colour coding decided by the TIFF photometric tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JpegColor {
    /// Components are R, G, B: no colour transform.
    Rgb,
    /// Components are Y, Cb, Cr: convert to RGB.
    YCbCr,
    /// One component.
    Gray,
}

const SOI: [u8; 2] = [0xFF, 0xD8];

/// Build a complete JPEG stream from the JPEGTables tag (if any) and one tile's bytes, with an
/// Adobe APP14 marker stating the colour transform.
///
/// # Errors
/// [`CodecError::Data`] when the tile does not start with SOI or its marker segments are
/// malformed.
pub fn splice(tables: Option<&[u8]>, tile: &[u8], color: JpegColor, out: &mut Vec<u8>) -> Result<(), CodecError> {
    if tile.len() < 4 || tile[..2] != SOI {
        let head: Vec<String> = tile.iter().take(2).map(|b| format!("0x{b:02X}")).collect();
        return Err(format!("not a JPEG stream (starts with {} instead of 0xFF 0xD8)", head.join(" ")).into());
    }
    out.clear();
    out.reserve(tile.len() + tables.map_or(0, |t| t.len()) + 16);
    out.extend_from_slice(&SOI);
    let transform = match color {
        JpegColor::Rgb => Some(0u8),
        JpegColor::YCbCr => Some(1u8),
        JpegColor::Gray => None,
    };
    if let Some(t) = transform {
        out.extend_from_slice(&[0xFF, 0xEE, 0x00, 0x0E, b'A', b'd', b'o', b'b', b'e', 0x00, 0x64, 0, 0, 0, 0, t]);
    }
    if let Some(tables) = tables {
        if tables.len() >= 4 && tables[..2] == SOI {
            let mut body = &tables[2..];
            if body.ends_with(&[0xFF, 0xD9]) {
                body = &body[..body.len() - 2];
            }
            out.extend_from_slice(body);
        } else if !tables.is_empty() {
            return Err("JPEGTables does not start with SOI".into());
        }
    }
    // Copy the tile's segments after SOI, dropping APP0 (JFIF) and APP14 (Adobe); from SOS on,
    // copy verbatim.
    let mut i = 2;
    loop {
        // skip fill bytes
        while i < tile.len() && tile[i] == 0xFF && tile.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        if i + 4 > tile.len() || tile[i] != 0xFF {
            return Err(format!("malformed JPEG marker at byte {i}").into());
        }
        let marker = tile[i + 1];
        if marker == 0xDA || marker == 0xD9 {
            out.extend_from_slice(&tile[i..]);
            return Ok(());
        }
        let len = u16::from_be_bytes([tile[i + 2], tile[i + 3]]) as usize;
        if len < 2 || i + 2 + len > tile.len() {
            return Err(format!("JPEG marker 0xFF{marker:02X} at byte {i} has bad length {len}").into());
        }
        if marker != 0xE0 && marker != 0xEE {
            out.extend_from_slice(&tile[i..i + 2 + len]);
        }
        i += 2 + len;
    }
}

struct Handle(raw::tjhandle);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from tj3Init and is destroyed once.
        unsafe { raw::tj3Destroy(self.0) }
    }
}

impl Handle {
    fn new() -> Result<Handle, CodecError> {
        // SAFETY: plain FFI constructor; null is checked.
        let h = unsafe { raw::tj3Init(raw::TJINIT_TJINIT_DECOMPRESS as libc_int) };
        if h.is_null() {
            return Err("tj3Init failed".into());
        }
        let handle = Handle(h);
        // Warnings (e.g. premature end of data) are errors: never return filler pixels.
        // SAFETY: valid handle.
        unsafe { raw::tj3Set(h, raw::TJPARAM_TJPARAM_STOPONWARNING as libc_int, 1) };
        // Backstops for `jpeg_scans::check_scans`, which refuses such streams first.
        // SAFETY: valid handle.
        unsafe {
            raw::tj3Set(h, raw::TJPARAM_TJPARAM_SCANLIMIT as libc_int, MAX_SCANS as libc_int);
            raw::tj3Set(h, raw::TJPARAM_TJPARAM_MAXMEMORY as libc_int, backstop_mib());
        }
        Ok(handle)
    }

    fn error(&self) -> CodecError {
        // SAFETY: valid handle; the returned string is owned by libjpeg-turbo.
        let msg = unsafe { CStr::from_ptr(raw::tj3GetErrorStr(self.0)) };
        CodecError::Data(msg.to_string_lossy().into_owned())
    }
}

#[allow(non_camel_case_types)]
type libc_int = std::os::raw::c_int;

thread_local! {
    static HANDLE: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

fn with_handle<T>(f: impl FnOnce(&Handle) -> Result<T, CodecError>) -> Result<T, CodecError> {
    HANDLE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Handle::new()?);
        }
        f(slot.as_ref().expect("handle initialised above"))
    })
}

/// Dimensions of a JPEG stream, from its SOF (via `tj3DecompressHeader`), and its scan
/// structure ([`check_scans`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegHeader {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// TurboJPEG subsampling code (TJSAMP_*; -1 unknown).
    pub subsamp: i32,
    /// `true` for multi-scan (progressive or non-interleaved) streams: libjpeg-turbo
    /// entropy-decodes every scan of the whole image before the first output row, so
    /// decoding part of such a tile costs as much as the whole.
    pub multi_scan: bool,
    /// `true` for a stream coded in RGB (TurboJPEG's `TJCS_RGB`: an Adobe marker with
    /// transform 0, as Aperio's RGB tiles), which is decoded to RGBA without a YCbCr transform.
    pub rgb_coded: bool,
}

/// A sub-rectangle to decode, in pixels of the JPEG image. `x` and `width` are widened by the
/// decoder to iMCU boundaries; see [`decode_rgba`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crop {
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

/// Read the header of a complete JPEG stream and check its scans.
///
/// # Errors
/// libjpeg-turbo's message; [`CodecError::TooManyScans`] or [`CodecError::DecoderMemory`] for
/// multi-scan streams over the limits of [`super::jpeg_scans`].
pub fn read_header(stream: &[u8]) -> Result<JpegHeader, CodecError> {
    with_handle(|h| header_with(h, stream))
}

fn header_with(h: &Handle, stream: &[u8]) -> Result<JpegHeader, CodecError> {
    // SAFETY: valid handle; buffer pointer/len from a slice.
    let rc = unsafe { raw::tj3DecompressHeader(h.0, stream.as_ptr(), stream.len() as _) };
    if rc != 0 {
        return Err(h.error());
    }
    // SAFETY: valid handle.
    let (w, hgt, ss, prec, cs) = unsafe {
        (
            raw::tj3Get(h.0, raw::TJPARAM_TJPARAM_JPEGWIDTH as libc_int),
            raw::tj3Get(h.0, raw::TJPARAM_TJPARAM_JPEGHEIGHT as libc_int),
            raw::tj3Get(h.0, raw::TJPARAM_TJPARAM_SUBSAMP as libc_int),
            raw::tj3Get(h.0, raw::TJPARAM_TJPARAM_PRECISION as libc_int),
            raw::tj3Get(h.0, raw::TJPARAM_TJPARAM_COLORSPACE as libc_int),
        )
    };
    if prec != 8 {
        return Err(format!("{prec}-bit JPEG (only 8-bit is read)").into());
    }
    if w <= 0 || hgt <= 0 {
        return Err(format!("JPEG of size {w}x{hgt}").into());
    }
    let scans = check_scans(stream)?;
    Ok(JpegHeader { width: w as u32, height: hgt as u32, subsamp: ss, multi_scan: scans.multi_scan, rgb_coded: cs == raw::TJCS_TJCS_RGB as libc_int })
}

/// iMCU width and height in pixels for a TurboJPEG subsampling code.
pub fn mcu_size(subsamp: i32) -> Option<(u32, u32)> {
    Some(match subsamp {
        0 | 3 => (8, 8),
        1 => (16, 8),
        2 => (16, 16),
        4 => (8, 16),
        5 => (32, 8),
        6 => (8, 32),
        _ => return None,
    })
}

/// Decode `stream` to RGBA (alpha 255) into `dst`, rows `pitch` bytes apart.
///
/// Without `crop`, the whole image is decoded and `dst` must hold `pitch × height` bytes.
/// With `crop`, only that rectangle gets the inverse DCT: libjpeg-turbo entropy-decodes the
/// rows above and below without output (to the end of the scan, [`super::jpeg_part`]) and
/// decodes only the iMCU columns covering it; `crop.x` must be a multiple of the iMCU width
/// and `dst` receives `crop.width × crop.height` pixels.
///
/// `check` sees the header before any pixel work and may refuse the stream (size limits).
///
/// # Errors
/// libjpeg-turbo's message (corrupt data, warnings included), or `check`'s.
pub fn decode_rgba(
    stream: &[u8],
    crop: Option<Crop>,
    dst: &mut Vec<u8>,
    check: impl FnOnce(&JpegHeader) -> Result<(), CodecError>,
) -> Result<JpegHeader, CodecError> {
    decode_rgba_with(stream, crop, dst, check, true)
}

/// [`decode_rgba`] for a stream already known to decode whole without error: a crop is
/// decoded with TurboJPEG's cropping region, which leaves the rows below the crop unread (its
/// pixels equal the whole decode's; damage below it would go unseen, hence the precondition).
///
/// # Errors
/// As [`decode_rgba`].
pub fn decode_rgba_known_good(
    stream: &[u8],
    crop: Option<Crop>,
    dst: &mut Vec<u8>,
    check: impl FnOnce(&JpegHeader) -> Result<(), CodecError>,
) -> Result<JpegHeader, CodecError> {
    decode_rgba_with(stream, crop, dst, check, false)
}

fn decode_rgba_with(
    stream: &[u8],
    crop: Option<Crop>,
    dst: &mut Vec<u8>,
    check: impl FnOnce(&JpegHeader) -> Result<(), CodecError>,
    full_scan: bool,
) -> Result<JpegHeader, CodecError> {
    with_handle(|h| {
        let hdr = header_with(h, stream)?;
        check(&hdr)?;
        check_crop(&hdr, crop)?;
        let (w, hh) = out_size(&hdr, crop);
        dst.clear();
        dst.resize(w as usize * 4 * hh as usize, 0);
        decompress_with(h, Some(&hdr), stream, crop, dst, w, full_scan)?;
        Ok(hdr)
    })
}

/// Decode `stream` to RGBA (alpha 255) straight into the caller's buffer `dst` (no allocation),
/// rows `4 × width` bytes apart where width is the crop's or the image's.
///
/// `plan` sees the header before any pixel work; it may refuse the stream (size limits) or
/// choose a crop (as in [`decode_rgba`]: `x` a multiple of the iMCU width). Returns the header
/// and the crop used.
///
/// # Errors
/// libjpeg-turbo's message, `plan`'s, or a message when `dst` is shorter than the decoded
/// pixels (`width × height × 4` bytes); nothing is written then.
pub fn decode_rgba_into(
    stream: &[u8],
    dst: &mut [u8],
    plan: impl FnOnce(&JpegHeader) -> Result<Option<Crop>, CodecError>,
) -> Result<(JpegHeader, Option<Crop>), CodecError> {
    with_handle(|h| {
        let hdr = header_with(h, stream)?;
        let crop = plan(&hdr)?;
        check_crop(&hdr, crop)?;
        let (w, hh) = out_size(&hdr, crop);
        let need = w as usize * 4 * hh as usize;
        if dst.len() < need {
            return Err(CodecError::BufferTooSmall { have: dst.len(), need, width: w, height: hh });
        }
        decompress_with(h, Some(&hdr), stream, crop, &mut dst[..need], w, true)?;
        Ok((hdr, crop))
    })
}

/// A crop must be non-empty and inside the image: TurboJPEG reads a zero width or height as "to
/// the image edge", which would decode more rows or columns than the buffer was sized for.
pub(crate) fn check_crop(hdr: &JpegHeader, crop: Option<Crop>) -> Result<(), CodecError> {
    match crop {
        Some(c) if c.width == 0 || c.height == 0 || c.x.checked_add(c.width).is_none_or(|e| e > hdr.width) || c.y.checked_add(c.height).is_none_or(|e| e > hdr.height) => {
            Err(format!("crop {}x{} at ({}, {}) is empty or outside the {}x{} image", c.width, c.height, c.x, c.y, hdr.width, hdr.height).into())
        }
        _ => Ok(()),
    }
}

/// Pixel size of the decoded output: the crop's or the whole image's.
fn out_size(hdr: &JpegHeader, crop: Option<Crop>) -> (u32, u32) {
    match crop {
        Some(c) => (c.width, c.height),
        None => (hdr.width, hdr.height),
    }
}

/// Decompress into `dst`, which holds exactly `width × 4 × rows` bytes: the whole image with
/// TurboJPEG (the header was read on `h` just before), a crop with [`super::jpeg_part`]
/// (`full_scan`) or TurboJPEG's cropping region. A single-scan RGB-coded stream goes through
/// [`super::jpeg_part`] in every case (its RGB-to-RGBA conversion is SIMD, TurboJPEG's a C
/// loop): a whole image as a crop of all of it, read to EOI. `hdr` is `None` for a scaled
/// decode, which stays with TurboJPEG.
fn decompress_with(h: &Handle, hdr: Option<&JpegHeader>, stream: &[u8], crop: Option<Crop>, dst: &mut [u8], width: u32, full_scan: bool) -> Result<(), CodecError> {
    let rgb_part = hdr.filter(|hd| hd.rgb_coded && !hd.multi_scan);
    let region = match (crop, rgb_part) {
        // Not TurboJPEG's cropping region, which leaves the scan below the crop unread.
        (Some(c), _) if full_scan => return super::jpeg_part::decode_part(stream, c, dst),
        (Some(c), Some(_)) => return super::jpeg_part::decode_part_known_good(stream, c, dst),
        (None, Some(hd)) => {
            let whole = Crop { x: 0, y: 0, width: hd.width, height: hd.height };
            return super::jpeg_part::decode_part(stream, whole, dst);
        }
        (Some(c), None) => raw::tjregion { x: c.x as _, y: c.y as _, w: c.width as _, h: c.height as _ },
        (None, None) => raw::tjregion { x: 0, y: 0, w: 0, h: 0 },
    };
    // SAFETY: valid handle, header read just before.
    if unsafe { raw::tj3SetCroppingRegion(h.0, region) } != 0 {
        return Err(h.error());
    }
    let pitch = width as usize * 4;
    // SAFETY: dst holds pitch × rows bytes as TurboJPEG requires for this region.
    let rc = unsafe { raw::tj3Decompress8(h.0, stream.as_ptr(), stream.len() as _, dst.as_mut_ptr(), pitch as _, raw::TJPF_TJPF_RGBA as _) };
    if rc != 0 {
        return Err(h.error());
    }
    Ok(())
}

/// Decode `stream` to RGBA (alpha 255) scaled by 1/`denom` (`denom` ∈ {1, 2, 4, 8}) into `dst`:
/// libjpeg-turbo's DCT scaling (TurboJPEG `tj3SetScalingFactor`), which computes each output
/// pixel from the low-frequency coefficients of its block (at 1/8, the block's DC term: its
/// mean) and so skips most of the inverse DCT, the upsampling and the colour conversion of a
/// full decode; entropy decoding is unchanged. The output is `ceil(width / denom) ×
/// ceil(height / denom)` pixels (TurboJPEG's `TJSCALED`), rows `4 × that width` bytes apart.
///
/// `check` sees the header first and may refuse the stream. The handle's scaling factor is
/// reset to 1/1 afterwards, also on error.
///
/// # Errors
/// libjpeg-turbo's message; `check`'s; a message for another `denom`.
pub fn decode_rgba_scaled(
    stream: &[u8],
    denom: u32,
    dst: &mut Vec<u8>,
    check: impl FnOnce(&JpegHeader) -> Result<(), CodecError>,
) -> Result<(JpegHeader, u32, u32), CodecError> {
    if !matches!(denom, 1 | 2 | 4 | 8) {
        return Err(format!("JPEG scaling 1/{denom} (1, 2, 4 or 8)").into());
    }
    with_handle(|h| {
        let hdr = header_with(h, stream)?;
        check(&hdr)?;
        let (w, hh) = (hdr.width.div_ceil(denom), hdr.height.div_ceil(denom));
        dst.clear();
        dst.resize(w as usize * 4 * hh as usize, 0);
        struct Reset<'a>(&'a Handle);
        impl Drop for Reset<'_> {
            fn drop(&mut self) {
                // SAFETY: valid handle; 1/1 is always a supported factor.
                unsafe { raw::tj3SetScalingFactor(self.0 .0, raw::tjscalingfactor { num: 1, denom: 1 }) };
            }
        }
        let _reset = Reset(h);
        // SAFETY: valid handle, header read just above.
        if unsafe { raw::tj3SetScalingFactor(h.0, raw::tjscalingfactor { num: 1, denom: denom as libc_int }) } != 0 {
            return Err(h.error());
        }
        decompress_with(h, None, stream, None, dst, w, false)?;
        Ok((hdr, w, hh))
    })
}

/// Component planes of a JPEG, as [`decode_planes`] returns them: the samples of each
/// component (row-major, unpadded) and its (width, height).
pub type ComponentPlanes = (Vec<Vec<u8>>, Vec<(usize, usize)>);

/// Decode a complete 3-component JPEG stream to its component planes exactly as coded: no
/// chroma upsampling and no colour conversion (TurboJPEG `tj3DecompressToYUVPlanes8`, i.e.
/// libjpeg's raw-data output, with the same inverse DCT as [`decode_rgba`]).
///
/// Returns `(planes, dims)`: `planes[c]` holds `dims[c].0 × dims[c].1` samples, row-major, rows
/// `dims[c].0` bytes apart (TurboJPEG's padded planes are cropped). `dims[c]` is libjpeg's
/// `downsampled_width × downsampled_height` of component `c`, `ceil(image_size × samp_factor /
/// max_samp_factor)`, which is also what nvJPEG's `nvjpegGetImageInfo` reports. Components are
/// in stream order: Y, Cb, Cr for YCbCr streams, R, G, B for RGB-coded ones.
///
/// # Errors
/// libjpeg-turbo's message (corrupt data, warnings included), or a message for streams that are
/// not 3-component YCbCr/RGB or whose sampling factors TurboJPEG does not recognise.
pub fn decode_planes(stream: &[u8]) -> Result<ComponentPlanes, CodecError> {
    with_handle(|h| {
        let hdr = header_with(h, stream)?;
        // SAFETY: valid handle, header read just above.
        let colorspace = unsafe { raw::tj3Get(h.0, raw::TJPARAM_TJPARAM_COLORSPACE as libc_int) };
        if colorspace != raw::TJCS_TJCS_YCbCr as libc_int && colorspace != raw::TJCS_TJCS_RGB as libc_int {
            return Err(format!("planar decoding needs a 3-component YCbCr or RGB JPEG (TurboJPEG colour space {colorspace})").into());
        }
        let ss = hdr.subsamp;
        let Some((mcu_w, mcu_h)) = mcu_size(ss).filter(|_| ss != raw::TJSAMP_TJSAMP_GRAY) else {
            return Err(format!("planar decoding: unsupported chroma subsampling (TurboJPEG code {ss})").into());
        };
        let (w, hgt) = (hdr.width as usize, hdr.height as usize);
        // Horizontal and vertical ratio of luma to chroma sampling.
        let (rh, rv) = (mcu_w as usize / 8, mcu_h as usize / 8);
        let dims = vec![(w, hgt), (w.div_ceil(rh), hgt.div_ceil(rv)), (w.div_ceil(rh), hgt.div_ceil(rv))];
        // TurboJPEG's plane sizes: the luma plane is padded to the iMCU's sampling ratio
        // (e.g. an even width for 4:2:2), the chroma planes are exactly `dims`.
        let mut padded = Vec::with_capacity(3);
        for c in 0..3 {
            // SAFETY: plain functions of their integer arguments.
            let (pw, ph) = unsafe { (raw::tj3YUVPlaneWidth(c, w as libc_int, ss), raw::tj3YUVPlaneHeight(c, hgt as libc_int, ss)) };
            let (pw, ph) = (usize::try_from(pw).unwrap_or(0), usize::try_from(ph).unwrap_or(0));
            let (dw, dh) = dims[c as usize];
            if pw < dw || ph < dh {
                return Err(format!("TurboJPEG plane {c} is {pw}x{ph}, smaller than the component ({dw}x{dh})").into());
            }
            padded.push((pw, ph));
        }
        let mut bufs: Vec<Vec<u8>> = padded.iter().map(|&(pw, ph)| vec![0u8; pw * ph]).collect();
        let mut ptrs: Vec<*mut u8> = bufs.iter_mut().map(|b| b.as_mut_ptr()).collect();
        let mut strides: Vec<libc_int> = padded.iter().map(|&(pw, _)| pw as libc_int).collect();
        // SAFETY: valid handle; three planes of stride × plane-height bytes each, the sizes
        // TurboJPEG computes for this image (tj3YUVPlaneWidth/Height at scale 1).
        let rc = unsafe { raw::tj3DecompressToYUVPlanes8(h.0, stream.as_ptr(), stream.len() as _, ptrs.as_mut_ptr(), strides.as_mut_ptr()) };
        if rc != 0 {
            return Err(h.error());
        }
        let crop = |mut buf: Vec<u8>, pw: usize, (dw, dh): (usize, usize)| {
            if pw == dw {
                buf.truncate(dw * dh);
                buf
            } else {
                buf.chunks(pw).take(dh).flat_map(|row| &row[..dw]).copied().collect()
            }
        };
        let planes = bufs.into_iter().zip(&padded).zip(&dims).map(|((buf, &(pw, _)), &d)| crop(buf, pw, d)).collect();
        Ok((planes, dims))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_rejects_non_jpeg() {
        let mut out = Vec::new();
        let err = splice(None, &[0x11, 0x00, 0x00, 0x00, 0x00], JpegColor::Rgb, &mut out).unwrap_err();
        assert!(matches!(&err, CodecError::Data(m) if m.contains("0x11 0x00")), "{err}");
    }

    #[test]
    fn splice_inserts_tables_and_adobe_marker() {
        let tables = [0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x03, 0x07, 0xFF, 0xD9];
        let tile = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 1, 2, 0xFF, 0xDA, 0x00, 0x02, 9, 0xFF, 0xD9];
        let mut out = Vec::new();
        splice(Some(&tables), &tile, JpegColor::Rgb, &mut out).unwrap();
        let expected: Vec<u8> = [
            &[0xFF, 0xD8][..],
            &[0xFF, 0xEE, 0x00, 0x0E, b'A', b'd', b'o', b'b', b'e', 0x00, 0x64, 0, 0, 0, 0, 0][..],
            &[0xFF, 0xDB, 0x00, 0x03, 0x07][..],
            &[0xFF, 0xDA, 0x00, 0x02, 9, 0xFF, 0xD9][..],
        ]
        .concat();
        assert_eq!(out, expected);
    }
}
