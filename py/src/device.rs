//! Device results (`device=` reads): the `slidestream.DeviceArray` class (CUDA Array Interface
//! v3 and DLPack), parsing of `device=` arguments, and the GPU module functions
//! (`cuda_available`, `gpu_probe`, `gpu_stats`, `gpu_reset_stats`, `gpu_clear_cache`).
//!
//! The extension is always built with the core's `cuda` feature: CUDA, nvJPEG and cuFile are
//! loaded at run time, so the same wheel runs on machines without a GPU, where device reads
//! raise `slidestream.GpuUnavailableError`.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use numpy::{PyArrayDescr, PyArrayDyn};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};
use slidestream::error::GpuError;
use slidestream::gpu::{self, DeviceArray};
use slidestream::Error;

use crate::to_py;

/// DLPack 0.8 ABI (`dlpack.h`): the unversioned `DLManagedTensor` exchanged in a PyCapsule
/// named `"dltensor"`.
pub(crate) mod dlpack {
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
}

/// Parse a `device=` argument: `None` / `"cpu"` / a `torch.device` of type `cpu` → `None`
/// (the CPU path); `"cuda"` → 0; `"cuda:N"`, an int `N >= 0`, or an object with
/// `.type == "cuda"` and `.index` (a `torch.device`; index `None` → 0) → `Some(N)`.
///
/// Malformed strings, negative ordinals and other device types raise `ValueError`; objects of
/// other types raise `TypeError`.
pub(crate) fn parse_device(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    let Some(obj) = obj else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    let bad = |what: String| PyValueError::new_err(format!("invalid device {what}: expected None, 'cpu', 'cuda', 'cuda:N', an int N >= 0 or a torch.device"));
    if obj.is_instance_of::<PyBool>() {
        return Err(bad(obj.repr()?.to_string()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let text: String = s.extract()?;
        let bad_str = || -> PyResult<PyErr> { Ok(bad(s.repr()?.to_string())) };
        return match text.as_str() {
            "cpu" => Ok(None),
            "cuda" => Ok(Some(0)),
            t => match t.strip_prefix("cuda:") {
                Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => match n.parse::<usize>() {
                    Ok(v) => Ok(Some(v)),
                    Err(_) => Err(bad_str()?),
                },
                _ => Err(bad_str()?),
            },
        };
    }
    // Python ints and anything with __index__ (numpy integers).
    if let Ok(i) = obj.extract::<i64>() {
        return usize::try_from(i).map(Some).map_err(|_| bad(i.to_string()));
    }
    if let (Ok(t), Ok(idx)) = (obj.getattr("type"), obj.getattr("index")) {
        if let (Ok(t), Ok(idx)) = (t.extract::<String>(), idx.extract::<Option<i64>>()) {
            return match (t.as_str(), idx) {
                ("cpu", _) => Ok(None),
                ("cuda", None) => Ok(Some(0)),
                ("cuda", Some(i)) if i >= 0 => Ok(Some(i as usize)),
                _ => Err(bad(obj.repr()?.to_string())),
            };
        }
    }
    Err(PyTypeError::new_err(format!("device must be None, a str, an int or a torch.device, got {}", obj.get_type().name()?)))
}

/// A device argument that must name a CUDA device (the GPU module functions).
fn cuda_ordinal(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    parse_device(Some(obj))?.ok_or_else(|| PyValueError::new_err("this function needs a CUDA device ('cuda', 'cuda:N' or an int N), not the CPU"))
}

/// Process that initialised CUDA through this module (a successful probe or a device read that
/// reached the GPU); 0 when none did. Inherited by `fork`, so a child sees its parent's pid.
static CUDA_PID: AtomicU32 = AtomicU32::new(0);

fn note_cuda_init() {
    let _ = CUDA_PID.compare_exchange(0, std::process::id(), Ordering::SeqCst, Ordering::SeqCst);
}

/// `Err(GpuError::Fork)` in a process forked after CUDA was initialised (CUDA contexts do not
/// survive `fork`): checked before any CUDA call, so a forked child never touches CUDA.
pub(crate) fn fork_check() -> Result<(), Error> {
    match CUDA_PID.load(Ordering::SeqCst) {
        0 => Ok(()),
        p if p == std::process::id() => Ok(()),
        parent => Err(GpuError::Fork { parent, child: std::process::id() }.into()),
    }
}

/// Devices this process has read on (bit d = ordinal d, capped at 63), with the pid that
/// recorded them (a forked child starts empty).
static GPU_USED: Mutex<(u32, u64)> = Mutex::new((0, 0));

/// Record that a device read reached `device` (the GPU was initialised and used), unless the
/// error says it never got there: no GPU, a forked child, or arguments refused before any GPU
/// work (usage, limits).
pub(crate) fn note_device_use<T>(device: usize, r: &Result<T, Error>) {
    if let Err(Error::Gpu(GpuError::NotCompiled | GpuError::Unavailable(_) | GpuError::Fork { .. }) | Error::Usage(_) | Error::Limits { .. }) = r {
        return;
    }
    note_cuda_init();
    let pid = std::process::id();
    let mut g = GPU_USED.lock().unwrap_or_else(|p| p.into_inner());
    if g.0 != pid {
        *g = (pid, 0);
    }
    g.1 |= 1u64 << device.min(63);
}

/// The lowest device ordinal this process has read on, if any.
pub(crate) fn used_device() -> Option<usize> {
    let g = GPU_USED.lock().unwrap_or_else(|p| p.into_inner());
    (g.0 == std::process::id() && g.1 != 0).then(|| g.1.trailing_zeros() as usize)
}

/// An array of `uint8` in GPU memory, produced by `Slide.read_region(..., device="cuda")`
/// (shape (height, width, 4), RGBA) and `Slide.read_regions(..., device="cuda")` (shape
/// (n, height, width, 3), RGB). C-contiguous, row-major; freed when the last reference (this
/// object, or a tensor made from it with DLPack / the CUDA Array Interface) goes away.
///
/// The data are complete when the read returns (slidestream synchronises its own stream), so
/// consumers on any stream may use them without waiting.
///
/// Zero-copy exchange: `torch.from_dlpack(a)`, `cupy.from_dlpack(a)` (DLPack, `__dlpack__`),
/// `cupy.asarray(a)`, `numba.cuda.as_cuda_array(a)` (`__cuda_array_interface__`, version 3).
/// Copies to the host: `a.cpu()`, `a.numpy()`, `numpy.asarray(a)`.
#[pyclass(frozen, name = "DeviceArray", module = "slidestream._slidestream")]
pub(crate) struct PyDeviceArray {
    inner: Arc<DeviceArray>,
}

impl PyDeviceArray {
    pub(crate) fn new(a: DeviceArray) -> Self {
        PyDeviceArray { inner: Arc::new(a) }
    }

    fn shape_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape())
    }

    fn host<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
        let a = self.inner.clone();
        let data = py.detach(move || a.to_host()).map_err(|e| to_py(py, e))?;
        let arr = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(self.inner.shape()), data).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyArrayDyn::from_owned_array(py, arr))
    }
}

#[pymethods]
impl PyDeviceArray {
    /// Shape, outermost first: (height, width, 4) or (n, height, width, 3).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.shape_tuple(py)
    }

    /// Always `numpy.dtype('uint8')`.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, PyArrayDescr> {
        numpy::dtype::<u8>(py)
    }

    /// Number of dimensions (3 or 4).
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.shape().len()
    }

    /// Size in bytes (the product of the shape; one byte per element).
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    /// CUDA device ordinal holding the data.
    #[getter]
    fn device(&self) -> usize {
        self.inner.device()
    }

    /// Length of the first dimension.
    fn __len__(&self) -> usize {
        self.inner.shape().first().copied().unwrap_or(0)
    }

    fn __repr__(&self) -> String {
        let dims: Vec<String> = self.inner.shape().iter().map(|d| d.to_string()).collect();
        let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
        format!("slidestream.DeviceArray(shape={shape}, dtype=uint8, device='cuda:{}')", self.inner.device())
    }

    /// CUDA Array Interface, version 3 (numba, CuPy): `shape`, `typestr` `'|u1'`,
    /// `data` (device pointer, read-only flag False; pointer 0 for an empty array), `strides`
    /// None (C-contiguous), `version` 3, and `stream` None: the data are complete when the
    /// read returns, so no synchronisation is needed (the spec's meaning of a None stream).
    /// Consumers keep a reference to this object, which keeps the memory alive.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let ptr = if self.inner.nbytes() == 0 { 0 } else { self.inner.ptr() };
        d.set_item("shape", self.shape_tuple(py)?)?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (ptr, false))?;
        d.set_item("strides", py.None())?;
        d.set_item("version", 3)?;
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    /// `(2, device)`: kDLCUDA and the device ordinal.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::KDL_CUDA, self.inner.device() as i32)
    }

    /// Export as a DLPack capsule (`"dltensor"`, an unversioned `DLManagedTensor`, which the
    /// array API standard allows whatever `max_version` is) for `torch.from_dlpack`,
    /// `cupy.from_dlpack`, `jax.dlpack.from_dlpack`. No copy: the tensor shares the device
    /// memory and keeps it alive after this object is gone.
    ///
    /// `stream`: the consumer's stream (None, -1, 1, 2 or a stream handle). Nothing is waited
    /// for and nothing is enqueued, since the data are complete when the read returns; any
    /// value is accepted. `dl_device`: None or `(2, device)` for this device; `(1, 0)` (kDLCPU)
    /// returns a host copy unless `copy` is False. `copy=True` on the device raises
    /// BufferError (slidestream does not copy device memory; copy in the consumer).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = max_version;
        if let Some(s) = stream {
            if !s.is_none() && s.extract::<i64>().is_err() {
                return Err(PyTypeError::new_err(format!("stream must be None or an int, got {}", s.get_type().name()?)));
            }
        }
        let here = (dlpack::KDL_CUDA, self.inner.device() as i32);
        match dl_device {
            None => {}
            Some(d) if d == here => {}
            Some((dlpack::KDL_CPU, _)) => {
                if copy == Some(false) {
                    return Err(PyBufferError::new_err("a DeviceArray is in GPU memory: exporting it to the CPU needs a copy (copy=False given)"));
                }
                let a = self.inner.clone();
                let mut data = py.detach(move || a.to_host()).map_err(|e| to_py(py, e))?;
                let ptr = data.as_mut_ptr() as *mut c_void;
                let m = dlpack::managed(ptr, dlpack::DLDevice { device_type: dlpack::KDL_CPU, device_id: 0 }, self.inner.shape(), data);
                return dlpack::capsule(py, m);
            }
            Some(d) => {
                return Err(PyBufferError::new_err(format!("cannot export a DeviceArray of CUDA device {} to DLPack device {d:?}", self.inner.device())));
            }
        }
        if copy == Some(true) {
            return Err(PyBufferError::new_err("slidestream cannot copy device memory for DLPack (copy=True); import without copy and copy in the consumer"));
        }
        let ptr = if self.inner.nbytes() == 0 { std::ptr::null_mut() } else { self.inner.ptr() as *mut c_void };
        let device = dlpack::DLDevice { device_type: dlpack::KDL_CUDA, device_id: self.inner.device() as i32 };
        let m = dlpack::managed(ptr, device, self.inner.shape(), self.inner.clone());
        dlpack::capsule(py, m)
    }

    /// Copy to the host: a new numpy uint8 array of the same shape (GIL released during the
    /// copy). Raises GpuError when the copy fails (GpuForkError in a process forked after the
    /// array was made).
    fn cpu<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
        self.host(py)
    }

    /// Same as `cpu()`: a numpy copy of the data.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
        self.host(py)
    }

    /// `numpy.asarray(device_array)`: always a copy to the host (as `cpu()`), cast to `dtype`
    /// when given. `copy=False` raises ValueError since a copy cannot be avoided.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(&self, py: Python<'py>, dtype: Option<&Bound<'py, PyAny>>, copy: Option<bool>) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(PyValueError::new_err("a DeviceArray is in GPU memory: converting it to numpy always copies (copy=False given)"));
        }
        let a = self.host(py)?.into_any();
        match dtype {
            Some(dt) if !dt.is_none() => a.call_method1("astype", (dt,)),
            _ => Ok(a),
        }
    }
}

fn stats_dict<'py>(py: Python<'py>, device: usize) -> PyResult<Bound<'py, PyDict>> {
    let s = gpu::stats(device);
    let d = PyDict::new(py);
    d.set_item("compat_mode", &s.compat_mode)?;
    d.set_item("io_path", &s.io_path)?;
    d.set_item("io_reason", &s.io_reason)?;
    d.set_item("posix_bytes", s.posix_bytes)?;
    d.set_item("posix_requests", s.posix_requests)?;
    d.set_item("cufile_gds_bytes", s.cufile_gds_bytes)?;
    d.set_item("cufile_gds_requests", s.cufile_gds_requests)?;
    d.set_item("cufile_compat_bytes", s.cufile_compat_bytes)?;
    d.set_item("cufile_compat_requests", s.cufile_compat_requests)?;
    d.set_item("cufile_handle_failures", s.cufile_handle_failures)?;
    d.set_item("cufile_handle_error", &s.cufile_handle_error)?;
    d.set_item("tile_bytes", s.tile_bytes)?;
    d.set_item("read_amplification", s.read_amplification())?;
    d.set_item("decoded_hardware", s.decoded_hardware)?;
    d.set_item("decoded_device_bitstream", s.decoded_device_bitstream)?;
    d.set_item("decoded_hybrid", s.decoded_hybrid)?;
    d.set_item("decoded_cpu", s.decoded_cpu)?;
    d.set_item("decoded_cpu_partial", s.decoded_cpu_partial)?;
    d.set_item("gpu_lanes", s.gpu_lanes)?;
    d.set_item("cpu_workers", s.cpu_workers)?;
    d.set_item("gpu_batch_fallbacks", s.gpu_batch_fallbacks)?;
    d.set_item("cpu_fallback_reason", &s.cpu_fallback_reason)?;
    d.set_item("nvjpeg_backend", &s.nvjpeg_backend)?;
    d.set_item("hardware_engines", s.hardware_engines)?;
    d.set_item("cache_hits", s.cache.hits)?;
    d.set_item("cache_misses", s.cache.misses)?;
    d.set_item("cache_evictions", s.cache.evictions)?;
    d.set_item("cache_insertions", s.cache.insertions)?;
    d.set_item("cache_entries", s.cache.entries)?;
    d.set_item("cache_resident_bytes", s.cache.resident_bytes)?;
    d.set_item("cache_capacity_bytes", s.cache.capacity_bytes)?;
    d.set_item("device_tile_bytes", s.device_tile_bytes)?;
    Ok(d)
}

/// The `"gpu"` entry of `Slide.io_stats()`: stats of the device this process read on, with
/// its ordinal under `"device"`; `None` when this process has not used the GPU.
pub(crate) fn io_stats_gpu<'py>(py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(dev) = used_device() else { return Ok(None) };
    let d = stats_dict(py, dev)?;
    d.set_item("device", dev)?;
    Ok(Some(d))
}

/// True when a usable CUDA device is present (libcuda loads, `cuInit` succeeds, at least one
/// device). Never raises; False in a process forked after CUDA was initialised (where CUDA
/// cannot be used).
#[pyfunction]
pub(crate) fn cuda_available(py: Python<'_>) -> bool {
    if fork_check().is_err() {
        return false;
    }
    let ok = py.detach(|| std::panic::catch_unwind(gpu::available).unwrap_or(false));
    if ok {
        note_cuda_init();
    }
    ok
}

/// Probe the GPU stack (loads libcuda and nvJPEG, initialises CUDA). Returns a dict:
/// `driver_version` (int, e.g. 13000 for 13.0), `devices` (list of dicts with `name` and
/// `compute_capability` (major, minor)), `nvjpeg_version` ((major, minor, patch) or None),
/// `hardware_engines` (hardware JPEG engines of device 0, 0 without), `hardware_reason`
/// (why the hardware JPEG backend is unavailable, or None).
/// Raises GpuUnavailableError when CUDA cannot be loaded or initialised, GpuForkError in a
/// process forked after CUDA was initialised.
#[pyfunction]
pub(crate) fn gpu_probe(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    fork_check().map_err(|e| to_py(py, e))?;
    let r = py.detach(gpu::probe).map_err(|e| to_py(py, e))?;
    note_cuda_init();
    let d = PyDict::new(py);
    d.set_item("driver_version", r.driver_version)?;
    let devs = PyList::empty(py);
    for (name, ma, mi) in &r.devices {
        let e = PyDict::new(py);
        e.set_item("name", name)?;
        e.set_item("compute_capability", (*ma, *mi))?;
        devs.append(e)?;
    }
    d.set_item("devices", devs)?;
    d.set_item("nvjpeg_version", r.nvjpeg_version)?;
    d.set_item("hardware_engines", r.hardware_engines)?;
    d.set_item("hardware_reason", r.hardware_reason)?;
    Ok(d)
}

/// Counters of the GPU path of one device, process-wide (all slides), as a flat dict; see
/// docs/python.md for every key. Does not initialise CUDA: a device not used yet reports
/// zeros. `device`: an int N, `"cuda"` or `"cuda:N"`, or a torch.device (default 0).
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn gpu_stats<'py>(py: Python<'py>, device: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
    let dev = match device {
        Some(d) => cuda_ordinal(d)?,
        None => 0,
    };
    stats_dict(py, dev)
}

/// Zero the GPU counters of `device` (the device tile cache keeps its tiles).
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn gpu_reset_stats(device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let dev = match device {
        Some(d) => cuda_ordinal(d)?,
        None => 0,
    };
    gpu::reset_stats(dev);
    Ok(())
}

/// Drop every tile of `device`'s device tile cache (counters kept); no-op when the device was
/// not used.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn gpu_clear_cache(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let dev = match device {
        Some(d) => cuda_ordinal(d)?,
        None => 0,
    };
    py.detach(move || gpu::clear_device_cache(dev));
    Ok(())
}

/// `device=` argument parsed: None for the CPU, else the CUDA ordinal (validation helper for
/// the pure-Python layers).
#[pyfunction(name = "_parse_device")]
#[pyo3(signature = (device=None))]
pub(crate) fn parse_device_py(device: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    parse_device(device)
}

/// Times a `_test_cpu_dlpack` tensor has been freed (test hook).
static TEST_RELEASES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

struct TestOwner(#[allow(dead_code)] Vec<u8>);
impl Drop for TestOwner {
    fn drop(&mut self) {
        TEST_RELEASES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Test hook: a DLPack capsule built exactly as `DeviceArray.__dlpack__` builds one, but over
/// host memory (kDLCPU) holding `i % 251` at flat index `i`, so the capsule protocol (names,
/// deleter, ownership) can be checked with numpy on machines without a GPU.
#[pyfunction(name = "_test_cpu_dlpack")]
pub(crate) fn test_cpu_dlpack<'py>(py: Python<'py>, shape: Vec<usize>) -> PyResult<Bound<'py, PyAny>> {
    let n: usize = shape.iter().product();
    let mut data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let ptr = data.as_mut_ptr() as *mut c_void;
    let m = dlpack::managed(ptr, dlpack::DLDevice { device_type: dlpack::KDL_CPU, device_id: 0 }, &shape, TestOwner(data));
    dlpack::capsule(py, m)
}

/// Test hook: how many `_test_cpu_dlpack` tensors have been freed so far.
#[pyfunction(name = "_test_cpu_dlpack_releases")]
pub(crate) fn test_cpu_dlpack_releases() -> u64 {
    TEST_RELEASES.load(std::sync::atomic::Ordering::SeqCst)
}

