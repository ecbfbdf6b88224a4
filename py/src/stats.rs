//! The one place where the core's counters become Python dicts: tile cache counters
//! ([`CacheStats`]), I/O counters ([`IoCounters`]), the GPU path's counters ([`GpuStats`]) and
//! the GPU probe ([`GpuReport`]).
//!
//! Key names are the Rust field names (documented in docs/python.md); the GPU dict embeds the
//! device cache counters with the prefix `cache_`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use slidestream::gpu::{GpuReport, GpuStats};
use slidestream::{CacheStats, IoCounters};

/// Put every cache counter into `d` as `{prefix}{field}`: hits, misses, evictions,
/// insertions, entries, resident_bytes, capacity_bytes (bytes of decoded tiles).
fn put_cache(d: &Bound<'_, PyDict>, prefix: &str, c: &CacheStats) -> PyResult<()> {
    let fields = [
        ("hits", c.hits),
        ("misses", c.misses),
        ("evictions", c.evictions),
        ("insertions", c.insertions),
        ("entries", c.entries),
        ("resident_bytes", c.resident_bytes),
        ("capacity_bytes", c.capacity_bytes),
    ];
    for (k, v) in fields {
        d.set_item(format!("{prefix}{k}"), v)?;
    }
    Ok(())
}

/// `Slide.cache_stats()`: the tile cache counters.
pub(crate) fn cache_dict<'py>(py: Python<'py>, c: &CacheStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    put_cache(&d, "", c)?;
    Ok(d)
}

/// `Slide.io_stats()`: `requests`, `bytes` and `path` ("posix": positional reads) of a slide's
/// CPU reads, plus `gpu` (the counters of the device this process read on, with its ordinal
/// under `device`) when given.
pub(crate) fn io_dict<'py>(py: Python<'py>, c: &IoCounters, gpu: Option<(usize, &GpuStats)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("requests", c.requests)?;
    d.set_item("bytes", c.bytes)?;
    d.set_item("path", "posix")?;
    if let Some((device, s)) = gpu {
        let g = gpu_dict(py, s)?;
        g.set_item("device", device)?;
        d.set_item("gpu", g)?;
    }
    Ok(d)
}

/// `gpu_stats()`: the GPU path's counters of one device as a flat dict.
pub(crate) fn gpu_dict<'py>(py: Python<'py>, s: &GpuStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("compat_mode", &s.compat_mode)?;
    d.set_item("io_path", &s.io_path)?;
    d.set_item("io_reason", &s.io_reason)?;
    d.set_item("posix_bytes", s.posix_bytes)?;
    d.set_item("posix_requests", s.posix_requests)?;
    d.set_item("cufile_gds_bytes", s.cufile_gds_bytes)?;
    d.set_item("cufile_gds_requests", s.cufile_gds_requests)?;
    d.set_item("cufile_compat_bytes", s.cufile_compat_bytes)?;
    d.set_item("cufile_compat_requests", s.cufile_compat_requests)?;
    d.set_item("cufile_handle_failures", s.cufile_handle_failures)?;
    d.set_item("cufile_handle_error", &s.cufile_handle_error)?;
    d.set_item("cufile_skip_reason", &s.cufile_skip_reason)?;
    d.set_item("tile_bytes", s.tile_bytes)?;
    d.set_item("read_amplification", s.read_amplification())?;
    d.set_item("decoded_hardware", s.decoded_hardware)?;
    d.set_item("decoded_device_bitstream", s.decoded_device_bitstream)?;
    d.set_item("decoded_hybrid", s.decoded_hybrid)?;
    d.set_item("decoded_sm", s.decoded_sm)?;
    d.set_item("decoded_sm_partial", s.decoded_sm_partial)?;
    d.set_item("sm_decoder", s.sm_decoder.as_str())?;
    d.set_item("decoded_cpu", s.decoded_cpu)?;
    d.set_item("decoded_cpu_partial", s.decoded_cpu_partial)?;
    d.set_item("gpu_lanes", s.gpu_lanes)?;
    d.set_item("cpu_workers", s.cpu_workers)?;
    d.set_item("gpu_batch_fallbacks", s.gpu_batch_fallbacks)?;
    d.set_item("cpu_fallback_reason", &s.cpu_fallback_reason)?;
    d.set_item("nvjpeg_backend", &s.nvjpeg_backend)?;
    d.set_item("hardware_engines", s.hardware_engines)?;
    d.set_item("kernel_cache", &s.kernel_cache)?;
    d.set_item("warmup", &s.warmup)?;
    d.set_item("stream_priority", s.stream_priority)?;
    d.set_item("cuda_connections", s.cuda_connections)?;
    d.set_item("gpu_wait", &s.gpu_wait)?;
    d.set_item("thread_nice", s.thread_nice)?;
    put_cache(&d, "cache_", &s.cache)?;
    d.set_item("device_tile_bytes", s.device_tile_bytes)?;
    Ok(d)
}

/// `gpu_probe()`: driver version, devices (name, compute capability), nvJPEG version and the
/// hardware JPEG engines of device 0 (with the reason when there are none).
pub(crate) fn probe_dict<'py>(py: Python<'py>, r: &GpuReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("driver_version", r.driver_version)?;
    let devs = PyList::empty(py);
    for (name, ma, mi) in &r.devices {
        let e = PyDict::new(py);
        e.set_item("name", name)?;
        e.set_item("compute_capability", (*ma, *mi))?;
        devs.append(e)?;
    }
    d.set_item("devices", devs)?;
    d.set_item("nvjpeg_version", r.nvjpeg_version)?;
    d.set_item("hardware_engines", r.hardware_engines)?;
    d.set_item("hardware_reason", &r.hardware_reason)?;
    Ok(d)
}
