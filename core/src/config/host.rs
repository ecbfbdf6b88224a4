//! The per-slide subset of the settings ([`Config`]), fixed when a slide is opened.

use super::Settings;
use crate::error::Result;
use crate::io::plan::PlanOptions;

/// The settings one open slide uses (from [`super::settings`] at open, or given in
/// [`crate::SlideOptions::config`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Host tile cache capacity in bytes (used only when a slide makes its own cache).
    pub cache_bytes: usize,
    /// Read-plan coalescing knobs (of the slide's source: for a remote slide, the open puts
    /// [`remote_plan`](Self::remote_plan) here).
    pub plan: PlanOptions,
    /// Read-plan coalescing knobs for remote slides (`SLIDESTREAM_REMOTE_MAX_GAP_BYTES`,
    /// `SLIDESTREAM_REMOTE_MAX_REQUEST_BYTES`).
    pub remote_plan: PlanOptions,
    /// Largest region output in bytes (width × height × 4).
    pub max_region_bytes: u64,
    /// Largest share (0..=1) of an uncached tile's area a region may need for the tile to be
    /// decoded partially instead of whole (JPEG only); 0 disables partial decoding.
    pub partial_decode_max_fraction: f64,
    /// Bytes one CPU read call may hold at once while reading and decoding tiles (the wave
    /// budget of [`crate::read`]'s fetch; `SLIDESTREAM_READ_WORKING_BYTES`).
    pub read_working_bytes: u64,
}

impl Default for Config {
    /// The table's defaults (docs/settings.md).
    fn default() -> Self {
        Config {
            cache_bytes: 256 << 20,
            plan: PlanOptions::default(),
            remote_plan: PlanOptions { max_gap_bytes: 64 << 10, max_request_bytes: 16 << 20 },
            max_region_bytes: 4 << 30,
            partial_decode_max_fraction: 0.5,
            read_working_bytes: 192 << 20,
        }
    }
}

impl Config {
    /// The per-slide part of resolved [`Settings`].
    pub fn from_settings(s: &Settings) -> Self {
        Config {
            cache_bytes: usize::try_from(s.cache_bytes).unwrap_or(usize::MAX),
            plan: PlanOptions { max_gap_bytes: s.plan_max_gap_bytes, max_request_bytes: s.plan_max_request_bytes },
            remote_plan: PlanOptions { max_gap_bytes: s.remote_max_gap_bytes, max_request_bytes: s.remote_max_request_bytes },
            max_region_bytes: s.max_region_bytes,
            partial_decode_max_fraction: s.partial_decode_max_fraction,
            read_working_bytes: s.read_working_bytes,
        }
    }

    /// Defaults overridden by [`super::set`] overrides and the environment.
    ///
    /// # Errors
    /// [`crate::Error::Config`] when a `SLIDESTREAM_*` value is not accepted.
    pub fn from_env() -> Result<Self> {
        Ok(Config::from_settings(&super::settings()?))
    }
}
