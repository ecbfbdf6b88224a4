//! The CUDA driver API (`libcuda.so.1`, `cuda.h`): types, constants and the functions used,
//! called through cudarc's raw bindings (`cudarc::driver::sys`).

use std::ffi::{c_char, c_int, c_uint, c_void};

use cudarc::driver::sys as cu_sys;

/// `CUresult` (0 = success), as the numeric value of cudarc's `CUresult` enum.
pub type CUresult = c_int;
/// `CUdevice`.
pub type CUdevice = c_int;
/// `CUcontext`.
pub type CUcontext = *mut c_void;
/// `CUstream` (also `cudaStream_t`).
pub type CUstream = *mut c_void;
/// `CUdeviceptr`.
pub type CUdeviceptr = u64;
/// `CUevent`.
pub type CUevent = *mut c_void;
/// `CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING` (cuda.h `CUevent_flags`): a thread waiting
/// in `cuEventSynchronize` sleeps on a synchronisation primitive (whatever the context's
/// scheduling flag), and the event records no time.
pub const CU_EVENT_BLOCKING_SYNC_NO_TIMING: c_uint = 1 | 2;

/// `CU_STREAM_NON_BLOCKING`.
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CUctx_flags` scheduling values (cuda.h): spin, yield, or block on a synchronisation primitive.
pub const CU_CTX_SCHED_SPIN: c_uint = 1;
pub const CU_CTX_SCHED_YIELD: c_uint = 2;
pub const CU_CTX_SCHED_BLOCKING_SYNC: c_uint = 4;
/// `CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES` (cuda.h `CUmemPool_attribute`).
pub const CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: cu_sys::CUmemPool_attribute =
    cu_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
/// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` (cuda.h `CUmemPool_attribute`).
pub const CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: cu_sys::CUmemPool_attribute = cu_sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` / `_MINOR`.
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: cu_sys::CUdevice_attribute = cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR;
/// See above.
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: cu_sys::CUdevice_attribute = cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR;

/// The CUDA driver API functions slidestream uses. Exists only once [`super::probe`] found the
/// library cudarc opens and every symbol in [`Cuda::SYMBOLS`] in it (so no cudarc call can hit
/// its panicking loader); keeps that library loaded.
pub(crate) struct Cuda {
    pub(super) _lib: libloading::Library,
}

/// Library names cudarc's driver loader tries (through `get_lib_name_candidates`).
pub(super) const CUDA_CUDARC_LIBS: &[&str] = &["cuda", "nvcuda"];
/// Our own search names (also tried in the CUDA directories, see [`super::open_any`]).
pub(super) const CUDA_SONAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// `CUresult` as its number.
fn rc(r: cu_sys::CUresult) -> c_int {
    r as c_int
}

impl Cuda {
    shims!(cu_sys; {
        cuInit(flags: c_uint) -> c_int = cuInit, rc;
        cuDriverGetVersion(v: *mut c_int) -> c_int = cuDriverGetVersion, rc;
        cuDeviceGetCount(n: *mut c_int) -> c_int = cuDeviceGetCount, rc;
        cuDeviceGet(d: *mut CUdevice, ordinal: c_int) -> c_int = cuDeviceGet, rc;
        cuDeviceGetName(name: *mut c_char, len: c_int, d: CUdevice) -> c_int = cuDeviceGetName, rc;
        cuDeviceGetAttribute(v: *mut c_int, attr: cu_sys::CUdevice_attribute, d: CUdevice) -> c_int = cuDeviceGetAttribute, rc;
        cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, d: CUdevice) -> c_int = cuDevicePrimaryCtxRetain, rc;
        cuDevicePrimaryCtxRelease(d: CUdevice) -> c_int = cuDevicePrimaryCtxRelease_v2, rc;
        cuDevicePrimaryCtxSetFlags(d: CUdevice, flags: c_uint) -> c_int = cuDevicePrimaryCtxSetFlags_v2, rc;
        cuCtxSetCurrent(ctx: CUcontext) -> c_int = cuCtxSetCurrent, rc;
        cuCtxGetCurrent(ctx: *mut CUcontext) -> c_int = cuCtxGetCurrent, rc;
        cuCtxSynchronize() -> c_int = cuCtxSynchronize, rc;
        cuMemAlloc(p: *mut CUdeviceptr, n: usize) -> c_int = cuMemAlloc_v2, rc;
        cuMemFree(p: CUdeviceptr) -> c_int = cuMemFree_v2, rc;
        cuMemcpyDtoH(dst: *mut c_void, src: CUdeviceptr, n: usize) -> c_int = cuMemcpyDtoH_v2, rc;
        cuStreamCreateWithPriority(s: *mut CUstream, flags: c_uint, priority: c_int) -> c_int = cuStreamCreateWithPriority, rc;
        cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) -> c_int = cuCtxGetStreamPriorityRange, rc;
        cuStreamGetPriority(s: CUstream, priority: *mut c_int) -> c_int = cuStreamGetPriority, rc;
        cuStreamSynchronize(s: CUstream) -> c_int = cuStreamSynchronize, rc;
        cuEventCreate(e: *mut CUevent, flags: c_uint) -> c_int = cuEventCreate, rc;
        cuEventRecord(e: CUevent, s: CUstream) -> c_int = cuEventRecord, rc;
        cuEventSynchronize(e: CUevent) -> c_int = cuEventSynchronize, rc;
        cuEventDestroy(e: CUevent) -> c_int = cuEventDestroy_v2, rc;
        cuMemcpyHtoDAsync(dst: CUdeviceptr, src: *const c_void, n: usize, s: CUstream) -> c_int = cuMemcpyHtoDAsync_v2, rc;
        cuMemcpyDtoHAsync(dst: *mut c_void, src: CUdeviceptr, n: usize, s: CUstream) -> c_int = cuMemcpyDtoHAsync_v2, rc;
        cuMemAllocHost(p: *mut *mut c_void, n: usize) -> c_int = cuMemAllocHost_v2, rc;
        cuMemFreeHost(p: *mut c_void) -> c_int = cuMemFreeHost, rc;
        cuMemAllocAsync(p: *mut CUdeviceptr, n: usize, s: CUstream) -> c_int = cuMemAllocAsync, rc;
        cuMemFreeAsync(p: CUdeviceptr, s: CUstream) -> c_int = cuMemFreeAsync, rc;
        cuDeviceGetDefaultMemPool(pool: *mut *mut c_void, d: CUdevice) -> c_int = cuDeviceGetDefaultMemPool, rc;
        cuMemPoolSetAttribute(pool: *mut c_void, attr: cu_sys::CUmemPool_attribute, value: *mut c_void) -> c_int = cuMemPoolSetAttribute, rc;
        cuMemPoolCreate(pool: *mut *mut c_void, props: *const cu_sys::CUmemPoolProps) -> c_int = cuMemPoolCreate, rc;
        cuMemPoolDestroy(pool: *mut c_void) -> c_int = cuMemPoolDestroy, rc;
        cuMemAllocFromPoolAsync(p: *mut CUdeviceptr, n: usize, pool: *mut c_void, s: CUstream) -> c_int = cuMemAllocFromPoolAsync, rc;
        cuStreamDestroy(s: CUstream) -> c_int = cuStreamDestroy_v2, rc;
        cuModuleLoadData(m: *mut *mut c_void, image: *const c_void) -> c_int = cuModuleLoadData, rc;
        cuModuleUnload(m: *mut c_void) -> c_int = cuModuleUnload, rc;
        cuModuleGetFunction(f: *mut *mut c_void, m: *mut c_void, name: *const c_char) -> c_int = cuModuleGetFunction, rc;
        cuLaunchKernel(f: *mut c_void, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, shared: c_uint, s: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void) -> c_int = cuLaunchKernel, rc;
    });
}
