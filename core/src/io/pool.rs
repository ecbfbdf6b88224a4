//! The process-wide I/O pool: threads that only issue positional reads, so a plan's requests
//! are in flight together (the queue depth is the pool's size, `SLIDESTREAM_IO_DEPTH`) and never
//! wait behind tile decodes in the decode pool.
//!
//! Built lazily at the first read of more than one request, with the depth fixed at the first
//! [`Slide::open`](crate::Slide::open) ([`configure`]; a bad value is an
//! [`Error::Config`](crate::Error::Config) there). A process forked after the pool was built gets
//! a new one (the parent's threads do not exist in the child; its pool is leaked, never
//! touched). If the threads cannot be started, reads run on the calling thread.

use std::sync::{Arc, Mutex, OnceLock};

/// The depth when `SLIDESTREAM_IO_DEPTH` is not set (measured: docs/benchmarks.md, "Cold-cache
/// reads").
pub const DEFAULT_DEPTH: usize = 32;

static DEPTH: OnceLock<usize> = OnceLock::new();

/// Fix the process's I/O depth from `SLIDESTREAM_IO_DEPTH` (once; later calls return it).
/// Called at every open, so a bad value fails the open.
///
/// # Errors
/// [`crate::Error::Config`] when a `SLIDESTREAM_*` value is not accepted.
pub fn configure() -> crate::Result<usize> {
    if let Some(&d) = DEPTH.get() {
        return Ok(d);
    }
    let d = crate::config::consume(&["SLIDESTREAM_IO_DEPTH"])?.io_depth;
    Ok(*DEPTH.get_or_init(|| d))
}

/// The process's I/O depth ([`configure`]; [`DEFAULT_DEPTH`] when the settings do not parse and
/// no slide was opened, which is the only way to get here without [`configure`] having checked
/// them).
pub fn depth() -> usize {
    configure().unwrap_or(DEFAULT_DEPTH)
}

struct Built {
    pid: u32,
    pool: Arc<rayon::ThreadPool>,
}

/// The I/O pool of this process, built on first use; `None` for a depth of 1 or when its
/// threads could not be started (read on the calling thread then).
pub fn io_pool() -> Option<Arc<rayon::ThreadPool>> {
    static POOL: Mutex<Option<Built>> = Mutex::new(None);
    let d = depth();
    if d <= 1 {
        return None;
    }
    let pid = std::process::id();
    // The state stays consistent whatever a panicking holder did (a plain replace).
    let mut g = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = g.as_ref().filter(|b| b.pid == pid) {
        return Some(b.pool.clone());
    }
    if let Some(old) = g.take() {
        // Built by the parent before a fork: its threads are not in this process.
        std::mem::forget(old);
    }
    let pool = build(d)?;
    *g = Some(Built { pid, pool: pool.clone() });
    Some(pool)
}

/// A pool of `depth` read threads (also used by the `cold_read` benchmark to compare depths).
pub fn build(depth: usize) -> Option<Arc<rayon::ThreadPool>> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(depth)
        .thread_name(|i| format!("slidestream-io-{i}"))
        // SLIDESTREAM_THREAD_NICE (cannot fail: raising one's own nice value).
        .start_handler(|_| drop(crate::threads::lower_this_thread()))
        .build()
        .ok()
        .map(Arc::new)
}
