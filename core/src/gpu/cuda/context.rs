//! The CUDA context of a device and CUDA streams, each owned by a type whose `Drop` releases it.
//!
//! A process forked after CUDA was initialised must never touch its parent's CUDA state, so
//! every owner here records the process id that made it and frees nothing in another process.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use super::sys::{
    cu, cuda, CUcontext, CUdevice, CUevent, CUstream, Res, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
    CU_EVENT_BLOCKING_SYNC_NO_TIMING, CU_STREAM_NON_BLOCKING,
};
use crate::error::GpuError;

/// The compute capability (major, minor) of `device`, asked of the driver without making any
/// context current or creating an nvJPEG handle (the engine's start needs only this of the
/// probe).
pub(crate) fn device_arch(device: usize) -> Res<(i32, i32)> {
    let cuda = cuda()?;
    let (mut n, mut dev, mut ma, mut mi) = (0, 0, 0, 0);
    // SAFETY: out-pointers to locals; functions bound from libcuda with their signatures.
    unsafe {
        cu(cuda.cuDeviceGetCount(&mut n), "cuDeviceGetCount")?;
        if device >= n.max(0) as usize {
            return Err(GpuError::Unavailable(format!("no CUDA device {device}")));
        }
        cu(cuda.cuDeviceGet(&mut dev, device as c_int), "cuDeviceGet")?;
        cu(cuda.cuDeviceGetAttribute(&mut ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute")?;
        cu(cuda.cuDeviceGetAttribute(&mut mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute")?;
    }
    Ok((ma, mi))
}

/// The id of this process (compared with an owner's to detect a fork).
pub(crate) fn pid() -> u32 {
    std::process::id()
}

/// A retained primary context of one device (`cuDevicePrimaryCtxRetain`), released when
/// dropped (`cuDevicePrimaryCtxRelease`) in the process that retained it.
pub(crate) struct Context {
    raw: CUcontext,
    dev: CUdevice,
    pid: u32,
}

// A CUDA context may be made current on any thread.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    /// Retain the primary context of `device` and make it current on this thread. `sched`, when
    /// given, sets how host threads wait for the device (`cuDevicePrimaryCtxSetFlags`) first;
    /// it takes effect only before the primary context is active (else the current setting
    /// stays; the call's result is ignored, as before).
    pub(crate) fn retain(device: usize, sched: Option<std::ffi::c_uint>) -> Res<Context> {
        let cuda = cuda()?;
        let mut dev = 0;
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointers to locals; documented call order.
        unsafe {
            cu(cuda.cuDeviceGet(&mut dev, device as c_int), "cuDeviceGet")?;
            if let Some(f) = sched {
                cuda.cuDevicePrimaryCtxSetFlags(dev, f);
            }
            cu(cuda.cuDevicePrimaryCtxRetain(&mut raw, dev), "cuDevicePrimaryCtxRetain")?;
        }
        let ctx = Context { raw, dev, pid: pid() };
        ctx.make_current()?;
        Ok(ctx)
    }

    /// The primary context of `device` retained once for the whole process, for callers that
    /// need a current context but own no engine (the probe). Retaining it per call and releasing
    /// it after would create and destroy the context at every `available()`.
    ///
    /// # Errors
    /// [`GpuError::Fork`] in a process forked after it was retained; the CUDA error otherwise.
    pub(crate) fn process_wide(device: usize) -> Res<&'static Context> {
        static CTXS: OnceLock<Mutex<HashMap<usize, &'static Context>>> = OnceLock::new();
        let mut map = CTXS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = map.get(&device) {
            if c.pid != pid() {
                return Err(GpuError::Fork { parent: c.pid, child: pid() });
            }
            c.make_current()?;
            return Ok(c);
        }
        let c: &'static Context = Box::leak(Box::new(Context::retain(device, None)?));
        map.insert(device, c);
        Ok(c)
    }

    /// Make the context current on the calling thread.
    pub(crate) fn make_current(&self) -> Res<()> {
        // SAFETY: a retained primary context.
        cu(unsafe { cuda()?.cuCtxSetCurrent(self.raw) }, "cuCtxSetCurrent")
    }

    /// The raw handle (for threads that set it current themselves).
    pub(crate) fn raw(&self) -> CUcontext {
        self.raw
    }

    /// The `CUdevice` of the context.
    pub(crate) fn device(&self) -> CUdevice {
        self.dev
    }

    /// The process that retained the context.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if self.pid != pid() {
            return;
        }
        if let Ok(cuda) = cuda() {
            // SAFETY: retained once in `retain`, released once.
            unsafe { cuda.cuDevicePrimaryCtxRelease(self.dev) };
        }
    }
}

/// The calling thread's current CUDA context, saved by [`CurrentGuard::save`] and made current
/// again when the guard drops. Slidestream's entry points that run on a caller's thread (a
/// read, a copy to the host, freeing an array, an engine's start) make their engine's context
/// current; the guard keeps that from leaking out: the CUDA runtime (torch) takes the current
/// context's device as its current device, so a read on `cuda:1` from a thread working on
/// `cuda:0` must leave that thread on `cuda:0`.
pub(crate) struct CurrentGuard {
    saved: CUcontext,
    pid: u32,
}

impl CurrentGuard {
    /// Save the calling thread's current context (none is a valid state too).
    pub(crate) fn save() -> Res<CurrentGuard> {
        let mut saved = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        cu(unsafe { cuda()?.cuCtxGetCurrent(&mut saved) }, "cuCtxGetCurrent")?;
        Ok(CurrentGuard { saved, pid: pid() })
    }
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        if self.pid != pid() {
            return;
        }
        if let Ok(cuda) = cuda() {
            // SAFETY: the context that was current on this thread when the guard was made (a
            // primary context stays valid while retained; a null one unbinds the thread).
            unsafe { cuda.cuCtxSetCurrent(self.saved) };
        }
    }
}

/// Streams alive in this process (made by [`Stream::new`] and not yet dropped).
static LIVE_STREAMS: AtomicUsize = AtomicUsize::new(0);

/// The priority every engine stream is created with (`SLIDESTREAM_GPU_STREAM_PRIORITY`, set
/// by [`set_stream_priority`] when an engine starts; 0, the default priority, before).
static STREAM_PRIORITY: AtomicI32 = AtomicI32::new(0);

/// Fix the priority of the engine's streams from now on: the current context's greatest
/// priority (`cuCtxGetStreamPriorityRange`; -5 on Hopper) when `high`, else 0 (the default,
/// which is also the least on current GPUs). Returns the value used.
pub(crate) fn set_stream_priority(high: bool) -> Res<c_int> {
    let p = if high {
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: out-pointers to locals; the caller made a context current.
        cu(unsafe { cuda()?.cuCtxGetStreamPriorityRange(&mut least, &mut greatest) }, "cuCtxGetStreamPriorityRange")?;
        greatest
    } else {
        0
    };
    STREAM_PRIORITY.store(p, Relaxed);
    Ok(p)
}

/// How [`Stream::sync`] waits (`SLIDESTREAM_GPU_WAIT`, set by [`set_blocking_waits`] when an
/// engine starts): `true` = sleep on a blocking-sync event, `false` = `cuStreamSynchronize`
/// (which spins, yields or blocks as the context's scheduling flag says).
static BLOCKING_WAITS: AtomicBool = AtomicBool::new(true);

/// Fix how the engine's threads wait for their streams from now on (see [`Stream::sync`]).
pub(crate) fn set_blocking_waits(blocking: bool) {
    BLOCKING_WAITS.store(blocking, Relaxed);
}

/// A non-blocking CUDA stream (`cuStreamCreateWithPriority(CU_STREAM_NON_BLOCKING, p)`, `p`
/// from [`set_stream_priority`]): it never synchronises with the legacy default stream (and so
/// never waits for a PyTorch model's work there). Destroyed when dropped (`cuStreamDestroy`:
/// work still queued on it completes first, on the device), with its wait event.
pub(crate) struct Stream {
    raw: CUstream,
    /// A blocking-sync event (`CU_EVENT_BLOCKING_SYNC`, no timing) that [`sync`](Self::sync)
    /// records and waits on.
    event: CUevent,
    pid: u32,
}

// A stream may be used from any thread; its users serialise their own work on it.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    /// A new non-blocking stream in the current context, at the engine's stream priority.
    pub(crate) fn new() -> Res<Stream> {
        let mut raw = std::ptr::null_mut();
        let p = STREAM_PRIORITY.load(Relaxed);
        // SAFETY: out-pointer to a local; the caller made the context current.
        cu(unsafe { cuda()?.cuStreamCreateWithPriority(&mut raw, CU_STREAM_NON_BLOCKING, p) }, "cuStreamCreateWithPriority")?;
        let mut event = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; the caller made the context current.
        if let Err(e) = cu(unsafe { cuda()?.cuEventCreate(&mut event, CU_EVENT_BLOCKING_SYNC_NO_TIMING) }, "cuEventCreate") {
            // SAFETY: created above, destroyed once (no work was queued on it).
            unsafe { cuda()?.cuStreamDestroy(raw) };
            return Err(e);
        }
        LIVE_STREAMS.fetch_add(1, Relaxed);
        Ok(Stream { raw, event, pid: pid() })
    }

    /// The raw handle.
    pub(crate) fn raw(&self) -> CUstream {
        self.raw
    }

    /// The stream's priority as the driver reports it (`cuStreamGetPriority`).
    pub(crate) fn priority(&self) -> Res<c_int> {
        let mut p = 0;
        // SAFETY: a live stream; out-pointer to a local.
        cu(unsafe { cuda()?.cuStreamGetPriority(self.raw, &mut p) }, "cuStreamGetPriority")?;
        Ok(p)
    }

    /// Wait until every operation queued on the stream has completed. With blocking waits
    /// (`SLIDESTREAM_GPU_WAIT=block`, the default) the thread records the stream's event and
    /// sleeps in `cuEventSynchronize` until the device signals it (a blocking-sync event
    /// blocks whatever the context's scheduling flag, which PyTorch has usually fixed before
    /// the engine starts), so a thread waiting for a decode leaves its core to the caller's
    /// threads instead of spinning on it; else `cuStreamSynchronize`. Concurrent callers on one
    /// stream may wait for each other's later work too, never for less than their own.
    pub(crate) fn sync(&self) -> Res<()> {
        let cuda = cuda()?;
        if BLOCKING_WAITS.load(Relaxed) {
            // SAFETY: a live stream and its live event; the event is re-recorded by each wait.
            cu(unsafe { cuda.cuEventRecord(self.event, self.raw) }, "cuEventRecord")?;
            // SAFETY: as above.
            return cu(unsafe { cuda.cuEventSynchronize(self.event) }, "cuEventSynchronize");
        }
        // SAFETY: a live stream.
        cu(unsafe { cuda.cuStreamSynchronize(self.raw) }, "cuStreamSynchronize")
    }

    /// Streams alive in this process now.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn live() -> usize {
        LIVE_STREAMS.load(Relaxed)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        LIVE_STREAMS.fetch_sub(1, Relaxed);
        if self.pid != pid() {
            return;
        }
        if let Ok(cuda) = cuda() {
            // SAFETY: created in `new`, destroyed once (an event may be destroyed while work
            // recorded on it is pending: its resources are released when that completes).
            unsafe {
                cuda.cuEventDestroy(self.event);
                cuda.cuStreamDestroy(self.raw);
            }
        }
    }
}

/// Synchronises a stream when dropped while armed: on an early return, work still running on
/// it (an allocation, a copy) completes before what it uses is freed.
pub(crate) struct SyncOnDrop {
    pub(crate) stream: CUstream,
    pub(crate) armed: bool,
}

impl Drop for SyncOnDrop {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(cuda) = cuda() {
                // SAFETY: a stream of the engine, alive for the process.
                unsafe { cuda.cuStreamSynchronize(self.stream) };
            }
        }
    }
}
