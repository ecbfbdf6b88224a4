//! `Slidedat.ini`'s values as OpenSlide 4.0.1's `mirax_open` reads and checks them (rules in
//! the parent module's docs): general and hierarchical keys, data files, level sections, and
//! the record numbers of the non-hierarchical layers (`get_nonhier_*_offset`).

use super::ini::KeyFile;
use super::MAX_TILE_EDGE;

const GENERAL: &str = "GENERAL";
const HIER: &str = "HIERARCHICAL";
const DATAFILE: &str = "DATAFILE";

/// Stored image coding of a level (`IMAGE_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ImageFormat {
    /// `JPEG`.
    Jpeg,
    /// `PNG`.
    Png,
    /// `BMP24`.
    Bmp,
}

/// One zoom level's section.
pub(super) struct LevelSection {
    pub(super) section: String,
    pub(super) concat_exp: u32,
    pub(super) overlap: (f64, f64),
    pub(super) mpp: (f64, f64),
    pub(super) fill_bgr: i32,
    pub(super) image: (u32, u32),
    pub(super) format: ImageFormat,
}

/// What `Slidedat.ini` says, checked as `mirax_open` checks it.
pub(super) struct Settings {
    pub(super) slide_id: String,
    pub(super) images: (i32, i32),
    pub(super) divisions: i32,
    pub(super) objective: Option<i32>,
    pub(super) index_file: String,
    pub(super) datafiles: Vec<String>,
    pub(super) levels: Vec<LevelSection>,
    /// The position record number and whether it is zlib-compressed.
    pub(super) position_record: Option<(usize, bool)>,
    /// (associated image name, nonhier record number).
    pub(super) associated: Vec<(&'static str, usize)>,
}

/// A `Slidedat.ini` that OpenSlide refuses: `unsupported` for a feature outside the format
/// as read (an unknown image format), else a damaged or inconsistent file.
pub(super) struct IniError {
    /// `true` for `Unsupported`, else `Format`.
    pub(super) unsupported: bool,
    /// What is wrong, naming the key.
    pub(super) msg: String,
}

impl From<String> for IniError {
    fn from(msg: String) -> Self {
        IniError { unsupported: false, msg }
    }
}

impl From<&str> for IniError {
    fn from(msg: &str) -> Self {
        msg.to_string().into()
    }
}

fn unsupported(msg: String) -> IniError {
    IniError { unsupported: true, msg }
}

fn positive(v: i32, what: &str) -> std::result::Result<i32, String> {
    if v <= 0 {
        return Err(format!("{what} <= 0: {v}"));
    }
    Ok(v)
}

impl Settings {
    pub(super) fn read(kf: &KeyFile) -> std::result::Result<Settings, IniError> {
        let slide_id = kf.string(GENERAL, "SLIDE_ID")?.to_string();
        let images = (positive(kf.int(GENERAL, "IMAGENUMBER_X")?, "IMAGENUMBER_X")?, positive(kf.int(GENERAL, "IMAGENUMBER_Y")?, "IMAGENUMBER_Y")?);
        let objective = kf.int(GENERAL, "OBJECTIVE_MAGNIFICATION").ok().filter(|&m| m > 0);
        let divisions = positive(kf.int(GENERAL, "CameraImageDivisionsPerSide").unwrap_or(1), "CameraImageDivisionsPerSide")?;
        if !kf.has_group(HIER) {
            return Err(format!("Can't find {HIER} group").into());
        }
        let hier_count = positive(kf.int(HIER, "HIER_COUNT")?, "HIER_COUNT")?;
        let nonhier_count = kf.int(HIER, "NONHIER_COUNT")?;
        if nonhier_count < 0 {
            return Err(format!("NONHIER_COUNT < 0: {nonhier_count}").into());
        }
        let mut zoom = None;
        for i in 0..hier_count {
            if kf.string(HIER, &format!("HIER_{i}_NAME"))? == "Slide zoom level" {
                zoom = Some(i);
                break;
            }
        }
        match zoom {
            None => return Err("Can't find slide zoom level".into()),
            Some(0) => {}
            Some(_) => return Err("Slide zoom level not HIER_0".into()),
        }
        let index_file = kf.string(HIER, "INDEXFILE")?.to_string();
        let zoom_levels = positive(kf.int(HIER, "HIER_0_COUNT")?, "zoom levels (HIER_0_COUNT)")?;
        let sections = (0..zoom_levels).map(|i| kf.string(HIER, &format!("HIER_0_VAL_{i}_SECTION")).map(str::to_string)).collect::<std::result::Result<Vec<_>, _>>()?;
        if !kf.has_group(DATAFILE) {
            return Err(format!("Can't find {DATAFILE} group").into());
        }
        let file_count = positive(kf.int(DATAFILE, "FILE_COUNT")?, "FILE_COUNT")?;
        let datafiles = (0..file_count).map(|i| kf.string(DATAFILE, &format!("FILE_{i}")).map(str::to_string)).collect::<std::result::Result<Vec<_>, _>>()?;
        let mut levels = Vec::new();
        let mut total_exp = 0i64;
        for (i, g) in sections.iter().enumerate() {
            if !kf.has_group(g) {
                return Err(format!("Can't find {g} group").into());
            }
            let exp = kf.int(g, "IMAGE_CONCAT_FACTOR")?;
            if (i == 0 && exp < 0) || (i > 0 && exp <= 0) {
                return Err(format!("[{g}] IMAGE_CONCAT_FACTOR {exp} (level 0: at least 0, others: above 0)").into());
            }
            total_exp += exp as i64;
            if total_exp > 30 {
                return Err(format!("image_concat exponent too large: {total_exp}").into());
            }
            let overlap = (kf.double(g, "OVERLAP_X")?, kf.double(g, "OVERLAP_Y")?);
            let mpp = (kf.double(g, "MICROMETER_PER_PIXEL_X")?, kf.double(g, "MICROMETER_PER_PIXEL_Y")?);
            let fill_bgr = kf.int(g, "IMAGE_FILL_COLOR_BGR")?;
            let w = positive(kf.int(g, "DIGITIZER_WIDTH")?, "DIGITIZER_WIDTH")?;
            let h = positive(kf.int(g, "DIGITIZER_HEIGHT")?, "DIGITIZER_HEIGHT")?;
            if w as u64 > MAX_TILE_EDGE || h as u64 > MAX_TILE_EDGE {
                return Err(format!("[{g}] images of {w}x{h} pixels (at most {MAX_TILE_EDGE} per edge)").into());
            }
            let format = image_format(kf.string(g, "IMAGE_FORMAT")?).map_err(unsupported)?;
            levels.push(LevelSection { section: g.clone(), concat_exp: exp as u32, overlap, mpp, fill_bgr, image: (w as u32, h as u32), format });
        }
        let nh = NonHier { kf, count: nonhier_count };
        let position_record = match nh.name_offset("VIMSLIDE_POSITION_BUFFER")? {
            Some(r) => Some((r, false)),
            None => nh.name_offset("StitchingIntensityLayer")?.map(|r| (r, true)),
        };
        let mut associated = Vec::new();
        for (name, value, key) in [
            ("macro", "ScanDataLayer_SlideThumbnail", "THUMBNAIL_IMAGE_TYPE"),
            ("label", "ScanDataLayer_SlideBarcode", "BARCODE_IMAGE_TYPE"),
            ("thumbnail", "ScanDataLayer_SlidePreview", "PREVIEW_IMAGE_TYPE"),
        ] {
            if let Some((rec, section)) = nh.val_offset("Scan data layer", value)? {
                let f = kf.string(&section, key)?;
                if image_format(f).ok() != Some(ImageFormat::Jpeg) {
                    return Err(unsupported(format!("Unsupported associated image format: {f} (only JPEG, as OpenSlide)")));
                }
                associated.push((name, rec));
            }
        }
        Ok(Settings { slide_id, images, divisions, objective, index_file, datafiles, levels, position_record, associated })
    }
}

pub(super) fn image_format(v: &str) -> std::result::Result<ImageFormat, String> {
    match v {
        "JPEG" => Ok(ImageFormat::Jpeg),
        "PNG" => Ok(ImageFormat::Png),
        "BMP24" => Ok(ImageFormat::Bmp),
        _ => Err(format!("Unrecognized image format: {v}")),
    }
}

/// Record numbers of the non-hierarchical layers (`get_nonhier_*_offset`).
struct NonHier<'a> {
    kf: &'a KeyFile,
    count: i32,
}

impl NonHier<'_> {
    /// (first record number, name index, value count) of the layer `name`.
    fn find(&self, name: &str) -> std::result::Result<Option<(usize, i32, i32)>, String> {
        let mut offset = 0usize;
        for i in 0..self.count {
            let v = self.kf.string(HIER, &format!("NONHIER_{i}_NAME"))?;
            let n = self.kf.int(HIER, &format!("NONHIER_{i}_COUNT"))?;
            if n == 0 {
                return Err("Nonhier val count is zero".into());
            }
            if v == name {
                return Ok(Some((offset, i, n)));
            }
            offset = offset.saturating_add_signed(n as isize);
        }
        Ok(None)
    }

    fn name_offset(&self, name: &str) -> std::result::Result<Option<usize>, String> {
        Ok(self.find(name)?.map(|(o, _, _)| o))
    }

    /// Record number and section of (`name`, `value`).
    fn val_offset(&self, name: &str, value: &str) -> std::result::Result<Option<(usize, String)>, String> {
        let Some((offset, i, n)) = self.find(name)? else { return Ok(None) };
        for j in 0..n {
            if self.kf.string(HIER, &format!("NONHIER_{i}_VAL_{j}"))? == value {
                let section = self.kf.string(HIER, &format!("NONHIER_{i}_VAL_{j}_SECTION"))?;
                return Ok(Some((offset + j as usize, section.to_string())));
            }
        }
        Ok(None)
    }
}
