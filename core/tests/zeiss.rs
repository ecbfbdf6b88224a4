//! Zeiss CZI (`format::zeiss`).
//!
//! * the real microscopy files of `../shared/formats3` (7 Bgr24 channels; a grey 2-channel
//!   mosaic at negative positions) open as `zeiss` with their channels and size (their pixels
//!   are compared with czifile's by `py/tests/test_zeiss.py`);
//! * the generated slide scans (`scripts/vendor_slides/czi.py`, in the vendor slides) open with
//!   OpenSlide's levels, regions and associated images (their pixels: the conformance battery
//!   against OpenSlide's references);
//! * bad input gives typed errors naming the file, never a panic: truncated files, offsets past
//!   the end, a directory position that leads back to the file header, absurd dimensions and
//!   counts, attachments outside the file, unknown compressions and pixel types.

mod common;

use std::path::{Path, PathBuf};

use slidestream::{Error, Samples, Slide};

fn formats3(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/formats3").join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("SKIP: {} not found", p.display());
        None
    }
}

#[test]
fn real_multichannel_files_open_with_their_channels() {
    let Some(p) = formats3("RGB-multichannel.czi") else { return };
    let s = Slide::open(&p).unwrap();
    assert_eq!(s.vendor(), "zeiss");
    assert_eq!(s.level_dimensions(), vec![(147, 81)]);
    let names = s.channel_names();
    assert_eq!(names.len(), 21, "{names:?}");
    assert!(names[0].ends_with(".R") && names[2].ends_with(".B"), "{names:?}");
    // The R, G, B samples of each BGR24 channel are shown in the primaries.
    let colors = s.channel_colors();
    assert_eq!(colors.len(), 21);
    assert!(colors.chunks(3).all(|c| c == [Some([255, 0, 0]), Some([0, 255, 0]), Some([0, 0, 255])]), "{colors:?}");
    let all = s.read_region_channels((0, 0), 0, (147, 81), None).unwrap();
    let Samples::U8(v) = &all.data else { panic!("8-bit channels") };
    assert_eq!(v.len(), 147 * 81 * 21);
    // read_region shows channel 0's colours.
    let rgba = s.read_region((0, 0), 0, (147, 81)).unwrap();
    for (px, ch) in rgba.data.chunks_exact(4).zip(v.chunks_exact(21)) {
        assert_eq!(&px[..3], &ch[..3]);
        assert_eq!(px[3], 255);
    }
    assert_eq!(s.associated_images().into_keys().collect::<Vec<_>>(), vec!["thumbnail".to_string()]);
    let Some(p) = formats3("tiles.czi") else { return };
    let s = Slide::open(&p).unwrap();
    assert_eq!(s.level_dimensions(), vec![(510, 512)], "the bounding box of the mosaic (SizeX/SizeY name one subblock)");
    assert_eq!(s.channel_names().len(), 2);
    // The file's `Information/Image/Dimensions/Channels/Channel/Color`: #00FF00 (ATTO 488), #FFFFFF.
    assert_eq!(s.channel_colors(), vec![Some([0, 255, 0]), Some([255, 255, 255])]);
    let c = s.read_region_channels((0, 0), 0, (510, 512), None).unwrap();
    assert!(matches!(c.data, Samples::U8(_)));
}

#[test]
fn generated_slide_scans_have_openslides_structure() {
    let Some(dir) = common::vendor_slides() else { return };
    let p = dir.join("czi-bgr24-zstd0.czi");
    if !p.exists() {
        eprintln!("SKIP: {} not generated", p.display());
        return;
    }
    let s = Slide::open(&p).unwrap();
    assert_eq!(s.level_dimensions(), vec![(1100, 400), (550, 200), (275, 100)]);
    assert_eq!(s.level_downsamples(), vec![1.0, 2.0, 4.0]);
    let props = s.properties();
    assert_eq!(props["openslide.region[1].x"], "720");
    assert_eq!(props["openslide.barcode"], "SS-0001");
    assert!(!props.keys().any(|k| k.contains("tile-width")), "no tile hints, as OpenSlide's range grid");
    assert_eq!(s.associated_images().into_keys().collect::<Vec<_>>(), vec!["label".to_string(), "macro".to_string(), "thumbnail".to_string()]);
    let two = Slide::open(dir.join("czi-bgr24-raw.czi")).unwrap();
    assert_eq!(two.level_count(), 2, "the second scene has no downsample-4 subblocks");
    let wide = Slide::open(dir.join("czi-bgr48-zstd1-hilo.czi")).unwrap();
    let c = wide.read_region_channels((0, 0), 0, (64, 64), None).unwrap();
    let (Samples::U16(v), rgba) = (&c.data, wide.read_region((0, 0), 0, (64, 64)).unwrap()) else { panic!("16-bit channels") };
    for (px, ch) in rgba.data.chunks_exact(4).zip(v.chunks_exact(3)) {
        assert_eq!([px[0], px[1], px[2]], [(ch[0] >> 8) as u8, (ch[1] >> 8) as u8, (ch[2] >> 8) as u8], "high byte, as OpenSlide's BGR48");
    }
}

/// A copy of `src` with `patch` applied, in the test's temporary folder.
fn patched(src: &Path, name: &str, patch: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut b = std::fs::read(src).unwrap();
    patch(&mut b);
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("zeiss-{name}.czi"));
    std::fs::write(&p, b).unwrap();
    p
}

fn le64(b: &[u8], o: usize) -> usize {
    i64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize
}

fn kind(p: &Path) -> &'static str {
    match Slide::open(p) {
        Ok(_) => "ok",
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(p.file_name().unwrap().to_str().unwrap()), "error names the file: {msg}");
            match e {
                Error::Format { .. } => "format",
                Error::Limits { .. } => "limits",
                Error::Unsupported { .. } => "unsupported",
                Error::Io { .. } => "io",
                _ => "other",
            }
        }
    }
}

#[test]
fn bad_input_gives_typed_errors() {
    let Some(src) = formats3("tiles.czi") else { return };
    let orig = std::fs::read(&src).unwrap();
    let dir = le64(&orig, 84);
    let first = dir + 32 + 128; // the first directory entry
    let att = le64(&orig, 104);
    type Patch = Box<dyn FnOnce(&mut Vec<u8>)>;
    let cases: Vec<(&str, Patch, &[&str])> = vec![
        ("truncated-header", Box::new(|b| b.truncate(60)), &["format", "unsupported"]),
        ("truncated-directory", Box::new(move |b| b.truncate(dir + 100)), &["format"]),
        ("truncated-data", Box::new(move |b| b.truncate(dir - 1000)), &["format"]),
        ("directory-past-end", Box::new(|b| b[84..92].copy_from_slice(&(1i64 << 40).to_le_bytes())), &["format"]),
        ("directory-negative", Box::new(|b| b[84..92].copy_from_slice(&(-64i64).to_le_bytes())), &["format"]),
        ("directory-loop", Box::new(|b| b[84..92].copy_from_slice(&0i64.to_le_bytes())), &["format"]),
        ("subblock-at-directory", Box::new(move |b| b[first + 6..first + 14].copy_from_slice(&(dir as i64).to_le_bytes())), &["format"]),
        ("subblock-past-end", Box::new(move |b| b[first + 6..first + 14].copy_from_slice(&(1i64 << 50).to_le_bytes())), &["format"]),
        ("entry-count", Box::new(move |b| b[dir + 32..dir + 36].copy_from_slice(&i32::MAX.to_le_bytes())), &["limits", "format"]),
        ("entry-count-negative", Box::new(move |b| b[dir + 32..dir + 36].copy_from_slice(&(-5i32).to_le_bytes())), &["format"]),
        ("dimension-count", Box::new(move |b| b[first + 28..first + 32].copy_from_slice(&100_000i32.to_le_bytes())), &["limits"]),
        (
            "absurd-stored-size",
            Box::new(move |b| {
                // The first dimension (X) of entry 0: its stored size.
                let x = first + 32;
                b[x + 16..x + 20].copy_from_slice(&1_000_000i32.to_le_bytes());
            }),
            &["limits"],
        ),
        ("zero-size", Box::new(move |b| b[first + 32 + 8..first + 32 + 12].copy_from_slice(&0i32.to_le_bytes())), &["format"]),
        ("unknown-compression", Box::new(move |b| b[first + 18..first + 22].copy_from_slice(&3i32.to_le_bytes())), &["unsupported"]),
        ("lzw-compression", Box::new(move |b| b[first + 18..first + 22].copy_from_slice(&2i32.to_le_bytes())), &["unsupported"]),
        ("float-pixels", Box::new(move |b| b[first + 2..first + 6].copy_from_slice(&2i32.to_le_bytes())), &["unsupported"]),
        ("attachment-dir-past-end", Box::new(|b| b[104..112].copy_from_slice(&(1i64 << 40).to_le_bytes())), &["format"]),
        ("attachment-past-end", Box::new(move |b| b[att + 32 + 256 + 12..att + 32 + 256 + 20].copy_from_slice(&(1i64 << 40).to_le_bytes())), &["format"]),
        ("attachment-count", Box::new(move |b| b[att + 32..att + 36].copy_from_slice(&i32::MAX.to_le_bytes())), &["limits"]),
        (
            "thumbnail-not-jpeg",
            Box::new(move |b| {
                let pos = le64(b, att + 32 + 256 + 12);
                b[pos + 288..pos + 290].copy_from_slice(b"XX");
            }),
            &["format"],
        ),
        ("bad-schema", Box::new(move |b| b[first..first + 2].copy_from_slice(b"XX")), &["format"]),
        (
            "bad-xml",
            Box::new(|b| {
                let m = le64(b, 92);
                b[m + 288] = b'&';
            }),
            &["format"],
        ),
    ];
    for (name, patch, want) in cases {
        let p = patched(&src, name, patch);
        let got = kind(&p);
        assert!(want.contains(&got), "{name}: {got}, expected one of {want:?}");
    }
}

#[test]
fn corrupt_subblock_data_fails_its_read_and_the_slide_stays_usable() {
    let Some(dir) = common::vendor_slides() else { return };
    let src = dir.join("czi-bgr24-zstd0.czi");
    if !src.exists() {
        return;
    }
    let s = Slide::open(&src).unwrap();
    let t = s.index().levels[0].image.tile(0, 0).unwrap().locs[0];
    let p = patched(&src, "corrupt-zstd", |b| b[t.offset as usize..t.offset as usize + 8].fill(0x55));
    let bad = Slide::open(&p).unwrap();
    let e = bad.read_region((0, 0), 0, (1100, 400)).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(bad.read_region((0, 0), 2, (275, 100)).is_ok(), "other levels still read");
}
