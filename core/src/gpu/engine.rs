//! The GPU engine of one device (feature `cuda`): context, streams, nvJPEG handles, kernels,
//! the device tile cache, the I/O path (POSIX into pinned memory, or cuFile) and counters.
//!
//! Data flow of [`read_regions`] (one call = one batch of same-sized patches of one level):
//! 1. the tiles of all patches are deduplicated and looked up in the device tile cache;
//! 2. misses of a JPEG level form one work queue ([`WorkQueue`]), ordered by the estimated cost
//!    of decoding each tile's needed part on the CPU (costliest first), then by offset: up to
//!    `SLIDESTREAM_GPU_WORKERS` lanes take chunks of up to [`CHUNK_TILES`] whole tiles from its
//!    front, and on large batches up to `SLIDESTREAM_GPU_CPU_WORKERS` CPU decode workers take
//!    runs of [`CPU_RUN_TILES`] from its back (libjpeg-turbo, as the CPU path, straight into
//!    pinned memory, only the part the batch needs when it is small — such tiles are not cached
//!    — and uploaded in one copy per run), until the ends meet. A lane alternates between
//!    two slots (stream + nvJPEG state + buffers) so reading and parsing chunk k + 1 on the host
//!    overlaps decoding chunk k on the device:
//!    * POSIX: coalesced `pread`s ([`plan_reads`]) into a pinned host buffer, JPEGTables spliced
//!      on the host, geometry checked with `nvjpegGetImageInfo`, batched nvJPEG (hardware
//!      engines) decoding to planar components;
//!    * cuFile: coalesced `cuFileRead`s into a device buffer, tables spliced and SOF geometry
//!      read by kernels, batched nvJPEG on device bitstreams (`HARDWARE_DEVICE`, else
//!      `GPU_HYBRID_DEVICE`); if no device-bitstream backend works, the streams are copied to
//!      pinned host memory and decoded as in the POSIX path (reported);
//!    * then the `convert` kernel writes each tile as RGBA (libjpeg-turbo's upsampling and
//!      colour conversion) into its own device allocation, which enters the cache;
//! 3. tiles nvJPEG cannot take (other codecs, bad headers, a failed batch) are
//!    decoded by the CPU decoders in parallel and uploaded; a tile that fails there fails only
//!    the patches that need it;
//! 4. the `assemble` kernel writes every patch in one launch.
//!
//! Ordering: every stream used by a call is synchronised before it returns, so results are
//! complete for any consumer stream. Device tiles are freed with `cuMemFreeAsync` on a
//! dedicated stream only once no call holds them (they are shared through `Arc`).

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::imp::{cu, libs, nv};
use super::sys::*;
use super::{CompatMode, DeviceArray, DeviceBatch, DeviceOptions, GpuStats};
use crate::cache::{CacheWeight, TileCache, TileKey};
use crate::codec::{decode_chunk, decode_jpeg_into, ChunkGeometry, DecodedTile, PartRect};
use crate::error::{Error, GpuError, Location, Result};
use crate::index::{Compression, ImageIndex, Photometric};
use crate::io::plan::{plan_reads, Want};
use crate::io::ByteSource;
use crate::slide::Slide;

/// Tiles per nvJPEG batch (one slot's chunk).
const CHUNK_TILES: usize = 256;
/// Largest `SLIDESTREAM_GPU_WORKERS`. An engine has exactly that many lanes (independent stream
/// pairs), all made and warmed at start; more concurrent callers wait for a free one (lanes
/// made on demand cost each caller about a second of nvJPEG set-up: measured on the H200 as 16
/// threads reading single regions at 944 patches/s against 2,948 for one thread).
const MAX_LANES: usize = 8;
/// Most lanes including those made for rayon worker threads that found none free (see
/// `Engine::take_lane`).
const MAX_OVERFLOW_LANES: usize = 64;
/// Cap of the default number of CPU decode workers (cores − lanes; measured up to 12 on the
/// H200's 16 cores).
const DEFAULT_MAX_CPU_WORKERS: usize = 32;
/// Tiles a CPU decode worker takes from the work queue at a time (decoded, then uploaded in one
/// copy while it decodes the next run).
const CPU_RUN_TILES: usize = 8;
/// Pinned bytes of one CPU worker's run buffer (fewer tiles per run when tiles are large).
const CPU_RUN_BYTES: usize = 8 << 20;
/// Fewest tile misses in one call for which CPU decode workers join the GPU lanes (below, the
/// threads' start-up costs more than they decode).
const MIN_CPU_SHARE_TILES: usize = 64;
/// Largest JPEG tile edge sent to nvJPEG (larger streams are decoded on the CPU).
const MAX_GPU_TILE_EDGE: u32 = 16384;

const KERNELS: &str = include_str!("kernels.cu");

type Res<T> = std::result::Result<T, GpuError>;

fn pid() -> u32 {
    std::process::id()
}

// ---------------------------------------------------------------------------------------------
// Device and pinned memory

/// One stream-ordered device allocation holding one or more decoded tiles (a chunk's tiles
/// share one block: one allocation and one free per chunk instead of per tile). Freed with
/// `cuMemFreeAsync` on the engine's free stream when its last tile is dropped.
pub(crate) struct DevBlock {
    ptr: CUdeviceptr,
    ctx: CUcontext,
    free_stream: CUstream,
    pid: u32,
    /// Size in bytes, and the engine's count of bytes held by live blocks.
    bytes: u64,
    held: Arc<AtomicU64>,
}

impl DevBlock {
    fn new(e: &Engine, ptr: CUdeviceptr, bytes: usize) -> Arc<DevBlock> {
        e.held.fetch_add(bytes as u64, Relaxed);
        Arc::new(DevBlock { ptr, ctx: e.ctx, free_stream: e.free_stream, pid: e.pid, bytes: bytes as u64, held: e.held.clone() })
    }
}

// A device pointer and handles usable from any thread.
unsafe impl Send for DevBlock {}
unsafe impl Sync for DevBlock {}

impl Drop for DevBlock {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Relaxed);
        if self.ptr == 0 || self.pid != pid() {
            return; // a forked child must not touch the parent's CUDA state
        }
        if let Ok((cuda, _, _)) = libs() {
            // SAFETY: allocated with cuMemAllocAsync by this engine; freed once, after every
            // call that used its tiles synchronised its streams (dropped with the last `Arc`).
            unsafe {
                (cuda.cuCtxSetCurrent)(self.ctx);
                (cuda.cuMemFreeAsync)(self.ptr, self.free_stream);
            }
        }
    }
}

/// A decoded tile in device memory: RGBA, `w × h` pixels starting at (`x`, `y`) of the tile,
/// rows `pitch × 4` bytes apart, inside `block`. A whole tile has `x = y = 0` and covers the
/// tile's part inside the image; a partial one (a CPU worker decoded only what one call needs)
/// covers less and is never cached.
pub(crate) struct DevTile {
    ptr: CUdeviceptr,
    x: u32,
    y: u32,
    w: u32,
    h: u32,
    pitch: u32,
    partial: bool,
    _block: Arc<DevBlock>,
}

impl DevTile {
    /// A whole tile of `w × h` pixels, pitch `w`.
    fn whole(ptr: CUdeviceptr, w: u32, h: u32, block: Arc<DevBlock>) -> DevTile {
        DevTile { ptr, x: 0, y: 0, w, h, pitch: w, partial: false, _block: block }
    }
}

impl CacheWeight for DevTile {
    fn byte_size(&self) -> usize {
        self.pitch as usize * self.h as usize * 4 + std::mem::size_of::<Self>()
    }
}

/// A growable device buffer owned by one slot (used only while the slot's stream is idle).
struct DevMem {
    ptr: CUdeviceptr,
    len: usize,
    /// Registered with cuFile (`cuFileBufRegister`).
    registered: bool,
}

impl DevMem {
    const fn new() -> DevMem {
        DevMem { ptr: 0, len: 0, registered: false }
    }

    /// Make room for `len` bytes (contents not kept). The owner's stream must be idle.
    fn ensure(&mut self, len: usize, register: Option<&CuFile>) -> Res<()> {
        if self.len >= len && (register.is_none() || self.registered) {
            return Ok(());
        }
        self.release(register);
        let (cuda, _, _) = libs()?;
        let want = len.max(1 << 20).next_power_of_two();
        let mut p = 0;
        // SAFETY: out-pointer to a local.
        cu(unsafe { (cuda.cuMemAlloc)(&mut p, want) }, "cuMemAlloc")?;
        self.ptr = p;
        self.len = want;
        if let Some(cf) = register {
            // SAFETY: a device allocation of `want` bytes; deregistered before it is freed.
            let e = unsafe { (cf.cuFileBufRegister)(p as *const c_void, want, 0) };
            self.registered = e.err == 0;
        }
        Ok(())
    }

    fn release(&mut self, cufile: Option<&CuFile>) {
        if self.ptr == 0 {
            return;
        }
        if let Ok((cuda, _, _)) = libs() {
            // SAFETY: allocated in `ensure`, freed once; the stream using it is idle.
            unsafe {
                if self.registered {
                    if let Some(cf) = cufile {
                        (cf.cuFileBufDeregister)(self.ptr as *const c_void);
                    }
                }
                (cuda.cuMemFree)(self.ptr);
            }
        }
        *self = DevMem::new();
    }
}

/// A growable pinned (page-locked) host buffer.
struct Pinned {
    ptr: *mut u8,
    len: usize,
}

impl Pinned {
    const fn new() -> Pinned {
        Pinned { ptr: std::ptr::null_mut(), len: 0 }
    }

    fn ensure(&mut self, len: usize) -> Res<()> {
        if self.len >= len {
            return Ok(());
        }
        self.release();
        let (cuda, _, _) = libs()?;
        let want = len.max(1 << 20).next_power_of_two();
        let mut p = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        cu(unsafe { (cuda.cuMemAllocHost)(&mut p, want) }, "cuMemAllocHost")?;
        self.ptr = p as *mut u8;
        self.len = want;
        Ok(())
    }

    fn as_mut_slice(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len);
        if len == 0 {
            return &mut [];
        }
        // SAFETY: `len` bytes of a live pinned allocation owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }

    fn release(&mut self) {
        if !self.ptr.is_null() {
            if let Ok((cuda, _, _)) = libs() {
                // SAFETY: allocated in `ensure`, freed once; no copy from it is pending.
                unsafe { (cuda.cuMemFreeHost)(self.ptr as *mut c_void) };
            }
        }
        *self = Pinned::new();
    }
}

/// Upload `bytes` to a fresh stream-ordered allocation on `stream` (freed by the caller with
/// `free_async` on the same stream once the kernels using it were launched).
fn upload_async(bytes: &[u8], stream: CUstream) -> Res<CUdeviceptr> {
    let (cuda, _, _) = libs()?;
    let mut p = 0;
    // SAFETY: out-pointer; the copy reads `bytes.len()` bytes of a live slice; for pageable
    // memory cuMemcpyHtoDAsync returns once the data were staged, so the slice may go away.
    unsafe {
        cu((cuda.cuMemAllocAsync)(&mut p, bytes.len().max(1), stream), "cuMemAllocAsync")?;
        if !bytes.is_empty() {
            cu((cuda.cuMemcpyHtoDAsync)(p, bytes.as_ptr() as *const c_void, bytes.len(), stream), "cuMemcpyHtoDAsync")?;
        }
    }
    Ok(p)
}

fn free_async(p: CUdeviceptr, stream: CUstream) {
    if let Ok((cuda, _, _)) = libs() {
        // SAFETY: a stream-ordered allocation made on `stream`, freed once after its last use
        // was enqueued on the same stream.
        unsafe { (cuda.cuMemFreeAsync)(p, stream) };
    }
}

fn as_bytes<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: T is a repr(C) plain-old-data descriptor; viewing it as bytes is sound.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

// ---------------------------------------------------------------------------------------------
// Kernel descriptors (layouts match kernels.cu)

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ConvDesc {
    planes: [u64; 3],
    pitch: [c_int; 3],
    pw: [c_int; 3],
    ph: [c_int; 3],
    sub_h: c_int,
    sub_v: c_int,
    kind: c_int,
    w: c_int,
    h: c_int,
    pad: c_int,
    out: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct TileRef {
    ptr: u64,
    x0: i64,
    y0: i64,
    w: c_int,
    h: c_int,
    pitch: c_int,
    pad: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PatchDesc {
    rx: i64,
    ry: i64,
    col0: i64,
    row0: i64,
    gcols: c_int,
    grows: c_int,
    grid: c_int,
    pad: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SpliceDesc {
    src: u64,
    dst: u64,
    len: c_int,
    pad: c_int,
}

/// A raw pointer to a kernel parameter, as `cuLaunchKernel` wants them.
fn arg<T>(v: &mut T) -> *mut c_void {
    v as *mut T as *mut c_void
}

struct Funcs {
    convert: *mut c_void,
    assemble: *mut c_void,
    splice: *mut c_void,
    sof_scan: *mut c_void,
}

fn launch(f: *mut c_void, grid: (u32, u32, u32), block: (u32, u32, u32), stream: CUstream, params: &mut [*mut c_void], what: &str) -> Res<()> {
    let (cuda, _, _) = libs()?;
    // SAFETY: `params` point to locals matching the kernel's parameter list (checked by the
    // callers against kernels.cu); buffers they reference outlive the stream's synchronisation.
    cu(
        unsafe { (cuda.cuLaunchKernel)(f, grid.0, grid.1, grid.2, block.0, block.1, block.2, 0, stream, params.as_mut_ptr(), std::ptr::null_mut()) },
        what,
    )
}

fn nvrtc_ptx(src: &str, arch: &str) -> Res<Vec<u8>> {
    let rtc = Nvrtc::load().map_err(GpuError::Unavailable)?;
    let csrc = CString::new(src).map_err(|_| GpuError::Call("NUL in kernel source".into()))?;
    let name = CString::new("slidestream_kernels.cu").expect("static");
    let opt = CString::new(format!("--gpu-architecture={arch}")).expect("static");
    let opts = [opt.as_ptr()];
    let mut prog = std::ptr::null_mut();
    // SAFETY: NVRTC calls with valid C strings; the program is destroyed on every path.
    unsafe {
        let rc = (rtc.nvrtcCreateProgram)(&mut prog, csrc.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null());
        if rc != 0 {
            return Err(GpuError::Call(format!("nvrtcCreateProgram returned {rc}")));
        }
        let rc = (rtc.nvrtcCompileProgram)(prog, 1, opts.as_ptr());
        if rc != 0 {
            let mut n = 0usize;
            (rtc.nvrtcGetProgramLogSize)(prog, &mut n);
            let mut log = vec![0u8; n.max(1)];
            (rtc.nvrtcGetProgramLog)(prog, log.as_mut_ptr() as *mut std::ffi::c_char);
            (rtc.nvrtcDestroyProgram)(&mut prog);
            return Err(GpuError::Call(format!("NVRTC compile failed: {}", String::from_utf8_lossy(&log))));
        }
        let mut n = 0usize;
        (rtc.nvrtcGetPTXSize)(prog, &mut n);
        let mut ptx = vec![0u8; n];
        (rtc.nvrtcGetPTX)(prog, ptx.as_mut_ptr() as *mut std::ffi::c_char);
        (rtc.nvrtcDestroyProgram)(&mut prog);
        Ok(ptx)
    }
}

// ---------------------------------------------------------------------------------------------
// Lanes and slots

/// One half of a lane's double buffer.
struct Slot {
    stream: CUstream,
    state: nvjpegJpegState,
    batch: c_int,
    dev_state: nvjpegJpegState,
    dev_batch: c_int,
    /// Planar nvJPEG outputs of the chunk.
    scratch: DevMem,
    /// cuFile read staging (device).
    staging: DevMem,
    /// Spliced device bitstreams (cuFile path).
    spliced: DevMem,
    /// POSIX read staging / device-to-host copies (pinned host).
    pinned: Pinned,
    /// Spliced host bitstreams of the chunk in flight (pinned: nvJPEG copies them to the
    /// device; measured faster than pageable memory).
    arena: Pinned,
}

/// Two slots used alternately by one caller at a time.
struct Lane {
    slots: [Slot; 2],
}

// Handles are used by one thread at a time (a lane is taken out of the pool for a call).
unsafe impl Send for Lane {}

/// A CPU decode worker's device resources: a stream for its uploads and two pinned buffers
/// (one filled while the other's copy runs).
struct CpuSlot {
    stream: CUstream,
    bufs: [Pinned; 2],
}

// Used by one worker thread at a time (taken out of the engine's pool for a call).
unsafe impl Send for CpuSlot {}

impl CpuSlot {
    fn new() -> Res<CpuSlot> {
        let (cuda, _, _) = libs()?;
        let mut stream = std::ptr::null_mut();
        // SAFETY: out-pointer to a local; the engine's context is current.
        cu(unsafe { (cuda.cuStreamCreate)(&mut stream, CU_STREAM_NON_BLOCKING) }, "cuStreamCreate")?;
        Ok(CpuSlot { stream, bufs: [Pinned::new(), Pinned::new()] })
    }
}

/// The sorted tiles of one call (costliest CPU decodes first), shared by its decoders: GPU lanes
/// take chunks from the front, CPU workers runs from the back, until the ends meet (every tile
/// is taken once).
struct WorkQueue<'a> {
    misses: &'a [Miss],
    /// Next tile of the front, one past the last of the back.
    ends: Mutex<(usize, usize)>,
}

impl<'a> WorkQueue<'a> {
    fn new(misses: &'a [Miss]) -> WorkQueue<'a> {
        WorkQueue { misses, ends: Mutex::new((0, misses.len())) }
    }

    /// Up to `n` tiles from the front (empty when none are left).
    #[cfg(test)]
    fn front(&self, n: usize) -> &'a [Miss] {
        self.front_guided(n, n, 1)
    }

    /// Up to `max` tiles from the front, fewer as the queue runs low: `left / share`, at least
    /// `min` (guided scheduling: a lane keeps two chunks in flight, so big chunks taken near the
    /// end would keep it busy after the CPU workers ran out of tiles).
    fn front_guided(&self, max: usize, min: usize, share: usize) -> &'a [Miss] {
        let mut g = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = *g;
        let k = ((b - a) / share.max(1)).clamp(min.clamp(1, max.max(1)), max.max(1)).min(b - a);
        g.0 = a + k;
        &self.misses[a..a + k]
    }

    /// Up to `n` tiles from the back (empty when none are left).
    fn back(&self, n: usize) -> &'a [Miss] {
        let mut g = self.ends.lock().unwrap_or_else(|p| p.into_inner());
        let (a, b) = *g;
        let k = n.min(b - a);
        g.1 = b - k;
        &self.misses[b - k..b]
    }
}

/// I/O path chosen at engine start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IoPath {
    Posix,
    CuFileGds,
    CuFileCompat,
}

impl IoPath {
    fn name(self) -> &'static str {
        match self {
            IoPath::Posix => "posix",
            IoPath::CuFileGds => "cufile",
            IoPath::CuFileCompat => "cufile-compat",
        }
    }
}

/// Phases timed when `SLIDESTREAM_GPU_TRACE` is set (nanoseconds, summed over threads).
const TRACE_PHASES: [&str; 9] = ["read", "splice+info", "nvjpeg call", "convert launch", "slot wait", "cpu decode+upload", "assemble", "output alloc", "cache insert"];

fn trace_on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    // Read once; `Engine::start` has already checked the value (a bad one fails the start).
    *ON.get_or_init(|| crate::config::settings().is_ok_and(|s| s.gpu_trace))
}

#[derive(Default)]
struct Counters {
    trace: [AtomicU64; 9],
    posix_bytes: AtomicU64,
    posix_requests: AtomicU64,
    gds_bytes: AtomicU64,
    gds_requests: AtomicU64,
    compat_bytes: AtomicU64,
    compat_requests: AtomicU64,
    tile_bytes: AtomicU64,
    hardware: AtomicU64,
    device_bitstream: AtomicU64,
    hybrid: AtomicU64,
    cpu: AtomicU64,
    cpu_partial: AtomicU64,
    batch_fallbacks: AtomicU64,
    cufile_handle_failures: AtomicU64,
}

/// A cuFile handle of one open slide's file (deregistered and closed with the slide).
struct CuFileHandle {
    handle: *mut c_void,
    _file: std::fs::File,
}

unsafe impl Send for CuFileHandle {}
unsafe impl Sync for CuFileHandle {}

/// Everything of one device.
pub(crate) struct Engine {
    device: usize,
    ctx: CUcontext,
    pid: u32,
    funcs: Funcs,
    nvj_host: nvjpegHandle,
    host_backend: &'static str,
    engines: u32,
    nvj_dev: Option<nvjpegHandle>,
    dev_backend_reason: String,
    free_stream: CUstream,
    /// Free lanes and the number created. Boxed: a lane (two slots of buffers and handles)
    /// moves between the pool and its callers.
    #[allow(clippy::vec_box)]
    lanes: Mutex<(Vec<Box<Lane>>, usize)>,
    lane_free: Condvar,
    cache: TileCache<DevTile>,
    counters: Counters,
    cpu_reason: Mutex<String>,
    cufile_error: Mutex<String>,
    mode: CompatMode,
    io: IoPath,
    io_reason: String,
    io_error: Option<String>,
    cufile: Option<&'static CuFile>,
    files: Mutex<HashMap<u64, Option<Arc<CuFileHandle>>>>,
    /// CPU decode workers that join the GPU lanes on large batches
    /// (`SLIDESTREAM_GPU_CPU_WORKERS`), and their idle resources (stream + pinned buffers).
    cpu_workers: usize,
    #[allow(clippy::vec_box)]
    cpu_slots: Mutex<(Vec<Box<CpuSlot>>, usize)>,
    gpu_workers: usize,
    /// Order of the work queue: by estimated CPU cost, then offset (`true`, default), or by
    /// offset only (`SLIDESTREAM_GPU_SPLIT=offset`).
    split_by_cost: bool,
    /// Smallest chunk a lane takes as the queue runs low (`SLIDESTREAM_GPU_MIN_CHUNK`, 1–256;
    /// 256 = fixed chunks).
    min_chunk: usize,
    /// Bytes of device memory held by live tile blocks (cached tiles and tiles of calls in
    /// flight).
    held: Arc<AtomicU64>,
    /// nvJPEG output format: `NVJPEG_OUTPUT_UNCHANGED` or `NVJPEG_OUTPUT_YUV` (both planar
    /// components as coded for 3-component streams; `SLIDESTREAM_NVJPEG_OUTPUT=yuv|unchanged`).
    nvj_output: c_int,
}

// CUDA contexts, streams, modules and nvJPEG handles may be used from any thread; per-thread
// state (nvJPEG states, buffers) lives in lanes handed to one caller at a time.
unsafe impl Send for Engine {}
unsafe impl Sync for Engine {}

static ENGINES: OnceLock<Mutex<HashMap<usize, Arc<Engine>>>> = OnceLock::new();

fn engines() -> std::sync::MutexGuard<'static, HashMap<usize, Arc<Engine>>> {
    ENGINES
        .get_or_init(|| {
            // A closed slide's tiles leave the device caches (and its cuFile handle is dropped).
            crate::cache::registry::register_hook(purge_slide);
            Default::default()
        })
        .lock().unwrap_or_else(|p| p.into_inner())
}

/// The engine of `device`, started on first use. Refuses in a process forked after CUDA was
/// initialised.
fn engine(device: usize) -> Result<Arc<Engine>> {
    let mut map = engines();
    if let Some(e) = map.get(&device) {
        if e.pid != pid() {
            return Err(GpuError::Fork { parent: e.pid, child: pid() }.into());
        }
        return Ok(e.clone());
    }
    if let Some(other) = map.values().next() {
        if other.pid != pid() {
            return Err(GpuError::Fork { parent: other.pid, child: pid() }.into());
        }
    }
    let t0 = std::time::Instant::now();
    let e = Arc::new(Engine::start(device)?);
    let t1 = std::time::Instant::now();
    if let Err(err) = e.warm_up() {
        e.note_cpu(format!("engine warm-up failed ({err}): the first large read pays the set-up"));
    }
    if trace_on() {
        eprintln!("[slidestream gpu trace] engine start on device {device}: {:.1} ms, warm-up {:.1} ms", (t1 - t0).as_secs_f64() * 1e3, t1.elapsed().as_secs_f64() * 1e3);
    }
    map.insert(device, e.clone());
    Ok(e)
}

/// The engine of `device` if it was started in this process (never starts CUDA).
fn existing(device: usize) -> Option<Arc<Engine>> {
    engines().get(&device).filter(|e| e.pid == pid()).cloned()
}

fn nvfs_loaded() -> bool {
    std::path::Path::new("/proc/driver/nvidia-fs").exists() || std::path::Path::new("/sys/module/nvidia_fs").exists()
}

fn static_cufile() -> std::result::Result<&'static CuFile, String> {
    static CF: OnceLock<std::result::Result<CuFile, String>> = OnceLock::new();
    CF.get_or_init(|| {
        let cf = CuFile::load()?;
        // SAFETY: documented entry point; only reached after a CUDA device was found (it does
        // not return without a GPU driver).
        let e = unsafe { (cf.cuFileDriverOpen)() };
        if e.err != 0 {
            return Err(format!("cuFileDriverOpen failed (CUfileOpError {}, CUresult {})", e.err, e.cu_err));
        }
        Ok(cf)
    })
    .as_ref()
    .map_err(|e| e.clone())
}

impl Engine {
    fn time<T>(&self, phase: usize, f: impl FnOnce() -> T) -> T {
        if !trace_on() {
            return f();
        }
        let t0 = std::time::Instant::now();
        let r = f();
        self.counters.trace[phase].fetch_add(t0.elapsed().as_nanos() as u64, Relaxed);
        r
    }

    fn start(device: usize) -> Result<Engine> {
        // Every engine setting, checked and then fixed for the process (docs/settings.md).
        let cfg = crate::config::consume(crate::config::GPU_ENGINE_SETTINGS)?;
        let report = super::probe()?;
        let (_, ma, mi) = report.devices.get(device).cloned().ok_or_else(|| GpuError::Unavailable(format!("no CUDA device {device}")))?;
        let (cuda, nvj, why) = libs()?;
        let nvj = nvj.as_ref().ok_or_else(|| GpuError::Unavailable(why.clone().unwrap_or_else(|| "nvJPEG not loaded".into())))?;
        let mut ctx = std::ptr::null_mut();
        let mut free_stream = std::ptr::null_mut();
        // SAFETY: out-pointers to locals; documented call order.
        unsafe {
            let mut dev = 0;
            cu((cuda.cuDeviceGet)(&mut dev, device as c_int), "cuDeviceGet")?;
            // How host threads wait for the device (`SLIDESTREAM_GPU_SYNC`): only settable
            // before the primary context is active (else the current setting stays).
            let sched = match cfg.gpu_sync {
                crate::config::GpuSync::Spin => Some(CU_CTX_SCHED_SPIN),
                crate::config::GpuSync::Yield => Some(CU_CTX_SCHED_YIELD),
                crate::config::GpuSync::Blocking => Some(CU_CTX_SCHED_BLOCKING_SYNC),
                crate::config::GpuSync::Auto => None,
            };
            if let Some(f) = sched {
                (cuda.cuDevicePrimaryCtxSetFlags)(dev, f);
            }
            cu((cuda.cuDevicePrimaryCtxRetain)(&mut ctx, dev), "cuDevicePrimaryCtxRetain")?;
            cu((cuda.cuCtxSetCurrent)(ctx), "cuCtxSetCurrent")?;
            cu((cuda.cuStreamCreate)(&mut free_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")?;
            // Keep freed tile memory in the pool (no return to the OS at every synchronisation).
            let mut pool = std::ptr::null_mut();
            if (cuda.cuDeviceGetDefaultMemPool)(&mut pool, dev) == 0 {
                let mut threshold = u64::MAX;
                (cuda.cuMemPoolSetAttribute)(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, arg(&mut threshold));
            }
        }
        // Kernels.
        let ptx = nvrtc_ptx(KERNELS, &format!("compute_{ma}{mi}"))?;
        let mut module = std::ptr::null_mut();
        // SAFETY: NUL-terminated PTX from NVRTC; the context is current.
        cu(unsafe { (cuda.cuModuleLoadData)(&mut module, ptx.as_ptr() as *const c_void) }, "cuModuleLoadData")?;
        let func = |name: &str| -> Res<*mut c_void> {
            let c = CString::new(name).expect("static");
            let mut f = std::ptr::null_mut();
            // SAFETY: module loaded above; name NUL-terminated.
            cu(unsafe { (cuda.cuModuleGetFunction)(&mut f, module, c.as_ptr()) }, "cuModuleGetFunction")?;
            Ok(f)
        };
        let funcs = Funcs { convert: func("convert")?, assemble: func("assemble")?, splice: func("splice")?, sof_scan: func("sof_scan")? };
        // nvJPEG: hardware backend for host bitstreams where present, else the default one.
        let mut nvj_host = std::ptr::null_mut();
        let (mut host_backend, mut engines_n) = ("default", 0u32);
        // SAFETY: out-pointers to locals.
        unsafe {
            if (nvj.nvjpegCreateEx)(NVJPEG_BACKEND_HARDWARE, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut nvj_host) == 0 {
                host_backend = "hardware";
                let (mut e, mut c) = (0, 0);
                if (nvj.nvjpegGetHardwareDecoderInfo)(nvj_host, &mut e, &mut c) == 0 {
                    engines_n = e;
                }
            } else {
                nv((nvj.nvjpegCreateEx)(NVJPEG_BACKEND_DEFAULT, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut nvj_host), "nvjpegCreateEx")?;
            }
        }
        // I/O path (KvikIO-style compat mode).
        let mode = cfg.compat_mode;
        let (mut io, mut io_reason, mut io_error, mut cufile) = (IoPath::Posix, String::new(), None, None);
        match mode {
            CompatMode::On => io_reason = "SLIDESTREAM_COMPAT_MODE=on: POSIX reads into pinned host memory".into(),
            CompatMode::Off | CompatMode::Auto => match static_cufile() {
                Err(e) if mode == CompatMode::Off => io_error = Some(format!("SLIDESTREAM_COMPAT_MODE=off needs cuFile: {e}")),
                Err(e) => io_reason = format!("cuFile unavailable ({e}): POSIX reads into pinned host memory"),
                Ok(cf) => {
                    let gds = nvfs_loaded();
                    if gds {
                        io = IoPath::CuFileGds;
                        cufile = Some(cf);
                    } else if mode == CompatMode::Off {
                        io = IoPath::CuFileCompat;
                        cufile = Some(cf);
                        io_reason = "nvidia-fs kernel module not loaded: cuFile runs in its compatibility mode (POSIX reads into its bounce buffers, then copies to the device)".into();
                    } else {
                        io_reason = "nvidia-fs kernel module not loaded, so GPUDirect Storage is inactive and cuFile would only add a bounce-buffer copy: POSIX reads into pinned host memory (SLIDESTREAM_COMPAT_MODE=off forces cuFile)".into();
                    }
                }
            },
        }
        // Device-bitstream decoder for the cuFile path.
        let (mut nvj_dev, mut dev_backend_reason) = (None, String::new());
        if cufile.is_some() {
            for (backend, name) in [(NVJPEG_BACKEND_HARDWARE_DEVICE, "HARDWARE_DEVICE"), (NVJPEG_BACKEND_GPU_HYBRID_DEVICE, "GPU_HYBRID_DEVICE")] {
                let mut h = std::ptr::null_mut();
                // SAFETY: out-pointer to a local.
                let rc = unsafe { (nvj.nvjpegCreateEx)(backend, std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut h) };
                if rc == 0 {
                    nvj_dev = Some(h);
                    dev_backend_reason = name.to_string();
                    break;
                }
                dev_backend_reason.push_str(&format!("nvjpegCreateEx({name}) returned {rc}; "));
            }
        }
        let cache_bytes = usize::try_from(cfg.device_cache_bytes).unwrap_or(usize::MAX);
        let gpu_workers = cfg.gpu_workers.clamp(1, MAX_LANES);
        // CPU decoders beside the lanes: by default one per core the lanes leave (each lane's
        // thread prepares chunks and waits on nvJPEG), at most `DEFAULT_MAX_CPU_WORKERS` (each
        // holds a stream and two pinned buffers for the process).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu_workers = cfg.gpu_cpu_workers.map_or(cores.saturating_sub(gpu_workers).min(DEFAULT_MAX_CPU_WORKERS), |v| v.min(256));
        Ok(Engine {
            device,
            ctx,
            pid: pid(),
            funcs,
            nvj_host,
            host_backend,
            engines: engines_n,
            nvj_dev,
            dev_backend_reason,
            free_stream,
            lanes: Mutex::new((Vec::new(), 0)),
            lane_free: Condvar::new(),
            cache: TileCache::new(cache_bytes),
            counters: Counters::default(),
            cpu_reason: Mutex::new(String::new()),
            cufile_error: Mutex::new(String::new()),
            mode,
            io,
            io_reason,
            io_error,
            cufile,
            files: Mutex::new(HashMap::new()),
            cpu_workers,
            cpu_slots: Mutex::new((Vec::new(), 0)),
            gpu_workers,
            split_by_cost: cfg.gpu_split == crate::config::GpuSplit::Cost,
            min_chunk: cfg.gpu_min_chunk.clamp(1, CHUNK_TILES),
            held: Arc::new(AtomicU64::new(0)),
            nvj_output: match cfg.nvjpeg_output {
                crate::config::NvjpegOutput::Yuv => NVJPEG_OUTPUT_YUV,
                crate::config::NvjpegOutput::Unchanged => NVJPEG_OUTPUT_UNCHANGED,
            },
        })
    }

    /// Start-up work that would otherwise land on the first large read (measured on the H200:
    /// about 1.3 s more for the first 4096-tile batch than for the next): the decode lanes
    /// (streams, nvJPEG states, scratch / pinned buffers), nvJPEG's batched-decode internals (each
    /// slot decodes one chunk of [`CHUNK_TILES`] synthetic 256² 4:2:0 tiles), and the CPU decode
    /// workers' streams and pinned buffers.
    fn warm_up(&self) -> Res<()> {
        let (w, h) = (256usize, 256usize);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| ((i * 7 + i / 768) % 251) as u8).collect();
        let jpeg = (|| {
            let mut c = turbojpeg::Compressor::new()?;
            c.set_quality(85)?;
            c.set_subsamp(turbojpeg::Subsamp::Sub2x2)?;
            c.compress_to_vec(turbojpeg::Image { pixels: &rgb[..], width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB })
        })()
        .map_err(|e| GpuError::Call(format!("warm-up JPEG: {e}")))?;
        let mut taken = self.take_free(self.gpu_workers, self.cpu_workers)?;
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

    /// Up to `lanes` free lanes (made while fewer than `gpu_workers` exist, never waiting) and up
    /// to `cpu` CPU workers' resources, in a guard that gives them back when dropped.
    fn take_free(&self, lanes: usize, cpu: usize) -> Res<Taken<'_>> {
        let mut taken = Taken { e: self, lanes: Vec::new(), cpu: Vec::new() };
        while taken.lanes.len() < lanes {
            match self.try_take_lane() {
                Some(Ok(l)) => taken.lanes.push(l),
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        taken.cpu = self.take_cpu_slots(cpu);
        Ok(taken)
    }

    /// One batched nvJPEG decode of [`CHUNK_TILES`] copies of `jpeg` (a `w × h` 4:2:0 stream)
    /// on `slot`, laid out as `decode_convert` lays out a chunk.
    fn warm_slot(&self, slot: &mut Slot, jpeg: &[u8], w: c_int, h: c_int) -> Res<()> {
        let (cuda, nvj, _) = libs()?;
        let nvj = nvj.as_ref().ok_or_else(|| GpuError::Unavailable("nvJPEG not loaded".into()))?;
        let n = CHUNK_TILES;
        let g = geo_of(w, h, (2, 2));
        let plane = |c: usize| (g.pw[c] as usize) * (g.ph[c] as usize + 16) + 64;
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
                    im.channel[c] = (slot.scratch.ptr as usize + o) as *mut u8;
                    im.pitch[c] = g.pw[c] as usize;
                    o += plane(c);
                }
                im
            })
            .collect();
        // SAFETY: arrays of n entries; output planes inside the scratch allocation sized above;
        // the bitstreams (slot-owned pinned memory) outlive the synchronisation below.
        unsafe {
            if slot.batch != n as c_int {
                nv((nvj.nvjpegDecodeBatchedInitialize)(self.nvj_host, slot.state, n as c_int, 1, self.nvj_output), "nvjpegDecodeBatchedInitialize")?;
                slot.batch = n as c_int;
            }
            let r = nv((nvj.nvjpegDecodeBatched)(self.nvj_host, slot.state, ptrs.as_ptr(), lens.as_ptr(), images.as_mut_ptr(), slot.stream), "nvjpegDecodeBatched(warm-up)");
            if r.is_err() {
                slot.batch = -1; // initialise again before the next batch
            }
            let s = cu((cuda.cuStreamSynchronize)(slot.stream), "cuStreamSynchronize");
            r.and(s)
        }
    }

    fn make_current(&self) -> Res<()> {
        let (cuda, _, _) = libs()?;
        // SAFETY: the engine's retained primary context.
        cu(unsafe { (cuda.cuCtxSetCurrent)(self.ctx) }, "cuCtxSetCurrent")
    }

    fn new_lane(&self) -> Res<Box<Lane>> {
        let (cuda, nvj, _) = libs()?;
        let nvj = nvj.as_ref().ok_or_else(|| GpuError::Unavailable("nvJPEG not loaded".into()))?;
        let mk = || -> Res<Slot> {
            let mut stream = std::ptr::null_mut();
            let mut state = std::ptr::null_mut();
            let mut dev_state = std::ptr::null_mut();
            // SAFETY: out-pointers to locals; handles created at engine start.
            unsafe {
                cu((cuda.cuStreamCreate)(&mut stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")?;
                nv((nvj.nvjpegJpegStateCreate)(self.nvj_host, &mut state), "nvjpegJpegStateCreate")?;
                if let Some(h) = self.nvj_dev {
                    nv((nvj.nvjpegJpegStateCreate)(h, &mut dev_state), "nvjpegJpegStateCreate(device)")?;
                }
            }
            Ok(Slot { stream, state, batch: -1, dev_state, dev_batch: -1, scratch: DevMem::new(), staging: DevMem::new(), spliced: DevMem::new(), pinned: Pinned::new(), arena: Pinned::new() })
        };
        Ok(Box::new(Lane { slots: [mk()?, mk()?] }))
    }

    fn take_lane(&self) -> Res<Box<Lane>> {
        // A rayon worker thread must not wait: while it waits, rayon may run another job on it,
        // and a job further up its own stack may hold a lane (work stealing inside the parallel
        // reads of a lane's holder), so waiting could deadlock. It gets an extra lane instead
        // (made on demand, so slow the first time), up to `MAX_OVERFLOW_LANES`.
        let may_wait = rayon::current_thread_index().is_none();
        let mut g = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(l) = g.0.pop() {
                return Ok(l);
            }
            if g.1 < self.gpu_workers || (!may_wait && g.1 < MAX_OVERFLOW_LANES) {
                g.1 += 1;
                drop(g);
                return self.new_lane().inspect_err(|_| self.lane_failed());
            }
            g = self.lane_free.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A lane could not be made: uncount it and wake a waiter (which may make it, or report
    /// the error itself).
    fn lane_failed(&self) {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner()).1 -= 1;
        self.lane_free.notify_one();
    }

    /// A lane if one is free or may still be created, without waiting.
    fn try_take_lane(&self) -> Option<Res<Box<Lane>>> {
        let mut g = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = g.0.pop() {
            return Some(Ok(l));
        }
        if g.1 >= self.gpu_workers {
            return None;
        }
        g.1 += 1;
        drop(g);
        Some(self.new_lane().inspect_err(|_| self.lane_failed()))
    }

    fn give_lane(&self, lane: Box<Lane>) {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner()).0.push(lane);
        self.lane_free.notify_one();
    }

    fn note_cpu(&self, reason: String) {
        *self.cpu_reason.lock().unwrap_or_else(|p| p.into_inner()) = reason;
    }

    fn stats(&self) -> GpuStats {
        let c = &self.counters;
        GpuStats {
            compat_mode: self.mode.as_str().into(),
            io_path: self.io.name().into(),
            io_reason: match &self.io_error {
                Some(e) => e.clone(),
                None => self.io_reason.clone(),
            },
            posix_bytes: c.posix_bytes.load(Relaxed),
            posix_requests: c.posix_requests.load(Relaxed),
            cufile_gds_bytes: c.gds_bytes.load(Relaxed),
            cufile_gds_requests: c.gds_requests.load(Relaxed),
            cufile_compat_bytes: c.compat_bytes.load(Relaxed),
            cufile_compat_requests: c.compat_requests.load(Relaxed),
            cufile_handle_failures: c.cufile_handle_failures.load(Relaxed),
            cufile_handle_error: self.cufile_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            tile_bytes: c.tile_bytes.load(Relaxed),
            device_tile_bytes: self.held.load(Relaxed),
            decoded_hardware: c.hardware.load(Relaxed),
            decoded_device_bitstream: c.device_bitstream.load(Relaxed),
            decoded_hybrid: c.hybrid.load(Relaxed),
            decoded_cpu: c.cpu.load(Relaxed),
            decoded_cpu_partial: c.cpu_partial.load(Relaxed),
            gpu_lanes: self.gpu_workers,
            cpu_workers: self.cpu_workers,
            gpu_batch_fallbacks: c.batch_fallbacks.load(Relaxed),
            cpu_fallback_reason: self.cpu_reason.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            cache: self.cache.stats(),
            nvjpeg_backend: if self.nvj_dev.is_some() && self.io != IoPath::Posix {
                format!("{} (host bitstreams), {} (device bitstreams)", self.host_backend, self.dev_backend_reason)
            } else {
                self.host_backend.into()
            },
            hardware_engines: self.engines,
        }
    }

    /// The cuFile handle of `slide`'s file, registered on first use; `None` (with the reason
    /// noted) when the slide is not a local file or registration fails.
    fn cufile_handle(&self, slide: &Slide) -> Option<Arc<CuFileHandle>> {
        let cf = self.cufile?;
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        files
            .entry(slide.id())
            .or_insert_with(|| {
                use std::os::unix::fs::OpenOptionsExt;
                use std::os::unix::io::AsRawFd;
                const O_DIRECT: i32 = 0o40000; // x86-64 Linux <fcntl.h>
                let path = slide.index().path();
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(O_DIRECT)
                    .open(path)
                    .or_else(|_| std::fs::File::open(path))
                    .ok()?;
                if file.metadata().ok()?.len() != slide.source().len() {
                    return None; // not the bytes the slide was opened from
                }
                let mut descr = CUfileDescr { handle_type: CU_FILE_HANDLE_TYPE_OPAQUE_FD, handle: file.as_raw_fd() as usize, fs_ops: std::ptr::null() };
                let mut h = std::ptr::null_mut();
                // SAFETY: descriptor of an open fd; out-pointer to a local.
                let e = unsafe { (cf.cuFileHandleRegister)(&mut h, &mut descr) };
                if e.err != 0 {
                    let msg = format!("cuFileHandleRegister failed for {} (CUfileOpError {}): POSIX reads for this slide", path.display(), e.err);
                    self.counters.cufile_handle_failures.fetch_add(1, Relaxed);
                    *self.cufile_error.lock().unwrap_or_else(|p| p.into_inner()) = msg;
                    return None;
                }
                Some(Arc::new(CuFileHandle { handle: h, _file: file }))
            })
            .clone()
    }

    fn drop_file(&self, slide: u64) {
        let h = self.files.lock().unwrap_or_else(|p| p.into_inner()).remove(&slide);
        if let (Some(Some(h)), Some(cf)) = (h, self.cufile) {
            if let Ok(h) = Arc::try_unwrap(h) {
                // SAFETY: registered in `cufile_handle`, deregistered once before the fd closes.
                unsafe { (cf.cuFileHandleDeregister)(h.handle) };
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points used by `gpu/mod.rs`

pub(super) fn stats(device: usize) -> GpuStats {
    match existing(device) {
        Some(e) => e.stats(),
        None => GpuStats { compat_mode: CompatMode::from_env().map_or("invalid", |m| m.as_str()).into(), ..Default::default() },
    }
}

pub(super) fn start(device: usize) -> Result<GpuStats> {
    let e = engine(device)?;
    if let Some(err) = &e.io_error {
        return Err(GpuError::Unavailable(err.clone()).into());
    }
    Ok(e.stats())
}

pub(super) fn reset_stats(device: usize) {
    if let Some(e) = existing(device) {
        let c = &e.counters;
        for a in [
            &c.posix_bytes,
            &c.posix_requests,
            &c.gds_bytes,
            &c.gds_requests,
            &c.compat_bytes,
            &c.compat_requests,
            &c.tile_bytes,
            &c.hardware,
            &c.device_bitstream,
            &c.hybrid,
            &c.cpu,
            &c.cpu_partial,
            &c.batch_fallbacks,
            &c.cufile_handle_failures,
        ] {
            a.store(0, Relaxed);
        }
        e.cache.reset_counters();
        e.cufile_error.lock().unwrap_or_else(|p| p.into_inner()).clear();
        e.cpu_reason.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

pub(super) fn clear_cache(device: usize) {
    if let Some(e) = existing(device) {
        e.cache.clear();
    }
}

pub(super) fn purge_slide(id: u64) {
    let all: Vec<Arc<Engine>> = match ENGINES.get() {
        Some(m) => m.lock().unwrap_or_else(|p| p.into_inner()).values().filter(|e| e.pid == pid()).cloned().collect(),
        None => return,
    };
    for e in all {
        let _ = e.make_current();
        e.cache.purge_slide(id);
        e.drop_file(id);
    }
}

pub(super) fn download(a: &DeviceArray) -> Result<Vec<u8>> {
    if a.pid != pid() {
        return Err(GpuError::Fork { parent: a.pid, child: pid() }.into());
    }
    let e = engine(a.device)?;
    e.make_current()?;
    let (cuda, _, _) = libs()?;
    let n = a.nbytes();
    let mut v = vec![0u8; n];
    if n > 0 {
        // SAFETY: n bytes on both sides; the array's data are complete (its stream was synced).
        cu(unsafe { (cuda.cuMemcpyDtoH)(v.as_mut_ptr() as *mut c_void, a.ptr, n) }, "cuMemcpyDtoH")?;
    }
    Ok(v)
}

pub(super) fn free_array(a: &mut DeviceArray) {
    if a.ptr == 0 || a.pid != pid() {
        return;
    }
    if let Some(e) = existing(a.device) {
        if e.make_current().is_ok() {
            if let Ok((cuda, _, _)) = libs() {
                if a.exported.load(Relaxed) {
                    // SAFETY: allocated with cuMemAllocAsync in `read_regions`, freed once.
                    // cuMemFree of pool memory synchronises the device, so work still using the
                    // memory on any stream (a consumer's included) finishes first.
                    unsafe { (cuda.cuMemFree)(a.ptr) };
                } else {
                    // SAFETY: as above; the pointer never left slidestream and every use of it
                    // (the assembly, `download`'s synchronous copy) completed before the read
                    // or copy returned, so a stream-ordered free on any stream is safe.
                    unsafe { (cuda.cuMemFreeAsync)(a.ptr, e.free_stream) };
                }
            }
        }
    }
    a.ptr = 0;
}

/// One unique tile of a batch.
struct Need {
    col: u64,
    row: u64,
    /// Union of the parts the call's patches need, `(x0, y0, x1, y1)` in tile pixels,
    /// half-open.
    part: (u64, u64, u64, u64),
    tile: Option<Arc<DevTile>>,
    err: Option<Error>,
}

/// A tile waiting for a decoder.
#[derive(Clone, Copy)]
struct Miss {
    /// Index into the batch's `needs`.
    need: usize,
    col: u64,
    row: u64,
    offset: u64,
    len: u64,
    /// Decode only this part on a CPU worker (small parts, as the CPU path's
    /// `partial_decode_max_fraction`); the GPU lanes always decode whole tiles.
    part: Option<PartRect>,
    /// Estimated cost of the CPU worker's decode relative to a whole tile, in eighths (8 =
    /// whole): the queue puts the costliest first, for the GPU lanes, so the CPU workers take
    /// the parts they decode fastest.
    rank: u8,
}

pub(super) fn read_regions(slide: &Slide, locations: &[(i64, i64)], level: usize, size: (u64, u64), opts: &DeviceOptions) -> Result<DeviceBatch> {
    let e = engine(opts.device)?;
    if let Some(err) = &e.io_error {
        return Err(GpuError::Unavailable(err.clone()).into());
    }
    e.make_current()?;
    let mut taken = Taken { e: &e, lanes: vec![e.take_lane()?], cpu: Vec::new() };
    e.read_regions(&mut taken.lanes[0], slide, locations, level, size, opts)
}

/// Lanes and CPU workers' resources taken from an engine's pools, given back when dropped (a
/// panic included), so the pools never shrink.
struct Taken<'a> {
    e: &'a Engine,
    #[allow(clippy::vec_box)]
    lanes: Vec<Box<Lane>>,
    #[allow(clippy::vec_box)]
    cpu: Vec<Box<CpuSlot>>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        for l in self.lanes.drain(..) {
            self.e.give_lane(l);
        }
        if !self.cpu.is_empty() {
            self.e.give_cpu_slots(std::mem::take(&mut self.cpu));
        }
    }
}

/// Synchronises `stream` when dropped while `armed`.
struct SyncOnDrop {
    stream: CUstream,
    armed: bool,
}

impl Drop for SyncOnDrop {
    fn drop(&mut self) {
        if self.armed {
            if let Ok((cuda, _, _)) = libs() {
                // SAFETY: a stream of the engine, alive for the process.
                unsafe { (cuda.cuStreamSynchronize)(self.stream) };
            }
        }
    }
}

impl Engine {
    fn read_regions(&self, lane: &mut Lane, slide: &Slide, locations: &[(i64, i64)], level: usize, size: (u64, u64), opts: &DeviceOptions) -> Result<DeviceBatch> {
        let t_entry = std::time::Instant::now();
        let (cuda, _, _) = libs()?;
        let (img, ds, at) = slide.level_image(level)?;
        let n = locations.len();
        let ch = opts.channels as usize;
        let (w, h) = (size.0 as usize, size.1 as usize);
        let bytes = n * w * h * ch;
        // Output from the device's memory pool (reused across calls); freed when the array is
        // dropped (`free_array`: stream-ordered unless its pointer was handed out).
        let mut out = 0;
        if bytes > 0 {
            let stream = lane.slots[0].stream;
            // SAFETY: out-pointer to a local; the stream is synchronised before the array is
            // returned, so the allocation is complete for every consumer.
            self.time(7, || cu(unsafe { (cuda.cuMemAllocAsync)(&mut out, bytes, stream) }, "cuMemAllocAsync"))?;
        }
        let array = DeviceArray { ptr: out, shape: vec![n, h, w, ch], device: self.device, pid: self.pid, exported: Default::default() };
        if bytes == 0 {
            return Ok(DeviceBatch { array, errors: (0..n).map(|_| None).collect() });
        }
        // On an error return the allocation's stream is synchronised before `array` is freed on
        // the engine's free stream (declared after `array`, so dropped before it).
        let mut sync_on_error = SyncOnDrop { stream: lane.slots[0].stream, armed: true };
        // Tiles of every patch, deduplicated, and each patch's tile grid: the read layer's plan.
        let geom = crate::read::LevelGeom { slide: slide.id(), level: level as u32, image: img, downsample: ds };
        let plan = crate::read::BatchPlan::build(&geom, locations, size);
        let mut needs: Vec<Need> = plan.tiles.iter().map(|t| Need { col: t.key.col, row: t.key.row, part: t.part, tile: None, err: None }).collect();
        let grids: Vec<c_int> = plan.grid.iter().map(|&k| k as c_int).collect();
        let patch_tiles: Vec<std::ops::Range<usize>> = plan.patches.iter().map(|p| p.cells.clone()).collect();
        let patches: Vec<PatchDesc> = plan
            .patches
            .iter()
            .map(|p| PatchDesc {
                rx: p.rect.x,
                ry: p.rect.y,
                col0: p.col0 as i64,
                row0: p.row0 as i64,
                gcols: p.cols as c_int,
                grows: p.rows as c_int,
                grid: p.cells.start as c_int,
                pad: 0,
            })
            .collect();
        // Cache lookups, then decode the misses.
        let mut misses: Vec<Miss> = Vec::new();
        for (k, need) in needs.iter_mut().enumerate() {
            // Tile location from the read layer: missing = background; over-large: Limits;
            // past the end of the file: Format.
            let l = match crate::read::locate_tile(img, slide.source().len(), need.col, need.row, &at) {
                Ok(Some(l)) => l,
                Ok(None) => continue,
                Err(e) => {
                    need.err = Some(e);
                    continue;
                }
            };
            let key = TileKey { slide: slide.id(), level: level as u32, col: need.col, row: need.row };
            if let Some(t) = self.cache.get(&key) {
                need.tile = Some(t);
                continue;
            }
            let part = slide.part_if_small(img, (need.col, need.row), need.part);
            // The CPU decode cost model of the read layer (8 = a whole tile).
            let rank = crate::read::cost_rank(crate::read::decode_cost(part, img.valid_tile_size(need.col, need.row)));
            misses.push(Miss { need: k, col: need.col, row: need.row, offset: l.offset, len: l.length, part, rank });
        }
        let n_miss = misses.len();
        let t_all = std::time::Instant::now();
        if !misses.is_empty() {
            self.decode_misses(lane, slide, img, &at, level, &mut needs, misses)?;
        }
        let t_asm = std::time::Instant::now();
        // Per-patch errors.
        let mut errors: Vec<Option<Error>> = (0..n).map(|_| None).collect();
        for (p, r) in patch_tiles.iter().enumerate() {
            if let Some(err) = grids[r.clone()].iter().find_map(|&k| needs[k as usize].err.as_ref()) {
                errors[p] = Some(err.clone());
            }
        }
        // Assemble.
        let refs: Vec<TileRef> = needs
            .iter()
            .map(|nd| {
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
        let stream = lane.slots[0].stream;
        let d_refs = upload_async(as_bytes(&refs), stream)?;
        let d_grids = upload_async(as_bytes(&grids), stream)?;
        let d_patches = upload_async(as_bytes(&patches), stream)?;
        let (bx, by) = (32u32, 8u32);
        let (gx, gy) = ((w as u32).div_ceil(bx), (h as u32).div_ceil(by));
        let mut p0 = 0usize;
        let mut result = Ok(());
        while p0 < n && result.is_ok() {
            let pn = (n - p0).min(65535);
            let (mut a_refs, mut a_grids, mut a_patches, mut a_p0) = (d_refs, d_grids, d_patches, p0 as c_int);
            let (mut a_tw, mut a_th, mut a_w, mut a_h, mut a_ch) = (img.tile_width as c_int, img.tile_height as c_int, w as c_int, h as c_int, ch as c_int);
            let [mut r, mut g, mut b] = opts.background.map(|v| v as c_int);
            let mut a_out = out;
            let mut params = [
                arg(&mut a_refs),
                arg(&mut a_grids),
                arg(&mut a_patches),
                arg(&mut a_p0),
                arg(&mut a_tw),
                arg(&mut a_th),
                arg(&mut a_w),
                arg(&mut a_h),
                arg(&mut a_ch),
                arg(&mut r),
                arg(&mut g),
                arg(&mut b),
                arg(&mut a_out),
            ];
            result = launch(self.funcs.assemble, (gx, gy, pn as u32), (bx, by, 1), stream, &mut params, "cuLaunchKernel(assemble)");
            p0 += pn;
        }
        for p in [d_refs, d_grids, d_patches] {
            free_async(p, stream);
        }
        // SAFETY: the lane's stream; waits for the assembly (and the frees) to finish.
        let sync = cu(unsafe { (cuda.cuStreamSynchronize)(stream) }, "cuStreamSynchronize");
        result?;
        sync?;
        sync_on_error.armed = false;
        drop(needs); // tiles not cached are freed now that the kernels are done
        self.bound_held_bytes(0);
        if trace_on() {
            self.counters.trace[6].fetch_add(t_asm.elapsed().as_nanos() as u64, Relaxed);
            if n_miss >= 256 {
                let t: Vec<String> = TRACE_PHASES.iter().zip(&self.counters.trace).map(|(n, v)| format!("{n} {:.1} ms", v.swap(0, Relaxed) as f64 / 1e6)).collect();
                eprintln!(
                    "[slidestream gpu trace] {n} patches, {n_miss} tiles decoded in {:.1} ms (call {:.1} ms): {}",
                    t_all.elapsed().as_secs_f64() * 1e3,
                    t_entry.elapsed().as_secs_f64() * 1e3,
                    t.join(", ")
                );
            }
        }
        Ok(DeviceBatch { array, errors })
    }

    /// Decode `misses` into device tiles (`needs[m.need].tile`), or record their errors.
    #[allow(clippy::too_many_arguments)]
    fn decode_misses(&self, lane: &mut Lane, slide: &Slide, img: &ImageIndex, at: &Location, level: usize, needs: &mut [Need], mut misses: Vec<Miss>) -> Result<()> {
        let c = &img.codec;
        let gpu_level = c.compression == Compression::Jpeg && !c.planar_separate && c.samples_per_pixel == 3 && img.tile_width <= MAX_GPU_TILE_EDGE && img.tile_height <= MAX_GPU_TILE_EDGE;
        self.counters.tile_bytes.fetch_add(misses.iter().map(|m| m.len).sum(), Relaxed);
        // Cost order only matters when CPU workers will take the back of the queue; otherwise
        // offset order keeps the lanes' reads coalesced.
        if self.split_by_cost && misses.len() >= MIN_CPU_SHARE_TILES && self.cpu_workers > 0 {
            misses.sort_by_key(|m| (std::cmp::Reverse(m.rank), m.offset));
        } else {
            misses.sort_by_key(|m| m.offset);
        }
        // JPEG levels nvJPEG can take go to the GPU lanes (with CPU workers decoding from the
        // other end of the same queue); the rest to the CPU decoders.
        let (gpu, cpu) = if gpu_level {
            (misses, Vec::new())
        } else {
            if c.compression == Compression::Jpeg {
                self.note_cpu(format!("{at}: JPEG with {} samples (planar {}) goes to the CPU decoder", c.samples_per_pixel, c.planar_separate));
            }
            (Vec::new(), misses)
        };
        let ctx = self.ctx;
        let gpu_done = if gpu.is_empty() { Ok(Vec::new()) } else { self.gpu_decode_parallel(lane, slide, img, at, &gpu) };
        let cpu_done = if cpu.is_empty() { Vec::new() } else { self.time(5, || self.cpu_decode(slide, img, at, &cpu)) };
        // SAFETY: restore this thread's current context (rayon work of the CPU decoders may have
        // run on this thread).
        let _ = unsafe { (libs()?.0.cuCtxSetCurrent)(ctx) };
        let gpu_done = gpu_done?;
        // GPU results: decoded tiles, or tiles handed back to the CPU (bad header, failed batch).
        let mut retry = Vec::new();
        for (m, r) in gpu_done {
            match r {
                Ok(t) => self.finish(slide, level, needs, m, t),
                Err(None) => retry.push(m),
                Err(Some(err)) => needs[m.need].err = Some(err),
            }
        }
        let mut cpu_done = cpu_done;
        if !retry.is_empty() {
            cpu_done.extend(self.cpu_decode(slide, img, at, &retry));
        }
        // Upload CPU-decoded tiles.
        let stream = lane.slots[0].stream;
        let mut uploaded = Vec::new();
        for (m, r) in cpu_done {
            match r {
                Ok(t) => {
                    let p = upload_async(&t.rgba, stream)?;
                    let block = DevBlock::new(self, p, t.rgba.len().max(1));
                    uploaded.push((m, Arc::new(DevTile::whole(p, t.width, t.height, block))));
                }
                Err(err) => needs[m.need].err = Some(err),
            }
        }
        if !uploaded.is_empty() {
            let (cuda, _, _) = libs()?;
            // SAFETY: the lane's stream; the uploads must land before the tiles are shared.
            cu(unsafe { (cuda.cuStreamSynchronize)(stream) }, "cuStreamSynchronize")?;
            self.counters.cpu.fetch_add(uploaded.len() as u64, Relaxed);
            for (m, t) in uploaded {
                self.finish(slide, level, needs, m, t);
            }
        }
        Ok(())
    }

    /// Give a decoded tile to its need, and to the cache unless it is partial.
    fn finish(&self, slide: &Slide, level: usize, needs: &mut [Need], m: Miss, t: Arc<DevTile>) {
        let nd = &mut needs[m.need];
        if !t.partial {
            self.time(8, || self.cache.insert(TileKey { slide: slide.id(), level: level as u32, col: nd.col, row: nd.row }, t.clone()));
        }
        nd.tile = Some(t);
    }

    /// The tiles of a chunk share one allocation, freed when its last tile goes, so the device
    /// memory held by decoded tiles can exceed the sum the cache counts. Keep it within the
    /// cache budget plus what the calls in flight hold: evict least-recently-used tiles while
    /// the blocks' bytes exceed the budget (each eviction brings a block closer to free).
    fn bound_held_bytes(&self, in_flight: u64) {
        let cap = self.cache.capacity_bytes() as u64;
        while self.held.load(Relaxed) > cap.saturating_add(in_flight) && self.cache.evict_lru() {}
    }

    /// Read and decode `misses` on the CPU in the slide's pool, one result per tile.
    fn cpu_decode(&self, slide: &Slide, img: &ImageIndex, at: &Location, misses: &[Miss]) -> Vec<(Miss, std::result::Result<DecodedTile, Error>)> {
        use rayon::prelude::*;
        let planes = img.planes();
        // Every plane of every tile (planar-separate images have one chunk per sample).
        let mut wants = Vec::new();
        for (i, m) in misses.iter().enumerate() {
            // Misses were located (`read::locate_tile`): every plane is stored and inside the file.
            for (p, l) in img.tile_locs(m.col, m.row).enumerate() {
                wants.push(Want { id: i * planes + p, offset: l.offset, len: l.length });
            }
        }
        let plan = plan_reads(&wants, &slide.config().plan);
        let mut buf = vec![0u8; plan.read_bytes() as usize];
        let results = plan.read_into(slide.source(), &mut buf, slide.pool());
        self.counters.posix_bytes.fetch_add(plan.read_bytes(), Relaxed);
        self.counters.posix_requests.fetch_add(plan.requests.len() as u64, Relaxed);
        let mut slices: Vec<Option<std::result::Result<&[u8], &std::io::Error>>> = vec![None; misses.len() * planes];
        for (id, bytes) in plan.slices(&buf, &results) {
            slices[id] = Some(bytes);
        }
        let decode = |(i, m): (usize, &Miss)| {
            let (col, row) = (m.col, m.row);
            let tile_at = at.clone().with_tile(col, row);
            let mut chunks = Vec::with_capacity(planes);
            for p in 0..planes {
                match slices[i * planes + p] {
                    Some(Ok(bytes)) => chunks.push(bytes),
                    Some(Err(e)) => return (*m, Err(Error::io(&tile_at, std::io::Error::new(e.kind(), e.to_string())))),
                    None => return (*m, Err(Error::format(&tile_at, "tile plane lies past the end of the file or is missing"))),
                }
            }
            let (vw, vh) = img.valid_tile_size(col, row);
            let g = ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: vw, valid_height: vh };
            (*m, decode_chunk(&img.codec, &chunks, g, at).map_err(|e| e.with_tile(col, row)))
        };
        crate::read::in_pool(slide.pool(), || misses.par_iter().enumerate().map(decode).collect())
    }
}

/// Result of one tile on the GPU: the tile, `Err(None)` = hand it to the CPU decoder,
/// `Err(Some(e))` = it failed.
type GpuResult = std::result::Result<Arc<DevTile>, Option<Error>>;

/// Geometry of one stream accepted for nvJPEG.
#[derive(Clone, Copy)]
struct Geo {
    pw: [c_int; 3],
    ph: [c_int; 3],
    sub: (c_int, c_int),
}

/// Tiles of a chunk whose convert kernels are enqueued on a slot's stream (complete once the
/// stream is synchronised), and tiles already settled (errors, CPU hand-backs).
type ChunkOut = (Vec<(Miss, Arc<DevTile>)>, Vec<(Miss, GpuResult)>);

fn sub_of(css: c_int) -> Option<(c_int, c_int)> {
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
fn geo_of(w: c_int, h: c_int, sub: (c_int, c_int)) -> Geo {
    let (cw, chh) = ((w + sub.0 - 1) / sub.0, (h + sub.1 - 1) / sub.1);
    Geo { pw: [w, cw, cw], ph: [h, chh, chh], sub }
}

impl Engine {
    /// Decode a set of JPEG tiles with every decoder available: up to `gpu_workers` lanes take
    /// chunks of up to [`CHUNK_TILES`] whole tiles from the front of the sorted list (costliest
    /// CPU decodes first; each lane's thread prepares its next chunk on the host while its
    /// previous one decodes), and, on batches of at least [`MIN_CPU_SHARE_TILES`] tiles, up to
    /// `cpu_workers` CPU decoders take runs of up to [`CPU_RUN_TILES`] (at most
    /// [`CPU_RUN_BYTES`] of pixels) from the back, until the two ends meet, so each kind
    /// decodes as much as its speed allows (the issue's "CPU decoder threads take a share of a
    /// batch").
    fn gpu_decode_parallel(&self, lane: &mut Lane, slide: &Slide, img: &ImageIndex, at: &Location, misses: &[Miss]) -> Result<Vec<(Miss, GpuResult)>> {
        let n = misses.len();
        let want = n.div_ceil(CHUNK_TILES).clamp(1, self.gpu_workers);
        let cpu_want = if n >= MIN_CPU_SHARE_TILES { self.cpu_workers.min(n / (2 * CPU_RUN_TILES)) } else { 0 };
        // The caller's lane plus free ones; given back when dropped, a panic included.
        let mut taken = self.take_free(want - 1, cpu_want)?;
        // Spread a batch smaller than the lanes' chunks over all of them; with CPU workers, the
        // lanes' first round takes at most half of it, so the workers (started after the lanes)
        // find tiles at the back instead of an empty queue.
        let lanes_n = taken.lanes.len() + 1;
        let chunk = n.div_ceil(if taken.cpu.is_empty() { lanes_n } else { 2 * lanes_n }).clamp(1, CHUNK_TILES);
        let q = WorkQueue::new(misses);
        let Taken { lanes: extra, cpu: cpu_slots, .. } = &mut taken;
        // With the trace on: when each decoder ran out of work (the tail the lanes' last chunks
        // leave after the CPU workers finished, or the reverse).
        let t_start = std::time::Instant::now();
        let finished = Mutex::new(Vec::new());
        let done_at = |t0: std::time::Instant, kind: &'static str| {
            if trace_on() {
                finished.lock().unwrap_or_else(|p| p.into_inner()).push((kind, t0.elapsed().as_secs_f64() * 1e3));
            }
        };
        let done_at = &done_at;
        let results: Vec<Result<Vec<(Miss, GpuResult)>>> = std::thread::scope(|s| {
            let lanes: Vec<_> = extra
                .iter_mut()
                .map(|l| {
                    let q = &q;
                    s.spawn(move || {
                        self.make_current()?;
                        let r = self.gpu_decode(l, slide, img, at, q, chunk, 2 * lanes_n);
                        done_at(t_start, "lane");
                        r
                    })
                })
                .collect();
            let cpus: Vec<_> = cpu_slots
                .iter_mut()
                .map(|cs| {
                    let q = &q;
                    s.spawn(move || {
                        let r = self.time(5, || self.cpu_worker(cs, slide, img, at, q));
                        done_at(t_start, "cpu");
                        r
                    })
                })
                .collect();
            let mut out = vec![self.gpu_decode(lane, slide, img, at, &q, chunk, 2 * lanes_n)];
            done_at(t_start, "lane");
            let joined = |h: std::thread::ScopedJoinHandle<'_, Result<Vec<(Miss, GpuResult)>>>| h.join().unwrap_or_else(|_| Err(GpuError::Call("decode worker panicked".into()).into()));
            out.extend(lanes.into_iter().map(joined));
            out.extend(cpus.into_iter().map(joined));
            out
        });
        drop(taken);
        if trace_on() && n >= 256 {
            let f = finished.into_inner().unwrap_or_else(|p| p.into_inner());
            let list = |k: &str| f.iter().filter(|(kind, _)| *kind == k).map(|(_, t)| format!("{t:.1}")).collect::<Vec<_>>().join(" ");
            eprintln!("[slidestream gpu trace] {n} tiles: lanes done at [{}] ms, CPU workers done at [{}] ms", list("lane"), list("cpu"));
        }
        let mut all = Vec::with_capacity(n);
        for r in results {
            all.extend(r?);
        }
        Ok(all)
    }

    /// Up to `n` CPU workers' resources, made as needed (never more than `cpu_workers` exist);
    /// fewer when concurrent calls hold them.
    #[allow(clippy::vec_box)]
    fn take_cpu_slots(&self, n: usize) -> Vec<Box<CpuSlot>> {
        let mut g = self.cpu_slots.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<Box<CpuSlot>> = Vec::with_capacity(n);
        while out.len() < n {
            match g.0.pop() {
                Some(cs) => out.push(cs),
                None if g.1 < self.cpu_workers => match CpuSlot::new() {
                    Ok(cs) => {
                        g.1 += 1;
                        out.push(Box::new(cs));
                    }
                    Err(e) => {
                        self.note_cpu(format!("CPU decode worker not started: {e}"));
                        break;
                    }
                },
                None => break,
            }
        }
        out
    }

    #[allow(clippy::vec_box)]
    fn give_cpu_slots(&self, slots: Vec<Box<CpuSlot>>) {
        self.cpu_slots.lock().unwrap_or_else(|p| p.into_inner()).0.extend(slots);
    }

    /// A CPU decode worker: takes runs of up to [`CPU_RUN_TILES`] tiles from the back of `q`
    /// (the tiles it decodes fastest when the queue is ordered by cost), reads them with
    /// coalesced `pread`s, decodes each with libjpeg-turbo straight into a pinned buffer
    /// ([`decode_jpeg_into`]: the CPU path's decoder, so the pixels are those of
    /// [`Slide::read_region`]; only the tile's needed part when `Miss::part` is set) and
    /// uploads the run in one copy into one device block, while it decodes the next run into
    /// its other buffer.
    fn cpu_worker(&self, cs: &mut CpuSlot, slide: &Slide, img: &ImageIndex, at: &Location, q: &WorkQueue<'_>) -> Result<Vec<(Miss, GpuResult)>> {
        let (cuda, _, _) = libs()?;
        self.make_current()?;
        // Room for one decoded tile (a whole one is the most `decode_jpeg_into` writes).
        let tile_room = (img.tile_width as usize * img.tile_height as usize * 4).next_multiple_of(256);
        let run_tiles = (CPU_RUN_BYTES / tile_room).clamp(1, CPU_RUN_TILES);
        let mut out = Vec::new();
        let mut pending: Vec<(Miss, Arc<DevTile>)> = Vec::new();
        // Every block of this call, released only after the final synchronisation (an error
        // must not free a block, or reuse a pinned buffer, while a copy into it still runs).
        let mut keep: Vec<Arc<DevBlock>> = Vec::new();
        let mut raw: Vec<u8> = Vec::new();
        let mut runs = || -> Result<()> {
            let mut k = 0usize;
            loop {
                let run = q.back(run_tiles);
                if run.is_empty() {
                    return Ok(());
                }
                // Read: the run's tiles into `raw`, one request per coalesced span.
                let wants: Vec<Want> = run.iter().enumerate().map(|(i, m)| Want { id: i, offset: m.offset, len: m.len }).collect();
                let plan = plan_reads(&wants, &slide.config().plan);
                raw.resize(plan.read_bytes() as usize, 0);
                // The read layer's plan-to-bytes loop, on this worker's thread.
                let results = plan.read_into_serial(slide.source(), &mut raw);
                let mut src: Vec<std::result::Result<std::ops::Range<usize>, Error>> = (0..run.len()).map(|_| Err(Error::Usage(String::new()))).collect();
                for sp in plan.spans() {
                    src[sp.id] = match &results[sp.request] {
                        Ok(()) => Ok(sp.start..sp.start + sp.len),
                        Err(e) => Err(Error::io(&at.clone().with_tile(run[sp.id].col, run[sp.id].row), std::io::Error::new(e.kind(), e.to_string()))),
                    };
                }
                self.counters.posix_bytes.fetch_add(plan.read_bytes(), Relaxed);
                self.counters.posix_requests.fetch_add(plan.requests.len() as u64, Relaxed);
                // Decode into the pinned buffer of copy k; copy k - 2 (the previous one from this
                // buffer) finished at the synchronisation before copy k - 1 was issued. `k`
                // advances only when a copy is issued: a run whose every tile failed issues none,
                // and the next run reuses the same buffer.
                let buf = &mut cs.bufs[k % 2];
                buf.ensure(run.len() * tile_room)?;
                let host = buf.as_mut_slice(run.len() * tile_room);
                let mut placed = Vec::with_capacity(run.len());
                let mut used = 0usize;
                for (m, r) in run.iter().zip(src) {
                    let range = match r {
                        Ok(range) => range,
                        Err(e) => {
                            out.push((*m, Err(Some(e))));
                            continue;
                        }
                    };
                    let (vw, vh) = img.valid_tile_size(m.col, m.row);
                    let g = ChunkGeometry { tile_width: img.tile_width, tile_height: img.tile_height, valid_width: vw, valid_height: vh };
                    match decode_jpeg_into(&img.codec, &raw[range], g, m.part, at, &mut host[used..used + tile_room]) {
                        Ok(p) => {
                            let whole = (p.x, p.y, p.width, p.height) == (0, 0, vw, vh);
                            placed.push((*m, used, p, whole));
                            used += p.used.max(4).next_multiple_of(256);
                        }
                        Err(e) => out.push((*m, Err(Some(e.with_tile(m.col, m.row))))),
                    }
                }
                if placed.is_empty() {
                    continue;
                }
                let mut p = 0;
                // SAFETY: out-pointer to a local; stream-ordered allocation on the worker's stream.
                cu(unsafe { (cuda.cuMemAllocAsync)(&mut p, used, cs.stream) }, "cuMemAllocAsync")?;
                let block = DevBlock::new(self, p, used);
                keep.push(block.clone());
                // SAFETY: the worker's stream: the previous run's copy is complete after this.
                cu(unsafe { (cuda.cuStreamSynchronize)(cs.stream) }, "cuStreamSynchronize")?;
                out.extend(pending.drain(..).map(|(m, t)| (m, Ok(t))));
                // SAFETY: `used` bytes of the pinned buffer into the block of `used` bytes; the
                // buffer is not written again before the stream is synchronised (next-but-one run).
                cu(unsafe { (cuda.cuMemcpyHtoDAsync)(p, buf.ptr as *const c_void, used, cs.stream) }, "cuMemcpyHtoDAsync")?;
                k += 1;
                self.counters.cpu.fetch_add(placed.len() as u64, Relaxed);
                for (m, off, pl, whole) in placed {
                    if !whole {
                        self.counters.cpu_partial.fetch_add(1, Relaxed);
                    }
                    let ptr = p + (off + pl.offset) as u64;
                    pending.push((m, Arc::new(DevTile { ptr, x: pl.x, y: pl.y, w: pl.width, h: pl.height, pitch: pl.pitch, partial: !whole, _block: block.clone() })));
                }
            }
        };
        let r = runs();
        // SAFETY: the worker's stream, on every exit: its copies finish before the blocks can
        // be freed and before the slot (and its pinned buffers) returns to the pool.
        let synced = cu(unsafe { (cuda.cuStreamSynchronize)(cs.stream) }, "cuStreamSynchronize");
        drop(keep);
        r?;
        synced?;
        out.extend(pending.drain(..).map(|(m, t)| (m, Ok(t))));
        Ok(out)
    }

    /// Decode JPEG tiles on the GPU: chunks of up to `chunk` tiles from the front of `q`,
    /// alternating between the lane's two slots.
    #[allow(clippy::too_many_arguments)]
    fn gpu_decode(&self, lane: &mut Lane, slide: &Slide, img: &ImageIndex, at: &Location, q: &WorkQueue<'_>, chunk_tiles: usize, share: usize) -> Result<Vec<(Miss, GpuResult)>> {
        let (cuda, _, _) = libs()?;
        let cufile = if self.io != IoPath::Posix { self.cufile_handle(slide) } else { None };
        let mut out = Vec::new();
        let mut pending: [Vec<(Miss, Arc<DevTile>)>; 2] = [Vec::new(), Vec::new()];
        let mut failure = None;
        let mut k = 0usize;
        loop {
            let chunk = q.front_guided(chunk_tiles, self.min_chunk, share);
            if chunk.is_empty() {
                break;
            }
            let si = k % 2;
            k += 1;
            let slot = &mut lane.slots[si];
            // SAFETY: the slot's stream; its previous chunk must be complete before reuse.
            if let Err(e) = self.time(4, || cu(unsafe { (cuda.cuStreamSynchronize)(slot.stream) }, "cuStreamSynchronize")) {
                failure = Some(e);
                break;
            }
            out.extend(pending[si].drain(..).map(|(m, t)| (m, Ok(t))));
            let r = match &cufile {
                Some(fh) => self.chunk_cufile(slot, fh, slide, img, at, chunk),
                None => self.chunk_posix(slot, slide, img, at, chunk),
            };
            match r {
                Ok((done, settled)) => {
                    pending[si] = done;
                    out.extend(settled);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        for (si, p) in pending.iter_mut().enumerate() {
            // SAFETY: the slot's stream.
            let r = cu(unsafe { (cuda.cuStreamSynchronize)(lane.slots[si].stream) }, "cuStreamSynchronize");
            if let Err(e) = r {
                failure.get_or_insert(e);
            }
            out.extend(p.drain(..).map(|(m, t)| (m, Ok(t))));
        }
        match failure {
            Some(e) => Err(e.into()),
            None => Ok(out),
        }
    }

    /// POSIX: coalesced preads into the slot's pinned buffer, tables spliced on the host,
    /// host-bitstream nvJPEG.
    fn chunk_posix(&self, slot: &mut Slot, slide: &Slide, img: &ImageIndex, at: &Location, chunk: &[Miss]) -> Res<ChunkOut> {
        let mut settled = Vec::new();
        let wants: Vec<Want> = chunk.iter().enumerate().map(|(i, m)| Want { id: i, offset: m.offset, len: m.len }).collect();
        let plan = plan_reads(&wants, &slide.config().plan);
        let total = plan.read_bytes() as usize;
        slot.pinned.ensure(total)?;
        // The read layer's plan-to-bytes loop, into the slot's pinned buffer.
        let buf = slot.pinned.as_mut_slice(total);
        let results = self.time(0, || plan.read_into(slide.source(), buf, slide.pool()));
        let t_prep = std::time::Instant::now();
        self.counters.posix_bytes.fetch_add(plan.read_bytes(), Relaxed);
        self.counters.posix_requests.fetch_add(plan.requests.len() as u64, Relaxed);
        // Where each tile lies in the pinned buffer.
        let mut place: Vec<Option<(usize, usize)>> = vec![None; chunk.len()];
        for sp in plan.spans() {
            match &results[sp.request] {
                Ok(()) => place[sp.id] = Some((sp.start, sp.len)),
                Err(e) => {
                    let m = chunk[sp.id];
                    settled.push((m, Err(Some(Error::io(&at.clone().with_tile(m.col, m.row), std::io::Error::new(e.kind(), e.to_string()))))));
                }
            }
        }
        let buf = slot.pinned.as_mut_slice(total);
        // Splice tables, check geometry with nvJPEG's own parser.
        let (_, nvj, _) = libs()?;
        let nvj = nvj.as_ref().ok_or_else(|| GpuError::Unavailable("nvJPEG not loaded".into()))?;
        let color = if img.codec.photometric == Photometric::YCbCr { crate::codec::jpeg::JpegColor::YCbCr } else { crate::codec::jpeg::JpegColor::Rgb };
        let tables_len = img.codec.jpeg_tables().map_or(0, <[u8]>::len);
        let bound: usize = place.iter().flatten().map(|&(_, len)| len + tables_len + 32).sum();
        slot.arena.ensure(bound)?;
        let arena = slot.arena.as_mut_slice(bound);
        let mut cursor = 0usize;
        let mut items: Vec<(Miss, usize, usize, Geo)> = Vec::with_capacity(chunk.len());
        let mut tmp = Vec::new();
        for (i, m) in chunk.iter().enumerate() {
            let Some((off, len)) = place[i] else { continue };
            let tile_at = || at.clone().with_tile(m.col, m.row);
            if let Err(msg) = crate::codec::jpeg::splice(img.codec.jpeg_tables(), &buf[off..off + len], color, &mut tmp) {
                settled.push((*m, Err(Some(Error::format(&tile_at(), format!("JPEG: {msg}"))))));
                continue;
            }
            let (mut nc, mut css) = (0 as c_int, 0 as c_int);
            let (mut w, mut h) = ([0 as c_int; 4], [0 as c_int; 4]);
            // SAFETY: slice pointer/len; out arrays of 4 as nvjpeg.h requires.
            let rc = unsafe { (nvj.nvjpegGetImageInfo)(self.nvj_host, tmp.as_ptr(), tmp.len(), &mut nc, &mut css, w.as_mut_ptr(), h.as_mut_ptr()) };
            let (vw, vh) = img.valid_tile_size(m.col, m.row);
            let geo = match (rc, sub_of(css)) {
                (0, Some(sub)) if nc == 3 && w[0] as u32 >= vw && h[0] as u32 >= vh && w[0] as u32 <= MAX_GPU_TILE_EDGE && h[0] as u32 <= MAX_GPU_TILE_EDGE => {
                    let g = geo_of(w[0], h[0], sub);
                    (g.pw[1] == w[1] && g.ph[1] == h[1] && g.pw[2] == w[2] && g.ph[2] == h[2]).then_some(g)
                }
                _ => None,
            };
            let Some(geo) = geo else {
                self.note_cpu(format!("{}: nvjpegGetImageInfo returned {rc}: {nc} components, subsampling {css}, {}x{} for a {vw}x{vh} tile", tile_at(), w[0], h[0]));
                settled.push((*m, Err(None)));
                continue;
            };
            // The splice adds at most the tables and a 16-byte Adobe marker to the tile.
            if cursor + tmp.len() > arena.len() {
                settled.push((*m, Err(None)));
                continue;
            }
            arena[cursor..cursor + tmp.len()].copy_from_slice(&tmp);
            items.push((*m, cursor, tmp.len(), geo));
            cursor += tmp.len();
        }
        let streams: Vec<(*const u8, usize)> = items.iter().map(|&(_, off, len, _)| (arena[off..].as_ptr(), len)).collect();
        if trace_on() {
            self.counters.trace[1].fetch_add(t_prep.elapsed().as_nanos() as u64, Relaxed);
        }
        let todo: Vec<(Miss, Geo)> = items.iter().map(|&(m, _, _, g)| (m, g)).collect();
        let (done, more) = self.decode_convert(slot, false, img, &streams, &todo)?;
        settled.extend(more);
        Ok((done, settled))
    }

    /// cuFile: coalesced `cuFileRead`s into the slot's device staging buffer, tables spliced and
    /// SOF geometry read by kernels, device-bitstream nvJPEG (or a copy back to the host path).
    fn chunk_cufile(&self, slot: &mut Slot, fh: &CuFileHandle, slide: &Slide, img: &ImageIndex, at: &Location, chunk: &[Miss]) -> Res<ChunkOut> {
        use rayon::prelude::*;
        let (cuda, _, _) = libs()?;
        let cf = self.cufile.ok_or_else(|| GpuError::Unavailable("cuFile not loaded".into()))?;
        let mut settled = Vec::new();
        let wants: Vec<Want> = chunk.iter().enumerate().map(|(i, m)| Want { id: i, offset: m.offset, len: m.len }).collect();
        let plan = plan_reads(&wants, &slide.config().plan);
        let total = plan.read_bytes() as usize;
        slot.staging.ensure(total, Some(cf))?;
        // Requests back to back in the staging buffer (the read layer's layout, `ReadPlan::spans`).
        let bases = plan.request_starts();
        let (staging, ctx, handle) = (slot.staging.ptr, self.ctx as usize, fh.handle as usize);
        let read = |(r, &b): (&crate::io::plan::Request, &usize)| -> std::result::Result<(), String> {
            // SAFETY: this thread uses the engine's context; cuFileRead writes r.len bytes at
            // staging + b, inside the staging allocation (sized to the plan's total above).
            let n = unsafe {
                (cuda.cuCtxSetCurrent)(ctx as CUcontext);
                (cf.cuFileRead)(handle as *mut c_void, staging as *mut c_void, r.len as usize, r.offset as i64, b as i64)
            };
            if n == r.len as isize {
                Ok(())
            } else {
                Err(format!("cuFileRead of {} bytes at offset {} returned {n}", r.len, r.offset))
            }
        };
        let results: Vec<std::result::Result<(), String>> = if plan.requests.len() > 1 && crate::read::pool_threads(slide.pool()) > 1 {
            crate::read::in_pool(slide.pool(), || plan.requests.par_iter().zip(bases.par_iter()).map(read).collect())
        } else {
            plan.requests.iter().zip(bases.iter()).map(read).collect()
        };
        self.make_current()?;
        let (bytes_c, req_c) = match self.io {
            IoPath::CuFileGds => (&self.counters.gds_bytes, &self.counters.gds_requests),
            _ => (&self.counters.compat_bytes, &self.counters.compat_requests),
        };
        bytes_c.fetch_add(plan.read_bytes(), Relaxed);
        req_c.fetch_add(plan.requests.len() as u64, Relaxed);
        // Tables prefix: SOI + the JPEGTables body (tile streams follow after their own SOI).
        let prefix: Vec<u8> = match img.codec.jpeg_tables() {
            Some(t) if t.len() >= 4 && t[..2] == [0xFF, 0xD8] => {
                let body = if t.ends_with(&[0xFF, 0xD9]) { &t[..t.len() - 2] } else { t };
                body.to_vec()
            }
            Some(t) if !t.is_empty() => {
                self.note_cpu(format!("{at}: JPEGTables does not start with SOI"));
                return Ok((Vec::new(), chunk.iter().map(|&m| (m, Err(None))).collect()));
            }
            _ => vec![0xFF, 0xD8],
        };
        let mut descs = Vec::new();
        let mut accepted = Vec::new();
        let mut spliced_total = 0usize;
        for (r, (res, &b)) in plan.requests.iter().zip(results.iter().zip(&bases)) {
            for &(id, off, len) in &r.members {
                let m = chunk[id];
                match res {
                    Err(msg) => settled.push((m, Err(Some(Error::io(&at.clone().with_tile(m.col, m.row), std::io::Error::other(msg.clone())))))),
                    Ok(()) if len < 4 => settled.push((m, Err(None))),
                    Ok(()) => {
                        let dst_len = prefix.len() + len as usize - 2;
                        descs.push(SpliceDesc { src: staging + (b as u64 + off), dst: spliced_total as u64, len: len as c_int, pad: 0 });
                        accepted.push((m, spliced_total, dst_len));
                        spliced_total += dst_len;
                    }
                }
            }
        }
        if accepted.is_empty() {
            return Ok((Vec::new(), settled));
        }
        slot.spliced.ensure(spliced_total, None)?;
        for d in &mut descs {
            d.dst += slot.spliced.ptr;
        }
        let stream = slot.stream;
        let d_descs = upload_async(as_bytes(&descs), stream)?;
        let d_prefix = upload_async(&prefix, stream)?;
        let n = descs.len();
        let mut info_dev = 0;
        // SAFETY: out-pointer to a local.
        cu(unsafe { (cuda.cuMemAllocAsync)(&mut info_dev, n * 8 * 4, stream) }, "cuMemAllocAsync")?;
        let (mut a_d, mut a_p, mut a_pl, mut a_n, mut a_i) = (d_descs, d_prefix, prefix.len() as c_int, n as c_int, info_dev);
        launch(self.funcs.splice, (n as u32, 1, 1), (256, 1, 1), stream, &mut [arg(&mut a_d), arg(&mut a_p), arg(&mut a_pl)], "cuLaunchKernel(splice)")?;
        launch(self.funcs.sof_scan, ((n as u32).div_ceil(64), 1, 1), (64, 1, 1), stream, &mut [arg(&mut a_d), arg(&mut a_n), arg(&mut a_i)], "cuLaunchKernel(sof_scan)")?;
        let mut info = vec![0 as c_int; n * 8];
        // SAFETY: n*8 ints on both sides; synchronised below before `info` is read.
        cu(unsafe { (cuda.cuMemcpyDtoHAsync)(info.as_mut_ptr() as *mut c_void, info_dev, n * 32, stream) }, "cuMemcpyDtoHAsync")?;
        for p in [d_descs, d_prefix, info_dev] {
            free_async(p, stream);
        }
        // SAFETY: the slot's stream.
        cu(unsafe { (cuda.cuStreamSynchronize)(stream) }, "cuStreamSynchronize")?;
        let mut todo = Vec::new();
        let mut streams = Vec::new();
        for (k, &(m, off, len)) in accepted.iter().enumerate() {
            let o = &info[k * 8..k * 8 + 8];
            let (vw, vh) = img.valid_tile_size(m.col, m.row);
            let (hgt, wid, nc) = (o[1], o[2], o[3]);
            let hv0 = o[4];
            let sub = (hv0 >> 4, hv0 & 15);
            let ok = o[0] == 1
                && nc == 3
                && o[5] == 0x11
                && o[6] == 0x11
                && matches!(sub, (1, 1) | (2, 1) | (2, 2) | (1, 2))
                && wid as u32 >= vw
                && hgt as u32 >= vh
                && wid as u32 <= MAX_GPU_TILE_EDGE
                && hgt as u32 <= MAX_GPU_TILE_EDGE;
            if o[0] == 3 {
                settled.push((m, Err(Some(Error::format(&at.clone().with_tile(m.col, m.row), "JPEG: not a JPEG stream (no SOI marker)")))));
            } else if !ok {
                self.note_cpu(format!("{}: SOF status {}, {nc} components, {wid}x{hgt}, sampling {:#x}/{:#x}/{:#x}", at.clone().with_tile(m.col, m.row), o[0], o[4], o[5], o[6]));
                settled.push((m, Err(None)));
            } else {
                todo.push((m, geo_of(wid, hgt, sub)));
                streams.push(((slot.spliced.ptr + off as u64) as usize as *const u8, len));
            }
        }
        if self.nvj_dev.is_some() {
            match self.decode_convert(slot, true, img, &streams, &todo) {
                Ok((done, more)) => {
                    settled.extend(more);
                    return Ok((done, settled));
                }
                Err(e) => self.note_cpu(format!("device-bitstream decode failed ({e}): streams copied to the host")),
            }
        } else {
            self.note_cpu(format!("no device-bitstream nvJPEG backend ({}): cuFile-read streams copied to the host", self.dev_backend_reason));
        }
        // No device-bitstream decoder: copy the spliced streams to pinned memory, decode as POSIX.
        slot.pinned.ensure(spliced_total)?;
        // SAFETY: spliced_total bytes on both sides; synchronous copy (stream idle).
        cu(unsafe { (cuda.cuMemcpyDtoH)(slot.pinned.ptr as *mut c_void, slot.spliced.ptr, spliced_total) }, "cuMemcpyDtoH")?;
        let host: Vec<(*const u8, usize)> = streams
            .iter()
            .map(|&(p, len)| {
                let off = p as usize - slot.spliced.ptr as usize;
                // SAFETY: inside the pinned buffer of spliced_total bytes.
                (unsafe { slot.pinned.ptr.add(off) } as *const u8, len)
            })
            .collect();
        let (done, more) = self.decode_convert(slot, false, img, &host, &todo)?;
        settled.extend(more);
        Ok((done, settled))
    }

    /// Batched nvJPEG decode of `streams` (host or device bitstreams) into the slot's planar
    /// scratch, then the convert kernel into fresh device tiles. A failed batch hands all its
    /// tiles back to the CPU (`Err(None)`); nothing here fails a single tile.
    fn decode_convert(&self, slot: &mut Slot, device: bool, img: &ImageIndex, streams: &[(*const u8, usize)], todo: &[(Miss, Geo)]) -> Res<ChunkOut> {
        let n = todo.len();
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let (cuda, nvj, _) = libs()?;
        let nvj = nvj.as_ref().ok_or_else(|| GpuError::Unavailable("nvJPEG not loaded".into()))?;
        let (handle, state, batch) = if device {
            (self.nvj_dev.ok_or_else(|| GpuError::Unavailable("no device-bitstream nvJPEG backend".into()))?, slot.dev_state, &mut slot.dev_batch)
        } else {
            (self.nvj_host, slot.state, &mut slot.batch)
        };
        // Planar outputs back to back in the scratch buffer (slack for decoders writing whole MCUs).
        let mut offs = Vec::with_capacity(n);
        let mut total = 0usize;
        for (_, g) in todo {
            offs.push(total);
            total += (0..3).map(|c| (g.pw[c] as usize) * (g.ph[c] as usize + 16) + 64).sum::<usize>();
        }
        slot.scratch.ensure(total, None)?;
        let base = slot.scratch.ptr;
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
                o += (g.pw[c] as usize) * (g.ph[c] as usize + 16) + 64;
            }
            images.push(img_);
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
                pad: 0,
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
            if *batch != n as c_int {
                rc = (nvj.nvjpegDecodeBatchedInitialize)(handle, state, n as c_int, 1, self.nvj_output);
                *batch = if rc == 0 { n as c_int } else { -1 };
            }
            if rc == 0 {
                rc = (nvj.nvjpegDecodeBatched)(handle, state, ptrs.as_ptr(), lens.as_ptr(), images.as_mut_ptr(), slot.stream);
            }
            rc
        };
        if trace_on() {
            self.counters.trace[2].fetch_add(t_call.elapsed().as_nanos() as u64, Relaxed);
        }
        let t_conv = std::time::Instant::now();
        if rc != 0 {
            *batch = -1;
            self.counters.batch_fallbacks.fetch_add(1, Relaxed);
            self.note_cpu(format!("nvjpegDecodeBatched ({} bitstreams) returned {rc} for a batch of {n}: the batch was decoded on the CPU", if device { "device" } else { "host" }));
            if device {
                return Err(GpuError::Call(format!("nvjpegDecodeBatched(device bitstreams) returned {rc}")));
            }
            return Ok((Vec::new(), todo.iter().map(|&(m, _)| (m, Err(None))).collect()));
        }
        let counter = if device {
            &self.counters.device_bitstream
        } else if self.host_backend == "hardware" {
            &self.counters.hardware
        } else {
            &self.counters.hybrid
        };
        counter.fetch_add(n as u64, Relaxed);
        // Device tiles carved from one block, then one convert launch for the chunk.
        let sizes: Vec<usize> = descs.iter().map(|d| (d.w as usize * d.h as usize * 4).max(4).next_multiple_of(256)).collect();
        let mut p = 0;
        // SAFETY: out-pointer to a local; stream-ordered allocation on the slot's stream.
        cu(unsafe { (cuda.cuMemAllocAsync)(&mut p, sizes.iter().sum::<usize>().max(256), slot.stream) }, "cuMemAllocAsync")?;
        let block = DevBlock::new(self, p, sizes.iter().sum::<usize>().max(256));
        let mut done = Vec::with_capacity(n);
        let mut off = 0u64;
        for (((m, _), d), size) in todo.iter().zip(descs.iter_mut()).zip(&sizes) {
            d.out = p + off;
            done.push((*m, Arc::new(DevTile::whole(d.out, d.w as u32, d.h as u32, block.clone()))));
            off += *size as u64;
        }
        let (mw, mh) = descs.iter().fold((1, 1), |(a, b), d| (a.max(d.w), b.max(d.h)));
        let d_descs = upload_async(as_bytes(&descs), slot.stream)?;
        let mut a = d_descs;
        let r = launch(self.funcs.convert, ((mw as u32).div_ceil(32), (mh as u32).div_ceil(8), n as u32), (32, 8, 1), slot.stream, &mut [arg(&mut a)], "cuLaunchKernel(convert)");
        free_async(d_descs, slot.stream);
        if trace_on() {
            self.counters.trace[3].fetch_add(t_conv.elapsed().as_nanos() as u64, Relaxed);
        }
        r?;
        Ok((done, Vec::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn misses(n: usize) -> Vec<Miss> {
        (0..n).map(|i| Miss { need: i, col: i as u64, row: 0, offset: 100 * i as u64, len: 10, part: None, rank: 8 }).collect()
    }

    #[test]
    fn work_queue_hands_out_every_tile_once_from_both_ends() {
        let m = misses(1000);
        let q = WorkQueue::new(&m);
        let mut taken = Vec::new();
        let (mut fronts, mut backs) = (0, 0);
        // Alternate one GPU-sized take and three CPU-sized takes until empty.
        loop {
            let f = q.front(256);
            fronts += f.len();
            taken.extend(f.iter().map(|m| m.need));
            let mut b_all = 0;
            for _ in 0..3 {
                let b = q.back(CPU_RUN_TILES);
                b_all += b.len();
                taken.extend(b.iter().map(|m| m.need));
            }
            backs += b_all;
            if f.is_empty() && b_all == 0 {
                break;
            }
        }
        taken.sort_unstable();
        assert_eq!(taken, (0..1000).collect::<Vec<_>>());
        assert!(fronts > 0 && backs > 0, "{fronts} {backs}");
        // The front took whole chunks in order, the back from the end.
        assert!(q.front(1).is_empty() && q.back(1).is_empty());
    }

    #[test]
    fn guided_chunks_shrink_as_the_queue_runs_low() {
        let m = misses(1000);
        let q = WorkQueue::new(&m);
        // 1000 left / 8 = 125; then 875 / 8 = 109; ... down to the minimum, then what is left.
        assert_eq!(q.front_guided(256, 64, 8).len(), 125);
        assert_eq!(q.front_guided(256, 64, 8).len(), 109);
        let mut sizes = Vec::new();
        loop {
            let c = q.front_guided(256, 64, 8);
            if c.is_empty() {
                break;
            }
            sizes.push(c.len());
        }
        assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 1000 - 125 - 109);
        assert!(sizes[..sizes.len() - 1].iter().all(|&s| s >= 64), "{sizes:?}");
        // A large queue gives full chunks; min > max is clamped to max.
        let m = misses(10_000);
        let q = WorkQueue::new(&m);
        assert_eq!(q.front_guided(256, 64, 8).len(), 256);
        assert_eq!(q.front_guided(16, 64, 8).len(), 16);
    }

    #[test]
    fn work_queue_shared_by_threads_loses_nothing() {
        let m = misses(5000);
        let q = WorkQueue::new(&m);
        let got: Vec<Vec<usize>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|t| {
                    let q = &q;
                    s.spawn(move || {
                        let mut v = Vec::new();
                        loop {
                            let r = if t % 2 == 0 { q.front(CHUNK_TILES) } else { q.back(CPU_RUN_TILES) };
                            if r.is_empty() {
                                return v;
                            }
                            // A run is contiguous in the offset order.
                            assert!(r.windows(2).all(|w| w[1].need == w[0].need + 1));
                            v.extend(r.iter().map(|m| m.need));
                        }
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<usize> = got.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, (0..5000).collect::<Vec<_>>());
    }
}
