//! Fuzzing support (feature `unstable`): the input layouts of the fuzz targets in `fuzz/`, an
//! in-memory folder of files for slides of several files, and the checks every target runs.
//!
//! Targets and inputs (`fuzz/README.md` tells how seeds are made):
//! * `mirax_ini`, `mirax_index`, `dicom_header`: a [`Bundle`] of files (a MIRAX slide: its
//!   `.mrxs`, `Slidedat.ini`, `Index.dat` and data files; a DICOM series: its instances), opened
//!   from memory through [`MemFiles`] by the whole driver ([`open_bundle`]). The targets' custom
//!   mutators change one member only ([`mutate_member`]): the key file, the index file, or a
//!   DICOM instance's header and offset table.
//! * `vendor_xml`: a [`Bundle`] of XML texts named `ifd<N>.<tag>.xml` and, last, a TIFF
//!   template: [`splice_xml`] stores each text as tag `<tag>` of IFD `N` (ImageDescription 270
//!   for Philips, Leica and OME-TIFF, and the `key=value` descriptions of Trestle and Huron;
//!   XMLPacket 700 for Ventana; tag 65000 for ARGOS) and the result is opened from memory by
//!   its driver.
//! * `ndpi_tags`: an NDPI file, opened from memory.
//! * `vsi_ets`: a [`Bundle`] of an Olympus `.vsi` and its `_<name>_/stack<id>/frame_t*.ets`,
//!   opened from memory through [`MemFiles`] as the bundles above; its mutator changes one of
//!   the two files.
//! * `czi_segments`: a Zeiss CZI file, opened from memory (its channels read too).
//!
//! [`run`] is what each target does with an input, and what `core/tests/corrupt.rs` does with
//! a saved input (files named `*.<target>`): open, read properties, regions of every level and
//! every associated image; every outcome must be pixels of the requested size or a typed error.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Location, Result};
use crate::format::SiblingFiles;
use crate::io::{ByteSource, MemSource};
use crate::{Config, Slide, SlideOptions, TileCache};

/// Magic of a [`Bundle`] input.
pub const BUNDLE_MAGIC: &[u8; 5] = b"SSFB\x01";
/// Folder the members of a bundle are placed in (paths in error messages start with it).
const ROOT: &str = "fuzz";

/// Several named files in one fuzz input: [`BUNDLE_MAGIC`], then per member a name length
/// (u8), the name (UTF-8, a relative path with `/`), a data length (u32 LE) and the data. A
/// member whose data runs past the input is cut at its end; a truncated header ends the list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bundle {
    /// (name, bytes) in input order; the first is the file opened.
    pub members: Vec<(String, Vec<u8>)>,
}

impl Bundle {
    /// Decode `data`; `None` when it does not start with [`BUNDLE_MAGIC`] or holds no member.
    pub fn decode(data: &[u8]) -> Option<Bundle> {
        let mut rest = data.strip_prefix(BUNDLE_MAGIC.as_slice())?;
        let mut members = Vec::new();
        while let Some((&n, r)) = rest.split_first() {
            let n = n as usize;
            if r.len() < n + 4 {
                break;
            }
            let name = String::from_utf8_lossy(&r[..n]).into_owned();
            let len = u32::from_le_bytes([r[n], r[n + 1], r[n + 2], r[n + 3]]) as usize;
            let body = &r[n + 4..];
            let take = len.min(body.len());
            members.push((name, body[..take].to_vec()));
            rest = &body[take..];
        }
        (!members.is_empty()).then_some(Bundle { members })
    }

    /// The input that [`decode`](Self::decode)s to `self` (names longer than 255 bytes cut).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = BUNDLE_MAGIC.to_vec();
        for (name, data) in &self.members {
            let name = &name.as_bytes()[..name.len().min(255)];
            out.push(name.len() as u8);
            out.extend_from_slice(name);
            out.extend_from_slice(&(data.len().min(u32::MAX as usize) as u32).to_le_bytes());
            out.extend_from_slice(&data[..data.len().min(u32::MAX as usize)]);
        }
        out
    }
}

/// A folder of files held in memory: the [`SiblingFiles`] of a slide opened from a
/// [`Bundle`]. Paths are `fuzz/<member name>`.
#[derive(Debug, Clone)]
pub struct MemFiles {
    path: PathBuf,
    files: Arc<BTreeMap<PathBuf, Arc<[u8]>>>,
}

impl MemFiles {
    /// The files of `b`; the first member is the opened one. A later member of the same name
    /// replaces an earlier one.
    pub fn new(b: &Bundle) -> MemFiles {
        let files: BTreeMap<PathBuf, Arc<[u8]>> = b.members.iter().map(|(n, d)| (Path::new(ROOT).join(n), Arc::from(d.as_slice()))).collect();
        MemFiles { path: Path::new(ROOT).join(&b.members[0].0), files: Arc::new(files) }
    }

    fn get(&self, path: &Path) -> std::io::Result<Arc<[u8]>> {
        self.files.get(path).cloned().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file in the bundle"))
    }
}

impl SiblingFiles for MemFiles {
    fn path(&self) -> &Path {
        &self.path
    }

    fn list_dir(&self) -> Result<Vec<PathBuf>> {
        let dir = self.path.parent();
        Ok(self.files.keys().filter(|p| p.parent() == dir).cloned().collect())
    }

    fn open(&self, path: &Path) -> Result<Box<dyn ByteSource>> {
        let d = self.get(path).map_err(|e| Error::io(&Location::file(path), e))?;
        Ok(Box::new(MemSource::new(d)))
    }

    fn examine(&self, path: &Path) -> Result<(u64, Option<crate::index::FileIdentity>)> {
        let d = self.get(path).map_err(|e| Error::io(&Location::file(path), e))?;
        Ok((d.len() as u64, None))
    }

    fn opener(&self) -> Option<crate::io::multi::Opener> {
        let me = self.clone();
        Some(Arc::new(move |p: &Path| me.get(p).map(|d| Box::new(MemSource::new(d)) as Box<dyn ByteSource>)))
    }
}

/// Options of a fuzzed slide: a small private cache and region limit.
fn options() -> SlideOptions {
    let config = Config { max_region_bytes: 64 << 20, ..Config::default() };
    SlideOptions { cache: Some(Arc::new(TileCache::new(4 << 20))), config: Some(config), ..Default::default() }
}

/// Open the slide of bundle `b` (its first member) with every member beside it.
///
/// # Errors
/// As [`Slide::open`].
pub fn open_bundle(b: &Bundle) -> Result<Slide> {
    let files = MemFiles::new(b);
    let src = MemSource::new(Arc::<[u8]>::from(b.members[0].1.as_slice()));
    Slide::from_files(Box::new(src), &files, options())
}

/// Store each XML member (`ifd<N>.<tag>.xml`) of `b` as tag `tag` of IFD `N` (of the main
/// chain) of the last member, a TIFF or BigTIFF: the text and a NUL are appended to the file
/// and the existing entry pointed at them (its type kept, its count the text's length + 1).
/// `None` when the last member is not a TIFF holding those entries or a name does not parse.
pub fn splice_xml(b: &Bundle) -> Option<Vec<u8>> {
    let (_, tiff) = b.members.last()?;
    let mut out = tiff.clone();
    let (le, big) = match out.get(..4)? {
        b"II*\0" => (true, false),
        b"MM\0*" => (false, false),
        b"II+\0" => (true, true),
        b"MM\0+" => (false, true),
        _ => return None,
    };
    // Unsigned integer of `n` bytes at `o`.
    let uint = |d: &[u8], o: usize, n: usize| -> Option<u64> {
        let s = d.get(o..o.checked_add(n)?)?;
        Some(if le { s.iter().rev().fold(0, |v, &x| v << 8 | x as u64) } else { s.iter().fold(0, |v, &x| v << 8 | x as u64) })
    };
    let put = |d: &mut [u8], o: usize, n: usize, v: u64| {
        let bytes = if le { v.to_le_bytes() } else { v.to_be_bytes() };
        d[o..o + n].copy_from_slice(if le { &bytes[..n] } else { &bytes[8 - n..] });
    };
    // Sizes: offset word, entry count, entry.
    let (word, count_len, entry_len) = if big { (8, 8, 20) } else { (4, 2, 12) };
    for (name, text) in &b.members[..b.members.len() - 1] {
        let mut parts = name.strip_suffix(".xml")?.split('.');
        let ifd: usize = parts.next()?.strip_prefix("ifd")?.parse().ok()?;
        let tag: u64 = parts.next()?.parse().ok()?;
        // IFD `ifd` by the chain (at most 64 steps).
        let mut pos = uint(&out, if big { 8 } else { 4 }, word)? as usize;
        for _ in 0..ifd.min(64) {
            let n = uint(&out, pos, count_len)? as usize;
            pos = uint(&out, pos.checked_add(count_len + entry_len * n)?, word)? as usize;
        }
        let n = uint(&out, pos, count_len)? as usize;
        let entry = (0..n.min(4096)).map(|k| pos + count_len + entry_len * k).find(|&e| uint(&out, e, 2) == Some(tag))?;
        let at = out.len().next_multiple_of(2);
        let count = (text.len() + 1) as u64;
        if !big && (u32::try_from(count).is_err() || u32::try_from(at).is_err()) {
            return None;
        }
        out.resize(at, 0);
        out.extend_from_slice(text);
        out.push(0);
        put(&mut out, entry + 4, word, count);
        put(&mut out, entry + 4 + word, word, at as u64);
    }
    Some(out)
}

/// The byte range of a DICOM instance that its target mutates: everything up to 8 KiB past
/// the last PixelData tag (the header, the offset tables and the first fragment items), the
/// whole file when no PixelData tag is found.
pub fn dicom_header_range(data: &[u8]) -> Range<usize> {
    let tag = [0xE0, 0x7F, 0x10, 0x00];
    let end = data.windows(4).rposition(|w| w == tag).map_or(data.len(), |p| (p + 8192).min(data.len()));
    0..end
}

/// A custom mutator's work on a [`Bundle`] input: mutate, with `mutate` (libFuzzer's
/// `fuzzer_mutate(buf, size, max_size) -> new size`), the `window` of one member chosen by
/// `pick` (among those it accepts, by `seed`), and write the re-encoded bundle to
/// `data[..returned]`. Inputs that are not bundles, and bundles without a member `pick`
/// accepts, are mutated whole.
pub fn mutate_member(
    data: &mut [u8],
    size: usize,
    max_size: usize,
    seed: u32,
    pick: impl Fn(&str) -> bool,
    window: impl Fn(&[u8]) -> Range<usize>,
    mut mutate: impl FnMut(&mut [u8], usize, usize) -> usize,
) -> usize {
    let whole = |data: &mut [u8], mutate: &mut dyn FnMut(&mut [u8], usize, usize) -> usize| mutate(data, size, max_size);
    let Some(mut b) = Bundle::decode(&data[..size]) else { return whole(data, &mut mutate) };
    let chosen: Vec<usize> = (0..b.members.len()).filter(|&i| pick(&b.members[i].0)).collect();
    if chosen.is_empty() {
        return whole(data, &mut mutate);
    }
    let i = chosen[seed as usize % chosen.len()];
    let member = &mut b.members[i].1;
    let r = window(member);
    let room = max_size.saturating_sub(size);
    let mut buf = member[r.clone()].to_vec();
    let len = buf.len();
    buf.resize(len + room.min(64 << 10), 0);
    let cap = buf.len();
    let n = mutate(&mut buf, len, cap);
    buf.truncate(n);
    member.splice(r, buf);
    let out = b.encode();
    if out.len() > max_size {
        return whole(data, &mut mutate);
    }
    data[..out.len()].copy_from_slice(&out);
    out.len()
}

/// Read what a user would from `s`: properties, regions of every level (a corner, the centre,
/// one partly outside) and every associated image. Pixels must have the requested size.
fn exercise(s: &Slide) -> (usize, usize) {
    let _ = s.properties().len();
    let (mut ok, mut failed) = (0, 0);
    let mut tally = |r: Result<()>| match r {
        Ok(()) => ok += 1,
        Err(_) => failed += 1,
    };
    let downsamples = s.level_downsamples();
    for (level, (w, h)) in s.level_dimensions().into_iter().enumerate() {
        let ds = downsamples[level];
        for (x, y, rw, rh) in [(0i64, 0i64, 64u64, 64u64), (w as i64 / 2, h as i64 / 2, 200, 150), (-10, -10, 20, 20)] {
            let loc = ((x as f64 * ds) as i64, (y as f64 * ds) as i64);
            tally(s.read_region(loc, level, (rw, rh)).map(|r| assert_eq!(r.data.len() as u64, rw * rh * 4, "region size")));
        }
    }
    for name in s.associated_images().keys() {
        tally(s.read_associated(name).map(|r| assert_eq!(r.data.len() as u64, r.width * r.height * 4, "associated image size")));
    }
    (ok, failed)
}

/// Run fuzz target `target` on `data` (see the module docs); returns a one-line summary.
/// Panics when a read returns pixels of the wrong size (a broken contract); the caller checks
/// that nothing else panics.
///
/// # Errors
/// The open's error (a typed error is a correct outcome for a fuzzed input).
pub fn run(target: &str, data: &[u8]) -> Result<String> {
    let slide = match target {
        "ndpi_tags" => Slide::from_source("fuzz.ndpi", Box::new(MemSource::new(data.to_vec())), options())?,
        "czi_segments" => {
            let s = Slide::from_source("fuzz.czi", Box::new(MemSource::new(data.to_vec())), options())?;
            let r = s.read_region_channels((0, 0), 0, (64, 64), None);
            if let Ok(c) = &r {
                let n = match &c.data {
                    crate::Samples::U8(v) => v.len(),
                    crate::Samples::U16(v) => v.len(),
                };
                assert_eq!(n, 64 * 64 * c.channels(), "channel region size");
            }
            s
        }
        "vendor_xml" => {
            let Some(tiff) = Bundle::decode(data).and_then(|b| splice_xml(&b)) else { return Ok("not a vendor_xml input".into()) };
            Slide::from_source("fuzz.tiff", Box::new(MemSource::new(tiff)), options())?
        }
        _ => {
            let b = Bundle::decode(data).unwrap_or_else(|| Bundle { members: vec![("fuzz.dcm".into(), data.to_vec())] });
            open_bundle(&b)?
        }
    };
    let (ok, failed) = exercise(&slide);
    Ok(format!("{} ({} levels): {ok} reads ok, {failed} typed errors", slide.vendor(), slide.level_count()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_round_trip_and_cut_short_members() {
        let b = Bundle { members: vec![("a.mrxs".into(), vec![]), ("a/Slidedat.ini".into(), b"[GENERAL]\n".to_vec())] };
        let e = b.encode();
        assert_eq!(Bundle::decode(&e), Some(b));
        let cut = Bundle::decode(&e[..e.len() - 3]).unwrap();
        assert_eq!(cut.members[1].1, b"[GENERA".to_vec());
        assert_eq!(Bundle::decode(b"SSFB\x01"), None);
        assert_eq!(Bundle::decode(b"II*\0"), None);
    }

    #[test]
    fn the_mutator_changes_only_the_chosen_member() {
        let b = Bundle { members: vec![("x.mrxs".into(), vec![]), ("x/Slidedat.ini".into(), b"[A]\nK=1\n".to_vec()), ("x/Index.dat".into(), vec![7; 10])] };
        let e = b.encode();
        let mut data = e.clone();
        data.resize(4096, 0);
        let n = mutate_member(
            &mut data,
            e.len(),
            4096,
            3,
            |n| n.ends_with("Index.dat"),
            |d| 2..d.len(),
            |buf, size, _| {
                buf[..size].iter_mut().for_each(|v| *v = 1);
                size + 1
            },
        );
        let got = Bundle::decode(&data[..n]).unwrap();
        assert_eq!(got.members[1], b.members[1]);
        assert_eq!(got.members[2].1, vec![7, 7, 1, 1, 1, 1, 1, 1, 1, 1, 0], "the window mutated and grown by one byte");
    }

    #[test]
    fn xml_is_spliced_into_the_named_entry() {
        // A little-endian TIFF: header, one IFD of one entry (ImageDescription, inline "ab").
        let mut t = b"II*\0\x08\0\0\0\x01\0".to_vec();
        t.extend_from_slice(&[0x0E, 0x01, 2, 0, 3, 0, 0, 0, b'a', b'b', 0, 0, 0, 0, 0, 0]);
        let b = Bundle { members: vec![("ifd0.270.xml".into(), b"<x/>".to_vec()), ("t.tif".into(), t.clone())] };
        let out = splice_xml(&b).unwrap();
        assert_eq!(&out[t.len()..], b"<x/>\0");
        assert_eq!(&out[14..22], &[5, 0, 0, 0, t.len() as u8, 0, 0, 0]);
        // The same in a BigTIFF (8-byte counts and offsets, 20-byte entries).
        let mut big = b"II+\0\x08\0\0\0\x10\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0".to_vec();
        big.extend_from_slice(&[0x0E, 0x01, 2, 0, 3, 0, 0, 0, 0, 0, 0, 0, b'a', b'b', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let out = splice_xml(&Bundle { members: vec![("ifd0.270.xml".into(), b"<x/>".to_vec()), ("t.tif".into(), big.clone())] }).unwrap();
        assert_eq!(&out[big.len()..], b"<x/>\0");
        assert_eq!(&out[28..44], &[5, 0, 0, 0, 0, 0, 0, 0, big.len() as u8, 0, 0, 0, 0, 0, 0, 0]);
        let missing = Bundle { members: vec![("ifd0.700.xml".into(), b"<x/>".to_vec()), ("t.tif".into(), t)] };
        assert_eq!(splice_xml(&missing), None);
    }
}
