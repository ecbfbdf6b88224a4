//! The cap on decode threads: `RAYON_NUM_THREADS` (which rayon reads when it builds a pool
//! without an explicit size) and explicit thread counts (the CLI's `--threads`) are checked
//! against [`MAX_THREADS`] before any pool is built, so a huge value is an error naming it
//! instead of a process that spawns threads until the system runs out.

use crate::error::{Error, Result};

/// Most threads a decode pool may have: 1024, a fixed bound (not a multiple of this machine's
/// cores, so the same value is accepted everywhere); far above any core count where
/// more threads still help, far below where thread stacks exhaust memory or the pid space.
pub const MAX_THREADS: usize = crate::limits::LIMITS.threads;

/// The accepted values of `RAYON_NUM_THREADS`, in words (quoted in its error).
const ACCEPTED: &str = "an integer from 0 to 1024 (0 = one thread per core; slidestream's cap on decode threads)";

/// `RAYON_NUM_THREADS`, checked: `Ok(None)` when unset, empty or 0 (rayon's default: one
/// thread per core), `Ok(Some(n))` for 1 ..= [`MAX_THREADS`].
///
/// Checked at every [`crate::Slide::open`] (before any pool exists; rayon builds its global
/// pool at the first parallel read) and by the bindings before they build their pool.
///
/// # Errors
/// [`Error::Config`] naming `RAYON_NUM_THREADS` for a value that is not an integer or is above
/// [`MAX_THREADS`] (rayon would silently ignore the first and spawn the second).
pub fn rayon_num_threads() -> Result<Option<usize>> {
    let Some(raw) = std::env::var_os("RAYON_NUM_THREADS") else { return Ok(None) };
    let text = raw.to_string_lossy().trim().to_string();
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<usize>() {
        Ok(0) => Ok(None),
        Ok(n) if n <= MAX_THREADS => Ok(Some(n)),
        _ => Err(Error::config("RAYON_NUM_THREADS", text, ACCEPTED)),
    }
}

/// An explicit thread count `n` given through `what` (a flag such as `--threads`), checked:
/// 1 ..= [`MAX_THREADS`].
///
/// # Errors
/// [`Error::Usage`] naming `what`, the value and the cap.
pub fn check_threads(what: &str, n: usize) -> Result<usize> {
    if (1..=MAX_THREADS).contains(&n) {
        Ok(n)
    } else {
        Err(Error::Usage(format!("{what} {n}: expected a thread count from 1 to {MAX_THREADS} (slidestream's cap on decode threads)")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_counts_are_capped() {
        assert_eq!(check_threads("--threads", 1).unwrap(), 1);
        assert_eq!(check_threads("--threads", MAX_THREADS).unwrap(), MAX_THREADS);
        for n in [0, MAX_THREADS + 1, usize::MAX] {
            let e = check_threads("--threads", n).unwrap_err();
            assert_eq!(e.kind_name(), "usage");
            assert!(e.to_string().starts_with(&format!("--threads {n}: ")) && e.to_string().contains("1024"), "{e}");
        }
    }
}
