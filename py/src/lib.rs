//! Python bindings of slidestream (`slidestream._slidestream`): registration of the classes
//! and functions. One concern per file:
//!
//! * [`errors`]: the core `Error` → Python exception mapping (classes in `slidestream._errors`);
//! * [`guard`]: every call into the core (GIL released; panics raised as `SlideError`);
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
mod guard;
mod interrupt;
mod locations;
mod patches;
mod prefetch;
mod process;
mod reads;
mod slide;
mod stats;

use pyo3::prelude::*;

/// Version of the Rust core (also ``slidestream.__version__``).
#[pyfunction]
fn core_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Initialise rust-numpy's access to NumPy's C API now, at import, where a failure is an
/// exception of the import. rust-numpy does it at the first array it makes, and turns any
/// Python exception raised meanwhile into a panic ("Failed to access NumPy array API capsule:
/// KeyboardInterrupt" when Ctrl-C arrived just before the first read returned): the steps
/// that run Python code (importing numpy, numpy.lib and the multiarray module, and
/// `NumpyVersion`, rust-numpy's `numpy_core_name`) are run here first with their errors
/// propagated, then one empty array makes rust-numpy load the API from those modules.
fn init_numpy(py: Python<'_>) -> PyResult<()> {
    let numpy = py.import("numpy")?;
    let version = py.import("numpy.lib")?.getattr("NumpyVersion")?.call1((numpy.getattr("__version__")?,))?;
    let core = if version.getattr("major")?.extract::<u32>()? >= 2 { "numpy._core.multiarray" } else { "numpy.core.multiarray" };
    py.import(core)?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = numpy::PyArray1::<u8>::from_vec(py, Vec::new());
    }))
    .map_err(|_| pyo3::exceptions::PyImportError::new_err("slidestream: NumPy's C API could not be loaded (see the message above)"))
}

#[pymodule]
fn _slidestream(m: &Bound<'_, PyModule>) -> PyResult<()> {
    init_numpy(m.py())?;
    interrupt::install(m.py())?;
    m.add_class::<slide::PySlide>()?;
    m.add_class::<device_array::PyDeviceArray>()?;
    m.add_function(wrap_pyfunction!(core_version, m)?)?;
    m.add_function(wrap_pyfunction!(slide::detect_vendor, m)?)?;
    m.add_function(wrap_pyfunction!(slide::format_verdicts, m)?)?;
    m.add_function(wrap_pyfunction!(patches::read_patches_py, m)?)?;
    m.add_function(wrap_pyfunction!(patches::resize_patches_py, m)?)?;
    m.add_function(wrap_pyfunction!(patches::resize_patches_device_py, m)?)?;
    m.add_class::<prefetch::PyPrefetcher>()?;
    m.add_function(wrap_pyfunction!(prefetch::prefetch_threads, m)?)?;
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
        m.setattr("_test_panic_in_next_call", wrap_pyfunction!(guard::hooks::test_panic_in_next_call, m)?)?;
        m.setattr("_test_sigint_after_next_call", wrap_pyfunction!(guard::hooks::test_sigint_after_next_call, m)?)?;
        m.setattr("_test_stall_next_prefetch", wrap_pyfunction!(prefetch::test_stall_next_prefetch, m)?)?;
    }
    Ok(())
}
