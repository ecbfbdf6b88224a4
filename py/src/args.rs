//! Argument parsing shared by the bindings: paths, integers (levels, sizes, locations, byte
//! counts), backgrounds and `device=` values. Each parser names the argument and what it
//! accepts in its error.
//!
//! The rule for every integer argument: anything with `__index__` (Python ints, numpy
//! integers, bools) is an int; anything else is a `TypeError` naming the argument. An int
//! outside the argument's range (a negative size or byte count, a value past 2⁶³ − 1) is an
//! `InvalidArgumentError` (a `ValueError`), never an `OverflowError`. Patch locations are
//! parsed in [`crate::locations`].

use std::path::PathBuf;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyString, PyTuple};

use crate::errors::invalid_argument;

/// Accept `str`, `bytes` and `os.PathLike` paths, exactly as `os.fsencode` does (non-ASCII
/// and non-UTF-8 names included: a `str` is encoded with the file-system encoding and its
/// error handler, so the surrogate-escaped names `os.listdir` returns work).
///
/// Raises TypeError for anything else.
pub(crate) fn path(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let py = obj.py();
    let os = py.import("os")?;
    let not_a_path = || PyTypeError::new_err(format!("path must be str, bytes or os.PathLike, got {}", type_name(obj)));
    if !(obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() || obj.hasattr("__fspath__")?) {
        return Err(not_a_path());
    }
    // os.fsencode: str (surrogate escapes and all) and PathLike → bytes; its own errors
    // (a __fspath__ returning something else) are the TypeError os.fsencode raises.
    let enc = os.getattr("fsencode")?.call1((obj,))?;
    let b = enc.cast::<PyBytes>().map_err(|_| not_a_path())?;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes())))
}

/// `storage_options` of a remote slide: `None` or a dict of str → str / bool / int (bools as
/// `true` / `false`, as object_store's configuration parser reads them).
///
/// Raises TypeError for anything else (a non-dict, a non-str key, another value type).
pub(crate) fn storage_options(obj: Option<&Bound<'_, PyAny>>) -> PyResult<std::collections::BTreeMap<String, String>> {
    let mut out = std::collections::BTreeMap::new();
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(out) };
    let d =
        obj.cast::<pyo3::types::PyDict>().map_err(|_| PyTypeError::new_err(format!("storage_options must be a dict of str to str, got {}", type_name(obj))))?;
    for (k, v) in d.iter() {
        let key: String = k.extract().map_err(|_| PyTypeError::new_err(format!("storage_options keys must be str, got {}", type_name(&k))))?;
        let value = if v.is_instance_of::<pyo3::types::PyBool>() {
            if v.extract::<bool>()? {
                "true".to_string()
            } else {
                "false".to_string()
            }
        } else if v.is_instance_of::<PyString>() {
            v.extract::<String>()?
        } else if v.is_instance_of::<pyo3::types::PyInt>() {
            v.str()?.to_string()
        } else {
            return Err(PyTypeError::new_err(format!("storage_options[{key:?}] must be str, bool or int, got {}", type_name(&v))));
        };
        out.insert(key, value);
    }
    Ok(out)
}

/// A path as the `str` Python code sees it (`os.fsdecode` of its bytes: non-UTF-8 bytes as
/// surrogate escapes, so `os.fsencode` gives the exact name back).
pub(crate) fn path_str<'py>(py: Python<'py>, p: &std::path::Path) -> PyResult<Bound<'py, PyAny>> {
    use std::os::unix::ffi::OsStrExt;
    py.import("os")?.getattr("fsdecode")?.call1((PyBytes::new(py, p.as_os_str().as_bytes()),))
}

/// The type name of `obj` for error messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".into())
}

/// An int argument (anything with `__index__`) as `i64`.
///
/// Raises TypeError naming `name` for a non-integer (a float, a str, None),
/// InvalidArgumentError for an int outside the 64-bit signed range.
pub(crate) fn int(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<i64> {
    if obj.is_instance_of::<PyFloat>() {
        return Err(PyTypeError::new_err(format!("{name} must be an int, got float {}", obj.repr()?)));
    }
    match obj.extract::<i64>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
            Err(invalid_argument(obj.py(), format!("{name} {} is out of range (-2**63..2**63)", obj.str()?)))
        }
        Err(_) => Err(PyTypeError::new_err(format!("{name} must be an int, got {}", type_name(obj)))),
    }
}

/// An int argument in `lo..=hi` (`what` says the range in words, e.g. "non-negative").
///
/// Raises TypeError for a non-integer, InvalidArgumentError outside the range.
pub(crate) fn int_in(obj: &Bound<'_, PyAny>, name: &str, lo: i64, hi: i64, what: &str) -> PyResult<i64> {
    let out_of_range = || -> PyResult<PyErr> { Ok(invalid_argument(obj.py(), format!("{name} must be {what}, got {}", obj.str()?))) };
    match int(obj, name) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        Ok(_) => Err(out_of_range()?),
        Err(e) if e.is_instance_of::<PyTypeError>(obj.py()) => Err(e),
        Err(_) => Err(out_of_range()?),
    }
}

/// A non-negative int that fits in `usize` (byte counts, thread and batch counts).
///
/// Raises TypeError for a non-integer, InvalidArgumentError for a negative or too large one.
pub(crate) fn non_negative(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    let hi = i64::try_from(usize::MAX).unwrap_or(i64::MAX);
    Ok(int_in(obj, name, 0, hi, "a non-negative int (at most 2**63 - 1)")? as usize)
}

/// The two items of a pair argument (`(x, y)`, `(width, height)`): a tuple, list or other
/// sequence of length 2, or a 1-d numpy array of 2 elements. A str, bytes or a mapping is not
/// a pair.
///
/// Raises TypeError naming `name` and `form` for anything else, ValueError for a sequence of
/// another length.
pub(crate) fn pair<'py>(obj: &Bound<'py, PyAny>, name: &str, form: &str) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    if let Ok(t) = obj.cast::<PyTuple>() {
        if t.len() == 2 {
            return Ok((t.get_item(0)?, t.get_item(1)?));
        }
    }
    let sequence_like = !(obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyDict>())
        && (obj.cast::<pyo3::types::PySequence>().is_ok() || obj.cast::<numpy::PyUntypedArray>().is_ok_and(|a| numpy::PyUntypedArrayMethods::ndim(a) == 1));
    if !sequence_like {
        return Err(PyTypeError::new_err(format!("{name} must be a pair {form} of ints, got {}", type_name(obj))));
    }
    let n = obj.len()?;
    if n != 2 {
        return Err(PyValueError::new_err(format!("{name} must be a pair {form} of ints, got a {} of length {n}", type_name(obj))));
    }
    Ok((obj.get_item(0)?, obj.get_item(1)?))
}

/// A `location` (x, y) in level-0 pixels: a pair of ints (any 64-bit signed values).
///
/// Raises TypeError / ValueError as [`pair`] and [`int`].
pub(crate) fn location(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<(i64, i64)> {
    let (x, y) = pair(obj, name, "(x, y)")?;
    Ok((int(&x, &format!("{name} x"))?, int(&y, &format!("{name} y"))?))
}

/// A `level` argument: `Ok(index)` for an int in `0..=usize::MAX` (whether the level exists
/// is the slide's check), `Err(text)` for an int that cannot name a level (negative, or too
/// large for an index), holding the value as written, for the caller's InvalidArgumentError.
///
/// Raises TypeError for a non-integer.
pub(crate) fn level(obj: &Bound<'_, PyAny>) -> PyResult<Result<usize, String>> {
    match int(obj, "level") {
        Ok(v) => Ok(usize::try_from(v).map_err(|_| v.to_string())),
        Err(e) if e.is_instance_of::<PyTypeError>(obj.py()) => Err(e),
        Err(_) => Ok(Err(obj.str()?.to_string())),
    }
}

/// A `size` (width, height) in pixels: a pair of non-negative ints, or one int `n` for a
/// square `(n, n)` (bools are not sizes).
///
/// Raises TypeError for anything else or non-ints, InvalidArgumentError (a ValueError) for a
/// negative or out-of-range width or height.
pub(crate) fn size(obj: &Bound<'_, PyAny>) -> PyResult<(u64, u64)> {
    let what = "a non-negative int (at most 2**63 - 1)";
    if !obj.is_instance_of::<pyo3::types::PyBool>() && obj.hasattr("__index__")? && !obj.hasattr("__len__")? {
        let n = int_in(obj, "size", 0, i64::MAX, what)? as u64;
        return Ok((n, n));
    }
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err("size must be an int or a pair (width, height) of ints, got bool"));
    }
    let (w, h) = pair(obj, "size", "(width, height)")?;
    Ok((int_in(&w, "size width", 0, i64::MAX, what)? as u64, int_in(&h, "size height", 0, i64::MAX, what)? as u64))
}

/// An optional byte count (`cache_bytes=`): None, or a non-negative int.
///
/// Raises TypeError / InvalidArgumentError as [`non_negative`].
pub(crate) fn optional_bytes(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<usize>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => non_negative(o, name).map(Some),
    }
}

/// A float argument (a Python float or int, a numpy number: anything `float()` takes
/// except a str).
///
/// Raises TypeError naming `name` for anything else, InvalidArgumentError for an int too
/// large for a float.
pub(crate) fn float(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!("{name} must be a number, got {}", type_name(obj))));
    }
    match obj.extract::<f64>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Err(invalid_argument(obj.py(), format!("{name} {} is too large", obj.str()?))),
        Err(_) => Err(PyTypeError::new_err(format!("{name} must be a number, got {}", type_name(obj)))),
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
    let t: (u8, u8, u8) = obj.extract().map_err(|_| PyValueError::new_err("background must be an int 0..=255 or an (r, g, b) tuple of such ints"))?;
    Ok([t.0, t.1, t.2])
}

/// The ordinal a CUDA device without an index (`"cuda"`, `torch.device("cuda")`) means, as in
/// torch: torch's current device (`torch.cuda.current_device()`, e.g. `local_rank` after
/// `torch.cuda.set_device(local_rank)` under DDP) when the caller has imported torch and
/// torch's CUDA state is initialised; otherwise 0 (torch's current device before it is
/// initialised). Never imports torch nor initialises its CUDA state.
///
/// Errors: whatever `torch.cuda.is_initialized()` / `current_device()` raise; ValueError for
/// a negative ordinal from them.
fn default_cuda_ordinal(py: Python<'_>) -> PyResult<usize> {
    let modules = py.import("sys")?.getattr("modules")?;
    let Ok(modules) = modules.cast::<PyDict>() else { return Ok(0) };
    let Some(cuda) = modules.get_item("torch.cuda")? else { return Ok(0) };
    if !cuda.call_method0("is_initialized")?.is_truthy()? {
        return Ok(0);
    }
    let current: i64 = cuda.call_method0("current_device")?.extract()?;
    usize::try_from(current).map_err(|_| PyValueError::new_err(format!("torch.cuda.current_device() returned {current}")))
}

/// Parse a `device=` argument: `None` / `"cpu"` / a `torch.device` of type `cpu` → `None`
/// (the CPU path); `"cuda:N"`, an int `N >= 0`, or an object with `.type == "cuda"` and
/// `.index == N` (a `torch.device`) → `Some(N)`; `"cuda"` and `torch.device("cuda")` (no
/// index) → torch's current device when torch is imported and its CUDA state initialised,
/// else 0 (see [`default_cuda_ordinal`]).
///
/// Malformed strings, negative or huge ordinals and other device types raise `ValueError`;
/// objects of other types raise `TypeError`.
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
        let text: String = s.extract().map_err(|_| bad(s.repr().map(|r| r.to_string()).unwrap_or_default()))?;
        let bad_str = || -> PyResult<PyErr> { Ok(bad(s.repr()?.to_string())) };
        return match text.as_str() {
            "cpu" => Ok(None),
            "cuda" => default_cuda_ordinal(obj.py()).map(Some),
            t => match t.strip_prefix("cuda:") {
                Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => match n.parse::<usize>() {
                    Ok(v) => Ok(Some(v)),
                    Err(_) => Err(bad_str()?),
                },
                _ => Err(bad_str()?),
            },
        };
    }
    // Python ints and anything with __index__ (numpy integers); a huge one is a bad ordinal.
    match obj.extract::<i64>() {
        Ok(i) => return usize::try_from(i).map(Some).map_err(|_| bad(i.to_string())),
        Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => return Err(bad(obj.str()?.to_string())),
        Err(_) => {}
    }
    if let (Ok(t), Ok(idx)) = (obj.getattr("type"), obj.getattr("index")) {
        if let (Ok(t), Ok(idx)) = (t.extract::<String>(), idx.extract::<Option<i64>>()) {
            return match (t.as_str(), idx) {
                ("cpu", _) => Ok(None),
                ("cuda", None) => default_cuda_ordinal(obj.py()).map(Some),
                ("cuda", Some(i)) if i >= 0 => Ok(Some(i as usize)),
                _ => Err(bad(obj.repr()?.to_string())),
            };
        }
    }
    Err(PyTypeError::new_err(format!("device must be None, a str, an int or a torch.device, got {}", type_name(obj))))
}

/// A device argument of the GPU module functions: a CUDA device as [`device`] parses it,
/// 0 when omitted.
///
/// Raises ValueError for the CPU (`"cpu"`) and bad devices, TypeError for other objects.
pub(crate) fn cuda_ordinal(obj: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    let Some(obj) = obj else { return Ok(0) };
    device(Some(obj))?.ok_or_else(|| PyValueError::new_err("this function needs a CUDA device ('cuda', 'cuda:N' or an int N), not the CPU"))
}

/// ``device=`` argument parsed as the reads parse it: None for the CPU path, else the CUDA
/// ordinal. ValueError / TypeError for a bad device.
#[pyfunction(name = "_parse_device")]
#[pyo3(signature = (device=None))]
pub(crate) fn parse_device_py(device: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    self::device(device)
}
