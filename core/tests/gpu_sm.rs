//! The SM JPEG decoder inside the GPU engine (feature `cuda`): run with
//! `SLIDESTREAM_GPU_SM_DECODER=on` on a GPU host (`benches/sm_probe.sh` with `GPU_TESTS=`), its
//! batches equal the CPU path byte for byte. `core/tests/gpu.rs`, run with the same setting,
//! covers every other device read with the decoder in the route; here also region-aware
//! decoding (only the parts of tiles small patches need) and damaged tiles. Without a GPU, or
//! with the setting off, each test says why and returns.
#![cfg(feature = "cuda")]

mod common;

use std::path::PathBuf;

use common::jpeg::{corrupt_copy, ycbcr_jpeg_tiff};
use common::tiffwriter::Rng;
use common::{gpu_present, max_abs_diff, testdata};
use slidestream::gpu::{self, DeviceOptions};
use slidestream::Slide;

const RGB: DeviceOptions = DeviceOptions { device: 0, channels: 3, background: [255, 255, 255] };

/// Whether `test` runs: `SLIDESTREAM_GPU_SM_DECODER=on` and a GPU present (else it says why).
fn sm_on(test: &str) -> bool {
    if std::env::var("SLIDESTREAM_GPU_SM_DECODER").map_or(true, |v| v != "on") {
        eprintln!("{test}: SLIDESTREAM_GPU_SM_DECODER is not on; skipped");
        return false;
    }
    gpu_present(test)
}

/// Generated YCbCr pyramids (4:4:4, 4:2:2, 4:2:0, 4:4:0; 1517 × 989, tiles of 128, odd edges)
/// and the shared Aperio slide: the files (kept alive) and their paths.
fn sampling_slides() -> (Vec<common::tiffwriter::TempPath>, Vec<PathBuf>) {
    use turbojpeg::Subsamp;
    let files: Vec<_> =
        [Subsamp::None, Subsamp::Sub2x1, Subsamp::Sub2x2, Subsamp::Sub1x2].into_iter().map(|sub| ycbcr_jpeg_tiff(1517, 989, 128, sub, 5).0).collect();
    let mut paths: Vec<PathBuf> = files.iter().map(|f| f.path().to_path_buf()).collect();
    paths.extend(testdata().map(|d| d.join("CMU-1-Small-Region.svs")));
    (files, paths)
}

/// Patches of [`EDGE_PATCH`] across the right edge of every tile of `slide`'s level 0 (and past
/// the image's right and bottom edges for the last column and row), at odd offsets: each
/// needs small parts of two tiles.
fn edge_patches(slide: &Slide) -> Vec<(i64, i64)> {
    let (w, h) = slide.dimensions();
    let (tw, th) = slide.level_tile_sizes()[0];
    let (tw, th) = (tw as i64, th as i64);
    let mut locs = Vec::new();
    for r in 0..h.div_ceil(th as u64) as i64 {
        for c in 0..w.div_ceil(tw as u64) as i64 {
            locs.push((c * tw + tw - 13, r * th + 3 + (c * 7) % (th - 25)));
        }
    }
    locs.push((w as i64 - 11, h as i64 - 5));
    locs
}

/// Size of [`edge_patches`].
const EDGE_PATCH: (u64, u64) = (29, 21);

/// Patches of `p × p` on a `p`-pixel grid over `slide`'s level 0 (every tile needed whole).
fn grid_patches(slide: &Slide, p: u64) -> Vec<(i64, i64)> {
    let (w, h) = slide.dimensions();
    (0..h as i64).step_by(p as usize).flat_map(|y| (0..w as i64).step_by(p as usize).map(move |x| (x, y))).collect()
}

/// With `SLIDESTREAM_GPU_SM_DECODER=on`: whole
/// level-0 tiles of generated YCbCr pyramids (4:4:4, 4:2:2, 4:2:0, 4:4:0, with odd edges) and
/// of the shared Aperio slide, in one batch each, are decoded by the SM decoder and equal the
/// CPU path byte for byte. Skipped (passing) otherwise.
#[test]
fn sm_decoder_when_on_decodes_batches_equal_to_the_cpu() {
    if !sm_on("sm_decoder_when_on_decodes_batches_equal_to_the_cpu") {
        return;
    }
    let (_files, paths) = sampling_slides();
    for path in paths {
        let slide = Slide::open(&path).expect("open");
        let t = 100i64;
        let locs = grid_patches(&slide, t as u64);
        let before = gpu::stats(0);
        let batch = slide.read_regions_device(&locs, 0, (t as u64, t as u64), &RGB).expect("read");
        assert!(batch.errors.iter().all(Option::is_none));
        let dev = batch.array.to_host().expect("download");
        let after = gpu::stats(0);
        let mut cpu = vec![0u8; locs.len() * (t * t * 3) as usize];
        slide.read_regions_rgb_into(&locs, 0, (t as u64, t as u64), RGB.background, &mut cpu).expect("CPU");
        let diff = max_abs_diff(&dev, &cpu);
        let sm = after.decoded_sm - before.decoded_sm;
        eprintln!("SM decoder: {}: {} patches, {sm} tiles decoded by it ({}), GPU vs CPU max abs diff {diff}", path.display(), locs.len(), after.sm_decoder);
        assert_eq!(diff, 0, "{}", path.display());
        assert!(sm > 0, "{}: the SM decoder decoded nothing ({}; last CPU reason: {})", path.display(), after.sm_decoder, after.cpu_fallback_reason);
    }
}

/// Region-aware decoding, with `SLIDESTREAM_GPU_SM_DECODER=on`: small patches straddling tile
/// edges need only parts of their tiles (under `partial_decode_max_fraction`), so the SM
/// decoder entropy-decodes those tiles' scans but inverse-DCTs and converts only the parts'
/// MCUs (`decoded_sm_partial`); the patches equal the CPU path's byte for byte at every
/// sampling (fancy upsampling reads chroma beyond a part's edge) and at the image's edges.
/// Skipped (passing) otherwise.
#[test]
fn sm_decoder_decodes_only_the_parts_small_patches_need_and_equals_the_cpu() {
    if !sm_on("sm_decoder_decodes_only_the_parts_small_patches_need_and_equals_the_cpu") {
        return;
    }
    let (_files, paths) = sampling_slides();
    for path in paths {
        let slide = Slide::open(&path).expect("open");
        let (pw, ph) = EDGE_PATCH;
        let locs = edge_patches(&slide);
        let before = gpu::stats(0);
        let batch = slide.read_regions_device(&locs, 0, (pw, ph), &RGB).expect("read");
        assert!(batch.errors.iter().all(Option::is_none));
        let dev = batch.array.to_host().expect("download");
        let after = gpu::stats(0);
        let mut cpu = vec![0u8; locs.len() * (pw * ph * 3) as usize];
        slide.read_regions_rgb_into(&locs, 0, (pw, ph), RGB.background, &mut cpu).expect("CPU");
        let diff = max_abs_diff(&dev, &cpu);
        let (sm, part) = (after.decoded_sm - before.decoded_sm, after.decoded_sm_partial - before.decoded_sm_partial);
        eprintln!(
            "SM decoder, parts: {}: {} patches, {sm} tiles decoded by it, {part} of them in part; GPU vs CPU max abs diff {diff}",
            path.display(),
            locs.len()
        );
        assert_eq!(diff, 0, "{}", path.display());
        assert!(
            part > 0 && part <= sm,
            "{}: {part} partial of {sm} SM tiles ({}; last CPU reason: {})",
            path.display(),
            after.sm_decoder,
            after.cpu_fallback_reason
        );
    }
}

/// Damaged tiles through the SM decoder, with `SLIDESTREAM_GPU_SM_DECODER=on`: one tile of a
/// 96-tile call (enough for the SM decoder to take it), needed whole and in part, is damaged in its scan (a run of 1-bits,
/// an invalid Huffman code), cut short (its second half zeroed, EOI gone), in its header, or by
/// single flipped bits; every patch's outcome equals the CPU path's (the same error, or equal
/// pixels where libjpeg-turbo decodes the stream), the other patches are unaffected, and the
/// next batch on the same engine is exact. Run under compute-sanitizer memcheck by
/// benches/h200_issue32_cores.sh. Skipped (passing) without the setting or a GPU.
#[test]
fn sm_decoder_gives_damaged_tiles_the_cpu_outcome_and_spares_the_rest() {
    if !sm_on("sm_decoder_gives_damaged_tiles_the_cpu_outcome_and_spares_the_rest") {
        return;
    }
    let (file, _) = ycbcr_jpeg_tiff(1517, 989, 128, turbojpeg::Subsamp::Sub2x2, 5);
    // Where the scan starts in a tile: after the SOS segment.
    let scan = |t: &[u8]| {
        let sos = t.windows(2).position(|w| w == [0xFF, 0xDA]).expect("SOS");
        sos + 2 + usize::from(t[sos + 2]) * 256 + usize::from(t[sos + 3])
    };
    let mut damaged: Vec<(String, common::tiffwriter::TempPath)> = vec![
        (
            "a run of 1-bits mid-scan".into(),
            corrupt_copy(file.path(), 2, 1, |t| {
                let at = scan(t) + (t.len() - scan(t)) * 2 / 5;
                for k in 0..12 {
                    t[at + 2 * k] = 0xFF;
                    t[at + 2 * k + 1] = 0x00;
                }
            }),
        ),
        (
            "second half zeroed".into(),
            corrupt_copy(file.path(), 2, 1, |t| {
                let n = t.len();
                t[n / 2..].fill(0)
            }),
        ),
        ("no SOI".into(), corrupt_copy(file.path(), 2, 1, |t| t[1] = 0x00)),
    ];
    let mut rng = Rng::new(32);
    for k in 0..6 {
        let r = rng.next_u64();
        damaged.push((
            format!("bit flip {k}"),
            corrupt_copy(file.path(), 2, 1, move |t| {
                let s0 = scan(t);
                let at = s0 + (r as usize >> 8) % (t.len() - 2 - s0);
                t[at] ^= 1 << (r & 7);
            }),
        ));
    }
    let p = 100u64;
    let mut failed = 0;
    // Whole tiles (100² patches on a 100-pixel grid cover every tile), then parts (patches
    // across each tile's right edge, the damaged tile's included).
    for ((what, bad), parts) in damaged.iter().flat_map(|d| [(d, false), (d, true)]) {
        let slide = Slide::open(bad.path()).expect("open");
        let ((pw, ph), locs) = if parts { (EDGE_PATCH, edge_patches(&slide)) } else { ((p, p), grid_patches(&slide, p)) };
        let before = gpu::stats(0);
        let batch = slide.read_regions_device(&locs, 0, (pw, ph), &RGB).expect("batch call");
        let dev = batch.array.to_host().expect("download");
        let after = gpu::stats(0);
        assert!(after.decoded_sm > before.decoded_sm, "{what}: the SM decoder took no tile ({})", after.sm_decoder);
        assert!(!parts || after.decoded_sm_partial > before.decoded_sm_partial, "{what}: no tile decoded in part");
        let n = (pw * ph * 3) as usize;
        for (i, &loc) in locs.iter().enumerate() {
            let mut cpu = vec![0u8; n];
            match (slide.read_regions_rgb_into(&[loc], 0, (pw, ph), RGB.background, &mut cpu), &batch.errors[i]) {
                (Ok(()), None) => assert_eq!(max_abs_diff(&dev[i * n..(i + 1) * n], &cpu), 0, "{what}: patch {i} at {loc:?}"),
                (Err(c), Some(d)) => {
                    assert_eq!(c.kind_name(), d.kind_name(), "{what}: patch {i}: CPU {c} / device {d}");
                    assert!(d.to_string().contains("tile (2, 1)"), "{what}: {d}");
                    failed += 1;
                }
                (c, d) => panic!("{what}: patch {i} at {loc:?}: CPU {c:?}, device {d:?}"),
            }
        }
        eprintln!(
            "SM decoder, damaged tile ({what}, {}): {} patches, device outcome == CPU outcome; {} SM tiles, {} in part",
            if parts { "parts" } else { "whole tiles" },
            locs.len(),
            after.decoded_sm - before.decoded_sm,
            after.decoded_sm_partial - before.decoded_sm_partial
        );
    }
    assert!(failed > 0, "no damage made the tile fail");
    // The engine is intact: a clean batch after the damaged ones is exact.
    let slide = Slide::open(file.path()).expect("open");
    let locs: Vec<(i64, i64)> = (0..9).flat_map(|y| (0..14).map(move |x| (x * 107, y * 109))).collect();
    let batch = slide.read_regions_device(&locs, 0, (p, p), &RGB).expect("clean batch");
    let mut cpu = vec![0u8; locs.len() * (p * p * 3) as usize];
    slide.read_regions_rgb_into(&locs, 0, (p, p), RGB.background, &mut cpu).expect("CPU");
    assert_eq!(max_abs_diff(&batch.array.to_host().expect("download"), &cpu), 0);
}
