//! GPU path (cargo feature `cuda`), first stage: run-time probing of CUDA / nvJPEG and batched
//! nvJPEG decoding of tiles into device memory (hardware engines where present).
//!
//! Without the `cuda` feature every entry point returns
//! [`GpuError::NotCompiled`](crate::error::GpuError::NotCompiled), so call sites need no `cfg`
//! (the pattern of candle's dummy CUDA backend). With it, CUDA libraries are loaded at run time
//! ([`sys`]): a `cuda` build runs everywhere and reports `GpuError::Unavailable` on machines
//! without a GPU. Not built yet (see docs/gpu.md): cuFile reads, the device tile cache, GPU
//! assembly and device results for `Slide`.
//!
//! Colour: nvJPEG's interleaved RGB output always applies YCbCr→RGB (measured, docs/gpu.md), so
//! tiles are decoded with `NVJPEG_OUTPUT_UNCHANGED` (planar components as coded) and converted
//! by slidestream according to the TIFF photometric tag.

// `color` (CPU reference of the kernels' colour code) and `sys` (raw CUDA bindings) are
// internals: public only with the `unstable` feature (see lib.rs), where tests use them.
#[cfg(feature = "unstable")]
pub mod color;
#[cfg(not(feature = "unstable"))]
#[allow(dead_code)]
pub(crate) mod color;
#[cfg(feature = "cuda")]
mod engine;
#[cfg(all(feature = "cuda", feature = "unstable"))]
pub mod sys;
#[cfg(all(feature = "cuda", not(feature = "unstable")))]
#[allow(dead_code)]
pub(crate) mod sys;

#[cfg(not(feature = "cuda"))]
use crate::error::GpuError;
use crate::error::{Error, Result};
use crate::slide::Slide;

pub use crate::config::CompatMode;

impl CompatMode {
    /// `SLIDESTREAM_COMPAT_MODE` in effect (override, environment or default `auto`).
    ///
    /// # Errors
    /// [`Error::Config`] when the value is not `on`, `off` or `auto` (docs/settings.md).
    pub fn from_env() -> Result<CompatMode> {
        Ok(crate::config::settings()?.compat_mode)
    }
}

/// Options of a device read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOptions {
    /// CUDA device ordinal.
    pub device: usize,
    /// 4: RGBA with OpenSlide's semantics (alpha 0 outside the image and on missing tiles);
    /// 3: RGB with such pixels composited over `background` (as
    /// [`Slide::read_regions_rgb_into`]).
    pub channels: u8,
    /// Background for `channels == 3`.
    pub background: [u8; 3],
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions { device: 0, channels: 4, background: [255, 255, 255] }
    }
}

/// A `u8` array in device memory, C-contiguous, freed when dropped.
///
/// Freeing: once its pointer was handed out ([`ptr`](Self::ptr), which the Python bindings'
/// `__dlpack__` and `__cuda_array_interface__` use), the memory is returned with `cuMemFree`,
/// which waits for work still using it on any stream (a consumer's included). An array whose
/// pointer never left slidestream (read, then copied with [`to_host`](Self::to_host) or
/// dropped) is returned stream-ordered (`cuMemFreeAsync`) without waiting for the device, so
/// threads dropping results do not stall each other's reads.
///
/// Shapes: (height, width, channels) for a region, (n, height, width, channels) for a batch.
/// The data are complete when the read returns (the reading stream was synchronised), so any
/// stream may consume them.
pub struct DeviceArray {
    ptr: u64,
    shape: Vec<usize>,
    device: usize,
    /// Process that allocated the memory: a forked child never frees (or touches) it.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pid: u32,
    /// [`ptr`](Self::ptr) was called: free with a device-wide wait.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    exported: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray").field("ptr", &format_args!("{:#x}", self.ptr)).field("shape", &self.shape).field("device", &self.device).finish()
    }
}

impl DeviceArray {
    /// Device pointer (`CUdeviceptr`) of element 0. Work enqueued on it on any stream may
    /// still run when the array is dropped: the free then waits for the device.
    pub fn ptr(&self) -> u64 {
        self.exported.store(true, std::sync::atomic::Ordering::Relaxed);
        self.ptr
    }
    /// Shape, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// CUDA device ordinal.
    pub fn device(&self) -> usize {
        self.device
    }
    /// Size in bytes (product of the shape).
    pub fn nbytes(&self) -> usize {
        self.shape.iter().product()
    }

    /// Copy to the host: [`nbytes`](Self::nbytes) bytes, row-major.
    ///
    /// # Errors
    /// [`GpuError::Call`] when the copy fails; [`GpuError::Fork`] in a process forked after the
    /// array was made.
    pub fn to_host(&self) -> Result<Vec<u8>> {
        #[cfg(feature = "cuda")]
        {
            engine::download(self)
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(GpuError::NotCompiled.into())
        }
    }
}

impl Drop for DeviceArray {
    fn drop(&mut self) {
        #[cfg(feature = "cuda")]
        engine::free_array(self);
    }
}

/// The result of [`Slide::read_regions_device`]: one array (n, height, width, channels) and,
/// per patch, the error that stopped it (that patch is left transparent / background; the
/// others are complete).
#[derive(Debug)]
pub struct DeviceBatch {
    /// Patches, (n, height, width, channels) `u8`.
    pub array: DeviceArray,
    /// `errors[i]` is `Some` when patch `i` could not be read (a corrupt or unreadable tile).
    pub errors: Vec<Option<Error>>,
}

impl DeviceBatch {
    /// The array when every patch was read, else the first patch error.
    ///
    /// # Errors
    /// The first per-patch error.
    pub fn into_result(mut self) -> Result<DeviceArray> {
        match self.errors.iter_mut().find_map(Option::take) {
            Some(e) => Err(e),
            None => Ok(self.array),
        }
    }
}

/// Counters of the GPU path of one device (process-wide; see [`stats`]).
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
    /// Compressed bytes of the tiles the reads were for (read amplification =
    /// bytes read / this).
    pub tile_bytes: u64,
    /// Tiles decoded by nvJPEG's hardware engines (host bitstreams).
    pub decoded_hardware: u64,
    /// Tiles decoded by nvJPEG from bitstreams already in device memory (cuFile path).
    pub decoded_device_bitstream: u64,
    /// Tiles decoded by nvJPEG's default (hybrid / GPU) backend.
    pub decoded_hybrid: u64,
    /// Tiles decoded on the CPU and uploaded: other codecs, streams nvJPEG refuses, the CPU
    /// decode workers' share of large batches, and fallbacks after a failed GPU batch.
    pub decoded_cpu: u64,
    /// Of `decoded_cpu`, tiles a CPU decode worker decoded only in part (the part one call's
    /// patches need, under `partial_decode_max_fraction`; such tiles are not cached).
    pub decoded_cpu_partial: u64,
    /// Lanes (GPU decode pipelines, `SLIDESTREAM_GPU_WORKERS`) one large batch is spread over.
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
}

impl GpuStats {
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

/// Counters of the GPU path on `device` (process-wide, all slides). Does not start CUDA: a
/// device not used yet reports zeros.
pub fn stats(device: usize) -> GpuStats {
    #[cfg(feature = "cuda")]
    {
        engine::stats(device)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        GpuStats { compat_mode: CompatMode::from_env().map_or("invalid", |m| m.as_str()).into(), ..Default::default() }
    }
}

/// Start the GPU path of `device` (context, nvJPEG, kernels, I/O path selection) without
/// reading anything, and return its counters: which I/O path is in effect and why.
///
/// # Errors
/// [`Error::Gpu`] when CUDA is unavailable, the crate was built without `cuda`, or the
/// compat mode asks for cuFile (`off`) and cuFile cannot be used (the message says why).
pub fn start(device: usize) -> Result<GpuStats> {
    #[cfg(feature = "cuda")]
    {
        engine::start(device)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = device;
        Err(GpuError::NotCompiled.into())
    }
}

/// Zero the counters of `device` (the device cache keeps its tiles).
pub fn reset_stats(device: usize) {
    #[cfg(feature = "cuda")]
    engine::reset_stats(device);
    #[cfg(not(feature = "cuda"))]
    let _ = device;
}

/// Drop every tile of `device`'s tile cache (counters kept). No-op when the device was not used.
pub fn clear_device_cache(device: usize) {
    #[cfg(feature = "cuda")]
    engine::clear_cache(device);
    #[cfg(not(feature = "cuda"))]
    let _ = device;
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
        #[cfg(feature = "cuda")]
        {
            engine::read_regions(self, locations, level, size, opts)
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err(GpuError::NotCompiled.into())
        }
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

/// Whether a usable CUDA device is present (never panics; `false` without the `cuda` feature).
pub fn available() -> bool {
    probe().is_ok_and(|r| !r.devices.is_empty())
}

/// Probe the GPU stack: load libcuda, `cuInit`, list devices, load nvJPEG and try its hardware
/// backend on device 0.
///
/// # Errors
/// [`GpuError::NotCompiled`] without the `cuda` feature; [`GpuError::Unavailable`] when libcuda
/// does not load or `cuInit` fails.
pub fn probe() -> Result<GpuReport> {
    #[cfg(feature = "cuda")]
    {
        imp::probe()
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(GpuError::NotCompiled.into())
    }
}

/// Planar components of one decoded JPEG, copied to the host: `planes[c]` is
/// `widths[c] × heights[c]` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanarImage {
    /// Component widths in pixels.
    pub widths: Vec<u32>,
    /// Component heights in pixels.
    pub heights: Vec<u32>,
    /// Component samples, row-major, unpadded.
    pub planes: Vec<Vec<u8>>,
}

impl PlanarImage {
    /// Interleave to RGBA for an RGB-coded (`ycbcr = false`) or YCbCr-coded 4:4:4 image, with
    /// libjpeg-turbo's integer YCbCr→RGB (`jdcolor.c`), so results equal the CPU decoder's.
    /// Returns `None` for subsampled or non-3-component images.
    pub fn to_rgba(&self, ycbcr: bool) -> Option<Vec<u8>> {
        if self.planes.len() != 3 || self.widths.iter().any(|&w| w != self.widths[0]) || self.heights.iter().any(|&h| h != self.heights[0]) {
            return None;
        }
        let n = self.widths[0] as usize * self.heights[0] as usize;
        let mut out = vec![0u8; n * 4];
        for i in 0..n {
            let (a, b, c) = (self.planes[0][i], self.planes[1][i], self.planes[2][i]);
            let (r, g, bl) = if ycbcr { color::ycc_to_rgb(a, b, c) } else { (a, b, c) };
            out[i * 4..i * 4 + 4].copy_from_slice(&[r, g, bl, 255]);
        }
        Some(out)
    }
}

/// A batched nvJPEG decoder bound to one device and one CUDA stream.
pub struct JpegBatchDecoder {
    #[cfg(feature = "cuda")]
    inner: imp::Decoder,
}

impl JpegBatchDecoder {
    /// Create a decoder on `device`. `hardware` asks for the hardware (A100/H100/H200 JPEG
    /// engine) backend; when that fails the default backend is used and
    /// [`backend`](Self::backend) says so.
    ///
    /// # Errors
    /// [`GpuError::NotCompiled`], or [`GpuError::Unavailable`] / [`GpuError::Call`] naming the
    /// failing CUDA or nvJPEG call.
    pub fn new(device: usize, hardware: bool) -> Result<Self> {
        #[cfg(feature = "cuda")]
        {
            Ok(JpegBatchDecoder { inner: imp::Decoder::new(device, hardware)? })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (device, hardware);
            Err(GpuError::NotCompiled.into())
        }
    }

    /// `"hardware"` or `"default"`: the nvJPEG backend in use.
    pub fn backend(&self) -> &'static str {
        #[cfg(feature = "cuda")]
        {
            self.inner.backend
        }
        #[cfg(not(feature = "cuda"))]
        {
            "none"
        }
    }

    /// Decode complete JPEG streams (tables already spliced) into device memory as planar
    /// components, in one batch; with `download`, copy the planes back to the host.
    /// Returns one entry per stream when downloading, else an empty vector.
    ///
    /// # Errors
    /// [`GpuError::Call`] naming the failing nvJPEG or CUDA call (the whole batch fails; callers
    /// fall back to the CPU for its tiles).
    pub fn decode(&mut self, streams: &[&[u8]], download: bool) -> Result<Vec<PlanarImage>> {
        #[cfg(feature = "cuda")]
        {
            self.inner.decode(streams, download)
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (streams, download);
            Err(GpuError::NotCompiled.into())
        }
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use std::ffi::{c_int, c_uint, c_void};
    use std::sync::OnceLock;

    use super::sys::*;
    use super::{GpuReport, PlanarImage};
    use crate::error::{GpuError, Result};

    pub(super) fn libs() -> std::result::Result<&'static (Cuda, Option<NvJpeg>, Option<String>), GpuError> {
        type Loaded = std::result::Result<(Cuda, Option<NvJpeg>, Option<String>), String>;
        static LIBS: OnceLock<Loaded> = OnceLock::new();
        LIBS.get_or_init(|| {
            let cuda = Cuda::load()?;
            // SAFETY: documented driver API entry point, flags must be 0.
            let rc = unsafe { (cuda.cuInit)(0) };
            if rc != 0 {
                return Err(format!("cuInit failed with CUresult {rc}"));
            }
            let (nv, why) = match NvJpeg::load() {
                Ok(n) => (Some(n), None),
                Err(e) => (None, Some(e)),
            };
            Ok((cuda, nv, why))
        })
        .as_ref()
        .map_err(|e| GpuError::Unavailable(e.clone()))
    }

    pub(super) fn cu(rc: CUresult, what: &str) -> std::result::Result<(), GpuError> {
        if rc == 0 {
            Ok(())
        } else {
            Err(GpuError::Call(format!("{what} failed with CUresult {rc}")))
        }
    }

    pub(super) fn nv(rc: nvjpegStatus, what: &str) -> std::result::Result<(), GpuError> {
        if rc == 0 {
            Ok(())
        } else {
            Err(GpuError::Call(format!("{what} failed with nvjpegStatus {rc}")))
        }
    }

    pub(super) fn probe() -> Result<GpuReport> {
        let (cuda, nvj, nvj_why) = libs()?;
        let mut r = GpuReport::default();
        let mut n = 0;
        // SAFETY: out-pointers to locals; functions bound from libcuda with their signatures.
        unsafe {
            cu((cuda.cuDriverGetVersion)(&mut r.driver_version), "cuDriverGetVersion")?;
            cu((cuda.cuDeviceGetCount)(&mut n), "cuDeviceGetCount")?;
            for i in 0..n {
                let mut dev = 0;
                cu((cuda.cuDeviceGet)(&mut dev, i), "cuDeviceGet")?;
                let mut name = [0i8; 256];
                cu((cuda.cuDeviceGetName)(name.as_mut_ptr(), 255, dev), "cuDeviceGetName")?;
                let (mut ma, mut mi) = (0, 0);
                cu((cuda.cuDeviceGetAttribute)(&mut ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")?;
                cu((cuda.cuDeviceGetAttribute)(&mut mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")?;
                let name = std::ffi::CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
                r.devices.push((name, ma, mi));
            }
        }
        match nvj {
            None => r.hardware_reason = nvj_why.clone(),
            Some(nvj) => {
                let mut v = [0; 3];
                for (k, slot) in v.iter_mut().enumerate() {
                    // SAFETY: libraryPropertyType 0..=2 = major, minor, patch.
                    unsafe { (nvj.nvjpegGetProperty)(k as c_int, slot) };
                }
                r.nvjpeg_version = Some((v[0], v[1], v[2]));
                if !r.devices.is_empty() {
                    match Decoder::new(0, true) {
                        Ok(d) if d.backend == "hardware" => r.hardware_engines = d.engines,
                        Ok(d) => r.hardware_reason = d.hw_error.clone(),
                        Err(e) => r.hardware_reason = Some(e.to_string()),
                    }
                }
            }
        }
        Ok(r)
    }

    /// Device planes of one decoded stream (valid until the next decode on the decoder).
    pub(super) struct DevicePlanes {
        pub ptrs: Vec<CUdeviceptr>,
        pub widths: Vec<u32>,
        pub heights: Vec<u32>,
    }

    pub(super) struct Decoder {
        pub backend: &'static str,
        pub engines: u32,
        pub hw_error: Option<String>,
        stream: CUstream,
        handle: nvjpegHandle,
        state: nvjpegJpegState,
        batch_size: usize,
        buffers: Vec<(CUdeviceptr, usize)>,
    }

    // The handle, state and stream are used by one thread at a time (&mut self).
    unsafe impl Send for Decoder {}

    impl Decoder {
        pub fn new(device: usize, hardware: bool) -> Result<Decoder> {
            let (cuda, nvj, why) = libs()?;
            let nvj = nvj.as_ref().ok_or_else(|| GpuError::Unavailable(why.clone().unwrap_or_default()))?;
            let mut stream = std::ptr::null_mut();
            let mut handle = std::ptr::null_mut();
            let mut state = std::ptr::null_mut();
            let (mut backend, mut engines, mut hw_error) = ("default", 0, None);
            // SAFETY: out-pointers to locals; documented call order (context current before any
            // CUDA or nvJPEG call).
            unsafe {
                let mut dev = 0;
                cu((cuda.cuDeviceGet)(&mut dev, device as c_int), "cuDeviceGet")?;
                let mut ctx = std::ptr::null_mut();
                cu((cuda.cuDevicePrimaryCtxRetain)(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
                cu((cuda.cuCtxSetCurrent)(ctx), "cuCtxSetCurrent")?;
                cu((cuda.cuStreamCreate)(&mut stream, 1), "cuStreamCreate")?;
                let hw_rc = if hardware {
                    (nvj.nvjpegCreateEx)(NVJPEG_BACKEND_HARDWARE, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut handle)
                } else {
                    -1
                };
                if hw_rc == 0 {
                    backend = "hardware";
                    let (mut e, mut c) = (0 as c_uint, 0 as c_uint);
                    if (nvj.nvjpegGetHardwareDecoderInfo)(handle, &mut e, &mut c) == 0 {
                        engines = e;
                    }
                } else {
                    if hardware {
                        hw_error = Some(format!("nvjpegCreateEx(HARDWARE) returned {hw_rc}"));
                    }
                    nv((nvj.nvjpegCreateEx)(NVJPEG_BACKEND_DEFAULT, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut handle), "nvjpegCreateEx")?;
                }
                nv((nvj.nvjpegJpegStateCreate)(handle, &mut state), "nvjpegJpegStateCreate")?;
            }
            Ok(Decoder { backend, engines, hw_error, stream, handle, state, batch_size: 0, buffers: Vec::new() })
        }

        fn free_buffers(&mut self) {
            if let Ok((cuda, _, _)) = libs() {
                for (p, _) in self.buffers.drain(..) {
                    // SAFETY: p came from cuMemAlloc and is freed once.
                    unsafe { (cuda.cuMemFree)(p) };
                }
            }
        }

        /// Decode `streams` in one batch into device buffers owned by the decoder (valid until
        /// the next call), planar as coded.
        pub fn decode_device(&mut self, streams: &[&[u8]]) -> Result<Vec<DevicePlanes>> {
            let (cuda, nvj, _) = libs()?;
            let nvj = nvj.as_ref().ok_or_else(|| GpuError::Unavailable("nvJPEG not loaded".into()))?;
            if streams.is_empty() {
                return Ok(Vec::new());
            }
            // Geometry of every stream (host-side header parse).
            let mut geo = Vec::with_capacity(streams.len());
            for (i, s) in streams.iter().enumerate() {
                let (mut nc, mut ss) = (0 as c_int, 0 as c_int);
                let (mut w, mut h) = ([0 as c_int; 4], [0 as c_int; 4]);
                // SAFETY: slice pointer/len; out arrays of 4 as the API requires.
                let rc = unsafe { (nvj.nvjpegGetImageInfo)(self.handle, s.as_ptr(), s.len(), &mut nc, &mut ss, w.as_mut_ptr(), h.as_mut_ptr()) };
                nv(rc, &format!("nvjpegGetImageInfo (stream {i})"))?;
                if !(1..=4).contains(&nc) || w[0] <= 0 || h[0] <= 0 || w[0] > 16384 || h[0] > 16384 {
                    return Err(GpuError::Call(format!("stream {i}: {nc} components of {}x{}", w[0], h[0])).into());
                }
                geo.push((nc as usize, w, h));
            }
            // One device buffer per stream holding its planes back to back.
            self.free_buffers();
            let mut images = Vec::with_capacity(streams.len());
            let mut out = Vec::with_capacity(streams.len());
            for (nc, w, h) in &geo {
                let sizes: Vec<usize> = (0..*nc).map(|c| w[c].max(0) as usize * h[c].max(0) as usize).collect();
                let total: usize = sizes.iter().sum();
                let mut p: CUdeviceptr = 0;
                // SAFETY: out-pointer to a local.
                cu(unsafe { (cuda.cuMemAlloc)(&mut p, total.max(1)) }, "cuMemAlloc")?;
                self.buffers.push((p, total));
                let mut img = nvjpegImage { channel: [std::ptr::null_mut(); 4], pitch: [0; 4] };
                let mut ptrs = Vec::with_capacity(*nc);
                let mut off = 0;
                for c in 0..*nc {
                    img.channel[c] = (p as usize + off) as *mut u8;
                    img.pitch[c] = w[c] as usize;
                    ptrs.push(p + off as u64);
                    off += sizes[c];
                }
                images.push(img);
                out.push(DevicePlanes {
                    ptrs,
                    widths: (0..*nc).map(|c| w[c] as u32).collect(),
                    heights: (0..*nc).map(|c| h[c] as u32).collect(),
                });
            }
            // SAFETY: pointer arrays sized streams.len(); device buffers sized from the headers;
            // the stream is synchronised before anyone reads the planes.
            unsafe {
                if self.batch_size != streams.len() {
                    nv((nvj.nvjpegDecodeBatchedInitialize)(self.handle, self.state, streams.len() as c_int, 1, NVJPEG_OUTPUT_UNCHANGED), "nvjpegDecodeBatchedInitialize")?;
                    self.batch_size = streams.len();
                }
                let ptrs: Vec<*const u8> = streams.iter().map(|s| s.as_ptr()).collect();
                let lens: Vec<usize> = streams.iter().map(|s| s.len()).collect();
                nv((nvj.nvjpegDecodeBatched)(self.handle, self.state, ptrs.as_ptr(), lens.as_ptr(), images.as_mut_ptr(), self.stream), "nvjpegDecodeBatched")?;
                cu((cuda.cuStreamSynchronize)(self.stream), "cuStreamSynchronize")?;
            }
            Ok(out)
        }

        pub fn decode(&mut self, streams: &[&[u8]], download: bool) -> Result<Vec<PlanarImage>> {
            let dev = self.decode_device(streams)?;
            if !download {
                return Ok(Vec::new());
            }
            let (cuda, _, _) = libs()?;
            let mut out = Vec::with_capacity(dev.len());
            for d in &dev {
                let mut planes = Vec::with_capacity(d.ptrs.len());
                for (c, &p) in d.ptrs.iter().enumerate() {
                    let n = d.widths[c] as usize * d.heights[c] as usize;
                    let mut host = vec![0u8; n];
                    // SAFETY: host buffer of n bytes; device plane of n bytes.
                    cu(unsafe { (cuda.cuMemcpyDtoH)(host.as_mut_ptr() as *mut c_void, p, n) }, "cuMemcpyDtoH")?;
                    planes.push(host);
                }
                out.push(PlanarImage { widths: d.widths.clone(), heights: d.heights.clone(), planes });
            }
            Ok(out)
        }
    }

    impl Drop for Decoder {
        fn drop(&mut self) {
            self.free_buffers();
            if let Ok((_, Some(nvj), _)) = libs() {
                // SAFETY: created in `new`, destroyed once.
                unsafe {
                    (nvj.nvjpegJpegStateDestroy)(self.state);
                    (nvj.nvjpegDestroy)(self.handle);
                }
            }
        }
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
        assert!(matches!(JpegBatchDecoder::new(0, true).err(), None | Some(crate::Error::Gpu(_))));
    }
}
