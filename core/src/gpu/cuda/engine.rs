//! The GPU engine of one device: the parts it owns and its start-up. One engine per device and
//! process, started on first use and kept for the process (a forked child refuses it).
//!
//! Data flow of a read (`batch.rs`): tiles deduplicated and looked up in the device cache
//! (`device_cache.rs`); misses split between GPU lanes and CPU workers sharing one work queue
//! (`scheduler.rs`, `queue.rs`, `lanes.rs`, `decode/cpu_worker.rs`); each lane chunk read by
//! POSIX into pinned memory or by cuFile into device memory (`io/`), its bitstreams framed and
//! routed (`chunk.rs`) and decoded by batched nvJPEG plus the `convert` kernel
//! (`decode/nvjpeg.rs`, a `decode::TileDecoder`); then one `assemble` launch (`assemble.rs`). docs/gpu.md has the whole
//! story and the measurements behind the numbers.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::context::{device_arch, pid, set_blocking_waits, set_stream_priority, Context, Stream};
use super::counters::Counters;
use super::decode::cpu_worker::CpuWorkers;
use super::decode::nvjpeg::Decoders;
use super::decode::sm::SmKernels;
use super::device_cache::DeviceCache;
use super::io::compat::{Io, IoPath};
use super::kernels::{self, arg, Kernels};
use super::lanes::Lanes;
use super::memory::OutputPool;
use super::settings::settings;
use super::sys::{cuda, CUstream, Res, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD};
use super::trace;
use super::warmup::WarmState;
use crate::config::GpuSmDecoder;
use crate::config::GpuWarmup;
use crate::error::{GpuError, Result};

/// Everything of one device. Fields drop in order: cached tiles, then lanes and CPU workers
/// (their nvJPEG states before the decoders' handles), I/O handles, kernels, the free stream,
/// and the context last.
pub(crate) struct Engine {
    pub(crate) device: usize,
    pub(crate) cache: DeviceCache,
    pub(crate) lanes: Lanes,
    pub(crate) cpu: CpuWorkers,
    /// nvJPEG's decoders, made by [`Engine::decoders`] on first use (the background warm-up's
    /// first step, or a read): creating the hardware-backend handle takes ~0.5 s on the H200.
    pub(crate) nvjpeg: OnceLock<Decoders>,
    nvjpeg_init: Mutex<()>,
    /// Whether the decoders need a device-bitstream backend (the cuFile path), and nvJPEG's
    /// output format (`SLIDESTREAM_NVJPEG_OUTPUT`).
    pub(crate) nvjpeg_params: (bool, c_int),
    /// Whether reads send JPEG tiles to the GPU lanes; false (warm-up `first`) until the
    /// background warm-up made nvJPEG's decoders and a warmed lane, the reads before then
    /// decoding on the CPU (docs/gpu.md, start-up).
    pub(crate) gpu_ready: AtomicBool,
    pub(crate) io: Io,
    pub(crate) kernels: Kernels,
    pub(crate) counters: Counters,
    /// What runs of the warm-up and whether the background part is still making lanes.
    pub(crate) warm: WarmState,
    /// Stream on which tile blocks and unexported arrays are freed.
    pub(crate) free_stream: Stream,
    /// The pool the returned arrays are allocated from.
    pub(crate) output_pool: OutputPool,
    /// The engine streams' priority as the driver reports it (`SLIDESTREAM_GPU_STREAM_PRIORITY`;
    /// lower = higher).
    pub(crate) stream_priority: c_int,
    /// `CUDA_DEVICE_MAX_CONNECTIONS` when the engine started (0: unset).
    pub(crate) cuda_connections: u32,
    /// `SLIDESTREAM_GPU_WAIT`: blocking-sync events (true) or `cuStreamSynchronize`.
    pub(crate) blocking_waits: bool,
    /// `SLIDESTREAM_THREAD_NICE` as the engine read it.
    pub(crate) thread_nice: u8,
    /// `SLIDESTREAM_GPU_SM_DECODER` as the engine read it.
    pub(crate) sm_setting: GpuSmDecoder,
    /// The SM decoder's kernels once resolved ([`Engine::sm_decoder`]): `None` = off, or the
    /// build error.
    pub(crate) sm: OnceLock<std::result::Result<Option<SmKernels>, String>>,
    pub(crate) ctx: Context,
}

/// The started engines, by device ordinal. Held only to look one up or insert one, never while
/// an engine starts (seconds: kernels, nvJPEG), so reads on a started device never wait for
/// another device's start (or its failure).
static ENGINES: OnceLock<Mutex<HashMap<usize, Arc<Engine>>>> = OnceLock::new();
/// One start lock per device ordinal: two callers starting the same device make one engine;
/// callers starting different devices start them at once.
static STARTING: OnceLock<Mutex<HashMap<usize, Arc<Mutex<()>>>>> = OnceLock::new();

fn engines() -> MutexGuard<'static, HashMap<usize, Arc<Engine>>> {
    ENGINES
        .get_or_init(|| {
            // A closed slide's tiles leave the device caches (and its cuFile handle is dropped).
            crate::cache::registry::register_hook(super::purge_slide);
            Default::default()
        })
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The started engine of `device`, or None; [`GpuError::Fork`] in a process forked after any
/// engine was started (the map lock held only for the look-up).
fn started(device: usize) -> Result<Option<Arc<Engine>>> {
    let map = engines();
    if let Some(e) = map.get(&device) {
        if e.ctx.pid() != pid() {
            return Err(GpuError::Fork { parent: e.ctx.pid(), child: pid() }.into());
        }
        return Ok(Some(e.clone()));
    }
    if let Some(other) = map.values().next() {
        if other.ctx.pid() != pid() {
            return Err(GpuError::Fork { parent: other.ctx.pid(), child: pid() }.into());
        }
    }
    Ok(None)
}

/// The engine of `device`, started on first use. Refuses in a process forked after CUDA was
/// initialised. A device that fails to start (an ordinal past the device count, a device
/// that cannot be used) returns its error and leaves every other device's engine as it is;
/// the next call tries again.
///
/// The calling thread's current CUDA context is the same before and after.
pub(crate) fn engine(device: usize) -> Result<Arc<Engine>> {
    if let Some(e) = started(device)? {
        return Ok(e);
    }
    let start_lock = STARTING.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner()).entry(device).or_default().clone();
    let _starting = start_lock.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = started(device)? {
        return Ok(e); // another thread started it while this one waited
    }
    // Engine::start makes the new context current; the caller's is restored when this drops
    // (without libcuda there is nothing to save, and Engine::start reports why).
    let _restore = super::context::CurrentGuard::save().ok();
    let t0 = std::time::Instant::now();
    let e = Arc::new(Engine::start(device)?);
    let t1 = std::time::Instant::now();
    if let Err(err) = e.warm_up() {
        e.note_cpu(format!("engine warm-up failed ({err}): the first large read pays the set-up"));
    }
    if trace::on() {
        eprintln!(
            "[slidestream gpu trace] engine start on device {device}: {:.1} ms, warm-up {:.1} ms (SLIDESTREAM_GPU_WARMUP={}) (t={:.3})",
            (t1 - t0).as_secs_f64() * 1e3,
            t1.elapsed().as_secs_f64() * 1e3,
            e.warm.mode.as_str(),
            trace::mono()
        );
    }
    engines().insert(device, e.clone());
    // The rest of the warm-up, on a thread that reads never wait for (warmup.rs).
    e.warm_in_background();
    Ok(e)
}

/// The engine of `device` if it was started in this process (never starts CUDA).
pub(crate) fn existing(device: usize) -> Option<Arc<Engine>> {
    engines().get(&device).filter(|e| e.ctx.pid() == pid()).cloned()
}

/// Every engine started in this process.
pub(crate) fn all() -> Vec<Arc<Engine>> {
    match ENGINES.get() {
        Some(m) => m.lock().unwrap_or_else(|p| p.into_inner()).values().filter(|e| e.ctx.pid() == pid()).cloned().collect(),
        None => Vec::new(),
    }
}

impl Engine {
    /// Start the engine's parts, each phase timed on one `SLIDESTREAM_GPU_TRACE` line. The
    /// kernels' host half (NVRTC, the kernel cache, a compile on a miss) runs on a thread of its
    /// own while the context, the I/O path and the nvJPEG decoders are made.
    fn start(device: usize) -> Result<Engine> {
        let mut ph = trace::Phases::new(format!("engine start (device {device})"));
        // Every engine setting, checked and then fixed for the process (docs/settings.md).
        let set = settings()?;
        ph.lap("settings");
        let cuda = cuda()?;
        ph.lap("libcuda load + cuInit");
        // Only the compute capability: the full probe would also make an nvJPEG hardware
        // handle (made again below) and activate device 0's context before its flags are set.
        let (ma, mi) = device_arch(device)?;
        ph.lap(&format!("device query (sm_{ma}{mi})"));
        super::sys::nvjpeg()?;
        ph.lap("libnvjpeg load");
        let part = ph.part().to_string();
        std::thread::scope(|s| {
            let kernel_part = format!("{part} [kernels thread]");
            let kernel_cache = &set.kernel_cache;
            let prepared = s.spawn(move || kernels::prepare(ma, mi, kernel_cache, &kernel_part));
            // How host threads wait for the device (`SLIDESTREAM_GPU_SYNC`).
            let ctx = Context::retain(device, set.sync)?;
            ph.lap("context retain");
            // Every stream made from here on gets this priority.
            set_stream_priority(set.high_priority)?;
            // How the engine's threads wait for their streams (`SLIDESTREAM_GPU_WAIT`).
            set_blocking_waits(set.blocking_waits);
            let free_stream = Stream::new()?;
            let stream_priority = free_stream.priority()?;
            let output_pool = OutputPool::new(ctx.device())?;
            // Keep freed tile memory in the pool (no return to the OS at every synchronisation).
            let mut pool = std::ptr::null_mut();
            // SAFETY: out-pointers to locals; the device of the current context.
            unsafe {
                if cuda.cuDeviceGetDefaultMemPool(&mut pool, ctx.device()) == 0 {
                    let mut threshold = u64::MAX;
                    cuda.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, arg(&mut threshold));
                }
            }
            ph.lap("free stream + memory pool");
            // I/O path (KvikIO-style compat mode), then nvJPEG: hardware backend for host
            // bitstreams where present, and a device-bitstream decoder for the cuFile path only.
            let io = Io::select(set.compat_mode);
            ph.lap(&format!("I/O selection ({}{})", io.path.name(), if io.files.cufile.is_some() { ", cuFile driver open" } else { ", cuFile not loaded" }));
            // nvJPEG's decoders: now for `full`, else on the background thread or the first read
            // that needs them (`Engine::decoders`).
            let nvjpeg = OnceLock::new();
            let nvjpeg_params = (io.path != IoPath::Posix, set.nvjpeg_output);
            if set.warmup == GpuWarmup::Full {
                let d = Decoders::new(nvjpeg_params.0, nvjpeg_params.1)?;
                ph.lap(&format!("nvJPEG decoders ({}{}; {})", d.host_backend, if d.device.is_some() { " + device-bitstream" } else { "" }, d.allocators()));
                let _ = nvjpeg.set(d);
            }
            let prepared = prepared.join().unwrap_or_else(|_| Err(GpuError::Call("kernel preparation panicked".into())))?;
            ph.lap("wait for the kernels thread");
            let kernels = Kernels::load(prepared, &part)?;
            ph.lap("kernels ready");
            let lanes = Lanes::new(set.gpu_workers, set.min_chunk);
            let cpu = CpuWorkers::new(set.cpu_workers, lanes.workers, set.split_by_cost);
            let cache = DeviceCache::new(set.device_cache_bytes);
            ph.lap("lanes, CPU workers, device cache (empty pools)");
            if trace::on() {
                eprintln!("[slidestream gpu trace] {part}: total {:.1} ms; kernels: {}", ph.total_ms(), kernels.cache_note);
            }
            let gpu_ready = AtomicBool::new(set.warmup != GpuWarmup::First);
            Ok(Engine {
                device,
                cache,
                lanes,
                cpu,
                nvjpeg,
                nvjpeg_init: Mutex::new(()),
                nvjpeg_params,
                gpu_ready,
                io,
                kernels,
                counters: Counters::default(),
                warm: WarmState::new(set.warmup),
                free_stream,
                output_pool,
                stream_priority,
                cuda_connections: std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0),
                blocking_waits: set.blocking_waits,
                thread_nice: set.thread_nice,
                sm_setting: set.sm_decoder,
                sm: OnceLock::new(),
                ctx,
            })
        })
    }

    /// nvJPEG's decoders, made on first use (by one caller; the others wait for it).
    pub(crate) fn decoders(&self) -> Res<&Decoders> {
        if let Some(d) = self.nvjpeg.get() {
            return Ok(d);
        }
        let _made_once = self.nvjpeg_init.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = self.nvjpeg.get() {
            return Ok(d);
        }
        let t = std::time::Instant::now();
        let d = Decoders::new(self.nvjpeg_params.0, self.nvjpeg_params.1)?;
        trace::phase_line(
            "nvJPEG",
            &format!("decoders ({}{}; {})", d.host_backend, if d.device.is_some() { " + device-bitstream" } else { "" }, d.allocators()),
            t,
        );
        Ok(self.nvjpeg.get_or_init(|| d))
    }

    /// The SM decoder's kernels when `SLIDESTREAM_GPU_SM_DECODER` turns it on (`auto`: where
    /// nvJPEG has no hardware JPEG engines), compiled at the first call that asks (~0.6 s);
    /// `None` when off.
    ///
    /// # Errors
    /// [`GpuError::Call`] when the kernels do not build (every later call gets the same error:
    /// a setting that asked for the decoder is never silently ignored).
    pub(crate) fn sm_decoder(&self) -> Res<Option<&SmKernels>> {
        let r = self.sm.get_or_init(|| {
            let on = match self.sm_setting {
                GpuSmDecoder::Off => false,
                GpuSmDecoder::On => true,
                GpuSmDecoder::Auto => self.decoders().map_err(|e| e.to_string())?.host_backend != "hardware",
            };
            if !on {
                return Ok(None);
            }
            self.ctx.make_current().map_err(|e| e.to_string())?;
            let t = std::time::Instant::now();
            let k = SmKernels::compile(self.device).map_err(|e| e.to_string())?;
            trace::phase_line("SM decoder", "kernels compiled", t);
            Ok(Some(k))
        });
        match r {
            Ok(k) => Ok(k.as_ref()),
            Err(e) => Err(GpuError::Call(format!("SLIDESTREAM_GPU_SM_DECODER: the SM decoder could not start: {e}"))),
        }
    }

    /// The SM decoder's state in words (`gpu_stats()["sm_decoder"]`).
    pub(crate) fn sm_state(&self) -> String {
        match (self.sm_setting, self.sm.get()) {
            (GpuSmDecoder::Off, _) => "off".into(),
            (_, Some(Ok(Some(_)))) => "on".into(),
            (_, Some(Ok(None))) => "auto: off (nvJPEG has hardware JPEG engines)".into(),
            (_, Some(Err(e))) => format!("failed to start: {e}"),
            (_, None) => "not started yet (at the first read that needs it)".into(),
        }
    }

    /// What the nvJPEG decode path needs, borrowed from this engine (nvJPEG's decoders made
    /// on first use).
    pub(crate) fn nv_env(&self) -> Res<super::decode::NvEnv<'_>> {
        Ok(super::decode::NvEnv {
            ctx: &self.ctx,
            counters: &self.counters,
            kernels: &self.kernels,
            decoders: self.decoders()?,
            home: self.block_home(),
            io: &self.io,
        })
    }

    /// Make the engine's context current on the calling thread.
    pub(crate) fn make_current(&self) -> Res<()> {
        self.ctx.make_current()
    }

    /// The stream tile blocks and unexported arrays are freed on.
    pub(crate) fn free_stream(&self) -> CUstream {
        self.free_stream.raw()
    }
}
