//! # slidestream
//!
//! A whole-slide image (WSI) loader for digital pathology: a tile index built once per slide,
//! a batch planner that coalesces tile reads, parallel decoding, a byte-bounded tile cache and
//! region assembly with OpenSlide's semantics.
//!
//! ## Quick start
//! ```no_run
//! let slide = slidestream::Slide::open("assets/CMU-1-Small-Region.svs")?;
//! println!("{} levels, level 0 is {:?}", slide.level_count(), slide.dimensions());
//! // 256x256 pixels of level 0 at level-0 location (1000, 1000): RGBA u8, (256, 256, 4).
//! let region = slide.read_region((1000, 1000), 0, (256, 256))?;
//! assert_eq!(region.data.len(), 256 * 256 * 4);
//! # Ok::<(), slidestream::Error>(())
//! ```
//!
//! ## Glossary
//! * **slide**: one scanned glass slide stored as a pyramid of images in one file.
//! * **level**: one image of the pyramid; level 0 is full resolution.
//! * **downsample**: how many level-0 pixels one level-k pixel spans (mean of the two axes).
//! * **tile**: the unit of storage and decoding (TIFF tile, or strip for untiled images).
//! * **region**: a rectangle read from one level; its **location** is in level-0 pixels and its
//!   **size** in pixels of the level read.
//! * **associated image**: a non-pyramid image in the file (thumbnail, label, macro).
//! * **mpp**: microns per pixel at level 0. **objective power**: the scanner's magnification.
//! * **properties**: key/value metadata with OpenSlide's names (`openslide.*`, `tiff.*`,
//!   `aperio.*`).
//!
//! ## Feature flags
//! * `cuda`: the GPU path (cuFile reads, nvJPEG decode, device cache). CUDA libraries are loaded
//!   at run time, so a `cuda` build still runs on machines without a GPU.
//!
//! ## Layout
//! [`tiff`] reads TIFF structure; [`format`] holds one driver per vendor; [`index`] is the
//! immutable tile index; [`io`] has byte sources and the read planner; [`codec`] decodes tiles;
//! [`cache`] is the tile cache (and the registry of caches purged when a slide closes); [`read`]
//! is the read layer shared by the CPU and GPU paths (batch plan, tile location, partial-decode
//! rule, CPU fetch and assembly); [`slide`] is the public handle.

#![warn(missing_docs)]

pub mod cache;
pub mod codec;
pub mod config;
pub mod error;
pub mod format;
pub mod geometry;
pub mod gpu;
pub mod index;
pub mod io;
pub mod read;
pub mod slide;
pub mod tiff;

pub use cache::{CacheStats, TileCache};
pub use config::Config;
pub use error::{Error, Result};
pub use index::SlideIndex;
pub use slide::{alloc_pixels, Rgba, Slide, SlideOptions};
