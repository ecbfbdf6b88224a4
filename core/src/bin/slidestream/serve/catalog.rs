//! The slides a server offers: found once at start-up under the served path, each with an id
//! (its relative path, percent-encoded with `/` as `%2F`), opened on first use and kept in a
//! small LRU of open slides.
//!
//! Only slides found by the scan are served, so a request can name nothing else: an id with a
//! `..`, `.` or empty component, or an absolute path, is refused as leaving the served
//! directory (`403`); any other unknown id is `404`. The scan does not follow a symbolic link
//! whose target lies outside the served directory.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use lru::LruCache;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use slidestream::{Error, Slide};

use super::http::HttpError;

/// Folders deeper than this under the served directory are not scanned.
const SCAN_DEPTH: usize = slidestream::limits::LIMITS.serve_scan_depth;
/// The scan stops after looking at this many directory entries (a note in `errors`).
const SCAN_ENTRIES: usize = slidestream::limits::LIMITS.serve_scan_entries;
/// Slides kept open at once (each holds its file handles and index; tiles live in the shared
/// cache).
const OPEN_SLIDES: usize = 64;

/// RFC 3986 unreserved characters stay; everything else, `/` included, is percent-encoded.
const ID_SET: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// One slide the server offers.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Path relative to the served directory, `/`-separated (the file name for a single file).
    pub name: String,
    /// What [`Slide::open`] is given (a file, or a DICOM series folder).
    pub path: PathBuf,
    /// Detected vendor.
    pub vendor: &'static str,
    /// Its `/slides.json` record (id, name, vendor, size, levels, mpp, associated images),
    /// made when the scan opened it.
    pub summary: serde_json::Value,
}

/// The slides found under the served path, and those that failed.
pub(crate) struct Catalog {
    root: PathBuf,
    entries: BTreeMap<String, Entry>,
    /// (name, error) of files that were detected as slides but failed to open, and scan notes.
    pub errors: Vec<(String, String)>,
    open: Mutex<LruCache<String, Arc<Slide>>>,
}

/// The id of a slide named `name` (relative path with `/`).
pub(crate) fn encode_id(name: &str) -> String {
    utf8_percent_encode(name, ID_SET).to_string()
}

impl Catalog {
    /// Scan `path`: a slide file (served alone under its file name) or a directory, searched
    /// recursively for files a format driver accepts ([`Slide::detect_vendor`]); the files of a
    /// DICOM series are served once, as their folder. Each found slide is opened once to check it;
    /// those that fail are listed in [`Catalog::errors`] with the reason.
    ///
    /// # Errors
    /// [`Error::Usage`] when `path` does not exist or is a file that is not a slide.
    pub(crate) fn scan(path: &Path) -> Result<Catalog, Error> {
        let meta = std::fs::metadata(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        let root = std::fs::canonicalize(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        let mut cat = Catalog {
            root: root.clone(),
            entries: BTreeMap::new(),
            errors: Vec::new(),
            open: Mutex::new(LruCache::new(NonZeroUsize::new(OPEN_SLIDES).unwrap_or(NonZeroUsize::MIN))),
        };
        if meta.is_file() {
            let vendor = Slide::detect_vendor(&root)?.ok_or_else(|| Error::Usage(format!("{}: not a slide format slidestream reads", path.display())))?;
            let name = root.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            cat.add(name, root, vendor);
        } else {
            let mut seen = 0usize;
            let mut dicom_dirs = std::collections::BTreeSet::new();
            cat.walk(&root.clone(), "", 0, &mut seen, &mut dicom_dirs);
            if seen >= SCAN_ENTRIES {
                cat.errors.push((String::new(), format!("scan stopped after {SCAN_ENTRIES} entries")));
            }
        }
        Ok(cat)
    }

    fn add(&mut self, name: String, path: PathBuf, vendor: &'static str) {
        match Slide::open(&path) {
            Ok(s) => {
                let id = encode_id(&name);
                let ((w, h), mpp) = (s.dimensions(), s.mpp());
                let summary = serde_json::json!({
                    "id": id, "name": name, "vendor": vendor, "width": w, "height": h,
                    "level_count": s.level_count(), "mpp_x": mpp.map(|m| m.0), "mpp_y": mpp.map(|m| m.1),
                    "associated": s.associated_images().keys().collect::<Vec<_>>(),
                });
                self.entries.insert(id, Entry { name, path, vendor, summary });
            }
            // The message names the file by its path under the served directory, not the
            // server's absolute path.
            Err(e) => {
                let root = format!("{}/", self.root.display());
                self.errors.push((name, crate::output::one_line(&e.to_string()).replace(&root, "")));
            }
        }
    }

    fn walk(&mut self, dir: &Path, prefix: &str, depth: usize, seen: &mut usize, dicom_dirs: &mut std::collections::BTreeSet<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        let mut items: Vec<_> = rd.filter_map(|e| e.ok()).collect();
        items.sort_by_key(|e| e.file_name());
        for item in items {
            *seen += 1;
            if *seen >= SCAN_ENTRIES {
                return;
            }
            let fname = item.file_name().to_string_lossy().into_owned();
            if fname.starts_with('.') {
                continue;
            }
            let path = item.path();
            // Symbolic links are followed only to targets inside the served directory.
            let Ok(real) = std::fs::canonicalize(&path) else { continue };
            if !real.starts_with(&self.root) {
                continue;
            }
            let name = if prefix.is_empty() { fname.clone() } else { format!("{prefix}/{fname}") };
            let Ok(meta) = std::fs::metadata(&real) else { continue };
            if meta.is_dir() {
                if depth < SCAN_DEPTH {
                    self.walk(&path, &name, depth + 1, seen, dicom_dirs);
                }
            } else if meta.is_file() {
                match Slide::detect_vendor(&path) {
                    // A DICOM file opens its whole series (the instances beside it): one
                    // entry per folder, named by the folder, or by the first instance when the
                    // series lies directly in the served directory.
                    Ok(Some("dicom")) => {
                        if dicom_dirs.insert(dir.to_path_buf()) {
                            if prefix.is_empty() {
                                self.add(name, path, "dicom");
                            } else {
                                self.add(prefix.to_string(), dir.to_path_buf(), "dicom");
                            }
                        }
                    }
                    Ok(Some(vendor)) => self.add(name, path, vendor),
                    Ok(None) | Err(_) => {}
                }
            }
        }
    }

    /// The slides, by id (sorted).
    pub(crate) fn entries(&self) -> &BTreeMap<String, Entry> {
        &self.entries
    }

    /// The entry for a raw (still percent-encoded) id from a URL.
    ///
    /// # Errors
    /// `400` for an id that is not valid UTF-8 once decoded, `403` for one that would leave
    /// the served directory, `404` for one that names no served slide.
    pub(crate) fn lookup(&self, raw: &str) -> Result<(String, &Entry), HttpError> {
        let decoded = percent_decode_str(raw).decode_utf8().map_err(|_| HttpError::new(400, "slide id is not UTF-8 once percent-decoded".into()))?;
        let leaves = decoded.starts_with('/')
            || decoded.contains('\\')
            || decoded.contains('\0')
            || Path::new(decoded.as_ref()).components().any(|c| !matches!(c, Component::Normal(_)))
            || decoded.split('/').any(|c| c.is_empty() || c == "." || c == "..");
        if leaves {
            return Err(HttpError::new(403, format!("slide id {decoded:?} leaves the served directory")));
        }
        let id = encode_id(&decoded);
        self.entries.get(&id).map(|e| (id, e)).ok_or_else(|| HttpError::new(404, format!("no slide {decoded:?} is served here")))
    }

    /// The open slide of an entry (opened now when it is not in the LRU of open slides).
    ///
    /// # Errors
    /// `500` naming the slide and the error when it fails to open.
    pub(crate) fn slide(&self, id: &str, entry: &Entry) -> Result<Arc<Slide>, HttpError> {
        if let Some(s) = self.open.lock().unwrap_or_else(|p| p.into_inner()).get(id) {
            return Ok(Arc::clone(s));
        }
        let slide =
            Arc::new(Slide::open(&entry.path).map_err(|e| HttpError::new(500, format!("{}: {}", entry.name, crate::output::one_line(&e.to_string()))))?);
        self.open.lock().unwrap_or_else(|p| p.into_inner()).put(id.to_string(), Arc::clone(&slide));
        Ok(slide)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_encode_slashes_and_keep_unreserved() {
        assert_eq!(encode_id("a/b c.svs"), "a%2Fb%20c.svs");
        assert_eq!(encode_id("CMU-1_x~y.svs"), "CMU-1_x~y.svs");
    }

    #[test]
    fn ids_that_leave_the_directory_are_forbidden() {
        let cat = Catalog { root: PathBuf::from("/nonexistent"), entries: BTreeMap::new(), errors: vec![], open: Mutex::new(LruCache::new(NonZeroUsize::MIN)) };
        for raw in ["..", "%2E%2E", "a%2F..%2Fb", "%2Fetc%2Fpasswd", "a%2F%2Fb", ".", "a%5C..%5Cb", "a%00b"] {
            assert_eq!(cat.lookup(raw).unwrap_err().status, 403, "{raw}");
        }
        assert_eq!(cat.lookup("missing.svs").unwrap_err().status, 404);
        assert_eq!(cat.lookup("%FF").unwrap_err().status, 400);
    }
}
