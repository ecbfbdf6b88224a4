//! The counters of one engine (per I/O path and decoder, with the last fallback reasons) and
//! the [`GpuStats`] built from them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use super::engine::Engine;
use super::io::compat::IoPath;
use super::trace::Trace;
use crate::gpu::GpuStats;

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

impl Engine {
    /// Record why a tile or batch went to the CPU decoder.
    pub(crate) fn note_cpu(&self, reason: String) {
        set(&self.counters.cpu_reason, reason);
    }

    /// The engine's counters now.
    pub(crate) fn stats(&self) -> GpuStats {
        let c = &self.counters;
        let nv = self.nvjpeg.get();
        GpuStats {
            compat_mode: self.io.mode.as_str().into(),
            io_path: self.io.path.name().into(),
            io_reason: match &self.io.error {
                Some(e) => e.clone(),
                None => self.io.reason.clone(),
            },
            posix_bytes: c.posix_bytes.load(Relaxed),
            posix_requests: c.posix_requests.load(Relaxed),
            cufile_gds_bytes: c.gds_bytes.load(Relaxed),
            cufile_gds_requests: c.gds_requests.load(Relaxed),
            cufile_compat_bytes: c.compat_bytes.load(Relaxed),
            cufile_compat_requests: c.compat_requests.load(Relaxed),
            cufile_handle_failures: c.cufile_handle_failures.load(Relaxed),
            cufile_handle_error: get(&c.cufile_error),
            cufile_skip_reason: get(&c.cufile_skip),
            tile_bytes: c.tile_bytes.load(Relaxed),
            device_tile_bytes: self.cache.held.load(Relaxed),
            decoded_hardware: c.hardware.load(Relaxed),
            decoded_device_bitstream: c.device_bitstream.load(Relaxed),
            decoded_hybrid: c.hybrid.load(Relaxed),
            decoded_cpu: c.cpu.load(Relaxed),
            decoded_cpu_partial: c.cpu_partial.load(Relaxed),
            gpu_lanes: self.lanes.workers,
            cpu_workers: self.cpu.workers,
            gpu_batch_fallbacks: c.batch_fallbacks.load(Relaxed),
            cpu_fallback_reason: get(&c.cpu_reason),
            cache: self.cache.tiles.stats(),
            nvjpeg_backend: match nv {
                None => "not started yet (made by the background warm-up or the first read that needs it)".into(),
                Some(nv) if nv.device.is_some() && self.io.path != IoPath::Posix => {
                    format!("{} (host bitstreams), {} (device bitstreams)", nv.host_backend, nv.device_reason)
                }
                Some(nv) => nv.host_backend.into(),
            },
            hardware_engines: nv.map_or(0, |nv| nv.engines),
            kernel_cache: self.kernels.cache_note.clone(),
            warmup: self.warm.status(),
            stream_priority: self.stream_priority,
            cuda_connections: self.cuda_connections,
            gpu_wait: if self.blocking_waits { "block" } else { "spin" }.into(),
            thread_nice: self.thread_nice,
        }
    }
}
