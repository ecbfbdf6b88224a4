//! The instances of one DICOM WSI series and how they make a slide: which file is a level
//! (or a member of a level's concatenation) and which an associated image, with the checks
//! OpenSlide 4.0.1 applies (`maybe_add_file`, `add_level_file`, `finalize_level` in
//! `openslide-vendor-dicom.c`; libdicom's required metadata).

use std::path::PathBuf;

use dicom_dictionary_std::tags;

use super::header::{int, text, text_at, Header};
use crate::error::{Error, Location, Result};
use crate::index::{Compression, Photometric};
use crate::io::ByteSource;

/// What an instance is, from ImageType value 3 (OpenSlide's "image flavor").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// `VOLUME`: a pyramid level.
    Level,
    /// `LABEL`, `OVERVIEW`, `THUMBNAIL`: associated `label`, `macro`, `thumbnail`.
    Associated(&'static str),
}

/// One file of the series that OpenSlide keeps (a level or an associated image).
pub(crate) struct Instance<'a> {
    /// The file.
    pub path: PathBuf,
    /// Its bytes.
    pub src: Box<dyn ByteSource + 'a>,
    /// Its header.
    pub header: Header,
    /// TotalPixelMatrixColumns × TotalPixelMatrixRows.
    pub dims: (u64, u64),
    /// Columns × Rows (one frame).
    pub tile: (u32, u32),
    /// NumberOfFrames.
    pub frames: u64,
    /// How frames are coded.
    pub compression: Compression,
    /// Colour of decoded JPEG frames (Rgb: no transform, as OpenSlide's `JCS_RGB`).
    pub photometric: Photometric,
    /// SOPInstanceUID.
    pub sop_uid: String,
    /// ConcatenationUID.
    pub concat_uid: Option<String>,
    /// InConcatenationNumber (1-based; 1 when absent).
    pub concat_number: u64,
    /// InConcatenationTotalNumber.
    pub concat_total: Option<u64>,
    /// ConcatenationFrameOffsetNumber (0 when absent).
    pub frame_offset: u64,
}

/// The flavor of a header, `None` for files OpenSlide ignores.
pub(crate) fn flavor(h: &Header) -> Option<Flavor> {
    match text_at(&h.data, tags::IMAGE_TYPE, 2)?.as_str() {
        "VOLUME" => Some(Flavor::Level),
        "LABEL" => Some(Flavor::Associated("label")),
        "OVERVIEW" => Some(Flavor::Associated("macro")),
        "THUMBNAIL" => Some(Flavor::Associated("thumbnail")),
        _ => None,
    }
}

/// A required integer element (libdicom rejects the file without it).
fn need(h: &Header, tag: dicom_core::Tag, name: &str, at: &Location) -> Result<i64> {
    int(&h.data, tag).ok_or_else(|| Error::format(at, format!("missing or invalid {name}")))
}

/// Check libdicom's required metadata; `Err` means the file is skipped (a sibling) or the open
/// fails (the opened file).
pub(crate) fn check_required(h: &Header, at: &Location) -> Result<()> {
    for (tag, name) in [
        (tags::NUMBER_OF_FRAMES, "NumberOfFrames"),
        (tags::ROWS, "Rows"),
        (tags::COLUMNS, "Columns"),
        (tags::SAMPLES_PER_PIXEL, "SamplesPerPixel"),
        (tags::BITS_ALLOCATED, "BitsAllocated"),
        (tags::BITS_STORED, "BitsStored"),
        (tags::PIXEL_REPRESENTATION, "PixelRepresentation"),
    ] {
        need(h, tag, name, at)?;
    }
    if int(&h.data, tags::NUMBER_OF_FRAMES) == Some(0) {
        return Err(Error::format(at, "NumberOfFrames is 0"));
    }
    if text(&h.data, tags::PHOTOMETRIC_INTERPRETATION).is_none() {
        return Err(Error::format(at, "missing PhotometricInterpretation"));
    }
    Ok(())
}

/// Build the [`Instance`] of a level or associated file, checking what OpenSlide requires of
/// its pixels (transfer syntax, 8-bit 3-sample chunky, photometric per syntax).
///
/// # Errors
/// `Unsupported` naming the file and the value for pixels outside OpenSlide's set (JPEG-LS,
/// 16-bit, monochrome, planar ...); `Format` for a missing required element.
pub(crate) fn instance<'a>(path: PathBuf, src: Box<dyn ByteSource + 'a>, header: Header, at: &Location) -> Result<Instance<'a>> {
    let d = &header.data;
    let ts = header.transfer_syntax.as_str();
    let compression = match ts {
        "1.2.840.10008.1.2.1" => Compression::None,
        "1.2.840.10008.1.2.4.50" => Compression::Jpeg,
        // JPEG 2000 (.90 lossless, .91) and High-Throughput JPEG 2000 (PS3.5 A.4.11: .201
        // lossless, .202 lossless RPCL, .203): HTJ2K codestreams (ISO/IEC 15444-15, a CAP
        // marker after SIZ) decode through the same OpenJPEG (2.5's ht_dec), which applies
        // the codestream's RCT / ICT itself.
        "1.2.840.10008.1.2.4.90" | "1.2.840.10008.1.2.4.91" | "1.2.840.10008.1.2.4.201" | "1.2.840.10008.1.2.4.202" | "1.2.840.10008.1.2.4.203" => {
            Compression::Jpeg2000 { ycbcr: false }
        }
        other => return Err(Error::unsupported(at, format!("Unsupported transfer syntax {other}"))),
    };
    for (tag, name, want) in [
        (tags::PLANAR_CONFIGURATION, "PlanarConfiguration", 0),
        (tags::BITS_ALLOCATED, "BitsAllocated", 8),
        (tags::BITS_STORED, "BitsStored", 8),
        (tags::HIGH_BIT, "HighBit", 7),
        (tags::SAMPLES_PER_PIXEL, "SamplesPerPixel", 3),
        (tags::PIXEL_REPRESENTATION, "PixelRepresentation", 0),
    ] {
        match int(d, tag) {
            Some(v) if v == want => {}
            Some(v) => return Err(Error::unsupported(at, format!("{name} {v} (only {want} is read)"))),
            None => return Err(Error::format(at, format!("missing {name}"))),
        }
    }
    if let Some(n) = int(d, tags::TOTAL_PIXEL_MATRIX_FOCAL_PLANES) {
        if n != 1 {
            return Err(Error::unsupported(at, format!("TotalPixelMatrixFocalPlanes {n} (only 1 is read)")));
        }
    }
    let pi = text(d, tags::PHOTOMETRIC_INTERPRETATION).unwrap_or_default();
    let photometric = match (compression, pi.as_str()) {
        (Compression::Jpeg, "YBR_FULL_422") => Photometric::YCbCr,
        (Compression::Jpeg, "RGB") => Photometric::Rgb,
        (Compression::None, "RGB") => Photometric::Rgb,
        (Compression::Jpeg2000 { .. }, "RGB" | "YBR_RCT") => Photometric::Rgb,
        (Compression::Jpeg2000 { .. }, "YBR_ICT") if ts.ends_with(".91") || ts.ends_with(".203") => Photometric::Rgb,
        _ => return Err(Error::unsupported(at, format!("PhotometricInterpretation {pi} with transfer syntax {ts}"))),
    };
    let get = |tag, name: &str| -> Result<u64> {
        let v = need(&header, tag, name, at)?;
        u64::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| Error::format(at, format!("{name} {v}")))
    };
    let rows = get(tags::ROWS, "Rows")?;
    let cols = get(tags::COLUMNS, "Columns")?;
    let frames = get(tags::NUMBER_OF_FRAMES, "NumberOfFrames")?;
    let w = get(tags::TOTAL_PIXEL_MATRIX_COLUMNS, "TotalPixelMatrixColumns")?;
    let h = get(tags::TOTAL_PIXEL_MATRIX_ROWS, "TotalPixelMatrixRows")?;
    if rows > crate::format::MAX_TILE_EDGE || cols > crate::format::MAX_TILE_EDGE {
        return Err(Error::limits(at, format!("frames of {cols}x{rows} pixels")));
    }
    let sop_uid = header.sop_instance_uid().ok_or_else(|| Error::format(at, "missing SOPInstanceUID"))?;
    let concat_number = int(d, tags::IN_CONCATENATION_NUMBER).unwrap_or(1);
    if !(1..=65535).contains(&concat_number) {
        return Err(Error::format(at, format!("InConcatenationNumber {concat_number} (1..=65535)")));
    }
    let frame_offset = int(d, tags::CONCATENATION_FRAME_OFFSET_NUMBER).unwrap_or(0);
    let frame_offset = u64::try_from(frame_offset).map_err(|_| Error::format(at, format!("ConcatenationFrameOffsetNumber {frame_offset}")))?;
    Ok(Instance {
        concat_uid: header.concatenation_uid(),
        concat_total: int(d, tags::IN_CONCATENATION_TOTAL_NUMBER).and_then(|v| u64::try_from(v).ok()),
        path,
        src,
        dims: (w, h),
        tile: (cols as u32, rows as u32),
        frames,
        compression,
        photometric,
        sop_uid,
        concat_number: concat_number as u64,
        frame_offset,
        header,
    })
}

/// The members of one level, in InConcatenationNumber order, after OpenSlide's checks.
///
/// # Errors
/// `Format` for a concatenation slot used twice, a gap, a total that disagrees, a lone member
/// with a ConcatenationUID, members of different ConcatenationUIDs or tile sizes.
pub(crate) fn order_level<'a>(mut members: Vec<Instance<'a>>, at: &Location) -> Result<Vec<Instance<'a>>> {
    // Duplicates of one SOP instance are ignored.
    let mut seen = std::collections::BTreeSet::new();
    members.retain(|m| seen.insert(m.sop_uid.clone()));
    if members.len() > 1 {
        let uid = &members[0].concat_uid;
        if uid.is_none() || members.iter().any(|m| &m.concat_uid != uid) {
            return Err(Error::format(
                at,
                format!("Slide contains unexpected image: {} instances of {}x{} pixels that are not one concatenation", members.len(), members[0].dims.0, members[0].dims.1),
            ));
        }
        if members.iter().any(|m| m.tile != members[0].tile) {
            return Err(Error::format(at, "concatenation members of different frame sizes"));
        }
    } else if members[0].concat_uid.is_some() {
        return Err(Error::format(at, format!("Missing SOP instance of concatenation {}", members[0].concat_uid.as_deref().unwrap_or(""))));
    }
    members.sort_by_key(|m| m.concat_number);
    let n = members.len() as u64;
    for (i, m) in members.iter().enumerate() {
        if m.concat_number != i as u64 + 1 {
            return Err(Error::format(
                at,
                if m.concat_number == i as u64 { format!("InConcatenationNumber {} used twice", m.concat_number) } else { format!("Missing SOP instance {}/{n} in concatenation", i + 1) },
            ));
        }
        if let Some(t) = m.concat_total {
            if t != n {
                return Err(Error::format(at, format!("Missing SOP instance: InConcatenationTotalNumber {t}, {n} instances found")));
            }
        }
    }
    Ok(members)
}
