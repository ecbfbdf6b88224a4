//! A small TIFF / BigTIFF writer for tests: one file, a chain of IFDs, each a tiled or stripped
//! image whose chunks are given as ready-made (already compressed) byte vectors.
//!
//! Deliberately simple and deterministic (same input, same bytes):
//!
//! * layout: header, then either all chunk data followed by the IFDs (the default, as most
//!   writers do) or the IFDs first and the chunk data after them ([`Tiff::ifds_first`]);
//! * chunks are written in IFD order, each IFD's chunks in index order (row-major tiles, planes
//!   one after another for PlanarConfiguration 2), back to back with no padding, so the tiles of
//!   one row are contiguous in the file;
//! * every IFD gets ImageWidth, ImageLength, BitsPerSample, Compression, Photometric,
//!   SamplesPerPixel, PlanarConfiguration and the chunk tags; optional JPEGTables, Predictor,
//!   ImageDescription, ExtraSamples; [`Ifd::extra`] tags are added and *replace* a generated tag
//!   with the same number (to write hostile values);
//! * [`Chunk::Missing`] writes offset 0 / byte count 0, [`Chunk::Raw`] writes any offset and byte
//!   count verbatim without data;
//! * [`Tiff::loop_to`] makes the last IFD point back to an earlier one (a looping chain).
#![allow(dead_code)]

use std::path::Path;

/// TIFF flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Classic TIFF, little-endian ("II", 42, 4-byte offsets).
    Classic,
    /// Classic TIFF, big-endian ("MM", 42).
    ClassicBigEndian,
    /// BigTIFF, little-endian ("II", 43, 8-byte offsets).
    BigTiff,
}

impl Variant {
    fn big_endian(self) -> bool {
        self == Variant::ClassicBigEndian
    }
    fn bigtiff(self) -> bool {
        self == Variant::BigTiff
    }
    /// Bytes available for an inline value in an IFD entry.
    fn inline_cap(self) -> usize {
        if self.bigtiff() {
            8
        } else {
            4
        }
    }
    fn header_len(self) -> u64 {
        if self.bigtiff() {
            16
        } else {
            8
        }
    }
}

/// Well-known tag numbers used by the writer and the tests.
pub mod tag {
    pub const NEW_SUBFILE_TYPE: u16 = 254;
    pub const IMAGE_WIDTH: u16 = 256;
    pub const IMAGE_LENGTH: u16 = 257;
    pub const BITS_PER_SAMPLE: u16 = 258;
    pub const COMPRESSION: u16 = 259;
    pub const PHOTOMETRIC: u16 = 262;
    pub const IMAGE_DESCRIPTION: u16 = 270;
    pub const STRIP_OFFSETS: u16 = 273;
    pub const SAMPLES_PER_PIXEL: u16 = 277;
    pub const ROWS_PER_STRIP: u16 = 278;
    pub const STRIP_BYTE_COUNTS: u16 = 279;
    pub const PLANAR_CONFIGURATION: u16 = 284;
    pub const PREDICTOR: u16 = 317;
    pub const TILE_WIDTH: u16 = 322;
    pub const TILE_LENGTH: u16 = 323;
    pub const TILE_OFFSETS: u16 = 324;
    pub const TILE_BYTE_COUNTS: u16 = 325;
    pub const EXTRA_SAMPLES: u16 = 338;
    pub const SAMPLE_FORMAT: u16 = 339;
    pub const JPEG_TABLES: u16 = 347;
    pub const YCBCR_SUBSAMPLING: u16 = 530;
}

/// A tag value. Types follow TIFF 6.0 field types.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// 1 BYTE.
    Byte(Vec<u8>),
    /// 2 ASCII (a NUL is appended).
    Ascii(String),
    /// 3 SHORT.
    Short(Vec<u16>),
    /// 4 LONG.
    Long(Vec<u32>),
    /// 5 RATIONAL (numerator, denominator).
    Rational(Vec<(u32, u32)>),
    /// 7 UNDEFINED (raw bytes).
    Undefined(Vec<u8>),
    /// 16 LONG8 (BigTIFF only, but written as asked).
    Long8(Vec<u64>),
    /// An entry written verbatim: field type, count and the value/offset field (truncated to the
    /// field's width) with no data behind it. For claims the file cannot back (huge counts).
    Claim {
        /// TIFF field type.
        field_type: u16,
        /// Count written in the entry.
        count: u64,
        /// Written in the value/offset field.
        offset: u64,
    },
}

/// One chunk (tile or strip, of one plane).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// Compressed bytes, written to the file.
    Data(Vec<u8>),
    /// A missing chunk: offset 0 and byte count 0.
    Missing,
    /// Offset and byte count written verbatim; no data written.
    Raw {
        /// Offset written in the offsets array.
        offset: u64,
        /// Byte count written in the byte-counts array.
        byte_count: u64,
    },
}

/// How an image is cut into chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// TileWidth × TileLength tiles.
    Tiled {
        /// TileWidth.
        tile_width: u32,
        /// TileLength.
        tile_height: u32,
    },
    /// Strips of RowsPerStrip rows.
    Stripped {
        /// RowsPerStrip.
        rows_per_strip: u32,
    },
}

/// One image file directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Ifd {
    /// ImageWidth.
    pub width: u32,
    /// ImageLength.
    pub height: u32,
    /// SamplesPerPixel.
    pub samples_per_pixel: u16,
    /// BitsPerSample (one value per sample is written).
    pub bits_per_sample: u16,
    /// Compression.
    pub compression: u16,
    /// PhotometricInterpretation.
    pub photometric: u16,
    /// PlanarConfiguration (1 chunky, 2 planar).
    pub planar: u16,
    /// Tiles or strips.
    pub layout: Layout,
    /// The chunks, in TIFF order (row-major; plane after plane when planar = 2).
    pub chunks: Vec<Chunk>,
    /// JPEGTables (written as UNDEFINED).
    pub jpeg_tables: Option<Vec<u8>>,
    /// Predictor.
    pub predictor: Option<u16>,
    /// ImageDescription.
    pub description: Option<String>,
    /// ExtraSamples.
    pub extra_samples: Option<Vec<u16>>,
    /// Further tags; one with the number of a generated tag replaces it.
    pub extra: Vec<(u16, Value)>,
    /// The order the chunks' data are written in the file (indices into `chunks`; `None`:
    /// TIFF order). The offsets arrays stay in TIFF order.
    pub write_order: Option<Vec<usize>>,
}

impl Ifd {
    /// A tiled, uncompressed, 8-bit RGB image; adjust the public fields as needed.
    pub fn tiled(width: u32, height: u32, tile_width: u32, tile_height: u32, chunks: Vec<Chunk>) -> Ifd {
        Ifd {
            width,
            height,
            samples_per_pixel: 3,
            bits_per_sample: 8,
            compression: 1,
            photometric: 2,
            planar: 1,
            layout: Layout::Tiled { tile_width, tile_height },
            chunks,
            jpeg_tables: None,
            predictor: None,
            description: None,
            extra_samples: None,
            extra: Vec::new(),
            write_order: None,
        }
    }

    /// Write the chunks' data in `order` (indices into `chunks`; e.g. tile rows bottom to top,
    /// as Aperio GT450 scanners store level 0).
    pub fn write_order(mut self, order: Vec<usize>) -> Ifd {
        assert_eq!(order.len(), self.chunks.len());
        self.write_order = Some(order);
        self
    }

    /// A stripped, uncompressed, 8-bit RGB image.
    pub fn stripped(width: u32, height: u32, rows_per_strip: u32, chunks: Vec<Chunk>) -> Ifd {
        Ifd { layout: Layout::Stripped { rows_per_strip }, ..Ifd::tiled(width, height, 1, 1, chunks) }
    }

    /// Set SamplesPerPixel and Photometric.
    pub fn color(mut self, samples_per_pixel: u16, photometric: u16) -> Ifd {
        self.samples_per_pixel = samples_per_pixel;
        self.photometric = photometric;
        self
    }

    /// Set Compression.
    pub fn compression(mut self, c: u16) -> Ifd {
        self.compression = c;
        self
    }

    /// Add (or replace) a tag.
    pub fn tag(mut self, tag: u16, v: Value) -> Ifd {
        self.extra.push((tag, v));
        self
    }

    /// The generated tags (before `extra` is applied). `locs` are the chunks' (offset, count).
    fn entries(&self, variant: Variant, locs: &[(u64, u64)]) -> Vec<(u16, Value)> {
        let spp = self.samples_per_pixel;
        let mut e = vec![
            (tag::IMAGE_WIDTH, Value::Long(vec![self.width])),
            (tag::IMAGE_LENGTH, Value::Long(vec![self.height])),
            (tag::BITS_PER_SAMPLE, Value::Short(vec![self.bits_per_sample; spp.max(1) as usize])),
            (tag::COMPRESSION, Value::Short(vec![self.compression])),
            (tag::PHOTOMETRIC, Value::Short(vec![self.photometric])),
            (tag::SAMPLES_PER_PIXEL, Value::Short(vec![spp])),
            (tag::PLANAR_CONFIGURATION, Value::Short(vec![self.planar])),
        ];
        let offsets: Vec<u64> = locs.iter().map(|l| l.0).collect();
        let counts: Vec<u64> = locs.iter().map(|l| l.1).collect();
        let arr = |v: Vec<u64>| {
            if variant.bigtiff() {
                Value::Long8(v)
            } else {
                Value::Long(v.into_iter().map(|x| u32::try_from(x).expect("classic TIFF offset > 4 GiB")).collect())
            }
        };
        match self.layout {
            Layout::Tiled { tile_width, tile_height } => {
                e.push((tag::TILE_WIDTH, Value::Long(vec![tile_width])));
                e.push((tag::TILE_LENGTH, Value::Long(vec![tile_height])));
                e.push((tag::TILE_OFFSETS, arr(offsets)));
                e.push((tag::TILE_BYTE_COUNTS, arr(counts)));
            }
            Layout::Stripped { rows_per_strip } => {
                e.push((tag::ROWS_PER_STRIP, Value::Long(vec![rows_per_strip])));
                e.push((tag::STRIP_OFFSETS, arr(offsets)));
                e.push((tag::STRIP_BYTE_COUNTS, arr(counts)));
            }
        }
        if let Some(t) = &self.jpeg_tables {
            e.push((tag::JPEG_TABLES, Value::Undefined(t.clone())));
        }
        if let Some(p) = self.predictor {
            e.push((tag::PREDICTOR, Value::Short(vec![p])));
        }
        if let Some(d) = &self.description {
            e.push((tag::IMAGE_DESCRIPTION, Value::Ascii(d.clone())));
        }
        if let Some(x) = &self.extra_samples {
            e.push((tag::EXTRA_SAMPLES, Value::Short(x.clone())));
        }
        for (t, v) in &self.extra {
            e.retain(|(k, _)| k != t);
            e.push((*t, v.clone()));
        }
        e.sort_by_key(|(t, _)| *t);
        e
    }
}

/// A whole file.
#[derive(Debug, Clone, PartialEq)]
pub struct Tiff {
    /// Flavour.
    pub variant: Variant,
    /// The main IFD chain, in order.
    pub ifds: Vec<Ifd>,
    /// When set, the last IFD's "next" points back to IFD `loop_to` (a looping chain).
    pub loop_to: Option<usize>,
    /// Write the IFDs right after the header and the chunk data after them.
    pub ifds_first: bool,
}

/// Byte-order aware output buffer.
struct Out {
    buf: Vec<u8>,
    be: bool,
}

impl Out {
    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&if self.be { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&if self.be { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&if self.be { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    fn pad_even(&mut self) {
        if self.buf.len() % 2 == 1 {
            self.buf.push(0);
        }
    }
}

impl Value {
    fn field_type(&self) -> u16 {
        match self {
            Value::Byte(_) => 1,
            Value::Ascii(_) => 2,
            Value::Short(_) => 3,
            Value::Long(_) => 4,
            Value::Rational(_) => 5,
            Value::Undefined(_) => 7,
            Value::Long8(_) => 16,
            Value::Claim { field_type, .. } => *field_type,
        }
    }

    /// (count, value bytes in file byte order).
    fn encode(&self, be: bool) -> (u64, Vec<u8>) {
        let mut o = Out { buf: Vec::new(), be };
        let count = match self {
            Value::Byte(v) | Value::Undefined(v) => {
                o.buf.extend_from_slice(v);
                v.len()
            }
            Value::Ascii(s) => {
                o.buf.extend_from_slice(s.as_bytes());
                o.buf.push(0);
                s.len() + 1
            }
            Value::Short(v) => {
                v.iter().for_each(|&x| o.u16(x));
                v.len()
            }
            Value::Long(v) => {
                v.iter().for_each(|&x| o.u32(x));
                v.len()
            }
            Value::Rational(v) => {
                v.iter().for_each(|&(n, d)| {
                    o.u32(n);
                    o.u32(d)
                });
                v.len()
            }
            Value::Long8(v) => {
                v.iter().for_each(|&x| o.u64(x));
                v.len()
            }
            Value::Claim { count, .. } => return (*count, Vec::new()),
        };
        (count as u64, o.buf)
    }
}

impl Tiff {
    /// A file of one flavour with these IFDs.
    pub fn new(variant: Variant, ifds: Vec<Ifd>) -> Tiff {
        Tiff { variant, ifds, loop_to: None, ifds_first: false }
    }

    /// Serialise the IFD chain starting at file offset `start` (even), with the chunks of IFD
    /// `i` at `locs[i]`. Returns the bytes and the offset of each IFD.
    fn ifd_block(&self, start: u64, locs: &[Vec<(u64, u64)>]) -> (Vec<u8>, Vec<u64>) {
        let v = self.variant;
        let mut o = Out { buf: Vec::new(), be: v.big_endian() };
        let pos = |o: &Out| start + o.buf.len() as u64;
        let mut ifd_offsets = Vec::new();
        let mut next_fields = Vec::new();
        for (i, ifd) in self.ifds.iter().enumerate() {
            let entries = ifd.entries(v, &locs[i]);
            // Out-of-line values first, then the directory that points to them.
            let mut values = Vec::new(); // (field type, count, inline bytes or offset)
            for (t, val) in &entries {
                let (count, bytes) = val.encode(v.big_endian());
                let field = if let Value::Claim { offset, .. } = val {
                    let mut f = Out { buf: Vec::new(), be: v.big_endian() };
                    if v.bigtiff() {
                        f.u64(*offset)
                    } else {
                        f.u32(*offset as u32)
                    }
                    f.buf
                } else if bytes.len() <= v.inline_cap() {
                    let mut b = bytes.clone();
                    b.resize(v.inline_cap(), 0);
                    b
                } else {
                    o.pad_even();
                    let off = pos(&o);
                    o.buf.extend_from_slice(&bytes);
                    let mut f = Out { buf: Vec::new(), be: v.big_endian() };
                    if v.bigtiff() {
                        f.u64(off)
                    } else {
                        f.u32(u32::try_from(off).expect("classic TIFF offset > 4 GiB"))
                    }
                    f.buf
                };
                values.push((*t, val.field_type(), count, field));
            }
            o.pad_even();
            ifd_offsets.push(pos(&o));
            if v.bigtiff() {
                o.u64(values.len() as u64);
            } else {
                o.u16(values.len() as u16);
            }
            for (t, ft, count, field) in values {
                o.u16(t);
                o.u16(ft);
                if v.bigtiff() {
                    o.u64(count);
                } else {
                    o.u32(count as u32);
                }
                o.buf.extend_from_slice(&field);
            }
            next_fields.push(o.buf.len());
            if v.bigtiff() {
                o.u64(0);
            } else {
                o.u32(0);
            }
        }
        // Patch the "next IFD" fields.
        for i in 0..self.ifds.len() {
            let next = if i + 1 < self.ifds.len() { ifd_offsets[i + 1] } else { self.loop_to.map_or(0, |k| ifd_offsets[k]) };
            let mut f = Out { buf: Vec::new(), be: v.big_endian() };
            if v.bigtiff() {
                f.u64(next)
            } else {
                f.u32(next as u32)
            }
            o.buf[next_fields[i]..next_fields[i] + f.buf.len()].copy_from_slice(&f.buf);
        }
        (o.buf, ifd_offsets)
    }

    /// Chunk locations when the chunk data starts at `start`, and the data itself.
    fn data_block(&self, start: u64) -> (Vec<u8>, Vec<Vec<(u64, u64)>>) {
        let mut data = Vec::new();
        let mut locs = Vec::new();
        for ifd in &self.ifds {
            let mut l = vec![(0, 0); ifd.chunks.len()];
            let order: Vec<usize> = ifd.write_order.clone().unwrap_or_else(|| (0..ifd.chunks.len()).collect());
            for k in order {
                l[k] = match &ifd.chunks[k] {
                    Chunk::Data(d) => {
                        let off = start + data.len() as u64;
                        data.extend_from_slice(d);
                        (off, d.len() as u64)
                    }
                    Chunk::Missing => (0, 0),
                    Chunk::Raw { offset, byte_count } => (*offset, *byte_count),
                };
            }
            locs.push(l);
        }
        (data, locs)
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let v = self.variant;
        let hl = v.header_len();
        let (data, ifds, first) = if self.ifds_first {
            // The IFD block's size does not depend on the chunk offsets: size it with dummies.
            let (_, dummy) = self.data_block(0);
            let (probe, _) = self.ifd_block(hl, &dummy);
            let data_start = hl + probe.len() as u64;
            let (data, locs) = self.data_block(data_start);
            let (block, offs) = self.ifd_block(hl, &locs);
            assert_eq!(block.len(), probe.len());
            let mut all = block;
            all.extend_from_slice(&data);
            (all, Vec::new(), offs.first().copied().unwrap_or(0))
        } else {
            let (data, locs) = self.data_block(hl);
            let ifd_start = (hl + data.len() as u64 + 1) & !1;
            let (block, offs) = self.ifd_block(ifd_start, &locs);
            let mut d = data;
            if (hl + d.len() as u64) % 2 == 1 {
                d.push(0);
            }
            (d, block, offs.first().copied().unwrap_or(0))
        };
        let mut o = Out { buf: Vec::new(), be: v.big_endian() };
        o.buf.extend_from_slice(if v.big_endian() { b"MM" } else { b"II" });
        if v.bigtiff() {
            o.u16(43);
            o.u16(8);
            o.u16(0);
            o.u64(first);
        } else {
            o.u16(42);
            o.u32(first as u32);
        }
        o.buf.extend_from_slice(&data);
        o.buf.extend_from_slice(&ifds);
        o.buf
    }

    /// Write the file.
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.to_bytes()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// Cut an interleaved 8-bit image (`spp` samples per pixel, `width × height`) into
/// `tw × th` tiles, row-major, each a full tile; samples outside the image are `pad` (one pixel,
/// `spp` bytes), so tile padding is recognisable.
pub fn cut_tiles(pixels: &[u8], width: usize, height: usize, spp: usize, tw: usize, th: usize, pad: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(pixels.len(), width * height * spp);
    assert_eq!(pad.len(), spp);
    let mut tiles = Vec::new();
    for ty in 0..height.div_ceil(th) {
        for tx in 0..width.div_ceil(tw) {
            let mut t = Vec::with_capacity(tw * th * spp);
            for y in ty * th..(ty + 1) * th {
                for x in tx * tw..(tx + 1) * tw {
                    if x < width && y < height {
                        t.extend_from_slice(&pixels[(y * width + x) * spp..(y * width + x + 1) * spp]);
                    } else {
                        t.extend_from_slice(pad);
                    }
                }
            }
            tiles.push(t);
        }
    }
    tiles
}

/// Split an interleaved chunk (`spp` samples per pixel) into `spp` planes.
pub fn to_planes(chunk: &[u8], spp: usize) -> Vec<Vec<u8>> {
    (0..spp).map(|p| chunk.iter().skip(p).step_by(spp).copied().collect()).collect()
}

/// Apply TIFF horizontal differencing (Predictor 2) in place to rows of `row_len` bytes with
/// `stride` samples per pixel.
pub fn predict_horizontal(data: &mut [u8], row_len: usize, stride: usize) {
    for row in data.chunks_exact_mut(row_len) {
        for i in (stride..row.len()).rev() {
            row[i] = row[i].wrapping_sub(row[i - stride]);
        }
    }
}

/// Cut strips of `rows_per_strip` rows (the last strip holds only the remaining rows).
pub fn cut_strips(pixels: &[u8], width: usize, spp: usize, rows_per_strip: usize) -> Vec<Vec<u8>> {
    pixels.chunks(width * spp * rows_per_strip).map(<[u8]>::to_vec).collect()
}

/// A file path under the system temp directory, unique per process and call, removed on drop.
pub struct TempPath(pub std::path::PathBuf);

impl TempPath {
    /// A fresh path ending in `name` (nothing is created).
    pub fn new(name: &str) -> TempPath {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        TempPath(std::env::temp_dir().join(format!("slidestream-test-{}-{n}-{name}", std::process::id())))
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Deterministic pseudo-random numbers (xorshift64*), so tests need no RNG crate.
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `[lo, hi)` (hi > lo).
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo) as u64) as i64
    }
    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> 56) as u8).collect()
    }
}
