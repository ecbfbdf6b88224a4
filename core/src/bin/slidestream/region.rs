//! `region` and `associated`: one read written as an image (PNG or JPEG, from the output's
//! extension; `-` = PNG on stdout).

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
