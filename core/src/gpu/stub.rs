//! The back end without the `cuda` feature: every entry point that would need CUDA returns
//! [`GpuError::NotCompiled`]; the others do nothing. Same functions and signatures as
//! `cuda/mod.rs`.

use super::{DeviceArray, DeviceBatch, DeviceOptions, GpuReport, GpuStats};
use crate::error::{GpuError, Result};
use crate::slide::{PatchRequest, Slide};

pub(super) fn probe() -> Result<GpuReport> {
    Err(GpuError::NotCompiled.into())
}

pub(super) fn device_count() -> Result<usize> {
    Err(GpuError::NotCompiled.into())
}

pub(super) fn stats(_device: usize) -> GpuStats {
    GpuStats::idle()
}

pub(super) fn start(_device: usize) -> Result<GpuStats> {
    Err(GpuError::NotCompiled.into())
}

pub(super) fn reset_stats(_device: usize) {}

pub(super) fn clear_cache(_device: usize) {}

pub(super) fn read_regions(_slide: &Slide, _locations: &[(i64, i64)], _level: usize, _size: (u64, u64), _opts: &DeviceOptions) -> Result<DeviceBatch> {
    Err(GpuError::NotCompiled.into())
}

pub(super) fn read_batch(_requests: &[PatchRequest<'_>], _size: (u64, u64), _opts: &DeviceOptions) -> Result<DeviceBatch> {
    Err(GpuError::NotCompiled.into())
}

pub(super) fn download(_array: &DeviceArray) -> Result<Vec<u8>> {
    Err(GpuError::NotCompiled.into())
}

pub(super) fn free_array(_array: &mut DeviceArray) {}

pub(super) fn resize_patches(_groups: &[(&DeviceArray, &[usize])], _n: usize, _to: (u32, u32), _device: usize) -> Result<DeviceArray> {
    Err(GpuError::NotCompiled.into())
}
