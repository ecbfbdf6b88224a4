//! Samples at their stored depth: lossless decompression (none, deflate, LZW, zstd) with the
//! horizontal predictor for 8- and 16-bit samples, the 16 → 8 bit rule of `read_region`, and
//! [`decode_native`], the per-channel decode behind `Slide::read_region_channels`.
//!
//! Zeiss CZI's BGR samples ([`Photometric::Bgr`]) come back as R, G, B; their 16-bit samples
//! keep the high byte, as OpenSlide's zeiss driver converts BGR48.
//!
//! 16 → 8 bit follows libtiff's RGBA interface (`tif_getimage.c`), which OpenSlide 4.0.1's
//! generic-tiff driver reads such files through (`TIFFRGBAImageGet`): greyscale keeps the high
//! byte (`v >> 8`, libtiff's "use high order byte of 16bit value"), RGB maps each sample to
//! `(v + 128) / 257` (its `Bitdepth16To8` table). Checked against OpenSlide's output by the
//! generated `generic-16bit` slides.

use std::io::Read;

use super::{decode_chunk, ChunkGeometry};
use crate::error::{Error, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Photometric, SampleBits};

/// Interleaved samples of a chunk's valid rows, rows `tile_width × samples_per_pixel` samples
/// apart, at their stored depth (16-bit values in native byte order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Samples {
    /// 8-bit unsigned samples.
    U8(Vec<u8>),
    /// 16-bit unsigned samples.
    U16(Vec<u16>),
}

/// One decoded chunk at its stored depth: the valid region only, shape (height, width,
/// channels), row-major, no padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeTile {
    /// Width in pixels (the chunk's valid width).
    pub width: u32,
    /// Height in pixels (the chunk's valid height).
    pub height: u32,
    /// Channels per pixel: 1 grey, 2 grey + alpha, 3 RGB, 4 RGB + alpha (the stored samples).
    pub channels: usize,
    /// `width × height × channels` samples.
    pub samples: Samples,
}

/// Decompress a lossless chunk, producing at most `limit` bytes.
pub(crate) fn inflate(c: Compression, data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    match c {
        Compression::None => Ok(data[..data.len().min(limit)].to_vec()),
        Compression::Deflate => {
            let mut out = Vec::with_capacity(limit);
            flate2::read::ZlibDecoder::new(data).take(limit as u64).read_to_end(&mut out).map_err(|e| format!("deflate: {e}"))?;
            Ok(out)
        }
        Compression::Lzw => {
            let mut out = vec![0u8; limit];
            let mut dec = weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8);
            let (mut cin, mut cout) = (0, 0);
            while cout < limit {
                let r = dec.decode_bytes(&data[cin..], &mut out[cout..]);
                cin += r.consumed_in;
                cout += r.consumed_out;
                match r.status {
                    Ok(weezl::LzwStatus::Ok) if r.consumed_in == 0 && r.consumed_out == 0 => break,
                    Ok(weezl::LzwStatus::Ok) => {}
                    Ok(_) => break,
                    Err(e) => return Err(format!("LZW: {e}")),
                }
            }
            out.truncate(cout);
            Ok(out)
        }
        Compression::Zstd => {
            let mut out = Vec::with_capacity(limit);
            zstd::stream::read::Decoder::new(data)
                .map_err(|e| format!("zstd: {e}"))?
                .take(limit as u64)
                .read_to_end(&mut out)
                .map_err(|e| format!("zstd: {e}"))?;
            Ok(out)
        }
        Compression::CziZstd1 => super::czi::inflate_zstd1(data, limit),
        other => Err(format!("{} is not a lossless byte codec", other.name())),
    }
}

/// Decompress a lossless chunk (one byte slice per stored plane) to interleaved samples of its
/// valid rows, undoing the horizontal predictor (TIFF 6.0 section 14, on whole samples) and
/// interleaving separate planes.
///
/// # Errors
/// A message for corrupt data or data shorter than the valid rows.
pub(crate) fn lossless(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry) -> Result<Samples, String> {
    let spp = codec.samples_per_pixel as usize;
    let per_plane = if codec.planar_separate { 1 } else { spp };
    let bps = match codec.sample_bits {
        SampleBits::U8 => 1,
        SampleBits::U16 { .. } | SampleBits::U16Bits4To12 => 2,
    };
    let row_samples = g.tile_width as usize * per_plane;
    let needed = row_samples * g.valid_height as usize * bps;
    let full = row_samples * g.tile_height as usize * bps;
    let mut decoded: Vec<Samples> = Vec::with_capacity(planes.len());
    for (p, data) in planes.iter().enumerate() {
        let mut out = inflate(codec.compression, data, full).map_err(|m| format!("plane {p}: {m}"))?;
        if out.len() < needed {
            return Err(format!("{} data of plane {p} decodes to {} bytes, {needed} needed", codec.compression.name(), out.len()));
        }
        out.truncate(needed);
        decoded.push(match codec.sample_bits {
            SampleBits::U8 => {
                if codec.predictor == 2 {
                    for row in out.chunks_exact_mut(row_samples) {
                        for i in per_plane..row.len() {
                            row[i] = row[i].wrapping_add(row[i - per_plane]);
                        }
                    }
                }
                Samples::U8(out)
            }
            SampleBits::U16 { .. } | SampleBits::U16Bits4To12 => {
                let big_endian = matches!(codec.sample_bits, SampleBits::U16 { big_endian: true });
                let mut v: Vec<u16> = out
                    .chunks_exact(2)
                    .map(|c| if big_endian { u16::from_be_bytes([c[0], c[1]]) } else { u16::from_le_bytes([c[0], c[1]]) })
                    .collect();
                if codec.predictor == 2 {
                    for row in v.chunks_exact_mut(row_samples) {
                        for i in per_plane..row.len() {
                            row[i] = row[i].wrapping_add(row[i - per_plane]);
                        }
                    }
                }
                Samples::U16(v)
            }
        });
    }
    if !codec.planar_separate {
        return Ok(decoded.pop().unwrap_or(Samples::U8(Vec::new())));
    }
    fn interleave<T: Copy + Default>(planes: &[&Vec<T>], spp: usize) -> Vec<T> {
        let n = planes.first().map_or(0, |p| p.len());
        let mut s = vec![T::default(); n * spp];
        for (p, plane) in planes.iter().enumerate() {
            for (i, &v) in plane.iter().enumerate() {
                s[i * spp + p] = v;
            }
        }
        s
    }
    Ok(match codec.sample_bits {
        SampleBits::U8 => {
            let ps: Vec<&Vec<u8>> = decoded.iter().filter_map(|d| if let Samples::U8(v) = d { Some(v) } else { None }).collect();
            Samples::U8(interleave(&ps, spp))
        }
        SampleBits::U16 { .. } | SampleBits::U16Bits4To12 => {
            let ps: Vec<&Vec<u16>> = decoded.iter().filter_map(|d| if let Samples::U16(v) = d { Some(v) } else { None }).collect();
            Samples::U16(interleave(&ps, spp))
        }
    })
}

/// 16-bit samples to 8 bit as libtiff's RGBA interface: the high byte for greyscale,
/// `(v + 128) / 257` otherwise (see the module documentation); bits 4..12 for
/// [`SampleBits::U16Bits4To12`].
pub(crate) fn to_8bit(v: &[u16], photometric: Photometric, bits: SampleBits) -> Vec<u8> {
    if bits == SampleBits::U16Bits4To12 {
        return v.iter().map(|&x| (x >> 4) as u8).collect();
    }
    match photometric {
        // OpenSlide's BGR48 conversion (zeiss driver) keeps the high byte too.
        Photometric::MinIsBlack | Photometric::Bgr => v.iter().map(|&x| (x >> 8) as u8).collect(),
        _ => v.iter().map(|&x| ((x as u32 + 128) / 257) as u8).collect(),
    }
}

/// Swap the first and third sample of every pixel of `v` (`spp` samples each) when `bgr`: B, G,
/// R as stored to R, G, B.
pub(crate) fn bgr_to_rgb<T>(mut v: Vec<T>, spp: usize, bgr: bool) -> Vec<T> {
    if bgr && spp >= 3 {
        for px in v.chunks_exact_mut(spp) {
            px.swap(0, 2);
        }
    }
    v
}

/// Decode one chunk to its stored samples (the valid region): lossless codecs at their stored
/// depth (8 or 16 bit), as is JPEG 2000 of a 16-bit image; JPEG, 8-bit JPEG 2000 and WebP through [`decode_chunk`], as the
/// colour channels it yields (grey, or RGB after any YCbCr conversion) plus the alpha sample
/// when stored.
///
/// # Errors
/// As [`decode_chunk`].
pub fn decode_native(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<NativeTile> {
    let (vw, vh) = (g.valid_width as usize, g.valid_height as usize);
    let spp = codec.samples_per_pixel as usize;
    if codec.compression == Compression::JpegXr {
        return super::jpegxr::decode_native(codec, planes[0], g, at);
    }
    if super::table::entry(codec.compression).byte_codec {
        let stride = g.tile_width as usize * spp;
        fn crop<T: Copy>(v: Vec<T>, stride: usize, row: usize, rows: usize) -> Vec<T> {
            if stride == row {
                let mut v = v;
                v.truncate(row * rows);
                return v;
            }
            let mut out = Vec::with_capacity(row * rows);
            for r in v.chunks_exact(stride).take(rows) {
                out.extend_from_slice(&r[..row]);
            }
            out
        }
        let s = lossless(codec, planes, g).map_err(|m| Error::decode(at, crate::error::CodecError::Data(m)))?;
        let bgr = codec.photometric == Photometric::Bgr && spp >= 3;
        let samples = match s {
            Samples::U8(v) => Samples::U8(bgr_to_rgb(crop(v, stride, vw * spp, vh), spp, bgr)),
            Samples::U16(v) => Samples::U16(bgr_to_rgb(crop(v, stride, vw * spp, vh), spp, bgr)),
        };
        return Ok(NativeTile { width: g.valid_width, height: g.valid_height, channels: spp, samples });
    }
    if matches!(codec.compression, Compression::Jpeg2000 { .. }) && codec.sample_bits != SampleBits::U8 {
        // 16-bit JPEG 2000 (Olympus ETS fluorescence): the decoded values, cropped to the valid region.
        let (w, _, n, s) = super::jp2k_samples(codec, planes[0], g, at)?;
        let Samples::U16(v) = s else { return Err(Error::decode(at, crate::error::CodecError::Data("JPEG 2000 of 8-bit components in a 16-bit image".into()))) };
        let (stride, row) = (w as usize * n, vw * n);
        let mut out = Vec::with_capacity(row * vh);
        for r in v.chunks_exact(stride).take(vh) {
            out.extend_from_slice(&r[..row]);
        }
        return Ok(NativeTile { width: g.valid_width, height: g.valid_height, channels: n, samples: Samples::U16(out) });
    }
    let t = decode_chunk(codec, planes, g, at)?;
    let gray = codec.photometric == Photometric::MinIsBlack && codec.compression != Compression::WebP;
    let alpha = codec.alpha != Alpha::None && codec.compression != Compression::WebP || (codec.compression == Compression::WebP && spp == 4);
    let pick: Vec<usize> = match (gray, alpha) {
        (true, false) => vec![0],
        (true, true) => vec![0, 3],
        (false, false) => vec![0, 1, 2],
        (false, true) => vec![0, 1, 2, 3],
    };
    let mut out = Vec::with_capacity(vw * vh * pick.len());
    for px in t.rgba.chunks_exact(4) {
        out.extend(pick.iter().map(|&c| px[c]));
    }
    Ok(NativeTile { width: t.width, height: t.height, channels: pick.len(), samples: Samples::U8(out) })
}
