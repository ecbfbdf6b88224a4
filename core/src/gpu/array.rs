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
    pub(crate) ptr: u64,
    pub(crate) shape: Vec<usize>,
    pub(crate) device: usize,
    /// Process that allocated the memory: a forked child never frees (or touches) it.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) pid: u32,
    /// [`ptr`](Self::ptr) was called: free with a device-wide wait.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) exported: std::sync::atomic::AtomicBool,
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
