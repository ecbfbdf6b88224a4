//! `slidestream._Prefetcher`: the loaders' read-ahead on native threads.
//!
//! `PatchBatches` / `PatchLoader` submit the rows of the next batches here and take the
//! batches back in order. The reads run on `readers` threads of this module, which never take
//! the GIL: a read-ahead on a Python thread needs the GIL between reads (to plan, call, import
//! and queue), and a training loop holds it almost all the time (PyTorch keeps it while a
//! kernel launch waits for room in a full launch queue), so such a producer reads only while
//! the consumer waits for it. Here the consumer's thread plans and submits (it holds the GIL
//! anyway), and waits with the GIL released.
//!
//! A submitted batch is read exactly as `_read_patches` reads it (same checks, same result:
//! a numpy uint8 (n, h, w, 3) array or a `DeviceArray`), by [`slidestream::read_patches`] or
//! [`slidestream::read_patches_device`]; its error is raised when it is taken.
//!
//! A host batch may be read into a destination the caller gives (`submit(rows, out=array)`):
//! `PatchLoader(pin_memory=True)` passes the numpy view of a page-locked tensor from PyTorch's
//! host allocator, so the batch is decoded straight into pinned memory (no copy, and the
//! caller's `.to("cuda", non_blocking=True)` is asynchronous). The job holds a reference to the
//! array until its read has returned, so dropping the prefetcher mid-read frees nothing that a
//! read thread still writes.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use numpy::{PyArray4, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use slidestream::gpu::DeviceArray;
use slidestream::{read_patches, read_patches_device, read_patches_into, Error, PatchRequest, ReadOptions, Slide};

use crate::args;
use crate::device_array::PyDeviceArray;
use crate::errors::OrRaise;
use crate::patches::parse_requests;
use crate::process;
use crate::slide::PySlide;

/// Read-ahead threads alive in this process (all prefetchers).
static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Read-ahead threads of :class:`_Prefetcher` alive in this process.
#[pyfunction]
#[pyo3(name = "_prefetch_threads")]
pub(crate) fn prefetch_threads() -> usize {
    LIVE_THREADS.load(Ordering::SeqCst)
}

/// Counts a read-ahead thread while it lives.
struct Alive;

impl Alive {
    fn new() -> Alive {
        LIVE_THREADS.fetch_add(1, Ordering::SeqCst);
        Alive
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        LIVE_THREADS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Test builds only: (reads to let pass first, milliseconds the next one then sleeps): a read
/// that hangs, on demand.
#[cfg(feature = "test-hooks")]
static STALL: Mutex<(usize, u64)> = Mutex::new((0, 0));

/// `_test_stall_next_prefetch(seconds, skip=0)`: after `skip` more reads of loaders' read-ahead
/// threads, the next one first sleeps `seconds` (test builds only).
#[cfg(feature = "test-hooks")]
#[pyfunction]
#[pyo3(name = "_test_stall_next_prefetch", signature = (seconds, skip=0))]
pub(crate) fn test_stall_next_prefetch(seconds: f64, skip: usize) {
    *STALL.lock().unwrap_or_else(|p| p.into_inner()) = (skip, (seconds.clamp(0.0, 3600.0) * 1e3) as u64);
}

/// Test builds: this read's stall, if one is due.
#[cfg(feature = "test-hooks")]
fn stall_due() -> u64 {
    let mut s = STALL.lock().unwrap_or_else(|p| p.into_inner());
    if s.1 == 0 {
        return 0;
    }
    if s.0 > 0 {
        s.0 -= 1;
        return 0;
    }
    std::mem::replace(&mut s.1, 0)
}

/// One submitted batch: its sequence number, (slide, level, location) rows and, for a host
/// batch, the caller's destination if one was given.
struct Job {
    seq: u64,
    reqs: Vec<(usize, usize, (i64, i64))>,
    out: Option<Dest>,
}

/// A caller's destination: a C-contiguous, writeable numpy uint8 array of exactly the batch's
/// `n × h × w × 3` bytes (checked by `submit`), kept alive by `owner` while a read thread writes
/// through `ptr`.
struct Dest {
    owner: Py<PyAny>,
    ptr: usize,
    len: usize,
}

/// A batch read: host pixels, the caller's destination filled, or a device array.
enum Out {
    Host(Vec<u8>, usize),
    Into(Py<PyAny>),
    Device(DeviceArray),
}

/// A finished batch: its sequence number and the read's result, or the panic that stopped it.
type Done = (u64, std::thread::Result<Result<Out, Error>>);

/// What the consumer's side holds.
struct State {
    jobs: Option<Sender<Job>>,
    /// Results that arrived before their turn.
    ready: BTreeMap<u64, std::thread::Result<Result<Out, Error>>>,
    /// Set by `close`: queued jobs are skipped.
    stop: Arc<AtomicBool>,
    next_submit: u64,
    next_take: u64,
    workers: Vec<JoinHandle<()>>,
}

/// Read-ahead of patch batches on slidestream's own threads, which never take the GIL
/// (used by :class:`slidestream.PatchBatches`). ``_Prefetcher(slides, size, background=None,
/// device=None, readers=1)``: open slides, (width, height), RGB background, ``device`` as
/// ``read_patches``'s, 1 to 16 reads at once (ValueError otherwise).
#[pyclass(frozen, name = "_Prefetcher", module = "slidestream._slidestream")]
pub(crate) struct PyPrefetcher {
    slides: Vec<Arc<Slide>>,
    size: (u64, u64),
    device: Option<usize>,
    state: Mutex<State>,
    /// Finished batches (locked only to receive, never while `state` is held across a wait:
    /// a thread must not hold `state` while it waits for the GIL).
    done: Mutex<Receiver<Done>>,
}

fn read_one(slides: &[Arc<Slide>], job: Job, opts: &ReadOptions, device: Option<usize>) -> Result<Out, Error> {
    let batch: Vec<PatchRequest<'_>> = job.reqs.iter().map(|&(s, level, location)| PatchRequest { slide: &slides[s], level, location }).collect();
    match (device, job.out) {
        (Some(dev), _) => Ok(Out::Device(read_patches_device(&batch, opts, dev)?.into_result()?)),
        (None, Some(dest)) => {
            // SAFETY: `submit` checked that `ptr` starts a C-contiguous, writeable uint8 array
            // of `len` bytes; `dest.owner` keeps that array (and so its memory) alive until this
            // returns, and no other thread of this module touches it meanwhile (the consumer
            // gets it back only through `take`, after this read).
            let out = unsafe { std::slice::from_raw_parts_mut(dest.ptr as *mut u8, dest.len) };
            read_patches_into(&batch, opts, out)?;
            Ok(Out::Into(dest.owner))
        }
        (None, None) => Ok(Out::Host(read_patches(&batch, opts)?, job.reqs.len())),
    }
}

impl PyPrefetcher {
    /// `out` checked as a destination for a batch of `n` patches: a numpy uint8 array of shape
    /// (n, height, width, 3), C-contiguous and writeable (ValueError naming what is wrong).
    fn destination(&self, out: &Bound<'_, PyAny>, n: usize) -> PyResult<Dest> {
        let arr = out.cast::<PyArray4<u8>>().map_err(|_| PyValueError::new_err(format!("out must be a 4-D numpy uint8 array, got {}", describe(out))))?;
        let want = [n, self.size.1 as usize, self.size.0 as usize, 3];
        if arr.shape() != want {
            return Err(PyValueError::new_err(format!("out has shape {:?}, the batch needs {want:?}", arr.shape())));
        }
        if !arr.is_c_contiguous() {
            return Err(PyValueError::new_err("out must be C-contiguous"));
        }
        // A writeable borrow fails for a read-only array (and for one Rust code borrows now).
        let mut rw = arr.try_readwrite().map_err(|e| PyValueError::new_err(format!("out must be a writeable array not in use: {e}")))?;
        let slice = rw.as_slice_mut().map_err(|e| PyValueError::new_err(format!("out: {e}")))?;
        Ok(Dest { owner: out.clone().unbind(), ptr: slice.as_mut_ptr() as usize, len: slice.len() })
    }
}

/// A short description of a Python object for an error message: numpy arrays by dtype and
/// dimensions, anything else by type name.
fn describe(o: &Bound<'_, PyAny>) -> String {
    match (o.getattr("dtype"), o.getattr("ndim")) {
        (Ok(d), Ok(n)) => format!("a {n}-D array of {d}"),
        _ => o.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "an object".into()),
    }
}

#[pymethods]
impl PyPrefetcher {
    #[new]
    #[pyo3(signature = (slides, size, background=None, device=None, readers=1))]
    fn new(
        py: Python<'_>,
        slides: Vec<PyRef<'_, PySlide>>,
        size: &Bound<'_, PyAny>,
        background: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        readers: usize,
    ) -> PyResult<Self> {
        let size = args::size(size)?;
        let background = args::background_rgb(background)?;
        let device = args::device(device)?;
        if !(1..=16).contains(&readers) {
            return Err(PyValueError::new_err(format!("readers must be from 1 to 16, got {readers}")));
        }
        if device.is_some() {
            process::fork_check().or_raise(py)?;
        }
        let opened: Vec<Arc<Slide>> = slides.iter().map(|s| s.slide(py)).collect::<PyResult<_>>()?;
        let (job_tx, job_rx) = channel::<Job>();
        let (done_tx, done_rx) = channel::<Done>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let opts = ReadOptions { size, background };
        let mut workers = Vec::with_capacity(readers);
        let stop = Arc::new(AtomicBool::new(false));
        for i in 0..readers {
            let (jobs, done, slides, stop) = (job_rx.clone(), done_tx.clone(), opened.clone(), stop.clone());
            let alive = Alive::new(); // counted from before the spawn, so a test never misses it
            let spawned = std::thread::Builder::new().name(format!("slidestream-prefetch-{i}")).spawn(move || {
                let _alive = alive;
                // SLIDESTREAM_THREAD_NICE (fixed at the first open; raising cannot fail).
                drop(slidestream::threads::lower_this_thread());
                loop {
                    // One job at a time per thread; the lock is held only to receive.
                    let job = match jobs.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(job) = job else { return }; // the consumer closed
                    if stop.load(Ordering::Relaxed) {
                        continue; // closed: skip what is still queued
                    }
                    let seq = job.seq;
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        #[cfg(feature = "test-hooks")]
                        {
                            crate::guard::hooks::before_call();
                            let ms = stall_due();
                            if ms > 0 {
                                std::thread::sleep(Duration::from_millis(ms));
                            }
                        }
                        read_one(&slides, job, &opts, device)
                    }));
                    if done.send((seq, r)).is_err() {
                        return; // the consumer is gone: drop the batch
                    }
                }
            });
            match spawned {
                Ok(h) => workers.push(h),
                Err(e) => return Err(PyRuntimeError::new_err(format!("slidestream: cannot start a prefetch thread: {e}"))),
            }
        }
        Ok(PyPrefetcher {
            slides: opened,
            size,
            device,
            done: Mutex::new(done_rx),
            state: Mutex::new(State { jobs: Some(job_tx), ready: BTreeMap::new(), stop, next_submit: 0, next_take: 0, workers }),
        })
    }

    /// Queue one batch of int64 (n, 4) rows ``(slide_index, level, x, y)`` (checked as
    /// ``read_patches`` checks them); ``out`` (host prefetchers only): a C-contiguous,
    /// writeable uint8 (n, h, w, 3) array the batch is read into, which ``take`` returns
    /// (ValueError otherwise); returns the batches submitted and not yet taken.
    #[pyo3(signature = (rows, out=None))]
    fn submit(&self, py: Python<'_>, rows: PyReadonlyArray2<'_, i64>, out: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
        let reqs = parse_requests(py, self.slides.len(), &rows)?;
        let out = match out {
            None => None,
            Some(_) if self.device.is_some() => {
                return Err(PyValueError::new_err("out: device batches are read into device memory; a host destination applies to host batches only"))
            }
            Some(o) => Some(self.destination(o, reqs.len())?),
        };
        let mut st = self.state.lock().map_err(|_| PyRuntimeError::new_err("slidestream prefetcher: poisoned"))?;
        let seq = st.next_submit;
        let Some(tx) = &st.jobs else { return Err(PyRuntimeError::new_err("slidestream prefetcher: closed")) };
        tx.send(Job { seq, reqs, out }).map_err(|_| PyRuntimeError::new_err("slidestream prefetcher: its read threads are gone"))?;
        st.next_submit += 1;
        Ok(st.next_submit - st.next_take)
    }

    /// Batches submitted and not yet taken.
    fn pending(&self) -> PyResult<u64> {
        let st = self.state.lock().map_err(|_| PyRuntimeError::new_err("slidestream prefetcher: poisoned"))?;
        Ok(st.next_submit - st.next_take)
    }

    /// The oldest batch not taken yet (uint8 (n, h, w, 3) numpy array or DeviceArray), its
    /// read's error raised here; waits with the GIL released (Ctrl-C answered); None when
    /// ``timeout`` seconds pass first. RuntimeError when nothing was submitted or closed.
    #[pyo3(signature = (timeout=None))]
    fn take<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let deadline = match timeout {
            Some(t) if t.is_finite() && t >= 0.0 => Some(Instant::now() + Duration::from_secs_f64(t.min(1e9))),
            Some(t) => return Err(PyValueError::new_err(format!("timeout must be a finite number of seconds >= 0, got {t}"))),
            None => None,
        };
        let poisoned = || PyRuntimeError::new_err("slidestream prefetcher: poisoned");
        let want = {
            let st = self.state.lock().map_err(|_| poisoned())?;
            if st.jobs.is_none() {
                return Err(PyRuntimeError::new_err("slidestream prefetcher: closed"));
            }
            if st.next_take == st.next_submit {
                return Err(PyRuntimeError::new_err("slidestream prefetcher: nothing submitted"));
            }
            st.next_take
        };
        let r = loop {
            if let Some(r) = self.state.lock().map_err(|_| poisoned())?.ready.remove(&want) {
                break r;
            }
            // What already arrived, without waiting (a zero timeout still takes a ready batch).
            let arrived = match self.done.lock() {
                Ok(rx) => rx.try_recv(),
                Err(_) => Err(std::sync::mpsc::TryRecvError::Disconnected),
            };
            match arrived {
                Ok((seq, r)) => {
                    self.state.lock().map_err(|_| poisoned())?.ready.insert(seq, r);
                    continue;
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return Err(PyRuntimeError::new_err("slidestream prefetcher: its read threads ended")),
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            let wait = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) => left.min(Duration::from_millis(50)),
                    None => return Ok(None),
                },
                None => Duration::from_millis(50),
            };
            let done = &self.done;
            let got = py.detach(|| match done.lock() {
                Ok(rx) => rx.recv_timeout(wait),
                Err(_) => Err(RecvTimeoutError::Disconnected),
            });
            match got {
                Ok((seq, r)) => {
                    self.state.lock().map_err(|_| poisoned())?.ready.insert(seq, r);
                }
                Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(RecvTimeoutError::Disconnected) => return Err(PyRuntimeError::new_err("slidestream prefetcher: its read threads ended")),
            }
        };
        {
            let mut st = self.state.lock().map_err(|_| poisoned())?;
            // `close` may have run meanwhile; it set next_take = next_submit.
            if st.next_take == want {
                st.next_take += 1;
            }
        }
        let r = r.map_err(|payload| crate::guard::internal_error(py, payload.as_ref()))?;
        if let Some(dev) = self.device {
            process::note_device_use(dev, &r);
        }
        match r.or_raise(py)? {
            Out::Device(a) => Ok(Some(Bound::new(py, PyDeviceArray::new(a))?.into_any())),
            Out::Into(owner) => Ok(Some(owner.into_bound(py))),
            Out::Host(data, n) => {
                let arr = ndarray::Array4::from_shape_vec((n, self.size.1 as usize, self.size.0 as usize, 3), data)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                Ok(Some(PyArray4::from_owned_array(py, arr).into_any()))
            }
        }
    }

    /// Stop; batches not taken are dropped; with ``wait``, wait for reads in progress.
    #[pyo3(signature = (wait=true))]
    fn close(&self, py: Python<'_>, wait: bool) -> PyResult<()> {
        let workers = {
            let mut st = self.state.lock().map_err(|_| PyRuntimeError::new_err("slidestream prefetcher: poisoned"))?;
            st.jobs = None; // the threads' `recv` fails once the queue is empty
            st.stop.store(true, Ordering::Relaxed); // and they skip what is still queued
            st.ready.clear();
            std::mem::take(&mut st.workers)
        };
        if wait {
            py.detach(move || {
                for w in workers {
                    let _ = w.join();
                }
            });
        }
        if let Ok(rx) = self.done.lock() {
            while rx.try_recv().is_ok() {}
        }
        if let Ok(mut st) = self.state.lock() {
            st.ready.clear();
            st.next_take = st.next_submit;
        }
        Ok(())
    }
}

impl Drop for PyPrefetcher {
    fn drop(&mut self) {
        // Threads end once the job queue is closed; they are not joined here (a drop may run
        // on a thread that must not wait), and drop their results.
        if let Ok(mut st) = self.state.lock() {
            st.jobs = None;
            st.stop.store(true, Ordering::Relaxed);
        }
    }
}
