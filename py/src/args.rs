//! Argument parsing shared by the bindings: paths, levels, sizes, patch locations,
//! backgrounds and `device=` values. Each parser names what it accepts in its error.

use std::path::PathBuf;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString};

/// Accept `str`, `bytes` and `os.PathLike` paths (non-ASCII and non-UTF-8 names included:
/// a `str` is encoded back with the file-system encoding, surrogate escapes and all).
///
/// Raises TypeError for anything else.
pub(crate) fn path(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let py = obj.py();
    let os = py.import("os")?;
    let fs = os.getattr("fspath")?.call1((obj,))?;
    if let Ok(b) = fs.cast::<PyBytes>() {
        return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes())));
    }
    let s: String = fs.extract().map_err(|_| PyTypeError::new_err("path must be str, bytes or os.PathLike"))?;
    let enc = os.getattr("fsencode")?.call1((s,))?;
    let b = enc.cast::<PyBytes>()?;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes())))
}

/// A `level` argument: `Ok(index)` for an int in `0..=usize::MAX` (whether the level exists
/// is the slide's check), `Err(text)` for an int that cannot name a level (negative, or too
/// large for an index), holding the value as written, for the caller's InvalidArgumentError.
///
/// Raises TypeError for a non-integer (as Python's `__index__`).
pub(crate) fn level(obj: &Bound<'_, PyAny>) -> PyResult<Result<usize, String>> {
    match obj.extract::<i64>() {
        Ok(v) => Ok(usize::try_from(v).map_err(|_| v.to_string())),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(Err(obj.str()?.to_string())),
        Err(e) => Err(e),
    }
}

/// A `size` (width, height) in pixels; both must be >= 0.
///
/// Raises ValueError for a negative width or height.
pub(crate) fn size(size: (i64, i64)) -> PyResult<(u64, u64)> {
    if size.0 < 0 || size.1 < 0 {
        return Err(PyValueError::new_err(format!("size must be non-negative, got {size:?}")));
    }
    Ok((size.0 as u64, size.1 as u64))
}

/// Patch locations: an integer array of shape (n, 2) or a sequence of (x, y) pairs, in
/// level-0 pixels.
///
/// Raises ValueError for an array of another shape, TypeError for other objects.
pub(crate) fn locations<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<(i64, i64)>> {
    match obj.extract::<numpy::PyReadonlyArray2<'py, i64>>() {
        Ok(a) => {
            let v = a.as_array();
            if v.ncols() != 2 {
                return Err(PyValueError::new_err(format!("locations must have shape (n, 2), got {:?}", v.shape())));
            }
            Ok(v.rows().into_iter().map(|r| (r[0], r[1])).collect())
        }
        Err(_) => obj.try_iter()?.map(|o| o?.extract::<(i64, i64)>()).collect(),
    }
}

/// A `background`: None (white), an int 0..=255 (grey) or an (r, g, b) tuple of such ints.
///
/// Raises ValueError for anything else.
pub(crate) fn background_rgb(obj: Option<&Bound<'_, PyAny>>) -> PyResult<[u8; 3]> {
    let Some(obj) = obj else { return Ok([255; 3]) };
    if let Ok(v) = obj.extract::<u8>() {
        return Ok([v; 3]);
    }
    let t: (u8, u8, u8) = obj
        .extract()
        .map_err(|_| PyValueError::new_err("background must be an int 0..=255 or an (r, g, b) tuple of such ints"))?;
    Ok([t.0, t.1, t.2])
}

/// Parse a `device=` argument: `None` / `"cpu"` / a `torch.device` of type `cpu` → `None`
/// (the CPU path); `"cuda"` → 0; `"cuda:N"`, an int `N >= 0`, or an object with
/// `.type == "cuda"` and `.index` (a `torch.device`; index `None` → 0) → `Some(N)`.
///
/// Malformed strings, negative ordinals and other device types raise `ValueError`; objects of
/// other types raise `TypeError`.
pub(crate) fn device(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
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

/// A device argument of the GPU module functions: a CUDA device as [`device`] parses it,
/// 0 when omitted.
///
/// Raises ValueError for the CPU (`"cpu"`) and bad devices, TypeError for other objects.
pub(crate) fn cuda_ordinal(obj: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    let Some(obj) = obj else { return Ok(0) };
    device(Some(obj))?.ok_or_else(|| PyValueError::new_err("this function needs a CUDA device ('cuda', 'cuda:N' or an int N), not the CPU"))
}

/// `device=` argument parsed: None for the CPU, else the CUDA ordinal (validation helper for
/// the pure-Python layers).
#[pyfunction(name = "_parse_device")]
#[pyo3(signature = (device=None))]
pub(crate) fn parse_device_py(device: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    self::device(device)
}
