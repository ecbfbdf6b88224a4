// The SM JPEG decoder's kernels (issue 32), compiled with NVRTC after core/src/codec/jpeg_sm.h
// (the decoding functions, shared with the host tests): gpu/cuda/decode/sm.rs.
//
// sm_huffman: one thread per entropy-coded segment (a tile's scan, or one restart interval),
//             in the order `order` gives (NULL: segment order); writes the tile's coefficients
//             and the segment's SMJ_* status. With shared_set >= 0 the block first copies that
//             table set into shared memory and its tiles read it there. `spread` threads share
//             one segment and only the first of them decodes it (spread 32: one segment per
//             warp, so no two segments' branches diverge inside a warp).
// sm_idct:    one thread per 8x8 block; blockIdx.y is the tile. Writes the component planes.

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

extern "C" __global__ void sm_idct(const struct SmjTile* __restrict__ tiles, const struct SmjTables* __restrict__ tabs) {
    const struct SmjTile* t = &tiles[blockIdx.y];
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    for (int c = 0; c < t->ncomp; c++) {
        int nb = t->bw[c] * t->bh[c];
        if (b < nb) {
            int by = b / t->bw[c];
            int bx = b - by * t->bw[c];
            int pitch = t->bw[c] * 8;
            const short* coef = (const short*)t->coef + t->plane[c] + (smj_u64)b * 64u;
            smj_u8* out = (smj_u8*)t->pix + t->plane[c] + (smj_u64)by * 8u * (smj_u64)pitch + (smj_u64)bx * 8u;
            smj_idct_islow(coef, tabs[t->tables].quant[t->tq[c]], out, pitch);
            return;
        }
        b -= nb;
    }
}
