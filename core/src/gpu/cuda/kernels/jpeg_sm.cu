// The SM JPEG decoder's kernels (issue 32), compiled with NVRTC after core/src/codec/jpeg_sm.h
// (the decoding functions, shared with the host tests): gpu/cuda/decode/sm.rs.
//
// sm_huffman: one thread per entropy-coded segment (a tile's scan, or one restart interval),
//             in the order `order` gives (NULL: segment order); writes the tile's coefficients
//             and the segment's SMJ_* status. With shared_set >= 0 the block first copies that
//             table set into shared memory and its tiles read it there. `spread` threads share
//             one segment and only the first of them decodes it (spread 32: one segment per
//             warp, so no two segments' branches diverge inside a warp).
// sm_idct:    one thread per 8x8 block; blockIdx.y is the tile. Writes the component planes;
//             with `wins` (4 ints a tile: an MCU window, smj_block_in_window) only the blocks
//             of the tile's window (region-aware decoding), with NULL every block.
// sm_huffman_warp (below): one warp per segment, for long segments (one tile's scan).

extern "C" __global__ void sm_huffman(const struct SmjSegment* __restrict__ segs, const int* __restrict__ order, int n, const struct SmjTile* __restrict__ tiles,
                                      const struct SmjTables* __restrict__ tabs, int* __restrict__ status, int shared_set, int spread) {
    __shared__ struct SmjTables sh;
    if (shared_set >= 0) {
        const int* src = (const int*)&tabs[shared_set];
        int* dst = (int*)&sh;
        for (int w = threadIdx.x; w < (int)(sizeof(struct SmjTables) / 4); w += blockDim.x) {
            dst[w] = src[w];
        }
        __syncthreads();
    }
    int gt = blockIdx.x * blockDim.x + threadIdx.x;
    int i = gt / spread;
    if (i >= n || gt - i * spread != 0) {
        return;
    }
    int k = order ? order[i] : i;
    struct SmjSegment g = segs[k];
    struct SmjTile t = tiles[g.tile];
    const struct SmjTables* tb = t.tables == shared_set ? &sh : &tabs[t.tables];
    status[k] = smj_decode_segment((const smj_u8*)g.data, g.len, tb, &t, g.mcu0, g.mcus);
}

extern "C" __global__ void sm_idct(const struct SmjTile* __restrict__ tiles, const struct SmjTables* __restrict__ tabs, const int* __restrict__ wins) {
    const struct SmjTile* t = &tiles[blockIdx.y];
    const int* win = wins ? wins + 4 * blockIdx.y : 0;
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    for (int c = 0; c < t->ncomp; c++) {
        int nb = t->bw[c] * t->bh[c];
        if (b < nb) {
            int by = b / t->bw[c];
            int bx = b - by * t->bw[c];
            if (!smj_block_in_window(t, c, bx, by, win)) {
                return;
            }
            int pitch = t->bw[c] * 8;
            const short* coef = (const short*)t->coef + t->plane[c] + (smj_u64)b * 64u;
            smj_u8* out = (smj_u8*)t->pix + t->plane[c] + (smj_u64)by * 8u * (smj_u64)pitch + (smj_u64)bx * 8u;
            smj_idct_islow(coef, tabs[t->tables].quant[t->tq[c]], out, pitch);
            return;
        }
        b -= nb;
    }
}

// sm_huffman_warp: one warp (SMJ_LANES threads) per entropy-coded segment, in the order `order`
// gives (NULL: segment order), SMJ_SS_WARPS warps a block: the self-synchronising decoding of
// jpeg_sm_warp.h and jpeg_sm_warp_sync.h (smj_ss_*), phase by phase with the warp's lanes in
// step, each lane's first start found by a warm-up of `warm` bytes (0: none) and, if
// `periodic`, the shortcut over repeating bytes. Writes the segment's coefficients and its SMJ_* status, as sm_huffman does.
#define SMJ_SS_WARPS 4
extern "C" __global__ void __launch_bounds__(SMJ_LANES * SMJ_SS_WARPS) sm_huffman_warp(const struct SmjSegment* __restrict__ segs, const int* __restrict__ order, int n,
                                                                                  const struct SmjTile* __restrict__ tiles, const struct SmjTables* __restrict__ tabs,
                                                                                  int* __restrict__ status, int warm, int periodic) {
    __shared__ struct SmjSs shared_ss[SMJ_SS_WARPS];
    int warp = threadIdx.x / SMJ_LANES;
    int lane = threadIdx.x - warp * SMJ_LANES;
    int i = blockIdx.x * SMJ_SS_WARPS + warp;
    if (i >= n) {
        return;  // the whole warp: `i` is the same for its lanes
    }
    struct SmjSs* sh = &shared_ss[warp];
    int k = order ? order[i] : i;
    struct SmjSegment g = segs[k];
    struct SmjTile t = tiles[g.tile];
    if (g.mcu0 < 0 || g.mcus < 0 || g.mcu0 > t.mcux * t.mcuy - g.mcus || g.len < 0) {
        if (lane == 0) {
            status[k] = SMJ_BAD_SEGMENT;
        }
        return;
    }
    const smj_u8* raw = (const smj_u8*)g.data;
    const struct SmjTables* tb = &tabs[t.tables];
    struct SmjMcuMap map;
    smj_mcu_map(&t, &map);
    int total = g.mcus * map.n;
    smj_ss_bounds(raw, g.len, sh, lane);
    __syncwarp();
    smj_ss_scan(raw, g.len, sh, lane, periodic);
    __syncwarp();
    if (lane == 0) {
        smj_ss_layout(g.len, sh);
    }
    __syncwarp();
    if (lane < SMJ_LANES - 1) {
        smj_ss_warm(raw, g.len, sh, lane, tb, &t, &map, g.mcu0, total, warm);
        smj_ss_sync(raw, g.len, sh, lane, tb, &t, &map, g.mcu0, total);
    }
    __syncwarp();
    for (int r = 1; r < SMJ_LANES; r++) {
        // Every lane reads its predecessor's end before any lane decodes again.
        struct SmjState s = sh->end[lane > 0 ? lane - 1 : 0];
        __syncwarp();
        int changed = 0;
        if (lane > 0 && lane < SMJ_LANES - 1 && !smj_state_eq(s, sh->start[lane], &map)) {
            struct SmjState old = sh->end[lane];
            sh->start[lane] = s;
            smj_ss_sync(raw, g.len, sh, lane, tb, &t, &map, g.mcu0, total);
            changed = !smj_state_eq(old, sh->end[lane], &map);
        }
        __syncwarp();
        if (!__any_sync(0xFFFFFFFFu, changed)) {
            break;
        }
    }
    if (lane == SMJ_LANES - 1) {
        sh->start[lane] = sh->end[lane - 1];
    }
    smj_ss_zero(&t, &map, g.mcu0, total, lane);
    __syncwarp();
    smj_ss_write(raw, g.len, sh, lane, tb, &t, &map, g.mcu0, total);
    __syncwarp();
    smj_ss_dc(sh, lane, &t, &map, g.mcu0, total);
    __syncwarp();
    if (lane == 0) {
        status[k] = smj_ss_status(sh);
    }
}
