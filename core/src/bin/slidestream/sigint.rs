//! Ctrl-C: the command stops with one line ("error: interrupted") and exit status 130 (128 +
//! SIGINT, what a shell reports for a command SIGINT ended).
//!
//! A SIGINT handler sets a flag that the library's interrupt check reads
//! ([`slidestream::interrupt`]: between waves of a long read, and every 150 ms of waiting for
//! a remote server), so the command returns `Error::Interrupted` through its normal path.
//! Where no check runs (a step that does not read), a watcher thread ends the process with the
//! same line and status after [`GRACE`]; a second Ctrl-C ends it at once.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

/// How long the command may take to stop by itself after Ctrl-C before the watcher ends it.
const GRACE: Duration = Duration::from_secs(2);

/// The exit status of a command SIGINT stopped.
pub const EXIT_STATUS: u8 = 130;

static FLAG: AtomicBool = AtomicBool::new(false);
/// Set when the main thread is ending the command itself (the watcher then stays quiet).
static ENDING: AtomicBool = AtomicBool::new(false);
/// The write end of the pipe that wakes the watcher (-1 before [`install`]).
static WAKE: AtomicI32 = AtomicI32::new(-1);

const MESSAGE: &[u8] = b"error: interrupted\n";

/// The handler: only async-signal-safe calls (an atomic swap, `write(2)`, `_exit(2)`).
extern "C" fn on_sigint(_: libc::c_int) {
    if FLAG.swap(true, Ordering::SeqCst) {
        // SAFETY: async-signal-safe calls with a valid buffer.
        unsafe {
            libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
            libc::_exit(EXIT_STATUS as libc::c_int);
        }
    }
    let fd = WAKE.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: async-signal-safe; a failed write only leaves the watcher asleep.
        unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
    }
}

/// The check installed into the library.
fn interrupted() -> bool {
    FLAG.load(Ordering::Relaxed)
}

/// `true` once SIGINT has arrived; from then on the caller ends the command (the watcher no
/// longer does).
pub fn was_interrupted() -> bool {
    ENDING.store(true, Ordering::SeqCst);
    interrupted()
}

/// Install the handler, the watcher thread and the library's interrupt check. Where the pipe
/// or the thread cannot be made, SIGINT keeps its default action (the process ends at once).
pub fn install() {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let read_end = fds[0];
    let watcher = std::thread::Builder::new().name("sigint-watcher".into()).spawn(move || {
        let mut b = [0u8; 1];
        // SAFETY: a valid descriptor and buffer; EINTR only repeats the wait.
        while unsafe { libc::read(read_end, b.as_mut_ptr().cast(), 1) } != 1 {}
        std::thread::sleep(GRACE);
        if ENDING.load(Ordering::SeqCst) {
            return;
        }
        // SAFETY: plain writes and exit; the main thread may hold stderr's lock, so the line
        // goes straight to the descriptor.
        unsafe {
            libc::write(2, MESSAGE.as_ptr().cast(), MESSAGE.len());
            libc::_exit(EXIT_STATUS as libc::c_int);
        }
    });
    if watcher.is_err() {
        return;
    }
    WAKE.store(fds[1], Ordering::SeqCst);
    slidestream::interrupt::set_check(Some(interrupted));
    // SAFETY: a handler of the signature sigaction expects; SA_RESTART keeps other system
    // calls (writes to stdout) from failing with EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}
