//! The [`GpuStats`] of one engine, from its counters (`counters.rs`) and its state.

use std::sync::atomic::Ordering::Relaxed;

use super::engine::Engine;
use super::io::compat::IoPath;
use crate::gpu::GpuStats;

impl Engine {
    /// Record why a tile or batch went to the CPU decoder.
    pub(crate) fn note_cpu(&self, reason: String) {
        self.counters.note_cpu(reason);
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
            cufile_handle_error: c.cufile_error(),
            cufile_skip_reason: c.cufile_skip(),
            tile_bytes: c.tile_bytes.load(Relaxed),
            device_tile_bytes: self.cache.held.load(Relaxed),
            decoded_hardware: c.hardware.load(Relaxed),
            decoded_device_bitstream: c.device_bitstream.load(Relaxed),
            decoded_hybrid: c.hybrid.load(Relaxed),
            decoded_sm_partial: c.sm_partial.load(Relaxed),
            decoded_sm: c.sm.load(Relaxed),
            sm_decoder: self.sm_state(),
            decoded_cpu: c.cpu.load(Relaxed),
            decoded_cpu_partial: c.cpu_partial.load(Relaxed),
            gpu_lanes: self.lanes.workers,
            cpu_workers: self.cpu.workers,
            gpu_batch_fallbacks: c.batch_fallbacks.load(Relaxed),
            cpu_fallback_reason: c.cpu_reason(),
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
