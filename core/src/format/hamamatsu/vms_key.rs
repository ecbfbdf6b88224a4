//! The VMS/VMU key file ([`super::vms`]): detection by content, values read as GLib's
//! `g_key_file_get_integer` / `g_key_file_get_string` read them (OpenSlide 4.0.1's
//! `openslide-vendor-hamamatsu.c`), `ImageFile` key suffixes, and the key file of a folder.

use std::path::{Path, PathBuf};

use super::super::mirax::ini::{parse_int, KeyFile};
use super::super::SiblingFiles;
use crate::error::{Error, Result};
use crate::io::ByteSource;

pub(super) const GROUP_VMS: &str = "Virtual Microscope Specimen";
pub(super) const GROUP_VMU: &str = "Uncompressed Virtual Microscope Specimen";
/// Largest key file read (OpenSlide's `KEY_FILE_MAX_SIZE`, 64 KiB).
pub const MAX_KEY_FILE_BYTES: u64 = crate::limits::LIMITS.vms_key_file_bytes;
/// The key file of a non-TIFF probe, when it is one of a VMS or VMU slide: `Ok(Some(..))`
/// with its bytes; `Ok(None)` when it is not such a key file; `Err` for a VMS key file
/// OpenSlide's detection refuses (no columns or rows).
pub(super) fn key_file(src: &dyn ByteSource) -> std::result::Result<Option<(Vec<u8>, KeyFile)>, String> {
    let len = src.len();
    if len > MAX_KEY_FILE_BYTES {
        return Ok(None);
    }
    let mut bytes = vec![0u8; len as usize];
    if src.read_exact_at(&mut bytes, 0).is_err() {
        return Ok(None);
    }
    let Ok(kf) = KeyFile::parse(&bytes) else {
        return Ok(None);
    };
    if kf.has_group(GROUP_VMS) {
        for (key, what) in [("NoJpegColumns", "columns"), ("NoJpegRows", "rows")] {
            if int_or_zero(&kf, key) < 1 {
                return Err(format!("VMS file has no {what} ({key})"));
            }
        }
        Ok(Some((bytes, kf)))
    } else if kf.has_group(GROUP_VMU) {
        Ok(Some((bytes, kf)))
    } else {
        Ok(None)
    }
}

/// `g_key_file_get_integer` of the VMS group: 0 when absent or not an integer.
pub(super) fn int_or_zero(kf: &KeyFile, key: &str) -> i32 {
    kf.value(GROUP_VMS, key).and_then(parse_int).unwrap_or(0)
}

/// A value as `g_key_file_get_string` returns it (escapes resolved); `None` when absent or
/// holding an invalid escape.
pub(super) fn string(kf: &KeyFile, key: &str) -> Option<String> {
    string_in(kf, GROUP_VMS, key)
}

/// [`string`] of the key `key` in `group`.
pub(super) fn string_in(kf: &KeyFile, group: &str, key: &str) -> Option<String> {
    let v = kf.value(group, key)?;
    let mut out = String::with_capacity(v.len());
    let mut it = v.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match it.next()? {
            's' => ' ',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' => '\\',
            _ => return None,
        });
    }
    Some(out)
}

/// C `strtoll(s, NULL, 10)`: optional whitespace and sign, then the leading digits; 0 without.
fn strtoll(s: &str) -> i64 {
    let t = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let (neg, d) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = d.find(|c: char| !c.is_ascii_digit()).unwrap_or(d.len());
    let n = d[..end].parse::<i64>().unwrap_or(if end == 0 { 0 } else { i64::MAX });
    if neg {
        -n
    } else {
        n
    }
}

/// (layer, column, row) of an `ImageFile...` key's suffix, as OpenSlide splits it at commas.
pub(super) fn image_key(suffix: &str) -> std::result::Result<(i64, i64, i64), usize> {
    if suffix.is_empty() {
        return Ok((0, 0, 0));
    }
    let parts: Vec<&str> = suffix.split(',').collect();
    let first = |p: &str| strtoll(p.get(1..).unwrap_or(""));
    match parts.as_slice() {
        [z] => Ok((first(z), 0, 0)),
        [x, y] => Ok((0, first(x), strtoll(y))),
        [z, x, y] => Ok((first(z), strtoll(x), strtoll(y))),
        _ => Err(parts.len()),
    }
}

/// The one VMS or VMU key file in folder `dir` (by content), `Ok(None)` when there is none.
///
/// # Errors
/// `Io` when the folder cannot be listed; `Usage` naming them when it holds several.
pub(in crate::format) fn resolve_dir(dir: &Path) -> Result<Option<PathBuf>> {
    let files = super::super::LocalFiles { path: dir.join(".") };
    let mut found = Vec::new();
    for p in super::super::list_files(dir)? {
        let Ok(src) = files.open(&p) else { continue };
        if matches!(key_file(src.as_ref()), Ok(Some(_))) {
            found.push(p);
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(Error::Usage(format!(
            "{} holds {} Hamamatsu VMS/VMU key files ({}): open one of them",
            dir.display(),
            found.len(),
            found.iter().map(|p| p.file_name().unwrap_or_default().to_string_lossy()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_keys_parse_as_openslide() {
        assert_eq!(image_key(""), Ok((0, 0, 0)));
        assert_eq!(image_key("(3,1)"), Ok((0, 3, 1)));
        assert_eq!(image_key("(2)"), Ok((2, 0, 0)));
        assert_eq!(image_key("(1,2,3)"), Ok((1, 2, 3)));
        assert_eq!(image_key("(1,2,3,4)"), Err(4));
        assert_eq!(image_key("Foo"), Ok((0, 0, 0)));
        assert_eq!(strtoll(" -12x"), -12);
        assert_eq!(strtoll("x"), 0);
    }

    #[test]
    fn strings_unescape_as_glib() {
        let kf = KeyFile::parse(b"[Virtual Microscope Specimen]\nA=a\\sb\\\\c\nB=bad\\q\nC=end\\\n").unwrap();
        assert_eq!(string(&kf, "A").as_deref(), Some("a b\\c"));
        assert_eq!(string(&kf, "B"), None);
        assert_eq!(string(&kf, "C"), None);
    }
}
