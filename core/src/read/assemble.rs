//! CPU assembly: crop decoded tiles into an output. The reference the GPU assembly kernels are
//! tested against.
//!
//! * RGBA (`read_region`): OpenSlide's semantics; pixels outside the image and on missing
//!   tiles are (0, 0, 0, 0); tiles are copied as decoded (non-premultiplied).
//! * RGB batches (`read_regions_rgb_into`): pixels outside the image and on missing tiles are
//!   `background`; a partly transparent pixel is composited over it,
//!   `c·a/255 + bg·(1 − a/255)` rounded to nearest (`(c·a + bg·(255 − a) + 127) / 255`).
//!
//! Outputs are row-major `(h, w, channels)` `u8` of one patch; tiles are placed by their level
//! position (tile column × tile width + the decoded part's x, likewise y).

use std::sync::Arc;

use crate::codec::DecodedTile;
use crate::geometry::Rect;
use crate::read::batch_plan::BatchPlan;

/// Assemble patch `p` of `plan` as RGBA into `out` (`w × h × 4` bytes of the patch's rect):
/// zero everything, then copy each decoded tile. `tiles` holds one entry per
/// [`BatchPlan::tiles`] (`None` = missing: transparent); `tile_size` is the level's tile
/// (width, height).
pub fn assemble_rgba(plan: &BatchPlan, p: usize, tile_size: (u32, u32), tiles: &[Option<Arc<DecodedTile>>], out: &mut [u8]) {
    out.fill(0);
    place_rgba(plan, p, tile_size, tiles, out);
}

/// Copy the decoded tiles present in `tiles` (one entry per [`BatchPlan::tiles`]; `None` =
/// missing or not in this wave) into patch `p`'s RGBA output, leaving the other pixels as they
/// are: the per-wave step of a read whose tiles arrive in waves ([`assemble_rgba`] is the first
/// wave: zero, then place).
pub fn place_rgba(plan: &BatchPlan, p: usize, tile_size: (u32, u32), tiles: &[Option<Arc<DecodedTile>>], out: &mut [u8]) {
    let rect = plan.patches[p].rect;
    for (k, key) in plan.patch_tiles(p) {
        if let Some(t) = &tiles[k] {
            blit_tile(t, key.col * tile_size.0 as u64, key.row * tile_size.1 as u64, &rect, out);
        }
    }
    for q in plan.patch_pieces(p) {
        if let Some(t) = &tiles[q.tile] {
            blit_piece(t, q, &rect, None, out);
        }
    }
}

/// Copy piece `q` of a positioned level from its decoded tile `t` (which holds the piece's
/// pixels) into a patch covering `rect`: RGBA as decoded (`background` = `None`), or RGB
/// composited over `background`. The piece lies inside `rect` ([`BatchPlan`] clipped it).
///
/// # Panics
/// When `out` is smaller than the patch (`rect.w × rect.h` × 4 or 3 bytes).
pub(crate) fn blit_piece(t: &DecodedTile, q: &crate::read::batch_plan::PlacedPiece, rect: &Rect, background: Option<[u8; 3]>, out: &mut [u8]) {
    let channels = if background.is_some() { 3 } else { 4 };
    assert!(out.len() >= rect.w as usize * rect.h as usize * channels, "patch buffer too small");
    // SAFETY: `out` is exclusively borrowed and holds the whole patch (checked above).
    unsafe { blit_piece_raw(t, q, rect, background, out.as_mut_ptr()) }
}

/// [`blit_piece`] into a patch given by its first byte.
///
/// # Safety
/// `out` is valid for writes of the whole patch (`rect.w × rect.h` × 4 bytes for RGBA, × 3 for
/// RGB), and while this runs nothing else reads or writes the pixels the piece covers (other
/// threads may write the patch's other pixels: each row is taken as its own slice).
pub(crate) unsafe fn blit_piece_raw(t: &DecodedTile, q: &crate::read::batch_plan::PlacedPiece, rect: &Rect, background: Option<[u8; 3]>, out: *mut u8) {
    let (sx, sy) = ((q.src_x - t.x as u64) as usize, (q.src_y - t.y as u64) as usize);
    let (dx, dy) = ((q.x - rect.x) as usize, (q.y - rect.y) as usize);
    let (tw, ow, n) = (t.width as usize, rect.w as usize, q.w as usize);
    for row in 0..q.h as usize {
        let s = ((sy + row) * tw + sx) * 4;
        let src = &t.rgba[s..s + n * 4];
        match background {
            None => {
                let d = ((dy + row) * ow + dx) * 4;
                // SAFETY: inside the patch (the piece lies in `rect`); this row segment is the piece's.
                unsafe { std::slice::from_raw_parts_mut(out.add(d), n * 4) }.copy_from_slice(src);
            }
            Some(bg) => {
                let d = ((dy + row) * ow + dx) * 3;
                // SAFETY: as above.
                composite_row(src, unsafe { std::slice::from_raw_parts_mut(out.add(d), n * 3) }, t.opaque, bg);
            }
        }
    }
}

/// One row of RGBA pixels `src` composited over `background` into RGB `dst` (same pixel
/// count): opaque rows by [`rgba_to_rgb`], else per pixel `(c·a + bg·(255 − a) + 127) / 255`
/// (alpha 255 copies, alpha 0 writes the background). Every byte of `dst` is written, so the
/// result does not depend on what `dst` held.
fn composite_row(src: &[u8], dst: &mut [u8], opaque: bool, background: [u8; 3]) {
    if opaque {
        rgba_to_rgb(src, dst);
        return;
    }
    for (p, q) in src.chunks_exact(4).zip(dst.chunks_exact_mut(3)) {
        match p[3] {
            255 => q.copy_from_slice(&p[..3]),
            0 => q.copy_from_slice(&background),
            a => {
                let a = a as u32;
                for c in 0..3 {
                    q[c] = ((p[c] as u32 * a + background[c] as u32 * (255 - a) + 127) / 255) as u8;
                }
            }
        }
    }
}

/// Assemble patch `p` of `plan` as RGB over `background` into `out` (`w × h × 3` bytes); as
/// [`assemble_rgba`] otherwise.
pub fn assemble_rgb(plan: &BatchPlan, p: usize, tile_size: (u32, u32), tiles: &[Option<Arc<DecodedTile>>], background: [u8; 3], out: &mut [u8]) {
    fill_rgb(out, background);
    place_rgb(plan, p, tile_size, tiles, background, out);
}

/// Composite the decoded tiles present in `tiles` over `background` into patch `p`'s RGB
/// output, leaving the other pixels as they are (the per-wave step; see [`place_rgba`]). Every
/// pixel lies in one tile of a regular grid or one piece of a positioned level, so compositing
/// over `background` rather than over the output's current value is exact.
pub fn place_rgb(plan: &BatchPlan, p: usize, tile_size: (u32, u32), tiles: &[Option<Arc<DecodedTile>>], background: [u8; 3], out: &mut [u8]) {
    let rect = plan.patches[p].rect;
    for (k, key) in plan.patch_tiles(p) {
        if let Some(t) = &tiles[k] {
            let (tx, ty) = (key.col * tile_size.0 as u64 + t.x as u64, key.row * tile_size.1 as u64 + t.y as u64);
            blit_rgb(t, tx, ty, &rect, background, out);
        }
    }
    for q in plan.patch_pieces(p) {
        if let Some(t) = &tiles[q.tile] {
            blit_piece(t, q, &rect, Some(background), out);
        }
    }
}

/// Fill an RGB buffer with one colour.
pub fn fill_rgb(out: &mut [u8], background: [u8; 3]) {
    if background[0] == background[1] && background[1] == background[2] {
        out.fill(background[0]);
    } else {
        for px in out.chunks_exact_mut(3) {
            px.copy_from_slice(&background);
        }
    }
}

/// Composite the part of decoded tile `t` (its pixels starting at level position `tx`, `ty`)
/// that falls in `rect` over `background` into an RGB patch `out` (`rect.w × rect.h × 3`).
/// Every pixel the tile covers is written (alpha 0 gives the background), whatever `out` held.
///
/// # Panics
/// When `out` is smaller than `rect.w × rect.h × 3` bytes.
pub fn blit_rgb(t: &DecodedTile, tx: u64, ty: u64, rect: &Rect, background: [u8; 3], out: &mut [u8]) {
    assert!(out.len() >= rect.w as usize * rect.h as usize * 3, "patch buffer too small");
    // SAFETY: `out` is exclusively borrowed and holds the whole patch (checked above).
    unsafe { blit_rgb_raw(t, tx, ty, rect, background, out.as_mut_ptr()) }
}

/// [`blit_rgb`] into a patch given by its first byte.
///
/// # Safety
/// `out` is valid for writes of `rect.w × rect.h × 3` bytes, and while this runs nothing else
/// reads or writes the pixels the tile covers (other threads may write the patch's other
/// pixels: each row is taken as its own slice).
pub(crate) unsafe fn blit_rgb_raw(t: &DecodedTile, tx: u64, ty: u64, rect: &Rect, background: [u8; 3], out: *mut u8) {
    let (tw, th) = (t.width as i64, t.height as i64);
    let x0 = (tx as i64).max(rect.x);
    let y0 = (ty as i64).max(rect.y);
    let x1 = (tx as i64 + tw).min(rect.x + rect.w as i64);
    let y1 = (ty as i64 + th).min(rect.y + rect.h as i64);
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    let n = (x1 - x0) as usize;
    for y in y0..y1 {
        let s = ((y - ty as i64) as usize * tw as usize + (x0 - tx as i64) as usize) * 4;
        let d = ((y - rect.y) as usize * rect.w as usize + (x0 - rect.x) as usize) * 3;
        // SAFETY: the row segment lies in the patch (clipped to `rect`) and is this tile's.
        let dst = unsafe { std::slice::from_raw_parts_mut(out.add(d), n * 3) };
        composite_row(&t.rgba[s..s + n * 4], dst, t.opaque, background);
    }
}

/// Fill the part of `rect` that the `w × h` area at level position (`x`, `y`) covers with
/// `background`, in an RGB patch given by its first byte (used where a decoded tile does not
/// cover all a batch needs of it, so no pixel is left unwritten).
///
/// # Safety
/// As [`blit_rgb_raw`], for the pixels of that area.
pub(crate) unsafe fn fill_area_raw(x: i64, y: i64, w: u64, h: u64, rect: &Rect, background: [u8; 3], out: *mut u8) {
    let x0 = x.max(rect.x);
    let y0 = y.max(rect.y);
    let x1 = (x + w as i64).min(rect.x + rect.w as i64);
    let y1 = (y + h as i64).min(rect.y + rect.h as i64);
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    for yy in y0..y1 {
        let d = ((yy - rect.y) as usize * rect.w as usize + (x0 - rect.x) as usize) * 3;
        // SAFETY: the row segment lies in the patch (clipped to `rect`) and is this area's.
        fill_rgb(unsafe { std::slice::from_raw_parts_mut(out.add(d), (x1 - x0) as usize * 3) }, background);
    }
}

/// Drop the alpha byte: `src` RGBA → `dst` RGB, same pixel count. On x86-64 with SSSE3 (every
/// x86-64 CPU of the last 15 years; checked at run time), four pixels at a time with one byte
/// shuffle; otherwise each pixel as one 4-byte load and store. Either way the stray bytes of a
/// wide store land where the next pixels go and are overwritten by them, and nothing is
/// written past `dst`.
pub fn rgba_to_rgb(src: &[u8], dst: &mut [u8]) {
    let n = dst.len() / 3;
    assert!(src.len() >= n * 4, "RGBA source shorter than its RGB destination");
    #[cfg(target_arch = "x86_64")]
    if n >= 6 && std::arch::is_x86_feature_detected!("ssse3") {
        // SAFETY: SSSE3 is present (checked above); lengths as the function requires.
        let done = unsafe { rgba_to_rgb_ssse3(src, dst, n) };
        rgba_to_rgb_scalar(&src[done * 4..], &mut dst[done * 3..n * 3]);
        return;
    }
    rgba_to_rgb_scalar(src, &mut dst[..n * 3]);
}

/// [`rgba_to_rgb`] pixel by pixel.
fn rgba_to_rgb_scalar(src: &[u8], dst: &mut [u8]) {
    let n = dst.len() / 3;
    if n == 0 {
        return;
    }
    for i in 0..n - 1 {
        let px: [u8; 4] = src[4 * i..4 * i + 4].try_into().expect("4 bytes");
        dst[3 * i..3 * i + 4].copy_from_slice(&px);
    }
    dst[3 * (n - 1)..3 * n].copy_from_slice(&src[4 * (n - 1)..4 * (n - 1) + 3]);
}

/// The first pixels of [`rgba_to_rgb`], four at a time: one 16-byte load, a shuffle packing
/// their 12 colour bytes, one 16-byte store. Returns how many pixels it converted (a multiple of
/// 4, leaving at least 2 so every store stays inside `dst`).
///
/// # Safety
/// The CPU has SSSE3; `src` holds at least `4 n` bytes and `dst` at least `3 n`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn rgba_to_rgb_ssse3(src: &[u8], dst: &mut [u8], n: usize) -> usize {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_setr_epi8, _mm_shuffle_epi8, _mm_storeu_si128};
    let pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    let mut i = 0;
    // The store of pixels i..i+4 writes dst bytes 3i..3i+16: inside while 3i + 16 <= 3n.
    while 3 * i + 16 <= 3 * n {
        // SAFETY: 4i + 16 <= 4n bytes of `src` (i + 4 <= n follows from the loop bound) and
        // 3i + 16 <= 3n bytes of `dst`; unaligned loads and stores.
        unsafe {
            let v = _mm_loadu_si128(src.as_ptr().add(4 * i) as *const __m128i);
            _mm_storeu_si128(dst.as_mut_ptr().add(3 * i) as *mut __m128i, _mm_shuffle_epi8(v, pack));
        }
        i += 4;
    }
    i
}

/// Copy a decoded tile (whole or part) whose tile origin is level position (`tx`, `ty`) into
/// an RGBA output covering `rect`.
pub fn blit_tile(t: &DecodedTile, tx: u64, ty: u64, rect: &Rect, out: &mut [u8]) {
    blit(t.width as u64, t.height as u64, &t.rgba, tx + t.x as u64, ty + t.y as u64, rect, out);
}

/// Copy the part of `tw × th` RGBA pixels at level position `(tx, ty)` that falls in `rect`
/// into `out` (RGBA, `rect.w × rect.h`).
fn blit(tw: u64, th: u64, tile: &[u8], tx: u64, ty: u64, rect: &Rect, out: &mut [u8]) {
    let x0 = (tx as i64).max(rect.x);
    let y0 = (ty as i64).max(rect.y);
    let x1 = ((tx + tw) as i64).min(rect.x + rect.w as i64);
    let y1 = ((ty + th) as i64).min(rect.y + rect.h as i64);
    if x1 <= x0 || y1 <= y0 {
        return;
    }
    let n = (x1 - x0) as usize * 4;
    for y in y0..y1 {
        let s = ((y - ty as i64) as usize * tw as usize + (x0 - tx as i64) as usize) * 4;
        let d = ((y - rect.y) as usize * rect.w as usize + (x0 - rect.x) as usize) * 4;
        out[d..d + n].copy_from_slice(&tile[s..s + n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::batch_plan::LevelGeom;
    use crate::index::{ImageIndex, TileLoc};
    use crate::read::test_image;

    #[test]
    fn rgba_to_rgb_drops_alpha_exactly() {
        // Every length around the 4-pixel steps and the tail, and offset slices (unaligned).
        for n in 0..41usize {
            let src: Vec<u8> = (0..n * 4).map(|i| i as u8).collect();
            let mut dst = vec![0xAAu8; n * 3];
            rgba_to_rgb(&src, &mut dst);
            let expect: Vec<u8> = src.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
            assert_eq!(dst, expect, "n = {n}");
            // Inside a larger buffer, at an odd offset: nothing outside the destination moves.
            let mut big = vec![0xAAu8; n * 3 + 21];
            rgba_to_rgb(&src, &mut big[1..1 + n * 3]);
            assert_eq!(&big[1..1 + n * 3], &expect[..], "n = {n} (offset)");
            assert!(big[..1].iter().chain(&big[1 + n * 3..]).all(|&b| b == 0xAA), "n = {n}: wrote outside");
        }
    }

    /// A 6 × 4 level of 4 × 4 tiles (2 × 1 grid; the second tile is 2 wide).
    fn image() -> ImageIndex {
        test_image(6, 4, 4, 4, 1, vec![TileLoc::primary(8, 1); 2])
    }

    /// Level pixel (x, y) as RGBA; alpha 128 at x = 5.
    fn px(x: u64, y: u64) -> [u8; 4] {
        [(10 * x + y) as u8, (20 + y) as u8, 30, if x == 5 { 128 } else { 255 }]
    }

    fn tile(col: u64, w: u32) -> Arc<DecodedTile> {
        let rgba = (0..4u64).flat_map(|y| (0..w as u64).flat_map(move |x| px(col * 4 + x, y))).collect();
        Arc::new(DecodedTile { x: 0, y: 0, width: w, height: 4, opaque: col == 0, rgba })
    }

    #[test]
    fn rgba_and_rgb_patches_match_the_pixel_rule() {
        let img = image();
        let g = LevelGeom { slide: 1, level: 0, image: &img, downsample: 1.0 };
        // A 5 × 3 patch at (3, 2): columns 3..8 (6, 7 outside), rows 2..5 (4 outside).
        let plan = BatchPlan::build(&g, &[(3, 2)], (5, 3));
        let tiles: Vec<Option<Arc<DecodedTile>>> = plan.tiles.iter().map(|t| Some(tile(t.key.col, if t.key.col == 0 { 4 } else { 2 }))).collect();
        let mut rgba = vec![0xEE; 5 * 3 * 4];
        assemble_rgba(&plan, 0, (4, 4), &tiles, &mut rgba);
        let mut rgb = vec![0xEE; 5 * 3 * 3];
        let bg = [200, 100, 0];
        assemble_rgb(&plan, 0, (4, 4), &tiles, bg, &mut rgb);
        for y in 0..3u64 {
            for x in 0..5u64 {
                let (lx, ly) = (3 + x, 2 + y);
                let want = if lx < 6 && ly < 4 { px(lx, ly) } else { [0; 4] };
                let i = (y * 5 + x) as usize;
                assert_eq!(rgba[i * 4..i * 4 + 4], want, "rgba ({x}, {y})");
                let a = want[3] as u32;
                let c = |k: usize| ((want[k] as u32 * a + bg[k] as u32 * (255 - a) + 127) / 255) as u8;
                assert_eq!(rgb[i * 3..i * 3 + 3], [c(0), c(1), c(2)], "rgb ({x}, {y})");
            }
        }
        // Placing alone (no fill first) writes every pixel a tile covers, transparent ones as
        // the background: the batch path places into patches it never filled.
        let clear: Vec<Option<Arc<DecodedTile>>> = plan
            .tiles
            .iter()
            .map(|t| {
                let w = if t.key.col == 0 { 4 } else { 2 };
                Some(Arc::new(DecodedTile { x: 0, y: 0, width: w, height: 4, opaque: false, rgba: vec![0; w as usize * 16] }))
            })
            .collect();
        let mut placed = vec![0xEE; 5 * 3 * 3];
        place_rgb(&plan, 0, (4, 4), &clear, bg, &mut placed);
        for y in 0..3u64 {
            for x in 0..5u64 {
                let i = (y * 5 + x) as usize * 3;
                let inside = 3 + x < 6 && 2 + y < 4;
                assert_eq!(placed[i..i + 3], if inside { bg } else { [0xEE; 3] }, "({x}, {y})");
            }
        }
        // A missing tile reads as transparent / background.
        let none = vec![None; plan.tiles.len()];
        assemble_rgba(&plan, 0, (4, 4), &none, &mut rgba);
        assert!(rgba.iter().all(|&b| b == 0));
        assemble_rgb(&plan, 0, (4, 4), &none, bg, &mut rgb);
        assert!(rgb.chunks_exact(3).all(|p| p == bg));
    }
}
