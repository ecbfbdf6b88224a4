//! Zeiss CZI (ZISRAW): slide scans (Axioscan: mosaics of overlapping subblocks with pyramid
//! subblocks, scenes, JPEG XR or zstd) and microscopy files (channels, mosaics).
//!
//! Facts follow OpenSlide's zeiss driver (`openslide-vendor-zeiss.c`) and format page
//! (openslide.org/formats/zeiss), czifile's reader and OpenSlide's CZI ImHex pattern; the
//! structure is read by [`segments`], the XML by [`metadata`], the levels built by [`levels`].
//! * detection: not TIFF, starts with `ZISRAWFILE` (OpenSlide's rule); a file part other than 0
//!   of a multi-file CZI is refused (`Unsupported`).
//! * levels: one per subblock downsample every scene reaches, each a positioned grid of the
//!   subblocks of that downsample (stored tiles of their own sizes, a later directory entry on top, as OpenSlide 4.0.1); pixels
//!   no subblock covers read as transparent. No tile-size properties (OpenSlide's range grid
//!   reports none).
//! * scenes: one slide, all scenes in one frame (subblock positions are slide positions), each
//!   scene's level-0 bounding box as `openslide.region[i].*`, as OpenSlide does.
//! * pixel types Gray8, Gray16, Bgr24, Bgr48 (OpenSlide reads only Bgr24 and Bgr48); 16-bit
//!   samples show their high byte in `read_region` (OpenSlide's BGR48 rule), all bits in
//!   `read_region_channels`. Compressions: none, JPEG XR, zstd0, zstd1 (OpenSlide 4.0.1: not
//!   JPEG XR); CZI's JPEG and LZW are refused (`Unsupported`, as OpenSlide).
//! * channels: the `C` dimension (OpenSlide refuses `C` ≠ 0). `read_region` shows the lowest
//!   channel; `read_region_channels` gives every channel's samples: grey channels one each,
//!   named from the XML's `Channel` `Name` (else `Id`, else `C<i>`), Bgr channels three each
//!   (`NAME.R`, `NAME.G`, `NAME.B`). A file of one channel has no channel planes (its samples
//!   are `gray` or `R`, `G`, `B`). Other dimensions: the first plane (see [`levels`]).
//! * associated images: `Label` → `label`, `SlidePreview` → `macro` (each an embedded CZI of
//!   one subblock), `Thumbnail` → `thumbnail` (a JPEG); another content type for those names
//!   is refused, as OpenSlide.
//! * properties: `zeiss.*` from the XML, mpp, objective power and barcode ([`metadata`]).
//! * quickhash: SHA-256 of the primary file GUID, the file GUID and the metadata XML followed
//!   by a NUL, as OpenSlide.

pub mod levels;
pub mod metadata;
pub mod segments;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{FormatDriver, LayoutLevel, Probe, QuickhashInput, SlideLayout, MAX_TILE_EDGE};
use crate::codec::stream::scan_header;
use crate::error::{Error, Location, Result};
use crate::index::{ChannelPlanes, CodecInfo, Compression, Grid, ImageIndex, Photometric, TileLoc};
use crate::io::ByteSource;
use crate::tiff::{read_at, TiffFile};

/// The Zeiss CZI driver (vendor `zeiss`).
pub struct Zeiss;

/// The file magic: the file header segment's id.
pub const MAGIC: &[u8] = b"ZISRAWFILE";

impl FormatDriver for Zeiss {
    fn name(&self) -> &'static str {
        "zeiss"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        if probe.tiff.is_ok() {
            return Err("Is a TIFF file".into());
        }
        let mut head = [0u8; 32];
        if probe.src.len() < 32 || probe.src.read_exact_at(&mut head, 0).is_err() || TiffFile::sniff(&head) {
            return Err("shorter than 32 bytes or TIFF: does not start with ZISRAWFILE".into());
        }
        if &head[..MAGIC.len()] != MAGIC {
            return Err("does not start with ZISRAWFILE".into());
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let hdr = segments::file_header(src, at, 0)?;
        if hdr.file_part != 0 {
            return Err(Error::unsupported(at, format!("part {} of a multi-file CZI", hdr.file_part)));
        }
        let entries = segments::directory(src, at, 0, &hdr)?;
        let data = entries.iter().map(|e| segments::subblock_data(src, at, 0, e.file_pos, e.byte_len()).map(|(o, l)| TileLoc::primary(o, l))).collect::<Result<Vec<_>>>()?;
        let xml = segments::metadata_xml(src, at, 0, &hdr)?;
        let text = xml.as_deref().map(String::from_utf8_lossy);
        let meta = match &text {
            Some(t) => metadata::parse(t, at)?,
            None => metadata::Metadata::default(),
        };
        let subs = levels::place(&entries, &data, at)?;
        let plan = levels::plan(&subs, meta.size, meta.scenes.unwrap_or(1), at)?;
        let mut layout = SlideLayout::default();
        for (k, per_channel) in plan.images.iter().enumerate() {
            layout.levels.push(LayoutLevel { image: per_channel[0].clone(), origin: format!("subblocks at downsample {}", plan.downsamples[k]) });
        }
        layout.downsamples = plan.downsamples.iter().map(|&d| d as f64).collect();
        layout.regions = plan.regions.clone();
        layout.channels = channel_planes(&plan, &meta.channel_names, &meta.channel_colors);
        layout.tile_hints = Some(Vec::new());
        layout.associated = associated(src, at, &segments::attachments(src, at, 0, &hdr)?)?;
        layout.mpp = meta.mpp;
        layout.objective_power = meta.objective_power;
        layout.barcode = meta.barcode.clone();
        layout.properties = meta.properties;
        let mut prefix = Vec::with_capacity(33 + xml.as_ref().map_or(0, Vec::len));
        prefix.extend_from_slice(&hdr.primary_guid);
        prefix.extend_from_slice(&hdr.file_guid);
        prefix.extend_from_slice(xml.as_deref().unwrap_or_default());
        prefix.push(0);
        layout.quickhash = Some(QuickhashInput { prefix, ..Default::default() });
        Ok(layout)
    }
}

/// Channel planes for a file of several channels (`None` for one).
/// Channel colours come from the metadata; the R, G and B samples of a BGR24/48 channel get the
/// primaries.
fn channel_planes(plan: &levels::Plan, xml_names: &[String], xml_colors: &[Option<[u8; 3]>]) -> Option<ChannelPlanes> {
    if plan.channels.len() < 2 {
        return None;
    }
    let mut names = Vec::new();
    let mut samples = Vec::new();
    let mut which = Vec::new();
    let mut colors = Vec::new();
    for (i, &c) in plan.channels.iter().enumerate() {
        let base = usize::try_from(c).ok().and_then(|c| xml_names.get(c)).filter(|n| !n.is_empty()).cloned().unwrap_or_else(|| format!("C{c}"));
        let spp = plan.images[0][i].codec.samples_per_pixel as usize;
        if spp == 1 {
            names.push(base);
            samples.push(0);
            which.push(i);
            colors.push(usize::try_from(c).ok().and_then(|c| xml_colors.get(c).copied().flatten()));
        } else {
            for (s, rgb) in ["R", "G", "B"].iter().enumerate().take(spp) {
                names.push(format!("{base}.{rgb}"));
                samples.push(s);
                which.push(i);
                colors.push(Some([[255, 0, 0], [0, 255, 0], [0, 0, 255]][s]));
            }
        }
    }
    let levels = plan.images.iter().map(|per_channel| which.iter().map(|&i| per_channel[i].clone()).collect()).collect();
    Some(ChannelPlanes { names, levels, samples, colors })
}

/// The associated images among `atts` (OpenSlide's names).
fn associated(src: &dyn ByteSource, at: &Location, atts: &[segments::Attachment]) -> Result<BTreeMap<String, ImageIndex>> {
    let mut out = BTreeMap::new();
    for a in atts {
        let name = match a.name.as_str() {
            "Label" => "label",
            "SlidePreview" => "macro",
            "Thumbnail" => "thumbnail",
            _ => continue,
        };
        let img = match a.file_type.as_str() {
            "JPG" => jpeg_image(src, at, a.offset, a.length).map_err(|e| prefix(e, name))?,
            "CZI" => embedded_czi(src, at, a.offset).map_err(|e| prefix(e, name))?,
            t => return Err(Error::format(at, format!("associated image \"{name}\" has unrecognized type \"{t}\""))),
        };
        out.insert(name.to_string(), img);
    }
    Ok(out)
}

fn prefix(e: Error, name: &str) -> Error {
    match e {
        Error::Format { at, message, codec } => Error::Format { at, message: format!("associated image \"{name}\": {message}"), codec },
        e => e,
    }
}

/// A whole JPEG of `length` bytes at `offset`: one tile.
fn jpeg_image(src: &dyn ByteSource, at: &Location, offset: u64, length: u64) -> Result<ImageIndex> {
    let head = read_at(src, at, offset, length.min(1 << 16))?;
    let l = scan_header(&head).map_err(|m| Error::format(at, format!("JPEG: {m}")))?;
    let (w, h) = (l.width as u64, l.height as u64);
    if w == 0 || h == 0 || w > MAX_TILE_EDGE || h > MAX_TILE_EDGE {
        return Err(Error::limits(at, format!("JPEG of {w}x{h} pixels (1 to {MAX_TILE_EDGE} per edge)")));
    }
    let photometric = if l.components == 1 { Photometric::MinIsBlack } else { Photometric::YCbCr };
    let mut codec = CodecInfo::rgb8(Compression::Jpeg, 7, photometric);
    codec.samples_per_pixel = if l.components == 1 { 1 } else { 3 };
    let grid = Grid::regular(1, 1, 1, vec![TileLoc::primary(offset, length)]).ok_or_else(|| Error::format(at, "JPEG grid"))?;
    Ok(ImageIndex { width: w, height: h, tile_width: w as u32, tile_height: h as u32, tiled: false, codec: Arc::new(codec), grid })
}

/// An embedded CZI of one subblock at `base`: one tile.
fn embedded_czi(src: &dyn ByteSource, at: &Location, base: u64) -> Result<ImageIndex> {
    let hdr = segments::file_header(src, at, base)?;
    let entries = segments::directory(src, at, base, &hdr)?;
    if entries.len() != 1 {
        return Err(Error::format(at, format!("embedded CZI has {} subblocks, expected one", entries.len())));
    }
    let e = &entries[0];
    let (offset, length) = segments::subblock_data(src, at, base, e.file_pos, e.byte_len())?;
    let subs = levels::place(&entries, &[TileLoc::primary(offset, length)], at)?;
    let s = subs.first().ok_or_else(|| Error::format(at, "embedded CZI subblock"))?;
    let grid = Grid::regular(1, 1, 1, vec![s.loc]).ok_or_else(|| Error::format(at, "embedded CZI grid"))?;
    Ok(ImageIndex { width: s.w as u64, height: s.h as u64, tile_width: s.w, tile_height: s.h, tiled: false, codec: s.codec.clone(), grid })
}
