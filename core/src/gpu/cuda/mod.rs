//! The CUDA back end of the `gpu` facade (feature `cuda`). Its entry points have the same
//! signatures as `gpu/stub.rs`'s; `gpu/mod.rs` picks one of the two as `backend`.
//!
//! Parts: `sys/` (the libraries' function tables, loaded at run time), `context` (context,
//! streams), `memory` (device, pinned and stream-ordered allocations, tile blocks), `pool`
//! (reusable lanes and CPU worker resources), `kernels/` (NVRTC kernels and their descriptor
//! layouts), `engine` (one per device: the parts and start-up), `settings`, `stats`, `trace`,
//! `warmup`, `batch` (one read), `device_cache`, `scheduler` (lanes vs CPU workers), `queue`,
//! `lanes`, `chunk` (a lane's chunk), `io/` (compat mode, POSIX, cuFile), `decode/` (the
//! `TileDecoder` interface: nvJPEG, CPU workers),
//! `assemble`. Every CUDA resource is owned by a type whose `Drop` frees it.

mod arrays;
mod assemble;
mod batch;
mod chunk;
mod context;
mod counters;
mod decode;
mod device_cache;
mod drive;
mod engine;
mod io;
mod kernels;
mod lanes;
mod memory;
mod pool;
mod queue;
mod resize;
mod scheduler;
mod settings;
mod stats;
mod sys;
mod trace;
mod warmup;

use std::ffi::c_int;

pub(super) use arrays::{download, free_array};
pub(super) use batch::{read_batch, read_regions};
#[cfg(feature = "unstable")]
pub use decode::sm;
pub(super) use resize::resize_patches;

use super::{GpuReport, GpuStats};
use crate::error::{GpuError, Result};
use context::Context;
use sys::{cu, cuda, nvjpeg, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR};

/// Probe the GPU stack: devices, nvJPEG's version and the hardware backend of device 0. Creates
/// no stream; the nvJPEG handle and state made to check the hardware backend are destroyed
/// before it returns, and device 0's primary context is retained once per process.
pub(super) fn probe() -> Result<GpuReport> {
    let cuda = cuda()?;
    let mut r = GpuReport::default();
    let mut n = 0;
    // SAFETY: out-pointers to locals; functions bound from libcuda with their signatures.
    unsafe {
        cu(cuda.cuDriverGetVersion(&mut r.driver_version), "cuDriverGetVersion")?;
        cu(cuda.cuDeviceGetCount(&mut n), "cuDeviceGetCount")?;
        for i in 0..n {
            let mut dev = 0;
            cu(cuda.cuDeviceGet(&mut dev, i), "cuDeviceGet")?;
            let mut name = [0i8; 256];
            cu(cuda.cuDeviceGetName(name.as_mut_ptr(), 255, dev), "cuDeviceGetName")?;
            let (mut ma, mut mi) = (0, 0);
            cu(cuda.cuDeviceGetAttribute(&mut ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")?;
            cu(cuda.cuDeviceGetAttribute(&mut mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")?;
            let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            r.devices.push((name, ma, mi));
        }
    }
    match nvjpeg() {
        Err(GpuError::Unavailable(why)) => r.hardware_reason = Some(why),
        Err(e) => r.hardware_reason = Some(e.to_string()),
        Ok(nvj) => {
            let mut v = [0; 3];
            for (k, slot) in v.iter_mut().enumerate() {
                // SAFETY: libraryPropertyType 0..=2 = major, minor, patch.
                unsafe { (nvj.nvjpegGetProperty)(k as c_int, slot) };
            }
            r.nvjpeg_version = Some((v[0], v[1], v[2]));
            if !r.devices.is_empty() {
                // The caller's thread keeps its current context (device 0's is made current
                // for the hardware check only).
                let _restore = context::CurrentGuard::save();
                match Context::process_wide(0).and_then(|_| decode::nvjpeg::probe_hardware()) {
                    Ok(Ok(engines)) => r.hardware_engines = engines,
                    Ok(Err(why)) => r.hardware_reason = Some(why),
                    Err(e) => r.hardware_reason = Some(e.to_string()),
                }
            }
        }
    }
    Ok(r)
}

/// Devices visible to this process (`cuDeviceGetCount`; no context made).
pub(super) fn device_count() -> Result<usize> {
    let mut n = 0;
    // SAFETY: out-pointer to a local.
    cu(unsafe { cuda()?.cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
    Ok(n.max(0) as usize)
}

/// Counters of `device`; zeros (and the compat mode asked for) when no engine was started.
pub(super) fn stats(device: usize) -> GpuStats {
    match engine::existing(device) {
        Some(e) => e.stats(),
        None => GpuStats::idle(),
    }
}

/// Start the engine of `device` and return its counters.
pub(super) fn start(device: usize) -> Result<GpuStats> {
    let e = engine::engine(device)?;
    if let Some(err) = &e.io.error {
        return Err(GpuError::Unavailable(err.clone()).into());
    }
    Ok(e.stats())
}

/// Zero the counters of `device` (the device cache keeps its tiles).
pub(super) fn reset_stats(device: usize) {
    if let Some(e) = engine::existing(device) {
        e.counters.reset();
        e.cache.tiles.reset_counters();
    }
}

/// Drop every tile of `device`'s cache.
pub(super) fn clear_cache(device: usize) {
    if let Some(e) = engine::existing(device) {
        e.cache.tiles.clear();
    }
}

/// A slide closed (a purge hook of `cache::registry`): its tiles leave every device cache and
/// its cuFile handle is released.
fn purge_slide(id: u64) {
    let engines = engine::all();
    if engines.is_empty() {
        // No engine in this process: nothing to purge, and libcuda stays unloaded (closing a
        // slide read only on the CPU must not load it: py/tests/test_gpu.py checks).
        return;
    }
    // Runs on the thread closing the slide: it keeps its current context.
    let _restore = context::CurrentGuard::save();
    for e in engines {
        let _ = e.make_current();
        e.cache.tiles.purge_slide(id);
        e.io.files.drop_slide(id);
    }
}

#[cfg(test)]
mod tests {
    use super::context::Stream;

    /// `available()` / `probe()` used to leak a CUDA stream (and a context reference) per call.
    /// On a machine with a GPU this checks that probes create no stream (no other unit test
    /// starts an engine); elsewhere the probe fails with a typed error.
    #[test]
    fn probing_repeatedly_leaks_no_stream() {
        let before = Stream::live();
        for _ in 0..100 {
            match super::probe() {
                Ok(_) => {}
                Err(e) => {
                    assert!(matches!(e, crate::Error::Gpu(_)), "{e}");
                    return;
                }
            }
        }
        assert_eq!(Stream::live(), before, "streams alive after 100 probes");
    }
}
