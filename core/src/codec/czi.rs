//! Zeiss CZI's "zstd1" subblock coding ([`crate::index::Compression::CziZstd1`]).
//!
//! Format facts (OpenSlide's Zeiss format page, openslide.org/formats/zeiss, and its zeiss
//! driver's `zisraw_zstd_payload_hdr`): the data start with an uncompressed header whose first
//! byte is its length, 1 (no further fields) or 3 (a chunk type, which must be 1, and a byte
//! whose bit 0 says the samples are HiLo-packed); one zstd frame follows. HiLo packing stores
//! the low bytes of all 16-bit samples in the first half of the decompressed buffer and the
//! high bytes in the second half. "zstd0" (compression 5) is a bare zstd frame, read as
//! [`crate::index::Compression::Zstd`].

use std::io::Read;

/// Decode zstd1 `data` to at most `limit` bytes, undoing HiLo packing: the little-endian
/// 16-bit samples of the subblock, or its 8-bit samples. With HiLo packing the frame must
/// decode to exactly `limit` bytes (the subblock's pixel bytes), an even number.
///
/// # Errors
/// A message for a header of another length or chunk type, corrupt zstd data, or HiLo data
/// of the wrong length.
pub(crate) fn inflate_zstd1(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let (&hlen, _) = data.split_first().ok_or("zstd1: empty data")?;
    let hilo = match hlen {
        1 => false,
        3 if data.len() >= 3 => {
            if data[1] != 1 {
                return Err(format!("zstd1: chunk type {} (1 expected)", data[1]));
            }
            data[2] & 1 == 1
        }
        3 => return Err(format!("zstd1: {} bytes, shorter than its 3-byte header", data.len())),
        n => return Err(format!("zstd1: header length {n} (1 or 3 expected)")),
    };
    let mut out = Vec::with_capacity(limit);
    zstd::stream::read::Decoder::new(&data[hlen as usize..])
        .map_err(|e| format!("zstd1: {e}"))?
        .take(limit as u64)
        .read_to_end(&mut out)
        .map_err(|e| format!("zstd1: {e}"))?;
    if !hilo {
        return Ok(out);
    }
    if out.len() != limit || limit % 2 != 0 {
        return Err(format!("zstd1: HiLo-packed data decodes to {} bytes, {limit} (an even number) expected", out.len()));
    }
    let (lo, hi) = out.split_at(limit / 2);
    let mut un = Vec::with_capacity(limit);
    for (&l, &h) in lo.iter().zip(hi) {
        un.push(l);
        un.push(h);
    }
    Ok(un)
}

#[cfg(test)]
mod tests {
    use super::inflate_zstd1;

    #[test]
    fn zstd1_headers_and_hilo_packing() {
        let samples: Vec<u8> = vec![0x01, 0xA0, 0x02, 0xB0, 0x03, 0xC0];
        let packed: Vec<u8> = vec![0x01, 0x02, 0x03, 0xA0, 0xB0, 0xC0];
        let z = |v: &[u8]| zstd::bulk::compress(v, 1).unwrap();
        let mut one = vec![1u8];
        one.extend(z(&samples));
        assert_eq!(inflate_zstd1(&one, 6).unwrap(), samples);
        let mut three = vec![3u8, 1, 1];
        three.extend(z(&packed));
        assert_eq!(inflate_zstd1(&three, 6).unwrap(), samples);
        let mut flat = vec![3u8, 1, 0];
        flat.extend(z(&samples));
        assert_eq!(inflate_zstd1(&flat, 6).unwrap(), samples);
        assert!(inflate_zstd1(&three, 8).unwrap_err().contains("HiLo"), "short HiLo data");
        assert!(inflate_zstd1(&[3, 2, 1, 0], 6).unwrap_err().contains("chunk type"));
        assert!(inflate_zstd1(&[2, 1], 6).unwrap_err().contains("header length"));
        assert!(inflate_zstd1(&[3, 1], 6).is_err());
        assert!(inflate_zstd1(&[], 6).is_err());
        assert!(inflate_zstd1(&[1, 0xde, 0xad], 6).is_err(), "corrupt frame");
    }
}
