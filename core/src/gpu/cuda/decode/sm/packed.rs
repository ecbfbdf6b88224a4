//! The SM decoder's launch layout: where a launch's streams lie in the data upload
//! ([`back_to_back`]) and its descriptors in the descriptor upload ([`Packed`]).

use super::{warp_decodes, SmArgs};
use crate::codec::jpeg_sm::{idct_window, SmPrepared, SmjSegment, SmjTables, SmjTile};
use crate::codec::PartRect;
use crate::gpu::cuda::memory::as_bytes;

/// Offsets of streams of `lens` bytes laid back to back, and the bytes they take.
pub(crate) fn back_to_back(lens: impl Iterator<Item = usize>) -> (Vec<usize>, usize) {
    let mut end = 0usize;
    let at = lens
        .map(|l| {
            let a = end;
            end += l;
            a
        })
        .collect();
    (at, end)
}

/// One launch's descriptors, laid out for one upload: the tile descriptors, then (each part
/// 256-aligned) the segment descriptors, the distinct table sets (tiles with equal DHT/DQT
/// bytes share one), the segments' order (thread-decoded first, then warp-decoded) and each
/// tile's IDCT window (`idct_window`: 4 `int`s, the MCUs of the part its call needs). The
/// tiles' streams are uploaded separately, from wherever they lie in the host staging buffer.
/// Built with offsets ([`Packed::new`]), turned into device addresses once the allocations
/// exist ([`Packed::place`]), and written into host staging ([`Packed::write`]).
pub(crate) struct Packed {
    pub(crate) segs_at: usize,
    pub(crate) tabs_at: usize,
    /// Bytes of the descriptor upload.
    pub(crate) total: usize,
    /// Coefficients of every tile (each tile's share rounded up to 64).
    pub(crate) coef_total: u64,
    /// Tile descriptors: `coef` / `pix` offsets (in coefficients) until placed.
    pub(crate) descs: Vec<SmjTile>,
    /// Segment descriptors: `data` an offset into the data upload until placed.
    pub(crate) segs: Vec<SmjSegment>,
    pub(crate) tables: Vec<SmjTables>,
    /// Segment indices: the thread-decoded ones, then the warp-decoded ones.
    pub(crate) order: Vec<i32>,
    pub(crate) n_thread: usize,
    pub(crate) order_at: usize,
    /// Each tile's IDCT window: MCU columns and rows `[col0, row0, col1, row1)`.
    pub(crate) wins: Vec<[i32; 4]>,
    pub(crate) wins_at: usize,
}

impl Packed {
    /// The layout of `items`: each tile's stream offset in the data upload, its
    /// [`prepare`](crate::codec::jpeg_sm::prepare) result, and the part of it its call needs
    /// (tile pixels; `None`: the whole tile).
    pub(crate) fn new(items: &[(usize, &SmPrepared, Option<PartRect>)]) -> Packed {
        let mut sets: std::collections::HashMap<&[u8], i32> = Default::default();
        let (mut tables, mut descs, mut segs) = (Vec::new(), Vec::with_capacity(items.len()), Vec::new());
        let mut coef_total = 0u64;
        let mut wins = Vec::with_capacity(items.len());
        for (k, &(at, p, part)) in items.iter().enumerate() {
            let set = *sets.entry(p.table_key.as_slice()).or_insert_with(|| {
                tables.push(*p.tables);
                tables.len() as i32 - 1
            });
            let mut t = p.tile;
            t.tables = set;
            t.coef = coef_total;
            t.pix = coef_total;
            wins.push(idct_window(&t, part));
            coef_total += t.coefficients().next_multiple_of(64);
            descs.push(t);
            for g in &p.segments {
                segs.push(SmjSegment { data: at as u64 + g.data, tile: k as i32, ..*g });
            }
        }
        let (warp, thread): (Vec<i32>, Vec<i32>) = (0..segs.len() as i32).partition(|&k| warp_decodes(segs[k as usize].len));
        let n_thread = thread.len();
        let order: Vec<i32> = thread.into_iter().chain(warp).collect();
        let segs_at = (descs.len() * size_of::<SmjTile>()).next_multiple_of(256);
        let tabs_at = (segs_at + segs.len() * size_of::<SmjSegment>()).next_multiple_of(256);
        let order_at = (tabs_at + tables.len() * size_of::<SmjTables>()).next_multiple_of(256);
        let wins_at = (order_at + order.len() * 4).next_multiple_of(256);
        let total = wins_at + wins.len() * 16;
        Packed { segs_at, tabs_at, total, coef_total, descs, segs, tables, order, n_thread, order_at, wins, wins_at }
    }

    /// Turn offsets into device addresses: the streams uploaded at `data`, the descriptors at
    /// `descs`, coefficients (2 bytes each) at `coef`, IDCT samples (1 byte each) at `pix`,
    /// statuses at `status`; the kernels' arguments.
    pub(crate) fn place(&mut self, data: u64, descs: u64, coef: u64, pix: u64, status: u64) -> SmArgs {
        for t in &mut self.descs {
            (t.coef, t.pix) = (coef + t.coef * 2, pix + t.pix);
        }
        for g in &mut self.segs {
            g.data += data;
        }
        SmArgs {
            segs: descs + self.segs_at as u64,
            nsegs: self.segs.len(),
            tiles: descs,
            ntiles: self.descs.len(),
            tabs: descs + self.tabs_at as u64,
            status,
            max_blocks: self.descs.iter().map(|t| (0..t.ncomp.clamp(0, 4) as usize).map(|c| t.bw[c] as u32 * t.bh[c] as u32).sum::<u32>()).max().unwrap_or(1),
            order: descs + self.order_at as u64,
            n_thread: self.n_thread,
            n_warp: self.order.len() - self.n_thread,
            wins: descs + self.wins_at as u64,
        }
    }

    /// Write the descriptors and table sets into `host` (at least [`Packed::total`] bytes).
    pub(crate) fn write(&self, host: &mut [u8]) {
        let tiles = as_bytes(&self.descs);
        host[..tiles.len()].copy_from_slice(tiles);
        host[self.segs_at..self.segs_at + self.segs.len() * size_of::<SmjSegment>()].copy_from_slice(as_bytes(&self.segs));
        host[self.tabs_at..self.tabs_at + self.tables.len() * size_of::<SmjTables>()].copy_from_slice(as_bytes(&self.tables));
        host[self.order_at..self.order_at + self.order.len() * 4].copy_from_slice(as_bytes(&self.order));
        host[self.wins_at..self.total].copy_from_slice(as_bytes(&self.wins));
    }
}
