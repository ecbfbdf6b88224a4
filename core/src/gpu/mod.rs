//! GPU path (cargo feature `cuda`). Not built yet: every entry point returns
//! [`GpuError::NotCompiled`](crate::error::GpuError::NotCompiled) so call sites need no `cfg`
//! (the pattern of candle's dummy CUDA backend). The real back end (cuFile, nvJPEG, device
//! cache, assembly kernels) is specified in docs/architecture.md and lands with the GPU issue.

use crate::error::{GpuError, Result};

/// Whether a usable CUDA device is present. Always `false` in this build.
pub fn available() -> bool {
    false
}

/// Probe the GPU stack (libcuda, nvJPEG, cuFile).
///
/// # Errors
/// Always [`GpuError::NotCompiled`] in this build.
pub fn probe() -> Result<()> {
    Err(GpuError::NotCompiled.into())
}
