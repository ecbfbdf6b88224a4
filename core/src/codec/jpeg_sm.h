// slidestream's baseline-JPEG decoder for the GPU's multiprocessors (issue 32): entropy decoding
// of one segment (a whole scan, or one restart interval) per thread, and libjpeg-turbo's ISLOW
// integer inverse DCT per 8x8 block.
//
// One source, two compilers: NVRTC compiles it as CUDA C++ into the SM decoder's kernels
// (core/src/gpu/cuda/decode/sm.rs), and the host C compiler (build.rs, jpeg_sm_host.c) into the
// functions the host tests run against libjpeg-turbo (core/src/codec/jpeg_sm.rs). So the
// arithmetic the GPU runs is the arithmetic CI checks, bit for bit.
//
// What it reproduces (facts, not code, from): ITU-T T.81 F.2.2 (Huffman decoding, DC
// prediction, EXTEND), F.1.2.3 / B.2.4.4 (restart intervals); libjpeg-turbo's jdhuff.c
// (derived tables, DC prediction in unsigned arithmetic, coefficients stored as 16-bit JCOEF,
// jpeg_natural_order with 16 guard entries of 63) and jidctint.c (jpeg_idct_islow, CONST_BITS 13,
// PASS1_BITS 2) as its x86-64 SIMD kernels compute it (see smj_idct_islow).
// libjpeg-turbo's warnings (a bad Huffman code, data ending early, a missing restart marker)
// are errors here, as TJPARAM_STOPONWARNING makes them on the CPU path.
//
// The host side (jpeg_sm.rs) validates every header value before a segment reaches this code:
// table indices, sampling factors (1..4, at most 10 blocks per MCU), MCU counts, and buffer
// sizes. This code bounds every read of the bitstream by the segment's length and every write
// of coefficients by the tile's MCU grid.

#ifndef SLIDESTREAM_JPEG_SM_H
#define SLIDESTREAM_JPEG_SM_H

#ifdef __CUDACC_RTC__
#define SMJ_FN __device__ static inline
#define SMJ_CONST __device__ static const
typedef unsigned long long smj_u64;
typedef unsigned int smj_u32;
typedef unsigned short smj_u16;
typedef unsigned char smj_u8;
#else
#include <stdint.h>
#define SMJ_FN static inline
#define SMJ_CONST static const
typedef uint64_t smj_u64;
typedef uint32_t smj_u32;
typedef uint16_t smj_u16;
typedef uint8_t smj_u8;
#endif

// Segment outcomes (SmjSegment results; jpeg_sm.rs SmStatus).
#define SMJ_OK 0
#define SMJ_BAD_CODE 1      // a code no Huffman table holds (libjpeg: JWRN_HUFF_BAD_CODE)
#define SMJ_SHORT_DATA 2    // the segment ended before its last MCU (JWRN_HIT_MARKER)
#define SMJ_BAD_SEGMENT 3   // MCU range outside the tile (never from a validated tile)
#define SMJ_TRAILING 4      // whole bytes of data left after the segment's last MCU
// SMJ_TRAILING is not always an error to libjpeg-turbo: it warns (JWRN_EXTRANEOUS_DATA) about
// bytes left before a marker only past what its bit buffer had already read. The SM decoder
// hands such tiles to libjpeg-turbo, whose outcome is the reference; valid streams have none.

// A Huffman table in libjpeg's derived form (jdhuff.c jpeg_make_d_derived_tbl).
struct SmjHuff {
    smj_u16 look[256];   // next 8 bits -> (code length << 8) | symbol; 0: the code is longer
    int maxcode[18];     // largest code of each length (-1: none); [17] a sentinel
    int valoffset[18];   // symbol index of code c of length l = c + valoffset[l]
    smj_u8 huffval[256]; // symbols in code order
};

// The tables a tile's scan uses (deduplicated across tiles: one per JPEGTables).
struct SmjTables {
    struct SmjHuff dc[4];
    struct SmjHuff ac[4];
    smj_u16 quant[4][64]; // natural (row-major) order
};

// One tile: a complete baseline stream with a single scan holding every component.
struct SmjTile {
    smj_u64 coef;      // output: 16-bit coefficients, component planes of blocks (natural order)
    smj_u64 pix;       // output of the IDCT: component planes at the coefficients' offsets, bw*8 bytes a row
    smj_u64 plane[4];  // coefficient offset (in coefficients) of each component's plane
    int tables;        // index of its SmjTables
    int ncomp;         // components in the scan (1 or 3), in scan order
    int mcux;          // MCUs across
    int mcuy;          // MCUs down
    int h[4];          // blocks per MCU across, per component (1 for a one-component scan)
    int v[4];          // blocks per MCU down
    int bw[4];         // blocks across the component's plane (mcux * h)
    int bh[4];         // blocks down (mcuy * v)
    int tq[4];         // quantisation table index
    int td[4];         // DC table index
    int ta[4];         // AC table index
    int width;         // image width and height in pixels
    int height;
};

// One entropy-coded segment: the bytes between SOS (or an RSTn marker) and the next marker.
struct SmjSegment {
    smj_u64 data;      // first byte
    int len;           // bytes, stopping before the marker that ends the segment
    int tile;          // index of its SmjTile
    int mcu0;          // first MCU (row-major over the tile's MCU grid)
    int mcus;          // MCUs in the segment
};

// jpeg_natural_order plus libjpeg's 16 guard entries (a run past 63 stores into 63).
SMJ_CONST int smj_natural[80] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37,
    44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
};

// MSB-first bit reader over one segment. Past the end (or a marker inside it) it supplies zero
// bits, as libjpeg does after a marker; consuming any of them is SMJ_SHORT_DATA.
struct SmjBits {
    const smj_u8* p;
    const smj_u8* end;
    smj_u64 buf;  // the low `n` bits are unread, oldest highest
    int n;
    int pad;      // of those, the lowest `pad` are zero fill past the data
    long long fed; // bits appended to `buf` so far (data and fill): the reader's position is
                   // fed - n bits past where it started
};

SMJ_FN void smj_fill(struct SmjBits* b) {
    while (b->n <= 56) {
        // Four bytes at once where none is 0xFF: four independent loads instead of a chain of
        // one-byte steps (the same bits as the byte-wise path below).
        if (b->n <= 32 && b->pad == 0 && b->end - b->p >= 4) {
            smj_u32 b0 = b->p[0], b1 = b->p[1], b2 = b->p[2], b3 = b->p[3];
            if (b0 != 0xFF && b1 != 0xFF && b2 != 0xFF && b3 != 0xFF) {
                b->buf = (b->buf << 32) | (smj_u64)((b0 << 24) | (b1 << 16) | (b2 << 8) | b3);
                b->p += 4;
                b->n += 32;
                b->fed += 32;
                continue;
            }
        }
        smj_u32 byte = 0;
        if (b->pad == 0 && b->p < b->end) {
            byte = *b->p;
            if (byte == 0xFF) {
                // 0xFF 0x00 is a stuffed 0xFF; 0xFF then anything else is a marker: the data ends.
                if (b->p + 1 < b->end && b->p[1] == 0) {
                    b->p += 2;
                } else {
                    b->p = b->end;
                    byte = 0;
                    b->pad += 8;
                }
            } else {
                b->p += 1;
            }
        } else {
            b->pad += 8;
        }
        b->buf = (b->buf << 8) | byte;
        b->n += 8;
        b->fed += 8;
    }
}

// The next `k` (1..16) bits, not consumed; needs n >= k.
SMJ_FN int smj_peek(const struct SmjBits* b, int k) {
    return (int)((b->buf >> (b->n - k)) & ((1u << k) - 1u));
}

// Consume `k` bits; returns 0 when that reached into the zero fill.
SMJ_FN int smj_skip(struct SmjBits* b, int k) {
    b->n -= k;
    return b->n >= b->pad;
}

// Decode one Huffman symbol; -1 for a code longer than 16 bits, -2 for data ending early.
SMJ_FN int smj_symbol(struct SmjBits* b, const struct SmjHuff* t) {
    if (b->n < 32) {
        smj_fill(b);
    }
    int look = t->look[smj_peek(b, 8)];
    if (look != 0) {
        return smj_skip(b, look >> 8) ? (look & 0xFF) : -2;
    }
    int l = 9;
    int code = smj_peek(b, 9);
    while (l <= 16 && code > t->maxcode[l]) {
        l += 1;
        code = smj_peek(b, l);
    }
    if (l > 16) {
        return -1;
    }
    if (!smj_skip(b, l)) {
        return -2;
    }
    return t->huffval[(code + t->valoffset[l]) & 0xFF];
}

// `s` (0..15) more bits as a signed value (T.81 F.2.2.1 RECEIVE and EXTEND); `*ok` is cleared
// when they reach into the zero fill past the data.
SMJ_FN int smj_receive_extend(struct SmjBits* b, int s, int* ok) {
    if (s == 0) {
        return 0;
    }
    if (b->n < 16) {
        smj_fill(b);
    }
    int r = smj_peek(b, s);
    if (!smj_skip(b, s)) {
        *ok = 0;
    }
    return r < (1 << (s - 1)) ? r + (int)((~0u << s) + 1u) : r;
}

// Entropy-decode MCUs [mcu0, mcu0 + mcus) of `t` from `data` (`len` bytes: one segment), writing
// each block's 64 coefficients (natural order, as libjpeg stores them) into the tile's planes.
// Blocks are written whole (zeros included), so the planes need no clearing. Returns SMJ_*.
SMJ_FN int smj_decode_segment(const smj_u8* data, int len, const struct SmjTables* tabs, const struct SmjTile* t, int mcu0, int mcus) {
    if (mcu0 < 0 || mcus < 0 || mcu0 > t->mcux * t->mcuy - mcus) {
        return SMJ_BAD_SEGMENT;
    }
    struct SmjBits b;
    b.p = data;
    b.end = data + len;
    b.buf = 0;
    b.n = 0;
    b.pad = 0;
    b.fed = 0;
    int pred[4] = {0, 0, 0, 0};
    short* coef = (short*)t->coef;
    for (int m = mcu0; m < mcu0 + mcus; m++) {
        int my = m / t->mcux;
        int mx = m - my * t->mcux;
        for (int c = 0; c < t->ncomp; c++) {
            const struct SmjHuff* dct = &tabs->dc[t->td[c]];
            const struct SmjHuff* act = &tabs->ac[t->ta[c]];
            for (int by = 0; by < t->v[c]; by++) {
                for (int bx = 0; bx < t->h[c]; bx++) {
                    smj_u64 blk = t->plane[c] + ((smj_u64)(my * t->v[c] + by) * (smj_u64)t->bw[c] + (smj_u64)(mx * t->h[c] + bx)) * 64u;
                    short* out = coef + blk;
#ifdef __CUDACC_RTC__
                    // Blocks are 128-byte aligned (tile planes start at multiples of 64
                    // coefficients): sixteen 8-byte stores.
                    for (int k = 0; k < 16; k++) {
                        ((smj_u64*)out)[k] = 0;
                    }
#else
                    for (int k = 0; k < 64; k++) {
                        out[k] = 0;
                    }
#endif
                    int ok = 1;
                    int s = smj_symbol(&b, dct);
                    if (s < 0) {
                        return s == -1 ? SMJ_BAD_CODE : SMJ_SHORT_DATA;
                    }
                    int diff = smj_receive_extend(&b, s, &ok);
                    // libjpeg-turbo adds in unsigned arithmetic (a damaged stream's running sum
                    // may wrap) and stores the 16-bit truncation.
                    pred[c] = (int)((smj_u32)pred[c] + (smj_u32)diff);
                    out[0] = (short)pred[c];
                    for (int k = 1; k < 64; k++) {
                        int rs = smj_symbol(&b, act);
                        if (rs < 0) {
                            return rs == -1 ? SMJ_BAD_CODE : SMJ_SHORT_DATA;
                        }
                        int r = rs >> 4;
                        int sz = rs & 15;
                        if (sz != 0) {
                            k += r;
                            out[smj_natural[k]] = (short)smj_receive_extend(&b, sz, &ok);
                        } else {
                            if (r != 15) {
                                break;
                            }
                            k += 15;
                        }
                    }
                    if (!ok) {
                        return SMJ_SHORT_DATA;
                    }
                }
            }
        }
    }
    // Whole bytes of data still buffered, or unread bytes other than fill (0xFF) before the
    // marker, are data the scan did not use.
    if ((b.n - b.pad) / 8 > 0) {
        return SMJ_TRAILING;
    }
    if (b.pad == 0) {
        for (const smj_u8* q = b.p; q < b.end; q++) {
            if (*q != 0xFF) {
                return SMJ_TRAILING;
            }
        }
    }
    return SMJ_OK;
}

// libjpeg-turbo's ISLOW constants (CONST_BITS 13): FIX(x) = round(x * 8192).
#define SMJ_FIX_0_298631336 2446
#define SMJ_FIX_0_390180644 3196
#define SMJ_FIX_0_541196100 4433
#define SMJ_FIX_0_765366865 6270
#define SMJ_FIX_0_899976223 7373
#define SMJ_FIX_1_175875602 9633
#define SMJ_FIX_1_501321110 12299
#define SMJ_FIX_1_847759065 15137
#define SMJ_FIX_1_961570560 16069
#define SMJ_FIX_2_053119869 16819
#define SMJ_FIX_2_562915447 20995
#define SMJ_FIX_3_072711026 25172

// jidctint.c's jpeg_idct_islow as libjpeg-turbo's x86-64 SIMD kernels run it (the CPU path's
// decoder on x86-64: jsimd_idct_islow_avx2, with the SSE2 kernel's lane widths), which equals
// the C code on every block a real encoder writes and parts from it only where values leave 16
// bits: dequantisation keeps the low 16 bits of coefficient x table entry; a block whose rows
// 1..7 are all zero takes the DC shortcut for every column (product shifted left by PASS1_BITS in
// 16 bits); in0 + in4, in0 - in4, in7 + in3 and in5 + in1 wrap at 16 bits; each pass saturates
// its outputs to 16 bits; the output saturates to a signed byte before CENTERJSAMPLE is added.
// (Facts of the kernels' arithmetic; the damaged-stream test in jpeg_sm/tests.rs checks them
// against the libjpeg-turbo CI links.)

SMJ_FN int smj_sat16(int x) {
    return x < -32768 ? -32768 : (x > 32767 ? 32767 : x);
}

SMJ_FN int smj_wrap16(int x) {
    return (int)(short)(smj_u16)(smj_u32)x;
}

// One 1-D 8-point IDCT of 16-bit inputs x[0], x[step], ..., x[7 step], written to o[0],
// o[ostep], ...: products and sums in 32 bits, rounded and shifted right by `n`, saturated.
SMJ_FN void smj_idct_1d(const short* x, int step, short* o, int ostep, int n) {
    int x0 = x[0], x1 = x[step], x2 = x[2 * step], x3 = x[3 * step];
    int x4 = x[4 * step], x5 = x[5 * step], x6 = x[6 * step], x7 = x[7 * step];
    // Even part.
    int z1 = (x2 + x6) * SMJ_FIX_0_541196100;
    int tmp3 = z1 + x2 * SMJ_FIX_0_765366865;
    int tmp2 = z1 - x6 * SMJ_FIX_1_847759065;
    int tmp0 = (int)((smj_u32)smj_wrap16(x0 + x4) << 13);
    int tmp1 = (int)((smj_u32)smj_wrap16(x0 - x4) << 13);
    int tmp10 = tmp0 + tmp3;
    int tmp13 = tmp0 - tmp3;
    int tmp11 = tmp1 + tmp2;
    int tmp12 = tmp1 - tmp2;
    // Odd part.
    int s73 = smj_wrap16(x7 + x3);
    int s51 = smj_wrap16(x5 + x1);
    int z5 = (s73 + s51) * SMJ_FIX_1_175875602;
    int z3 = z5 - s73 * SMJ_FIX_1_961570560;
    int z4 = z5 - s51 * SMJ_FIX_0_390180644;
    int t0 = x7 * SMJ_FIX_0_298631336 - (x7 + x1) * SMJ_FIX_0_899976223 + z3;
    int t1 = x5 * SMJ_FIX_2_053119869 - (x5 + x3) * SMJ_FIX_2_562915447 + z4;
    int t2 = x3 * SMJ_FIX_3_072711026 - (x5 + x3) * SMJ_FIX_2_562915447 + z3;
    int t3 = x1 * SMJ_FIX_1_501321110 - (x7 + x1) * SMJ_FIX_0_899976223 + z4;
    int r = 1 << (n - 1);
    o[0] = (short)smj_sat16((tmp10 + t3 + r) >> n);
    o[7 * ostep] = (short)smj_sat16((tmp10 - t3 + r) >> n);
    o[1 * ostep] = (short)smj_sat16((tmp11 + t2 + r) >> n);
    o[6 * ostep] = (short)smj_sat16((tmp11 - t2 + r) >> n);
    o[2 * ostep] = (short)smj_sat16((tmp12 + t1 + r) >> n);
    o[5 * ostep] = (short)smj_sat16((tmp12 - t1 + r) >> n);
    o[3 * ostep] = (short)smj_sat16((tmp13 + t0 + r) >> n);
    o[4 * ostep] = (short)smj_sat16((tmp13 - t0 + r) >> n);
}

// One 8x8 block: dequantise and inverse-DCT `in` (natural order) with quantisation table `q`
// (natural order), writing 8 rows of 8 samples `stride` bytes apart.
SMJ_FN void smj_idct_islow(const short* in, const smj_u16* q, smj_u8* out, int stride) {
    short deq[64];
    short ws[64];
    int ac = 0;
    for (int k = 0; k < 64; k++) {
        deq[k] = (short)smj_wrap16((int)in[k] * (int)(short)q[k]);
        ac |= k >= 8 ? in[k] : 0;
    }
    if (ac == 0) {
        for (int c = 0; c < 8; c++) {
            short v = (short)smj_wrap16((int)((smj_u32)(int)deq[c] << 2));
            for (int r = 0; r < 8; r++) {
                ws[8 * r + c] = v;
            }
        }
    } else {
        for (int c = 0; c < 8; c++) {
            smj_idct_1d(deq + c, 8, ws + c, 8, 11);
        }
    }
    for (int r = 0; r < 8; r++) {
        short o[8];
        smj_idct_1d(ws + 8 * r, 1, o, 1, 18);
        smj_u8* op = out + r * stride;
        for (int k = 0; k < 8; k++) {
            int v = o[k] < -128 ? -128 : (o[k] > 127 ? 127 : o[k]);
            op[k] = (smj_u8)(v + 128);
        }
    }
}

// Region-aware decoding: whether block (bx, by) of component c's plane lies in an MCU of the
// window win = {col0, row0, col1, row1} (MCUs of the tile's grid, ends exclusive); win NULL:
// every block. A block of component c belongs to MCU (bx / h[c], by / v[c]) (T.81 A.2.3: an
// MCU holds h[c] x v[c] blocks of each component; a one-component scan's MCU is one block).
SMJ_FN int smj_block_in_window(const struct SmjTile* t, int c, int bx, int by, const int* win) {
    if (!win) {
        return 1;
    }
    int mx = bx / t->h[c], my = by / t->v[c];
    return mx >= win[0] && mx < win[2] && my >= win[1] && my < win[3];
}

#endif
