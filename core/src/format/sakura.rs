//! Sakura SVSlide (`.svslide`, vendor `sakura`): an SQLite 3 database written by the eXpress
//! Persistent Objects ORM, holding metadata tables, associated images and the pyramid's tiles,
//! each tile as three greyscale JPEGs (red, green, blue).
//!
//! Format facts, from OpenSlide's Sakura format page (openslide.org/formats/sakura) and the
//! behaviour of OpenSlide 4.0.1 (`openslide-vendor-sakura.c`), checked with OpenSlide on
//! generated files (`scripts/vendor_slides/sakura.py`):
//! * detection: not a TIFF; an SQLite database; `DataManagerSQLiteConfigXPO` has exactly one
//!   row, whose `TableName` names the *unique table*; that table's row with
//!   `id = '++MagicBytes'` has `data` `SVGigaPixelImage`;
//! * the unique table's `Header` blob: little-endian u32 tile size (1 to 2^31 - 1) at 0, image
//!   width at 4, height at 8, number of focal planes at 16. The focal plane read is the middle
//!   one, `planes / 2 + planes % 2 - 1` (plane 0 of 1 or 2, plane 1 of 3);
//! * tiles: blobs of the unique table whose id is a tile id ([`tileid`]); every tile id of
//!   focal plane 0 adds a level at its downsample (a power of two), of
//!   `width / downsample × height / downsample` pixels (integer division) in square tiles of
//!   the header's size; levels in increasing downsample; the level's downsample is reported
//!   as that number. Tile (col, row) of the level of downsample `d` is the blobs
//!   `T;{col·size·d}|{row·size·d};{d};{c};{plane}` for c = 0, 1, 2 of the chosen plane; a tile
//!   whose three blobs are not all present is transparent. A malformed tile id, or a
//!   downsample that is not a power of two on plane 0, fails the open;
//! * properties `sakura.<column>` from the first row of `SVSlideDataXPO` joined to
//!   `SVHRScanDataXPO` on `ParentSlide = OID`: text columns `SlideId`, `Date`, `Description`,
//!   `Creator`, `DiagnosisCode`, `Keywords`, `ScanId`, `FocussingMethod` when not empty,
//!   numbers `ResolutionMmPerPix`, `NominalLensMagnification` always (as doubles);
//!   `sakura.VersionBytes` from the `++VersionBytes` blob; `openslide.mpp-x/-y` =
//!   1000 × `ResolutionMmPerPix`, `openslide.objective-power` = `NominalLensMagnification`;
//! * associated images (each only when its query returns exactly one row holding a JPEG):
//!   `label` and `macro`, `SVScannedImageDataXPO.Image` of the rows `SVSlideDataXPO.m_labelScan`
//!   and `m_overviewScan` name; `thumbnail`, `SVHRScanDataXPO.ThumbnailImage`;
//! * quickhash: SHA-256 over `SlideId, Date, Creator, Description, Keywords` of every
//!   `SVSlideDataXPO` row by OID, then `ScanId, Date, Name, Description` of every
//!   `SVHRScanDataXPO` row, then every `Header` blob, each value followed by a NUL; then the
//!   blobs of every tile id (all colours and focal planes) of the largest downsample, in byte
//!   order of their ids, with no separator (no size cap).
//!
//! Tiles are read through a [`blobs::BlobSource`] (a virtual source of the slide, see
//! `docs/architecture.md`): each colour is one plane of a planar-separate JPEG tile
//! (`CodecInfo::planar_separate`), which the CPU decoders decode plane by plane and interleave
//! and the GPU engine hands to them.

mod blobs;
mod db;
mod tileid;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use blobs::{BlobKey, BlobSource, Layout};
use db::{first_blob, hash_columns, require_table, several_rows, unique_table, Db};
use rusqlite::types::ValueRef;
use rusqlite::Connection;

use super::{format_double, parse_double, FormatDriver, LayoutLevel, Probe, QuickhashInput, SlideLayout, VirtualSource, MAX_IMAGE_EDGE, MAX_TILE_EDGE};
use crate::error::{Error, Location, Result};
use crate::index::{Alpha, CodecInfo, Compression, Grid, ImageIndex, Photometric, SampleBits, SourceId, TileLoc, TileStream};

/// The Sakura driver (vendor name `sakura`).
pub struct Sakura;

/// The magic of the `++MagicBytes` row.
const MAGIC: &[u8] = b"SVGigaPixelImage";

/// Most rows of the unique table read at open (each may be a tile blob).
const MAX_ROWS: u64 = crate::limits::LIMITS.sakura_rows;

/// The source tiles are read from: the first (only) virtual source.
const BLOBS: SourceId = SourceId(1);

/// Text as `sqlite3_column_text` and `g_strdup` keep it: up to the first NUL.
fn c_text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn sql_err<'a>(at: &'a Location, what: &str) -> impl Fn(rusqlite::Error) -> Error + 'a {
    let what = what.to_string();
    move |e| Error::format(at, format!("SQLite: {what}: {e}"))
}

/// The unique table's quoted name, after checking the magic row.
fn check_magic(c: &Connection, at: &Location) -> Result<(String, String)> {
    let (name, q) = unique_table(c, at)?;
    let magic = first_blob(c, &format!("SELECT CAST(data AS BLOB) FROM {q} WHERE id = '++MagicBytes'"), [])
        .map_err(sql_err(at, "++MagicBytes"))?
        .ok_or_else(|| Error::format(at, "no ++MagicBytes row"))?;
    if c_text(&magic).as_bytes() != MAGIC {
        return Err(Error::format(at, "magic number does not match"));
    }
    Ok((name, q))
}

/// (tile size, width, height, focal planes) from the `Header` blob.
fn header(c: &Connection, q: &str, at: &Location) -> Result<(u32, u32, u32, i32)> {
    let b = first_blob(c, &format!("SELECT CAST(data AS BLOB) FROM {q} WHERE id = 'Header'"), []).map_err(sql_err(at, "Header"))?.ok_or_else(|| Error::format(at, "no Header row"))?;
    let u32_at = |o: usize| b.get(o..o + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
    let (Some(ts), Some(w), Some(h), Some(planes)) = (u32_at(0), u32_at(4), u32_at(8), u32_at(16)) else {
        return Err(Error::format(at, format!("Header blob of {} bytes (20 needed)", b.len())));
    };
    if ts == 0 || ts > i32::MAX as u32 {
        return Err(Error::format(at, format!("invalid tile size {ts}")));
    }
    if ts as u64 > MAX_TILE_EDGE {
        return Err(Error::limits(at, format!("Sakura tiles of {ts} pixels (limit {MAX_TILE_EDGE})")));
    }
    if w as u64 > MAX_IMAGE_EDGE || h as u64 > MAX_IMAGE_EDGE {
        return Err(Error::limits(at, format!("Sakura image of {w}x{h} pixels (limit {MAX_IMAGE_EDGE} per edge)")));
    }
    Ok((ts, w, h, planes as i32))
}

/// A tile blob found at open: its rowid and length in bytes.
#[derive(Clone, Copy)]
struct Blob {
    rowid: i64,
    len: u64,
}

/// What the scan of the unique table found.
struct Scan {
    /// Downsamples of plane-0 tiles: the levels.
    levels: BTreeSet<i64>,
    /// Tiles of the chosen focal plane.
    tiles: Vec<(tileid::TileId, Blob)>,
    /// Id bytes and blob of every tile of the largest downsample (quickhash).
    lowest: Vec<(Vec<u8>, Blob)>,
}

fn scan(c: &Connection, q: &str, plane: i32, at: &Location) -> Result<Scan> {
    let err = sql_err(at, "reading tile ids");
    let mut st = c.prepare(&format!("SELECT rowid, CAST(id AS BLOB), octet_length(data) FROM {q}")).map_err(&err)?;
    let mut rows = st.query([]).map_err(&err)?;
    let mut s = Scan { levels: BTreeSet::new(), tiles: Vec::new(), lowest: Vec::new() };
    let (mut n, mut max_ds) = (0u64, 0i64);
    while let Some(r) = rows.next().map_err(&err)? {
        n += 1;
        if n > MAX_ROWS {
            return Err(Error::limits(at, format!("unique table of more than {MAX_ROWS} rows")));
        }
        let ValueRef::Blob(id) = r.get_ref(1).map_err(&err)? else { continue };
        let Some(t) = tileid::parse(id).map_err(|m| Error::format(at, m))? else { continue };
        let blob = Blob { rowid: r.get(0).map_err(&err)?, len: r.get::<_, Option<i64>>(2).map_err(&err)?.unwrap_or(0).max(0) as u64 };
        if t.plane == 0 && !s.levels.contains(&t.downsample) {
            if t.downsample & (t.downsample - 1) != 0 {
                return Err(Error::format(at, format!("invalid downsample {}", t.downsample)));
            }
            s.levels.insert(t.downsample);
        }
        if t.downsample > max_ds {
            s.lowest.clear();
            max_ds = t.downsample;
        }
        if t.downsample == max_ds {
            s.lowest.push((id.to_vec(), blob));
        }
        if t.plane == plane {
            s.tiles.push((t, blob));
        }
    }
    Ok(s)
}

/// The codec of every level: one greyscale JPEG per colour.
fn codec() -> CodecInfo {
    CodecInfo {
        compression: Compression::Jpeg,
        compression_tag: 7,
        photometric: Photometric::Rgb,
        samples_per_pixel: 3,
        sample_bits: SampleBits::U8,
        alpha: Alpha::None,
        predictor: 1,
        planar_separate: true,
        stream: TileStream::Plain,
        ycbcr_subsampling: (1, 1),
    }
}

/// A level's grid cells (col, row) → the blobs of red, green and blue found so far.
type Cells = BTreeMap<(u64, u64), [Option<Blob>; 3]>;

/// The levels, their tiles laid out in `lay`.
fn levels(s: &Scan, ts: u32, (w, h): (u32, u32), lay: &mut Layout, at: &Location) -> Result<Vec<LayoutLevel>> {
    let codec = Arc::new(codec());
    let mut out = Vec::with_capacity(s.levels.len());
    let mut cells: HashMap<i64, Cells> = s.levels.iter().map(|&d| (d, BTreeMap::new())).collect();
    let dims = |d: i64| ((w as i64 / d) as u64, (h as i64 / d) as u64);
    for (t, b) in &s.tiles {
        let Some(cell) = cells.get_mut(&t.downsample) else { continue };
        let Some(step) = (ts as i64).checked_mul(t.downsample) else { continue };
        let (lw, lh) = dims(t.downsample);
        let (col, row) = ((t.x / step) as u64, (t.y / step) as u64);
        if t.x % step != 0 || t.y % step != 0 || col >= lw.div_ceil(ts as u64) || row >= lh.div_ceil(ts as u64) {
            continue; // never read: OpenSlide computes ids from grid cells
        }
        let slot = &mut cell.entry((col, row)).or_default()[t.color as usize];
        slot.get_or_insert(*b);
    }
    for &d in &s.levels {
        let (lw, lh) = dims(d);
        if lw == 0 || lh == 0 {
            return Err(Error::format(at, format!("Sakura level at downsample {d} of {lw}x{lh} pixels")));
        }
        let mut tiles = Vec::new();
        for (&(col, row), planes) in &cells[&d] {
            if let [Some(r), Some(g), Some(b)] = planes {
                let locs = [r, g, b].map(|p| {
                    let (offset, length) = lay.push(BlobKey::Row(p.rowid), p.len);
                    TileLoc { source: BLOBS, offset, length }
                });
                tiles.push(((col, row), locs.to_vec()));
            }
        }
        let grid = Grid::sparse(lw.div_ceil(ts as u64), lh.div_ceil(ts as u64), 3, tiles).ok_or_else(|| Error::format(at, format!("Sakura level at downsample {d}: tile grid")))?;
        let image = ImageIndex { width: lw, height: lh, tile_width: ts, tile_height: ts, tiled: true, codec: codec.clone(), grid };
        out.push(LayoutLevel { image, origin: format!("downsample {d}") });
    }
    Ok(out)
}

/// The `sakura.*` properties, mpp and objective power (none when the metadata tables are
/// missing, as OpenSlide).
fn properties(c: &Connection, q: &str, props: &mut BTreeMap<String, String>) -> Option<(f64, f64)> {
    const TEXT: [(&str, &str); 8] = [
        ("SVSlideDataXPO", "SlideId"),
        ("SVSlideDataXPO", "Date"),
        ("SVSlideDataXPO", "Description"),
        ("SVSlideDataXPO", "Creator"),
        ("SVSlideDataXPO", "DiagnosisCode"),
        ("SVSlideDataXPO", "Keywords"),
        ("SVHRScanDataXPO", "ScanId"),
        ("SVHRScanDataXPO", "FocussingMethod"),
    ];
    const REAL: [&str; 2] = ["ResolutionMmPerPix", "NominalLensMagnification"];
    if let Ok(Some(v)) = first_blob(c, &format!("SELECT CAST(data AS BLOB) FROM {q} WHERE id = '++VersionBytes'"), []) {
        props.insert("sakura.VersionBytes".into(), c_text(&v));
    }
    let tables = ["SVSlideDataXPO", "SVHRScanDataXPO"].iter().all(|t| require_table(c, t, &Location::file("")).is_ok());
    if !tables {
        return None;
    }
    let cols: Vec<String> = TEXT.iter().map(|(t, col)| format!("CAST({t}.{col} AS BLOB)")).chain(REAL.iter().map(|col| format!("CAST(SVHRScanDataXPO.{col} AS REAL)"))).collect();
    let sql = format!("SELECT {} FROM SVSlideDataXPO JOIN SVHRScanDataXPO ON SVHRScanDataXPO.ParentSlide == SVSlideDataXPO.OID", cols.join(", "));
    let real = |v: ValueRef<'_>| match v {
        ValueRef::Real(f) => f,
        ValueRef::Integer(i) => i as f64,
        _ => 0.0,
    };
    let mut mmpp = None;
    let row: Option<Vec<rusqlite::types::Value>> = c.query_row(&sql, [], |r| (0..TEXT.len() + REAL.len()).map(|i| r.get::<_, rusqlite::types::Value>(i)).collect()).ok();
    if let Some(row) = row {
        for (i, (_, col)) in TEXT.iter().enumerate() {
            if let rusqlite::types::Value::Blob(b) = &row[i] {
                let v = c_text(b);
                if !v.is_empty() {
                    props.insert(format!("sakura.{col}"), v);
                }
            }
        }
        for (k, col) in REAL.iter().enumerate() {
            props.insert(format!("sakura.{col}"), format_double(real(ValueRef::from(&row[TEXT.len() + k]))));
        }
    }
    let mpp_sql = "SELECT CAST(ResolutionMmPerPix AS REAL) FROM SVHRScanDataXPO JOIN SVSlideDataXPO ON SVHRScanDataXPO.ParentSlide = SVSlideDataXPO.OID";
    if let Ok(v) = c.query_row(mpp_sql, [], |r| r.get_ref(0).map(real)) {
        mmpp = Some((v * 1000.0, v * 1000.0));
    }
    mmpp
}

/// The associated images OpenSlide reads (errors drop the image).
const ASSOCIATED: [(&str, &str, &str); 3] = [
    ("label", "SVScannedImageDataXPO", "SELECT CAST(Image AS BLOB) FROM SVScannedImageDataXPO JOIN SVSlideDataXPO ON SVSlideDataXPO.m_labelScan = SVScannedImageDataXPO.OID"),
    ("macro", "SVScannedImageDataXPO", "SELECT CAST(Image AS BLOB) FROM SVScannedImageDataXPO JOIN SVSlideDataXPO ON SVSlideDataXPO.m_overviewScan = SVScannedImageDataXPO.OID"),
    ("thumbnail", "SVHRScanDataXPO", "SELECT CAST(ThumbnailImage AS BLOB) FROM SVHRScanDataXPO JOIN SVSlideDataXPO ON SVHRScanDataXPO.ParentSlide = SVSlideDataXPO.OID"),
];

fn associated(c: &Connection, lay: &mut Layout, at: &Location) -> BTreeMap<String, ImageIndex> {
    let mut out = BTreeMap::new();
    for (name, table, sql) in ASSOCIATED {
        if require_table(c, table, at).is_err() || require_table(c, "SVSlideDataXPO", at).is_err() || !matches!(several_rows(c, sql), Ok(false)) {
            continue;
        }
        let Ok(Some(bytes)) = first_blob(c, sql, []) else { continue };
        let len = bytes.len() as u64;
        let mem = crate::io::MemSource::new(bytes);
        let aat = at.clone().with_image(crate::error::ImageRef::Associated(name.into()));
        let Ok(mut img) = super::hamamatsu::whole_jpeg_image(&mem, &aat, BLOBS, 0, len) else { continue };
        let (offset, length) = lay.push(BlobKey::Query(sql), len);
        let Some(grid) = Grid::regular(1, 1, 1, vec![TileLoc { source: BLOBS, offset, length }]) else { continue };
        img.grid = grid;
        out.insert(name.to_string(), img);
    }
    out
}

/// What quickhash covers: the metadata bytes as prefix, the lowest level's blobs as chunks
/// (`None` when a metadata query fails: no hash, as OpenSlide).
fn quickhash(c: &Connection, q: &str, s: &Scan, lay: &mut Layout) -> Option<(QuickhashInput, Vec<TileLoc>)> {
    let ok = ["SVSlideDataXPO", "SVHRScanDataXPO"].iter().all(|t| require_table(c, t, &Location::file("")).is_ok());
    if !ok {
        return None;
    }
    let mut prefix = Vec::new();
    hash_columns(c, "SELECT CAST(SlideId AS BLOB), CAST(Date AS BLOB), CAST(Creator AS BLOB), CAST(Description AS BLOB), CAST(Keywords AS BLOB) FROM SVSlideDataXPO ORDER BY OID", &mut prefix)?;
    hash_columns(c, "SELECT CAST(ScanId AS BLOB), CAST(Date AS BLOB), CAST(Name AS BLOB), CAST(Description AS BLOB) FROM SVHRScanDataXPO ORDER BY OID", &mut prefix)?;
    hash_columns(c, &format!("SELECT CAST(data AS BLOB) FROM {q} WHERE id = 'Header' ORDER BY rowid"), &mut prefix)?;
    // Each id's first row (a lookup by id finds one row), in byte order of the ids.
    let mut first: HashMap<&[u8], Blob> = HashMap::new();
    for (id, b) in &s.lowest {
        first.entry(id.as_slice()).or_insert(*b);
    }
    let mut ids: Vec<&[u8]> = s.lowest.iter().map(|(id, _)| id.as_slice()).collect();
    ids.sort_unstable();
    let mut placed: HashMap<i64, (u64, u64)> = HashMap::new();
    let chunks = ids
        .into_iter()
        .map(|id| {
            let b = first[id];
            if b.len == 0 {
                return TileLoc { source: BLOBS, offset: 0, length: 0 };
            }
            let (offset, length) = *placed.entry(b.rowid).or_insert_with(|| lay.push(BlobKey::Row(b.rowid), b.len));
            TileLoc { source: BLOBS, offset, length }
        })
        .collect();
    Some((QuickhashInput { prefix, lowest_level_tiles: true, uncapped: true, ..QuickhashInput::default() }, chunks))
}

impl FormatDriver for Sakura {
    fn name(&self) -> &'static str {
        "sakura"
    }

    fn detect(&self, probe: &Probe<'_>) -> std::result::Result<(), String> {
        if probe.tiff.is_ok() {
            return Err("Is a TIFF file".into());
        }
        let db = Db::of_probe(probe).map_err(|e| e.message())?.ok_or("not an SQLite database")?;
        db.with(probe.at, |c| check_magic(c, probe.at)).map(|_| ()).map_err(|e| e.message())
    }

    fn open(&self, probe: &Probe<'_>) -> Result<SlideLayout> {
        let at = probe.at;
        let db = Db::of_probe(probe)?.ok_or_else(|| Error::format(at, "not an SQLite database"))?;
        let mut lay = Layout::default();
        let (levels, properties, mpp, associated, qh, q, ds) = db.with(at, |c| {
            let (_, q) = check_magic(c, at)?;
            let (ts, w, h, planes) = header(c, &q, at)?;
            let plane = planes / 2 + planes % 2 - 1;
            let s = scan(c, &q, plane, at)?;
            if s.levels.is_empty() {
                return Err(Error::format(at, "no tiles on focal plane 0 (no levels)"));
            }
            if s.levels.first() != Some(&1) {
                return Err(Error::unsupported(at, format!("no tiles at downsample 1 (the first level is at downsample {:?})", s.levels.first())));
            }
            let levels = levels(&s, ts, (w, h), &mut lay, at)?;
            let mut props = BTreeMap::new();
            let mpp = properties(c, &q, &mut props);
            let associated = associated(c, &mut lay, at);
            let qh = quickhash(c, &q, &s, &mut lay);
            let ds: Vec<f64> = s.levels.iter().map(|&d| d as f64).collect();
            Ok((levels, props, mpp, associated, qh, q, ds))
        })?;
        let objective_power = properties.get("sakura.NominalLensMagnification").and_then(|v| parse_double(v));
        let (quickhash, quickhash_chunks) = match qh {
            Some((i, c)) => (Some(i), Some(c)),
            None => (None, None),
        };
        let source = BlobSource::new(db, &q, lay, at.clone());
        Ok(SlideLayout {
            virtual_sources: vec![VirtualSource { name: at.path.clone(), source: Arc::new(source) }],
            levels,
            associated,
            properties,
            mpp,
            objective_power,
            downsamples: ds,
            quickhash,
            quickhash_chunks,
            ..SlideLayout::default()
        })
    }
}
