//! Assembly: every patch of a call written by one `assemble` launch (per 65,535 patches) from
//! the decoded tiles, RGBA with OpenSlide's semantics or RGB over a background.

use std::ffi::c_int;

use super::engine::Engine;
use super::kernels::{arg, launch, PatchDesc, TileRef};
use super::lanes::Lane;
use super::memory::{as_bytes, StreamAlloc};
use super::queue::{Need, Src};
use super::sys::{CUdeviceptr, Res};
use crate::gpu::DeviceOptions;

impl Engine {
    /// Write the patches (`patches`, their tile grids `grids` indexing `needs`, whose images are
    /// `srcs`) of `size` into `out` on the lane's first stream, and wait for it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        &self,
        lane: &mut Lane,
        srcs: &[Src<'_>],
        needs: &[Need],
        grids: &[c_int],
        patches: &[PatchDesc],
        size: (u64, u64),
        opts: &DeviceOptions,
        out: CUdeviceptr,
    ) -> Res<()> {
        let n = patches.len();
        let ch = opts.channels as usize;
        let (w, h) = (size.0 as usize, size.1 as usize);
        // One tile reference per need (ptr 0: missing or failed).
        let refs: Vec<TileRef> = needs
            .iter()
            .map(|nd| {
                let img = srcs[nd.src as usize].img;
                let (x, y) = nd.tile.as_ref().map_or((0, 0), |t| (t.x as u64, t.y as u64));
                TileRef {
                    ptr: nd.tile.as_ref().map_or(0, |t| t.ptr),
                    x0: (nd.col * img.tile_width as u64 + x) as i64,
                    y0: (nd.row * img.tile_height as u64 + y) as i64,
                    w: nd.tile.as_ref().map_or(0, |t| t.w as c_int),
                    h: nd.tile.as_ref().map_or(0, |t| t.h as c_int),
                    pitch: nd.tile.as_ref().map_or(0, |t| t.pitch as c_int),
                    pad: 0,
                }
            })
            .collect();
        let stream = lane.slots[0].stream.raw();
        let d_refs = StreamAlloc::upload(as_bytes(&refs), stream)?;
        let d_grids = StreamAlloc::upload(as_bytes(grids), stream)?;
        let d_patches = StreamAlloc::upload(as_bytes(patches), stream)?;
        let (bx, by) = (32u32, 8u32);
        let (gx, gy) = ((w as u32).div_ceil(bx), (h as u32).div_ceil(by));
        let mut p0 = 0usize;
        let mut result = Ok(());
        while p0 < n && result.is_ok() {
            let pn = (n - p0).min(65535);
            let (mut a_refs, mut a_grids, mut a_patches, mut a_p0) = (d_refs.ptr(), d_grids.ptr(), d_patches.ptr(), p0 as c_int);
            let (mut a_w, mut a_h, mut a_ch) = (w as c_int, h as c_int, ch as c_int);
            let [mut r, mut g, mut b] = opts.background.map(|v| v as c_int);
            let mut a_out = out;
            let mut params = [
                arg(&mut a_refs),
                arg(&mut a_grids),
                arg(&mut a_patches),
                arg(&mut a_p0),
                arg(&mut a_w),
                arg(&mut a_h),
                arg(&mut a_ch),
                arg(&mut r),
                arg(&mut g),
                arg(&mut b),
                arg(&mut a_out),
            ];
            result = launch(self.kernels.assemble, (gx, gy, pn as u32), (bx, by, 1), stream, &mut params, "cuLaunchKernel(assemble)");
            p0 += pn;
        }
        // Freed stream-ordered after the launches.
        drop((d_refs, d_grids, d_patches));
        // The lane's stream: waits for the assembly (and the frees) to finish.
        let sync = lane.slots[0].stream.sync();
        result?;
        sync
    }
}
