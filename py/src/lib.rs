//! Python bindings of slidestream (`slidestream._slidestream`): registration of the classes
//! and functions. One concern per file:
//!
//! * [`errors`]: the core `Error` → Python exception mapping (classes in `slidestream._errors`);
//! * [`process`]: per-process state (decode pool, shared tile cache, CUDA-after-fork guard);
//! * [`args`]: argument parsing (paths, ints, levels, sizes, backgrounds, devices);
//!   [`locations`]: patch locations;
//! * [`slide`]: the `Slide` class (lifetime, metadata) and `detect_vendor`;
//! * [`reads`]: `read_region`, `read_regions`, `read_associated`; [`patches`]: cross-slide batches;
//! * [`config`]: `slidestream.config`'s access to the settings table;
//! * [`device_array`]: `DeviceArray` (CUDA Array Interface, DLPack export, host copies);
//! * [`dlpack`]: the DLPack ABI and capsule;
//! * [`gpu`]: the GPU module functions; [`stats`]: counters as dicts;
//! * [`interrupt`]: Ctrl-C between waves of a long read (`KeyboardInterrupt`).
//!
//! Every read releases the GIL and returns a numpy array that owns the Rust buffer (no copy).
//! The core is always built with its `cuda` feature, whose CUDA libraries load at run time.

mod args;
mod config;
mod device_array;
mod dlpack;
mod errors;
mod gpu;
mod interrupt;
mod locations;
mod patches;
mod process;
mod reads;
mod slide;
mod stats;

use pyo3::prelude::*;

/// Version of the Rust core.
#[pyfunction]
fn core_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _slidestream(m: &Bound<'_, PyModule>) -> PyResult<()> {
    interrupt::install(m.py())?;
    m.add_class::<slide::PySlide>()?;
    m.add_class::<device_array::PyDeviceArray>()?;
    m.add_function(wrap_pyfunction!(core_version, m)?)?;
    m.add_function(wrap_pyfunction!(slide::detect_vendor, m)?)?;
    m.add_function(wrap_pyfunction!(patches::read_patches_py, m)?)?;
    m.add_function(wrap_pyfunction!(config::config_get, m)?)?;
    m.add_function(wrap_pyfunction!(config::config_set, m)?)?;
    m.add_function(wrap_pyfunction!(config::config_table, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::gpu_probe, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::gpu_stats, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::gpu_reset_stats, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::gpu_clear_cache, m)?)?;
    m.add_function(wrap_pyfunction!(args::parse_device_py, m)?)?;
    // Test hooks exist only in builds with the `test-hooks` feature (scripts/test-all.sh);
    // `_test_hooks` says which build this is. They are set as plain attributes, outside the
    // module's `__all__`, so the stub (which does not list them) matches either build.
    m.add("_test_hooks", cfg!(feature = "test-hooks"))?;
    #[cfg(feature = "test-hooks")]
    {
        m.setattr("_test_cpu_dlpack", wrap_pyfunction!(dlpack::test_cpu_dlpack, m)?)?;
        m.setattr("_test_cpu_dlpack_releases", wrap_pyfunction!(dlpack::test_cpu_dlpack_releases, m)?)?;
        m.setattr("_test_sigint_after_checks", wrap_pyfunction!(interrupt::test_sigint_after_checks, m)?)?;
    }
    Ok(())
}
