//! `slidestream._read_patches`: one CPU batch of patches across slides and levels
//! ([`slidestream::read_patches`]), called by `slidestream.read_patches` (`_patches.py`, which
//! checks and normalises the requests to an int64 array (n, 4)).

use std::sync::Arc;

use numpy::{PyArray4, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use slidestream::{read_patches, PatchRequest, ReadOptions, Slide};

use crate::args;
use crate::errors::{invalid_argument, OrRaise};
use crate::slide::PySlide;

/// Read `requests` ((slide index, level, x, y) rows, int64 (n, 4)) of `slides` as one batch:
/// uint8 (n, h, w, 3) RGB over `background`; the GIL is released during the read.
#[pyfunction]
#[pyo3(name = "_read_patches", signature = (slides, requests, size, background=None))]
pub(crate) fn read_patches_cpu<'py>(
    py: Python<'py>,
    slides: Vec<PyRef<'py, PySlide>>,
    requests: PyReadonlyArray2<'py, i64>,
    size: &Bound<'py, PyAny>,
    background: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray4<u8>>> {
    let size = args::size(size)?;
    let background = args::background_rgb(background)?;
    let rows = requests.as_array();
    if rows.ncols() != 4 {
        return Err(PyValueError::new_err(format!("requests must have shape (n, 4), got (n, {})", rows.ncols())));
    }
    let opened: Vec<Arc<Slide>> = slides.iter().map(|s| s.slide(py)).collect::<PyResult<_>>()?;
    let mut reqs: Vec<(usize, usize, (i64, i64))> = Vec::with_capacity(rows.nrows());
    for (k, r) in rows.outer_iter().enumerate() {
        let (s, level) = (r[0], r[1]);
        let Some(slide) = usize::try_from(s).ok().filter(|&s| s < opened.len()) else {
            return Err(invalid_argument(py, format!("request {k}: slide index {s} is not in 0..{}", opened.len())));
        };
        let Ok(level) = usize::try_from(level) else {
            return Err(invalid_argument(py, format!("request {k}: level {level} does not exist")));
        };
        reqs.push((slide, level, (r[2], r[3])));
    }
    let n = reqs.len();
    let data = py
        .detach(move || {
            let batch: Vec<PatchRequest<'_>> = reqs.iter().map(|&(s, level, location)| PatchRequest { slide: &opened[s], level, location }).collect();
            read_patches(&batch, &ReadOptions { size, background })
        })
        .or_raise(py)?;
    let arr = ndarray::Array4::from_shape_vec((n, size.1 as usize, size.0 as usize, 3), data).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray4::from_owned_array(py, arr))
}
