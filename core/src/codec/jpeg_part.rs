//! Partial JPEG decoding that reads the whole scan: `jpeg_part.c`, libjpeg's API on the
//! libjpeg-turbo that turbojpeg-sys builds.
//!
//! TurboJPEG's cropping region (`tj3SetCroppingRegion` + `tj3Decompress8`) skips the rows below
//! a crop with `jpeg_skip_scanlines`, which for a skip to the bottom marks the input finished
//! without reading it (libjpeg-turbo 3.1 `jdapistd.c`, `_jpeg_skip_scanlines`): damage in those
//! rows, and the end-of-scan checks that report damage anywhere in the scan ("premature end of
//! data segment", "N extraneous bytes before marker"), never happen, so a part of a damaged
//! tile returned pixels where the whole tile fails. `jpeg_part.c` makes the same calls but
//! skips only to the last row (which entropy-decodes the rows, without the inverse DCT or
//! colour conversion), reads that row and finishes at EOI, as a whole decode does.

use std::cell::RefCell;
use std::os::raw::{c_char, c_int, c_long, c_uint, c_ulong};

use super::jpeg::Crop;
use super::jpeg_scans::backstop_mib;
use crate::error::CodecError;

extern "C" {
    fn slidestream_jpeg_decode_part(
        buf: *const u8,
        len: c_ulong,
        crop_x: c_uint,
        crop_w: c_uint,
        y: c_uint,
        h: c_uint,
        dst: *mut u8,
        pitch: usize,
        scratch: *mut u8,
        max_memory: c_long,
        msg: *mut c_char,
        msg_len: c_int,
    ) -> c_int;
    fn slidestream_jpeg_decode_part_known_good(
        buf: *const u8,
        len: c_ulong,
        crop_x: c_uint,
        crop_w: c_uint,
        y: c_uint,
        h: c_uint,
        dst: *mut u8,
        pitch: usize,
        scratch: *mut u8,
        max_memory: c_long,
        msg: *mut c_char,
        msg_len: c_int,
    ) -> c_int;
    fn slidestream_jpeg_decode_part_rows(
        buf: *const u8,
        len: c_ulong,
        crop_x: c_uint,
        crop_w: c_uint,
        y: c_uint,
        h: c_uint,
        dst: *mut u8,
        pitch: usize,
        rows: *const *mut u8,
        skip: usize,
        row_bytes: usize,
        scratch: *mut u8,
        read_to_end: c_int,
        max_memory: c_long,
        msg: *mut c_char,
        msg_len: c_int,
    ) -> c_int;
    fn slidestream_jpeg_decode_raw(
        buf: *const u8,
        len: c_ulong,
        components: c_int,
        max_w: c_uint,
        max_h: c_uint,
        dst: *mut u8,
        dst_len: usize,
        out_w: *mut c_uint,
        out_h: *mut c_uint,
        max_memory: c_long,
        msg: *mut c_char,
        msg_len: c_int,
    ) -> c_int;
}

/// The message the C side left in `msg` after a failed call, as a data error. Reads up to the
/// first NUL, or the whole buffer when there is none.
fn c_message(msg: &[c_char]) -> CodecError {
    let bytes: Vec<u8> = msg.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    CodecError::Data(String::from_utf8_lossy(&bytes).into_owned())
}

thread_local! {
    /// The discarded last row of each partial decode.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Decode `crop` of the complete single-scan stream `stream` to RGBA (alpha 255) into `dst`,
/// rows `crop.width × 4` bytes apart, reading the scan to its end: the outcome (pixels of the
/// crop, or the error) is that of a whole decode. `crop.x` must be a multiple of the iMCU
/// width; the caller has checked the crop against the header and multi-scan streams are
/// decoded whole instead (their scans are all read before the first row anyway).
///
/// # Errors
/// libjpeg-turbo's message (warnings included), or a message when `dst` is shorter than
/// `crop.width × crop.height × 4` bytes.
pub fn decode_part(stream: &[u8], crop: Crop, dst: &mut [u8]) -> Result<(), CodecError> {
    decode_part_with(stream, crop, dst, true)
}

/// [`decode_part`] for a stream already known to decode whole without error (and a whole
/// image when `crop` covers it): the decode stops after the crop's last row, as TurboJPEG's
/// cropping region does, and gives the same pixels. Used for RGB-coded streams (Aperio's RGB
/// tiles), whose colour conversion here is SIMD (`jpeg_part.c`, `ss_rgb_rgba`) where
/// TurboJPEG's is a per-pixel C loop.
///
/// # Errors
/// As [`decode_part`].
pub fn decode_part_known_good(stream: &[u8], crop: Crop, dst: &mut [u8]) -> Result<(), CodecError> {
    decode_part_with(stream, crop, dst, false)
}

fn decode_part_with(stream: &[u8], crop: Crop, dst: &mut [u8], read_to_end: bool) -> Result<(), CodecError> {
    let pitch = crop.width as usize * 4;
    let need = pitch * crop.height as usize;
    if dst.len() < need {
        return Err(CodecError::BufferTooSmall { have: dst.len(), need, width: crop.width, height: crop.height });
    }
    SCRATCH.with(|cell| {
        let scratch = &mut *cell.borrow_mut();
        scratch.resize(pitch.max(4), 0);
        let mut msg = [0 as c_char; 200];
        let f = if read_to_end { slidestream_jpeg_decode_part } else { slidestream_jpeg_decode_part_known_good };
        // SAFETY: `stream` is read-only input of its length; `dst` holds crop.height rows of
        // `pitch` bytes (checked above) and the C side writes only rows [y, y + h) of the
        // crop's width into it; `scratch` holds one row of that width; `msg` its length.
        let rc = unsafe {
            f(
                stream.as_ptr(),
                stream.len() as c_ulong,
                crop.x,
                crop.width,
                crop.y,
                crop.height,
                dst.as_mut_ptr(),
                pitch,
                scratch.as_mut_ptr(),
                (backstop_mib() as c_long) << 20,
                msg.as_mut_ptr(),
                msg.len() as c_int,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(c_message(&msg))
        }
    })
}

/// [`decode_part`] straight into several buffers: the rows of `crop` are split, top to
/// bottom, into consecutive bands of `heights` rows (their sum is `crop.height`), and of each
/// row only the `width` pixels from `skip` pixels past `crop.x` are kept. Returns one buffer per
/// band, `width × 4 × height` bytes (RGBA, alpha 255). Each row is decoded into a one-row
/// scratch buffer and copied from there, so no buffer of the whole crop is allocated, zeroed or
/// copied again (the stacks of NDPI tiles of [`super::stack`]). Reads the whole scan as
/// [`decode_part`] does.
///
/// # Errors
/// As [`decode_part`]; a message when the bands do not add up to the crop or the kept columns
/// leave it.
pub fn decode_part_bands(stream: &[u8], crop: Crop, skip: u32, width: u32, heights: &[u32]) -> Result<Vec<Vec<u8>>, CodecError> {
    let total: u64 = heights.iter().map(|&h| h as u64).sum();
    if total != crop.height as u64 || skip as u64 + width as u64 > crop.width as u64 || width == 0 {
        return Err(format!("bands of {total} rows, {width} pixels from {skip}, do not fit the {}x{} crop", crop.width, crop.height).into());
    }
    let row_bytes = width as usize * 4;
    let mut bands: Vec<Vec<u8>> = heights.iter().map(|&h| Vec::with_capacity(row_bytes * h as usize)).collect();
    let mut rows: Vec<*mut u8> = Vec::with_capacity(crop.height as usize);
    for (band, &h) in bands.iter_mut().zip(heights) {
        let base = band.spare_capacity_mut().as_mut_ptr() as *mut u8;
        // SAFETY: each band has capacity for `h` rows of `row_bytes`; the offsets stay inside.
        rows.extend((0..h as usize).map(|r| unsafe { base.add(r * row_bytes) }));
    }
    SCRATCH.with(|cell| {
        let scratch = &mut *cell.borrow_mut();
        scratch.resize((crop.width as usize * 4).max(4), 0);
        let mut msg = [0 as c_char; 200];
        // SAFETY: `stream` is read-only input of its length; `rows` holds crop.height pointers,
        // each to `row_bytes` writable bytes of a band's capacity, and the C side copies exactly
        // `row_bytes` bytes to each (skip + row_bytes ≤ crop.width × 4, checked above and again
        // there); `scratch` holds one row of the crop's width; `msg` its length.
        let rc = unsafe {
            slidestream_jpeg_decode_part_rows(
                stream.as_ptr(),
                stream.len() as c_ulong,
                crop.x,
                crop.width,
                crop.y,
                crop.height,
                std::ptr::null_mut(),
                0,
                rows.as_ptr(),
                skip as usize * 4,
                row_bytes,
                scratch.as_mut_ptr(),
                1,
                (backstop_mib() as c_long) << 20,
                msg.as_mut_ptr(),
                msg.len() as c_int,
            )
        };
        if rc != 0 {
            return Err(c_message(&msg));
        }
        for (band, &h) in bands.iter_mut().zip(heights) {
            // SAFETY: a successful decode wrote every row of the crop (the C side fails when
            // fewer than crop.height rows come out), so each band's `h` rows are initialised.
            unsafe { band.set_len(row_bytes * h as usize) };
        }
        Ok(bands)
    })
}

/// Decode the complete stream `stream` of `components` components (1 to 4) to its samples as
/// coded, interleaved (`components` bytes per pixel, rows `width × components` bytes apart),
/// into `dst` (resized to fit): no colour conversion whatever the stream's markers say (libjpeg
/// `JCS_UNKNOWN` in and out), as libtiff's JPEG codec decodes the tiles OpenSlide reads through
/// libtiff (photometric other than RGB/YCbCr with 3 samples: CMYK, grey + alpha, RGBA). Every
/// component must be sampled 1x1, as libtiff requires there. Returns (width, height).
///
/// # Errors
/// libjpeg-turbo's message (warnings included); a message for another component count,
/// precision or sampling; [`CodecError::LargerThanTile`] for an image larger than
/// `max_w × max_h` (checked from the header, before any pixel buffer is allocated);
/// [`super::jpeg_scans`]' limits on multi-scan streams.
pub fn decode_raw(stream: &[u8], components: u32, max_w: u32, max_h: u32, dst: &mut Vec<u8>) -> Result<(u32, u32), CodecError> {
    if !(1..=4).contains(&components) {
        return Err(format!("{components} JPEG components (1 to 4 are read)").into());
    }
    super::jpeg_scans::check_scans(stream)?;
    let room = max_w as usize * max_h as usize * components as usize;
    dst.clear();
    dst.resize(room, 0);
    let (mut w, mut h) = (0 as c_uint, 0 as c_uint);
    let mut msg = [0 as c_char; 200];
    // SAFETY: `stream` is read-only input of its length; `dst` holds `room` bytes and the C
    // side writes at most width × height × components ≤ `room` bytes (checked from the header
    // first); `w`, `h` and `msg` are valid for writes.
    let rc = unsafe {
        slidestream_jpeg_decode_raw(
            stream.as_ptr(),
            stream.len() as c_ulong,
            components as c_int,
            max_w,
            max_h,
            dst.as_mut_ptr(),
            room,
            &mut w,
            &mut h,
            (backstop_mib() as c_long) << 20,
            msg.as_mut_ptr(),
            msg.len() as c_int,
        )
    };
    if rc == -2 {
        return Err(CodecError::LargerThanTile { width: w, height: h, tile_width: max_w, tile_height: max_h });
    }
    if rc != 0 {
        return Err(c_message(&msg));
    }
    dst.truncate(w as usize * h as usize * components as usize);
    Ok((w, h))
}
