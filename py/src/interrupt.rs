//! Ctrl-C during a long read: the core runs its interrupt check between waves of tiles
//! ([`slidestream::interrupt`]); this module installs a check that, on the interpreter's main
//! thread, asks Python whether a signal arrived (`PyErr_CheckSignals`, which runs the signal
//! handlers: the default SIGINT handler raises `KeyboardInterrupt`). The read then stops with
//! `Error::Interrupted`, raised as `KeyboardInterrupt` ([`crate::errors`]).
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

/// The check installed into the core.
fn python_signalled() -> bool {
    if MAIN.get() != Some(&std::thread::current().id()) {
        return false;
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
