//! GPU region reads (feature `cuda`): tiles read with POSIX positional reads, decoded by batched
//! nvJPEG into device memory (planar, as coded), then cropped, colour-converted and placed into
//! the output RGBA region by one kernel compiled at run time with NVRTC. Tiles nvJPEG cannot
//! give exactly (chroma-subsampled JPEG, other codecs) are decoded on the CPU and uploaded.

use std::ffi::{c_char, c_int, c_void, CString};

use super::imp::{cu, libs, Decoder};
use super::sys::*;
use crate::codec::decode_chunk;
use crate::error::{Error, GpuError, Result};
use crate::geometry::{level_origin, tile_span, Rect};
use crate::index::{Compression, Photometric};
use crate::slide::Slide;

/// Kernel source: one thread per output pixel.
const KERNEL: &str = r#"
struct TileDesc { unsigned long long planes[3]; int pitch[3]; int kind; long long x0; long long y0; int w; int h; };
__device__ __forceinline__ unsigned char clamp255(int v) { return (unsigned char)(v < 0 ? 0 : (v > 255 ? 255 : v)); }
extern "C" __global__ void assemble(const TileDesc* tiles, const int* grid, int gcols, int grows,
        long long col0, long long row0, int tile_w, int tile_h, long long rx, long long ry,
        int out_w, int out_h, unsigned char* out) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= out_w || y >= out_h) return;
    long long lx = rx + x, ly = ry + y;
    unsigned char r = 0, g = 0, b = 0, a = 0;
    if (lx >= 0 && ly >= 0) {
        long long gc = lx / tile_w - col0, gr = ly / tile_h - row0;
        if (gc >= 0 && gr >= 0 && gc < gcols && gr < grows) {
            int idx = grid[gr * gcols + gc];
            if (idx >= 0) {
                TileDesc t = tiles[idx];
                long long ix = lx - t.x0, iy = ly - t.y0;
                if (ix >= 0 && iy >= 0 && ix < t.w && iy < t.h) {
                    if (t.kind == 2) {
                        const unsigned char* p = (const unsigned char*)t.planes[0] + iy * t.pitch[0] + ix * 4;
                        r = p[0]; g = p[1]; b = p[2]; a = p[3];
                    } else {
                        int c0 = ((const unsigned char*)t.planes[0])[iy * t.pitch[0] + ix];
                        int c1 = ((const unsigned char*)t.planes[1])[iy * t.pitch[1] + ix];
                        int c2 = ((const unsigned char*)t.planes[2])[iy * t.pitch[2] + ix];
                        if (t.kind == 0) { r = c0; g = c1; b = c2; }
                        else { /* libjpeg jdcolor.c fixed point */
                            int cb = c1 - 128, cr = c2 - 128;
                            r = clamp255(c0 + ((91881 * cr + 32768) >> 16));
                            g = clamp255(c0 + ((-22554 * cb - 46802 * cr + 32768) >> 16));
                            b = clamp255(c0 + ((116130 * cb + 32768) >> 16));
                        }
                        a = 255;
                    }
                }
            }
        }
    }
    unsigned char* o = out + ((long long)y * out_w + x) * 4;
    o[0] = r; o[1] = g; o[2] = b; o[3] = a;
}
"#;

#[repr(C)]
#[derive(Clone, Copy)]
struct TileDesc {
    planes: [u64; 3],
    pitch: [c_int; 3],
    kind: c_int,
    x0: i64,
    y0: i64,
    w: c_int,
    h: c_int,
}

/// An RGBA region in device memory: `u8`, row-major, shape (height, width, 4), freed on drop.
#[derive(Debug)]
pub struct DeviceRgba {
    /// Device pointer (`CUdeviceptr`).
    pub ptr: u64,
    /// Width in pixels.
    pub width: u64,
    /// Height in pixels.
    pub height: u64,
    /// CUDA device ordinal.
    pub device: usize,
}

impl DeviceRgba {
    /// Copy to the host: `width × height × 4` bytes.
    ///
    /// # Errors
    /// [`GpuError::Call`] when the copy fails.
    pub fn to_host(&self) -> Result<Vec<u8>> {
        let (cuda, _, _) = libs()?;
        let n = (self.width * self.height * 4) as usize;
        let mut v = vec![0u8; n];
        if n > 0 {
            // SAFETY: n bytes on both sides.
            cu(unsafe { (cuda.cuMemcpyDtoH)(v.as_mut_ptr() as *mut c_void, self.ptr, n) }, "cuMemcpyDtoH")?;
        }
        Ok(v)
    }
}

impl Drop for DeviceRgba {
    fn drop(&mut self) {
        if self.ptr != 0 {
            if let Ok((cuda, _, _)) = libs() {
                // SAFETY: allocated by cuMemAlloc in `read_region`, freed once.
                unsafe { (cuda.cuMemFree)(self.ptr) };
            }
        }
    }
}

/// Reads regions into device memory on one GPU.
pub struct GpuReader {
    dec: Decoder,
    func: *mut c_void,
    device: usize,
    /// Tiles decoded on the GPU / on the CPU (uploaded) since creation.
    pub gpu_tiles: u64,
    /// See `gpu_tiles`.
    pub cpu_tiles: u64,
}

// Used by one thread at a time (&mut self); CUDA handles are process-wide.
unsafe impl Send for GpuReader {}

fn nvrtc_ptx(src: &str, arch: &str) -> Result<Vec<u8>> {
    let rtc = Nvrtc::load().map_err(GpuError::Unavailable)?;
    let csrc = CString::new(src).expect("no NUL in kernel source");
    let name = CString::new("slidestream_assemble.cu").expect("static");
    let opt = CString::new(format!("--gpu-architecture={arch}")).expect("static");
    let opts = [opt.as_ptr()];
    let mut prog = std::ptr::null_mut();
    // SAFETY: NVRTC calls with valid C strings; the program is destroyed at the end.
    unsafe {
        let rc = (rtc.nvrtcCreateProgram)(&mut prog, csrc.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null());
        if rc != 0 {
            return Err(GpuError::Call(format!("nvrtcCreateProgram returned {rc}")).into());
        }
        let rc = (rtc.nvrtcCompileProgram)(prog, 1, opts.as_ptr());
        if rc != 0 {
            let mut n = 0usize;
            (rtc.nvrtcGetProgramLogSize)(prog, &mut n);
            let mut log = vec![0u8; n.max(1)];
            (rtc.nvrtcGetProgramLog)(prog, log.as_mut_ptr() as *mut c_char);
            (rtc.nvrtcDestroyProgram)(&mut prog);
            return Err(GpuError::Call(format!("NVRTC compile failed: {}", String::from_utf8_lossy(&log))).into());
        }
        let mut n = 0usize;
        (rtc.nvrtcGetPTXSize)(prog, &mut n);
        let mut ptx = vec![0u8; n];
        (rtc.nvrtcGetPTX)(prog, ptx.as_mut_ptr() as *mut c_char);
        (rtc.nvrtcDestroyProgram)(&mut prog);
        Ok(ptx)
    }
}

struct DevBuf(u64);
impl Drop for DevBuf {
    fn drop(&mut self) {
        if let Ok((cuda, _, _)) = libs() {
            // SAFETY: allocated by cuMemAlloc below, freed once.
            unsafe { (cuda.cuMemFree)(self.0) };
        }
    }
}

fn upload(bytes: &[u8]) -> Result<DevBuf> {
    let (cuda, _, _) = libs()?;
    let mut p = 0u64;
    // SAFETY: out-pointer; then a copy of exactly `bytes.len()` bytes into the new allocation.
    unsafe {
        cu((cuda.cuMemAlloc)(&mut p, bytes.len().max(1)), "cuMemAlloc")?;
        let b = DevBuf(p);
        if !bytes.is_empty() {
            cu((cuda.cuMemcpyHtoD)(p, bytes.as_ptr() as *const c_void, bytes.len()), "cuMemcpyHtoD")?;
        }
        Ok(b)
    }
}

impl GpuReader {
    /// Create a reader on `device` (hardware nvJPEG backend where present) and compile the
    /// assembly kernel for the device's architecture.
    ///
    /// # Errors
    /// [`GpuError::Unavailable`] / [`GpuError::Call`].
    pub fn new(device: usize) -> Result<GpuReader> {
        let report = super::probe()?;
        let (_, ma, mi) = report
            .devices
            .get(device)
            .cloned()
            .ok_or_else(|| GpuError::Unavailable(format!("no CUDA device {device}")))?;
        let dec = Decoder::new(device, true)?;
        let ptx = nvrtc_ptx(KERNEL, &format!("compute_{ma}{mi}"))?;
        let (cuda, _, _) = libs()?;
        let mut module = std::ptr::null_mut();
        let mut func = std::ptr::null_mut();
        let fname = CString::new("assemble").expect("static");
        // SAFETY: NUL-terminated PTX from NVRTC; context made current by Decoder::new.
        unsafe {
            cu((cuda.cuModuleLoadData)(&mut module, ptx.as_ptr() as *const c_void), "cuModuleLoadData")?;
            cu((cuda.cuModuleGetFunction)(&mut func, module, fname.as_ptr()), "cuModuleGetFunction")?;
        }
        Ok(GpuReader { dec, func, device, gpu_tiles: 0, cpu_tiles: 0 })
    }

    /// The nvJPEG backend in use (`hardware` or `default`).
    pub fn backend(&self) -> &'static str {
        self.dec.backend
    }

    /// Read a region of `slide` into device memory with OpenSlide's semantics (see
    /// [`Slide::read_region`]): RGBA, alpha 0 outside the image and on missing tiles.
    ///
    /// # Errors
    /// As [`Slide::read_region`], plus [`GpuError::Call`] for CUDA / nvJPEG failures.
    pub fn read_region(&mut self, slide: &Slide, location: (i64, i64), level: usize, size: (u64, u64)) -> Result<DeviceRgba> {
        let (cuda, _, _) = libs()?;
        let (img, ds, at) = slide.level_image(level)?;
        let bytes = size.0.checked_mul(size.1).and_then(|v| v.checked_mul(4)).filter(|&b| b <= slide.config().max_region_bytes);
        let Some(bytes) = bytes else {
            return Err(Error::limits(&at, format!("region of {}x{} pixels exceeds max_region_bytes", size.0, size.1)));
        };
        let rect = Rect { x: level_origin(location.0, ds), y: level_origin(location.1, ds), w: size.0, h: size.1 };
        let mut out = 0u64;
        // SAFETY: out-pointer to a local.
        cu(unsafe { (cuda.cuMemAlloc)(&mut out, (bytes as usize).max(1)) }, "cuMemAlloc")?;
        let result = DeviceRgba { ptr: out, width: size.0, height: size.1, device: self.device };
        if bytes == 0 {
            return Ok(result);
        }
        let (coords, col0, row0, gcols, grows) = match rect.clip(img.width, img.height) {
            Some(clip) => {
                let (cols, rows) = tile_span(&clip, img.tile_width, img.tile_height);
                let c: Vec<(u64, u64)> = rows.clone().flat_map(|r| cols.clone().map(move |c| (c, r))).collect();
                (c, *cols.start(), *rows.start(), (cols.end() - cols.start() + 1) as usize, (rows.end() - rows.start() + 1) as usize)
            }
            None => (Vec::new(), 0, 0, 0, 0),
        };
        // Decode: JPEG tiles on the GPU (exact when not chroma-subsampled), the rest on the CPU.
        let jpeg = img.codec.compression == Compression::Jpeg && !img.codec.planar_separate && img.codec.samples_per_pixel == 3;
        let ycbcr = img.codec.photometric == Photometric::YCbCr;
        let raw = slide.read_raw_tiles(level, &coords)?;
        let mut descs: Vec<TileDesc> = Vec::new();
        let mut grid = vec![-1i32; gcols * grows];
        let mut keep: Vec<DevBuf> = Vec::new();
        let mut gpu_idx = Vec::new();
        let mut streams: Vec<Vec<u8>> = Vec::new();
        let mut cpu_idx = Vec::new();
        for (k, r) in raw.iter().enumerate() {
            match r {
                None => {}
                Some(bytes) if jpeg => {
                    let mut s = Vec::new();
                    let color = if ycbcr { crate::codec::jpeg::JpegColor::YCbCr } else { crate::codec::jpeg::JpegColor::Rgb };
                    crate::codec::jpeg::splice(img.codec.jpeg_tables.as_deref(), bytes, color, &mut s)
                        .map_err(|m| Error::format(&at.clone().with_tile(coords[k].0, coords[k].1), format!("JPEG: {m}")))?;
                    // nvJPEG's planar output is exact only without chroma subsampling.
                    match crate::codec::jpeg::read_header(&s) {
                        Ok(h) if h.subsamp == 0 => {
                            gpu_idx.push(k);
                            streams.push(s);
                        }
                        _ => cpu_idx.push(k),
                    }
                }
                Some(_) => cpu_idx.push(k),
            }
        }
        let refs: Vec<&[u8]> = streams.iter().map(|s| s.as_slice()).collect();
        let planes = if refs.is_empty() { Vec::new() } else { self.dec.decode_device(&refs)? };
        for (&k, p) in gpu_idx.iter().zip(&planes) {
            let (col, row) = coords[k];
            let (vw, vh) = img.valid_tile_size(col, row);
            if p.widths[0] < vw || p.heights[0] < vh || p.ptrs.len() != 3 {
                return Err(Error::format(&at.clone().with_tile(col, row), "JPEG stream does not cover the tile"));
            }
            grid[((row - row0) as usize) * gcols + (col - col0) as usize] = descs.len() as i32;
            descs.push(TileDesc {
                planes: [p.ptrs[0], p.ptrs[1], p.ptrs[2]],
                pitch: [p.widths[0] as c_int, p.widths[1] as c_int, p.widths[2] as c_int],
                kind: if ycbcr { 1 } else { 0 },
                x0: (col * img.tile_width as u64) as i64,
                y0: (row * img.tile_height as u64) as i64,
                w: vw as c_int,
                h: vh as c_int,
            });
        }
        self.gpu_tiles += gpu_idx.len() as u64;
        for &k in &cpu_idx {
            let (col, row) = coords[k];
            let data = raw[k].as_ref().expect("present");
            let (vw, vh) = img.valid_tile_size(col, row);
            let g = crate::codec::ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: vw, valid_height: vh };
            let t = decode_chunk(&img.codec, &[data.as_slice()], g, &at).map_err(|e| e.with_tile(col, row))?;
            let buf = upload(&t.rgba)?;
            grid[((row - row0) as usize) * gcols + (col - col0) as usize] = descs.len() as i32;
            descs.push(TileDesc {
                planes: [buf.0, 0, 0],
                pitch: [(t.width * 4) as c_int, 0, 0],
                kind: 2,
                x0: (col * img.tile_width as u64) as i64,
                y0: (row * img.tile_height as u64) as i64,
                w: t.width as c_int,
                h: t.height as c_int,
            });
            keep.push(buf);
        }
        self.cpu_tiles += cpu_idx.len() as u64;
        // SAFETY: TileDesc is plain old data (repr(C)); viewed as bytes for the upload.
        let desc_bytes = unsafe { std::slice::from_raw_parts(descs.as_ptr() as *const u8, std::mem::size_of_val(descs.as_slice())) };
        let d_desc = upload(desc_bytes)?;
        let grid_bytes: Vec<u8> = grid.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let d_grid = upload(&grid_bytes)?;
        let (mut a_desc, mut a_grid, mut a_gc, mut a_gr) = (d_desc.0, d_grid.0, gcols as c_int, grows as c_int);
        let (mut a_c0, mut a_r0, mut a_tw, mut a_th) = (col0 as i64, row0 as i64, img.tile_width as c_int, img.tile_height as c_int);
        let (mut a_rx, mut a_ry, mut a_w, mut a_h, mut a_out) = (rect.x, rect.y, size.0 as c_int, size.1 as c_int, out);
        let mut params: [*mut c_void; 13] = [
            &mut a_desc as *mut _ as *mut c_void,
            &mut a_grid as *mut _ as *mut c_void,
            &mut a_gc as *mut _ as *mut c_void,
            &mut a_gr as *mut _ as *mut c_void,
            &mut a_c0 as *mut _ as *mut c_void,
            &mut a_r0 as *mut _ as *mut c_void,
            &mut a_tw as *mut _ as *mut c_void,
            &mut a_th as *mut _ as *mut c_void,
            &mut a_rx as *mut _ as *mut c_void,
            &mut a_ry as *mut _ as *mut c_void,
            &mut a_w as *mut _ as *mut c_void,
            &mut a_h as *mut _ as *mut c_void,
            &mut a_out as *mut _ as *mut c_void,
        ];
        let (bx, by) = (16u32, 16u32);
        let gx = (size.0 as u32).div_ceil(bx);
        let gy = (size.1 as u32).div_ceil(by);
        // SAFETY: parameters match the kernel's signature in order and type; every buffer the
        // kernel reads stays alive (descs, grid, planes in the decoder, uploaded CPU tiles) until
        // the stream is synchronised below.
        unsafe {
            cu(
                (cuda.cuLaunchKernel)(self.func, gx, gy, 1, bx, by, 1, 0, self.dec.stream(), params.as_mut_ptr(), std::ptr::null_mut()),
                "cuLaunchKernel(assemble)",
            )?;
            cu((cuda.cuStreamSynchronize)(self.dec.stream()), "cuStreamSynchronize")?;
        }
        drop((d_desc, d_grid, keep));
        Ok(result)
    }
}
