//! The read layer: what every back end (the CPU path today, the GPU engine next) shares to
//! turn patch requests into pixels.
//!
//! ```text
//! locations × size ──▶ batch_plan::BatchPlan (unique tiles keyed by TileKey, the part of each
//!                      tile the batch needs, each patch's tile grid)                 pure
//!   ──▶ locate (level, output size, tile byte range: one error kind per failure)     pure
//!   ──▶ partial (decode only the needed part? the CPU decode cost of a part)         pure
//!   ──▶ waves (CPU: the tiles in file order, in waves within the working-set budget; each
//!       wave held against the process-wide budget of inflight)
//!   ──▶ fetch (CPU, per wave: cache → io::plan read plan → ReadPlan::read_into → parallel decode → cache)
//!   ──▶ assemble (CPU, per wave: place into RGBA or RGB-over-background; the GPU kernels' reference)
//! ```
//!
//! The [`crate::Slide`] read methods are thin wrappers over these functions; the GPU engine
//! uses [`batch_plan`], [`locate`], [`partial`], [`sources`] (one grouping of a call's work by
//! (slide, level)) and [`crate::io::plan::ReadPlan::read_into`] with its own byte sources,
//! nvJPEG decoders and device assembly, and decodes what nvJPEG does not take with the CPU
//! path's own tile decoding (`fetch::decode_tiles`: host cache, partial-decode rule, memory of
//! tile outcomes, NDPI stacks).

pub mod assemble;
pub mod batch_plan;
pub(crate) mod fetch;
pub(crate) mod inflight;
pub mod locate;
pub mod partial;
pub(crate) mod sources;
pub(crate) mod waves;

// The layer's interface in one place; a crate-private build without `cuda` uses only part of it
// (the rest serves the GPU engine and `unstable` consumers).
#[allow(unused_imports)]
pub use crate::io::plan::{in_pool, pool_threads};
#[allow(unused_imports)]
pub use batch_plan::{BatchPlan, LevelGeom, PatchGrid, PlacedPiece, TileKey, TileNeed, TilePart};
#[allow(unused_imports)]
pub use locate::{batch_bytes, locate_tile, region_bytes, MAX_TILE_BYTES};
#[allow(unused_imports)]
pub use partial::{cost_rank, decode_cost, partial_part};

/// A test image: `width × height` pixels of `tile_w × tile_h` tiles, uncompressed RGB with
/// `planes` sample planes (1 chunky, 3 planar-separate), chunks in TIFF order.
#[cfg(test)]
pub(crate) fn test_image(width: u64, height: u64, tile_w: u32, tile_h: u32, planes: usize, chunks: Vec<crate::index::TileLoc>) -> crate::index::ImageIndex {
    use crate::index::{CodecInfo, Grid, ImageIndex};
    let codec = CodecInfo { planar_separate: planes > 1, ..CodecInfo::uncompressed_rgb() };
    let (cols, rows) = (width.div_ceil(tile_w as u64), height.div_ceil(tile_h as u64));
    let grid = Grid::regular(cols, rows, planes, chunks).expect("chunk count matches the grid");
    ImageIndex { width, height, tile_width: tile_w, tile_height: tile_h, tiled: true, codec: std::sync::Arc::new(codec), grid }
}
