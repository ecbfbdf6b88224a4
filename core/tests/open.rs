//! What opening a slide reads and refuses: ICC profiles are read on request, not at open
//! (the index keeps their byte range; `openslide.icc-size` comes from the tag's count), and
//! features no reader can decode are refused at open with a typed error naming them.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::tiffwriter::{tag, Chunk, Ifd, TempPath, Tiff, Value, Variant};
use slidestream::io::{ByteSource, MemSource};
use slidestream::{Error, Slide, SlideOptions};

/// Counts every byte read through it (shared counter, so the test sees reads at open).
#[derive(Debug)]
struct Counting {
    inner: MemSource,
    bytes: Arc<AtomicU64>,
}

impl ByteSource for Counting {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.inner.read_exact_at(buf, offset)
    }
}

const ICC_TAG: u16 = 34675;

#[test]
fn a_large_icc_profile_is_not_read_at_open_and_reads_back_exactly_later() {
    let icc: Vec<u8> = (0..13_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    for variant in [Variant::Classic, Variant::BigTiff] {
        let tile = vec![200u8; 64 * 64 * 3];
        let ifd = Ifd::tiled(64, 64, 64, 64, vec![Chunk::Data(tile)]).tag(ICC_TAG, Value::Undefined(icc.clone()));
        let bytes = Tiff::new(variant, vec![ifd]).to_bytes();
        let counter = Arc::new(AtomicU64::new(0));
        let src = Counting { inner: MemSource::new(bytes), bytes: counter.clone() };
        let slide = Slide::from_source("big-icc.tif", Box::new(src), SlideOptions::default()).unwrap();
        let at_open = counter.load(Ordering::Relaxed);
        // Structure plus the one 12 KiB tile quickhash covers; nowhere near the 13 MB profile.
        assert!(at_open < 64 * 1024, "{variant:?}: open read {at_open} bytes");
        assert_eq!(slide.properties()["openslide.icc-size"], icc.len().to_string(), "{variant:?}");
        let got = slide.icc_profile().unwrap().expect("profile");
        assert!(got[..] == icc[..], "{variant:?}: profile bytes differ");
        let after = counter.load(Ordering::Relaxed);
        assert_eq!(after - at_open, icc.len() as u64, "{variant:?}: the profile is read once, whole");
        // Kept after the first request.
        assert!(slide.icc_profile().unwrap().is_some_and(|p| p.len() == icc.len()));
        assert_eq!(counter.load(Ordering::Relaxed), after, "{variant:?}: second request read again");
    }
}

#[test]
fn no_icc_tag_means_no_profile_and_no_icc_size() {
    let ifd = Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(vec![1u8; 16 * 16 * 3])]);
    let slide = Slide::from_source("no-icc.tif", Box::new(MemSource::new(Tiff::new(Variant::Classic, vec![ifd]).to_bytes())), SlideOptions::default()).unwrap();
    assert!(slide.icc_profile().unwrap().is_none());
    assert!(!slide.properties().contains_key("openslide.icc-size"));
}

#[test]
fn an_icc_profile_past_the_end_of_the_file_is_refused_at_open() {
    let ifd = Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(vec![1u8; 16 * 16 * 3])]).tag(ICC_TAG, Value::Claim { field_type: 7, count: 100, offset: 1 << 30 });
    let f = TempPath::new("icc-past-eof.tif");
    Tiff::new(Variant::Classic, vec![ifd]).write(f.path());
    let e = Slide::open(f.path()).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(e.to_string().contains("tag 34675") && e.to_string().contains("past the end"), "{e}");
}

#[test]
fn greyscale_plus_alpha_jpeg_opens_and_a_one_component_stream_under_it_is_a_format_error() {
    // SamplesPerPixel 2 (grey + unassociated alpha), JPEG: opened as OpenSlide 4.0.1 opens it
    // (its tiles are decoded without colour transform, `codec::jpeg_raw`); a tile whose stream
    // has one component fails to read with a Format error naming the file and the tile, as
    // libtiff refuses it ("improper component count").
    let jpeg = turbojpeg::compress(
        turbojpeg::Image { pixels: &[128u8; 16 * 16][..], width: 16, pitch: 16, height: 16, format: turbojpeg::PixelFormat::GRAY },
        90,
        turbojpeg::Subsamp::Gray,
    )
    .unwrap()
    .to_vec();
    for tiled in [true, false] {
        let mut ifd =
            if tiled { Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(jpeg.clone())]) } else { Ifd::stripped(16, 16, 16, vec![Chunk::Data(jpeg.clone())]) };
        ifd = ifd.color(2, 1).compression(7);
        ifd.extra_samples = Some(vec![2]);
        // Both drivers need a tiled IFD 0, so the stripped case is an Aperio label (an untiled
        // IFD with NewSubfileType 1, after an RGB level and thumbnail).
        let ifds = if tiled {
            vec![ifd]
        } else {
            let mut l0 = Ifd::tiled(16, 16, 16, 16, vec![Chunk::Data(vec![9u8; 16 * 16 * 3])]);
            l0.description = Some("Aperio Image Library test|AppMag = 20".into());
            vec![l0, Ifd::stripped(16, 16, 16, vec![Chunk::Data(vec![1u8; 768])]), ifd.tag(tag::NEW_SUBFILE_TYPE, Value::Long(vec![1]))]
        };
        let f = TempPath::new("grey-alpha-jpeg.tif");
        Tiff::new(Variant::Classic, ifds).write(f.path());
        let slide = Slide::open(f.path()).unwrap_or_else(|e| panic!("tiled {tiled}: {e}"));
        let e = if tiled { slide.read_region((0, 0), 0, (16, 16)).unwrap_err() } else { slide.read_associated("label").unwrap_err() };
        assert!(matches!(e, Error::Format { .. }), "tiled {tiled}: {e}");
        assert!(e.to_string().contains("1 components, SamplesPerPixel is 2"), "tiled {tiled}: {e}");
        assert!(e.to_string().contains(&f.path().display().to_string()), "tiled {tiled}: {e}");
        if tiled {
            assert!(e.to_string().contains("tile (0, 0)"), "{e}");
        }
    }
}

/// A FIFO at `path` (made with mkfifo(3)).
fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
}

/// Issue 13 F3: a FIFO as the slide path blocked `open(2)` forever (waiting for a writer);
/// `/dev/zero` and `/dev/urandom` were read as files ("shorter than a TIFF header"). Both are
/// refused at once with an io error saying what the path is. The open runs in a thread; if it
/// has not returned after a minute (the old behaviour), the test opens the FIFO for writing to
/// release it and fails.
#[test]
fn a_fifo_or_a_device_is_refused_without_blocking() {
    let fifo = TempPath::new("slide.fifo");
    mkfifo(fifo.path());
    let p = fifo.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = Slide::open(&p).map(|_| ()).map_err(|e| (e.kind_name(), e.to_string(), e.io_error().map(|io| io.kind())));
        let _ = tx.send(r);
    });
    let r = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(r) => r,
        Err(_) => {
            let _ = std::fs::OpenOptions::new().write(true).open(fifo.path());
            panic!("Slide::open of a FIFO still blocked after 60 s");
        }
    };
    let (kind, msg, io_kind) = r.expect_err("a FIFO opened as a slide");
    assert_eq!(kind, "io", "{msg}");
    assert_eq!(io_kind, Some(std::io::ErrorKind::InvalidInput), "{msg}");
    assert!(msg.starts_with(&fifo.path().display().to_string()) && msg.contains("not a regular file: a FIFO"), "{msg}");
    for dev in ["/dev/zero", "/dev/urandom"] {
        if !std::path::Path::new(dev).exists() {
            continue;
        }
        let e = Slide::open(dev).unwrap_err();
        assert_eq!(e.to_string(), format!("{dev}: not a regular file: a character device; slides are read from regular files"));
        // Detection refuses it the same way.
        assert_eq!(Slide::detect(dev).unwrap_err().kind_name(), "io");
    }
}

/// Issue 13 F15: a file truncated after it was opened failed with the errno-less "failed to
/// fill whole buffer"; the error now says the file is shorter than its tile table, with the
/// file, level and tile, and keeps the `UnexpectedEof` kind.
#[test]
fn a_file_truncated_while_open_names_the_file_level_and_tile() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/CMU-1-Small-Region.svs");
    let copy = TempPath::new("truncated-while-open.svs");
    std::fs::copy(sample, copy.path()).unwrap();
    let cache = Arc::new(slidestream::TileCache::new(0));
    let slide = Slide::open_with(copy.path(), SlideOptions { cache: Some(cache), ..SlideOptions::default() }).unwrap();
    std::fs::OpenOptions::new().write(true).open(copy.path()).unwrap().set_len(4096).unwrap();
    // The last tile of level 0 (2220x2967, 240² tiles): column 9, row 12.
    let e = slide.read_region((2200, 2950), 0, (16, 16)).unwrap_err();
    let m = e.to_string();
    assert_eq!(e.kind_name(), "io", "{m}");
    assert_eq!(e.io_error().map(|io| io.kind()), Some(std::io::ErrorKind::UnexpectedEof), "{m}");
    assert!(m.starts_with(&format!("{}: level 0: tile (9, 12): file shorter than its tile table (truncated?)", copy.path().display())), "{m}");
    assert!(m.contains("the file is now 4096 bytes"), "{m}");
}
