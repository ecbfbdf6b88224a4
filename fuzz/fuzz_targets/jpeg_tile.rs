//! JPEG tile splicing + decoding: the first byte picks the photometric interpretation, the next
//! two the split between a JPEGTables prefix and the tile. Decoding must succeed with exactly the
//! tile's pixels or fail with a typed error, and every partial decode (`decode_chunk_part`,
//! `decode_jpeg_into` with a part; four parts an input, derived from a hash of it so the seed
//! layout is unchanged) must give the whole decode's outcome: the same pixels of that part, or an
//! error of the same kind (issue 13, F9).
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use slidestream::codec::{decode_chunk, decode_chunk_part, decode_jpeg_into, ChunkGeometry, DecodedTile, PartRect};
use slidestream::error::Location;
use slidestream::index::{Alpha, CodecInfo, Compression, Photometric, TileStream};

/// Pixels `p` of `t` (which covers `p`), RGBA rows.
fn crop(t: &DecodedTile, p: PartRect) -> Vec<u8> {
    (p.y..p.y + p.h)
        .flat_map(|y| {
            let row = ((y - t.y) * t.width + (p.x - t.x)) as usize * 4;
            t.rgba[row..row + p.w as usize * 4].iter().copied()
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let photometric = match data[0] % 3 {
        0 => Photometric::Rgb,
        1 => Photometric::YCbCr,
        _ => Photometric::MinIsBlack,
    };
    let split = (u16::from_le_bytes([data[1], data[2]]) as usize).min(data.len() - 3);
    let (tables, tile) = data[3..].split_at(split);
    let codec = CodecInfo {
        compression: Compression::Jpeg,
        compression_tag: 7,
        photometric,
        samples_per_pixel: if photometric == Photometric::MinIsBlack { 1 } else { 3 },
        alpha: Alpha::None,
        predictor: 1,
        planar_separate: false,
        stream: if tables.is_empty() { TileStream::Plain } else { TileStream::JpegTablesSplice { tables: Arc::from(tables) } },
        ycbcr_subsampling: (2, 2),
    };
    let (vw, vh) = (48u32, 40u32);
    let g = ChunkGeometry { tile_width: 64, tile_height: 64, valid_width: vw, valid_height: vh };
    let at = Location::file("fuzz.jpg");
    let whole = decode_chunk(&codec, &[tile], g, &at);
    if let Ok(t) = &whole {
        assert_eq!(t.rgba.len(), (vw * vh * 4) as usize);
    }
    // FNV-1a of the input: the parts to check.
    let mut hsh = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let mut next = |n: u32| {
        hsh = hsh.rotate_left(17).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D;
        (hsh >> 33) as u32 % n
    };
    let mut dst = vec![0u8; 64 * 64 * 4];
    for _ in 0..4 {
        let (x, y) = (next(vw), next(vh));
        let p = PartRect { x, y, w: 1 + next(vw - x), h: 1 + next(vh - y) };
        let part = decode_chunk_part(&codec, &[tile], g, p, &at);
        if let Ok(t) = &part {
            assert_eq!(t.rgba.len() as u32, t.width * t.height * 4);
        }
        let into = decode_jpeg_into(&codec, tile, g, Some(p), &at, &mut dst).map(|pl| {
            assert!(pl.used <= dst.len());
            (0..p.h as usize)
                .flat_map(|r| {
                    let o = pl.offset + ((p.y - pl.y) as usize + r) * pl.pitch as usize * 4 + (p.x - pl.x) as usize * 4;
                    dst[o..o + p.w as usize * 4].to_vec()
                })
                .collect::<Vec<u8>>()
        });
        match &whole {
            Ok(w) => {
                let want = crop(w, p);
                assert_eq!(part.as_ref().map(|t| crop(t, p)).ok().as_ref(), Some(&want), "decode_chunk_part {p:?}");
                assert_eq!(into.as_ref().ok(), Some(&want), "decode_jpeg_into {p:?}");
            }
            Err(e) => {
                assert_eq!(part.map(|_| ()).map_err(|e| e.kind_name()), Err(e.kind_name()), "decode_chunk_part {p:?}: whole fails with {e}");
                assert_eq!(into.map(|_| ()).map_err(|e| e.kind_name()), Err(e.kind_name()), "decode_jpeg_into {p:?}: whole fails with {e}");
            }
        }
    }
});
