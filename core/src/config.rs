//! Settings: built-in defaults, overridden by `SLIDESTREAM_*` environment variables, overridden
//! by per-call options ([`crate::SlideOptions`]).
//!
//! | variable | default | unit | meaning |
//! |---|---|---|---|
//! | `SLIDESTREAM_CACHE_BYTES` | 268435456 (256 MiB) | bytes | capacity of the process-wide host tile cache |
//! | `SLIDESTREAM_PLAN_MAX_GAP_BYTES` | 8192 | bytes | largest hole between two tiles read as one request |
//! | `SLIDESTREAM_PLAN_MAX_REQUEST_BYTES` | 8388608 (8 MiB) | bytes | largest coalesced request |
//! | `SLIDESTREAM_MAX_REGION_BYTES` | 4294967296 (4 GiB) | bytes | largest output of one region read |
//! | `SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION` | 0.5 | fraction of a tile's area | a region needing at most this share of an uncached JPEG tile decodes only that part (iMCU columns, rows skipped) and does not cache it; 0 disables |
//!
//! The GPU path (feature `cuda`) reads its own variables once per process when its engine
//! starts (`core/src/gpu/engine.rs`, table in docs/gpu.md): `SLIDESTREAM_COMPAT_MODE`
//! (`on|off|auto`), `SLIDESTREAM_DEVICE_CACHE_BYTES` (2 GiB), `SLIDESTREAM_GPU_WORKERS` (4),
//! `SLIDESTREAM_GPU_CPU_WORKERS` (cores − lanes, ≤ 32), `SLIDESTREAM_GPU_SPLIT`
//! (`cost|offset`), `SLIDESTREAM_GPU_SYNC`
//! (`spin|yield|blocking`), `SLIDESTREAM_NVJPEG_OUTPUT` (`unchanged|yuv`),
//! `SLIDESTREAM_GPU_TRACE`.
//!
//! Unparseable values are ignored (the default stays) rather than failing an open.

use crate::io::plan::PlanOptions;

/// Resolved settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Host tile cache capacity in bytes.
    pub cache_bytes: usize,
    /// Read-plan coalescing knobs.
    pub plan: PlanOptions,
    /// Largest region output in bytes (width × height × 4).
    pub max_region_bytes: u64,
    /// Largest share (0..=1) of an uncached tile's area a region may need for the tile to be
    /// decoded partially instead of whole (JPEG only); 0 disables partial decoding.
    pub partial_decode_max_fraction: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config { cache_bytes: 256 << 20, plan: PlanOptions::default(), max_region_bytes: 4 << 30, partial_decode_max_fraction: 0.5 }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

impl Config {
    /// Defaults overridden by the environment.
    pub fn from_env() -> Self {
        let mut c = Config::default();
        if let Some(v) = env_u64("SLIDESTREAM_CACHE_BYTES") {
            c.cache_bytes = usize::try_from(v).unwrap_or(usize::MAX);
        }
        if let Some(v) = env_u64("SLIDESTREAM_PLAN_MAX_GAP_BYTES") {
            c.plan.max_gap_bytes = v;
        }
        if let Some(v) = env_u64("SLIDESTREAM_PLAN_MAX_REQUEST_BYTES") {
            c.plan.max_request_bytes = v.max(1);
        }
        if let Some(v) = env_u64("SLIDESTREAM_MAX_REGION_BYTES") {
            c.max_region_bytes = v;
        }
        if let Some(v) = std::env::var("SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION").ok().and_then(|v| v.trim().parse::<f64>().ok()) {
            if (0.0..=1.0).contains(&v) {
                c.partial_decode_max_fraction = v;
            }
        }
        c
    }
}
