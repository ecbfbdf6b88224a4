//! JPEG tile splicing + decoding: the first byte picks the photometric interpretation, the next
//! two the split between a JPEGTables prefix and the tile. Decoding must succeed with exactly the
//! tile's pixels or fail with a typed error.
#![no_main]
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use slidestream::codec::{decode_chunk, decode_chunk_part, ChunkGeometry, PartRect};
use slidestream::error::Location;
use slidestream::index::{Alpha, CodecInfo, Compression, Photometric, TileStream};

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
    let g = ChunkGeometry { tile_width: 64, tile_height: 64, valid_width: 48, valid_height: 40 };
    let at = Location::file("fuzz.jpg");
    if let Ok(t) = decode_chunk(&codec, &[tile], g, &at) {
        assert_eq!(t.rgba.len(), 48 * 40 * 4);
    }
    let want = PartRect { x: 17, y: 9, w: 20, h: 13 };
    if let Ok(t) = decode_chunk_part(&codec, &[tile], g, want, &at) {
        assert_eq!(t.rgba.len() as u32, t.width * t.height * 4);
    }
});
