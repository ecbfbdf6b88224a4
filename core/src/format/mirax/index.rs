//! `Index.dat`: where every image of a MIRAX slide is, as OpenSlide 4.0.1's MIRAX driver reads
//! it (`openslide-vendor-mirax.c`: `process_indexfile`, `process_hier_data_pages_from_indexfile`,
//! `read_nonhier_record`). All numbers are little-endian `int32`.
//!
//! * `"01.02"` then the `SLIDE_ID` of `Slidedat.ini` (no terminator); at `root = 5 + len(id)` a
//!   pointer to the hierarchical table, at `root + 4` one to the non-hierarchical table.
//! * Hierarchical table: a pointer per zoom level to a list head `[0][first page]`; a page is
//!   `[count][next page, 0 = last]` and `count` records `[image index][offset][length][file]`.
//! * Non-hierarchical table: a pointer per record number to `[0][page]`; the page is
//!   `[1][ignored][0][0][offset][length][file]`.
//!
//! Every pointer is checked to lie inside the file before it is followed, a page's records
//! must fit in the file, and a page chain that comes back to a page is refused (OpenSlide would
//! loop for ever). The pages read (all zoom levels together) may claim at most the file's size:
//! pages of a real file are disjoint, and overlapping ones would let a small file name millions
//! of records (a 262 KB Index.dat of 16,384 overlapping pages: 134 M records, 2 GB).

use std::collections::HashSet;

/// Index.dat's version string (OpenSlide's `INDEX_VERSION`).
const VERSION: &[u8] = b"01.02";

/// One hierarchical record: an image of a zoom level, as stored (signed: checked by the caller
/// as OpenSlide checks them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HierRecord {
    /// `y × IMAGENUMBER_X + x` in level-0 image units.
    pub image_index: i32,
    /// Offset of the image in its data file.
    pub offset: i32,
    /// Length of the image in bytes.
    pub length: i32,
    /// Data file number (`FILE_<n>` of `[DATAFILE]`).
    pub fileno: i32,
}

/// A non-hierarchical record (position buffer, associated image): a byte range of a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NonHierRecord {
    /// Offset in the data file.
    pub offset: i32,
    /// Length in bytes.
    pub length: i32,
    /// Data file number.
    pub fileno: i32,
}

/// The bytes of Index.dat, checked to start with the version and the slide's id.
#[derive(Debug)]
pub struct IndexDat {
    data: Vec<u8>,
    root: usize,
    /// Bytes claimed by the hierarchical pages read so far (headers and records).
    claimed: std::cell::Cell<u64>,
}

impl IndexDat {
    /// Check the header of `data` against `slide_id`.
    ///
    /// # Errors
    /// A message when the version or the slide identifier does not match.
    pub fn new(data: Vec<u8>, slide_id: &str) -> Result<IndexDat, String> {
        if !data.starts_with(VERSION) {
            return Err("Index.dat doesn't have expected version (01.02)".into());
        }
        let id = slide_id.as_bytes();
        if data.get(VERSION.len()..VERSION.len() + id.len()) != Some(id) {
            return Err("Index.dat doesn't have a matching slide identifier".into());
        }
        Ok(IndexDat { data, root: VERSION.len() + id.len(), claimed: std::cell::Cell::new(0) })
    }

    fn i32_at(&self, pos: i64, what: &str) -> Result<i32, String> {
        let p = usize::try_from(pos).ok().filter(|&p| p.checked_add(4).is_some_and(|e| e <= self.data.len()));
        let p = p.ok_or_else(|| format!("Index.dat: {what} at {pos} lies outside the file ({} bytes)", self.data.len()))?;
        Ok(i32::from_le_bytes([self.data[p], self.data[p + 1], self.data[p + 2], self.data[p + 3]]))
    }

    /// The records of zoom level `level`, in file order (pages in chain order).
    ///
    /// # Errors
    /// A message for a pointer outside the file, a list head not starting with 0, a page whose
    /// records run past the end, a page chain that loops, or pages (of all the levels read)
    /// claiming more bytes than the file holds.
    pub fn hier_records(&self, level: usize) -> Result<Vec<HierRecord>, String> {
        let table = self.i32_at(self.root as i64, "the hierarchical table pointer")?;
        let head = self.i32_at(table as i64 + 4 * level as i64, &format!("zoom level {level}'s pointer"))?;
        if self.i32_at(head as i64, "a data page list")? != 0 {
            return Err(format!("Index.dat: expected 0 at the start of zoom level {level}'s data pages"));
        }
        let mut page = self.i32_at(head as i64 + 4, "the initial data page pointer")? as i64;
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        loop {
            if !seen.insert(page) {
                return Err(format!("Index.dat: zoom level {level}'s data pages loop (page at {page} seen twice)"));
            }
            let count = self.i32_at(page, "a page length")?;
            let next = self.i32_at(page + 4, "a \"next\" pointer")?;
            let n = count.max(0) as i64;
            if page + 8 + 16 * n > self.data.len() as i64 {
                return Err(format!("Index.dat: a page of {count} records at {page} runs past the end of the file"));
            }
            let claimed = self.claimed.get() + 8 + 16 * n as u64;
            if claimed > self.data.len() as u64 {
                return Err(format!(
                    "Index.dat: zoom level {level}'s page at {page} makes the data pages claim {claimed} bytes of a {}-byte file (pages overlap)",
                    self.data.len()
                ));
            }
            self.claimed.set(claimed);
            for i in 0..n {
                let at = page + 8 + 16 * i;
                let f = |k: i64| self.i32_at(at + 4 * k, "a record");
                out.push(HierRecord { image_index: f(0)?, offset: f(1)?, length: f(2)?, fileno: f(3)? });
            }
            if next == 0 {
                return Ok(out);
            }
            page = next as i64;
        }
    }

    /// Non-hierarchical record `recordno`.
    ///
    /// # Errors
    /// A message for a pointer outside the file or a page not laid out as the module docs say.
    pub fn nonhier_record(&self, recordno: usize) -> Result<NonHierRecord, String> {
        let table = self.i32_at(self.root as i64 + 4, "the nonhier table pointer")?;
        let rec = self.i32_at(table as i64 + 4 * recordno as i64, &format!("nonhier record {recordno}'s pointer"))? as i64;
        if self.i32_at(rec, "a nonhier record")? != 0 {
            return Err(format!("Index.dat: expected 0 at the start of nonhier record {recordno}"));
        }
        let page = self.i32_at(rec + 4, "a nonhier data page pointer")? as i64;
        let v = |k: i64| self.i32_at(page + 4 * k, "a nonhier data page");
        if v(0)? != 1 {
            return Err(format!("Index.dat: nonhier record {recordno}'s page does not start with 1"));
        }
        if v(2)? != 0 || v(3)? != 0 {
            return Err(format!("Index.dat: nonhier record {recordno}'s page lacks its two 0 values"));
        }
        Ok(NonHierRecord { offset: v(4)?, length: v(5)?, fileno: v(6)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// "01.02" + "ID" (root 7): hier table at 15 → level 0 head at 19 → page at 27 with one
    /// record, next → page at 51 with one record; nonhier table at 75 → record at 79 → page 87.
    fn index() -> Vec<u8> {
        let mut d = b"01.02ID".to_vec();
        d.extend(i32s(&[15, 75])); // 7, 11
        d.extend(i32s(&[19])); // 15
        d.extend(i32s(&[0, 27])); // 19
        d.extend(i32s(&[1, 51, 3, 100, 10, 1])); // 27
        d.extend(i32s(&[1, 0, 4, 200, 20, 0])); // 51
        d.extend(i32s(&[79])); // 75
        d.extend(i32s(&[0, 87])); // 79
        d.extend(i32s(&[1, 1253, 0, 0, 300, 30, 1])); // 87
        d
    }

    #[test]
    fn pages_chain_and_nonhier_records_read() {
        let ix = IndexDat::new(index(), "ID").unwrap();
        let r = ix.hier_records(0).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1], HierRecord { image_index: 4, offset: 200, length: 20, fileno: 0 });
        assert_eq!(ix.nonhier_record(0).unwrap(), NonHierRecord { offset: 300, length: 30, fileno: 1 });
        assert!(ix.hier_records(1).is_err(), "no pointer for level 1 inside the file");
    }

    #[test]
    fn overlapping_pages_are_refused() {
        // 256 pages 8 bytes apart from 27 on, each claiming the 127 records that fit after it
        // (overlapping the pages after it): 32,512 records from a 4 KB file.
        let (m, c) = (256, 127);
        let mut d = b"01.02ID".to_vec();
        d.extend(i32s(&[15, 0])); // 7: hier table at 15
        d.extend(i32s(&[19])); // 15: level 0's head at 19
        d.extend(i32s(&[0, 27])); // 19: first page at 27
        for k in 0..m {
            d.extend(i32s(&[c, if k + 1 < m { 27 + 8 * (k + 1) } else { 0 }]));
        }
        d.resize((27 + 8 * (m - 1) + 8 + 16 * c) as usize, 0);
        let e = IndexDat::new(d, "ID").unwrap().hier_records(0).unwrap_err();
        assert!(e.contains("pages overlap"), "{e}");
        // Disjoint pages are read.
        let ix = IndexDat::new(index(), "ID").unwrap();
        assert_eq!(ix.hier_records(0).unwrap().len(), 2);
    }

    #[test]
    fn bad_indexes_are_refused() {
        assert!(IndexDat::new(index(), "IX").unwrap_err().contains("identifier"));
        let mut v = index();
        v[0] = b'9';
        assert!(IndexDat::new(v, "ID").unwrap_err().contains("version"));
        let with = |at: usize, x: i32| {
            let mut v = index();
            v[at..at + 4].copy_from_slice(&x.to_le_bytes());
            IndexDat::new(v, "ID").unwrap()
        };
        assert!(with(31, 27).hier_records(0).unwrap_err().contains("loop"));
        assert!(with(7, 1 << 30).hier_records(0).unwrap_err().contains("outside"));
        assert!(with(7, -4).hier_records(0).unwrap_err().contains("outside"));
        assert!(with(27, 1_000_000).hier_records(0).unwrap_err().contains("past the end"));
        assert!(with(19, 5).hier_records(0).unwrap_err().contains("expected 0"));

        assert!(with(87, 2).nonhier_record(0).unwrap_err().contains("start with 1"));
        assert!(with(95, 1).nonhier_record(0).unwrap_err().contains("0 values"));
        assert!(with(75, 5000).nonhier_record(0).unwrap_err().contains("outside"));
    }
}
