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

// ---- One segment decoded by SMJ_LANES threads (one warp): self-synchronising decoding ----
//
// The serial decoder above takes one thread through a whole segment: a 240x240 tile's scan is
// ~13k symbols, several milliseconds of one GPU thread. Here the segment's bytes are cut into
// SMJ_LANES chunks and each lane decodes one (the method of Weissenberger and Schmidt,
// "Massively parallel Huffman decoding on GPUs", ICPP 2018, and its JPEG form in their
// "Accelerating JPEG decompression on GPUs", 2021; facts only, the code is our own):
//  1. every lane but the first starts at its chunk's first byte with a guessed state (first
//     block of an MCU, DC symbol next) and decodes to the first symbol boundary at or past the
//     next chunk's start, where it records its state (bit position, block of the MCU,
//     coefficient index);
//  2. rounds: a lane whose predecessor's recorded end differs from the start it used decodes
//     its chunk again from that end; when its own end comes out as before, the lanes after it
//     are unaffected. The first lane starts exactly, so after round r the first r + 1 ends are
//     exact and at most SMJ_LANES - 1 rounds are needed; in practice Huffman codes re-align
//     within a few symbols of a wrong start, and one round or two suffice;
//  3. with every start exact, the blocks each lane begins are summed in lane order, each lane
//     decodes its chunk once more writing its coefficients (DC differences in place of DC
//     values), and a last pass turns the differences into DC predictions (T.81 F.2.2.1) from
//     per-lane sums.
// Positions are counted in bits of the destuffed data (0xFF00 pairs as one 0xFF byte), so all
// lanes number them alike. Outcomes are the serial decoder's: the same symbols are decoded in
// the same states, errors are the serial decoder's errors (any lane's), and the trailing-data
// check is the serial one or stricter (SMJ_TRAILING for any byte other than 0xFF between the
// data's end and the segment's end): a tile it fails goes to libjpeg-turbo either way.

#define SMJ_LANES 32

// A decoder state between two symbols.
struct SmjState {
    long long pos;  // destuffed bits from the segment's start; -1: no valid state
    int u;          // block of the MCU (0 .. blocks per MCU - 1)
    int z;          // next coefficient: 0 the DC symbol, 1..63 an AC symbol
};

// The blocks of one MCU in scan order: component and block offsets within the MCU, and the
// period of their Huffman tables: blocks u and u + period (mod n) always use the same DC and AC
// tables, so two decoders whose block indices differ by a multiple of it parse the same bits
// the same way (every component of an Aperio RGB-coded tile shares one pair of tables: period
// 1; 4:2:0 with luma and chroma tables: period 6).
struct SmjMcuMap {
    int n;
    int period;
    int c[10];
    int by[10];
    int bx[10];
};

// What the lanes of one segment share (shared memory on the GPU).
struct SmjSs {
    int r[SMJ_LANES + 1];         // raw (stuffed) byte where each lane's chunk starts
    long long d[SMJ_LANES + 1];   // destuffed byte where each chunk starts; d[SMJ_LANES]: data bytes
    int lone[SMJ_LANES];          // first 0xFF of the chunk not followed by 0x00 (len: none)
    int pairs[SMJ_LANES];         // 0xFF00 pairs in the chunk before it
    int dend;                     // where the data ends (the first lone 0xFF, or len)
    struct SmjState start[SMJ_LANES];
    struct SmjState end[SMJ_LANES];
    int blocks[SMJ_LANES];        // DC symbols decoded from start to end
    int wblocks[SMJ_LANES];       // blocks begun by the writing pass
    int status[SMJ_LANES];
    int done[SMJ_LANES];          // the writing pass completed the segment's last block
    smj_u16 dcsum[SMJ_LANES][4];  // per component, the lane's DC differences summed (mod 2^16)
};

SMJ_FN void smj_mcu_map(const struct SmjTile* t, struct SmjMcuMap* g) {
    g->n = 0;
    for (int c = 0; c < t->ncomp && c < 4; c++) {
        for (int by = 0; by < t->v[c]; by++) {
            for (int bx = 0; bx < t->h[c]; bx++) {
                if (g->n < 10) {
                    g->c[g->n] = c;
                    g->by[g->n] = by;
                    g->bx[g->n] = bx;
                    g->n += 1;
                }
            }
        }
    }
    g->period = g->n;
    for (int p = 1; p < g->n; p++) {
        if (g->n % p != 0) {
            continue;
        }
        int same = 1;
        for (int u = 0; u < g->n; u++) {
            int w = (u + p) % g->n;
            same &= t->td[g->c[u]] == t->td[g->c[w]] && t->ta[g->c[u]] == t->ta[g->c[w]];
        }
        if (same) {
            g->period = p;
            break;
        }
    }
}

// Coefficients of block `b` (in scan order from the segment's first MCU `mcu0`).
SMJ_FN short* smj_block(const struct SmjTile* t, const struct SmjMcuMap* g, int mcu0, int b) {
    int m = mcu0 + b / g->n;
    int u = b - (b / g->n) * g->n;
    int c = g->c[u];
    int my = m / t->mcux;
    int mx = m - my * t->mcux;
    smj_u64 blk = t->plane[c] + ((smj_u64)(my * t->v[c] + g->by[u]) * (smj_u64)t->bw[c] + (smj_u64)(mx * t->h[c] + g->bx[u])) * 64u;
    return (short*)t->coef + blk;
}

// Whether two decoders in these states parse the rest of the segment alike (block indices
// compared modulo the tables' period).
SMJ_FN int smj_state_eq(struct SmjState a, struct SmjState b, const struct SmjMcuMap* g) {
    return a.pos == b.pos && (a.pos < 0 || (a.u % g->period == b.u % g->period && a.z == b.z));
}

// Phase 1 (each lane): where the lane's chunk of the segment's `len` bytes starts, never between
// the two bytes of a 0xFF00 pair. Lane 0 also sets the end.
SMJ_FN void smj_ss_bounds(const smj_u8* raw, int len, struct SmjSs* sh, int lane) {
    int r = (int)((long long)lane * len / SMJ_LANES);
    if (r > 0 && r < len && raw[r - 1] == 0xFF && raw[r] == 0) {
        r += 1;
    }
    sh->r[lane] = r;
    if (lane == 0) {
        sh->r[SMJ_LANES] = len;
    }
}

// Phase 2 (each lane): the chunk's first lone 0xFF (the data's end, as the serial reader sees a
// marker there) and its 0xFF00 pairs before that.
SMJ_FN void smj_ss_scan(const smj_u8* raw, int len, struct SmjSs* sh, int lane) {
    int lone = len;
    int pairs = 0;
    for (int q = sh->r[lane]; q < sh->r[lane + 1]; q++) {
        if (raw[q] == 0xFF) {
            if (q + 1 < len && raw[q + 1] == 0) {
                pairs += 1;
                q += 1;
            } else {
                lone = q;
                break;
            }
        }
    }
    sh->lone[lane] = lone;
    sh->pairs[lane] = pairs;
}

// Phase 3 (one lane): the data's end, each chunk's destuffed start, and the first starts: exact
// for lane 0, guessed for the others.
SMJ_FN void smj_ss_layout(int len, struct SmjSs* sh) {
    int dend = len;
    for (int i = 0; i < SMJ_LANES; i++) {
        if (sh->lone[i] < dend) {
            dend = sh->lone[i];
            break;
        }
    }
    sh->dend = dend;
    sh->d[0] = 0;
    for (int i = 0; i < SMJ_LANES; i++) {
        int a = sh->r[i] < dend ? sh->r[i] : dend;
        int e = sh->r[i + 1] < dend ? sh->r[i + 1] : dend;
        sh->d[i + 1] = sh->d[i] + (e - a) - (sh->r[i] < dend ? sh->pairs[i] : 0);
    }
    for (int i = 0; i <= SMJ_LANES; i++) {
        if (sh->r[i] > dend) {
            sh->r[i] = dend;
        }
    }
    for (int i = 0; i < SMJ_LANES; i++) {
        sh->start[i].pos = sh->d[i] * 8;
        sh->start[i].u = 0;
        sh->start[i].z = 0;
        sh->end[i].pos = -1;
        sh->end[i].u = 0;
        sh->end[i].z = 0;
        sh->blocks[i] = 0;
        sh->wblocks[i] = 0;
        sh->status[i] = SMJ_OK;
        sh->done[i] = 0;
        for (int c = 0; c < 4; c++) {
            sh->dcsum[i][c] = 0;
        }
    }
}

// Decode lane `lane`'s share from state *st up to the first symbol boundary at or past `stop`
// bits. Without `coef` (a synchronising pass) nothing is written and an error (a bad code, the
// data's end) leaves *st invalid; with it (the writing pass, from an exact start) the
// coefficients of blocks `cur`.. are written (DC differences), and decoding also stops once the
// segment's `total` blocks are complete (*done set, after the trailing-data check). *blocks:
// DC symbols decoded. Returns SMJ_OK or (writing pass) the serial decoder's error.
SMJ_FN int smj_ss_run(const smj_u8* raw, int len, const struct SmjSs* sh, int lane, struct SmjState* st, long long stop, const struct SmjTables* tabs,
                      const struct SmjTile* t, const struct SmjMcuMap* g, int mcu0, int total, int write, int cur, int* blocks,
                      smj_u16* dcsum, int* done) {
    *blocks = 0;
    if (st->pos < 0) {
        return SMJ_OK;
    }
    long long byte = st->pos >> 3;
    long long at = sh->d[lane];
    if (byte < at) {
        st->pos = -1;
        return SMJ_BAD_SEGMENT;
    }
    const smj_u8* p = raw + sh->r[lane];
    const smj_u8* dend = raw + sh->dend;
    while (at < byte && p < dend) {
        p += *p == 0xFF ? 2 : 1;
        at += 1;
    }
    struct SmjBits b;
    b.p = p;
    b.end = dend;
    b.buf = 0;
    b.n = 0;
    b.pad = 0;
    b.fed = 0;
    long long base = at * 8;
    // Into the fill past the data (a start there), then to the bit.
    long long skip = st->pos - base;
    while (skip > 0) {
        int k = skip > 16 ? 16 : (int)skip;
        if (b.n < 16) {
            smj_fill(&b);
        }
        smj_skip(&b, k);
        skip -= k;
    }
    int u = st->u;
    int z = st->z;
    if (write) {
        // The synchronising passes know the block index only modulo the tables' period; the
        // writing pass knows it exactly (`cur`: the block in progress, or the one before the
        // next).
        int next = z == 0 ? cur + 1 : cur;
        if (next < 0) {
            st->pos = -1;
            return SMJ_BAD_SEGMENT;
        }
        u = next - (next / g->n) * g->n;
    }
    int err = SMJ_OK;
    int nb = 0;
    // The block being written (a lane may start inside one its predecessor began).
    short* out = write && cur >= 0 && cur < total ? smj_block(t, g, mcu0, cur) : 0;
    for (;;) {
        long long pos = base + b.fed - b.n;
        if (write && z == 0 && cur + 1 >= total) {
            // The segment's last block is complete: data left over is the serial decoder's
            // SMJ_TRAILING, or (stricter) any byte but fill between the data's end and the
            // segment's end.
            if (sh->d[SMJ_LANES] * 8 - pos >= 8) {
                err = SMJ_TRAILING;
            }
            for (int q = sh->dend; q < len; q++) {
                if (raw[q] != 0xFF) {
                    err = SMJ_TRAILING;
                }
            }
            *done = 1;
            break;
        }
        if (pos >= stop) {
            break;
        }
        int c = g->c[u];
        int ok = 1;
        if (z == 0) {
            int s = smj_symbol(&b, &tabs->dc[t->td[c]]);
            if (s < 0) {
                err = s == -1 ? SMJ_BAD_CODE : SMJ_SHORT_DATA;
                break;
            }
            int diff = smj_receive_extend(&b, s, &ok);
            if (!ok) {
                err = SMJ_SHORT_DATA;
                break;
            }
            nb += 1;
            cur += 1;
            if (write) {
                if (cur < 0 || cur >= total || cur - (cur / g->n) * g->n != u) {
                    err = SMJ_BAD_SEGMENT;
                    break;
                }
                out = smj_block(t, g, mcu0, cur);
                out[0] = (short)diff;
                dcsum[c] = (smj_u16)(dcsum[c] + (smj_u16)diff);
            }
            z = 1;
        } else {
            int rs = smj_symbol(&b, &tabs->ac[t->ta[c]]);
            if (rs < 0) {
                err = rs == -1 ? SMJ_BAD_CODE : SMJ_SHORT_DATA;
                break;
            }
            int r = rs >> 4;
            int sz = rs & 15;
            if (sz != 0) {
                z += r;
                int v = smj_receive_extend(&b, sz, &ok);
                if (!ok) {
                    err = SMJ_SHORT_DATA;
                    break;
                }
                if (write) {
                    if (out == 0) {
                        err = SMJ_BAD_SEGMENT;
                        break;
                    }
                    out[smj_natural[z]] = (short)v;
                }
                z += 1;
            } else if (r == 15) {
                z += 16;
            } else {
                z = 64;
            }
        }
        if (z >= 64) {
            z = 0;
            u = u + 1 == g->n ? 0 : u + 1;
        }
    }
    *blocks = nb;
    if (err != SMJ_OK) {
        st->pos = -1;
        return write ? err : SMJ_OK;
    }
    st->pos = base + b.fed - b.n;
    st->u = u;
    st->z = z;
    return SMJ_OK;
}

// Phase 4 (each lane but the last; rounds too): decode from the lane's start, to its end.
SMJ_FN void smj_ss_sync(const smj_u8* raw, int len, struct SmjSs* sh, int lane, const struct SmjTables* tabs, const struct SmjTile* t,
                        const struct SmjMcuMap* g, int mcu0, int total) {
    struct SmjState s = sh->start[lane];
    int nb = 0;
    int done = 0;
    smj_ss_run(raw, len, sh, lane, &s, sh->d[lane + 1] * 8, tabs, t, g, mcu0, total, 0, 0, &nb, 0, &done);
    sh->end[lane] = s;
    sh->blocks[lane] = nb;
}

// Phase 5 (each lane): zero the lane's share of the segment's blocks (the writing pass writes
// only the coefficients it decodes).
SMJ_FN void smj_ss_zero(const struct SmjTile* t, const struct SmjMcuMap* g, int mcu0, int total, int lane) {
    for (int b = lane; b < total; b += SMJ_LANES) {
        smj_u64* q = (smj_u64*)smj_block(t, g, mcu0, b);
        for (int k = 0; k < 16; k++) {
            q[k] = 0;
        }
    }
}

// Blocks begun by the lanes before `lane`.
SMJ_FN int smj_ss_first_block(const struct SmjSs* sh, int lane) {
    int b = 0;
    for (int i = 0; i < lane; i++) {
        b += sh->blocks[i];
    }
    return b;
}

// Phase 6 (each lane): the writing pass from the lane's exact start.
SMJ_FN void smj_ss_write(const smj_u8* raw, int len, struct SmjSs* sh, int lane, const struct SmjTables* tabs, const struct SmjTile* t,
                         const struct SmjMcuMap* g, int mcu0, int total) {
    struct SmjState s = sh->start[lane];
    long long stop = lane == SMJ_LANES - 1 ? 0x7FFFFFFFFFFFFFFFLL : sh->d[lane + 1] * 8;
    int nb = 0;
    int done = 0;
    sh->status[lane] = smj_ss_run(raw, len, sh, lane, &s, stop, tabs, t, g, mcu0, total, 1, smj_ss_first_block(sh, lane) - 1, &nb, sh->dcsum[lane], &done);
    sh->wblocks[lane] = nb;
    sh->done[lane] = done;
}

// Phase 7 (each lane): DC differences to DC values for the blocks the lane began.
SMJ_FN void smj_ss_dc(struct SmjSs* sh, int lane, const struct SmjTile* t, const struct SmjMcuMap* g, int mcu0, int total) {
    smj_u16 run[4] = {0, 0, 0, 0};
    for (int i = 0; i < lane; i++) {
        for (int c = 0; c < 4; c++) {
            run[c] = (smj_u16)(run[c] + sh->dcsum[i][c]);
        }
    }
    int b0 = smj_ss_first_block(sh, lane);
    for (int b = b0; b < b0 + sh->wblocks[lane] && b < total; b++) {
        int c = g->c[b - (b / g->n) * g->n];
        short* q = smj_block(t, g, mcu0, b);
        run[c] = (smj_u16)(run[c] + (smj_u16)q[0]);
        q[0] = (short)run[c];
    }
}

// The segment's outcome once the writing pass ran: the first lane's error, else SMJ_OK when a
// lane completed the last block (else the data ended early).
SMJ_FN int smj_ss_status(const struct SmjSs* sh) {
    int done = 0;
    for (int i = 0; i < SMJ_LANES; i++) {
        if (sh->status[i] != SMJ_OK) {
            return sh->status[i];
        }
        done |= sh->done[i];
    }
    return done ? SMJ_OK : SMJ_SHORT_DATA;
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

#endif
