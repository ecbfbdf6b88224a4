//! MIRAX bad inputs: small slides written here (BMP24 images of known solid colours, the
//! layout of `format/mirax.rs`'s docs), each with one thing broken, must give a typed error
//! naming the slide, never a panic; a slide whose data file is cut reads the images before
//! the cut and fails on the cut one, and stays usable.

mod common;

use common::mirax::*;
use slidestream::Slide;

#[test]
fn the_writer_makes_slides_that_open_with_known_pixels() {
    for pos in [Positions::None, Positions::Raw, Positions::Zlib { extra: 0 }] {
        let w = write("ok", pos);
        let s = open_no_panic(&w.mrxs()).unwrap();
        assert_eq!(s.vendor(), "mirax");
        assert_eq!(s.level_dimensions(), vec![((NX as u32 * E) as u64, (NY as u32 * E) as u64), ((NX as u32 * E / 2) as u64, (NY as u32 * E / 2) as u64)]);
        for (x, y) in [(0, 0), (3, 1), (1, 0), (2, 1)] {
            let c = colour(x, y);
            let got = pixel(&s, (x as u32 * E + 5) as i64, (y as u32 * E + 7) as i64).unwrap();
            assert_eq!(got, vec![c[0], c[1], c[2], 255], "image ({x}, {y})");
        }
        assert_eq!(s.properties()["openslide.objective-power"], "20");
    }
}

#[test]
fn missing_files_are_typed_errors() {
    let w = write("no-ini", Positions::None);
    std::fs::remove_file(w.file("Slidedat.ini")).unwrap();
    let e = open_no_panic(&w.mrxs()).unwrap_err();
    assert_eq!(e.kind_name(), "unsupported", "no Slidedat.ini: not a MIRAX slide: {e}");
    let w = write("no-index", Positions::None);
    std::fs::remove_file(w.file("Index.dat")).unwrap();
    refused(&w, "io", "no Index.dat");
    let w = write("no-data", Positions::None);
    std::fs::remove_file(w.file("Data0001.dat")).unwrap();
    refused(&w, "io", "no Data0001.dat");
}

#[test]
fn slidedat_faults_are_format_errors() {
    let w = write("hier0", Positions::None);
    w.edit_ini(|s| s.replace("HIER_COUNT=1", "HIER_COUNT=2").replace("HIER_0_NAME=Slide zoom level", "HIER_0_NAME=Other\nHIER_1_NAME=Slide zoom level"));
    assert!(refused(&w, "format", "HIER_1 is the zoom level").to_string().contains("not HIER_0"));
    let w = write("nx0", Positions::None);
    w.edit_ini(|s| s.replace(&format!("IMAGENUMBER_X={NX}"), "IMAGENUMBER_X=0"));
    refused(&w, "format", "IMAGENUMBER_X=0");
    let w = write("bad-line", Positions::None);
    w.edit_ini(|s| s.replace("[DATAFILE]", "[DATAFILE]\nnot a key"));
    // Detection needs a Slidedat.ini that parses: the slide is declined, the reason says why.
    assert!(refused(&w, "unsupported", "a line that is no key-value pair").to_string().contains("Slidedat.ini line"));
    let w = write("fmt", Positions::None);
    w.edit_ini(|s| s.replacen("IMAGE_FORMAT=BMP24", "IMAGE_FORMAT=JPEG2000", 1));
    refused(&w, "unsupported", "IMAGE_FORMAT=JPEG2000");
    let w = write("big", Positions::None);
    w.edit_ini(|s| s + &"#".repeat(1 << 20));
    let e = open_no_panic(&w.mrxs()).unwrap_err();
    assert!(matches!(e.kind_name(), "unsupported" | "limits"), "a Slidedat.ini over 1 MiB: {e}");
}

#[test]
fn index_faults_are_format_errors() {
    let w = write("version", Positions::None);
    w.patch("Index.dat", 0, b"01.01");
    assert!(refused(&w, "format", "version 01.01").to_string().contains("version"));
    let w = write("slide-id", Positions::None);
    w.edit_ini(|s| s.replace("SLIDE_ID=SLIDEID", "SLIDE_ID=SLIDEIX"));
    assert!(refused(&w, "format", "another SLIDE_ID").to_string().contains("identifier"));
    let w = write("past-eof", Positions::None);
    w.patch("Index.dat", w.hier_ptr, &(1i32 << 30).to_le_bytes());
    refused(&w, "format", "hier table pointer past the end");
    let w = write("negative", Positions::None);
    w.patch("Index.dat", w.hier_ptr, &(-8i32).to_le_bytes());
    refused(&w, "format", "negative hier table pointer");
    let w = write("loop", Positions::None);
    let page = (w.first_next - 4) as i32;
    w.patch("Index.dat", w.first_next, &page.to_le_bytes());
    assert!(refused(&w, "format", "a page chain that loops").to_string().contains("loop"));
    let w = write("fileno", Positions::None);
    w.patch("Index.dat", w.first_fileno, &2i32.to_le_bytes());
    assert!(refused(&w, "format", "fileno 2 of 2 files").to_string().contains("fileno"));
    let w = write("concat", Positions::None);
    w.patch("Index.dat", w.l1_first_index, &1i32.to_le_bytes());
    assert!(refused(&w, "format", "level-1 image at x = 1").to_string().contains("multiple"));
}

#[test]
fn position_record_faults_are_format_errors() {
    let w = write("flag", Positions::Raw);
    w.patch("Data0000.dat", w.positions_at.unwrap() + 9, &[3]);
    assert!(refused(&w, "format", "a flag byte of 3").to_string().contains("flag"));
    let w = write("zlib-size", Positions::Zlib { extra: 9 });
    assert!(refused(&w, "format", "a zlib record 9 bytes too long").to_string().contains("inflated"));
    let w = write("zlib-bad", Positions::Zlib { extra: 0 });
    w.patch("Data0000.dat", w.positions_at.unwrap() + 2, &[0xFF; 6]);
    refused(&w, "format", "a damaged zlib record");
    // Position 1 at x = 17: level 1 (concat 2) would place its sub-tile at x = 8.5, which
    // OpenSlide resamples: refused as unsupported.
    let w = write("fractional", Positions::Raw);
    w.patch("Data0000.dat", w.positions_at.unwrap() + 10, &17i32.to_le_bytes());
    assert!(refused(&w, "unsupported", "a fractional level-1 position").to_string().contains("fractional"));
    let w = write("raw-size", Positions::Raw);
    w.edit_ini(|s| s.replace(&format!("IMAGENUMBER_Y={NY}"), "IMAGENUMBER_Y=1"));
    refused(&w, "format", "a position record for 8 positions, 4 expected");
}

#[test]
fn a_truncated_data_file_fails_on_the_cut_image_and_the_slide_stays_usable() {
    let w = write("cut", Positions::None);
    // Data0000.dat holds level-0 images (0, 0), (2, 0), (1, 1), (3, 1): cut the last 10 bytes
    // of (3, 1). (Level 1, the lowest, whose images quickhash reads at open, is in Data0001.dat.)
    let p = w.file("Data0000.dat");
    let data = std::fs::read(&p).unwrap();
    std::fs::write(&p, &data[..data.len() - 10]).unwrap();
    let s = open_no_panic(&w.mrxs()).unwrap();
    let c = colour(1, 1);
    assert_eq!(pixel(&s, E as i64 + 5, E as i64 + 5).unwrap(), vec![c[0], c[1], c[2], 255], "images before the cut read");
    let cut = (3 * E as i64 + 5, E as i64 + 5);
    let e = pixel(&s, cut.0, cut.1).unwrap_err();
    assert_eq!(e.kind_name(), "format", "{e}");
    assert!(e.to_string().contains("level 0"), "the error names the level: {e}");
    let again = pixel(&s, cut.0, cut.1).unwrap_err();
    assert_eq!(again.kind_name(), "format");
    assert!(pixel(&s, 5, 5).is_ok(), "the slide stays usable");
}

#[test]
fn a_mirax_slide_from_memory_is_declined() {
    let w = write("mem", Positions::None);
    let src = slidestream::io::MemSource::new(std::fs::read(w.mrxs()).unwrap());
    let e = Slide::from_source(w.mrxs(), Box::new(src), Default::default()).unwrap_err();
    assert_eq!(e.kind_name(), "unsupported", "{e}");
}

#[test]
fn damaged_images_fail_at_read_with_typed_errors() {
    let w = write("bmp", Positions::None);
    // Level-0 image (0, 0) is the first in Data0000.dat: break its bit depth.
    w.patch("Data0000.dat", 28, &32u16.to_le_bytes());
    let s = open_no_panic(&w.mrxs()).unwrap();
    let e = pixel(&s, 3, 3).unwrap_err();
    assert_eq!(e.kind_name(), "format", "{e}");
    assert!(pixel(&s, E as i64 + 3, 3).is_ok());
}
