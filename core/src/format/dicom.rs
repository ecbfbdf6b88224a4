//! DICOM WSI (VL Whole Slide Microscopy Image Storage): a slide is one series, each pyramid
//! level one instance (or a concatenation of several), frames as tiles.
//!
//! Rules follow OpenSlide 4.0.1's `openslide-vendor-dicom.c` with libdicom for frames, and the
//! DICOM standard (PS3.3 A.32.8 / C.8.12.4 WSI image module, PS3.5 §A.4 encapsulation,
//! PS3.10 Part-10 files); the details, verified against OpenSlide 4.0.1, are in
//! `docs/formats.md` (DICOM section):
//!
//! * detection by content: Part-10 preamble + `DICM`, MediaStorageSOPClassUID VL WSI; a file
//!   that also parses as TIFF and is named `.tif`/`.tiff` is left to the TIFF drivers;
//! * the slide is the opened file's SeriesInstanceUID: every regular file of its folder is
//!   examined; files that are not DICOM, not WSI, of another series or lack libdicom's
//!   required metadata are skipped; a slide opened from memory ([`crate::Slide::from_source`])
//!   is the opened file alone;
//! * ImageType value 3 `VOLUME` → level (grouped by total pixel matrix size, sorted by width,
//!   concatenations joined by InConcatenationNumber); `LABEL`/`OVERVIEW`/`THUMBNAIL` →
//!   associated `label`/`macro`/`thumbnail`; other files ignored;
//! * frames from the Extended or Basic Offset Table or one item walk ([`frames`]);
//!   `TILED_FULL` frames in row-major order (less ConcatenationFrameOffsetNumber), or per-frame
//!   Plane Positions (`TILED_SPARSE`); absent frames read as transparent background;
//! * JPEG baseline (Photometric `RGB` decoded without colour transform, `YBR_FULL_422` as
//!   YCbCr), JPEG 2000 (.4.90/.4.91) and HTJ2K (.4.201/.202/.203, which OpenSlide 4.0.1 refuses),
//!   decoded as RGB, explicit VR little endian native RGB;
//! * `dicom.*` properties of level 0's first file ([`props`]), mpp from PixelSpacing,
//!   objective power from ObjectiveLensPower, ICC from OpticalPathSequence, quickhash over the
//!   SeriesInstanceUID.
//!
//! Departures: OpenSlide opens files only; [`Dicom::resolve_dir`] also opens a folder holding
//! one series. Element VRs are not checked against a dictionary (libdicom fails the open on a
//! VR it does not expect). ICC profiles are held in memory (`BlobRef::Bytes`): they are part of
//! the parsed header.

mod frames;
mod header;
mod props;
mod series;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dicom_core::value::Value;
use dicom_dictionary_std::tags;
use dicom_object::InMemDicomObject;

use super::{FormatDriver, LayoutLevel, Probe, QuickhashInput, SlideLayout};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{BlobRef, CodecInfo, Compression, Grid, ImageIndex, SourceId, TileLoc};
use crate::io::ByteSource;
use header::{int, Header};
use series::{Flavor, Instance};

/// The DICOM WSI driver (`openslide.vendor` = `dicom`).
pub struct Dicom;

/// Largest number of grid cells of one level (a header's sizes cannot make us allocate more).
const MAX_CELLS: u64 = crate::limits::LIMITS.dicom_cells;

impl FormatDriver for Dicom {
    fn name(&self) -> &'static str {
        "dicom"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        if probe.tiff.is_ok() {
            let ext = probe.at.path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
            if matches!(ext.as_deref(), Some("tif" | "tiff")) {
                return Err("Dual-personality DICOM-TIFF with TIFF filename extension".into());
            }
        }
        header::detect(probe.src)
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        open(probe)
    }

    fn resolve_dir(&self, dir: &Path) -> Result<Option<PathBuf>> {
        resolve_dir(dir)
    }
}

/// A source the driver reads at open: the opened file (borrowed) or a sibling (owned).
struct PrimarySrc<'a>(&'a dyn ByteSource);

impl std::fmt::Debug for PrimarySrc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ByteSource for PrimarySrc<'_> {
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

fn open(probe: &Probe<'_>) -> Result<SlideLayout> {
    let at = probe.at;
    // The opened file: every failure is the open's.
    let primary = Header::parse(probe.src, at)?;
    let series_uid = primary.series_uid().ok_or_else(|| Error::format(at, "missing SeriesInstanceUID"))?;
    series::check_required(&primary, at)?;
    // The opened file is borrowed from `probe` for this call (through a wrapper), siblings are
    // owned.
    let mut found: Vec<(PathBuf, Box<dyn ByteSource + '_>, Header)> = vec![(at.path.clone(), Box::new(PrimarySrc(probe.src)), primary)];
    if let Some(files) = probe.files {
        let me = files.path().canonicalize().ok();
        for p in files.list_dir()? {
            if p == files.path() || (me.is_some() && p.canonicalize().ok() == me) {
                continue;
            }
            let Ok(src) = files.open(&p) else { continue };
            let pat = Location::file(&p);
            if header::detect(src.as_ref()).is_err() {
                continue;
            }
            let Ok(h) = Header::parse(src.as_ref(), &pat) else { continue };
            if h.series_uid().as_deref() != Some(series_uid.as_str()) || series::check_required(&h, &pat).is_err() {
                continue;
            }
            found.push((p, src, h));
        }
    }
    build(found, &series_uid, at)
}

fn build(found: Vec<(PathBuf, Box<dyn ByteSource + '_>, Header)>, series_uid: &str, at: &Location) -> Result<SlideLayout> {
    // Keep level and associated files, checked.
    let mut by_dims: BTreeMap<(u64, u64), Vec<Instance<'_>>> = BTreeMap::new();
    let mut associated: BTreeMap<&'static str, Instance<'_>> = BTreeMap::new();
    for (path, src, h) in found {
        let Some(flavor) = series::flavor(&h) else { continue };
        let pat = Location::file(&path);
        let inst = series::instance(path, src, h, &pat)?;
        match flavor {
            Flavor::Level => by_dims.entry(inst.dims).or_default().push(inst),
            Flavor::Associated(name) => {
                if inst.concat_uid.is_some() {
                    return Err(Error::format(&pat, format!("associated image {name} is part of a concatenation")));
                }
                match associated.get(name) {
                    Some(a) if a.sop_uid == inst.sop_uid => {}
                    Some(_) => return Err(Error::format(&pat, format!("Slide contains unexpected associated image ({name})"))),
                    None => {
                        associated.insert(name, inst);
                    }
                }
            }
        }
    }
    if by_dims.is_empty() {
        return Err(Error::format(at, "No pyramid levels found"));
    }
    let mut levels: Vec<Vec<Instance<'_>>> = Vec::new();
    for (_, members) in by_dims.into_iter().rev() {
        levels.push(series::order_level(members, at)?);
    }
    // Widest first (BTreeMap order reversed sorts by width, then height, descending).
    levels.sort_by(|a, b| b[0].dims.0.cmp(&a[0].dims.0));

    // Sources: the opened file is 0; every other file used gets the next number.
    let mut extra: Vec<PathBuf> = Vec::new();
    let mut source_of = |p: &Path| -> SourceId {
        if p == at.path {
            return SourceId::PRIMARY;
        }
        if let Some(i) = extra.iter().position(|e| e == p) {
            return SourceId(i as u32 + 1);
        }
        extra.push(p.to_path_buf());
        SourceId(extra.len() as u32)
    };

    let mut layout = SlideLayout::default();
    for (k, members) in levels.iter().enumerate() {
        let lat = at.clone().with_image(ImageRef::Level(k));
        let image = level_image(members, &mut source_of, &lat)?;
        layout.levels.push(LayoutLevel { image, origin: format!("{} ({} file(s))", members[0].path.display(), members.len()) });
    }
    for (name, inst) in &associated {
        let aat = at.clone().with_image(ImageRef::Associated((*name).to_string()));
        let src = source_of(&inst.path);
        let locs = frame_locs(inst, src, &aat)?;
        let (w, h) = inst.dims;
        if w > crate::format::MAX_TILE_EDGE || h > crate::format::MAX_TILE_EDGE {
            return Err(Error::limits(&aat, format!("associated image of {w}x{h} pixels")));
        }
        let grid = Grid::regular(1, 1, 1, vec![locs[0]]).ok_or_else(|| Error::format(&aat, "bad grid"))?;
        layout.associated.insert((*name).to_string(), ImageIndex { width: w, height: h, tile_width: w as u32, tile_height: h as u32, tiled: false, codec: codec(inst), grid });
        if let Some(icc) = icc(&inst.header.data) {
            layout.associated_icc.insert((*name).to_string(), icc);
        }
    }
    let first = &levels[0][0];
    props::add(&first.header.meta, "dicom.", &mut layout.properties);
    props::add(&first.header.data, "dicom.", &mut layout.properties);
    let p = &layout.properties;
    let spacing = |i: usize| {
        p.get(&format!("dicom.SharedFunctionalGroupsSequence[0].PixelMeasuresSequence[0].PixelSpacing[{i}]"))
            .and_then(|s| crate::format::parse_double(s))
            .map(|v| v * 1000.0)
    };
    if let (Some(y), Some(x)) = (spacing(0), spacing(1)) {
        layout.mpp = Some((x, y));
    }
    layout.objective_power = p.get("dicom.OpticalPathSequence[0].ObjectiveLensPower").and_then(|s| crate::format::parse_double(s));
    layout.icc = icc(&first.header.data);
    let mut prefix = series_uid.as_bytes().to_vec();
    prefix.push(0);
    layout.quickhash = Some(QuickhashInput { prefix, lowest_level_tiles: false, strings: Vec::new(), uncapped: false, suffix: Vec::new() });
    layout.extra_sources = extra;
    Ok(layout)
}

/// OpticalPathSequence[0].ICCProfile, when present.
fn icc(data: &InMemDicomObject) -> Option<BlobRef> {
    let seq = data.get(tags::OPTICAL_PATH_SEQUENCE)?;
    let item = seq.items()?.first()?;
    let bytes = item.get(tags::ICC_PROFILE)?.value().to_bytes().ok()?;
    (!bytes.is_empty()).then(|| BlobRef::Bytes(Arc::from(&bytes[..])))
}

/// How an instance's frames decode.
fn codec(inst: &Instance<'_>) -> Arc<CodecInfo> {
    let tag = match inst.compression {
        Compression::Jpeg => 7,
        Compression::Jpeg2000 { .. } => 33005,
        _ => 1,
    };
    Arc::new(CodecInfo { ycbcr_subsampling: (2, 1), ..CodecInfo::rgb8(inst.compression, tag, inst.photometric) })
}

/// The byte range of each frame of `inst` (source `src`).
fn frame_locs(inst: &Instance<'_>, src: SourceId, at: &Location) -> Result<Vec<TileLoc>> {
    let pixel = inst.header.pixel.ok_or_else(|| Error::format(at, format!("{}: no PixelData", inst.path.display())))?;
    let fat = Location::file(&inst.path);
    let frame_bytes = inst.tile.0 as u64 * inst.tile.1 as u64 * 3;
    frames::frame_locs(inst.src.as_ref(), &fat, src, pixel, inst.header.eot, inst.frames, frame_bytes)
}

/// One (column, row) per frame, `None` for a frame without a position.
type FramePositions = Vec<Option<(u64, u64)>>;

/// Per-frame (column, row) tile positions from PerFrameFunctionalGroupsSequence's Plane
/// Position (Slide) items, when every frame has one; `None` when the file has none.
fn frame_positions(inst: &Instance<'_>, at: &Location) -> Result<Option<FramePositions>> {
    let Some(pf) = inst.header.read_per_frame(inst.src.as_ref(), &Location::file(&inst.path))? else { return Ok(None) };
    let Some(Value::Sequence(seq)) = pf.get(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE).map(|e| e.value()) else { return Ok(None) };
    let (tw, th) = (inst.tile.0 as i64, inst.tile.1 as i64);
    let mut out = Vec::with_capacity(seq.items().len());
    for item in seq.items() {
        let pos = item
            .get(tags::PLANE_POSITION_SLIDE_SEQUENCE)
            .and_then(|e| e.items())
            .and_then(|i| i.first())
            .and_then(|p| Some((int(p, tags::COLUMN_POSITION_IN_TOTAL_IMAGE_PIXEL_MATRIX)?, int(p, tags::ROW_POSITION_IN_TOTAL_IMAGE_PIXEL_MATRIX)?)));
        let Some((c, r)) = pos else { return Ok(None) };
        if (c - 1).rem_euclid(tw) != 0 || (r - 1).rem_euclid(th) != 0 {
            return Err(Error::unsupported(at, format!("unsupported frame alignment: frame at column {c}, row {r} for {tw}x{th} frames")));
        }
        out.push((c >= 1 && r >= 1).then(|| (((c - 1) / tw) as u64, ((r - 1) / th) as u64)));
    }
    Ok(Some(out))
}

/// One level's image from its concatenation members.
fn level_image(members: &[Instance<'_>], source_of: &mut impl FnMut(&Path) -> SourceId, at: &Location) -> Result<ImageIndex> {
    let m0 = &members[0];
    let (w, h) = m0.dims;
    let (tw, th) = m0.tile;
    if w > crate::format::MAX_IMAGE_EDGE || h > crate::format::MAX_IMAGE_EDGE {
        return Err(Error::limits(at, format!("level of {w}x{h} pixels")));
    }
    let cols = w.div_ceil(tw as u64);
    let rows = h.div_ceil(th as u64);
    let cells = cols * rows;
    if cells > MAX_CELLS {
        return Err(Error::limits(at, format!("{cols}x{rows} frames in one level")));
    }
    let mut tiles: BTreeMap<(u64, u64), TileLoc> = BTreeMap::new();
    let mut complete = true;
    for m in members {
        let src = source_of(&m.path);
        let locs = frame_locs(m, src, at)?;
        let kind = header::text(&m.header.data, tags::DIMENSION_ORGANIZATION_TYPE);
        match frame_positions(m, at)? {
            Some(pos) => {
                complete = false;
                for (loc, p) in locs.iter().zip(pos) {
                    if let Some((c, r)) = p.filter(|&(c, r)| c < cols && r < rows) {
                        tiles.insert((r, c), *loc);
                    }
                }
            }
            None => {
                match kind.as_deref() {
                    None | Some("TILED_FULL") => {}
                    Some(k @ ("TILED_SPARSE" | "3D")) => return Err(Error::format(at, format!("DimensionOrganizationType {k} without per-frame Plane Positions"))),
                    Some(k) => return Err(Error::unsupported(at, format!("unsupported DimensionOrganisationType {k}"))),
                }
                for (i, loc) in locs.iter().enumerate() {
                    let n = m.frame_offset + i as u64;
                    if n < cells {
                        tiles.insert((n / cols, n % cols), *loc);
                    }
                }
            }
        }
    }
    let grid = if complete && tiles.len() as u64 == cells {
        // Keyed (row, col): the values are in row-major order.
        Grid::regular(cols, rows, 1, tiles.into_values().collect())
    } else {
        Grid::sparse(cols, rows, 1, tiles.into_iter().map(|((r, c), l)| ((c, r), vec![l])))
    };
    let grid = grid.ok_or_else(|| Error::format(at, "frame outside the tile grid"))?;
    Ok(ImageIndex { width: w, height: h, tile_width: tw, tile_height: th, tiled: true, codec: codec(m0), grid })
}

/// The file to open for a folder: the first file (InConcatenationNumber lowest) of the widest
/// level of the folder's one DICOM WSI series.
fn resolve_dir(dir: &Path) -> Result<Option<PathBuf>> {
    let files = super::LocalFiles { path: dir.to_path_buf() };
    let list = super::list_files(dir)?;
    let mut series: BTreeMap<String, Vec<(PathBuf, bool, u64, u64)>> = BTreeMap::new();
    for p in list {
        let Ok(src) = super::SiblingFiles::open(&files, &p) else { continue };
        if header::detect(src.as_ref()).is_err() {
            continue;
        }
        let Ok(h) = Header::parse(src.as_ref(), &Location::file(&p)) else { continue };
        let Some(uid) = h.series_uid() else { continue };
        let level = series::flavor(&h) == Some(Flavor::Level);
        let width = int(&h.data, tags::TOTAL_PIXEL_MATRIX_COLUMNS).unwrap_or(0).max(0) as u64;
        let concat = int(&h.data, tags::IN_CONCATENATION_NUMBER).unwrap_or(1).max(0) as u64;
        series.entry(uid).or_default().push((p, level, width, concat));
    }
    match series.len() {
        0 => Ok(None),
        1 => {
            let files = series.into_values().next().unwrap_or_default();
            let best = files.iter().max_by_key(|(_, level, w, c)| (*level, *w, u64::MAX - c)).map(|f| f.0.clone());
            Ok(best)
        }
        _ => Err(Error::Usage(format!(
            "{}: the folder holds {} DICOM WSI series ({}); open one of their files",
            dir.display(),
            series.len(),
            series.keys().cloned().collect::<Vec<_>>().join(", ")
        ))),
    }
}
