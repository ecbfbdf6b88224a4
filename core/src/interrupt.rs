//! Interrupting long calls: a process-wide check that the CPU read layer runs between waves of
//! work (never before the first, so a call of one wave never runs it) ([`crate::read`]; every wave is bounded in bytes, so the time between two checks is
//! bounded by what one wave decodes).
//!
//! Hosts install a check with [`set_check`]: the Python bindings install one that asks the
//! interpreter whether a signal arrived (`PyErr_CheckSignals` on the main thread), so Ctrl-C
//! stops a large `read_region` with `KeyboardInterrupt`. Without a check nothing is ever
//! interrupted (the CLI relies on SIGINT's default action).

use std::sync::RwLock;

use crate::error::{Error, Result};

/// The installed check: returns `true` when the current call should stop.
static CHECK: RwLock<Option<fn() -> bool>> = RwLock::new(None);

/// Install (`Some`) or remove (`None`) the process's interrupt check. The function is called
/// on the thread that made the read call (never on decode worker threads), between waves; it
/// should be cheap (a flag test) and must not call back into slidestream.
pub fn set_check(check: Option<fn() -> bool>) {
    *CHECK.write().unwrap_or_else(|p| p.into_inner()) = check;
}

/// [`Error::Interrupted`] when the installed check says so, else `Ok`.
pub(crate) fn check() -> Result<()> {
    let f = *CHECK.read().unwrap_or_else(|p| p.into_inner());
    match f {
        Some(f) if f() => Err(Error::Interrupted),
        _ => Ok(()),
    }
}

/// A check that fires only on threads that asked for it, so unit tests running in parallel do
/// not interrupt each other.
#[cfg(test)]
pub(crate) mod testing {
    use std::cell::Cell;

    thread_local! { static STOP: Cell<bool> = const { Cell::new(false) }; }

    fn stop_here() -> bool {
        STOP.with(|s| s.get())
    }

    /// Install the per-thread check and set this thread's flag.
    pub(crate) fn interrupt_this_thread(stop: bool) {
        super::set_check(Some(stop_here));
        STOP.with(|s| s.set(stop));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_installed_check_decides() {
        super::testing::interrupt_this_thread(true);
        assert_eq!(super::check().unwrap_err().kind_name(), "interrupted");
        std::thread::spawn(|| assert!(super::check().is_ok(), "other threads are not interrupted")).join().unwrap();
        super::testing::interrupt_this_thread(false);
        assert!(super::check().is_ok());
    }
}
