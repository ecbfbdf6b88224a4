//! The CUDA driver API (`libcuda.so.1`, `cuda.h`): types, constants and the functions used.

use std::ffi::{c_char, c_int, c_uint, c_void};


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

/// `CU_STREAM_NON_BLOCKING`.
pub const CU_STREAM_NON_BLOCKING: c_uint = 1;
/// `CUctx_flags` scheduling values (cuda.h): spin, yield, or block on a synchronisation primitive.
pub const CU_CTX_SCHED_SPIN: c_uint = 1;
pub const CU_CTX_SCHED_YIELD: c_uint = 2;
pub const CU_CTX_SCHED_BLOCKING_SYNC: c_uint = 4;
/// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` (cuda.h `CUmemPool_attribute`).
pub const CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: c_int = 4;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` / `_MINOR`.
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
/// See above.
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

ffi_table!(
    /// The CUDA driver API functions slidestream uses.
    Cuda,
    ["libcuda.so.1", "libcuda.so"],
    {
        cuInit: unsafe extern "C" fn(c_uint) -> CUresult = "cuInit",
        cuDriverGetVersion: unsafe extern "C" fn(*mut c_int) -> CUresult = "cuDriverGetVersion",
        cuDeviceGetCount: unsafe extern "C" fn(*mut c_int) -> CUresult = "cuDeviceGetCount",
        cuDeviceGet: unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult = "cuDeviceGet",
        cuDeviceGetName: unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult = "cuDeviceGetName",
        cuDeviceGetAttribute: unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult = "cuDeviceGetAttribute",
        cuDevicePrimaryCtxRetain: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult = "cuDevicePrimaryCtxRetain",
        cuDevicePrimaryCtxRelease: unsafe extern "C" fn(CUdevice) -> CUresult = "cuDevicePrimaryCtxRelease_v2",
        cuDevicePrimaryCtxSetFlags: unsafe extern "C" fn(CUdevice, c_uint) -> CUresult = "cuDevicePrimaryCtxSetFlags_v2",
        cuCtxSetCurrent: unsafe extern "C" fn(CUcontext) -> CUresult = "cuCtxSetCurrent",
        cuMemAlloc: unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult = "cuMemAlloc_v2",
        cuMemFree: unsafe extern "C" fn(CUdeviceptr) -> CUresult = "cuMemFree_v2",
        cuMemcpyDtoH: unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize) -> CUresult = "cuMemcpyDtoH_v2",
        cuStreamCreate: unsafe extern "C" fn(*mut CUstream, c_uint) -> CUresult = "cuStreamCreate",
        cuStreamSynchronize: unsafe extern "C" fn(CUstream) -> CUresult = "cuStreamSynchronize",
        cuMemcpyHtoDAsync: unsafe extern "C" fn(CUdeviceptr, *const c_void, usize, CUstream) -> CUresult = "cuMemcpyHtoDAsync_v2",
        cuMemcpyDtoHAsync: unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize, CUstream) -> CUresult = "cuMemcpyDtoHAsync_v2",
        cuMemAllocHost: unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult = "cuMemAllocHost_v2",
        cuMemFreeHost: unsafe extern "C" fn(*mut c_void) -> CUresult = "cuMemFreeHost",
        cuMemAllocAsync: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult = "cuMemAllocAsync",
        cuMemFreeAsync: unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult = "cuMemFreeAsync",
        cuDeviceGetDefaultMemPool: unsafe extern "C" fn(*mut *mut c_void, CUdevice) -> CUresult = "cuDeviceGetDefaultMemPool",
        cuMemPoolSetAttribute: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> CUresult = "cuMemPoolSetAttribute",
        cuStreamDestroy: unsafe extern "C" fn(CUstream) -> CUresult = "cuStreamDestroy_v2",
        cuModuleLoadData: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CUresult = "cuModuleLoadData",
        cuModuleUnload: unsafe extern "C" fn(*mut c_void) -> CUresult = "cuModuleUnload",
        cuModuleGetFunction: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CUresult = "cuModuleGetFunction",
        cuLaunchKernel: unsafe extern "C" fn(*mut c_void, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CUstream, *mut *mut c_void, *mut *mut c_void) -> CUresult = "cuLaunchKernel",
    }
);
