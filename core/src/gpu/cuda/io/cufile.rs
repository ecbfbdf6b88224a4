//! cuFile (GPUDirect Storage): the driver, opened once per process; one registered handle per
//! open slide, made from the slide's **own** file descriptor (never by reopening its path, which
//! could name another file); and the coalesced `cuFileRead`s of one chunk into device memory.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};

use crate::gpu::cuda::context::{pid, Context};
use crate::gpu::cuda::counters::Counters;
use crate::gpu::cuda::io::compat::{Io, IoPath};
use crate::gpu::cuda::io::posix::plans_by_source;
use crate::gpu::cuda::memory::DeviceBuffer;
use crate::gpu::cuda::queue::Miss;
use crate::gpu::cuda::queue::Src;
use crate::gpu::cuda::sys::{cuda, CUcontext, CUdeviceptr, CUfileDescr, CuFile, Res, CU_FILE_HANDLE_TYPE_OPAQUE_FD};

use crate::io::ByteSource;
use crate::slide::Slide;

/// cuFile, loaded and its driver opened (`cuFileDriverOpen`) once per process. Call only after
/// a CUDA device was found: without a GPU driver `cuFileDriverOpen` does not return.
pub(crate) fn driver() -> std::result::Result<&'static CuFile, String> {
    static CF: OnceLock<std::result::Result<CuFile, String>> = OnceLock::new();
    CF.get_or_init(|| {
        let cf = crate::gpu::cuda::sys::cufile_probe()?;
        // SAFETY: documented entry point; only reached after a CUDA device was found.
        let e = unsafe { cf.cuFileDriverOpen() };
        if e.err != 0 {
            return Err(format!("cuFileDriverOpen failed (CUfileOpError {}, CUresult {})", e.err, e.cu_err));
        }
        Ok(cf)
    })
    .as_ref()
    .map_err(|e| e.clone())
}

/// A cuFile handle of one open slide's file, deregistered when dropped (before the O_DIRECT
/// descriptor it may own closes; the slide's own descriptor outlives it, as the slide purges
/// its handle before closing).
pub(crate) struct CuFileHandle {
    pub(crate) handle: *mut c_void,
    cf: &'static CuFile,
    pid: u32,
    /// An O_DIRECT descriptor of the slide's open file, when one could be made.
    _direct: Option<File>,
}

// A registered cuFile handle may be used from any thread.
unsafe impl Send for CuFileHandle {}
unsafe impl Sync for CuFileHandle {}

impl Drop for CuFileHandle {
    fn drop(&mut self) {
        if self.pid == pid() {
            // SAFETY: registered in `CuFiles::handle`, deregistered once, before the fd closes.
            unsafe { self.cf.cuFileHandleDeregister(self.handle) };
        }
    }
}

/// `(st_dev, st_ino)` of an open descriptor.
fn file_id(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: fstat on a descriptor the caller keeps open; out-pointer to a zeroed local.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev as u64, st.st_ino as u64))
}

/// An O_DIRECT descriptor of the file open as `fd` (GPUDirect Storage reads need one), made
/// through `/proc/self/fd` (the open file itself, whatever its name now) and checked to be the
/// same file (device and inode); `None` when that is not possible.
fn reopen_direct(fd: RawFd) -> Option<File> {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(format!("/proc/self/fd/{fd}")).ok()?;
    let same = file_id(fd).is_some() && file_id(fd) == file_id(f.as_raw_fd());
    same.then_some(f)
}

/// cuFile (when the path uses it) and the handles of the slides read so far: `None` for a
/// slide that could not be registered (its reads go through POSIX).
pub(crate) struct CuFiles {
    pub(crate) cufile: Option<&'static CuFile>,
    handles: Mutex<HashMap<u64, Option<Arc<CuFileHandle>>>>,
}

impl CuFiles {
    pub(crate) fn new(cufile: Option<&'static CuFile>) -> CuFiles {
        CuFiles { cufile, handles: Mutex::new(HashMap::new()) }
    }

    /// The cuFile handle of `slide`, registered on first use from the slide's own descriptor;
    /// `None` (with the reason in `counters`) when the slide has no descriptor (read from
    /// memory) or cuFile refuses it.
    pub(crate) fn handle(&self, slide: &Slide, counters: &Counters) -> Option<Arc<CuFileHandle>> {
        let cf = self.cufile?;
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        handles
            .entry(slide.id())
            .or_insert_with(|| {
                let name = slide.index().path().display().to_string();
                let Some(fd) = slide.source().raw_fd() else {
                    counters.note_cufile_skip(format!(
                        "{name}: no single file descriptor (slide read from memory, or from several files): POSIX reads for this slide"
                    ));
                    return None;
                };
                let direct = reopen_direct(fd);
                let reg_fd = direct.as_ref().map_or(fd, |f| f.as_raw_fd());
                let mut descr = CUfileDescr { handle_type: CU_FILE_HANDLE_TYPE_OPAQUE_FD, handle: reg_fd as usize, fs_ops: std::ptr::null() };
                let mut h = std::ptr::null_mut();
                // SAFETY: descriptor of an open fd; out-pointer to a local.
                let e = unsafe { cf.cuFileHandleRegister(&mut h, &mut descr) };
                if e.err != 0 {
                    counters.note_cufile_refusal(format!("cuFileHandleRegister failed for {name} (CUfileOpError {}): POSIX reads for this slide", e.err));
                    return None;
                }
                Some(Arc::new(CuFileHandle { handle: h, cf, pid: pid(), _direct: direct }))
            })
            .clone()
    }

    /// Forget `slide`'s handle (deregistered once no read holds it).
    pub(crate) fn drop_slide(&self, slide: u64) {
        let h = self.handles.lock().unwrap_or_else(|p| p.into_inner()).remove(&slide);
        drop(h);
    }
}

/// Where each tile of a chunk read by cuFile lies: `(index in the chunk, device pointer or the
/// read's error, length)`, in the order of the read plan.
pub(crate) type Placed = Vec<(usize, std::result::Result<CUdeviceptr, String>, u64)>;

impl Io {
    /// Coalesced `cuFileRead`s of `chunk` (tiles of any of the call's sources `srcs`, each with
    /// its slide's handle in `handles`) into `staging` (a slot's device staging buffer, grown
    /// and registered with cuFile here): one read plan per source, the plans' bytes back to
    /// back. The reads run on the slide's pool with `ctx` current; bytes and requests are
    /// counted in `counters` under this I/O path.
    pub(crate) fn read_chunk_cufile(
        &self,
        ctx: &Context,
        counters: &Counters,
        staging: &mut DeviceBuffer,
        handles: &[Option<Arc<CuFileHandle>>],
        srcs: &[Src<'_>],
        chunk: &[Miss],
    ) -> Res<Placed> {
        use rayon::prelude::*;
        let cuda = cuda()?;
        let cf = self.files.cufile.ok_or_else(|| crate::error::GpuError::Unavailable("cuFile not loaded".into()))?;
        let plans = plans_by_source(srcs, chunk);
        let total: usize = plans.iter().map(|(_, p)| p.read_bytes() as usize).sum();
        staging.ensure(total, Some(cf))?;
        // Every request of every plan: (handle, request, position in the staging buffer); the
        // requests of a plan back to back (the read layer's layout, `ReadPlan::spans`).
        let mut reqs: Vec<(usize, u64, u64, usize)> = Vec::new();
        let mut base = 0usize;
        for (si, plan) in &plans {
            let fh =
                handles[*si as usize].as_ref().ok_or_else(|| crate::error::GpuError::Call("cuFile chunk with a slide that has no cuFile handle".into()))?;
            for (r, b) in plan.requests.iter().zip(plan.request_starts()) {
                reqs.push((fh.handle as usize, r.offset, r.len, base + b));
            }
            base += plan.read_bytes() as usize;
        }
        let (staging, raw_ctx) = (staging.ptr(), ctx.raw() as usize);
        let read = |&(handle, offset, len, b): &(usize, u64, u64, usize)| -> std::result::Result<(), String> {
            // SAFETY: this thread uses the engine's context; cuFileRead writes len bytes at
            // staging + b, inside the staging allocation (sized to the plans' total above).
            let n = unsafe {
                cuda.cuCtxSetCurrent(raw_ctx as CUcontext);
                cf.cuFileRead(handle as *mut c_void, staging as *mut c_void, len as usize, offset as i64, b as i64)
            };
            if n == len as isize {
                Ok(())
            } else {
                Err(format!("cuFileRead of {len} bytes at offset {offset} returned {n}"))
            }
        };
        let pool = srcs[0].slide.pool();
        let results: Vec<std::result::Result<(), String>> = if reqs.len() > 1 && crate::read::pool_threads(pool) > 1 {
            crate::read::in_pool(pool, || reqs.par_iter().map(read).collect())
        } else {
            reqs.iter().map(read).collect()
        };
        ctx.make_current()?;
        let c = counters;
        let (bytes_c, req_c) = match self.path {
            IoPath::CuFileGds => (&c.gds_bytes, &c.gds_requests),
            _ => (&c.compat_bytes, &c.compat_requests),
        };
        bytes_c.fetch_add(total as u64, Relaxed);
        req_c.fetch_add(reqs.len() as u64, Relaxed);
        let mut placed = Vec::with_capacity(chunk.len());
        let (mut first, mut base) = (0usize, 0usize);
        for (_, plan) in &plans {
            for sp in plan.spans() {
                placed.push((sp.id, results[first + sp.request].clone().map(|()| staging + (base + sp.start) as u64), sp.len as u64));
            }
            first += plan.requests.len();
            base += plan.read_bytes() as usize;
        }
        Ok(placed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::metrics::MetricsSource;
    use crate::io::posix::FileSource;
    use crate::io::MemSource;
    use std::os::unix::fs::MetadataExt;

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("slidestream-cufile-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).expect("write temp file");
        p
    }

    #[test]
    fn a_file_source_exposes_its_own_descriptor_and_memory_none() {
        let p = temp_file("fd", &[7u8; 4096]);
        let meta = std::fs::metadata(&p).expect("stat");
        let src: Box<dyn ByteSource> = Box::new(FileSource::open(&p).expect("open"));
        let wrapped = MetricsSource::new(src);
        let fd = wrapped.raw_fd().expect("a file has a descriptor, through the metrics wrapper");
        assert_eq!(file_id(fd), Some((meta.dev(), meta.ino())), "the descriptor is the file's");
        let mem = MetricsSource::new(Box::new(MemSource::new(vec![7u8; 4096])) as Box<dyn ByteSource>);
        assert_eq!(mem.raw_fd(), None);
        // Renaming the file does not change what the descriptor (or its O_DIRECT reopening) reads.
        let moved = p.with_extension("moved");
        std::fs::rename(&p, &moved).expect("rename");
        std::fs::write(&p, [9u8; 4096]).expect("a different file under the old name");
        if let Some(direct) = reopen_direct(fd) {
            assert_eq!(file_id(direct.as_raw_fd()), Some((meta.dev(), meta.ino())));
        }
        assert_ne!(file_id(fd), std::fs::metadata(&p).ok().map(|m| (m.dev(), m.ino())));
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_file(&moved);
    }

    #[test]
    fn compat_mode_on_never_loads_cufile() {
        let io = super::super::compat::Io::select(crate::gpu::CompatMode::On);
        assert_eq!(io.path, IoPath::Posix);
        assert!(io.error.is_none() && io.files.cufile.is_none());
        assert!(io.reason.contains("SLIDESTREAM_COMPAT_MODE=on"), "{}", io.reason);
    }

    #[test]
    fn compat_mode_auto_without_nvidia_fs_never_loads_cufile() {
        if super::super::compat::nvfs_loaded() {
            eprintln!("skipped: nvidia-fs is loaded here");
            return;
        }
        let io = super::super::compat::Io::select(crate::gpu::CompatMode::Auto);
        assert_eq!(io.path, IoPath::Posix);
        assert!(io.error.is_none() && io.files.cufile.is_none());
        assert!(io.reason.contains("cuFile not loaded"), "{}", io.reason);
    }
}
