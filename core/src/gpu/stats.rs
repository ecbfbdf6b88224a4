//! What the GPU path reports: the compat mode ([`CompatMode`]), the probe ([`GpuReport`]) and
//! the counters of a device ([`GpuStats`]).

pub use crate::config::CompatMode;

impl CompatMode {
    /// `SLIDESTREAM_COMPAT_MODE` in effect (override, environment or default `auto`).
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) when the value is not `on`, `off` or `auto`
    /// (docs/settings.md).
    pub fn from_env() -> crate::error::Result<CompatMode> {
        Ok(crate::config::settings()?.compat_mode)
    }
}

/// What the GPU probe found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuReport {
    /// CUDA driver version (e.g. 13000 for 13.0).
    pub driver_version: i32,
    /// (name, compute capability major, minor) of every device.
    pub devices: Vec<(String, i32, i32)>,
    /// nvJPEG (major, minor, patch), when the library loads.
    pub nvjpeg_version: Option<(i32, i32, i32)>,
    /// Hardware JPEG engines of device 0 (0 when the hardware backend is unavailable).
    pub hardware_engines: u32,
    /// Why the hardware backend is unavailable, if it is.
    pub hardware_reason: Option<String>,
}

/// Counters of the GPU path of one device (process-wide; see [`stats`](fn@super::stats)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuStats {
    /// Compat mode asked for (`SLIDESTREAM_COMPAT_MODE`).
    pub compat_mode: String,
    /// I/O path in effect: `"posix"`, `"cufile"` (GPUDirect Storage) or `"cufile-compat"`
    /// (cuFile running its own POSIX compatibility mode).
    pub io_path: String,
    /// Why the path differs from what was asked for or from GPUDirect Storage (empty if not).
    pub io_reason: String,
    /// Bytes / requests read with POSIX `pread` into pinned host memory.
    pub posix_bytes: u64,
    /// See `posix_bytes`.
    pub posix_requests: u64,
    /// Bytes / requests read by cuFile with GPUDirect Storage active.
    pub cufile_gds_bytes: u64,
    /// See `cufile_gds_bytes`.
    pub cufile_gds_requests: u64,
    /// Bytes / requests read by cuFile in its compatibility mode.
    pub cufile_compat_bytes: u64,
    /// See `cufile_compat_bytes`.
    pub cufile_compat_requests: u64,
    /// Slides whose file cuFile refused to register (`cuFileHandleRegister`); their reads went
    /// through POSIX instead. Measured on the lent H200 VM: cuFile cannot read the volume
    /// attributes of its virtio disk (docs/gpu.md).
    pub cufile_handle_failures: u64,
    /// The last such refusal, with cuFile's error code (empty if none).
    pub cufile_handle_error: String,
    /// Why the last slide that cuFile did not read was not offered to it although the I/O path
    /// is cuFile (a slide without a file descriptor, e.g. opened from memory: its reads go
    /// through POSIX into pinned memory); empty if none.
    pub cufile_skip_reason: String,
    /// Compressed bytes of the tiles the reads were for (read amplification =
    /// bytes read / this).
    pub tile_bytes: u64,
    /// Tiles decoded by nvJPEG's hardware engines (host bitstreams).
    pub decoded_hardware: u64,
    /// Tiles decoded by nvJPEG from bitstreams already in device memory (cuFile path).
    pub decoded_device_bitstream: u64,
    /// Tiles decoded by nvJPEG's default (hybrid / GPU) backend.
    pub decoded_hybrid: u64,
    /// Tiles decoded by the SM decoder on the GPU's multiprocessors
    /// (`SLIDESTREAM_GPU_SM_DECODER`).
    pub decoded_sm: u64,
    /// Of `decoded_sm`, tiles the SM decoder inverse-DCT'd and converted only in the part one
    /// call's patches need (region-aware decoding, under `partial_decode_max_fraction`; the
    /// whole scan is still entropy-decoded; such tiles are not cached).
    pub decoded_sm_partial: u64,
    /// The SM decoder's state: `off`, `on`, or why it is not on (`auto` with hardware JPEG
    /// engines, not started yet, or its kernels' build error).
    pub sm_decoder: String,
    /// Tiles decoded on the CPU and uploaded: other codecs, streams nvJPEG refuses, the CPU
    /// decode workers' share of large batches, and fallbacks after a failed GPU batch.
    pub decoded_cpu: u64,
    /// Of `decoded_cpu`, tiles a CPU decode worker decoded only in part (the part one call's
    /// patches need, under `partial_decode_max_fraction`; such tiles are not cached).
    pub decoded_cpu_partial: u64,
    /// Lanes (GPU decode pipelines, `SLIDESTREAM_GPU_WORKERS`): concurrent device reads each
    /// take one; one batch uses its own beside the CPU workers (all free ones without workers).
    pub gpu_lanes: usize,
    /// CPU decode workers that join the lanes on large batches (`SLIDESTREAM_GPU_CPU_WORKERS`).
    pub cpu_workers: usize,
    /// nvJPEG batches that failed and were redone on the CPU.
    pub gpu_batch_fallbacks: u64,
    /// Last reason a tile or batch went to the CPU decoder (empty if none).
    pub cpu_fallback_reason: String,
    /// Device tile cache counters.
    pub cache: crate::cache::CacheStats,
    /// Device memory held by decoded tiles now (cached tiles and tiles of reads in flight), in
    /// bytes. The tiles of one nvJPEG chunk share one allocation, freed with its last tile, so
    /// this can exceed `cache.resident_bytes`; after each read the engine evicts cached tiles
    /// until it is at most the cache capacity (or the cache is empty).
    pub device_tile_bytes: u64,
    /// nvJPEG backend of host bitstreams (`hardware` or `default`).
    pub nvjpeg_backend: String,
    /// Hardware JPEG engines (0 without).
    pub hardware_engines: u32,
    /// Where the engine's kernels came from: loaded from the kernel cache, or compiled (and
    /// whether the cache was written, or why not: `SLIDESTREAM_KERNEL_CACHE`); empty before
    /// the engine starts.
    pub kernel_cache: String,
    /// What the engine's warm-up did before the first read and in the background
    /// (`SLIDESTREAM_GPU_WARMUP`); empty before the engine starts.
    pub warmup: String,
    /// Priority of the engine's CUDA streams as created (`SLIDESTREAM_GPU_STREAM_PRIORITY`;
    /// CUDA's scale: lower is higher, 0 the default, the device's greatest e.g. -5 on Hopper);
    /// 0 before the engine starts.
    pub stream_priority: i32,
    /// `CUDA_DEVICE_MAX_CONNECTIONS` as the engine found it when it started: the hardware work
    /// queues its streams share with the rest of the process (0 when unset, i.e. CUDA's default
    /// of 8; see [`crate::gpu::raise_cuda_connections`]). The driver read it when the process's
    /// first context was made, which may be earlier. 0 before the engine starts.
    pub cuda_connections: u32,
    /// How the engine's threads wait for their streams (`SLIDESTREAM_GPU_WAIT`: `"block"` or
    /// `"spin"`); empty before the engine starts.
    pub gpu_wait: String,
    /// The nice increment of slidestream's background threads (`SLIDESTREAM_THREAD_NICE`;
    /// Linux scheduling priority, 0 = unchanged); 0 before the engine starts.
    pub thread_nice: u8,
}

impl GpuStats {
    /// The counters of a device whose engine has not started: zeros and the compat mode asked
    /// for (`SLIDESTREAM_COMPAT_MODE`; `"invalid"` when its value is not accepted).
    pub(crate) fn idle() -> GpuStats {
        GpuStats { compat_mode: CompatMode::from_env().map_or("invalid", |m| m.as_str()).into(), ..Default::default() }
    }

    /// Bytes read by every path together divided by the compressed bytes the tiles needed
    /// (1.0 = nothing read twice or in between; 0 when nothing was read).
    pub fn read_amplification(&self) -> f64 {
        let read = self.posix_bytes + self.cufile_gds_bytes + self.cufile_compat_bytes;
        if self.tile_bytes == 0 {
            0.0
        } else {
            read as f64 / self.tile_bytes as f64
        }
    }
}
