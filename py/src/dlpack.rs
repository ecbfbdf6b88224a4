//! DLPack 0.8 ABI (`dlpack.h`): the unversioned `DLManagedTensor` exchanged in a PyCapsule
//! named `"dltensor"`, as `DeviceArray.__dlpack__` exports it, and (feature `test-hooks` only)
//! the test hooks that build the same capsule over host memory (so the capsule protocol is
//! testable without a GPU).

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;

/// `kDLCPU`.
pub const KDL_CPU: i32 = 1;
/// `kDLCUDA`.
pub const KDL_CUDA: i32 = 2;
/// `kDLUInt`.
const KDL_UINT: u8 = 1;
/// Capsule name of an unconsumed tensor; consumers rename it `"used_dltensor"`.
const NAME: &CStr = c"dltensor";

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    /// Null: compact row-major.
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// What `manager_ctx` points at: the tensor itself (first field, so the two pointers are
/// equal), its shape array and whatever keeps the data alive.
#[repr(C)]
struct Holder<T> {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    _owner: T,
}

unsafe extern "C" fn deleter<T>(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    // SAFETY: `m` was made by `managed::<T>` (manager_ctx = the boxed Holder<T>) and
    // DLPack calls the deleter exactly once.
    unsafe { drop(Box::from_raw((*m).manager_ctx as *mut Holder<T>)) };
}

/// A `DLManagedTensor` of `u8` elements, compact row-major, viewing `data` (kept valid by
/// `owner`, dropped by the deleter, on whatever thread the consumer calls it from).
/// Ownership passes to the caller: hand it to [`capsule`] or call its deleter.
pub fn managed<T: Send + 'static>(data: *mut c_void, device: DLDevice, shape: &[usize], owner: T) -> *mut DLManagedTensor {
    let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let mut holder = Box::new(Holder {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data,
                device,
                ndim: shape.len() as i32,
                dtype: DLDataType { code: KDL_UINT, bits: 8, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter::<T>),
        },
        shape,
        _owner: owner,
    });
    // The Vec's buffer does not move with the Box.
    holder.managed.dl_tensor.shape = holder.shape.as_mut_ptr();
    let raw = Box::into_raw(holder);
    // SAFETY: raw is a valid, uniquely owned Holder<T>.
    unsafe { (*raw).managed.manager_ctx = raw as *mut c_void };
    raw as *mut DLManagedTensor
}

/// Capsule destructor: frees the tensor only when no consumer took it (a consumer renames
/// the capsule to `"used_dltensor"` and calls the deleter itself when done).
unsafe extern "C" fn capsule_destructor(cap: *mut ffi::PyObject) {
    // SAFETY: called by CPython with a live capsule; IsValid never sets an exception and
    // GetPointer with the matching name cannot fail.
    unsafe {
        if ffi::PyCapsule_IsValid(cap, NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(cap, NAME.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

/// Wrap a tensor from [`managed`] in a `"dltensor"` capsule (frees it on failure).
pub fn capsule(py: Python<'_>, m: *mut DLManagedTensor) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: m is a valid DLManagedTensor owned by us; the capsule takes it over.
    unsafe {
        let cap = ffi::PyCapsule_New(m as *mut c_void, NAME.as_ptr(), Some(capsule_destructor));
        if cap.is_null() {
            if let Some(d) = (*m).deleter {
                d(m);
            }
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap))
    }
}

/// Times a `_test_cpu_dlpack` tensor has been freed (test hook).
#[cfg(feature = "test-hooks")]
static TEST_RELEASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(feature = "test-hooks")]
struct TestOwner(#[allow(dead_code)] Vec<u8>);
#[cfg(feature = "test-hooks")]
impl Drop for TestOwner {
    fn drop(&mut self) {
        TEST_RELEASES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Test hook: a DLPack capsule built exactly as `DeviceArray.__dlpack__` builds one, but over
/// host memory (kDLCPU) holding `i % 251` at flat index `i`, so the capsule protocol (names,
/// deleter, ownership) can be checked with numpy on machines without a GPU.
#[cfg(feature = "test-hooks")]
#[pyfunction(name = "_test_cpu_dlpack")]
pub(crate) fn test_cpu_dlpack<'py>(py: Python<'py>, shape: Vec<usize>) -> PyResult<Bound<'py, PyAny>> {
    let n: usize = shape.iter().product();
    let mut data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let ptr = data.as_mut_ptr() as *mut c_void;
    let m = managed(ptr, DLDevice { device_type: KDL_CPU, device_id: 0 }, &shape, TestOwner(data));
    capsule(py, m)
}

/// Test hook: how many `_test_cpu_dlpack` tensors have been freed so far.
#[cfg(feature = "test-hooks")]
#[pyfunction(name = "_test_cpu_dlpack_releases")]
pub(crate) fn test_cpu_dlpack_releases() -> u64 {
    TEST_RELEASES.load(std::sync::atomic::Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn deleter_frees_the_owner_once_and_layout_is_dlpack() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut data = vec![7u8; 24];
        let m = managed(data.as_mut_ptr() as *mut c_void, DLDevice { device_type: KDL_CUDA, device_id: 3 }, &[2, 3, 4], Counted(drops.clone()));
        // SAFETY: m is valid until its deleter runs.
        unsafe {
            let t = &(*m).dl_tensor;
            assert_eq!(t.ndim, 3);
            assert_eq!(std::slice::from_raw_parts(t.shape, 3), &[2, 3, 4]);
            assert!(t.strides.is_null());
            assert_eq!((t.dtype.code, t.dtype.bits, t.dtype.lanes), (1, 8, 1));
            assert_eq!(t.device, DLDevice { device_type: 2, device_id: 3 });
            assert_eq!((*m).manager_ctx, m as *mut c_void);
            assert_eq!(drops.load(Ordering::SeqCst), 0);
            ((*m).deleter.unwrap())(m);
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        // ABI sizes of dlpack.h on 64-bit targets.
        assert_eq!(std::mem::size_of::<DLTensor>(), 48);
        assert_eq!(std::mem::size_of::<DLManagedTensor>(), 64);
    }
}
