//! NVRTC (`libnvrtc.so.13|12`, `nvrtc.h`): run-time compilation of the kernels to PTX.

use std::ffi::{c_char, c_int, c_void};


ffi_table!(
    /// The NVRTC functions slidestream uses.
    Nvrtc,
    ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"],
    {
        nvrtcCreateProgram: unsafe extern "C" fn(*mut *mut c_void, *const c_char, *const c_char, c_int, *const *const c_char, *const *const c_char) -> c_int = "nvrtcCreateProgram",
        nvrtcCompileProgram: unsafe extern "C" fn(*mut c_void, c_int, *const *const c_char) -> c_int = "nvrtcCompileProgram",
        nvrtcGetPTXSize: unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int = "nvrtcGetPTXSize",
        nvrtcGetPTX: unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int = "nvrtcGetPTX",
        nvrtcGetProgramLogSize: unsafe extern "C" fn(*mut c_void, *mut usize) -> c_int = "nvrtcGetProgramLogSize",
        nvrtcGetProgramLog: unsafe extern "C" fn(*mut c_void, *mut c_char) -> c_int = "nvrtcGetProgramLog",
        nvrtcDestroyProgram: unsafe extern "C" fn(*mut *mut c_void) -> c_int = "nvrtcDestroyProgram",
    }
);
