//! What the TIFF-based drivers share: an IFD as an [`ImageIndex`] (geometry, tile grid, byte
//! ranges, codec, with every value that sizes memory checked; tiled or stripped, strips as
//! [`super::tiff_strips`] describes), levels from a list of IFDs,
//! `tiff.*` properties, the ICC profile's byte range and the quickhash strings, all as
//! OpenSlide's `openslide-decode-tifflike.c` does.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{format_double, LayoutLevel, QuickhashInput, MAX_IMAGE_EDGE, MAX_TILE_EDGE};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Alpha, BlobRef, CodecInfo, Compression, Grid, ImageIndex, Photometric, SampleBits, TileLoc, TileStream};
use crate::io::ByteSource;
use crate::tiff::{tags, ByteOrder, TiffFile, ValueRange};

/// `true` when IFD `i` is tiled (has TileWidth).
pub(crate) fn is_tiled(tf: &TiffFile, i: usize) -> bool {
    tf.ifds[i].get(tags::TILE_WIDTH).is_some()
}

/// `true` when IFD `i` is stored in strips: no TileWidth, and StripOffsets (tag 273; TIFF 6.0
/// section 3). Read as a grid one strip wide ([`super::tiff_strips`]).
pub(crate) fn is_stripped(tf: &TiffFile, i: usize) -> bool {
    !is_tiled(tf, i) && tf.ifds[i].get(tags::STRIP_OFFSETS).is_some()
}

/// Build the [`ImageIndex`] of IFD `index`: geometry, chunk grid, byte ranges and codec.
///
/// Validates everything that sizes memory or work: dimensions, tile size, array lengths.
///
/// # Errors
/// `Unsupported` naming the feature (bit depth, sample format, compression, photometric...);
/// `Format` for missing or inconsistent required tags; `Limits` for oversized dimensions.
pub(crate) fn image_from_ifd(
    tf: &TiffFile,
    src: &dyn ByteSource,
    at: &Location,
    index: usize,
    what: ImageRef,
) -> Result<ImageIndex> {
    let at = &at.clone().with_image(what);
    let r = tf.reader(src, at, index);
    let width = r.uint(tags::IMAGE_WIDTH)?.ok_or_else(|| Error::format(at, "missing ImageWidth"))?;
    let height = r.uint(tags::IMAGE_LENGTH)?.ok_or_else(|| Error::format(at, "missing ImageLength"))?;
    if width == 0 || height == 0 {
        return Err(Error::format(at, format!("image of size {width}x{height}")));
    }
    if width > MAX_IMAGE_EDGE || height > MAX_IMAGE_EDGE {
        return Err(Error::limits(at, format!("image of size {width}x{height} exceeds {MAX_IMAGE_EDGE} pixels per edge")));
    }
    let spp = r.uint(tags::SAMPLES_PER_PIXEL)?.unwrap_or(1);
    if spp == 0 || spp > 4 {
        return Err(Error::unsupported(at, format!("SamplesPerPixel {spp}")));
    }
    let bits = match r.uints(tags::BITS_PER_SAMPLE)? {
        Some(bps) if !bps.is_empty() && bps.iter().all(|&b| b == 8) => 8,
        Some(bps) if !bps.is_empty() && bps.iter().all(|&b| b == 16) => 16,
        Some(bps) => {
            let b = bps.iter().find(|&&b| b != 8).copied().unwrap_or(0);
            return Err(Error::unsupported(at, format!("BitsPerSample {b} (8- and 16-bit samples are read)")));
        }
        None => return Err(Error::unsupported(at, "BitsPerSample 1 (default; 8- and 16-bit samples are read)")),
    };
    if let Some(sf) = r.uints(tags::SAMPLE_FORMAT)? {
        // Signed 8-bit samples (2) are read as their unsigned bytes, as libtiff's RGBA
        // interface (OpenSlide's reader for them) does: it does not look at SampleFormat for
        // 8-bit samples.
        if let Some(s) = sf.iter().find(|&&s| s != 1 && s != 2) {
            let name = match s {
                3 => "floating point",
                4 => "undefined",
                5 => "complex integer",
                6 => "complex floating point",
                _ => "unknown",
            };
            return Err(Error::unsupported(at, format!("SampleFormat {s} ({name} samples)")));
        }
    }
    // ImageDepth (32997) = TileDepth (32998) > 1, which some writers put in 2D files, is one
    // slice of tiles: libtiff (and so OpenSlide) reads it as a plain 2D image. More slices than
    // one (ImageDepth > TileDepth) would be a volume.
    let image_depth = r.uint(tags::IMAGE_DEPTH)?.unwrap_or(1);
    let tile_depth = r.uint(tags::TILE_DEPTH)?.unwrap_or(1);
    if image_depth > 1 && image_depth != tile_depth {
        return Err(Error::unsupported(
            at,
            format!("ImageDepth {image_depth} with TileDepth {tile_depth} (volumetric tiles)"),
        ));
    }
    if r.uint(tags::FILL_ORDER)?.unwrap_or(1) == 2 {
        return Err(Error::unsupported(at, "FillOrder 2 (LSB-first bit order)"));
    }
    let compression_tag = r.uint(tags::COMPRESSION)?.unwrap_or(1) as u16;
    let compression = match compression_tag {
        1 => Compression::None,
        5 => Compression::Lzw,
        6 => return Err(Error::unsupported(at, "Compression 6 (old-style JPEG, OJPEG)")),
        7 => Compression::Jpeg,
        8 | 32946 => Compression::Deflate,
        33003 => Compression::Jpeg2000 { ycbcr: true },
        33005 => Compression::Jpeg2000 { ycbcr: false },
        50000 => Compression::Zstd,
        50001 => Compression::WebP,
        c => return Err(Error::unsupported(at, format!("Compression {c}"))),
    };
    let photometric_tag = r.uint(tags::PHOTOMETRIC)?;
    let photometric = match photometric_tag {
        Some(1) => Photometric::MinIsBlack,
        Some(2) => Photometric::Rgb,
        Some(6) if compression == Compression::Jpeg => Photometric::YCbCr,
        Some(6) if matches!(compression, Compression::Jpeg2000 { .. }) => Photometric::Rgb,
        Some(6) => return Err(Error::unsupported(at, format!("Photometric 6 (YCbCr) with compression {compression_tag}"))),
        Some(0) => return Err(Error::unsupported(at, "Photometric 0 (MinIsWhite)")),
        Some(3) => return Err(Error::unsupported(at, "Photometric 3 (palette)")),
        Some(5) => {
            // libtiff's RGBA interface reads separated images only with InkSet 1 (CMYK, the
            // default) and at least four samples; ours: exactly four (no extra sample).
            let inkset = r.uint(tags::INK_SET)?.unwrap_or(1);
            if inkset != 1 {
                return Err(Error::unsupported(at, format!("Photometric 5 (separated) with InkSet {inkset} (only CMYK is read)")));
            }
            if spp != 4 {
                return Err(Error::unsupported(at, format!("Photometric 5 (separated, CMYK) with SamplesPerPixel {spp}")));
            }
            Photometric::Separated
        }
        Some(p) => return Err(Error::unsupported(at, format!("Photometric {p}"))),
        None if spp >= 3 => Photometric::Rgb,
        None => Photometric::MinIsBlack,
    };
    if photometric == Photometric::YCbCr && spp != 3 {
        return Err(Error::unsupported(at, format!("JPEG with Photometric 6 (YCbCr) and SamplesPerPixel {spp}")));
    }
    let base = match photometric {
        Photometric::MinIsBlack => 1,
        Photometric::Separated => 4,
        Photometric::Rgb | Photometric::YCbCr | Photometric::Bgr => 3,
    };
    let alpha = if spp == base {
        Alpha::None
    } else if spp == base + 1 {
        match r.uints(tags::EXTRA_SAMPLES)?.and_then(|v| v.first().copied()) {
            Some(1) => Alpha::Associated,
            Some(2) => Alpha::Unassociated,
            _ if compression == Compression::WebP => Alpha::Unassociated,
            // libtiff's RGBA interface (OpenSlide's reader here) takes an unspecified or absent
            // extra sample of a pixel of more than 3 samples (RGB + 1) as associated alpha;
            // grey + an unspecified sample stays opaque (both checked with OpenSlide 4.0.1).
            Some(0) | None if spp > 3 => Alpha::Associated,
            _ => Alpha::Ignored,
        }
    } else {
        return Err(Error::unsupported(at, format!("SamplesPerPixel {spp} with photometric {photometric:?}")));
    };
    let sample_bits = if bits == 16 {
        // 16-bit: lossless greyscale or RGB without extra samples (what libtiff's RGBA
        // interface scales as `codec::samples` documents).
        if !matches!(compression, Compression::None | Compression::Lzw | Compression::Deflate | Compression::Zstd) {
            return Err(Error::unsupported(at, format!("BitsPerSample 16 with compression {compression_tag}")));
        }
        if alpha != Alpha::None {
            return Err(Error::unsupported(at, format!("BitsPerSample 16 with SamplesPerPixel {spp} (extra samples)")));
        }
        SampleBits::U16 { big_endian: tf.byte_order == ByteOrder::Big }
    } else {
        SampleBits::U8
    };
    let predictor = r.uint(tags::PREDICTOR)?.unwrap_or(1) as u16;
    match predictor {
        1 => {}
        2 if matches!(compression, Compression::Lzw | Compression::Deflate | Compression::Zstd | Compression::None) => {}
        p => return Err(Error::unsupported(at, format!("Predictor {p} with compression {compression_tag}"))),
    }
    let planar_separate = match r.uint(tags::PLANAR_CONFIGURATION)?.unwrap_or(1) {
        1 => false,
        2 if spp == 1 => false,
        2 if matches!(compression, Compression::Lzw | Compression::Deflate | Compression::Zstd | Compression::None) => true,
        2 => return Err(Error::unsupported(at, format!("PlanarConfiguration 2 with compression {compression_tag}"))),
        p => return Err(Error::format(at, format!("PlanarConfiguration {p}"))),
    };
    let tables = if compression == Compression::Jpeg { r.raw(tags::JPEG_TABLES)? } else { None };
    let stream = match tables {
        Some(t) => TileStream::JpegTablesSplice { tables: Arc::from(t) },
        None => TileStream::Plain,
    };
    let ycbcr_subsampling = match r.uints(tags::YCBCR_SUBSAMPLING)? {
        Some(v) if v.len() >= 2 => (v[0] as u16, v[1] as u16),
        _ => (2, 2),
    };
    let tiled = r.has(tags::TILE_WIDTH);
    let (tile_width, tile_height, offsets_tag, counts_tag) = if tiled {
        let tw = r.uint(tags::TILE_WIDTH)?.unwrap_or(0);
        let th = r.uint(tags::TILE_LENGTH)?.ok_or_else(|| Error::format(at, "TileWidth without TileLength"))?;
        (tw, th, tags::TILE_OFFSETS, tags::TILE_BYTE_COUNTS)
    } else {
        // TIFF 6.0 section 8: RowsPerStrip defaults to 2^32 - 1, one strip for the image; a
        // value above ImageLength also means one strip. 0 rows cannot hold the image.
        let rps = r.uint(tags::ROWS_PER_STRIP)?.unwrap_or(u32::MAX as u64);
        if rps == 0 {
            return Err(Error::format(at, "RowsPerStrip 0"));
        }
        (width, rps.min(height), tags::STRIP_OFFSETS, tags::STRIP_BYTE_COUNTS)
    };
    if tile_width == 0 || tile_height == 0 {
        return Err(Error::format(at, format!("chunk size {tile_width}x{tile_height}")));
    }
    // A strip is as wide as the image and at most as tall: its memory is bounded when it is
    // read (the read working set, `SLIDESTREAM_READ_WORKING_BYTES`), not here.
    if tiled && (tile_width > MAX_TILE_EDGE || tile_height > MAX_TILE_EDGE) {
        return Err(Error::limits(at, format!("chunk size {tile_width}x{tile_height} exceeds {MAX_TILE_EDGE} pixels per edge")));
    }
    let tiles_across = width.div_ceil(tile_width);
    let tiles_down = height.div_ceil(tile_height);
    let planes = if planar_separate { spp } else { 1 };
    let expected = tiles_across
        .checked_mul(tiles_down)
        .and_then(|n| n.checked_mul(planes))
        .ok_or_else(|| Error::limits(at, "tile count overflows"))?;
    // Each chunk needs an offset and a byte count of at least one byte each in the file.
    if expected > tf.file_len {
        return Err(Error::limits(at, format!("{expected} chunks cannot fit in a file of {} bytes", tf.file_len)));
    }
    let offsets = r.uints(offsets_tag)?.ok_or_else(|| Error::format(at, "missing tile/strip offsets"))?;
    let counts = r.uints(counts_tag)?.ok_or_else(|| Error::format(at, "missing tile/strip byte counts"))?;
    if (offsets.len() as u64) < expected || (counts.len() as u64) < expected {
        return Err(Error::format(
            at,
            format!("{} offsets and {} byte counts for {expected} chunks", offsets.len(), counts.len()),
        ));
    }
    let mut tiles: Vec<TileLoc> = offsets
        .iter()
        .zip(counts.iter())
        .take(expected as usize)
        .map(|(&offset, &length)| TileLoc::primary(offset, length))
        .collect();
    let (mut tile_height, mut tiles_down) = (tile_height, tiles_down);
    if !tiled && compression == Compression::None {
        let per_plane = if planar_separate { 1 } else { spp };
        let row_bytes = width.saturating_mul(per_plane).saturating_mul(bits / 8);
        if let Some((band, bands)) = super::tiff_strips::uncompressed_bands(width, height, tile_height, row_bytes, planes, &tiles) {
            (tile_height, tiles_down, tiles) = (band, height.div_ceil(band), bands);
        }
    }
    let grid = Grid::regular(tiles_across, tiles_down, planes as usize, tiles)
        .ok_or_else(|| Error::format(at, "tile grid does not match the chunk count"))?;
    Ok(ImageIndex {
        width,
        height,
        tile_width: tile_width as u32,
        tile_height: tile_height as u32,
        tiled,
        codec: Arc::new(CodecInfo {
            compression,
            compression_tag,
            photometric,
            samples_per_pixel: spp as u16,
            sample_bits,
            alpha,
            predictor,
            planar_separate,
            stream,
            ycbcr_subsampling,
        }),
        grid,
    })
}

/// µm per pixel from IFD `i`'s X/YResolution as OpenSlide's tifflike reader sets
/// `openslide.mpp-x/-y` (`_openslide_tifflike_set_resolution_props`): ResolutionUnit
/// centimeter (10,000 µm) or inch (25,400 µm, also TIFF's default); `None` for other units,
/// missing, zero or non-finite values.
///
/// # Errors
/// As reading any tag (values outside the file).
pub(crate) fn resolution_mpp(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<Option<(f64, f64)>> {
    let r = tf.reader(src, at, i);
    let um = match r.uint(tags::RESOLUTION_UNIT)?.unwrap_or(2) {
        2 => 25_400.0,
        3 => 10_000.0,
        _ => return Ok(None),
    };
    Ok(match (r.float(tags::X_RESOLUTION)?, r.float(tags::Y_RESOLUTION)?) {
        (Some(x), Some(y)) if x != 0.0 && y != 0.0 && x.is_finite() && y.is_finite() => Some((um / x, um / y)),
        _ => None,
    })
}

/// The levels of IFDs `ifds`, level 0 first (downsamples and ordering are checked by
/// `finish`).
pub(crate) fn levels_from_ifds(tf: &TiffFile, src: &dyn ByteSource, at: &Location, ifds: &[usize]) -> Result<Vec<LayoutLevel>> {
    ifds.iter()
        .enumerate()
        .map(|(k, &i)| Ok(LayoutLevel { image: image_from_ifd(tf, src, at, i, ImageRef::Level(k))?, origin: format!("IFD {i}") }))
        .collect()
}

/// Level IFDs, and (name, IFD) of the associated images, of an Aperio-style TIFF.
pub(crate) type AperioSplit = (Vec<usize>, Vec<(String, usize)>);

/// The main chain split as Aperio and Huron files are (OpenSlide 4.0.1's `openslide-vendor-aperio.c`
/// and `-huron.c`): every tiled IFD is a level; of the others, IFD 1 is the `thumbnail`, one
/// with NewSubfileType 1 the `label` and 9 the `macro` (others are ignored). Returns the level
/// IFDs in file order and (name, IFD) of the associated images.
///
/// # Errors
/// A NewSubfileType that cannot be read (`Format`).
pub(crate) fn split_aperio_style(tf: &TiffFile, src: &dyn ByteSource, at: &Location) -> Result<AperioSplit> {
    let mut levels = Vec::new();
    let mut associated = Vec::new();
    for i in 0..tf.ifds.len() {
        if is_tiled(tf, i) {
            levels.push(i);
            continue;
        }
        let name = if i == 1 {
            Some("thumbnail")
        } else {
            match tf.reader(src, at, i).uint(tags::NEW_SUBFILE_TYPE)? {
                Some(1) => Some("label"),
                Some(9) => Some("macro"),
                _ => None,
            }
        };
        if let Some(n) = name {
            associated.push((n.to_string(), i));
        }
    }
    Ok((levels, associated))
}

/// Where the ICC profile (tag 34675) of IFD `i` is, without reading it; `None` when absent or
/// empty. Its length is what `openslide.icc-size` reports (OpenSlide takes the tag's count).
///
/// # Errors
/// `Limits` for a value larger than the file or [`crate::tiff::MAX_TAG_BYTES`]; `Format` when
/// it lies past the end of the file (as reading it would).
pub(crate) fn icc_ref(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<Option<BlobRef>> {
    let Some(e) = tf.ifds[i].get(tags::ICC_PROFILE) else { return Ok(None) };
    Ok(match tf.value_range(at, e)? {
        ValueRange::Inline(b) if b.is_empty() => None,
        ValueRange::Inline(b) => Some(BlobRef::Bytes(Arc::from(b))),
        ValueRange::At { len: 0, .. } => None,
        ValueRange::At { offset, len } => {
            crate::tiff::check_inside(src, at, e.tag, offset, len)?;
            Some(BlobRef::Range(TileLoc::primary(offset, len)))
        }
    })
}

/// The strings OpenSlide hashes after the lowest level's tiles (`openslide-decode-tifflike.c`):
/// for each of ImageDescription, Make, Model, Software, DateTime, Artist, HostComputer,
/// Copyright and DocumentName of IFD `i`, `tiff.<Tag>` and its ASCII value (empty when absent
/// or not ASCII).
pub(crate) fn quickhash_input(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<QuickhashInput> {
    let r = tf.reader(src, at, i);
    let mut strings = Vec::with_capacity(ASCII_TAGS.len());
    for (tag, name) in ASCII_TAGS {
        let value = match r.ifd.get(tag) {
            Some(e) if e.field_type == 2 => r.ascii(tag)?.unwrap_or_default(),
            _ => String::new(),
        };
        strings.push((format!("tiff.{name}"), value));
    }
    Ok(QuickhashInput { lowest_level_tiles: true, strings, ..Default::default() })
}

/// The ASCII tags OpenSlide reports as `tiff.*` properties (and hashes), in its order.
const ASCII_TAGS: [(u16, &str); 9] = [
    (tags::IMAGE_DESCRIPTION, "ImageDescription"),
    (tags::MAKE, "Make"),
    (tags::MODEL, "Model"),
    (tags::SOFTWARE, "Software"),
    (tags::DATE_TIME, "DateTime"),
    (tags::ARTIST, "Artist"),
    (tags::HOST_COMPUTER, "HostComputer"),
    (tags::COPYRIGHT, "Copyright"),
    (tags::DOCUMENT_NAME, "DocumentName"),
];

/// Properties from TIFF tags of IFD `i`, named `tiff.<TagName>` as OpenSlide does
/// (`openslide-decode-tifflike.c`).
pub(crate) fn tiff_properties(
    tf: &TiffFile,
    src: &dyn ByteSource,
    at: &Location,
    i: usize,
    out: &mut BTreeMap<String, String>,
) -> Result<()> {
    let r = tf.reader(src, at, i);
    for (tag, name) in ASCII_TAGS {
        if let Some(e) = r.ifd.get(tag) {
            if e.field_type == 2 {
                out.insert(format!("tiff.{name}"), r.ascii(tag)?.unwrap_or_default());
            }
        }
    }
    for (tag, name) in [
        (tags::X_RESOLUTION, "XResolution"),
        (tags::Y_RESOLUTION, "YResolution"),
        (tags::X_POSITION, "XPosition"),
        (tags::Y_POSITION, "YPosition"),
    ] {
        if let Some(v) = r.float(tag)? {
            // A RATIONAL with denominator 0 (NaN or infinite) is not stored, as OpenSlide.
            if v.is_finite() {
                out.insert(format!("tiff.{name}"), format_double(v));
            }
        }
    }
    if let Some(u) = r.uint(tags::RESOLUTION_UNIT)? {
        let s = match u {
            1 => "none".to_string(),
            2 => "inch".to_string(),
            3 => "centimeter".to_string(),
            _ => "unknown".to_string(),
        };
        out.insert("tiff.ResolutionUnit".into(), s);
    } else {
        // OpenSlide reports TIFF's default unit (2 = inch) when the tag is absent.
        out.insert("tiff.ResolutionUnit".into(), "inch".into());
    }
    Ok(())
}

