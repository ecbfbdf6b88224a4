//! Run-time bindings to the CUDA driver API, nvJPEG, NVRTC and cuFile (feature `cuda`).
//!
//! Libraries are opened with `libloading` at run time, so a `cuda` build runs on machines
//! without CUDA: loading returns an error naming what is missing instead of panicking (cudarc's
//! loader panics when a library is absent). Signatures follow `cuda.h` (CUDA 13), `nvjpeg.h`
//! (nvJPEG 13), `nvrtc.h` and `cufile.h`; only the functions slidestream calls are bound.
//!
//! One loader pattern for all four libraries: `ffi_table!` declares a table (sonames, then
//! `field: signature = "symbol"` lines) and generates its `load()`; [`loaded`] keeps a table
//! loaded once per process behind a `OnceLock`. Library search order: the plain soname, then
//! `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`, `/usr/local/cuda-*/targets/x86_64-linux/lib`.

// Fields are the C functions of the same name (documented in the vendor headers).
#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use std::path::PathBuf;
use std::sync::OnceLock;

use libloading::Library;

use crate::error::GpuError;

/// Result of the CUDA layer: a [`GpuError`] naming the failing call.
pub(crate) type Res<T> = std::result::Result<T, GpuError>;

fn candidates(names: &[&str]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
    let mut dirs = Vec::new();
    if let Some(h) = std::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(h).join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    if let Ok(rd) = std::fs::read_dir("/usr/local") {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("cuda-") {
                dirs.push(e.path().join("targets/x86_64-linux/lib"));
            }
        }
    }
    for d in dirs {
        for n in names {
            out.push(d.join(n));
        }
    }
    out
}

/// Open the first of `names` found in the search order.
pub(crate) fn open_any(names: &[&str]) -> Result<Library, String> {
    let mut errs = Vec::new();
    for c in candidates(names) {
        // SAFETY: loading a vendor library runs its initialisers; these are NVIDIA's CUDA
        // libraries, loaded the way every CUDA application loads them.
        match unsafe { Library::new(&c) } {
            Ok(l) => return Ok(l),
            Err(e) => errs.push(format!("{}: {e}", c.display())),
        }
    }
    let hint = if names[0].starts_with("libcuda") { "; is an NVIDIA driver installed?" } else { "; is the CUDA toolkit (12 or 13) in the library path or /usr/local/cuda?" };
    Err(format!("cannot load {} ({}{hint})", names[0], errs.first().cloned().unwrap_or_default()))
}

/// Declare a table of C functions bound from one library, and its `load()`:
/// `ffi_table!(Name, ["soname", ...], { field: unsafe extern "C" fn(..) -> .. = "symbol", ... })`.
macro_rules! ffi_table {
    ($(#[$meta:meta])* $name:ident, [$($soname:literal),+ $(,)?], { $($field:ident: $ty:ty = $sym:literal,)* }) => {
        $(#[$meta])*
        pub(crate) struct $name {
            _lib: libloading::Library,
            $(pub $field: $ty,)*
        }

        impl $name {
            /// Load the library (first soname found) and bind every function.
            ///
            /// # Errors
            /// A message naming the missing library or symbol.
            pub fn load() -> Result<$name, String> {
                let lib = $crate::gpu::cuda::sys::open_any(&[$($soname),+])?;
                Ok($name {
                    // SAFETY: each symbol is looked up by its documented name and cast to the
                    // documented signature of the field it is stored in; the library stays
                    // loaded as long as the table (`_lib`).
                    $($field: *unsafe { lib.get::<$ty>($sym.as_bytes()) }.map_err(|e| format!("{}: {e}", $sym))?,)*
                    _lib: lib,
                })
            }
        }
    };
}

mod cuda;
mod cufile;
mod nvjpeg;
mod nvrtc;

pub(crate) use cuda::*;
pub(crate) use cufile::*;
pub(crate) use nvjpeg::*;
pub(crate) use nvrtc::*;

/// A table loaded once per process: `init` runs on first use; its error is kept and returned
/// to every later caller as [`GpuError::Unavailable`].
pub(crate) fn loaded<T>(cell: &'static OnceLock<Result<T, String>>, init: impl FnOnce() -> Result<T, String>) -> Res<&'static T> {
    cell.get_or_init(init).as_ref().map_err(|e| GpuError::Unavailable(e.clone()))
}

/// The CUDA driver API, loaded and initialised (`cuInit`) once per process.
pub(crate) fn cuda() -> Res<&'static Cuda> {
    static LIB: OnceLock<Result<Cuda, String>> = OnceLock::new();
    loaded(&LIB, || {
        let cuda = Cuda::load()?;
        // SAFETY: documented driver API entry point, flags must be 0.
        let rc = unsafe { (cuda.cuInit)(0) };
        if rc != 0 {
            return Err(format!("cuInit failed with CUresult {rc}"));
        }
        Ok(cuda)
    })
}

/// nvJPEG, loaded once per process after the driver API.
pub(crate) fn nvjpeg() -> Res<&'static NvJpeg> {
    static LIB: OnceLock<Result<NvJpeg, String>> = OnceLock::new();
    cuda()?;
    loaded(&LIB, NvJpeg::load)
}

/// NVRTC, loaded once per process (used at engine start to compile the kernels).
pub(crate) fn nvrtc() -> Res<&'static Nvrtc> {
    static LIB: OnceLock<Result<Nvrtc, String>> = OnceLock::new();
    loaded(&LIB, Nvrtc::load)
}

/// `Ok` for `CUresult` 0, else [`GpuError::Call`] naming `what`.
pub(crate) fn cu(rc: CUresult, what: &str) -> Res<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(GpuError::Call(format!("{what} failed with CUresult {rc}")))
    }
}

/// `Ok` for `nvjpegStatus_t` 0, else [`GpuError::Call`] naming `what`.
pub(crate) fn nv(rc: nvjpegStatus, what: &str) -> Res<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(GpuError::Call(format!("{what} failed with nvjpegStatus {rc}")))
    }
}
