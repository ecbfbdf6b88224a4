//! `slidestream.DeviceArray`: the result of a device read (`device="cuda"`), an array in GPU
//! memory exchanged zero-copy through the CUDA Array Interface (v3) and DLPack, or copied to
//! the host (`cpu()`, `numpy()`, `numpy.asarray`).

use std::ffi::c_void;
use std::sync::Arc;

use numpy::{PyArrayDescr, PyArrayDyn};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use slidestream::gpu::DeviceArray;

use crate::dlpack;
use crate::errors::OrRaise;

/// An array of ``uint8`` in GPU memory, made by ``Slide.read_region(..., device=...)``
/// (shape (height, width, 4), RGBA) and ``Slide.read_regions(..., device=...)`` (shape
/// (n, height, width, 3), RGB). C-contiguous, row-major. The memory is freed when the last
/// reference goes away: this object, or a tensor imported from it (DLPack tensors and
/// ``__cuda_array_interface__`` consumers keep it alive after this object is deleted).
///
/// The data are complete when the read returns, so consumers on any CUDA stream may use them
/// without synchronising. Zero-copy exchange: ``torch.from_dlpack(a)``,
/// ``cupy.from_dlpack(a)``, ``cupy.asarray(a)``, ``numba.cuda.as_cuda_array(a)``. Host
/// copies: ``a.cpu()``, ``a.numpy()``, ``numpy.asarray(a)``. Not picklable.
#[pyclass(frozen, name = "DeviceArray", module = "slidestream._slidestream")]
pub(crate) struct PyDeviceArray {
    inner: Arc<DeviceArray>,
}

impl PyDeviceArray {
    pub(crate) fn new(a: DeviceArray) -> Self {
        PyDeviceArray { inner: Arc::new(a) }
    }

    /// The device memory this object owns (shared with DLPack tensors made from it).
    pub(crate) fn shared(&self) -> Arc<DeviceArray> {
        self.inner.clone()
    }

    fn shape_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape())
    }

    fn host<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
        let a = self.inner.clone();
        let data = crate::guard::detach(py, move || a.to_host())?.or_raise(py)?;
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

    /// Always ``numpy.dtype('uint8')``.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> Bound<'py, PyArrayDescr> {
        numpy::dtype::<u8>(py)
    }

    /// Number of dimensions (3 for a region, 4 for a batch).
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.shape().len()
    }

    /// Size in bytes (product of the shape).
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

    /// CUDA Array Interface version 3: ``shape``, ``typestr`` ``'|u1'``, ``data``
    /// (device pointer, False = writable; 0 for an empty array), ``strides`` None
    /// (C-contiguous), ``version`` 3 and ``stream`` None: no synchronisation is needed
    /// because the data are complete when the read returns.
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

    /// ``(2, device)``: kDLCUDA and the device ordinal.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::KDL_CUDA, self.inner.device() as i32)
    }

    /// A DLPack capsule (``"dltensor"``, unversioned ``DLManagedTensor``, which the array
    /// API standard allows for any ``max_version``) sharing the device memory, no copy.
    ///
    /// ``stream``: the consumer's stream; ignored, since the data are complete (nothing to
    /// wait for). ``dl_device``: None or this device; ``(1, 0)`` (CPU) exports a host copy
    /// unless ``copy`` is False (then BufferError). ``copy=True`` on the device raises
    /// BufferError. Raises GpuError when a host copy fails.
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
        // The consumer's stream: None means the legacy default stream (array API standard).
        let mut consumer: i64 = slidestream::gpu::LEGACY_STREAM as i64;
        if let Some(s) = stream {
            if !s.is_none() {
                consumer = s.extract::<i64>().map_err(|_| {
                    PyTypeError::new_err(format!("stream must be None or an int, got {}", s.get_type().name().map(|n| n.to_string()).unwrap_or_default()))
                })?;
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
                let mut data = crate::guard::detach(py, move || a.to_host())?.or_raise(py)?;
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
        // -1 ("no synchronisation"): the stream is unknown, so the free waits for the device.
        let p = if consumer > 0 { self.inner.ptr_for_stream(consumer as u64) } else { self.inner.ptr() };
        let ptr = if self.inner.nbytes() == 0 { std::ptr::null_mut() } else { p as *mut c_void };
        let device = dlpack::DLDevice { device_type: dlpack::KDL_CUDA, device_id: self.inner.device() as i32 };
        let m = dlpack::managed(ptr, device, self.inner.shape(), self.inner.clone());
        dlpack::capsule(py, m)
    }

    /// A host copy: new numpy uint8 array of the same shape (GIL released during the
    /// copy). Raises GpuError if the copy fails (GpuForkError in a process forked after the
    /// array was made).
    fn cpu<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
        self.host(py)
    }

    /// Same as :meth:`cpu`.
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<u8>>> {
        self.host(py)
    }

    /// ``numpy.asarray(a)``: always a host copy (as :meth:`cpu`), cast to ``dtype`` when
    /// given; ``copy=False`` raises ValueError.
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
