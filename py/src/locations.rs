//! Patch locations (`read_regions(locations, ...)`, CPU and device): an integer numpy array of
//! shape (n, 2) of any integer dtype and byte order (or an array-like with `__array__`, such as
//! a CPU torch tensor), or a sequence (list, tuple) of (x, y) pairs — tuples, lists, 1-d numpy
//! rows of two ints. Values are level-0 pixels and must fit
//! in 64-bit signed ints.
//!
//! Everything else is refused with a message saying what is accepted: a `TypeError` for the
//! wrong kind of object (a dict, a set, a str, float or bool arrays, a pair of non-ints), a
//! `ValueError` for the wrong shape (an array that is not (n, 2), a pair of three), an
//! `InvalidArgumentError` (a `ValueError`) for a value outside the 64-bit range (a `uint64`
//! above 2⁶³ − 1, a Python int ≥ 2⁶³).

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySequence, PyString, PyTuple};

use crate::args::{int, location, type_name};
use crate::errors::invalid_argument;

/// What `locations` may be, for error messages.
const ACCEPTED: &str = "locations must be an integer array of shape (n, 2) or a sequence of (x, y) pairs of ints";

/// Parse `locations` (module docs).
///
/// Raises TypeError, ValueError or InvalidArgumentError as the module docs say.
pub(crate) fn locations<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<(i64, i64)>> {
    // Fast path: a native int64 array (n, 2), any strides.
    if let Ok(a) = obj.extract::<numpy::PyReadonlyArray2<'py, i64>>() {
        let v = a.as_array();
        if v.ncols() == 2 || v.nrows() == 0 {
            return Ok(v.rows().into_iter().map(|r| (r[0], r[1])).collect());
        }
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return array(a);
    }
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!("{ACCEPTED}, got {}", type_name(obj))));
    }
    let Ok(seq) = obj.cast::<PySequence>() else {
        // Array-likes that are not sequences (a CPU torch tensor, a pandas DataFrame): read
        // through numpy.asarray, then as an array.
        if obj.hasattr("__array__")? {
            let a = obj.py().import("numpy")?.getattr("asarray")?.call1((obj,))?;
            if let Ok(a) = a.cast::<PyUntypedArray>() {
                return array(a);
            }
        }
        return Err(PyTypeError::new_err(format!("{ACCEPTED}, got {}", type_name(obj))));
    };
    let n = seq.len()?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let item = seq.get_item(i)?;
        // Fast path: a tuple of two ints.
        if let Ok(t) = item.cast::<PyTuple>() {
            if t.len() == 2 {
                if let (Ok(x), Ok(y)) = (t.get_item(0)?.extract::<i64>(), t.get_item(1)?.extract::<i64>()) {
                    out.push((x, y));
                    continue;
                }
            }
        }
        out.push(location(&item, &format!("locations[{i}]"))?);
    }
    Ok(out)
}

/// A numpy array of locations: shape (n, 2) (or empty), integer dtype of any size and byte
/// order, or an object array of Python ints.
fn array(a: &Bound<'_, PyUntypedArray>) -> PyResult<Vec<(i64, i64)>> {
    let py = a.py();
    let shape = a.shape().to_vec();
    if a.len() == 0 && a.ndim() <= 2 && (a.ndim() < 2 || shape[1] == 2 || shape[0] == 0) {
        return Ok(Vec::new());
    }
    if a.ndim() != 2 || shape[1] != 2 {
        return Err(PyValueError::new_err(format!("locations must have shape (n, 2), got {}", shape_text(&shape))));
    }
    let dtype = a.dtype();
    match dtype.kind() {
        b'i' | b'u' => {
            if dtype.kind() == b'u' && dtype.itemsize() >= 8 {
                let max: u64 = a.call_method0("max")?.extract()?;
                if max > i64::MAX as u64 {
                    return Err(invalid_argument(py, format!("locations value {max} is out of range (-2**63..2**63)")));
                }
            }
            // Every other integer dtype converts to native int64 without loss.
            let native = a.call_method1("astype", ("=i8",))?;
            let v = native.extract::<numpy::PyReadonlyArray2<'_, i64>>()?;
            Ok(v.as_array().rows().into_iter().map(|r| (r[0], r[1])).collect())
        }
        b'O' => {
            // Python ints (e.g. np.array([[2**64, 0]])): checked one by one.
            let mut out = Vec::with_capacity(shape[0]);
            for i in 0..shape[0] {
                let row = a.get_item(i)?;
                let name = format!("locations[{i}]");
                out.push((int(&row.get_item(0)?, &format!("{name} x"))?, int(&row.get_item(1)?, &format!("{name} y"))?));
            }
            Ok(out)
        }
        _ => Err(PyTypeError::new_err(format!("{ACCEPTED}, got an array of dtype {}", dtype.str()?))),
    }
}

/// `(3,)`, `(2, 3)`: a shape as numpy prints it.
fn shape_text(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}
