//! Device results: [`DeviceOptions`], [`DeviceArray`] (device memory freed on drop) and
//! [`DeviceBatch`].

use super::backend;
#[allow(unused_imports)] // doc links
use crate::error::GpuError;
use crate::error::{Error, Result};
#[allow(unused_imports)] // doc links
use crate::slide::Slide;

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
/// Freeing never makes the dropping thread wait for the device, except after [`ptr`](Self::ptr):
/// - an array whose pointer never left slidestream (read, then copied with
///   [`to_host`](Self::to_host) or dropped) is returned stream-ordered (`cuMemFreeAsync`) on an
///   engine stream;
/// - an array handed to a consumer for one stream ([`ptr_for_stream`](Self::ptr_for_stream),
///   which the Python bindings' `__dlpack__(stream=)` uses: `torch.from_dlpack` names the
///   consumer's current stream) is returned stream-ordered on that stream, after everything the
///   consumer enqueued there before the drop;
/// - once its pointer was handed out without a stream ([`ptr`](Self::ptr): the bindings'
///   `__cuda_array_interface__`, or `__dlpack__` with stream -1 or 2, or a second consumer
///   stream), the memory is returned with `cuMemFree`, which waits for all work on the device
///   (a consumer's on any stream included).
///
/// The memory comes from the engine's own pool, which never makes a later read wait for a
/// consumer's stream to reuse it.
///
/// Shapes: (height, width, channels) for a region, (n, height, width, channels) for a batch.
/// The data are complete when the read returns (the reading stream was synchronised), so any
/// stream may consume them.
pub struct DeviceArray {
    pub(crate) ptr: u64,
    pub(crate) shape: Vec<usize>,
    pub(crate) device: usize,
    /// Process that allocated the memory: a forked child never frees (or touches) it.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) pid: u32,
    /// How the memory is freed: [`FREE_ENGINE`] (never handed out), [`FREE_WAIT_DEVICE`]
    /// ([`ptr`](Self::ptr) was called), else the consumer's stream handle
    /// ([`ptr_for_stream`](Self::ptr_for_stream)).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) free_on: std::sync::atomic::AtomicU64,
}

/// [`DeviceArray::free_on`]: stream-ordered on the engine's free stream.
pub(crate) const FREE_ENGINE: u64 = 0;
/// [`DeviceArray::free_on`]: `cuMemFree`, waiting for the device.
pub(crate) const FREE_WAIT_DEVICE: u64 = u64::MAX;
/// `CU_STREAM_LEGACY` (cuda.h), the legacy default stream: DLPack's stream 1 (and None).
pub const LEGACY_STREAM: u64 = 1;
/// `CU_STREAM_PER_THREAD` (cuda.h): DLPack's stream 2, the per-thread default stream of
/// whichever thread names it (so unusable from the thread that frees).
pub const PER_THREAD_STREAM: u64 = 2;

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray").field("ptr", &format_args!("{:#x}", self.ptr)).field("shape", &self.shape).field("device", &self.device).finish()
    }
}

impl DeviceArray {
    /// Device pointer (`CUdeviceptr`) of element 0, for a consumer on any stream. Work
    /// enqueued on it on any stream may still run when the array is dropped: the free then
    /// waits for the device (`cuMemFree`).
    pub fn ptr(&self) -> u64 {
        self.free_on.store(FREE_WAIT_DEVICE, std::sync::atomic::Ordering::Relaxed);
        self.ptr
    }

    /// Device pointer (`CUdeviceptr`) of element 0, for a consumer that uses the data on CUDA
    /// stream `stream` only (a `CUstream` handle as an integer; [`LEGACY_STREAM`] = 1 for the
    /// legacy default stream, as DLPack numbers it). When the array is dropped its memory is
    /// freed in stream order on that stream (`cuMemFreeAsync`): after the consumer's work
    /// enqueued there before the drop, without waiting for the device. The stream must still
    /// exist when the array is dropped (PyTorch's streams always do). 0,
    /// [`PER_THREAD_STREAM`], a second different stream, or an earlier [`ptr`](Self::ptr)
    /// make the free wait for the device instead, as after [`ptr`](Self::ptr).
    pub fn ptr_for_stream(&self, stream: u64) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let want = if stream == 0 || stream == PER_THREAD_STREAM { FREE_WAIT_DEVICE } else { stream };
        if let Err(now) = self.free_on.compare_exchange(FREE_ENGINE, want, Relaxed, Relaxed) {
            if now != want {
                self.free_on.store(FREE_WAIT_DEVICE, Relaxed);
            }
        }
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
        backend::download(self)
    }
}

impl Drop for DeviceArray {
    fn drop(&mut self) {
        backend::free_array(self);
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
    /// CUDA device ordinal of the batch's array.
    pub fn device(&self) -> usize {
        self.array.device()
    }

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
