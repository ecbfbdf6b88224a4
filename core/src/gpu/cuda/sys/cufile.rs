//! cuFile / GPUDirect Storage (`libcufile.so.0`, `cufile.h`): types, constants and the
//! functions used, called through cudarc's raw bindings (`cudarc::cufile::sys`). Load only
//! after a CUDA device was found: without a GPU driver `cuFileDriverOpen` does not return
//! (measured on the lent H200).

use std::ffi::{c_int, c_void};

use cudarc::cufile::sys as cf_sys;

/// `CU_FILE_HANDLE_TYPE_OPAQUE_FD` (cufile.h).
pub const CU_FILE_HANDLE_TYPE_OPAQUE_FD: c_int = 1;

/// `CUfileError_t`: cuFile status and, for CUDA failures, the `CUresult` (as numbers).
#[derive(Debug, Clone, Copy)]
pub struct CUfileError {
    /// `CUfileOpError` (0 = `CU_FILE_SUCCESS`).
    pub err: c_int,
    /// `CUresult` when `err` is a CUDA driver error.
    pub cu_err: c_int,
}

/// `CUfileDescr_t`: handle type, the union of an fd and a Windows handle (8 bytes; the fd in
/// the low 4 bytes on little-endian targets), and the optional file-system operations. Same
/// layout as cudarc's `CUfileDescr_t` (checked by a test below).
#[repr(C)]
pub struct CUfileDescr {
    /// `CUfileFileHandleType`.
    pub handle_type: c_int,
    /// The `union { int fd; void *handle; }`.
    pub handle: usize,
    /// `const CUfileFSOps_t *` (NULL).
    pub fs_ops: *const c_void,
}

/// `CUfileError_t` as numbers.
fn fe(e: cf_sys::CUfileError_t) -> CUfileError {
    CUfileError { err: e.err as c_int, cu_err: e.cu_err as c_int }
}

/// `cuFileHandleDeregister` returns nothing.
fn unit(_: ()) {}

/// `cuFileRead`: bytes read, or a negative error.
fn n(r: isize) -> isize {
    r
}

/// The cuFile functions slidestream uses; exists only once [`super::probe`] found every symbol
/// in [`CuFile::SYMBOLS`] in the library cudarc opens.
pub(crate) struct CuFile {
    pub(super) _lib: libloading::Library,
}

/// Library name cudarc's cuFile loader tries (through `get_lib_name_candidates`).
pub(super) const CUFILE_CUDARC_LIBS: &[&str] = &["cufile"];
/// Our own search names (also tried in the CUDA directories).
pub(super) const CUFILE_SONAMES: &[&str] = &["libcufile.so.0", "libcufile.so"];

impl CuFile {
    shims!(cf_sys; {
        cuFileDriverOpen() -> CUfileError = cuFileDriverOpen, fe;
        cuFileHandleRegister(h: *mut *mut c_void, descr: *mut CUfileDescr) -> CUfileError = cuFileHandleRegister, fe;
        cuFileHandleDeregister(h: *mut c_void) -> () = cuFileHandleDeregister, unit;
        cuFileBufRegister(p: *const c_void, len: usize, flags: c_int) -> CUfileError = cuFileBufRegister, fe;
        cuFileBufDeregister(p: *const c_void) -> CUfileError = cuFileBufDeregister, fe;
        cuFileRead(h: *mut c_void, buf: *mut c_void, len: usize, file_off: i64, buf_off: i64) -> isize = cuFileRead, n;
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn descr_layout_matches_cudarc() {
        assert_eq!(std::mem::size_of::<super::CUfileDescr>(), std::mem::size_of::<super::cf_sys::CUfileDescr_t>());
        assert_eq!(std::mem::align_of::<super::CUfileDescr>(), std::mem::align_of::<super::cf_sys::CUfileDescr_t>());
    }
}
