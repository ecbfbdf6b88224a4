//! The kernels (`kernels.cu`, compiled at engine start with NVRTC for the device's compute
//! capability), their descriptor layouts and launching.
//!
//! Every `#[repr(C)]` descriptor passed to a kernel has its size and field offsets asserted at
//! compile time here and, with the same numbers, by `static_assert`s in `kernels.cu`, so a
//! layout change on one side fails to build (Rust) or to start the engine (NVRTC). NVRTC checks
//! the sizes always and the offsets from 13.4 on (`__builtin_offsetof` is not available to
//! earlier NVRTC, NVIDIA/cccl#11438); host C++ compilers check both.

use std::ffi::{c_int, c_void, CString};
use std::mem::{offset_of, size_of};

use super::sys::{cu, cuda, nvrtc, CUstream, Res};
use crate::error::GpuError;

const SOURCE: &str = include_str!("kernels.cu");

/// `convert`: one tile's planar components → RGBA.
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
    pub pad: c_int,
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
        && offset_of!(ConvDesc, pad) == 80
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
    size_of::<SpliceDesc>() == 24 && offset_of!(SpliceDesc, src) == 0 && offset_of!(SpliceDesc, dst) == 8 && offset_of!(SpliceDesc, len) == 16 && offset_of!(SpliceDesc, pad) == 20
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
}

// A module and its functions may be used from any thread of the context.
unsafe impl Send for Kernels {}
unsafe impl Sync for Kernels {}

impl Kernels {
    /// Compile `kernels.cu` for `compute_{major}{minor}` and load it into the current context.
    pub(crate) fn load(major: i32, minor: i32) -> Res<Kernels> {
        let cuda = cuda()?;
        let ptx = nvrtc_ptx(SOURCE, &format!("compute_{major}{minor}"))?;
        let mut module = std::ptr::null_mut();
        // SAFETY: NUL-terminated PTX from NVRTC; the context is current.
        cu(unsafe { cuda.cuModuleLoadData(&mut module, ptx.as_ptr() as *const c_void) }, "cuModuleLoadData")?;
        let mut k = Kernels { module, pid: super::context::pid(), convert: std::ptr::null_mut(), assemble: std::ptr::null_mut(), splice: std::ptr::null_mut(), sof_scan: std::ptr::null_mut() };
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
        Ok(k)
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

/// Launch `f` on `stream`.
pub(crate) fn launch(f: *mut c_void, grid: (u32, u32, u32), block: (u32, u32, u32), stream: CUstream, params: &mut [*mut c_void], what: &str) -> Res<()> {
    let cuda = cuda()?;
    // SAFETY: `params` point to locals matching the kernel's parameter list (checked by the
    // callers against kernels.cu); buffers they reference outlive the stream's synchronisation.
    cu(
        unsafe { cuda.cuLaunchKernel(f, grid.0, grid.1, grid.2, block.0, block.1, block.2, 0, stream, params.as_mut_ptr(), std::ptr::null_mut()) },
        what,
    )
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

fn nvrtc_ptx(src: &str, arch: &str) -> Res<Vec<u8>> {
    let rtc = nvrtc()?;
    let csrc = CString::new(src).map_err(|_| GpuError::Call("NUL in kernel source".into()))?;
    let name = CString::new("slidestream_kernels.cu").expect("static");
    let opt = CString::new(format!("--gpu-architecture={arch}")).expect("static");
    let opts = [opt.as_ptr()];
    let mut raw = std::ptr::null_mut();
    // SAFETY: NVRTC calls with valid C strings; the program is destroyed on every path (drop).
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
            return Err(GpuError::Call(format!("NVRTC compile failed: {}", String::from_utf8_lossy(&log))));
        }
        let mut n = 0usize;
        rtc.nvrtcGetPTXSize(prog.0, &mut n);
        let mut ptx = vec![0u8; n];
        rtc.nvrtcGetPTX(prog.0, ptx.as_mut_ptr() as *mut std::ffi::c_char);
        Ok(ptx)
    }
}

#[cfg(test)]
mod tests {
    /// The CUDA side asserts the same layouts (checked when NVRTC compiles it on a GPU); here,
    /// that every descriptor of the Rust side has its `static_assert` in the source.
    #[test]
    fn kernels_cu_asserts_every_descriptor_layout() {
        let src = super::SOURCE;
        for (t, size) in [("ConvDesc", 96), ("TileRef", 40), ("PatchDesc", 48), ("SpliceDesc", 24)] {
            assert!(src.contains(&format!("static_assert(sizeof({t}) == {size}")), "{t}: no size assert in kernels.cu");
            assert!(src.contains(&format!("__builtin_offsetof({t},")), "{t}: no offset assert in kernels.cu");
        }
    }
}
