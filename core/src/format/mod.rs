//! Format drivers: detect a slide format by content, never by extension, and describe it as a
//! [`SlideLayout`] (plain data); [`finish()`] checks the layout, adds the standard `openslide.*`
//! properties and quickhash, and builds the immutable [`SlideIndex`].
//!
//! The split follows OpenSlide (`openslide.c` completes and checks what a vendor driver
//! returns): a driver knows its vendor's layout rules, the core knows what every slide must
//! satisfy. Adding a format is one file here, one line in [`registry`], a section in
//! `docs/formats.md` and its cases in `core/tests/conformance.rs`.
//!
//! Drivers are tried in order ([`registry::DRIVERS`]): vendor drivers first, `generic-tiff`
//! last, as in OpenSlide's format table. Each driver either accepts the file or says why it
//! declined; the reasons form a [`DetectionReport`] (`slidestream info --why`).

pub mod aperio;
pub mod argos;
mod detection;
pub use detection::DetectionReport;
pub mod dicom;
pub mod finish;
pub mod generic_tiff;
pub mod hamamatsu;
pub mod huron;
pub mod ome_tiff;
pub(crate) mod known;
pub mod olympus;
pub mod leica;
pub mod mirax;
pub mod philips;
pub mod qptiff;
mod quickhash;
pub mod registry;
pub mod sakura;
pub(crate) mod tiff_common;
pub(crate) mod tiff_strips;
pub mod trestle;
pub mod ventana;
pub mod zeiss;
pub(crate) mod xml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};
use crate::index::{BlobRef, FileIdentity, ImageIndex, SlideIndex, TileLoc};
use crate::io::ByteSource;
use crate::tiff::TiffFile;

pub use finish::finish;
pub use registry::DRIVERS;

/// Largest tile edge accepted, in pixels: a decoded chunk must fit in memory many times over
/// (16384² RGBA = 1 GiB). Not applied to TIFF strips (as wide as their image, see
/// [`tiff_strips`]): their memory is bounded when read, by the read working set.
pub const MAX_TILE_EDGE: u64 = crate::limits::LIMITS.tile_edge;
/// Largest image edge accepted, in pixels (2^31 - 1, as OpenSlide's int32 coordinates).
pub const MAX_IMAGE_EDGE: u64 = crate::limits::LIMITS.image_edge;

/// What a driver sees when asked to detect or open a file.
pub struct Probe<'a> {
    /// The bytes.
    pub src: &'a dyn ByteSource,
    /// The file, for errors.
    pub at: &'a Location,
    /// The TIFF structure, when the file parses as TIFF.
    pub tiff: std::result::Result<&'a TiffFile, &'a Error>,
    /// The files beside the opened one, for formats of several files (DICOM, MIRAX); `None`
    /// when the slide is not a local file ([`crate::Slide::from_source`]).
    pub files: Option<&'a dyn SiblingFiles>,
}

/// Access to the files of a slide of several files, for drivers at open. A driver reads what
/// it needs from them (headers, index files) and names the files tiles are read from in
/// [`SlideLayout::extra_sources`]; those are examined by [`finish::source_files`] and read
/// later through [`crate::io::multi::SourceSet`].
pub trait SiblingFiles {
    /// The path the slide was opened by.
    fn path(&self) -> &Path;
    /// The regular files of the folder that holds [`path`](Self::path) (itself included),
    /// sorted by name; no recursion.
    ///
    /// # Errors
    /// `Io` when the folder cannot be listed.
    fn list_dir(&self) -> Result<Vec<PathBuf>>;
    /// Open a file for reading (regular files only; a FIFO or device is refused without
    /// blocking, as [`crate::io::posix::FileSource::open`]).
    ///
    /// # Errors
    /// `Io` naming the file.
    fn open(&self, path: &Path) -> Result<Box<dyn ByteSource>>;
    /// Length and identity of a file the slide's layout names (its extra sources), recorded at
    /// open and checked by later reads ([`crate::io::multi`]). Default: the local file, opened
    /// as a slide is (a regular file; a FIFO or device is refused without blocking), its
    /// device, inode, size, mtime and content sample
    /// ([`crate::io::posix::FileSource::identity`]).
    ///
    /// # Errors
    /// `Io` naming the file when it cannot be opened, examined or is not a regular file.
    fn examine(&self, path: &Path) -> Result<(u64, Option<FileIdentity>)> {
        let at = Location::file(path);
        let f = crate::io::posix::FileSource::open(path).map_err(|e| Error::io(&at, e))?;
        let id = f.identity().map_err(|e| Error::io(&at, e))?;
        Ok((id.size, Some(id)))
    }
    /// How the slide's source set opens its extra files at their first read; `None` (default):
    /// as local files ([`crate::io::posix::FileSource`]).
    fn opener(&self) -> Option<crate::io::multi::Opener> {
        None
    }
    /// `Ok` when `path` (a file inside the folder `dir`, lexically) does not lead out of `dir`
    /// through a symbolic link. Default: nothing to check (object stores have no links);
    /// local files resolve both ([`LocalFiles`]).
    ///
    /// # Errors
    /// A message saying the file leads out of the folder (never naming the target).
    fn confine(&self, dir: &Path, path: &Path) -> std::result::Result<(), String> {
        let _ = (dir, path);
        Ok(())
    }
}

/// The path of a file that a slide's own structure names (`entry` says where, e.g.
/// `[DATAFILE] FILE_0` of `Slidedat.ini`; `name` is the value found there), confined to the
/// slide's folder `dir`: a relative path of plain names (no `..`, no root, not empty) that
/// does not lead out of `dir` through a symbolic link ([`SiblingFiles::confine`]). A slide
/// never makes slidestream open a file outside its own folder.
///
/// # Errors
/// `Format` at `at` naming the entry and its value (never what a link points to).
pub(crate) fn member_path(files: &dyn SiblingFiles, dir: &Path, entry: &str, name: &str, at: &Location) -> Result<PathBuf> {
    use std::path::Component;
    let rel = Path::new(name);
    let plain = !name.is_empty() && !name.contains('\0') && rel.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain || rel.components().all(|c| c == Component::CurDir) {
        return Err(Error::format(at, format!("{entry} = {name:?} is not a file inside the slide's folder (a relative path without '..' is required)")));
    }
    let path = dir.join(rel);
    files.confine(dir, &path).map_err(|m| Error::format(at, format!("{entry} = {name:?}: {m}")))?;
    Ok(path)
}

/// Whether `path` resolves (through any symbolic links) to a file inside folder `dir`
/// (resolved too); a path that does not exist yet is inside (its open fails on its own).
fn resolves_inside(dir: &Path, path: &Path) -> bool {
    if std::fs::symlink_metadata(path).is_err() {
        return true;
    }
    match (std::fs::canonicalize(dir), std::fs::canonicalize(path)) {
        (Ok(d), Ok(p)) => p.starts_with(d),
        // A dangling link, or a folder that cannot be resolved: not known to be inside.
        _ => false,
    }
}

/// [`SiblingFiles`] of a slide opened from a local path.
#[derive(Debug, Clone)]
pub struct LocalFiles {
    /// The path the slide was opened by.
    pub path: PathBuf,
}

impl SiblingFiles for LocalFiles {
    fn path(&self) -> &Path {
        &self.path
    }

    fn list_dir(&self) -> Result<Vec<PathBuf>> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        list_files(&dir)
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ByteSource>> {
        let f = crate::io::posix::FileSource::open(path).map_err(|e| Error::io(&Location::file(path), e))?;
        Ok(Box::new(f))
    }

    fn confine(&self, dir: &Path, path: &Path) -> std::result::Result<(), String> {
        if resolves_inside(dir, path) {
            Ok(())
        } else {
            Err("a symbolic link that leads out of the slide's folder (or cannot be resolved)".into())
        }
    }
}

/// The regular files of folder `dir` (symbolic links to regular files inside `dir` included;
/// links leading out of it are not the folder's files), sorted by name; no recursion.
///
/// # Errors
/// `Io` when the folder cannot be listed.
pub(crate) fn list_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let at = Location::file(dir);
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(&at, e))? {
        let e = e.map_err(|e| Error::io(&at, e))?;
        // `metadata` follows symbolic links: a link to a regular file counts when it stays in
        // the folder.
        let link = e.file_type().is_ok_and(|t| t.is_symlink());
        if std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()) && (!link || resolves_inside(dir, &e.path())) {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

/// A format driver (one file per vendor under `format/`).
pub trait FormatDriver: Sync {
    /// The vendor name (`openslide.vendor`).
    fn name(&self) -> &'static str;
    /// `Ok(())` when the driver recognises the file, else the reason it declined.
    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String>;
    /// Describe a file `detect` accepted. Reads structure only (tags, directories), never
    /// pixels or ICC profiles; [`finish()`] completes and checks the result.
    ///
    /// # Errors
    /// Any [`Error`] from structure reading; `Unsupported` for features outside the driver.
    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout>;
    /// The file to open when a slide is opened by its folder `dir` (DICOM: a folder of
    /// instances), `Ok(None)` when this format does not open folders (the default).
    ///
    /// # Errors
    /// `Io` when the folder cannot be read; `Usage` when it holds several slides of this
    /// format (the message names them).
    fn resolve_dir(&self, dir: &Path) -> Result<Option<PathBuf>> {
        let _ = dir;
        Ok(None)
    }
}

/// One pyramid level as a driver describes it.
#[derive(Debug, Clone)]
pub struct LayoutLevel {
    /// Geometry, tiles and codec.
    pub image: ImageIndex,
    /// Where the level comes from, for error messages (e.g. `"IFD 3"`).
    pub origin: String,
}

/// What a driver hashes for `openslide.quickhash-1` (SHA-256, computed by [`finish()`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuickhashInput {
    /// Bytes hashed before anything else (DICOM: the SeriesInstanceUID and a NUL; MIRAX: the
    /// whole `Slidedat.ini`); empty for TIFF formats.
    pub prefix: Vec<u8>,
    /// Hash the stored bytes of every tile of the lowest-resolution level first, in the
    /// format's storage order (OpenSlide's TIFF rule; no hash when they exceed 5 MiB).
    pub lowest_level_tiles: bool,
    /// Then each (name, value), each followed by a NUL byte.
    pub strings: Vec<(String, String)>,
    /// Hash the lowest level whatever its size (MIRAX); otherwise no hash over 5 MiB.
    pub uncapped: bool,
    /// Bytes hashed last, after the strings (ARGOS: its metadata XML and a NUL); empty for
    /// most formats.
    pub suffix: Vec<u8>,
}

/// The slide's bounds of non-empty data in level-0 pixels (`openslide.bounds-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Left edge.
    pub x: i64,
    /// Top edge.
    pub y: i64,
    /// Width.
    pub width: u64,
    /// Height.
    pub height: u64,
}

/// A source a driver builds itself over the slide's own bytes, for bytes that are no byte
/// range of a file (a Sakura slide's tiles are SQLite blobs, spread over database pages:
/// [`sakura`] lays them end to end in a virtual address range). Read through the slide's
/// [`crate::io::multi::SourceSet`] as any extra file, so the read plan, the caches and both
/// decode paths serve it unchanged.
#[derive(Debug, Clone)]
pub struct VirtualSource {
    /// The name in error messages (the slide's file).
    pub name: PathBuf,
    /// The bytes; its [`ByteSource::len`] bounds the ranges the layout may name in it.
    pub source: std::sync::Arc<dyn ByteSource>,
}

/// A slide as a driver describes it: plain data, checked and completed by [`finish()`].
#[derive(Debug, Clone, Default)]
pub struct SlideLayout {
    /// Further files the slide is read from, beyond the one opened (source 0); source `k` is
    /// `extra_sources[k - 1]`.
    pub extra_sources: Vec<PathBuf>,
    /// Sources the driver built itself ([`VirtualSource`]): source
    /// `1 + extra_sources.len() + k` is `virtual_sources[k]`. Empty for most formats.
    pub virtual_sources: Vec<VirtualSource>,
    /// Pyramid levels, level 0 (full resolution) first.
    pub levels: Vec<LayoutLevel>,
    /// Associated images by name (`thumbnail`, `label`, `macro`).
    pub associated: BTreeMap<String, ImageIndex>,
    /// Vendor and `tiff.*` properties. `openslide.*` keys are the core's: [`finish()`] refuses
    /// a layout that sets one.
    pub properties: BTreeMap<String, String>,
    /// Microns per pixel (x, y) at level 0 (`openslide.mpp-x/-y`).
    pub mpp: Option<(f64, f64)>,
    /// Objective power (`openslide.objective-power`).
    pub objective_power: Option<f64>,
    /// Free text (`openslide.comment`).
    pub comment: Option<String>,
    /// Background colour as RGB (`openslide.background-color`, `RRGGBB`).
    pub background_color: Option<[u8; 3]>,
    /// Bounds of the non-empty region (`openslide.bounds-*`).
    pub bounds: Option<Bounds>,
    /// Scanned regions in level-0 pixels (`openslide.region[i].x/-y/-width/-height`, as
    /// OpenSlide's BIF driver reports its AOIs); empty for most formats.
    pub regions: Vec<Bounds>,
    /// Downsample of each level when the format defines it (Ventana: the magnification
    /// ratio); empty (or shorter than `levels`): the rest are computed from the dimensions,
    /// OpenSlide's rule. Each must be finite and at least 1, and they must increase.
    pub downsamples: Vec<f64>,
    /// ICC profile of the pyramid, not read (`openslide.icc-size` is its length).
    pub icc: Option<BlobRef>,
    /// ICC profiles of associated images.
    pub associated_icc: BTreeMap<String, BlobRef>,
    /// What `openslide.quickhash-1` covers; `None`: no hash.
    pub quickhash: Option<QuickhashInput>,
    /// Channels stored as separate images, per level (see [`crate::index::ChannelPlanes`]).
    pub channels: Option<crate::index::ChannelPlanes>,
    /// The stored chunks hashed first by quickhash when they are not the lowest level's grid
    /// (Leica hashes a macro image's IFD; Philips every tile of the lowest level's IFD,
    /// including columns past the level size the XML gives; NDPI the strips of the smallest
    /// stored level, whose tiles are restart runs of one strip or a synthesised level). `None`: the lowest level's.
    pub quickhash_chunks: Option<Vec<TileLoc>>,
    /// The slide's barcode as text (`openslide.barcode`).
    pub barcode: Option<String>,
    /// Tile-size properties (`openslide.level[i].tile-width/-height`) when the driver decides
    /// them: `Some(v)` gives level `i`'s (width, height) in pixels as `v[i]`, `None` in `v`
    /// (or a `v` shorter than the levels) omits them for that level (MIRAX: hints only when
    /// no tile is off its grid cell, else none for any level, as OpenSlide). `None`: each
    /// tiled level's stored tile size (the default).
    pub tile_hints: Option<Vec<Option<(u32, u32)>>>,
}

/// Run detection over [`DRIVERS`]; returns the report and the accepting driver.
pub fn detect(probe: &Probe<'_>) -> (DetectionReport, Option<&'static dyn FormatDriver>) {
    let mut report = DetectionReport::default();
    for d in DRIVERS {
        let v = d.detect(probe);
        let ok = v.is_ok();
        report.verdicts.push((d.name(), v));
        if ok {
            return (report, Some(*d));
        }
    }
    (report, None)
}

/// Detect, open with the accepting driver and [`finish()`]: the whole of opening a slide's
/// structure from `set` (its primary source named by `at`; `identity` is the file's, when it
/// is one; `files` gives the files beside it, for local paths). The extra files the driver
/// names are attached to `set` before [`finish()`] (quickhash may read them).
///
/// # Errors
/// The TIFF parse error when the file is damaged TIFF no driver takes; `Unsupported` with the
/// detection report when no driver recognises it; the driver's, [`finish::source_files`]'s
/// and [`finish()`]'s errors.
pub fn open(
    set: &crate::io::metrics::MetricsSource<crate::io::multi::SourceSet>,
    at: &Location,
    identity: Option<FileIdentity>,
    files: Option<&dyn SiblingFiles>,
) -> Result<SlideIndex> {
    let src: &dyn ByteSource = set;
    let tiff = TiffFile::parse(src, at);
    let probe = Probe { src, at, tiff: tiff.as_ref(), files };
    let (report, driver) = detect(&probe);
    let Some(driver) = driver else {
        // A file that parses as TIFF but no driver takes, or a file that is not TIFF at all.
        return Err(match tiff {
            Err(e @ (Error::Format { .. } | Error::Limits { .. } | Error::Io { .. })) => e,
            // One short line with the likeliest reason; every driver's: `slidestream info
            // --why FILE`, Python `slidestream.format_verdicts(path)`.
            _ => Error::unsupported(
                at,
                format!("no format driver recognises this file: {} (each driver's reason: `slidestream info --why`, Python `slidestream.format_verdicts`)", report.most_likely()),
            ),
        });
    };
    let layout = driver.open(&probe)?;
    let mut sources = finish::source_files(&layout.extra_sources, src.len(), at, identity, files)?;
    for v in &layout.virtual_sources {
        if v.source.len() > crate::io::multi::MAX_SOURCE_LEN {
            return Err(Error::limits(at, format!("{} bytes of {} (limit 2^44)", v.source.len(), v.name.display())));
        }
        sources.push(crate::index::SourceFile { path: v.name.clone(), len: v.source.len(), identity: None });
    }
    let opened = layout.virtual_sources.iter().map(|v| v.source.clone()).collect();
    set.inner().attach_opened(&sources, files.and_then(|f| f.opener()), opened);
    finish(driver.name(), layout, src, at, sources)
}

/// The file to open for a slide opened by its folder `dir`: the first driver (in
/// [`DRIVERS`] order) that opens folders and finds a slide there.
///
/// # Errors
/// `Unsupported` when no driver finds a slide in the folder; the drivers' errors.
pub fn resolve_dir(dir: &Path) -> Result<PathBuf> {
    for d in DRIVERS {
        if let Some(p) = d.resolve_dir(dir)? {
            return Ok(p);
        }
    }
    Err(Error::unsupported(&Location::file(dir), "a folder, and no format driver finds a slide in it (folders open as DICOM series)"))
}

/// Format a float the way OpenSlide formats its double properties (GLib's `g_ascii_dtostr`,
/// i.e. C `%.17g` in the C locale): e.g. "1", "0.499", "4.0161290322580641",
/// "352.85814912343398".
pub fn format_double(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() { "nan".into() } else if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    g_style(v, 17)
}

fn g_style(v: f64, prec: usize) -> String {
    // printf("%.{prec}g"): the exponent is that of the value rounded to `prec` digits.
    let sci = format!("{:.*e}", prec - 1, v);
    let (mant, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = e.parse().unwrap_or(0);
    if exp < -4 || exp >= prec as i32 {
        format!("{}e{}{:02}", trim_zeros(mant), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (prec as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Parse a double property value as OpenSlide's `_openslide_parse_double`: commas become
/// points, the whole (non-empty) string must parse, NaN is refused.
pub(crate) fn parse_double(s: &str) -> Option<f64> {
    let v: f64 = s.replace(',', ".").parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Parse an integer property value as OpenSlide's `_openslide_parse_int64` (GLib's
/// `g_ascii_strtoll`, base 10): leading ASCII whitespace and one sign allowed, then digits to
/// the end of the string; `None` for anything else or a value outside `i64`.
pub(crate) fn parse_int64(s: &str) -> Option<i64> {
    let t = s.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b');
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.strip_prefix('+').unwrap_or(t).parse().ok()
}

/// `s` without leading and trailing ASCII whitespace as GLib's `g_strstrip` removes it (space,
/// tab, newline, vertical tab, form feed, carriage return).
pub(crate) fn g_strstrip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b')
}

#[cfg(test)]
mod tests {
    use super::format_double;

    #[test]
    fn integers_and_stripping_follow_glib() {
        use super::{g_strstrip, parse_int64};
        assert_eq!(parse_int64(" +40"), Some(40));
        assert_eq!(parse_int64("-3"), Some(-3));
        assert_eq!(parse_int64("20x"), None);
        assert_eq!(parse_int64(""), None);
        assert_eq!(parse_int64("99999999999999999999"), None);
        assert_eq!(g_strstrip("\x0b a b \r\n"), "a b");
    }

    #[test]
    fn doubles_format_like_openslide() {
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(2.0), "2");
        assert_eq!(format_double(4.016129032258064), "4.0161290322580641");
        assert_eq!(format_double(8.086312118570184), "8.0863121185701843");
        assert_eq!(format_double(0.499), "0.499");
        assert_eq!(format_double(2.0005055500659967), "2.0005055500659967");
        assert_eq!(format_double(10000.0 / 28.340_000_152_587_89), "352.85814912343398");
        assert_eq!(format_double(1.0 / 3.0), "0.33333333333333331");
        assert_eq!(format_double(1e-7), "9.9999999999999995e-08");
        assert_eq!(format_double(123456789012345678.0), "1.2345678901234568e+17");
        assert_eq!(format_double(0.0001), "0.0001");
    }
}
