//! nvJPEG: handles and states owned by types whose `Drop` destroys them, the engine's decoders
//! (hardware backend for host bitstreams where present, a device-bitstream backend for the
//! cuFile path), and the batched decode of a chunk followed by the `convert` kernel.

use std::ffi::c_int;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::super::context::pid;
use super::super::kernels::{arg, launch, ConvDesc};
use super::super::memory::{as_bytes, DevTile, StreamAlloc};
use super::super::queue::Miss;
use super::super::queue::Src;
use super::super::sys::*;
use super::super::trace;
use super::nvjpeg_alloc::Allocators;
use super::slot::Slot;
use super::{Bits, ChunkOut, Declined, NvEnv, TileDecoder};
use crate::error::GpuError;
use crate::index::Photometric;

/// An nvJPEG library handle of one backend, destroyed when dropped: `nvjpegCreateExV2` with
/// slidestream's allocators ([`Allocators`]: stream-ordered device memory, reused pinned
/// buffers) where nvJPEG has it, else `nvjpegCreateEx` with nvJPEG's default ones.
pub(crate) struct Handle {
    raw: nvjpegHandle,
    pid: u32,
    /// The allocators `raw` calls; dropped after `nvjpegDestroy` (fields drop after `drop`).
    _alloc: Option<Box<Allocators>>,
}

// nvJPEG handles may be used from any thread (per-thread state lives in `State`s).
unsafe impl Send for Handle {}
unsafe impl Sync for Handle {}

impl Handle {
    /// A handle of `backend` (`NVJPEG_BACKEND_*`); `Err(status)` when nvJPEG refuses it.
    /// [`Handle::own_allocators`] says which allocators it got.
    pub(crate) fn new(backend: c_int) -> Res<std::result::Result<Handle, nvjpegStatus>> {
        let nvj = nvjpeg()?;
        let mut raw = std::ptr::null_mut();
        if let Some(create_v2) = nvj.create_ex_v2() {
            let alloc = Allocators::new()?;
            let (mut dev, mut pinned) = alloc.records();
            // SAFETY: out-pointer to a local; the records point at `alloc`, boxed and kept by
            // the handle until after `nvjpegDestroy`; the caller made a context current.
            let rc = unsafe { create_v2(backend, &mut dev, &mut pinned, 0, &mut raw) };
            if rc == 0 {
                return Ok(Ok(Handle { raw, pid: pid(), _alloc: Some(alloc) }));
            }
            // A backend that refuses custom allocators still gets made with nvJPEG's own.
        }
        // SAFETY: out-pointer to a local; the caller made a context current.
        let rc = unsafe { (nvj.nvjpegCreateEx)(backend, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut raw) };
        Ok(if rc == 0 { Ok(Handle { raw, pid: pid(), _alloc: None }) } else { Err(rc) })
    }

    /// The raw handle.
    pub(crate) fn raw(&self) -> nvjpegHandle {
        self.raw
    }

    /// Whether the handle uses slidestream's allocators ([`Allocators`]) rather than nvJPEG's
    /// default ones (an nvJPEG without `nvjpegCreateExV2`, or a backend that refused them).
    pub(crate) fn own_allocators(&self) -> bool {
        self._alloc.is_some()
    }

    /// Hardware JPEG engines behind a hardware-backend handle (0 when nvJPEG does not say).
    pub(crate) fn hardware_engines(&self) -> u32 {
        let (mut e, mut c) = (0, 0);
        // SAFETY: a live handle; out-pointers to locals.
        match nvjpeg() {
            Ok(nvj) if unsafe { (nvj.nvjpegGetHardwareDecoderInfo)(self.raw, &mut e, &mut c) } == 0 => e,
            _ => 0,
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.pid != pid() {
            return;
        }
        if let Ok(nvj) = nvjpeg() {
            // SAFETY: created in `new`, destroyed once, after every state made from it (the
            // owners of states drop before the engine's decoders).
            unsafe { (nvj.nvjpegDestroy)(self.raw) };
        }
    }
}

/// An nvJPEG decode state (`nvjpegJpegStateCreate`) with the batch size it was initialised
/// for (-1 = initialise before the next batch), destroyed when dropped.
pub(crate) struct State {
    raw: nvjpegJpegState,
    pub(crate) batch: c_int,
    pid: u32,
}

// Used by one thread at a time (its slot is taken out of a pool for a call).
unsafe impl Send for State {}

impl State {
    /// A state for `handle`.
    pub(crate) fn new(handle: &Handle, what: &str) -> Res<State> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; a live handle.
        nv(unsafe { (nvjpeg()?.nvjpegJpegStateCreate)(handle.raw, &mut raw) }, what)?;
        Ok(State { raw, batch: -1, pid: pid() })
    }

    /// The raw state.
    pub(crate) fn raw(&self) -> nvjpegJpegState {
        self.raw
    }
}

impl Drop for State {
    fn drop(&mut self) {
        if self.pid != pid() {
            return;
        }
        if let Ok(nvj) = nvjpeg() {
            // SAFETY: created in `new`, destroyed once, before its handle.
            unsafe { (nvj.nvjpegJpegStateDestroy)(self.raw) };
        }
    }
}

/// The engine's nvJPEG decoders.
pub(crate) struct Decoders {
    /// Host bitstreams: the hardware backend where present, else the default one.
    pub(crate) host: Handle,
    /// `"hardware"` or `"default"`.
    pub(crate) host_backend: &'static str,
    /// Hardware JPEG engines (0 without).
    pub(crate) engines: u32,
    /// Device bitstreams (cuFile path): `HARDWARE_DEVICE`, else `GPU_HYBRID_DEVICE`.
    pub(crate) device: Option<Handle>,
    /// The device backend's name, or why none could be made.
    pub(crate) device_reason: String,
    /// Output format: `NVJPEG_OUTPUT_UNCHANGED` or `NVJPEG_OUTPUT_YUV` (both planar components
    /// as coded for 3-component streams; `SLIDESTREAM_NVJPEG_OUTPUT`).
    pub(crate) output: c_int,
}

impl Decoders {
    /// Make the host decoder and, when `device_bitstreams` (the cuFile path), a device one.
    pub(crate) fn new(device_bitstreams: bool, output: c_int) -> Res<Decoders> {
        let (host, host_backend, engines) = match Handle::new(NVJPEG_BACKEND_HARDWARE)? {
            Ok(h) => {
                let e = h.hardware_engines();
                (h, "hardware", e)
            }
            Err(_) => {
                (Handle::new(NVJPEG_BACKEND_DEFAULT)?.map_err(|rc| GpuError::Call(format!("nvjpegCreateEx failed with nvjpegStatus {rc}")))?, "default", 0)
            }
        };
        let (mut device, mut device_reason) = (None, String::new());
        if device_bitstreams {
            for (backend, name) in [(NVJPEG_BACKEND_HARDWARE_DEVICE, "HARDWARE_DEVICE"), (NVJPEG_BACKEND_GPU_HYBRID_DEVICE, "GPU_HYBRID_DEVICE")] {
                match Handle::new(backend)? {
                    Ok(h) => {
                        device = Some(h);
                        device_reason = name.to_string();
                        break;
                    }
                    Err(rc) => device_reason.push_str(&format!("nvjpegCreateEx({name}) returned {rc}; ")),
                }
            }
        }
        Ok(Decoders { host, host_backend, engines, device, device_reason, output })
    }

    /// Which allocators the host decoder's handle uses, in words (for the trace).
    pub(crate) fn allocators(&self) -> &'static str {
        if self.host.own_allocators() {
            "stream-ordered allocators"
        } else {
            "nvJPEG's default allocators"
        }
    }
}

/// What the probe reports about the hardware backend of the current device: its engines, or
/// why it is unavailable. Every handle and state made is destroyed before returning.
pub(crate) fn probe_hardware() -> Res<std::result::Result<u32, String>> {
    match Handle::new(NVJPEG_BACKEND_HARDWARE)? {
        Ok(h) => {
            let _state = State::new(&h, "nvjpegJpegStateCreate")?;
            Ok(Ok(h.hardware_engines()))
        }
        Err(rc) => Ok(Err(format!("nvjpegCreateEx(HARDWARE) returned {rc}"))),
    }
}

/// Largest JPEG tile edge sent to nvJPEG (larger streams are decoded on the CPU).
pub(crate) const MAX_GPU_TILE_EDGE: u32 = crate::limits::LIMITS.gpu_tile_edge;

/// nvJPEG as a [`TileDecoder`] on a lane's [`Slot`]: batched `nvjpegDecodeBatched` into the
/// slot's planar scratch, then the `convert` kernel (libjpeg-turbo's upsampling and colour
/// conversion) into RGBA device tiles. `device`: the bitstreams are in device memory (the
/// cuFile path, decoded by the device-bitstream backend; their geometry is checked by the
/// `sof_scan` kernel instead of [`TileDecoder::accepts`]).
pub(crate) struct NvJpeg<'a> {
    pub(crate) env: &'a NvEnv<'a>,
    pub(crate) device: bool,
}

impl TileDecoder for NvJpeg<'_> {
    type Accepted = Geo;
    type Workspace = Slot;

    /// nvJPEG's own parser (`nvjpegGetImageInfo`) on the framed stream: 3 components, a chroma
    /// subsampling the `convert` kernel knows, component sizes as libjpeg computes them, the
    /// image at least the tile's valid size and at most [`crate::limits::Limits::gpu_tile_edge`].
    fn accepts(&self, src: &Src<'_>, m: &Miss, tile: &[u8]) -> std::result::Result<Geo, Declined> {
        let nvj = nvjpeg().map_err(|e| Declined::Elsewhere(format!("nvJPEG: {e}")))?;
        let (mut nc, mut css) = (0 as c_int, 0 as c_int);
        let (mut w, mut h) = ([0 as c_int; 4], [0 as c_int; 4]);
        // SAFETY: slice pointer/len; out arrays of 4 as nvjpeg.h requires.
        let rc =
            unsafe { (nvj.nvjpegGetImageInfo)(self.env.decoders.host.raw(), tile.as_ptr(), tile.len(), &mut nc, &mut css, w.as_mut_ptr(), h.as_mut_ptr()) };
        let (vw, vh) = src.img.valid_tile_size(m.col, m.row);
        let edge = MAX_GPU_TILE_EDGE;
        let geo = match (rc, sub_of(css)) {
            (0, Some(sub)) if nc == 3 && w[0] as u32 >= vw && h[0] as u32 >= vh && w[0] as u32 <= edge && h[0] as u32 <= edge => {
                let g = geo_of(w[0], h[0], sub);
                (g.pw[1] == w[1] && g.ph[1] == h[1] && g.pw[2] == w[2] && g.ph[2] == h[2]).then_some(g)
            }
            _ => None,
        };
        geo.ok_or_else(|| {
            Declined::Elsewhere(format!(
                "{}: nvjpegGetImageInfo returned {rc}: {nc} components, subsampling {css}, {}x{} for a {vw}x{vh} tile",
                crate::read::locate::tile_location(&src.at, src.slide.source(), src.img, m.col, m.row),
                w[0],
                h[0]
            ))
        })
    }

    fn decode(&self, slot: &mut Slot, srcs: &[Src<'_>], tiles: Vec<(Miss, Bits, Geo)>) -> Res<ChunkOut> {
        let streams: Vec<(*const u8, usize)> = tiles.iter().map(|(_, b, _)| (b.ptr, b.len)).collect();
        let todo: Vec<(Miss, Geo)> = tiles.into_iter().map(|(m, _, g)| (m, g)).collect();
        self.env.decode_convert(slot, self.device, srcs, &streams, &todo)
    }
}

/// Geometry of one stream accepted for nvJPEG.
#[derive(Clone, Copy)]
pub(crate) struct Geo {
    pub(crate) pw: [c_int; 3],
    pub(crate) ph: [c_int; 3],
    pub(crate) sub: (c_int, c_int),
}

/// Chroma subsampling factors of an `nvjpegChromaSubsampling_t` (3-component kinds only).
pub(crate) fn sub_of(css: c_int) -> Option<(c_int, c_int)> {
    match css {
        NVJPEG_CSS_444 => Some((1, 1)),
        NVJPEG_CSS_422 => Some((2, 1)),
        NVJPEG_CSS_420 => Some((2, 2)),
        NVJPEG_CSS_440 => Some((1, 2)),
        _ => None,
    }
}

/// Plane geometry of a 3-component image of `w × h` with chroma subsampled by `sub`
/// (libjpeg's `downsampled_width/height`).
pub(crate) fn geo_of(w: c_int, h: c_int, sub: (c_int, c_int)) -> Geo {
    let (cw, chh) = ((w + sub.0 - 1) / sub.0, (h + sub.1 - 1) / sub.1);
    Geo { pw: [w, cw, cw], ph: [h, chh, chh], sub }
}

/// Bytes of plane `c` in the planar scratch (slack for decoders writing whole MCUs).
pub(crate) fn plane_bytes(g: &Geo, c: usize) -> usize {
    (g.pw[c] as usize) * (g.ph[c] as usize + 16) + 64
}

impl NvEnv<'_> {
    /// Batched nvJPEG decode of `streams` (host or device bitstreams; tiles of any of the call's
    /// sources `srcs`) into the slot's planar scratch, then the convert kernel into fresh device
    /// tiles. A failed batch hands all its
    /// tiles back to the CPU (`Err(None)`); nothing here fails a single tile.
    pub(crate) fn decode_convert(
        &self,
        slot: &mut Slot,
        device: bool,
        srcs: &[Src<'_>],
        streams: &[(*const u8, usize)],
        todo: &[(Miss, Geo)],
    ) -> Res<ChunkOut> {
        let n = todo.len();
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let nvj = nvjpeg()?;
        let dec = self.decoders;
        // The slot's state for this decoder (made at its first use), borrowed apart from the
        // slot's buffers.
        if device {
            slot.device_state(dec)?;
        } else {
            slot.host_state(dec)?;
        }
        let (handle, state) = if device {
            match (dec.device.as_ref(), slot.dev_state.as_mut()) {
                (Some(h), Some(s)) => (h.raw(), s),
                _ => return Err(GpuError::Unavailable("no device-bitstream nvJPEG backend".into())),
            }
        } else {
            (dec.host.raw(), slot.state.as_mut().expect("made above"))
        };
        // Planar outputs back to back in the scratch buffer (slack for decoders writing whole MCUs).
        let mut offs = Vec::with_capacity(n);
        let mut total = 0usize;
        for (_, g) in todo {
            offs.push(total);
            total += (0..3).map(|c| plane_bytes(g, c)).sum::<usize>();
        }
        slot.scratch.ensure(total, None)?;
        let base = slot.scratch.ptr();
        let mut images = Vec::with_capacity(n);
        let mut descs = Vec::with_capacity(n);
        for ((m, g), &off) in todo.iter().zip(&offs) {
            let mut img_ = nvjpegImage { channel: [std::ptr::null_mut(); 4], pitch: [0; 4] };
            let mut planes = [0u64; 3];
            let mut o = off;
            #[allow(clippy::needless_range_loop)]
            for c in 0..3 {
                planes[c] = base + o as u64;
                img_.channel[c] = planes[c] as usize as *mut u8;
                img_.pitch[c] = g.pw[c] as usize;
                o += plane_bytes(g, c);
            }
            images.push(img_);
            let img = srcs[m.src as usize].img;
            let (vw, vh) = img.valid_tile_size(m.col, m.row);
            descs.push(ConvDesc {
                planes,
                pitch: g.pw,
                pw: g.pw,
                ph: g.ph,
                sub_h: g.sub.0,
                sub_v: g.sub.1,
                kind: (img.codec.photometric == Photometric::YCbCr) as c_int,
                w: vw as c_int,
                h: vh as c_int,
                x0: 0,
                y0: 0,
                out: 0,
            });
        }
        let ptrs: Vec<*const u8> = streams.iter().map(|s| s.0).collect();
        let lens: Vec<usize> = streams.iter().map(|s| s.1).collect();
        // SAFETY: arrays of n entries; output planes inside the scratch allocation sized above;
        // bitstreams stay alive until the slot's stream is synchronised (slot-owned buffers).
        let t_call = std::time::Instant::now();
        let rc = unsafe {
            let mut rc = 0;
            if state.batch != n as c_int {
                rc = (nvj.nvjpegDecodeBatchedInitialize)(handle, state.raw(), n as c_int, 1, dec.output);
                state.batch = if rc == 0 { n as c_int } else { -1 };
            }
            if rc == 0 {
                rc = (nvj.nvjpegDecodeBatched)(handle, state.raw(), ptrs.as_ptr(), lens.as_ptr(), images.as_mut_ptr(), slot.stream.raw());
            }
            rc
        };
        self.counters.trace.since(trace::NVJPEG, t_call);
        let t_conv = std::time::Instant::now();
        if rc != 0 {
            state.batch = -1;
            self.counters.batch_fallbacks.fetch_add(1, Relaxed);
            self.counters.note_cpu(format!(
                "nvjpegDecodeBatched ({} bitstreams) returned {rc} for a batch of {n}: the batch was decoded on the CPU",
                if device { "device" } else { "host" }
            ));
            if device {
                return Err(GpuError::Call(format!("nvjpegDecodeBatched(device bitstreams) returned {rc}")));
            }
            return Ok((Vec::new(), todo.iter().map(|&(m, _)| (m, Err(None))).collect()));
        }
        let counter = if device {
            &self.counters.device_bitstream
        } else if dec.host_backend == "hardware" {
            &self.counters.hardware
        } else {
            &self.counters.hybrid
        };
        counter.fetch_add(n as u64, Relaxed);
        // Device tiles carved from one block, then one convert launch for the chunk.
        let sizes: Vec<usize> = descs.iter().map(|d| (d.w as usize * d.h as usize * 4).max(4).next_multiple_of(256)).collect();
        let block_bytes = sizes.iter().sum::<usize>().max(256);
        let (p, block) = self.home.alloc(block_bytes, slot.stream.raw())?;
        let mut done = Vec::with_capacity(n);
        let mut off = 0u64;
        for (((m, _), d), size) in todo.iter().zip(descs.iter_mut()).zip(&sizes) {
            d.out = p + off;
            done.push((*m, Arc::new(DevTile::whole(d.out, d.w as u32, d.h as u32, block.clone()))));
            off += *size as u64;
        }
        let (mw, mh) = descs.iter().fold((1, 1), |(a, b), d| (a.max(d.w), b.max(d.h)));
        let d_descs = StreamAlloc::upload(as_bytes(&descs), slot.stream.raw())?;
        let mut a = d_descs.ptr();
        let r = launch(
            self.kernels.convert,
            ((mw as u32).div_ceil(32), (mh as u32).div_ceil(8), n as u32),
            (32, 8, 1),
            slot.stream.raw(),
            &mut [arg(&mut a)],
            "cuLaunchKernel(convert)",
        );
        drop(d_descs);
        self.counters.trace.since(trace::CONVERT, t_conv);
        r?;
        Ok((done, Vec::new()))
    }
}
