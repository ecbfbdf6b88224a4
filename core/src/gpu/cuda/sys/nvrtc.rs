//! NVRTC (`libnvrtc.so.13|12`, `nvrtc.h`): run-time compilation of the kernels to a cubin (or
//! PTX), called through cudarc's raw bindings (`cudarc::nvrtc::sys`).

use std::ffi::{c_char, c_int, c_void};

use cudarc::nvrtc::sys as rtc_sys;

/// The NVRTC functions slidestream uses; exists only once [`super::probe`] found every symbol
/// in [`Nvrtc::SYMBOLS`] in the library cudarc opens. Results are `nvrtcResult` as a number.
pub(crate) struct Nvrtc {
    pub(super) _lib: libloading::Library,
}

/// Library name cudarc's NVRTC loader tries (through `get_lib_name_candidates`).
pub(super) const NVRTC_CUDARC_LIBS: &[&str] = &["nvrtc"];
/// Our own search names (also tried in the CUDA directories).
pub(super) const NVRTC_SONAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

/// `nvrtcResult` as its number.
fn rc(r: rtc_sys::nvrtcResult) -> c_int {
    r as c_int
}

impl Nvrtc {
    shims!(rtc_sys; {
        nvrtcCreateProgram(p: *mut *mut c_void, src: *const c_char, name: *const c_char, n: c_int, headers: *const *const c_char, names: *const *const c_char) -> c_int = nvrtcCreateProgram, rc;
        nvrtcCompileProgram(p: *mut c_void, n: c_int, opts: *const *const c_char) -> c_int = nvrtcCompileProgram, rc;
        nvrtcGetPTXSize(p: *mut c_void, n: *mut usize) -> c_int = nvrtcGetPTXSize, rc;
        nvrtcGetPTX(p: *mut c_void, out: *mut c_char) -> c_int = nvrtcGetPTX, rc;
        nvrtcGetProgramLogSize(p: *mut c_void, n: *mut usize) -> c_int = nvrtcGetProgramLogSize, rc;
        nvrtcGetProgramLog(p: *mut c_void, out: *mut c_char) -> c_int = nvrtcGetProgramLog, rc;
        nvrtcDestroyProgram(p: *mut *mut c_void) -> c_int = nvrtcDestroyProgram, rc;
        nvrtcVersion(major: *mut c_int, minor: *mut c_int) -> c_int = nvrtcVersion, rc;
        nvrtcGetCUBINSize(p: *mut c_void, n: *mut usize) -> c_int = nvrtcGetCUBINSize, rc;
        nvrtcGetCUBIN(p: *mut c_void, out: *mut c_char) -> c_int = nvrtcGetCUBIN, rc;
    });
}
