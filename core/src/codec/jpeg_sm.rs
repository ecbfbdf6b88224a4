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
use std::mem::{offset_of, size_of};

/// A Huffman table in libjpeg's derived form (`jpeg_sm.h` `SmjHuff`; jdhuff.c
/// `jpeg_make_d_derived_tbl`).
#[repr(C)]
#[derive(Clone, Copy)]
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
#[derive(Clone, Copy)]
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
    /// The tables its scan uses (`tables` of [`SmPrepared::tile`] is 0 until the batch sets it).
    pub tables: Box<SmjTables>,
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

fn be16(s: &[u8], i: usize) -> Option<usize> {
    Some(((*s.get(i)? as usize) << 8) | *s.get(i + 1)? as usize)
}

/// Natural-order index of each zigzag position (T.81 Figure A.6).
const ZIGZAG: [usize; 64] = [
    0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5, 12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38,
    31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
];

/// libjpeg's derived table from DHT's code-length counts and symbols (jdhuff.c
/// `jpeg_make_d_derived_tbl`: the same checks, the same errors).
fn derive(bits: &[u8; 17], vals: &[u8], dc: bool) -> Result<SmjHuff, SmError> {
    let mut t = SmjHuff::default();
    let mut sizes = Vec::with_capacity(257);
    for (l, &n) in bits.iter().enumerate().skip(1) {
        for _ in 0..n {
            sizes.push(l as u32);
        }
    }
    if sizes.len() > 256 || sizes.len() != vals.len() {
        return Err(SmError::Corrupt("bogus Huffman table definition".into()));
    }
    let mut codes = vec![0u32; sizes.len()];
    let (mut code, mut p) = (0u32, 0usize);
    let mut si = sizes.first().copied().unwrap_or(1);
    while p < sizes.len() {
        while p < sizes.len() && sizes[p] == si {
            codes[p] = code;
            code += 1;
            p += 1;
        }
        if code >= 1 << si {
            return Err(SmError::Corrupt("bogus Huffman table definition (codes overflow their length)".into()));
        }
        code <<= 1;
        si += 1;
    }
    let mut p = 0usize;
    for (l, &n) in bits.iter().enumerate().skip(1) {
        let n = n as usize;
        if n > 0 {
            t.valoffset[l] = p as i32 - codes[p] as i32;
            p += n;
            t.maxcode[l] = codes[p - 1] as i32;
        } else {
            t.maxcode[l] = -1;
        }
    }
    t.valoffset[17] = 0;
    t.maxcode[17] = 0xFFFFF;
    let mut p = 0usize;
    for (l, &n) in bits.iter().enumerate().take(9).skip(1) {
        for _ in 0..n {
            let first = (codes[p] as usize) << (8 - l);
            for k in 0..(1usize << (8 - l)) {
                t.look[first + k] = ((l as u16) << 8) | vals[p] as u16;
            }
            p += 1;
        }
    }
    t.huffval[..vals.len()].copy_from_slice(vals);
    if dc && vals.iter().any(|&v| v > 15) {
        return Err(SmError::Corrupt("bogus Huffman table definition (DC symbol over 15)".into()));
    }
    Ok(t)
}

/// Parse and check a complete JPEG stream (SOI first; TIFF tiles spliced with their JPEGTables)
/// for the SM decoder. Costs one pass over the markers and one `memchr`-style pass over the
/// entropy-coded data (for restart markers and the EOI); allocates the table set (7.8 KB) and
/// one segment per restart interval.
///
/// # Errors
/// [`SmError::Unsupported`] for streams the SM decoder does not take, [`SmError::Corrupt`] for
/// streams libjpeg-turbo rejects (module docs).
pub fn prepare(s: &[u8]) -> Result<SmPrepared, SmError> {
    let corrupt = |m: &str| SmError::Corrupt(m.to_string());
    let unsupported = |m: &str| SmError::Unsupported(m.to_string());
    if s.len() < 4 || s[0] != 0xFF || s[1] != 0xD8 {
        return Err(corrupt("not a JPEG stream (no SOI)"));
    }
    let mut tables = Box::<SmjTables>::default();
    let mut key = Vec::new();
    let (mut dc_def, mut ac_def, mut q_def) = ([false; 4], [false; 4], [false; 4]);
    let mut restart = 0usize;
    // Frame components: (id, h, v, tq).
    let mut frame: Vec<(u8, i32, i32, i32)> = Vec::new();
    let (mut width, mut height) = (0usize, 0usize);
    let (mut adobe, mut jfif, mut transform) = (false, false, 1u8);
    let mut i = 2usize;
    let (scan, data_start) = loop {
        // Markers may be preceded by fill bytes (0xFF); anything else between markers is an
        // error to libjpeg only as a warning (JWRN_EXTRANEOUS_DATA), an error here.
        if s.get(i) != Some(&0xFF) {
            return Err(corrupt("extraneous bytes between markers"));
        }
        while s.get(i + 1) == Some(&0xFF) {
            i += 1;
        }
        let Some(&m) = s.get(i + 1) else { return Err(corrupt("stream ends before the scan")) };
        i += 2;
        match m {
            0xD8 | 0xD9 | 0x01 | 0xD0..=0xD7 => return Err(corrupt(&format!("unexpected marker 0xFF{m:02X} before the scan"))),
            _ => {}
        }
        let len = be16(s, i).ok_or_else(|| corrupt("stream ends inside a marker"))?;
        if len < 2 || i + len > s.len() {
            return Err(corrupt(&format!("marker 0xFF{m:02X} of length {len} runs past the stream")));
        }
        let seg = &s[i + 2..i + len];
        match m {
            0xC4 => {
                key.extend_from_slice(&s[i - 2..i + len]);
                let mut k = 0;
                while k < seg.len() {
                    let (tc, th) = (seg[k] >> 4, (seg[k] & 15) as usize);
                    if tc > 1 || th > 3 {
                        return Err(corrupt(&format!("bogus DHT index 0x{:02X}", seg[k])));
                    }
                    let mut bits = [0u8; 17];
                    let counts = seg.get(k + 1..k + 17).ok_or_else(|| corrupt("DHT runs past its marker"))?;
                    bits[1..].copy_from_slice(counts);
                    let n: usize = counts.iter().map(|&c| c as usize).sum();
                    if n > 256 {
                        return Err(corrupt("bogus Huffman table definition (over 256 symbols)"));
                    }
                    let vals = seg.get(k + 17..k + 17 + n).ok_or_else(|| corrupt("DHT runs past its marker"))?;
                    let t = derive(&bits, vals, tc == 0)?;
                    if tc == 0 {
                        tables.dc[th] = t;
                        dc_def[th] = true;
                    } else {
                        tables.ac[th] = t;
                        ac_def[th] = true;
                    }
                    k += 17 + n;
                }
            }
            0xDB => {
                key.extend_from_slice(&s[i - 2..i + len]);
                let mut k = 0;
                while k < seg.len() {
                    let (pq, tq) = (seg[k] >> 4, (seg[k] & 15) as usize);
                    if pq > 1 || tq > 3 {
                        return Err(corrupt(&format!("bogus DQT index 0x{:02X}", seg[k])));
                    }
                    let bytes = if pq == 0 { 64 } else { 128 };
                    let v = seg.get(k + 1..k + 1 + bytes).ok_or_else(|| corrupt("DQT runs past its marker"))?;
                    for (z, &nat) in ZIGZAG.iter().enumerate() {
                        tables.quant[tq][nat] = if pq == 0 { v[z] as u16 } else { ((v[2 * z] as u16) << 8) | v[2 * z + 1] as u16 };
                    }
                    q_def[tq] = true;
                    k += 1 + bytes;
                }
            }
            0xDD => {
                restart = be16(seg, 0).ok_or_else(|| corrupt("bogus DRI length"))?;
            }
            0xC0 | 0xC1 => {
                if !frame.is_empty() {
                    return Err(corrupt("two SOF markers"));
                }
                if seg.len() < 6 {
                    return Err(corrupt("bogus SOF length"));
                }
                if seg[0] != 8 {
                    return Err(unsupported(&format!("{}-bit samples", seg[0])));
                }
                height = be16(seg, 1).unwrap_or(0);
                width = be16(seg, 3).unwrap_or(0);
                let nf = seg[5] as usize;
                if height == 0 {
                    return Err(unsupported("height from a DNL marker"));
                }
                if width == 0 || nf == 0 || seg.len() != 6 + 3 * nf {
                    return Err(corrupt("empty image or bogus SOF"));
                }
                if nf != 1 && nf != 3 {
                    return Err(unsupported(&format!("{nf} components")));
                }
                for c in 0..nf {
                    let b = &seg[6 + 3 * c..9 + 3 * c];
                    let (h, v) = ((b[1] >> 4) as i32, (b[1] & 15) as i32);
                    if !(1..=4).contains(&h) || !(1..=4).contains(&v) {
                        return Err(corrupt("bogus sampling factors"));
                    }
                    if b[2] > 3 {
                        return Err(corrupt("bogus quantisation table index"));
                    }
                    frame.push((b[0], h, v, b[2] as i32));
                }
            }
            0xC2 | 0xC6 | 0xCA | 0xCE => return Err(unsupported("progressive JPEG")),
            0xC3 | 0xC7 | 0xCB | 0xCF => return Err(unsupported("lossless JPEG")),
            0xC5 | 0xC9 | 0xCD | 0xCC => return Err(unsupported("hierarchical or arithmetic-coded JPEG")),
            0xE0 => jfif |= seg.starts_with(b"JFIF\0"),
            0xEE if seg.len() >= 12 && seg.starts_with(b"Adobe") => {
                adobe = true;
                transform = seg[11];
            }
            0xDA => break (seg, i + len),
            _ => {}
        }
        i += len;
    };
    if frame.is_empty() {
        return Err(corrupt("scan before SOF"));
    }
    let ns = *scan.first().ok_or_else(|| corrupt("bogus SOS"))? as usize;
    if scan.len() != 4 + 2 * ns || ns == 0 {
        return Err(corrupt("bogus SOS length"));
    }
    if ns != frame.len() {
        return Err(unsupported("multi-scan (non-interleaved) JPEG"));
    }
    let (ss, se, ahal) = (scan[1 + 2 * ns], scan[2 + 2 * ns], scan[3 + 2 * ns]);
    if ss != 0 || se != 63 || ahal != 0 {
        return Err(corrupt("non-sequential scan parameters in a sequential stream"));
    }
    let mut t = SmjTile { ncomp: ns as i32, width: width as i32, height: height as i32, ..Default::default() };
    let hmax = frame.iter().map(|f| f.1).max().unwrap_or(1);
    let vmax = frame.iter().map(|f| f.2).max().unwrap_or(1);
    let mut seen = [false; 4];
    let mut blocks_per_mcu = 0;
    for c in 0..ns {
        let (id, sel) = (scan[1 + 2 * c], scan[2 + 2 * c]);
        let fi = frame.iter().position(|f| f.0 == id).ok_or_else(|| corrupt("scan names a component the frame lacks"))?;
        if seen[fi] {
            return Err(corrupt("scan names a component twice"));
        }
        seen[fi] = true;
        let (td, ta) = ((sel >> 4) as usize, (sel & 15) as usize);
        if td > 3 || ta > 3 {
            return Err(corrupt("bogus Huffman table index in SOS"));
        }
        let tq = frame[fi].3 as usize;
        if !dc_def[td] || !ac_def[ta] {
            return Err(unsupported("Huffman table not defined in the stream (libjpeg's default tables)"));
        }
        if !q_def[tq] {
            return Err(corrupt("quantisation table not defined"));
        }
        let (h, v) = if ns == 1 { (1, 1) } else { (frame[fi].1, frame[fi].2) };
        t.h[c] = h;
        t.v[c] = v;
        t.tq[c] = tq as i32;
        t.td[c] = td as i32;
        t.ta[c] = ta as i32;
        blocks_per_mcu += h * v;
    }
    if blocks_per_mcu > 10 {
        return Err(corrupt("more than 10 blocks per MCU"));
    }
    let (mw, mh) = if ns == 1 { (8, 8) } else { (8 * hmax as usize, 8 * vmax as usize) };
    t.mcux = width.div_ceil(mw) as i32;
    t.mcuy = height.div_ceil(mh) as i32;
    let mut off = 0u64;
    for c in 0..ns {
        t.bw[c] = t.mcux * t.h[c];
        t.bh[c] = t.mcuy * t.v[c];
        t.plane[c] = off;
        off += t.bw[c] as u64 * t.bh[c] as u64 * 64;
    }
    let ids: Vec<u8> = frame.iter().map(|f| f.0).collect();
    let rgb_coded = ns == 3 && if adobe { transform == 0 } else { !jfif && ids == b"RGB" };

    // Entropy-coded segments: split at RSTn markers, ended by the first other marker.
    let total = t.mcux as usize * t.mcuy as usize;
    let nseg = if restart > 0 { total.div_ceil(restart) } else { 1 };
    let per = if restart > 0 { restart } else { total };
    let mut segments = Vec::with_capacity(nseg.min(1 << 16));
    let (mut start, mut j) = (data_start, data_start);
    let mut ended = false;
    while j + 1 < s.len() {
        if s[j] != 0xFF || s[j + 1] == 0 || s[j + 1] == 0xFF {
            j += 1 + (s[j] == 0xFF && s[j + 1] == 0) as usize;
            continue;
        }
        let m = s[j + 1];
        let k = segments.len();
        if k >= nseg {
            return Err(corrupt("more entropy-coded segments than the restart interval allows"));
        }
        let mcu0 = k * per;
        segments.push(SmjSegment { data: start as u64, len: (j - start) as i32, tile: 0, mcu0: mcu0 as i32, mcus: per.min(total - mcu0) as i32 });
        if (0xD0..=0xD7).contains(&m) {
            if restart == 0 || m != 0xD0 + (k % 8) as u8 {
                return Err(corrupt(&format!("restart marker 0xFF{m:02X} out of sequence")));
            }
            start = j + 2;
            j += 2;
        } else {
            ended = m == 0xD9;
            break;
        }
    }
    if !ended {
        return Err(corrupt("no EOI after the scan"));
    }
    if segments.len() != nseg {
        return Err(corrupt(&format!("{} restart intervals where the image has {nseg}", segments.len())));
    }
    if segments.iter().any(|g| g.len < 0) {
        return Err(corrupt("segment too long"));
    }
    Ok(SmPrepared { tables, table_key: key, tile: t, segments, rgb_coded })
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
    fn slidestream_smj_layout(out: *mut u64, n: c_int) -> c_int;
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

/// Decode `stream` with the SM decoder's own functions on the host: every segment's entropy
/// decoding, then the IDCT of every block. Returns each component's plane of
/// [`SmjTile::plane_size`] samples (whole blocks, before chroma upsampling and colour
/// conversion: what libjpeg-turbo's raw-data output holds), and the prepared stream.
///
/// # Errors
/// [`prepare`]'s errors, and [`SmError::Corrupt`] naming the [`SmStatus`] of the first segment
/// that fails.
pub fn decode_planes_host(stream: &[u8]) -> Result<(Vec<Vec<u8>>, SmPrepared), SmError> {
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
        let mut out = vec![0u8; pw * ph];
        for by in 0..t.bh[c] as usize {
            for bx in 0..t.bw[c] as usize {
                let blk = &coef[base + (by * t.bw[c] as usize + bx) * 64..][..64];
                // SAFETY: 64 coefficients, 64 table entries, 8 rows of 8 bytes `pw` apart inside `out`.
                unsafe { slidestream_smj_idct_islow(blk.as_ptr(), q.as_ptr(), out[by * 8 * pw + bx * 8..].as_mut_ptr(), pw as c_int) };
            }
        }
        planes.push(out);
    }
    Ok((planes, p))
}

#[cfg(test)]
mod tests;
