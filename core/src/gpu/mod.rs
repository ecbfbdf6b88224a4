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
/// The SM JPEG decoder's measurements (issue 32, step 2; `unstable`): [`sm_decoder::probe`].
#[cfg(all(feature = "cuda", feature = "unstable"))]
pub use cuda::sm as sm_decoder;
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

/// Resize device patches to `to` = (width, height) pixels with the CPU path's filter: the
/// Lanczos-3 convolution of [`resize_rgb_patches`](crate::resize_rgb_patches) (antialiased
/// reduction, as Pillow's `LANCZOS`), with the same integer taps, so the result equals the CPU
/// path's byte for byte (`slide/resize_taps.rs`). What reading a device batch at a physical
/// resolution does after reading the coarsest level at or below the target.
///
/// `groups`: arrays of RGB patches (m, h, w, 3) `u8` on one device (each group its own h, w),
/// each with the output index of every one of its m patches; the indices of all groups together
/// must cover `0..n` exactly once. Returns one new [`DeviceArray`] (n, to.1, to.0, 3) on that
/// device. The sources are only read; one handed to a consumer is read after the consumer's
/// work on it (its stream, or the whole device, is waited for).
///
/// # Errors
/// [`Error::Usage`] for a source that is not (m, h, w, 3), arrays on different devices, indices
/// that do not cover `0..n` exactly once, or a zero or over-large size (a side above 65,535);
/// [`Error::Gpu`] when CUDA is unavailable or the build has no `cuda` feature.
pub fn resize_patches_device(groups: &[(&DeviceArray, &[usize])], n: usize, to: (u32, u32)) -> Result<DeviceArray> {
    let device = check_resize(groups, n, to)?;
    backend::resize_patches(groups, n, to, device)
}

/// The checks of [`resize_patches_device`]: the device the arrays are on (0 with no group).
fn check_resize(groups: &[(&DeviceArray, &[usize])], n: usize, to: (u32, u32)) -> Result<usize> {
    const SIDE: u32 = 65_535;
    if to.0 == 0 || to.1 == 0 || to.0 > SIDE || to.1 > SIDE {
        return Err(Error::Usage(format!("resize: the output size must be 1..={SIDE} pixels a side, got {to:?}")));
    }
    let mut seen = vec![false; n];
    let mut device = None;
    for (k, (a, rows)) in groups.iter().enumerate() {
        let s = a.shape();
        if s.len() != 4 || s[3] != 3 || s[1] == 0 || s[2] == 0 || s[1] > SIDE as usize || s[2] > SIDE as usize {
            return Err(Error::Usage(format!("resize: group {k} must be RGB patches (m, h, w, 3) with sides 1..={SIDE}, got shape {s:?}")));
        }
        if *device.get_or_insert(a.device()) != a.device() {
            return Err(Error::Usage(format!("resize: group {k} is on cuda:{}, the others on cuda:{}", a.device(), device.unwrap_or(0))));
        }
        if rows.len() != s[0] {
            return Err(Error::Usage(format!("resize: group {k} has {} patches but {} output indices", s[0], rows.len())));
        }
        for &r in rows.iter() {
            match seen.get_mut(r) {
                Some(v) if !*v => *v = true,
                Some(_) => return Err(Error::Usage(format!("resize: output index {r} is given twice"))),
                None => return Err(Error::Usage(format!("resize: output index {r} is out of range for {n} patches"))),
            }
        }
    }
    if let Some(r) = seen.iter().position(|v| !v) {
        return Err(Error::Usage(format!("resize: output index {r} of {n} is given by no group")));
    }
    Ok(device.unwrap_or(0))
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

    fn fake(shape: &[usize], device: usize) -> DeviceArray {
        // ptr 0: dropping it frees nothing (no GPU needed).
        DeviceArray { ptr: 0, shape: shape.to_vec(), device, pid: std::process::id(), free_on: Default::default() }
    }

    #[test]
    fn resize_arguments_are_checked_before_any_gpu_work() {
        let (a, b) = (fake(&[2, 10, 12, 3], 0), fake(&[1, 20, 24, 3], 0));
        let usage = |r: Result<usize>| matches!(r, Err(Error::Usage(_)));
        assert_eq!(check_resize(&[(&a, &[0, 2]), (&b, &[1])], 3, (5, 5)).unwrap(), 0);
        assert!(usage(check_resize(&[(&a, &[0, 1])], 2, (0, 5))), "zero size");
        assert!(usage(check_resize(&[(&a, &[0, 1])], 2, (70_000, 5))), "over-large size");
        assert!(usage(check_resize(&[(&a, &[0, 0])], 2, (5, 5))), "an index twice");
        assert!(usage(check_resize(&[(&a, &[0, 2])], 2, (5, 5))), "an index out of range");
        assert!(usage(check_resize(&[(&a, &[0, 1])], 3, (5, 5))), "an index not covered");
        assert!(usage(check_resize(&[(&a, &[0])], 1, (5, 5))), "rows != patches");
        assert!(usage(check_resize(&[(&fake(&[2, 10, 12, 4], 0), &[0, 1])], 2, (5, 5))), "RGBA");
        assert!(usage(check_resize(&[(&fake(&[10, 12, 3], 0), &[0])], 1, (5, 5))), "3-d");
        assert!(usage(check_resize(&[(&a, &[0, 1]), (&fake(&[1, 4, 4, 3], 1), &[2])], 3, (5, 5))), "two devices");
        assert_eq!(check_resize(&[], 0, (5, 5)).unwrap(), 0);
        // Without a GPU (or the `cuda` feature) the resize itself is a typed GPU error.
        if !available() {
            assert!(matches!(resize_patches_device(&[(&a, &[0, 1])], 2, (5, 5)), Err(Error::Gpu(_))));
        }
    }
}
