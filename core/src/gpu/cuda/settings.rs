//! Every setting the engine reads, in one place: taken from the crate's settings table
//! (`config/`, docs/settings.md) once, when an engine starts, and fixed for the process from
//! then on. A value that does not parse or is out of range fails the start with
//! [`Error::Config`](crate::Error::Config) naming the variable (never replaced by a default).

use std::ffi::{c_int, c_uint};

use super::sys::{CU_CTX_SCHED_BLOCKING_SYNC, CU_CTX_SCHED_SPIN, CU_CTX_SCHED_YIELD, NVJPEG_OUTPUT_UNCHANGED, NVJPEG_OUTPUT_YUV};
use crate::config::{CompatMode, GpuSmDecoder, GpuSplit, GpuStreamPriority, GpuSync, GpuWait, GpuWarmup, KernelCache, NvjpegOutput, GPU_ENGINE_SETTINGS};
use crate::error::Result;

/// The engine's settings as read (ranges are applied by the parts that use them).
#[derive(Debug, Clone)]
pub(crate) struct EngineSettings {
    /// `SLIDESTREAM_COMPAT_MODE`.
    pub compat_mode: CompatMode,
    /// `SLIDESTREAM_GPU_SYNC`: a `CU_CTX_SCHED_*` flag, `None` = leave the context's.
    pub sync: Option<c_uint>,
    /// `SLIDESTREAM_GPU_STREAM_PRIORITY`: true = the device's greatest stream priority.
    pub high_priority: bool,
    /// `SLIDESTREAM_GPU_WAIT`: true = blocking-sync events, false = `cuStreamSynchronize`.
    pub blocking_waits: bool,
    /// `SLIDESTREAM_THREAD_NICE` (applied by the engine's threads through `crate::threads`).
    pub thread_nice: u8,
    /// `SLIDESTREAM_DEVICE_CACHE_BYTES`.
    pub device_cache_bytes: usize,
    /// `SLIDESTREAM_GPU_WORKERS` (clamped to 1..=`MAX_LANES` by the lanes).
    pub gpu_workers: usize,
    /// `SLIDESTREAM_GPU_CPU_WORKERS`; `None` = one per core the lanes leave.
    pub cpu_workers: Option<usize>,
    /// `SLIDESTREAM_GPU_SPLIT`: `cost` (true, default) or `offset`.
    pub split_by_cost: bool,
    /// `SLIDESTREAM_GPU_SM_DECODER`.
    pub sm_decoder: GpuSmDecoder,
    /// `SLIDESTREAM_GPU_MIN_CHUNK` (clamped to 1..=`CHUNK_TILES` by the lanes).
    pub min_chunk: usize,
    /// `SLIDESTREAM_NVJPEG_OUTPUT`: `NVJPEG_OUTPUT_UNCHANGED` or `NVJPEG_OUTPUT_YUV`.
    pub nvjpeg_output: c_int,
    /// `SLIDESTREAM_KERNEL_CACHE`.
    pub kernel_cache: KernelCache,
    /// `SLIDESTREAM_GPU_WARMUP`.
    pub warmup: GpuWarmup,
}

/// Read the engine's settings and mark them consumed (later changes are refused).
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) for a value the table does not accept.
pub(crate) fn settings() -> Result<EngineSettings> {
    let cfg = crate::config::consume(GPU_ENGINE_SETTINGS)?;
    Ok(EngineSettings {
        compat_mode: cfg.compat_mode,
        sync: match cfg.gpu_sync {
            GpuSync::Spin => Some(CU_CTX_SCHED_SPIN),
            GpuSync::Yield => Some(CU_CTX_SCHED_YIELD),
            GpuSync::Blocking => Some(CU_CTX_SCHED_BLOCKING_SYNC),
            GpuSync::Auto => None,
        },
        high_priority: cfg.gpu_stream_priority == GpuStreamPriority::High,
        blocking_waits: cfg.gpu_wait == GpuWait::Block,
        thread_nice: cfg.thread_nice,
        device_cache_bytes: usize::try_from(cfg.device_cache_bytes).unwrap_or(usize::MAX),
        gpu_workers: cfg.gpu_workers,
        cpu_workers: cfg.gpu_cpu_workers,
        split_by_cost: cfg.gpu_split == GpuSplit::Cost,
        sm_decoder: cfg.gpu_sm_decoder,
        min_chunk: cfg.gpu_min_chunk,
        nvjpeg_output: match cfg.nvjpeg_output {
            NvjpegOutput::Yuv => NVJPEG_OUTPUT_YUV,
            NvjpegOutput::Unchanged => NVJPEG_OUTPUT_UNCHANGED,
        },
        kernel_cache: cfg.kernel_cache,
        warmup: cfg.gpu_warmup,
    })
}

/// `SLIDESTREAM_GPU_TRACE`, for the trace's once-per-process switch. `Engine::start` has
/// already checked the value (a bad one fails the start), so an error here reads as off.
pub(crate) fn trace() -> bool {
    crate::config::settings().is_ok_and(|s| s.gpu_trace)
}
