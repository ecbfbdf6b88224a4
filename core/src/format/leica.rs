//! Leica SCN (SCN400 BigTIFF).
//!
//! Facts follow OpenSlide 4.0.1's `openslide-vendor-leica.c`:
//! * detection: IFD 0 is tiled and its ImageDescription is XML whose root's default
//!   namespace is `http://www.leica-microsystems.com/scn/2010/03/10` or `.../2010/10/01`;
//! * the tree: `scn/collection` (`sizeX`/`sizeY`: the slide in nm; `barcode` text, base64,
//!   or a `barcode` attribute in the older namespace, as is) with `image` children, each with
//!   a `view` (`sizeX`, `sizeY`, `offsetX`, `offsetY` in nm; required), `pixels/dimension`
//!   entries (`ifd`, `sizeX`, `sizeY`; only z-plane 0), and `creationDate`, `device/@model`,
//!   `device/@version`, `scanSettings/objectiveSettings/objective`,
//!   `scanSettings/illuminationSettings/{numericalAperture, illuminationSource}`. Dimensions are
//!   sorted by width, largest first; each has `nm_per_pixel = view sizeX / dimension sizeX`;
//! * an image is the macro when its view is at (0, 0) with the collection's size; the others
//!   with illumination source `brightfield` are main images (fluorescence images are skipped).
//!   Main images must agree on source, objective and dimension count (else `Unsupported`) and
//!   on resolution within 2 %; level `k` takes the smallest nm per pixel of their dimension
//!   `k`, its size is `ceil(collection size / nm per pixel)` and each main image (an area) sits
//!   at `trunc(view offset / nm per pixel)`; the rest of the level is transparent;
//! * one brightfield macro at most (else an error): its largest dimension is `macro`;
//! * quickhash: with at most one macro, one brightfield main image and no other images, the
//!   smallest dimension of the main image; otherwise the smallest of the macro (an error when
//!   there is none); then the `tiff.*` strings of level 0's first area's IFD;
//! * properties: `tiff.*` of that IFD without `tiff.ImageDescription`; `leica.barcode`,
//!   `leica.aperture`, `leica.creation-date`, `leica.device-model`, `leica.device-version`,
//!   `leica.illumination-source`, `leica.objective` (first main image), `openslide.barcode`,
//!   `openslide.objective-power` when `leica.objective` is an integer, `openslide.mpp-x/-y` =
//!   10000 / X/YResolution when ResolutionUnit is centimetre, `openslide.region[i].*` per area
//!   of level 0 (offset and the IFD's size) and `openslide.bounds-*` their union. No
//!   `level[i].tile-width/-height` (OpenSlide reports none for Leica) and no background colour.
//!
//! Areas whose offsets and sizes fall on whole tiles of a level make a sparse grid (the level
//! grid's cells are the areas' tiles); other placements need positioned tiles, which the
//! index describes and `format::finish` refuses (`Unsupported`) until the read layer
//! places them.

use std::collections::BTreeMap;

use roxmltree::Node;

use super::tiff_common::{image_from_ifd, is_tiled, quickhash_input, tiff_properties};
use super::xml::{self, child, children, first_text};
use super::{Bounds, FormatDriver, LayoutLevel, Probe, SlideLayout};
use crate::codec::base64_text;
use crate::error::{Error, ImageRef, Location, Result};
use crate::index::{Grid, ImageIndex, PositionedTile, TileLoc};
use crate::io::ByteSource;
use crate::tiff::{tags, TiffFile};

/// The Leica SCN driver.
pub struct Leica;

const NAMESPACES: [&str; 2] = ["http://www.leica-microsystems.com/scn/2010/03/10", "http://www.leica-microsystems.com/scn/2010/10/01"];

impl FormatDriver for Leica {
    fn name(&self) -> &'static str {
        "leica"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        let tf = probe.tiff.map_err(|e| e.message())?;
        if !is_tiled(tf, 0) {
            return Err("IFD 0 is not tiled".into());
        }
        let desc = tf.reader(probe.src, probe.at, 0).ascii(tags::IMAGE_DESCRIPTION).map_err(|e| e.message())?.ok_or("IFD 0 has no ImageDescription")?;
        if !NAMESPACES.iter().any(|ns| desc.contains(ns)) {
            return Err("ImageDescription does not name the Leica SCN namespace".into());
        }
        let doc = roxmltree::Document::parse(&desc).map_err(|e| format!("ImageDescription is not XML: {e}"))?;
        let ns = doc.root_element().lookup_namespace_uri(None);
        if !ns.is_some_and(|ns| NAMESPACES.contains(&ns)) {
            return Err("XML default namespace is not Leica SCN's".into());
        }
        Ok(())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let (src, at) = (probe.src, probe.at);
        let tf = probe.tiff.map_err(|e| Error::format(at, e.to_string()))?;
        let desc = xml::description(tf, src, at, 0)?.ok_or_else(|| Error::format(at, "IFD 0 has no ImageDescription"))?;
        let doc = xml::parse(&desc.text, at, "ImageDescription")?;
        let c = parse_collection(doc.root_element(), at)?;
        build(tf, src, at, &c)
    }
}

/// One `image` of the collection.
struct Image {
    creation_date: Option<String>,
    device_model: Option<String>,
    device_version: Option<String>,
    illumination: Option<String>,
    objective: Option<String>,
    aperture: Option<String>,
    is_macro: bool,
    nm_offset: (i64, i64),
    /// (IFD, width, nm per pixel), widest first.
    dims: Vec<(usize, u64, f64)>,
}

impl Image {
    fn brightfield(&self) -> bool {
        self.illumination.as_deref() == Some("brightfield")
    }
}

struct Collection {
    barcode: Option<String>,
    nm_size: (i64, i64),
    images: Vec<Image>,
}

/// An integer attribute as `_openslide_xml_parse_int_attr`: required, the whole value.
fn int_attr(n: Node<'_, '_>, name: &str, at: &Location) -> Result<i64> {
    let v = n.attribute(name).ok_or_else(|| Error::format(at, format!("<{}> has no {name} attribute", n.tag_name().name())))?;
    v.parse().map_err(|_| Error::format(at, format!("<{}> attribute {name}={v:?} is not an integer", n.tag_name().name())))
}

fn text_at(n: Node<'_, '_>, path: &[&str]) -> Option<String> {
    let mut cur = n;
    for p in path {
        cur = child(cur, p)?;
    }
    first_text(cur).and_then(|t| t.text()).map(str::to_string)
}

fn parse_collection(root: Node<'_, '_>, at: &Location) -> Result<Collection> {
    let coll = (root.tag_name().name() == "scn").then(|| child(root, "collection")).flatten();
    let coll = coll.ok_or_else(|| Error::format(at, "XML has no scn/collection element"))?;
    let barcode = match text_at(coll, &["barcode"]) {
        Some(b) => base64_text::decode(b.as_bytes()).ok().map(|v| String::from_utf8_lossy(&v).into_owned()),
        None => coll.attribute("barcode").map(str::to_string),
    };
    let nm_size = (int_attr(coll, "sizeX", at)?, int_attr(coll, "sizeY", at)?);
    let mut images = Vec::new();
    for img in children(coll, "image") {
        let view = child(img, "view").ok_or_else(|| Error::format(at, "an <image> has no <view>"))?;
        let nm_across = int_attr(view, "sizeX", at)?;
        let nm_down = int_attr(view, "sizeY", at)?;
        let nm_offset = (int_attr(view, "offsetX", at)?, int_attr(view, "offsetY", at)?);
        let mut dims = Vec::new();
        for d in children(img, "pixels").flat_map(|p| children(p, "dimension")) {
            if d.attribute("z").is_some_and(|z| z != "0") {
                continue;
            }
            let ifd = int_attr(d, "ifd", at)?;
            let w = int_attr(d, "sizeX", at)?;
            let _h = int_attr(d, "sizeY", at)?;
            if ifd < 0 || w <= 0 {
                return Err(Error::format(at, format!("<dimension> with ifd {ifd} and sizeX {w}")));
            }
            dims.push((ifd as usize, w as u64, nm_across as f64 / w as f64));
        }
        dims.sort_by_key(|d| std::cmp::Reverse(d.1)); // stable: equal widths keep document order
        let scan = |p: &[&str]| text_at(img, p);
        let device = child(img, "device");
        images.push(Image {
            creation_date: scan(&["creationDate"]),
            device_model: device.and_then(|d| d.attribute("model")).map(str::to_string),
            device_version: device.and_then(|d| d.attribute("version")).map(str::to_string),
            illumination: scan(&["scanSettings", "illuminationSettings", "illuminationSource"]),
            objective: scan(&["scanSettings", "objectiveSettings", "objective"]),
            aperture: scan(&["scanSettings", "illuminationSettings", "numericalAperture"]),
            is_macro: nm_offset == (0, 0) && (nm_across, nm_down) == nm_size,
            nm_offset,
            dims,
        });
    }
    Ok(Collection { barcode, nm_size, images })
}

/// One main image's IFD within a level, at `offset` level pixels.
struct Area {
    ifd: usize,
    image: ImageIndex,
    offset: (i64, i64),
}

fn ifd_image(tf: &TiffFile, src: &dyn ByteSource, at: &Location, ifd: usize, what: ImageRef) -> Result<ImageIndex> {
    if ifd >= tf.ifds.len() {
        return Err(Error::format(at, format!("the XML names IFD {ifd}; the file has {}", tf.ifds.len())));
    }
    image_from_ifd(tf, src, at, ifd, what)
}

fn build(tf: &TiffFile, src: &dyn ByteSource, at: &Location, c: &Collection) -> Result<SlideLayout> {
    let mains: Vec<&Image> = c.images.iter().filter(|i| !i.is_macro && i.brightfield()).collect();
    let first = *mains.first().ok_or_else(|| Error::format(at, "no brightfield main image in the XML"))?;
    if first.dims.is_empty() {
        return Err(Error::format(at, "the main image has no dimension in z-plane 0"));
    }
    let legacy_hash = c.images.iter().filter(|i| !i.is_macro).all(Image::brightfield) && mains.len() == 1 && c.images.iter().filter(|i| i.is_macro).count() <= 1;
    let mut nm_per_px: Vec<f64> = first.dims.iter().map(|d| d.2).collect();
    let mut areas: Vec<Vec<(usize, (i64, i64))>> = vec![Vec::new(); first.dims.len()];
    for m in &mains {
        if m.illumination != first.illumination || m.objective != first.objective || m.dims.len() != first.dims.len() {
            return Err(Error::unsupported(at, "main images that differ in illumination, objective or dimension count"));
        }
        for (k, d) in m.dims.iter().enumerate() {
            let f = first.dims[k].2;
            if 1.0 - (d.2 - f).abs() / f < 0.98 {
                return Err(Error::format(at, "inconsistent main image resolutions"));
            }
            nm_per_px[k] = nm_per_px[k].min(d.2);
            areas[k].push((d.0, m.nm_offset));
        }
    }
    let mut levels = Vec::with_capacity(areas.len());
    let mut regions = Vec::new();
    for (k, level_areas) in areas.iter().enumerate() {
        let npp = nm_per_px[k];
        let size = |nm: i64| (nm as f64 / npp).ceil();
        let (w, h) = (size(c.nm_size.0), size(c.nm_size.1));
        if !(w >= 1.0 && h >= 1.0 && w <= super::MAX_IMAGE_EDGE as f64 && h <= super::MAX_IMAGE_EDGE as f64) {
            return Err(Error::format(at, format!("level {k}: size {w}x{h} from the collection size and {npp} nm per pixel")));
        }
        let mut list = Vec::new();
        for &(ifd, (ox, oy)) in level_areas {
            let image = ifd_image(tf, src, at, ifd, ImageRef::Level(k))?;
            list.push(Area { ifd, image, offset: ((ox as f64 / npp) as i64, (oy as f64 / npp) as i64) });
        }
        if k == 0 {
            for a in &list {
                regions.push(Bounds { x: a.offset.0, y: a.offset.1, width: a.image.width, height: a.image.height });
            }
        }
        levels.push(LayoutLevel { image: level_image(&list, w as u64, h as u64, &at.clone().with_image(ImageRef::Level(k)))?, origin: format!("IFD {}", list[0].ifd) });
    }
    let mut quickhash_ifd = legacy_hash.then(|| first.dims.last().map(|d| d.0)).flatten();
    let mut associated = BTreeMap::new();
    for m in c.images.iter().filter(|i| i.is_macro && i.brightfield()) {
        if associated.contains_key("macro") {
            return Err(Error::format(at, "more than one brightfield macro image"));
        }
        let Some(largest) = m.dims.first() else { continue };
        associated.insert("macro".to_string(), ifd_image(tf, src, at, largest.0, ImageRef::Associated("macro".into()))?);
        if !legacy_hash {
            quickhash_ifd = m.dims.last().map(|d| d.0);
        }
    }
    let quickhash_ifd = quickhash_ifd.ok_or_else(|| Error::format(at, "no IFD for the quickhash (no macro image)"))?;
    let hashed = ifd_image(tf, src, at, quickhash_ifd, ImageRef::Level(levels.len() - 1))?;
    let property_ifd = areas[0][0].0;

    let mut properties = BTreeMap::new();
    tiff_properties(tf, src, at, property_ifd, &mut properties)?;
    properties.remove("tiff.ImageDescription");
    let mut set = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            properties.insert(format!("leica.{k}"), v.clone());
        }
    };
    set("barcode", &c.barcode);
    set("aperture", &first.aperture);
    set("creation-date", &first.creation_date);
    set("device-model", &first.device_model);
    set("device-version", &first.device_version);
    set("illumination-source", &first.illumination);
    set("objective", &first.objective);
    let objective_power = first.objective.as_deref().and_then(|o| o.parse::<i64>().ok()).map(|o| o as f64);
    let r = tf.reader(src, at, property_ifd);
    let mpp = if r.uint(tags::RESOLUTION_UNIT)? == Some(3) {
        match (r.float(tags::X_RESOLUTION)?, r.float(tags::Y_RESOLUTION)?) {
            (Some(x), Some(y)) if x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0 => Some((10000.0 / x, 10000.0 / y)),
            _ => None,
        }
    } else {
        None
    };
    let bounds = union(&regions);
    Ok(SlideLayout {
        levels,
        associated,
        properties,
        mpp,
        objective_power,
        barcode: c.barcode.clone(),
        bounds,
        regions,
        quickhash: Some(quickhash_input(tf, src, at, property_ifd)?),
        quickhash_chunks: Some(hashed.grid.chunks().collect()),
        ..SlideLayout::default()
    })
}

fn union(r: &[Bounds]) -> Option<Bounds> {
    let x0 = r.iter().map(|b| b.x).min()?;
    let y0 = r.iter().map(|b| b.y).min()?;
    let x1 = r.iter().map(|b| b.x.saturating_add(b.width as i64)).max()?;
    let y1 = r.iter().map(|b| b.y.saturating_add(b.height as i64)).max()?;
    Some(Bounds { x: x0, y: y0, width: (x1 - x0) as u64, height: (y1 - y0) as u64 })
}

/// A `w` × `h` level holding `areas` (painted in order, later on top): a sparse grid when
/// every area lies on whole tiles of the level, else positioned tiles (see the module docs).
fn level_image(areas: &[Area], w: u64, h: u64, at: &Location) -> Result<ImageIndex> {
    let a0 = &areas[0].image;
    let (tw, th) = (a0.tile_width as u64, a0.tile_height as u64);
    if areas.iter().any(|a| a.image.codec != a0.codec) {
        return Err(Error::unsupported(at, "main images coded differently in one level"));
    }
    let on_tiles = areas.iter().all(|a| {
        let (ox, oy) = a.offset;
        let fits = |o: i64, len: u64, t: u64, edge: u64| o >= 0 && o as u64 % t == 0 && (len % t == 0 || o as u64 + len >= edge);
        a.image.tile_width as u64 == tw && a.image.tile_height as u64 == th && fits(ox, a.image.width, tw, w) && fits(oy, a.image.height, th, h)
    });
    let (cols, rows) = (w.div_ceil(tw), h.div_ceil(th));
    let grid = if on_tiles {
        let mut cells: BTreeMap<(u64, u64), Vec<TileLoc>> = BTreeMap::new();
        for a in areas {
            let (c0, r0) = (a.offset.0 as u64 / tw, a.offset.1 as u64 / th);
            for r in 0..a.image.tiles_down() {
                for c in 0..a.image.tiles_across() {
                    if c0 + c < cols && r0 + r < rows && a.image.tile(c, r).is_some() {
                        cells.insert((c0 + c, r0 + r), a.image.tile_locs(c, r).collect());
                    }
                }
            }
        }
        Grid::sparse(cols, rows, a0.planes(), cells)
    } else if let [a] = areas {
        // One main image off the level's tile grid: its stored tiles placed at its offset.
        let mut tiles = Vec::new();
        for t in a.image.tiles_in_rect(&crate::geometry::Rect { x: 0, y: 0, w: a.image.width, h: a.image.height }) {
            let (vw, vh) = a.image.valid_tile_size(t.col, t.row);
            let (x, y) = (a.offset.0 + t.x, a.offset.1 + t.y);
            tiles.push(PositionedTile { x, y, width: vw, height: vh, col: t.col, row: t.row, src_x: 0, src_y: 0 });
        }
        let size = (a.image.width, a.image.height);
        Grid::positioned(a.image.grid.clone(), size, (a.image.tile_width, a.image.tile_height), &tiles)
    } else {
        return Err(Error::unsupported(at, "several main images off the level's tile grid (placing tiles of several IFDs in one level)"));
    };
    let grid = grid.ok_or_else(|| Error::format(at, "cannot place the main images' tiles"))?;
    Ok(ImageIndex { width: w, height: h, tile_width: tw as u32, tile_height: th as u32, tiled: false, codec: a0.codec.clone(), grid })
}
