//! The one table of codecs: for each [`Compression`], its decoder and what the read path may
//! ask of it — a part of a tile, a reduced tile, how many bytes its decoding holds, whether
//! nvJPEG takes it. [`decode_chunk`](super::decode_chunk), the partial decoder, the reduced
//! decoder (`codec::reduce`), the read working set (`read::waves::tile_charge`) and the GPU
//! scheduler all ask this table; adding a codec is adding an entry here and its decode
//! function. docs/formats.md's "Codecs" table is this table in prose
//! (`tests::docs_list_every_codec`).

use crate::error::{CodecError, Error, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Photometric};

use super::{bitmap, check_dims, crop_rgba, jp2k, jp2k_samples, jpeg, jpeg_part, jpegxr, planes, samples, samples_to_rgba, with_spliced_jpeg};
use super::{ChunkGeometry, DecodedTile, Samples};

/// Decodes one chunk (one byte slice per stored plane) to the RGBA of its valid region: the
/// contract of [`super::decode_chunk`].
pub type DecodeFn = fn(&CodecInfo, &[&[u8]], ChunkGeometry, &Location) -> Result<DecodedTile>;

/// Which decoder of the device path takes a codec's tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuDecode {
    /// nvJPEG (hardware engines, or its hybrid/GPU back ends): interleaved 3-sample 8-bit JPEG
    /// tiles of at most [`crate::limits::Limits::gpu_tile_edge`] pixels a side.
    Nvjpeg,
    /// Only the CPU decoders: the device path decodes these tiles on the host and uploads them.
    Cpu,
}

/// Bytes a decoder holds beyond its output while decoding one tile, per pixel of the stored
/// tile: `per_pixel + per_sample × samples per pixel`. An upper estimate used by the read
/// working set (`read::waves::tile_charge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Working {
    /// Bytes per pixel whatever the sample count.
    pub per_pixel: u64,
    /// Bytes per stored sample.
    pub per_sample: u64,
}

/// One codec.
#[derive(Debug, Clone, Copy)]
pub struct CodecEntry {
    /// Short name, as in messages and `slidestream info` ([`Compression::name`]).
    pub name: &'static str,
    /// The library that decodes it on the CPU.
    pub library: &'static str,
    /// `true` when decoding gives back exactly the stored samples.
    pub lossless: bool,
    /// `true` when the codestream inflates to the raw samples, laid out as an uncompressed
    /// chunk (`samples::inflate`), before predictor and sample handling.
    pub byte_codec: bool,
    /// `true` when a part of a tile can be decoded without decoding the whole tile
    /// (libjpeg-turbo's cropping and row skipping; see [`decodes_part`]).
    pub partial: bool,
    /// `true` when a tile can be decoded at 1/2, 1/4 or 1/8 of its size by the decoder itself
    /// (libjpeg-turbo's DCT scaling; see [`decodes_reduced`]); the others are decoded whole
    /// and box-averaged.
    pub reduced: bool,
    /// The decoder's own buffers ([`Working`]).
    pub working: Working,
    /// Which device decoder takes it ([`GpuDecode`]; see [`gpu_decodes`]).
    pub gpu: GpuDecode,
    /// The CPU decode.
    pub decode: DecodeFn,
}

const fn w(per_pixel: u64, per_sample: u64) -> Working {
    Working { per_pixel, per_sample }
}

/// Every codec, in the order of docs/formats.md's "Codecs" table.
pub static CODECS: [(Compression, CodecEntry); 12] = [
    (Compression::Jpeg, CodecEntry {
        name: "jpeg", library: "libjpeg-turbo (turbojpeg crate)", lossless: false, byte_codec: false, partial: true, reduced: true,
        // libjpeg-turbo decodes into a tile-sized RGBA buffer that is then cropped.
        working: w(4, 0), gpu: GpuDecode::Nvjpeg, decode: decode_jpeg,
    }),
    (Compression::Jpeg2000 { ycbcr: false }, CodecEntry {
        name: "jpeg2000", library: "OpenJPEG (jpeg2k crate)", lossless: false, byte_codec: false, partial: false, reduced: false,
        // OpenJPEG's 32-bit component planes, then the 8-bit samples.
        working: w(0, 5), gpu: GpuDecode::Cpu, decode: decode_jp2k,
    }),
    (Compression::None, CodecEntry {
        name: "none", library: "—", lossless: true, byte_codec: true, partial: false, reduced: false,
        // The samples, and a copy when planes are interleaved (likewise for the byte codecs).
        working: w(0, 2), gpu: GpuDecode::Cpu, decode: decode_lossless,
    }),
    (Compression::Deflate, CodecEntry {
        name: "deflate", library: "flate2", lossless: true, byte_codec: true, partial: false, reduced: false,
        working: w(0, 2), gpu: GpuDecode::Cpu, decode: decode_lossless,
    }),
    (Compression::Lzw, CodecEntry {
        name: "lzw", library: "weezl", lossless: true, byte_codec: true, partial: false, reduced: false,
        working: w(0, 2), gpu: GpuDecode::Cpu, decode: decode_lossless,
    }),
    (Compression::Zstd, CodecEntry {
        name: "zstd", library: "zstd", lossless: true, byte_codec: true, partial: false, reduced: false,
        working: w(0, 2), gpu: GpuDecode::Cpu, decode: decode_lossless,
    }),
    (Compression::WebP, CodecEntry {
        name: "webp", library: "image-webp", lossless: false, byte_codec: false, partial: false, reduced: false,
        working: w(4, 0), gpu: GpuDecode::Cpu, decode: decode_webp,
    }),
    (Compression::Png, CodecEntry {
        name: "png", library: "png", lossless: true, byte_codec: false, partial: false, reduced: false,
        // The RGB samples and the decoder's rows.
        working: w(8, 0), gpu: GpuDecode::Cpu, decode: decode_bitmap,
    }),
    (Compression::Bmp, CodecEntry {
        name: "bmp", library: "slidestream (codec::bitmap, 24-bit only)", lossless: true, byte_codec: false, partial: false, reduced: false,
        working: w(8, 0), gpu: GpuDecode::Cpu, decode: decode_bitmap,
    }),
    (Compression::CziZstd1, CodecEntry {
        name: "zstd1", library: "zstd (+ codec::czi's HiLo unpacking)", lossless: true, byte_codec: true, partial: false, reduced: false,
        // The inflated samples and, for HiLo packing, the unpacked copy (16-bit: 2 bytes each).
        working: w(0, 4), gpu: GpuDecode::Cpu, decode: decode_lossless,
    }),
    (Compression::JpegXr, CodecEntry {
        name: "jpegxr", library: "jxrlib (jpegxr crate)", lossless: false, byte_codec: false, partial: false, reduced: false,
        // jxrlib's output samples (up to 16 bits) and the 8-bit copy.
        working: w(0, 3), gpu: GpuDecode::Cpu, decode: decode_jpegxr,
    }),
    // Aperio 33003: the same decoder; the YCbCr transform is applied after it.
    (Compression::Jpeg2000 { ycbcr: true }, CodecEntry {
        name: "jpeg2000-ycbcr", library: "OpenJPEG (jpeg2k crate)", lossless: false, byte_codec: false, partial: false, reduced: false,
        working: w(0, 5), gpu: GpuDecode::Cpu, decode: decode_jp2k,
    }),
];

/// The entry of `c`.
pub fn entry(c: Compression) -> &'static CodecEntry {
    // Every variant has an entry (`tests::every_compression_has_one_entry`).
    &CODECS.iter().find(|(k, _)| *k == c).expect("every compression is in CODECS").1
}

/// `true` when a part of `codec`'s tiles can be decoded alone: the codec can
/// ([`CodecEntry::partial`]) and the tiles are interleaved 3-sample JPEG at full scale (not
/// [`super::jpeg_raw`], not an NDPI level decoded by DCT scaling).
pub fn decodes_part(codec: &CodecInfo) -> bool {
    entry(codec.compression).partial && !super::jpeg_raw(codec) && codec.jpeg_scale() == 1
}

/// `true` when `codec`'s tiles can be decoded reduced by the decoder ([`CodecEntry::reduced`]),
/// i.e. JPEG tiles not decoded as raw samples ([`super::jpeg_raw`]).
pub fn decodes_reduced(codec: &CodecInfo) -> bool {
    entry(codec.compression).reduced && !super::jpeg_raw(codec)
}

/// The decoder's transient bytes per stored pixel for `codec` ([`Working`]).
pub fn working_bytes_per_pixel(codec: &CodecInfo) -> u64 {
    let w = entry(codec.compression).working;
    w.per_pixel + w.per_sample * codec.samples_per_pixel as u64
}

/// `true` when nvJPEG takes tiles of `codec` that are `tile_width × tile_height`: a
/// [`GpuDecode::Nvjpeg`] codec, interleaved, 3 samples (nvJPEG's colour conversion is for
/// RGB/YCbCr; grey + alpha and CMYK are [`super::jpeg_raw`]), at most
/// [`crate::limits::Limits::gpu_tile_edge`] a side.
pub fn gpu_decodes(codec: &CodecInfo, tile_width: u32, tile_height: u32) -> bool {
    let edge = crate::limits::LIMITS.gpu_tile_edge;
    entry(codec.compression).gpu == GpuDecode::Nvjpeg && !codec.planar_separate && codec.samples_per_pixel == 3 && tile_width <= edge && tile_height <= edge
}

fn dec_err(at: &Location) -> impl Fn(CodecError) -> Error + '_ {
    move |e| Error::decode(at, e)
}

fn fmt_err(at: &Location) -> impl Fn(String) -> Error + '_ {
    move |m| Error::decode(at, CodecError::Data(m))
}

fn decode_jpeg(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    let dec_err = dec_err(at);
    if codec.planar_separate {
        return planes::decode_planar_jpeg(codec, planes, g, at);
    }
    if super::jpeg_raw(codec) {
        let n = codec.samples_per_pixel as u32;
        let mut s = Vec::new();
        let (w, h) = with_spliced_jpeg(codec, planes[0], |stream| jpeg_part::decode_raw(stream, n, g.tile_width, g.tile_height, &mut s)).map_err(&dec_err)?;
        check_dims(w, h, g).map_err(&dec_err)?;
        return Ok(samples_to_rgba(&s, (w * n) as usize, n as usize, codec, g));
    }
    let s = codec.jpeg_scale();
    let mut px = Vec::new();
    if s > 1 {
        // NDPI levels OpenSlide synthesises: the stored tile decoded at 1/s by DCT scaling.
        let (_, w, _) = with_spliced_jpeg(codec, planes[0], |stream| {
            jpeg::decode_rgba_scaled(stream, s, &mut px, |h| check_dims(h.width.div_ceil(s), h.height.div_ceil(s), g))
        })
        .map_err(&dec_err)?;
        return Ok(crop_rgba(px, w, g));
    }
    let hdr = with_spliced_jpeg(codec, planes[0], |stream| jpeg::decode_rgba(stream, None, &mut px, |h| check_dims(h.width, h.height, g))).map_err(&dec_err)?;
    Ok(crop_rgba(px, hdr.width, g))
}

fn decode_jp2k(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    let (w, _, n, s) = jp2k_samples(codec, planes[0], g, at)?;
    let mut s = match s {
        Samples::U8(v) => v,
        Samples::U16(v) => samples::to_8bit(&v, codec.photometric, codec.sample_bits),
    };
    if codec.compression == (Compression::Jpeg2000 { ycbcr: true }) && n >= 3 {
        jp2k::ycbcr_to_rgb(&mut s, n);
    }
    Ok(samples_to_rgba(&s, w as usize * n, n, codec, g))
}

fn decode_webp(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    let fmt_err = fmt_err(at);
    let mut dec = image_webp::WebPDecoder::new(std::io::Cursor::new(planes[0])).map_err(|e| fmt_err(format!("WebP: {e}")))?;
    let (w, h) = dec.dimensions();
    check_dims(w, h, g).map_err(dec_err(at))?;
    let n = if dec.has_alpha() { 4 } else { 3 };
    let mut s = vec![0u8; w as usize * h as usize * n];
    dec.read_image(&mut s).map_err(|e| fmt_err(format!("WebP: {e}")))?;
    let mut info = codec.clone();
    info.samples_per_pixel = n as u16;
    info.photometric = Photometric::Rgb;
    info.alpha = if n == 4 { Alpha::Unassociated } else { Alpha::None };
    Ok(samples_to_rgba(&s, w as usize * n, n, &info, g))
}

fn decode_bitmap(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    let check = |w: u32, h: u32| check_dims(w, h, g);
    let (w, _, s) = if codec.compression == Compression::Png { bitmap::decode_png(planes[0], check) } else { bitmap::decode_bmp24(planes[0], check) }
        .map_err(dec_err(at))?;
    let mut info = codec.clone();
    info.samples_per_pixel = 3;
    info.photometric = Photometric::Rgb;
    info.alpha = Alpha::None;
    Ok(samples_to_rgba(&s, w as usize * 3, 3, &info, g))
}

fn decode_jpegxr(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    let t = jpegxr::decode_native(codec, planes[0], g, at)?;
    let mut info = codec.clone();
    // The decoded samples are R, G, B (or grey) already.
    if info.photometric == Photometric::Bgr {
        info.photometric = Photometric::Rgb;
    }
    info.samples_per_pixel = t.channels as u16;
    let bytes = match t.samples {
        Samples::U8(v) => v,
        Samples::U16(v) => samples::to_8bit(&v, codec.photometric, codec.sample_bits),
    };
    let full = ChunkGeometry { tile_width: t.width, tile_height: t.height, valid_width: t.width, valid_height: t.height };
    Ok(samples_to_rgba(&bytes, t.width as usize * t.channels, t.channels, &info, full))
}

fn decode_lossless(codec: &CodecInfo, planes: &[&[u8]], g: ChunkGeometry, at: &Location) -> Result<DecodedTile> {
    let spp = codec.samples_per_pixel as usize;
    let stride = g.tile_width as usize * spp;
    let bytes = match samples::lossless(codec, planes, g).map_err(fmt_err(at))? {
        Samples::U8(v) => v,
        Samples::U16(v) => samples::to_8bit(&v, codec.photometric, codec.sample_bits),
    };
    Ok(samples_to_rgba(&bytes, stride, spp, codec, g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Compression> {
        // Exhaustive on purpose: a new variant fails to compile here until it is listed.
        let list = |c: Compression| match c {
            Compression::None | Compression::Jpeg | Compression::Deflate | Compression::Lzw | Compression::Zstd | Compression::WebP => (),
            Compression::Jpeg2000 { .. } | Compression::Png | Compression::Bmp | Compression::CziZstd1 | Compression::JpegXr => (),
        };
        let v = vec![
            Compression::None, Compression::Jpeg, Compression::Deflate, Compression::Lzw, Compression::Zstd, Compression::WebP,
            Compression::Jpeg2000 { ycbcr: false }, Compression::Jpeg2000 { ycbcr: true }, Compression::Png, Compression::Bmp,
            Compression::CziZstd1, Compression::JpegXr,
        ];
        v.iter().for_each(|&c| list(c));
        v
    }

    #[test]
    fn every_compression_has_one_entry() {
        let all = all();
        assert_eq!(all.len(), CODECS.len());
        for c in all {
            assert_eq!(CODECS.iter().filter(|(k, _)| *k == c).count(), 1, "{c:?}");
            assert_eq!(entry(c).name, c.name());
        }
        let mut names: Vec<_> = CODECS.iter().map(|(_, e)| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CODECS.len(), "names are unique");
    }

    #[test]
    fn only_jpeg_decodes_parts_reduced_or_on_nvjpeg() {
        for (c, e) in &CODECS {
            assert_eq!(e.partial, *c == Compression::Jpeg, "{c:?}");
            assert_eq!(e.reduced, *c == Compression::Jpeg, "{c:?}");
            assert_eq!(e.gpu == GpuDecode::Nvjpeg, *c == Compression::Jpeg, "{c:?}");
            assert!(e.byte_codec <= e.lossless, "{c:?}: a byte codec is lossless");
        }
        let mut jpeg = CodecInfo::rgb8(Compression::Jpeg, 7, Photometric::YCbCr);
        assert!(decodes_part(&jpeg) && decodes_reduced(&jpeg) && gpu_decodes(&jpeg, 256, 256));
        assert!(!gpu_decodes(&jpeg, 256, crate::limits::LIMITS.gpu_tile_edge + 1));
        jpeg.samples_per_pixel = 4;
        assert!(!decodes_part(&jpeg) && !decodes_reduced(&jpeg) && !gpu_decodes(&jpeg, 256, 256), "CMYK JPEG is decoded raw");
        let zstd = CodecInfo::rgb8(Compression::Zstd, 50000, Photometric::Rgb);
        assert!(!decodes_part(&zstd) && !gpu_decodes(&zstd, 256, 256));
        assert_eq!(working_bytes_per_pixel(&zstd), 6);
    }

    /// docs/formats.md's "Codecs" table lists every entry with its library and capabilities.
    #[test]
    fn docs_list_every_codec() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/formats.md")).unwrap();
        let start = doc.find("## Codecs").expect("docs/formats.md has a Codecs section");
        let rows: Vec<Vec<String>> = doc[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
            .collect();
        assert_eq!(rows.len(), CODECS.len(), "one row per codec");
        let yn = |b: bool| if b { "yes" } else { "no" };
        for ((_, e), row) in CODECS.iter().zip(&rows) {
            let gpu = match e.gpu {
                GpuDecode::Nvjpeg => "nvJPEG",
                GpuDecode::Cpu => "CPU",
            };
            let working = match (e.working.per_pixel, e.working.per_sample) {
                (p, 0) => format!("{p}"),
                (0, s) => format!("{s} × samples"),
                (p, s) => format!("{p} + {s} × samples"),
            };
            let want = [format!("`{}`", e.name), e.library.to_string(), yn(e.lossless).into(), yn(e.partial).into(), yn(e.reduced).into(), working, gpu.into()];
            assert_eq!(row[..want.len().min(row.len())], want[..], "docs/formats.md Codecs row for {}", e.name);
        }
    }
}
