//! The tokio runtime remote reads run on: one per process, made at the first remote open.
//!
//! A runtime's worker threads do not survive `fork` (a DataLoader worker, a Dask process made by
//! forking), so the runtime is keyed by the process id: a child process makes its own at its
//! first remote read, and its stores are rebuilt with it ([`super::RemoteSource`] keeps the
//! store per process for the same reason: an HTTP client's pooled connections belong to the
//! parent's runtime).

use std::sync::{Arc, Mutex};

use crate::error::{Error, Location, Result};

/// A remote wait stopped by the process's interrupt check ([`wait`]).
#[derive(Debug)]
pub(crate) struct Interrupted;

static RUNTIME: Mutex<Option<(u32, Arc<tokio::runtime::Runtime>)>> = Mutex::new(None);

/// Worker threads of the runtime: they only drive sockets and timers (bytes are copied into
/// the caller's buffers on the calling thread), so two are enough for thousands of requests in
/// flight.
const WORKERS: usize = 2;

/// This process's runtime, made on first use.
///
/// # Errors
/// [`Error::Io`] when the runtime's threads cannot be started.
pub(crate) fn runtime(at: &Location) -> Result<Arc<tokio::runtime::Runtime>> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, rt)) = slot.as_ref() {
        if *p == pid {
            return Ok(rt.clone());
        }
        // A runtime inherited through fork: its threads do not exist here. It must not be
        // dropped either (dropping joins threads that are not there), so it is leaked.
        if let Some((_, rt)) = slot.take() {
            std::mem::forget(rt);
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("slidestream-remote")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::io(at, e))?;
    let rt = Arc::new(rt);
    *slot = Some((pid, rt.clone()));
    Ok(rt)
}

/// Run `f` to completion on `rt`, on the calling thread, running the process's interrupt
/// check ([`crate::interrupt`]) every [`crate::interrupt::WAIT_SLICE`] of waiting: a HEAD,
/// LIST or GET whose server never answers is stopped by Ctrl-C at once instead of at its
/// timeout (`SLIDESTREAM_REMOTE_TIMEOUT_MS` times the retries). The check never runs when `f`
/// completes within one slice. On an interruption `f` is dropped, which cancels its requests.
///
/// # Errors
/// [`Interrupted`] when the check fired.
pub(crate) fn wait<F: std::future::Future>(rt: &tokio::runtime::Runtime, f: F) -> std::result::Result<F::Output, Interrupted> {
    rt.block_on(async {
        let mut f = std::pin::pin!(f);
        loop {
            match tokio::time::timeout(crate::interrupt::WAIT_SLICE, &mut f).await {
                Ok(v) => return Ok(v),
                Err(_) if crate::interrupt::check().is_err() => return Err(Interrupted),
                Err(_) => {}
            }
        }
    })
}
