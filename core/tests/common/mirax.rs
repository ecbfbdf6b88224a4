//! Small MIRAX slides written for the tests (BMP24 images of known solid colours, the layout
//! of `format/mirax.rs`'s docs): `write` lays one out in a temporary folder, removed on drop.

use std::io::Write;
use std::path::{Path, PathBuf};

use slidestream::{Error, Slide};

/// Level-0 images across and down, and their edge in pixels.
pub const NX: i32 = 4;
pub const NY: i32 = 2;
pub const E: u32 = 16;

/// The colour of level-0 image (x, y).
pub fn colour(x: i32, y: i32) -> [u8; 3] {
    [40 + 50 * x as u8, 60 + 90 * y as u8, 200]
}

/// A BMP24 of `E × E` pixels of one colour (rows bottom-up, BGR, 48 bytes: no padding).
pub fn bmp(c: [u8; 3]) -> Vec<u8> {
    let data = (E * E * 3) as usize;
    let mut v = b"BM".to_vec();
    v.extend((54 + data as u32).to_le_bytes());
    v.extend([0; 4]);
    v.extend(54u32.to_le_bytes());
    v.extend(40u32.to_le_bytes());
    v.extend((E as i32).to_le_bytes());
    v.extend((E as i32).to_le_bytes());
    v.extend(1u16.to_le_bytes());
    v.extend(24u16.to_le_bytes());
    v.extend([0; 4]);
    v.extend((data as u32).to_le_bytes());
    v.extend([0; 16]);
    for _ in 0..E * E {
        v.extend([c[2], c[1], c[0]]);
    }
    v
}

/// How the slide keeps its camera positions.
#[derive(Clone, Copy, PartialEq)]
pub enum Positions {
    /// No record (a lattice).
    None,
    /// VIMSLIDE_POSITION_BUFFER.
    Raw,
    /// StitchingIntensityLayer, with `extra` bytes appended before compressing.
    Zlib { extra: usize },
}

/// A slide on disk: `<dir>/s.mrxs` and `<dir>/s/`; offsets of interesting Index.dat fields.
pub struct Written {
    pub dir: PathBuf,
    /// Index.dat offset of the hierarchical table pointer.
    pub hier_ptr: usize,
    /// Index.dat offset of level 0's first page's "next" pointer.
    pub first_next: usize,
    /// Index.dat offset of level 0's first record's fileno.
    pub first_fileno: usize,
    /// Index.dat offset of level 1's first record's image index.
    pub l1_first_index: usize,
    /// Data0000.dat offset of the position buffer, when there is one.
    pub positions_at: Option<usize>,
}

impl Written {
    pub fn mrxs(&self) -> PathBuf {
        self.dir.join("s.mrxs")
    }
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join("s").join(name)
    }
    pub fn patch(&self, name: &str, at: usize, bytes: &[u8]) {
        let mut v = std::fs::read(self.file(name)).unwrap();
        v[at..at + bytes.len()].copy_from_slice(bytes);
        std::fs::write(self.file(name), v).unwrap();
    }
    pub fn edit_ini(&self, f: impl Fn(String) -> String) {
        let p = self.file("Slidedat.ini");
        std::fs::write(&p, f(std::fs::read_to_string(&p).unwrap())).unwrap();
    }
}

impl Drop for Written {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Write a 2-level slide: level 0 `NX × NY` images (data files alternate), level 1 the
/// `NX/2 × NY/2` concatenated images (in Data0001.dat), level 0's records over two index pages.
pub fn write(name: &str, positions: Positions) -> Written {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("slidestream-mirax-{}-{}-{name}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(dir.join("s")).unwrap();
    std::fs::write(dir.join("s.mrxs"), b"").unwrap();
    let mut data = [Vec::new(), Vec::new()];
    let mut recs: [Vec<[i32; 4]>; 2] = [Vec::new(), Vec::new()];
    for y in 0..NY {
        for x in 0..NX {
            let f = ((x + y) % 2) as usize;
            let b = bmp(colour(x, y));
            recs[0].push([y * NX + x, data[f].len() as i32, b.len() as i32, f as i32]);
            data[f].extend(b);
        }
    }
    for y in (0..NY).step_by(2) {
        for x in (0..NX).step_by(2) {
            let b = bmp(colour(x, y));
            recs[1].push([y * NX + x, data[1].len() as i32, b.len() as i32, 1]);
            data[1].extend(b);
        }
    }
    let mut positions_at = None;
    let mut nonhier: Vec<[i32; 3]> = Vec::new();
    if positions != Positions::None {
        let mut buf: Vec<u8> = Vec::new();
        for y in 0..NY {
            for x in 0..NX {
                buf.push(1);
                buf.extend(i32s(&[x * E as i32, y * E as i32]));
            }
        }
        if let Positions::Zlib { extra } = positions {
            buf.extend(std::iter::repeat_n(0u8, extra));
            let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            z.write_all(&buf).unwrap();
            buf = z.finish().unwrap();
        }
        positions_at = Some(data[0].len());
        nonhier.push([data[0].len() as i32, buf.len() as i32, 0]);
        data[0].extend(buf);
    }
    for (k, d) in data.iter().enumerate() {
        std::fs::write(dir.join("s").join(format!("Data{k:04}.dat")), d).unwrap();
    }
    // Index.dat
    let mut ix = b"01.02SLIDEID".to_vec();
    let hier_ptr = ix.len();
    ix.extend([0; 8]);
    let table = ix.len();
    ix.extend([0; 8]);
    ix[hier_ptr..hier_ptr + 4].copy_from_slice(&(table as i32).to_le_bytes());
    let (mut first_next, mut first_fileno, mut l1_first_index) = (0, 0, 0);
    for (level, rs) in recs.iter().enumerate() {
        let head = ix.len();
        ix[table + 4 * level..table + 4 * level + 4].copy_from_slice(&(head as i32).to_le_bytes());
        ix.extend(i32s(&[0, head as i32 + 8]));
        let pages: Vec<&[[i32; 4]]> = if level == 0 { vec![&rs[..3], &rs[3..]] } else { vec![&rs[..]] };
        for (p, page) in pages.iter().enumerate() {
            let start = ix.len();
            let next = if p + 1 < pages.len() { start + 8 + 16 * page.len() } else { 0 };
            if level == 0 && p == 0 {
                (first_next, first_fileno) = (start + 4, start + 8 + 12);
            }
            if level == 1 {
                l1_first_index = start + 8;
            }
            ix.extend(i32s(&[page.len() as i32, next as i32]));
            for r in page.iter() {
                ix.extend(i32s(r));
            }
        }
    }
    let nh_table = ix.len();
    ix[hier_ptr + 4..hier_ptr + 8].copy_from_slice(&(nh_table as i32).to_le_bytes());
    ix.extend(vec![0; 4 * nonhier.len()]);
    for (k, r) in nonhier.iter().enumerate() {
        let rec = ix.len();
        ix[nh_table + 4 * k..nh_table + 4 * k + 4].copy_from_slice(&(rec as i32).to_le_bytes());
        ix.extend(i32s(&[0, rec as i32 + 8, 1, 0, 0, 0, r[0], r[1], r[2]]));
    }
    std::fs::write(dir.join("s").join("Index.dat"), ix).unwrap();
    let pos_name = match positions {
        Positions::Zlib { .. } => "StitchingIntensityLayer",
        _ => "VIMSLIDE_POSITION_BUFFER",
    };
    let nonhier_keys = if nonhier.is_empty() {
        String::new()
    } else {
        format!("NONHIER_0_NAME={pos_name}\nNONHIER_0_COUNT=1\nNONHIER_0_VAL_0=default\nNONHIER_0_VAL_0_SECTION=POS\n")
    };
    let level = |k: u32, concat: u32| {
        format!(
            "[L{k}]\nIMAGE_CONCAT_FACTOR={concat}\nOVERLAP_X=0\nOVERLAP_Y=0\nMICROMETER_PER_PIXEL_X=0.25\nMICROMETER_PER_PIXEL_Y=0.25\n\
             IMAGE_FILL_COLOR_BGR=16777215\nDIGITIZER_WIDTH={E}\nDIGITIZER_HEIGHT={E}\nIMAGE_FORMAT=BMP24\n"
        )
    };
    let ini = format!(
        "[GENERAL]\nSLIDE_ID=SLIDEID\nIMAGENUMBER_X={NX}\nIMAGENUMBER_Y={NY}\nOBJECTIVE_MAGNIFICATION=20\n\
         [HIERARCHICAL]\nHIER_COUNT=1\nNONHIER_COUNT={}\nINDEXFILE=Index.dat\nHIER_0_NAME=Slide zoom level\nHIER_0_COUNT=2\n\
         HIER_0_VAL_0=ZoomLevel_0\nHIER_0_VAL_0_SECTION=L0\nHIER_0_VAL_1=ZoomLevel_1\nHIER_0_VAL_1_SECTION=L1\n{nonhier_keys}\
         [DATAFILE]\nFILE_COUNT=2\nFILE_0=Data0000.dat\nFILE_1=Data0001.dat\n[POS]\n{}{}",
        nonhier.len(),
        level(0, 0),
        level(1, 1)
    );
    std::fs::write(dir.join("s").join("Slidedat.ini"), ini).unwrap();
    Written { dir, hier_ptr, first_next, first_fileno, l1_first_index, positions_at }
}

pub fn open_no_panic(path: &Path) -> slidestream::Result<Slide> {
    let p = path.to_path_buf();
    std::panic::catch_unwind(move || Slide::open(&p)).unwrap_or_else(|_| panic!("{}: Slide::open panicked", path.display()))
}

/// Opening fails with an error of `kind` that names the slide's folder or `.mrxs`.
pub fn refused(w: &Written, kind: &str, what: &str) -> Error {
    let e = match open_no_panic(&w.mrxs()) {
        Ok(_) => panic!("{what}: opened"),
        Err(e) => e,
    };
    assert_eq!(e.kind_name(), kind, "{what}: {e}");
    assert!(e.to_string().contains(&*w.dir.to_string_lossy()), "{what}: the error does not name the slide: {e}");
    e
}

/// The pixel at level-0 (x, y) as RGBA.
pub fn pixel(s: &Slide, x: i64, y: i64) -> slidestream::Result<Vec<u8>> {
    Ok(s.read_region((x, y), 0, (1, 1))?.data)
}
