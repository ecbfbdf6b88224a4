//! Host tests of the SM decoder's launch packing and the subsamplings it takes.

use super::*;
use crate::codec::jpeg_sm::{prepare, SmjTables};
use crate::codec::PartRect;

fn stream(w: usize, h: usize, sub: turbojpeg::Subsamp, quality: i32) -> Vec<u8> {
    let px: Vec<u8> = (0..w * h * 3).map(|i| (i * 7 % 251) as u8).collect();
    let img = turbojpeg::Image { pixels: px.as_slice(), width: w, pitch: w * 3, height: h, format: turbojpeg::PixelFormat::RGB };
    turbojpeg::compress(img, quality, sub).expect("compress").to_vec()
}

#[test]
fn a_launch_packs_descriptors_and_shared_tables_for_one_upload_beside_its_streams() {
    let streams =
        [stream(240, 240, turbojpeg::Subsamp::Sub2x2, 80), stream(100, 37, turbojpeg::Subsamp::None, 80), stream(64, 64, turbojpeg::Subsamp::Sub2x1, 50)];
    let prepared: Vec<SmPrepared> = streams.iter().map(|s| prepare(s).expect("prepare")).collect();
    // The streams where the batch driver frames them: each in its own place, with gaps.
    let (at, data_len) = back_to_back(streams.iter().map(|s| s.len() + 100));
    assert_eq!((at[0], at[1], data_len), (0, streams[0].len() + 100, streams.iter().map(|s| s.len() + 100).sum()));
    // The second tile is needed only in part (region-aware: its IDCT window).
    let parts = [None, Some(PartRect { x: 10, y: 5, w: 20, h: 3 }), None];
    let items: Vec<(usize, &SmPrepared, Option<PartRect>)> = at.iter().copied().zip(&prepared).zip(parts).map(|((a, p), r)| (a, p, r)).collect();
    let mut pk = Packed::new(&items);
    // Equal DHT/DQT bytes share one table set: quality 80 twice, 50 once.
    assert_eq!(pk.tables.len(), 2);
    assert_eq!((pk.descs[0].tables, pk.descs[1].tables, pk.descs[2].tables), (0, 0, 1));
    assert!(pk.segs_at >= 3 * size_of::<SmjTile>());
    for at in [pk.segs_at, pk.tabs_at] {
        assert_eq!(at % 256, 0);
    }
    assert_eq!(pk.order_at, (pk.tabs_at + 2 * size_of::<SmjTables>()).next_multiple_of(256));
    assert_eq!(pk.wins_at, (pk.order_at + 4 * pk.segs.len()).next_multiple_of(256));
    assert_eq!(pk.total, pk.wins_at + 16 * 3);
    // Whole tiles: their whole MCU grid; 100 × 37 4:4:4 needed at (10..30, 5..8): MCUs 1..4, 0..1.
    assert_eq!(pk.wins, vec![[0, 0, 15, 15], [1, 0, 4, 1], [0, 0, 4, 8]]);
    // Every segment once: the short ones (one thread each) first, then the long ones (a warp).
    let mut seen = pk.order.clone();
    seen.sort();
    assert_eq!(seen, (0..pk.segs.len() as i32).collect::<Vec<_>>());
    assert!(pk.order[..pk.n_thread].iter().all(|&k| !warp_decodes(pk.segs[k as usize].len)));
    assert!(pk.order[pk.n_thread..].iter().all(|&k| warp_decodes(pk.segs[k as usize].len)));
    assert!(pk.n_thread < pk.segs.len(), "the 240² tile's scan is long enough for a warp");
    let (data, descs, coef, pix, status) = (1 << 39, 1 << 40, 1 << 41, 1 << 42, 1 << 43);
    let offsets: Vec<u64> = pk.descs.iter().map(|t| t.coef).collect();
    let args = pk.place(data, descs, coef, pix, status);
    assert_eq!((args.tiles, args.segs, args.tabs, args.status), (descs, descs + pk.segs_at as u64, descs + pk.tabs_at as u64, status));
    assert_eq!((args.ntiles, args.nsegs, args.wins), (3, pk.segs.len(), descs + pk.wins_at as u64));
    // The 240² 4:2:0 tile has the most blocks: 30 × 30 luma + 2 × 15 × 15 chroma.
    assert_eq!(args.max_blocks, 900 + 2 * 225);
    let mut next = 0u64;
    for (k, t) in pk.descs.iter().enumerate() {
        assert_eq!(offsets[k], next);
        assert_eq!((t.coef, t.pix), (coef + 2 * next, pix + next));
        next += t.coefficients().next_multiple_of(64);
    }
    assert_eq!(next, pk.coef_total);
    let mut host = vec![0u8; pk.total];
    pk.write(&mut host);
    assert_eq!(&host[pk.wins_at + 16..pk.wins_at + 32], as_bytes(&[[1i32, 0, 4, 1]]));
    for (k, s) in streams.iter().enumerate() {
        // Every segment of tile k points at its stream's bytes in the data upload.
        for g in pk.segs.iter().filter(|g| g.tile == k as i32) {
            let a = (g.data - data) as usize;
            assert!(a >= at[k] && a + g.len as usize <= at[k] + s.len());
        }
    }
    assert_eq!(pk.segs.len(), prepared.iter().map(|p| p.segments.len()).sum::<usize>());
    assert_eq!(&host[..3 * size_of::<SmjTile>()], as_bytes(&pk.descs));
    assert_eq!(&host[pk.segs_at..pk.segs_at + pk.segs.len() * size_of::<SmjSegment>()], as_bytes(&pk.segs));
    assert_eq!(&host[pk.tabs_at..pk.tabs_at + 2 * size_of::<SmjTables>()], as_bytes(&pk.tables));
    assert_eq!(&host[pk.order_at..pk.order_at + 4 * pk.order.len()], as_bytes(&pk.order));
    assert_eq!(args.order, descs + pk.order_at as u64);
    assert_eq!((args.n_thread, args.n_warp), (pk.n_thread, pk.segs.len() - pk.n_thread));
}

#[test]
fn convert_takes_the_subsamplings_its_kernel_upsamples() {
    let mut t = prepare(&stream(64, 64, turbojpeg::Subsamp::Sub2x2, 80)).expect("prepare").tile;
    assert_eq!(convert_subsampling(&t), Some((2, 2)));
    (t.h[0], t.v[0]) = (4, 1); // 4:1:1
    assert_eq!(convert_subsampling(&t), None);
    (t.h[0], t.v[0], t.h[1]) = (2, 1, 2);
    assert_eq!(convert_subsampling(&t), None);
    let g = prepare(&stream(64, 64, turbojpeg::Subsamp::Gray, 80)).expect("prepare").tile;
    assert_eq!(convert_subsampling(&g), None);
    for (sub, want) in [(turbojpeg::Subsamp::None, (1, 1)), (turbojpeg::Subsamp::Sub2x1, (2, 1)), (turbojpeg::Subsamp::Sub1x2, (1, 2))] {
        assert_eq!(convert_subsampling(&prepare(&stream(48, 40, sub, 90)).expect("prepare").tile), Some(want));
    }
}

/// Launches are cut by tile count and by scratch bytes, never empty while tiles remain.
#[test]
fn launches_are_bounded_by_tiles_and_scratch() {
    assert_eq!(launch_len(std::iter::empty()), 0);
    assert_eq!(launch_len(std::iter::repeat_n(64, 70_000)), MAX_SM_TILES);
    // An RGB-coded 240² tile: 3 × 30 × 30 blocks of 64 coefficients, 518,400 bytes of scratch.
    let rgb = 3 * 30 * 30 * 64;
    let n = launch_len(std::iter::repeat_n(rgb, 20_000));
    assert_eq!(n as u64, MAX_SM_SCRATCH_BYTES / (rgb * 3));
    // One tile larger than the whole budget still goes alone.
    assert_eq!(launch_len([MAX_SM_SCRATCH_BYTES, 64].into_iter()), 1);
}

/// A wave's tiles are cut into launches in order, none empty, each within [`launch_len`].
#[test]
fn waves_split_into_bounded_launches_in_order() {
    let p = prepare(&stream(240, 240, turbojpeg::Subsamp::None, 80)).expect("prepare");
    let per = launch_len(std::iter::repeat_n(p.tile.coefficients(), 100_000));
    let n = per + per / 2;
    let tiles: Vec<SmTile> = (0..n)
        .map(|i| SmTile {
            miss: Miss { need: i, src: 0, col: i as u64, row: 0, offset: 0, len: 1, part: None, rank: 0 },
            at: i * 10,
            len: 10,
            prepared: p.clone(),
            part: None,
        })
        .collect();
    let launches = split_launches(tiles);
    assert_eq!(launches.iter().map(Vec::len).collect::<Vec<_>>(), vec![per, per / 2]);
    let cols: Vec<u64> = launches.iter().flatten().map(|t| t.miss.col).collect();
    assert_eq!(cols, (0..n as u64).collect::<Vec<_>>());
    assert!(split_launches(Vec::new()).is_empty());
}

#[test]
fn a_tile_is_decoded_in_the_part_its_call_needs_when_that_part_lies_inside() {
    let part = PartRect { x: 230, y: 10, w: 10, h: 190 };
    assert_eq!(decoded_part(None, 240, 200), None);
    assert_eq!(decoded_part(Some(part), 240, 200), Some(part));
    // A part reaching past the valid tile, or empty, is not trusted (the whole tile, whose
    // IDCT window and conversion then agree); the whole valid tile is not a part (cached).
    assert_eq!(decoded_part(Some(PartRect { w: 11, ..part }), 240, 200), None);
    assert_eq!(decoded_part(Some(PartRect { h: 191, ..part }), 240, 200), None);
    assert_eq!(decoded_part(Some(PartRect { w: 0, ..part }), 240, 200), None);
    assert_eq!(decoded_part(Some(PartRect { x: u32::MAX, ..part }), 240, 200), None);
    assert_eq!(decoded_part(Some(PartRect { x: 0, y: 0, w: 240, h: 200 }), 240, 200), None);
}
