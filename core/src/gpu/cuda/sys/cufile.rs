//! cuFile / GPUDirect Storage (`libcufile.so.0`, `cufile.h`): types, constants and the
//! functions used. Load only after a CUDA device was found: without a GPU driver
//! `cuFileDriverOpen` does not return (measured on the lent H200).

use std::ffi::{c_int, c_void};


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
/// the low 4 bytes on little-endian targets), and the optional file-system operations.
#[repr(C)]
pub struct CUfileDescr {
    /// `CUfileFileHandleType`.
    pub handle_type: c_int,
    /// The `union { int fd; void *handle; }`.
    pub handle: usize,
    /// `const CUfileFSOps_t *` (NULL).
    pub fs_ops: *const c_void,
}

ffi_table!(
    /// The cuFile functions slidestream uses.
    CuFile,
    ["libcufile.so.0", "libcufile.so"],
    {
        cuFileDriverOpen: unsafe extern "C" fn() -> CUfileError = "cuFileDriverOpen",
        cuFileHandleRegister: unsafe extern "C" fn(*mut *mut c_void, *mut CUfileDescr) -> CUfileError = "cuFileHandleRegister",
        cuFileHandleDeregister: unsafe extern "C" fn(*mut c_void) = "cuFileHandleDeregister",
        cuFileBufRegister: unsafe extern "C" fn(*const c_void, usize, c_int) -> CUfileError = "cuFileBufRegister",
        cuFileBufDeregister: unsafe extern "C" fn(*const c_void) -> CUfileError = "cuFileBufDeregister",
        cuFileRead: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, i64, i64) -> isize = "cuFileRead",
    }
);
