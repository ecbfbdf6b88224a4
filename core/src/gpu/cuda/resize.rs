//! Device patch resize (`gpu::resize_patches_device`): the CPU path's Lanczos-3 convolution
//! (`slide/resize_taps.rs`' integer taps, made on the host) run by the `resize_h` / `resize_v`
//! kernels on a lane's stream, so a device batch read at a physical resolution never leaves the
//! GPU and equals the CPU path's pixels.

use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;

use super::context::{CurrentGuard, SyncOnDrop};
use super::engine::engine;
use super::kernels::{arg, launch};
use super::memory::{as_bytes, StreamAlloc};
use super::sys::{cu, cuda, CUdeviceptr, CUstream, Res};
use crate::error::Result;
use crate::gpu::array::{FREE_ENGINE, FREE_WAIT_DEVICE};
use crate::gpu::DeviceArray;
use crate::slide::resize_taps::{lanczos3_taps, Taps};

/// Taps that copy (one weight of 1.0 per output pixel): a pass over an axis that keeps its size
/// but must still place patches at their output rows.
fn identity(n: u32) -> Taps {
    Taps { starts: (0..n as i32).collect(), sizes: vec![1; n as usize], values: vec![1 << 14; n as usize], window: 1, precision: 14 }
}

/// Taps on the device: starts, sizes, weights.
struct DevTaps {
    starts: StreamAlloc,
    sizes: StreamAlloc,
    values: StreamAlloc,
    window: c_int,
    precision: c_int,
}

impl DevTaps {
    fn upload(t: &Taps, stream: CUstream) -> Res<DevTaps> {
        Ok(DevTaps {
            starts: StreamAlloc::upload(as_bytes(&t.starts), stream)?,
            sizes: StreamAlloc::upload(as_bytes(&t.sizes), stream)?,
            values: StreamAlloc::upload(as_bytes(&t.values), stream)?,
            window: t.window as c_int,
            precision: t.precision as c_int,
        })
    }
}

/// Make `src`'s data safe to read on an engine stream: an array handed to a consumer may still be
/// written by the consumer's work (its stream, or any stream once handed out without one).
fn wait_for_consumers(src: &DeviceArray) -> Res<()> {
    let cuda = cuda()?;
    match src.free_on.load(Relaxed) {
        FREE_ENGINE => Ok(()),
        // SAFETY: the context is current.
        FREE_WAIT_DEVICE => cu(unsafe { cuda.cuCtxSynchronize() }, "cuCtxSynchronize"),
        // SAFETY: a consumer's stream, named by the consumer when it took the array.
        s => cu(unsafe { cuda.cuStreamSynchronize(s as usize as CUstream) }, "cuStreamSynchronize"),
    }
}

/// Resize the patches of every group (`(array (m, h, w, 3), output row of each of its m
/// patches)`) to `to` (width, height) into one new array (n, to.1, to.0, 3) on `device`. The
/// facade checked shapes, devices and that the rows cover 0..n exactly once.
pub(crate) fn resize_patches(groups: &[(&DeviceArray, &[usize])], n: usize, to: (u32, u32), device: usize) -> Result<DeviceArray> {
    let e = engine(device)?;
    let _restore = CurrentGuard::save()?;
    e.make_current()?;
    let lane = e.take_lane()?;
    let stream = lane.slots[0].stream.raw();
    let (tw, th) = (to.0 as usize, to.1 as usize);
    let bytes = n * th * tw * 3;
    let out: CUdeviceptr = if bytes > 0 { e.output_pool.alloc(bytes, stream)? } else { 0 };
    let array = DeviceArray { ptr: out, shape: vec![n, th, tw, 3], device, pid: e.ctx.pid(), free_on: Default::default() };
    if bytes == 0 {
        return Ok(array);
    }
    // On an error return the stream is synchronised before `array` is freed (declared after it).
    let mut sync_on_error = SyncOnDrop { stream, armed: true };
    for &(src, rows) in groups {
        let (m, sh, sw) = (src.shape[0], src.shape[1] as u32, src.shape[2] as u32);
        if m == 0 {
            continue;
        }
        wait_for_consumers(src)?;
        let rows: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        let d_rows = StreamAlloc::upload(as_bytes(&rows), stream)?;
        let th_taps = if sw != to.0 { Some(DevTaps::upload(&lanczos3_taps(sw, to.0), stream)?) } else { None };
        let v_taps = DevTaps::upload(&if sh != to.1 { lanczos3_taps(sh, to.1) } else { identity(sh) }, stream)?;
        // CUDA grids take at most 65,535 blocks along z: patches in chunks of that many.
        let mut z0 = 0;
        while z0 < m {
            let zn = (m - z0).min(65_535);
            let src_ptr = src.ptr + (z0 * sh as usize * sw as usize * 3) as u64;
            // Horizontal pass into a temporary (zn, sh, tw, 3) unless the width is kept; freed
            // stream-ordered after the vertical pass that reads it.
            let mut mid = src_ptr;
            let mut _tmp = None;
            if let Some(t) = &th_taps {
                let tmp = StreamAlloc::new(zn * sh as usize * tw * 3, stream)?;
                let (mut a_src, mut a_dst) = (src_ptr, tmp.ptr());
                let (mut a_in_w, mut a_h, mut a_out_w) = (sw as c_int, sh as c_int, tw as c_int);
                let (mut a_s, mut a_n, mut a_t) = (t.starts.ptr(), t.sizes.ptr(), t.values.ptr());
                let (mut a_win, mut a_prec) = (t.window, t.precision);
                let mut params = [
                    arg(&mut a_src),
                    arg(&mut a_dst),
                    arg(&mut a_in_w),
                    arg(&mut a_h),
                    arg(&mut a_out_w),
                    arg(&mut a_s),
                    arg(&mut a_n),
                    arg(&mut a_t),
                    arg(&mut a_win),
                    arg(&mut a_prec),
                ];
                launch(e.kernels.resize_h, ((tw as u32 * 3).div_ceil(128), sh, zn as u32), (128, 1, 1), stream, &mut params, "cuLaunchKernel(resize_h)")?;
                mid = tmp.ptr();
                _tmp = Some(tmp);
            }
            // Vertical pass (a copy when the height is kept) into the patches' output rows.
            let t = &v_taps;
            let (mut a_src, mut a_dst, mut a_rows) = (mid, out, d_rows.ptr() + (z0 * 8) as u64);
            let (mut a_in_h, mut a_w, mut a_out_h) = (sh as c_int, tw as c_int, th as c_int);
            let (mut a_s, mut a_n, mut a_t) = (t.starts.ptr(), t.sizes.ptr(), t.values.ptr());
            let (mut a_win, mut a_prec) = (t.window, t.precision);
            let mut params = [
                arg(&mut a_src),
                arg(&mut a_dst),
                arg(&mut a_rows),
                arg(&mut a_in_h),
                arg(&mut a_w),
                arg(&mut a_out_h),
                arg(&mut a_s),
                arg(&mut a_n),
                arg(&mut a_t),
                arg(&mut a_win),
                arg(&mut a_prec),
            ];
            launch(e.kernels.resize_v, ((tw as u32 * 3).div_ceil(128), th as u32, zn as u32), (128, 1, 1), stream, &mut params, "cuLaunchKernel(resize_v)")?;
            z0 += zn;
        }
    }
    lane.slots[0].stream.sync()?;
    sync_on_error.armed = false;
    Ok(array)
}
