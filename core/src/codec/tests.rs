//! Decode failures are classified by type ([`CodecError`]), not by message text.

use super::*;

fn jpeg_codec() -> CodecInfo {
    CodecInfo { compression: Compression::Jpeg, compression_tag: 7, photometric: Photometric::YCbCr, ..CodecInfo::uncompressed_rgb() }
}

fn jpeg(w: usize, h: usize) -> Vec<u8> {
    let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect();
    let img = turbojpeg::Image { pixels: &rgb[..], width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
    turbojpeg::compress(img, 90, turbojpeg::Subsamp::Sub2x2).expect("compress").to_vec()
}

fn tile32() -> ChunkGeometry {
    ChunkGeometry { tile_width: 32, tile_height: 32, valid_width: 32, valid_height: 32 }
}

#[test]
fn a_stream_larger_than_its_tile_is_a_typed_limits_error() {
    let at = Location::file("t.svs").with_tile(1, 0);
    let stream = jpeg(64, 64);
    let want = CodecError::LargerThanTile { width: 64, height: 64, tile_width: 32, tile_height: 32 };
    let e = decode_chunk(&jpeg_codec(), &[&stream], tile32(), &at).unwrap_err();
    assert!(matches!(e, Error::Limits { .. }), "{e}");
    assert_eq!(e.codec_error(), Some(&want));
    let part = PartRect { x: 0, y: 0, w: 8, h: 8 };
    let e = decode_chunk_part(&jpeg_codec(), &[&stream], tile32(), part, &at).unwrap_err();
    assert_eq!(e.codec_error(), Some(&want), "{e}");
    let mut dst = vec![0u8; 64 * 64 * 4];
    let e = decode_jpeg_into(&jpeg_codec(), &stream, tile32(), None, &at, &mut dst).unwrap_err();
    assert_eq!(e.codec_error(), Some(&want), "{e}");
}

#[test]
fn a_stream_smaller_than_the_valid_region_is_a_typed_format_error() {
    let at = Location::file("t.svs");
    let e = decode_chunk(&jpeg_codec(), &[&jpeg(16, 16)], tile32(), &at).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert_eq!(e.codec_error(), Some(&CodecError::SmallerThanTile { width: 16, height: 16, valid_width: 32, valid_height: 32 }));
}

#[test]
fn a_short_output_buffer_is_a_typed_limits_error() {
    let at = Location::file("t.svs");
    let mut dst = vec![0u8; 100];
    let e = decode_jpeg_into(&jpeg_codec(), &jpeg(32, 32), tile32(), None, &at, &mut dst).unwrap_err();
    assert!(matches!(e, Error::Limits { .. }), "{e}");
    assert_eq!(e.codec_error(), Some(&CodecError::BufferTooSmall { have: 100, need: 32 * 32 * 4, width: 32, height: 32 }));
}

#[test]
fn damaged_data_is_a_format_error_with_the_codecs_words() {
    let at = Location::file("t.svs");
    let mut stream = jpeg(32, 32);
    stream.truncate(stream.len() / 2);
    for e in [
        decode_chunk(&jpeg_codec(), &[&[0x11, 0x00, 0x00, 0x00, 0x00]], tile32(), &at).unwrap_err(),
        decode_chunk(&jpeg_codec(), &[&stream], tile32(), &at).unwrap_err(),
    ] {
        assert!(matches!(e, Error::Format { .. }), "{e}");
        assert!(matches!(e.codec_error(), Some(CodecError::Data(_))), "{e}");
    }
    // A lossless codec's failure names the plane.
    let mut deflate = jpeg_codec();
    deflate.compression = Compression::Deflate;
    let e = decode_chunk(&deflate, &[&[1, 2, 3, 4]], tile32(), &at).unwrap_err();
    assert!(matches!(e.codec_error(), Some(CodecError::Data(m)) if m.starts_with("plane 0: deflate")), "{e}");
}
