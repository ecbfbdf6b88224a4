//! The counters of one engine: bytes and requests per I/O path, tiles per decoder, and the
//! last reason for each fallback (relaxed atomics; reasons behind mutexes). A bottom layer of
//! the engine (CONTRIBUTING.md): the I/O and decode functions count into it without naming
//! the engine; `stats.rs` turns it into [`GpuStats`](crate::gpu::GpuStats).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use super::trace::Trace;

/// Counters of one engine (relaxed atomics; reasons behind mutexes).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) trace: Trace,
    pub(crate) posix_bytes: AtomicU64,
    pub(crate) posix_requests: AtomicU64,
    pub(crate) gds_bytes: AtomicU64,
    pub(crate) gds_requests: AtomicU64,
    pub(crate) compat_bytes: AtomicU64,
    pub(crate) compat_requests: AtomicU64,
    pub(crate) tile_bytes: AtomicU64,
    pub(crate) hardware: AtomicU64,
    pub(crate) device_bitstream: AtomicU64,
    pub(crate) hybrid: AtomicU64,
    /// Tiles the SM decoder decoded.
    pub(crate) sm: AtomicU64,
    /// Of `sm`, tiles decoded only in the part their call needs.
    pub(crate) sm_partial: AtomicU64,
    pub(crate) cpu: AtomicU64,
    pub(crate) cpu_partial: AtomicU64,
    pub(crate) batch_fallbacks: AtomicU64,
    pub(crate) cufile_handle_failures: AtomicU64,
    /// Last reason a tile or batch went to the CPU decoder.
    cpu_reason: Mutex<String>,
    /// Last cuFile refusal of a slide's file.
    cufile_error: Mutex<String>,
    /// Last slide not offered to cuFile (no file descriptor).
    cufile_skip: Mutex<String>,
}

fn set(m: &Mutex<String>, v: String) {
    *m.lock().unwrap_or_else(|p| p.into_inner()) = v;
}

fn get(m: &Mutex<String>) -> String {
    m.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

impl Counters {
    /// A slide's file was refused by `cuFileHandleRegister`.
    pub(crate) fn note_cufile_refusal(&self, msg: String) {
        self.cufile_handle_failures.fetch_add(1, Relaxed);
        set(&self.cufile_error, msg);
    }

    /// A slide has no file descriptor for cuFile (read from memory).
    pub(crate) fn note_cufile_skip(&self, msg: String) {
        set(&self.cufile_skip, msg);
    }

    /// Record why a tile or batch went to the CPU decoder.
    pub(crate) fn note_cpu(&self, reason: String) {
        set(&self.cpu_reason, reason);
    }

    /// Last reason a tile or batch went to the CPU decoder ("" when none).
    pub(crate) fn cpu_reason(&self) -> String {
        get(&self.cpu_reason)
    }

    /// Last cuFile refusal of a slide's file ("" when none).
    pub(crate) fn cufile_error(&self) -> String {
        get(&self.cufile_error)
    }

    /// Last slide not offered to cuFile ("" when none).
    pub(crate) fn cufile_skip(&self) -> String {
        get(&self.cufile_skip)
    }

    /// Zero every counter and clear the reasons.
    pub(crate) fn reset(&self) {
        for a in [
            &self.posix_bytes,
            &self.posix_requests,
            &self.gds_bytes,
            &self.gds_requests,
            &self.compat_bytes,
            &self.compat_requests,
            &self.tile_bytes,
            &self.hardware,
            &self.device_bitstream,
            &self.hybrid,
            &self.sm,
            &self.sm_partial,
            &self.cpu,
            &self.cpu_partial,
            &self.batch_fallbacks,
            &self.cufile_handle_failures,
        ] {
            a.store(0, Relaxed);
        }
        for m in [&self.cufile_error, &self.cpu_reason, &self.cufile_skip] {
            m.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }
}
