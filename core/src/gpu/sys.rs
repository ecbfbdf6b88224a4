//! Run-time bindings to the CUDA driver API and nvJPEG (feature `cuda`).
//!
//! Libraries are opened with `libloading` at run time, so a `cuda` build runs on machines
//! without CUDA: [`Cuda::load`] and [`NvJpeg::load`] return an error naming what is missing
//! instead of panicking (cudarc's loader panics when a library is absent). Signatures follow
//! `cuda.h` (CUDA 13) and `nvjpeg.h` (nvJPEG 13); only the functions slidestream calls are bound.
//! Library search order (DESIGN.md): the plain soname, then `$CUDA_HOME/lib64`,
//! `/usr/local/cuda/lib64`, `/usr/local/cuda-*/targets/x86_64-linux/lib`.

// Fields are the C functions of the same name (documented in cuda.h / nvjpeg.h).
#![allow(non_camel_case_types, non_snake_case, missing_docs)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::path::PathBuf;

use libloading::Library;

/// `CUresult` (0 = success).
pub type CUresult = c_int;
/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUcontext`.
pub type CUcontext = *mut c_void;
/// `CUstream` (also `cudaStream_t`).
pub type CUstream = *mut c_void;
/// `CUdeviceptr`.
pub type CUdeviceptr = u64;
/// `nvjpegStatus_t` (0 = success).
pub type nvjpegStatus = c_int;
/// `nvjpegHandle_t`.
pub type nvjpegHandle = *mut c_void;
/// `nvjpegJpegState_t`.
pub type nvjpegJpegState = *mut c_void;

/// `NVJPEG_BACKEND_HARDWARE`.
pub const NVJPEG_BACKEND_HARDWARE: c_int = 3;
/// `NVJPEG_BACKEND_DEFAULT`.
pub const NVJPEG_BACKEND_DEFAULT: c_int = 0;
/// `NVJPEG_BACKEND_GPU_HYBRID_DEVICE`: `nvjpegDecodeBatched` takes bitstreams in device memory.
pub const NVJPEG_BACKEND_GPU_HYBRID_DEVICE: c_int = 4;
/// `NVJPEG_BACKEND_HARDWARE_DEVICE`: hardware engines, bitstreams in device memory.
pub const NVJPEG_BACKEND_HARDWARE_DEVICE: c_int = 5;
/// `nvjpegChromaSubsampling_t` values (nvjpeg.h).
pub const NVJPEG_CSS_444: c_int = 0;
/// See above.
pub const NVJPEG_CSS_422: c_int = 1;
/// See above.
pub const NVJPEG_CSS_420: c_int = 2;
/// See above.
pub const NVJPEG_CSS_440: c_int = 3;
/// `CU_STREAM_NON_BLOCKING`.
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CUctx_flags` scheduling values (cuda.h): spin, yield, or block on a synchronisation primitive.
pub const CU_CTX_SCHED_SPIN: c_uint = 1;
pub const CU_CTX_SCHED_YIELD: c_uint = 2;
pub const CU_CTX_SCHED_BLOCKING_SYNC: c_uint = 4;
/// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` (cuda.h `CUmemPool_attribute`).
pub const CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: c_int = 4;
/// `CU_FILE_HANDLE_TYPE_OPAQUE_FD` (cufile.h).
pub const CU_FILE_HANDLE_TYPE_OPAQUE_FD: c_int = 1;

/// `CUfileError_t`: cuFile status and, for CUDA failures, the `CUresult`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUfileError {
    /// `CUfileOpError` (0 = `CU_FILE_SUCCESS`).
    pub err: c_int,
    /// `CUresult` when `err` is a CUDA driver error.
    pub cu_err: c_int,
}

/// `CUfileDescr_t`: handle type, the union of an fd and a Windows handle (8 bytes; the fd in
/// the low 4 bytes on little-endian x86-64), and the optional file-system operations.
#[repr(C)]
pub struct CUfileDescr {
    /// `CUfileFileHandleType`.
    pub handle_type: c_int,
    /// The `union { int fd; void *handle; }`.
    pub handle: usize,
    /// `const CUfileFSOps_t *` (NULL).
    pub fs_ops: *const c_void,
}
/// `NVJPEG_OUTPUT_UNCHANGED`: planar components exactly as coded (no colour transform).
pub const NVJPEG_OUTPUT_UNCHANGED: c_int = 0;
/// `NVJPEG_OUTPUT_YUV`: planar Y, Cb, Cr (chroma at its coded resolution), no colour transform.
pub const NVJPEG_OUTPUT_YUV: c_int = 1;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` / `_MINOR`.
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
/// See above.
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// `nvjpegImage_t`: up to four planes with their pitches.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nvjpegImage {
    /// Plane pointers (device memory).
    pub channel: [*mut u8; 4],
    /// Plane pitches in bytes.
    pub pitch: [usize; 4],
}

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

fn open_any(names: &[&str]) -> Result<Library, String> {
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

macro_rules! bind {
    ($lib:expr, $name:literal) => {{
        // SAFETY: the symbol is looked up by its documented name and cast to the documented
        // signature of the field it is stored in.
        *unsafe { $lib.get($name.as_bytes()) }.map_err(|e| format!("{}: {e}", $name))?
    }};
}

/// The CUDA driver API functions slidestream uses.
pub struct Cuda {
    _lib: Library,
    pub cuInit: unsafe extern "C" fn(c_uint) -> CUresult,
    pub cuDriverGetVersion: unsafe extern "C" fn(*mut c_int) -> CUresult,
    pub cuDeviceGetCount: unsafe extern "C" fn(*mut c_int) -> CUresult,
    pub cuDeviceGet: unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult,
    pub cuDeviceGetName: unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult,
    pub cuDeviceGetAttribute: unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult,
    pub cuDevicePrimaryCtxRetain: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
    pub cuDevicePrimaryCtxSetFlags: unsafe extern "C" fn(CUdevice, c_uint) -> CUresult,
    pub cuCtxSetCurrent: unsafe extern "C" fn(CUcontext) -> CUresult,
    pub cuMemAlloc: unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult,
    pub cuMemFree: unsafe extern "C" fn(CUdeviceptr) -> CUresult,
    pub cuMemcpyDtoH: unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize) -> CUresult,
    pub cuStreamCreate: unsafe extern "C" fn(*mut CUstream, c_uint) -> CUresult,
    pub cuStreamSynchronize: unsafe extern "C" fn(CUstream) -> CUresult,
    pub cuMemcpyHtoD: unsafe extern "C" fn(CUdeviceptr, *const c_void, usize) -> CUresult,
    pub cuMemcpyHtoDAsync: unsafe extern "C" fn(CUdeviceptr, *const c_void, usize, CUstream) -> CUresult,
    pub cuMemcpyDtoHAsync: unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize, CUstream) -> CUresult,
    pub cuMemAllocHost: unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult,
    pub cuMemFreeHost: unsafe extern "C" fn(*mut c_void) -> CUresult,
    pub cuMemAllocAsync: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult,
    pub cuMemFreeAsync: unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult,
    pub cuDeviceGetDefaultMemPool: unsafe extern "C" fn(*mut *mut c_void, CUdevice) -> CUresult,
    pub cuMemPoolSetAttribute: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> CUresult,
    pub cuStreamDestroy: unsafe extern "C" fn(CUstream) -> CUresult,
    pub cuModuleLoadData: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CUresult,
    pub cuModuleGetFunction: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CUresult,
    pub cuLaunchKernel: unsafe extern "C" fn(
        *mut c_void,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        CUstream,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CUresult,
}

impl Cuda {
    /// Load `libcuda.so.1` and bind the functions.
    ///
    /// # Errors
    /// A message naming the missing library or symbol.
    pub fn load() -> Result<Cuda, String> {
        let lib = open_any(&["libcuda.so.1", "libcuda.so"])?;
        Ok(Cuda {
            cuInit: bind!(lib, "cuInit"),
            cuDriverGetVersion: bind!(lib, "cuDriverGetVersion"),
            cuDeviceGetCount: bind!(lib, "cuDeviceGetCount"),
            cuDeviceGet: bind!(lib, "cuDeviceGet"),
            cuDeviceGetName: bind!(lib, "cuDeviceGetName"),
            cuDeviceGetAttribute: bind!(lib, "cuDeviceGetAttribute"),
            cuDevicePrimaryCtxRetain: bind!(lib, "cuDevicePrimaryCtxRetain"),
            cuDevicePrimaryCtxSetFlags: bind!(lib, "cuDevicePrimaryCtxSetFlags_v2"),
            cuCtxSetCurrent: bind!(lib, "cuCtxSetCurrent"),
            cuMemAlloc: bind!(lib, "cuMemAlloc_v2"),
            cuMemFree: bind!(lib, "cuMemFree_v2"),
            cuMemcpyDtoH: bind!(lib, "cuMemcpyDtoH_v2"),
            cuStreamCreate: bind!(lib, "cuStreamCreate"),
            cuStreamSynchronize: bind!(lib, "cuStreamSynchronize"),
            cuMemcpyHtoD: bind!(lib, "cuMemcpyHtoD_v2"),
            cuMemcpyHtoDAsync: bind!(lib, "cuMemcpyHtoDAsync_v2"),
            cuMemcpyDtoHAsync: bind!(lib, "cuMemcpyDtoHAsync_v2"),
            cuMemAllocHost: bind!(lib, "cuMemAllocHost_v2"),
            cuMemFreeHost: bind!(lib, "cuMemFreeHost"),
            cuMemAllocAsync: bind!(lib, "cuMemAllocAsync"),
            cuMemFreeAsync: bind!(lib, "cuMemFreeAsync"),
            cuDeviceGetDefaultMemPool: bind!(lib, "cuDeviceGetDefaultMemPool"),
            cuMemPoolSetAttribute: bind!(lib, "cuMemPoolSetAttribute"),
            cuStreamDestroy: bind!(lib, "cuStreamDestroy_v2"),
            cuModuleLoadData: bind!(lib, "cuModuleLoadData"),
            cuModuleGetFunction: bind!(lib, "cuModuleGetFunction"),
            cuLaunchKernel: bind!(lib, "cuLaunchKernel"),
            _lib: lib,
        })
    }
}

/// The nvJPEG functions slidestream uses.
pub struct NvJpeg {
    _lib: Library,
    pub nvjpegGetProperty: unsafe extern "C" fn(c_int, *mut c_int) -> nvjpegStatus,
    pub nvjpegCreateEx: unsafe extern "C" fn(c_int, *mut c_void, *mut c_void, c_uint, *mut nvjpegHandle) -> nvjpegStatus,
    pub nvjpegDestroy: unsafe extern "C" fn(nvjpegHandle) -> nvjpegStatus,
    pub nvjpegGetHardwareDecoderInfo: unsafe extern "C" fn(nvjpegHandle, *mut c_uint, *mut c_uint) -> nvjpegStatus,
    pub nvjpegJpegStateCreate: unsafe extern "C" fn(nvjpegHandle, *mut nvjpegJpegState) -> nvjpegStatus,
    pub nvjpegJpegStateDestroy: unsafe extern "C" fn(nvjpegJpegState) -> nvjpegStatus,
    pub nvjpegGetImageInfo:
        unsafe extern "C" fn(nvjpegHandle, *const u8, usize, *mut c_int, *mut c_int, *mut c_int, *mut c_int) -> nvjpegStatus,
    pub nvjpegDecodeBatchedInitialize: unsafe extern "C" fn(nvjpegHandle, nvjpegJpegState, c_int, c_int, c_int) -> nvjpegStatus,
    pub nvjpegDecodeBatched: unsafe extern "C" fn(
        nvjpegHandle,
        nvjpegJpegState,
        *const *const u8,
        *const usize,
        *mut nvjpegImage,
        CUstream,
    ) -> nvjpegStatus,
}

impl NvJpeg {
    /// Load `libnvjpeg.so.13` (or another soname) and bind the functions.
    ///
    /// # Errors
    /// A message naming the missing library or symbol.
    pub fn load() -> Result<NvJpeg, String> {
        let lib = open_any(&["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"])?;
        Ok(NvJpeg {
            nvjpegGetProperty: bind!(lib, "nvjpegGetProperty"),
            nvjpegCreateEx: bind!(lib, "nvjpegCreateEx"),
            nvjpegDestroy: bind!(lib, "nvjpegDestroy"),
            nvjpegGetHardwareDecoderInfo: bind!(lib, "nvjpegGetHardwareDecoderInfo"),
            nvjpegJpegStateCreate: bind!(lib, "nvjpegJpegStateCreate"),
            nvjpegJpegStateDestroy: bind!(lib, "nvjpegJpegStateDestroy"),
            nvjpegGetImageInfo: bind!(lib, "nvjpegGetImageInfo"),
            nvjpegDecodeBatchedInitialize: bind!(lib, "nvjpegDecodeBatchedInitialize"),
            nvjpegDecodeBatched: bind!(lib, "nvjpegDecodeBatched"),
            _lib: lib,
        })
    }
}

/// The NVRTC functions slidestream uses (run-time compilation of its kernels to PTX).
pub struct Nvrtc {
    _lib: Library,
    pub nvrtcCreateProgram: unsafe extern "C" fn(
        *mut *mut c_void,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    pub nvrtcCompileProgram: unsafe extern "C" fn(*mut c_void, c_int, *const *const c_char) -> c_int,
    pub nvrtcGetPTXSize: unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int,
    pub nvrtcGetPTX: unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int,
    pub nvrtcGetProgramLogSize: unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int,
    pub nvrtcGetProgramLog: unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int,
    pub nvrtcDestroyProgram: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
}

impl Nvrtc {
    /// Load `libnvrtc.so.13` (or another soname) and bind the functions.
    ///
    /// # Errors
    /// A message naming the missing library or symbol.
    pub fn load() -> Result<Nvrtc, String> {
        let lib = open_any(&["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"])?;
        Ok(Nvrtc {
            nvrtcCreateProgram: bind!(lib, "nvrtcCreateProgram"),
            nvrtcCompileProgram: bind!(lib, "nvrtcCompileProgram"),
            nvrtcGetPTXSize: bind!(lib, "nvrtcGetPTXSize"),
            nvrtcGetPTX: bind!(lib, "nvrtcGetPTX"),
            nvrtcGetProgramLogSize: bind!(lib, "nvrtcGetProgramLogSize"),
            nvrtcGetProgramLog: bind!(lib, "nvrtcGetProgramLog"),
            nvrtcDestroyProgram: bind!(lib, "nvrtcDestroyProgram"),
            _lib: lib,
        })
    }
}

/// The cuFile (GPUDirect Storage) functions slidestream uses (`libcufile.so.0`).
pub struct CuFile {
    _lib: Library,
    pub cuFileDriverOpen: unsafe extern "C" fn() -> CUfileError,
    pub cuFileHandleRegister: unsafe extern "C" fn(*mut *mut c_void, *mut CUfileDescr) -> CUfileError,
    pub cuFileHandleDeregister: unsafe extern "C" fn(*mut c_void),
    pub cuFileBufRegister: unsafe extern "C" fn(*const c_void, usize, c_int) -> CUfileError,
    pub cuFileBufDeregister: unsafe extern "C" fn(*const c_void) -> CUfileError,
    pub cuFileRead: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, i64, i64) -> isize,
}

impl CuFile {
    /// Load `libcufile.so.0` and bind the functions. Call only after a CUDA device was found:
    /// without a GPU driver `cuFileDriverOpen` does not return (measured on the lent H200).
    ///
    /// # Errors
    /// A message naming the missing library or symbol.
    pub fn load() -> Result<CuFile, String> {
        let lib = open_any(&["libcufile.so.0", "libcufile.so"])?;
        Ok(CuFile {
            cuFileDriverOpen: bind!(lib, "cuFileDriverOpen"),
            cuFileHandleRegister: bind!(lib, "cuFileHandleRegister"),
            cuFileHandleDeregister: bind!(lib, "cuFileHandleDeregister"),
            cuFileBufRegister: bind!(lib, "cuFileBufRegister"),
            cuFileBufDeregister: bind!(lib, "cuFileBufDeregister"),
            cuFileRead: bind!(lib, "cuFileRead"),
            _lib: lib,
        })
    }
}
