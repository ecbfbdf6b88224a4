//! Damaged Hamamatsu NDPI files (issue 15): copies of the real `test3-DAPI-2-387.ndpi` with one
//! structure patched: truncated, strip offset past the end, broken JPEG header, MCU starts
//! outside the strip or not at restart markers, MCU starts missing (scanned; refused on a huge
//! level). Every failure is a typed error naming the file, never a panic.

mod common;

use std::path::Path;

use common::testdata;
use common::tiffwriter::TempPath;
use slidestream::{Error, Slide};

/// One IFD entry of the NDPI file: (file offset of the entry, tag, type, count, value field).
type Entry = (usize, u16, u16, u32, u32);

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

/// The entries of IFD 0 (NDPI: 8-byte first-IFD offset in the header; file < 4 GiB).
fn ifd0(b: &[u8]) -> Vec<Entry> {
    let off = u64::from_le_bytes(b[4..12].try_into().unwrap()) as usize;
    let n = u16_at(b, off) as usize;
    (0..n)
        .map(|i| {
            let e = off + 2 + 12 * i;
            (e, u16_at(b, e), u16_at(b, e + 2), u32_at(b, e + 4), u32_at(b, e + 8))
        })
        .collect()
}

fn entry(b: &[u8], tag: u16) -> Entry {
    *ifd0(b).iter().find(|e| e.1 == tag).unwrap_or_else(|| panic!("tag {tag} in IFD 0"))
}

fn original() -> Option<Vec<u8>> {
    let td = testdata()?;
    Some(std::fs::read(td.join("test3-DAPI-2-387.ndpi")).unwrap())
}

fn write(name: &str, bytes: &[u8]) -> TempPath {
    let f = TempPath::new(name);
    std::fs::write(f.path(), bytes).unwrap();
    f
}

fn open_no_panic(path: &Path) -> slidestream::Result<Slide> {
    let p = path.to_path_buf();
    std::panic::catch_unwind(move || Slide::open(&p)).unwrap_or_else(|_| panic!("{}: Slide::open panicked", path.display()))
}

fn open_err(path: &Path, what: &str) -> Error {
    match open_no_panic(path) {
        Ok(_) => panic!("{what}: expected an error"),
        Err(e) => {
            assert!(e.to_string().contains(&path.display().to_string()), "{what}: error does not name the file: {e}");
            e
        }
    }
}

const STRIP_OFFSETS: u16 = 273;
const STRIP_BYTE_COUNTS: u16 = 279;
const MCU_STARTS: u16 = 65426;

#[test]
fn truncated_ndpi_is_a_format_error() {
    let Some(b) = original() else { return };
    for cut in [b.len() / 2, b.len() - 1000, 20] {
        let f = write("ndpi-cut.ndpi", &b[..cut]);
        let e = open_err(f.path(), "truncated");
        assert!(matches!(e, Error::Format { .. } | Error::Unsupported { .. }), "cut at {cut}: {e}");
    }
}

#[test]
fn strip_offset_past_the_end_is_a_format_error() {
    let Some(mut b) = original() else { return };
    let (e, ..) = entry(&b, STRIP_OFFSETS);
    let len = b.len() as u32;
    b[e + 8..e + 12].copy_from_slice(&(len + 100).to_le_bytes());
    let f = write("ndpi-offset.ndpi", &b);
    let err = open_err(f.path(), "strip offset");
    assert!(matches!(err, Error::Format { .. }), "{err}");
}

#[test]
fn broken_jpeg_header_is_a_format_error() {
    let Some(mut b) = original() else { return };
    let start = entry(&b, STRIP_OFFSETS).4 as usize;
    b[start..start + 2].copy_from_slice(b"XX");
    let f = write("ndpi-header.ndpi", &b);
    let err = open_err(f.path(), "no SOI");
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(err.to_string().contains("JPEG"), "{err}");
    // A marker segment whose length runs past the header.
    let Some(mut b) = original() else { return };
    b[start + 4..start + 6].copy_from_slice(&[0xFF, 0xF0]);
    let f = write("ndpi-header2.ndpi", &b);
    let err = open_err(f.path(), "bad segment length");
    assert!(matches!(err, Error::Format { .. }), "{err}");
}

#[test]
fn mcu_starts_outside_the_strip_are_a_format_error() {
    let Some(mut b) = original() else { return };
    let (_, _, typ, count, at) = entry(&b, MCU_STARTS);
    assert_eq!(typ, 4, "MCU starts are LONG");
    assert!(count > 10);
    let v = at as usize + 4 * 5;
    b[v..v + 4].copy_from_slice(&0x7FFF_FFF0u32.to_le_bytes());
    let f = write("ndpi-mcu-out.ndpi", &b);
    let err = open_err(f.path(), "MCU start outside");
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(err.to_string().contains("MCU start"), "{err}");
}

#[test]
fn mcu_start_not_at_a_restart_marker_fails_the_tile_read() {
    let Some(mut b) = original() else { return };
    let (_, _, _, _, at) = entry(&b, MCU_STARTS);
    let v = at as usize + 4 * 5;
    let shifted = u32_at(&b, v) + 3;
    b[v..v + 4].copy_from_slice(&shifted.to_le_bytes());
    let f = write("ndpi-mcu-shift.ndpi", &b);
    let slide = open_no_panic(f.path()).expect("opens: MCU starts are checked when their tiles are read");
    // Level 0 tiles are 3968x8: tile 4 (row 4) ends where tile 5 starts.
    let e = slide.read_region((0, 32), 0, (64, 8)).expect_err("tile 4 ends inside entropy-coded data");
    assert!(matches!(e, Error::Format { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("level 0") && msg.contains("tile (0, 4)"), "{msg}");
    // Other tiles still read, and equal the original's.
    let good = Slide::open(testdata().unwrap().join("test3-DAPI-2-387.ndpi")).unwrap();
    assert_eq!(slide.read_region((0, 0), 0, (64, 32)).unwrap().data, good.read_region((0, 0), 0, (64, 32)).unwrap().data);
}

#[test]
fn missing_mcu_starts_are_found_by_scanning_the_strip() {
    let Some(mut b) = original() else { return };
    let (e, ..) = entry(&b, MCU_STARTS);
    // Tag 65426 becomes an unknown private tag (65500 sorts after the other tags).
    b[e..e + 2].copy_from_slice(&65500u16.to_le_bytes());
    let f = write("ndpi-no-mcu.ndpi", &b);
    let slide = open_no_panic(f.path()).expect("opens with a restart-marker scan");
    let good = Slide::open(testdata().unwrap().join("test3-DAPI-2-387.ndpi")).unwrap();
    for (loc, level, size) in [((0, 0), 0, (300, 200)), ((1700, 2100), 0, (400, 300)), ((3900, 4800), 0, (100, 100)), ((0, 0), 3, (496, 608))] {
        assert_eq!(slide.read_region(loc, level, size).unwrap().data, good.read_region(loc, level, size).unwrap().data, "{loc:?} L{level}");
    }
}

#[test]
fn missing_mcu_starts_on_a_huge_level_are_refused() {
    let Some(mut b) = original() else { return };
    let (e, ..) = entry(&b, MCU_STARTS);
    b[e..e + 2].copy_from_slice(&65500u16.to_le_bytes());
    // Claim a 300 MiB strip for level 0; the file is extended sparsely so the strip lies inside it.
    let (c, ..) = entry(&b, STRIP_BYTE_COUNTS);
    let start = entry(&b, STRIP_OFFSETS).4 as u64;
    let huge = 300u64 << 20;
    b[c + 8..c + 12].copy_from_slice(&(huge as u32).to_le_bytes());
    let f = write("ndpi-huge.ndpi", &b);
    std::fs::OpenOptions::new().write(true).open(f.path()).unwrap().set_len(start + huge + 16).unwrap();
    let err = open_err(f.path(), "huge strip without MCU starts");
    assert!(matches!(err, Error::Limits { .. }), "{err}");
    assert!(err.to_string().contains("MCU starts"), "{err}");
}

#[test]
fn missing_strip_tags_and_lens_are_format_errors() {
    for (tag, what) in [(STRIP_BYTE_COUNTS, "StripByteCounts"), (65421, "SourceLens")] {
        let Some(mut b) = original() else { return };
        let (e, ..) = entry(&b, tag);
        b[e..e + 2].copy_from_slice(&65501u16.to_le_bytes());
        let f = write("ndpi-tag.ndpi", &b);
        let err = open_err(f.path(), what);
        assert!(matches!(err, Error::Format { .. }), "{what}: {err}");
    }
}

/// Random damage to the structure an NDPI open reads (IFD 0 and the later directories, the
/// level headers and MCU-start arrays): every open and read returns (Ok or a typed error), none
/// panics.
#[test]
fn random_structure_damage_never_panics() {
    let Some(orig) = original() else { return };
    // Byte ranges open reads: each IFD with its out-of-line values, and each strip's first 1 KiB.
    let mut hot: Vec<(usize, usize)> = Vec::new();
    let mut off = u64::from_le_bytes(orig[4..12].try_into().unwrap()) as usize;
    while off != 0 && off + 2 < orig.len() {
        let n = u16_at(&orig, off) as usize;
        hot.push((off, off + 2 + 12 * n + 8));
        for i in 0..n {
            let e = off + 2 + 12 * i;
            let (tag, value) = (u16_at(&orig, e), u32_at(&orig, e + 8) as usize);
            if tag == STRIP_OFFSETS && value < orig.len() {
                hot.push((value, (value + 1024).min(orig.len())));
            }
            if tag == MCU_STARTS && value < orig.len() {
                hot.push((value, (value + 64).min(orig.len())));
            }
        }
        off = u64::from_le_bytes(orig[off + 2 + 12 * n..off + 2 + 12 * n + 8].try_into().unwrap()) as usize;
    }
    let mut rng = common::tiffwriter::Rng::new(15);
    let f = TempPath::new("ndpi-fuzz.ndpi");
    for round in 0..120 {
        let mut b = orig.clone();
        for _ in 0..1 + round % 4 {
            let (lo, hi) = hot[rng.range(0, hot.len() as i64) as usize];
            let p = rng.range(lo as i64, hi as i64) as usize;
            b[p] = rng.next_u64() as u8;
        }
        std::fs::write(f.path(), &b).unwrap();
        let p = f.path().to_path_buf();
        let outcome = std::panic::catch_unwind(move || {
            if let Ok(s) = Slide::open(&p) {
                for level in 0..s.level_count() {
                    let _ = s.read_region((0, 0), level, (64, 64));
                    let _ = s.read_region((1000, 2000), level, (300, 100));
                }
                for name in s.associated_images().into_keys() {
                    let _ = s.read_associated(&name);
                }
            }
        });
        assert!(outcome.is_ok(), "round {round}: a damaged NDPI panicked");
    }
}
