//! nvJPEG (`libnvjpeg.so.13|12`, `nvjpeg.h`): types, constants and the functions used.

use std::ffi::{c_int, c_uint, c_void};

use super::CUstream;

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
/// `NVJPEG_OUTPUT_UNCHANGED`: planar components exactly as coded (no colour transform).
pub const NVJPEG_OUTPUT_UNCHANGED: c_int = 0;
/// `NVJPEG_OUTPUT_YUV`: planar Y, Cb, Cr (chroma at its coded resolution), no colour transform.
pub const NVJPEG_OUTPUT_YUV: c_int = 1;

/// `nvjpegImage_t`: up to four planes with their pitches.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nvjpegImage {
    /// Plane pointers (device memory).
    pub channel: [*mut u8; 4],
    /// Plane pitches in bytes.
    pub pitch: [usize; 4],
}

ffi_table!(
    /// The nvJPEG functions slidestream uses.
    NvJpeg,
    ["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"],
    {
        nvjpegGetProperty: unsafe extern "C" fn(c_int, *mut c_int) -> nvjpegStatus = "nvjpegGetProperty",
        nvjpegCreateEx: unsafe extern "C" fn(c_int, *mut c_void, *mut c_void, c_uint, *mut nvjpegHandle) -> nvjpegStatus = "nvjpegCreateEx",
        nvjpegDestroy: unsafe extern "C" fn(nvjpegHandle) -> nvjpegStatus = "nvjpegDestroy",
        nvjpegGetHardwareDecoderInfo: unsafe extern "C" fn(nvjpegHandle, *mut c_uint, *mut c_uint) -> nvjpegStatus = "nvjpegGetHardwareDecoderInfo",
        nvjpegJpegStateCreate: unsafe extern "C" fn(nvjpegHandle, *mut nvjpegJpegState) -> nvjpegStatus = "nvjpegJpegStateCreate",
        nvjpegJpegStateDestroy: unsafe extern "C" fn(nvjpegJpegState) -> nvjpegStatus = "nvjpegJpegStateDestroy",
        nvjpegGetImageInfo: unsafe extern "C" fn(nvjpegHandle, *const u8, usize, *mut c_int, *mut c_int, *mut c_int, *mut c_int) -> nvjpegStatus = "nvjpegGetImageInfo",
        nvjpegDecodeBatchedInitialize: unsafe extern "C" fn(nvjpegHandle, nvjpegJpegState, c_int, c_int, c_int) -> nvjpegStatus = "nvjpegDecodeBatchedInitialize",
        nvjpegDecodeBatched: unsafe extern "C" fn(nvjpegHandle, nvjpegJpegState, *const *const u8, *const usize, *mut nvjpegImage, CUstream) -> nvjpegStatus = "nvjpegDecodeBatched",
    }
);

/// `tDevMallocV2` / `tPinnedMallocV2` (nvjpeg.h): `(ctx, &ptr, size, stream)`, 0 = success.
pub type nvjpegMallocV2 = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, usize, CUstream) -> c_int;
/// `tDevFreeV2` / `tPinnedFreeV2` (nvjpeg.h): `(ctx, ptr, size, stream)`, 0 = success.
pub type nvjpegFreeV2 = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, CUstream) -> c_int;

/// `nvjpegDevAllocatorV2_t` and `nvjpegPinnedAllocatorV2_t` (nvjpeg.h; same layout): the
/// allocation and free functions and the context passed to both.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nvjpegAllocatorV2 {
    /// `dev_malloc` / `pinned_malloc`.
    pub malloc: nvjpegMallocV2,
    /// `dev_free` / `pinned_free`.
    pub free: nvjpegFreeV2,
    /// `dev_ctx` / `pinned_ctx`.
    pub ctx: *mut c_void,
}

/// `nvjpegCreateExV2(backend, dev_allocator, pinned_allocator, flags, &handle)`.
pub type nvjpegCreateExV2Fn = unsafe extern "C" fn(c_int, *mut nvjpegAllocatorV2, *mut nvjpegAllocatorV2, c_uint, *mut nvjpegHandle) -> nvjpegStatus;

impl NvJpeg {
    /// `nvjpegCreateExV2`, when this nvJPEG has it (nvJPEG 12.1 and later), else `None`.
    pub fn create_ex_v2(&self) -> Option<nvjpegCreateExV2Fn> {
        // SAFETY: looked up by its documented name and used with the nvjpeg.h signature; the
        // library stays loaded as long as the table.
        unsafe { self._lib.get::<nvjpegCreateExV2Fn>(b"nvjpegCreateExV2") }.ok().map(|s| *s)
    }
}
