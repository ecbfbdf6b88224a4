//! SubIFDs (TIFF tag 330, Adobe's "TIFF Technical Note 1"): directories that hang off an IFD
//! of the main chain instead of being linked into it. OME-TIFF stores the reduced-resolution
//! levels of each plane there (OME-TIFF specification, "sub-resolutions").
//!
//! Read on request ([`TiffFile::sub_ifds`]), not by [`TiffFile::parse`]: OpenSlide 4.0.1's
//! drivers walk only the main chain (libtiff's `TIFFReadDirectory`), so a damaged SubIFD must
//! not stop a file OpenSlide opens from opening. The checks are the main chain's, over the
//! whole tree: a SubIFD offset that repeats any directory already read (main chain or SubIFD)
//! is a cycle, all directories of the tree count against [`MAX_IFDS`], and the tree's
//! directories and out-of-line values share the main chain's budget of twice the file size.
//!
//! Read: the SubIFDs of every main-chain IFD: a tag of one offset is the head of a SubIFD
//! chain followed along its next-IFD links (TN1); a tag of several offsets lists every SubIFD
//! (their next links, which writers such as tifffile also set, are not followed). SubIFDs of SubIFDs are not read (no slide format uses them).

use std::collections::HashSet;

use super::{tags, type_size, Data, Ifd, TiffFile, MAX_IFDS, STRUCTURE_BUDGET_FACTOR};
use crate::error::{Error, Location, Result};
use crate::io::ByteSource;

/// The SubIFDs of a file: for each main-chain IFD (same index as [`TiffFile::ifds`]) its
/// SubIFDs in tag order (each followed by its next-IFD chain).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SubIfds {
    /// `children[i]`: the SubIFDs of main-chain IFD `i` (empty without tag 330).
    pub children: Vec<Vec<Ifd>>,
}

impl SubIfds {
    /// `true` when no main-chain IFD has a SubIFD.
    pub fn is_empty(&self) -> bool {
        self.children.iter().all(Vec::is_empty)
    }
}

impl TiffFile {
    /// Bytes the main chain's directories and out-of-line values occupy (what
    /// [`TiffFile::parse`] charged; entries of unknown field types are not counted).
    fn main_chain_bytes(&self) -> u64 {
        let (count_size, entry_size, next_size) = if self.bigtiff { (8, 20, 8) } else { (2, 12, 4) };
        let inline_cap = if self.bigtiff { 8 } else { 4 };
        let mut total = 0u64;
        for ifd in &self.ifds {
            total = total.saturating_add(count_size + ifd.entries.len() as u64 * entry_size + next_size);
            for e in ifd.entries.values() {
                let len = e.count.saturating_mul(type_size(e.field_type).unwrap_or(1));
                if let Data::At(off) = e.data {
                    if len > inline_cap {
                        total = total.saturating_add(len.min(self.file_len.saturating_sub(off)));
                    }
                }
            }
        }
        total
    }

    /// Read the SubIFDs (tag 330) of every IFD of the main chain.
    ///
    /// # Errors
    /// [`Error::Format`] for a SubIFD offset outside the file, a cycle (a SubIFD offset equal
    /// to a directory already read, in the main chain or the tree) or a SubIFDs tag that is not
    /// an offset array; [`Error::Limits`] for more than [`MAX_IFDS`] directories in the whole
    /// tree or a tree whose directories and values claim more than twice the file size.
    pub fn sub_ifds(&self, src: &dyn ByteSource, at: &Location) -> Result<SubIfds> {
        let mut seen: HashSet<u64> = self.ifds.iter().map(|i| i.offset).collect();
        let mut budget = self.file_len.saturating_mul(STRUCTURE_BUDGET_FACTOR).saturating_sub(self.main_chain_bytes());
        let mut total = self.ifds.len();
        let mut out = SubIfds { children: Vec::with_capacity(self.ifds.len()) };
        for (i, ifd) in self.ifds.iter().enumerate() {
            let mut kids = Vec::new();
            if let Some(e) = ifd.get(tags::SUB_IFDS) {
                if !matches!(e.field_type, 4 | 13 | 16 | 18) {
                    return Err(Error::format(at, format!("IFD {i}: SubIFDs tag of field type {}", e.field_type)));
                }
                let firsts = self.uints(src, at, e)?;
                // One offset: the head of a SubIFD chain (TN1); several: each is one SubIFD
                // (writers such as tifffile also link them, so their next links are not followed).
                let chain = firsts.len() == 1;
                for first in firsts {
                    let mut next = first;
                    while next != 0 {
                        if !seen.insert(next) {
                            return Err(Error::format(
                                at,
                                format!("IFD {i}: SubIFD at offset {next} repeats a directory already read (cycle)"),
                            ));
                        }
                        total += 1;
                        if total > MAX_IFDS {
                            return Err(Error::limits(at, format!("more than {MAX_IFDS} IFDs in the directory tree")));
                        }
                        if next >= self.file_len {
                            return Err(Error::format(
                                at,
                                format!("IFD {i}: SubIFD offset {next} lies past the end of the file ({} bytes)", self.file_len),
                            ));
                        }
                        let (sub, n) = self.read_ifd(src, at, next, &mut budget)?;
                        kids.push(sub);
                        next = if chain { n } else { 0 };
                    }
                }
            }
            out.children.push(kids);
        }
        Ok(out)
    }

    /// A copy of this file whose [`ifds`](TiffFile::ifds) are the main chain followed by every
    /// SubIFD of `subs` (main IFD 0's first), and for each main-chain IFD the indices of its
    /// SubIFDs in that list: lets the index-based helpers read SubIFDs like any IFD.
    pub fn with_sub_ifds(&self, subs: &SubIfds) -> (TiffFile, Vec<Vec<usize>>) {
        let mut flat = self.clone();
        let mut children = Vec::with_capacity(subs.children.len());
        for kids in &subs.children {
            let mut idx = Vec::with_capacity(kids.len());
            for k in kids {
                idx.push(flat.ifds.len());
                flat.ifds.push(k.clone());
            }
            children.push(idx);
        }
        (flat, children)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::MemSource;

    /// A little-endian TIFF: IFD 0 at 8 with a SubIFDs entry (LONG, `offsets`, stored out of
    /// line when more than one), then `subs` empty-ish IFDs (one ImageWidth entry each) at
    /// 26 + 18k, each linking to `next[k]`.
    fn file(offsets: &[u32], next: &[u32]) -> Vec<u8> {
        let mut v = b"II*\0".to_vec();
        v.extend_from_slice(&8u32.to_le_bytes());
        v.extend_from_slice(&1u16.to_le_bytes()); // IFD 0: 1 entry, at 8..26
        v.extend_from_slice(&330u16.to_le_bytes());
        v.extend_from_slice(&4u16.to_le_bytes());
        v.extend_from_slice(&(offsets.len() as u32).to_le_bytes());
        let arr_at = 26 + 18 * next.len() as u32;
        v.extend_from_slice(&if offsets.len() == 1 { offsets[0] } else { arr_at }.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        for &n in next {
            v.extend_from_slice(&1u16.to_le_bytes());
            v.extend_from_slice(&256u16.to_le_bytes());
            v.extend_from_slice(&3u16.to_le_bytes());
            v.extend_from_slice(&1u32.to_le_bytes());
            v.extend_from_slice(&[16, 0, 0, 0]);
            v.extend_from_slice(&n.to_le_bytes());
        }
        if offsets.len() > 1 {
            for &o in offsets {
                v.extend_from_slice(&o.to_le_bytes());
            }
        }
        v
    }

    fn subs(v: Vec<u8>) -> Result<SubIfds> {
        let src = MemSource::new(v);
        let at = Location::file("s.tif");
        let tf = TiffFile::parse(&src, &at)?;
        tf.sub_ifds(&src, &at)
    }

    #[test]
    fn a_list_and_a_chain_of_subifds_are_read() {
        let s = subs(file(&[26, 44], &[44, 0])).unwrap();
        assert_eq!(s.children[0].iter().map(|i| i.offset).collect::<Vec<_>>(), [26, 44]);
        let s = subs(file(&[26], &[44, 0])).unwrap();
        assert_eq!(s.children[0].iter().map(|i| i.offset).collect::<Vec<_>>(), [26, 44]);
        let (flat, kids) = TiffFile::parse(&MemSource::new(file(&[26], &[0])), &Location::file("s")).unwrap().with_sub_ifds(&s);
        assert_eq!((flat.ifds.len(), kids), (3, vec![vec![1, 2]]));
    }

    #[test]
    fn cycles_and_offsets_outside_the_file_are_format_errors() {
        for (offsets, next) in [(&[8u32][..], &[0u32][..]), (&[26], &[26]), (&[26, 26], &[0]), (&[26], &[8]), (&[9999], &[0]), (&[26], &[9999])] {
            let e = subs(file(offsets, next)).unwrap_err();
            assert!(matches!(e, Error::Format { .. }), "{offsets:?} {next:?}: {e}");
        }
    }
}
