//! Decoders: nvJPEG batches on the lanes ([`nvjpeg`]; the lanes' chunks are read and framed
//! by the engine layer's `chunk.rs`) and libjpeg-turbo on CPU workers and as the fallback ([`cpu_worker`]); and the
//! SM decoder ([`sm`]), which takes a call's JPEG tiles first when `SLIDESTREAM_GPU_SM_DECODER`
//! turns it on.
//!
//! Every decoder that turns a batch of tiles into device tiles implements [`TileDecoder`]: a
//! per-tile check (decode it, or why not) and a batch decode into device memory on the
//! decoder's stream. Which decoder gets a tile is decided outside them, by the routing rules of
//! `scheduler.rs` applied by the lanes and the batch driver.

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
use super::queue::{Miss, Src};
use crate::error::Error;
use nvjpeg::Decoders;

/// Tiles of a chunk whose convert kernels are enqueued on a slot's stream (complete once the
/// stream is synchronised), and tiles already settled (errors, CPU hand-backs).
pub(crate) type ChunkOut = (Vec<(Miss, Arc<DevTile>)>, Vec<(Miss, GpuResult)>);

/// What the nvJPEG decode path (`nvjpeg.rs`, and the lanes' `chunk.rs`) needs from its engine, passed
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

/// Why a decoder does not decode a tile.
#[derive(Debug)]
pub(crate) enum Declined {
    /// Another decoder should take it, for this reason (noted in `gpu_stats()["cpu_reason"]`
    /// when the tile ends on the CPU).
    Elsewhere(String),
    /// The tile is bad: this error is its outcome, as the CPU path would report it.
    Failed(Error),
}

/// A tile's bytes as a decoder takes them, in host memory (or device memory where the decoder
/// says so): `len` bytes at `ptr`, alive until the decoder's stream is synchronised.
#[derive(Clone, Copy)]
pub(crate) struct Bits {
    pub(crate) ptr: *const u8,
    pub(crate) len: usize,
}

/// One interface for the engine's tile decoders (nvJPEG on a lane, the SM decoder, libjpeg-turbo
/// on a CPU worker): can it decode this tile, and decode this batch of tiles into device tiles on this
/// stream. Implementations never pick a route: a tile they decline goes where the caller's
/// routing rule sends it (`scheduler.rs`), usually the CPU fallback, whose outcome is the CPU
/// path's.
pub(crate) trait TileDecoder {
    /// What [`TileDecoder::accepts`] learnt about a tile that [`TileDecoder::decode`] uses
    /// (geometry, parsed tables).
    type Accepted;
    /// The stream and buffers a batch runs on.
    type Workspace;

    /// Whether this decoder decodes tile `m` of `src`, whose bytes (in host memory, framed as
    /// this decoder takes them: complete JPEG streams for the GPU decoders, the stored tile for
    /// the CPU) are `tile`: what it found, or why not.
    fn accepts(&self, src: &Src<'_>, m: &Miss, tile: &[u8]) -> std::result::Result<Self::Accepted, Declined>;

    /// Decode `tiles` (each with its bytes and what `accepts` found) into RGBA device tiles on
    /// the workspace's stream: the tiles enqueued (complete once that stream is synchronised)
    /// and the tiles settled (errors, and `Err(None)` for tiles handed to the CPU).
    ///
    /// # Errors
    /// A CUDA or library failure that leaves the workspace unusable for this batch.
    fn decode(&self, ws: &mut Self::Workspace, srcs: &[Src<'_>], tiles: Vec<(Miss, Bits, Self::Accepted)>) -> crate::gpu::cuda::sys::Res<ChunkOut>;
}
