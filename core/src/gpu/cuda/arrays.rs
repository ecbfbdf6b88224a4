//! The download and free of the device arrays the engine returns ([`DeviceArray`]): both need
//! the device's engine (its context and free stream), so they sit in the engine layer, not in
//! `memory.rs` (layering: CONTRIBUTING.md, `core/tests/layering.rs`).

use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;

use super::context::pid;
use super::sys::{cu, cuda, CUstream};
use crate::error::{GpuError, Result};
use crate::gpu::array::{FREE_ENGINE, FREE_WAIT_DEVICE};
use crate::gpu::DeviceArray;

/// Copy a device array to the host (the array's data are complete: its stream was synced).
/// An array never handed out is copied on the engine's free stream, which waits for nothing
/// else; one handed to a consumer's stream is copied in order on that stream (after the
/// consumer's work there); one handed out without a stream with a synchronous copy, which
/// waits for the legacy default stream and the blocking streams.
pub(crate) fn download(a: &DeviceArray) -> Result<Vec<u8>> {
    if a.pid != pid() {
        return Err(GpuError::Fork { parent: a.pid, child: pid() }.into());
    }
    let e = super::engine::engine(a.device)?;
    let _restore = super::context::CurrentGuard::save()?;
    e.make_current()?;
    let n = a.nbytes();
    let mut v = vec![0u8; n];
    if n > 0 {
        let cuda = cuda()?;
        let dst = v.as_mut_ptr() as *mut c_void;
        // SAFETY: n bytes on both sides; the stream is synchronised before `v` is used or
        // dropped.
        match a.free_on.load(Relaxed) {
            FREE_WAIT_DEVICE => cu(unsafe { cuda.cuMemcpyDtoH(dst, a.ptr, n) }, "cuMemcpyDtoH")?,
            s => {
                let stream = if s == FREE_ENGINE { e.free_stream() } else { s as usize as CUstream };
                cu(unsafe { cuda.cuMemcpyDtoHAsync(dst, a.ptr, n, stream) }, "cuMemcpyDtoHAsync")?;
                cu(unsafe { cuda.cuStreamSynchronize(stream) }, "cuStreamSynchronize")?;
            }
        }
    }
    Ok(v)
}

/// Free a device array's memory (once; a forked child frees nothing), as
/// [`DeviceArray`]'s docs say: stream-ordered on the engine's free stream or on the consumer's
/// stream, or with `cuMemFree` once its pointer was handed out without a stream.
pub(crate) fn free_array(a: &mut DeviceArray) {
    if a.ptr == 0 || a.pid != pid() {
        return;
    }
    if let Some(e) = super::engine::existing(a.device) {
        // The freeing thread (a DLPack deleter runs on the consumer's) keeps its context.
        let _restore = super::context::CurrentGuard::save();
        if e.make_current().is_ok() {
            if let Ok(cuda) = cuda() {
                match a.free_on.load(Relaxed) {
                    // SAFETY (all three): allocated from the engine's output pool in
                    // `read_regions`, freed once.
                    // cuMemFree of pool memory synchronises the device, so work still using the
                    // memory on any stream (a consumer's included) finishes first.
                    FREE_WAIT_DEVICE => unsafe {
                        cuda.cuMemFree(a.ptr);
                    },
                    // The pointer never left slidestream and every use of it (the assembly,
                    // `download`'s copy) completed before the read or copy returned.
                    FREE_ENGINE => unsafe {
                        cuda.cuMemFreeAsync(a.ptr, e.free_stream());
                    },
                    // The consumer uses it on this stream only (DLPack's contract), which it
                    // keeps alive: ordered after the work it enqueued there.
                    s => unsafe {
                        if cuda.cuMemFreeAsync(a.ptr, s as usize as CUstream) != 0 {
                            cuda.cuMemFree(a.ptr);
                        }
                    },
                }
            }
        }
    }
    a.ptr = 0;
}
