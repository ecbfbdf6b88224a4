//! The objects beside a remote slide's object: [`SiblingFiles`] over a bucket or container.
//!
//! Formats of several files (a DICOM series: one object per level; MIRAX: `Slidedat.ini`,
//! `Index.dat` and `Data*.dat` in a folder named after the `.mrxs`) find their other files
//! through [`SiblingFiles`]. Over object storage the "folder" of `s3://b/dir/x.dcm` is the
//! prefix `dir/`, listed with one LIST request (`list_with_delimiter`: objects directly under
//! it, no recursion, as a local folder listing), keeping only the objects with the opened
//! object's extension (the length and ETag of each from the listing, no HEAD). A plain HTTP
//! server has no listing: there the
//! listing is the opened object alone (a DICOM instance is then read by itself; MIRAX names its
//! files and needs no listing).
//!
//! Every object opened here is kept (one HEAD each, its ETag recorded), so the slide's
//! [`crate::io::multi::SourceSet`] reads each extra object through the same [`RemoteSource`]
//! the driver examined: a replaced object is `ESTALE` at its first read, never another
//! version's bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

use super::{runtime, to_io, RemoteOptions, RemoteSource, RemoteStats, StorageOptions};
use crate::error::{Error, Location, Result};
use crate::format::SiblingFiles;
use crate::index::FileIdentity;
use crate::io::ByteSource;

/// The objects of one remote slide (module docs).
pub struct RemoteFiles {
    url: String,
    opts: StorageOptions,
    settings: RemoteOptions,
    /// `None` for plain HTTP (no listing).
    list: Option<(Arc<dyn ObjectStore>, ObjectPath)>,
    opened: Arc<Mutex<BTreeMap<String, Arc<RemoteSource>>>>,
    /// LIST requests sent.
    listed: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for RemoteFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteFiles").field("url", &self.url).finish()
    }
}

impl RemoteFiles {
    /// The files of the slide whose primary object `primary` was opened from `url`.
    ///
    /// # Errors
    /// As [`super::store::build`].
    pub fn new(url: &str, primary: Arc<RemoteSource>, opts: &StorageOptions, settings: RemoteOptions) -> Result<RemoteFiles> {
        let list = if url.split_once("://").is_some_and(|(s, _)| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https")) && !url.contains(".blob.core.windows.net") && !url.contains(".dfs.core.windows.net") {
            None
        } else {
            let (store, path) = super::store::build(url, opts, settings.net)?;
            let parent: Vec<_> = path.parts().collect();
            let prefix = ObjectPath::from_iter(parent[..parent.len().saturating_sub(1)].iter().cloned());
            Some((store, prefix))
        };
        let mut opened = BTreeMap::new();
        opened.insert(url.to_string(), primary);
        Ok(RemoteFiles {
            url: url.to_string(),
            opts: opts.clone(),
            settings,
            list,
            opened: Arc::new(Mutex::new(opened)),
            listed: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The object at `url`, opened once (a HEAD) and kept.
    fn source(&self, url: &str) -> Result<Arc<RemoteSource>> {
        source_in(&self.opened, url, &self.opts, &self.settings)
    }

    /// End the open phase of every object opened so far ([`RemoteSource::end_open`]).
    pub fn end_open(&self) {
        for s in self.opened.lock().unwrap_or_else(|e| e.into_inner()).values() {
            s.end_open();
        }
    }

    /// The counters of every object of the slide, summed, plus the LIST request.
    pub fn stats(&self) -> RemoteStats {
        let mut t = RemoteStats::default();
        for s in self.opened.lock().unwrap_or_else(|e| e.into_inner()).values() {
            let x = s.stats();
            t.requests += x.requests;
            t.bytes += x.bytes;
            t.failed += x.failed;
            t.index_cache_rejected += x.index_cache_rejected;
        }
        t.requests += self.listed.load(std::sync::atomic::Ordering::Relaxed);
        t
    }

}

fn source_in(opened: &Mutex<BTreeMap<String, Arc<RemoteSource>>>, url: &str, opts: &StorageOptions, settings: &RemoteOptions) -> Result<Arc<RemoteSource>> {
    if let Some(s) = opened.lock().unwrap_or_else(|e| e.into_inner()).get(url) {
        return Ok(s.clone());
    }
    let s = Arc::new(RemoteSource::open(url, opts, settings.clone())?);
    Ok(opened.lock().unwrap_or_else(|e| e.into_inner()).entry(url.to_string()).or_insert(s).clone())
}

impl SiblingFiles for RemoteFiles {
    fn path(&self) -> &Path {
        Path::new(&self.url)
    }

    fn list_dir(&self) -> Result<Vec<PathBuf>> {
        let Some((store, prefix)) = &self.list else { return Ok(vec![PathBuf::from(&self.url)]) };
        let at = Location::file(&self.url);
        self.listed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let rt = runtime::runtime(&at)?;
        let listing = runtime::wait(&rt, store.list_with_delimiter(Some(prefix))).map_err(|_| Error::Interrupted)?.map_err(|e| Error::io(&at, to_io(e)))?;
        // The folder's URL is the opened URL up to its last '/'.
        let base = &self.url[..self.url.rfind('/').map_or(0, |i| i + 1)];
        // Only objects with the opened object's extension (`.dcm`, or none): a prefix may hold
        // thousands of other slides, and each candidate costs requests (a local folder
        // listing is cheap, so the local rule keeps every file). Their length and ETag come
        // from the LIST: no HEAD per object.
        let ext = |name: &str| name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let mine = ext(&self.url[base.len()..]);
        let mut out = Vec::new();
        for m in &listing.objects {
            let Some(f) = m.location.filename() else { continue };
            if ext(f) != mine {
                continue;
            }
            let url = format!("{base}{f}");
            let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
            if !opened.contains_key(&url) {
                let s = RemoteSource::from_listing(&url, &self.opts, self.settings.clone(), m.size, m.e_tag.clone())?;
                opened.insert(url.clone(), Arc::new(s));
            }
            out.push(PathBuf::from(url));
        }
        out.sort();
        Ok(out)
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ByteSource>> {
        let url = path.to_str().ok_or_else(|| Error::Usage(format!("{}: not a URL", path.display())))?;
        Ok(Box::new(self.source(url)?))
    }

    fn examine(&self, path: &Path) -> Result<(u64, Option<FileIdentity>)> {
        let url = path.to_str().ok_or_else(|| Error::Usage(format!("{}: not a URL", path.display())))?;
        // No file identity: the object's ETag, kept by its RemoteSource, guards its reads.
        Ok((self.source(url)?.len(), None))
    }

    /// Extra objects are read through the sources the open examined (their ETags).
    fn opener(&self) -> Option<crate::io::multi::Opener> {
        let (opened, opts, settings) = (self.opened.clone(), self.opts.clone(), self.settings.clone());
        Some(Arc::new(move |p: &Path| {
            let url = p.to_str().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a URL"))?;
            match source_in(&opened, url, &opts, &settings) {
                Ok(s) => Ok(Box::new(s) as Box<dyn ByteSource>),
                Err(Error::Io { source, .. }) => Err(std::io::Error::new(source.kind(), source.to_string())),
                Err(Error::Interrupted) => Err(crate::interrupt::io_error()),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            }
        }))
    }
}
