//! Parsing and checking a baseline JPEG stream into the SM decoder's descriptors
//! ([`prepare`]); the rules are listed in the parent module's docs.

use super::{SmError, SmPrepared, SmjHuff, SmjSegment, SmjTables, SmjTile};

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
/// for the SM decoder: [`prepare_with`] with a memo of its own.
///
/// # Errors
/// As [`prepare_with`].
pub fn prepare(s: &[u8]) -> Result<SmPrepared, SmError> {
    prepare_with(s, &mut TableMemo::default())
}

/// Table sets derived from DHT and DQT marker bytes, remembered by those bytes: a level's tiles
/// carry the same tables (TIFF JPEGTables spliced into every tile, or an encoder's fixed
/// tables), so [`prepare_with`] derives them once per distinct set instead of once per tile.
/// Holds at most [`TableMemo::MAX_SETS`] sets (emptied when full); errors are remembered too
/// (the same bytes give the same outcome).
#[derive(Default)]
pub struct TableMemo {
    sets: std::collections::HashMap<Vec<u8>, Result<Derived, SmError>>,
}

/// A derived table set and which tables its bytes define.
#[derive(Clone)]
struct Derived {
    tables: std::sync::Arc<SmjTables>,
    /// DC, AC and quantisation tables defined, by index.
    defined: [[bool; 4]; 3],
}

impl TableMemo {
    /// Distinct table sets kept before the memo is emptied.
    pub const MAX_SETS: usize = 64;

    fn get(&mut self, key: &[u8]) -> Result<Derived, SmError> {
        if let Some(d) = self.sets.get(key) {
            return d.clone();
        }
        if self.sets.len() >= Self::MAX_SETS {
            self.sets.clear();
        }
        let d = derive_set(key);
        self.sets.insert(key.to_vec(), d.clone());
        d
    }
}

/// The table set of `key`: DHT and DQT marker segments (marker, length, body) back to back, in
/// stream order (a later definition of an index replaces an earlier one, as in libjpeg).
fn derive_set(key: &[u8]) -> Result<Derived, SmError> {
    let corrupt = |m: &str| SmError::Corrupt(m.to_string());
    let mut tables = SmjTables::default();
    let mut defined = [[false; 4]; 3];
    let mut i = 0usize;
    while i + 4 <= key.len() {
        let (m, len) = (key[i + 1], be16(key, i + 2).unwrap_or(0));
        let seg = key.get(i + 4..i + 2 + len).ok_or_else(|| corrupt("table marker runs past the stream"))?;
        i += 2 + len;
        let mut k = 0;
        if m == 0xC4 {
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
                } else {
                    tables.ac[th] = t;
                }
                defined[tc as usize][th] = true;
                k += 17 + n;
            }
        } else {
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
                defined[2][tq] = true;
                k += 1 + bytes;
            }
        }
    }
    Ok(Derived { tables: std::sync::Arc::new(tables), defined })
}

/// Parse and check a complete JPEG stream (SOI first; TIFF tiles spliced with their JPEGTables)
/// for the SM decoder, its Huffman and quantisation tables taken from `memo` when an earlier
/// stream had the same DHT/DQT bytes (derived and remembered otherwise). Costs one pass over
/// the markers and one `memchr` pass over the entropy-coded data (for restart markers and the
/// EOI); allocates one segment per restart interval.
///
/// # Errors
/// [`SmError::Unsupported`] for streams the SM decoder does not take, [`SmError::Corrupt`] for
/// streams libjpeg-turbo rejects (module docs). A bad table definition is reported once the
/// scan header is reached (libjpeg-turbo rejects it as the stream's first error; here another
/// error of the header may be named first: either way the stream is refused).
pub fn prepare_with(s: &[u8], memo: &mut TableMemo) -> Result<SmPrepared, SmError> {
    let corrupt = |m: &str| SmError::Corrupt(m.to_string());
    let unsupported = |m: &str| SmError::Unsupported(m.to_string());
    if s.len() < 4 || s[0] != 0xFF || s[1] != 0xD8 {
        return Err(corrupt("not a JPEG stream (no SOI)"));
    }
    let mut key = Vec::new();
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
            0xC4 | 0xDB => key.extend_from_slice(&s[i - 2..i + len]),
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
    let Derived { tables, defined: [dc_def, ac_def, q_def] } = memo.get(&key)?;
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
        // The next 0xFF with a byte after it (stuffed 0xFF00 and fill 0xFFFF are skipped).
        let Some(p) = memchr::memchr(0xFF, &s[j..s.len() - 1]) else { break };
        j += p;
        let m = s[j + 1];
        if m == 0 || m == 0xFF {
            j += 1 + (m == 0) as usize;
            continue;
        }
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
