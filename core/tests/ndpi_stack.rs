//! NDPI tiles decoded as one stacked JPEG (`codec::stack`, used by the CPU fetch for the parts
//! of consecutive tiles of one column) equal their decodes tile by tile, on the real
//! `test3-DAPI-2-387.ndpi` (4:4:4, 3968×8 tiles) and the generated 4:2:2 slide when present;
//! and parts that do not stack, or a damaged run, are refused so the fetch decodes tile by tile.

mod common;

use std::path::Path;

use common::{testdata, vendor_slides};
use slidestream::codec::stack::decode_ndpi_stack;
use slidestream::codec::{decode_chunk_part, ChunkGeometry, PartRect};
use slidestream::{Location, Slide};

fn check(path: &Path, x: u32, w: u32) {
    let slide = Slide::open(path).unwrap();
    let img = &slide.index().levels[0].image;
    let bytes = std::fs::read(path).unwrap();
    let at = Location::file(path);
    let (tw, th) = (img.tile_width, img.tile_height);
    assert_eq!(th, 8, "{}: stacking needs 8-pixel tiles", path.display());
    let g = ChunkGeometry { tile_width: tw, tile_height: th, valid_width: tw, valid_height: th };
    for (row0, n, y0, h_last) in [(0u64, 2usize, 0u32, 8u32), (3, 5, 3, 2), (10, 33, 7, 1), (1, 2, 5, 8)] {
        let runs: Vec<&[u8]> = (0..n as u64)
            .map(|k| {
                let l = img.tile_locs(0, row0 + k).next().unwrap();
                &bytes[l.offset as usize..(l.offset + l.length) as usize]
            })
            .collect();
        let wants: Vec<PartRect> = (0..n)
            .map(|k| match k {
                0 => PartRect { x, y: y0, w, h: th - y0 },
                k if k + 1 == n => PartRect { x, y: 0, w, h: h_last },
                _ => PartRect { x, y: 0, w, h: th },
            })
            .collect();
        let stacked = decode_ndpi_stack(&img.codec, &runs, g, &wants, &at).unwrap();
        for (k, (t, want)) in stacked.iter().zip(&wants).enumerate() {
            let one = decode_chunk_part(&img.codec, &[runs[k]], g, *want, &at).unwrap();
            assert_eq!((t.x, t.y, t.width, t.height), (one.x, one.y, one.width, one.height), "{} rows {row0}+{k}", path.display());
            assert!(t.rgba == one.rgba, "{}: stacked tile {k} of rows {row0}.. differs from its own decode", path.display());
        }
        // Parts that do not stack are refused (the fetch then decodes tile by tile).
        let mut bad = wants.clone();
        bad[1].y = 1;
        let r = decode_ndpi_stack(&img.codec, &runs, g, &bad, &at);
        assert!(r.is_err(), "{bad:?} {:?}", r.map(|v| v.len()));
        // A run that does not end in a marker fails the stack.
        let mut cut: Vec<&[u8]> = runs.clone();
        cut[n - 1] = &runs[n - 1][..runs[n - 1].len() - 1];
        assert!(decode_ndpi_stack(&img.codec, &cut, g, &wants, &at).is_err());
    }
}

#[test]
fn stacked_ndpi_tiles_equal_their_own_decodes() {
    if let Some(td) = testdata() {
        check(&td.join("test3-DAPI-2-387.ndpi"), 1000, 256);
        check(&td.join("test3-DAPI-2-387.ndpi"), 0, 100);
    }
    if let Some(vd) = vendor_slides() {
        check(&vd.join("ndpi-422-ri5.ndpi"), 16, 40);
        check(&vd.join("ndpi-444-nomcu.ndpi"), 1, 126);
    }
}
