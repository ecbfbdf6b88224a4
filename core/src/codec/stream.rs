//! Tile codestream framing ([`TileStream`]): what is added to a tile's stored bytes to get a
//! complete JPEG stream. One function, [`frame_jpeg`], shared by the CPU decoders and the GPU
//! engine's host-bitstream path, so both decode the same bytes.
//!
//! * [`TileStream::Plain`] / [`TileStream::JpegTablesSplice`]: [`super::jpeg::splice`] (tables
//!   spliced after SOI, an Adobe marker stating the TIFF photometric's colour transform).
//! * [`TileStream::NdpiRestartRun`]: the level's JPEG header (SOI ... SOS, SOF dimensions set to
//!   the tile's) + the tile's restart interval, whose trailing restart marker becomes EOI. This
//!   follows OpenSlide 4.0.1's `jpeg_random_access_src` (`openslide-vendor-hamamatsu.c`),
//!   which checks the byte before the final one is 0xFF and overwrites the final one with EOI;
//!   OpenSlide sets libjpeg's `image_width/height` to the tile's after reading the header, which
//!   the patched SOF does for any decoder. The header's own markers are kept as written, so
//!   libjpeg-turbo chooses the colour transform from them as OpenSlide's libjpeg does.
//!
//! Also here: the JPEG marker walk the NDPI driver needs at open ([`scan_header`]) and the SOF
//! patch ([`patch_sof_size`]).

use super::jpeg;
use super::jpeg_color;
use crate::error::CodecError;
use crate::index::{CodecInfo, TileStream};

/// Most bytes framing adds in front of a tile's stored bytes (tables or header, plus the Adobe
/// marker and SOI): what a caller reserves per tile.
pub fn prefix_len(codec: &CodecInfo) -> usize {
    match &codec.stream {
        TileStream::NdpiRestartRun { header, .. } => header.len(),
        TileStream::JpegTablesSplice { tables } => tables.len() + 32,
        _ => 32,
    }
}

/// Build the complete JPEG codestream of one tile from its stored bytes into `out` (cleared
/// first), as the image's [`TileStream`] says.
///
/// # Errors
/// [`CodecError::Data`] for stored bytes that cannot be framed: a tile without SOI (spliced
/// streams), malformed marker segments, or an NDPI restart run that does not end in a marker.
pub fn frame_jpeg(codec: &CodecInfo, stored: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
    match &codec.stream {
        TileStream::NdpiRestartRun { header, .. } => {
            let n = stored.len();
            if n < 2 || stored[n - 2] != 0xFF {
                return Err(format!(
                    "NDPI restart interval of {n} bytes does not end in a marker (wrong MCU start, or the data is damaged)"
                )
                .into());
            }
            out.clear();
            out.reserve(header.len() + n);
            extend_without_dri(out, header);
            out.extend_from_slice(&stored[..n - 1]);
            out.push(0xD9);
            Ok(())
        }
        TileStream::Base64 => {
            let raw = super::base64_text::decode(stored).map_err(|m| CodecError::Data(format!("base64: {m}")))?;
            jpeg::splice(None, &raw, jpeg_color(codec), out)
        }
        _ => jpeg::splice(codec.jpeg_tables(), stored, jpeg_color(codec), out),
    }
}

/// Append `header` (SOI ... SOS of an NDPI level) to `out` without its DRI segment: a tile is
/// exactly one restart interval, so its stream needs no restart markers, and a stream without
/// a restart interval decodes on libjpeg-turbo's fast Huffman path (`jdhuff.c` `decode_mcu`
/// turns the fast path off whenever `restart_interval` is set). The entropy-coded data and the
/// pixels are the same: a restart only resets the DC predictions, which the stream start does
/// too. A header whose segments cannot be walked is appended as it is.
fn extend_without_dri(out: &mut Vec<u8>, header: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&header[..2.min(header.len())]);
    let mut i = 2usize;
    while i + 4 <= header.len() && header[i] == 0xFF {
        let marker = header[i + 1];
        if marker == 0xDA {
            out.extend_from_slice(&header[i..]);
            return;
        }
        let end = i + 2 + u16::from_be_bytes([header[i + 2], header[i + 3]]) as usize;
        if end > header.len() {
            break;
        }
        if marker != 0xDD {
            out.extend_from_slice(&header[i..end]);
        }
        i = end;
    }
    out.truncate(start);
    out.extend_from_slice(header);
}

/// Frame the restart runs of `runs.len()` NDPI tiles of one column, in consecutive rows, as
/// one JPEG of `tile_width × (n × tile_height)`: the level's header with the SOF height set to
/// the stack's, then each run with its trailing marker renumbered RST0, RST1, … (EOI after the
/// last). Each restart interval is one MCU row of the stack, so its decode equals the tiles'
/// decodes wherever no vertical chroma upsampling crosses a tile edge (MCUs 8 pixels high:
/// [`crate::read`] stacks only such levels).
///
/// # Errors
/// [`CodecError::Data`] when the codec is not an NDPI run, a run does not end in a marker, or
/// the header has no SOF.
pub fn frame_ndpi_stack(codec: &CodecInfo, runs: &[&[u8]], tile_height: u32, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let TileStream::NdpiRestartRun { header, .. } = &codec.stream else {
        return Err("not an NDPI restart run".to_string().into());
    };
    let l = scan_header(header).map_err(CodecError::from)?;
    out.clear();
    out.reserve(header.len() + runs.iter().map(|r| r.len()).sum::<usize>());
    out.extend_from_slice(header);
    let height = tile_height * runs.len() as u32;
    patch_sof_size(out, l.sof_pos, l.width as u32, height).map_err(CodecError::from)?;
    for (k, r) in runs.iter().enumerate() {
        let n = r.len();
        if n < 2 || r[n - 2] != 0xFF {
            return Err(format!("NDPI restart interval of {n} bytes does not end in a marker").into());
        }
        out.extend_from_slice(&r[..n - 2]);
        out.extend_from_slice(&[0xFF, if k + 1 == runs.len() { 0xD9 } else { 0xD0 + (k % 8) as u8 }]);
    }
    Ok(())
}

/// What [`scan_header`] finds in a JPEG's markers up to SOS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegLayout {
    /// Offset of the SOF marker (0xFF 0xCn) from the stream start.
    pub sof_pos: usize,
    /// Offset just past the SOS segment: where the entropy-coded data starts.
    pub header_len: usize,
    /// SOF width and height as stored (may be 0 or wrong for NDPI levels past 65,500 pixels).
    pub width: u16,
    /// SOF height as stored.
    pub height: u16,
    /// Components in the frame.
    pub components: u8,
    /// Largest horizontal and vertical sampling factors of the frame.
    pub max_sampling: (u8, u8),
    /// Components in the (first) scan.
    pub comps_in_scan: u8,
    /// DRI restart interval in MCUs (0: none).
    pub restart_interval: u16,
}

impl JpegLayout {
    /// The MCU size in pixels, as OpenSlide computes it: 8×8 for a single-component scan, else
    /// the largest sampling factors × 8.
    pub fn mcu_size(&self) -> (u32, u32) {
        if self.comps_in_scan > 1 {
            (self.max_sampling.0 as u32 * 8, self.max_sampling.1 as u32 * 8)
        } else {
            (8, 8)
        }
    }
}

/// Walk a JPEG's marker segments from SOI to the end of SOS (OpenSlide's
/// `find_bitstream_start`, plus the SOF, DRI and SOS fields the NDPI driver needs). `head` must
/// hold at least the whole header.
///
/// # Errors
/// A message for a missing SOI, a marker segment running past `head`, a second SOF, a SOF with
/// no or bad components, or SOS without SOF.
pub fn scan_header(head: &[u8]) -> Result<JpegLayout, String> {
    if head.len() < 4 || head[..2] != [0xFF, 0xD8] {
        return Err("the strip does not start with a JPEG SOI marker".into());
    }
    let mut i = 2usize;
    // (SOF offset, width, height, components, largest sampling factors)
    type Sof = (usize, u16, u16, u8, (u8, u8));
    let mut sof: Option<Sof> = None;
    let mut dri = 0u16;
    loop {
        if i + 4 > head.len() {
            return Err(format!("JPEG header runs past {} bytes without SOS", head.len()));
        }
        if head[i] != 0xFF {
            return Err(format!("expected a JPEG marker at byte {i}"));
        }
        let m = head[i + 1];
        if m == 0xFF {
            i += 1; // fill byte
            continue;
        }
        if m == 0xD8 {
            i += 2;
            continue;
        }
        let len = u16::from_be_bytes([head[i + 2], head[i + 3]]) as usize;
        let end = i + 2 + len;
        if len < 2 || end > head.len() {
            return Err(format!("JPEG marker 0xFF{m:02X} at byte {i} has bad length {len}"));
        }
        let body = &head[i + 4..end];
        let is_sof = matches!(m, 0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF);
        if is_sof {
            if sof.is_some() {
                return Err("two SOF markers in the JPEG header".into());
            }
            if body.len() < 6 {
                return Err("truncated SOF segment".into());
            }
            let (h, w, nc) = (u16::from_be_bytes([body[1], body[2]]), u16::from_be_bytes([body[3], body[4]]), body[5]);
            if nc == 0 || body.len() < 6 + 3 * nc as usize {
                return Err(format!("SOF segment with {nc} components"));
            }
            let mut max = (0u8, 0u8);
            for c in 0..nc as usize {
                let hv = body[6 + 3 * c + 1];
                let (hs, vs) = (hv >> 4, hv & 15);
                if !(1..=4).contains(&hs) || !(1..=4).contains(&vs) {
                    return Err(format!("SOF sampling factors {hs}x{vs}"));
                }
                max = (max.0.max(hs), max.1.max(vs));
            }
            sof = Some((i, w, h, nc, max));
        } else if m == 0xDD && body.len() >= 2 {
            dri = u16::from_be_bytes([body[0], body[1]]);
        } else if m == 0xDA {
            let Some((sof_pos, width, height, components, max_sampling)) = sof else {
                return Err("JPEG SOS marker before any SOF".into());
            };
            let comps_in_scan = body.first().copied().unwrap_or(0);
            return Ok(JpegLayout { sof_pos, header_len: end, width, height, components, max_sampling, comps_in_scan, restart_interval: dri });
        } else if m == 0xD9 {
            return Err("JPEG EOI before SOS".into());
        }
        i = end;
    }
}

/// Set the SOF dimensions of the header `header` (SOF marker at `sof_pos`) to `width × height`.
///
/// # Errors
/// A message when the SOF lies outside `header` or a dimension does not fit 16 bits.
pub fn patch_sof_size(header: &mut [u8], sof_pos: usize, width: u32, height: u32) -> Result<(), String> {
    let (Ok(w), Ok(h)) = (u16::try_from(width), u16::try_from(height)) else {
        return Err(format!("tile size {width}x{height} does not fit a JPEG SOF"));
    };
    if sof_pos + 9 > header.len() {
        return Err("SOF segment outside the JPEG header".into());
    }
    header[sof_pos + 5..sof_pos + 7].copy_from_slice(&h.to_be_bytes());
    header[sof_pos + 7..sof_pos + 9].copy_from_slice(&w.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn seg(m: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0xFF, m];
        v.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn header() -> Vec<u8> {
        let mut h = vec![0xFF, 0xD8];
        h.extend(seg(0xDD, &[0, 4]));
        h.extend(seg(0xC0, &[8, 0, 16, 0, 64, 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]));
        h.extend(seg(0xDA, &[3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0]));
        h
    }

    #[test]
    fn header_walk_finds_sof_dri_and_the_data_start() {
        let h = header();
        let l = scan_header(&h).unwrap();
        assert_eq!((l.width, l.height, l.components, l.restart_interval, l.comps_in_scan), (64, 16, 3, 4, 3));
        assert_eq!(l.mcu_size(), (16, 16));
        assert_eq!(l.header_len, h.len());
        assert_eq!(l.sof_pos, 8);
        let mut p = h.clone();
        patch_sof_size(&mut p, l.sof_pos, 48, 16).unwrap();
        let l2 = scan_header(&p).unwrap();
        assert_eq!((l2.width, l2.height), (48, 16));
        assert!(scan_header(&h[..h.len() - 3]).is_err(), "truncated SOS");
        assert!(scan_header(&[0, 1, 2, 3]).is_err(), "no SOI");
    }

    #[test]
    fn restart_runs_are_framed_with_the_header_and_eoi() {
        let codec = CodecInfo {
            compression: crate::index::Compression::Jpeg,
            stream: TileStream::NdpiRestartRun { header: Arc::from(header()), scale_denom: 1 },
            ..CodecInfo::uncompressed_rgb()
        };
        let mut out = Vec::new();
        frame_jpeg(&codec, &[1, 2, 3, 0xFF, 0xD3], &mut out).unwrap();
        // The header without its DRI segment (a tile is one restart interval), then the run
        // with its restart marker turned into EOI.
        let h = header();
        let mut want = h[..2].to_vec();
        want.extend_from_slice(&h[8..]);
        want.extend_from_slice(&[1, 2, 3, 0xFF, 0xD9]);
        assert_eq!(out, want);
        assert_eq!(scan_header(&out).unwrap().restart_interval, 0);
        // A header whose segments cannot be walked is kept whole.
        let mut broken = h.clone();
        broken[10] = 0xFF; // the SOF segment's length now runs past the header
        let mut o2 = Vec::new();
        extend_without_dri(&mut o2, &broken);
        assert_eq!(o2, broken);
        assert!(frame_jpeg(&codec, &[1, 2, 3, 4], &mut out).is_err(), "no marker at the end");
        assert!(frame_jpeg(&codec, &[0xFF], &mut out).is_err(), "too short");
    }
}
