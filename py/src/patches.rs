//! `slidestream._read_patches`: one batch of patches across slides and levels, on the CPU
//! ([`slidestream::read_patches`]) or into device memory ([`slidestream::read_patches_device`]),
//! called by `slidestream.read_patches` (`_patches.py`, which checks and normalises the
//! requests to an int64 array (n, 4)).

use std::sync::Arc;

use numpy::{PyArray4, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray4, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use slidestream::{read_patches, read_patches_device, resize_patches_device, resize_rgb_patches, PatchRequest, ReadOptions, Slide};

use crate::args;
use crate::device_array::PyDeviceArray;
use crate::errors::{invalid_argument, OrRaise};
use crate::process;
use crate::slide::PySlide;

/// One parsed request: slide index, level, level-0 location (x, y).
pub(crate) type Request = (usize, usize, (i64, i64));

/// `requests` ((slide index, level, x, y) rows, int64 (n, 4)) of `n_slides` slides as
/// (slide, level, location) triples: ValueError for another shape, InvalidArgumentError for a
/// slide index out of range or a negative level (a level past the slide's count fails the read).
pub(crate) fn parse_requests(py: Python<'_>, n_slides: usize, requests: &PyReadonlyArray2<'_, i64>) -> PyResult<Vec<Request>> {
    let rows = requests.as_array();
    if rows.ncols() != 4 {
        return Err(PyValueError::new_err(format!("requests must have shape (n, 4), got (n, {})", rows.ncols())));
    }
    let mut reqs: Vec<(usize, usize, (i64, i64))> = Vec::with_capacity(rows.nrows());
    for (k, r) in rows.outer_iter().enumerate() {
        let (s, level) = (r[0], r[1]);
        let Some(slide) = usize::try_from(s).ok().filter(|&s| s < n_slides) else {
            let msg = if n_slides == 0 {
                format!("request {k}: slide index {s}, but no slides were given")
            } else {
                format!("request {k}: slide index {s} out of range for {n_slides} slide(s)")
            };
            return Err(invalid_argument(py, msg));
        };
        let Ok(level) = usize::try_from(level) else {
            return Err(invalid_argument(py, format!("request {k}: level {level} does not exist")));
        };
        reqs.push((slide, level, (r[2], r[3])));
    }
    Ok(reqs)
}

/// Batch across slides (called by ``slidestream.read_patches``): requests int64
/// (n, 4) rows of (slide index, level, x, y) → uint8 (n, h, w, 3) RGB, numpy on the CPU
/// (``device`` None or "cpu") or a DeviceArray on ``device``.
#[pyfunction]
#[pyo3(name = "_read_patches", signature = (slides, requests, size, background=None, device=None))]
pub(crate) fn read_patches_py<'py>(
    py: Python<'py>,
    slides: Vec<PyRef<'py, PySlide>>,
    requests: PyReadonlyArray2<'py, i64>,
    size: &Bound<'py, PyAny>,
    background: Option<&Bound<'py, PyAny>>,
    device: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let size = args::size(size)?;
    let background = args::background_rgb(background)?;
    let device = args::device(device)?;
    let opened: Vec<Arc<Slide>> = slides.iter().map(|s| s.slide(py)).collect::<PyResult<_>>()?;
    let reqs = parse_requests(py, opened.len(), &requests)?;
    let n = reqs.len();
    if let Some(dev) = device {
        process::fork_check().or_raise(py)?;
        let r = crate::guard::detach(py, move || {
            let batch: Vec<PatchRequest<'_>> = reqs.iter().map(|&(s, level, location)| PatchRequest { slide: &opened[s], level, location }).collect();
            read_patches_device(&batch, &ReadOptions { size, background }, dev)?.into_result()
        })?;
        process::note_device_use(dev, &r);
        let a = r.or_raise(py)?;
        return Ok(Bound::new(py, PyDeviceArray::new(a))?.into_any());
    }
    let data = crate::guard::detach(py, move || {
        // Collected in place (the same size per row): one copy of the rows, not two.
        let batch: Vec<PatchRequest<'_>> = reqs.into_iter().map(|(s, level, location)| PatchRequest { slide: &opened[s], level, location }).collect();
        read_patches(&batch, &ReadOptions { size, background })
    })?
    .or_raise(py)?;
    let arr = ndarray::Array4::from_shape_vec((n, size.1 as usize, size.0 as usize, 3), data).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray4::from_owned_array(py, arr).into_any())
}

/// uint8 RGB patches (n, h, w, 3) resized to (n, size[1], size[0], 3) by a Lanczos-3
/// convolution (Pillow's LANCZOS), in parallel with the GIL released; ValueError for another
/// shape or a zero size.
#[pyfunction]
#[pyo3(name = "_resize_patches")]
pub(crate) fn resize_patches_py<'py>(py: Python<'py>, patches: PyReadonlyArray4<'py, u8>, size: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let (tw, th) = args::size(size)?;
    let shape = patches.shape().to_vec();
    if shape[3] != 3 {
        return Err(PyValueError::new_err(format!("patches must have shape (n, h, w, 3), got {shape:?}")));
    }
    let (n, h, w) = (shape[0], shape[1], shape[2]);
    let (Ok(w32), Ok(h32), Ok(tw32), Ok(th32)) = (u32::try_from(w), u32::try_from(h), u32::try_from(tw), u32::try_from(th)) else {
        return Err(PyValueError::new_err("patch sizes must fit in 32 bits"));
    };
    let src: std::borrow::Cow<'_, [u8]> = match patches.as_slice() {
        Ok(s) => s.into(),
        Err(_) => patches.as_array().iter().copied().collect::<Vec<u8>>().into(),
    };
    let out_len = n
        .checked_mul(th as usize)
        .and_then(|v| v.checked_mul(tw as usize))
        .and_then(|v| v.checked_mul(3))
        .ok_or_else(|| PyValueError::new_err("output size overflows"))?;
    let out = crate::guard::detach(py, move || {
        let mut out = slidestream::alloc_pixels(out_len);
        resize_rgb_patches(&src, n, (w32, h32), (tw32, th32), &mut out).map(|()| out)
    })?
    .or_raise(py)?;
    let arr = ndarray::Array4::from_shape_vec((n, th as usize, tw as usize, 3), out).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray4::from_owned_array(py, arr).into_any())
}

/// Device batches resized on their GPU (called by ``slidestream.read_patches`` with ``mpp=`` /
/// ``magnification=`` and a device): ``groups`` is a list of (DeviceArray (m, h, w, 3) uint8,
/// int64 array of the m output indices of its patches), whose indices together cover 0..n
/// exactly once; returns one DeviceArray (n, size[1], size[0], 3) with the CPU path's resize
/// (the same integer Lanczos-3 taps as ``_resize_patches``: equal pixels). The GIL is
/// released. InvalidArgumentError for bad shapes, indices or sizes, GpuUnavailableError
/// without a usable GPU.
#[pyfunction]
#[pyo3(name = "_resize_patches_device")]
pub(crate) fn resize_patches_device_py(
    py: Python<'_>,
    groups: Vec<(Bound<'_, PyDeviceArray>, PyReadonlyArray1<'_, i64>)>,
    n: usize,
    size: &Bound<'_, PyAny>,
) -> PyResult<PyDeviceArray> {
    let (tw, th) = args::size(size)?;
    let (Ok(tw), Ok(th)) = (u32::try_from(tw), u32::try_from(th)) else {
        return Err(invalid_argument(py, "size must fit in 32 bits"));
    };
    let mut arrays = Vec::with_capacity(groups.len());
    let mut rows = Vec::with_capacity(groups.len());
    for (a, r) in &groups {
        arrays.push(a.get().shared());
        let r: Vec<usize> = r.as_array().iter().map(|&v| usize::try_from(v).unwrap_or(usize::MAX)).collect();
        rows.push(r);
    }
    let out = crate::guard::detach(py, move || {
        let g: Vec<(&slidestream::gpu::DeviceArray, &[usize])> = arrays.iter().map(|a| &**a).zip(rows.iter().map(|r| r.as_slice())).collect();
        resize_patches_device(&g, n, (tw, th))
    })?
    .or_raise(py)?;
    Ok(PyDeviceArray::new(out))
}
