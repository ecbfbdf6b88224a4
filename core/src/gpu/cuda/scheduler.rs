//! How one call's tiles are split between decoders, as pure functions of the call's size and
//! the engine's settings (host-tested below): the order of the work queue, how many lanes and
//! CPU workers join, the lanes' chunk size, and which tiles go to the GPU at all. The batch
//! driver (`drive.rs`, engine layer) applies them: JPEG levels nvJPEG can take go to the GPU
//! lanes, which take chunks from the front of the call's work queue while, on large batches,
//! CPU decode workers take runs from its back; other levels, and tiles the lanes hand back, go
//! to the CPU fallback.

use super::decode::cpu_worker::CPU_RUN_TILES;
use super::decode::Declined;
use super::queue::Miss;
use crate::error::Error;

/// Tiles per nvJPEG batch (one slot's chunk).
pub(crate) const CHUNK_TILES: usize = 256;
/// Fewest tile misses in one call for which CPU decode workers join the GPU lanes (below, the
/// threads' start-up costs more than they decode).
pub(crate) const MIN_CPU_SHARE_TILES: usize = 64;

/// Order the call's misses for the work queue: costliest CPU decodes first when CPU workers
/// will take the back of the queue (`split_by_cost`, at least [`MIN_CPU_SHARE_TILES`] misses,
/// some workers), else (source, offset) order, which keeps the lanes' reads coalesced.
pub(crate) fn order_misses(misses: &mut [Miss], split_by_cost: bool, cpu_workers: usize) {
    if split_by_cost && misses.len() >= MIN_CPU_SHARE_TILES && cpu_workers > 0 {
        misses.sort_by_key(|m| (std::cmp::Reverse(m.rank), m.src, m.offset));
    } else {
        misses.sort_by_key(|m| (m.src, m.offset));
    }
}

/// Whether a miss goes to the GPU lanes: its level is one nvJPEG takes (`gpu_level`) and the
/// host tile cache does not hold the tile whole (the CPU path takes it from there).
pub(crate) fn to_gpu(gpu_level: bool, host_cached: bool) -> bool {
    gpu_level && !host_cached
}

/// How many lanes (the caller's included) and CPU workers a call of `n` GPU-bound misses asks
/// for: CPU workers only from [`MIN_CPU_SHARE_TILES`] misses, one per two runs of
/// [`CPU_RUN_TILES`], up to `cpu_workers`; with any of them, only the caller's lane (the other
/// lanes stay free for concurrent reads), else one lane per [`CHUNK_TILES`] up to
/// `lane_workers`. Measured on a lent H100 host (docs/gpu.md, "Next to a model"): a batch on one
/// lane and 15 CPU workers fed ResNet-18 at 94–95 % of its synthetic rate against 89–92 % on two
/// lanes and 14 workers, and alone made 18.0–19.6k patches/s against 13.7–15.6k; every tile a
/// lane decodes costs the device nvJPEG's three plane copies, a CPU worker's one upload.
pub(crate) fn decoders_wanted(n: usize, lane_workers: usize, cpu_workers: usize) -> (usize, usize) {
    let cpu = if n >= MIN_CPU_SHARE_TILES { cpu_workers.min(n / (2 * CPU_RUN_TILES)) } else { 0 };
    let lanes = if cpu > 0 { 1 } else { n.div_ceil(CHUNK_TILES).clamp(1, lane_workers.max(1)) };
    (lanes, cpu)
}

/// The lanes' chunk for `n` misses over `lanes` lanes: a batch smaller than the lanes' chunks
/// is spread over all of them; with CPU workers the lanes' first round takes at most half of
/// it, so the workers (started after the lanes) find tiles at the back instead of an empty
/// queue. Between 1 and [`CHUNK_TILES`].
pub(crate) fn lane_chunk(n: usize, lanes: usize, with_cpu: bool) -> usize {
    n.div_ceil(if with_cpu { 2 * lanes.max(1) } else { lanes.max(1) }).clamp(1, CHUNK_TILES)
}

/// Where a lane sends one tile of its chunk.
#[derive(Debug)]
pub(crate) enum Route<A> {
    /// The lane's decoder takes it, with what its check found.
    Decoder(A),
    /// The CPU decoder takes it, for this reason.
    Cpu(String),
    /// The tile has failed with this error (its CPU outcome).
    Failed(Error),
}

/// Fewest JPEG tiles of a call that the SM decoder takes when it is on; a smaller call goes to
/// the lanes and CPU workers. The SM decoder's kernels wait for a call's slowest tile: one
/// 256² region a call (~4 tiles) ran at 248 regions/s with it and ~2.7k/s on the hardware
/// engines (lent H100, docs/gpu.md). Measured by call size (random 256² patches): ~70 and ~135
/// tiles a call ran 9–12 % slower with it than on the engines with CPU workers, but with 0.7–0.9
/// host cores busy instead of 1.4–4.9; ~270 tiles ran 1.6× faster. Since the SM decoder is
/// turned on to spare host cores, 64 tiles (16 such patches) keeps only single regions and the
/// smallest calls off it.
pub(crate) const SM_SMALLEST_CALL_TILES: usize = 64;

/// Whether the SM decoder (when on) takes a call with `tiles` GPU-decodable JPEG tiles.
pub(crate) fn sm_takes_call(tiles: usize) -> bool {
    tiles >= SM_SMALLEST_CALL_TILES
}

/// A lane's rule for one JPEG tile of a level decoded at 1/`scale` whose framing gave `framed`:
/// levels decoded with DCT scaling (`scale` > 1, NDPI's synthesised levels) go to the CPU, since
/// no GPU decoder scales (the decoder is not asked); a tile that cannot be framed has failed;
/// else the decoder's check (`accepts`) decides: accepted, or the CPU for its reason (a
/// decoder's `Failed` verdict fails the tile).
pub(crate) fn lane_route<A>(scale: u32, framed: std::result::Result<(), Error>, accepts: impl FnOnce() -> std::result::Result<A, Declined>) -> Route<A> {
    if scale > 1 {
        return Route::Cpu(format!("NDPI level decoded at 1/{scale} (DCT scaling; no GPU decoder scales)"));
    }
    if let Err(e) = framed {
        return Route::Failed(e);
    }
    match accepts() {
        Ok(a) => Route::Decoder(a),
        Err(Declined::Elsewhere(reason)) => Route::Cpu(reason),
        Err(Declined::Failed(e)) => Route::Failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn miss(src: u32, offset: u64, rank: u8) -> Miss {
        Miss { need: 0, src, col: 0, row: 0, offset, len: 1, part: None, rank }
    }

    #[test]
    fn queue_order_is_cost_first_only_when_cpu_workers_take_the_back() {
        let mut few = vec![miss(1, 5, 9), miss(0, 7, 1), miss(0, 3, 5)];
        order_misses(&mut few, true, 4);
        assert_eq!(few.iter().map(|m| (m.src, m.offset)).collect::<Vec<_>>(), vec![(0, 3), (0, 7), (1, 5)]);
        let mut many: Vec<Miss> = (0..100u32).map(|i| miss(i % 3, 1000 - i as u64, (i * 7 % 11) as u8)).collect();
        order_misses(&mut many, true, 4);
        assert!(many.windows(2).all(|w| w[0].rank >= w[1].rank));
        order_misses(&mut many, true, 0);
        assert!(many.windows(2).all(|w| (w[0].src, w[0].offset) <= (w[1].src, w[1].offset)));
        order_misses(&mut many, false, 4);
        assert!(many.windows(2).all(|w| (w[0].src, w[0].offset) <= (w[1].src, w[1].offset)));
    }

    #[test]
    fn lane_route_sends_scaled_levels_to_the_cpu_and_else_follows_the_decoder() {
        let bad = || Error::Usage("bad framing".into());
        // A scaled level never asks the decoder (a check that would panic is not called).
        assert!(matches!(lane_route::<u8>(2, Ok(()), || panic!("asked")), Route::Cpu(r) if r.contains("1/2")));
        assert!(matches!(lane_route::<u8>(8, Err(bad()), || panic!("asked")), Route::Cpu(_)));
        assert!(matches!(lane_route::<u8>(1, Err(bad()), || panic!("asked")), Route::Failed(Error::Usage(m)) if m == "bad framing"));
        assert!(matches!(lane_route(1, Ok(()), || Ok(7u8)), Route::Decoder(7)));
        assert!(matches!(lane_route::<u8>(1, Ok(()), || Err(Declined::Elsewhere("4 components".into()))), Route::Cpu(r) if r == "4 components"));
        assert!(matches!(lane_route::<u8>(1, Ok(()), || Err(Declined::Failed(bad()))), Route::Failed(_)));
    }

    #[test]
    fn the_sm_decoder_takes_only_calls_of_many_tiles() {
        assert!(!sm_takes_call(0) && !sm_takes_call(4) && !sm_takes_call(SM_SMALLEST_CALL_TILES - 1));
        assert!(sm_takes_call(SM_SMALLEST_CALL_TILES) && sm_takes_call(900) && sm_takes_call(1 << 20));
    }

    #[test]
    fn decoders_and_chunks_follow_the_call_size() {
        assert_eq!(decoders_wanted(1, 2, 14), (1, 0));
        assert_eq!(decoders_wanted(MIN_CPU_SHARE_TILES - 1, 2, 14), (1, 0));
        // With CPU workers a batch keeps to its caller's lane; without, it spreads over lanes.
        assert_eq!(decoders_wanted(1024, 2, 14), (1, 14.min(1024 / (2 * CPU_RUN_TILES))));
        assert_eq!(decoders_wanted(1024, 4, 0), (4, 0));
        assert_eq!(decoders_wanted(1024, 2, 0), (2, 0));
        assert_eq!(decoders_wanted(300, 8, 0), (2, 0));
        assert_eq!(decoders_wanted(10, 0, 0), (1, 0));
        assert_eq!(lane_chunk(1000, 2, false), CHUNK_TILES);
        assert_eq!(lane_chunk(300, 2, false), 150);
        assert_eq!(lane_chunk(300, 2, true), 75);
        assert_eq!(lane_chunk(0, 2, true), 1);
        assert!(to_gpu(true, false) && !to_gpu(true, true) && !to_gpu(false, false));
    }
}
