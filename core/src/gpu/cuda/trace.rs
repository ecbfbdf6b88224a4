//! Timing of the engine's phases when `SLIDESTREAM_GPU_TRACE` is set: nanoseconds summed over
//! threads, printed to stderr after each large call and then zeroed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Instant;

/// Phase names, indexed by the constants below.
const PHASES: [&str; 11] = [
    "read",
    "splice+info",
    "nvjpeg call",
    "convert launch",
    "slot wait",
    "cpu decode+upload",
    "assemble",
    "output alloc",
    "cache insert",
    "sm host+submit",
    "sm last wait",
];
/// Reads of a chunk (POSIX).
pub(crate) const READ: usize = 0;
/// Splicing tables and checking geometry on the host.
pub(crate) const SPLICE: usize = 1;
/// The `nvjpegDecodeBatched` call.
pub(crate) const NVJPEG: usize = 2;
/// Launching the convert kernel.
pub(crate) const CONVERT: usize = 3;
/// Waiting for a slot's previous chunk.
pub(crate) const SLOT_WAIT: usize = 4;
/// CPU decoding and upload.
pub(crate) const CPU: usize = 5;
/// The assembly launch and its synchronisation.
pub(crate) const ASSEMBLE: usize = 6;
/// The output allocation.
pub(crate) const OUTPUT: usize = 7;
/// Device cache inserts.
pub(crate) const CACHE: usize = 8;
/// The SM decoder's host work per wave (read, frame, check, pack) and the launches'
/// submission; not the wait for the slot's previous wave.
pub(crate) const SM_HOST: usize = 9;
/// Waiting for the SM decoder's last waves and their convert kernels.
pub(crate) const SM_WAIT: usize = 10;

/// Whether the trace is on (`SLIDESTREAM_GPU_TRACE`, read once per process).
pub(crate) fn on() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(super::settings::trace)
}

/// Seconds on `CLOCK_MONOTONIC`, the clock of Rust's `Instant` and Python's `time.monotonic()`
/// on Linux: printed in the start-up lines so that they line up with a caller's timestamps
/// (`benches/first_read.py`) and with each other across threads.
pub(crate) fn mono() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: out-pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Print one timed start-up line: `[slidestream gpu trace] {part}: {what} {ms} ms (t={mono})`.
pub(crate) fn phase_line(part: &str, what: &str, since: Instant) {
    if on() {
        eprintln!("[slidestream gpu trace] {part}: {what} {:.1} ms (t={:.3})", since.elapsed().as_secs_f64() * 1e3, mono());
    }
}

/// Successive phases of one start-up sequence, one trace line each ([`phase_line`]).
pub(crate) struct Phases {
    part: String,
    last: Instant,
    first: Instant,
}

impl Phases {
    /// Phases of `part` (e.g. `"engine start (device 0)"`), timed from now.
    pub(crate) fn new(part: String) -> Phases {
        let now = Instant::now();
        Phases { part, last: now, first: now }
    }

    /// End the current phase, named `what`, and start the next.
    pub(crate) fn lap(&mut self, what: &str) {
        phase_line(&self.part, what, self.last);
        self.last = Instant::now();
    }

    /// The part's name (for lines printed by the parts it calls).
    pub(crate) fn part(&self) -> &str {
        &self.part
    }

    /// Time since the sequence began.
    pub(crate) fn total_ms(&self) -> f64 {
        self.first.elapsed().as_secs_f64() * 1e3
    }
}

/// Phase timings of one engine.
#[derive(Default)]
pub(crate) struct Trace {
    phases: [AtomicU64; 11],
}

impl Trace {
    /// Run `f`, adding its duration to `phase` when the trace is on.
    pub(crate) fn time<T>(&self, phase: usize, f: impl FnOnce() -> T) -> T {
        if !on() {
            return f();
        }
        let t0 = Instant::now();
        let r = f();
        self.since(phase, t0);
        r
    }

    /// Add the time since `t0` to `phase` when the trace is on.
    pub(crate) fn since(&self, phase: usize, t0: Instant) {
        if on() {
            self.phases[phase].fetch_add(t0.elapsed().as_nanos() as u64, Relaxed);
        }
    }

    /// Print the phases of a call (`n` patches, `n_miss` tiles decoded) and zero them.
    pub(crate) fn report_call(&self, n: usize, n_miss: usize, t_decode: Instant, t_entry: Instant) {
        let t: Vec<String> = PHASES.iter().zip(&self.phases).map(|(n, v)| format!("{n} {:.1} ms", v.swap(0, Relaxed) as f64 / 1e6)).collect();
        eprintln!(
            "[slidestream gpu trace] {n} patches, {n_miss} tiles decoded in {:.1} ms (call {:.1} ms): {}",
            t_decode.elapsed().as_secs_f64() * 1e3,
            t_entry.elapsed().as_secs_f64() * 1e3,
            t.join(", ")
        );
    }
}

/// When each decoder of one call ran out of work (lanes and CPU workers), in ms from the start.
#[derive(Default)]
pub(crate) struct Finished {
    t: std::sync::Mutex<Vec<(&'static str, f64)>>,
}

impl Finished {
    /// Record that a decoder of `kind` (`"lane"` or `"cpu"`) finished, when the trace is on.
    pub(crate) fn done(&self, t0: Instant, kind: &'static str) {
        if on() {
            self.t.lock().unwrap_or_else(|p| p.into_inner()).push((kind, t0.elapsed().as_secs_f64() * 1e3));
        }
    }

    /// Print the list for a call of `n` tiles.
    pub(crate) fn report(self, n: usize) {
        let f = self.t.into_inner().unwrap_or_else(|p| p.into_inner());
        let list = |k: &str| f.iter().filter(|(kind, _)| *kind == k).map(|(_, t)| format!("{t:.1}")).collect::<Vec<_>>().join(" ");
        eprintln!("[slidestream gpu trace] {n} tiles: lanes done at [{}] ms, CPU workers done at [{}] ms", list("lane"), list("cpu"));
    }
}
