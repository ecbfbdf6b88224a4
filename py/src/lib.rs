//! Python bindings of slidestream (`slidestream._slidestream`).
//!
//! A thin layer over the Rust core: every read releases the GIL, returns a numpy array that owns
//! the Rust buffer (no copy), and maps core errors onto the Python exception hierarchy defined in
//! `slidestream._errors`. Process-level state (decode thread pool, tile cache) is created per
//! process ID, so a `Slide` opened before `fork` works in the child, and pickling stores only the
//! path and options.
//!
//! Device reads (`device="cuda"`) return `slidestream.DeviceArray` (module `device`); the core
//! is always built with its `cuda` feature, whose CUDA libraries load at run time.

mod device;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::{PyArray3, PyArray4};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use slidestream::error::GpuError;
use slidestream::gpu::DeviceOptions;
use slidestream::{Error, Slide, SlideOptions, TileCache};

use device::{note_device_use, parse_device, PyDeviceArray};

/// Per-process state: the decode pool and the shared tile cache. Rebuilt when the process ID
/// changes (after `fork`, the parent's pool threads do not exist in the child).
struct ProcState {
    pid: u32,
    pool: Arc<rayon::ThreadPool>,
    cache: Arc<TileCache>,
}

static PROC: Mutex<Option<ProcState>> = Mutex::new(None);

fn proc_state() -> PyResult<(Arc<rayon::ThreadPool>, Arc<TileCache>)> {
    let pid = std::process::id();
    let mut g = PROC.lock().unwrap_or_else(|p| p.into_inner());
    if g.as_ref().is_none_or(|s| s.pid != pid) {
        let pool = rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("slidestream-{i}"))
            .build()
            .map_err(|e| PyOSError::new_err(format!("cannot start decode threads: {e}")))?;
        let cache_bytes = slidestream::Config::from_env().map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?.cache_bytes;
        let cache = Arc::new(TileCache::new(cache_bytes));
        *g = Some(ProcState { pid, pool: Arc::new(pool), cache });
    }
    let s = g.as_ref().expect("initialised above");
    Ok((s.pool.clone(), s.cache.clone()))
}

/// Map a core error to the Python exception hierarchy (`slidestream._errors`).
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    let class = match &e {
        Error::Io { source, at } => {
            let errno = source.raw_os_error();
            return match errno {
                // OSError(errno, strerror, filename) picks FileNotFoundError, PermissionError...
                Some(n) => {
                    // strerror without Rust's " (os error N)" suffix.
                    let text = source.to_string();
                    let strerror = text.split(" (os error").next().unwrap_or(&text).to_string();
                    PyOSError::new_err((n, strerror, at.path.to_string_lossy().into_owned()))
                }
                None => PyOSError::new_err(msg),
            };
        }
        Error::Format { .. } => "CorruptDataError",
        Error::Unsupported { .. } => "UnsupportedFormatError",
        Error::Limits { .. } => "LimitsExceededError",
        Error::Usage(_) => "InvalidArgumentError",
        Error::Gpu(GpuError::NotCompiled | GpuError::Unavailable(_)) => "GpuUnavailableError",
        Error::Gpu(GpuError::Fork { .. }) => "GpuForkError",
        Error::Gpu(_) => "GpuError",
        // A bad `SLIDESTREAM_*` value (docs/settings.md).
        Error::Config { .. } => return pyo3::exceptions::PyValueError::new_err(msg),
        _ => "SlideError",
    };
    match py.import("slidestream._errors").and_then(|m| m.getattr(class)) {
        Ok(cls) => PyErr::from_type(cls.cast_into().expect("exception classes are types"), msg),
        Err(err) => err,
    }
}

/// Accept `str`, `bytes` and `os.PathLike` paths (non-ASCII names included).
fn extract_path(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let py = obj.py();
    let fs = py.import("os")?.getattr("fspath")?.call1((obj,))?;
    if let Ok(b) = fs.cast::<PyBytes>() {
        return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes())));
    }
    let s: String = fs.extract().map_err(|_| PyTypeError::new_err("path must be str, bytes or os.PathLike"))?;
    // Surrogate-escaped names arrive as str; encode back with the file-system encoding.
    let enc = py.import("os")?.getattr("fsencode")?.call1((s,))?;
    let b = enc.cast::<PyBytes>()?;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes())))
}

struct State {
    pid: u32,
    slide: Option<Arc<Slide>>,
    closed: bool,
}

/// An open whole-slide image (Aperio SVS, pyramidal tiled TIFF/BigTIFF).
///
/// Coordinates follow OpenSlide: `location` is (x, y) in level-0 pixels, `size` is
/// (width, height) in pixels of the requested level. Pixels are `uint8`, row-major.
/// Thread-safe: share one `Slide` between threads; reads release the GIL.
#[pyclass(frozen, subclass, name = "Slide", module = "slidestream._slidestream")]
struct PySlide {
    path: PathBuf,
    cache_bytes: Option<usize>,
    state: Mutex<State>,
}

impl PySlide {
    fn open_core(path: &PathBuf, cache_bytes: Option<usize>) -> Result<Slide, Error> {
        let (pool, shared) = proc_state().map_err(|e| Error::Usage(e.to_string()))?;
        let cache = match cache_bytes {
            Some(b) => Arc::new(TileCache::new(b)),
            None => shared,
        };
        Slide::open_with(path, SlideOptions { cache: Some(cache), config: None, pool: Some(pool) })
    }

    /// The core slide for this process (reopened lazily after unpickling or `fork`).
    fn slide(&self, py: Python<'_>) -> PyResult<Arc<Slide>> {
        let pid = std::process::id();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.closed {
            return Err(to_py(py, Error::Usage(format!("{}: slide is closed", self.path.display()))));
        }
        if st.pid != pid || st.slide.is_none() {
            let path = self.path.clone();
            let cb = self.cache_bytes;
            let s = py.detach(move || Self::open_core(&path, cb)).map_err(|e| to_py(py, e))?;
            st.slide = Some(Arc::new(s));
            st.pid = pid;
        }
        Ok(st.slide.clone().expect("set above"))
    }

    /// Run a read on the calling thread with the GIL released; the core hands only parallel
    /// work to this process's pool (given at open), so single-tile and cached reads pay no
    /// thread hand-off.
    fn run<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&Slide) -> Result<T, Error> + Send) -> PyResult<T> {
        let slide = self.slide(py)?;
        py.detach(move || f(&slide)).map_err(|e| to_py(py, e))
    }

    /// [`run`](Self::run) for a device read on CUDA device `device`: refused with
    /// `GpuError::Fork` (before any CUDA call) in a process forked after CUDA was initialised,
    /// and recorded as GPU use of this process (for `io_stats()`).
    fn run_device<T: Send>(&self, py: Python<'_>, device: usize, f: impl FnOnce(&Slide) -> Result<T, Error> + Send) -> PyResult<T> {
        device::fork_check().map_err(|e| to_py(py, e))?;
        let slide = self.slide(py)?;
        let r = py.detach(move || f(&slide));
        note_device_use(device, &r);
        r.map_err(|e| to_py(py, e))
    }
}

fn background_rgb(obj: Option<&Bound<'_, PyAny>>) -> PyResult<[u8; 3]> {
    let Some(obj) = obj else { return Ok([255; 3]) };
    if let Ok(v) = obj.extract::<u8>() {
        return Ok([v; 3]);
    }
    let t: (u8, u8, u8) = obj
        .extract()
        .map_err(|_| PyValueError::new_err("background must be an int 0..=255 or an (r, g, b) tuple of such ints"))?;
    Ok([t.0, t.1, t.2])
}

#[pymethods]
impl PySlide {
    /// Open a slide. `path`: str, bytes or os.PathLike. `cache_bytes`: capacity of a private
    /// tile cache for this slide, in bytes (default: the process-wide cache,
    /// `SLIDESTREAM_CACHE_BYTES`, 256 MiB).
    ///
    /// Raises FileNotFoundError / PermissionError / OSError, UnsupportedFormatError,
    /// CorruptDataError, LimitsExceededError.
    ///
    /// `lazy=True` defers opening to the first use (used when unpickling).
    #[new]
    #[pyo3(signature = (path, *, cache_bytes=None, lazy=false))]
    fn new(py: Python<'_>, path: &Bound<'_, PyAny>, cache_bytes: Option<usize>, lazy: bool) -> PyResult<Self> {
        let path = extract_path(path)?;
        if lazy {
            return Ok(PySlide { path, cache_bytes, state: Mutex::new(State { pid: 0, slide: None, closed: false }) });
        }
        let p2 = path.clone();
        let slide = py.detach(move || Self::open_core(&p2, cache_bytes)).map_err(|e| to_py(py, e))?;
        Ok(PySlide {
            path,
            cache_bytes,
            state: Mutex::new(State { pid: std::process::id(), slide: Some(Arc::new(slide)), closed: false }),
        })
    }

    /// The file path as bytes (exact, for pickling non-UTF-8 names).
    #[getter]
    fn path_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        use std::os::unix::ffi::OsStrExt;
        PyBytes::new(py, self.path.as_os_str().as_bytes())
    }

    /// Capacity of this slide's private tile cache in bytes, or None (process-wide cache).
    #[getter]
    fn cache_bytes(&self) -> Option<usize> {
        self.cache_bytes
    }

    /// The file path, as given (str).
    #[getter]
    fn path(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// `True` after `close()`.
    #[getter]
    fn closed(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed
    }

    /// Vendor / format driver (`aperio`, `generic-tiff`): `openslide.vendor`.
    #[getter]
    fn vendor(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.slide(py)?.vendor())
    }

    /// Number of pyramid levels.
    #[getter]
    fn level_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.slide(py)?.level_count())
    }

    /// Level-0 (width, height) in pixels.
    #[getter]
    fn dimensions(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        Ok(self.slide(py)?.dimensions())
    }

    /// ((width, height), ...) in pixels for every level, level 0 first.
    #[getter]
    fn level_dimensions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.slide(py)?.level_dimensions())
    }

    /// (downsample, ...) of every level relative to level 0 (mean of the axis ratios).
    #[getter]
    fn level_downsamples<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.slide(py)?.level_downsamples())
    }

    /// ((tile_width, tile_height), ...) in pixels for every level.
    #[getter]
    fn level_tile_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.slide(py)?.level_tile_sizes())
    }

    /// Properties as a new dict of str → str (OpenSlide's `openslide.*` names, `tiff.*`,
    /// vendor keys).
    fn _properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.slide(py)?.properties() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Associated image names and (width, height) in pixels, as a dict.
    fn _associated_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.slide(py)?.associated_images() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Read a whole associated image: numpy uint8 array (height, width, 4), RGBA.
    fn read_associated<'py>(&self, py: Python<'py>, name: String) -> PyResult<Bound<'py, PyArray3<u8>>> {
        let r = self.run(py, move |s| s.read_associated(&name))?;
        rgba_array(py, r)
    }

    /// The slide's ICC profile as bytes, or None.
    #[getter]
    fn color_profile<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let icc = self.run(py, |s| s.icc_profile())?;
        Ok(icc.map(|b| PyBytes::new(py, &b)))
    }

    /// (mpp_x, mpp_y) in micrometres per level-0 pixel, or None when unknown.
    #[getter]
    fn mpp(&self, py: Python<'_>) -> PyResult<Option<(f64, f64)>> {
        Ok(self.slide(py)?.mpp())
    }

    /// Read a region as a numpy uint8 array of shape (height, width, 4), RGBA,
    /// non-premultiplied; alpha 0 outside the image (OpenSlide's semantics).
    ///
    /// location: (x, y) in level-0 pixels (may be negative); level: int; size: (width, height)
    /// in pixels of that level. The GIL is released during the read. The array owns the
    /// decoded buffer (no copy) and supports `__dlpack__`.
    ///
    /// device: None or "cpu" (numpy result), or a CUDA device ("cuda", "cuda:N", an int N, a
    /// torch.device): the region is decoded on that GPU and returned as a DeviceArray of the
    /// same shape and pixels. Raises GpuUnavailableError without a usable GPU, GpuForkError in
    /// a process forked after CUDA was initialised, ValueError / TypeError for a bad device.
    #[pyo3(signature = (location, level, size, *, device=None))]
    fn read_region<'py>(
        &self,
        py: Python<'py>,
        location: (i64, i64),
        level: usize,
        size: (i64, i64),
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let size = check_size(size)?;
        match parse_device(device)? {
            None => {
                let r = self.run(py, move |s| s.read_region(location, level, size))?;
                Ok(rgba_array(py, r)?.into_any())
            }
            Some(dev) => {
                let opts = DeviceOptions { device: dev, channels: 4, background: [255; 3] };
                let a = self.run_device(py, dev, move |s| s.read_region_device(location, level, size, &opts))?;
                Ok(Bound::new(py, PyDeviceArray::new(a))?.into_any())
            }
        }
    }

    /// Read many patches of one level in one call: numpy uint8 array (n, height, width, 3), RGB.
    ///
    /// locations: sequence of (x, y) level-0 pixels, or an integer array of shape (n, 2).
    /// background: int or (r, g, b) used outside the image and on missing tiles; partly
    /// transparent pixels are composited over it. Tiles shared by patches are decoded once;
    /// the work is spread over threads with the GIL released.
    ///
    /// device: None or "cpu" (numpy result), or a CUDA device ("cuda", "cuda:N", an int N, a
    /// torch.device): the patches are decoded and assembled on that GPU and returned as one
    /// DeviceArray (n, height, width, 3) with the same pixels. A patch that cannot be read
    /// raises its error (CorruptDataError...), as on the CPU.
    #[pyo3(signature = (locations, level, size, *, background=None, device=None))]
    fn read_regions<'py>(
        &self,
        py: Python<'py>,
        locations: &Bound<'py, PyAny>,
        level: usize,
        size: (i64, i64),
        background: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let size = check_size(size)?;
        let bg = background_rgb(background)?;
        let dev = parse_device(device)?;
        let locs: Vec<(i64, i64)> = match locations.extract::<numpy::PyReadonlyArray2<'py, i64>>() {
            Ok(a) => {
                let v = a.as_array();
                if v.ncols() != 2 {
                    return Err(PyValueError::new_err(format!("locations must have shape (n, 2), got {:?}", v.shape())));
                }
                v.rows().into_iter().map(|r| (r[0], r[1])).collect()
            }
            Err(_) => locations.try_iter()?.map(|o| o?.extract::<(i64, i64)>()).collect::<PyResult<_>>()?,
        };
        let n = locs.len();
        let (w, h) = (size.0 as usize, size.1 as usize);
        let bytes = n
            .checked_mul(w)
            .and_then(|v| v.checked_mul(h))
            .and_then(|v| v.checked_mul(3))
            .ok_or_else(|| to_py(py, Error::Usage("read_regions output size overflows".into())))?;
        let limit = slidestream::Config::from_env().map_err(|e| to_py(py, e))?.max_region_bytes;
        if bytes as u64 > limit {
            return Err(to_py(
                py,
                Error::limits(&slidestream::error::Location::file(&self.path), format!("read_regions output of {bytes} bytes exceeds max_region_bytes ({limit})")),
            ));
        }
        if let Some(dev) = dev {
            let opts = DeviceOptions { device: dev, channels: 3, background: bg };
            let a = self.run_device(py, dev, move |s| s.read_regions_device(&locs, level, size, &opts)?.into_result())?;
            return Ok(Bound::new(py, PyDeviceArray::new(a))?.into_any());
        }
        let out = self.run(py, move |s| {
            let mut out = slidestream::alloc_pixels(bytes);
            s.read_regions_rgb_into(&locs, level, size, bg, &mut out)?;
            Ok(out)
        })?;
        let arr = ndarray::Array4::from_shape_vec((n, h, w, 3), out).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyArray4::from_owned_array(py, arr).into_any())
    }

    /// The level to read for a wanted downsample (OpenSlide's rule).
    fn get_best_level_for_downsample(&self, py: Python<'_>, downsample: f64) -> PyResult<usize> {
        Ok(self.slide(py)?.best_level_for_downsample(downsample))
    }

    /// Tile cache counters: dict with hits, misses, evictions, insertions, entries,
    /// resident_bytes, capacity_bytes.
    fn cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.slide(py)?.cache_stats();
        let d = PyDict::new(py);
        d.set_item("hits", s.hits)?;
        d.set_item("misses", s.misses)?;
        d.set_item("evictions", s.evictions)?;
        d.set_item("insertions", s.insertions)?;
        d.set_item("entries", s.entries)?;
        d.set_item("resident_bytes", s.resident_bytes)?;
        d.set_item("capacity_bytes", s.capacity_bytes)?;
        Ok(d)
    }

    /// I/O counters since open in this process: dict with requests, bytes (POSIX pread path of
    /// the CPU reads of this slide); plus, once this process has made a device read, "gpu":
    /// the process-wide GPU counters (as gpu_stats()) of the device it read on, with its
    /// ordinal under "device". Does not initialise CUDA.
    fn io_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.slide(py)?.io_counters();
        let d = PyDict::new(py);
        d.set_item("requests", c.requests)?;
        d.set_item("bytes", c.bytes)?;
        d.set_item("path", "posix")?;
        if let Some(g) = device::io_stats_gpu(py)? {
            d.set_item("gpu", g)?;
        }
        Ok(d)
    }

    /// Close the file. Later reads raise InvalidArgumentError; closing twice is harmless.
    fn close(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.closed = true;
        st.slide = None;
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!("slidestream.Slide({:?})", self.path.to_string_lossy())
    }
}

fn check_size(size: (i64, i64)) -> PyResult<(u64, u64)> {
    if size.0 < 0 || size.1 < 0 {
        return Err(PyValueError::new_err(format!("size must be non-negative, got {size:?}")));
    }
    Ok((size.0 as u64, size.1 as u64))
}

fn rgba_array(py: Python<'_>, r: slidestream::Rgba) -> PyResult<Bound<'_, PyArray3<u8>>> {
    let arr = ndarray::Array3::from_shape_vec((r.height as usize, r.width as usize, 4), r.data)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray3::from_owned_array(py, arr))
}

/// Version of the Rust core.
#[pyfunction]
fn core_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _slidestream(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySlide>()?;
    m.add_class::<PyDeviceArray>()?;
    m.add_function(wrap_pyfunction!(core_version, m)?)?;
    m.add_function(wrap_pyfunction!(device::cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(device::gpu_probe, m)?)?;
    m.add_function(wrap_pyfunction!(device::gpu_stats, m)?)?;
    m.add_function(wrap_pyfunction!(device::gpu_reset_stats, m)?)?;
    m.add_function(wrap_pyfunction!(device::gpu_clear_cache, m)?)?;
    m.add_function(wrap_pyfunction!(device::parse_device_py, m)?)?;
    m.add_function(wrap_pyfunction!(device::test_cpu_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(device::test_cpu_dlpack_releases, m)?)?;
    Ok(())
}
