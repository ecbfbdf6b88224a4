//! Decoders: nvJPEG batches on the lanes ([`nvjpeg`], with the bitstreams prepared by
//! [`bitstream`]) and libjpeg-turbo on CPU workers and as the fallback ([`cpu_worker`]).

pub(crate) mod bitstream;
pub(crate) mod cpu_worker;
pub(crate) mod nvjpeg;
pub(crate) mod nvjpeg_alloc;

use std::sync::Arc;

use super::memory::DevTile;
use super::queue::Miss;
use crate::error::Error;

/// Result of one tile on the GPU: the tile, `Err(None)` = hand it to the CPU decoder,
/// `Err(Some(e))` = it failed.
pub(crate) type GpuResult = std::result::Result<Arc<DevTile>, Option<Error>>;

/// Tiles of a chunk whose convert kernels are enqueued on a slot's stream (complete once the
/// stream is synchronised), and tiles already settled (errors, CPU hand-backs).
pub(crate) type ChunkOut = (Vec<(Miss, Arc<DevTile>)>, Vec<(Miss, GpuResult)>);
