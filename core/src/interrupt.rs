//! Interrupting long calls: a process-wide check that the CPU read layer runs between waves of
//! work (never before the first, so a call of one wave never runs it) ([`crate::read`]; every wave is bounded in bytes, so the time between two checks is
//! bounded by what one wave decodes), and that a remote slide runs while it waits for the
//! network ([`crate::io::remote`]: every [`WAIT_SLICE`] of waiting for a HEAD, LIST or
//! GET, never when the answer comes sooner), so a stalled server cannot hold a call past it.
//!
//! Hosts install a check with [`set_check`]: the Python bindings install one that asks the
//! interpreter whether a signal arrived (`PyErr_CheckSignals` on the main thread), so Ctrl-C
//! stops a large `read_region` with `KeyboardInterrupt`. Without a check nothing is ever
//! interrupted. The CLI installs one that tests a flag its SIGINT handler sets (exit status
//! 130).

use std::sync::RwLock;

/// How long a remote wait runs between two checks: short enough that Ctrl-C is answered
/// well within a second, long enough that a wait costs at most a few checks per second.
pub const WAIT_SLICE: std::time::Duration = std::time::Duration::from_millis(150);

use crate::error::{Error, Result};

/// The installed check: returns `true` when the current call should stop.
static CHECK: RwLock<Option<fn() -> bool>> = RwLock::new(None);

/// Install (`Some`) or remove (`None`) the process's interrupt check. The function is called
/// on the thread that made the read call (never on decode worker threads), between waves and
/// every [`WAIT_SLICE`] of a remote wait; it should be cheap (a flag test) and must not call
/// back into slidestream. Once it has returned `true` it should keep doing so until the call
/// ends (a check that fires once may be consumed by a format probe that treats a failed read
/// as "not this format"; the next wait must stop too).
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

/// The payload of an `io::Error` that carries an interruption out of a byte source's read
/// (a remote wait stopped by the check): [`crate::Error::io`] turns such an error back into
/// [`Error::Interrupted`]. Its kind is `Other`, not `Interrupted`, because readers retry
/// `ErrorKind::Interrupted` (`std::io::Read::read_exact` does).
#[derive(Debug)]
struct InterruptedIo;

impl std::fmt::Display for InterruptedIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for InterruptedIo {}

/// An `io::Error` that stands for [`Error::Interrupted`] (see [`InterruptedIo`]).
pub(crate) fn io_error() -> std::io::Error {
    std::io::Error::other(InterruptedIo)
}

/// `true` when `e` was made by [`io_error`].
pub(crate) fn is_io(e: &std::io::Error) -> bool {
    e.get_ref().is_some_and(|x| x.is::<InterruptedIo>())
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
