//! Tile decoding on the CPU.
//!
//! [`decode_chunk`] turns the compressed bytes of one tile (or strip) into RGBA pixels of the
//! part of the tile that lies inside the image: padding beyond the image edge never leaves this
//! module. Codecs: JPEG (libjpeg-turbo, [`jpeg`]), JPEG 2000 (OpenJPEG, [`jp2k`]), deflate
//! (`flate2`), LZW (`weezl`), zstd (`zstd`), WebP (`image-webp`), uncompressed; horizontal
//! predictor; Zeiss CZI's zstd1 ([`czi`]) and JPEG XR ([`jpegxr`], jxrlib); planar
//! configuration 1 and 2; 8-bit grey, grey+alpha, RGB and RGBA; 16-bit grey
//! and RGB (lossless codecs and JPEG 2000; scaled to 8 bit as libtiff's RGBA interface, or native through
//! [`decode_native`], see [`samples`]).

pub mod jp2k;
pub mod jpeg;
pub mod jpeg_part;
pub mod jpeg_scans;
pub mod jpeg_sm;
pub mod reduce;
pub mod base64_text;
pub mod bitmap;
pub mod czi;
pub mod jpegxr;
mod planes;

pub(crate) use planes::jp2k_samples;
pub mod samples;
pub mod stack;
pub mod stream;
pub mod table;

use crate::error::{CodecError, Error, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Photometric};
pub use samples::{decode_native, Samples};

/// A decoded tile: RGBA `u8`, row-major, shape (height, width, 4), non-premultiplied, covering
/// only the part of the tile inside the image, or a sub-rectangle of it starting at (`x`, `y`)
/// within the tile when only part of it was decoded (the partial decoding of a small part of an
/// uncached JPEG tile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedTile {
    /// Left edge of the decoded part within the tile, in pixels (0 for a whole tile).
    pub x: u32,
    /// Top edge of the decoded part within the tile, in pixels (0 for a whole tile).
    pub y: u32,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `true` when every alpha value is 255 (no alpha sample in the file): lets assembly skip
    /// compositing.
    pub opaque: bool,
    /// `width × height × 4` bytes.
    pub rgba: Vec<u8>,
}

impl DecodedTile {
    /// Bytes held (for cache accounting).
    pub fn byte_size(&self) -> usize {
        self.rgba.len() + std::mem::size_of::<Self>()
    }
}

/// Geometry of the chunk being decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkGeometry {
    /// Nominal chunk width (TileWidth, or ImageWidth for strips).
    pub tile_width: u32,
    /// Nominal chunk height (TileLength, or RowsPerStrip).
    pub tile_height: u32,
    /// Width of the part inside the image.
    pub valid_width: u32,
    /// Height of the part inside the image.
    pub valid_height: u32,
}

pub(crate) fn jpeg_color(codec: &CodecInfo) -> jpeg::JpegColor {
    if jpeg_raw(codec) {
        // Decoded without colour conversion whatever the markers say: no Adobe marker.
        return jpeg::JpegColor::Gray;
    }
    match codec.photometric {
        Photometric::Rgb | Photometric::Bgr => jpeg::JpegColor::Rgb,
        Photometric::YCbCr => jpeg::JpegColor::YCbCr,
        Photometric::MinIsBlack | Photometric::Separated => jpeg::JpegColor::Gray,
    }
}

/// `true` for JPEG chunks decoded to their samples as coded ([`jpeg_part::decode_raw`]) and
/// converted here, not by TurboJPEG: 2 samples (grey + alpha) or 4 (CMYK, RGB + alpha).
/// OpenSlide reads these through libtiff's RGBA interface (its direct JPEG path takes only
/// 3-sample RGB/YCbCr), whose JPEG codec applies no colour transform to them. Such chunks are
/// always decoded whole (no partial or DCT-scaled decoding) and never by nvJPEG. Separate
/// planes (PlanarConfiguration 2; Sakura's one greyscale JPEG per colour) are decoded so too,
/// one plane at a time, and interleaved.
pub fn jpeg_raw(codec: &CodecInfo) -> bool {
    codec.compression == Compression::Jpeg && (matches!(codec.samples_per_pixel, 2 | 4) || codec.planar_separate)
}

thread_local! {
    static SPLICE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Scratch pixels for partial decodes (reused: large fresh allocations cost page faults).
    static PART_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Frame `tile` as the image's [`TileStream`] says ([`stream::frame_jpeg`]: JPEGTables
/// spliced in, an NDPI restart run behind its level's header, or base64 text decoded) and run
/// `f` on the complete stream.
pub fn with_spliced_jpeg<T>(codec: &CodecInfo, tile: &[u8], f: impl FnOnce(&[u8]) -> Result<T, CodecError>) -> Result<T, CodecError> {
    SPLICE_BUF.with(|b| {
        let mut buf = b.borrow_mut();
        stream::frame_jpeg(codec, tile, &mut buf)?;
        f(&buf)
    })
}

/// Decode one chunk. `planes` holds one byte slice per stored plane (one unless
/// PlanarConfiguration = 2).
///
/// # Errors
/// [`Error::Format`] naming `at` (file, level, tile) for corrupt data or a decoded size that
/// does not cover the valid region; [`Error::Limits`] when a stream claims dimensions larger
/// than the tile (checked from the header, before any pixel buffer is allocated).
pub fn decode_chunk(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    (table::entry(codec.compression).decode)(codec, planes, g, at)
}

/// A sub-rectangle of a tile, in pixels relative to the tile's top-left corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartRect {
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width (> 0).
    pub w: u32,
    /// Height (> 0).
    pub h: u32,
}

/// Decode only the part `want` of a chunk (inside its valid region). For JPEG, libjpeg-turbo
/// decodes just the iMCU columns covering `want`, skips the rows above it and reads the scan
/// to its end (so a damaged tile fails as its whole decode does; see `part_crop`), and the
/// result is exactly `want`; other codecs, and multi-scan (progressive) JPEG streams, whose every scan
/// must be read before the first row, decode the whole chunk and return it whole (which the
/// fetch then caches). The result's `x`/`y` say where it sits in the tile.
///
/// # Errors
/// As [`decode_chunk`]; [`Error::Usage`] when `want` is empty or not inside the valid region.
pub fn decode_chunk_part(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, want: PartRect, at: &Location) -> Result<DecodedTile> {
    decode_chunk_part_with(codec, planes, g, want, at, false)
}

/// [`decode_chunk_part`]; with `scan_known_good` (an earlier decode of this tile read its whole
/// scan without error: [`crate::read::partial::ScanMemory`]) a JPEG part is cropped by
/// TurboJPEG, which leaves the rows below it unread ([`jpeg::decode_rgba_known_good`]).
///
/// # Errors
/// As [`decode_chunk_part`].
pub fn decode_chunk_part_with(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, want: PartRect, at: &Location, scan_known_good: bool) -> Result<DecodedTile> {
    check_part(want, g)?;
    if !table::decodes_part(codec) {
        return decode_chunk(codec, planes, g, at);
    }
    PART_BUF.with(|cell| {
        let px = &mut *cell.borrow_mut();
        let mut crop_used = None;
        let mut exact: Option<Vec<u8>> = None;
        let hdr = with_spliced_jpeg(codec, planes[0], |stream| {
            let hdr = jpeg::read_header(stream)?;
            check_dims(hdr.width, hdr.height, g)?;
            let crop = part_crop(&hdr, want);
            crop_used = crop;
            match crop {
                Some(c) if !scan_known_good => {
                    // The whole scan is read (jpeg_part); each row goes from a one-row scratch
                    // buffer straight into the wanted columns, so no crop-sized buffer is
                    // zeroed, filled and copied again.
                    jpeg::check_crop(&hdr, Some(c))?;
                    let mut bands = jpeg_part::decode_part_bands(stream, c, want.x - c.x, want.w, &[want.h])?;
                    exact = bands.pop();
                    Ok(hdr)
                }
                _ if scan_known_good => jpeg::decode_rgba_known_good(stream, crop, px, |_| Ok(())),
                _ => jpeg::decode_rgba(stream, crop, px, |_| Ok(())),
            }
        })
        .map_err(|e| Error::decode(at, e))?;
        if let Some(rgba) = exact {
            return Ok(DecodedTile { x: want.x, y: want.y, width: want.w, height: want.h, opaque: true, rgba });
        }
        Ok(match crop_used {
            Some(c) => {
                // Keep exactly the wanted columns.
                let (skip, row_in, row_out) = (((want.x - c.x) * 4) as usize, (c.width * 4) as usize, (want.w * 4) as usize);
                let mut out = Vec::with_capacity(row_out * want.h as usize);
                for row in px.chunks_exact(row_in) {
                    out.extend_from_slice(&row[skip..skip + row_out]);
                }
                DecodedTile { x: want.x, y: want.y, width: want.w, height: want.h, opaque: true, rgba: out }
            }
            None => crop_rgba(std::mem::take(px), hdr.width, g),
        })
    })
}

/// A part must be non-empty and inside the chunk's valid region.
fn check_part(want: PartRect, g: ChunkGeometry) -> Result<()> {
    let inside = |a: u32, len: u32, lim: u32| len > 0 && a.checked_add(len).is_some_and(|e| e <= lim);
    if inside(want.x, want.w, g.valid_width) && inside(want.y, want.h, g.valid_height) {
        Ok(())
    } else {
        Err(Error::Usage(format!("part {}x{} at ({}, {}) is empty or outside the {}x{} valid region", want.w, want.h, want.x, want.y, g.valid_width, g.valid_height)))
    }
}

/// The crop that decodes `want` exactly: widened by at least one pixel on each side, on iMCU
/// boundaries, because libjpeg-turbo's chroma upsampling treats the crop's outer columns as an
/// image edge, so only columns with a real neighbour on both sides equal a whole-tile decode.
/// Rows need no margin (skipped scanlines keep their context). The decode of a crop reads the
/// scan to its end ([`jpeg_part`]), so a part fails exactly when the whole tile fails.
///
/// `None` (decode whole) for an unknown subsampling and for multi-scan streams: libjpeg-turbo
/// entropy-decodes all their scans before the first row, so a part costs as much as the whole
/// tile, which is then cached.
pub(crate) fn part_crop(hdr: &jpeg::JpegHeader, want: PartRect) -> Option<jpeg::Crop> {
    if hdr.multi_scan {
        return None;
    }
    jpeg::mcu_size(hdr.subsamp).map(|(mw, _)| {
        let x = want.x.saturating_sub(1) / mw * mw;
        let end = (want.x + want.w + 1).div_ceil(mw).saturating_mul(mw).min(hdr.width);
        jpeg::Crop { x, y: want.y, width: end - x, height: want.h }
    })
}

/// Where [`decode_jpeg_into`] put a tile's pixels in the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// Left edge of the exact pixels within the tile (0 for a whole tile).
    pub x: u32,
    /// Top edge within the tile (0 for a whole tile).
    pub y: u32,
    /// Width of the exact pixels: the valid width for a whole tile, `want.w` for a part.
    pub width: u32,
    /// Height of the exact pixels.
    pub height: u32,
    /// Row pitch of the buffer in pixels (4 bytes each); at least `width`.
    pub pitch: u32,
    /// Byte offset of pixel (`x`, `y`) in the buffer.
    pub offset: usize,
    /// Bytes of the buffer written (rows × pitch × 4).
    pub used: usize,
}

/// Decode a JPEG chunk (tables spliced from `codec`) to RGBA straight into `dst`, without
/// allocating: the whole tile, or with `want` only that part (libjpeg-turbo skips the rows
/// above it and the iMCU columns outside its widened crop and reads the scan to its end, as
/// [`decode_chunk_part`]; a multi-scan stream is decoded whole, and placed whole). The pixels at the returned [`Placed`] equal those of
/// [`decode_chunk`] for the same tile; the buffer may hold more (padding beyond the image
/// edge, the crop's margin columns), which callers must not use. `dst` needs at most
/// `tile_width × tile_height × 4` bytes.
///
/// # Errors
/// As [`decode_chunk`]; [`Error::Usage`] when `codec` is not JPEG or `want` is empty or not
/// inside the valid region; [`Error::Limits`] when `dst` is too small.
pub fn decode_jpeg_into(codec: &CodecInfo, tile: &[u8], g: ChunkGeometry, want: Option<PartRect>, at: &Location, dst: &mut [u8]) -> Result<Placed> {
    if codec.compression != Compression::Jpeg || codec.planar_separate {
        return Err(Error::Usage(format!("decode_jpeg_into takes interleaved JPEG chunks, not {:?}", codec.compression)));
    }
    if let Some(w) = want {
        check_part(w, g)?;
    }
    if jpeg_raw(codec) || codec.jpeg_scale() > 1 {
        // Decoded whole ([`jpeg_raw`] chunks are converted on the CPU; TurboJPEG's scaled
        // decode of NDPI tiles has no crop here), then copied.
        let t = decode_chunk(codec, &[tile], g, at)?;
        if dst.len() < t.rgba.len() {
            return Err(Error::limits(at, format!("buffer of {} bytes for a decoded tile of {} bytes", dst.len(), t.rgba.len())));
        }
        dst[..t.rgba.len()].copy_from_slice(&t.rgba);
        return Ok(Placed { x: 0, y: 0, width: t.width, height: t.height, pitch: t.width, offset: 0, used: t.rgba.len() });
    }
    let (hdr, crop) = with_spliced_jpeg(codec, tile, |stream| {
        jpeg::decode_rgba_into(stream, dst, |hdr| {
            check_dims(hdr.width, hdr.height, g)?;
            Ok(want.and_then(|w| part_crop(hdr, w)))
        })
    })
    .map_err(|e| Error::decode(at, e))?;
    Ok(match (crop, want) {
        (Some(c), Some(w)) => Placed {
            x: w.x,
            y: w.y,
            width: w.w,
            height: w.h,
            pitch: c.width,
            offset: (w.x - c.x) as usize * 4,
            used: c.width as usize * c.height as usize * 4,
        },
        _ => Placed {
            x: 0,
            y: 0,
            width: g.valid_width,
            height: g.valid_height,
            pitch: hdr.width,
            offset: 0,
            used: hdr.width as usize * hdr.height as usize * 4,
        },
    })
}

/// A decoded stream must not exceed the nominal chunk size (else [`CodecError::LargerThanTile`],
/// a `Limits` error: decoding it would allocate more than the tile) and must cover the valid
/// region (else [`CodecError::SmallerThanTile`], a `Format` error).
fn check_dims(w: u32, h: u32, g: ChunkGeometry) -> Result<(), CodecError> {
    if w > g.tile_width || h > g.tile_height {
        return Err(CodecError::LargerThanTile { width: w, height: h, tile_width: g.tile_width, tile_height: g.tile_height });
    }
    if w < g.valid_width || h < g.valid_height {
        return Err(CodecError::SmallerThanTile { width: w, height: h, valid_width: g.valid_width, valid_height: g.valid_height });
    }
    Ok(())
}

/// Keep the valid region of an RGBA buffer `width` pixels wide.
fn crop_rgba(px: Vec<u8>, width: u32, g: ChunkGeometry) -> DecodedTile {
    let (vw, vh) = (g.valid_width as usize, g.valid_height as usize);
    if width as usize == vw && px.len() == vw * vh * 4 {
        return DecodedTile { x: 0, y: 0, width: g.valid_width, height: g.valid_height, opaque: true, rgba: px };
    }
    let mut out = Vec::with_capacity(vw * vh * 4);
    for row in px.chunks_exact(width as usize * 4).take(vh) {
        out.extend_from_slice(&row[..vw * 4]);
    }
    DecodedTile { x: 0, y: 0, width: g.valid_width, height: g.valid_height, opaque: true, rgba: out }
}

/// Convert interleaved 8-bit samples (`n` per pixel, rows `stride` bytes apart) to RGBA for the
/// valid region.
fn samples_to_rgba(s: &[u8], stride: usize, n: usize, codec: &CodecInfo, g: ChunkGeometry) -> DecodedTile {
    let (vw, vh) = (g.valid_width as usize, g.valid_height as usize);
    let mut out = vec![0u8; vw * vh * 4];
    let gray = codec.photometric == Photometric::MinIsBlack;
    let cmyk = codec.photometric == Photometric::Separated;
    let bgr = codec.photometric == Photometric::Bgr;
    // libtiff's CMYK to RGB (tif_getimage.c, 8-bit separated): (255 - K) × (255 - ink) / 255,
    // truncated.
    let ink = |c: u8, k: u8| ((255 - k as u32) * (255 - c as u32) / 255) as u8;
    for y in 0..vh {
        let src = &s[y * stride..y * stride + vw * n];
        let dst = &mut out[y * vw * 4..(y + 1) * vw * 4];
        for (d, p) in dst.chunks_exact_mut(4).zip(src.chunks_exact(n)) {
            let (r, gg, b) = if gray {
                (p[0], p[0], p[0])
            } else if cmyk {
                (ink(p[0], p[3]), ink(p[1], p[3]), ink(p[2], p[3]))
            } else if bgr {
                (p[2], p[1], p[0])
            } else {
                (p[0], p[1], p[2])
            };
            let a = match codec.alpha {
                Alpha::None | Alpha::Ignored => 255,
                _ => p[n - 1],
            };
            if codec.alpha == Alpha::Associated && a != 255 {
                // OpenSlide passes associated alpha through as its premultiplied ARGB and
                // openslide-python un-premultiplies it: 255 × c / a, truncated, and a = 0 left
                // as stored (clamped here where a damaged file has c > a).
                let un = |c: u8| if a == 0 { c } else { (c as u32 * 255 / a as u32).min(255) as u8 };
                d.copy_from_slice(&[un(r), un(gg), un(b), a]);
            } else {
                d.copy_from_slice(&[r, gg, b, a]);
            }
        }
    }
    let opaque = matches!(codec.alpha, Alpha::None | Alpha::Ignored) || out.chunks_exact(4).all(|p| p[3] == 255);
    DecodedTile { x: 0, y: 0, width: g.valid_width, height: g.valid_height, opaque, rgba: out }
}

#[cfg(test)]
mod tests;
