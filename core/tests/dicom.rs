//! DICOM WSI slides of several files (the CMU DICOM folder of the shared test data): the slide
//! is the same whichever file (or the folder) opens it; a slide opened from memory is the one
//! file; tiles come from the file that holds them.

mod common;

use std::path::PathBuf;

use common::testdata;
use slidestream::io::MemSource;
use slidestream::{Slide, SlideOptions};

fn cmu() -> Option<(PathBuf, Vec<PathBuf>)> {
    let dir = testdata()?.join("CMU-1-Small-Region-dicom");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    Some((dir, files))
}

#[test]
fn every_file_of_the_folder_and_the_folder_open_the_same_slide() {
    let Some((dir, files)) = cmu() else { return };
    assert_eq!(files.len(), 12);
    let level0 = dir.join("level-0-frames-0-30.dcm");
    let reference = Slide::open(&level0).unwrap();
    assert_eq!(reference.level_count(), 12);
    let want = reference.read_region((400, 900), 0, (700, 300)).unwrap();
    let want_small = reference.read_region((0, 0), 5, (69, 92)).unwrap();
    for f in files.iter().chain(std::iter::once(&dir)) {
        let s = Slide::open(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.display();
        assert_eq!(s.vendor(), "dicom", "{name}");
        // Properties (level 0's first file's) and geometry are the slide's, not the file's.
        assert_eq!(s.properties(), reference.properties(), "{name}");
        assert_eq!(s.level_dimensions(), reference.level_dimensions(), "{name}");
        // Source 0 is the file opened (for the folder: the level-0 file); the 11 others follow.
        let src0 = if f.is_dir() { level0.clone() } else { f.clone() };
        assert_eq!(s.index().path(), src0.as_path(), "{name}");
        assert_eq!(s.index().sources.len(), 12, "{name}");
        let mut paths: Vec<PathBuf> = s.index().sources.iter().map(|x| x.path.clone()).collect();
        paths.sort();
        assert_eq!(&paths, &files, "{name}");
        assert!(s.read_region((400, 900), 0, (700, 300)).unwrap().data == want.data, "{name}: level 0 pixels");
        assert!(s.read_region((0, 0), 5, (69, 92)).unwrap().data == want_small.data, "{name}: level 5 pixels");
    }
}

#[test]
fn level_tiles_are_read_from_the_file_that_holds_them() {
    let Some((dir, _)) = cmu() else { return };
    let s = Slide::open(dir.join("level-3-frames-0-1.dcm")).unwrap();
    let idx = s.index();
    for (k, l) in idx.levels.iter().enumerate() {
        let src = &idx.sources[l.image.tile_locs(0, 0).next().unwrap().source.0 as usize];
        let name = src.path.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with(&format!("level-{k}-frames-")), "level {k} tiles come from {name}");
    }
}

#[test]
fn a_slide_opened_from_memory_is_the_one_file() {
    let Some((dir, _)) = cmu() else { return };
    let path = dir.join("level-1-frames-0-9.dcm");
    let bytes = std::fs::read(&path).unwrap();
    let mem = Slide::from_source("level-1.dcm", Box::new(MemSource::new(bytes)), SlideOptions::default()).unwrap();
    assert_eq!(mem.vendor(), "dicom");
    assert_eq!(mem.level_count(), 1);
    assert_eq!(mem.index().sources.len(), 1);
    let file = Slide::open(&path).unwrap();
    assert_eq!(mem.dimensions(), file.level_dimensions()[1]);
    // Same pixels as level 1 of the whole slide.
    let a = mem.read_region((0, 0), 0, (1110, 1483)).unwrap();
    let b = file.read_region((0, 0), 1, (1110, 1483)).unwrap();
    assert!(a.data == b.data);
    // The properties are this file's (level 0 of the memory slide).
    assert_eq!(mem.properties()["dicom.TotalPixelMatrixColumns"], "1110");
    assert_eq!(mem.properties()["openslide.quickhash-1"], file.properties()["openslide.quickhash-1"], "same series");
}

#[test]
fn a_changed_sibling_is_an_error_when_its_tiles_are_read() {
    let Some((dir, files)) = cmu() else { return };
    let tmp = std::env::temp_dir().join(format!("slidestream-dicom-changed-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for f in &files {
        std::fs::copy(f, tmp.join(f.file_name().unwrap())).unwrap();
    }
    let s = Slide::open(tmp.join("level-0-frames-0-30.dcm")).unwrap();
    // Rewrite level 2's file (new inode/mtime/size) after open: reading it must fail typed.
    let l2 = tmp.join("level-2-frames-0-4.dcm");
    let mut bytes = std::fs::read(&l2).unwrap();
    bytes.push(0);
    std::fs::remove_file(&l2).unwrap();
    std::fs::write(&l2, &bytes).unwrap();
    let r = s.read_region((0, 0), 2, (100, 100));
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = dir;
    let e = r.expect_err("reading a changed file must fail");
    assert!(matches!(e.kind_name(), "io" | "format"), "{e}");
}

/// Errors of tiles stored in a second file of the series name that file: a corrupt frame of
/// level 2 names level 2's instance, and an instance deleted after open is an `Io` error with
/// its OS error code (Python: `FileNotFoundError`) at the deleted file's path.
#[test]
fn tile_errors_name_the_file_that_holds_the_tile() {
    let Some((_dir, files)) = cmu() else { return };
    let tmp = std::env::temp_dir().join(format!("slidestream-dicom-blame-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for f in &files {
        std::fs::copy(f, tmp.join(f.file_name().unwrap())).unwrap();
    }
    // Zero the SOI of level 2's first frame (the first JPEG SOI + APP marker in its file).
    let l2 = tmp.join("level-2-frames-0-4.dcm");
    let mut bytes = std::fs::read(&l2).unwrap();
    let soi = bytes.windows(3).position(|w| w == [0xFF, 0xD8, 0xFF]).expect("a JPEG frame");
    bytes[soi] = 0;
    bytes[soi + 1] = 0;
    std::fs::write(&l2, &bytes).unwrap();
    let s = Slide::open(&tmp).unwrap();
    let corrupt = s.read_region((0, 0), 2, (100, 100));
    let l3 = tmp.join("level-3-frames-0-1.dcm");
    std::fs::remove_file(&l3).unwrap();
    let gone = s.read_region((0, 0), 3, (50, 50));
    let level0 = s.read_region((0, 0), 0, (64, 64)).map(|_| ());
    let _ = std::fs::remove_dir_all(&tmp);
    let e = corrupt.expect_err("a frame without SOI must fail");
    assert_eq!(e.kind_name(), "format", "{e}");
    assert!(e.to_string().starts_with(&format!("{}: level 2: tile (0, 0)", l2.display())), "{e}");
    let e = gone.expect_err("a deleted instance must fail");
    match &e {
        slidestream::Error::Io { at, source } => {
            assert_eq!(at.path, l3, "{e}");
            assert_eq!(source.raw_os_error(), Some(2), "{e}");
        }
        other => panic!("want an Io error, got {other}"),
    }
    assert!(level0.is_ok(), "the slide stays usable: {level0:?}");
}

/// `detect_vendor` of a folder answers for the file `Slide::open` opens in it.
#[test]
fn a_series_folder_is_detected_as_dicom() {
    let Some((dir, _)) = cmu() else { return };
    assert_eq!(Slide::detect_vendor(&dir).unwrap(), Some("dicom"));
    let empty = std::env::temp_dir().join(format!("slidestream-dicom-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let r = Slide::detect_vendor(&empty);
    let _ = std::fs::remove_dir(&empty);
    assert_eq!(r.unwrap(), None);
}
