//! JPEG XR (ITU-T T.832) tiles: Zeiss CZI's compression 4 ([`Compression::JpegXr`]), decoded
//! by Microsoft's jxrlib (built from source by the `jpegxr` crate), as OpenSlide's zeiss
//! driver and imagecodecs decode them.
//!
//! Pixel formats taken (jxrlib's names): 8bppGray, 16bppGray, 24bppBGR, 24bppRGB, 32bppBGR
//! (the fourth byte unused), 48bppRGB. CZI stores its BGR pixel types' samples blue first
//! in JPEG XR too: OpenSlide's JPEG XR decoder reads 48bppRGB CZI tiles as BGR (its comment
//! says the 48bppRGB format holds BGR-ordered samples for CZI); 24bppBGR is BGR by name.
//! Samples come back as R, G, B (or grey), 16-bit ones as stored.

use std::io::{Read, Seek, SeekFrom};

use jpegxr::{ImageDecode, PixelFormat};

use super::samples::{bgr_to_rgb, NativeTile, Samples};
use super::{check_dims, ChunkGeometry};
use crate::error::{CodecError, Error, Location, Result};
use crate::index::{CodecInfo, Compression, Photometric};

/// The codestream as jxrlib's stream: a read past the end gives zeros, as jxrlib's own memory
/// stream shortens such reads instead of failing (its decoder reads ahead of the last
/// macroblock row; a strict reader makes small images fail to decode, which imagecodecs'
/// memory stream does not).
struct Lenient<'a> {
    data: &'a [u8],
    pos: u64,
}

impl Read for Lenient<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let start = usize::try_from(self.pos).unwrap_or(usize::MAX).min(self.data.len());
        let n = (self.data.len() - start).min(buf.len());
        buf[..n].copy_from_slice(&self.data[start..start + n]);
        buf[n..].fill(0);
        self.pos = self.pos.saturating_add(buf.len() as u64);
        Ok(buf.len())
    }
}

impl Seek for Lenient<'_> {
    fn seek(&mut self, p: SeekFrom) -> std::io::Result<u64> {
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start");
        self.pos = match p {
            SeekFrom::Start(o) => o,
            SeekFrom::Current(d) => self.pos.checked_add_signed(d).ok_or_else(bad)?,
            SeekFrom::End(d) => (self.data.len() as u64).checked_add_signed(d).ok_or_else(bad)?,
        };
        Ok(self.pos)
    }
}

/// Samples per pixel, bytes per sample, whether stored blue first, and bytes per pixel of a
/// pixel format this module takes (`photometric` says what the CZI directory entry declares:
/// [`Photometric::Bgr`] reads 48bppRGB as BGR).
fn layout(f: PixelFormat, photometric: Photometric) -> Option<(usize, usize, bool, usize)> {
    Some(match f {
        PixelFormat::PixelFormat8bppGray => (1, 1, false, 1),
        PixelFormat::PixelFormat16bppGray => (1, 2, false, 2),
        PixelFormat::PixelFormat24bppBGR => (3, 1, true, 3),
        PixelFormat::PixelFormat24bppRGB => (3, 1, false, 3),
        PixelFormat::PixelFormat32bppBGR => (3, 1, true, 4),
        PixelFormat::PixelFormat48bppRGB => (3, 2, photometric == Photometric::Bgr, 6),
        _ => return None,
    })
}

/// Decode one JPEG XR codestream to its samples at their stored depth (the valid region of
/// `g`): R, G, B or grey, 8 or 16 bit. The codestream's size is checked against `g` before
/// any pixel buffer is allocated, and its pixel format against the samples per pixel and
/// depth `codec` declares.
///
/// # Errors
/// [`Error::Format`] (a decode error naming `at`) for a codestream jxrlib refuses, an
/// unsupported pixel format, or one that differs from `codec`'s; [`Error::Limits`] when the
/// codestream is larger than the tile.
pub fn decode_native(codec: &CodecInfo, data: &[u8], g: ChunkGeometry, at: &Location) -> Result<NativeTile> {
    debug_assert_eq!(codec.compression, Compression::JpegXr);
    let err = |m: String| Error::decode(at, CodecError::Data(format!("JPEG XR: {m}")));
    let mut dec = ImageDecode::with_reader(Lenient { data, pos: 0 }).map_err(|e| err(e.to_string()))?;
    let (w, h) = dec.get_size().map_err(|e| err(e.to_string()))?;
    let (w, h) = (u32::try_from(w).map_err(|_| err(format!("width {w}")))?, u32::try_from(h).map_err(|_| err(format!("height {h}")))?);
    check_dims(w, h, g).map_err(|e| Error::decode(at, e))?;
    let f = dec.get_pixel_format().map_err(|e| err(e.to_string()))?;
    let (spp, bps, bgr, bpp) = layout(f, codec.photometric).ok_or_else(|| err(format!("pixel format {f:?} is not read")))?;
    let wide = !matches!(codec.sample_bits, crate::index::SampleBits::U8);
    if spp != codec.samples_per_pixel as usize || (bps == 2) != wide {
        return Err(err(format!("pixel format {f:?}, the subblock declares {} samples of {} bits", codec.samples_per_pixel, if wide { 16 } else { 8 })));
    }
    let stride = w as usize * bpp;
    let mut buf = vec![0u8; stride * h as usize];
    dec.copy_all(&mut buf, stride).map_err(|e| err(e.to_string()))?;
    let (vw, vh) = (g.valid_width as usize, g.valid_height as usize);
    let row = vw * bpp;
    let n = vw * vh * spp;
    let samples = if bps == 1 {
        let mut v = Vec::with_capacity(n);
        for r in buf.chunks_exact(stride).take(vh) {
            if bpp == spp {
                v.extend_from_slice(&r[..row]);
            } else {
                r[..row].chunks_exact(bpp).for_each(|p| v.extend_from_slice(&p[..spp]));
            }
        }
        Samples::U8(bgr_to_rgb(v, spp, bgr))
    } else {
        let mut v = Vec::with_capacity(n);
        for r in buf.chunks_exact(stride).take(vh) {
            v.extend(r[..row].chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])));
        }
        Samples::U16(bgr_to_rgb(v, spp, bgr))
    };
    Ok(NativeTile { width: g.valid_width, height: g.valid_height, channels: spp, samples })
}
