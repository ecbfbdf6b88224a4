// The SM JPEG decoder's warp decoder: one entropy-coded segment decoded by the SMJ_LANES
// threads of one warp (self-synchronising decoding), for the segments one thread would take
// milliseconds over. Needs jpeg_sm.h first (its bit reader, tables and descriptors); like it,
// compiled by NVRTC into the kernels (core/src/gpu/cuda/decode/sm.rs, after jpeg_sm.h) and by
// the host C compiler for the tests (jpeg_sm_host.c).

#ifndef SLIDESTREAM_JPEG_SM_WARP_H
#define SLIDESTREAM_JPEG_SM_WARP_H

// ---- One segment decoded by SMJ_LANES threads (one warp): self-synchronising decoding ----
//
// The serial decoder above takes one thread through a whole segment: a 240x240 tile's scan is
// ~13k symbols, several milliseconds of one GPU thread. Here the segment's bytes are cut into
// SMJ_LANES chunks and each lane decodes one (the method of Weissenberger and Schmidt,
// "Massively parallel Huffman decoding on GPUs", ICPP 2018, and its JPEG form in their
// "Accelerating JPEG decompression on GPUs", 2021; facts only, the code is our own):
//  1. every lane but the first finds a start: it decodes from a guessed state (first block of
//     an MCU, DC symbol next) a few dozen bytes before its chunk (a warm-up, in its
//     predecessor's chunk) to the first symbol boundary at or past its chunk's start; from
//     there it decodes to the first symbol boundary at or past the next chunk's start, where it
//     records its state (bit position, block of the MCU, coefficient index);
//  2. rounds: a lane whose predecessor's recorded end differs from the start it used decodes
//     its chunk again from that end; when its own end comes out as before, the lanes after it
//     are unaffected. The first lane starts exactly, so after round r the first r + 1 ends are
//     exact and at most SMJ_LANES - 1 rounds are needed; Huffman codes re-align within a few
//     symbols of a wrong start, so after the warm-ups most tiles need no round at all. Runs of
//     identical blocks (the padding below an image's last row) are the exception: a wrong
//     parse can stay in step with the true one across them, and the true state crosses such a
//     run one lane a round; where a chunk's bytes repeat, a lane skips whole periods instead of
//     decoding them (jpeg_sm_warp_sync.h), so those rounds are short;
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
// Longest byte period the periodic shortcut looks for (smj_ss_scan).
#define SMJ_MAX_PERIOD 64

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
    int per[SMJ_LANES];           // the chunk's bytes repeat with this period (0: they do not)
    int work[SMJ_LANES];          // symbols the lane decoded, every pass (cost accounting)
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
// marker there) and its 0xFF00 pairs before that; with `periodic`, the smallest period (1 ..
// SMJ_MAX_PERIOD bytes) with which the chunk's bytes and the next two repeat, where the chunk
// holds no 0xFF and at least three periods (the padding below an image's last row, or any run
// of identical blocks, repeats one block's bits).
SMJ_FN void smj_ss_scan(const smj_u8* raw, int len, struct SmjSs* sh, int lane, int periodic) {
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
    sh->work[lane] = 0;
    int a = sh->r[lane];
    int e = sh->r[lane + 1] + 2 < len ? sh->r[lane + 1] + 2 : len;
    int per = 0;
    if (periodic && pairs == 0 && lone == len) {
        for (int q = sh->r[lane + 1]; q < e; q++) {
            if (raw[q] == 0xFF) {
                e = a;  // a 0xFF just past the chunk: no shortcut
            }
        }
        for (int p = 1; p <= SMJ_MAX_PERIOD && per == 0 && 3 * p <= e - a; p++) {
            int q = a + p;
            while (q < e && raw[q] == raw[q - p]) {
                q += 1;
            }
            if (q == e) {
                per = p;
            }
        }
    }
    sh->per[lane] = per;
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
        if (i < SMJ_LANES && sh->r[i + 1] + 2 > dend) {
            sh->per[i] = 0;  // the bytes the period was found over run past the data's end
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
// DC symbols decoded; *syms gets the symbols decoded added. Returns SMJ_OK or (writing pass)
// the serial decoder's error.
// `from_r` and `from_d`: a raw byte at or before the start and its destuffed position (the
// lane's chunk start, or a warm-up start before it), where the walk to the start begins.
SMJ_FN int smj_ss_run(const smj_u8* raw, int len, const struct SmjSs* sh, int from_r, long long from_d, struct SmjState* st, long long stop,
                      const struct SmjTables* tabs, const struct SmjTile* t, const struct SmjMcuMap* g, int mcu0, int total, int write, int cur,
                      int* blocks, smj_u16* dcsum, int* done, int* syms) {
    *blocks = 0;
    if (st->pos < 0) {
        return SMJ_OK;
    }
    long long byte = st->pos >> 3;
    long long at = from_d;
    if (byte < at) {
        st->pos = -1;
        return SMJ_BAD_SEGMENT;
    }
    const smj_u8* p = raw + from_r;
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
        *syms += 1;
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
    sh->status[lane] = smj_ss_run(raw, len, sh, sh->r[lane], sh->d[lane], &s, stop, tabs, t, g, mcu0, total, 1, smj_ss_first_block(sh, lane) - 1, &nb,
                                  sh->dcsum[lane], &done, &sh->work[lane]);
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

#endif
