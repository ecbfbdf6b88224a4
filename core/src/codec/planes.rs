//! Decoders that the main dispatch of [`decode_chunk`](super::decode_chunk) delegates whole:
//! JPEG tiles stored as one single-component stream per sample plane (PlanarConfiguration 2;
//! Sakura's one greyscale JPEG per colour), and JPEG 2000 streams to their samples at the
//! image's depth.

use super::{check_dims, jp2k, jpeg_part, samples_to_rgba, with_spliced_jpeg, ChunkGeometry, DecodedTile, Samples};
use crate::error::{CodecError, Error, Location, Result};
use crate::index::CodecInfo;

/// A tile of separate sample planes, each a single-component JPEG, decoded to its samples
/// (libjpeg's greyscale output, as OpenSlide's Sakura driver decodes each colour) and
/// interleaved; every plane must have the same dimensions.
///
/// # Errors
/// As [`decode_chunk`](super::decode_chunk): `Format` for a plane count that is not the
/// samples per pixel, a damaged plane or planes of different sizes.
pub(super) fn decode_planar_jpeg(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    let fmt_err = |m: String| Error::decode(at, CodecError::Data(m));
    let dec_err = |e: CodecError| Error::decode(at, e);
    let n = codec.samples_per_pixel as usize;
    if planes.len() != n {
        return Err(fmt_err(format!("{} JPEG planes for {n} samples", planes.len())));
    }
    let (mut s, mut plane) = (Vec::new(), Vec::new());
    let mut dims = None;
    for (p, data) in planes.iter().enumerate() {
        let (w, h) = with_spliced_jpeg(codec, data, |stream| jpeg_part::decode_raw(stream, 1, g.tile_width, g.tile_height, &mut plane))
            .map_err(|e| match e {
                CodecError::Data(m) => fmt_err(format!("JPEG plane {p}: {m}")),
                e => dec_err(e),
            })?;
        check_dims(w, h, g).map_err(dec_err)?;
        match dims {
            None => {
                dims = Some((w, h));
                s.resize(w as usize * h as usize * n, 0);
            }
            Some(d) if d != (w, h) => return Err(fmt_err(format!("JPEG plane {p} is {w}x{h}, plane 0 {}x{}", d.0, d.1))),
            Some(_) => {}
        }
        for (i, &v) in plane.iter().enumerate() {
            s[i * n + p] = v;
        }
    }
    let (w, _) = dims.unwrap_or((0, 0));
    Ok(samples_to_rgba(&s, w as usize * n, n, codec, g))
}

/// Decode a JPEG 2000 chunk to its samples at the image's depth (16-bit images: 9- to 16-bit
/// components as `U16`), after checking its SIZ marker against the tile and the codec before
/// OpenJPEG allocates anything. Returns (width, height, components, samples).
///
/// # Errors
/// As [`decode_chunk`](super::decode_chunk).
pub(crate) fn jp2k_samples(codec: &CodecInfo, stream: &[u8], g: ChunkGeometry, at: &Location) -> Result<(u32, u32, usize, Samples)> {
    let fmt_err = |m: String| Error::decode(at, CodecError::Data(m));
    let (w, h, csiz) = jp2k::siz(stream).map_err(fmt_err)?;
    check_dims(w, h, g).map_err(|e| Error::decode(at, e))?;
    // Checked before OpenJPEG allocates per-component and per-tile state from SIZ.
    if csiz != codec.samples_per_pixel {
        return Err(fmt_err(format!("JPEG 2000 stream has {csiz} components, SamplesPerPixel is {}", codec.samples_per_pixel)));
    }
    let tiles = jp2k::tile_count(stream).map_err(fmt_err)?;
    if tiles > jp2k::MAX_TILES {
        return Err(Error::limits(at, format!("JPEG 2000 stream of {tiles} tiles (at most {})", jp2k::MAX_TILES)));
    }
    let wide = codec.sample_bits != crate::index::SampleBits::U8;
    let (w, h, n, s) = jp2k::decode_samples(stream, wide).map_err(fmt_err)?;
    check_dims(w, h, g).map_err(|e| Error::decode(at, e))?;
    if n != codec.samples_per_pixel as usize {
        return Err(fmt_err(format!("JPEG 2000 stream has {n} components, SamplesPerPixel is {}", codec.samples_per_pixel)));
    }
    Ok((w, h, n, s))
}
