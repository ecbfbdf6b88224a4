//! Per-process state, keyed by process ID so that `fork` is safe.
//!
//! * The decode thread pool and the shared tile cache are rebuilt when the process ID changes
//!   (after `fork`, the parent's pool threads do not exist in the child).
//! * CUDA contexts do not survive `fork` (CUDA programming guide): the process that first
//!   initialised CUDA through this module is recorded, and a forked child refuses device work
//!   with `GpuError::Fork` before making any CUDA call.
//! * The devices this process has read on (for `Slide.io_stats()["gpu"]`), reset in a child.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use slidestream::error::GpuError;
use slidestream::{Error, TileCache};

use crate::errors::to_py;

/// The decode pool and the shared tile cache of one process.
struct ProcState {
    pid: u32,
    pool: Arc<rayon::ThreadPool>,
    cache: Arc<TileCache>,
}

/// The shared tile cache of this process: in the first process, the core's process-wide
/// cache ([`TileCache::global`], which reads `SLIDESTREAM_CACHE_BYTES` once and then refuses
/// changes to it); in a forked child, a new empty cache of the same capacity (the parent's
/// cache, its lock included, is not touched after `fork`).
fn shared_cache(py: Python<'_>, parent: Option<&ProcState>) -> PyResult<Arc<TileCache>> {
    match parent {
        None => TileCache::global().map_err(|e| to_py(py, e)),
        Some(p) => Ok(Arc::new(TileCache::new(p.cache.capacity_bytes()))),
    }
}

static PROC: Mutex<Option<ProcState>> = Mutex::new(None);

/// This process's decode pool and shared tile cache (`SLIDESTREAM_CACHE_BYTES`), created on
/// first use in each process.
///
/// Raises OSError when the decode threads cannot be started, ConfigError (a ValueError) when
/// a `SLIDESTREAM_*` setting or `RAYON_NUM_THREADS` (more than 1024) has a bad value.
pub(crate) fn pool_and_cache(py: Python<'_>) -> PyResult<(Arc<rayon::ThreadPool>, Arc<TileCache>)> {
    let pid = std::process::id();
    let mut g = PROC.lock().unwrap_or_else(|p| p.into_inner());
    if g.as_ref().is_none_or(|s| s.pid != pid) {
        // SLIDESTREAM_DECODE_THREADS, fixed for the process from here on (config.set refuses
        // another value later); auto = RAYON_NUM_THREADS, capped at MAX_THREADS before the
        // pool is built (a huge value is a ConfigError naming it, not threads until resources
        // run out), else one per core.
        let rayon_env = slidestream::config::rayon_num_threads().map_err(|e| to_py(py, e))?;
        let chosen = slidestream::config::consume_decode_threads().map_err(|e| to_py(py, e))?;
        let threads = chosen.or(rayon_env);
        *SEEN_RAYON.lock().unwrap_or_else(|p| p.into_inner()) = std::env::var("RAYON_NUM_THREADS").ok();
        // SLIDESTREAM_THREAD_NICE, fixed for the process here too (a bad value is a ConfigError).
        let nice = slidestream::threads::configure().map_err(|e| to_py(py, e))?;
        let mut builder = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("slidestream-{i}"))
            .start_handler(move |_| drop(slidestream::threads::lower_this_thread_by(nice)));
        if let Some(n) = threads {
            builder = builder.num_threads(n);
        }
        let pool = builder.build().map_err(|e| PyOSError::new_err(format!("cannot start decode threads: {e}")))?;
        let cache = shared_cache(py, g.as_ref())?;
        *g = Some(ProcState { pid, pool: Arc::new(pool), cache });
    }
    let s = g.as_ref().expect("initialised above");
    let out = (s.pool.clone(), s.cache.clone());
    drop(g);
    warn_if_rayon_changed(py)?;
    Ok(out)
}

/// `RAYON_NUM_THREADS` as it was when this process's decode pool was built.
static SEEN_RAYON: Mutex<Option<String>> = Mutex::new(None);
/// Whether the warning below was given in this process.
static WARNED_RAYON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A `RuntimeWarning` (once per process) when `RAYON_NUM_THREADS` was changed after the decode
/// pool was built: the pool keeps its size, and a silent change would look applied.
fn warn_if_rayon_changed(py: Python<'_>) -> PyResult<()> {
    if WARNED_RAYON.load(Ordering::Relaxed) {
        return Ok(());
    }
    let now = std::env::var("RAYON_NUM_THREADS").ok();
    let then = SEEN_RAYON.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if now != then && !WARNED_RAYON.swap(true, Ordering::Relaxed) {
        let msg = std::ffi::CString::new(format!(
            "RAYON_NUM_THREADS changed from {} to {} after slidestream's decode pool was built ({} threads); \
             the pool keeps its size for this process: set SLIDESTREAM_DECODE_THREADS (or RAYON_NUM_THREADS) before the first read",
            then.as_deref().unwrap_or("unset"),
            now.as_deref().unwrap_or("unset"),
            PROC.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map_or(0, |s| s.pool.current_num_threads()),
        ))
        .unwrap_or_default();
        PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(), &msg, 1)?;
    }
    Ok(())
}

/// Process that initialised CUDA through this module (a successful probe or a device read that
/// reached the GPU); 0 when none did. Inherited by `fork`, so a child sees its parent's pid.
static CUDA_PID: AtomicU32 = AtomicU32::new(0);

/// Record that this process has initialised CUDA (first caller wins).
pub(crate) fn note_cuda_init() {
    let _ = CUDA_PID.compare_exchange(0, std::process::id(), Ordering::SeqCst, Ordering::SeqCst);
}

/// `Err(GpuError::Fork)` in a process forked after CUDA was initialised (CUDA contexts do not
/// survive `fork`): checked before any CUDA call, so a forked child never touches CUDA.
pub(crate) fn fork_check() -> Result<(), Error> {
    match CUDA_PID.load(Ordering::SeqCst) {
        0 => Ok(()),
        p if p == std::process::id() => Ok(()),
        parent => Err(GpuError::Fork { parent, child: std::process::id() }.into()),
    }
}

/// Devices this process has read on (bit d = ordinal d, capped at 63), with the pid that
/// recorded them (a forked child starts empty).
static GPU_USED: Mutex<(u32, u64)> = Mutex::new((0, 0));

/// Record that a device read reached `device` (the GPU was initialised and used), unless the
/// error says it never got there: no GPU, a forked child, or arguments refused before any GPU
/// work (usage, limits).
pub(crate) fn note_device_use<T>(device: usize, r: &Result<T, Error>) {
    if let Err(Error::Gpu(GpuError::NotCompiled | GpuError::Unavailable(_) | GpuError::Fork { .. }) | Error::Usage(_) | Error::Limits { .. }) = r {
        return;
    }
    note_cuda_init();
    let pid = std::process::id();
    let mut g = GPU_USED.lock().unwrap_or_else(|p| p.into_inner());
    if g.0 != pid {
        *g = (pid, 0);
    }
    g.1 |= 1u64 << device.min(63);
}

/// The lowest device ordinal this process has read on, if any.
pub(crate) fn used_device() -> Option<usize> {
    let g = GPU_USED.lock().unwrap_or_else(|p| p.into_inner());
    (g.0 == std::process::id() && g.1 != 0).then(|| g.1.trailing_zeros() as usize)
}
