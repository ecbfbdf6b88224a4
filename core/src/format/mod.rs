//! Format drivers: detect a slide format by content, never by extension, and build its
//! [`SlideIndex`].
//!
//! Drivers are tried in order ([`DRIVERS`]): vendor drivers first, `generic-tiff` last, as in
//! OpenSlide's format table (`openslide.c`). Each driver either accepts the file or says why it
//! declined; the reasons form a [`DetectionReport`] (`slidestream info --why`).

pub mod aperio;
pub mod generic_tiff;
pub(crate) mod known;
mod quickhash;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, ImageIndex, LevelIndex, Photometric, SlideIndex, TileLoc};
use crate::io::ByteSource;
use crate::tiff::{tags, TiffFile};

/// Largest tile (or strip chunk) edge accepted, in pixels: a decoded chunk must fit in memory
/// many times over (16384² RGBA = 1 GiB).
pub const MAX_TILE_EDGE: u64 = 16_384;
/// Largest image edge accepted, in pixels (2^31 - 1, as OpenSlide's int32 coordinates).
pub const MAX_IMAGE_EDGE: u64 = (1 << 31) - 1;

/// What a driver sees when asked to detect or open a file.
pub struct Probe<'a> {
    /// The bytes.
    pub src: &'a dyn ByteSource,
    /// The file, for errors.
    pub at: &'a Location,
    /// The TIFF structure, when the file parses as TIFF.
    pub tiff: std::result::Result<&'a TiffFile, &'a Error>,
}

/// A format driver (one file per vendor under `format/`).
pub trait FormatDriver: Sync {
    /// The vendor name (`openslide.vendor`).
    fn name(&self) -> &'static str;
    /// `Ok(())` when the driver recognises the file, else the reason it declined.
    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String>;
    /// Build the index of a file `detect` accepted.
    ///
    /// # Errors
    /// Any [`Error`] from structure reading; `Unsupported` for features outside the driver.
    fn open(&self, probe: &Probe<'_>) -> Result<SlideIndex>;
}

/// The ordered driver table: vendor drivers first, generic TIFF last.
pub static DRIVERS: &[&dyn FormatDriver] = &[&aperio::Aperio, &generic_tiff::GenericTiff];

/// For each driver in order: its name and `Ok(())` if it accepted the file or the reason it
/// declined. Detection stops at the first driver that accepts.
#[derive(Debug, Clone, Default)]
pub struct DetectionReport {
    /// (driver name, verdict) in the order tried.
    pub verdicts: Vec<(&'static str, std::result::Result<(), String>)>,
}

impl DetectionReport {
    /// The driver that accepted the file, if any.
    pub fn chosen(&self) -> Option<&'static str> {
        self.verdicts.iter().find(|(_, v)| v.is_ok()).map(|(n, _)| *n)
    }
}

impl std::fmt::Display for DetectionReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, v) in &self.verdicts {
            match v {
                Ok(()) => writeln!(f, "{name}: accepted")?,
                Err(why) => writeln!(f, "{name}: declined: {why}")?,
            }
        }
        Ok(())
    }
}

/// Run detection over [`DRIVERS`]; returns the report and the accepting driver.
pub fn detect(probe: &Probe<'_>) -> (DetectionReport, Option<&'static dyn FormatDriver>) {
    let mut report = DetectionReport::default();
    for d in DRIVERS {
        let v = d.detect(probe);
        let ok = v.is_ok();
        report.verdicts.push((d.name(), v));
        if ok {
            return (report, Some(*d));
        }
    }
    (report, None)
}

/// `true` when IFD `i` is tiled (has TileWidth).
pub(crate) fn is_tiled(tf: &TiffFile, i: usize) -> bool {
    tf.ifds[i].get(tags::TILE_WIDTH).is_some()
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
    if let Some(bps) = r.uints(tags::BITS_PER_SAMPLE)? {
        if let Some(b) = bps.iter().find(|&&b| b != 8) {
            return Err(Error::unsupported(at, format!("BitsPerSample {b} (only 8-bit samples are read)")));
        }
    } else {
        return Err(Error::unsupported(at, "BitsPerSample 1 (default; only 8-bit samples are read)"));
    }
    if let Some(sf) = r.uints(tags::SAMPLE_FORMAT)? {
        if let Some(s) = sf.iter().find(|&&s| s != 1) {
            let name = match s {
                2 => "signed integer",
                3 => "floating point",
                _ => "unknown",
            };
            return Err(Error::unsupported(at, format!("SampleFormat {s} ({name} samples)")));
        }
    }
    if r.uint(tags::IMAGE_DEPTH)?.unwrap_or(1) > 1 {
        return Err(Error::unsupported(at, "ImageDepth > 1 (volumetric tiles)"));
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
        Some(5) => return Err(Error::unsupported(at, "Photometric 5 (separated, CMYK)")),
        Some(p) => return Err(Error::unsupported(at, format!("Photometric {p}"))),
        None if spp >= 3 => Photometric::Rgb,
        None => Photometric::MinIsBlack,
    };
    let base = if photometric == Photometric::MinIsBlack { 1 } else { 3 };
    let alpha = if spp == base {
        Alpha::None
    } else if spp == base + 1 {
        match r.uints(tags::EXTRA_SAMPLES)?.and_then(|v| v.first().copied()) {
            Some(1) => Alpha::Associated,
            Some(2) => Alpha::Unassociated,
            _ if compression == Compression::WebP => Alpha::Unassociated,
            _ => Alpha::Ignored,
        }
    } else {
        return Err(Error::unsupported(at, format!("SamplesPerPixel {spp} with photometric {photometric:?}")));
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
    let jpeg_tables = if compression == Compression::Jpeg { r.raw(tags::JPEG_TABLES)?.map(Arc::from) } else { None };
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
        let rps = r.uint(tags::ROWS_PER_STRIP)?.unwrap_or(u32::MAX as u64).min(height);
        (width, rps, tags::STRIP_OFFSETS, tags::STRIP_BYTE_COUNTS)
    };
    if tile_width == 0 || tile_height == 0 {
        return Err(Error::format(at, format!("chunk size {tile_width}x{tile_height}")));
    }
    if tile_width > MAX_TILE_EDGE || tile_height > MAX_TILE_EDGE {
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
    let tiles = offsets
        .iter()
        .zip(counts.iter())
        .take(expected as usize)
        .map(|(&offset, &byte_count)| TileLoc { offset, byte_count })
        .collect();
    Ok(ImageIndex {
        ifd_index: index,
        width,
        height,
        tile_width: tile_width as u32,
        tile_height: tile_height as u32,
        tiles_across,
        tiles_down,
        tiled,
        codec: Arc::new(CodecInfo {
            compression,
            compression_tag,
            photometric,
            samples_per_pixel: spp as u16,
            alpha,
            predictor,
            planar_separate,
            jpeg_tables,
            ycbcr_subsampling,
        }),
        tiles,
    })
}

/// Format a float the way OpenSlide formats its double properties (GLib's `g_ascii_dtostr`,
/// i.e. C `%.17g` in the C locale): e.g. "1", "0.499", "4.0161290322580641",
/// "352.85814912343398".
pub fn format_double(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() { "nan".into() } else if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    g_style(v, 17)
}

fn g_style(v: f64, prec: usize) -> String {
    // printf("%.{prec}g"): the exponent is that of the value rounded to `prec` digits.
    let sci = format!("{:.*e}", prec - 1, v);
    let (mant, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = e.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        format!("{}e{}{:02}", trim_zeros(mant), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Add the standard `openslide.*` level and associated-image properties shared by all drivers.
pub(crate) fn add_standard_properties(idx: &mut SlideIndex) {
    let p = &mut idx.properties;
    p.insert("openslide.vendor".into(), idx.vendor.into());
    p.insert("openslide.level-count".into(), idx.levels.len().to_string());
    for (i, l) in idx.levels.iter().enumerate() {
        p.insert(format!("openslide.level[{i}].width"), l.image.width.to_string());
        p.insert(format!("openslide.level[{i}].height"), l.image.height.to_string());
        p.insert(format!("openslide.level[{i}].downsample"), format_double(l.downsample));
        if l.image.tiled {
            p.insert(format!("openslide.level[{i}].tile-width"), l.image.tile_width.to_string());
            p.insert(format!("openslide.level[{i}].tile-height"), l.image.tile_height.to_string());
        }
    }
    for (name, a) in &idx.associated {
        p.insert(format!("openslide.associated.{name}.width"), a.width.to_string());
        p.insert(format!("openslide.associated.{name}.height"), a.height.to_string());
    }
    for (name, icc) in &idx.associated_icc {
        p.insert(format!("openslide.associated.{name}.icc-size"), icc.len().to_string());
    }
    if let Some(icc) = &idx.icc_profile {
        p.insert("openslide.icc-size".into(), icc.len().to_string());
    }
}

/// Build levels from IFD indices (level 0 first); computes OpenSlide downsamples and checks
/// that sizes decrease.
pub(crate) fn build_levels(
    tf: &TiffFile,
    src: &dyn ByteSource,
    at: &Location,
    ifds: &[usize],
) -> Result<Vec<LevelIndex>> {
    let mut levels: Vec<LevelIndex> = Vec::with_capacity(ifds.len());
    for (k, &i) in ifds.iter().enumerate() {
        let image = image_from_ifd(tf, src, at, i, ImageRef::Level(k))?;
        let downsample = match levels.first() {
            None => 1.0,
            Some(l0) => {
                (l0.image.height as f64 / image.height as f64 + l0.image.width as f64 / image.width as f64) / 2.0
            }
        };
        // OpenSlide (openslide.c) refuses pyramids whose downsamples do not increase.
        if let Some(prev) = levels.last() {
            if downsample <= prev.downsample {
                return Err(Error::format(
                    at,
                    format!("level {k} (IFD {i}) has downsample {downsample} not above level {}'s {}", k - 1, prev.downsample),
                ));
            }
        }
        levels.push(LevelIndex { image, downsample });
    }
    Ok(levels)
}

/// Parse a double property value as OpenSlide's `_openslide_parse_double`: commas become
/// points, the whole (non-empty) string must parse, NaN is refused.
pub(crate) fn parse_double(s: &str) -> Option<f64> {
    let v: f64 = s.replace(',', ".").parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Read the ICC profile (tag 34675) of IFD `i`.
pub(crate) fn icc_of(tf: &TiffFile, src: &dyn ByteSource, at: &Location, i: usize) -> Result<Option<Arc<[u8]>>> {
    Ok(tf.reader(src, at, i).raw(tags::ICC_PROFILE)?.filter(|v| !v.is_empty()).map(Arc::from))
}

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
    let ascii = [
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
    for (tag, name) in ascii {
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

#[cfg(test)]
mod tests {
    use super::format_double;

    #[test]
    fn doubles_format_like_openslide() {
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(2.0), "2");
        assert_eq!(format_double(4.016129032258064), "4.0161290322580641");
        assert_eq!(format_double(8.086312118570184), "8.0863121185701843");
        assert_eq!(format_double(0.499), "0.499");
        assert_eq!(format_double(2.0005055500659967), "2.0005055500659967");
        assert_eq!(format_double(10000.0 / 28.340_000_152_587_89), "352.85814912343398");
        assert_eq!(format_double(1.0 / 3.0), "0.33333333333333331");
        assert_eq!(format_double(1e-7), "9.9999999999999995e-08");
        assert_eq!(format_double(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(format_double(0.0001), "0.0001");
    }
}
