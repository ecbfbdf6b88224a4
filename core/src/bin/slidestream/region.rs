//! `region`, `associated` and `thumbnail`: one read written as an image (PNG or JPEG, from
//! the output's extension; `-` = PNG on stdout).

use std::path::Path;

use slidestream::{Error, Slide};

use crate::output::{write_image, ImageFormat};

/// `region`: `size` pixels of `level` at level-0 `location`, as an image at `output`.
pub(crate) fn region(path: &Path, location: (i64, i64), level: usize, size: (u64, u64), output: &Path) -> Result<(), Error> {
    ImageFormat::of(output)?;
    let slide = Slide::open(path)?;
    let r = slide.read_region(location, level, size)?;
    write_image(output, r.width, r.height, &r.data)
}

/// `associated`: the associated image `name` (thumbnail, label, macro) as an image at
/// `output`.
pub(crate) fn associated(path: &Path, name: &str, output: &Path) -> Result<(), Error> {
    ImageFormat::of(output)?;
    let slide = Slide::open(path)?;
    let r = slide.read_associated(name)?;
    write_image(output, r.width, r.height, &r.data)
}

/// `thumbnail`: the whole slide fitting in `size` = (max width, max height) pixels, aspect
/// ratio kept, composited over white, as an image at `output`. As the Python
/// `Slide.get_thumbnail`: the level [`Slide::best_level_for_downsample`] picks, read reduced by
/// a power of two while it stays at least twice the thumbnail ([`Slide::read_level_reduced`]:
/// memory bounded whatever the level's size), then resized with a Lanczos-3 filter (the
/// `image` crate's; Pillow's Lanczos in Python, so pixels can differ by a few levels).
pub(crate) fn thumbnail(path: &Path, size: (u64, u64), output: &Path) -> Result<(), Error> {
    ImageFormat::of(output)?;
    let slide = Slide::open(path)?;
    let (w0, h0) = slide.dimensions();
    let downsample = (w0 as f64 / size.0 as f64).max(h0 as f64 / size.1 as f64);
    let tw = ((w0 as f64 / downsample).round() as u64).clamp(1, size.0);
    let th = ((h0 as f64 / downsample).round() as u64).clamp(1, size.1);
    let level = slide.best_level_for_downsample(downsample);
    let (lw, _) = slide.level_dimensions()[level];
    let max_factor = u32::try_from((lw / (2 * tw)).max(1)).unwrap_or(u32::MAX);
    let (rgb, _) = slide.read_level_reduced(level, max_factor, [255, 255, 255])?;
    let (rw, rh) = (u32::try_from(rgb.width), u32::try_from(rgb.height));
    let img = match (rw, rh) {
        (Ok(rw), Ok(rh)) => image::RgbImage::from_raw(rw, rh, rgb.data),
        _ => None,
    }
    .ok_or_else(|| Error::Usage(format!("{}: level {level} is too large to resize", path.display())))?;
    let small = if (img.width() as u64, img.height() as u64) == (tw, th) {
        img
    } else {
        image::imageops::resize(&img, tw as u32, th as u32, image::imageops::FilterType::Lanczos3)
    };
    let rgba: Vec<u8> = small.pixels().flat_map(|p| [p[0], p[1], p[2], 255]).collect();
    write_image(output, tw, th, &rgba)
}
