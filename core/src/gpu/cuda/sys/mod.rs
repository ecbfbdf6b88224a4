//! Run-time bindings to the CUDA driver API, nvJPEG, NVRTC and cuFile (feature `cuda`).
//!
//! The driver API, NVRTC and cuFile are called through cudarc's raw `sys` bindings
//! (`cudarc::driver::sys`, `cudarc::nvrtc::sys`, `cudarc::cufile::sys`, feature
//! `dynamic-loading`); nvJPEG, which cudarc does not bind, through a hand-written table
//! (`ffi_table!`, opened with `libloading`). A `cuda` build runs on machines without CUDA.
//!
//! cudarc's loader panics when a library or a symbol is missing. slidestream never lets it
//! get that far: [`probe`] first opens the library exactly as cudarc will (its own list of
//! names, `cudarc::get_lib_name_candidates`, in its order) and looks up every symbol the
//! wrappers call (`SYMBOLS`, generated from the same list as the wrappers by `shims!`); a
//! missing library or symbol is [`GpuError::Unavailable`] naming it. The wrapper types
//! ([`Cuda`], [`Nvrtc`], [`CuFile`]) exist only after a successful probe and keep that library
//! loaded. cudarc opens plain names only (the dynamic loader's search path); when none of its
//! names loads, the library is looked for in `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`,
//! `/usr/local/cuda-*/targets/x86_64-linux/lib` and, if found there, kept loaded so that its
//! soname resolves for cudarc; if it still does not, the probe fails with a hint.
//! Signatures follow `cuda.h` (CUDA 13), `nvjpeg.h` (nvJPEG 13), `nvrtc.h` and `cufile.h`;
//! only the functions slidestream calls are bound.

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
    let hint = if names[0].starts_with("libcuda") {
        "; is an NVIDIA driver installed?"
    } else {
        "; is the CUDA toolkit (12 or 13) in the library path or /usr/local/cuda?"
    };
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

/// Wrappers over cudarc `sys` functions, and `SYMBOLS`, the C symbol of each, for [`probe`]:
/// `shims!(path; { name(arg: Ty, ..) -> Ret = cudarc_fn, convert; .. })` makes
/// `unsafe fn name(&self, arg: Ty, ..) -> Ret` calling `path::cudarc_fn(arg as _, ..)` (pointer
/// casts only; enums are passed as cudarc's types) and converting its result with `convert`.
macro_rules! shims {
    ($lib:path; { $($name:ident($($a:ident: $t:ty),* $(,)?) -> $r:ty = $target:ident, $conv:path;)* }) => {
        /// The C symbol of every function the wrappers call; [`probe`](super::probe) checks
        /// each one before any is called.
        pub(super) const SYMBOLS: &'static [&'static str] = &[$(stringify!($target)),*];
        $(
            #[doc = concat!("`", stringify!($target), "` (cudarc binding).")]
            ///
            /// # Safety
            /// The C function's contract (vendor header) for the arguments.
            #[inline]
            #[allow(clippy::unnecessary_cast, clippy::unused_unit, clippy::too_many_arguments)]
            pub unsafe fn $name(&self, $($a: $t),*) -> $r {
                use $lib as l;
                // SAFETY: `self` exists only after `probe` found this symbol in the library
                // cudarc loads, so cudarc's loader cannot panic; arguments are forwarded with
                // pointer casts only (same C types); the caller upholds the C contract.
                $conv(unsafe { l::$target($($a as _),*) })
            }
        )*
    };
}

/// Open a library the way cudarc's loader does: the first of its candidate names that loads.
fn open_as_cudarc(candidates: &[String]) -> Option<Library> {
    // SAFETY: as in `open_any`: NVIDIA's libraries, loaded as every CUDA application loads them.
    candidates.iter().find_map(|c| unsafe { Library::new(c) }.ok())
}

/// Check, without calling cudarc, that cudarc can load library `cudarc_libs` (cudarc's names,
/// e.g. `["nvrtc"]`) and that it has every one of `symbols`; `our_names` (sonames) are looked
/// for in the CUDA directories when none of cudarc's names loads (see the module docs).
/// Returns the library cudarc will use, to be kept loaded by the wrapper.
///
/// # Errors
/// A message naming the library that does not load, or the first missing symbol.
pub(crate) fn probe(cudarc_libs: &[&str], our_names: &[&str], symbols: &[&str]) -> Result<Library, String> {
    let candidates: Vec<String> = cudarc_libs.iter().flat_map(|l| cudarc::get_lib_name_candidates(l)).collect();
    let lib = match open_as_cudarc(&candidates) {
        Some(l) => l,
        None => {
            // Not in the loader's search path under any of cudarc's names: find it ourselves
            // and keep it loaded (its soname then resolves), or report why not.
            let pre = open_any(our_names)?;
            match open_as_cudarc(&candidates) {
                Some(l) => {
                    // The preloaded copy stays for the process, as cudarc's own load does.
                    std::mem::forget(pre);
                    l
                }
                None => {
                    return Err(format!(
                        "{} was found outside the library search path, but cudarc opens it only by the names {}; add its folder to LD_LIBRARY_PATH",
                        our_names[0],
                        candidates.join(", ")
                    ))
                }
            }
        }
    };
    for s in symbols {
        // SAFETY: only the address is looked up (as a data pointer); nothing is called.
        unsafe { lib.get::<*const std::ffi::c_void>(s.as_bytes()) }.map_err(|e| format!("{s}: {e}"))?;
    }
    Ok(lib)
}

mod cuda;
mod cufile;
mod nvjpeg;
mod nvrtc;

pub(crate) use cuda::*;
pub(crate) use cufile::*;
pub(crate) use nvjpeg::*;
pub(crate) use nvrtc::*;

/// cuFile, probed once per process (the caller opens its driver; see `io::cufile::driver`).
pub(crate) fn cufile_probe() -> Result<CuFile, String> {
    Ok(CuFile { _lib: probe(CUFILE_CUDARC_LIBS, CUFILE_SONAMES, CuFile::SYMBOLS)? })
}

/// A table loaded once per process: `init` runs on first use; its error is kept and returned
/// to every later caller as [`GpuError::Unavailable`].
pub(crate) fn loaded<T>(cell: &'static OnceLock<Result<T, String>>, init: impl FnOnce() -> Result<T, String>) -> Res<&'static T> {
    cell.get_or_init(init).as_ref().map_err(|e| GpuError::Unavailable(e.clone()))
}

/// The CUDA driver API, loaded and initialised (`cuInit`) once per process.
pub(crate) fn cuda() -> Res<&'static Cuda> {
    static LIB: OnceLock<Result<Cuda, String>> = OnceLock::new();
    loaded(&LIB, || {
        let cuda = Cuda { _lib: probe(CUDA_CUDARC_LIBS, CUDA_SONAMES, Cuda::SYMBOLS)? };
        // SAFETY: documented driver API entry point, flags must be 0.
        let rc = unsafe { cuda.cuInit(0) };
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
    loaded(&LIB, || Ok(Nvrtc { _lib: probe(NVRTC_CUDARC_LIBS, NVRTC_SONAMES, Nvrtc::SYMBOLS)? }))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_naming_it_not_a_panic() {
        let e = probe(&["slidestream_no_such_lib"], &["libslidestream_no_such_lib.so.0"], &["f"]).expect_err("no such library");
        assert!(e.contains("libslidestream_no_such_lib.so.0"), "{e}");
    }

    #[test]
    fn a_missing_symbol_is_an_error_naming_it() {
        // zlib stands in for a CUDA library: cudarc's name list for "z" includes libz.so.1.
        // SAFETY: loading the system zlib runs no unusual initialisers.
        if unsafe { Library::new("libz.so.1") }.is_err() {
            eprintln!("skipped: no libz.so.1");
            return;
        }
        assert!(probe(&["z"], &["libz.so.1"], &["inflate", "deflate"]).is_ok());
        let e = probe(&["z"], &["libz.so.1"], &["inflate", "slidestream_no_such_symbol"]).expect_err("missing symbol");
        assert!(e.contains("slidestream_no_such_symbol"), "{e}");
    }

    #[test]
    fn without_the_libraries_every_entry_point_is_unavailable() {
        // On a machine without CUDA (this check is a no-op where the libraries load).
        if probe(CUDA_CUDARC_LIBS, CUDA_SONAMES, &[]).is_err() {
            assert!(matches!(cuda(), Err(GpuError::Unavailable(_))));
            assert!(matches!(nvjpeg(), Err(GpuError::Unavailable(_))));
        }
        if probe(NVRTC_CUDARC_LIBS, NVRTC_SONAMES, &[]).is_err() {
            assert!(matches!(nvrtc(), Err(GpuError::Unavailable(_))));
        }
        if probe(CUFILE_CUDARC_LIBS, CUFILE_SONAMES, &[]).is_err() {
            assert!(cufile_probe().is_err());
        }
    }

    #[test]
    fn the_symbol_lists_name_the_versioned_entry_points() {
        // cuda.h maps these to their `_v2` symbols in CUDA 12 and 13; the unversioned names
        // are the CUDA 3.x ABI.
        for s in ["cuMemAlloc_v2", "cuMemFree_v2", "cuStreamDestroy_v2", "cuEventDestroy_v2", "cuDevicePrimaryCtxRelease_v2", "cuMemcpyHtoDAsync_v2"] {
            assert!(Cuda::SYMBOLS.contains(&s), "{s}");
        }
        // 28, + cuCtxGetCurrent (CurrentGuard), − cuStreamCreate + cuStreamCreateWithPriority,
        // cuCtxGetStreamPriorityRange, cuStreamGetPriority (stream priorities), + cuMemPoolCreate,
        // cuMemPoolDestroy, cuMemAllocFromPoolAsync (the output pool), + cuEventCreate,
        // cuEventRecord, cuEventSynchronize, cuEventDestroy_v2 (blocking waits), + cuCtxSynchronize
        // (a device resize of an array handed out without a stream).
        assert_eq!(Cuda::SYMBOLS.len(), 39);
        assert_eq!(Nvrtc::SYMBOLS.len(), 10);
        assert_eq!(CuFile::SYMBOLS.len(), 6);
    }
}
