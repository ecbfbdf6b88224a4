//! The first prototype of slidestream's GPU path, kept as an example: batched nvJPEG decoding of
//! the complete JPEG tiles of one level into device memory (planar, as coded), compared with the
//! CPU decoder and timed, on the hardware and the default backend.
//!
//! ```text
//! cargo run --release --features cuda,unstable --example nvjpeg_batch -- SLIDE [LEVEL] [BATCH] [TILES]
//! ```
//!
//! It binds the few CUDA driver and nvJPEG functions it needs itself (`libloading`) and uses the
//! crate's internal codecs (feature `unstable`); the library's engine (`slidestream::gpu`) is what
//! reads regions. Subsampled tiles are not compared (that
//! needs the engine's chroma upsampling kernel).

use std::ffi::{c_int, c_uint, c_void};
use std::time::Instant;

use libloading::Library;
use slidestream::codec::{decode_chunk, jpeg, ChunkGeometry};
use slidestream::{Compression, Error, Location, Photometric, Slide};

type Ptr = *mut c_void;

/// The CUDA driver and nvJPEG functions used (signatures of cuda.h / nvjpeg.h).
struct Ffi {
    _cuda: Library,
    _nvj: Library,
    cu_init: unsafe extern "C" fn(c_uint) -> c_int,
    cu_device_get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int,
    cu_ctx_retain: unsafe extern "C" fn(*mut Ptr, c_int) -> c_int,
    cu_ctx_release: unsafe extern "C" fn(c_int) -> c_int,
    cu_ctx_set_current: unsafe extern "C" fn(Ptr) -> c_int,
    cu_stream_create: unsafe extern "C" fn(*mut Ptr, c_uint) -> c_int,
    cu_stream_destroy: unsafe extern "C" fn(Ptr) -> c_int,
    cu_stream_sync: unsafe extern "C" fn(Ptr) -> c_int,
    cu_mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> c_int,
    cu_mem_free: unsafe extern "C" fn(u64) -> c_int,
    cu_memcpy_dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> c_int,
    nv_create: unsafe extern "C" fn(c_int, Ptr, Ptr, c_uint, *mut Ptr) -> c_int,
    nv_destroy: unsafe extern "C" fn(Ptr) -> c_int,
    nv_hw_info: unsafe extern "C" fn(Ptr, *mut c_uint, *mut c_uint) -> c_int,
    nv_state_create: unsafe extern "C" fn(Ptr, *mut Ptr) -> c_int,
    nv_state_destroy: unsafe extern "C" fn(Ptr) -> c_int,
    nv_image_info: unsafe extern "C" fn(Ptr, *const u8, usize, *mut c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int,
    nv_batched_init: unsafe extern "C" fn(Ptr, Ptr, c_int, c_int, c_int) -> c_int,
    nv_batched: unsafe extern "C" fn(Ptr, Ptr, *const *const u8, *const usize, *mut NvImage, Ptr) -> c_int,
}

/// `nvjpegImage_t`.
#[repr(C)]
struct NvImage {
    channel: [*mut u8; 4],
    pitch: [usize; 4],
}

const BACKEND_DEFAULT: c_int = 0;
const BACKEND_HARDWARE: c_int = 3;
const OUTPUT_UNCHANGED: c_int = 0;

fn open(names: &[&str]) -> Result<Library, String> {
    let mut last = String::new();
    for n in names {
        // SAFETY: NVIDIA's libraries, loaded as every CUDA application loads them.
        match unsafe { Library::new(*n) } {
            Ok(l) => return Ok(l),
            Err(e) => last = e.to_string(),
        }
    }
    Err(format!("cannot load {}: {last}", names[0]))
}

impl Ffi {
    fn load() -> Result<Ffi, String> {
        let cuda = open(&["libcuda.so.1", "libcuda.so"])?;
        let nvj = open(&["libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so"])?;
        macro_rules! sym {
            ($lib:expr, $name:literal) => {
                // SAFETY: looked up by its documented name, stored with its documented signature.
                *unsafe { $lib.get($name.as_bytes()) }.map_err(|e| format!("{}: {e}", $name))?
            };
        }
        Ok(Ffi {
            cu_init: sym!(cuda, "cuInit"),
            cu_device_get: sym!(cuda, "cuDeviceGet"),
            cu_ctx_retain: sym!(cuda, "cuDevicePrimaryCtxRetain"),
            cu_ctx_release: sym!(cuda, "cuDevicePrimaryCtxRelease_v2"),
            cu_ctx_set_current: sym!(cuda, "cuCtxSetCurrent"),
            cu_stream_create: sym!(cuda, "cuStreamCreate"),
            cu_stream_destroy: sym!(cuda, "cuStreamDestroy_v2"),
            cu_stream_sync: sym!(cuda, "cuStreamSynchronize"),
            cu_mem_alloc: sym!(cuda, "cuMemAlloc_v2"),
            cu_mem_free: sym!(cuda, "cuMemFree_v2"),
            cu_memcpy_dtoh: sym!(cuda, "cuMemcpyDtoH_v2"),
            nv_create: sym!(nvj, "nvjpegCreateEx"),
            nv_destroy: sym!(nvj, "nvjpegDestroy"),
            nv_hw_info: sym!(nvj, "nvjpegGetHardwareDecoderInfo"),
            nv_state_create: sym!(nvj, "nvjpegJpegStateCreate"),
            nv_state_destroy: sym!(nvj, "nvjpegJpegStateDestroy"),
            nv_image_info: sym!(nvj, "nvjpegGetImageInfo"),
            nv_batched_init: sym!(nvj, "nvjpegDecodeBatchedInitialize"),
            nv_batched: sym!(nvj, "nvjpegDecodeBatched"),
            _cuda: cuda,
            _nvj: nvj,
        })
    }
}

fn check(rc: c_int, what: &str) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what} returned {rc}"))
    }
}

/// Planar components of one decoded JPEG, copied to the host.
struct PlanarImage {
    widths: Vec<u32>,
    heights: Vec<u32>,
    planes: Vec<Vec<u8>>,
}

impl PlanarImage {
    /// RGBA of an RGB-coded or YCbCr-coded 4:4:4 image (libjpeg-turbo's integer YCbCr→RGB);
    /// `None` for subsampled or non-3-component images.
    fn to_rgba(&self, ycbcr: bool) -> Option<Vec<u8>> {
        if self.planes.len() != 3 || self.widths.iter().any(|&w| w != self.widths[0]) || self.heights.iter().any(|&h| h != self.heights[0]) {
            return None;
        }
        let n = self.widths[0] as usize * self.heights[0] as usize;
        let mut out = vec![0u8; n * 4];
        for i in 0..n {
            let (a, b, c) = (self.planes[0][i], self.planes[1][i], self.planes[2][i]);
            let (r, g, bl) = if ycbcr { slidestream::gpu::color::ycc_to_rgb(a, b, c) } else { (a, b, c) };
            out[i * 4..i * 4 + 4].copy_from_slice(&[r, g, bl, 255]);
        }
        Some(out)
    }
}

/// A batched nvJPEG decoder on device 0 with its own stream; everything it made is released
/// when dropped.
struct Decoder {
    ffi: Ffi,
    backend: &'static str,
    engines: u32,
    stream: Ptr,
    handle: Ptr,
    state: Ptr,
    batch: usize,
    buffers: Vec<u64>,
}

impl Decoder {
    fn new(ffi: Ffi, hardware: bool) -> Result<Decoder, String> {
        let mut d = Decoder {
            ffi,
            backend: "default",
            engines: 0,
            stream: std::ptr::null_mut(),
            handle: std::ptr::null_mut(),
            state: std::ptr::null_mut(),
            batch: 0,
            buffers: Vec::new(),
        };
        let f = &d.ffi;
        // SAFETY: out-pointers to fields; documented call order (context current first). Drop
        // releases only what was made.
        unsafe {
            check((f.cu_init)(0), "cuInit")?;
            let (mut dev, mut ctx) = (0, std::ptr::null_mut());
            check((f.cu_device_get)(&mut dev, 0), "cuDeviceGet")?;
            check((f.cu_ctx_retain)(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
            check((f.cu_ctx_set_current)(ctx), "cuCtxSetCurrent")?;
            check((f.cu_stream_create)(&mut d.stream, 1), "cuStreamCreate")?;
            if hardware && (f.nv_create)(BACKEND_HARDWARE, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut d.handle) == 0 {
                d.backend = "hardware";
                let (mut e, mut c) = (0, 0);
                if (f.nv_hw_info)(d.handle, &mut e, &mut c) == 0 {
                    d.engines = e;
                }
            } else {
                check((f.nv_create)(BACKEND_DEFAULT, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut d.handle), "nvjpegCreateEx")?;
            }
            check((f.nv_state_create)(d.handle, &mut d.state), "nvjpegJpegStateCreate")?;
        }
        Ok(d)
    }

    fn free_buffers(&mut self) {
        for p in self.buffers.drain(..) {
            // SAFETY: from cuMemAlloc, freed once.
            unsafe { (self.ffi.cu_mem_free)(p) };
        }
    }

    /// Decode `streams` (tables spliced) in one batch; with `download`, copy the planes back.
    fn decode(&mut self, streams: &[&[u8]], download: bool) -> Result<Vec<PlanarImage>, String> {
        let mut geo = Vec::with_capacity(streams.len());
        for (i, s) in streams.iter().enumerate() {
            let (mut nc, mut ss, mut w, mut h) = (0, 0, [0 as c_int; 4], [0 as c_int; 4]);
            // SAFETY: slice pointer/len; out arrays of 4 as nvjpeg.h requires.
            check(
                unsafe { (self.ffi.nv_image_info)(self.handle, s.as_ptr(), s.len(), &mut nc, &mut ss, w.as_mut_ptr(), h.as_mut_ptr()) },
                &format!("nvjpegGetImageInfo (stream {i})"),
            )?;
            if !(1..=4).contains(&nc) || w[0] <= 0 || h[0] <= 0 || w[0] > 16384 || h[0] > 16384 {
                return Err(format!("stream {i}: {nc} components of {}x{}", w[0], h[0]));
            }
            geo.push((nc as usize, w, h));
        }
        self.free_buffers();
        let mut images = Vec::with_capacity(streams.len());
        let mut planes = Vec::with_capacity(streams.len());
        for (nc, w, h) in &geo {
            let sizes: Vec<usize> = (0..*nc).map(|c| w[c] as usize * h[c] as usize).collect();
            let mut p = 0;
            // SAFETY: out-pointer to a local.
            check(unsafe { (self.ffi.cu_mem_alloc)(&mut p, sizes.iter().sum::<usize>().max(1)) }, "cuMemAlloc")?;
            self.buffers.push(p);
            let mut img = NvImage { channel: [std::ptr::null_mut(); 4], pitch: [0; 4] };
            let mut ptrs = Vec::with_capacity(*nc);
            let mut off = 0;
            for c in 0..*nc {
                img.channel[c] = (p as usize + off) as *mut u8;
                img.pitch[c] = w[c] as usize;
                ptrs.push((p + off as u64, sizes[c], w[c] as u32, h[c] as u32));
                off += sizes[c];
            }
            images.push(img);
            planes.push(ptrs);
        }
        // SAFETY: arrays of streams.len() entries; device buffers sized from the headers; the
        // stream is synchronised before the planes are read.
        unsafe {
            if self.batch != streams.len() {
                check((self.ffi.nv_batched_init)(self.handle, self.state, streams.len() as c_int, 1, OUTPUT_UNCHANGED), "nvjpegDecodeBatchedInitialize")?;
                self.batch = streams.len();
            }
            let ptrs: Vec<*const u8> = streams.iter().map(|s| s.as_ptr()).collect();
            let lens: Vec<usize> = streams.iter().map(|s| s.len()).collect();
            check((self.ffi.nv_batched)(self.handle, self.state, ptrs.as_ptr(), lens.as_ptr(), images.as_mut_ptr(), self.stream), "nvjpegDecodeBatched")?;
            check((self.ffi.cu_stream_sync)(self.stream), "cuStreamSynchronize")?;
        }
        if !download {
            return Ok(Vec::new());
        }
        let mut out = Vec::with_capacity(planes.len());
        for ps in planes {
            let mut img = PlanarImage { widths: Vec::new(), heights: Vec::new(), planes: Vec::new() };
            for (p, n, w, h) in ps {
                let mut host = vec![0u8; n];
                // SAFETY: n bytes on both sides.
                check(unsafe { (self.ffi.cu_memcpy_dtoh)(host.as_mut_ptr() as *mut c_void, p, n) }, "cuMemcpyDtoH")?;
                img.widths.push(w);
                img.heights.push(h);
                img.planes.push(host);
            }
            out.push(img);
        }
        Ok(out)
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        self.free_buffers();
        let f = &self.ffi;
        // SAFETY: each handle was made in `new` (null ones were not) and is released once.
        unsafe {
            if !self.state.is_null() {
                (f.nv_state_destroy)(self.state);
            }
            if !self.handle.is_null() {
                (f.nv_destroy)(self.handle);
            }
            if !self.stream.is_null() {
                (f.cu_stream_destroy)(self.stream);
                (f.cu_ctx_release)(0);
            }
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        return Err("usage: nvjpeg_batch SLIDE [LEVEL] [BATCH] [TILES]".into());
    };
    let num = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (level, batch, max_tiles) = (num(1, 0), num(2, 256), num(3, 4096));
    let slide = Slide::open(path)?;
    let img = &slide.index().levels.get(level).ok_or_else(|| Error::Usage(format!("{path}: level {level} does not exist")))?.image;
    if img.codec.compression != Compression::Jpeg {
        return Err(format!("{path}: level {level} is not JPEG-compressed").into());
    }
    let color = match img.codec.photometric {
        Photometric::Rgb => jpeg::JpegColor::Rgb,
        Photometric::YCbCr => jpeg::JpegColor::YCbCr,
        Photometric::MinIsBlack => jpeg::JpegColor::Gray,
        other => return Err(format!("{path}: level {level}: JPEG tiles of photometric {other:?} are not compared by this example").into()),
    };
    // Raw tile bytes (complete, in-image tiles only) spliced with JPEGTables.
    let at = Location::file(path);
    let file = std::fs::read(path)?;
    let (mut streams, mut coords) = (Vec::new(), Vec::new());
    for row in 0..img.tiles_down() {
        for col in 0..img.tiles_across() {
            let loc = img.tile_locs(col, row).next().unwrap_or_default();
            if loc.is_missing() || img.valid_tile_size(col, row) != (img.tile_width, img.tile_height) {
                continue;
            }
            let tile = &file[loc.offset as usize..(loc.offset + loc.length) as usize];
            let mut s = Vec::new();
            jpeg::splice(img.codec.jpeg_tables(), tile, color, &mut s).map_err(|e| Error::decode(&at, e))?;
            streams.push(s);
            coords.push((col, row));
        }
    }
    if streams.is_empty() {
        return Err(format!("{path}: no complete JPEG tiles on level {level}").into());
    }
    let ycbcr = img.codec.photometric == Photometric::YCbCr;
    for hardware in [true, false] {
        let mut dec = Decoder::new(Ffi::load()?, hardware)?;
        let n = streams.len().min(batch);
        let refs: Vec<&[u8]> = streams[..n].iter().map(|s| s.as_slice()).collect();
        let planar = dec.decode(&refs, true)?;
        let (mut max_diff, mut compared, mut skipped) = (0u8, 0usize, 0usize);
        let g = ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: img.tile_width, valid_height: img.tile_height };
        for (k, p) in planar.iter().enumerate() {
            let Some(gpu) = p.to_rgba(ycbcr) else {
                skipped += 1;
                continue;
            };
            let (col, row) = coords[k];
            let loc = img.tile_locs(col, row).next().unwrap_or_default();
            let cpu = decode_chunk(&img.codec, &[&file[loc.offset as usize..(loc.offset + loc.length) as usize]], g, &at)?;
            max_diff = max_diff.max(gpu.iter().zip(&cpu.rgba).map(|(a, b)| a.abs_diff(*b)).max().unwrap_or(0));
            compared += 1;
        }
        println!(
            "backend {} ({} engines): {compared} tiles compared with the CPU decoder, max abs diff {max_diff}; {skipped} subsampled tiles not compared",
            dec.backend, dec.engines
        );
        let total = max_tiles.max(batch);
        let work: Vec<&[u8]> = (0..total).map(|i| streams[i % streams.len()].as_slice()).collect();
        dec.decode(&work[..batch.min(work.len())], false)?; // warm-up
        let t0 = Instant::now();
        for chunk in work.chunks(batch) {
            dec.decode(chunk, false)?;
        }
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "backend {}: {total} tiles of {}x{} in {secs:.3} s: {:.0} tiles/s (batches of {batch}, planar output)",
            dec.backend,
            img.tile_width,
            img.tile_height,
            total as f64 / secs
        );
    }
    Ok(())
}
