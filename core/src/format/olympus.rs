//! Olympus / Evident cellSens VSI (vendor name `olympus`): a `.vsi` file (a little-endian TIFF
//! whose IFD 0 is a preview image, with a binary record tree behind its 8-byte header,
//! [`tree`]) and, for each stack whose pixels are external, an ETS file
//! `_<name>_/stack<id>/frame_t.ets` (or `frame_t_0.ets`) beside it ([`ets`]), `<name>` being
//! the `.vsi` file's name without its extension.
//!
//! OpenSlide 4.0.1 has no VSI driver. Format facts, from public sources only (Bio-Formats'
//! `CellSensReader`, slideio's VSI driver; the public test files of `../shared/formats3`):
//! * detection by content: `II*\0`, IFD 0 not at offset 8, and a record volume header
//!   (24, 21321) at offset 8 ([`tree`]);
//! * the slide's pyramid is the first stack of type 0 (an image) whose pixels are in an ETS
//!   file, else the first stack with an ETS file ([`stacks`]); its levels are the ETS tile
//!   table's levels (the last tile coordinate, when the use-pyramid flag is set). Level 0 has
//!   the stack's image size; each further level is half the one before, rounded up, and no
//!   larger than its tiles reach (Bio-Formats' rule);
//! * a stack with a channel dimension (fluorescence) has its channels as
//!   [`crate::index::ChannelPlanes`] (one grey image per channel, the ETS tiles of that channel
//!   coordinate): `read_region_channels` returns the stored 8- or 16-bit samples,
//!   `read_region` channel 0 as grey; RGB stacks (3 components) are read by `read_region`. Of
//!   the other dimensions (Z, T, lambda, phase) plane 0 is read; their sizes are properties;
//! * tiles: raw (little-endian samples), JPEG (whole JFIF streams: `TileStream::Plain`, YCbCr
//!   for 3 components, as DICOM's JPEG frames, so the GPU engine decodes them with nvJPEG)
//!   and JPEG 2000 (OpenJPEG, 8 or 16 bit); cells without a tile-table entry read as
//!   transparent, and the ETS background colour is `openslide.background-color`;
//! * `openslide.mpp-x/-y` from the stack's RWC frame scale and unit, `openslide.objective-power`
//!   from its objective magnification; associated image `thumbnail`: the `.vsi`'s IFD 0;
//! * properties: `olympus.*` (stack, ETS header, channels, dimensions, document) and the
//!   `tiff.*` of IFD 0.
//!
//! Errors: a missing ETS file is an `Io` error of kind `NotFound` naming the file looked for;
//! a tile-grid origin (2410) other than 0 is `Unsupported` (no public reader documents how it
//! moves the tiles); damaged trees and tables are `Format` / `Limits` errors ([`tree`], [`ets`]).

pub(crate) mod ets;
pub(crate) mod stacks;
pub(crate) mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::tiff_common::{image_from_ifd, tiff_properties};
use super::{format_double, member_path, FormatDriver, LayoutLevel, Probe, QuickhashInput, SiblingFiles, SlideLayout, MAX_IMAGE_EDGE};
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Alpha, ChannelPlanes, CodecInfo, Compression, Grid, ImageIndex, Photometric, SampleBits, SourceId, TileLoc, TileStream};
use crate::io::ByteSource;
use ets::{Ets, EtsCompression};
use stacks::Stack;

/// Most channels read from one stack.
pub const MAX_CHANNELS: i64 = crate::limits::LIMITS.vsi_channels;
/// Most grid cells held densely over all levels and channels; larger grids are sparse.
const MAX_DENSE_CELLS: u64 = 1 << 22;
/// The ETS frame files tried in a stack's folder, in order.
const FRAME_FILES: [&str; 2] = ["frame_t.ets", "frame_t_0.ets"];

/// The Olympus VSI driver (vendor name `olympus`).
pub struct Olympus;

/// `true` when `src` starts as a VSI file: a little-endian TIFF header whose IFD 0 is not at
/// offset 8 and a record volume header there.
fn is_vsi(src: &dyn ByteSource) -> std::result::Result<(), String> {
    let mut b = [0u8; 12];
    src.read_exact_at(&mut b, 0).map_err(|_| "shorter than a VSI header".to_string())?;
    if &b[..4] != b"II*\0" {
        return Err("does not start with a little-endian TIFF header".into());
    }
    let ifd0 = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if ifd0 == 8 || u16::from_le_bytes([b[8], b[9]]) != 24 || u16::from_le_bytes([b[10], b[11]]) != tree::VOLUME_MAGIC {
        return Err("has no VSI record tree at offset 8".into());
    }
    Ok(())
}

impl FormatDriver for Olympus {
    fn name(&self) -> &'static str {
        "olympus"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        is_vsi(probe.src)
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let root = tree::parse(src, at, 8)?;
        let all = stacks::stacks(&root);
        if all.is_empty() {
            return Err(Error::format(at, "the VSI record tree has no image stacks (no collection volume with multidimensional image volumes)"));
        }
        let chosen = all.iter().position(|s| s.external && s.kind == 0).or_else(|| all.iter().position(|s| s.external));
        let stack = &all[chosen.ok_or_else(|| Error::unsupported(at, "no VSI stack keeps its pixels in an ETS file (images stored only inside the .vsi are not read)"))?];
        if stack.tile_origin.iter().any(|&v| v != 0) {
            return Err(Error::unsupported(at, format!("VSI stack {} has a tile-grid origin of {:?} (only 0 is read)", stack.id, stack.tile_origin)));
        }
        let files = probe.files.ok_or_else(|| Error::unsupported(at, "an Olympus VSI slide read from memory (its ETS files beside the .vsi are needed)"))?;
        let (ets_path, ets_src) = find_ets(files, stack, at)?;
        let eat = Location::file(&ets_path);
        let ets = ets::read(ets_src.as_ref(), &eat)?;
        let built = build_levels(&ets, stack, &eat)?;

        let mut properties = BTreeMap::new();
        let mut associated = BTreeMap::new();
        // The preview's TIFF must parse (Bio-Formats reads a .vsi through its TIFF parser too).
        let tf = probe.tiff.map_err(Clone::clone)?;
        {
            if !tf.ifds.is_empty() {
                tiff_properties(tf, src, at, 0, &mut properties)?;
                match image_from_ifd(tf, src, at, 0, ImageRef::Associated("thumbnail".into())) {
                    Ok(img) => {
                        associated.insert("thumbnail".to_string(), img);
                    }
                    Err(Error::Unsupported { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let rel = ets_path.strip_prefix(files.path().parent().unwrap_or(Path::new(""))).unwrap_or(&ets_path);
        properties.insert("olympus.ets.file".into(), rel.to_string_lossy().into_owned());
        stack_properties(&mut properties, &root, &all, stack, &ets, &built);
        let background_color = match (ets.sample_bytes, ets.background.as_slice()) {
            (1, [r, g, b]) => Some([*r as u8, *g as u8, *b as u8]),
            (1, [v]) => Some([*v as u8; 3]),
            (2, [r, g, b]) => Some([(*r >> 8) as u8, (*g >> 8) as u8, (*b >> 8) as u8]),
            (2, [v]) => Some([(*v >> 8) as u8; 3]),
            _ => None,
        };
        let strings = vec![("olympus.stack-id".to_string(), stack.id.to_string()), ("olympus.stack-name".to_string(), stack.name.clone().unwrap_or_default())];
        Ok(SlideLayout {
            extra_sources: vec![ets_path],
            levels: built.levels,
            channels: built.channels,
            associated,
            properties,
            mpp: stack.mpp,
            objective_power: stack.magnification,
            background_color,
            quickhash: Some(QuickhashInput { lowest_level_tiles: true, strings, ..QuickhashInput::default() }),
            ..SlideLayout::default()
        })
    }
}

/// The ETS file of `stack`: the first of [`FRAME_FILES`] in `_<name>_/stack<id>/` beside the
/// `.vsi`, opened.
///
/// # Errors
/// `Io` of kind `NotFound` naming the first file looked for when none exists; `Format` for a
/// name leading out of the folder; other `Io` errors from the open.
fn find_ets(files: &dyn SiblingFiles, stack: &Stack, at: &Location) -> Result<(PathBuf, Box<dyn ByteSource>)> {
    let vsi = files.path();
    let dir = match vsi.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let stem = vsi.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let folder = format!("_{stem}_/stack{}", stack.id);
    let mut first = None;
    for name in FRAME_FILES {
        let p = member_path(files, &dir, "ETS file", &format!("{folder}/{name}"), at)?;
        match files.open(&p) {
            Ok(s) => return Ok((p, s)),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                first.get_or_insert(p);
            }
            Err(e) => return Err(e),
        }
    }
    let path = first.expect("FRAME_FILES is not empty");
    let name = stack.name.as_deref().unwrap_or("");
    let msg = format!("the ETS pixel file of VSI stack {} ({name:?}) is missing (looked for {folder}/{} and {})", stack.id, FRAME_FILES[0], FRAME_FILES[1]);
    Err(Error::io(&Location::file(path), std::io::Error::new(std::io::ErrorKind::NotFound, msg)))
}

/// The pyramid (and channel planes) built from an ETS tile table.
struct Built {
    levels: Vec<LayoutLevel>,
    channels: Option<ChannelPlanes>,
    /// Channel count (1 without a channel dimension).
    channel_count: usize,
    /// (dimension meaning, planes at level 0) of the other described dimensions.
    planes: Vec<(i64, i64)>,
}

/// Level sizes, tile grids and codec of `ets` for `stack` (see the module docs).
fn build_levels(ets: &Ets, stack: &Stack, at: &Location) -> Result<Built> {
    let nlevels = ets.level_count(at)?;
    let c_index = stack.channel_index().filter(|&i| i < ets.dims - 1);
    if c_index.is_some() && ets.components != 1 {
        return Err(Error::unsupported(at, format!("ETS tiles of {} components in a stack with a channel dimension", ets.components)));
    }
    // Per entry used: (level, channel, column, row, range); plane 0 of other dimensions only.
    let mut used = Vec::with_capacity(ets.len());
    let mut max_xy = vec![(0i64, 0i64); nlevels];
    let mut channels = 1i64;
    let mut plane_max: BTreeMap<usize, i64> = BTreeMap::new();
    for i in 0..ets.len() {
        let c = ets.coord(i);
        let level = if ets.pyramid { ets.level(i) as usize } else if ets.level(i) == 0 { 0 } else { continue };
        let (x, y) = (c[0] as i64, c[1] as i64);
        if x < 0 || y < 0 {
            return Err(Error::format(at, format!("ETS tile {i} at negative column or row ({x}, {y})")));
        }
        let ch = c_index.map_or(0, |k| c[k] as i64);
        if !(0..MAX_CHANNELS).contains(&ch) {
            return Err(Error::format(at, format!("ETS tile {i} of channel {ch} (0 to {} accepted)", MAX_CHANNELS - 1)));
        }
        let mut plane0 = true;
        for (k, &v) in c.iter().enumerate().take(ets.dims - 1).skip(2) {
            if Some(k) != c_index {
                if level == 0 {
                    let m = plane_max.entry(k).or_insert(0);
                    *m = (*m).max(v as i64);
                }
                plane0 &= v == 0;
            }
        }
        if !plane0 {
            continue;
        }
        channels = channels.max(ch + 1);
        max_xy[level] = (max_xy[level].0.max(x), max_xy[level].1.max(y));
        let (offset, length) = ets.ranges[i];
        used.push((level, ch as usize, x as u64, y as u64, TileLoc { source: SourceId(1), offset, length }));
    }
    let (tw, th) = (ets.tile.0 as i64, ets.tile.1 as i64);
    let (w0, h0) = stack.size.unwrap_or(((max_xy[0].0 + 1) * tw, (max_xy[0].1 + 1) * th));
    if w0 <= 0 || h0 <= 0 {
        return Err(Error::format(at, format!("VSI stack {} image size {w0}x{h0}", stack.id)));
    }
    if w0 as u64 > MAX_IMAGE_EDGE || h0 as u64 > MAX_IMAGE_EDGE {
        return Err(Error::limits(at, format!("VSI stack {} image of {w0}x{h0} pixels exceeds {MAX_IMAGE_EDGE} per edge", stack.id)));
    }
    // Bio-Formats' rule: half the level before, rounded up while within the level's tiles.
    let mut sizes = vec![(w0, h0)];
    for m in &max_xy[1..] {
        let (pw, ph) = *sizes.last().expect("level 0");
        let half = |p: i64, cap: i64| if p % 2 == 1 && p / 2 < cap { p / 2 + 1 } else { (p / 2).min(cap) };
        let s = (half(pw, tw * (m.0 + 1)).max(1), half(ph, th * (m.1 + 1)).max(1));
        if s == (pw, ph) {
            break;
        }
        sizes.push(s);
    }
    let codec = Arc::new(codec_of(ets, c_index.is_some()));
    let mut dense_budget = MAX_DENSE_CELLS;
    let nch = channels as usize;
    let mut images: Vec<Vec<ImageIndex>> = Vec::with_capacity(sizes.len());
    for (k, &(w, h)) in sizes.iter().enumerate() {
        let (cols, rows) = ((w as u64).div_ceil(tw as u64), (h as u64).div_ceil(th as u64));
        let mut per_channel: Vec<Vec<((u64, u64), TileLoc)>> = vec![Vec::new(); nch];
        for &(l, ch, x, y, loc) in used.iter().filter(|u| u.0 == k) {
            if x >= cols || y >= rows {
                return Err(Error::format(at, format!("ETS tile ({x}, {y}) of level {l} lies outside the level's {w}x{h} pixels ({cols}x{rows} tiles)")));
            }
            per_channel[ch].push(((x, y), loc));
        }
        let mut level = Vec::with_capacity(nch);
        for cells in per_channel {
            let grid = if cols * rows <= dense_budget {
                dense_budget -= cols * rows;
                let mut v = vec![TileLoc::default(); (cols * rows) as usize];
                for ((x, y), loc) in cells {
                    v[(y * cols + x) as usize] = loc;
                }
                Grid::regular(cols, rows, 1, v)
            } else {
                Grid::sparse(cols, rows, 1, cells.into_iter().map(|(xy, loc)| (xy, vec![loc])))
            }
            .ok_or_else(|| Error::format(at, "ETS tile grid does not match its level"))?;
            level.push(ImageIndex { width: w as u64, height: h as u64, tile_width: tw as u32, tile_height: th as u32, tiled: true, codec: codec.clone(), grid });
        }
        images.push(level);
    }
    let levels = images.iter().enumerate().map(|(k, l)| LayoutLevel { image: l[0].clone(), origin: format!("ETS level {k}") }).collect();
    let channel_planes = c_index.map(|_| {
        let names = (0..channels).map(|c| stack.channel_names.iter().find(|(i, _)| *i == c).map_or_else(|| format!("C{c}"), |(_, n)| n.clone())).collect();
        ChannelPlanes { names, levels: images, samples: Vec::new(), colors: Vec::new() }
    });
    let planes = stack.dims.iter().filter(|(k, _)| Some(*k) != c_index).filter_map(|(k, m)| plane_max.get(k).map(|v| (*m, v + 1))).collect();
    Ok(Built { levels, channels: channel_planes, channel_count: nch, planes })
}

/// The codec of an ETS file's tiles (one sample per pixel for channel planes).
fn codec_of(ets: &Ets, channel_planes: bool) -> CodecInfo {
    let spp = if channel_planes { 1 } else { ets.components };
    let grey = spp == 1;
    let (compression, tag, photometric) = match ets.compression {
        EtsCompression::Raw => (Compression::None, 1, if grey { Photometric::MinIsBlack } else { Photometric::Rgb }),
        EtsCompression::Jpeg => (Compression::Jpeg, 7, if grey { Photometric::MinIsBlack } else { Photometric::YCbCr }),
        EtsCompression::Jpeg2000 => (Compression::Jpeg2000 { ycbcr: false }, 33005, if grey { Photometric::MinIsBlack } else { Photometric::Rgb }),
    };
    CodecInfo {
        compression,
        compression_tag: tag,
        photometric,
        samples_per_pixel: spp,
        sample_bits: if ets.sample_bytes == 2 { SampleBits::U16 { big_endian: false } } else { SampleBits::U8 },
        alpha: Alpha::None,
        predictor: 1,
        planar_separate: false,
        stream: TileStream::Plain,
        ycbcr_subsampling: (2, 2),
    }
}

/// The `olympus.*` properties.
fn stack_properties(p: &mut BTreeMap<String, String>, root: &[tree::Field], all: &[Stack], stack: &Stack, ets: &Ets, built: &Built) {
    let mut set = |k: &str, v: String| {
        p.insert(format!("olympus.{k}"), v);
    };
    for (k, v) in stacks::document(root) {
        set(k, v);
    }
    set("stack-count", all.len().to_string());
    for (i, s) in all.iter().enumerate() {
        set(&format!("stack[{i}].id"), s.id.to_string());
        set(&format!("stack[{i}].name"), s.name.clone().unwrap_or_default());
        set(&format!("stack[{i}].type"), s.kind_name());
        set(&format!("stack[{i}].ets"), u8::from(s.external).to_string());
    }
    set("stack-id", stack.id.to_string());
    set("stack-name", stack.name.clone().unwrap_or_default());
    set("stack-type", stack.kind_name());
    if let Some((w, h)) = stack.size {
        set("image-width", w.to_string());
        set("image-height", h.to_string());
    }
    if let Some(m) = stack.magnification {
        set("objective-magnification", format_double(m));
    }
    if let Some((x, y)) = stack.mpp {
        set("pixel-size-x-um", format_double(x));
        set("pixel-size-y-um", format_double(y));
    }
    if let Some(b) = stack.background {
        set("default-background", b.to_string());
    }
    let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
    set("tile-origin", list(&stack.tile_origin));
    set("ets.version", ets.version.to_string());
    set("ets.compression", ets.compression.name().into());
    set("ets.quality", ets.quality.to_string());
    set("ets.pixel-type", if ets.sample_bytes == 2 { "uint16" } else { "uint8" }.into());
    set("ets.components", ets.components.to_string());
    set("ets.color-space", ets.colorspace.to_string());
    set("ets.pyramid", u8::from(ets.pyramid).to_string());
    set("ets.tile-count", ets.len().to_string());
    set("ets.background", list(&ets.background.iter().map(|&v| v as i64).collect::<Vec<_>>()));
    set("channel-count", built.channel_count.to_string());
    if let Some(ch) = &built.channels {
        for (i, n) in ch.names.iter().enumerate() {
            set(&format!("channel[{i}].name"), n.clone());
        }
    }
    for &(meaning, count) in &built.planes {
        let name = match meaning {
            1 => "z",
            2 => "t",
            3 => "lambda",
            9 => "phase",
            _ => continue,
        };
        set(&format!("{name}-count"), count.to_string());
    }
}
