//! Device and pinned host memory, each allocation owned by a type whose `Drop` frees it:
//! growable per-slot buffers ([`DeviceBuffer`], [`PinnedBuffer`]), stream-ordered temporaries
//! ([`StreamAlloc`]) and the blocks holding decoded tiles ([`DevBlock`], [`DevTile`]). The
//! download and free of a returned [`crate::gpu::DeviceArray`] need the engine (its free
//! stream), so they live in the engine layer (`arrays.rs`).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::context::pid;
use std::ffi::c_int;

use cudarc::driver::sys as cu_sys;

use super::sys::{
    cu, cuda, CUcontext, CUdevice, CUdeviceptr, CUstream, CuFile, Res, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
};
use crate::cache::CacheWeight;

/// A growable device buffer owned by one slot (used only while the slot's stream is idle),
/// optionally registered with cuFile (`cuFileBufRegister`); freed (and deregistered) on drop.
pub(crate) struct DeviceBuffer {
    ptr: CUdeviceptr,
    len: usize,
    /// The cuFile table it is registered with.
    registered: Option<&'static CuFile>,
    pid: u32,
}

// Used by one thread at a time (its slot is taken out of a pool for a call).
unsafe impl Send for DeviceBuffer {}

impl DeviceBuffer {
    pub(crate) const fn new() -> DeviceBuffer {
        DeviceBuffer { ptr: 0, len: 0, registered: None, pid: 0 }
    }

    /// The allocation (0 before the first [`ensure`](Self::ensure)).
    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Make room for `len` bytes (contents not kept), registered with `register` when given
    /// (a registration that fails leaves the buffer unregistered, as cuFile then reads through
    /// its own bounce buffers). The owner's stream must be idle.
    pub(crate) fn ensure(&mut self, len: usize, register: Option<&'static CuFile>) -> Res<()> {
        if self.len >= len && (register.is_none() || self.registered.is_some()) {
            return Ok(());
        }
        self.release();
        let want = len.max(1 << 20).next_power_of_two();
        let mut p = 0;
        // SAFETY: out-pointer to a local.
        cu(unsafe { cuda()?.cuMemAlloc(&mut p, want) }, "cuMemAlloc")?;
        // Fields, not `*self = ..`: an assignment would run `Drop` on the old value.
        (self.ptr, self.len, self.registered, self.pid) = (p, want, None, pid());
        if let Some(cf) = register {
            // SAFETY: a device allocation of `want` bytes; deregistered before it is freed.
            let e = unsafe { cf.cuFileBufRegister(p as *const c_void, want, 0) };
            if e.err == 0 {
                self.registered = Some(cf);
            }
        }
        Ok(())
    }

    fn release(&mut self) {
        if self.ptr != 0 && self.pid == pid() {
            if let Ok(cuda) = cuda() {
                // SAFETY: allocated in `ensure`, freed once; the stream using it is idle.
                unsafe {
                    if let Some(cf) = self.registered {
                        cf.cuFileBufDeregister(self.ptr as *const c_void);
                    }
                    cuda.cuMemFree(self.ptr);
                }
            }
        }
        // Fields, not `*self = DeviceBuffer::new()`: that assignment drops the old value, whose
        // `Drop` calls `release` again (infinite recursion, seen on the H200).
        (self.ptr, self.len, self.registered) = (0, 0, None);
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.release();
    }
}

/// A growable pinned (page-locked) host buffer, freed on drop.
pub(crate) struct PinnedBuffer {
    ptr: *mut u8,
    len: usize,
    pid: u32,
}

// Used by one thread at a time (its owner is taken out of a pool for a call).
unsafe impl Send for PinnedBuffer {}

impl PinnedBuffer {
    pub(crate) const fn new() -> PinnedBuffer {
        PinnedBuffer { ptr: std::ptr::null_mut(), len: 0, pid: 0 }
    }

    /// The allocation (null before the first [`ensure`](Self::ensure)).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Make room for `len` bytes (contents not kept). No copy from it may be pending.
    pub(crate) fn ensure(&mut self, len: usize) -> Res<()> {
        if self.len >= len {
            return Ok(());
        }
        self.release();
        let want = len.max(1 << 20).next_power_of_two();
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        cu(unsafe { cuda()?.cuMemAllocHost(&mut p, want) }, "cuMemAllocHost")?;
        // Fields, not `*self = ..`: an assignment would run `Drop` on the old value.
        (self.ptr, self.len, self.pid) = (p as *mut u8, want, pid());
        Ok(())
    }

    /// The first `len` bytes (at most the size made by [`ensure`](Self::ensure)).
    pub(crate) fn as_mut_slice(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len);
        if len == 0 {
            return &mut [];
        }
        // SAFETY: `len` bytes of a live pinned allocation owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }

    fn release(&mut self) {
        if !self.ptr.is_null() && self.pid == pid() {
            if let Ok(cuda) = cuda() {
                // SAFETY: allocated in `ensure`, freed once; no copy from it is pending.
                unsafe { cuda.cuMemFreeHost(self.ptr as *mut c_void) };
            }
        }
        // Fields, not `*self = PinnedBuffer::new()` (its drop would call `release` again).
        (self.ptr, self.len) = (std::ptr::null_mut(), 0);
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        self.release();
    }
}

/// Where one engine's tile blocks live: its context, the stream they are freed on, and the
/// count of device bytes they hold. Lets the decoders allocate blocks without the engine.
#[derive(Clone, Copy)]
pub(crate) struct BlockHome<'a> {
    pub(crate) ctx: CUcontext,
    pub(crate) free_stream: CUstream,
    pub(crate) held: &'a Arc<AtomicU64>,
}

impl BlockHome<'_> {
    /// Own `ptr` (`bytes` from `cuMemAllocAsync` in this context) as a tile block, freed on the
    /// free stream with its last tile.
    pub(crate) fn block(&self, ptr: CUdeviceptr, bytes: usize) -> Arc<DevBlock> {
        DevBlock::new(ptr, bytes, self.ctx, self.free_stream, self.held)
    }

    /// A new tile block of `bytes` (stream-ordered on `stream`, a live stream of this context)
    /// and its device pointer.
    pub(crate) fn alloc(&self, bytes: usize, stream: CUstream) -> Res<(CUdeviceptr, Arc<DevBlock>)> {
        let mut p = 0;
        // SAFETY: out-pointer to a local; a live stream of this context.
        cu(unsafe { cuda()?.cuMemAllocAsync(&mut p, bytes, stream) }, "cuMemAllocAsync")?;
        Ok((p, self.block(p, bytes)))
    }
}

/// A temporary stream-ordered device allocation (`cuMemAllocAsync` on `stream`), freed
/// stream-ordered on the same stream when dropped: drop it after the last kernel or copy that
/// uses it was enqueued there.
pub(crate) struct StreamAlloc {
    ptr: CUdeviceptr,
    stream: CUstream,
}

impl StreamAlloc {
    /// `len` bytes (at least 1) on `stream`.
    pub(crate) fn new(len: usize, stream: CUstream) -> Res<StreamAlloc> {
        let mut p = 0;
        // SAFETY: out-pointer to a local; the stream is live and its context current.
        cu(unsafe { cuda()?.cuMemAllocAsync(&mut p, len.max(1), stream) }, "cuMemAllocAsync")?;
        Ok(StreamAlloc { ptr: p, stream })
    }

    /// Upload `bytes` into a fresh allocation on `stream`.
    pub(crate) fn upload(bytes: &[u8], stream: CUstream) -> Res<StreamAlloc> {
        let a = StreamAlloc::new(bytes.len(), stream)?;
        if !bytes.is_empty() {
            // SAFETY: the copy reads `bytes.len()` bytes of a live slice; for pageable memory
            // cuMemcpyHtoDAsync returns once the data were staged, so the slice may go away.
            cu(unsafe { cuda()?.cuMemcpyHtoDAsync(a.ptr, bytes.as_ptr() as *const c_void, bytes.len(), stream) }, "cuMemcpyHtoDAsync")?;
        }
        Ok(a)
    }

    /// The device pointer.
    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    /// Hand the allocation to another owner (a [`DevBlock`]), which frees it.
    pub(crate) fn into_raw(self) -> CUdeviceptr {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }
}

impl Drop for StreamAlloc {
    fn drop(&mut self) {
        if let Ok(cuda) = cuda() {
            // SAFETY: a stream-ordered allocation made on `stream`, freed once after its last
            // use was enqueued on the same stream.
            unsafe { cuda.cuMemFreeAsync(self.ptr, self.stream) };
        }
    }
}

/// The engine's memory pool for the arrays it returns (`cuMemPoolCreate`, device memory of one
/// device), destroyed when dropped (memory still held by live arrays is released by the driver
/// once they are freed).
///
/// Not the device's default pool, because a returned array may be freed in stream order on the
/// consumer's stream (`free_array`), and the default pool's
/// `CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES` would then let a later allocation on an
/// engine stream wait for the consumer's queued work (a model's step) before reusing that
/// memory. Here that attribute is off: memory freed on another stream is reused only once the
/// free has completed on the device (opportunistic reuse) or when the allocating stream already
/// depends on it; otherwise the pool grows. Freed memory is kept for reuse
/// (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` = unlimited), and other libraries' use of the default
/// pool is left alone.
pub(crate) struct OutputPool {
    raw: *mut c_void,
    pid: u32,
}

// A pool handle may be used from any thread.
unsafe impl Send for OutputPool {}
unsafe impl Sync for OutputPool {}

impl OutputPool {
    /// A pool on `device` (an ordinal whose context is current).
    pub(crate) fn new(device: CUdevice) -> Res<OutputPool> {
        let cuda = cuda()?;
        // SAFETY: plain-old-data; zero is the documented "unset" for every other field.
        let mut props: cu_sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
        props.allocType = cu_sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        props.handleTypes = cu_sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
        props.location.type_ = cu_sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = device;
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; props filled as cuda.h documents.
        cu(unsafe { cuda.cuMemPoolCreate(&mut raw, &props) }, "cuMemPoolCreate")?;
        let pool = OutputPool { raw, pid: pid() };
        let (mut threshold, mut internal) = (u64::MAX, 0 as c_int);
        // SAFETY: a live pool; the attributes' value types are u64 and int (cuda.h).
        unsafe {
            cu(cuda.cuMemPoolSetAttribute(raw, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &mut threshold as *mut u64 as *mut c_void), "cuMemPoolSetAttribute")?;
            cu(
                cuda.cuMemPoolSetAttribute(raw, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &mut internal as *mut c_int as *mut c_void),
                "cuMemPoolSetAttribute",
            )?;
        }
        Ok(pool)
    }

    /// `bytes` (at least 1) from the pool, stream-ordered on `stream`.
    pub(crate) fn alloc(&self, bytes: usize, stream: CUstream) -> Res<CUdeviceptr> {
        let mut p = 0;
        // SAFETY: out-pointer to a local; a live pool and stream of the current context.
        cu(unsafe { cuda()?.cuMemAllocFromPoolAsync(&mut p, bytes.max(1), self.raw, stream) }, "cuMemAllocFromPoolAsync")?;
        Ok(p)
    }
}

impl Drop for OutputPool {
    fn drop(&mut self) {
        if self.pid == pid() {
            if let Ok(cuda) = cuda() {
                // SAFETY: created in `new`, destroyed once.
                unsafe { cuda.cuMemPoolDestroy(self.raw) };
            }
        }
    }
}

/// View plain-old-data descriptors as bytes (for uploads).
pub(crate) fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: T is a repr(C) plain-old-data descriptor; viewing it as bytes is sound.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// One stream-ordered device allocation holding one or more decoded tiles (a chunk's tiles
/// share one block: one allocation and one free per chunk instead of per tile). Freed with
/// `cuMemFreeAsync` on the engine's free stream when its last tile is dropped.
pub(crate) struct DevBlock {
    ptr: CUdeviceptr,
    ctx: CUcontext,
    free_stream: CUstream,
    pid: u32,
    /// Size in bytes, and the engine's count of bytes held by live blocks.
    bytes: u64,
    held: Arc<AtomicU64>,
}

// A device pointer and handles usable from any thread.
unsafe impl Send for DevBlock {}
unsafe impl Sync for DevBlock {}

impl DevBlock {
    /// Take ownership of `ptr` (`bytes` bytes from `cuMemAllocAsync` in `ctx`), counted in
    /// `held` while alive.
    pub(crate) fn new(ptr: CUdeviceptr, bytes: usize, ctx: CUcontext, free_stream: CUstream, held: &Arc<AtomicU64>) -> Arc<DevBlock> {
        held.fetch_add(bytes as u64, Relaxed);
        Arc::new(DevBlock { ptr, ctx, free_stream, pid: pid(), bytes: bytes as u64, held: held.clone() })
    }
}

impl Drop for DevBlock {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Relaxed);
        if self.ptr == 0 || self.pid != pid() {
            return; // a forked child must not touch the parent's CUDA state
        }
        if let Ok(cuda) = cuda() {
            // The dropping thread's current context is restored afterwards (it may be a
            // caller's thread working on another device).
            let _restore = super::context::CurrentGuard::save();
            // SAFETY: allocated with cuMemAllocAsync by this engine; freed once, after every
            // call that used its tiles synchronised its streams (dropped with the last `Arc`).
            unsafe {
                cuda.cuCtxSetCurrent(self.ctx);
                cuda.cuMemFreeAsync(self.ptr, self.free_stream);
            }
        }
    }
}

/// A decoded tile in device memory: RGBA, `w × h` pixels starting at (`x`, `y`) of the tile,
/// rows `pitch × 4` bytes apart, inside `block`. A whole tile has `x = y = 0` and covers the
/// tile's part inside the image; a partial one (a CPU worker decoded only what one call needs)
/// covers less and is never cached.
pub(crate) struct DevTile {
    pub(crate) ptr: CUdeviceptr,
    pub(crate) x: u32,
    pub(crate) y: u32,
    pub(crate) w: u32,
    pub(crate) h: u32,
    pub(crate) pitch: u32,
    pub(crate) partial: bool,
    pub(crate) _block: Arc<DevBlock>,
}

impl DevTile {
    /// A whole tile of `w × h` pixels, pitch `w`.
    pub(crate) fn whole(ptr: CUdeviceptr, w: u32, h: u32, block: Arc<DevBlock>) -> DevTile {
        DevTile { ptr, x: 0, y: 0, w, h, pitch: w, partial: false, _block: block }
    }
}

impl CacheWeight for DevTile {
    fn byte_size(&self) -> usize {
        self.pitch as usize * self.h as usize * 4 + std::mem::size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dropping or releasing a buffer that holds nothing touches no CUDA call and returns (the
    /// first version reassigned `*self` in `release`, whose implicit drop called `release`
    /// again: a stack overflow on the first buffer the engine grew).
    #[test]
    fn empty_buffers_release_and_drop_without_recursion() {
        let mut d = DeviceBuffer::new();
        d.release();
        d.release();
        assert_eq!(d.ptr(), 0);
        drop(d);
        let mut p = PinnedBuffer::new();
        p.release();
        assert!(p.ptr().is_null());
        drop(p);
        for _ in 0..1000 {
            drop(DeviceBuffer::new());
            drop(PinnedBuffer::new());
        }
    }
}
