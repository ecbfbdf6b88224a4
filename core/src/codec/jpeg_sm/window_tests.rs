//! Region-aware decoding: the SM decoder runs the IDCT only for the MCUs of [`idct_window`], and
//! the `convert` kernel converts only the part. Converting a part from planes whose other
//! blocks were never inverse-DCT'd (filled with a poison value) must give exactly the crop of
//! the whole tile's conversion, for every sampling the kernel takes, at every edge.

use super::tests::{compress, pixels, Enc};
use super::*;
use crate::codec::PartRect;
use crate::gpu::color::planar_to_rgba;
use turbojpeg::raw;

/// RGBA of the whole tile from `planes` (as the `convert` kernel computes it: the CPU
/// reference `planar_to_rgba`), for a stream of luma sampling `(h, v)` with 1 × 1 chroma.
fn rgba(planes: &[Vec<u8>], p: &SmPrepared) -> Vec<u8> {
    let t = &p.tile;
    let (h, v) = (t.h[0] as u32, t.v[0] as u32);
    let dims: [(usize, usize); 3] = std::array::from_fn(|c| t.component_size(c));
    let pitches: [usize; 3] = std::array::from_fn(|c| t.plane_size(c).0);
    let sub = [(1, 1), (h, v), (h, v)];
    planar_to_rgba([&planes[0], &planes[1], &planes[2]], pitches, dims, sub, t.width as usize, t.height as usize, !p.rgb_coded)
}

fn crop(img: &[u8], w: usize, r: PartRect) -> Vec<u8> {
    (r.y as usize..(r.y + r.h) as usize).flat_map(|y| img[(y * w + r.x as usize) * 4..][..r.w as usize * 4].iter().copied()).collect()
}

/// Parts of a `w × h` tile: corners, edges, single pixels, MCU-straddling and random ones.
fn parts(w: u32, h: u32, seed: u32) -> Vec<PartRect> {
    let mut v = vec![
        PartRect { x: 0, y: 0, w: 1, h: 1 },
        PartRect { x: w - 1, y: h - 1, w: 1, h: 1 },
        PartRect { x: 0, y: 0, w: w.min(17), h: h.min(9) },
        PartRect { x: w / 2, y: 0, w: w - w / 2, h },
        PartRect { x: 0, y: h / 2, w, h: h - h / 2 },
    ];
    let mut x = seed.wrapping_mul(747796405).wrapping_add(1);
    for _ in 0..12 {
        let mut next = |n: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n.max(1)
        };
        let (px, py) = (next(w), next(h));
        let (pw, ph) = (1 + next(w - px), 1 + next(h - py));
        v.push(PartRect { x: px, y: py, w: pw, h: ph });
    }
    v
}

#[test]
fn a_part_decoded_only_in_its_window_equals_the_crop_of_the_whole_tile() {
    let samps = [raw::TJSAMP_TJSAMP_444, raw::TJSAMP_TJSAMP_422, raw::TJSAMP_TJSAMP_420, raw::TJSAMP_TJSAMP_440];
    let sizes = [(240u32, 240u32), (255, 257), (17, 33), (3, 2), (64, 8)];
    let (mut n, mut skipped, mut blocks) = (0usize, 0u64, 0u64);
    for (si, &samp) in samps.iter().enumerate() {
        for (zi, &(w, h)) in sizes.iter().enumerate() {
            for rgb in [false, true] {
                let s = compress(&pixels(w as usize, h as usize, (si * 7 + zi) as u32), w as usize, h as usize, &Enc { samp, quality: 80, rgb, restart_blocks: 0, optimize: false });
                let (whole_planes, p) = decode_planes_host(&s).unwrap();
                let whole = rgba(&whole_planes, &p);
                for part in parts(w, h, (si * 131 + zi * 17) as u32 + u32::from(rgb)) {
                    let win = idct_window(&p.tile, Some(part));
                    for fill in [0u8, 255] {
                        let (planes, _) = decode_planes_host_window(&s, Some(win), fill).unwrap();
                        let got = crop(&rgba(&planes, &p), w as usize, part);
                        assert!(got == crop(&whole, w as usize, part), "samp {samp} {w}x{h} rgb {rgb}: part {part:?}, window {win:?}, fill {fill}");
                    }
                    let t = &p.tile;
                    for c in 0..3 {
                        for by in 0..t.bh[c] as usize {
                            for bx in 0..t.bw[c] as usize {
                                blocks += 1;
                                skipped += u64::from(!block_in_window(t, c, bx, by, &win));
                            }
                        }
                    }
                    n += 1;
                }
            }
        }
    }
    eprintln!("{n} parts equal their crops; the IDCT skipped {skipped} of {blocks} blocks");
    assert!(skipped * 3 > blocks, "the windows should spare most blocks of these parts ({skipped} of {blocks})");
}

#[test]
fn windows_cover_the_part_and_the_chroma_fancy_upsampling_reads() {
    // 4:2:0, 240 × 240: MCUs of 16 × 16; an MCU's first pixel (even) reads the chroma sample
    // before it (the previous MCU's), its last (odd) the one after it.
    let s = compress(&pixels(240, 240, 3), 240, 240, &Enc { samp: raw::TJSAMP_TJSAMP_420, quality: 80, rgb: false, restart_blocks: 0, optimize: false });
    let t = prepare(&s).unwrap().tile;
    assert_eq!(idct_window(&t, None), [0, 0, 15, 15]);
    assert_eq!(idct_window(&t, Some(PartRect { x: 20, y: 20, w: 8, h: 8 })), [1, 1, 2, 2]);
    // Pixel 16 (an MCU's first) reads chroma of pixel 14's MCU; pixel 31 (its last) of 33's.
    assert_eq!(idct_window(&t, Some(PartRect { x: 16, y: 31, w: 16, h: 1 })), [0, 1, 3, 3]);
    // Odd first and even last pixel read inside their MCU: no neighbour MCU.
    assert_eq!(idct_window(&t, Some(PartRect { x: 17, y: 17, w: 14, h: 14 })), [1, 1, 2, 2]);
    assert_eq!(idct_window(&t, Some(PartRect { x: 0, y: 0, w: 240, h: 240 })), [0, 0, 15, 15]);
    // 4:4:4: no neighbour read, MCUs of 8 × 8.
    let s = compress(&pixels(240, 240, 3), 240, 240, &Enc { samp: raw::TJSAMP_TJSAMP_444, quality: 80, rgb: true, restart_blocks: 0, optimize: false });
    let t = prepare(&s).unwrap().tile;
    assert_eq!(idct_window(&t, Some(PartRect { x: 16, y: 31, w: 16, h: 1 })), [2, 3, 4, 4]);
    assert_eq!(idct_window(&t, Some(PartRect { x: 239, y: 239, w: 1, h: 1 })), [29, 29, 30, 30]);
}
