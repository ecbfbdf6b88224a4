//! Host half of the SM JPEG decoder (issue 32): a baseline JPEG stream parsed and checked into
//! the descriptors the GPU's entropy-decoding and IDCT kernels read (`jpeg_sm.h`), and the same
//! C functions run on the host, so that CI tests the decoder's arithmetic against libjpeg-turbo
//! on machines without a GPU.
//!
//! What the SM decoder takes ([`prepare`]): sequential Huffman JPEG (SOF0 / SOF1) of 8-bit
//! samples, 1 or 3 components, one scan holding every component, sampling factors 1..4 with at
//! most 10 blocks per MCU (T.81 B.2.2, A.2.3), every table the scan names defined in the stream
//! (TIFF tiles after [`super::jpeg::splice`] with the level's JPEGTables), any restart
//! interval. Everything else (progressive, lossless, arithmetic coding, 12-bit, multi-scan,
//! tables left to libjpeg's defaults) is [`SmError::Unsupported`]: those tiles stay on the
//! other decoders. A stream that breaks a rule libjpeg-turbo enforces as an error or a warning
//! (TJPARAM_STOPONWARNING makes warnings errors on the CPU path) is [`SmError::Corrupt`]:
//! bad table definitions (jdhuff.c `jpeg_make_d_derived_tbl`), DC symbols over 15, bad
//! sampling factors or MCU sizes (jdinput.c), non-sequential scan parameters
//! (JWRN_NOT_SEQUENTIAL), restart markers out of sequence or missing (JWRN_MUST_RESYNC), no EOI
//! (JWRN_JPEG_EOF). Errors inside the entropy-coded data are found by the decoder itself
//! ([`SmStatus`]).

use std::ffi::c_int;

mod parse;
pub use parse::prepare;
// Used by the GPU engine and the examples (`cuda`, `unstable`).
#[cfg_attr(not(any(feature = "cuda", feature = "unstable")), allow(unused_imports))]
pub use parse::{prepare_with, TableMemo};

/// Destuffed bytes of its predecessor's chunk each lane of the warp decoder decodes first, from
/// a guessed state, to reach its own chunk's first symbol boundary in step (`smj_ss_warm` in
/// `jpeg_sm_warp_sync.h`): without it nearly every lane's guessed start is off and decodes its
/// chunk twice. Measured on the host (`warm_ups_and_periodic_runs_shorten_the_critical_path`):
/// with 64 bytes 124 of CMU-1-Small-Region's 130 level-0 tiles need no round of decoding again
/// (16 bytes: 52, 32: 105, 128: 123; none without).
pub const SM_WARM_BYTES: c_int = 64;
use std::mem::{offset_of, size_of};

/// A Huffman table in libjpeg's derived form (`jpeg_sm.h` `SmjHuff`; jdhuff.c
/// `jpeg_make_d_derived_tbl`).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SmjHuff {
    /// Next 8 bits of the stream → `(code length << 8) | symbol` for codes of up to 8 bits; 0
    /// when the code is longer.
    pub look: [u16; 256],
    /// Largest code of each length 1..16 (-1: no code of that length); `[17]` is a sentinel.
    pub maxcode: [i32; 18],
    /// Index into `huffval` of code `c` of length `l`: `c + valoffset[l]`.
    pub valoffset: [i32; 18],
    /// Symbols in code order.
    pub huffval: [u8; 256],
}

impl Default for SmjHuff {
    fn default() -> Self {
        SmjHuff { look: [0; 256], maxcode: [-1; 18], valoffset: [0; 18], huffval: [0; 256] }
    }
}

/// The tables of one stream's scan (`SmjTables`): four DC and four AC Huffman tables and four
/// quantisation tables in natural (row-major) order. Streams sharing JPEGTables share one.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SmjTables {
    /// DC tables by index (Th of DHT).
    pub dc: [SmjHuff; 4],
    /// AC tables by index.
    pub ac: [SmjHuff; 4],
    /// Quantisation tables by index (Tq of DQT), natural order, 8- or 16-bit values.
    pub quant: [[u16; 64]; 4],
}

impl Default for SmjTables {
    fn default() -> Self {
        SmjTables { dc: [SmjHuff::default(); 4], ac: [SmjHuff::default(); 4], quant: [[0; 64]; 4] }
    }
}

/// One tile's geometry and table choices (`SmjTile`). `coef` and `pix` are device (or host)
/// addresses filled in by whoever places the tile's buffers.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct SmjTile {
    /// Address of the tile's 16-bit coefficients: [`SmjTile::coefficients`] of them.
    pub coef: u64,
    /// Address of the tile's samples after the IDCT: component planes at the same offsets as
    /// the coefficients (one byte per coefficient), `bw[c] × 8` bytes per row.
    pub pix: u64,
    /// Offset of component `c`'s plane, in coefficients (and in sample bytes).
    pub plane: [u64; 4],
    /// Index of the tile's [`SmjTables`] in the batch.
    pub tables: i32,
    /// Components in the scan, 1 or 3, in scan order.
    pub ncomp: i32,
    /// MCUs across.
    pub mcux: i32,
    /// MCUs down.
    pub mcuy: i32,
    /// Blocks per MCU across, per component (1 for a one-component scan, T.81 A.2.2).
    pub h: [i32; 4],
    /// Blocks per MCU down.
    pub v: [i32; 4],
    /// Blocks across component `c`'s plane (`mcux × h[c]`).
    pub bw: [i32; 4],
    /// Blocks down (`mcuy × v[c]`).
    pub bh: [i32; 4],
    /// Quantisation table of each component.
    pub tq: [i32; 4],
    /// DC Huffman table of each component.
    pub td: [i32; 4],
    /// AC Huffman table of each component.
    pub ta: [i32; 4],
    /// Image width in pixels (SOF).
    pub width: i32,
    /// Image height in pixels.
    pub height: i32,
}

/// One entropy-coded segment (`SmjSegment`): a whole scan, or one restart interval.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct SmjSegment {
    /// Address of its first byte.
    pub data: u64,
    /// Bytes, ending before the marker (RSTn or EOI) that closes it.
    pub len: i32,
    /// Index of its tile in the batch.
    pub tile: i32,
    /// First MCU, row-major over the tile's MCU grid.
    pub mcu0: i32,
    /// MCUs in the segment.
    pub mcus: i32,
}

const _: () = assert!(
    size_of::<SmjHuff>() == 912
        && size_of::<SmjTables>() == 7808
        && size_of::<SmjTile>() == 184
        && offset_of!(SmjTile, tables) == 48
        && offset_of!(SmjTile, h) == 64
        && offset_of!(SmjTile, width) == 176
        && size_of::<SmjSegment>() == 24
        && offset_of!(SmjSegment, mcus) == 20
);

impl SmjTile {
    /// Coefficients (and IDCT output bytes) of the tile: 64 per block of every component plane.
    pub fn coefficients(&self) -> u64 {
        (0..self.ncomp.clamp(0, 4) as usize).map(|c| self.bw[c] as u64 * self.bh[c] as u64 * 64).sum()
    }

    /// Width × height in samples of component `c`'s IDCT output plane (whole blocks).
    pub fn plane_size(&self, c: usize) -> (usize, usize) {
        (self.bw[c] as usize * 8, self.bh[c] as usize * 8)
    }

    /// Samples of component `c` that lie in the image (libjpeg's `downsampled_width ×
    /// downsampled_height`: `ceil(size × samp / max_samp)`).
    pub fn component_size(&self, c: usize) -> (usize, usize) {
        let hmax = self.h[..self.ncomp as usize].iter().copied().max().unwrap_or(1).max(1) as usize;
        let vmax = self.v[..self.ncomp as usize].iter().copied().max().unwrap_or(1).max(1) as usize;
        ((self.width as usize * self.h[c] as usize).div_ceil(hmax), (self.height as usize * self.v[c] as usize).div_ceil(vmax))
    }
}

/// Why a stream does not go to the SM decoder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmError {
    /// Valid JPEG the SM decoder does not take (the other decoders do).
    #[error("not for the SM decoder: {0}")]
    Unsupported(String),
    /// A stream libjpeg-turbo rejects (error or warning), for the reason given.
    #[error("corrupt JPEG stream: {0}")]
    Corrupt(String),
}

/// Outcome of one segment's entropy decoding (`SMJ_*` of `jpeg_sm.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmStatus {
    /// Every MCU decoded.
    Ok,
    /// A code no Huffman table holds (libjpeg: JWRN_HUFF_BAD_CODE).
    BadCode,
    /// The segment ended before its last MCU (JWRN_HIT_MARKER).
    ShortData,
    /// MCU range outside the tile (a descriptor error, never from [`prepare`]).
    BadSegment,
    /// Whole bytes of data left after the segment's last MCU (libjpeg: JWRN_EXTRANEOUS_DATA,
    /// unless its bit buffer had already read them): the tile goes to libjpeg-turbo.
    Trailing,
}

impl SmStatus {
    /// From the kernel's code; unknown codes are `BadSegment`.
    pub fn from_code(c: i32) -> SmStatus {
        match c {
            0 => SmStatus::Ok,
            1 => SmStatus::BadCode,
            2 => SmStatus::ShortData,
            4 => SmStatus::Trailing,
            _ => SmStatus::BadSegment,
        }
    }
}

/// A stream parsed for the SM decoder: its tables, geometry and entropy-coded segments.
#[derive(Clone)]
pub struct SmPrepared {
    /// The tables its scan uses (`tables` of [`SmPrepared::tile`] is 0 until the batch sets it),
    /// shared with the other streams [`prepare_with`] parsed with the same table bytes.
    pub tables: std::sync::Arc<SmjTables>,
    /// The DHT and DQT marker segments in stream order: equal bytes, equal [`SmPrepared::tables`]
    /// (the key to share one table set among a level's tiles).
    pub table_key: Vec<u8>,
    /// Geometry; `coef`, `pix` and `tables` are 0.
    pub tile: SmjTile,
    /// Segments with `data` = byte offset into the stream and `tile` = 0.
    pub segments: Vec<SmjSegment>,
    /// `true` when the components are R, G, B (Adobe APP14 transform 0, or component ids 'R',
    /// 'G', 'B' without JFIF/Adobe markers: jdapimin.c `default_decompress_parms`); `false`
    /// for YCbCr (and one-component) streams.
    pub rgb_coded: bool,
}

/// The complete JPEG streams of up to `max` tiles of `level` of `slide` (every `step`-th tile in
/// row-major order, `step` ≥ 1; missing and empty tiles skipped), framed as every decoder gets
/// them ([`super::stream::frame_jpeg`]: JPEGTables spliced, NDPI restart runs behind their
/// header). Levels that are not JPEG, or that are decoded with DCT scaling, give none.
///
/// # Errors
/// Read errors of the slide's source, framing errors of a tile.
pub fn level_streams(slide: &crate::slide::Slide, level: usize, step: usize, max: usize) -> crate::error::Result<Vec<Vec<u8>>> {
    use crate::error::Error;
    use crate::index::Compression;
    use crate::io::ByteSource;
    let Some(lv) = slide.index().levels.get(level) else { return Ok(Vec::new()) };
    let img = &lv.image;
    if img.codec.compression != Compression::Jpeg || img.codec.jpeg_scale() > 1 {
        return Ok(Vec::new());
    }
    let src = slide.source();
    let at = crate::error::Location::file(slide.index().sources.first().map(|s| s.path.as_path()).unwrap_or(std::path::Path::new("")));
    let mut out = Vec::new();
    let across = img.tiles_across();
    let total = across * img.tiles_down();
    let mut k = 0u64;
    while k < total && out.len() < max {
        let (col, row) = (k % across, k / across);
        k += step.max(1) as u64;
        let Some(loc) = img.tile_locs(col, row).next() else { continue };
        if loc.length == 0 || loc.length > crate::limits::LIMITS.tile_bytes {
            continue;
        }
        let mut raw = vec![0u8; loc.length as usize];
        src.read_exact_at(&mut raw, crate::io::multi::address(loc)).map_err(|e| Error::io(&at, e))?;
        let mut s = Vec::new();
        super::stream::frame_jpeg(&img.codec, &raw, &mut s).map_err(|e| Error::decode(&at, e))?;
        out.push(s);
    }
    Ok(out)
}

extern "C" {
    fn slidestream_smj_decode_segment(data: *const u8, len: c_int, tabs: *const SmjTables, t: *const SmjTile, mcu0: c_int, mcus: c_int) -> c_int;
    fn slidestream_smj_idct_islow(coef: *const i16, q: *const u16, out: *mut u8, stride: c_int);
    #[cfg(test)]
    fn slidestream_smj_ss_decode_segment(
        data: *const u8,
        len: c_int,
        tabs: *const SmjTables,
        t: *const SmjTile,
        mcu0: c_int,
        mcus: c_int,
        warm: c_int,
        periodic: c_int,
        rounds: *mut c_int,
        critical: *mut i64,
    ) -> c_int;
    fn slidestream_smj_layout(out: *mut u64, n: c_int) -> c_int;
    fn slidestream_smj_block_in_window(t: *const SmjTile, c: c_int, bx: c_int, by: c_int, win: *const c_int) -> c_int;
}

/// The sizes and offsets the C compiler gives the descriptors, in the order of
/// `jpeg_sm_host.c` (tested against the Rust layout).
pub fn c_layout() -> Vec<u64> {
    let mut v = vec![0u64; 16];
    // SAFETY: writes at most `n` values.
    let n = unsafe { slidestream_smj_layout(v.as_mut_ptr(), v.len() as c_int) };
    v.truncate(n.max(0) as usize);
    v
}

/// The MCUs a region-aware decode runs the IDCT for, to convert the pixels of `part` (relative
/// to the tile's top-left, inside its image) exactly: `[col0, row0, col1, row1]` of the tile's
/// MCU grid, ends exclusive; the whole grid for `None`. Along an axis where chroma is
/// subsampled, `part` is first widened by one pixel on each side: libjpeg-turbo's fancy
/// upsampling (jdsample.c `h2v1`/`h1v2`/`h2v2_fancy_upsample`) reads, besides the nearest chroma
/// sample, the one before it for an even pixel (covering pixels x − 2 and x − 1) and the one
/// after it for an odd pixel (x + 1 and x + 2); MCU edges fall on even pixels, so each of those
/// samples lies in the MCU of pixel x − 1 or x + 1. Box upsampling reads none. Clamped to the
/// grid.
pub fn idct_window(t: &SmjTile, part: Option<crate::codec::PartRect>) -> [c_int; 4] {
    let whole = [0, 0, t.mcux, t.mcuy];
    let Some(p) = part else { return whole };
    let n = t.ncomp.clamp(1, 4) as usize;
    let hmax = t.h[..n].iter().copied().max().unwrap_or(1).max(1) as i64;
    let vmax = t.v[..n].iter().copied().max().unwrap_or(1).max(1) as i64;
    let (mx, my) = if n == 1 { (1, 1) } else { (hmax, vmax) };
    let sub_x = t.h[..n].iter().any(|&h| i64::from(h) < hmax);
    let sub_y = t.v[..n].iter().any(|&v| i64::from(v) < vmax);
    let (gx, gy) = (i64::from(sub_x), i64::from(sub_y));
    let (x0, y0) = ((i64::from(p.x) - gx).max(0), (i64::from(p.y) - gy).max(0));
    let (x1, y1) = (i64::from(p.x) + i64::from(p.w) + gx, i64::from(p.y) + i64::from(p.h) + gy);
    let (cw, ch) = (8 * mx, 8 * my);
    let clamp = |v: i64, hi: c_int| v.clamp(0, i64::from(hi)) as c_int;
    [clamp(x0 / cw, t.mcux), clamp(y0 / ch, t.mcuy), clamp((x1 + cw - 1) / cw, t.mcux), clamp((y1 + ch - 1) / ch, t.mcuy)]
}

/// Whether the IDCT of a region-aware decode runs for block `(bx, by)` of component `c`'s
/// plane with window `win` ([`idct_window`]): the C function the `sm_idct` kernel calls.
pub fn block_in_window(t: &SmjTile, c: usize, bx: usize, by: usize, win: &[c_int; 4]) -> bool {
    // SAFETY: reads `t` and the 4 window entries.
    unsafe { slidestream_smj_block_in_window(t, c as c_int, bx as c_int, by as c_int, win.as_ptr()) != 0 }
}

/// Decode `stream` with the SM decoder's own functions on the host: every segment's entropy
/// decoding, then the IDCT of every block. Returns each component's plane of
/// [`SmjTile::plane_size`] samples (whole blocks, before chroma upsampling and colour
/// conversion: what libjpeg-turbo's raw-data output holds), and the prepared stream.
///
/// # Errors
/// [`prepare`]'s errors, and [`SmError::Corrupt`] naming the [`SmStatus`] of the first segment
/// that fails.
pub fn decode_planes_host(stream: &[u8]) -> Result<(Vec<Vec<u8>>, SmPrepared), SmError> {
    decode_planes_host_window(stream, None, 0)
}

/// [`decode_planes_host`] as a region-aware decode runs it: every segment entropy-decoded (a
/// damaged scan fails whatever the window), the IDCT only for the blocks in `win`
/// ([`idct_window`], [`block_in_window`]; `None`: all); the other samples are `fill`.
///
/// # Errors
/// As [`decode_planes_host`].
pub fn decode_planes_host_window(stream: &[u8], win: Option<[c_int; 4]>, fill: u8) -> Result<(Vec<Vec<u8>>, SmPrepared), SmError> {
    let p = prepare(stream)?;
    let n = p.tile.coefficients() as usize;
    let mut coef = vec![0i16; n];
    let mut pix = vec![0u8; n];
    let mut t = p.tile;
    t.coef = coef.as_mut_ptr() as u64;
    t.pix = pix.as_mut_ptr() as u64;
    for g in &p.segments {
        let data = &stream[g.data as usize..g.data as usize + g.len as usize];
        // SAFETY: `t` describes `coef` (sized by `coefficients()`); the C side bounds reads by
        // `len` and writes by the MCU grid, which `prepare` checked against the segment.
        let rc = unsafe { slidestream_smj_decode_segment(data.as_ptr(), g.len, &*p.tables, &t, g.mcu0, g.mcus) };
        let st = SmStatus::from_code(rc);
        if st != SmStatus::Ok {
            return Err(SmError::Corrupt(format!("entropy-coded data: {st:?} in the segment of MCU {}", g.mcu0)));
        }
    }
    let mut planes = Vec::with_capacity(t.ncomp as usize);
    for c in 0..t.ncomp as usize {
        let (pw, ph) = p.tile.plane_size(c);
        let base = t.plane[c] as usize;
        let q = &p.tables.quant[t.tq[c] as usize];
        let mut out = vec![fill; pw * ph];
        for by in 0..t.bh[c] as usize {
            for bx in 0..t.bw[c] as usize {
                if win.is_some_and(|w| !block_in_window(&t, c, bx, by, &w)) {
                    continue;
                }
                let blk = &coef[base + (by * t.bw[c] as usize + bx) * 64..][..64];
                // SAFETY: 64 coefficients, 64 table entries, 8 rows of 8 bytes `pw` apart inside `out`.
                unsafe { slidestream_smj_idct_islow(blk.as_ptr(), q.as_ptr(), out[by * 8 * pw + bx * 8..].as_mut_ptr(), pw as c_int) };
            }
        }
        planes.push(out);
    }
    Ok((planes, p))
}

/// What the warp decoder's phases cost on one stream (host model of `sm_huffman_warp`).
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WarpCost {
    /// The most rounds of decoding again any segment took (0: every lane started right).
    pub(crate) rounds: i32,
    /// Symbols along the critical path of the slowest segment (each phase costs its busiest
    /// lane's symbols): what the kernel's time for the tile follows.
    pub(crate) critical_symbols: i64,
}

/// The 16-bit coefficients of every block of `stream` (component planes as [`SmjTile`]
/// describes them) decoded on the host by the serial segment decoder (`warp` `None`), or by the
/// warp decoder's phases (`smj_ss_*`, lanes run in turn) as the engine runs them, with warm-ups
/// of `Some(bytes)` and the periodic shortcut; with the warp decoder, what it cost.
#[cfg(test)]
pub(crate) fn coefficients_host(stream: &[u8], warp: Option<c_int>) -> Result<(Vec<i16>, WarpCost), SmError> {
    match warp {
        None => coefficients_host_with(stream, -1, false),
        Some(warm) => coefficients_host_with(stream, warm, true),
    }
}

/// [`coefficients_host`] with the warp decoder's options spelled out: `warm` < 0 runs the
/// serial decoder, else the warp decoder with warm-ups of `warm` bytes and, if `periodic`, the
/// periodic shortcut (`smj_ss_sync`).
#[cfg(test)]
pub(crate) fn coefficients_host_with(stream: &[u8], warm: c_int, periodic: bool) -> Result<(Vec<i16>, WarpCost), SmError> {
    let p = prepare(stream)?;
    // Not zeroed where the decoders write every block themselves: poisoned, so a block they
    // miss shows.
    let mut coef = vec![0x5A5Ai16; p.tile.coefficients() as usize];
    let mut t = p.tile;
    t.coef = coef.as_mut_ptr() as u64;
    let mut cost = WarpCost::default();
    for g in &p.segments {
        let data = &stream[g.data as usize..g.data as usize + g.len as usize];
        let (mut rounds, mut critical) = (0, 0i64);
        // SAFETY: as in `decode_planes_host`; `rounds` and `critical` are locals.
        let rc = unsafe {
            if warm >= 0 {
                slidestream_smj_ss_decode_segment(data.as_ptr(), g.len, &*p.tables, &t, g.mcu0, g.mcus, warm, c_int::from(periodic), &mut rounds, &mut critical)
            } else {
                slidestream_smj_decode_segment(data.as_ptr(), g.len, &*p.tables, &t, g.mcu0, g.mcus)
            }
        };
        cost.rounds = cost.rounds.max(rounds);
        cost.critical_symbols = cost.critical_symbols.max(critical);
        let st = SmStatus::from_code(rc);
        if st != SmStatus::Ok {
            return Err(SmError::Corrupt(format!("entropy-coded data: {st:?} in the segment of MCU {}", g.mcu0)));
        }
    }
    Ok((coef, cost))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod window_tests;
