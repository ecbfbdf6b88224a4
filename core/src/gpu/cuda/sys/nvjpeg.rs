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
