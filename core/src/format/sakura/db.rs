//! The SQLite side of a Sakura slide: opening the database of a [`Probe`] read-only, the
//! queries OpenSlide 4.0.1's Sakura driver makes (`openslide-vendor-sakura.c`; table and
//! column names from OpenSlide's Sakura format page), and a pool of connections for reading
//! blobs at read time ([`super::blobs::BlobSource`]).
//!
//! Safety against hostile files: SQLite reports a damaged database as an error (never reads
//! out of bounds); every table queried must be an ordinary table (a view or virtual table
//! could make a query run without end), the schema is not trusted (`trusted_schema = OFF`),
//! and the connection is read-only and `immutable` (no locks, no journal files written).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::super::Probe;
use crate::error::{Error, Location, Result};

/// The 16 bytes every SQLite 3 database starts with (sqlite.org/fileformat.html, 1.3).
pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Largest slide read into memory when it is not a local file (a remote object, a fuzzer's
/// input): SQLite reads a local file itself, anything else is copied into memory first.
pub(crate) const MAX_IN_MEMORY_BYTES: u64 = crate::limits::LIMITS.sakura_in_memory_bytes;

/// Where the database's bytes come from.
#[derive(Debug)]
enum Origin {
    /// A local file: our own descriptor of the file the slide was opened from, opened by
    /// SQLite through `/proc/self/fd/N` (the same file, even if its name now leads elsewhere).
    Fd(OwnedFd),
    /// The whole file, for slides that are not local files.
    Memory(Arc<[u8]>),
}

/// A way to open connections to one Sakura database, and a pool of open ones.
#[derive(Debug)]
pub(crate) struct Db {
    origin: Origin,
    pool: Mutex<Vec<Connection>>,
}

/// Most idle connections kept for reads.
const MAX_POOLED: usize = 16;

fn sql_err(at: &Location, what: &str, e: rusqlite::Error) -> Error {
    Error::format(at, format!("SQLite: {what}: {e}"))
}

impl Db {
    /// The database of `probe`'s file. `Ok(None)` when it does not start as SQLite does.
    ///
    /// # Errors
    /// `Io` when the file cannot be read; `Unsupported` for a slide that is not a local file
    /// and larger than [`MAX_IN_MEMORY_BYTES`].
    pub fn of_probe(probe: &Probe<'_>) -> Result<Option<Db>> {
        let (src, at) = (probe.src, probe.at);
        let mut head = [0u8; 16];
        if src.len() < 100 || src.read_exact_at(&mut head, 0).is_err() || &head != SQLITE_MAGIC {
            return Ok(None);
        }
        let origin = match src.raw_fd() {
            Some(fd) => {
                // SAFETY: `fd` is open for the duration of this call (the probe's source owns
                // it); the clone is a new descriptor we own.
                let owned = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }.try_clone_to_owned().map_err(|e| Error::io(at, e))?;
                Origin::Fd(owned)
            }
            None if src.len() <= MAX_IN_MEMORY_BYTES => {
                let mut all = vec![0u8; src.len() as usize];
                src.read_exact_at(&mut all, 0).map_err(|e| Error::io(at, e))?;
                Origin::Memory(all.into())
            }
            None => {
                return Err(Error::unsupported(at, format!("a Sakura (SQLite) slide of {} bytes that is not a local file (at most {MAX_IN_MEMORY_BYTES} are read into memory)", src.len())))
            }
        };
        Ok(Some(Db { origin, pool: Mutex::new(Vec::new()) }))
    }

    /// A new connection.
    fn connect(&self) -> rusqlite::Result<Connection> {
        let c = match &self.origin {
            Origin::Fd(fd) => {
                let uri = format!("file:/proc/self/fd/{}?immutable=1", fd.as_raw_fd());
                Connection::open_with_flags(uri, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX)?
            }
            Origin::Memory(bytes) => {
                let mut c = Connection::open_in_memory_with_flags(OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
                c.deserialize_read_exact(rusqlite::MAIN_DB, &bytes[..], bytes.len(), true)?;
                c
            }
        };
        c.pragma_update(None, "trusted_schema", false)?;
        Ok(c)
    }

    /// Run `f` with a pooled connection (opened when none is idle).
    ///
    /// # Errors
    /// `Format` at `at` when no connection opens; `f`'s errors.
    pub fn with<T>(&self, at: &Location, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let idle = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(c) => c,
            None => self.connect().map_err(|e| sql_err(at, "cannot open the database", e))?,
        };
        let r = f(&conn);
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < MAX_POOLED {
            pool.push(conn);
        }
        r
    }
}

/// `Ok` when `name` is an ordinary table of the database (not a view or virtual table).
///
/// # Errors
/// `Format` naming the table otherwise.
pub(crate) fn require_table(c: &Connection, name: &str, at: &Location) -> Result<()> {
    let sql: Option<String> = c
        .query_row("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE NOCASE", [name], |r| r.get(0))
        .map_err(|e| sql_err(at, &format!("no table {name:?}"), e))?;
    if sql.is_some_and(|s| s.trim_start().to_ascii_uppercase().starts_with("CREATE VIRTUAL")) {
        return Err(Error::format(at, format!("SQLite: {name:?} is a virtual table")));
    }
    Ok(())
}

/// The unique table's name as OpenSlide reads it: the only row of
/// `DataManagerSQLiteConfigXPO`'s `TableName`; returned as the name and as an SQL literal
/// (SQLite's `quote()`, usable where a table name goes).
///
/// # Errors
/// A message when the table is missing, empty, has more than one row or names no table.
pub(crate) fn unique_table(c: &Connection, at: &Location) -> Result<(String, String)> {
    require_table(c, "DataManagerSQLiteConfigXPO", at)?;
    let mut st = c.prepare("SELECT TableName, quote(TableName) FROM DataManagerSQLiteConfigXPO").map_err(|e| sql_err(at, "DataManagerSQLiteConfigXPO", e))?;
    let mut rows = st.query([]).map_err(|e| sql_err(at, "DataManagerSQLiteConfigXPO", e))?;
    let first = rows.next().map_err(|e| sql_err(at, "DataManagerSQLiteConfigXPO", e))?.ok_or_else(|| Error::format(at, "DataManagerSQLiteConfigXPO has no rows"))?;
    let name = text(first.get_ref(0).ok()).ok_or_else(|| Error::format(at, "DataManagerSQLiteConfigXPO.TableName is not text"))?;
    let quoted: String = first.get(1).map_err(|e| sql_err(at, "quote(TableName)", e))?;
    if rows.next().map_err(|e| sql_err(at, "DataManagerSQLiteConfigXPO", e))?.is_some() {
        return Err(Error::format(at, "DataManagerSQLiteConfigXPO has more than one row (found > 1 unique tables)"));
    }
    require_table(c, &name, at)?;
    Ok((name, quoted))
}

/// A value as text bytes (`sqlite3_column_text`'s view: blobs and text as stored, numbers as
/// SQLite prints them is not needed here: `None` for numbers and NULL).
fn text(v: Option<ValueRef<'_>>) -> Option<String> {
    match v? {
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// The bytes of the first row's first column of `sql` (with `params`), as
/// `sqlite3_column_blob` gives them (the query casts to BLOB where numbers may occur);
/// `Ok(None)` when there is no row; NULL is empty.
pub(crate) fn first_blob<P: rusqlite::Params>(c: &Connection, sql: &str, params: P) -> rusqlite::Result<Option<Vec<u8>>> {
    let mut st = c.prepare(sql)?;
    let mut rows = st.query(params)?;
    match rows.next()? {
        None => Ok(None),
        Some(r) => Ok(Some(match r.get_ref(0)? {
            ValueRef::Blob(b) | ValueRef::Text(b) => b.to_vec(),
            ValueRef::Null => Vec::new(),
            ValueRef::Integer(i) => i.to_string().into_bytes(),
            ValueRef::Real(f) => f.to_string().into_bytes(),
        })),
    }
}

/// Whether `sql` returns more than one row.
pub(crate) fn several_rows(c: &Connection, sql: &str) -> rusqlite::Result<bool> {
    let mut st = c.prepare(sql)?;
    let mut rows = st.query([])?;
    Ok(rows.next()?.is_some() && rows.next()?.is_some())
}

/// The bytes OpenSlide hashes for `sql` (`hash_columns`): each column of each row as
/// `sqlite3_column_blob` gives it, followed by a NUL. `None` when the query fails (OpenSlide
/// then gives no quickhash).
pub(crate) fn hash_columns(c: &Connection, sql: &str, out: &mut Vec<u8>) -> Option<()> {
    let mut st = c.prepare(sql).ok()?;
    let n = st.column_count();
    let mut rows = st.query([]).ok()?;
    while let Some(r) = rows.next().ok()? {
        for i in 0..n {
            if let ValueRef::Blob(b) | ValueRef::Text(b) = r.get_ref(i).ok()? {
                out.extend_from_slice(b);
            }
            out.push(0);
        }
    }
    Some(())
}
