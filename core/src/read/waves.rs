//! Bounded-memory fetching: the tiles one call needs, read and decoded in **waves** whose held
//! bytes stay within the slide's working-set budget (`SLIDESTREAM_READ_WORKING_BYTES`,
//! [`crate::config::Config::read_working_bytes`]), each wave placed into the output and dropped
//! before the next is read.
//!
//! The budget is charged per tile *before* anything is read, from the index alone
//! ([`tile_charge`]): the tile's compressed bytes, its decoded RGBA pixels and an upper estimate
//! of the decoder's own buffers. A call's peak memory is then its output, plus what the shared
//! tile cache holds (its own byte budget), plus at most one wave. A tile whose charge alone
//! exceeds the budget — a 16384² zstd tile asked for one pixel, say — is an [`Error::Limits`]
//! naming the tile and the setting, raised before any byte is read.
//!
//! Waves take tiles in file order (first byte range), so each wave's read plan coalesces as the
//! whole call's would. Before it is read, a wave takes its charge from the process-wide budget
//! (`SLIDESTREAM_READ_PROCESS_BYTES`, off by default: [`super::inflight`]), which bounds the
//! waves of concurrent calls together. Between waves the process's interrupt check runs
//! ([`crate::interrupt`]): a long call stops with [`Error::Interrupted`] at the next wave.

use std::sync::Arc;

use crate::codec::{DecodedTile, PartRect};
use crate::error::{Error, Result};
use crate::index::ImageIndex;
use crate::read::fetch::{fetch_tiles, Batch};
use crate::read::locate::locate_tile;

/// Bytes held while tile (`col`, `row`) of `img` — or the part `part` of it — is read and
/// decoded: its compressed bytes, the decoded RGBA (4 bytes per pixel of the tile's valid
/// region, or of the part widened by one JPEG iMCU), and the decoder's transient buffers per
/// pixel of the whole stored tile, as the codec table gives them
/// ([`crate::codec::table::CodecEntry::working`]; JPEG decoded reduced by `reduce` > 1: a
/// buffer 1/s² of the tile, s being the DCT scale). An upper estimate, computed from the index
/// alone.
pub fn tile_charge(img: &ImageIndex, col: u64, row: u64, part: Option<PartRect>, reduce: u32) -> u64 {
    let compressed: u64 = img.tile_locs(col, row).map(|l| l.length).sum();
    let (vw, vh) = img.valid_tile_size(col, row);
    let stored = img.tile_width as u64 * img.tile_height as u64;
    let s = crate::codec::reduce::jpeg_scale(reduce, (vw, vh)) as u64;
    let partial = crate::codec::table::decodes_part(&img.codec);
    if crate::codec::table::decodes_reduced(&img.codec) && s > 1 {
        // DCT-scaled decode into a tile-sized / s² buffer, then the reduced output.
        return compressed.saturating_add((stored / (s * s) + 1).saturating_mul(8));
    }
    let (out_px, transient_px) = match part {
        // Only the part's rows (widened by one iMCU) are decoded and held.
        Some(p) if partial => {
            let px = (p.w as u64 + 32).min(vw as u64) * p.h as u64;
            (px, px)
        }
        _ => (vw as u64 * vh as u64, stored),
    };
    let transient_per_px = crate::codec::table::working_bytes_per_pixel(&img.codec);
    compressed.saturating_add(out_px.saturating_mul(4)).saturating_add(transient_px.saturating_mul(transient_per_px))
}

/// Split the tiles `coords` (each listed once; `parts` as for [`fetch_tiles`]) into waves of at
/// most `budget` charged bytes, in file order. Missing tiles cost nothing and go in the first
/// wave. Returns the waves as lists of indices into `coords`: at least one (empty when `coords`
/// is), so a caller's first-wave work (filling its output) always runs.
///
/// # Errors
/// Tile location errors ([`locate_tile`]); [`Error::Limits`] naming the tile when one tile's
/// [`tile_charge`] exceeds `budget`. Nothing has been read then.
pub(crate) fn plan_waves(b: &Batch<'_>, coords: &[(u64, u64)], parts: Option<&[Option<PartRect>]>) -> Result<Vec<Wave>> {
    let mut order: Vec<(u64, usize, u64)> = Vec::with_capacity(coords.len());
    for (i, &(col, row)) in coords.iter().enumerate() {
        let (offset, charge) = charge_tile(b, col, row, parts.and_then(|p| p[i]))?.unwrap_or((0, 0));
        order.push((offset, i, charge));
    }
    Ok(pack_waves(order, b.working_bytes))
}

/// The first byte offset and the [`tile_charge`] of tile (`col`, `row`) of `b`'s image, or
/// `None` for a missing tile.
///
/// # Errors
/// Tile location errors ([`locate_tile`]); [`Error::Limits`] naming the tile and the setting
/// when the charge exceeds `b.working_bytes`.
pub(crate) fn charge_tile(b: &Batch<'_>, col: u64, row: u64, part: Option<PartRect>) -> Result<Option<(u64, u64)>> {
    let img = b.image;
    if locate_tile(img, b.src, col, row, b.at)?.is_none() {
        return Ok(None);
    }
    let charge = tile_charge(img, col, row, part, b.reduce.map_or(1, |r| r.0));
    if charge > b.working_bytes {
        let (vw, vh) = img.valid_tile_size(col, row);
        return Err(Error::limits(
            &b.at.clone().with_tile(col, row),
            format!(
                "decoding this {vw}x{vh} tile ({:?}) would hold about {} MiB, more than one read's working set \
                 (SLIDESTREAM_READ_WORKING_BYTES = {} MiB)",
                img.codec.compression,
                charge >> 20,
                b.working_bytes >> 20
            ),
        ));
    }
    let first = img.tile_locs(col, row).map(crate::io::multi::address).min().unwrap_or(0);
    Ok(Some((first, charge)))
}

/// One wave: indices of the items it holds, and the sum of their charges in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Wave {
    /// Indices into the caller's list of tiles.
    pub tiles: Vec<usize>,
    /// Charged bytes of those tiles ([`tile_charge`]).
    pub bytes: u64,
}

/// Cut `(order key, index, charge)` items, taken in key order, into waves of at most `budget`
/// charged bytes (a wave holds at least one item); at least one wave, empty when there are no
/// items, so a caller's first-wave work (filling its output) always runs.
pub(crate) fn pack_waves<K: Ord>(mut order: Vec<(K, usize, u64)>, budget: u64) -> Vec<Wave> {
    order.sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let mut waves: Vec<Wave> = Vec::new();
    let mut current = Wave::default();
    for (_, i, charge) in order {
        if !current.tiles.is_empty() && current.bytes + charge > budget {
            waves.push(std::mem::take(&mut current));
        }
        current.tiles.push(i);
        current.bytes += charge;
    }
    if !current.tiles.is_empty() || waves.is_empty() {
        waves.push(current);
    }
    waves
}

/// Fetch the tiles `coords` (each listed once; `parts` as for [`fetch_tiles`]) wave by wave
/// ([`plan_waves`]) and hand each wave to `place` as (indices into `coords`, decoded tiles in
/// the same order, `None` = missing); `place` runs at least once, also for no tiles. The wave's tiles are dropped when `place` returns; the
/// interrupt check runs before every wave but the first.
///
/// # Errors
/// As [`plan_waves`] (before anything is read) and [`fetch_tiles`]; [`Error::Interrupted`]
/// when the interrupt check fires; `place`'s error. Tiles of finished waves stay cached.
pub(crate) fn fetch_waves(
    b: &Batch<'_>,
    coords: &[(u64, u64)],
    parts: Option<&[Option<PartRect>]>,
    mut place: impl FnMut(&[usize], &[Option<Arc<DecodedTile>>]) -> Result<()>,
) -> Result<()> {
    let waves = plan_waves(b, coords, parts)?;
    let mut wave_coords = Vec::new();
    let mut wave_parts = Vec::new();
    for (n, wave) in waves.iter().enumerate() {
        // Between waves only: a call of one wave (most small reads) never pays for the check.
        if n > 0 {
            crate::interrupt::check()?;
        }
        // The process-wide bound on bytes in flight (off by default), held until placed.
        let _held = super::inflight::hold(wave.bytes)?;
        let wave = &wave.tiles;
        wave_coords.clear();
        wave_coords.extend(wave.iter().map(|&i| coords[i]));
        let tiles = match parts {
            Some(p) => {
                wave_parts.clear();
                wave_parts.extend(wave.iter().map(|&i| p[i]));
                fetch_tiles(b, &wave_coords, Some(&wave_parts))?
            }
            None => fetch_tiles(b, &wave_coords, None)?,
        };
        place(wave, &tiles)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::TileCache;
    use crate::error::Location;
    use crate::index::TileLoc;
    use crate::io::metrics::MetricsSource;
    use crate::io::plan::PlanOptions;
    use crate::io::MemSource;
    use crate::read::fetch::CacheSlot;
    use crate::read::test_image;

    #[test]
    fn waves_respect_the_budget_in_file_order_and_refuse_an_oversized_tile() {
        // Four uncompressed 4 × 4 RGB tiles (48 bytes each), stored in reverse order.
        let mut file = vec![0u8; 400];
        for (k, v) in [40u8, 30, 20, 10].iter().enumerate() {
            file[100 + 48 * k..148 + 48 * k].fill(*v);
        }
        let locs = (0..4).map(|k| TileLoc::primary(100 + 48 * (3 - k), 48)).collect();
        let img = test_image(16, 4, 4, 4, 1, locs);
        let one = tile_charge(&img, 0, 0, None, 1);
        assert_eq!(one, 48 + 16 * 4 + 16 * 6, "compressed + RGBA + 2 × samples");
        let src = MetricsSource::new(MemSource::new(file));
        let cache = TileCache::new(1 << 20);
        let at = Location::file("t.tif");
        let plan = PlanOptions::default();
        let scans = crate::read::partial::ScanMemory::new();
        let mut b = Batch { src: &src, image: &img, at: &at, plan: &plan, cache: Some(CacheSlot { cache: &cache, slide: 1, level: 0, scans: &scans }), pool: None, working_bytes: 2 * one, reduce: None };
        let coords = [(0, 0), (1, 0), (2, 0), (3, 0)];
        let waves = plan_waves(&b, &coords, None).unwrap();
        assert_eq!(waves.iter().map(|w| w.tiles.clone()).collect::<Vec<_>>(), vec![vec![3, 2], vec![1, 0]], "two tiles a wave, lowest offset first");
        assert_eq!(waves[0].bytes, 2 * one, "a wave's charge is the sum of its tiles'");
        assert_eq!(plan_waves(&b, &[], None).unwrap(), vec![Wave::default()], "one empty wave for no tiles");
        let mut seen = Vec::new();
        fetch_waves(&b, &coords, None, |idx, tiles| {
            assert!(idx.len() <= 2);
            for (&i, t) in idx.iter().zip(tiles) {
                seen.push((i, t.as_ref().map(|t| t.rgba[0])));
            }
            Ok(())
        })
        .unwrap();
        seen.sort();
        assert_eq!(seen, vec![(0, Some(10)), (1, Some(20)), (2, Some(30)), (3, Some(40))]);
        // A budget below one tile: a limits error naming the tile, before any read.
        let before = src.counters().requests;
        b.working_bytes = one - 1;
        cache.purge_slide(1);
        let e = fetch_waves(&b, &coords, None, |_, _| Ok(())).unwrap_err();
        assert_eq!(e.kind_name(), "limits", "{e}");
        assert!(e.to_string().contains("tile (0, 0)") && e.to_string().contains("SLIDESTREAM_READ_WORKING_BYTES"), "{e}");
        assert_eq!(src.counters().requests, before);
        // The interrupt check runs between waves: the first wave is placed, the second never read.
        b.working_bytes = 2 * one;
        crate::interrupt::testing::interrupt_this_thread(true);
        let mut placed = 0;
        let e = fetch_waves(&b, &coords, None, |idx, _| {
            placed += idx.len();
            Ok(())
        })
        .unwrap_err();
        crate::interrupt::testing::interrupt_this_thread(false);
        assert_eq!((e.kind_name(), placed), ("interrupted", 2));
        assert_eq!(src.counters().requests, before + 1);
    }
}
