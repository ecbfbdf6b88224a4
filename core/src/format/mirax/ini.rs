//! `Slidedat.ini`: a key file read as GLib's `GKeyFile` (`g_key_file_load_from_data` with no
//! flags) reads it, which is how OpenSlide reads it (`_openslide_read_key_file`).
//!
//! Rules kept (GLib `gkeyfile.c`, OpenSlide `openslide-util.c`): a UTF-8 BOM is skipped; the
//! file may hold at most 1 MiB; lines end at LF, a CR before the LF is dropped; leading
//! whitespace of a line is skipped; a line starting with `#` and an empty line are comments;
//! `[name]` starts a group (a repeated group continues the earlier one); `key=value` lines: the
//! key's trailing whitespace and the value's leading whitespace are dropped, the value is kept
//! raw (no escapes: OpenSlide reads values with `g_key_file_get_value`); a later duplicate key
//! replaces the earlier value, keeping its place; a key line before any group, or a line that
//! is none of these, makes the file unreadable. Locale suffixes (`KEY[de]`) are kept as part of
//! the key name. Integers parse as `g_key_file_get_integer` (C `strtol`, base 10, int range,
//! nothing but whitespace after the digits), doubles as `g_key_file_get_double`
//! (`g_ascii_strtod`, the whole value). Names are looked up by hash, so parsing takes time
//! linear in the file's size whatever the number of groups and keys.

use std::collections::HashMap;

/// Largest `Slidedat.ini` read (OpenSlide's `SLIDEDAT_MAX_SIZE`).
pub const MAX_INI_BYTES: u64 = crate::limits::LIMITS.mirax_ini_bytes;

/// The groups of a key file in file order, each with its (key, value) pairs in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyFile {
    groups: Vec<(String, Vec<(String, String)>)>,
    /// Position in `groups` of each group name, and of each key in its group's pairs: lookups
    /// in constant time, so that a file of many names parses in linear time.
    group_at: HashMap<String, (usize, HashMap<String, usize>)>,
}

impl KeyFile {
    /// Parse `data` (the file's bytes). Non-UTF-8 bytes are replaced (U+FFFD) in names and
    /// values.
    ///
    /// # Errors
    /// A message naming the line that is not a comment, group or key-value pair, or a key
    /// before the first group.
    pub fn parse(data: &[u8]) -> Result<KeyFile, String> {
        let data = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
        let mut kf = KeyFile::default();
        let mut current: Option<usize> = None;
        for (n, raw) in data.split(|&b| b == b'\n').enumerate() {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let line = String::from_utf8_lossy(raw);
            let line = line.trim_start_matches(|c: char| c.is_ascii_whitespace());
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(rest) = line.strip_prefix('[') {
                let Some(end) = rest.rfind(']') else {
                    return Err(format!("Slidedat.ini line {}: a group line without ']'", n + 1));
                };
                let name = &rest[..end];
                current = Some(match kf.group_at.get(name) {
                    Some(&(i, _)) => i,
                    None => {
                        kf.groups.push((name.to_string(), Vec::new()));
                        kf.group_at.insert(name.to_string(), (kf.groups.len() - 1, HashMap::new()));
                        kf.groups.len() - 1
                    }
                });
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(format!("Slidedat.ini line {} is not a key-value pair, group or comment", n + 1));
            };
            let Some(g) = current else {
                return Err(format!("Slidedat.ini line {}: a key before the first group", n + 1));
            };
            let key = key.trim_end_matches(|c: char| c.is_ascii_whitespace());
            let value = value.trim_start_matches(|c: char| c.is_ascii_whitespace());
            let (name, pairs) = &mut kf.groups[g];
            let keys = &mut kf.group_at.get_mut(name.as_str()).expect("every group is indexed").1;
            match keys.get(key) {
                Some(&i) => pairs[i].1 = value.to_string(),
                None => {
                    keys.insert(key.to_string(), pairs.len());
                    pairs.push((key.to_string(), value.to_string()));
                }
            }
        }
        Ok(kf)
    }

    /// `true` when the group exists.
    pub fn has_group(&self, group: &str) -> bool {
        self.group_at.contains_key(group)
    }

    /// The raw value of `key` in `group`.
    pub fn value(&self, group: &str, key: &str) -> Option<&str> {
        let (g, keys) = self.group_at.get(group)?;
        keys.get(key).map(|&i| self.groups[*g].1[i].1.as_str())
    }

    /// The value of `key` in `group` as an integer (`g_key_file_get_integer`): `Err` with a
    /// message naming the key when absent or not an integer.
    pub fn int(&self, group: &str, key: &str) -> Result<i32, String> {
        let v = self.value(group, key).ok_or_else(|| format!("Slidedat.ini has no key {key} in group [{group}]"))?;
        parse_int(v).ok_or_else(|| format!("Slidedat.ini [{group}] {key}={v:?} is not an integer"))
    }

    /// The value of `key` in `group` as a double (`g_key_file_get_double`).
    pub fn double(&self, group: &str, key: &str) -> Result<f64, String> {
        let v = self.value(group, key).ok_or_else(|| format!("Slidedat.ini has no key {key} in group [{group}]"))?;
        parse_g_double(v).ok_or_else(|| format!("Slidedat.ini [{group}] {key}={v:?} is not a number"))
    }

    /// The raw value of `key` in `group`, `Err` naming it when absent.
    pub fn string(&self, group: &str, key: &str) -> Result<&str, String> {
        self.value(group, key).ok_or_else(|| format!("Slidedat.ini has no key {key} in group [{group}]"))
    }

    /// Every (group, key, value), groups and keys in file order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.groups.iter().flat_map(|(g, pairs)| pairs.iter().map(move |(k, v)| (g.as_str(), k.as_str(), v.as_str())))
    }
}

/// C `strtol(v, &end, 10)` accepted as GLib does: optional leading whitespace and sign, at
/// least one digit, then nothing or whitespace (and whatever follows it); within `i32`.
pub fn parse_int(v: &str) -> Option<i32> {
    let t = v.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let (neg, digits) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    if end == 0 || !digits[end..].chars().next().is_none_or(|c| c.is_ascii_whitespace()) {
        return None;
    }
    let n: i64 = digits[..end].parse().ok()?;
    i32::try_from(if neg { -n } else { n }).ok()
}

/// `g_ascii_strtod` over the whole value (leading whitespace allowed, C-locale syntax).
pub fn parse_g_double(v: &str) -> Option<f64> {
    let t = v.trim_start_matches(|c: char| c.is_ascii_whitespace());
    if t.is_empty() || t.ends_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let lower = t.to_ascii_lowercase();
    if lower.trim_start_matches(['+', '-']).starts_with("inf") || lower.contains("nan") {
        // strtod accepts these; so does GLib, but no slide writes them: refuse.
        return None;
    }
    t.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_parse_as_glib() {
        let kf = KeyFile::parse(b"\xEF\xBB\xBF# c\n[GENERAL]\r\n  KEY = a b \r\n\n[B]\nX=1\n=empty\n[GENERAL]\nKEY=c\nK2=\n").unwrap();
        assert_eq!(kf.value("GENERAL", "KEY"), Some("c"), "a later duplicate replaces");
        assert_eq!(kf.value("GENERAL", "K2"), Some(""));
        assert_eq!(kf.value("B", ""), Some("empty"));
        let all: Vec<_> = kf.entries().collect();
        assert_eq!(all, vec![("GENERAL", "KEY", "c"), ("GENERAL", "K2", ""), ("B", "X", "1"), ("B", "", "empty")]);
        assert!(KeyFile::parse(b"KEY=1\n").unwrap_err().contains("before the first group"));
        assert!(KeyFile::parse(b"[A]\njunk\n").unwrap_err().contains("line 2"));
        assert!(KeyFile::parse(b"[A\n").is_err());
        assert_eq!(KeyFile::parse(b"[A]\n; x=1\n").unwrap().value("A", "; x"), Some("1"), "only # starts a comment");
    }

    /// A watchdog over `f` (a hang fails the test instead of blocking it).
    fn within_30_s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(30)).unwrap_or_else(|_| panic!("{what}: still running after 30 s"))
    }

    #[test]
    fn a_megabyte_of_distinct_names_parses_in_linear_time() {
        // The most a Slidedat.ini may hold: ~116,000 distinct keys in one group, or as many
        // groups of one key. Looking each name up among the earlier ones took minutes.
        let keys: Vec<u8> = b"[G]\n".iter().copied().chain((0..116_000).flat_map(|k| format!("k{k:06}=\n").into_bytes())).collect();
        let groups: Vec<u8> = (0..58_000).flat_map(|k| format!("[{k:05}]\nK=\n").into_bytes()).collect();
        assert!(keys.len() as u64 <= MAX_INI_BYTES && groups.len() as u64 <= MAX_INI_BYTES);
        let kf = within_30_s("116,000 keys", move || KeyFile::parse(&keys).unwrap());
        assert_eq!(kf.entries().count(), 116_000);
        assert_eq!(kf.value("G", "k115999"), Some(""));
        let kf = within_30_s("58,000 groups", move || KeyFile::parse(&groups).unwrap());
        assert_eq!(kf.entries().count(), 58_000);
        assert!(kf.has_group("57999"));
    }

    #[test]
    fn numbers_parse_as_glib() {
        assert_eq!(parse_int("20"), Some(20));
        assert_eq!(parse_int(" -5"), Some(-5));
        assert_eq!(parse_int("7 trailing"), Some(7));
        assert_eq!(parse_int("20.0"), None);
        assert_eq!(parse_int("x40"), None);
        assert_eq!(parse_int(""), None);
        assert_eq!(parse_int("3000000000"), None);
        assert_eq!(parse_g_double("0.25"), Some(0.25));
        assert_eq!(parse_g_double("4"), Some(4.0));
        assert_eq!(parse_g_double("1e-3"), Some(0.001));
        assert_eq!(parse_g_double("0,25"), None);
        assert_eq!(parse_g_double("1 "), None);
        assert_eq!(parse_g_double("nan"), None);
    }
}
