//! The SM decoder's C, run on the host, against libjpeg-turbo: every sampling, quality,
//! restart interval, RGB-coded and YCbCr, odd sizes, optimised tables, real tiles of the
//! shared test slides; damaged streams.

use super::*;
use crate::codec::jpeg::decode_planes;
use turbojpeg::raw;

/// Test image: smooth gradients plus deterministic noise (so every coefficient position and
/// a range of Huffman symbols occur).
pub(super) fn pixels(w: usize, h: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(12345);
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for c in 0..w {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let n = (x % 64) as usize;
            out.push(((c * 255 / w.max(1)) / 2 + n) as u8);
            out.push(((y * 255 / h.max(1)) / 2 + n / 2) as u8);
            out.push((((c + y) * 3) % 200 + n / 4) as u8);
        }
    }
    out
}

pub(super) struct Enc {
    pub(super) samp: i32,
    pub(super) quality: i32,
    pub(super) rgb: bool,
    pub(super) restart_blocks: i32,
    pub(super) optimize: bool,
}

pub(super) fn compress(rgb: &[u8], w: usize, h: usize, e: &Enc) -> Vec<u8> {
    // SAFETY: test-only FFI; the handle is destroyed and the buffer freed below, `rgb` holds
    // w × h RGB pixels.
    unsafe {
        let handle = raw::tj3Init(raw::TJINIT_TJINIT_COMPRESS as _);
        assert!(!handle.is_null());
        assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_QUALITY as _, e.quality), 0);
        assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_SUBSAMP as _, e.samp), 0);
        if e.rgb {
            assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_COLORSPACE as _, raw::TJCS_TJCS_RGB as _), 0);
        }
        assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_RESTARTBLOCKS as _, e.restart_blocks), 0);
        assert_eq!(raw::tj3Set(handle, raw::TJPARAM_TJPARAM_OPTIMIZE as _, i32::from(e.optimize)), 0);
        let mut buf: *mut u8 = std::ptr::null_mut();
        let mut size = 0;
        let rc = raw::tj3Compress8(handle, rgb.as_ptr(), w as _, (w * 3) as _, h as _, raw::TJPF_TJPF_RGB as _, &mut buf, &mut size);
        assert_eq!(rc, 0, "tj3Compress8 failed");
        let out = std::slice::from_raw_parts(buf, size as usize).to_vec();
        raw::tj3Free(buf.cast());
        raw::tj3Destroy(handle);
        out
    }
}

/// libjpeg-turbo's samples of a one-component stream.
fn decode_gray(stream: &[u8], w: usize, h: usize) -> Vec<u8> {
    // SAFETY: test-only FFI; `out` holds w × h bytes.
    unsafe {
        let handle = raw::tj3Init(raw::TJINIT_TJINIT_DECOMPRESS as _);
        let mut out = vec![0u8; w * h];
        let rc = raw::tj3Decompress8(handle, stream.as_ptr(), stream.len() as _, out.as_mut_ptr(), w as _, raw::TJPF_TJPF_GRAY as _);
        raw::tj3Destroy(handle);
        assert_eq!(rc, 0, "tj3Decompress8 failed");
        out
    }
}

fn crop(plane: &[u8], pw: usize, w: usize, h: usize) -> Vec<u8> {
    plane.chunks(pw).take(h).flat_map(|r| &r[..w]).copied().collect()
}

/// Our planes, cropped to each component's size, against libjpeg-turbo's raw-data output.
/// The most synchronisation rounds the warp decoder took on any stream `check` saw.
static MOST_ROUNDS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The warp decoder gives the serial decoder's coefficients, every one of them, with the
/// engine's warm-ups and periodic shortcut and without.
fn check_warp(stream: &[u8], what: &str) {
    let (serial, _) = coefficients_host(stream, None).unwrap_or_else(|e| panic!("{what}: serial: {e}"));
    for (warm, periodic) in [(SM_WARM_BYTES, true), (0, false), (3, true)] {
        let (warp, cost) = coefficients_host_with(stream, warm, periodic).unwrap_or_else(|e| panic!("{what}: warp decoder (warm-up {warm}): {e}"));
        MOST_ROUNDS.fetch_max(cost.rounds, std::sync::atomic::Ordering::Relaxed);
        if serial != warp {
            let at = serial.iter().zip(&warp).position(|(a, b)| a != b).unwrap_or(0);
            panic!("{what}: warp decoder (warm-up {warm}) differs first at coefficient {at} (block {}): {} vs {}", at / 64, warp[at], serial[at]);
        }
    }
}

fn check(stream: &[u8], what: &str) {
    check_warp(stream, what);
    let (planes, p) = decode_planes_host(stream).unwrap_or_else(|e| panic!("{what}: {e}"));
    let t = p.tile;
    if t.ncomp == 1 {
        let (w, h) = (t.width as usize, t.height as usize);
        assert_eq!(crop(&planes[0], t.plane_size(0).0, w, h), decode_gray(stream, w, h), "{what}: grey samples differ");
        return;
    }
    let want = decode_planes(stream).unwrap_or_else(|e| panic!("{what}: libjpeg-turbo: {e}"));
    for (c, plane) in planes.iter().enumerate() {
        let (w, h) = t.component_size(c);
        assert_eq!((w, h), want.1[c], "{what}: component {c} size");
        let got = crop(plane, t.plane_size(c).0, w, h);
        if got != want.0[c] {
            let diffs = got.iter().zip(&want.0[c]).filter(|(a, b)| a != b).count();
            panic!("{what}: component {c}: {diffs} of {} samples differ", got.len());
        }
    }
}

#[test]
fn c_and_rust_agree_on_the_descriptor_layouts() {
    assert_eq!(
        c_layout(),
        vec![
            size_of::<SmjHuff>() as u64,
            size_of::<SmjTables>() as u64,
            size_of::<SmjTile>() as u64,
            offset_of!(SmjTile, tables) as u64,
            offset_of!(SmjTile, h) as u64,
            offset_of!(SmjTile, width) as u64,
            size_of::<SmjSegment>() as u64,
            offset_of!(SmjSegment, mcus) as u64,
        ]
    );
}

#[test]
fn generated_streams_match_libjpeg_turbo_exactly() {
    let samps = [
        raw::TJSAMP_TJSAMP_444,
        raw::TJSAMP_TJSAMP_422,
        raw::TJSAMP_TJSAMP_420,
        raw::TJSAMP_TJSAMP_440,
        raw::TJSAMP_TJSAMP_411,
        raw::TJSAMP_TJSAMP_441,
        raw::TJSAMP_TJSAMP_GRAY,
    ];
    let sizes = [(1, 1), (7, 9), (16, 16), (17, 33), (240, 240), (255, 257), (64, 8)];
    let mut n = 0;
    for (si, &samp) in samps.iter().enumerate() {
        for (zi, &(w, h)) in sizes.iter().enumerate() {
            let px = pixels(w, h, (si * 31 + zi) as u32);
            for &quality in &[5, 50, 90, 100] {
                for &(rgb, restart_blocks, optimize) in &[(false, 0, false), (true, 0, true), (false, 3, false), (samp == raw::TJSAMP_TJSAMP_GRAY, 1, true)] {
                    let e = Enc { samp, quality, rgb: rgb && samp != raw::TJSAMP_TJSAMP_GRAY, restart_blocks, optimize };
                    let s = compress(&px, w, h, &e);
                    let p = prepare(&s).unwrap();
                    assert_eq!(p.rgb_coded, e.rgb, "colour space flag");
                    if restart_blocks > 0 && w * h > 64 * 10 {
                        assert!(p.segments.len() > 1, "restart intervals found");
                    }
                    check(&s, &format!("samp {samp} {w}x{h} q{quality} rgb {rgb} restart {restart_blocks} optimize {optimize}"));
                    n += 1;
                }
            }
        }
    }
    eprintln!(
        "{n} generated streams equal libjpeg-turbo (warp decoder too; at most {} rounds of decoding again)",
        MOST_ROUNDS.load(std::sync::atomic::Ordering::Relaxed)
    );
}

fn shared(name: &str) -> Option<std::path::PathBuf> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata").join(name);
    p.exists().then_some(p)
}

/// Every JPEG tile (or frame, or strip) of a level of a shared slide, spliced as the decoders
/// get it, equals libjpeg-turbo on the host.
fn check_slide(path: &std::path::Path, max: usize) -> usize {
    use crate::index::Compression;
    use crate::io::ByteSource;
    let slide = crate::slide::Slide::open(path).expect("open");
    let src = slide.source();
    let mut n = 0;
    for (li, level) in slide.index().levels.iter().enumerate() {
        let img = &level.image;
        if img.codec.compression != Compression::Jpeg || img.codec.jpeg_scale() > 1 {
            continue;
        }
        let mut s = Vec::new();
        let tiles = (0..img.tiles_down()).flat_map(|r| (0..img.tiles_across()).map(move |c| (c, r)));
        for (col, row) in tiles.take(max) {
            let Some(loc) = img.tile_locs(col, row).next() else { continue };
            if loc.length == 0 {
                continue;
            }
            let mut raw = vec![0u8; loc.length as usize];
            src.read_exact_at(&mut raw, crate::io::multi::address(loc)).expect("read tile");
            crate::codec::stream::frame_jpeg(&img.codec, &raw, &mut s).expect("frame");
            match prepare(&s) {
                Ok(_) => {
                    check(&s, &format!("{} level {li} tile ({col}, {row})", path.display()));
                    n += 1;
                }
                Err(SmError::Unsupported(_)) => {}
                Err(e) => panic!("{} level {li} tile ({col}, {row}): {e}", path.display()),
            }
        }
    }
    n
}

#[test]
fn real_tiles_of_the_shared_slides_match_libjpeg_turbo_exactly() {
    let mut total = 0;
    for name in ["CMU-1-Small-Region.svs", "camelyon-jpeg-ybr.dcm", "tiff_tiled_ycbcr_jpeg_2x2_sampling.tif", "test3-DAPI-2-387.ndpi", "CMU-1-Small-Region-dicom"] {
        let Some(p) = shared(name) else { continue };
        let p = if p.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(&p).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).filter(|f| f.extension().is_some_and(|x| x == "dcm")).collect();
            files.sort();
            match files.into_iter().next() {
                Some(f) => f,
                None => continue,
            }
        } else {
            p
        };
        let n = check_slide(&p, 40);
        eprintln!(
            "{}: {n} streams equal (warp decoder: at most {} rounds of decoding again so far)",
            p.display(),
            MOST_ROUNDS.load(std::sync::atomic::Ordering::Relaxed)
        );
        total += n;
    }
    if shared("CMU-1-Small-Region.svs").is_some() {
        assert!(total > 50, "only {total} real streams checked");
    }
}

#[test]
fn damaged_streams_give_typed_errors_and_never_silently_differ() {
    let px = pixels(64, 48, 7);
    let good = compress(&px, 64, 48, &Enc { samp: raw::TJSAMP_TJSAMP_420, quality: 75, rgb: false, restart_blocks: 2, optimize: false });
    // Truncations: every one is an error (prepare finds no EOI, or the data runs short).
    for cut in (2..good.len() - 1).step_by(7) {
        let r = decode_planes_host(&good[..cut]);
        assert!(r.is_err(), "truncated at {cut} decoded");
    }
    // Byte flips in the entropy-coded data: when ours decodes, libjpeg-turbo must decode the
    // same samples (or fail, which the engine then reports for the tile: a mismatch in outcome
    // is counted, never silent wrong pixels on our side when libjpeg-turbo succeeds).
    let p = prepare(&good).unwrap();
    let start = p.segments[0].data as usize;
    let (mut ours_only, mut both_ok, mut overflowed, mut warp_stricter) = (0, 0, 0, 0);
    let mut x = 99u32;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let mut s = good.clone();
        let at = start + (x as usize % (s.len() - 2 - start));
        s[at] ^= 1 << (x >> 29);
        let ours = decode_planes_host(&s);
        let theirs = decode_planes(&s);
        // The warp decoder: when it decodes, the serial decoder decodes the same coefficients.
        match (coefficients_host(&s, Some(SM_WARM_BYTES)), coefficients_host(&s, None)) {
            (Ok((w, _)), Ok((c, _))) => assert!(w == c, "flip at {at}: the warp decoder differs from the serial one"),
            (Ok(_), Err(e)) => panic!("flip at {at}: the warp decoder decodes what the serial one rejects ({e})"),
            (Err(_), Ok(_)) => warp_stricter += 1,
            (Err(_), Err(_)) => {}
        }
        match (&ours, &theirs) {
            (Ok((planes, q)), Ok(want)) => {
                both_ok += 1;
                let same = (0..3).all(|c| {
                    let (w, h) = q.tile.component_size(c);
                    crop(&planes[c], q.tile.plane_size(c).0, w, h) == want.0[c]
                });
                if !same {
                    overflowed += 1;
                }
            }
            (Ok(_), Err(e)) => {
                if ours_only < 5 {
                    eprintln!("flip at {at}: libjpeg-turbo: {e}");
                }
                ours_only += 1
            }
            _ => {}
        }
    }
    eprintln!("2000 flips: {both_ok} decoded by both ({overflowed} differently), {ours_only} decoded only by ours; {warp_stricter} refused by the warp decoder only");
    assert_eq!(ours_only, 0, "streams libjpeg-turbo rejects decoded by the SM decoder");
    assert_eq!(overflowed, 0, "{overflowed} of {both_ok} damaged streams decode differently");
    // Header damage: typed errors, no panic; and one table memo over all the damaged headers
    // (damaged DHT/DQT bytes are new table sets, some of them bad) gives each stream what a
    // fresh parse gives.
    let mut memo = TableMemo::default();
    for at in 2..start {
        for bit in [0x01u8, 0x80] {
            let mut s = good.clone();
            s[at] ^= bit;
            let _ = decode_planes_host(&s);
            same_as_fresh(&s, &mut memo, &format!("bit 0x{bit:02X} of byte {at} flipped"));
        }
    }
}

/// `prepare_with(s, memo)` equals `prepare(s)`: tables, key, geometry, segments, or the error.
fn same_as_fresh(s: &[u8], memo: &mut TableMemo, what: &str) {
    match (prepare(s), prepare_with(s, memo)) {
        (Ok(a), Ok(b)) => {
            assert!(*a.tables == *b.tables, "{what}: tables differ");
            assert_eq!((a.table_key, a.tile, a.segments, a.rgb_coded), (b.table_key, b.tile, b.segments, b.rgb_coded), "{what}");
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "{what}"),
        (a, b) => panic!("{what}: fresh {:?}, with the memo {:?}", a.err(), b.err()),
    }
}

/// One memo over streams of many table sets (qualities 5–100, optimised tables, 4:2:0 and grey)
/// gives every stream its own tables, twice over (the second pass from the memo); a stream with
/// a bad Huffman table is refused every time, the memo holding its outcome or not; and a memo
/// of more than `MAX_SETS` sets starts over and stays right.
#[test]
fn table_memo_gives_every_stream_its_own_tables() {
    let px = pixels(40, 24, 5);
    let mut streams = Vec::new();
    for samp in [raw::TJSAMP_TJSAMP_420, raw::TJSAMP_TJSAMP_GRAY] {
        for quality in (5..=100).step_by(5) {
            for optimize in [false, true] {
                streams.push(compress(&px, 40, 24, &Enc { samp, quality, rgb: false, restart_blocks: 0, optimize }));
            }
        }
    }
    assert!(streams.len() > TableMemo::MAX_SETS);
    let mut memo = TableMemo::default();
    for pass in 0..2 {
        for (k, s) in streams.iter().enumerate() {
            same_as_fresh(s, &mut memo, &format!("pass {pass}, stream {k}"));
        }
    }
    // Three codes of length 1 cannot exist (jdhuff.c: "bogus Huffman table definition").
    let mut bad = streams[0].clone();
    let dht = bad.windows(2).position(|w| w == [0xFF, 0xC4]).expect("DHT");
    bad[dht + 5] = 3;
    for _ in 0..2 {
        assert!(matches!(prepare_with(&bad, &mut memo), Err(SmError::Corrupt(_))));
    }
    same_as_fresh(&bad, &mut memo, "bad DHT");
}

#[test]
fn unsupported_streams_are_declined() {
    let px = pixels(32, 32, 3);
    // SAFETY: test-only FFI as in `compress`.
    let prog = unsafe {
        let handle = raw::tj3Init(raw::TJINIT_TJINIT_COMPRESS as _);
        raw::tj3Set(handle, raw::TJPARAM_TJPARAM_SUBSAMP as _, raw::TJSAMP_TJSAMP_444 as _);
        raw::tj3Set(handle, raw::TJPARAM_TJPARAM_PROGRESSIVE as _, 1);
        raw::tj3Set(handle, raw::TJPARAM_TJPARAM_QUALITY as _, 80);
        let mut buf: *mut u8 = std::ptr::null_mut();
        let mut size = 0;
        assert_eq!(raw::tj3Compress8(handle, px.as_ptr(), 32, 96, 32, raw::TJPF_TJPF_RGB as _, &mut buf, &mut size), 0);
        let out = std::slice::from_raw_parts(buf, size as usize).to_vec();
        raw::tj3Free(buf.cast());
        raw::tj3Destroy(handle);
        out
    };
    assert!(matches!(prepare(&prog), Err(SmError::Unsupported(_))));
    assert!(matches!(prepare(b"not a jpeg"), Err(SmError::Corrupt(_))));
}

/// What the warp decoder's warm-ups and periodic shortcut save on the level-0 tiles of a
/// shared slide: per tile, the rounds of decoding again and the symbols decoded along the
/// warp's critical path (each phase costs its busiest lane's symbols; a launch waits for its
/// slowest tile), printed for the record; every tile's coefficients checked against the serial
/// decoder in every configuration.
#[test]
fn warm_ups_and_periodic_runs_shorten_the_critical_path() {
    let Some(p) = shared("CMU-1-Small-Region.svs") else { return };
    let streams = level_streams(&crate::slide::Slide::open(&p).unwrap(), 0, 1, 10_000).unwrap();
    let serial: Vec<_> = streams.iter().map(|s| coefficients_host(s, None).unwrap().0).collect();
    let mut worst = Vec::new();
    // The first four compared below; then other warm-up lengths, for the record.
    for (warm, periodic) in [(0, false), (SM_WARM_BYTES, false), (0, true), (SM_WARM_BYTES, true), (16, true), (32, true), (128, true)] {
        let mut hist = std::collections::BTreeMap::new();
        let (mut total, mut most) = (0i64, 0i64);
        for (s, want) in streams.iter().zip(&serial) {
            let (got, cost) = coefficients_host_with(s, warm, periodic).unwrap();
            assert!(&got == want, "warm-up {warm}, periodic {periodic}: coefficients differ");
            *hist.entry(cost.rounds).or_insert(0) += 1;
            total += cost.critical_symbols;
            most = most.max(cost.critical_symbols);
        }
        eprintln!(
            "CMU-1-Small-Region level 0, {} tiles, warm-up {warm} bytes, periodic shortcut {periodic}: tiles by rounds {hist:?}; \
             critical path mean {} symbols, slowest tile {most}",
            streams.len(),
            total / streams.len() as i64
        );
        worst.push((total, most));
    }
    // Warm-ups shorten the typical tile, the periodic shortcut the slowest (the bottom row's
    // tiles, whose padding below the image repeats one block).
    assert!(worst[1].0 < worst[0].0 && worst[3].1 < worst[1].1, "no saving: {worst:?}");
}

/// Generated tiles whose lower part is one flat colour (as the padding below a slide's last row
/// is): the warp decoder with the periodic shortcut gives the serial decoder's coefficients, and
/// its critical path is shorter than without the shortcut (which must carry the true state
/// across the flat run one lane per round).
#[test]
fn flat_runs_take_the_periodic_shortcut_and_decode_alike() {
    let mut saved = 0;
    for (samp, rgb) in [(raw::TJSAMP_TJSAMP_444, true), (raw::TJSAMP_TJSAMP_420, false), (raw::TJSAMP_TJSAMP_422, false)] {
        let (w, h) = (240, 240);
        let mut px = pixels(w, h, 5);
        // Rows from 40 down: one colour.
        for v in px[40 * w * 3..].chunks_mut(3) {
            v.copy_from_slice(&[231, 228, 236]);
        }
        let s = compress(&px, w, h, &Enc { samp, quality: 30, rgb, restart_blocks: 0, optimize: false });
        let (want, _) = coefficients_host(&s, None).unwrap();
        let (plain, without) = coefficients_host_with(&s, SM_WARM_BYTES, false).unwrap();
        let (got, with) = coefficients_host_with(&s, SM_WARM_BYTES, true).unwrap();
        assert!(plain == want && got == want, "samp {samp}: the warp decoder differs from the serial one");
        eprintln!("samp {samp}: {} bytes, rounds {}, critical path {} symbols without the shortcut, {} with", s.len(), with.rounds, without.critical_symbols, with.critical_symbols);
        assert!(with.critical_symbols <= without.critical_symbols, "samp {samp}: the shortcut lengthened the critical path");
        saved += i64::from(with.critical_symbols < without.critical_symbols);
    }
    assert!(saved > 0, "the periodic shortcut never shortened a flat tile's critical path");
}
