//! Every setting the engine reads, in one place: read once when an engine starts.
//!
//! Today these are the `SLIDESTREAM_*` environment variables (table in docs/gpu.md); the
//! crate's settings table (`config/`) replaces this function's body when it lands.

use std::ffi::{c_int, c_uint};

use super::sys::{CU_CTX_SCHED_BLOCKING_SYNC, CU_CTX_SCHED_SPIN, CU_CTX_SCHED_YIELD, NVJPEG_OUTPUT_UNCHANGED, NVJPEG_OUTPUT_YUV};
use crate::gpu::CompatMode;

/// Default device tile cache budget (`SLIDESTREAM_DEVICE_CACHE_BYTES`).
const DEFAULT_DEVICE_CACHE_BYTES: usize = 2 << 30;
/// Default lanes one large batch is spread over (`SLIDESTREAM_GPU_WORKERS`).
const DEFAULT_GPU_WORKERS: usize = 4;
/// Smallest chunk a lane takes as the queue runs low (guided scheduling).
const DEFAULT_MIN_CHUNK: usize = 64;

/// The engine's settings as read (ranges are applied by the parts that use them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EngineSettings {
    /// `SLIDESTREAM_COMPAT_MODE`.
    pub compat_mode: CompatMode,
    /// `SLIDESTREAM_GPU_SYNC`: a `CU_CTX_SCHED_*` flag, `None` = leave the context's.
    pub sync: Option<c_uint>,
    /// `SLIDESTREAM_DEVICE_CACHE_BYTES`.
    pub device_cache_bytes: usize,
    /// `SLIDESTREAM_GPU_WORKERS` (clamped to 1..=`MAX_LANES` by the lanes).
    pub gpu_workers: usize,
    /// `SLIDESTREAM_GPU_CPU_WORKERS`; `None` = one per core the lanes leave.
    pub cpu_workers: Option<usize>,
    /// `SLIDESTREAM_GPU_SPLIT`: `cost` (true, default) or `offset`.
    pub split_by_cost: bool,
    /// `SLIDESTREAM_GPU_MIN_CHUNK` (clamped to 1..=`CHUNK_TILES` by the lanes).
    pub min_chunk: usize,
    /// `SLIDESTREAM_NVJPEG_OUTPUT`: `NVJPEG_OUTPUT_UNCHANGED` or `NVJPEG_OUTPUT_YUV`.
    pub nvjpeg_output: c_int,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Read the settings (unparseable values keep the default, as before the settings table).
pub(crate) fn settings() -> EngineSettings {
    EngineSettings {
        compat_mode: CompatMode::from_env(),
        sync: match env("SLIDESTREAM_GPU_SYNC").as_deref().map(str::trim) {
            Some("spin") => Some(CU_CTX_SCHED_SPIN),
            Some("yield") => Some(CU_CTX_SCHED_YIELD),
            Some("blocking") => Some(CU_CTX_SCHED_BLOCKING_SYNC),
            _ => None,
        },
        device_cache_bytes: env("SLIDESTREAM_DEVICE_CACHE_BYTES")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(DEFAULT_DEVICE_CACHE_BYTES, |v| usize::try_from(v).unwrap_or(usize::MAX)),
        gpu_workers: env("SLIDESTREAM_GPU_WORKERS").and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(DEFAULT_GPU_WORKERS),
        cpu_workers: env("SLIDESTREAM_GPU_CPU_WORKERS").and_then(|v| v.trim().parse::<usize>().ok()),
        split_by_cost: env("SLIDESTREAM_GPU_SPLIT").is_none_or(|v| v.trim() != "offset"),
        min_chunk: env("SLIDESTREAM_GPU_MIN_CHUNK").and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(DEFAULT_MIN_CHUNK),
        nvjpeg_output: match env("SLIDESTREAM_NVJPEG_OUTPUT").as_deref() {
            Some("yuv") => NVJPEG_OUTPUT_YUV,
            _ => NVJPEG_OUTPUT_UNCHANGED,
        },
    }
}

/// `SLIDESTREAM_GPU_TRACE` (set = on), read once per process (the trace is consulted on paths
/// that have no engine at hand).
pub(crate) fn trace() -> bool {
    std::env::var_os("SLIDESTREAM_GPU_TRACE").is_some()
}
