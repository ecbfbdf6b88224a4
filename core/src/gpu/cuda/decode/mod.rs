//! Decoders: nvJPEG batches on the lanes ([`nvjpeg`], with the bitstreams prepared by
//! [`bitstream`]) and libjpeg-turbo on CPU workers and as the fallback ([`cpu_worker`]).

pub(crate) mod bitstream;
pub(crate) mod cpu_worker;
pub(crate) mod nvjpeg;
pub(crate) mod nvjpeg_alloc;
pub(crate) mod slot;
// The SM decoder's step-2 experiment is reached only through the `unstable` surface for now.
#[cfg(feature = "unstable")]
pub mod sm;
#[cfg(not(feature = "unstable"))]
#[allow(dead_code)]
pub(crate) mod sm;

use std::sync::Arc;

use super::context::Context;
use super::counters::Counters;
use super::io::compat::Io;
use super::kernels::Kernels;
use super::memory::{BlockHome, DevTile};
pub(crate) use super::queue::GpuResult;
use super::queue::Miss;
use nvjpeg::Decoders;

/// Tiles of a chunk whose convert kernels are enqueued on a slot's stream (complete once the
/// stream is synchronised), and tiles already settled (errors, CPU hand-backs).
pub(crate) type ChunkOut = (Vec<(Miss, Arc<DevTile>)>, Vec<(Miss, GpuResult)>);

/// What the nvJPEG decode path (`bitstream.rs`, `nvjpeg.rs`) needs from its engine, passed
/// down instead of the engine: the context, counters, kernels, nvJPEG's decoders, where tile
/// blocks live and the I/O layer (cuFile reads).
pub(crate) struct NvEnv<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) counters: &'a Counters,
    pub(crate) kernels: &'a Kernels,
    pub(crate) decoders: &'a Decoders,
    pub(crate) home: BlockHome<'a>,
    pub(crate) io: &'a Io,
}
