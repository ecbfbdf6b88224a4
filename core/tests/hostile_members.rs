//! Slides of several files under attack: a MIRAX key file whose camera grid claims billions of
//! images, member files named outside the slide's folder (`..`, absolute paths, symbolic links
//! leading out) for MIRAX and DICOM, and members touched, rewritten or replaced between the
//! open and their first read.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::mirax::{colour, open_no_panic, pixel, refused, write, Positions, Written, E};
use slidestream::{Error, Slide};

/// Run `f` on a thread; fail the test if it takes longer than a minute (a hang, or work
/// proportional to a claimed grid of 10^10 images).
fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("{what}: still running after 60 s"))
}

fn set_images(w: &Written, x: &str, y: &str) {
    w.edit_ini(|s| s.replace("IMAGENUMBER_X=4\n", &format!("IMAGENUMBER_X={x}\n")).replace("IMAGENUMBER_Y=2\n", &format!("IMAGENUMBER_Y={y}\n")));
}

/// `IMAGENUMBER_X/Y` sized a table of one position per camera image before anything checked
/// them: 100000² aborted the process (a 16 TB allocation), 30000² took > 4 GiB, 10000² 1.5 GB,
/// 2³¹−1 panicked ("capacity overflow"). Now a grid over 2^24 images is a limits error at open,
/// with or without a position record.
#[test]
fn a_camera_grid_of_billions_of_images_is_a_limits_error() {
    for (x, y) in [("100000", "100000"), ("30000", "30000"), ("10000", "10000"), ("2147483647", "2"), ("2147483647", "2147483647")] {
        for pos in [Positions::None, Positions::Raw, Positions::Zlib { extra: 0 }] {
            let w = write("grid", pos);
            set_images(&w, x, y);
            let path = w.mrxs();
            let e = within_a_minute(&format!("{x} x {y}"), move || open_no_panic(&path).map(|_| ()).unwrap_err());
            assert_eq!(e.kind_name(), "limits", "{x} x {y}: {e}");
            assert!(e.to_string().contains("IMAGENUMBER_X") && e.to_string().contains("Slidedat.ini"), "{e}");
        }
    }
}

/// Within the limit, a grid the position record does not match is refused before the record
/// is read or inflated; without a record the lattice costs no memory, so a large sparse grid
/// opens and reads its images.
#[test]
fn a_grid_within_the_limit_is_checked_against_the_position_record() {
    for pos in [Positions::Raw, Positions::Zlib { extra: 0 }] {
        let w = write("grid-record", pos);
        set_images(&w, "4000", "4000");
        let e = refused(&w, "format", "4000 x 4000 with a record of 8 positions");
        assert!(e.to_string().contains("position record") && e.to_string().contains("16000000 camera positions"), "{e}");
    }
    let w = write("grid-lattice", Positions::None);
    set_images(&w, "4000", "4000");
    let path = w.mrxs();
    let s = within_a_minute("4000 x 4000 lattice", move || open_no_panic(&path)).unwrap();
    assert_eq!(s.dimensions(), ((4000 * E) as u64, (4000 * E) as u64));
    // Record 7 (written as image (3, 1) of a 4 x 2 grid) is image (7, 0) of a 4000-wide one.
    let c = colour(3, 1);
    assert_eq!(pixel(&s, (7 * E + 2) as i64, 2).unwrap(), vec![c[0], c[1], c[2], 255]);
}

/// A file beside the slide's folder, holding `bytes`; removed with the slide.
fn outside(w: &Written, name: &str, bytes: &[u8]) -> PathBuf {
    let p = w.dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The error names the entry and says why; it never describes the outside file (its size).
fn refused_outside(w: &Written, what: &str, entry: &str, outside_len: Option<usize>) {
    let e = refused(w, "format", what);
    let m = e.to_string();
    assert!(m.contains(entry) && m.contains("slide's folder"), "{what}: {m}");
    if let Some(n) = outside_len {
        assert!(!m.contains(&format!("{n} bytes")), "{what}: the error reveals the outside file's size: {m}");
    }
}

/// `INDEXFILE` and `FILE_n` accepted `../` and absolute paths (`/etc/passwd` was opened, an
/// outside file read as tile data, its size shown in errors). Every file the slide names must
/// now resolve inside its folder.
#[test]
fn mirax_files_named_outside_the_slide_folder_are_refused() {
    let w = write("escape", Positions::Raw);
    let data1 = std::fs::read(w.file("Data0001.dat")).unwrap();
    let copy = outside(&w, "Data0001.dat", &data1);
    w.edit_ini(|s| s.replace("FILE_1=Data0001.dat", "FILE_1=../Data0001.dat"));
    refused_outside(&w, "FILE_1 = ../", "[DATAFILE] FILE_1", Some(data1.len()));
    w.edit_ini(|s| s.replace("FILE_1=../Data0001.dat", &format!("FILE_1={}", copy.display())));
    refused_outside(&w, "FILE_1 absolute", "[DATAFILE] FILE_1", Some(data1.len()));
    w.edit_ini(|s| s.replace(&format!("FILE_1={}", copy.display()), "FILE_1=../../../../etc/passwd"));
    refused_outside(&w, "FILE_1 = /etc/passwd by ..", "[DATAFILE] FILE_1", None);

    let w = write("escape-index", Positions::None);
    let index = std::fs::read(w.file("Index.dat")).unwrap();
    outside(&w, "Index.dat", &index);
    w.edit_ini(|s| s.replace("INDEXFILE=Index.dat", "INDEXFILE=sub/../../Index.dat"));
    refused_outside(&w, "INDEXFILE = ../", "[HIERARCHICAL] INDEXFILE", Some(index.len()));
    w.edit_ini(|s| s.replace("INDEXFILE=sub/../../Index.dat", "INDEXFILE="));
    refused(&w, "format", "INDEXFILE empty");
}

/// A member that is a symbolic link: one leading out of the folder is refused (naming the
/// entry, not the target); one staying inside reads as before.
#[test]
fn mirax_member_links_must_stay_inside_the_folder() {
    let w = write("link-out", Positions::None);
    let data1 = std::fs::read(w.file("Data0001.dat")).unwrap();
    let target = outside(&w, "elsewhere.dat", &data1);
    std::fs::remove_file(w.file("Data0001.dat")).unwrap();
    std::os::unix::fs::symlink(&target, w.file("Data0001.dat")).unwrap();
    let e = refused(&w, "format", "Data0001.dat links out");
    assert!(e.to_string().contains("[DATAFILE] FILE_1") && e.to_string().contains("symbolic link"), "{e}");
    assert!(!e.to_string().contains("elsewhere"), "the error names the target: {e}");
    // A dangling link is not known to be inside either.
    std::fs::remove_file(&target).unwrap();
    refused(&w, "format", "Data0001.dat dangling");

    let w = write("link-in", Positions::None);
    std::fs::rename(w.file("Data0001.dat"), w.file("real-1.dat")).unwrap();
    std::os::unix::fs::symlink("real-1.dat", w.file("Data0001.dat")).unwrap();
    let s = open_no_panic(&w.mrxs()).unwrap();
    let c = colour(1, 0);
    assert_eq!(pixel(&s, (E + 3) as i64, 3).unwrap(), vec![c[0], c[1], c[2], 255], "a link inside the folder reads");

    // The key file itself linking out: not this slide's folder, so not a MIRAX slide.
    let w = write("ini-out", Positions::None);
    let ini = std::fs::read(w.file("Slidedat.ini")).unwrap();
    let target = outside(&w, "Slidedat.ini", &ini);
    std::fs::remove_file(w.file("Slidedat.ini")).unwrap();
    std::os::unix::fs::symlink(&target, w.file("Slidedat.ini")).unwrap();
    assert!(open_no_panic(&w.mrxs()).is_err(), "a key file outside the folder was read");
}

/// A copy of the shared DICOM test slide's folder in a fresh temporary folder, removed on drop.
struct DicomCopy {
    root: PathBuf,
}

impl DicomCopy {
    fn new(name: &str) -> Option<DicomCopy> {
        let src = common::testdata()?.join("CMU-1-Small-Region-dicom");
        let root = std::env::temp_dir().join(format!("slidestream-members-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("slide")).unwrap();
        for e in std::fs::read_dir(&src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), root.join("slide").join(e.file_name())).unwrap();
        }
        Some(DicomCopy { root })
    }
    fn member(&self, level: usize) -> PathBuf {
        let dir = self.root.join("slide");
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("level-{level}-")))
            .unwrap()
    }
    fn open(&self) -> Slide {
        Slide::open(self.member(0)).unwrap()
    }
}

impl Drop for DicomCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A DICOM folder's member that is a link leading out of the folder is not one of its files:
/// the level it would hold is absent, as if the file were elsewhere (it was read before).
#[test]
fn dicom_members_linked_from_outside_the_folder_are_not_read() {
    let Some(d) = DicomCopy::new("link") else { return };
    assert_eq!(d.open().level_count(), 12);
    let l1 = d.member(1);
    let moved = d.root.join(l1.file_name().unwrap());
    std::fs::rename(&l1, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &l1).unwrap();
    let s = d.open();
    assert_eq!(s.level_count(), 11, "the level behind the outside link was read");
    assert_eq!(s.level_dimensions()[1], (555, 741), "level 1 is gone, level 2 follows");
    // The same file linked from inside the folder is a member again.
    std::fs::remove_file(&l1).unwrap();
    std::fs::rename(&moved, d.root.join("slide").join("stored-l1.bin")).unwrap();
    std::os::unix::fs::symlink("stored-l1.bin", &l1).unwrap();
    let e = Slide::open(d.member(0)).map(|s| s.level_count());
    assert!(matches!(e, Ok(12) | Err(Error::Format { .. })), "a link inside the folder is listed (as is its target): {e:?}");
}

fn set_mtime(p: &Path, secs_ahead: u64) {
    let f = std::fs::File::options().write(true).open(p).unwrap();
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(secs_ahead)).unwrap();
}

fn stale(r: slidestream::Result<impl std::fmt::Debug>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind_name(), "io", "{what}: {e}");
    assert_eq!(e.io_error().map(|io| io.kind()), Some(std::io::ErrorKind::StaleNetworkFileHandle), "{what}: {e}");
    assert!(e.to_string().contains("changed since the slide was opened"), "{what}: {e}");
}

/// A member only touched after the open (same bytes, new mtime) failed its level for the life
/// of the handle ("size 351190 → 351190 bytes, or replaced", no errno). Identity is now device,
/// inode and size, with a content sample deciding when the mtime moved: touched members read;
/// members rewritten with other bytes or replaced are stale (`ESTALE`).
#[test]
fn dicom_members_touched_after_open_still_read_and_changed_ones_are_stale() {
    let Some(d) = DicomCopy::new("touch") else { return };
    let s = d.open();
    let before = Slide::open(d.member(0)).unwrap();
    set_mtime(&d.member(1), 60);
    let got = s.read_region((0, 0), 1, (64, 64)).expect("a touched member reads");
    assert_eq!(got.data, before.read_region((0, 0), 1, (64, 64)).unwrap().data);
    // Rewritten in place, same length, other bytes at its end (the last frame).
    let l2 = d.member(2);
    let mut bytes = std::fs::read(&l2).unwrap();
    let n = bytes.len();
    bytes[n - 100] ^= 0xFF;
    std::fs::write(&l2, &bytes).unwrap();
    set_mtime(&l2, 120);
    stale(s.read_region((0, 0), 2, (64, 64)), "level 2 rewritten");
    // Replaced by a copy (a new inode) of other length.
    let l3 = d.member(3);
    let mut bytes = std::fs::read(&l3).unwrap();
    bytes.extend([0u8; 16]);
    let tmp = d.root.join("new-l3");
    std::fs::write(&tmp, &bytes).unwrap();
    std::fs::rename(&tmp, &l3).unwrap();
    stale(s.read_region((0, 0), 3, (64, 64)), "level 3 replaced");
    // The handle stays usable for the untouched levels.
    assert_eq!(s.read_region((0, 0), 0, (16, 16)).unwrap().data, before.read_region((0, 0), 0, (16, 16)).unwrap().data);
}

/// The same for MIRAX data files: touched reads, rewritten is stale.
#[test]
fn mirax_data_files_touched_after_open_still_read() {
    let w = write("touch", Positions::None);
    let s = open_no_panic(&w.mrxs()).unwrap();
    set_mtime(&w.file("Data0000.dat"), 60);
    let c = colour(0, 0);
    assert_eq!(pixel(&s, 3, 3).unwrap(), vec![c[0], c[1], c[2], 255], "a touched data file reads");
    let s = open_no_panic(&w.mrxs()).unwrap();
    let mut bytes = std::fs::read(w.file("Data0000.dat")).unwrap();
    bytes[60] ^= 0xFF;
    std::fs::write(w.file("Data0000.dat"), &bytes).unwrap();
    set_mtime(&w.file("Data0000.dat"), 120);
    stale(pixel(&s, 3, 3), "Data0000.dat rewritten");
}
