//! The GPU module functions: `cuda_available`, `gpu_probe`, `gpu_stats`, `gpu_reset_stats`,
//! `gpu_clear_cache`.
//!
//! The extension is always built with the core's `cuda` feature: CUDA, nvJPEG and cuFile are
//! loaded at run time, so the same wheel runs on machines without a GPU, where device reads
//! raise `slidestream.GpuUnavailableError`. None of these functions touches CUDA in a process
//! forked after CUDA was initialised ([`process::fork_check`]).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use slidestream::gpu::{self, GpuStats};

use crate::errors::OrRaise;
use crate::{args, process, stats};

/// The counters of the device this process has read on (`Slide.io_stats()["gpu"]`), with its
/// ordinal; `None` when this process has not used the GPU. Does not initialise CUDA.
pub(crate) fn used_device_stats() -> Option<(usize, GpuStats)> {
    process::used_device().map(|dev| (dev, gpu::stats(dev)))
}

/// True when a usable CUDA device is present (libcuda loads, ``cuInit`` succeeds, at least
/// one device). Never raises. False in a process forked after CUDA was initialised (CUDA
/// cannot be used there).
#[pyfunction]
pub(crate) fn cuda_available(py: Python<'_>) -> bool {
    if process::fork_check().is_err() {
        return false;
    }
    let ok = py.detach(|| std::panic::catch_unwind(gpu::available).unwrap_or(false));
    if ok {
        process::note_cuda_init();
    }
    ok
}

/// Probe the GPU stack (initialises CUDA): ``driver_version`` (int, 13000 = 13.0),
/// ``devices`` (list of ``{"name": str, "compute_capability": (major, minor)}``),
/// ``nvjpeg_version`` ((major, minor, patch) or None), ``hardware_engines`` (hardware JPEG
/// engines of device 0; 0 without), ``hardware_reason`` (str or None: why the hardware JPEG
/// backend is unavailable). Raises GpuUnavailableError when CUDA cannot be loaded or
/// initialised, GpuForkError in a process forked after CUDA was initialised.
#[pyfunction]
pub(crate) fn gpu_probe(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    process::fork_check().or_raise(py)?;
    let r = crate::guard::detach(py, gpu::probe)?.or_raise(py)?;
    process::note_cuda_init();
    stats::probe_dict(py, &r)
}

/// Process-wide counters of the GPU path of ``device`` (default 0), all slides: I/O path
/// and bytes / requests per path, read amplification, tiles per decoder, CPU fallbacks,
/// nvJPEG backend and the device tile cache (keys in docs/python.md). Never initialises
/// CUDA: an unused device reports zeros. ValueError for ``"cpu"`` or a bad device.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn gpu_stats<'py>(py: Python<'py>, device: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
    let dev = args::cuda_ordinal(device)?;
    stats::gpu_dict(py, &gpu::stats(dev))
}

/// Zero the GPU counters of ``device`` (default 0); the device tile cache keeps its
/// tiles.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn gpu_reset_stats(device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    gpu::reset_stats(args::cuda_ordinal(device)?);
    Ok(())
}

/// Drop every tile of the device tile cache of ``device`` (default 0); counters are kept.
/// No-op when the device was not used.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn gpu_clear_cache(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let dev = args::cuda_ordinal(device)?;
    crate::guard::detach(py, move || {
        gpu::clear_device_cache(dev);
        Ok(())
    })?
    .or_raise(py)
}
