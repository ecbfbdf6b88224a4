//! The GPU path: reads into device memory (`Slide::read_region_device`,
//! `Slide::read_regions_device`), probing, and the counters of each device.
//!
//! This facade compiles in every build. With the cargo feature `cuda` it forwards to the CUDA
//! back end (`cuda/`): CUDA, nvJPEG, NVRTC and cuFile are loaded at run time, so a `cuda` build
//! runs everywhere and reports [`GpuError::Unavailable`](crate::error::GpuError::Unavailable)
//! on machines without a GPU. Without it, the stub back end (`stub.rs`) answers every entry
//! point with [`GpuError::NotCompiled`](crate::error::GpuError::NotCompiled), so call sites
//! need no `cfg` (the pattern of candle's dummy CUDA backend). Both back ends have the same
//! functions with the same signatures; one `cfg` pair below picks one.
//!
//! The CUDA back end: a per-device engine reads tiles by POSIX into pinned memory or by cuFile
//! into device memory (compat mode, [`CompatMode`]), decodes JPEG tiles in batches with nvJPEG
//! (hardware engines where present) beside CPU decode workers, keeps decoded tiles in a device
//! tile cache, and assembles patches with a kernel (layout and data flow: docs/architecture.md,
//! docs/gpu.md).
//!
//! Colour: nvJPEG's interleaved RGB output always applies YCbCr→RGB (measured, docs/gpu.md), so
//! tiles are decoded with `NVJPEG_OUTPUT_UNCHANGED` (planar components as coded) and converted
//! by slidestream according to the TIFF photometric tag (`color` is the CPU reference of the
//! conversion kernel).

mod array;
// `color` (CPU reference of the kernels' colour code) is an internal: public only with the
// `unstable` feature (see lib.rs), where tests and the `nvjpeg_batch` example use it.
#[cfg(feature = "unstable")]
pub mod color;
#[cfg(not(feature = "unstable"))]
#[allow(dead_code)]
pub(crate) mod color;
#[cfg(feature = "cuda")]
mod cuda;
mod stats;
#[cfg(not(feature = "cuda"))]
mod stub;

#[cfg(feature = "cuda")]
use cuda as backend;
#[cfg(not(feature = "cuda"))]
use stub as backend;

pub use array::{DeviceArray, DeviceBatch, DeviceOptions, LEGACY_STREAM, PER_THREAD_STREAM};
pub use stats::{CompatMode, GpuReport, GpuStats};

use crate::error::{Error, Result};
use crate::slide::{PatchRequest, ReadOptions, Slide};

/// The value slidestream gives `CUDA_DEVICE_MAX_CONNECTIONS` when it is unset: CUDA's maximum.
pub const CUDA_CONNECTIONS: u32 = 32;

/// Give the process [`CUDA_CONNECTIONS`] (32) hardware work queues per device instead of CUDA's
/// default 8, by setting `CUDA_DEVICE_MAX_CONNECTIONS` when it is unset; a value already set
/// (by the user or a framework, e.g. 1 for strict ordering) is kept. Returns whether it set it.
///
/// Why: CUDA maps every stream of a context onto one of `CUDA_DEVICE_MAX_CONNECTIONS` hardware
/// queues, in creation order, and work in one queue runs in order (CUDA C++ Programming Guide,
/// "Implicit synchronization" / false dependencies; the variable is documented in the CUDA
/// environment variables appendix). A model that queues its kernels far ahead (a training
/// loop that never synchronises) then delays every engine stream sharing its queue by the whole
/// queued work, whatever the stream priority: measured on an H200, `PatchLoader` in a thread
/// beside ResNet-50 training made 1.0k patches/s with 8 queues and 11.6k/s with 32
/// (docs/gpu.md).
///
/// The driver reads the variable when a CUDA context is created, so this acts only when called
/// before the first context of the process (the Python package calls it at import, the CLI at
/// start). It changes the process environment: call it before other threads start.
pub fn raise_cuda_connections() -> bool {
    if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_some() {
        return false;
    }
    std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", CUDA_CONNECTIONS.to_string());
    true
}

/// Counters of the GPU path on `device` (process-wide, all slides). Does not start CUDA: a
/// device not used yet reports zeros.
pub fn stats(device: usize) -> GpuStats {
    backend::stats(device)
}

/// Start the GPU path of `device` (context, nvJPEG, kernels, I/O path selection) without
/// reading anything, and return its counters: which I/O path is in effect and why.
///
/// # Errors
/// [`Error::Gpu`] when CUDA is unavailable, the crate was built without `cuda`, or the
/// compat mode asks for cuFile (`off`) and cuFile cannot be used (the message says why).
pub fn start(device: usize) -> Result<GpuStats> {
    backend::start(device)
}

/// Zero the counters of `device` (the device cache keeps its tiles).
pub fn reset_stats(device: usize) {
    backend::reset_stats(device)
}

/// Drop every tile of `device`'s tile cache (counters kept). No-op when the device was not used.
pub fn clear_device_cache(device: usize) {
    backend::clear_cache(device)
}

/// Whether a usable CUDA device is present: libcuda loads, `cuInit` succeeds and at least one
/// device is visible (never panics; `false` without the `cuda` feature). Makes no context, no
/// stream and no nvJPEG handle, on no device: under `torch.distributed` every rank asks this,
/// and a context on device 0 per rank would cost each rank device 0's memory and change the
/// calling thread's current device.
pub fn available() -> bool {
    device_count().is_ok_and(|n| n > 0)
}

/// How many CUDA devices this process sees (after `CUDA_VISIBLE_DEVICES`); the valid ordinals
/// of `device` arguments are `0..device_count()`. Makes no context.
///
/// # Errors
/// [`GpuError::NotCompiled`](crate::error::GpuError::NotCompiled) without the `cuda` feature;
/// [`GpuError::Unavailable`](crate::error::GpuError::Unavailable) when libcuda does not load or
/// `cuInit` fails.
pub fn device_count() -> Result<usize> {
    backend::device_count()
}

/// Probe the GPU stack: load libcuda, `cuInit`, list devices, load nvJPEG and try its hardware
/// backend on device 0.
///
/// # Errors
/// [`GpuError::NotCompiled`](crate::error::GpuError::NotCompiled) without the `cuda` feature;
/// [`GpuError::Unavailable`](crate::error::GpuError::Unavailable) when libcuda does not load or
/// `cuInit` fails.
pub fn probe() -> Result<GpuReport> {
    backend::probe()
}

/// Read one batch of patches from any number of slides and levels into device memory: the
/// device form of [`read_patches`](crate::read_patches). RGB `u8`, shape (n, height, width, 3)
/// on CUDA device `device`, patch `k` from `requests[k]` (location in **level-0** pixels of its
/// slide, `opts.size` pixels of its level), composited over `opts.background`, pixels equal to
/// what [`read_patches`](crate::read_patches) returns on the host.
///
/// One engine call for the whole batch: one plan over every patch, the tiles of every slide
/// deduplicated, looked up in the device tile cache and decoded through one work queue (GPU
/// lanes from the front, CPU decode workers from the back; each lane chunk read with one
/// coalesced read plan per slide), then one assembly launch. [`Slide::read_regions_device`] is
/// the one-slide case of it.
///
/// A tile that cannot be read or decoded fails only the patches that need it
/// ([`DeviceBatch::errors`]; [`DeviceBatch::into_result`] turns the first into an error).
///
/// # Errors
/// [`Error::Usage`] for a level that does not exist; [`Error::Limits`] when the output exceeds
/// the smallest `max_region_bytes` of the slides involved; [`Error::Gpu`] when CUDA is
/// unavailable, the crate was built without `cuda`, or the process was forked after CUDA was
/// initialised.
pub fn read_patches_device(requests: &[PatchRequest<'_>], opts: &ReadOptions, device: usize) -> Result<DeviceBatch> {
    crate::slide::patches::output_bytes(requests, opts)?;
    if let Some(r) = requests.iter().find(|r| r.level >= r.slide.level_count()) {
        r.slide.level_image(r.level)?; // the Usage error naming the level
    }
    let dev = DeviceOptions { device, channels: 3, background: opts.background };
    backend::read_batch(requests, opts.size, &dev)
}

impl Slide {
    /// Read a region into device memory.
    ///
    /// * `location`: (x, y) of the top-left pixel in **level-0** coordinates; may be negative.
    /// * `level`: pyramid level; `size`: (width, height) in pixels of that level.
    /// * `opts`: device, channels (4 = RGBA with OpenSlide's semantics, 3 = RGB over a
    ///   background).
    ///
    /// Returns a [`DeviceArray`] of shape (height, width, channels), `u8`, equal to what
    /// [`read_region`](Self::read_region) returns on the host (JPEG tiles decoded by nvJPEG with
    /// libjpeg-turbo's colour conversion and chroma upsampling reproduced on the GPU; other codecs
    /// decoded on the CPU and uploaded).
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region); [`Error::Gpu`] when CUDA is unavailable, the crate
    /// was built without `cuda`, or the process was forked after CUDA was initialised.
    pub fn read_region_device(&self, location: (i64, i64), level: usize, size: (u64, u64), opts: &DeviceOptions) -> Result<DeviceArray> {
        let batch = self.read_regions_device(&[location], level, size, opts)?;
        let mut batch = batch.into_result()?;
        batch.shape.remove(0);
        Ok(batch)
    }

    /// Read many same-sized patches of one level into one device array (n, height, width,
    /// channels) `u8`: the tiles of all patches are deduplicated, looked up in the device tile
    /// cache, read with coalesced requests (POSIX into pinned memory or cuFile, per
    /// [`CompatMode`]), decoded in large nvJPEG batches (hardware engines where present) with
    /// I/O and decoding of consecutive batches overlapped, and assembled by one kernel.
    ///
    /// A tile that cannot be read or decoded fails only the patches that need it
    /// ([`DeviceBatch::errors`]); the call fails as a whole only for bad arguments, limits or
    /// GPU failures.
    ///
    /// # Errors
    /// [`Error::Usage`] (level, channels), [`Error::Limits`] (output larger than
    /// `max_region_bytes`), [`Error::Gpu`].
    pub fn read_regions_device(&self, locations: &[(i64, i64)], level: usize, size: (u64, u64), opts: &DeviceOptions) -> Result<DeviceBatch> {
        if opts.channels != 3 && opts.channels != 4 {
            return Err(Error::Usage(format!("channels must be 3 or 4, got {}", opts.channels)));
        }
        let (_, _, at) = self.level_image(level)?;
        // The batch output rule of every path (Limits over max_region_bytes).
        crate::read::batch_bytes(locations.len(), size, opts.channels, self.config().max_region_bytes, &at)?;
        backend::read_regions(self, locations, level, size, opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_entry_points_never_panic_without_a_gpu() {
        // On CPU-only machines (CI) this must be a typed error, with or without `cuda`.
        if let Err(e) = probe() {
            assert!(matches!(e, crate::Error::Gpu(_)), "{e}");
        }
        // Never starts CUDA: an unused device reports zeros and the compat mode asked for.
        let st = stats(0);
        assert_eq!(st.compat_mode, CompatMode::from_env().map_or("invalid", |m| m.as_str()));
        assert_eq!(st.posix_bytes + st.decoded_cpu, 0);
    }
}
