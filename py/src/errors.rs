//! The one mapping from the core's [`Error`] enum to Python exceptions.
//!
//! The exception classes are defined in Python (`slidestream._errors`, where their docs live);
//! the class is chosen by the error's variant (and, for GPU errors, the [`GpuError`] variant),
//! never by its message text:
//!
//! | core error | Python exception |
//! |---|---|
//! | `Io` with an OS error number | `OSError(errno, strerror, filename)` (`filename` as `os.fsdecode` gives it), which Python turns into `FileNotFoundError`, `PermissionError`, ... |
//! | `Io` without one, of a kind that names one (remote reads: NotFound, PermissionDenied, TimedOut, StaleNetworkFileHandle, ConnectionRefused/Reset, UnexpectedEof) | `OSError(errno, message, url)`: `FileNotFoundError`, `PermissionError`, `TimeoutError`, `OSError` with `errno.ESTALE`, ... |
//! | `Io` without one otherwise | `OSError(message)` |
//! | `Format` | `CorruptDataError` |
//! | `Unsupported` | `UnsupportedFormatError` |
//! | `Limits` | `LimitsExceededError` (also a `MemoryError`) |
//! | `Usage` | `InvalidArgumentError` (also a `ValueError`) |
//! | `Config` | `ConfigError` (also a `ValueError`) |
//! | `Interrupted` | `KeyboardInterrupt` (Ctrl-C arrived during a long read) |
//! | `Gpu(NotCompiled \| Unavailable)` | `GpuUnavailableError` |
//! | `Gpu(Fork)` | `GpuForkError` |
//! | other `Gpu` | `GpuError` |
//! | any later variant | `SlideError` |
//!
//! The message is the error's `Display` text (file, level, tile and what went wrong).

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use slidestream::error::GpuError;
use slidestream::Error;

/// The `slidestream._errors` class an error maps to, or `None` for I/O errors (built-in
/// `OSError` family).
fn class_name(e: &Error) -> Option<&'static str> {
    Some(match e {
        Error::Io { .. } => return None,
        Error::Format { .. } => "CorruptDataError",
        Error::Unsupported { .. } => "UnsupportedFormatError",
        Error::Limits { .. } => "LimitsExceededError",
        Error::Usage(_) => "InvalidArgumentError",
        Error::Config { .. } => "ConfigError",
        Error::Gpu(GpuError::NotCompiled | GpuError::Unavailable(_)) => "GpuUnavailableError",
        Error::Gpu(GpuError::Fork { .. }) => "GpuForkError",
        Error::Gpu(_) => "GpuError",
        _ => "SlideError",
    })
}

/// A class of `slidestream._errors` by name.
fn error_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py.import("slidestream._errors")?.getattr(name)?.cast_into::<PyType>()?)
}

/// Map a core error to its Python exception (table in the module docs).
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    if let Error::Io { source, at } = &e {
        return match source.raw_os_error() {
            // OSError(errno, strerror, filename) picks FileNotFoundError, PermissionError...;
            // strerror as Python's os.strerror gives it (the C library's text for errno).
            Some(n) => {
                let strerror =
                    py.import("os").and_then(|os| os.getattr("strerror")?.call1((n,))?.extract::<String>()).unwrap_or_else(|_| source.kind().to_string());
                // filename as os.fsdecode gives it (surrogate escapes for non-UTF-8 bytes), so
                // it equals the str the caller passed or os.listdir returned.
                match crate::args::path_str(py, &at.path) {
                    Ok(name) => PyOSError::new_err((n, strerror, name.unbind())),
                    Err(_) => PyOSError::new_err((n, strerror, at.path.to_string_lossy().into_owned())),
                }
            }
            // Errors without an OS error number whose kind names one (a remote slide's
            // 404, 403, timeout, changed object): OSError(errno, message, url), so Python
            // picks FileNotFoundError, PermissionError, TimeoutError, ... as for a local file.
            None => match kind_errno(source.kind()) {
                Some(n) => PyOSError::new_err((n, e.to_string(), at.path.to_string_lossy().into_owned())),
                None => PyOSError::new_err(e.to_string()),
            },
        };
    }
    if let Error::Interrupted = e {
        return crate::interrupt::take_pending().unwrap_or_else(|| PyKeyboardInterrupt::new_err(e.to_string()));
    }
    let name = class_name(&e).unwrap_or("SlideError");
    match error_class(py, name) {
        Ok(cls) => PyErr::from_type(cls, e.to_string()),
        Err(err) => err,
    }
}

/// The errno an io error kind stands for, for the kinds a remote read reports
/// (`slidestream::io::remote`): `NotFound` → ENOENT, `PermissionDenied` → EACCES, `TimedOut`
/// → ETIMEDOUT, `StaleNetworkFileHandle` → ESTALE (the object changed since open),
/// `ConnectionRefused` / `ConnectionReset` → ECONNREFUSED / ECONNRESET, `UnexpectedEof` → EIO
/// (a short response).
fn kind_errno(kind: std::io::ErrorKind) -> Option<i32> {
    use std::io::ErrorKind as K;
    Some(match kind {
        K::NotFound => libc_errno::ENOENT,
        K::PermissionDenied => libc_errno::EACCES,
        K::TimedOut => libc_errno::ETIMEDOUT,
        K::StaleNetworkFileHandle => libc_errno::ESTALE,
        K::ConnectionRefused => libc_errno::ECONNREFUSED,
        K::ConnectionReset => libc_errno::ECONNRESET,
        K::UnexpectedEof => libc_errno::EIO,
        _ => return None,
    })
}

/// Linux errno values (asm-generic/errno*.h), the platform the bindings build for.
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EACCES: i32 = 13;
    pub const ECONNRESET: i32 = 104;
    pub const ETIMEDOUT: i32 = 110;
    pub const ECONNREFUSED: i32 = 111;
    pub const ESTALE: i32 = 116;
}

/// `InvalidArgumentError(message)`: a bad argument found by the bindings themselves (the same
/// class as the core's `Usage` errors).
pub(crate) fn invalid_argument(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py(py, Error::Usage(message.into()))
}

/// `Result<T, Error>` → `PyResult<T>` through [`to_py`].
pub(crate) trait OrRaise<T> {
    /// The value, or the error mapped to its Python exception.
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for Result<T, Error> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
