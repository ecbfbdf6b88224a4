//! The one table of `SLIDESTREAM_*` settings: name, default, unit, accepted values, meaning and
//! parser of each, and the typed [`Settings`] struct built from it. docs/settings.md is this
//! table in prose; `tests::docs_match_table` keeps the two equal.

use super::values::*;

/// One setting of the table.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Environment variable, e.g. `SLIDESTREAM_CACHE_BYTES`.
    pub name: &'static str,
    /// Default, as text (parsed by the setting's own parser: the default is a valid value).
    pub default: &'static str,
    /// Unit (`bytes`, `tiles`, `fraction`, `—` for enumerations).
    pub unit: &'static str,
    /// Accepted values, in words (quoted in error messages).
    pub accepted: &'static str,
    /// What the setting does, and when it is read.
    pub doc: &'static str,
    /// `true` when the setting is read once per process (by the shared host cache or the GPU
    /// engine when it starts); changing it after that is refused with an error, never ignored.
    pub per_process: bool,
    /// Validates a value (`true` = accepted).
    pub(crate) check: fn(&str) -> bool,
}

macro_rules! settings {
    ($( $(#[$m:meta])* $field:ident : $ty:ty = {
        name: $name:literal, default: $default:literal, unit: $unit:literal,
        accepted: $accepted:literal, per_process: $pp:literal, parse: $parse:expr, doc: $doc:literal $(,)?
    } )*) => {
        /// Every setting, resolved: an override from [`super::set`] wins over the environment
        /// variable, which wins over the default. Built by [`super::settings`].
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub struct Settings {
            $( $(#[$m])* pub $field: $ty, )*
        }

        /// The table, in the order of docs/settings.md.
        pub const TABLE: &[Spec] = &[
            $( Spec { name: $name, default: $default, unit: $unit, accepted: $accepted, doc: $doc,
                      per_process: $pp, check: |s| ($parse)(s).is_some() }, )*
        ];

        impl Settings {
            /// Resolve every setting with `raw` giving the text in effect for a name (override
            /// or environment; `None` = default).
            pub(super) fn resolve(raw: &dyn Fn(&'static str) -> Option<String>) -> crate::Result<Settings> {
                Ok(Settings { $( $field: {
                    let parse = $parse;
                    match raw($name) {
                        Some(text) => parse(text.as_str()).ok_or_else(|| crate::Error::Config {
                            variable: $name.into(), value: text.clone(), expected: $accepted.into() })?,
                        None => parse($default).expect(concat!("default of ", $name, " parses")),
                    }
                }, )* })
            }
        }
    };
}

settings! {
    /// Host tile cache capacity in bytes (shared by all slides of the process).
    cache_bytes: u64 = { name: "SLIDESTREAM_CACHE_BYTES", default: "268435456", unit: "bytes",
        accepted: "an integer number of bytes, 0 or more", per_process: true,
        parse: |s: &str| parse_u64(s, 0, u64::MAX),
        doc: "capacity of the process-wide host tile cache (0 disables it); read when the shared cache is first made" }
    /// Largest hole between two tile byte ranges still read as one request.
    plan_max_gap_bytes: u64 = { name: "SLIDESTREAM_PLAN_MAX_GAP_BYTES", default: "8192", unit: "bytes",
        accepted: "an integer number of bytes, 0 or more", per_process: false,
        parse: |s: &str| parse_u64(s, 0, u64::MAX),
        doc: "largest hole between tiles read as one request; read at each open" }
    /// Largest coalesced request in bytes.
    plan_max_request_bytes: u64 = { name: "SLIDESTREAM_PLAN_MAX_REQUEST_BYTES", default: "8388608", unit: "bytes",
        accepted: "an integer number of bytes, 1 or more", per_process: false,
        parse: |s: &str| parse_u64(s, 1, u64::MAX),
        doc: "largest coalesced read request (a longer tile is still read whole); read at each open" }
    /// Reads in flight at once: threads of the process-wide I/O pool.
    io_depth: usize = { name: "SLIDESTREAM_IO_DEPTH", default: "32", unit: "reads",
        accepted: "an integer from 1 to 1024", per_process: true,
        parse: |s: &str| parse_usize(s, 1, 1024),
        doc: "positional reads in flight at once: the threads of the process-wide I/O pool that reads a plan's coalesced requests (CPU reads and the GPU path's POSIX reads), apart from the decode threads; 1 = read on the calling thread; read at the first open" }
    /// Decode threads of the Python bindings' process-wide pool (`None` = `RAYON_NUM_THREADS`,
    /// else one per core).
    decode_threads: Option<usize> = { name: "SLIDESTREAM_DECODE_THREADS", default: "auto", unit: "threads",
        accepted: "auto or an integer from 1 to 1024", per_process: true,
        parse: |s: &str| parse_auto_usize(s, 1024).filter(|v| *v != Some(0)),
        doc: "threads that decode tiles for CPU reads from Python (the process-wide decode pool; auto = RAYON_NUM_THREADS when set, else one per core); the Rust API decodes on rayon's global pool or the caller's, the CLI takes --threads; read once per process, at the first open" }
    /// Largest region output in bytes (width × height × 4 for RGBA).
    max_region_bytes: u64 = { name: "SLIDESTREAM_MAX_REGION_BYTES", default: "4294967296", unit: "bytes",
        accepted: "an integer number of bytes, 1 or more", per_process: false,
        parse: |s: &str| parse_u64(s, 1, u64::MAX),
        doc: "largest output of one region or batch read; read at each open" }
    /// Bytes one CPU read call holds at once while reading and decoding tiles (waves).
    read_working_bytes: u64 = { name: "SLIDESTREAM_READ_WORKING_BYTES", default: "201326592", unit: "bytes",
        accepted: "an integer number of bytes, 1048576 (1 MiB) or more", per_process: false,
        parse: |s: &str| parse_u64(s, 1 << 20, u64::MAX),
        doc: "bytes one CPU read call holds at once while reading and decoding tiles (compressed bytes, decoded pixels and the decoder's buffers, estimated before reading): tiles are fetched in waves of at most this much and placed into the output as each wave ends; a single tile needing more is a limits error; read at each open" }
    /// Bytes all CPU read calls of the process hold at once (0 = no bound beyond each call's).
    read_process_bytes: u64 = { name: "SLIDESTREAM_READ_PROCESS_BYTES", default: "0", unit: "bytes",
        accepted: "an integer number of bytes: 0 (no process-wide bound) or 1048576 (1 MiB) or more", per_process: true,
        parse: |s: &str| parse_u64(s, 0, u64::MAX).filter(|&v| v == 0 || v >= 1 << 20),
        doc: "bytes all CPU read calls of the process hold at once while reading and decoding tiles: every wave of every call takes its charge from this one budget and waits while other calls hold too much (a wave larger than the budget runs alone); bounds concurrent calls, which otherwise hold up to one working set each; 0 = no process-wide bound; read once per process, at the first read" }
    /// Partial JPEG decoding threshold, as a share of a tile's area (0 disables).
    partial_decode_max_fraction: f64 = { name: "SLIDESTREAM_PARTIAL_DECODE_MAX_FRACTION", default: "0.5", unit: "fraction",
        accepted: "a number from 0 to 1", per_process: false,
        parse: parse_fraction,
        doc: "decode only the needed part of an uncached JPEG tile (not cached) when a read needs at most this share of it; 0 = always whole tiles; read at each open (the GPU engine's CPU workers use the slide's value)" }
    /// I/O path of GPU reads.
    compat_mode: CompatMode = { name: "SLIDESTREAM_COMPAT_MODE", default: "auto", unit: "—",
        accepted: "on, off or auto (also true/false/1/0/yes/no, as KvikIO)", per_process: true,
        parse: CompatMode::parse,
        doc: "GPU reads: on = POSIX into pinned memory, off = cuFile (an error where cuFile cannot be used), auto = cuFile only where GPUDirect Storage is active (KvikIO's meaning); read when the GPU engine starts" }
    /// Device tile cache budget in bytes.
    device_cache_bytes: u64 = { name: "SLIDESTREAM_DEVICE_CACHE_BYTES", default: "2147483648", unit: "bytes",
        accepted: "an integer number of bytes, 0 or more", per_process: true,
        parse: |s: &str| parse_u64(s, 0, u64::MAX),
        doc: "device tile cache capacity (0 disables it); read when the GPU engine starts" }
    /// nvJPEG decode lanes of the GPU engine.
    gpu_workers: usize = { name: "SLIDESTREAM_GPU_WORKERS", default: "2", unit: "lanes",
        accepted: "an integer from 1 to 8", per_process: true,
        parse: |s: &str| parse_usize(s, 1, 8),
        doc: "nvJPEG decode lanes, made and warmed by the warm-up (see SLIDESTREAM_GPU_WARMUP); each concurrent device read takes one, callers beyond them wait; one batch decodes on its lane beside the CPU decode workers (spread over every free lane when SLIDESTREAM_GPU_CPU_WORKERS=0); read when the GPU engine starts" }
    /// CPU decode workers beside the lanes (`None` = cores − lanes, at most 32).
    gpu_cpu_workers: Option<usize> = { name: "SLIDESTREAM_GPU_CPU_WORKERS", default: "auto", unit: "threads",
        accepted: "auto or an integer from 0 to 256", per_process: true,
        parse: |s: &str| parse_auto_usize(s, 256),
        doc: "CPU decode workers that take the back of large GPU batches (auto = cores − lanes, at most 32; 0 = nvJPEG only); read when the GPU engine starts" }
    /// Work-queue order of the GPU engine.
    gpu_split: GpuSplit = { name: "SLIDESTREAM_GPU_SPLIT", default: "cost", unit: "—",
        accepted: "cost or offset", per_process: true,
        parse: parse_split,
        doc: "order of the GPU work queue: cost = by the CPU decoder's estimated cost (lanes take the costly tiles), offset = by file offset only; read when the GPU engine starts" }
    /// The SM JPEG decoder.
    gpu_sm_decoder: GpuSmDecoder = { name: "SLIDESTREAM_GPU_SM_DECODER", default: "off", unit: "—",
        accepted: "off, on or auto", per_process: true,
        parse: parse_sm_decoder,
        doc: "experimental: decode baseline JPEG tiles on the GPU's multiprocessors (the kernels' samples equal libjpeg-turbo's; one warp per tile), a call's tiles in waves of up to 4,096 before the nvJPEG lanes and CPU workers, with 1–3 host cores busy instead of 10–13; fastest on batches (keep two in flight, e.g. `PatchLoader(readers=2)`), slower than the hardware engines for a lone region (calls of fewer than 64 tiles go to the lanes and CPU workers), and it shares the multiprocessors with a model on the same GPU: on = every tile it takes in calls of at least 64 tiles, auto = only where nvJPEG has no hardware JPEG engines, off = never; read when the GPU engine starts" }
    /// CUDA context scheduling of host threads.
    gpu_sync: GpuSync = { name: "SLIDESTREAM_GPU_SYNC", default: "auto", unit: "—",
        accepted: "auto, spin, yield or blocking", per_process: true,
        parse: parse_sync,
        doc: "how host threads wait for the GPU (CU_CTX_SCHED_*; auto = the driver's default), set only if the primary context is not active yet; read when the GPU engine starts" }
    /// Priority of the GPU engine's CUDA streams.
    gpu_stream_priority: GpuStreamPriority = { name: "SLIDESTREAM_GPU_STREAM_PRIORITY", default: "high", unit: "—",
        accepted: "high or normal", per_process: true,
        parse: parse_stream_priority,
        doc: "priority of the GPU engine's CUDA streams (cuStreamCreateWithPriority): high = the device's greatest, so the engine's short kernels and copies are scheduled between the thread blocks of a model's kernels on normal-priority streams (PyTorch's default) instead of queueing behind them; normal = the default priority; read when the GPU engine starts" }
    /// How the GPU engine's threads wait for its streams.
    gpu_wait: GpuWait = { name: "SLIDESTREAM_GPU_WAIT", default: "block", unit: "—",
        accepted: "block or spin", per_process: true,
        parse: parse_gpu_wait,
        doc: "how the GPU engine's threads wait for their own streams (a decode, an upload, an assembly): block = sleep on a blocking-sync CUDA event (CU_EVENT_BLOCKING_SYNC) until the device signals it, whatever scheduling flag the context has, so waiting threads leave their cores to the caller's threads (a training loop); spin = cuStreamSynchronize, which spins or yields as the context's flag (SLIDESTREAM_GPU_SYNC or the driver's default) says; read when the GPU engine starts" }
    /// Nice increment of slidestream's background threads.
    thread_nice: u8 = { name: "SLIDESTREAM_THREAD_NICE", default: "0", unit: "nice",
        accepted: "an integer from 0 to 19 (0 only where threads have no nice value of their own, i.e. outside Linux)", per_process: true,
        parse: parse_thread_nice,
        doc: "added to the nice value (Linux scheduling priority, setpriority) of slidestream's own background threads: the Python decode pool, the I/O pool, the GPU engine's lanes, CPU decode workers and warm-up thread, and PatchLoader's read-ahead threads; never the caller's thread. A higher value lets a training loop's threads take a contended core first; 0 = unchanged; read once per process, at the first open" }
    /// nvJPEG output format.
    nvjpeg_output: NvjpegOutput = { name: "SLIDESTREAM_NVJPEG_OUTPUT", default: "unchanged", unit: "—",
        accepted: "unchanged or yuv", per_process: true,
        parse: parse_nvjpeg_output,
        doc: "nvJPEG output format of the decode lanes (both give the planes as coded; measured the same speed); read when the GPU engine starts" }
    /// Smallest chunk a lane takes as the queue runs low.
    gpu_min_chunk: usize = { name: "SLIDESTREAM_GPU_MIN_CHUNK", default: "64", unit: "tiles",
        accepted: "an integer from 1 to 256", per_process: true,
        parse: |s: &str| parse_usize(s, 1, 256),
        doc: "smallest chunk a GPU lane takes as the queue runs low (each takes a share of what is left, at most 256; 256 = fixed chunks); read when the GPU engine starts" }
    /// Per-phase trace of the GPU engine on stderr.
    gpu_trace: bool = { name: "SLIDESTREAM_GPU_TRACE", default: "0", unit: "—",
        accepted: "1/0, true/false, on/off or yes/no", per_process: true,
        parse: parse_bool,
        doc: "print GPU engine start and warm-up times and per-phase times of large batches to stderr; read when the GPU engine starts" }
    /// Directory of the compiled-kernel cache.
    kernel_cache: KernelCache = { name: "SLIDESTREAM_KERNEL_CACHE", default: "auto", unit: "—",
        accepted: "auto, off or an absolute directory path", per_process: true,
        parse: parse_kernel_cache,
        doc: "where the GPU kernels compiled by NVRTC are kept between processes, keyed by kernel source, compile options, device architecture, NVRTC and driver versions (auto = $XDG_CACHE_HOME/slidestream/kernels, else ~/.cache/slidestream/kernels; off = compile at every engine start); a missing, unreadable or corrupt file is compiled again and rewritten, an unwritable directory only noted (kernel_cache in the GPU stats); read when the GPU engine starts" }
    /// How much of the GPU engine's warm-up runs before the first read.
    gpu_warmup: GpuWarmup = { name: "SLIDESTREAM_GPU_WARMUP", default: "first", unit: "—",
        accepted: "first, full, background or none", per_process: true,
        parse: parse_warmup,
        doc: "GPU engine warm-up (nvJPEG batched decode of synthetic tiles on each lane slot, CPU workers' pinned buffers): first = nothing before the engine is returned, a background thread makes nvJPEG's decoders and warms the lanes and CPU workers (reads never wait for it, and decode on the CPU until its first lane is warm), full = everything before, background = everything on the background thread, none = no warm-up (reads make what they need); read when the GPU engine starts" }
    /// Retries of a failed remote request.
    remote_retries: usize = { name: "SLIDESTREAM_REMOTE_RETRIES", default: "5", unit: "retries",
        accepted: "an integer from 0 to 100", per_process: false,
        parse: |s: &str| parse_usize(s, 0, 100),
        doc: "remote slides (s3://, gs://, az://, http(s)://): retries of a request that failed with a 5xx status, a connection error or a timeout, with exponential backoff from 50 ms (object_store's RetryConfig); read at each open" }
    /// Timeout of one remote request attempt, in milliseconds.
    remote_timeout_ms: u64 = { name: "SLIDESTREAM_REMOTE_TIMEOUT_MS", default: "30000", unit: "ms",
        accepted: "an integer from 1 to 3600000", per_process: false,
        parse: |s: &str| parse_u64(s, 1, 3_600_000),
        doc: "remote slides: timeout of one request attempt (connect and response); a request is given up after its retries, each bounded by this; read at each open" }
    /// Remote requests in flight at once per batch.
    remote_concurrency: usize = { name: "SLIDESTREAM_REMOTE_CONCURRENCY", default: "64", unit: "requests",
        accepted: "an integer from 1 to 1024", per_process: false,
        parse: |s: &str| parse_usize(s, 1, 1024),
        doc: "remote slides: ranged GETs of one batch's read plan in flight at once; read at each open" }
    /// Largest hole between two tile byte ranges read as one remote request.
    remote_max_gap_bytes: u64 = { name: "SLIDESTREAM_REMOTE_MAX_GAP_BYTES", default: "65536", unit: "bytes",
        accepted: "an integer number of bytes, 0 or more", per_process: false,
        parse: |s: &str| parse_u64(s, 0, u64::MAX),
        doc: "remote slides: largest hole between tiles read as one request (replaces SLIDESTREAM_PLAN_MAX_GAP_BYTES for them); read at each open" }
    /// Largest coalesced remote request in bytes.
    remote_max_request_bytes: u64 = { name: "SLIDESTREAM_REMOTE_MAX_REQUEST_BYTES", default: "16777216", unit: "bytes",
        accepted: "an integer number of bytes, 1 or more", per_process: false,
        parse: |s: &str| parse_u64(s, 1, u64::MAX),
        doc: "remote slides: largest coalesced request (replaces SLIDESTREAM_PLAN_MAX_REQUEST_BYTES for them); read at each open" }
    /// Block size of the open-time readahead of remote slides.
    remote_readahead_bytes: u64 = { name: "SLIDESTREAM_REMOTE_READAHEAD_BYTES", default: "262144", unit: "bytes",
        accepted: "an integer number of bytes from 4096 to 67108864", per_process: false,
        parse: |s: &str| parse_u64(s, 4096, 64 << 20),
        doc: "remote slides: while a slide opens, its header and directory reads are served from aligned blocks of this size, one request per run of missing blocks (dropped when the open ends); read at each open" }
    /// On-disk index cache of remote slides.
    remote_index_cache: IndexCache = { name: "SLIDESTREAM_REMOTE_INDEX_CACHE", default: "off", unit: "—",
        accepted: "off, auto or an absolute directory path", per_process: false,
        parse: parse_index_cache,
        doc: "remote slides: keep the bytes an open read (with the object's length and ETag) in a file per URL, so a reopen sends no request (the first tile read's If-Match still checks the object is unchanged); auto = $XDG_CACHE_HOME/slidestream/index, else ~/.cache/slidestream/index; off = none; read at each open" }
}
