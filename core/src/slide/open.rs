//! Opening a slide and what it tells without reading pixels: geometry, properties, the
//! associated images' sizes and the ICC profiles (read on request).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::{Slide, SlideOptions, NEXT_SLIDE_ID};
use crate::cache::TileCache;
use crate::config::Config;
use crate::error::{Error, Location, Result};
use crate::format::{self, DetectionReport, LocalFiles, Probe, SiblingFiles};
use crate::geometry::best_level_for_downsample;
use crate::index::{BlobRef, FileIdentity, ImageIndex, SlideIndex};
use crate::io::metrics::MetricsSource;
use crate::io::multi::SourceSet;
use crate::io::posix::FileSource;
use crate::io::ByteSource;
use crate::tiff::TiffFile;

/// The scheme of a name written as a URL (`scheme://…`, RFC 3986's scheme characters), for
/// the error on one slidestream does not open.
fn url_scheme(name: &str) -> Option<&str> {
    let (scheme, _) = name.split_once("://")?;
    let mut c = scheme.chars();
    (c.next()?.is_ascii_alphabetic() && c.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))).then_some(scheme)
}

/// `true` for a name opened as a URL (`scheme://…` of a store slidestream knows).
fn looks_like_url(name: &str) -> bool {
    #[cfg(feature = "remote")]
    {
        crate::io::remote::is_url(name)
    }
    #[cfg(not(feature = "remote"))]
    {
        name.split_once("://").is_some_and(|(s, r)| !r.is_empty() && !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()))
    }
}

fn open_source(path: &Path) -> Result<FileSource> {
    FileSource::open(path).map_err(|e| Error::io(&Location::file(path), e))
}

impl Slide {
    /// Open a slide with default options.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened or is not a regular file (a FIFO, a
    /// device: refused without blocking); for a folder, [`Error::Unsupported`] when no driver
    /// finds a slide in it ([`Slide::open_with`]); [`Error::Config`] for a bad `SLIDESTREAM_*` or
    /// `RAYON_NUM_THREADS` value; [`Error::Unsupported`] when no driver
    /// recognises it (the message carries the detection report) or it uses an unsupported
    /// feature; [`Error::Format`] / [`Error::Limits`] for damaged structure.
    pub fn open(path: impl AsRef<Path>) -> Result<Slide> {
        Slide::open_with(path, SlideOptions::default())
    }

    /// Open a slide with explicit options. Errors as [`Slide::open`].
    ///
    /// `path` may name a folder: a format of several files that opens folders (DICOM) picks
    /// the file to open in it ([`format::resolve_dir`]; `Unsupported` when none does, `Usage`
    /// when the folder holds several slides).
    ///
    /// `path` may be a URL (`s3://bucket/key`, `gs://…`, `az://…`, `http(s)://…`; feature
    /// `remote`): the slide is read by ranged requests, with `opts.storage` configuring the
    /// store ([`crate::io::remote`]). Formats of several files find their other objects under
    /// the same prefix (one LIST; plain HTTP has no listing: a DICOM instance is then read
    /// alone); a folder URL is not resolved (open one of its files). Without feature `remote`,
    /// a URL is [`Error::Unsupported`].
    pub fn open_with(path: impl AsRef<Path>, opts: SlideOptions) -> Result<Slide> {
        let given = path.as_ref();
        if let Some(url) = given.to_str().filter(|s| looks_like_url(s)) {
            return Slide::open_url(url, opts);
        }
        if let Some(scheme) = given.to_str().and_then(url_scheme) {
            return Err(Error::Usage(format!(
                "{}: not a slide URL slidestream reads ({scheme}:// with no object, or a scheme other than s3, s3a, gs, az, abfs, abfss, adl, azure, http, https); a local path needs no scheme",
                given.display()
            )));
        }
        if !opts.storage.is_empty() {
            let keys: Vec<&str> = opts.storage.keys().map(String::as_str).collect();
            return Err(Error::Usage(format!("{}: storage options ({}) are for remote slides (s3://, gs://, az://, http(s):// URLs), not a local path", given.display(), keys.join(", "))));
        }
        let resolved;
        let path = if std::fs::metadata(given).is_ok_and(|m| m.is_dir()) {
            resolved = format::resolve_dir(given)?;
            resolved.as_path()
        } else {
            given
        };
        let src = open_source(path)?;
        let identity = src.metadata().ok().map(|m| FileIdentity::of(&m));
        let files = LocalFiles { path: path.to_path_buf() };
        Slide::open_source(path, Box::new(src), identity, Some(&files), opts)
    }

    #[cfg(feature = "remote")]
    fn open_url(url: &str, opts: SlideOptions) -> Result<Slide> {
        use crate::io::remote::{files::RemoteFiles, NetOptions, RemoteOptions, RemoteSource};
        let s = crate::config::settings()?;
        let settings = RemoteOptions {
            net: NetOptions { retries: s.remote_retries, timeout: std::time::Duration::from_millis(s.remote_timeout_ms) },
            concurrency: s.remote_concurrency,
            readahead_bytes: s.remote_readahead_bytes,
            index_cache: s.remote_index_cache.dir(),
        };
        let remote = Arc::new(RemoteSource::open(url, &opts.storage, settings.clone())?);
        let files = Arc::new(RemoteFiles::new(url, remote.clone(), &opts.storage, settings)?);
        let mut slide = Slide::open_source(Path::new(url), Box::new(remote.clone()), None, Some(&*files), opts)?;
        files.end_open();
        slide.config.plan = slide.config.remote_plan;
        let at_open = files.stats();
        slide.remote = Some(crate::slide::RemoteParts { primary: remote, files, at_open });
        Ok(slide)
    }

    #[cfg(not(feature = "remote"))]
    fn open_url(url: &str, _opts: SlideOptions) -> Result<Slide> {
        Err(Error::Unsupported { at: Location::file(url), feature: "remote slides: this build of slidestream has no remote storage (Cargo feature `remote`)".into() })
    }

    /// The request counters of a remote slide (`None` for a local one): what its open cost,
    /// and every request since the slide was opened (the open's included), over all its
    /// objects (a DICOM series: one per instance) and the LIST of its folder.
    #[cfg(feature = "remote")]
    pub fn remote_stats(&self) -> Option<(crate::io::remote::RemoteStats, crate::io::remote::RemoteStats)> {
        self.remote.as_ref().map(|r| (r.at_open, r.files.stats()))
    }

    /// The remote object of a URL slide (`None` for a local one): its URL, ETag, counters and
    /// what the index cache did.
    #[cfg(feature = "remote")]
    pub fn remote_source(&self) -> Option<&crate::io::remote::RemoteSource> {
        self.remote.as_ref().map(|r| &*r.primary)
    }

    /// Open a slide from any [`ByteSource`] (memory, a remote object store, a fuzzer's
    /// input). `name` is used in error messages and as the slide's path; the index records no
    /// file identity for it. Errors as [`Slide::open`] (except opening the file).
    pub fn from_source(name: impl AsRef<Path>, source: Box<dyn ByteSource>, opts: SlideOptions) -> Result<Slide> {
        Slide::open_source(name.as_ref(), source, None, None, opts)
    }

    /// Open a slide whose files `files` serves (the primary file `source`, at
    /// [`SiblingFiles::path`]), as [`Slide::open_with`] opens a local one: slides of several
    /// files held in memory ([`crate::fuzzing::MemFiles`]). No file identity is recorded.
    /// Errors as [`Slide::open`] (except opening the file).
    #[cfg(feature = "unstable")]
    pub fn from_files(source: Box<dyn ByteSource>, files: &dyn SiblingFiles, opts: SlideOptions) -> Result<Slide> {
        Slide::open_source(files.path(), source, None, Some(files), opts)
    }

    fn open_source(
        path: &Path,
        source: Box<dyn ByteSource>,
        identity: Option<FileIdentity>,
        files: Option<&dyn SiblingFiles>,
        opts: SlideOptions,
    ) -> Result<Slide> {
        let src = Arc::new(MetricsSource::new(SourceSet::new(source)));
        // Every setting is checked at open, so a bad `SLIDESTREAM_*` value fails here, once,
        // with an error naming it (docs/settings.md), whichever path reads it later.
        crate::config::settings()?;
        // The decode threads rayon would start for RAYON_NUM_THREADS, capped before any pool
        // exists (pools are built at the first parallel read, never here).
        crate::config::rayon_num_threads()?;
        // The I/O pool's depth, fixed at the first open (the pool is built at the first read).
        crate::io::pool::configure()?;
        // The background threads' nice increment, fixed at the first open.
        crate::threads::configure()?;
        let index = format::open(&src, &Location::file(path), identity, files)?;
        let open_io = src.counters();
        src.reset();
        let cache = match opts.cache {
            Some(c) => c,
            None => TileCache::global()?,
        };
        // Closing the slide purges its tiles from every registered cache (`Slide::drop`).
        crate::cache::registry::register_cache(&cache);
        Ok(Slide {
            index: Arc::new(index),
            src,
            open_io,
            id: NEXT_SLIDE_ID.fetch_add(1, Ordering::Relaxed),
            cache,
            config: match opts.config {
                Some(c) => c,
                None => Config::from_env()?,
            },
            pool: opts.pool,
            icc: OnceLock::new(),
            scans: crate::read::partial::ScanMemory::new(),
            #[cfg(feature = "remote")]
            remote: None,
        })
    }

    /// Run format detection only and say why each driver accepted or declined.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened.
    pub fn detect(path: impl AsRef<Path>) -> Result<DetectionReport> {
        let path = path.as_ref();
        let src = open_source(path)?;
        let at = Location::file(path);
        let tiff = TiffFile::parse(&src, &at);
        let files = LocalFiles { path: path.to_path_buf() };
        let probe = Probe { src: &src, at: &at, tiff: tiff.as_ref(), files: Some(&files) };
        Ok(format::detect(&probe).0)
    }

    /// The vendor of the file's slide format, as OpenSlide's `openslide_detect_vendor`: the
    /// driver that accepts it (`aperio`, `generic-tiff`), else a whole-slide format recognised
    /// without a driver (`hamamatsu` for NDPI, `dicom`; see `format::known`), else `None` (not
    /// a slide format slidestream knows). Detection only: a detected file may still fail to
    /// open (an unsupported compression, no driver). A folder is answered for the file
    /// [`Slide::open`] would open in it (a DICOM series: `dicom`), `None` when there is none.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened.
    pub fn detect_vendor(path: impl AsRef<Path>) -> Result<Option<&'static str>> {
        let given = path.as_ref();
        let resolved;
        let path = if std::fs::metadata(given).is_ok_and(|m| m.is_dir()) {
            match format::resolve_dir(given) {
                Ok(p) => {
                    resolved = p;
                    resolved.as_path()
                }
                Err(Error::Io { .. }) | Err(Error::Unsupported { .. }) | Err(Error::Usage(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
        } else {
            given
        };
        let src = open_source(path)?;
        let at = Location::file(path);
        let tiff = TiffFile::parse(&src, &at);
        let files = LocalFiles { path: path.to_path_buf() };
        let probe = Probe { src: &src, at: &at, tiff: tiff.as_ref(), files: Some(&files) };
        Ok(format::detect(&probe).0.chosen().or_else(|| format::known::vendor(&probe)))
    }

    /// The tile index (levels, tiles, codecs, properties).
    pub fn index(&self) -> &SlideIndex {
        &self.index
    }

    /// Vendor / driver name (`openslide.vendor`).
    pub fn vendor(&self) -> &'static str {
        self.index.vendor
    }

    /// Number of pyramid levels.
    pub fn level_count(&self) -> usize {
        self.index.levels.len()
    }

    /// Level-0 (width, height) in pixels.
    pub fn dimensions(&self) -> (u64, u64) {
        self.index.dimensions()
    }

    /// (width, height) in pixels of every level, level 0 first.
    pub fn level_dimensions(&self) -> Vec<(u64, u64)> {
        self.index.levels.iter().map(|l| (l.image.width, l.image.height)).collect()
    }

    /// Downsample of every level relative to level 0 (OpenSlide's mean-of-axes rule).
    pub fn level_downsamples(&self) -> Vec<f64> {
        self.index.levels.iter().map(|l| l.downsample).collect()
    }

    /// (tile width, tile height) in pixels of every level.
    pub fn level_tile_sizes(&self) -> Vec<(u32, u32)> {
        self.index.levels.iter().map(|l| (l.image.tile_width, l.image.tile_height)).collect()
    }

    /// Properties with OpenSlide's names.
    pub fn properties(&self) -> &BTreeMap<String, String> {
        &self.index.properties
    }

    /// Names and (width, height) of the associated images.
    pub fn associated_images(&self) -> BTreeMap<String, (u64, u64)> {
        self.index.associated.iter().map(|(k, v)| (k.clone(), (v.width, v.height))).collect()
    }

    /// ICC profile of the pyramid, if any: read from the file at the first call (the index
    /// keeps only its byte range; `openslide.icc-size` gives its length without reading it),
    /// then kept.
    ///
    /// # Errors
    /// [`Error::Io`] when the profile cannot be read.
    pub fn icc_profile(&self) -> Result<Option<Arc<[u8]>>> {
        if let Some(v) = self.icc.get() {
            return Ok(v.clone());
        }
        let v = self.index.icc.as_ref().map(|b| self.read_blob(b)).transpose()?;
        Ok(self.icc.get_or_init(|| v).clone())
    }

    /// ICC profile of associated image `name`, if it has one: read from the file at each call
    /// (not kept).
    ///
    /// # Errors
    /// [`Error::Usage`] for an unknown name; [`Error::Io`] when the profile cannot be read.
    pub fn associated_icc_profile(&self, name: &str) -> Result<Option<Arc<[u8]>>> {
        self.associated_image(name)?;
        self.index.associated_icc.get(name).map(|b| self.read_blob(b)).transpose()
    }

    /// The bytes of `blob` (ranges were checked at open to lie inside their file).
    fn read_blob(&self, blob: &BlobRef) -> Result<Arc<[u8]>> {
        match blob {
            BlobRef::Bytes(b) => Ok(b.clone()),
            BlobRef::Range(r) => {
                let at = Location::file(&self.index.sources[r.source.0 as usize].path);
                let mut buf = vec![0u8; r.length as usize];
                self.src.read_exact_at(&mut buf, crate::io::multi::address(*r)).map_err(|e| Error::io(&at, e))?;
                Ok(Arc::from(buf))
            }
        }
    }

    /// Microns per pixel (x, y) at level 0, from `openslide.mpp-x/-y`.
    pub fn mpp(&self) -> Option<(f64, f64)> {
        let p = &self.index.properties;
        Some((p.get("openslide.mpp-x")?.parse().ok()?, p.get("openslide.mpp-y")?.parse().ok()?))
    }

    /// The level to read for a wanted downsample (OpenSlide's rule).
    pub fn best_level_for_downsample(&self, downsample: f64) -> usize {
        best_level_for_downsample(&self.level_downsamples(), downsample)
    }

    /// The index of associated image `name`, or a usage error listing the names there are.
    pub(super) fn associated_image(&self, name: &str) -> Result<&ImageIndex> {
        self.index.associated.get(name).ok_or_else(|| {
            Error::Usage(format!(
                "{}: no associated image '{name}' (have: {})",
                self.index.path().display(),
                self.index.associated.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}
