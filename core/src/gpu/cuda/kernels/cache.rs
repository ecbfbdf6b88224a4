//! The on-disk cache of compiled kernel images (`SLIDESTREAM_KERNEL_CACHE`): host-side only
//! (no CUDA call here), so every rule is unit-tested without a GPU.
//!
//! One file per key, named by the key's SHA-256. The key covers everything that can make an
//! image wrong for this process: the kernel source, the compile options, the device
//! architecture, the NVRTC and driver versions and this file format. A file holds
//!
//! ```text
//! magic "SLSKRN01" | kind (1 byte: 0 cubin, 1 PTX) | key digest (32) | payload length (u64 LE)
//! | payload SHA-256 (32) | payload
//! ```
//!
//! and is accepted only when its size, magic, key digest and payload checksum all match (PTX
//! must also end with its NUL). Files are written to a temporary name in the same directory
//! and renamed, so a reader sees a whole file or none; concurrent writers of one key write the
//! same bytes. Any failure is reported as text for the GPU stats, never as an error.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::KernelCache;

/// Bumped when the file layout or the meaning of a key changes.
const FORMAT: &str = "slidestream-kernel-cache 1";
const MAGIC: &[u8; 8] = b"SLSKRN01";
/// Magic, kind, key digest, payload length, payload digest.
const HEADER: usize = 8 + 1 + 32 + 8 + 32;
/// Largest payload accepted on read (the kernels compile to well under 1 MiB).
const MAX_PAYLOAD: u64 = crate::limits::LIMITS.kernel_cache_bytes;

/// What an image is: SASS for one architecture (`nvrtcGetCUBIN`) or PTX (NUL-terminated,
/// JIT-compiled by the driver at module load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageKind {
    Cubin,
    Ptx,
}

/// A compiled module image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) kind: ImageKind,
    pub(crate) bytes: Vec<u8>,
}

/// Everything a cached image depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyInputs<'a> {
    pub(crate) source: &'a str,
    /// Every option list the loader may compile with, in the order it tries them.
    pub(crate) options: &'a [&'a str],
    /// Compute capability (major, minor).
    pub(crate) arch: (i32, i32),
    /// `nvrtcVersion` (major, minor).
    pub(crate) nvrtc: (i32, i32),
    /// `cuDriverGetVersion`.
    pub(crate) driver: i32,
}

/// The digest naming one cached image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key([u8; 32]);

impl Key {
    pub(crate) fn new(k: &KeyInputs<'_>) -> Key {
        let mut h = Sha256::new();
        // Length-prefixed fields: no two different inputs hash the same bytes.
        let mut field = |b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        field(FORMAT.as_bytes());
        field(k.source.as_bytes());
        field(&(k.options.len() as u64).to_le_bytes());
        for o in k.options {
            field(o.as_bytes());
        }
        field(format!("sm {}.{}", k.arch.0, k.arch.1).as_bytes());
        field(format!("nvrtc {}.{}", k.nvrtc.0, k.nvrtc.1).as_bytes());
        field(format!("driver {}", k.driver).as_bytes());
        Key(h.finalize().into())
    }

    /// The file name of the key's image in the cache directory.
    pub(crate) fn file_name(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.kernels")
    }
}

/// The cache directory `setting` names, or why there is none (`off`, no home directory).
/// `xdg` and `home` are `$XDG_CACHE_HOME` and `$HOME` (a relative or empty one is ignored, as
/// the XDG base directory specification says).
pub(crate) fn dir_of(setting: &KernelCache, xdg: Option<&str>, home: Option<&str>) -> Result<PathBuf, String> {
    let abs = |v: Option<&str>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    match setting {
        KernelCache::Off => Err("SLIDESTREAM_KERNEL_CACHE=off".into()),
        KernelCache::Dir(d) => Ok(d.clone()),
        KernelCache::Auto => match (abs(xdg), abs(home)) {
            (Some(x), _) => Ok(x.join("slidestream").join("kernels")),
            (None, Some(h)) => Ok(h.join(".cache").join("slidestream").join("kernels")),
            (None, None) => Err("neither XDG_CACHE_HOME nor HOME is an absolute path (set SLIDESTREAM_KERNEL_CACHE to a directory)".into()),
        },
    }
}

/// [`dir_of`] with this process's environment.
pub(crate) fn dir_from_env(setting: &KernelCache) -> Result<PathBuf, String> {
    let var = |n: &str| std::env::var(n).ok();
    dir_of(setting, var("XDG_CACHE_HOME").as_deref(), var("HOME").as_deref())
}

/// What a lookup found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    Hit(Image),
    /// No file for the key.
    Missing,
    /// A file that cannot be used, and why (unreadable, truncated, another key, corrupt).
    Bad(String),
}

/// The bytes of a file holding `image` under `key`.
fn encode(key: &Key, image: &Image) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + image.bytes.len());
    out.extend_from_slice(MAGIC);
    out.push(match image.kind {
        ImageKind::Cubin => 0,
        ImageKind::Ptx => 1,
    });
    out.extend_from_slice(&key.0);
    out.extend_from_slice(&(image.bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(&image.bytes));
    out.extend_from_slice(&image.bytes);
    out
}

/// The image in `file` (the bytes of a cache file) if it is whole and for `key`.
fn decode(key: &Key, file: &[u8]) -> Result<Image, String> {
    if file.len() < HEADER {
        return Err(format!("truncated: {} bytes, shorter than the {HEADER}-byte header", file.len()));
    }
    if &file[..8] != MAGIC {
        return Err("not a slidestream kernel cache file (bad magic)".into());
    }
    let kind = match file[8] {
        0 => ImageKind::Cubin,
        1 => ImageKind::Ptx,
        k => return Err(format!("unknown image kind {k}")),
    };
    if file[9..41] != key.0 {
        return Err("written for another key".into());
    }
    let len = u64::from_le_bytes(file[41..49].try_into().expect("8 bytes"));
    if len > MAX_PAYLOAD || (file.len() - HEADER) as u64 != len {
        return Err(format!("truncated or overlong: header says {len} payload bytes, file has {}", file.len() - HEADER));
    }
    let payload = &file[HEADER..];
    if Sha256::digest(payload)[..] != file[49..81] {
        return Err("payload checksum mismatch (corrupt)".into());
    }
    if kind == ImageKind::Ptx && payload.last() != Some(&0) {
        return Err("PTX without its terminating NUL".into());
    }
    Ok(Image { kind, bytes: payload.to_vec() })
}

/// Look up `key` in `dir`.
pub(crate) fn read(dir: &Path, key: &Key) -> Lookup {
    let path = dir.join(key.file_name());
    match std::fs::read(&path) {
        Ok(bytes) => match decode(key, &bytes) {
            Ok(img) => Lookup::Hit(img),
            Err(why) => Lookup::Bad(why),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Lookup::Missing,
        Err(e) => Lookup::Bad(format!("unreadable: {e}")),
    }
}

/// Store `image` under `key` in `dir` (made if missing): written to a temporary file in `dir`,
/// flushed, then renamed over the key's file. Returns the file's path.
pub(crate) fn write(dir: &Path, key: &Key, image: &Image) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(key.file_name());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let tmp = dir.join(format!(".{}.{}.{nanos}.tmp", key.file_name(), std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(&encode(key, image))?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> KeyInputs<'static> {
        KeyInputs { source: "__global__ void k() {}", options: &["--gpu-architecture=sm_90"], arch: (9, 0), nvrtc: (13, 0), driver: 13000 }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("slidestream-kcache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn cubin() -> Image {
        Image { kind: ImageKind::Cubin, bytes: (0..5000u32).map(|i| (i * 31 % 251) as u8).collect() }
    }

    #[test]
    fn the_key_changes_with_every_input() {
        let base = Key::new(&inputs());
        assert_eq!(base, Key::new(&inputs()), "deterministic");
        let opts2: &[&str] = &["--gpu-architecture=sm_90", "-lineinfo"];
        let variants = [
            KeyInputs { source: "__global__ void k() { }", ..inputs() },
            KeyInputs { options: opts2, ..inputs() },
            KeyInputs { options: &["--gpu-architecture=sm_90a"], ..inputs() },
            KeyInputs { arch: (8, 0), ..inputs() },
            KeyInputs { arch: (9, 1), ..inputs() },
            KeyInputs { nvrtc: (12, 8), ..inputs() },
            KeyInputs { driver: 12080, ..inputs() },
        ];
        let mut seen = vec![base];
        for v in &variants {
            let k = Key::new(v);
            assert!(!seen.contains(&k), "{v:?} gives a key already seen");
            seen.push(k);
        }
        // Field boundaries count: moving text between two options is another key.
        let a: &[&str] = &["ab", "c"];
        let b: &[&str] = &["a", "bc"];
        assert_ne!(Key::new(&KeyInputs { options: a, ..inputs() }), Key::new(&KeyInputs { options: b, ..inputs() }));
        assert!(base.file_name().ends_with(".kernels") && base.file_name().len() == 64 + 8);
    }

    #[test]
    fn write_then_read_round_trips_atomically() {
        let dir = temp_dir("roundtrip").join("nested");
        let key = Key::new(&inputs());
        assert_eq!(read(&dir, &key), Lookup::Missing, "missing directory = missing file");
        let path = write(&dir, &key, &cubin()).expect("write");
        assert_eq!(path, dir.join(key.file_name()));
        assert_eq!(read(&dir, &key), Lookup::Hit(cubin()));
        // Rewriting replaces the file; no temporary file is left behind.
        let ptx = Image { kind: ImageKind::Ptx, bytes: b".version 9.0\n\0".to_vec() };
        write(&dir, &key, &ptx).expect("rewrite");
        assert_eq!(read(&dir, &key), Lookup::Hit(ptx));
        let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, vec![key.file_name()]);
        // Another key does not see this file.
        let other = Key::new(&KeyInputs { driver: 1, ..inputs() });
        assert_eq!(read(&dir, &other), Lookup::Missing);
        let _ = std::fs::remove_dir_all(dir.parent().unwrap());
    }

    #[test]
    fn truncated_corrupt_and_foreign_files_are_rejected() {
        let dir = temp_dir("bad");
        let key = Key::new(&inputs());
        let path = write(&dir, &key, &cubin()).expect("write");
        let whole = std::fs::read(&path).unwrap();
        let bad = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            match read(&dir, &key) {
                Lookup::Bad(why) => why,
                other => panic!("accepted a bad file: {other:?}"),
            }
        };
        assert!(bad(&whole[..whole.len() - 1]).contains("truncated"));
        assert!(bad(&whole[..10]).contains("truncated"));
        assert!(bad(&[]).contains("truncated"));
        let mut longer = whole.clone();
        longer.push(0);
        assert!(bad(&longer).contains("overlong"));
        let mut flipped = whole.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(bad(&flipped).contains("checksum"));
        let mut magic = whole.clone();
        magic[0] = b'X';
        assert!(bad(&magic).contains("magic"));
        let other = Key::new(&KeyInputs { nvrtc: (12, 0), ..inputs() });
        std::fs::write(&path, encode(&other, &cubin())).unwrap();
        assert!(matches!(read(&dir, &key), Lookup::Bad(w) if w.contains("another key")));
        std::fs::write(&path, encode(&key, &Image { kind: ImageKind::Ptx, bytes: b"no nul".to_vec() })).unwrap();
        assert!(matches!(read(&dir, &key), Lookup::Bad(w) if w.contains("NUL")));
        // A directory where the file should be: unreadable, not a panic.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(read(&dir, &key), Lookup::Bad(w) if w.contains("unreadable")));
        // ... and the write fails (the caller notes it and keeps the compiled image).
        assert!(write(&dir, &key, &cubin()).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_directory_is_an_error_not_a_panic() {
        let dir = temp_dir("ro");
        std::fs::write(&dir, b"a file, not a directory").unwrap();
        let key = Key::new(&inputs());
        assert!(write(&dir.join("sub"), &key, &cubin()).is_err());
        assert!(matches!(read(&dir.join("sub"), &key), Lookup::Bad(w) if w.contains("unreadable")));
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn the_directory_follows_the_setting_and_xdg() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(dir_of(&KernelCache::Auto, Some("/x/cache"), Some("/home/u")), Ok(p("/x/cache/slidestream/kernels")));
        assert_eq!(dir_of(&KernelCache::Auto, None, Some("/home/u")), Ok(p("/home/u/.cache/slidestream/kernels")));
        assert_eq!(dir_of(&KernelCache::Auto, Some("relative"), Some("/home/u")), Ok(p("/home/u/.cache/slidestream/kernels")));
        assert_eq!(dir_of(&KernelCache::Auto, Some(""), Some("/home/u")), Ok(p("/home/u/.cache/slidestream/kernels")));
        assert!(dir_of(&KernelCache::Auto, None, None).is_err());
        assert_eq!(dir_of(&KernelCache::Dir(p("/opt/k")), Some("/x"), Some("/h")), Ok(p("/opt/k")));
        assert!(dir_of(&KernelCache::Off, Some("/x"), Some("/h")).unwrap_err().contains("off"));
    }
}
