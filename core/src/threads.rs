//! Scheduling priority of slidestream's own background threads (`SLIDESTREAM_THREAD_NICE`).
//!
//! A loader should be invisible to the program it feeds: when a training loop and the loader's
//! threads want the same cores, the loop should win. On Linux the nice value is a per-thread
//! attribute (setpriority(2), NOTES: "the nice value is a per-thread attribute" under NPTL), so
//! each background thread raises its own when it starts, by the configured increment; the
//! caller's threads (which also decode their share of a read) keep theirs. A thread may always
//! raise its nice value without privileges; lowering it back would need `CAP_SYS_NICE`, so the
//! setting is fixed per process (read at the first open, [`configure`]).

use std::sync::OnceLock;

static NICE: OnceLock<u8> = OnceLock::new();

/// Fix the increment from `SLIDESTREAM_THREAD_NICE` (once; later calls return it, and
/// `config::set` refuses another value). Called at every open, so a bad value fails the open.
///
/// # Errors
/// [`crate::Error::Config`] when a `SLIDESTREAM_*` value is not accepted.
pub fn configure() -> crate::Result<u8> {
    if let Some(&n) = NICE.get() {
        return Ok(n);
    }
    let n = crate::config::consume(&["SLIDESTREAM_THREAD_NICE"])?.thread_nice;
    Ok(*NICE.get_or_init(|| n))
}

/// The increment in effect ([`configure`]; 0 when the settings do not parse, which an open or
/// the GPU engine's start has already reported as an error).
pub fn background_nice() -> u8 {
    configure().unwrap_or(0)
}

/// Raise the calling thread's nice value by [`background_nice`] (capped at 19), for a thread
/// slidestream started; does nothing for an increment of 0 or outside Linux (where the
/// setting accepts only 0).
///
/// # Errors
/// The OS error of `getpriority`/`setpriority` (none is expected: raising one's own nice value
/// needs no privilege).
pub fn lower_this_thread() -> std::io::Result<()> {
    lower_this_thread_by(background_nice())
}

/// [`lower_this_thread`] with an explicit increment (0–19).
///
/// # Errors
/// As [`lower_this_thread`].
pub fn lower_this_thread_by(by: u8) -> std::io::Result<()> {
    if by == 0 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
        // getpriority may legitimately return -1: errno tells an error apart.
        // SAFETY: errno of this thread; plain syscalls on this thread's id.
        unsafe { *libc::__errno_location() = 0 };
        let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
        if now == -1 && std::io::Error::last_os_error().raw_os_error().unwrap_or(0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let want = (now + i32::from(by)).min(19);
        if want > now {
            // SAFETY: as above.
            if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, want) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// The calling thread's nice value (Linux), for tests and diagnostics.
///
/// # Errors
/// The OS error of `getpriority`.
#[cfg(target_os = "linux")]
pub fn this_thread_nice() -> std::io::Result<i32> {
    // SAFETY: as in `lower_this_thread_by`.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if now == -1 && std::io::Error::last_os_error().raw_os_error().unwrap_or(0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(now)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A thread raises its own nice value by the increment (capped at 19) and leaves every
    /// other thread's alone.
    #[test]
    fn raises_only_the_calling_threads_nice_value() {
        let before = this_thread_nice().unwrap();
        let (inside, after) = std::thread::spawn(|| {
            let a = this_thread_nice().unwrap();
            lower_this_thread_by(3).unwrap();
            let b = this_thread_nice().unwrap();
            lower_this_thread_by(19).unwrap();
            (b - a, this_thread_nice().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(inside, 3.min(19 - before));
        assert_eq!(after, 19);
        assert_eq!(this_thread_nice().unwrap(), before, "the caller's thread is untouched");
        lower_this_thread_by(0).unwrap();
        assert_eq!(this_thread_nice().unwrap(), before);
    }
}
