//! Slide formats recognised without a driver: files that are whole-slide images of a vendor
//! slidestream cannot read yet. Knowing them lets callers tell "a slide slidestream refuses"
//! from "not a slide at all" (the OpenSlide-compatible `open_slide` falls back to a plain
//! image only for the latter, as openslide-python does when `detect_vendor` returns NULL).
//!
//! Detection facts follow OpenSlide's format pages (openslide.org/formats):
//! * `hamamatsu` (NDPI): the file has a TIFF structure and TIFF tag 65420 is present (checked
//!   in IFD 0, where NDPI files carry it with every other directory);
//! * `dicom`: a DICOM Part 10 file (128-byte preamble, `DICM`, explicit-VR little-endian file
//!   meta group) whose Media Storage SOP Class UID (0002,0002) is VL Whole Slide Microscopy
//!   Image Storage, `1.2.840.10008.5.1.4.1.1.77.1.6`.
//!
//! Formats OpenSlide detects by file name or by companion files (MIRAX `.mrxs`, Hamamatsu
//! VMS/VMU index files, Sakura's SQLite) are not listed.

use super::Probe;

/// NDPI's format flag tag (OpenSlide: "always exists, always 1").
const NDPI_FORMAT_FLAG: u16 = 65420;
/// SOP Class UID of VL Whole Slide Microscopy Image Storage (DICOM PS3.4).
const DICOM_WSI_SOP_CLASS: &[u8] = b"1.2.840.10008.5.1.4.1.1.77.1.6";
/// Most bytes of a DICOM file meta group examined (real groups are a few hundred bytes).
const DICOM_META_MAX: u64 = 16 * 1024;

/// The vendor of a whole-slide format recognised without a driver, or `None`.
pub(crate) fn vendor(probe: &Probe<'_>) -> Option<&'static str> {
    if let Ok(tf) = probe.tiff {
        if tf.ifds.first().is_some_and(|ifd| ifd.get(NDPI_FORMAT_FLAG).is_some()) {
            return Some("hamamatsu");
        }
    }
    if dicom_sop_class(probe).as_deref() == Some(DICOM_WSI_SOP_CLASS) {
        return Some("dicom");
    }
    None
}

/// The Media Storage SOP Class UID of a DICOM Part 10 file (trailing NUL / space padding
/// removed), or `None` when the file is not one or the meta group is malformed.
fn dicom_sop_class(probe: &Probe<'_>) -> Option<Vec<u8>> {
    let len = probe.src.len();
    if len < 132 {
        return None;
    }
    let n = (len - 132).min(DICOM_META_MAX) as usize;
    let mut buf = vec![0u8; 132 + n];
    probe.src.read_exact_at(&mut buf, 0).ok()?;
    if &buf[128..132] != b"DICM" {
        return None;
    }
    let meta = &buf[132..];
    let mut pos = 0usize;
    // File meta elements: group 0002, explicit VR little endian (DICOM PS3.10 §7.1).
    while pos + 8 <= meta.len() {
        let group = u16::from_le_bytes([meta[pos], meta[pos + 1]]);
        let element = u16::from_le_bytes([meta[pos + 2], meta[pos + 3]]);
        if group != 0x0002 {
            return None;
        }
        let vr = &meta[pos + 4..pos + 6];
        let long = matches!(vr, b"OB" | b"OD" | b"OF" | b"OL" | b"OV" | b"OW" | b"SQ" | b"SV" | b"UC" | b"UN" | b"UR" | b"UT" | b"UV");
        let (value_len, header) = if long {
            let b = meta.get(pos + 8..pos + 12)?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        } else {
            (u16::from_le_bytes([meta[pos + 6], meta[pos + 7]]) as usize, 8)
        };
        let start = pos + header;
        let value = meta.get(start..start.checked_add(value_len)?)?;
        if element == 0x0002 {
            let end = value.iter().rposition(|&b| b != 0 && b != b' ').map_or(0, |i| i + 1);
            return Some(value[..end].to_vec());
        }
        pos = start + value_len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Location;
    use crate::io::MemSource;
    use crate::tiff::TiffFile;

    fn vendor_of(bytes: Vec<u8>) -> Option<&'static str> {
        let src = MemSource::new(bytes);
        let at = Location::file("mem");
        let tiff = TiffFile::parse(&src, &at);
        vendor(&Probe { src: &src, at: &at, tiff: tiff.as_ref(), files: None })
    }

    /// A little-endian classic TIFF whose IFD 0 holds the given (tag, SHORT value) entries.
    fn tiff_with(tags: &[(u16, u16)]) -> Vec<u8> {
        let mut b = b"II*\0".to_vec();
        b.extend(8u32.to_le_bytes());
        b.extend((tags.len() as u16).to_le_bytes());
        for &(tag, v) in tags {
            b.extend(tag.to_le_bytes());
            b.extend(3u16.to_le_bytes());
            b.extend(1u32.to_le_bytes());
            b.extend((v as u32).to_le_bytes());
        }
        b.extend(0u32.to_le_bytes());
        b
    }

    /// A DICOM Part 10 prefix: preamble, `DICM`, group length, then (0002,0002) = `sop`.
    fn dicom_with(sop: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 128];
        b.extend(b"DICM");
        b.extend([2, 0, 0, 0]);
        b.extend(b"UL");
        b.extend(4u16.to_le_bytes());
        b.extend(100u32.to_le_bytes());
        b.extend([2, 0, 1, 0]);
        b.extend(b"OB\0\0");
        b.extend(2u32.to_le_bytes());
        b.extend([0, 1]);
        b.extend([2, 0, 2, 0]);
        b.extend(b"UI");
        b.extend((sop.len() as u16).to_le_bytes());
        b.extend(sop);
        b
    }

    #[test]
    fn ndpi_is_a_tiff_with_tag_65420_in_ifd_0() {
        assert_eq!(vendor_of(tiff_with(&[(256, 8), (257, 8), (65420, 1)])), Some("hamamatsu"));
        assert_eq!(vendor_of(tiff_with(&[(256, 8), (257, 8)])), None);
        // The tag's number as bytes in a file that is not a TIFF is nothing.
        let mut not_tiff = tiff_with(&[(65420, 1)]);
        not_tiff[0] = b'X';
        assert_eq!(vendor_of(not_tiff), None);
    }

    #[test]
    fn dicom_needs_part_10_and_the_wsi_sop_class() {
        assert_eq!(vendor_of(dicom_with(b"1.2.840.10008.5.1.4.1.1.77.1.6")), Some("dicom"));
        // UIDs are padded to an even length with NUL.
        assert_eq!(vendor_of(dicom_with(b"1.2.840.10008.5.1.4.1.1.77.1.6\0")), Some("dicom"));
        // Another SOP class (CT Image Storage), a longer UID sharing the prefix, no magic.
        assert_eq!(vendor_of(dicom_with(b"1.2.840.10008.5.1.4.1.1.2")), None);
        assert_eq!(vendor_of(dicom_with(b"1.2.840.10008.5.1.4.1.1.77.1.6.1")), None);
        let mut no_magic = dicom_with(b"1.2.840.10008.5.1.4.1.1.77.1.6");
        no_magic[128] = b'X';
        assert_eq!(vendor_of(no_magic), None);
        // Truncated anywhere: never a panic, never a match.
        let full = dicom_with(b"1.2.840.10008.5.1.4.1.1.77.1.6");
        for n in 0..full.len() {
            assert_eq!(vendor_of(full[..n].to_vec()), None, "{n} bytes");
        }
        // A value length past the end of the buffer.
        let mut huge = full.clone();
        let at = huge.len() - 30 - 2;
        huge[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(vendor_of(huge), None);
    }
}
