//! Engine warm-up: start-up work that would otherwise land on the first large read, split by
//! `SLIDESTREAM_GPU_WARMUP` into what runs before the engine is returned and what a background
//! thread does afterwards.
//!
//! The background thread never holds anything a read could want: it makes each lane (or CPU
//! worker's resources) outside the pools, warms it, and offers it to its pool
//! ([`Pool::offer`](super::pool::Pool::offer)), which takes it only while fewer than the limit
//! exist; a read never waits for it. While it still has lanes to make, reads take only free
//! lanes as extra lanes ([`Engine::try_take_lane`]) rather than make cold ones. It stops between
//! steps when the process exits (an `atexit` hook sets [`SHUTDOWN`] and waits, bounded, for the
//! step in flight, so CUDA is not torn down under it).

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use super::decode::cpu_worker::{CpuSlot, CPU_RUN_TILES};
use super::decode::nvjpeg::{geo_of, plane_bytes};
use super::decode::slot::Slot;
use super::engine::Engine;
use super::lanes::Lane;
use super::scheduler::CHUNK_TILES;
use super::sys::{nv, nvjpeg, nvjpegImage, Res};
use super::trace;
use crate::config::GpuWarmup;
use crate::error::GpuError;

/// Edge of the synthetic warm-up tiles.
const EDGE: usize = 256;

/// Set when the process is exiting: the background warm-up stops at its next step.
static SHUTDOWN: AtomicBool = AtomicBool::new(false);
/// Background warm-up threads running, and the process that started them.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
static RUNNING_PID: AtomicU32 = AtomicU32::new(0);
/// Longest the exit hook waits for a background step in flight.
const EXIT_WAIT: Duration = Duration::from_secs(5);

extern "C" fn at_exit() {
    SHUTDOWN.store(true, SeqCst);
    // A forked child has no such thread (only the forking thread survives a fork).
    if RUNNING_PID.load(SeqCst) != std::process::id() {
        return;
    }
    let deadline = Instant::now() + EXIT_WAIT;
    while RUNNING.load(SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The warm-up state of one engine.
pub(crate) struct WarmState {
    pub(crate) mode: GpuWarmup,
    /// Set while the background thread still has lanes to make.
    lanes_pending: AtomicBool,
    /// What the warm-up did (`GpuStats::warmup`).
    status: Mutex<String>,
}

impl WarmState {
    pub(crate) fn new(mode: GpuWarmup) -> WarmState {
        WarmState { mode, lanes_pending: AtomicBool::new(false), status: Mutex::new(format!("{}: not started", mode.as_str())) }
    }

    /// Whether the background warm-up is still making lanes.
    pub(crate) fn lanes_pending(&self) -> bool {
        self.lanes_pending.load(SeqCst)
    }

    fn set(&self, s: String) {
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }

    /// What the warm-up did so far.
    pub(crate) fn status(&self) -> String {
        self.status.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// One 256² 4:2:0 JPEG of a synthetic pattern.
fn synthetic_jpeg() -> Res<Vec<u8>> {
    let rgb: Vec<u8> = (0..EDGE * EDGE * 3).map(|i| ((i * 7 + i / 768) % 251) as u8).collect();
    (|| {
        let mut c = turbojpeg::Compressor::new()?;
        c.set_quality(85)?;
        c.set_subsamp(turbojpeg::Subsamp::Sub2x2)?;
        c.compress_to_vec(turbojpeg::Image { pixels: &rgb[..], width: EDGE, pitch: EDGE * 3, height: EDGE, format: turbojpeg::PixelFormat::RGB })
    })()
    .map_err(|e| GpuError::Call(format!("warm-up JPEG: {e}")))
}

/// Sets the engine's `gpu_ready` when dropped (the background thread's every exit).
struct Ready<'a>(&'a AtomicBool);

impl Drop for Ready<'_> {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

/// Clears the background state on every exit of the thread, a panic included.
struct Running<'a>(&'a WarmState);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.lanes_pending.store(false, SeqCst);
        RUNNING.fetch_sub(1, SeqCst);
    }
}

impl Engine {
    /// The part of the warm-up that runs before the engine is returned (measured on the H200
    /// before it was split: the first 4096-tile batch took about 1.3 s more without any
    /// warm-up): `full` = every lane's two slots (streams, nvJPEG states, scratch / pinned
    /// buffers, nvJPEG's batched-decode internals: each slot decodes one chunk of
    /// [`CHUNK_TILES`] synthetic 256² 4:2:0 tiles) and every CPU decode worker's stream and
    /// pinned buffers; `first`, `background`, `none` = nothing (with `first`, reads decode on
    /// the CPU until the background thread made nvJPEG's decoders and warmed a lane: measured
    /// on the H200, nvJPEG's hardware handle takes ~0.5 s and a lane's two nvJPEG states
    /// ~0.45 s, which the first read would otherwise wait for).
    pub(crate) fn warm_up(&self) -> Res<()> {
        let t = Instant::now();
        let r = match self.warm.mode {
            GpuWarmup::Full => self.warm_up_full(),
            GpuWarmup::First | GpuWarmup::Background | GpuWarmup::None => Ok(()),
        };
        let ms = t.elapsed().as_secs_f64() * 1e3;
        self.warm.set(match (&r, self.warm.mode) {
            (Err(e), m) => format!("{}: failed before the first read ({e})", m.as_str()),
            (Ok(()), GpuWarmup::Full) => format!("full: {} lanes and {} CPU workers before the first read ({ms:.0} ms)", self.lanes.workers, self.cpu.workers),
            (Ok(()), GpuWarmup::First) => "first: nothing before the first read (reads decode on the CPU until nvJPEG and a warmed lane are ready)".into(),
            (Ok(()), GpuWarmup::Background) => "background: nothing before the first read".into(),
            (Ok(()), GpuWarmup::None) => "none".into(),
        });
        r
    }

    /// Every lane and CPU worker, the lanes on parallel threads.
    fn warm_up_full(&self) -> Res<()> {
        let jpeg = synthetic_jpeg()?;
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
                            self.warm_slot(slot, jpeg)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(GpuError::Call("warm-up thread panicked".into())))).collect()
        });
        let mut r = Ok(());
        for cs in taken.cpu.iter_mut() {
            r = r.and(warm_cpu(cs));
        }
        drop(taken);
        results.into_iter().collect::<Res<Vec<()>>>()?;
        r
    }

    /// Start the background part of the warm-up (`first` and `background`: nvJPEG's decoders,
    /// every lane, lanes reads made meanwhile, then the CPU workers; with `first` the reads
    /// decode on the CPU until its first lane is warm), on a thread of its own. Nothing to do
    /// for `full` and `none` (the reads send tiles to the lanes at once).
    pub(crate) fn warm_in_background(self: &Arc<Self>) {
        if matches!(self.warm.mode, GpuWarmup::Full | GpuWarmup::None) || SHUTDOWN.load(SeqCst) {
            self.gpu_ready.store(true, SeqCst);
            return;
        }
        static HOOK: Once = Once::new();
        // SAFETY: registers a plain function that only touches atomics and sleeps.
        HOOK.call_once(|| unsafe {
            libc::atexit(at_exit);
        });
        self.warm.lanes_pending.store(self.lanes.pool.made() < self.lanes.workers, SeqCst);
        RUNNING.fetch_add(1, SeqCst);
        RUNNING_PID.store(std::process::id(), SeqCst);
        let e = self.clone();
        let spawned = std::thread::Builder::new().name("slidestream-warmup".into()).spawn(move || {
            drop(crate::threads::lower_this_thread());
            let _running = Running(&e.warm);
            // However the thread ends (done, failed, stopped, a panic), reads use the lanes from
            // then on, making what they need.
            let _ready = Ready(&e.gpu_ready);
            let before = e.warm.status();
            let r = e.warm_background();
            e.warm.set(match r {
                Ok(done) => format!("{before}; background: {done}"),
                Err(err) => {
                    e.note_cpu(format!("background warm-up failed ({err}): reads make what they need"));
                    format!("{before}; background failed ({err})")
                }
            });
        });
        if spawned.is_err() {
            self.gpu_ready.store(true, SeqCst);
            self.warm.lanes_pending.store(false, SeqCst);
            RUNNING.fetch_sub(1, SeqCst);
        }
    }

    /// The background thread's work; returns what it did.
    fn warm_background(&self) -> Res<String> {
        let t0 = Instant::now();
        self.make_current()?;
        let jpeg = synthetic_jpeg()?;
        let part = "background warm-up";
        let (mut lanes, mut cpus, mut extra) = (0, 0, 0);
        let stopped = || SHUTDOWN.load(SeqCst);
        self.decoders()?;
        while !stopped() && self.lanes.pool.made() < self.lanes.workers {
            let t = Instant::now();
            let mut lane: Lane = self.new_lane()?;
            let k = self.lanes.pool.made();
            trace::phase_line(part, &format!("lane {k} made"), t);
            for (i, slot) in lane.slots.iter_mut().enumerate() {
                if stopped() {
                    break;
                }
                let t = Instant::now();
                self.warm_slot(slot, &jpeg)?;
                trace::phase_line(part, &format!("lane {k} slot {i} (nvJPEG batch of 256)"), t);
            }
            let offered = self.lanes.pool.offer(self.lanes.workers, lane);
            // A warmed lane exists: reads send JPEG tiles to the lanes from now on.
            self.gpu_ready.store(true, SeqCst);
            match offered {
                Ok(()) => lanes += 1,
                // Reads made the remaining lanes meanwhile: this one is not needed.
                Err(l) => {
                    extra += 1;
                    drop(l);
                }
            }
        }
        // Lanes that reads made for their streams while nvJPEG was starting have no nvJPEG
        // states yet: warm them here rather than in a later read.
        while !stopped() {
            let Some(mut lane) = self.lanes.pool.take_matching(|l| l.slots.iter().any(|s| s.state.is_none())) else { break };
            let t = Instant::now();
            for slot in lane.slots.iter_mut() {
                self.warm_slot(slot, &jpeg)?;
            }
            trace::phase_line(part, "a lane made by a read: warmed", t);
        }
        self.warm.lanes_pending.store(false, SeqCst);
        while !stopped() && self.cpu.pool.made() < self.cpu.workers {
            let t = Instant::now();
            let mut cs = CpuSlot::new()?;
            warm_cpu(&mut cs)?;
            if self.cpu.pool.offer(self.cpu.workers, cs).is_ok() {
                cpus += 1;
            }
            trace::phase_line(part, &format!("CPU worker {}", self.cpu.pool.made()), t);
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        trace::phase_line(part, &format!("done: {lanes} lanes, {cpus} CPU workers{}", if stopped() { " (stopped: process exiting)" } else { "" }), t0);
        Ok(format!(
            "{lanes} lanes and {cpus} CPU workers warmed in {ms:.0} ms{}",
            if extra > 0 { format!(" ({extra} lanes not needed: reads had made them)") } else { String::new() }
        ))
    }

    /// One batched nvJPEG decode of [`CHUNK_TILES`] copies of `jpeg` (a 256² 4:2:0 stream) on
    /// `slot`, laid out as `decode_convert` lays out a chunk.
    fn warm_slot(&self, slot: &mut Slot, jpeg: &[u8]) -> Res<()> {
        let (w, h) = (EDGE as c_int, EDGE as c_int);
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
        let dec = self.decoders()?;
        slot.host_state(dec)?;
        let state = slot.state.as_mut().expect("made above");
        unsafe {
            let host = dec.host.raw();
            if state.batch != n as c_int {
                nv((nvj.nvjpegDecodeBatchedInitialize)(host, state.raw(), n as c_int, 1, dec.output), "nvjpegDecodeBatchedInitialize")?;
                state.batch = n as c_int;
            }
            let r = nv(
                (nvj.nvjpegDecodeBatched)(host, state.raw(), ptrs.as_ptr(), lens.as_ptr(), images.as_mut_ptr(), slot.stream.raw()),
                "nvjpegDecodeBatched(warm-up)",
            );
            if r.is_err() {
                state.batch = -1; // initialise again before the next batch
            }
            let s = slot.stream.sync();
            r.and(s)
        }
    }
}

/// A CPU decode worker's pinned buffers, at the size a run of 256² tiles needs.
fn warm_cpu(cs: &mut CpuSlot) -> Res<()> {
    for b in cs.bufs.iter_mut() {
        b.ensure(CPU_RUN_TILES * EDGE * EDGE * 4)?;
    }
    Ok(())
}
