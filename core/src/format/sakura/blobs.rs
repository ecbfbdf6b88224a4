//! [`BlobSource`]: a Sakura slide's blobs as one positional byte source. SQLite keeps a blob
//! in its row's cell and a chain of overflow pages, so a tile is no byte range of the file;
//! the source lays the blobs the index needs end to end in a virtual address range, one
//! record per blob, and reads a range by fetching the blobs it covers through SQL. The slide
//! reads it as an extra source of its [`crate::io::multi::SourceSet`], so the tile index,
//! read plans, caches and decoders work as for a file.

use std::io;

use super::db::{first_blob, Db};
use crate::error::Location;
use crate::io::ByteSource;

/// How a record's blob is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BlobKey {
    /// The `data` of the unique table's row with this rowid.
    Row(i64),
    /// The first row's first column of this query (an associated image).
    Query(&'static str),
    /// No blob: the bytes of an empty blob that must fail to decode (two zero bytes), as
    /// OpenSlide's decode of an empty blob fails.
    Empty,
}

/// One blob's place in the virtual address range.
#[derive(Debug, Clone)]
struct Record {
    start: u64,
    len: u64,
    key: BlobKey,
}

/// A Sakura database's blobs laid end to end (module docs).
#[derive(Debug)]
pub(crate) struct BlobSource {
    db: Db,
    /// `SELECT CAST(data AS BLOB) FROM <unique table> WHERE rowid = ?1`.
    row_sql: String,
    records: Vec<Record>,
    len: u64,
    at: Location,
}

/// Records a [`BlobSource`] will hold, built at open.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    records: Vec<Record>,
    len: u64,
}

impl Layout {
    /// Add a blob of `len` bytes; returns its virtual offset (an empty blob gets the shared
    /// two-byte [`BlobKey::Empty`] record).
    pub fn push(&mut self, key: BlobKey, len: u64) -> (u64, u64) {
        let (key, len) = if len == 0 { (BlobKey::Empty, 2) } else { (key, len) };
        if key == BlobKey::Empty {
            if let Some(r) = self.records.iter().find(|r| r.key == BlobKey::Empty) {
                return (r.start, r.len);
            }
        }
        let start = self.len;
        self.records.push(Record { start, len, key });
        self.len += len;
        (start, len)
    }
}

impl BlobSource {
    /// The source over `db` (its unique table quoted as `table_sql`) holding `layout`'s
    /// records; errors name `at`.
    pub fn new(db: Db, table_sql: &str, layout: Layout, at: Location) -> BlobSource {
        BlobSource { db, row_sql: format!("SELECT CAST(data AS BLOB) FROM {table_sql} WHERE rowid = ?1"), records: layout.records, len: layout.len, at }
    }

    /// The bytes of `r`'s blob, checked against its recorded length.
    fn fetch(&self, r: &Record) -> io::Result<Vec<u8>> {
        let got = self
            .db
            .with(&self.at, |c| {
                let b = match &r.key {
                    BlobKey::Row(id) => first_blob(c, &self.row_sql, [id]),
                    BlobKey::Query(sql) => first_blob(c, sql, []),
                    BlobKey::Empty => return Ok(Some(vec![0u8; r.len as usize])),
                };
                b.map_err(|e| crate::Error::format(&self.at, format!("SQLite: {e}")))
            })
            .map_err(io::Error::other)?;
        match got {
            Some(b) if b.len() as u64 == r.len => Ok(b),
            Some(b) => Err(io::Error::new(io::ErrorKind::StaleNetworkFileHandle, format!("a blob of {} bytes is now {} bytes (the database changed since the slide was opened)", r.len, b.len()))),
            None => Err(io::Error::new(io::ErrorKind::StaleNetworkFileHandle, "a blob is gone (the database changed since the slide was opened)")),
        }
    }
}

impl ByteSource for BlobSource {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= self.len).ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        // The first record that ends after `offset`; records are contiguous and sorted.
        let mut k = self.records.partition_point(|r| r.start + r.len <= offset);
        let mut pos = offset;
        while pos < end {
            let r = self.records.get(k).ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
            let blob = self.fetch(r)?;
            let (from, to) = ((pos - r.start) as usize, (end.min(r.start + r.len) - r.start) as usize);
            let dst = (pos - offset) as usize;
            buf[dst..dst + (to - from)].copy_from_slice(&blob[from..to]);
            pos = r.start + to as u64;
            k += 1;
        }
        Ok(())
    }
}
