//! A thumbnail of the whole slide, as the Python `Slide.get_thumbnail` (and so openslide-python's
//! `get_thumbnail`) computes it: the level [`Slide::best_level_for_downsample`] picks, read whole
//! (a level of at most 64 MiB of RGBA) or reduced while read to at least twice the thumbnail
//! ([`Slide::read_level_reduced`]), then resized as Pillow's `resize(LANCZOS, reducing_gap=2)`.

use super::{Rgb, Slide};
use crate::deepzoom::{pil_resize, pil_thumbnail_size};
use crate::error::{Error, Result};

/// Levels larger than this many bytes of RGBA are reduced while read.
const WHOLE_LEVEL_BYTES: u64 = 64 << 20;

impl Slide {
    /// The slide fitted in `size` = (max width, max height) pixels, aspect ratio kept (each
    /// side rounded as Pillow's `Image.thumbnail` rounds), transparent pixels over
    /// `background`: RGB `u8` (height, width, 3). A level that already fits is returned as it is.
    /// Memory is bounded whatever the level's size.
    ///
    /// # Errors
    /// [`Error::Usage`] when a side of `size` is 0; the slide's read errors.
    pub fn thumbnail_rgb(&self, size: (u64, u64), background: [u8; 3]) -> Result<Rgb> {
        if size.0 == 0 || size.1 == 0 {
            return Err(Error::Usage(format!("thumbnail size must be positive, got {size:?}")));
        }
        let (w0, h0) = self.dimensions();
        let downsample = (w0 as f64 / size.0 as f64).max(h0 as f64 / size.1 as f64);
        let level = self.best_level_for_downsample(downsample);
        let (lw, lh) = self.level_dimensions()[level];
        let fin = pil_thumbnail_size((lw, lh), size).unwrap_or((lw, lh));
        let region = if lw.saturating_mul(lh).saturating_mul(4) > WHOLE_LEVEL_BYTES {
            let factor = (lw / (2 * fin.0.max(1))).min(lh / (2 * fin.1.max(1))).max(1);
            self.read_level_reduced(level, u32::try_from(factor).unwrap_or(u32::MAX), background)?.0
        } else {
            let data = self.read_regions_rgb(&[(0, 0)], level, (lw, lh), background)?;
            Rgb { width: lw, height: lh, data }
        };
        if (region.width, region.height) == fin {
            return Ok(region);
        }
        let (rw, rh, fw, fh) = (u32::try_from(region.width), u32::try_from(region.height), u32::try_from(fin.0), u32::try_from(fin.1));
        match (rw, rh, fw, fh) {
            (Ok(rw), Ok(rh), Ok(fw), Ok(fh)) => pil_resize((rw, rh), region.data, (fw, fh)),
            _ => Err(Error::Usage(format!("thumbnail: level {level} is too large to resize"))),
        }
    }
}
