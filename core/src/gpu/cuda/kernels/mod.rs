//! The kernels (`kernels.cu`, compiled with NVRTC for the device's compute capability, or
//! loaded from the on-disk cache of compiled images, `cache.rs`), their descriptor layouts and
//! launching.
//!
//! Every `#[repr(C)]` descriptor passed to a kernel has its size and field offsets asserted at
//! compile time here and, with the same numbers, by `static_assert`s in `kernels.cu`, so a
//! layout change on one side fails to build (Rust) or to start the engine (NVRTC). NVRTC checks
//! the sizes always and the offsets from 13.4 on (`__builtin_offsetof` is not available to
//! earlier NVRTC, NVIDIA/cccl#11438); host C++ compilers check both.

mod cache;

use std::ffi::{c_int, c_void, CString};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::time::Instant;

use super::sys::{cu, cuda, nvrtc, CUstream, Res};
use super::trace;
use crate::config::KernelCache;
use crate::error::GpuError;
use cache::{Image, ImageKind, Key, KeyInputs, Lookup};

const SOURCE: &str = include_str!("kernels.cu");

/// `convert`: one tile's planar components → RGBA: `w × h` pixels from tile pixel `(x0, y0)`
/// on (a whole tile: its valid size from `(0, 0)`; the SM decoder's region-aware decode: the
/// part its call needs), written at `out` with rows `4 w` bytes apart.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ConvDesc {
    pub planes: [u64; 3],
    pub pitch: [c_int; 3],
    pub pw: [c_int; 3],
    pub ph: [c_int; 3],
    pub sub_h: c_int,
    pub sub_v: c_int,
    pub kind: c_int,
    pub w: c_int,
    pub h: c_int,
    pub x0: c_int,
    pub y0: c_int,
    pub out: u64,
}

/// `assemble`: one decoded tile (or part) in device memory.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct TileRef {
    pub ptr: u64,
    pub x0: i64,
    pub y0: i64,
    pub w: c_int,
    pub h: c_int,
    pub pitch: c_int,
    pub pad: c_int,
}

/// `assemble`: one patch and its tile grid.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct PatchDesc {
    pub rx: i64,
    pub ry: i64,
    pub col0: i64,
    pub row0: i64,
    pub gcols: c_int,
    pub grows: c_int,
    pub grid: c_int,
    /// Tile size of the patch's image (patches of one call may come from different images).
    pub tile_w: c_int,
    pub tile_h: c_int,
    pub pad: c_int,
}

/// `splice` / `sof_scan`: one device bitstream.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct SpliceDesc {
    pub src: u64,
    pub dst: u64,
    pub len: c_int,
    pub pad: c_int,
}

// The same numbers are asserted in kernels.cu.
const _: () = assert!(
    size_of::<ConvDesc>() == 96
        && offset_of!(ConvDesc, planes) == 0
        && offset_of!(ConvDesc, pitch) == 24
        && offset_of!(ConvDesc, pw) == 36
        && offset_of!(ConvDesc, ph) == 48
        && offset_of!(ConvDesc, sub_h) == 60
        && offset_of!(ConvDesc, sub_v) == 64
        && offset_of!(ConvDesc, kind) == 68
        && offset_of!(ConvDesc, w) == 72
        && offset_of!(ConvDesc, h) == 76
        && offset_of!(ConvDesc, x0) == 80
        && offset_of!(ConvDesc, y0) == 84
        && offset_of!(ConvDesc, out) == 88
);
const _: () = assert!(
    size_of::<TileRef>() == 40
        && offset_of!(TileRef, ptr) == 0
        && offset_of!(TileRef, x0) == 8
        && offset_of!(TileRef, y0) == 16
        && offset_of!(TileRef, w) == 24
        && offset_of!(TileRef, h) == 28
        && offset_of!(TileRef, pitch) == 32
        && offset_of!(TileRef, pad) == 36
);
const _: () = assert!(
    size_of::<PatchDesc>() == 56
        && offset_of!(PatchDesc, rx) == 0
        && offset_of!(PatchDesc, ry) == 8
        && offset_of!(PatchDesc, col0) == 16
        && offset_of!(PatchDesc, row0) == 24
        && offset_of!(PatchDesc, gcols) == 32
        && offset_of!(PatchDesc, grows) == 36
        && offset_of!(PatchDesc, grid) == 40
        && offset_of!(PatchDesc, tile_w) == 44
        && offset_of!(PatchDesc, tile_h) == 48
        && offset_of!(PatchDesc, pad) == 52
);
const _: () = assert!(
    size_of::<SpliceDesc>() == 24
        && offset_of!(SpliceDesc, src) == 0
        && offset_of!(SpliceDesc, dst) == 8
        && offset_of!(SpliceDesc, len) == 16
        && offset_of!(SpliceDesc, pad) == 20
);

/// A raw pointer to a kernel parameter, as `cuLaunchKernel` wants them.
pub(crate) fn arg<T>(v: &mut T) -> *mut c_void {
    v as *mut T as *mut c_void
}

/// A loaded module (`cuModuleLoadData`), unloaded when dropped, and its kernels.
pub(crate) struct Kernels {
    module: *mut c_void,
    pid: u32,
    pub convert: *mut c_void,
    pub assemble: *mut c_void,
    pub splice: *mut c_void,
    pub sof_scan: *mut c_void,
    /// One axis of the Lanczos-3 patch resize (`gpu/cuda/resize.rs`).
    pub resize_h: *mut c_void,
    pub resize_v: *mut c_void,
    /// Where the image came from and what the on-disk cache did (`GpuStats::kernel_cache`).
    pub(crate) cache_note: String,
}

// A module and its functions may be used from any thread of the context.
unsafe impl Send for Kernels {}
unsafe impl Sync for Kernels {}

/// Compile options in the order tried: SASS for the device (`sm_XY`, a cubin the driver loads
/// without compiling), else PTX for its virtual architecture (JIT-compiled at module load).
fn option_sets(major: i32, minor: i32) -> [(ImageKind, String); 2] {
    [(ImageKind::Cubin, format!("--gpu-architecture=sm_{major}{minor}")), (ImageKind::Ptx, format!("--gpu-architecture=compute_{major}{minor}"))]
}

/// The host half of loading the kernels (no context needed, so it may run on a thread while
/// the context is made): NVRTC loaded, the cache key, and the image from the cache or compiled.
pub(crate) struct Prepared {
    arch: (i32, i32),
    key: Key,
    /// The cache directory, or why there is none.
    dir: std::result::Result<PathBuf, String>,
    /// From the cache file (`true`) or compiled now.
    cached: bool,
    /// Why the cache file was not used (absent, unreadable, truncated, corrupt).
    miss: Option<String>,
    image: Res<Image>,
    /// Milliseconds spent compiling (0 on a hit).
    compile_ms: f64,
}

/// NVRTC loaded, the cache looked up, and the kernels compiled when it has no usable image
/// (`part` names the trace lines).
pub(crate) fn prepare(major: i32, minor: i32, setting: &KernelCache, part: &str) -> Res<Prepared> {
    let t = Instant::now();
    let rtc = nvrtc()?;
    let (mut vmaj, mut vmin, mut driver) = (0, 0, 0);
    // SAFETY: out-pointers to locals.
    unsafe {
        rtc.nvrtcVersion(&mut vmaj, &mut vmin);
        cuda()?.cuDriverGetVersion(&mut driver);
    }
    trace::phase_line(part, &format!("NVRTC {vmaj}.{vmin} load"), t);
    let sets = option_sets(major, minor);
    let opts: Vec<&str> = sets.iter().map(|(_, o)| o.as_str()).collect();
    let key = Key::new(&KeyInputs { source: SOURCE, options: &opts, arch: (major, minor), nvrtc: (vmaj, vmin), driver });
    let dir = cache::dir_from_env(setting);
    let t = Instant::now();
    let found = match &dir {
        Ok(d) => cache::read(d, &key),
        Err(_) => Lookup::Missing,
    };
    if dir.is_ok() {
        trace::phase_line(part, &format!("kernel cache read ({})", if matches!(found, Lookup::Hit(_)) { "hit" } else { "miss" }), t);
    }
    let mut p = Prepared { arch: (major, minor), key, dir, cached: false, miss: None, image: Err(GpuError::Call(String::new())), compile_ms: 0.0 };
    match found {
        Lookup::Hit(img) => {
            p.cached = true;
            p.image = Ok(img);
        }
        Lookup::Missing => p.image = p.compile(0, part),
        Lookup::Bad(why) => {
            p.miss = Some(why);
            p.image = p.compile(0, part);
        }
    }
    Ok(p)
}

impl Prepared {
    /// Compile with option set `from` or a later one (the first that compiles).
    fn compile(&mut self, from: usize, part: &str) -> Res<Image> {
        let t = Instant::now();
        let mut first_err = None;
        for (kind, opt) in option_sets(self.arch.0, self.arch.1).into_iter().skip(from) {
            match nvrtc_compile(SOURCE, kind, &opt) {
                Ok(img) => {
                    self.compile_ms += t.elapsed().as_secs_f64() * 1e3;
                    trace::phase_line(part, &format!("NVRTC compile ({opt}, {} bytes)", img.bytes.len()), t);
                    return Ok(img);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| GpuError::Call("no NVRTC option set left".into())))
    }
}

/// Load `img` into the current context.
fn load_module(img: &Image) -> Res<*mut c_void> {
    let mut module = std::ptr::null_mut();
    // SAFETY: a cubin, or NUL-terminated PTX (checked when read from the cache, made so by
    // NVRTC); the context is current.
    cu(unsafe { cuda()?.cuModuleLoadData(&mut module, img.bytes.as_ptr() as *const c_void) }, "cuModuleLoadData")?;
    Ok(module)
}

impl Kernels {
    /// Load the prepared image into the current context and look up the kernels. A cached
    /// image the driver refuses is compiled again; a compiled cubin it refuses falls back to
    /// PTX; a compiled image is written to the cache when there is one. What happened is kept
    /// in [`Kernels::cache_note`]; only a failure to compile or load a fresh image is an error.
    pub(crate) fn load(mut p: Prepared, part: &str) -> Res<Kernels> {
        let cuda = cuda()?;
        let t = Instant::now();
        let mut image = std::mem::replace(&mut p.image, Err(GpuError::Call(String::new())))?;
        // Each retry either gives up the cache file (once) or the cubin (once), then fails.
        let mut from = 0;
        let module = loop {
            match load_module(&image) {
                Ok(m) => break m,
                Err(e) => {
                    if p.cached {
                        p.cached = false;
                        p.miss = Some(format!("refused by the driver ({e})"));
                    } else if image.kind == ImageKind::Cubin && from == 0 {
                        from = 1;
                    } else {
                        return Err(e);
                    }
                    image = p.compile(from, part)?;
                }
            }
        };
        trace::phase_line(part, &format!("module load ({})", if image.kind == ImageKind::Cubin { "cubin" } else { "PTX, JIT by the driver" }), t);
        let mut k = Kernels {
            module,
            pid: super::context::pid(),
            convert: std::ptr::null_mut(),
            assemble: std::ptr::null_mut(),
            splice: std::ptr::null_mut(),
            sof_scan: std::ptr::null_mut(),
            resize_h: std::ptr::null_mut(),
            resize_v: std::ptr::null_mut(),
            cache_note: String::new(),
        };
        let func = |name: &str| -> Res<*mut c_void> {
            let c = CString::new(name).expect("static");
            let mut f = std::ptr::null_mut();
            // SAFETY: module loaded above; name NUL-terminated.
            cu(unsafe { cuda.cuModuleGetFunction(&mut f, module, c.as_ptr()) }, "cuModuleGetFunction")?;
            Ok(f)
        };
        k.convert = func("convert")?;
        k.assemble = func("assemble")?;
        k.splice = func("splice")?;
        k.sof_scan = func("sof_scan")?;
        k.resize_h = func("resize_h")?;
        k.resize_v = func("resize_v")?;
        k.cache_note = p.store(&image, part);
        Ok(k)
    }
}

impl Prepared {
    /// Write a freshly compiled `image` to the cache and describe what the cache did.
    fn store(&self, image: &Image, part: &str) -> String {
        let kind = if image.kind == ImageKind::Cubin { "cubin" } else { "PTX" };
        let file = |d: &PathBuf| d.join(self.key.file_name()).display().to_string();
        match &self.dir {
            Ok(d) if self.cached => format!("loaded from {} ({kind})", file(d)),
            Ok(d) => {
                let t = Instant::now();
                let w = cache::write(d, &self.key, image);
                trace::phase_line(part, "kernel cache write", t);
                let why = match &self.miss {
                    Some(w) => format!("; the cache file was unusable: {w}"),
                    None => String::new(),
                };
                match w {
                    Ok(path) => format!("compiled ({kind}, {:.0} ms) and written to {}{why}", self.compile_ms, path.display()),
                    Err(e) => format!(
                        "compiled ({kind}, {:.0} ms); cache directory {} not writable ({e}): compiled at every engine start{why}",
                        self.compile_ms,
                        d.display()
                    ),
                }
            }
            Err(why) => format!("compiled ({kind}, {:.0} ms); no kernel cache: {why}", self.compile_ms),
        }
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        if self.pid != super::context::pid() {
            return;
        }
        if let Ok(cuda) = cuda() {
            // SAFETY: loaded in `load`, unloaded once.
            unsafe { cuda.cuModuleUnload(self.module) };
        }
    }
}

/// A module compiled from a source of its own (not the engine's `kernels.cu`, and not cached
/// on disk), unloaded when dropped: the SM JPEG decoder's kernels (`decode/sm.rs`).
pub(crate) struct Module {
    raw: *mut c_void,
    pid: u32,
}

// A module and its functions may be used from any thread of the context.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    /// Compile `src` for compute capability `arch` (a cubin, else PTX) and load it into the
    /// current context.
    pub(crate) fn compile(src: &str, arch: (i32, i32)) -> Res<Module> {
        let mut first_err = None;
        for (kind, opt) in option_sets(arch.0, arch.1) {
            match nvrtc_compile(src, kind, &opt).and_then(|img| load_module(&img)) {
                Ok(raw) => return Ok(Module { raw, pid: super::context::pid() }),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.unwrap_or_else(|| GpuError::Call("no NVRTC option set".into())))
    }

    /// The kernel `name`.
    pub(crate) fn function(&self, name: &str) -> Res<*mut c_void> {
        let c = CString::new(name).map_err(|_| GpuError::Call("NUL in a kernel name".into()))?;
        let mut f = std::ptr::null_mut();
        // SAFETY: module loaded; name NUL-terminated.
        cu(unsafe { cuda()?.cuModuleGetFunction(&mut f, self.raw, c.as_ptr()) }, "cuModuleGetFunction")?;
        Ok(f)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.pid != super::context::pid() {
            return;
        }
        if let Ok(cuda) = cuda() {
            // SAFETY: loaded in `compile`, unloaded once.
            unsafe { cuda.cuModuleUnload(self.raw) };
        }
    }
}

/// Launch `f` on `stream`.
pub(crate) fn launch(f: *mut c_void, grid: (u32, u32, u32), block: (u32, u32, u32), stream: CUstream, params: &mut [*mut c_void], what: &str) -> Res<()> {
    let cuda = cuda()?;
    // SAFETY: `params` point to locals matching the kernel's parameter list (checked by the
    // callers against kernels.cu); buffers they reference outlive the stream's synchronisation.
    cu(unsafe { cuda.cuLaunchKernel(f, grid.0, grid.1, grid.2, block.0, block.1, block.2, 0, stream, params.as_mut_ptr(), std::ptr::null_mut()) }, what)
}

/// An NVRTC program, destroyed when dropped.
struct Program(*mut c_void);

impl Drop for Program {
    fn drop(&mut self) {
        if let Ok(rtc) = nvrtc() {
            // SAFETY: created by nvrtcCreateProgram, destroyed once.
            unsafe { rtc.nvrtcDestroyProgram(&mut self.0) };
        }
    }
}

/// Compile `src` with `--gpu-architecture=...` option `arch_opt` into an image of `kind`.
fn nvrtc_compile(src: &str, kind: ImageKind, arch_opt: &str) -> Res<Image> {
    let rtc = nvrtc()?;
    let csrc = CString::new(src).map_err(|_| GpuError::Call("NUL in kernel source".into()))?;
    let name = CString::new("slidestream_kernels.cu").expect("static");
    let opt = CString::new(arch_opt).map_err(|_| GpuError::Call("NUL in an NVRTC option".into()))?;
    let opts = [opt.as_ptr()];
    let mut raw = std::ptr::null_mut();
    // SAFETY: NVRTC calls with valid C strings; the program is destroyed on every path (drop);
    // output buffers sized by the matching size call.
    unsafe {
        let rc = rtc.nvrtcCreateProgram(&mut raw, csrc.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null());
        if rc != 0 {
            return Err(GpuError::Call(format!("nvrtcCreateProgram returned {rc}")));
        }
        let prog = Program(raw);
        let rc = rtc.nvrtcCompileProgram(prog.0, 1, opts.as_ptr());
        if rc != 0 {
            let mut n = 0usize;
            rtc.nvrtcGetProgramLogSize(prog.0, &mut n);
            let mut log = vec![0u8; n.max(1)];
            rtc.nvrtcGetProgramLog(prog.0, log.as_mut_ptr() as *mut std::ffi::c_char);
            return Err(GpuError::Call(format!("NVRTC compile ({arch_opt}) failed: {}", String::from_utf8_lossy(&log))));
        }
        let mut n = 0usize;
        let bytes = match kind {
            ImageKind::Cubin => {
                let rc = rtc.nvrtcGetCUBINSize(prog.0, &mut n);
                if rc != 0 || n == 0 {
                    return Err(GpuError::Call(format!("nvrtcGetCUBINSize ({arch_opt}) returned {rc}, size {n}")));
                }
                let mut b = vec![0u8; n];
                let rc = rtc.nvrtcGetCUBIN(prog.0, b.as_mut_ptr() as *mut std::ffi::c_char);
                if rc != 0 {
                    return Err(GpuError::Call(format!("nvrtcGetCUBIN returned {rc}")));
                }
                b
            }
            ImageKind::Ptx => {
                rtc.nvrtcGetPTXSize(prog.0, &mut n);
                let mut b = vec![0u8; n.max(1)];
                rtc.nvrtcGetPTX(prog.0, b.as_mut_ptr() as *mut std::ffi::c_char);
                // The size includes the NUL; make sure the image ends with one.
                if b.last() != Some(&0) {
                    b.push(0);
                }
                b
            }
        };
        Ok(Image { kind, bytes })
    }
}

#[cfg(test)]
mod tests {
    /// The CUDA side asserts the same layouts (checked when NVRTC compiles it on a GPU); here,
    /// that every descriptor of the Rust side has its `static_assert` in the source.
    #[test]
    fn kernels_cu_asserts_every_descriptor_layout() {
        let src = super::SOURCE;
        for (t, size) in [("ConvDesc", 96), ("TileRef", 40), ("PatchDesc", 56), ("SpliceDesc", 24)] {
            assert!(src.contains(&format!("static_assert(sizeof({t}) == {size}")), "{t}: no size assert in kernels.cu");
            assert!(src.contains(&format!("__builtin_offsetof({t},")), "{t}: no offset assert in kernels.cu");
        }
    }
}
