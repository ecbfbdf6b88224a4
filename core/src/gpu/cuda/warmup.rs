//! Engine warm-up: start-up work that would otherwise land on the first large read.

use std::ffi::c_int;

use super::decode::cpu_worker::CPU_RUN_TILES;
use super::decode::nvjpeg::{geo_of, plane_bytes};
use super::engine::Engine;
use super::lanes::Slot;
use super::scheduler::CHUNK_TILES;
use super::sys::{nv, nvjpeg, nvjpegImage, Res};
use crate::error::GpuError;

impl Engine {
    /// Start-up work that would otherwise land on the first large read (measured on the H200:
    /// about 1.3 s more for the first 4096-tile batch than for the next): the decode lanes
    /// (streams, nvJPEG states, scratch / pinned buffers), nvJPEG's batched-decode internals (each
    /// slot decodes one chunk of [`CHUNK_TILES`] synthetic 256² 4:2:0 tiles), and the CPU decode
    /// workers' streams and pinned buffers.
    pub(crate) fn warm_up(&self) -> Res<()> {
        let (w, h) = (256usize, 256usize);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7 + i / 768) % 251) as u8).collect();
        let jpeg = (|| {
            let mut c = turbojpeg::Compressor::new()?;
            c.set_quality(85)?;
            c.set_subsamp(turbojpeg::Subsamp::Sub2x2)?;
            c.compress_to_vec(turbojpeg::Image { pixels: &rgb[..], width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB })
        })()
        .map_err(|e| GpuError::Call(format!("warm-up JPEG: {e}")))?;
        let mut taken = self.take_free(self.lanes.workers, self.cpu.workers)?;
        let results: Vec<Res<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = taken
                .lanes
                .iter_mut()
                .map(|l| {
                    let jpeg = &jpeg;
                    s.spawn(move || {
                        self.make_current()?;
                        for slot in l.slots.iter_mut() {
                            self.warm_slot(slot, jpeg, w as c_int, h as c_int)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(GpuError::Call("warm-up thread panicked".into())))).collect()
        });
        let mut r = Ok(());
        for cs in taken.cpu.iter_mut() {
            for b in cs.bufs.iter_mut() {
                r = r.and(b.ensure(CPU_RUN_TILES * w * h * 4));
            }
        }
        drop(taken);
        results.into_iter().collect::<Res<Vec<()>>>()?;
        r
    }

    /// One batched nvJPEG decode of [`CHUNK_TILES`] copies of `jpeg` (a `w × h` 4:2:0 stream)
    /// on `slot`, laid out as `decode_convert` lays out a chunk.
    fn warm_slot(&self, slot: &mut Slot, jpeg: &[u8], w: c_int, h: c_int) -> Res<()> {
        let nvj = nvjpeg()?;
        let n = CHUNK_TILES;
        let g = geo_of(w, h, (2, 2));
        let plane = |c: usize| plane_bytes(&g, c);
        let per: usize = (0..3).map(plane).sum();
        slot.scratch.ensure(n * per, None)?;
        slot.pinned.ensure(n * jpeg.len())?;
        slot.arena.ensure(n * (jpeg.len() + 32))?;
        let arena = slot.arena.as_mut_slice(n * jpeg.len());
        for k in 0..n {
            arena[k * jpeg.len()..(k + 1) * jpeg.len()].copy_from_slice(jpeg);
        }
        let ptrs: Vec<*const u8> = (0..n).map(|k| arena[k * jpeg.len()..].as_ptr()).collect();
        let lens = vec![jpeg.len(); n];
        let mut images: Vec<nvjpegImage> = (0..n)
            .map(|k| {
                let mut im = nvjpegImage { channel: [std::ptr::null_mut(); 4], pitch: [0; 4] };
                let mut o = k * per;
                for c in 0..3 {
                    im.channel[c] = (slot.scratch.ptr() as usize + o) as *mut u8;
                    im.pitch[c] = g.pw[c] as usize;
                    o += plane(c);
                }
                im
            })
            .collect();
        // SAFETY: arrays of n entries; output planes inside the scratch allocation sized above;
        // the bitstreams (slot-owned pinned memory) outlive the synchronisation below.
        unsafe {
            let host = self.nvjpeg.host.raw();
            if slot.state.batch != n as c_int {
                nv((nvj.nvjpegDecodeBatchedInitialize)(host, slot.state.raw(), n as c_int, 1, self.nvjpeg.output), "nvjpegDecodeBatchedInitialize")?;
                slot.state.batch = n as c_int;
            }
            let r = nv((nvj.nvjpegDecodeBatched)(host, slot.state.raw(), ptrs.as_ptr(), lens.as_ptr(), images.as_mut_ptr(), slot.stream.raw()), "nvjpegDecodeBatched(warm-up)");
            if r.is_err() {
                slot.state.batch = -1; // initialise again before the next batch
            }
            let s = slot.stream.sync();
            r.and(s)
        }
    }
}
