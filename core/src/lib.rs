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
//! * `cli` (default): the `slidestream` command-line tool and the crates only it uses (`clap`,
//!   `indicatif`, `image`, `serde_json`). Libraries depending on slidestream can turn it off
//!   with `default-features = false`.
//! * `unstable`: makes the internal modules public (`tiff`, `format`, `index`, `io`, `codec`,
//!   `cache`, `read`, `geometry`, `slide`) and `fuzzing` (the fuzz targets' inputs) for the
//!   fuzz targets, benches and tests that exercise internals. Nothing under them is covered by semver; without the feature they are
//!   crate-private.
//!
//! ## Public API
//! [`Slide`] (open, metadata, region and batch reads; device reads in [`gpu`]) with
//! [`SlideOptions`]; results ([`Rgba`], [`SlideIndex`] and its levels); errors ([`Error`],
//! [`GpuError`], [`CodecError`], [`Location`]); statistics ([`CacheStats`], [`IoCounters`],
//! [`gpu::GpuStats`]); the shared tile cache ([`TileCache`] of [`DecodedTile`]s by [`TileKey`]);
//! byte sources ([`ByteSource`], [`MemSource`]); Deep Zoom tiles ([`deepzoom::DeepZoom`]); the format-driver trait
//! ([`FormatDriver`]); settings ([`config`]).
//!
//! ## Layout
//! `tiff` reads TIFF structure; `format` holds one driver per vendor; `index` is the immutable
//! tile index; `io` has byte sources and the read planner; `codec` decodes tiles; `cache` is the
//! tile cache (and the registry of caches purged when a slide closes); `read` is the read layer
//! shared by the CPU and GPU paths (batch plan, tile location, partial-decode rule, CPU fetch
//! and assembly); `slide` is the public handle. See `docs/architecture.md`.

#![warn(missing_docs)]

/// Declares internal modules: `pub` with the `unstable` feature (fuzz targets, benches,
/// integration tests), crate-private otherwise. Their `pub` items are the unstable surface, used
/// by those consumers (and some only by the `cuda` engine), so they are not dead code in a build
/// without them; dead private code is still reported by `unstable` builds (`cargo test`).
macro_rules! internal_modules {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "unstable")]
        pub mod $name;
        #[cfg(not(feature = "unstable"))]
        #[allow(dead_code)]
        pub(crate) mod $name;
    )*};
}

pub mod config;
pub mod deepzoom;
pub mod error;
#[cfg(feature = "unstable")]
pub mod fuzzing;
pub mod gpu;
pub mod interrupt;
pub mod limits;
pub mod threads;

internal_modules!(cache, codec, format, geometry, index, io, read, slide, tiff);

pub use cache::{CacheStats, TileCache, TileKey};
pub use codec::{DecodedTile, Samples};
pub use config::Config;
pub use error::{CodecError, Error, GpuError, ImageRef, Location, Result};
pub use format::{DetectionReport, FormatDriver};
pub use gpu::{read_patches_device, resize_patches_device};
pub use index::{
    Alpha, BlobRef, ChannelPlanes, CodecInfo, Compression, FileIdentity, Grid, ImageIndex, Level, Photometric, Piece, PositionedGrid, PositionedTile,
    RegularGrid, SampleBits, SlideIndex, SourceFile, SourceId, SparseGrid, TileLoc, TileRef, TileStream,
};
pub use io::metrics::IoCounters;
pub use io::{ByteSource, MemSource};
pub use limits::{Limits, LIMITS};
pub use slide::{
    alloc_pixels, read_patches, read_patches_into, resize_rgb_box, resize_rgb_patches, ChannelRegion, PatchRequest, ReadOptions, Rgb, Rgba, Slide, SlideOptions,
};
