//! The scan structure of a JPEG stream and the limits on multi-scan (progressive) decoding.
//!
//! A stream whose first scan does not hold every component (progressive streams, ITU-T T.81
//! G.1, and non-interleaved sequential ones) is decoded by libjpeg-turbo into a whole-image
//! coefficient buffer (`jdcoefct.c`, one `JBLOCK` of 64 × 2 bytes per 8 × 8 block of every
//! component) that every later scan revisits, so its cost is scans × blocks, not the stream's
//! size: a few MB of end-of-band runs can hold thousands of scans over a 16384² image
//! (minutes of work and 1.5 GB; "Two Issues with the JPEG Standard", libjpeg-turbo.org). We
//! count the scans and size that buffer from the markers before libjpeg-turbo runs, and refuse
//! streams over [`MAX_SCANS`] or [`MAX_COEF_BYTES`] with typed errors; TurboJPEG's own
//! `TJPARAM_SCANLIMIT` / `TJPARAM_MAXMEMORY` are set too, as a backstop ([`backstop_mib`]).

use crate::error::CodecError;

/// Most scans of a multi-scan JPEG stream we decode: libjpeg-turbo's own tools (`djpeg
/// -strict`/`-maxscans`, `tjbench`, TurboJPEG's `TJFLAG_LIMITSCANS`) use 500. A libjpeg
/// progressive stream has 10 (`jpeg_simple_progression`); T.81 allows 896 per component.
pub const MAX_SCANS: u32 = crate::limits::LIMITS.jpeg_scans;

/// Largest whole-image coefficient buffer, in bytes, that a multi-scan stream may need
/// (64 MiB: a 4:4:4 progressive tile up to 2730², 4:2:0 up to 3860², greyscale up to 5790²).
/// With [`MAX_SCANS`] this bounds a stream's work to 500 passes over 512 Ki blocks.
pub const MAX_COEF_BYTES: u64 = crate::limits::LIMITS.jpeg_coef_bytes;

/// TurboJPEG's `TJPARAM_MAXMEMORY` (MiB): [`MAX_COEF_BYTES`] plus room for libjpeg's other
/// allocations (row buffers, tables), so that our own check always fires first.
pub(crate) fn backstop_mib() -> i32 {
    (MAX_COEF_BYTES >> 20) as i32 + 32
}

/// What the markers of a stream say about its scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScanInfo {
    /// `true` when libjpeg-turbo buffers the whole image's coefficients: a progressive SOF
    /// (SOF2, SOF6, SOF10, SOF14) or a first scan without every component.
    pub multi_scan: bool,
    /// Scans counted (up to [`MAX_SCANS`] + 1; 1 for a single-scan stream, not walked further).
    pub scans: u32,
    /// Bytes of the whole-image coefficient buffer (0 for single-scan streams).
    pub coef_bytes: u64,
}

/// Walk the markers of a complete stream (SOI first). Single-scan streams stop at the first
/// SOS; multi-scan streams are walked to EOI, skipping entropy-coded data (T.81 B.1.1.5: a
/// 0xFF there is followed by 0x00 or a restart marker). Malformed structure ends the walk
/// quietly: libjpeg-turbo reports it.
///
/// # Errors
/// [`CodecError::TooManyScans`] past [`MAX_SCANS`] scans, [`CodecError::DecoderMemory`] when the
/// coefficient buffer would exceed [`MAX_COEF_BYTES`] (checked at the first SOS).
pub fn check_scans(s: &[u8]) -> Result<ScanInfo, CodecError> {
    let mut info = ScanInfo::default();
    // (h, v) sampling factors of the SOF's components; image size.
    let mut comps: Vec<(u32, u32)> = Vec::new();
    let (mut width, mut height, mut progressive) = (0u32, 0u32, false);
    let mut i = 2usize;
    while i + 4 <= s.len() {
        if s[i] != 0xFF {
            break;
        }
        let m = s[i + 1];
        match m {
            0xFF => {
                i += 1; // fill byte
                continue;
            }
            0xD9 => break,
            0x01 | 0xD0..=0xD7 => {
                i += 2;
                continue;
            }
            _ => {}
        }
        let len = u16::from_be_bytes([s[i + 2], s[i + 3]]) as usize;
        let body = s.get(i + 4..i + 2 + len.max(2)).unwrap_or(&[]);
        if matches!(m, 0xC0..=0xCF) && !matches!(m, 0xC4 | 0xC8 | 0xCC) && body.len() >= 6 {
            progressive = matches!(m, 0xC2 | 0xC6 | 0xCA | 0xCE);
            height = u16::from_be_bytes([body[1], body[2]]) as u32;
            width = u16::from_be_bytes([body[3], body[4]]) as u32;
            comps = body[6..].chunks_exact(3).take(body[5] as usize).map(|c| ((c[1] >> 4) as u32, (c[1] & 15) as u32)).collect();
        }
        if m == 0xDA {
            info.scans += 1;
            if info.scans == 1 {
                let ns = body.first().copied().unwrap_or(0) as usize;
                info.multi_scan = progressive || ns < comps.len();
                if !info.multi_scan {
                    return Ok(info);
                }
                info.coef_bytes = coef_bytes(width, height, &comps);
                if info.coef_bytes > MAX_COEF_BYTES {
                    return Err(CodecError::DecoderMemory { bytes: info.coef_bytes, limit: MAX_COEF_BYTES });
                }
            }
            if info.scans > MAX_SCANS {
                return Err(CodecError::TooManyScans { limit: MAX_SCANS });
            }
            // Skip the scan header, then the entropy-coded data up to the next marker.
            let mut j = i + 2 + len;
            loop {
                match s.get(j..).and_then(|t| t.iter().position(|&b| b == 0xFF)) {
                    Some(k) => j += k,
                    None => return Ok(info),
                }
                match s.get(j + 1) {
                    Some(0x00 | 0xD0..=0xD7) => j += 2,
                    Some(_) => break,
                    None => return Ok(info),
                }
            }
            i = j;
            continue;
        }
        i += 2 + len;
    }
    Ok(info)
}

/// libjpeg's whole-image coefficient arrays: per component, `width_in_blocks` ×
/// `height_in_blocks` (each rounded up to the component's sampling factor) × 128 bytes
/// (`jdcoefct.c`, `jinit_d_coef_controller`; `jdinput.c`, `initial_setup`). 0 when a sampling
/// factor is outside 1..=4 (libjpeg-turbo refuses the stream before allocating).
fn coef_bytes(width: u32, height: u32, comps: &[(u32, u32)]) -> u64 {
    if comps.is_empty() || comps.iter().any(|&(h, v)| !(1..=4).contains(&h) || !(1..=4).contains(&v)) {
        return 0;
    }
    let hmax = comps.iter().map(|c| c.0).max().unwrap_or(1) as u64;
    let vmax = comps.iter().map(|c| c.1).max().unwrap_or(1) as u64;
    let blocks = |size: u32, f: u32, max: u64| -> u64 {
        let samples = (size as u64 * f as u64).div_ceil(max);
        samples.div_ceil(8).next_multiple_of(f as u64)
    };
    comps.iter().map(|&(h, v)| blocks(width, h, hmax) * blocks(height, v, vmax) * 128).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(m: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0xFF, m];
        v.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    /// SOI, SOF (`sof`, w × h, components with sampling `samp`), `scans` SOS of `ns` components
    /// each followed by entropy bytes holding a stuffed 0xFF and a restart marker, EOI.
    fn stream(sof: u8, w: u16, h: u16, samp: &[u8], scans: usize, ns: u8) -> Vec<u8> {
        let mut s = vec![0xFF, 0xD8];
        let mut body = vec![8];
        body.extend_from_slice(&h.to_be_bytes());
        body.extend_from_slice(&w.to_be_bytes());
        body.push(samp.len() as u8);
        for (c, &f) in samp.iter().enumerate() {
            body.extend_from_slice(&[c as u8, f, 0]);
        }
        s.extend(seg(sof, &body));
        for _ in 0..scans {
            let mut sos = vec![ns];
            for c in 0..ns {
                sos.extend_from_slice(&[c, 0]);
            }
            sos.extend_from_slice(&[0, 63, 0]);
            s.extend(seg(0xDA, &sos));
            s.extend_from_slice(&[0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD3, 0x56]);
        }
        s.extend_from_slice(&[0xFF, 0xD9]);
        s
    }

    #[test]
    fn baseline_streams_stop_at_the_first_scan() {
        let s = stream(0xC0, 240, 240, &[0x11, 0x11, 0x11], 1, 3);
        assert_eq!(check_scans(&s).unwrap(), ScanInfo { multi_scan: false, scans: 1, coef_bytes: 0 });
    }

    #[test]
    fn progressive_and_non_interleaved_streams_are_counted_and_sized() {
        // 4:2:0 of 100 × 50: Y 14 × 8 blocks (13 × 7 rounded up to 2), Cb/Cr 7 × 4.
        let s = stream(0xC2, 100, 50, &[0x22, 0x11, 0x11], 10, 1);
        assert_eq!(check_scans(&s).unwrap(), ScanInfo { multi_scan: true, scans: 10, coef_bytes: (14 * 8 + 2 * 7 * 4) * 128 });
        // Sequential, one component a scan.
        let s = stream(0xC0, 64, 64, &[0x11, 0x11, 0x11], 3, 1);
        assert_eq!(check_scans(&s).unwrap(), ScanInfo { multi_scan: true, scans: 3, coef_bytes: 3 * 64 * 128 });
    }

    #[test]
    fn limits_are_typed() {
        let s = stream(0xC2, 64, 64, &[0x11], MAX_SCANS as usize, 1);
        assert_eq!(check_scans(&s).unwrap().scans, MAX_SCANS);
        let s = stream(0xC2, 64, 64, &[0x11], MAX_SCANS as usize + 1, 1);
        assert_eq!(check_scans(&s), Err(CodecError::TooManyScans { limit: MAX_SCANS }));
        // 16384² greyscale: 512 MiB of coefficients.
        let s = stream(0xC2, 16384, 16384, &[0x11], 1, 1);
        assert_eq!(check_scans(&s), Err(CodecError::DecoderMemory { bytes: 512 << 20, limit: MAX_COEF_BYTES }));
        // A baseline stream of the same size needs no coefficient buffer.
        assert!(check_scans(&stream(0xC0, 16384, 16384, &[0x11], 1, 1)).is_ok());
    }

    #[test]
    fn malformed_structure_ends_the_walk() {
        for s in [&[0xFF, 0xD8][..], &[0xFF, 0xD8, 0x00, 0x00, 0x00], &[0xFF, 0xD8, 0xFF, 0xC2, 0x00, 0x02], &[0xFF, 0xD8, 0xFF, 0xDA, 0xFF, 0xFF]] {
            assert!(check_scans(s).is_ok());
        }
        let mut cut = stream(0xC2, 64, 64, &[0x11], 4, 1);
        cut.truncate(cut.len() - 5);
        assert_eq!(check_scans(&cut).unwrap().scans, 4);
    }
}
