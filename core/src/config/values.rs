//! Typed values of the enumerated settings and the parsers of every setting's text.
//!
//! Parsers take the text of an environment variable or of [`super::set`] (already trimmed) and
//! return `None` when it is not an accepted value; the caller turns that into
//! [`crate::Error::Config`] naming the variable and the accepted values of its [`super::Spec`].

/// Which I/O path the GPU reads use, KvikIO-style (`SLIDESTREAM_COMPAT_MODE`).
///
/// * `On`: POSIX `pread` into pinned host buffers, then asynchronous copies / host-bitstream
///   nvJPEG decoding (never cuFile).
/// * `Off`: cuFile (`cuFileRead`) into device memory; an error when libcufile cannot be loaded
///   or its driver cannot be opened. Without the nvidia-fs kernel module cuFile runs in its own
///   compatibility mode (POSIX reads into its bounce buffers); the I/O statistics say so.
/// * `Auto` (default): cuFile when it loads, its driver opens and GPUDirect Storage is really
///   active (nvidia-fs loaded); otherwise POSIX, with the reason recorded in the GPU stats.
///
/// KvikIO's `KVIKIO_COMPAT_MODE` has the same three values and spellings (on = POSIX, off =
/// cuFile, auto; also `true/false/1/0/yes/no`), which [`CompatMode::parse`] accepts too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompatMode {
    /// POSIX reads only.
    On,
    /// cuFile reads only.
    Off,
    /// cuFile where GPUDirect Storage is active, else POSIX.
    #[default]
    Auto,
}

impl CompatMode {
    /// Parse `on|off|auto` (case-insensitive; also `true/false/1/0/yes/no` as KvikIO).
    /// `None` for anything else.
    pub fn parse(s: &str) -> Option<CompatMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "1" | "yes" => Some(CompatMode::On),
            "off" | "false" | "0" | "no" => Some(CompatMode::Off),
            "auto" => Some(CompatMode::Auto),
            _ => None,
        }
    }

    /// `"on"`, `"off"` or `"auto"`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompatMode::On => "on",
            CompatMode::Off => "off",
            CompatMode::Auto => "auto",
        }
    }
}

/// How the GPU engine orders its work queue between nvJPEG lanes and CPU decode workers
/// (`SLIDESTREAM_GPU_SPLIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuSplit {
    /// By the CPU decoder's estimated cost, then offset: lanes take the costly tiles (default).
    #[default]
    Cost,
    /// By file offset only.
    Offset,
}

/// Whether the GPU engine decodes baseline JPEG tiles on the multiprocessors
/// (`SLIDESTREAM_GPU_SM_DECODER`): the SM decoder (`gpu/cuda/decode/sm.rs`), whose samples
/// equal libjpeg-turbo's, takes a call's JPEG tiles in one launch before the nvJPEG lanes and the
/// CPU workers see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuSmDecoder {
    /// Never (default): the lanes and CPU workers decode.
    #[default]
    Off,
    /// Every tile the SM decoder takes goes to it; the rest to the lanes and CPU workers.
    On,
    /// On where nvJPEG has no hardware JPEG engines (its CUDA backends decoded 3.1–3.4k tiles a
    /// second on the H200), else off.
    Auto,
}

/// How host threads wait for the GPU (`SLIDESTREAM_GPU_SYNC`): the CUDA primary context's
/// scheduling flag (`CU_CTX_SCHED_*`, CUDA driver API), set only if the context is not active yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuSync {
    /// Leave the driver's default (`CU_CTX_SCHED_AUTO`).
    #[default]
    Auto,
    /// `CU_CTX_SCHED_SPIN`.
    Spin,
    /// `CU_CTX_SCHED_YIELD`.
    Yield,
    /// `CU_CTX_SCHED_BLOCKING_SYNC`.
    Blocking,
}

/// Priority of the GPU engine's CUDA streams (`SLIDESTREAM_GPU_STREAM_PRIORITY`), given to
/// `cuStreamCreateWithPriority`. The device scheduler starts thread blocks of a higher-priority
/// stream's pending work before a lower one's (CUDA programming guide, "Stream Priorities"), so
/// the engine's short kernels and copies run between a model's kernels instead of queueing
/// behind them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuStreamPriority {
    /// The device's greatest priority (`cuCtxGetStreamPriorityRange`) (default).
    #[default]
    High,
    /// The default priority, that of PyTorch's and most libraries' streams.
    Normal,
}

/// How the GPU engine's threads wait for their streams (`SLIDESTREAM_GPU_WAIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuWait {
    /// Sleep on a blocking-sync event (`CU_EVENT_BLOCKING_SYNC`, CUDA driver API) (default).
    #[default]
    Block,
    /// `cuStreamSynchronize`, as the context's scheduling flag says.
    Spin,
}

/// nvJPEG output format of the GPU decode lanes (`SLIDESTREAM_NVJPEG_OUTPUT`): both give the
/// planes as coded; slidestream converts colour itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NvjpegOutput {
    /// `NVJPEG_OUTPUT_UNCHANGED` (default).
    #[default]
    Unchanged,
    /// `NVJPEG_OUTPUT_YUV`.
    Yuv,
}

/// Where compiled GPU kernels are cached (`SLIDESTREAM_KERNEL_CACHE`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KernelCache {
    /// `$XDG_CACHE_HOME/slidestream/kernels`, else `$HOME/.cache/slidestream/kernels`.
    #[default]
    Auto,
    /// No cache: the kernels are compiled at every engine start.
    Off,
    /// This directory (an absolute path).
    Dir(std::path::PathBuf),
}

/// The on-disk index cache of remote slides (`SLIDESTREAM_REMOTE_INDEX_CACHE`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum IndexCache {
    /// No cache (default): every open of a remote slide reads its structure.
    #[default]
    Off,
    /// `$XDG_CACHE_HOME/slidestream/index`, else `$HOME/.cache/slidestream/index`.
    Auto,
    /// This directory (an absolute path).
    Dir(std::path::PathBuf),
}

impl IndexCache {
    /// The folder in effect (`None` when off, or for `auto` without `XDG_CACHE_HOME` / `HOME`).
    pub fn dir(&self) -> Option<std::path::PathBuf> {
        match self {
            IndexCache::Off => None,
            IndexCache::Dir(d) => Some(d.clone()),
            IndexCache::Auto => {
                let base = std::env::var_os("XDG_CACHE_HOME")
                    .filter(|v| !v.is_empty())
                    .map(std::path::PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| std::path::PathBuf::from(h).join(".cache")))?;
                Some(base.join("slidestream").join("index"))
            }
        }
    }
}

pub(super) fn parse_index_cache(s: &str) -> Option<IndexCache> {
    match parse_kernel_cache(s)? {
        KernelCache::Auto => Some(IndexCache::Auto),
        KernelCache::Off => Some(IndexCache::Off),
        KernelCache::Dir(d) => Some(IndexCache::Dir(d)),
    }
}

/// How much of the GPU engine's warm-up runs before the first read (`SLIDESTREAM_GPU_WARMUP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuWarmup {
    /// Nothing before the engine is returned; a background thread makes nvJPEG's decoders and
    /// warms the lanes, then the CPU workers; reads before its first warmed lane decode on the
    /// CPU (default: the first read does not wait for nvJPEG's ~1 s start on the H200).
    #[default]
    First,
    /// Everything before the engine is returned (every lane's slots, every CPU worker).
    Full,
    /// Nothing before; everything on a background thread, reads using nvJPEG from the start
    /// (a read that needs the decoders before the thread made them waits for them).
    Background,
    /// No warm-up: lanes and buffers are made by the reads that need them.
    None,
}

impl GpuWarmup {
    /// `"first"`, `"full"`, `"background"` or `"none"`.
    pub fn as_str(self) -> &'static str {
        match self {
            GpuWarmup::First => "first",
            GpuWarmup::Full => "full",
            GpuWarmup::Background => "background",
            GpuWarmup::None => "none",
        }
    }
}

pub(super) fn parse_kernel_cache(s: &str) -> Option<KernelCache> {
    if s.eq_ignore_ascii_case("auto") {
        return Some(KernelCache::Auto);
    }
    if s.eq_ignore_ascii_case("off") {
        return Some(KernelCache::Off);
    }
    let p = std::path::Path::new(s);
    p.is_absolute().then(|| KernelCache::Dir(p.to_path_buf()))
}

pub(super) fn parse_warmup(s: &str) -> Option<GpuWarmup> {
    match s.to_ascii_lowercase().as_str() {
        "first" => Some(GpuWarmup::First),
        "full" => Some(GpuWarmup::Full),
        "background" => Some(GpuWarmup::Background),
        "none" => Some(GpuWarmup::None),
        _ => None,
    }
}

pub(super) fn parse_u64(s: &str, min: u64, max: u64) -> Option<u64> {
    s.parse::<u64>().ok().filter(|v| (min..=max).contains(v))
}

pub(super) fn parse_usize(s: &str, min: usize, max: usize) -> Option<usize> {
    s.parse::<usize>().ok().filter(|v| (min..=max).contains(v))
}

pub(super) fn parse_fraction(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| (0.0..=1.0).contains(v))
}

pub(super) fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

pub(super) fn parse_auto_usize(s: &str, max: usize) -> Option<Option<usize>> {
    if s.eq_ignore_ascii_case("auto") {
        return Some(None);
    }
    parse_usize(s, 0, max).map(Some)
}

pub(super) fn parse_split(s: &str) -> Option<GpuSplit> {
    match s.to_ascii_lowercase().as_str() {
        "cost" => Some(GpuSplit::Cost),
        "offset" => Some(GpuSplit::Offset),
        _ => None,
    }
}

pub(super) fn parse_sm_decoder(s: &str) -> Option<GpuSmDecoder> {
    match s.to_ascii_lowercase().as_str() {
        "off" => Some(GpuSmDecoder::Off),
        "on" => Some(GpuSmDecoder::On),
        "auto" => Some(GpuSmDecoder::Auto),
        _ => None,
    }
}

pub(super) fn parse_sync(s: &str) -> Option<GpuSync> {
    match s.to_ascii_lowercase().as_str() {
        "auto" => Some(GpuSync::Auto),
        "spin" => Some(GpuSync::Spin),
        "yield" => Some(GpuSync::Yield),
        "blocking" => Some(GpuSync::Blocking),
        _ => None,
    }
}

pub(super) fn parse_stream_priority(s: &str) -> Option<GpuStreamPriority> {
    match s.to_ascii_lowercase().as_str() {
        "high" => Some(GpuStreamPriority::High),
        "normal" => Some(GpuStreamPriority::Normal),
        _ => None,
    }
}

pub(super) fn parse_gpu_wait(s: &str) -> Option<GpuWait> {
    match s.to_ascii_lowercase().as_str() {
        "block" => Some(GpuWait::Block),
        "spin" => Some(GpuWait::Spin),
        _ => None,
    }
}

/// `SLIDESTREAM_THREAD_NICE`: 0..=19 on Linux (per-thread nice values), only 0 elsewhere.
pub(super) fn parse_thread_nice(s: &str) -> Option<u8> {
    let max = if cfg!(target_os = "linux") { 19 } else { 0 };
    parse_usize(s, 0, max).map(|v| v as u8)
}

pub(super) fn parse_nvjpeg_output(s: &str) -> Option<NvjpegOutput> {
    match s.to_ascii_lowercase().as_str() {
        "unchanged" => Some(NvjpegOutput::Unchanged),
        "yuv" => Some(NvjpegOutput::Yuv),
        _ => None,
    }
}
