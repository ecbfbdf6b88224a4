//! Every bound slidestream puts on a value it reads from a file, an object store or a cache
//! file before that value sizes memory or a loop: one struct, [`Limits`] (the shape of
//! image-tiff's `tiff::decoder::Limits`), whose one value [`LIMITS`] every check reads. A value
//! past its limit is refused with a typed error ([`crate::Error::Limits`] or
//! [`crate::Error::Format`] naming the file) before anything is allocated from it.
//!
//! These are fixed when slidestream is built: raising one is a change to this file. The
//! limits a caller may change at run time are settings (`SLIDESTREAM_MAX_REGION_BYTES`,
//! `SLIDESTREAM_READ_WORKING_BYTES`, `SLIDESTREAM_READ_PROCESS_BYTES`, `SLIDESTREAM_CACHE_BYTES`:
//! [`crate::config::TABLE`], docs/settings.md).
//!
//! docs/robustness.md's "Every input limit" table is [`FIELDS`] in prose
//! (`tests::docs_list_every_limit`), and `tests::no_limit_lives_outside_this_file` keeps new
//! `MAX_*` constants with literal values out of the other source files.

/// One field of [`Limits`]: its name, value (widened) and unit, for docs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The field's name, e.g. `tile_edge`.
    pub name: &'static str,
    /// Its value in [`LIMITS`].
    pub value: i128,
    /// Its unit: `pixels`, `bytes`, or what is counted.
    pub unit: &'static str,
}

macro_rules! limits {
    ($( $(#[doc = $doc:literal])* $field:ident : $ty:ty = $value:expr, $unit:literal; )*) => {
        /// Every input limit ([module docs](self)); [`LIMITS`] is the one value in use.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct Limits {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Limits {
            /// The limits slidestream is built with.
            pub const DEFAULT: Limits = Limits { $( $field: $value, )* };
        }

        /// Every field of [`Limits`], in declaration order (docs/robustness.md's order).
        pub const FIELDS: &[Field] = &[
            $( Field { name: stringify!($field), value: LIMITS.$field as i128, unit: $unit }, )*
        ];
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// The limits in use: [`Limits::DEFAULT`].
pub const LIMITS: Limits = Limits::DEFAULT;

limits! {
    // ---- images, tiles and TIFF structure ----
    /// Largest image (level or associated image) edge, in pixels: 2³¹ − 1, as OpenSlide's int32
    /// coordinates. Checked for every IFD (`format::tiff_common::image_from_ifd`) and again for
    /// every driver's levels (`format::finish`).
    image_edge: u64 = (1 << 31) - 1, "pixels";
    /// Largest tile edge, in pixels: a decoded 16384² tile is 1 GiB of RGBA. Not applied to TIFF
    /// strips (as wide as their image), whose memory the read working set bounds. Also the
    /// largest PNG or BMP tile (MIRAX) accepted.
    tile_edge: u64 = 16_384, "pixels";
    /// Largest JPEG tile edge nvJPEG is given, in pixels; larger tiles go to the CPU decoders
    /// (`codec::table::gpu_decodes`).
    gpu_tile_edge: u32 = 16_384, "pixels";
    /// Largest compressed tile, in bytes (a 16384² RGBA tile stored raw is 1 GiB); checked from
    /// the index before the tile is read (`read::locate`).
    tile_bytes: u64 = 1 << 30, "bytes";
    /// Most IFDs in one TIFF chain (with its SubIFDs). What really bounds a hostile chain is the
    /// structure budget (every directory's bytes are charged against 2 × the file size); this
    /// bounds the memory of the parsed chain on top.
    ifds: usize = 1 << 20, "IFDs";
    /// Most entries in one IFD (a classic TIFF's u16 count; BigTIFF's u64 is held to it too).
    ifd_entries: u64 = 65_535, "entries";
    /// Largest tag value read, in bytes (also bounded by the file's size).
    tag_bytes: u64 = 512 << 20, "bytes";
    /// Lowest-level bytes above which `openslide.quickhash-1` is not computed (OpenSlide's
    /// `5 << 20`, so the property matches OpenSlide's).
    quickhash_bytes: u64 = 5 << 20, "bytes";
    /// Most threads of a decode pool (`--threads`, `RAYON_NUM_THREADS`, `SLIDESTREAM_DECODE_THREADS`).
    threads: usize = 1024, "threads";

    // ---- codecs ----
    /// Most scans of a multi-scan (progressive) JPEG stream, counted from its markers before
    /// decoding: 500, as libjpeg-turbo's own tools (`djpeg -maxscans`, `TJFLAG_LIMITSCANS`).
    jpeg_scans: u32 = 500, "scans";
    /// Largest whole-image coefficient buffer a multi-scan JPEG stream may need (128 bytes a
    /// block, from its SOF): a 4:4:4 progressive tile up to 2730², 4:2:0 up to 3860².
    jpeg_coef_bytes: u64 = 64 << 20, "bytes";
    /// Largest JPEG image edge trusted from a SOF (libjpeg's `JPEG_MAX_DIMENSION`).
    jpeg_dimension: u64 = 65_500, "pixels";
    /// Most bytes of a JPEG header (markers up to SOS) read at open to find its SOF (MIRAX
    /// associated images, NDPI levels, VMS image files).
    jpeg_header_bytes: u64 = 1 << 20, "bytes";
    /// Largest JPEG stream scanned for restart markers at open (NDPI strips whose MCU starts
    /// are missing, VMS image files without an optimisation file).
    restart_scan_bytes: u64 = 256 << 20, "bytes";
    /// Most tiles a JPEG 2000 codestream may declare in its SIZ: OpenJPEG allocates about 5 KB
    /// per tile and component from SIZ alone.
    j2k_tiles: u64 = 4096, "tiles";
    /// Longest `&...;` character reference skipped in base64 tile text (`&#x10FFFF;` is 10).
    char_reference_bytes: usize = 12, "bytes";

    // ---- metadata ----
    /// Largest XML description parsed (OME-XML, QPTIFF page descriptions, CZI metadata).
    xml_bytes: usize = 64 << 20, "bytes";
    /// Most fields taken from one QPTIFF description (nested elements included).
    xml_fields: usize = 4096, "fields";
    /// Deepest QPTIFF description nesting flattened into properties; deeper elements are taken
    /// as their text.
    xml_depth: usize = 8, "levels of nesting";
    /// Deepest DICOM sequence nesting reported as properties.
    dicom_depth: usize = 16, "levels of nesting";
    /// Most planes (C × Z × T) an OME-XML image may declare.
    ome_planes: u64 = 1 << 20, "planes";

    // ---- vendor formats ----
    /// Most tiles placed at free positions in one level (MIRAX camera images, Ventana and
    /// Trestle overlaps): bounds the index a hostile file can make.
    placements: u64 = 1 << 24, "placements";
    /// Largest MIRAX `Slidedat.ini` read (OpenSlide's `SLIDEDAT_MAX_SIZE`).
    mirax_ini_bytes: u64 = 1 << 20, "bytes";
    /// Largest MIRAX `Index.dat` read at open (16 bytes an image record: 16 M images).
    mirax_index_bytes: u64 = 256 << 20, "bytes";
    /// Most grid cells of one DICOM level.
    dicom_cells: u64 = 1 << 26, "cells";
    /// Largest Hamamatsu VMS/VMU key file read (OpenSlide's `KEY_FILE_MAX_SIZE`).
    vms_key_file_bytes: u64 = 64 << 10, "bytes";
    /// Most image files of a VMS grid (`NoJpegColumns × NoJpegRows`); each is opened at open.
    vms_image_files: u64 = 4096, "files";
    /// Most subblocks a CZI directory may list (a 40× slide scan has tens of thousands).
    czi_subblocks: u64 = 4_000_000, "subblocks";
    /// Most dimensions of one CZI directory entry (the format defines about a dozen).
    czi_dimensions: u64 = 64, "dimensions";
    /// Most attachments a CZI file may list.
    czi_attachments: u64 = 65_536, "attachments";
    /// Most fields read from one Olympus VSI record tree (real files hold a few thousand).
    vsi_fields: usize = 1 << 20, "fields";
    /// Deepest VSI volume nesting entered (real files nest about 10 deep).
    vsi_depth: usize = 64, "levels of nesting";
    /// Largest VSI field value read; longer values are skipped.
    vsi_value_bytes: u32 = 64 << 10, "bytes";
    /// Most channels read from one VSI stack.
    vsi_channels: i64 = 256, "channels";
    /// Most coordinates of an ETS tile (real files use 4 to 6).
    ets_dimensions: u32 = 16, "dimensions";
    /// Most ETS pyramid levels (the level coordinate must be below it).
    ets_levels: i32 = 32, "levels";
    /// Largest ETS tile table read (44 bytes an entry for 6 dimensions: about 6 M tiles).
    ets_table_bytes: u64 = 256 << 20, "bytes";
    /// Most rows of a Sakura slide's tile table read at open.
    sakura_rows: u64 = 1 << 24, "rows";
    /// Largest Sakura slide copied into memory for SQLite when it is not a local file.
    sakura_in_memory_bytes: u64 = 256 << 20, "bytes";

    // ---- remote slides and cache files ----
    /// Most bytes the read-ahead blocks of one remote open may hold; reads beyond go to the
    /// object directly.
    remote_block_bytes: u64 = 128 << 20, "bytes";
    /// Longest ETag kept for the remote index cache (nginx's default header line is 8 KiB).
    etag_bytes: usize = 8192, "bytes";
    /// Longest slide URL: far below the HTTP client's 65,534-byte URI limit, past which
    /// `object_store` panics instead of returning an error.
    url_bytes: usize = 8192, "bytes";
    /// Longest object key (S3, GCS and Azure all refuse keys over 1,024 bytes).
    key_bytes: usize = 1024, "bytes";
    /// Largest compiled-kernel cache file read back.
    kernel_cache_bytes: u64 = 64 << 20, "bytes";
    // ---- the slide server ----
    /// Deepest folder under the directory `slidestream serve` scans for slides.
    serve_scan_depth: usize = 12, "levels of folders";
    /// Most directory entries `slidestream serve` looks at when it scans for slides; past it
    /// the scan stops and says so in `/slides.json`'s `errors`.
    serve_scan_entries: usize = 200_000, "entries";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc_rows() -> Vec<Vec<String>> {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/robustness.md")).unwrap();
        let start = doc.find("## Every input limit").expect("docs/robustness.md has an 'Every input limit' section");
        doc[start..]
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .skip(2)
            .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
            .collect()
    }

    /// docs/robustness.md lists every field, in order, with its value and unit, and names no
    /// field that does not exist (anywhere in the file, as `Limits::name`).
    #[test]
    fn docs_list_every_limit() {
        let rows = doc_rows();
        let listed: Vec<&str> = rows.iter().map(|r| r[0].trim_matches('`')).collect();
        let fields: Vec<&str> = FIELDS.iter().map(|f| f.name).collect();
        assert_eq!(listed, fields, "docs/robustness.md 'Every input limit' rows vs Limits' fields");
        for (f, r) in FIELDS.iter().zip(&rows) {
            assert_eq!(r[1].replace(',', ""), f.value.to_string(), "{}: value", f.name);
            assert_eq!(r[2], f.unit, "{}: unit", f.name);
        }
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/robustness.md")).unwrap();
        for m in doc.match_indices("Limits::") {
            let name: String = doc[m.0 + 8..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            assert!(name == "DEFAULT" || fields.contains(&name.as_str()), "docs/robustness.md names Limits::{name}, which is not a field");
        }
    }

    /// Constants that bound work or memory but are not limits on input (tuning, or a layout
    /// fact), and may stay where they are used.
    const NOT_INPUT_LIMITS: &[&str] = &[
        "codec/stack.rs:MAX_KEPT_STREAM_BYTES",
        "format/sakura/db.rs:MAX_POOLED",
        "read/fetch.rs:MAX_STACK",
        "gpu/cuda/lanes.rs:MAX_LANES",
        "gpu/cuda/lanes.rs:MAX_OVERFLOW_LANES",
        "gpu/cuda/scheduler.rs:MIN_CPU_SHARE_TILES",
        "gpu/cuda/decode/sm.rs:MAX_SM_TILES",
        "gpu/cuda/decode/sm.rs:MAX_SM_SCRATCH_BYTES",
        "codec/jpeg_sm/parse.rs:MAX_SETS",
        "io/remote/blocks.rs:MIN_BLOCK",
        "io/multi.rs:MAX_SOURCE_LEN",
        "format/olympus.rs:MAX_DENSE_CELLS",
    ];

    /// No `MAX_*`/`MIN_*` constant outside this file is given a number of its own: a new input
    /// limit goes in [`Limits`] (or, if it is tuning, in [`NOT_INPUT_LIMITS`] with its reason).
    #[test]
    fn no_limit_lives_outside_this_file() {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
        let mut stray = Vec::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                    continue;
                }
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                if p.extension().is_none_or(|x| x != "rs") || rel == "limits.rs" {
                    continue;
                }
                for line in std::fs::read_to_string(&p).unwrap().lines() {
                    let Some(at) = line.find("const ") else { continue };
                    let rest = &line[at + 6..];
                    if !(rest.starts_with("MAX_") || rest.starts_with("MIN_")) {
                        continue;
                    }
                    let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    let value = rest.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
                    let from_limits = value.starts_with("LIMITS.") || value.starts_with("crate::limits::LIMITS.");
                    if !from_limits && !NOT_INPUT_LIMITS.contains(&format!("{rel}:{name}").as_str()) {
                        stray.push(format!("{rel}: {}", line.trim()));
                    }
                }
            }
        }
        assert!(stray.is_empty(), "limits defined outside core/src/limits.rs:\n{}", stray.join("\n"));
    }

    #[test]
    fn the_default_is_what_is_in_use() {
        assert_eq!(Limits::default(), LIMITS);
        assert!(FIELDS.iter().all(|f| f.value > 0));
        assert_eq!(FIELDS.iter().find(|f| f.name == "tile_edge").unwrap().value, 16_384);
    }
}
