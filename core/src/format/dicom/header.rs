//! One DICOM Part-10 file's header: the file meta group and the data set up to PixelData,
//! parsed with dicom-rs (`dicom-parser`'s lazy reader to bound every length against the file
//! and to find where elements start; `dicom-object` for the element trees), never the pixel
//! data itself.
//!
//! Facts: DICOM PS3.10 §7.1 (128-byte preamble, `DICM`, meta group 0002 in explicit VR little
//! endian), PS3.5 §7.1 and §A.4 (element and encapsulated-pixel-data encoding). What libdicom
//! (OpenSlide 4.0.1's DICOM reader) keeps as a file's "metadata": the top-level data set up to
//! the first of ReferencedImageNavigationSequence (0048,0200), PerFrameFunctionalGroupsSequence
//! (5200,9230), ExtendedOffsetTable (7FE0,0001) and PixelData (7FE0,0010).

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

use dicom_core::Tag;
use dicom_dictionary_std::tags;
use dicom_encoding::TransferSyntaxIndex;
use dicom_object::InMemDicomObject;
use dicom_parser::dataset::lazy_read::LazyDataSetReader;
use dicom_parser::dataset::LazyDataToken;
use dicom_transfer_syntax_registry::{entries, TransferSyntaxRegistry};

use crate::error::{Error, Location, Result};
use crate::io::ByteSource;

/// SOP Class UID of VL Whole Slide Microscopy Image Storage (PS3.4 B.5).
pub(crate) const WSI_SOP_CLASS: &str = "1.2.840.10008.5.1.4.1.1.77.1.6";

/// Tags that end libdicom's metadata subset (the first one present at the top level).
const METADATA_STOPS: [Tag; 4] =
    [Tag(0x0048, 0x0200), tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE, tags::EXTENDED_OFFSET_TABLE, tags::PIXEL_DATA];

/// Where PixelData's value is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PixelData {
    /// File offset of the value (encapsulated: the first item's tag).
    pub offset: u64,
    /// Value length (native pixel data); `None` for encapsulated (undefined length).
    pub length: Option<u64>,
}

/// One file's parsed header.
pub(crate) struct Header {
    /// The file meta group (0002,xxxx), values as stored.
    pub meta: InMemDicomObject,
    /// The top-level data set up to the first metadata stop tag (libdicom's "metadata").
    pub data: InMemDicomObject,
    /// Transfer syntax UID, padding removed.
    pub transfer_syntax: String,
    /// PixelData, when the top-level data set has one.
    pub pixel: Option<PixelData>,
    /// ExtendedOffsetTable value (offset, length), when present.
    pub eot: Option<(u64, u64)>,
    /// PerFrameFunctionalGroupsSequence element (start, end) in the file, when present.
    pub per_frame: Option<(u64, u64)>,
    /// The data set's transfer syntax for later partial reads.
    ts: &'static dicom_encoding::TransferSyntax,
}

/// `Read` over a byte range of a [`ByteSource`], buffered, with its position shared so the
/// caller can see where a parser is (the lazy reader reads exactly each header it decodes).
struct RangeReader<'a> {
    src: &'a dyn ByteSource,
    pos: Rc<Cell<u64>>,
    end: u64,
    buf: Vec<u8>,
    buf_at: u64,
}

impl<'a> RangeReader<'a> {
    fn new(src: &'a dyn ByteSource, start: u64, end: u64) -> (Self, Rc<Cell<u64>>) {
        let pos = Rc::new(Cell::new(start));
        (RangeReader { src, pos: pos.clone(), end: end.min(src.len()), buf: Vec::new(), buf_at: 0 }, pos)
    }
}

impl Read for RangeReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let pos = self.pos.get();
        if pos >= self.end || out.is_empty() {
            return Ok(0);
        }
        if pos < self.buf_at || pos >= self.buf_at + self.buf.len() as u64 {
            let n = (self.end - pos).min(64 << 10) as usize;
            self.buf.resize(n, 0);
            self.src.read_exact_at(&mut self.buf, pos)?;
            self.buf_at = pos;
        }
        let i = (pos - self.buf_at) as usize;
        let n = out.len().min(self.buf.len() - i);
        out[..n].copy_from_slice(&self.buf[i..i + n]);
        self.pos.set(pos + n as u64);
        Ok(n)
    }
}

impl std::io::Seek for RangeReader<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let p = match to {
            std::io::SeekFrom::Start(p) => Some(p),
            std::io::SeekFrom::Current(d) => self.pos.get().checked_add_signed(d),
            std::io::SeekFrom::End(d) => self.end.checked_add_signed(d),
        };
        let p = p.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start"))?;
        self.pos.set(p);
        Ok(p)
    }
}

/// Trim a UID's padding (NUL or space, PS3.5 §9.1).
fn uid_text(obj: &InMemDicomObject, tag: Tag) -> Option<String> {
    let e = obj.get(tag)?;
    let s = e.value().to_str().ok()?;
    Some(s.trim_end_matches(['\0', ' ']).to_string())
}

/// A string value with trailing padding removed, if the element exists.
pub(crate) fn text(obj: &InMemDicomObject, tag: Tag) -> Option<String> {
    let e = obj.get(tag)?;
    let s = e.value().to_str().ok()?;
    Some(s.trim_end_matches(['\0', ' ']).trim_start().to_string())
}

/// The `i`-th value of a multi-valued string element, trimmed.
pub(crate) fn text_at(obj: &InMemDicomObject, tag: Tag, i: usize) -> Option<String> {
    let e = obj.get(tag)?;
    let v = e.value().to_multi_str().ok()?;
    v.get(i).map(|s| s.trim_matches(['\0', ' ']).to_string())
}

/// An integer value, if the element exists and parses.
pub(crate) fn int(obj: &InMemDicomObject, tag: Tag) -> Option<i64> {
    obj.get(tag)?.value().to_int::<i64>().ok()
}

/// Check the preamble, `DICM` and the file meta group; return the meta group and where the
/// data set starts. The reason as text when the file is not DICOM Part 10.
fn read_meta(src: &dyn ByteSource) -> std::result::Result<(InMemDicomObject, u64), String> {
    let mut magic = [0u8; 132];
    if src.len() < 132 || src.read_exact_at(&mut magic, 0).is_err() || &magic[128..] != b"DICM" {
        return Err("not DICOM Part 10 (no DICM after the 128-byte preamble)".into());
    }
    let ts = entries::EXPLICIT_VR_LITTLE_ENDIAN.erased();
    let start = scan(src, 132, &ts, |tag, _| tag.group() != 0x0002).map_err(|e| format!("file meta group: {e}"))?;
    let data_start = start.stop.ok_or("no data set after the file meta group")?;
    let (r, _) = RangeReader::new(src, 132, data_start);
    let meta = InMemDicomObject::read_dataset_with_ts(r, &ts).map_err(|e| format!("file meta group: {e}"))?;
    Ok((meta, data_start))
}

/// `Ok(())` for a Part-10 file of the VL WSI SOP class, else why not (detection; reads only the
/// meta group).
pub(crate) fn detect(src: &dyn ByteSource) -> std::result::Result<(), String> {
    let (meta, _) = read_meta(src)?;
    let class = uid_text(&meta, tags::MEDIA_STORAGE_SOP_CLASS_UID).unwrap_or_default();
    if class != WSI_SOP_CLASS {
        return Err(format!("Not a WSI DICOM: class UID {class}"));
    }
    Ok(())
}

/// What a lazy scan of a data set found.
struct Scan {
    /// Start of the first top-level element for which `stop` said yes.
    stop: Option<u64>,
    /// Start of each top-level element, in order, with its tag.
    starts: Vec<(Tag, u64)>,
    /// PixelData at the top level.
    pixel: Option<PixelData>,
    /// End of the scan (where the last element read ended).
    end: u64,
}

/// Walk a data set from `start` with the lazy reader, checking every defined length against
/// the file; stop before the first top-level element `stop(tag, start)` accepts, or at the
/// top-level PixelData (whose value is not read).
fn scan(src: &dyn ByteSource, start: u64, ts: &dicom_encoding::TransferSyntax, stop: impl Fn(Tag, u64) -> bool) -> std::result::Result<Scan, String> {
    let file_len = src.len();
    let (r, pos) = RangeReader::new(src, start, file_len);
    let mut rdr = LazyDataSetReader::new_with_ts(r, ts).map_err(|e| e.to_string())?;
    let mut out = Scan { stop: None, starts: Vec::new(), pixel: None, end: start };
    let mut depth = 0usize;
    loop {
        let before = pos.get();
        let Some(tok) = rdr.advance() else { break };
        let tok = tok.map_err(|e| e.to_string())?;
        let here = pos.get();
        let left = file_len.saturating_sub(here);
        match tok {
            LazyDataToken::ElementHeader(h) => {
                if depth == 0 {
                    if stop(h.tag, before) {
                        out.stop = Some(before);
                        return Ok(out);
                    }
                    out.starts.push((h.tag, before));
                    if h.tag == tags::PIXEL_DATA {
                        out.pixel = Some(PixelData { offset: here, length: h.len.get().map(u64::from) });
                        out.stop = Some(before);
                        return Ok(out);
                    }
                }
                if let Some(n) = h.len.get() {
                    if n as u64 > left {
                        return Err(format!("element {} of {n} bytes runs past the end of the file", h.tag));
                    }
                }
            }
            LazyDataToken::PixelSequenceStart => {
                if depth == 0 {
                    out.starts.push((tags::PIXEL_DATA, before));
                    out.pixel = Some(PixelData { offset: here, length: None });
                    out.stop = Some(before);
                    return Ok(out);
                }
                // Encapsulated pixel data inside a sequence (an icon image): its items end with
                // a sequence delimiter.
                depth += 1;
            }
            LazyDataToken::SequenceStart { tag, len } => {
                if depth == 0 {
                    if stop(tag, before) {
                        out.stop = Some(before);
                        return Ok(out);
                    }
                    out.starts.push((tag, before));
                }
                if len.get().is_some_and(|n| n as u64 > left) {
                    return Err(format!("sequence {tag} runs past the end of the file"));
                }
                depth += 1;
            }
            LazyDataToken::SequenceEnd => depth = depth.saturating_sub(1),
            LazyDataToken::ItemStart { len }
                if len.get().is_some_and(|n| n as u64 > left) => {
                    return Err("sequence item runs past the end of the file".into());
                }
            LazyDataToken::LazyValue { .. } | LazyDataToken::LazyItemValue { .. } => tok.skip().map_err(|e| e.to_string())?,
            _ => {}
        }
        out.end = pos.get();
    }
    Ok(out)
}

/// Read top-level elements in `[from, to)` of a data set of syntax `ts` into an object.
fn read_range(src: &dyn ByteSource, from: u64, to: u64, ts: &dicom_encoding::TransferSyntax) -> std::result::Result<InMemDicomObject, String> {
    let (r, _) = RangeReader::new(src, from, to);
    InMemDicomObject::read_dataset_with_ts(r, ts).map_err(|e| e.to_string())
}

impl Header {
    /// Parse the header of `src` (named by `at` in errors).
    ///
    /// # Errors
    /// `Unsupported` when the file is not DICOM Part 10; `Format` for a damaged header (a
    /// length past the end of the file, an unparsable element).
    pub(crate) fn parse(src: &dyn ByteSource, at: &Location) -> Result<Header> {
        let (meta, dataset_start) = read_meta(src).map_err(|m| Error::unsupported(at, m))?;
        let transfer_syntax = uid_text(&meta, tags::TRANSFER_SYNTAX_UID).unwrap_or_default();
        let ts: &'static dicom_encoding::TransferSyntax = TransferSyntaxRegistry
            .get(&transfer_syntax)
            .filter(|t| !t.is_unsupported() && !matches!(t.codec(), dicom_encoding::transfer_syntax::Codec::Dataset(_)))
            .ok_or_else(|| Error::unsupported(at, format!("Unsupported transfer syntax {transfer_syntax}")))?;
        let s = scan(src, dataset_start, ts, |_, _| false).map_err(|m| Error::format(at, format!("DICOM data set: {m}")))?;
        let stop_at = s
            .starts
            .iter()
            .find(|(t, _)| METADATA_STOPS.contains(t))
            .map(|&(_, p)| p)
            .unwrap_or(s.stop.unwrap_or(s.end));
        let data = read_range(src, dataset_start, stop_at, ts).map_err(|m| Error::format(at, format!("DICOM data set: {m}")))?;
        let next_start = |tag: Tag| -> Option<(u64, u64)> {
            let i = s.starts.iter().position(|(t, _)| *t == tag)?;
            let end = s.starts.get(i + 1).map(|&(_, p)| p).unwrap_or(s.end);
            Some((s.starts[i].1, end))
        };
        let per_frame = next_start(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE);
        let eot = match next_start(tags::EXTENDED_OFFSET_TABLE) {
            // Explicit VR: tag (4), VR (2), reserved (2), length (4) for OV.
            Some((a, b)) if b >= a + 12 => Some((a + 12, b - a - 12)),
            _ => None,
        };
        Ok(Header { meta, data, transfer_syntax, pixel: s.pixel, eot, per_frame, ts })
    }

    /// The PerFrameFunctionalGroupsSequence, read now (TILED_SPARSE levels), if present.
    ///
    /// # Errors
    /// `Format` when it cannot be parsed.
    pub(crate) fn read_per_frame(&self, src: &dyn ByteSource, at: &Location) -> Result<Option<InMemDicomObject>> {
        let Some((a, b)) = self.per_frame else { return Ok(None) };
        read_range(src, a, b, self.ts).map(Some).map_err(|m| Error::format(at, format!("PerFrameFunctionalGroupsSequence: {m}")))
    }

    /// SeriesInstanceUID (padding removed).
    pub(crate) fn series_uid(&self) -> Option<String> {
        uid_text(&self.data, tags::SERIES_INSTANCE_UID)
    }

    /// SOPInstanceUID (padding removed).
    pub(crate) fn sop_instance_uid(&self) -> Option<String> {
        uid_text(&self.data, tags::SOP_INSTANCE_UID)
    }

    /// ConcatenationUID (padding removed).
    pub(crate) fn concatenation_uid(&self) -> Option<String> {
        uid_text(&self.data, tags::CONCATENATION_UID)
    }
}
