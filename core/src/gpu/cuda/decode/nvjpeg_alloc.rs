//! nvJPEG's own memory, through its V2 allocator interface (`nvjpegCreateExV2`, nvjpeg.h):
//! device buffers stream-ordered (`cuMemAllocAsync` / `cuMemFreeAsync` on the stream of the
//! nvJPEG call that asks), pinned host buffers kept for reuse until the handle is destroyed.
//!
//! Why: with the default allocators nvJPEG calls `cudaMalloc` / `cudaFree` /
//! `cudaHostAlloc` / `cudaFreeHost` whenever a state's buffers must grow or shrink, and those
//! synchronise implicitly with other streams' work (CUDA programming guide, "Implicit
//! Synchronization"): a decode lane would then wait for a model's queued kernels. Requests on
//! the NULL stream (state set-up and tear-down) are served synchronously (`cuMemAlloc`-like
//! ordering: allocated on a private stream that is synchronised, freed with `cuMemFree`).

use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use super::super::context::{pid, Stream};
use super::super::sys::{cuda, nvjpegAllocatorV2, CUdeviceptr, CUstream, Res};

/// The allocators of one nvJPEG handle; must outlive the handle and its states (the handle owns
/// it and drops it after `nvjpegDestroy`).
pub(crate) struct Allocators {
    /// For NULL-stream device requests.
    private: Stream,
    /// Pinned buffers nvJPEG gave back, kept for its next requests: (address, size).
    pinned_free: Mutex<Vec<(usize, usize)>>,
    pid: u32,
}

impl Allocators {
    /// Allocators for a handle of the current context.
    pub(crate) fn new() -> Res<Box<Allocators>> {
        Ok(Box::new(Allocators { private: Stream::new()?, pinned_free: Mutex::new(Vec::new()), pid: pid() }))
    }

    /// The two V2 allocator records pointing at `self` (which must not move: it is boxed).
    pub(crate) fn records(&self) -> (nvjpegAllocatorV2, nvjpegAllocatorV2) {
        let ctx = self as *const Allocators as *mut c_void;
        (nvjpegAllocatorV2 { malloc: dev_malloc, free: dev_free, ctx }, nvjpegAllocatorV2 { malloc: pinned_malloc, free: pinned_free, ctx })
    }
}

impl Drop for Allocators {
    fn drop(&mut self) {
        if self.pid != pid() {
            return;
        }
        if let (Ok(cuda), Ok(list)) = (cuda(), self.pinned_free.get_mut()) {
            for &(p, _) in list.iter() {
                // SAFETY: allocated by `pinned_malloc`, given back by nvJPEG, freed once.
                unsafe { cuda.cuMemFreeHost(p as *mut c_void) };
            }
        }
    }
}

/// `tDevMallocV2`: stream-ordered on nvJPEG's stream, or on the private stream (then
/// synchronised) for a NULL stream.
unsafe extern "C" fn dev_malloc(ctx: *mut c_void, ptr: *mut *mut c_void, size: usize, stream: CUstream) -> c_int {
    let Ok(cuda) = cuda() else { return 1 };
    if ctx.is_null() || ptr.is_null() {
        return 1;
    }
    // SAFETY: `ctx` is the boxed `Allocators` of the handle calling (see `records`).
    let a = unsafe { &*(ctx as *const Allocators) };
    let s = if stream.is_null() { a.private.raw() } else { stream };
    let mut p: CUdeviceptr = 0;
    // SAFETY: out-pointer to a local; a live stream of the current context.
    let rc = unsafe { cuda.cuMemAllocAsync(&mut p, size.max(1), s) };
    if rc != 0 {
        return rc;
    }
    if stream.is_null() && a.private.sync().is_err() {
        return 1;
    }
    // SAFETY: nvJPEG's out-pointer.
    unsafe { *ptr = p as usize as *mut c_void };
    0
}

/// `tDevFreeV2`: stream-ordered on nvJPEG's stream; `cuMemFree` (waits for the device) for a
/// NULL stream, whose caller expects the memory to be free when the call returns.
unsafe extern "C" fn dev_free(_ctx: *mut c_void, ptr: *mut c_void, _size: usize, stream: CUstream) -> c_int {
    if ptr.is_null() {
        return 0;
    }
    let Ok(cuda) = cuda() else { return 1 };
    let p = ptr as usize as CUdeviceptr;
    // SAFETY: memory from `dev_malloc`, freed once, as nvJPEG asks.
    unsafe {
        if stream.is_null() {
            cuda.cuMemFree(p)
        } else {
            cuda.cuMemFreeAsync(p, stream)
        }
    }
}

/// `tPinnedMallocV2`: the smallest kept buffer that fits (at most twice the size asked), else
/// a new one (`cuMemAllocHost`).
unsafe extern "C" fn pinned_malloc(ctx: *mut c_void, ptr: *mut *mut c_void, size: usize, _stream: CUstream) -> c_int {
    if ctx.is_null() || ptr.is_null() {
        return 1;
    }
    // SAFETY: as in `dev_malloc`.
    let a = unsafe { &*(ctx as *const Allocators) };
    let size = size.max(1);
    if let Ok(mut list) = a.pinned_free.lock() {
        let best = list.iter().enumerate().filter(|(_, &(_, s))| s >= size && s / 2 <= size).min_by_key(|(_, &(_, s))| s).map(|(i, _)| i);
        if let Some(i) = best {
            let (p, _) = list.swap_remove(i);
            // SAFETY: nvJPEG's out-pointer.
            unsafe { *ptr = p as *mut c_void };
            return 0;
        }
    }
    let Ok(cuda) = cuda() else { return 1 };
    let mut p = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    let rc = unsafe { cuda.cuMemAllocHost(&mut p, size) };
    if rc != 0 {
        return rc;
    }
    // SAFETY: nvJPEG's out-pointer.
    unsafe { *ptr = p };
    0
}

/// `tPinnedFreeV2`: kept for reuse (freed when the handle's allocators drop), after nvJPEG's
/// stream finished with it when a stream is given.
unsafe extern "C" fn pinned_free(ctx: *mut c_void, ptr: *mut c_void, size: usize, stream: CUstream) -> c_int {
    if ptr.is_null() {
        return 0;
    }
    if ctx.is_null() {
        return 1;
    }
    // SAFETY: as in `dev_malloc`.
    let a = unsafe { &*(ctx as *const Allocators) };
    if !stream.is_null() {
        // A stream-ordered free: the host buffer may still be read by work on `stream`; reuse
        // must wait for it (a stream synchronisation, not a device-wide one).
        let Ok(cuda) = cuda() else { return 1 };
        // SAFETY: a live stream of nvJPEG's caller.
        let rc = unsafe { cuda.cuStreamSynchronize(stream) };
        if rc != 0 {
            return rc;
        }
    }
    match a.pinned_free.lock() {
        Ok(mut list) => {
            list.push((ptr as usize, size.max(1)));
            0
        }
        Err(_) => 1,
    }
}
