//! The I/O path chosen at engine start from the compat mode (KvikIO's meaning): `on` POSIX
//! into pinned memory; `off` cuFile or an error; `auto` cuFile only where GPUDirect Storage is
//! active (the nvidia-fs kernel module is loaded), with the reason for any fallback recorded.

use std::sync::Arc;

use super::cufile::{CuFileHandle, CuFiles};
use crate::gpu::cuda::counters::Counters;
use crate::gpu::CompatMode;
use crate::slide::Slide;

/// I/O path in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IoPath {
    Posix,
    CuFileGds,
    CuFileCompat,
}

impl IoPath {
    /// `"posix"`, `"cufile"` or `"cufile-compat"` (as [`GpuStats::io_path`](crate::gpu::GpuStats)).
    pub(crate) fn name(self) -> &'static str {
        match self {
            IoPath::Posix => "posix",
            IoPath::CuFileGds => "cufile",
            IoPath::CuFileCompat => "cufile-compat",
        }
    }
}

/// The engine's I/O state: the mode asked for, the path in effect and why, and the cuFile
/// handles of open slides.
pub(crate) struct Io {
    pub(crate) mode: CompatMode,
    pub(crate) path: IoPath,
    /// Why the path differs from what was asked for or from GPUDirect Storage (empty if not).
    pub(crate) reason: String,
    /// Set when the mode cannot be honoured (`off` without cuFile): every read fails with it.
    pub(crate) error: Option<String>,
    /// cuFile and its per-slide handles (no cuFile on the POSIX path).
    pub(crate) files: CuFiles,
}

pub(crate) fn nvfs_loaded() -> bool {
    std::path::Path::new("/proc/driver/nvidia-fs").exists() || std::path::Path::new("/sys/module/nvidia_fs").exists()
}

impl Io {
    /// Choose the path for `mode`: loads and opens cuFile for `off`, and for `auto` only where
    /// nvidia-fs is loaded (never for `on`).
    pub(crate) fn select(mode: CompatMode) -> Io {
        let (mut path, mut reason, mut error, mut cufile) = (IoPath::Posix, String::new(), None, None);
        match mode {
            CompatMode::On => reason = "SLIDESTREAM_COMPAT_MODE=on: POSIX reads into pinned host memory".into(),
            // Decided before cuFile is loaded: opening its driver costs start-up time and `auto`
            // would not use it without nvidia-fs anyway.
            CompatMode::Auto if !nvfs_loaded() => {
                reason = "nvidia-fs kernel module not loaded, so GPUDirect Storage is inactive and cuFile would only add a bounce-buffer copy: POSIX reads into pinned host memory, cuFile not loaded (SLIDESTREAM_COMPAT_MODE=off forces cuFile)".into()
            }
            CompatMode::Off | CompatMode::Auto => match super::cufile::driver() {
                Err(e) if mode == CompatMode::Off => error = Some(format!("SLIDESTREAM_COMPAT_MODE=off needs cuFile: {e}")),
                Err(e) => reason = format!("cuFile unavailable ({e}): POSIX reads into pinned host memory"),
                Ok(cf) => {
                    if nvfs_loaded() {
                        path = IoPath::CuFileGds;
                        cufile = Some(cf);
                    } else if mode == CompatMode::Off {
                        path = IoPath::CuFileCompat;
                        cufile = Some(cf);
                        reason = "nvidia-fs kernel module not loaded: cuFile runs in its compatibility mode (POSIX reads into its bounce buffers, then copies to the device)".into();
                    } else {
                        reason = "nvidia-fs kernel module not loaded, so GPUDirect Storage is inactive and cuFile would only add a bounce-buffer copy: POSIX reads into pinned host memory (SLIDESTREAM_COMPAT_MODE=off forces cuFile)".into();
                    }
                }
            },
        }
        Io { mode, path, reason, error, files: CuFiles::new(cufile) }
    }

    /// The cuFile handle of `slide` when the path is cuFile and the slide could be registered
    /// (`None`: its reads go through POSIX; the reason is in the counters).
    pub(crate) fn cufile_handle(&self, slide: &Slide, counters: &Counters) -> Option<Arc<CuFileHandle>> {
        if self.path == IoPath::Posix {
            return None;
        }
        self.files.handle(slide, counters)
    }
}
