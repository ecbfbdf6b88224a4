//! The one way the bindings call into the core: [`detach`] runs a core call with the GIL
//! released, and makes sure that what comes back to Python is an exception of the library
//! or a `KeyboardInterrupt`, never a Rust panic:
//!
//! * a panic inside the call (the core's, or one of its dependencies': an HTTP client, a
//!   decoder) is caught where it happens and raised as `SlideError("internal error (please
//!   report): <the panic message>")`, an `Exception`; without this pyo3 would raise
//!   `pyo3_runtime.PanicException`, a `BaseException` that `except Exception` does not catch;
//! * a `KeyboardInterrupt` that the interrupt check ([`crate::interrupt`]) took from Python's
//!   signal handler during the call is raised whatever the call returned, so Ctrl-C is never
//!   lost (a format probe may treat an interrupted read as "not this format" and go on).
//!
//! Panics are caught with `std::panic::catch_unwind` (the crate is built with unwinding
//! panics, as pyo3 requires); the process's panic hook still prints the panic to stderr.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use slidestream::Error;

/// Run `f` with the GIL released (module docs).
///
/// # Errors
/// `SlideError` when `f` panicked; the pending `KeyboardInterrupt` when the interrupt check
/// took one during the call. Otherwise `Ok` with `f`'s own result, for the caller to map
/// (`OrRaise`) or inspect.
pub(crate) fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, Error> + Send) -> PyResult<Result<T, Error>> {
    let r = py.detach(move || {
        let r = catch_unwind(AssertUnwindSafe(|| {
            #[cfg(feature = "test-hooks")]
            hooks::before_call();
            f()
        }));
        #[cfg(feature = "test-hooks")]
        hooks::after_call();
        r
    });
    if let Some(e) = crate::interrupt::take_pending() {
        return Err(e);
    }
    r.map_err(|payload| internal_error(py, payload.as_ref()))
}

/// `SlideError("internal error (please report): <message>")` for a caught panic.
pub(crate) fn internal_error(py: Python<'_>, payload: &(dyn std::any::Any + Send)) -> PyErr {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into());
    let text = format!("internal error (please report): {message}");
    match py.import("slidestream._errors").and_then(|m| m.getattr("SlideError")) {
        Ok(cls) => match cls.cast_into::<pyo3::types::PyType>() {
            Ok(cls) => PyErr::from_type(cls, text),
            Err(e) => e.into(),
        },
        Err(e) => e,
    }
}

/// Test builds only: faults injected at the boundary, so tests reach paths no real input
/// reaches on demand.
#[cfg(feature = "test-hooks")]
pub(crate) mod hooks {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use pyo3::prelude::*;

    static PANIC_NEXT: Mutex<Option<String>> = Mutex::new(None);
    static SIGINT_AFTER_NEXT: AtomicBool = AtomicBool::new(false);

    pub(crate) fn before_call() {
        if let Some(m) = PANIC_NEXT.lock().unwrap_or_else(|p| p.into_inner()).take() {
            panic!("{m}");
        }
    }

    pub(super) fn after_call() {
        if SIGINT_AFTER_NEXT.swap(false, Ordering::SeqCst) {
            // SAFETY: callable from any thread, with or without the GIL (Python's C API docs).
            unsafe { pyo3::ffi::PyErr_SetInterrupt() };
        }
    }

    /// `_test_panic_in_next_call(message)`: the next call into the core (an open, a read, ...)
    /// panics with `message` inside the call, where a bug of the core would.
    #[pyfunction(name = "_test_panic_in_next_call")]
    pub(crate) fn test_panic_in_next_call(message: String) {
        *PANIC_NEXT.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    }

    /// `_test_sigint_after_next_call()`: when the next call into the core returns, SIGINT's
    /// flag is raised (`PyErr_SetInterrupt`, what Ctrl-C does) before the result is turned into
    /// Python objects (arrays), as if Ctrl-C arrived at the end of the read.
    #[pyfunction(name = "_test_sigint_after_next_call")]
    pub(crate) fn test_sigint_after_next_call() {
        SIGINT_AFTER_NEXT.store(true, Ordering::SeqCst);
    }
}
