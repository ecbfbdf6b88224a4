//! How an image's tiles are coded: compression, colour, samples, and how each tile's
//! codestream is framed in the file ([`TileStream`]).

use std::sync::Arc;

/// Compression of a TIFF image's tiles or strips (TIFF tag 259).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// 1: uncompressed.
    None,
    /// 7: JPEG ("new-style", TIFF Technical Note 2), possibly abbreviated with JPEGTables.
    Jpeg,
    /// 8 (Adobe deflate) and 32946 (old deflate): zlib streams.
    Deflate,
    /// 5: LZW as in TIFF 6.0 (MSB-first codes, early change).
    Lzw,
    /// 50000: Zstandard (libtiff's code).
    Zstd,
    /// 50001: WebP (libtiff's code).
    WebP,
    /// 33003 (Aperio JPEG 2000, YCbCr-coded) or 33005 (Aperio JPEG 2000, RGB-coded),
    /// per OpenSlide's aperio driver. `ycbcr` is true for 33003.
    Jpeg2000 {
        /// `true` when the codestream holds YCbCr that needs converting to RGB.
        ycbcr: bool,
    },
    /// A whole PNG image per tile (MIRAX `IMAGE_FORMAT=PNG`; not a TIFF compression).
    Png,
    /// A whole 24-bit BMP image per tile (MIRAX `IMAGE_FORMAT=BMP24`; not a TIFF
    /// compression; rules in `codec::bitmap`).
    Bmp,
    /// Zeiss CZI "zstd1" (compression 6; not a TIFF compression): a small uncompressed header
    /// (its first byte is its length, 1 or 3; with 3, a chunk type 1 and a flag whose bit 0
    /// says the 16-bit samples are HiLo-packed: all low bytes, then all high bytes) before one
    /// zstd frame (OpenSlide's Zeiss format page and zeiss driver; rules in `codec::czi`).
    /// CZI's "zstd0" (compression 5) is a bare zstd frame: [`Compression::Zstd`].
    CziZstd1,
    /// A whole JPEG XR (ITU-T T.832) codestream per tile (Zeiss CZI compression 4; not a TIFF
    /// compression), decoded by jxrlib (`codec::jpegxr`).
    JpegXr,
}

impl Compression {
    /// Short name, for messages (`jpeg`, `zstd1`, `jpeg2000-ycbcr`, ...; the codec table's
    /// [`crate::codec::table::CodecEntry::name`]).
    pub fn name(&self) -> &'static str {
        crate::codec::table::entry(*self).name
    }
}

/// Photometric interpretation (TIFF tag 262) of the decoded samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Photometric {
    /// 1: greyscale, 0 = black.
    MinIsBlack,
    /// 2: RGB. For JPEG this means the JPEG stream is RGB-coded: no YCbCr transform.
    Rgb,
    /// 6: YCbCr; only with JPEG compression, whose decoder converts to RGB.
    YCbCr,
    /// RGB samples stored blue first (Zeiss CZI pixel types Bgr24 and Bgr48, per the CZI
    /// pixel type names that czifile and OpenSlide's zeiss driver use): decoded to R, G, B.
    /// 16-bit samples keep their high byte in `read_region` (OpenSlide's BGR48 conversion).
    Bgr,
    /// 5: separated, with InkSet 1 (CMYK, the default) and four samples: converted to RGB as
    /// libtiff's RGBA interface does (`R = (255 - K) × (255 - C) / 255`, truncated; likewise
    /// G from M and B from Y), which is what OpenSlide shows. JPEG-coded CMYK is decoded
    /// without colour transform (an Adobe marker's inversion or YCCK flag is not applied, as
    /// libtiff's JPEG codec does not).
    Separated,
}

/// Meaning of an extra (fourth or second) sample (TIFF tag 338).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpha {
    /// No alpha sample.
    None,
    /// Associated (premultiplied) alpha: un-premultiplied on decode.
    Associated,
    /// Unassociated alpha: kept as is.
    Unassociated,
    /// An extra sample of unspecified meaning: ignored (alpha 255).
    Ignored,
}

/// Depth and byte order of the stored samples (TIFF BitsPerSample, tag 258, and the file's
/// byte order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SampleBits {
    /// 8-bit unsigned samples.
    #[default]
    U8,
    /// 16-bit unsigned samples (lossless codecs and JPEG 2000), stored big-endian when
    /// `big_endian` (uncompressed and lossless codecs; JPEG 2000 decodes to native values).
    /// `read_region` scales them to 8 bit as libtiff's RGBA interface (`codec::samples`);
    /// `read_region_channels` returns them as stored.
    U16 {
        /// The file is big-endian ("MM").
        big_endian: bool,
    },
    /// 16-bit little-endian words of which bits 4..12 make the 8-bit value (Hamamatsu VMU's
    /// NGR files, "36 bits per pixel"): `read_region` takes `(v >> 4) & 0xFF` of each word, as
    /// OpenSlide 4.0.1 shows them; `read_region_channels` returns the words as stored.
    U16Bits4To12,
}

/// How to decode one image's tiles or strips.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecInfo {
    /// The compression.
    pub compression: Compression,
    /// The TIFF compression tag value as written.
    pub compression_tag: u16,
    /// Photometric interpretation; decides the JPEG colour transform.
    pub photometric: Photometric,
    /// Samples per pixel (1..=4), all of depth [`sample_bits`](Self::sample_bits).
    pub samples_per_pixel: u16,
    /// Depth of each sample (8 bit, or 16 bit for lossless greyscale and RGB).
    pub sample_bits: SampleBits,
    /// What the extra sample is, if any.
    pub alpha: Alpha,
    /// Predictor (1 = none, 2 = horizontal differencing).
    pub predictor: u16,
    /// `true` for PlanarConfiguration 2 (one chunk per sample plane).
    pub planar_separate: bool,
    /// How each tile's codestream is framed (JPEGTables splice, ...).
    pub stream: TileStream,
    /// YCbCrSubSampling (tag 530) as written (horizontal, vertical); informational: for JPEG the
    /// SOF sampling factors are authoritative.
    pub ycbcr_subsampling: (u16, u16),
}

impl CodecInfo {
    /// Chunky 8-bit, 3-sample tiles without alpha or predictor, each a complete codestream
    /// ([`TileStream::Plain`]): the codec of the non-TIFF formats' images (DICOM frames,
    /// MIRAX camera images). `compression_tag` is the TIFF code of the same codec (for
    /// messages; 0 when there is none); YCbCr subsampling defaults to 2×2 (the JPEG SOF
    /// decides at decode).
    pub fn rgb8(compression: Compression, compression_tag: u16, photometric: Photometric) -> CodecInfo {
        CodecInfo {
            compression,
            compression_tag,
            photometric,
            samples_per_pixel: 3,
            sample_bits: SampleBits::U8,
            alpha: Alpha::None,
            predictor: 1,
            planar_separate: false,
            stream: TileStream::Plain,
            ycbcr_subsampling: (2, 2),
        }
    }

    /// The JPEGTables to splice in front of every abbreviated tile, when the tiles are framed
    /// as [`TileStream::JpegTablesSplice`].
    pub fn jpeg_tables(&self) -> Option<&[u8]> {
        match &self.stream {
            TileStream::JpegTablesSplice { tables } => Some(tables),
            _ => None,
        }
    }

    /// The JPEG DCT scaling denominator tiles are decoded at (1 except for NDPI levels
    /// OpenSlide synthesises by scaled decoding, see [`TileStream::NdpiRestartRun`]).
    pub fn jpeg_scale(&self) -> u32 {
        match &self.stream {
            TileStream::NdpiRestartRun { scale_denom, .. } => *scale_denom as u32,
            _ => 1,
        }
    }
}

/// How a tile's codestream is framed in the file: what the decoder must add to, or take from,
/// the stored bytes to get a complete codestream.
///
/// DICOM frames are [`TileStream::Plain`]: one encapsulated item per frame, as OpenSlide 4.0.1
/// reads them (frames split over several fragments are not read by it either).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TileStream {
    /// The stored bytes are the whole codestream.
    Plain,
    /// An abbreviated JPEG: the image's JPEGTables (TIFF tag 347, the raw bytes of the tag,
    /// SOI ... EOI) are spliced in after the tile's SOI (TIFF Technical Note 2). Read at open:
    /// tables are small (quantisation and Huffman tables, typically < 1 KiB).
    JpegTablesSplice {
        /// The tables stream as stored in the tag.
        tables: Arc<[u8]>,
    },
    /// The stored bytes are the base64 text (standard alphabet) of the whole codestream, as
    /// XML character data: whitespace, `=` padding and character references (`&...;`) are
    /// skipped, as GLib's lenient `g_base64_decode` skips what is not base64 (Philips keeps
    /// its label and macro JPEGs so, inside the XML ImageDescription: the byte range is the
    /// text node's span in the tag's value). Decoded before the codec sees it.
    Base64,
    /// Hamamatsu NDPI: a level is one JPEG strip whose restart intervals are the tiles. A tile's
    /// stored bytes are one restart interval's entropy-coded data followed by the next restart
    /// marker (or the strip's EOI); the codestream is `header` + those bytes with the final
    /// marker byte turned into EOI (`codec::stream::frame_jpeg`, as OpenSlide's
    /// `jpeg_random_access_src`). Read at open: the header is the strip's markers up to and
    /// including SOS (tables, SOF, DRI; usually < 1 KiB).
    NdpiRestartRun {
        /// SOI ... SOS of the level's JPEG, with the SOF dimensions set to the tile's full-scale
        /// size (so the decoder decodes exactly one restart interval).
        header: Arc<[u8]>,
        /// libjpeg DCT scaling denominator (1, 2, 4 or 8): OpenSlide synthesises levels by
        /// decoding a stored level's tiles at 1/2, 1/4 and 1/8 scale.
        scale_denom: u8,
    },
}

#[cfg(test)]
impl CodecInfo {
    /// Test images: uncompressed chunky 8-bit RGB, no alpha, no predictor (TIFF defaults for
    /// the fields that do not apply).
    pub(crate) fn uncompressed_rgb() -> Self {
        CodecInfo::rgb8(Compression::None, 1, Photometric::Rgb)
    }
}
