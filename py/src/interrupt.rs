//! Ctrl-C during a long read: the core runs its interrupt check between waves of tiles and
//! every 150 ms of waiting for a remote server ([`slidestream::interrupt`]); this module installs a check that, on the interpreter's main
//! thread, asks Python whether a signal arrived (`PyErr_CheckSignals`, which runs the signal
//! handlers: the default SIGINT handler raises `KeyboardInterrupt`). The read then stops with
//! `Error::Interrupted`, raised as `KeyboardInterrupt` ([`crate::errors`]; [`crate::guard`]
//! raises it at the end of the call whatever the call returned, so it is never lost).
//!
//! Only the main thread handles signals in Python, so other threads skip the check without
//! touching the interpreter; and the core never runs it before a call's first wave, so small
//! reads never take the GIL for it.

use std::sync::OnceLock;
use std::thread::ThreadId;

use pyo3::prelude::*;

/// The thread that imported the module when it was Python's main thread.
static MAIN: OnceLock<ThreadId> = OnceLock::new();

thread_local! {
    /// The exception a signal handler raised, re-raised by [`take_pending`].
    static PENDING: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// Test builds: the number of checks still to pass before the check itself raises SIGINT's
/// flag (`PyErr_SetInterrupt`, what Ctrl-C does), so a test interrupts a read between two given
/// waves through the real signal path; negative = off.
#[cfg(feature = "test-hooks")]
static SIGINT_AFTER: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);

/// `_test_sigint_after_checks(n)`: the `n`-th interrupt check from now (0 = the next) raises
/// SIGINT's flag first (test builds only).
#[cfg(feature = "test-hooks")]
#[pyfunction]
pub(crate) fn test_sigint_after_checks(n: i64) {
    SIGINT_AFTER.store(n, std::sync::atomic::Ordering::SeqCst);
}

/// The check installed into the core.
fn python_signalled() -> bool {
    if MAIN.get() != Some(&std::thread::current().id()) {
        return false;
    }
    // Once a signal's exception is taken, the check keeps firing until the call ends
    // (`crate::guard` raises it then): a probe that swallowed one interrupted read must not
    // go on waiting.
    if PENDING.with(|p| p.borrow().is_some()) {
        return true;
    }
    #[cfg(feature = "test-hooks")]
    if SIGINT_AFTER.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        // SAFETY: callable from any thread, with or without the GIL (Python's C API docs).
        unsafe { pyo3::ffi::PyErr_SetInterrupt() };
    }
    match Python::attach(|py| py.check_signals()) {
        Ok(()) => false,
        Err(e) => {
            PENDING.with(|p| *p.borrow_mut() = Some(e));
            true
        }
    }
}

/// The exception the signal handler raised during this thread's last interrupted read
/// (usually `KeyboardInterrupt`), if any.
pub(crate) fn take_pending() -> Option<PyErr> {
    PENDING.with(|p| p.borrow_mut().take())
}

/// Install the check (called at module import).
pub(crate) fn install(py: Python<'_>) -> PyResult<()> {
    let threading = py.import("threading")?;
    let is_main = threading.call_method0("current_thread")?.is(&threading.call_method0("main_thread")?);
    if is_main {
        let _ = MAIN.set(std::thread::current().id());
        slidestream::interrupt::set_check(Some(python_signalled));
    }
    Ok(())
}
