//! 3DHISTECH MIRAX (`.mrxs`): a slide of several files, `NAME.mrxs` beside a folder `NAME/`
//! holding `Slidedat.ini` (key file), `Index.dat` (where each image is) and the `Data*.dat`
//! files (the images).
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-mirax.c` (4.0.0 source, with the 4.0.1
//! changes of its CHANGELOG verified against the 4.0.1 library: optional or non-integer
//! `OBJECTIVE_MAGNIFICATION`, empty key names skipped, the built-in BMP decoder) and
//! `openslide-grid.c` (tilemap paint order); the slides of `scripts/vendor_slides/mirax.py`,
//! checked against OpenSlide, exercise them:
//! * detection by path, as OpenSlide: not TIFF, the name ends in `.mrxs`, and
//!   `NAME/Slidedat.ini` exists and parses with a `[GENERAL]` group (the `.mrxs` itself is
//!   never read). A slide not opened from a local path ([`Probe::files`] `None`) is declined.
//! * `Slidedat.ini` ([`ini`]): `[GENERAL]` SLIDE_ID, IMAGENUMBER_X/Y (> 0),
//!   CameraImageDivisionsPerSide (default 1, > 0), OBJECTIVE_MAGNIFICATION (a positive integer
//!   gives `openslide.objective-power`, anything else none); `[HIERARCHICAL]` HIER_COUNT (> 0),
//!   NONHIER_COUNT (≥ 0), INDEXFILE, the `Slide zoom level` layer, which must be HIER_0, with
//!   HIER_0_COUNT zoom levels and a section each; `[DATAFILE]` FILE_COUNT (> 0) and FILE_i
//!   (relative to the folder; every file the slide names must lie inside it: no `..`, no
//!   absolute path, no symbolic link leading out — a slidestream rule, OpenSlide has none).
//!   Each level section: IMAGE_CONCAT_FACTOR (level 0 at least 0,
//!   others above 0; exponents add up, at most 30), OVERLAP_X/Y, MICROMETER_PER_PIXEL_X/Y,
//!   IMAGE_FILL_COLOR_BGR, DIGITIZER_WIDTH/HEIGHT (> 0) and IMAGE_FORMAT (`JPEG`, `PNG`, `BMP24`).
//! * non-hierarchical records: the record number of (name, value) is the sum of the counts of
//!   the NONHIER names before it plus the value's index. Camera positions come from
//!   `VIMSLIDE_POSITION_BUFFER` (raw) or else `StitchingIntensityLayer` (zlib, inflating to
//!   exactly the expected size): 9 bytes per position, a flag byte (0 or 1) and x, y (int32,
//!   multiplied by level 0's concat factor); without either, a lattice of the photo size less
//!   the overlap. `Scan data layer` values `ScanDataLayer_SlideThumbnail` → `macro`
//!   (section key THUMBNAIL_IMAGE_TYPE), `ScanDataLayer_SlideBarcode` → `label`
//!   (BARCODE_IMAGE_TYPE), `ScanDataLayer_SlidePreview` → `thumbnail` (PREVIEW_IMAGE_TYPE),
//!   each a JPEG (its size from the SOF).
//! * `Index.dat` ([`index`]) and the placement of images as tiles ([`geometry`]); level size
//!   `base / concat`, downsample `concat_k / concat_0` (integer division, as OpenSlide).
//! * properties: `mirax.GROUP.KEY` for every key of `Slidedat.ini` (empty key names skipped),
//!   `openslide.mpp-x/-y` from level 0's MICROMETER_PER_PIXEL_X/Y, `openslide.background-color`
//!   from level 0's IMAGE_FILL_COLOR_BGR; tile-size properties only when every level's advance
//!   is an integer equal to its tile size and no tile lies off its cell, else none at all;
//!   `openslide.bounds-*` from level 0's tiles (floor / ceil of their bounding box) only when
//!   that box does not cover the whole level (OpenSlide 4.0.1 omits them then).
//! * quickhash: SHA-256 of the `Slidedat.ini` bytes and then every record of the lowest
//!   zoom level, in Index.dat order, from its data file (no size cap).
//! * sources: the `.mrxs` is source 0 (never read for tiles); data file `i` is source `i + 1`.
//!
//! Tiles that reach past the level's edge are painted there as OpenSlide paints them (read
//! regions past the level size show those pixels); level coordinates below 0 are not shown.
//! Fractional tile positions (OpenSlide resamples) are refused as `Unsupported`.

pub mod geometry;
pub mod index;
pub mod ini;
mod settings;

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use self::geometry::{base_size, lattice_positions, level_geom, place_level, Positions, SlideGeom, MAX_CAMERA_IMAGES};
use self::index::IndexDat;
use self::ini::KeyFile;
use self::settings::{ImageFormat, Settings};
use super::{member_path, Bounds, FormatDriver, LayoutLevel, Probe, QuickhashInput, SiblingFiles, SlideLayout, MAX_TILE_EDGE};
use crate::codec::stream::scan_header;
use crate::error::{Error, Location, Result};
use crate::index::{CodecInfo, Compression, Grid, ImageIndex, Photometric, SourceId, TileLoc};

const GENERAL: &str = "GENERAL";
/// Largest Index.dat read at open (16 bytes per image record: 16 M images).
const MAX_INDEX_BYTES: u64 = crate::limits::LIMITS.mirax_index_bytes;
/// Largest associated-image header read to find its SOF.
const MAX_JPEG_HEADER: u64 = crate::limits::LIMITS.jpeg_header_bytes;

/// The MIRAX driver.
pub struct Mirax;

/// The folder of a `.mrxs` path (the path without its extension), `None` for other names.
fn slide_dir(path: &Path) -> Option<PathBuf> {
    let s = path.as_os_str().to_str()?;
    s.strip_suffix(".mrxs").map(PathBuf::from)
}

/// Read a whole (small) file of the slide, at most `cap` bytes.
fn read_whole(files: &dyn SiblingFiles, path: &Path, cap: u64) -> Result<Vec<u8>> {
    let at = Location::file(path);
    let src = files.open(path)?;
    let len = src.len();
    if len > cap {
        return Err(Error::limits(&at, format!("{len} bytes (at most {cap} are read)")));
    }
    let mut buf = vec![0u8; len as usize];
    src.read_exact_at(&mut buf, 0).map_err(|e| Error::io(&at, e))?;
    Ok(buf)
}

fn read_ini(files: &dyn SiblingFiles, dir: &Path) -> Result<(Vec<u8>, KeyFile)> {
    let path = member_path(files, dir, "the slide's key file", "Slidedat.ini", &Location::file(files.path()))?;
    let bytes = read_whole(files, &path, ini::MAX_INI_BYTES)?;
    let kf = KeyFile::parse(&bytes).map_err(|m| Error::format(&Location::file(&path), m))?;
    Ok((bytes, kf))
}

impl FormatDriver for Mirax {
    fn name(&self) -> &'static str {
        "mirax"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        if probe.tiff.is_ok() {
            return Err("Is a TIFF file".into());
        }
        let files = probe.files.ok_or("not a local file (a MIRAX slide is read from its folder of files)")?;
        let dir = slide_dir(files.path()).ok_or("File does not have .mrxs extension")?;
        let (_, kf) = read_ini(files, &dir).map_err(|e| format!("Slidedat.ini: {}", e.message()))?;
        if !kf.has_group(GENERAL) {
            return Err("Slidedat.ini has no [GENERAL] group".into());
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let at = probe.at;
        let files = probe.files.ok_or_else(|| Error::unsupported(at, "a MIRAX slide read from memory (its files beside the .mrxs are needed)"))?;
        let dir = slide_dir(files.path()).ok_or_else(|| Error::unsupported(at, "a MIRAX slide whose name does not end in .mrxs"))?;
        let (ini_bytes, kf) = read_ini(files, &dir)?;
        let ini_at = Location::file(dir.join("Slidedat.ini"));
        let s = Settings::read(&kf).map_err(|e| if e.unsupported { Error::unsupported(&ini_at, e.msg) } else { Error::format(&ini_at, e.msg) })?;
        // Every file the key file names stays inside the slide's folder.
        let datafiles = s.datafiles.iter().enumerate().map(|(i, f)| member_path(files, &dir, &format!("[DATAFILE] FILE_{i}"), f, &ini_at)).collect::<Result<_>>()?;
        let ctx = Ctx { files, at, datafiles };
        let index_path = member_path(files, &dir, "[HIERARCHICAL] INDEXFILE", &s.index_file, &ini_at)?;
        let index_at = Location::file(&index_path);
        let ix = IndexDat::new(read_whole(files, &index_path, MAX_INDEX_BYTES)?, &s.slide_id).map_err(|m| Error::format(&index_at, m))?;

        // Camera positions. The grid sizes loops and the position table: bounded before
        // anything is sized by it, and a position record must hold exactly one entry per
        // position before it is read or inflated.
        let d = s.divisions;
        let images = s.images.0 as u64 * s.images.1 as u64;
        if images > MAX_CAMERA_IMAGES {
            return Err(Error::limits(
                &ini_at,
                format!("[GENERAL] IMAGENUMBER_X × IMAGENUMBER_Y = {} × {} camera images (at most {MAX_CAMERA_IMAGES} are accepted)", s.images.0, s.images.1),
            ));
        }
        let npositions = (s.images.0 / d) as usize * (s.images.1 / d) as usize;
        let l0 = &s.levels[0];
        let positions = match s.position_record {
            Some((rec, zlib)) => {
                let r = ix.nonhier_record(rec).map_err(|m| Error::format(&index_at, format!("slide position info: {m}")))?;
                let want = npositions * 9;
                // zlib inflates at most 1032:1 (RFC 1950/1951: a 258-byte match per 2 bits).
                let most = if zlib { (r.length.max(0) as u64).saturating_mul(1032) } else { r.length.max(0) as u64 };
                if (!zlib && r.length as u64 != want as u64) || most < want as u64 {
                    return Err(Error::format(
                        &index_at,
                        format!("slide position record of {} bytes{}: the {npositions} camera positions of IMAGENUMBER_X/Y need {want}", r.length, if zlib { " (zlib)" } else { "" }),
                    ));
                }
                let raw = ctx.record_bytes(r.fileno, r.offset, r.length)?;
                let buf = if zlib { inflate_exact(&raw, want).map_err(|m| Error::format(at, format!("position buffer: {m}")))? } else { raw };
                if buf.len() != want {
                    return Err(Error::format(at, format!("slide position record of {} bytes, {npositions} positions need {want}", buf.len())));
                }
                Positions::Listed(parse_positions(&buf, 1i64 << l0.concat_exp).map_err(|m| Error::format(at, m))?)
            }
            None => lattice_positions(s.images, d, l0.image, l0.overlap),
        };
        let slide = SlideGeom { images: s.images, divisions: d, positions };

        // Associated images.
        let mut associated = BTreeMap::new();
        for (name, rec) in &s.associated {
            let r = ix.nonhier_record(*rec).map_err(|m| Error::format(&index_at, format!("{name} associated image: {m}")))?;
            associated.insert(name.to_string(), ctx.jpeg_image(name, r.fileno, r.offset, r.length)?);
        }

        // Levels.
        let base = (base_size(s.images.0, d, l0.image.0, l0.overlap.0), base_size(s.images.1, d, l0.image.1, l0.overlap.1));
        let subtiles = s.position_record.is_some() || l0.overlap != (0.0, 0.0);
        let concat0 = 1i64 << l0.concat_exp;
        let mut active = HashSet::new();
        let mut levels = Vec::new();
        let mut downsamples = Vec::new();
        let mut hints = Vec::new();
        let mut all_hints = true;
        let mut bounds = None;
        let mut quickhash_chunks = Vec::new();
        let mut exp = 0u32;
        for (k, sec) in s.levels.iter().enumerate() {
            exp += sec.concat_exp;
            let concat = 1i64 << exp;
            let lg = level_geom(concat, d, subtiles, sec.image, sec.overlap);
            let records = ix.hier_records(k).map_err(|m| Error::format(&index_at, m))?;
            let placed = place_level(&slide, &lg, k, l0.image, &records, &mut active).map_err(|(unsup, m)| if unsup { Error::unsupported(at, m) } else { Error::format(&index_at, m) })?;
            let mut locs = Vec::with_capacity(records.len().max(1));
            for r in &records {
                if r.fileno as usize >= s.datafiles.len() {
                    return Err(Error::format(&index_at, format!("zoom level {k}: invalid fileno {} ({} data files)", r.fileno, s.datafiles.len())));
                }
                locs.push(TileLoc { source: SourceId(r.fileno as u32 + 1), offset: r.offset as u64, length: r.length as u64 });
            }
            if k + 1 == s.levels.len() {
                quickhash_chunks = locs.clone();
            }
            if locs.is_empty() {
                locs.push(TileLoc::default());
            }
            let n = locs.len() as u64;
            let stored = Grid::regular(n, 1, 1, locs).ok_or_else(|| Error::format(at, format!("zoom level {k}: image grid")))?;
            let (w, h) = (base.0 / concat, base.1 / concat);
            if w < 1 || h < 1 {
                return Err(Error::format(at, format!("zoom level {k} of {w}x{h} pixels")));
            }
            let grid = Grid::positioned(stored, (n * sec.image.0 as u64, sec.image.1 as u64), sec.image, &placed.placements)
                .ok_or_else(|| Error::format(at, format!("zoom level {k}: tiles do not fit the stored images")))?;
            let hint = lg.advance.0.fract() == 0.0 && lg.advance.1.fract() == 0.0 && lg.advance == lg.tile && placed.hint_ok;
            all_hints &= hint;
            hints.push(Some((lg.advance.0 as u32, lg.advance.1 as u32)));
            if k == 0 {
                bounds = placed.bbox.and_then(|(x0, y0, x1, y1)| {
                    let (fx, fy) = (x0.floor(), y0.floor());
                    let covers = fx <= 0.0 && fy <= 0.0 && x1.ceil() >= w as f64 && y1.ceil() >= h as f64;
                    (!covers).then(|| Bounds { x: fx as i64, y: fy as i64, width: (x1.ceil() - fx) as u64, height: (y1.ceil() - fy) as u64 })
                });
            }
            downsamples.push((concat / concat0) as f64);
            let image = ImageIndex { width: w as u64, height: h as u64, tile_width: sec.image.0, tile_height: sec.image.1, tiled: false, codec: codec(sec.format), grid };
            levels.push(LayoutLevel { image, origin: format!("zoom level {k} ([{}])", sec.section) });
        }

        let mut properties = BTreeMap::new();
        for (g, k, v) in kf.entries().filter(|(_, k, _)| !k.is_empty()) {
            properties.insert(format!("mirax.{g}.{k}"), v.to_string());
        }
        let fill = l0.fill_bgr as u32;
        Ok(SlideLayout {
            extra_sources: ctx.datafiles.clone(),
            levels,
            associated,
            properties,
            mpp: Some(l0.mpp),
            objective_power: s.objective.map(f64::from),
            background_color: Some([(fill & 0xFF) as u8, ((fill >> 8) & 0xFF) as u8, ((fill >> 16) & 0xFF) as u8]),
            bounds,
            downsamples,
            quickhash: Some(QuickhashInput { prefix: ini_bytes, lowest_level_tiles: true, strings: Vec::new(), uncapped: true, suffix: Vec::new() }),
            quickhash_chunks: Some(quickhash_chunks),
            tile_hints: Some(if all_hints { hints } else { Vec::new() }),
            ..SlideLayout::default()
        })
    }
}

/// The codec of a level's images.
fn codec(format: ImageFormat) -> Arc<CodecInfo> {
    let (compression, photometric) = match format {
        ImageFormat::Jpeg => (Compression::Jpeg, Photometric::YCbCr),
        ImageFormat::Png => (Compression::Png, Photometric::Rgb),
        ImageFormat::Bmp => (Compression::Bmp, Photometric::Rgb),
    };
    Arc::new(CodecInfo::rgb8(compression, 0, photometric))
}

/// Inflate a zlib stream that must give exactly `want` bytes (OpenSlide's
/// `_openslide_inflate_buffer`).
fn inflate_exact(data: &[u8], want: usize) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(want.min(64 << 20));
    let mut z = flate2::read::ZlibDecoder::new(data).take(want as u64 + 1);
    z.read_to_end(&mut out).map_err(|e| format!("zlib: {e}"))?;
    if out.len() != want {
        return Err(format!("inflated to {}{} bytes, expected {want}", out.len().min(want), if out.len() > want { "+" } else { "" }));
    }
    Ok(out)
}

/// Camera positions from a position buffer: 9 bytes each, flag (0 or 1), x, y (int32 LE),
/// times `concat0`.
fn parse_positions(buf: &[u8], concat0: i64) -> std::result::Result<Vec<(i64, i64)>, String> {
    buf.chunks_exact(9)
        .map(|p| {
            if p[0] & 0xFE != 0 {
                return Err(format!("position buffer: unexpected flag value ({})", p[0]));
            }
            let x = i32::from_le_bytes([p[1], p[2], p[3], p[4]]) as i64;
            let y = i32::from_le_bytes([p[5], p[6], p[7], p[8]]) as i64;
            Ok((x * concat0, y * concat0))
        })
        .collect()
}

/// The files of an open and where errors point.
struct Ctx<'a> {
    files: &'a dyn SiblingFiles,
    at: &'a Location,
    datafiles: Vec<PathBuf>,
}

impl Ctx<'_> {
    fn datafile(&self, fileno: i32) -> Result<&Path> {
        usize::try_from(fileno)
            .ok()
            .and_then(|i| self.datafiles.get(i))
            .map(PathBuf::as_path)
            .ok_or_else(|| Error::format(self.at, format!("invalid fileno {fileno} ({} data files)", self.datafiles.len())))
    }

    /// The bytes of a non-hierarchical record.
    fn record_bytes(&self, fileno: i32, offset: i32, length: i32) -> Result<Vec<u8>> {
        let path = self.datafile(fileno)?;
        let fat = Location::file(path);
        let src = self.files.open(path)?;
        let (off, len) = (u64::try_from(offset).ok(), u64::try_from(length).ok());
        let (Some(off), Some(len)) = (off, len) else {
            return Err(Error::format(&fat, format!("record at {offset} of {length} bytes")));
        };
        if off.checked_add(len).is_none_or(|e| e > src.len()) {
            return Err(Error::format(&fat, format!("record at {off} (+{len} bytes) lies past the end of the file ({} bytes)", src.len())));
        }
        let mut buf = vec![0u8; len as usize];
        src.read_exact_at(&mut buf, off).map_err(|e| Error::io(&fat, e))?;
        Ok(buf)
    }

    /// An associated JPEG at a record: one tile of its SOF size.
    fn jpeg_image(&self, name: &str, fileno: i32, offset: i32, length: i32) -> Result<ImageIndex> {
        let path = self.datafile(fileno)?;
        let fat = Location::file(path);
        let head_len = u64::try_from(length).unwrap_or(0).min(MAX_JPEG_HEADER) as i32;
        let head = self.record_bytes(fileno, offset, head_len)?;
        let l = scan_header(&head).map_err(|m| Error::format(&fat, format!("{name} associated image: {m}")))?;
        let (w, h) = (l.width as u64, l.height as u64);
        if w == 0 || h == 0 || w > MAX_TILE_EDGE || h > MAX_TILE_EDGE {
            return Err(Error::format(&fat, format!("{name} associated image of {w}x{h} pixels")));
        }
        let loc = TileLoc { source: SourceId(fileno as u32 + 1), offset: offset as u64, length: length as u64 };
        let grid = Grid::regular(1, 1, 1, vec![loc]).ok_or_else(|| Error::format(&fat, "associated image grid"))?;
        let mut c = (*codec(ImageFormat::Jpeg)).clone();
        if l.components == 1 {
            (c.photometric, c.samples_per_pixel) = (Photometric::MinIsBlack, 1);
        }
        Ok(ImageIndex { width: w, height: h, tile_width: w as u32, tile_height: h as u32, tiled: false, codec: Arc::new(c), grid })
    }
}

