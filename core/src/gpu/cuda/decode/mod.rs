//! Decoders: nvJPEG batches on the lanes ([`nvjpeg`], with the bitstreams prepared by
//! [`bitstream`]) and libjpeg-turbo on CPU workers and as the fallback ([`cpu_worker`]).

pub(crate) mod bitstream;
pub(crate) mod cpu_worker;
pub(crate) mod nvjpeg;
pub(crate) mod nvjpeg_alloc;
// The SM decoder's step-2 experiment is reached only through the `unstable` surface for now.
#[cfg(feature = "unstable")]
pub mod sm;
#[cfg(not(feature = "unstable"))]
#[allow(dead_code)]
pub(crate) mod sm;

use std::sync::Arc;

use super::memory::DevTile;
pub(crate) use super::queue::GpuResult;
use super::queue::Miss;

/// Tiles of a chunk whose convert kernels are enqueued on a slot's stream (complete once the
/// stream is synchronised), and tiles already settled (errors, CPU hand-backs).
pub(crate) type ChunkOut = (Vec<(Miss, Arc<DevTile>)>, Vec<(Miss, GpuResult)>);
