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

/// A JPEG of `planes.len()` components (ids 1.., each sampled 1x1), one scan per component:
/// each plane is encoded by TurboJPEG as a greyscale JPEG (same quality, so the same tables)
/// and its scan is reused as is (a non-interleaved scan of one component is coded exactly as
/// a greyscale image). Lets the tests make grey + alpha and CMYK streams, which TurboJPEG does
/// not write.
fn components_jpeg(planes: &[Vec<u8>], w: usize, h: usize) -> Vec<u8> {
    let mut tables = Vec::new();
    let mut scans = Vec::new();
    for (k, p) in planes.iter().enumerate() {
        let img = turbojpeg::Image { pixels: &p[..], width: w, pitch: w, height: h, format: turbojpeg::PixelFormat::GRAY };
        let j = turbojpeg::compress(img, 95, turbojpeg::Subsamp::Gray).expect("compress").to_vec();
        let mut i = 2;
        loop {
            let marker = j[i + 1];
            let len = u16::from_be_bytes([j[i + 2], j[i + 3]]) as usize;
            if marker == 0xDA {
                // Entropy data: after the SOS header, up to EOI.
                scans.push(j[i + 2 + len..j.len() - 2].to_vec());
                break;
            }
            if k == 0 && (marker == 0xDB || marker == 0xC4) {
                tables.extend_from_slice(&j[i..i + 2 + len]);
            }
            i += 2 + len;
        }
    }
    let n = planes.len() as u8;
    let mut out = vec![0xFF, 0xD8];
    out.extend_from_slice(&tables);
    let sof_len = 8 + 3 * n as u16;
    out.extend_from_slice(&[0xFF, 0xC0]);
    out.extend_from_slice(&sof_len.to_be_bytes());
    out.push(8);
    out.extend_from_slice(&(h as u16).to_be_bytes());
    out.extend_from_slice(&(w as u16).to_be_bytes());
    out.push(n);
    for c in 0..n {
        out.extend_from_slice(&[c + 1, 0x11, 0]);
    }
    for (c, s) in scans.iter().enumerate() {
        out.extend_from_slice(&[0xFF, 0xDA, 0, 8, 1, c as u8 + 1, 0x00, 0, 63, 0]);
        out.extend_from_slice(s);
    }
    out.extend_from_slice(&[0xFF, 0xD9]);
    out
}

fn plane(w: usize, h: usize, f: impl Fn(usize, usize) -> u8) -> Vec<u8> {
    (0..h).flat_map(|y| (0..w).map(move |x| (x, y))).map(|(x, y)| f(x, y)).collect()
}

fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap_or(0)
}

/// libtiff's 8-bit CMYK to RGB (`tif_getimage.c`): `(255 - K) × (255 - ink) / 255`, truncated.
fn libtiff_cmyk(c: u8, k: u8) -> u8 {
    ((255 - k as u32) * (255 - c as u32) / 255) as u8
}

#[test]
fn uncompressed_cmyk_converts_as_libtiff() {
    let codec = CodecInfo { photometric: Photometric::Separated, samples_per_pixel: 4, ..CodecInfo::uncompressed_rgb() };
    let g = ChunkGeometry { tile_width: 2, tile_height: 1, valid_width: 2, valid_height: 1 };
    // (10, 200, 100, 50) is (196, 44, 124) in OpenSlide 4.0.1 (checked with openslide-bin).
    let t = decode_chunk(&codec, &[&[10, 200, 100, 50, 0, 255, 0, 255]], g, &Location::file("c.tif")).unwrap();
    assert_eq!(t.rgba, vec![196, 44, 124, 255, 0, 0, 0, 255]);
    assert_eq!(libtiff_cmyk(10, 50), 196);
    assert!(t.opaque);
}

#[test]
fn cmyk_jpeg_is_decoded_without_colour_transform_then_converted() {
    let (w, h) = (32, 24);
    let inks: Vec<Vec<u8>> = (0..4).map(|c| plane(w, h, |x, y| ((x * 5 + y * 3 + c * 60) % 256) as u8)).collect();
    let stream = components_jpeg(&inks, w, h);
    let codec = CodecInfo { photometric: Photometric::Separated, samples_per_pixel: 4, ..jpeg_codec() };
    assert!(jpeg_raw(&codec));
    let g = ChunkGeometry { tile_width: 32, tile_height: 32, valid_width: 32, valid_height: 24 };
    let at = Location::file("c.tif");
    let t = decode_chunk(&codec, &[&stream], g, &at).unwrap();
    let want: Vec<u8> = (0..w * h)
        .flat_map(|i| [libtiff_cmyk(inks[0][i], inks[3][i]), libtiff_cmyk(inks[1][i], inks[3][i]), libtiff_cmyk(inks[2][i], inks[3][i]), 255])
        .collect();
    assert!(max_diff(&t.rgba, &want) <= 8, "max diff {}", max_diff(&t.rgba, &want));
    // Every entry point gives the whole-tile decode: parts, the GPU engine's CPU path.
    let part = decode_chunk_part(&codec, &[&stream], g, PartRect { x: 3, y: 2, w: 5, h: 4 }, &at).unwrap();
    assert_eq!((part.x, part.width, part.rgba.len()), (0, 32, t.rgba.len()));
    let mut dst = vec![0u8; 32 * 32 * 4];
    let p = decode_jpeg_into(&codec, &stream, g, None, &at, &mut dst).unwrap();
    assert_eq!((p.pitch, p.width, p.height), (32, 32, 24));
    assert_eq!(&dst[..p.used], &t.rgba[..]);
}

#[test]
fn grey_alpha_jpeg_keeps_or_ignores_alpha_as_extra_samples_say() {
    let (w, h) = (16, 16);
    let grey = plane(w, h, |x, y| (40 + x * 9 + y) as u8);
    let alpha = plane(w, h, |x, _| if x < 8 { 0 } else { 255 });
    let stream = components_jpeg(&[grey.clone(), alpha.clone()], w, h);
    let g = ChunkGeometry { tile_width: 16, tile_height: 16, valid_width: 16, valid_height: 16 };
    let at = Location::file("ga.tif");
    for (mode, keep) in [(Alpha::Unassociated, true), (Alpha::Ignored, false)] {
        let codec = CodecInfo { photometric: Photometric::MinIsBlack, samples_per_pixel: 2, alpha: mode, ..jpeg_codec() };
        let t = decode_chunk(&codec, &[&stream], g, &at).unwrap();
        let want: Vec<u8> = (0..w * h).flat_map(|i| [grey[i], grey[i], grey[i], if keep { alpha[i] } else { 255 }]).collect();
        // Alpha blocks are constant: exact; grey within the JPEG error.
        let alphas: Vec<u8> = t.rgba.iter().skip(3).step_by(4).copied().collect();
        let want_a: Vec<u8> = want.iter().skip(3).step_by(4).copied().collect();
        assert!(max_diff(&alphas, &want_a) <= 1, "{mode:?}");
        assert!(max_diff(&t.rgba, &want) <= 3, "{mode:?}: max diff {}", max_diff(&t.rgba, &want));
        assert_eq!(t.opaque, !keep);
    }
}

#[test]
fn raw_jpeg_components_must_be_sampled_one_by_one_and_match_the_sample_count() {
    let (w, h) = (16, 16);
    let p = plane(w, h, |x, y| (x * 16 + y) as u8);
    let mut stream = components_jpeg(&[p.clone(), p.clone()], w, h);
    let g = ChunkGeometry { tile_width: 16, tile_height: 16, valid_width: 16, valid_height: 16 };
    let at = Location::file("ga.tif");
    let codec = CodecInfo { photometric: Photometric::MinIsBlack, samples_per_pixel: 2, alpha: Alpha::Unassociated, ..jpeg_codec() };
    // Four samples per pixel declared, two components coded.
    let cmyk = CodecInfo { photometric: Photometric::Separated, samples_per_pixel: 4, alpha: Alpha::None, ..jpeg_codec() };
    let e = decode_chunk(&cmyk, &[&stream], g, &at).unwrap_err();
    assert!(matches!(e.codec_error(), Some(CodecError::Data(m)) if m.contains("2 components")), "{e}");
    // Damaged (truncated) data: a Format error with libjpeg's words, never filler pixels.
    let cut = &stream[..stream.len() * 2 / 3];
    let e = decode_chunk(&codec, &[cut], g, &at).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(matches!(e.codec_error(), Some(CodecError::Data(_))), "{e}");
    // Component 1 sampled 2x2: refused (libtiff refuses such tiles too).
    let sof = stream.windows(2).position(|m| m == [0xFF, 0xC0]).unwrap();
    stream[sof + 11] = 0x22;
    let e = decode_chunk(&codec, &[&stream], g, &at).unwrap_err();
    assert!(matches!(e, Error::Format { .. }), "{e}");
    assert!(matches!(e.codec_error(), Some(CodecError::Data(m)) if m.contains("sampled 2x2")), "{e}");
    // A stream larger than the tile is refused before decoding, as a typed Limits error.
    let big = components_jpeg(&[plane(32, 16, |x, _| x as u8), plane(32, 16, |_, y| y as u8)], 32, 16);
    let e = decode_chunk(&codec, &[&big], g, &at).unwrap_err();
    assert!(matches!(e, Error::Limits { .. }), "{e}");
    assert_eq!(e.codec_error(), Some(&CodecError::LargerThanTile { width: 32, height: 16, tile_width: 16, tile_height: 16 }));
}

#[test]
fn a_crop_decoded_in_bands_equals_the_rows_of_its_whole_crop() {
    // 4:2:0, 64 × 48: MCUs of 16 × 16; a crop from x = 16 of 32 columns, rows 3..45, kept
    // columns 5..25 of it, split into bands of 5, 16 and 21 rows.
    let stream = jpeg(64, 48);
    let crop = jpeg::Crop { x: 16, y: 3, width: 32, height: 42 };
    let mut whole = vec![0u8; 32 * 4 * 42];
    jpeg_part::decode_part(&stream, crop, &mut whole).unwrap();
    let bands = jpeg_part::decode_part_bands(&stream, crop, 5, 20, &[5, 16, 21]).unwrap();
    let rows: Vec<&[u8]> = whole.chunks_exact(32 * 4).map(|r| &r[5 * 4..25 * 4]).collect();
    let mut k = 0;
    for (band, h) in bands.iter().zip([5usize, 16, 21]) {
        assert_eq!(band.len(), 20 * 4 * h);
        for r in band.chunks_exact(20 * 4) {
            assert!(r == rows[k], "row {k} differs");
            k += 1;
        }
    }
    // Bands that do not add up to the crop, or columns outside it, are refused.
    assert!(jpeg_part::decode_part_bands(&stream, crop, 5, 20, &[5, 16]).is_err());
    assert!(jpeg_part::decode_part_bands(&stream, crop, 13, 20, &[42]).is_err());
    assert!(jpeg_part::decode_part_bands(&stream, crop, 0, 0, &[42]).is_err());
    // A damaged stream fails as the whole crop does.
    let cut = &stream[..stream.len() / 2];
    assert!(jpeg_part::decode_part_bands(cut, crop, 0, 32, &[42]).is_err());
}

#[test]
fn parts_of_an_rgb_coded_jpeg_equal_its_whole_decode() {
    // RGB-coded (no colour transform, as Aperio's RGB tiles), 1x1 sampling: these streams are
    // decoded through jpeg_part.c with its own RGB → RGBA conversion (whole, part, known-good
    // crop), which must give TurboJPEG's own bytes (the oracle: the turbojpeg crate's
    // decompress, libjpeg-turbo's C loop), tail columns included (widths not multiples of 16).
    let (w, h) = (53usize, 37usize);
    let rgb: Vec<u8> = (0..w * h * 3).map(|i| (i * 13 % 241) as u8).collect();
    let img = turbojpeg::Image { pixels: &rgb[..], width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
    let mut c = turbojpeg::Compressor::new().unwrap();
    c.set_colorspace(turbojpeg::Colorspace::RGB).unwrap();
    c.set_subsamp(turbojpeg::Subsamp::None).unwrap();
    c.set_quality(90).unwrap();
    let stream = c.compress_to_vec(img).unwrap();
    let hdr = jpeg::read_header(&stream).unwrap();
    assert_eq!((hdr.width, hdr.rgb_coded), (w as u32, true));
    let oracle = turbojpeg::decompress(&stream, turbojpeg::PixelFormat::RGBA).unwrap();
    assert_eq!((oracle.width, oracle.pitch), (w, w * 4));
    let codec = CodecInfo { photometric: Photometric::Rgb, ..jpeg_codec() };
    let g = ChunkGeometry { tile_width: w as u32, tile_height: h as u32, valid_width: w as u32, valid_height: h as u32 };
    let at = Location::file("t.svs").with_tile(0, 0);
    let whole = decode_chunk(&codec, &[&stream], g, &at).unwrap();
    assert!(whole.rgba == oracle.pixels, "whole decode differs from TurboJPEG's");
    let rows_equal = |got: &[u8], x: usize, y: usize, pw: usize, ph: usize| {
        (0..ph).all(|r| got[r * pw * 4..(r + 1) * pw * 4] == oracle.pixels[((y + r) * w + x) * 4..((y + r) * w + x + pw) * 4])
    };
    for want in [PartRect { x: 1, y: 0, w: 40, h: 37 }, PartRect { x: 9, y: 5, w: 44, h: 20 }, PartRect { x: 30, y: 36, w: 2, h: 1 }] {
        let part = decode_chunk_part(&codec, &[&stream], g, want, &at).unwrap();
        assert_eq!((part.x, part.y, part.width, part.height), (want.x, want.y, want.w, want.h));
        assert!(rows_equal(&part.rgba, want.x as usize, want.y as usize, want.w as usize, want.h as usize), "{want:?} differs");
    }
    // The known-good crop (stops after the crop's last row, as TurboJPEG's cropping region).
    for crop in [jpeg::Crop { x: 8, y: 3, width: 45, height: 30 }, jpeg::Crop { x: 0, y: 36, width: 16, height: 1 }] {
        let mut dst = Vec::new();
        jpeg::decode_rgba_known_good(&stream, Some(crop), &mut dst, |_| Ok(())).unwrap();
        assert!(rows_equal(&dst, crop.x as usize, crop.y as usize, crop.width as usize, crop.height as usize), "{crop:?} differs");
    }
}
