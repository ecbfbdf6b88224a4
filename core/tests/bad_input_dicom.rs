//! Damaged and unsupported DICOM WSI files, built by patching bytes of temporary copies of the
//! shared test files (`camelyon-jpeg-ybr.dcm`, the CMU DICOM folder): each gives a typed error
//! naming the file (or opens where OpenSlide 4.0.1 opens it), never a panic. Also the
//! offset-table variants (Basic and Extended Offset Table added to a file that has neither),
//! which must read the same pixels as the original.
//!
//! Each test works in its own temporary folder: a DICOM slide is every file of its folder of
//! the same series.

mod common;

use std::path::{Path, PathBuf};

use common::testdata;
use slidestream::{Error, Slide};

/// A temporary folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("slidestream-dicom-{}-{n}-{name}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn camelyon() -> Option<Vec<u8>> {
    Some(std::fs::read(testdata()?.join("camelyon-jpeg-ybr.dcm")).unwrap())
}

/// Offset of the top-level PixelData element header.
fn pixel_data(d: &[u8]) -> usize {
    find(d, &[0xE0, 0x7F, 0x10, 0x00, b'O', b'B'], 0).expect("PixelData")
}

fn find(d: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    d[from..].windows(needle.len()).position(|w| w == needle).map(|i| i + from)
}

/// (value offset, value length) of the first element (group, element) with a short explicit
/// VR before PixelData (test files: top-level elements only have these tags).
fn elem(d: &[u8], group: u16, element: u16) -> (usize, usize) {
    let tag = [group.to_le_bytes(), element.to_le_bytes()].concat();
    let mut from = 0;
    loop {
        let i = find(&d[..pixel_data(d)], &tag, from).unwrap_or_else(|| panic!("({group:04X},{element:04X}) not found"));
        if d[i + 4].is_ascii_uppercase() && d[i + 5].is_ascii_uppercase() {
            return (i + 8, u16::from_le_bytes([d[i + 6], d[i + 7]]) as usize);
        }
        from = i + 1;
    }
}

/// Replace the value of (group, element) by `value` of the same length.
fn patch(d: &mut [u8], group: u16, element: u16, value: &[u8]) {
    let (at, len) = elem(d, group, element);
    assert_eq!(len, value.len(), "same-length patch of ({group:04X},{element:04X})");
    d[at..at + len].copy_from_slice(value);
}

fn open(path: &Path) -> slidestream::Result<Slide> {
    let p = path.to_path_buf();
    std::panic::catch_unwind(move || Slide::open(&p)).unwrap_or_else(|_| panic!("Slide::open panicked on {}", path.display()))
}

/// The open fails with `kind`, naming the file, and the message contains `words`.
fn refused(r: slidestream::Result<Slide>, path: &Path, kind: &str, words: &str) {
    let e = match r {
        Ok(s) => panic!("{}: opened as {}", path.display(), s.vendor()),
        Err(e) => e,
    };
    eprintln!("{e}");
    assert_eq!(e.kind_name(), kind, "{e}");
    assert!(e.to_string().contains(&path.display().to_string()) || kind == "usage", "does not name the file: {e}");
    assert!(e.to_string().contains(words), "{e} (expected '{words}')");
}

#[test]
fn wrong_sop_class_is_not_dicom_wsi() {
    let Some(mut d) = camelyon() else { return };
    patch(&mut d, 0x0002, 0x0002, b"1.2.840.10008.5.1.4.1.1.77.1.5");
    let t = TempDir::new("sop");
    let p = t.write("a.dcm", &d);
    refused(open(&p), &p, "unsupported", "no format driver");
    let report = Slide::detect(&p).unwrap();
    assert!(report.to_string().contains("Not a WSI DICOM: class UID 1.2.840.10008.5.1.4.1.1.77.1.5"), "{report}");
}

#[test]
fn unsupported_pixels_are_typed_errors_naming_the_value() {
    let Some(orig) = camelyon() else { return };
    let cases: [(&str, u16, u16, &[u8], &str); 6] = [
        ("jpeg-ls", 0x0002, 0x0010, b"1.2.840.10008.1.2.4.80", "Unsupported transfer syntax 1.2.840.10008.1.2.4.80"),
        ("rle", 0x0002, 0x0010, b"1.2.840.10008.1.2.5\0\0\0", "Unsupported transfer syntax 1.2.840.10008.1.2.5"),
        ("16-bit", 0x0028, 0x0100, &16u16.to_le_bytes(), "BitsAllocated 16"),
        ("monochrome", 0x0028, 0x0002, &1u16.to_le_bytes(), "SamplesPerPixel 1"),
        ("planar", 0x0028, 0x0006, &1u16.to_le_bytes(), "PlanarConfiguration 1"),
        ("high bit", 0x0028, 0x0102, &11u16.to_le_bytes(), "HighBit 11"),
    ];
    for (name, g, e, value, words) in cases {
        let mut d = orig.clone();
        patch(&mut d, g, e, value);
        let t = TempDir::new(name);
        let p = t.write("a.dcm", &d);
        refused(open(&p), &p, "unsupported", words);
    }
}

#[test]
fn frame_counts_that_disagree_with_the_items_are_format_errors() {
    let Some(orig) = camelyon() else { return };
    for (value, words) in [(&b"16"[..], "too few frames"), (b"14", "too many frames"), (b"0 ", "NumberOfFrames")] {
        let mut d = orig.clone();
        patch(&mut d, 0x0028, 0x0008, value);
        let t = TempDir::new("frames");
        let p = t.write("a.dcm", &d);
        refused(open(&p), &p, "format", words);
    }
    // A count no file of this size can hold.
    let mut d = orig.clone();
    let (at, len) = elem(&d, 0x0028, 0x0008);
    assert_eq!(len, 2);
    // Widen the IS value to 10 digits: insert 8 bytes (the element precedes PixelData only).
    d[at - 2..at].copy_from_slice(&10u16.to_le_bytes());
    d.splice(at..at + 2, b"4000000000".iter().copied());
    let t = TempDir::new("huge");
    let p = t.write("a.dcm", &d);
    refused(open(&p), &p, "format", "NumberOfFrames");
}

#[test]
fn truncated_files_are_typed_errors() {
    let Some(orig) = camelyon() else { return };
    let pix = pixel_data(&orig);
    for cut in [orig.len() - 5000, pix + 20, pix, 1000, 140, 100] {
        let t = TempDir::new("cut");
        let p = t.write("a.dcm", &orig[..cut]);
        match open(&p) {
            Ok(s) => panic!("cut at {cut}: opened as {}", s.vendor()),
            Err(e) => {
                eprintln!("cut at {cut}: {e}");
                assert!(matches!(e, Error::Format { .. } | Error::Unsupported { .. }), "cut at {cut}: {e}");
                assert!(e.to_string().contains(&p.display().to_string()), "{e}");
            }
        }
    }
}

#[test]
fn flipped_header_bytes_never_panic() {
    let Some(orig) = camelyon() else { return };
    let pix = pixel_data(&orig) + 40;
    let t = TempDir::new("flip");
    for i in (128..pix).step_by(5) {
        let mut d = orig.clone();
        d[i] ^= 0xA5;
        let p = t.write("a.dcm", &d);
        if let Ok(s) = open(&p) {
            // What opens must read (or fail typed) without panicking.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.read_region((0, 0), 0, (300, 300)).map(|_| ())))
                .unwrap_or_else(|_| panic!("read panicked with byte {i} flipped"));
        }
    }
}

/// The camelyon file with a Basic Offset Table (`bot`) or an Extended Offset Table written in,
/// offsets from the real items, each shifted by `shift`.
fn with_table(orig: &[u8], extended: bool, shift: u64) -> Vec<u8> {
    let pix = pixel_data(orig);
    let bot_item = pix + 12;
    assert_eq!(&orig[bot_item..bot_item + 8], &[0xFE, 0xFF, 0x00, 0xE0, 0, 0, 0, 0], "empty BOT");
    let first = bot_item + 8;
    let mut offsets = Vec::new();
    let mut pos = first;
    while orig[pos..pos + 4] == [0xFE, 0xFF, 0x00, 0xE0] {
        offsets.push((pos - first) as u64 + shift);
        pos += 8 + u32::from_le_bytes(orig[pos + 4..pos + 8].try_into().unwrap()) as usize;
    }
    assert_eq!(offsets.len(), 15);
    let mut d = orig.to_vec();
    if extended {
        let mut el = vec![0xE0, 0x7F, 0x01, 0x00, b'O', b'V', 0, 0];
        el.extend_from_slice(&((offsets.len() * 8) as u32).to_le_bytes());
        for o in &offsets {
            el.extend_from_slice(&o.to_le_bytes());
        }
        d.splice(pix..pix, el);
    } else {
        let table: Vec<u8> = offsets.iter().flat_map(|&o| (o as u32).to_le_bytes()).collect();
        d[bot_item + 4..bot_item + 8].copy_from_slice(&(table.len() as u32).to_le_bytes());
        d.splice(first..first, table);
    }
    d
}

#[test]
fn offset_tables_locate_the_same_frames() {
    let Some(orig) = camelyon() else { return };
    let t = TempDir::new("tables");
    let base = t.write("orig.dcm", &orig);
    let want = Slide::open(&base).unwrap().read_region((0, 0), 0, (1152, 700)).unwrap();
    for extended in [false, true] {
        let t = TempDir::new("table");
        let p = t.write("a.dcm", &with_table(&orig, extended, 0));
        let s = open(&p).unwrap_or_else(|e| panic!("extended {extended}: {e}"));
        let got = s.read_region((0, 0), 0, (1152, 700)).unwrap();
        assert!(got.data == want.data, "extended {extended}: pixels differ");
        // Offsets pointing past the end (or at no item) are format errors.
        let t = TempDir::new("badtable");
        let p = t.write("a.dcm", &with_table(&orig, extended, 1 << 30));
        refused(open(&p), &p, "format", "frame 0");
        let t = TempDir::new("misaligned");
        let p = t.write("a.dcm", &with_table(&orig, extended, 2));
        refused(open(&p), &p, "format", "no PixelData item");
    }
}

/// A copy of `d` with the last digit of SeriesInstanceUID (and SOPInstanceUID) changed.
fn other_series(d: &[u8]) -> Vec<u8> {
    let mut d = d.to_vec();
    for (g, e) in [(0x0020, 0x000E), (0x0008, 0x0018)] {
        let (at, len) = elem(&d, g, e);
        let last = at + len - 1 - usize::from(d[at + len - 1] == 0);
        d[last] = if d[last] == b'9' { b'8' } else { b'9' };
    }
    d
}

#[test]
fn a_folder_of_two_series_is_a_usage_error_but_each_file_opens() {
    let Some(orig) = camelyon() else { return };
    let t = TempDir::new("two");
    let a = t.write("a.dcm", &orig);
    let b = t.write("b.dcm", &other_series(&orig));
    t.write("notes.txt", b"not DICOM");
    let e = open(&t.0).unwrap_err();
    assert!(matches!(e, Error::Usage(_)), "{e}");
    assert!(e.to_string().contains("2 DICOM WSI series"), "{e}");
    for p in [a, b] {
        let s = open(&p).unwrap();
        assert_eq!(s.index().sources.len(), 1, "the other series is not part of the slide");
    }
    // A folder with no DICOM WSI file is not a DICOM slide.
    let t = TempDir::new("none");
    t.write("notes.txt", b"not DICOM");
    assert_eq!(open(&t.0).unwrap_err().kind_name(), "unsupported");
}

#[test]
fn two_instances_of_one_level_without_a_concatenation_are_inconsistent() {
    let Some(orig) = camelyon() else { return };
    let t = TempDir::new("dup");
    let a = t.write("a.dcm", &orig);
    // Same series, another SOP instance of the same size.
    let mut d = orig.clone();
    let (at, len) = elem(&d, 0x0008, 0x0018);
    d[at + len - 2] = if d[at + len - 2] == b'1' { b'2' } else { b'1' };
    t.write("b.dcm", &d);
    refused(open(&a), &a, "format", "Slide contains unexpected image");
    // The same SOP instance twice is a duplicate, ignored.
    let t = TempDir::new("same");
    let a = t.write("a.dcm", &orig);
    t.write("b.dcm", &orig);
    assert_eq!(open(&a).unwrap().level_count(), 1);
}

#[test]
fn a_level_concatenation_with_a_missing_member_is_a_format_error() {
    let Some(orig) = camelyon() else { return };
    // Make the file member 2 of 2 of a concatenation (member 1 absent): insert
    // ConcatenationUID (0020,9161), InConcatenationNumber (0020,9162) and
    // InConcatenationTotalNumber (0020,9163) in tag order.
    let mut d = orig.clone();
    let mut els = Vec::new();
    let uid = b"1.2.3.4";
    els.extend_from_slice(&[0x20, 0x00, 0x61, 0x91, b'U', b'I']);
    els.extend_from_slice(&8u16.to_le_bytes());
    els.extend_from_slice(uid);
    els.push(0);
    els.extend_from_slice(&[0x20, 0x00, 0x62, 0x91, b'U', b'S', 2, 0, 2, 0]);
    els.extend_from_slice(&[0x20, 0x00, 0x63, 0x91, b'U', b'S', 2, 0, 2, 0]);
    // Insert before DimensionOrganizationSequence (0020,9221), the next tag in this file.
    let i = find(&d[..pixel_data(&d)], &[0x20, 0x00, 0x21, 0x92, b'S', b'Q'], 0).expect("(0020,9221)");
    d.splice(i..i, els);
    let t = TempDir::new("concat");
    let p = t.write("a.dcm", &d);
    refused(open(&p), &p, "format", "Missing SOP instance");
}

/// `d` with a little-endian TIFF header and a one-entry IFD (ImageWidth) in its preamble: a
/// dual-personality DICOM-TIFF file.
fn with_tiff_preamble(d: &[u8]) -> Vec<u8> {
    let mut d = d.to_vec();
    let mut t = Vec::new();
    t.extend_from_slice(b"II*\0");
    t.extend_from_slice(&8u32.to_le_bytes());
    t.extend_from_slice(&1u16.to_le_bytes());
    t.extend_from_slice(&[0x00, 0x01, 3, 0]); // ImageWidth, SHORT
    t.extend_from_slice(&1u32.to_le_bytes());
    t.extend_from_slice(&[16, 0, 0, 0]);
    t.extend_from_slice(&0u32.to_le_bytes()); // no next IFD
    d[..t.len()].copy_from_slice(&t);
    d
}

#[test]
fn a_dual_personality_file_named_tif_is_left_to_the_tiff_drivers() {
    let Some(orig) = camelyon() else { return };
    let d = with_tiff_preamble(&orig);
    let t = TempDir::new("dual");
    // Named .dcm: DICOM whatever the preamble holds.
    let p = t.write("a.dcm", &d);
    assert_eq!(open(&p).unwrap().vendor(), "dicom");
    // Named .tif / .TIFF and parsing as TIFF: OpenSlide's dicom driver declines.
    for name in ["b.tif", "c.TIFF"] {
        let t = TempDir::new("dual-tif");
        let p = t.write(name, &d);
        let report = Slide::detect(&p).unwrap();
        let verdict = report.verdicts.iter().find(|(n, _)| *n == "dicom").map(|(_, v)| v.clone());
        match verdict {
            Some(Err(why)) => assert!(why.contains("Dual-personality"), "{name}: {why}"),
            other => panic!("{name}: dicom verdict {other:?} ({report})"),
        }
    }
}
