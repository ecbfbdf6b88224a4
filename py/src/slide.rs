//! `slidestream._slidestream.Slide`: an open slide (the base class of `slidestream.Slide`),
//! its lifetime (lazy open, reopen after `fork` or unpickling, close) and its metadata. The
//! reads are in [`crate::reads`]; this file only declares them to Python.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use slidestream::{Error, Slide, SlideOptions, TileCache};

use crate::errors::{invalid_argument, OrRaise};
use crate::{args, gpu, process, stats};

/// The core slide of one process.
struct State {
    /// Process that opened `slide` (a forked child reopens).
    pid: u32,
    /// `None` until opened (lazy) or after `close()`.
    slide: Option<Arc<Slide>>,
    closed: bool,
}

/// An open whole-slide image (Aperio SVS, pyramidal tiled TIFF/BigTIFF).
///
/// Coordinates follow OpenSlide: ``location`` is (x, y) in level-0 pixels, ``size`` is
/// (width, height) in pixels of the requested level. Pixels are ``uint8``, row-major.
/// Thread-safe: share one ``Slide`` between threads; reads release the GIL.
#[pyclass(frozen, subclass, name = "Slide", module = "slidestream._slidestream")]
pub(crate) struct PySlide {
    pub(crate) path: PathBuf,
    cache_bytes: Option<usize>,
    /// Storage options of a remote slide (empty for local paths).
    storage: BTreeMap<String, String>,
    state: Mutex<State>,
}

impl PySlide {
    /// Open the core slide with this process's decode pool and the shared cache (or a private
    /// cache of `cache_bytes`). Runs with the GIL released.
    fn open_core(py: Python<'_>, path: &PathBuf, cache_bytes: Option<usize>, storage: &BTreeMap<String, String>) -> PyResult<Slide> {
        let (pool, shared) = process::pool_and_cache(py)?;
        let cache = match cache_bytes {
            Some(b) => Arc::new(TileCache::new(b)),
            None => shared,
        };
        let opts = SlideOptions { cache: Some(cache), config: None, pool: Some(pool), storage: storage.clone() };
        crate::guard::detach(py, move || Slide::open_with(path, opts))?.or_raise(py)
    }

    /// The core slide for this process (reopened lazily after unpickling or `fork`).
    ///
    /// Raises InvalidArgumentError after `close()`, and the open errors on a reopen.
    pub(crate) fn slide(&self, py: Python<'_>) -> PyResult<Arc<Slide>> {
        let pid = std::process::id();
        let current = |st: &State| -> PyResult<Option<Arc<Slide>>> {
            if st.closed {
                return Err(invalid_argument(py, format!("{}: slide is closed", self.path.display())));
            }
            Ok(st.slide.clone().filter(|_| st.pid == pid))
        };
        if let Some(s) = current(&self.state.lock().unwrap_or_else(|p| p.into_inner()))? {
            return Ok(s);
        }
        // Open without holding the lock: the open releases the GIL, and a thread holding the
        // GIL may be waiting for the lock. Two threads may both open; the first one kept wins.
        let opened = Arc::new(Self::open_core(py, &self.path, self.cache_bytes, &self.storage)?);
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = current(&st)? {
            return Ok(s);
        }
        st.slide = Some(opened.clone());
        st.pid = pid;
        Ok(opened)
    }

    /// A `level` argument as an index: any int that can name a level goes to the core (which
    /// refuses levels >= level_count with InvalidArgumentError); a negative or huge int raises
    /// the same InvalidArgumentError here; a non-int raises TypeError.
    pub(crate) fn level(&self, py: Python<'_>, level: &Bound<'_, PyAny>) -> PyResult<usize> {
        match args::level(level)? {
            Ok(l) => Ok(l),
            Err(text) => {
                let n = self.slide(py)?.level_count();
                Err(invalid_argument(py, format!("{}: level {text} does not exist (level count {n})", self.path.display())))
            }
        }
    }

    /// Run a read on the calling thread with the GIL released; the core hands only parallel
    /// work to this process's pool (given at open), so single-tile and cached reads pay no
    /// thread hand-off.
    pub(crate) fn run<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&Slide) -> Result<T, Error> + Send) -> PyResult<T> {
        let slide = self.slide(py)?;
        crate::guard::detach(py, move || f(&slide))?.or_raise(py)
    }

    /// [`run`](Self::run) for a device read on CUDA device `device`: refused with
    /// `GpuError::Fork` (before any CUDA call) in a process forked after CUDA was initialised,
    /// and recorded as GPU use of this process (for `io_stats()`).
    pub(crate) fn run_device<T: Send>(&self, py: Python<'_>, device: usize, f: impl FnOnce(&Slide) -> Result<T, Error> + Send) -> PyResult<T> {
        process::fork_check().or_raise(py)?;
        let slide = self.slide(py)?;
        let r = crate::guard::detach(py, move || f(&slide))?;
        process::note_device_use(device, &r);
        r.or_raise(py)
    }
}

#[pymethods]
impl PySlide {
    /// Open a slide. `path`: str, bytes or os.PathLike. `cache_bytes`: capacity of a private
    /// tile cache for this slide, in bytes (default: the process-wide cache,
    /// `SLIDESTREAM_CACHE_BYTES`, 256 MiB).
    ///
    /// Raises FileNotFoundError / PermissionError / OSError, UnsupportedFormatError,
    /// CorruptDataError, LimitsExceededError; TypeError for a path that is not str / bytes /
    /// PathLike or a non-int `cache_bytes`, InvalidArgumentError (a ValueError) for a negative
    /// `cache_bytes`.
    ///
    /// `path` may be a URL of a slide in object storage or on an HTTP server (`s3://bucket/key`,
    /// `gs://…`, `az://…`, `http(s)://…`), read by ranged requests; `storage_options` (a dict
    /// of str → str / bool / int) configures the store: `endpoint`, `region`,
    /// `access_key_id`, `secret_access_key`, `session_token`, `anonymous`, `allow_http`, or any
    /// of object_store's configuration keys (docs/remote.md). An unknown key raises
    /// InvalidArgumentError; `storage_options` with a local path raises InvalidArgumentError; so
    /// does a URL over 8192 bytes, an object key over 1024 bytes, or a URL with control
    /// characters or whitespace (docs/remote.md, "URLs").
    ///
    /// `lazy=True` defers opening to the first use (used when unpickling).
    #[new]
    #[pyo3(signature = (path, *, cache_bytes=None, lazy=false, storage_options=None))]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        cache_bytes: Option<&Bound<'_, PyAny>>,
        lazy: bool,
        storage_options: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let path = args::path(path)?;
        let cache_bytes = args::optional_bytes(cache_bytes, "cache_bytes")?;
        let storage = args::storage_options(storage_options)?;
        let (pid, slide) = if lazy { (0, None) } else { (std::process::id(), Some(Arc::new(Self::open_core(py, &path, cache_bytes, &storage)?))) };
        Ok(PySlide { path, cache_bytes, storage, state: Mutex::new(State { pid, slide, closed: false }) })
    }

    /// The storage options the slide was opened with (a new dict; empty for a local path).
    #[getter]
    fn storage_options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in &self.storage {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// The file path as bytes (exact, also for non-UTF-8 names).
    #[getter]
    fn path_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        use std::os::unix::ffi::OsStrExt;
        PyBytes::new(py, self.path.as_os_str().as_bytes())
    }

    /// Capacity in bytes of this slide's private tile cache, or None (process-wide cache).
    #[getter]
    fn cache_bytes(&self) -> Option<usize> {
        self.cache_bytes
    }

    /// The file path as str: ``os.fsdecode`` of the name (non-UTF-8 bytes as surrogate
    /// escapes, as ``os.listdir`` gives them; ``os.fsencode(path)`` is the exact name).
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        args::path_str(py, &self.path)
    }

    /// True after ``close()``.
    #[getter]
    fn closed(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed
    }

    /// Format driver that opened the slide: ``"aperio"``, ``"ome-tiff"`` or ``"generic-tiff"``
    /// (the ``openslide.vendor`` property).
    #[getter]
    fn vendor(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.slide(py)?.vendor())
    }

    /// Number of pyramid levels (>= 1).
    #[getter]
    fn level_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.slide(py)?.level_count())
    }

    /// (width, height) of level 0, in pixels.
    #[getter]
    fn dimensions(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        Ok(self.slide(py)?.dimensions())
    }

    /// ((width, height), ...) in pixels of every level, level 0 first.
    #[getter]
    fn level_dimensions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.slide(py)?.level_dimensions())
    }

    /// Downsample of every level relative to level 0 (level 0: 1.0; level k: the mean of
    /// the width and height ratios), level 0 first.
    #[getter]
    fn level_downsamples<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.slide(py)?.level_downsamples())
    }

    /// ((tile_width, tile_height), ...) in pixels of every level, level 0 first.
    #[getter]
    fn level_tile_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.slide(py)?.level_tile_sizes())
    }

    /// Properties as a new dict str → str (``openslide.*``, ``tiff.*``, vendor keys).
    fn _properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.slide(py)?.properties() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Associated image name → (width, height) in pixels.
    fn _associated_sizes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.slide(py)?.associated_images() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// A whole associated image (``thumbnail``, ``label``, ``macro``): uint8 array of shape
    /// (height, width, 4), RGBA, non-premultiplied. Raises InvalidArgumentError for an
    /// unknown name, CorruptDataError when it cannot be decoded.
    fn read_associated<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.read_associated_impl(py, name)
    }

    /// The slide's ICC profile (raw bytes), or None.
    #[getter]
    fn color_profile<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let icc = self.run(py, |s| s.icc_profile())?;
        Ok(icc.map(|b| PyBytes::new(py, &b)))
    }

    /// The ICC profile (raw bytes) of associated image ``name``, or None when it has none
    /// (DICOM associated images carry their own). InvalidArgumentError for an unknown name.
    fn associated_color_profile<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let name = name.to_string();
        let icc = self.run(py, move |s| s.associated_icc_profile(&name))?;
        Ok(icc.map(|b| PyBytes::new(py, &b)))
    }

    /// (mpp_x, mpp_y): micrometres per level-0 pixel, or None when unknown.
    #[getter]
    fn mpp(&self, py: Python<'_>) -> PyResult<Option<(f64, f64)>> {
        Ok(self.slide(py)?.mpp())
    }

    /// Read a region: uint8 array of shape (height, width, 4), RGBA, non-premultiplied;
    /// (0, 0, 0, 0) outside the image and on missing tiles.
    ///
    /// ``location``: (x, y) in level-0 pixels (may be negative or past the image);
    /// ``level``: 0 .. level_count - 1 (InvalidArgumentError otherwise, negative levels
    /// included; TypeError for a non-int); ``size``: (width, height) >= 0 in pixels of that
    /// level. The level-k origin is the level pixel ``floor(location / downsample)``. The GIL
    /// is released during the read; the array owns the buffer and supports ``__dlpack__``.
    /// ``location`` and ``size`` may be any pair (tuple, list, 1-d array) of ints (numpy ints
    /// too), ``size`` also one int ``n`` for ``(n, n)``; a non-int is a TypeError, a value outside 64 bits or a negative size an
    /// InvalidArgumentError (a ValueError), never an OverflowError.
    /// Raises InvalidArgumentError (bad level, closed slide, negative size),
    /// LimitsExceededError (output above ``SLIDESTREAM_MAX_REGION_BYTES``),
    /// CorruptDataError (a tile cannot be decoded).
    ///
    /// ``device``: None or ``"cpu"`` → numpy array (above). A CUDA device (``"cuda"``,
    /// ``"cuda:N"``, int ``N``, ``torch.device``) → :class:`DeviceArray` (height, width, 4)
    /// in that GPU's memory with the same pixels (JPEG decoded by nvJPEG). Also raises
    /// GpuUnavailableError (no usable GPU), GpuForkError (forked after CUDA was
    /// initialised), GpuError (a CUDA call failed), ValueError / TypeError (bad device).
    #[pyo3(signature = (location, level, size, *, device=None))]
    fn read_region<'py>(
        &self,
        py: Python<'py>,
        location: &Bound<'py, PyAny>,
        level: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.read_region_impl(py, location, level, size, device)
    }

    /// Read a region's channels at their stored depth: array of shape (height, width, c),
    /// channel-last, dtype uint8 for 8-bit images and uint16 for 16-bit ones (not scaled, not
    /// converted to RGBA); 0 outside the image and on missing tiles. CPU only, not cached.
    ///
    /// ``location``: (x, y) in level-0 pixels; ``level``: level index; ``size``: (width,
    /// height) in pixels of that level (as ``read_region``). ``channels``: None for all, or
    /// indices into ``channel_names`` in the order wanted (repeats allowed). OME-TIFF
    /// multichannel slides: one channel per OME-XML channel plane; other slides: the level's
    /// stored samples. JPEG / JPEG 2000 / WebP levels give their decoded 8-bit channels.
    /// Raises InvalidArgumentError (a ValueError) for a level or channel that does not exist,
    /// LimitsExceededError past ``max_region_bytes``, CorruptDataError for a corrupt tile.
    #[pyo3(signature = (location, level, size, channels=None))]
    fn read_region_channels<'py>(
        &self,
        py: Python<'py>,
        location: &Bound<'py, PyAny>,
        level: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        channels: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.read_region_channels_impl(py, location, level, size, channels)
    }

    /// Names of the channels ``read_region_channels`` indexes, in order: the OME-XML channel
    /// names for OME-TIFF multichannel slides (``"C<i>"`` when unnamed), else the stored
    /// samples of level 0: ``["gray"]`` (+ ``"alpha"``) or ``["R", "G", "B"]`` (+ ``"A"``).
    #[getter]
    fn channel_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, |s| Ok(s.channel_names()))
    }

    /// Display colour of each channel of ``channel_names``, in the same order: an (r, g, b) tuple
    /// of ints 0-255 from the format's metadata (QPTIFF ``Color``, OME-XML ``Channel/@Color``, CZI
    /// ``Channel/Color``; the R, G, B samples of a CZI BGR channel get the primaries), or None where
    /// the file gives none. For a slide's stored samples ``R``, ``G``, ``B`` are the primaries and
    /// ``gray``, ``alpha``, ``A`` None.
    #[getter]
    fn channel_colors(&self, py: Python<'_>) -> PyResult<Vec<Option<(u8, u8, u8)>>> {
        self.run(py, |s| Ok(s.channel_colors().into_iter().map(|c| c.map(|[r, g, b]| (r, g, b))).collect()))
    }

    /// Read many patches of one level: uint8 array of shape (n, height, width, 3), RGB.
    ///
    /// ``locations``: n (x, y) level-0 pixel pairs: a sequence of pairs (tuples, lists, numpy
    /// rows) or an integer array of shape (n, 2) of any integer dtype and byte order; values
    /// outside 64 bits raise InvalidArgumentError, other objects (a dict, a float array)
    /// TypeError, other shapes ValueError. ``level``: as :meth:`read_region`. ``size``: (width, height) of every patch in
    /// pixels of ``level``.
    /// ``background``: int 0..255 or (r, g, b), default 255 (white): used outside the image
    /// and on missing tiles; partly transparent pixels are composited over it. Tiles shared
    /// by patches are decoded once; the work runs on threads with the GIL released.
    ///
    /// ``device``: None or ``"cpu"`` → numpy array (above). A CUDA device → one
    /// :class:`DeviceArray` (n, height, width, 3) with the same pixels, the tiles of all
    /// patches decoded in nvJPEG batches and assembled on the GPU. A patch that cannot be
    /// read raises its error (CorruptDataError, ...) as on the CPU; GPU errors as
    /// :meth:`read_region`.
    #[pyo3(signature = (locations, level, size, *, background=None, device=None))]
    fn read_regions<'py>(
        &self,
        py: Python<'py>,
        locations: &Bound<'py, PyAny>,
        level: &Bound<'py, PyAny>,
        size: &Bound<'py, PyAny>,
        background: Option<&Bound<'py, PyAny>>,
        device: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.read_regions_impl(py, locations, level, size, background, device)
    }

    /// All of ``level`` reduced by f, the largest power of two <= ``max_factor`` dividing
    /// the level's tile width and height: (uint8 array (ceil(h / f), ceil(w / f), 3), RGB, f).
    /// Each pixel is the mean of the f x f level pixels it covers, composited over
    /// ``background`` (white by default); JPEG tiles decode at 1/2..1/8 scale. Tiles are read
    /// in waves within the working set and not cached (bounded-memory thumbnails).
    /// InvalidArgumentError for a bad level or max_factor < 1; LimitsExceededError when the
    /// output exceeds max_region_bytes or one tile exceeds the working set.
    #[pyo3(signature = (level, max_factor, *, background=None))]
    fn read_level_reduced<'py>(
        &self,
        py: Python<'py>,
        level: &Bound<'py, PyAny>,
        max_factor: i64,
        background: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, numpy::PyArray3<u8>>, u32)> {
        self.read_level_reduced_impl(py, level, max_factor, background)
    }

    /// The level to read for a wanted downsample (OpenSlide's rule: the level with the
    /// largest downsample not above ``downsample``; 0 if it is below every level). TypeError
    /// for a downsample that is not a number.
    fn get_best_level_for_downsample(&self, py: Python<'_>, downsample: &Bound<'_, PyAny>) -> PyResult<usize> {
        let downsample = args::float(downsample, "downsample")?;
        Ok(self.slide(py)?.best_level_for_downsample(downsample))
    }

    /// Tile cache counters: hits, misses, evictions, insertions, entries, resident_bytes,
    /// capacity_bytes (bytes are of decoded RGBA tiles).
    fn cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats::cache_dict(py, &self.slide(py)?.cache_stats())
    }

    /// I/O counters since open in this process: ``requests`` (int), ``bytes`` (int) and
    /// ``path`` (str, ``"posix"``: positional reads) of this slide's CPU reads. Once this
    /// process has made a device read, also ``"gpu"``: the process-wide counters of the
    /// device it read on (as :func:`gpu_stats`, plus ``"device"``, the ordinal). ``"remote"``
    /// (absent for a local slide: use ``io_stats().get("remote")``): for a URL a dict of ``url``, ``requests`` (HTTP requests
    /// slidestream issued since open, the open's included; object_store's retries of a
    /// request are not counted), ``bytes`` (bytes received), ``failed`` (requests
    /// that failed after their retries), ``open_requests`` / ``open_bytes`` (what the open
    /// cost), ``index_cache`` (``"off"``, ``"miss"`` or ``"hit"``), ``index_cache_rejected``
    /// (index cache entries found at open that were not usable: not a regular file, a
    /// symbolic link, too large, damaged) and ``etag``. Never
    /// initialises CUDA.
    fn io_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let slide = self.slide(py)?;
        let c = slide.io_counters();
        let g = gpu::used_device_stats();
        let d = stats::io_dict(py, &c, g.as_ref().map(|(d, s)| (*d, s)))?;
        if let (Some((at_open, now)), Some(r)) = (slide.remote_stats(), slide.remote_source()) {
            let rd = PyDict::new(py);
            rd.set_item("url", r.url())?;
            rd.set_item("requests", now.requests)?;
            rd.set_item("bytes", now.bytes)?;
            rd.set_item("failed", now.failed)?;
            rd.set_item("open_requests", at_open.requests)?;
            rd.set_item("open_bytes", at_open.bytes)?;
            rd.set_item("index_cache", r.index_cache_use().as_str())?;
            rd.set_item("index_cache_rejected", now.index_cache_rejected)?;
            rd.set_item("etag", r.etag())?;
            d.set_item("remote", rd)?;
        }
        Ok(d)
    }

    /// Close the file. Later reads raise InvalidArgumentError; closing twice is harmless.
    fn close(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.closed = true;
        st.slide = None;
    }

    /// Return the slide itself.
    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Close the slide; exceptions propagate (returns False).
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("slidestream.Slide({})", args::path_str(py, &self.path)?.repr()?))
    }
}

/// The vendor of the file's slide format, as ``openslide.OpenSlide.detect_format``:
/// ``"aperio"``, ``"generic-tiff"`` or ``"hamamatsu"`` (NDPI) (the driver that would open it),
/// ``"dicom"`` (a whole-slide format slidestream recognises but cannot read yet), or None
/// when the file is not a slide format slidestream knows or cannot be opened. Detection only:
/// a detected file may still fail to open. TypeError for a bad path type.
#[pyfunction]
pub(crate) fn detect_vendor(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    let path = args::path(path)?;
    match crate::guard::detach(py, move || Slide::detect_vendor(&path))? {
        Ok(v) => Ok(v),
        // As openslide_detect_vendor: a file that cannot be opened has no vendor.
        Err(Error::Io { .. }) => Ok(None),
        Err(e) => Err(crate::errors::to_py(py, e)),
    }
}

/// Why each format driver accepted or declined the file at ``path``, in the order they
/// are tried: driver name → ``"accepted"`` or the reason it declined (detection stops at the
/// first driver that accepts). What the "no format driver recognises this file" error
/// summarises in one line; the CLI's ``slidestream info --why``. Raises TypeError for a bad
/// path type, FileNotFoundError / PermissionError / OSError when the file cannot be read.
#[pyfunction]
pub(crate) fn format_verdicts<'py>(py: Python<'py>, path: &Bound<'py, PyAny>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let path = args::path(path)?;
    let report = crate::guard::detach(py, move || Slide::detect(&path))?.map_err(|e| crate::errors::to_py(py, e))?;
    let out = pyo3::types::PyDict::new(py);
    for (name, v) in &report.verdicts {
        match v {
            Ok(()) => out.set_item(*name, "accepted")?,
            Err(why) => out.set_item(*name, why.as_str())?,
        }
    }
    Ok(out)
}
